"""The project lock (``.wf/lock`` in the main checkout).

It is an ``flock`` on the file, so the kernel releases it when its holder dies, however
it dies: a dead holder never blocks anyone, and the next waiter takes over at once. wf
takes it with ``fcntl`` itself: the filelock package did the same, but importing it cost
50 ms and more on every claim, more than the claim.
Beside it, ``.wf/lock.owner`` says who holds it (pid, command, since when), so that a
waiter can say once whom it waits for. Waiting is bounded; the error names the holder.
Within one process the lock is re-entrant.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from wf.base import pids
from wf.base.errors import LockTimeout

_held: dict[str, int] = {}


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
    if _held.get(path):
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return

    wf_dir.mkdir(parents=True, exist_ok=True)
    owner = wf_dir / f"{name}.owner"
    start = time.monotonic()
    fd = _try_lock(path)
    if fd is None:
        if on_wait is not None:
            what = "the project lock" if name == "lock" else f"the {name} lock"
            on_wait(f"waiting for {what}, held by {describe_holder(owner)}")
        while fd is None:
            if time.monotonic() - start >= timeout:
                raise LockTimeout(path, round(time.monotonic() - start, 1), describe_holder(owner))
            time.sleep(0.02)
            fd = _try_lock(path)
    try:
        _write_owner(owner)
        _held[path] = 1
        yield
    finally:
        _held.pop(path, None)
        os.close(fd)  # closing the descriptor releases the flock


def _try_lock(path: str) -> int | None:
    """An exclusive flock on ``path`` without waiting: the open descriptor that holds it,
    or None if another holds it. A lock file replaced while we locked it (removed by
    hand, say) is not taken: the lock must be on the file the next waiter opens."""
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        # its folder was removed while we waited: made again, as filelock did on every try
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    try:
        same = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        same = False
    if not same:
        os.close(fd)
        return None
    return fd


def _write_owner(owner: Path) -> None:
    info = {
        "pid": os.getpid(),
        "cmd": _command_line(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = owner.with_name(f".{owner.name}.{os.getpid()}")
    tmp.write_text(json.dumps(info), "utf-8")
    os.replace(tmp, owner)
