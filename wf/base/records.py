"""Typed state records: frozen dataclasses saved as JSON, with one validated load path.

Every state file wf keeps between commands (a lane record, a tree record, a gate
result) is a frozen dataclass. ``load`` returns None only when the file does not exist;
a file that cannot be read, is not JSON, or whose fields have the wrong types raises
``CorruptRecord``, naming the file and what is wrong, so that nothing ever reads a
broken record as "no record" (``wf doctor`` reports it, ``--fix`` moves it aside).
Unknown keys are ignored (a newer wf may add some); missing keys take the field's
default, and a missing key without a default is corrupt. Numbers must be finite; a
record class may add its own checks (ranges, a path that must be inside wf's own
trees) in a ``problem(path)`` method that returns what is wrong, or None.

The same ground serves the state files that are not records: ``read_bytes`` (a regular
file of bounded size, never a folder, a FIFO or a device), ``load_json`` (any JSON value,
strictly UTF-8, no NaN) and ``read_lines`` (a UTF-8 log without NUL bytes), each raising
``CorruptRecord`` on any fault.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

from wf.base.errors import WfError
from wf.base.fsutil import atomic_write

T = TypeVar("T")


class CorruptRecord(WfError):
    """A state file wf cannot trust: unreadable, not JSON, or of the wrong shape."""

    def __init__(self, path: Path, why: str, fix: str = "'wf doctor --fix' moves it aside") -> None:
        self.path = Path(path)
        self.why = why
        self.fix = fix
        super().__init__(f"{path}: corrupt record ({why}); {fix}")


def _check(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_check(value, h) for h in typing.get_args(hint))
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, list | tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_check(v, args[0]) for v in value)
        return len(value) == len(args) and all(_check(v, a) for v, a in zip(value, args, strict=True))
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type) and issubclass(hint, str):  # a str enum
        try:
            hint(value)
        except ValueError:
            return False
        return True
    return False


def _convert(value: Any, hint: Any) -> Any:
    """JSON lists become tuples, and strings become enum members, where the type says so."""
    if isinstance(value, list):
        return tuple(value)
    for h in typing.get_args(hint) or (hint,):
        if isinstance(h, type) and issubclass(h, str) and h is not str and isinstance(value, str):
            return h(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A record class's field types, resolved once per class (``get_type_hints`` evaluates
    every annotation each call; the end of a run of 1,000 units reads 1,000 statuses)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def from_dict(cls: type[T], data: Any, path: Path) -> T:
    if not isinstance(data, dict):
        raise CorruptRecord(path, f"expected a JSON object, found {type(data).__name__}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            value = data[f.name]
            if not _check(value, hints[f.name]):
                raise CorruptRecord(path, f"field {f.name!r} has a bad value {value!r}")
            kwargs[f.name] = _convert(value, hints[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise CorruptRecord(path, f"field {f.name!r} is missing")
    rec = cls(**kwargs)
    check = getattr(rec, "problem", None)
    why = check(Path(path)) if callable(check) else None
    if why:
        raise CorruptRecord(path, str(why))
    return rec


MAX_RECORD = 16 << 20  # a record is a few hundred bytes; a log grows, so it may pass a larger limit


def read_bytes(path: Path, limit: int = MAX_RECORD) -> bytes | None:
    """The bytes of a state file, None if there is no such file (nor the folder it would
    be in). A folder, a FIFO, a device, a file over ``limit`` bytes or one that cannot be
    read raises CorruptRecord (opened without blocking: a FIFO never hangs a command)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise CorruptRecord(path, f"cannot read it: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise CorruptRecord(path, "it is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise CorruptRecord(path, "it is not a regular file (a FIFO, a socket or a device)")
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise CorruptRecord(path, f"larger than {limit >> 20} MiB, which wf never writes")
        return b"".join(chunks)
    except OSError as e:
        raise CorruptRecord(path, f"cannot read it: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _text(path: Path, raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise CorruptRecord(path, f"not UTF-8 text (byte {e.start}, line {line})") from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise CorruptRecord(path, f"a NUL byte on line {line}")
    return text


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number wf writes")


def load_json(path: Path, limit: int = MAX_RECORD) -> Any:
    """The JSON value in ``path``, None if there is no such file; CorruptRecord on any
    fault (not a regular file, not UTF-8, not JSON, a NaN or an Infinity)."""
    raw = read_bytes(path, limit)
    if raw is None:
        return None
    text = _text(path, raw)
    try:
        return json.loads(text, parse_constant=no_constant)
    except ValueError as e:
        raise CorruptRecord(path, f"not JSON: {e}") from None


def read_lines(path: Path, limit: int = 256 << 20) -> list[str] | None:
    """The lines of a log or list wf keeps, None if there is no such file; CorruptRecord
    if it is not a regular file, not UTF-8, or holds a NUL byte."""
    raw = read_bytes(path, limit)
    return None if raw is None else _text(path, raw).splitlines()


def load(cls: type[T], path: Path) -> T | None:
    """The record in ``path``, None if there is no such file; CorruptRecord otherwise."""
    data = load_json(path)
    if data is None and not os.path.lexists(path):
        return None
    return from_dict(cls, data, path)


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a folder, a FIFO or a device); a log that
    is one is never moved aside by ``wf doctor --fix``: its lines may be money."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def corrupt_in(cls: type[Any], files: list[Path]) -> list[CorruptRecord]:
    """Of ``files`` (records of ``cls``), those that cannot be trusted (for wf doctor)."""
    out = []
    for f in files:
        try:
            load(cls, f)
        except CorruptRecord as e:
            out.append(e)
    return out


def as_dict(rec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def write_json(
    path: Path,
    value: Any,
    *,
    indent: int | None = 1,
    durable: bool = True,
    dir_sync: bool | None = None,
    make_dirs: bool = True,
    finite: bool = True,
) -> None:
    """Write a JSON value atomically (``fsutil.atomic_write``: temp file, fsync, rename),
    within the limits ``load_json`` reads back: finite numbers only (ValueError on a NaN
    or an Infinity, never a file wf would then call corrupt), at most ``MAX_RECORD``
    bytes. ``indent`` None: one line, by the C encoder (about ten times faster, for the
    files written many times a second). Values JSON lacks (a path) are written as text.
    ``finite`` False writes a NaN as Python's json does, for a file that holds numbers an
    outside program printed and whose own reader takes them (a unit's status.json)."""
    text = json.dumps(value, indent=indent, allow_nan=not finite, default=str) + "\n"
    data = text.encode("utf-8")
    if len(data) > MAX_RECORD:
        raise ValueError(f"{path}: a record of {len(data)} bytes, over the {MAX_RECORD >> 20} MiB wf reads")
    atomic_write(Path(path), data, durable=durable, dir_sync=dir_sync, make_dirs=make_dirs)


def save(path: Path, rec: Any) -> None:
    """Write a record atomically (temp file, fsync, rename)."""
    write_json(path, as_dict(rec))


def move_aside(path: Path) -> Path:
    """Rename a corrupt record out of the way (kept for a person to read), never delete it."""
    from wf.base import stamps  # rare (a record set aside): its import stays off the read path

    stamp = stamps.compact_now()
    dest = Path(path).with_name(f"{Path(path).name}.corrupt-{stamp}")
    Path(path).rename(dest)
    return dest
