"""Small file helpers: exact reads, atomic writes, a folder's fsync and a log's tail.

The one atomic write of wf: a temporary file in the same folder, fsync, ``os.replace``,
then the folder's fsync. ``settle`` (TASKS.md, which an editor may be saving) makes its
temporary file with ``write_temp`` and does its own checked swap.
"""

from __future__ import annotations

import os
from pathlib import Path

_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_TRIES = 100


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_temp(target: Path, data: bytes, *, durable: bool = True) -> str:
    """A temporary file beside ``target`` holding ``data`` (fsynced when ``durable``), with
    ``target``'s permission bits (0644 for a new file); its name is returned, and nothing
    is left behind on failure."""
    fd, tmp = _mkstemp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        try:
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o644)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _mkstemp(target: Path) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` beside ``target``, made as ``tempfile.mkstemp``
    makes one (exclusive, mode 0600, a random name tried again if taken) without importing
    ``tempfile``, whose imports (shutil, random, bz2, lzma) cost every command ~3 ms."""
    for _ in range(_TEMP_TRIES):
        name = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, _TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def atomic_write(
    path: Path,
    data: bytes,
    *,
    expect: bytes | None = None,
    durable: bool = True,
    dir_sync: bool | None = None,
    make_dirs: bool = True,
) -> bool:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename: readers see
    the old or the new file, never half of one.

    With ``expect``, the file's current content is compared just before the rename and
    the write is abandoned (False returned) if it changed: someone outside the project
    lock, such as an editor, saved it since it was read. The caller re-reads and retries.
    ``durable`` False skips the fsyncs (file and folder) that make the write survive a
    crash of the machine (bookkeeping that is written again soon); ``dir_sync=False``
    leaves the folder's fsync to a durable write that follows in the same folder.
    ``make_dirs`` False: a missing folder is an error (FileNotFoundError), not made anew
    (a run folder someone removed stays removed). Keeps the file's permission bits. Returns True when written.
    """
    path = Path(path)
    directory = path.parent
    if make_dirs:
        directory.mkdir(parents=True, exist_ok=True)
    tmp = write_temp(path, data, durable=durable)
    try:
        if expect is not None and read_bytes(path) != expect:
            _unlink(tmp)
            return False
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    if durable if dir_sync is None else dir_sync:
        fsync_dir(directory)
    return True


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new name in ``directory`` survive a crash (best effort: a folder
    that cannot be opened or synced, as on some file systems, is left as it is)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def append_line(path: Path, line: str) -> None:
    """Append one line to a log file (O_APPEND: whole lines never interleave)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not line.endswith("\n"):
        line += "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _tail(path: Path, limit: int) -> tuple[bytes, bool]:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        return f.read(), size > limit


def tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes of a file (a log may be huge: never read it all). Raises
    OSError as ``open`` does: the caller says what a missing file means."""
    return _tail(path, limit)[0]


def tail_text(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a file as text, without the line the cut went through
    (if it was cut); "" if it cannot be read."""
    try:
        data, cut = _tail(path, limit)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text.partition("\n")[2] if cut else text
