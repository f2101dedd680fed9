"""Whether a pid lives, and when it started: the one check of wf.

Read from ``/proc/<pid>/stat`` (the figures psutil gives, without its import on every
claim, lock message and merge: these run in short commands, where start-up counts).
Where /proc cannot tell (not Linux, or a /proc that hides other users' processes), a pid
lives when signal 0 reaches it, and its start time is unknown.

A zombie is not alive: it has exited (its locks are released, its work is over) and
only waits for its parent to collect it.
"""

from __future__ import annotations

import os

_STAT = "/proc/stat"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class NoProc(OSError):
    """/proc cannot answer here: there is none, or it may not be read."""


def stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of ``pid``, None if it is
    gone; NoProc where /proc cannot tell (there is none, or it may not be read). With the
    pid, the start time names one process for as long as the machine runs, even after
    the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[19])  # field 22 of proc(5); after ")" comes field 3
    except (FileNotFoundError, ProcessLookupError):
        if os.path.isdir("/proc/self"):
            return None
        raise NoProc("no /proc") from None
    except (OSError, IndexError, ValueError, UnicodeDecodeError) as e:
        raise NoProc(f"/proc/{pid}/stat cannot be read: {e}") from None


def _boot_time() -> float:
    """The boot time in epoch seconds, read anew each time as psutil does: the kernel
    moves ``btime`` when the wall clock is stepped (NTP at start-up, a VM resumed), and a
    long-lived wf (a batch, a pilot) holding an old figure would record start times that no
    other process matches within the second ``alive_as`` allows."""
    with open(_STAT, "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise OSError(f"no btime in {_STAT}")


def _signal_reaches(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def alive(pid: int | None) -> bool:
    """Whether ``pid`` names a live process (a zombie has exited)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        st = stat(pid)
    except NoProc:
        return _signal_reaches(pid)
    return st is not None and st[0] not in ("Z", "X")


def start_ticks(pid: int | None) -> int | None:
    """When ``pid`` started, in clock ticks since boot (a figure no clock step moves), or
    None if it is gone or cannot be known."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        st = stat(pid)
    except NoProc:
        return None
    return None if st is None else st[1]


def _epoch(ticks: int) -> float | None:
    try:
        return _boot_time() + ticks / _TICK  # as psutil computes it
    except (OSError, ValueError, IndexError):
        return None


def started(pid: int | None) -> float | None:
    """When the process ``pid`` started (seconds since the epoch), None if it is gone or
    cannot be known (no /proc)."""
    ticks = start_ticks(pid)
    return None if ticks is None else _epoch(ticks)


def alive_as(pid: int | None, since: float | None) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``since`` (within
    a second), not a later one given its number, as after a reboot. ``since`` None: alive
    at all. Where /proc cannot tell a start time, alive at all: nothing live is taken for
    dead."""
    if not alive(pid) or pid is None:
        return False
    if since is None:
        return True
    try:
        st = stat(pid)
    except NoProc:
        return True
    now = None if st is None else _epoch(st[1])
    return now is not None and abs(now - since) < 1.0
