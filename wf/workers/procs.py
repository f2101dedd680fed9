"""Processes: the only user of psutil.

Whether a pid lives and when it started is ``wf.base.pids`` (read from ``/proc``, for
short commands); psutil answers the rest (scans of every process, command lines, the
machine's memory, the trees that a long-lived supervisor watches) and is imported only
by what needs it.

Who is using a folder (a live process whose cwd is inside it, a Claude Code session
whose recorded cwd points into it), whether a pid lives, and process trees; ``Waker``:
the supervisor's sleep that a child's end (SIGCHLD) cuts short.
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from wf.base import records
from wf.base.homes import claude_roots
from wf.base.pids import alive as alive  # wf's one pid check, for the floors above
from wf.base.pids import alive_as as alive_as
from wf.base.pids import started as started


class User(NamedTuple):
    """Someone using a folder: a process or an agent session."""

    kind: str  # "process" or "claude-session"
    pid: int
    what: str

    def __str__(self) -> str:
        return f"{self.kind} pid {self.pid} ({self.what})"


def describe(pid: int) -> str:
    import psutil

    try:
        p = psutil.Process(pid)
        cmd = " ".join(p.cmdline()) or p.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    return cmd if len(cmd) <= 60 else cmd[:57] + "..."


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def processes_in(folder: Path) -> list[User]:
    """Live processes (other than this one) whose cwd is inside ``folder``."""
    import psutil

    target = str(folder.resolve())
    me = os.getpid()
    users = []
    for p in psutil.process_iter(["pid", "cwd", "name"]):
        try:
            cwd = p.info.get("cwd")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if not cwd or p.info["pid"] == me or not _inside(cwd, target):
            continue
        if p.info["pid"] in _ancestors():
            continue  # the shell or tool that started this wf is not a user of the tree
        users.append(User("process", p.info["pid"], p.info.get("name") or "?"))
    return users


_ANCESTORS: set[int] | None = None


def _ancestors() -> set[int]:
    import psutil

    global _ANCESTORS
    if _ANCESTORS is None:
        try:
            _ANCESTORS = {p.pid for p in psutil.Process().parents()}
        except psutil.Error:
            _ANCESTORS = set()
    return _ANCESTORS


def ancestors_inside(folder: Path) -> bool:
    """Whether a process that started this one (a shell, an agent) has its cwd inside."""
    import psutil

    target = str(folder.resolve())
    for pid in _ancestors():
        try:
            cwd = psutil.Process(pid).cwd()
        except psutil.Error:
            continue
        if _inside(cwd, target):
            return True
    return False


def claude_sessions_in(folder: Path) -> list[User]:
    """Claude Code sessions (``<root>/sessions/<pid>.json``) whose ``cwd`` is inside
    ``folder`` and whose ``pid`` lives."""
    target = str(folder.resolve())
    users = []
    for root in claude_roots():
        sessions = root / "sessions"
        if not sessions.is_dir():
            continue
        for f in sessions.glob("*.json"):
            try:
                info = json.loads(f.read_text("utf-8"))
                cwd = str(info.get("cwd") or "")
                pid = int(info.get("pid") or 0)
            except (OSError, ValueError, TypeError, AttributeError):
                continue
            if cwd and _inside(os.path.realpath(cwd), target) and alive(pid):
                users.append(User("claude-session", pid, str(info.get("sessionId") or f.stem)))
    return users


def users_of(folder: Path) -> list[User]:
    return processes_in(folder) + claude_sessions_in(folder)


def git_processes(inside: Path) -> list[int]:
    """Pids of running git processes whose cwd is inside ``inside`` (the repository and
    its trees): a lock file there is stale only if none runs."""
    import psutil

    target = str(inside.resolve())
    pids = []
    for p in psutil.process_iter(["pid", "name", "cwd"]):
        try:
            name, cwd = p.info.get("name") or "", p.info.get("cwd") or ""
        except psutil.Error:
            continue
        if name.startswith("git") and cwd and _inside(cwd, target):
            pids.append(p.info["pid"])
    return pids


# ------------------------------------------------------------------ process trees


TOKEN_VAR = "WF_UNIT_TOKEN"
DIR_VAR = "WF_UNIT_DIR"  # a unit's run folder, in its worker's environment
SIGNALLED = "signalled"  # in a unit's folder: wf signalled its tree (the file's time says when)


_SUBREAPER = False


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux): orphaned descendants of the workers it
    starts (``setsid ... &``) are reparented to it instead of init, so they can still be
    found and ended. Returns False where the call is not available."""
    global _SUBREAPER
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _SUBREAPER = _SUBREAPER or int(libc.prctl(36, 1, 0, 0, 0)) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False
    return _SUBREAPER


def children(pid: int) -> list[int]:
    """The direct children of ``pid``, read from /proc by hand on purpose: psutil's
    ``children()`` scans every process for its parent, and kill_tree lists a tree again
    every 50 ms while it waits; the kernel's own list of one process's children is
    cheap."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        raw = _read_proc(f"/proc/{pid}/task/{task}/children")
        try:
            out.extend(int(x) for x in raw.split())
        except ValueError:
            continue
    return out


def _read_proc(path: str) -> bytes:
    """A small /proc file's bytes (b"" when it cannot be read), by os.open and os.read:
    Python's open() adds a buffer and four system calls (fstat, ioctl, two lseek) to each
    of the reads a unit's end makes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants."""
    if not alive(pid):
        return []
    seen = [pid]
    i = 0
    while i < len(seen):
        for c in children(seen[i]):
            if c not in seen:
                seen.append(c)
        i += 1
    return seen


def with_token(token: str, var: str = TOKEN_VAR) -> list[int]:
    """Live processes whose environment carries ``WF_UNIT_TOKEN=token`` (a unit's
    descendants, even those that detached; ``var`` names another variable). As a
    subreaper this process keeps every descendant in its own tree, so only that tree is
    searched; otherwise every process."""
    return with_tokens([token], var)[token]


def with_tokens(tokens: list[str], var: str = TOKEN_VAR) -> dict[str, list[int]]:
    """``with_token`` for several tokens in one look at the processes (each environment
    read once): when several units end in one pass of the supervisor."""
    needles = {f"{var}={token}".encode(): token for token in tokens}
    found: dict[str, list[int]] = {token: [] for token in tokens}
    me = os.getpid()
    if _SUBREAPER:
        pids = tree(me)[1:]
    else:
        import psutil

        pids = [p.pid for p in psutil.process_iter()]
    for pid in pids:
        if pid == me:
            continue
        # /proc/<pid>/environ read by hand on purpose: the raw bytes of every process in
        # the tree, matched without decoding them (psutil's environ() decodes each to a dict)
        env = _read_proc(f"/proc/{pid}/environ")
        if not env:
            continue
        for token in {needles[e] for e in env.split(b"\0") if e in needles}:
            found[token].append(pid)
    return found


def _environ(pid: int) -> dict[bytes, bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    return dict(x.partition(b"=")[::2] for x in raw.split(b"\0") if x)


def mark_signalled(folder: Path) -> None:
    """Note in a unit's folder, before any signal goes out, that wf itself is ending its
    tree: whatever the worker says after this moment is an answer to the signal (a child
    that printed "wf: interrupted"), never its answer to the task. The first mark stays."""
    try:
        os.close(os.open(folder / SIGNALLED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        pass
    except OSError:
        pass  # the folder is gone: nobody will read a report from it


def _mark_units(pids: list[int], marked: set[int]) -> None:
    """Mark the folder of every unit one of ``pids`` belongs to (its environment names the
    folder and the unit's token; the folder's status.json must carry that same token, so
    a worker cannot have another unit's folder marked)."""
    for pid in pids:
        if pid in marked:
            continue
        marked.add(pid)
        env = _environ(pid)
        folder, token = env.get(DIR_VAR.encode()), env.get(TOKEN_VAR.encode())
        if not folder or not token:
            continue
        path = Path(os.fsdecode(folder))
        try:
            status = records.load_json(path / "status.json")
        except records.CorruptRecord:
            continue
        if isinstance(status, dict) and status.get("token") == token.decode(errors="replace"):
            mark_signalled(path)


def _living(pids: list[int]) -> list[int]:
    return [pid for pid in pids if alive(pid)]


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(
    root: int | None,
    token: str | None,
    grace: float = 2.0,
    *,
    var: str = TOKEN_VAR,
    signals: tuple[int, ...] | None = None,
    mark: bool = True,
) -> list[int]:
    """End a unit's whole tree: SIGINT, then SIGTERM, then SIGKILL (or ``signals``),
    with ``grace`` seconds between, listing the tree again before every step (a dying
    process may start others). Returns the pids that were signalled. ``mark`` False: the
    caller knows the unit's answer is in already (its result event came, its worker
    exited), so its folder is not marked signalled."""
    import signal
    import time

    def snapshot() -> list[int]:
        pids = set(tree(root)) if root else set()  # the root and all its descendants
        if token:
            for pid in with_token(token, var):
                pids.update(tree(pid))
        pids.discard(os.getpid())
        return _living(sorted(pids))

    signalled: set[int] = set()
    marked: set[int] = set()
    for sig in signals or (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        pids = snapshot()
        if not pids:
            break
        if mark:
            _mark_units(pids, marked)  # before the signal: a report after it is no answer
        signalled.update(pids)
        _signal_all(pids, sig)
        deadline = time.monotonic() + (grace if sig != signal.SIGKILL else 5.0)
        while time.monotonic() < deadline and _living(pids):
            reap_orphans()
            time.sleep(0.05)
    if signalled:  # nothing signalled, nothing of it to collect (the loops reap the rest)
        reap_orphans()
    return sorted(signalled)


_OWN_CHILDREN: set[int] = set()
_KEEP: set[int] = set()


def keep(pid: int) -> None:
    """A child meant to outlive what started it (a gate run): kill_descendants spares it."""
    _KEEP.add(pid)


def kill_descendants(grace: float = 1.0) -> list[int]:
    """End every process this one started (or adopted as subreaper) that is still there,
    but those marked with keep(); for the end of a run."""
    spared: set[int] = set()
    for pid in _KEEP:
        spared.update(tree(pid))
    doomed = [p for p in tree(os.getpid())[1:] if p not in spared]
    killed: list[int] = []
    for pid in doomed:
        killed += kill_tree(pid, None, grace=grace)
    return killed


def own_child(pid: int) -> None:
    """Note a child this process waits for itself (subprocess.Popen): reap_orphans leaves it."""
    _OWN_CHILDREN.add(pid)


def adopted() -> list[int]:
    """Live processes this one adopted as subreaper (a worker's descendant that detached:
    its parent exited and the kernel gave it to us), but not the children it started
    itself nor those marked with keep()."""
    spared: set[int] = set(_OWN_CHILDREN)
    for pid in _KEEP:
        spared.update(tree(pid))
    return [pid for pid in children(os.getpid()) if pid not in spared and alive(pid)]


def end_strays(strays: list[list[float]]) -> list[int]:
    """End recorded strays ([pid, start time] pairs) and their trees, each only while its
    pid still names the process that started then; returns the pids signalled."""
    ended: list[int] = []
    for pid, since in strays:
        if alive_as(int(pid), since):
            ended += kill_tree(int(pid), None, grace=1.0)
    return ended


def reap_orphans() -> None:
    """Collect exit statuses of reparented orphans (we are their subreaper), never of
    the children that subprocess waits for itself."""
    for pid in children(os.getpid()):
        if pid in _OWN_CHILDREN:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)  # reaps it if it has exited; returns at once if not
        except (ChildProcessError, OSError):
            pass


# ------------------------------------------------------------------ measuring trees


def tree_usage(pids: list[int]) -> tuple[int, float]:
    """Summed resident memory (bytes) and CPU seconds (user + system) of ``pids``; gone
    pids count 0. By psutil: res's watchdog samples its tree every second for as long as
    a job runs, so psutil's import is paid once in a long life (the same figures as
    /proc/<pid>/statm and stat)."""
    import psutil

    rss = 0
    cpu = 0.0
    for pid in pids:
        try:
            p = psutil.Process(pid)
            with p.oneshot():
                mem, times = p.memory_info(), p.cpu_times()
        except psutil.Error:
            continue
        rss += int(mem.rss)
        cpu += float(times.user + times.system)
    return rss, cpu


def total_memory() -> int:
    """The machine's memory in bytes."""
    import psutil

    return int(psutil.virtual_memory().total)


# ------------------------------------------------------------------ waiting for a child


class Waker:
    """Sleeps until the poll interval passes or a signal arrives (SIGCHLD: a worker
    ended; SIGINT/SIGTERM), through Python's wakeup fd. Main thread only; elsewhere it
    just sleeps."""

    def __init__(self) -> None:
        self.rfd = self.wfd = -1
        self.old_fd: int | None = None
        self.old_chld: Any = None
        if threading.current_thread() is not threading.main_thread():
            return
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        self.old_chld = signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self.old_fd = signal.set_wakeup_fd(self.wfd, warn_on_full_buffer=False)

    def wait(self, seconds: float) -> None:
        if self.rfd < 0:
            time.sleep(seconds)
            return
        ready, _, _ = select.select([self.rfd], [], [], seconds)
        if ready:
            try:
                while os.read(self.rfd, 512):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        if self.rfd < 0:
            return
        signal.set_wakeup_fd(self.old_fd if self.old_fd is not None else -1)
        signal.signal(signal.SIGCHLD, self.old_chld)
        os.close(self.rfd)
        os.close(self.wfd)
        self.rfd = self.wfd = -1
