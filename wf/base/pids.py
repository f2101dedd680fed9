"""Whether a process lives, and whether it is still the one that started at a given time.

Read from ``/proc`` where there is one (the same figures psutil gives, without its import
on every claim and merge; psutil answers only where there is no ``/proc``). The ground of
every liveness check in wf: a record's worker or owner (``alive_as``), a pick's picker.
"""

from __future__ import annotations

import os


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) from /proc, None if gone;
    raises OSError where there is no /proc at all."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        if not os.path.isdir("/proc/self"):
            raise
        return None
    return fields[0].decode(), int(fields[19])


_STAT = "/proc/stat"


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


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        st = _proc_stat(pid)
    except (OSError, ValueError, IndexError):
        return _psutil_alive(pid)
    return st is not None and st[0] not in ("Z", "X")


def _psutil_alive(pid: int) -> bool:
    import psutil

    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def started(pid: int | None) -> float | None:
    """When the process ``pid`` started (seconds since the epoch), None if it is gone."""
    if not pid or pid <= 0:
        return None
    try:
        st = _proc_stat(pid)
        return None if st is None else _boot_time() + st[1] / TICK  # as psutil computes it
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def alive_as(pid: int | None, since: float | None) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``since`` (not
    a later one given its number, as after a reboot). ``since`` None: alive at all."""
    if not alive(pid):
        return False
    if since is None:
        return True
    now = started(pid)
    return now is not None and abs(now - since) < 1.0
