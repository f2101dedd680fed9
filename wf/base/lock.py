"""The project lock (``.wf/lock`` in the main checkout), and wf's other locks in ``.wf/``.

It is a ``filelock.FileLock``: an ``flock`` on the file, so the kernel releases it when
its holder dies, however it dies: a dead holder never blocks anyone, and the next waiter
takes over at once. This module is the only one that imports filelock, and only inside
``project_lock``: a command that takes no lock (``wf list``, ``wf show``) never pays its
import.

Beside it, ``.wf/lock.owner`` says who holds it (pid, command, since when), so that a
waiter can say once whom it waits for. Waiting is bounded; the error names the holder.
Within one thread the lock is re-entrant; another thread of the same process waits for it
like another process does (``thread_local=True``: the batch's cloud sidecar is a thread).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from wf.base import pids, stamps
from wf.base.errors import LockTimeout
from wf.base.fsutil import atomic_write

if TYPE_CHECKING:
    from filelock import BaseFileLock

POLL = 0.02  # seconds between tries while the lock is busy

# One FileLock per (process, lock file): its per-thread hold count is what makes the lock
# re-entrant in a thread. Keyed by pid too: filelock refuses an instance made before a fork.
_locks: dict[tuple[int, str], BaseFileLock] = {}
_locks_guard = threading.Lock()


class _Replaced(Exception):
    """The file the lock was taken on is no longer the one at the path."""


def describe_holder(owner_file: Path) -> str:
    try:
        info = json.loads(owner_file.read_text("utf-8"))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (no owner recorded)"
    cmd = str(info.get("cmd", "?"))
    since = str(info.get("since", "?"))
    if not pids.alive(pid):
        # the holder took the lock but has not written its name yet
        return f"another process (the last recorded holder, pid {pid}, has exited)"
    return f"pid {pid} ({cmd}) since {since}"


def _command_line() -> str:
    args = [os.path.basename(sys.argv[0]) or "python", *sys.argv[1:]]
    line = " ".join(args)
    return line if len(line) <= 80 else line[:77] + "..."


@contextmanager
def project_lock(
    wf_dir: Path,
    timeout: float = 10.0,
    on_wait: Callable[[str], None] | None = None,
    name: str = "lock",
) -> Iterator[None]:
    """Hold the project lock (or, with ``name``, another wf lock in ``.wf/``) for the
    ``with`` block.

    ``on_wait`` is called once, with a line naming the holder, if the lock is busy.
    Raises LockTimeout after ``timeout`` seconds.
    """
    path = str(wf_dir / name)
    lock = _lock_for(path, wf_dir / f"{name}.owner")
    if lock.is_locked:  # this thread holds it already: one more level
        lock.acquire(timeout=0)
    else:
        wf_dir.mkdir(parents=True, exist_ok=True)
        _acquire(lock, wf_dir, name, timeout, on_wait)
    try:
        yield
    finally:
        lock.release()


def _lock_for(path: str, owner: Path) -> BaseFileLock:
    import filelock  # here, not at the top: its import costs ~11 ms, and most commands take no lock

    key = (os.getpid(), path)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:

            def acquired(fd: int) -> None:
                _check_same_file(fd, path)
                _write_owner(owner)

            lock = _locks[key] = filelock.FileLock(path, thread_local=True, on_acquired=acquired)
        return lock


def _acquire(
    lock: BaseFileLock, wf_dir: Path, name: str, timeout: float, on_wait: Callable[[str], None] | None
) -> None:
    """Take the lock within ``timeout`` seconds, telling ``on_wait`` once whom it waits for."""
    import filelock

    owner = wf_dir / f"{name}.owner"
    start = time.monotonic()
    told = False
    while True:
        left = max(0.0, timeout - (time.monotonic() - start))
        try:
            lock.acquire(timeout=left if told else 0, poll_interval=POLL)
            return
        except filelock.Timeout:
            if not told and on_wait is not None:
                what = "the project lock" if name == "lock" else f"the {name} lock"
                on_wait(f"waiting for {what}, held by {describe_holder(owner)}")
            told = True
        except _Replaced:
            pass  # filelock let the stale file go: the next try opens the one at the path
        except FileNotFoundError:
            # its folder was removed while we waited: made again, and the next try locks the new file
            wf_dir.mkdir(parents=True, exist_ok=True)
        if time.monotonic() - start >= timeout:
            raise LockTimeout(str(wf_dir / name), round(time.monotonic() - start, 1), describe_holder(owner))


def _check_same_file(fd: int, path: str) -> None:
    """The flock must be on the file at the path, the one the next waiter opens. filelock
    lets go of a file already removed (no links left); this also catches one renamed away
    or replaced between the open and the flock (by hand, or by an editor's save)."""
    held = os.fstat(fd)
    try:
        now = os.stat(path)
    except FileNotFoundError:
        raise _Replaced(path) from None
    if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
        raise _Replaced(path)


def _write_owner(owner: Path) -> None:
    info = {
        "pid": os.getpid(),
        "cmd": _command_line(),
        "since": stamps.now_iso(),
    }
    # advisory (a waiter's message): a rename keeps it whole, no fsync needed
    atomic_write(owner, json.dumps(info).encode("utf-8"), durable=False, make_dirs=False)
