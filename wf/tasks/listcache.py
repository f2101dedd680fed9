"""A cache of ``wf list`` answers, keyed by the exact bytes they depend on.

An orchestrator asks ``wf list --runner`` again and again while nothing changed. The
answer depends only on TASKS.md, the archive, wf.toml, the holds (``.wf/orch/held/``
and the lane records, ``holds_bytes``) and the options. Every answer is stored under a
SHA-256 digest of all of them (``key``): such an answer can never be stale, and a hit
needs no parse and no readiness pass (nor their imports).

Hashing 3.6 MB of TASKS.md (10,000 tasks) and importing hashlib cost ~4-5 ms of a ~60 ms
list, so an answer is also stored under the files' identities (``stat_entry``): device,
inode, size, mtime and ctime of TASKS.md and the archive, with wf.toml's and the holds'
own bytes. A write into a file changes its ctime, which nobody can set back; but a file
system stamps times in ticks (a few ms; 2 s on FAT), so a second same-size write in the
tick of the first keeps all five. The rule of racy git closes that gap: the identities
are stored, and trusted, only for files whose ctime and mtime are ``MARGIN_NS`` older
than the moment wf looked at them (by this machine's clock, taken before the look) and
than the entry's own mtime (by the file system's clock). Any write after the look is
stamped later than that, so a file stamped long before it cannot have changed unseen.
A file changed a moment ago is keyed by its bytes. Best effort: any problem with the
cache only means computing the answer.
"""

from __future__ import annotations

import marshal
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wf import __version__
from wf.base.fsutil import atomic_write, read_bytes
from wf.base.project import Project

KEEP = 8
MARGIN_NS = 3_000_000_000  # a file's times must be this much older than the look (2 s ticks on FAT)

Stats = tuple[tuple[int, int, int, int, int] | None, ...]  # per file: dev, ino, size, mtime, ctime


def holds_bytes(wf_dir: Path) -> bytes:
    """The bytes the holds of every task depend on beyond TASKS.md: the handback records
    (``holds.held_dir``, ``.wf/orch/held/``) and the lane records (``.wf/orch/``), each
    with its name and length. Here, not in ``wf.tasks.holds``: a cached answer needs no
    import of the holds' classes."""
    parts: list[bytes] = []
    for folder in (wf_dir / "orch" / "held", wf_dir / "orch"):
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".json") and e.is_file())
        except OSError:
            parts.append(b"\1")
            continue
        for name in names:
            try:
                data = (folder / name).read_bytes()
            except OSError:
                data = b"\2"
            parts.append(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        parts.append(b"\3")
    return b"".join(parts)


def key(project: Project, options: tuple[Any, ...], tasks: bytes | None, archive: bytes | None) -> bytes:
    """The key of an answer computed from ``tasks`` and ``archive`` (the bytes the caller
    read, settled: ``settle.read_backlog``), wf.toml and the holds as they are now."""
    import hashlib  # here: an answer found by the files' identities needs no hash (~2 ms to import)

    h = hashlib.sha256(b"wf-list\0")  # SHA-256: hashed in hardware, twice as fast as BLAKE2b here
    h.update(f"{__version__}\0{options!r}\0".encode())
    for data in (tasks, archive, read_bytes(project.config_path), holds_bytes(project.wf_dir)):
        if data is None:
            h.update(b"\1")
        else:
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.digest()[:20]


def _file(project: Project, k: bytes) -> Path:
    return project.wf_dir / "cache" / f"list.{k[:10].hex()}.answer"


def load(project: Project, k: bytes) -> Any:
    try:
        with open(_file(project, k), "rb") as f:
            stored_key, value = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return value if stored_key == k else None


def store(project: Project, k: bytes, value: Any) -> None:
    if project.wf_dir.is_dir():
        _write(_file(project, k), marshal.dumps((k, value)))


def _write(path: Path, blob: bytes) -> None:
    try:
        atomic_write(path, blob, durable=False)  # a cache: lost is only slower
        entries = sorted(
            (e.stat().st_mtime_ns, e.path)
            for e in os.scandir(path.parent)
            if e.name.startswith("list.") and e.name.endswith(path.suffix)
        )
        for _, stale in entries[:-KEEP]:
            os.unlink(stale)
    except (OSError, ValueError):
        pass


# ------------------------------------------------------------------ by the files' identities


def stats(project: Project) -> Stats | None:
    """TASKS.md's and the archive's identities (None for a missing file); None if one
    cannot be looked at."""
    out: list[tuple[int, int, int, int, int] | None] = []
    for path in (project.tasks_path, project.archive_path):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            out.append(None)
            continue
        except OSError:
            return None
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def settled_long_before(found: Stats, moment_ns: int) -> bool:
    """Whether every file's ctime and mtime are ``MARGIN_NS`` older than ``moment_ns``: a
    write after that moment cannot leave all of its identity as it was."""
    return all(s is None or max(s[3], s[4]) < moment_ns - MARGIN_NS for s in found)


def _material(project: Project, options: tuple[Any, ...], found: Stats) -> bytes:
    return marshal.dumps(
        (__version__, repr(options), read_bytes(project.config_path), holds_bytes(project.wf_dir), found)
    )


def _stat_file(project: Project, material: bytes) -> Path:
    return project.wf_dir / "cache" / f"list.{zlib.crc32(material):08x}{len(material):x}.stat"


def stat_entry(project: Project, options: tuple[Any, ...], found: Stats) -> Any:
    """The answer stored for these identities (and wf.toml and holds bytes), None if there
    is none or it cannot be trusted: stored from a look at files changed less than
    ``MARGIN_NS`` before the entry was written (the file system's clock)."""
    material = _material(project, options, found)
    try:
        with open(_stat_file(project, material), "rb") as f:
            written = os.fstat(f.fileno()).st_mtime_ns
            stored, value = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if stored != material or not settled_long_before(found, written):
        return None
    return value


def store_stat_entry(project: Project, options: tuple[Any, ...], found: Stats, value: Any) -> None:
    material = _material(project, options, found)
    if project.wf_dir.is_dir():
        _write(_stat_file(project, material), marshal.dumps((material, value)))


def answer(
    project: Project,
    options: tuple[Any, ...],
    read: Callable[[], tuple[bytes | None, bytes | None]],
    compute: Callable[[bytes | None, bytes | None], Any],
) -> Any:
    """The answer for ``options``: from the files' identities when they have not changed
    for a while, else by the bytes that ``read`` gives (settled), else ``compute``d from
    them and stored."""
    # The time, then the identities, then the bytes: a write after the look is stamped
    # later than ``looked``, so identities older than it by the margin are of the bytes
    # read next, or of no file ever again (a write meanwhile moved the ctime on for good).
    looked = time.time_ns()
    found = stats(project)
    trusted = found is not None and settled_long_before(found, looked)
    data, archive_data = read()
    if found is not None and trusted:
        value = stat_entry(project, options, found)
        if value is not None:
            return value
    k = key(project, options, data, archive_data)
    value = load(project, k)
    if value is None:
        value = compute(data, archive_data)
        store(project, k, value)
    if found is not None and trusted:
        store_stat_entry(project, options, found, value)
    return value
