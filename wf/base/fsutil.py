"""Small file helpers: exact reads and atomic writes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def atomic_write(
    path: Path,
    data: bytes,
    *,
    expect: bytes | None = None,
) -> bool:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename.

    With ``expect``, the file's current content is compared just before the rename and
    the write is abandoned (False returned) if it changed: someone outside the project
    lock, such as an editor, saved it since it was read. The caller re-reads and retries.
    Keeps the file's permission bits. Returns True when written.
    """
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(tmp, 0o644)
        if expect is not None and read_bytes(path) != expect:
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)
    return True


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def fsync_dir(directory: Path) -> None:
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
