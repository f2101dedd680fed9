"""Typed state records: frozen dataclasses saved as JSON, with one validated load path.

Every state file wf keeps between commands (a lane record, a tree record, a gate
result) is a frozen dataclass. ``load`` returns None only when the file does not exist;
a file that cannot be read, is not JSON, or whose fields have the wrong types raises
``CorruptRecord``, naming the file and what is wrong, so that nothing ever reads a
broken record as "no record" (``wf doctor`` reports it, ``--fix`` moves it aside).
Unknown keys are ignored (a newer wf may add some); missing keys take the field's
default, and a missing key without a default is corrupt.
"""

from __future__ import annotations

import dataclasses
import json
import time
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

from wf.errors import WfError
from wf.fsutil import atomic_write_text

T = TypeVar("T")


class CorruptRecord(WfError):
    """A state file wf cannot trust: unreadable, not JSON, or of the wrong shape."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = Path(path)
        self.why = why
        super().__init__(f"{path}: corrupt record ({why}); 'wf doctor --fix' moves it aside")


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
        return isinstance(value, (int, float)) and not isinstance(value, bool)
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


def from_dict(cls: type[T], data: Any, path: Path) -> T:
    if not isinstance(data, dict):
        raise CorruptRecord(path, f"expected a JSON object, found {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            value = data[f.name]
            if not _check(value, hints[f.name]):
                raise CorruptRecord(path, f"field {f.name!r} has a bad value {value!r}")
            kwargs[f.name] = _convert(value, hints[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise CorruptRecord(path, f"field {f.name!r} is missing")
    return cls(**kwargs)


def load(cls: type[T], path: Path) -> T | None:
    """The record in ``path``, None if there is no such file; CorruptRecord otherwise."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CorruptRecord(path, f"cannot read it: {e.strerror or e}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptRecord(path, f"not JSON: {e}") from None
    return from_dict(cls, data, path)


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


def save(path: Path, rec: Any) -> None:
    """Write a record atomically (temp file, fsync, rename)."""
    atomic_write_text(Path(path), json.dumps(as_dict(rec), indent=1, default=str) + "\n")


def move_aside(path: Path) -> Path:
    """Rename a corrupt record out of the way (kept for a person to read), never delete it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = Path(path).with_name(f"{Path(path).name}.corrupt-{stamp}")
    Path(path).rename(dest)
    return dest
