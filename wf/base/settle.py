"""Reading and replacing a file that a person's editor may be saving at the same time.

Many editors save in place: they truncate the file, then write it. A read in between
sees an empty or half-written file; a rename over the file in between sends the
editor's write into the replaced (unlinked) file. So before wf writes TASKS.md or the
archive it reads them *settled*: nobody holds the file open for writing (a read lease
probe, or a scan of ``/proc/*/fd`` where leases are not allowed), its size and mtime did
not move during the read, it did not change in the last moments (unless wf itself wrote
it), and it did not lose tasks since wf last wrote it (an empty file that held tasks is
never taken as the truth). wf waits for that within the lock timeout, else refuses. The
last two rules wait for a person's *finished* saves, which may keep coming (an editor
saving every 50 ms): wf defers to them for at most ``DEFER``, then takes the file if
every read meanwhile showed the same number of tasks. Readers (``read_backlog``)
read the same way.

The replace is a compare-and-swap against the settled bytes, and it is checked after the
rename too: if a program that had the old file open wrote into it around the rename,
its bytes are put back and the caller starts over from them.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import functools
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from wf.base.errors import WfError
from wf.base.fsutil import fsync_dir, write_temp

if TYPE_CHECKING:
    from wf.base.project import Project

QUIET = 0.02  # a file whose mtime is younger than this (and not wf's own write) is still moving
LOST_QUIET = 1.0  # a file that lost tasks must have been still this long (a person's deletion)
DEFER = 1.0  # or wf watched saves keep it so (the same number of tasks) this long
POLL = 0.01
FUTURE = 1.0  # an mtime further ahead than this is a skewed clock, not a save in progress


class Unsettled(WfError):
    """The file is being written by someone else and did not settle in time."""

    def __init__(self, name: str, why: str, waited: float) -> None:
        self.name = name
        self.why = why
        super().__init__(
            f"{name} is being saved by another program ({why}) and did not settle within "
            f"{waited:g}s; wf wrote nothing. Try again once the save is done"
        )


class Stamp(NamedTuple):
    """What a file looked like when wf last wrote (or settled-read) it."""

    ino: int
    size: int
    mtime_ns: int
    units: int  # its task headings (TASKS.md) or archive lines


def units(data: bytes, marker: bytes) -> int:
    """Lines starting with ``marker`` (TASKS.md's '## ' headings, the archive's '- '
    lines): a cheap count to tell a file that lost tasks since wf last saw it."""
    return data.count(b"\n" + marker) + data.startswith(marker)


# ------------------------------------------------------------------ who is writing


@functools.cache
def _leases_usable() -> bool:
    """Leases notify their holder with SIGIO, whose default action ends the process: wf
    uses leases only where it can ignore SIGIO (the main thread of a process that does
    not use SIGIO itself)."""
    try:
        import signal

        if signal.getsignal(signal.SIGIO) == signal.SIG_DFL:
            signal.signal(signal.SIGIO, signal.SIG_IGN)
        return bool(signal.getsignal(signal.SIGIO) == signal.SIG_IGN)
    except (ValueError, AttributeError, OSError):
        return False


def _take_lease(fd: int) -> bool | None:
    """Take a read lease on ``fd`` (opened read-only): True if taken, False if some
    process has the file open for writing, None when leases cannot tell (not the file's
    owner, a file system without leases). While it is held, a program that opens the
    file for writing waits (and wf sees it waiting in F_GETLEASE)."""
    if not _leases_usable():
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as e:
        if e.errno == errno.EAGAIN:
            return False
        return None
    return True


def _drop_lease(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    except OSError:
        pass


def _lease_broken(fd: int) -> bool:
    """Whether a program is waiting to open the leased file for writing."""
    try:
        return bool(fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK)
    except OSError:
        return True


def _lease_probe(fd: int) -> bool | None:
    """True if some process has the file open for writing, False if none, None when
    leases cannot tell."""
    taken = _take_lease(fd)
    if taken:
        _drop_lease(fd)
    return None if taken is None else not taken


def _proc_writers(dev: int, ino: int) -> bool:
    """Scan /proc for a descriptor open for writing on (dev, ino)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if st.st_ino != ino or st.st_dev != dev:
                continue
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as f:
                    flags = next((int(x.split()[1], 8) for x in f if x.startswith("flags:")), 0)
            except (OSError, ValueError, IndexError):
                return True  # it has the file open and we cannot see how: assume writing
            if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
                return True
    return False


def being_written(fd: int) -> bool:
    """Whether any process holds the file of ``fd`` (opened read-only) open for writing."""
    probe = _lease_probe(fd)
    if probe is not None:
        return probe
    st = os.fstat(fd)
    return _proc_writers(st.st_dev, st.st_ino)


# ------------------------------------------------------------------ settled read


def _read_fd(fd: int, size: int | None = None) -> bytes:
    """All of the file, to its end as it is now. ``size``: its size as fstat gives it (asked
    here if not given); the first read asks for one byte more, so that a file that did not
    grow is read whole in one piece (a 3.6 MB TASKS.md in 1 MB pieces, joined, cost ~2 ms
    more)."""
    chunks: list[bytes] = []
    offset = 0
    want = max((os.fstat(fd).st_size if size is None else size) + 1, 1 << 20)
    while True:
        chunk = os.pread(fd, want, offset)
        want = 1 << 20
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


class Wait(enum.Enum):
    """Why a read of the file is not yet the file's settled content."""

    MISSING = "it is missing, but held tasks when wf last wrote it"
    CHANGED_DURING_READ = "it changed while wf read it"
    REPLACED_DURING_READ = "it was replaced while wf read it"
    OPEN_FOR_WRITING = "another program has it open for writing"
    RECENT = "it changed a moment ago"
    EMPTY = "it is empty, but held task(s) when wf last wrote it"
    LOST_RECENT = "it lost tasks a moment ago"

    @property
    def deferred(self) -> bool:
        """A finished save that may have a second part coming (a save in two writes):
        wf waits for the file to be still, but only for ``DEFER`` seconds of saves that
        all show the same number of tasks. The other reasons are a save in progress (or
        a file that never holds the backlog) and are waited out whatever it takes."""
        return self in (Wait.RECENT, Wait.LOST_RECENT)

    def text(self, seen: Stamp | None) -> str:
        if self is Wait.EMPTY and seen is not None:
            return f"it is empty, but held {seen.units} task(s) when wf last wrote it"
        return self.value


def _unsettled_why(
    path: Path, seen: Stamp | None, marker: bytes, reading: bool = False
) -> tuple[Wait | None, bytes | None, Stamp | None]:
    """(why the file is not settled or None, its bytes, its stamp). ``reading``: the caller
    keeps only the bytes, so the tasks are counted only where a rule below needs the count
    (a file wf last saw, a deferred wait); elsewhere the stamp's ``units`` is -1. wf's own
    write is not counted again: its stamp is ``seen``. Counting the headings of 10,000
    tasks costs ~3 ms."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if seen is not None and seen.units:
            return Wait.MISSING, None, None
        return None, None, None
    try:
        st1 = os.fstat(fd)
        data = _read_fd(fd, st1.st_size)
        st2 = os.fstat(fd)
        writing = being_written(fd)
    finally:
        os.close(fd)
    looks = (st2.st_ino, st2.st_size, st2.st_mtime_ns)
    own = seen is not None and seen[:3] == looks
    if seen is not None and own:
        stamp = seen  # wf's own write, as the rules below take it: its count is the one wf made
    else:
        stamp = Stamp(*looks, -1 if reading else units(data, marker))
    try:
        now_ino = os.stat(path).st_ino
    except FileNotFoundError:
        now_ino = -1
    if (st1.st_size, st1.st_mtime_ns) != (st2.st_size, st2.st_mtime_ns) or len(data) != st2.st_size:
        return Wait.CHANGED_DURING_READ, data, stamp
    if now_ino != st2.st_ino:
        return Wait.REPLACED_DURING_READ, data, stamp
    if writing:
        return Wait.OPEN_FOR_WRITING, data, stamp
    if own:
        return None, data, stamp
    age = time.time() - st2.st_mtime_ns / 1e9
    # An mtime more than a second ahead is a clock that runs ahead (a copied file, a
    # network file system), not a save in progress: it would hold wf off for hours.
    recent = age > -FUTURE
    if stamp.units < 0 and (seen is not None or (recent and age < QUIET)):
        stamp = stamp._replace(units=units(data, marker))  # the rules below compare it
    lost = seen is not None and stamp.units < seen.units
    if lost and not data:
        return Wait.EMPTY, data, stamp
    if recent and age < QUIET:
        return Wait.RECENT, data, stamp
    if lost and recent and age < LOST_QUIET:
        return Wait.LOST_RECENT, data, stamp
    return None, data, stamp


def settled_read(
    path: Path,
    name: str,
    seen: Stamp | None,
    timeout: float,
    marker: bytes = b"## ",
    *,
    reading: bool = False,
) -> tuple[bytes | None, Stamp | None]:
    """The file's bytes (None if it does not exist) once nobody is saving it, and its
    stamp. Raises Unsettled after ``timeout`` seconds.

    wf defers to a person's finished saves (a file changed a moment ago, or one that lost
    tasks and was not still for a second) for at most ``DEFER`` seconds: an editor that
    saves every 50 ms would otherwise hold every write off for good. Once every complete
    read for that long showed the same number of tasks, the file is taken as it is (a
    save cut in two would have changed it); the compare-and-swap of ``replace_checked``
    still keeps any save that lands after this read. ``reading``: for a reader only (it
    writes nothing from it), a file that stays missing that long is missing (a person
    deleted it), where a write would wait and refuse; its stamp's ``units`` may be -1 (not
    counted: ``_unsettled_why``)."""
    start = time.monotonic()
    same_since: float | None = None  # deferring since, to reads that all had ``same_units``
    same_units = -1
    while True:
        wait, data, stamp = _unsettled_why(path, seen, marker, reading)
        if wait is None:
            return data, stamp
        now = time.monotonic()
        if wait.deferred or (reading and wait is Wait.MISSING):
            units_now = -1 if stamp is None else stamp.units
            if same_since is None or units_now != same_units:
                same_since, same_units = now, units_now
            elif now - same_since >= DEFER:
                return data, stamp
        if now - start >= timeout:
            raise Unsettled(name, wait.text(seen), round(timeout, 1))
        time.sleep(POLL)


def read_backlog(project: Project) -> tuple[bytes | None, bytes | None]:
    """TASKS.md's and the archive's bytes (None: no file) for a reader, settled as a write
    reads them (``settled_read``): never half of a person's save, in place or in pieces (a
    file that lost tasks since wf last wrote it a moment ago is waited for, as a write
    waits), within the lock timeout. A file that stays missing for a second is read as
    missing (a write would refuse). Here, not in ``wf.tasks.backlog``: a ``wf list``
    answered from its cache imports no more than this."""
    from wf.base import records

    cfg, wf_dir, timeout = project.config, project.wf_dir, project.lock_timeout

    def seen(wf_dir: Path, name: str) -> Stamp | None:
        """What wf last saw of the file. A record that cannot be trusted stops every write
        (``ops.transact``) and ``wf doctor`` names it; a read goes on without it (it writes
        nothing, and ``wf doctor`` must be able to read the backlog to report it)."""
        try:
            return load_seen(wf_dir, name)
        except records.CorruptRecord:
            return None

    data, _ = settled_read(project.tasks_path, cfg.tasks, seen(wf_dir, cfg.tasks), timeout, reading=True)
    archive_data, _ = settled_read(
        project.archive_path, cfg.archive, seen(wf_dir, cfg.archive), timeout, b"- ", reading=True
    )
    return data, archive_data


# ------------------------------------------------------------------ a file that is not text

NOT_TEXT_TRIES = 5  # a file that is not UTF-8 is read this many times more, settled,
NOT_TEXT_PAUSE = 0.2  # this many seconds apart, before it is the file's problem


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def reread_until_text(path: Path, name: str, data: bytes, timeout: float) -> bytes:
    """``data``, just read from ``path``, is not UTF-8. A person's save may be half-way
    (a character cut in two, an editor that writes in pieces): read the file again, settled,
    a few times; the first read that is text, else the last one (then the file itself is
    wrong, and the caller's parse says where)."""
    for _ in range(NOT_TEXT_TRIES):
        if _is_text(data):
            break
        time.sleep(NOT_TEXT_PAUSE)
        fresh, _stamp = settled_read(path, name, None, timeout)
        if fresh is None:
            break
        data = fresh
    return data


def _unreadable_file(wf_dir: Path) -> Path:
    return wf_dir / "unreadable.json"


def note_unreadable(wf_dir: Path, name: str, why: str) -> None:
    """Remember that wf met ``name`` unreadable now (``why``: where and what), so that a
    worker that gave up on its task meanwhile is not taken as the task's failure. Best
    effort, like ``save_seen``: without it a worker's report is taken as it is."""
    if not wf_dir.is_dir():
        return  # not a project wf has set up: nothing to remember for
    path = _unreadable_file(wf_dir)
    current = _json_dict(path)
    current[name] = {"last": time.time(), "why": why}
    _save_json_best_effort(path, current)


def _json_dict(path: Path) -> dict[str, Any]:
    """A best-effort record as a dict: anything unreadable reads as empty (for the two
    notes whose loss costs only a signal, never work)."""
    try:
        current = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return current if isinstance(current, dict) else {}


def _save_json_best_effort(path: Path, data: dict[str, Any]) -> None:
    from wf.base import records as store

    try:
        store.write_json(path, data, indent=None, durable=False)
    except (OSError, ValueError):
        pass


def unreadable_since(wf_dir: Path, name: str, since: float) -> str | None:
    """What was wrong with ``name`` when wf last met it unreadable, if that was at
    ``since`` or later; None if not (or the note cannot be read)."""
    try:
        entry = json.loads(_unreadable_file(wf_dir).read_text("utf-8")).get(name)
        last, why = float(entry["last"]), str(entry["why"])
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return None
    return why if last >= since else None


# ------------------------------------------------------------------ checked replace


def _target(path: Path) -> Path:
    """The file a write lands in: a symlinked file is written through (the link kept)."""
    return Path(os.path.realpath(path))


def _wait_no_writer(fd: int, timeout: float) -> None:
    start = time.monotonic()
    while being_written(fd) and time.monotonic() - start < timeout:
        time.sleep(POLL)


@functools.cache
def _renameat2() -> Any:
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    return fn


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2); False where that is not supported."""
    fn = _renameat2()
    if fn is None:
        return False
    import ctypes

    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_checked(
    path: Path, data: bytes, expect: bytes | None, timeout: float, marker: bytes = b"## "
) -> Stamp | None:
    """Replace ``path`` by ``data`` if it still holds ``expect`` (None: it must not
    exist), and nobody wrote into the replaced file around the rename. Returns the new
    file's stamp, or None when the caller must read again and start over.

    A read lease on the old file is held from the check through the rename: a program
    that opens it for writing meanwhile waits, and wf sees it waiting and swaps the old
    file back before letting it go on. On Linux the rename is an exchange: afterwards
    the temporary name holds exactly the file that was replaced, so a save that still
    slipped in (a rename, or a write into the old file by a program that had it open) is
    seen, put back, and the caller starts over from it. Elsewhere the old file is
    watched through a descriptor."""
    target = _target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(write_temp(target, data))
    try:
        try:
            old = os.open(target, os.O_RDONLY)
        except FileNotFoundError:
            if expect is not None:
                tmp.unlink()
                return None
            os.link(tmp, target)  # fails if someone created it meanwhile
            tmp.unlink()
            return _stamp(target, data, marker)
        try:
            lease = _take_lease(old)
            if (
                lease is False
                or _read_fd(old) != expect
                or os.stat(target).st_ino != os.fstat(old).st_ino
                or (lease is None and being_written(old))
            ):
                if lease:
                    _drop_lease(old)
                tmp.unlink()
                return None
            ours, checked = os.stat(tmp).st_ino, os.fstat(old).st_ino
            if _exchange(tmp, target):
                if os.stat(tmp).st_ino != checked or (lease and _lease_broken(old)):
                    # A save slipped in (renamed over the file, or opening the old file
                    # to write it, right now): swap back at once, so that the save stays
                    # in place, and start over from it.
                    _exchange(tmp, target)
                    if lease:
                        _drop_lease(old)
                    if os.stat(tmp).st_ino != ours:  # and another one between the swaps
                        _exchange(tmp, target)
                    tmp.unlink()
                    return None
                if lease:
                    _drop_lease(old)
                os.close(old)
                old = os.open(tmp, os.O_RDONLY)  # exactly the file that was replaced
                tmp.unlink()
            else:
                os.replace(tmp, target)
                if lease:
                    _drop_lease(old)
            # A program that opened the old file before the rename may write into it now.
            _wait_no_writer(old, timeout)
            theirs = _read_fd(old)
        finally:
            os.close(old)
        if theirs != expect:
            _put_back(target, theirs, data)
            return None
    except FileExistsError:
        tmp.unlink(missing_ok=True)
        return None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _stamp(target, data, marker)


def _stamp(target: Path, data: bytes, marker: bytes) -> Stamp:
    fsync_dir(target.parent)
    st = os.stat(target)
    return Stamp(st.st_ino, st.st_size, st.st_mtime_ns, units(data, marker))


def _put_back(target: Path, theirs: bytes, ours: bytes) -> None:
    """Someone saved into the file wf just replaced: their save wins, wf starts over."""
    tmp = write_temp(target, theirs)
    try:
        fd = os.open(target, os.O_RDONLY)
    except FileNotFoundError:
        os.replace(tmp, target)
        return
    try:
        if _read_fd(fd) == ours and not being_written(fd):
            os.replace(tmp, target)
            return
    finally:
        os.close(fd)
    os.unlink(tmp)  # replaced again meanwhile: the fresh read sees the newest file


# ------------------------------------------------------------------ what wf last saw


def _seen_file(wf_dir: Path) -> Path:
    return wf_dir / "seen.json"


def load_seen(wf_dir: Path, name: str) -> Stamp | None:
    """What wf last saw of ``name``, None if it never saw it; CorruptRecord if the record
    cannot be trusted (read as none, the lost-tasks guard would be off unseen)."""
    from wf.base import records as store

    path = _seen_file(wf_dir)
    data = store.load_json(path)
    if data is None and not path.exists():
        return None
    if not isinstance(data, dict):
        raise store.CorruptRecord(path, f"expected a JSON object, found {type(data).__name__}")
    raw = data.get(name)
    if raw is None:
        return None
    if not (
        isinstance(raw, list)
        and len(raw) == len(Stamp._fields)
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in raw)
    ):
        raise store.CorruptRecord(path, f"{name!r} is not what wf writes: {raw!r}")
    return Stamp(*raw)


def save_seen(wf_dir: Path, stamps: dict[str, Stamp | None]) -> None:
    """Best effort: without the record, wf only loses the 'lost tasks' signal."""
    path = _seen_file(wf_dir)
    current = _json_dict(path)
    for name, stamp in stamps.items():
        if stamp is not None:
            current[name] = list(stamp)
    _save_json_best_effort(path, current)
