"""A cache of ``wf list`` answers, keyed by the exact bytes they depend on.

An orchestrator asks ``wf list --runner`` again and again while nothing changed. The
answer depends only on TASKS.md, the archive, wf.toml, the holds (``.wf/orch/held/``
and the lane records, ``wf.tasks.holds``) and the options, so it is stored
under a SHA-256 digest of all of them: a cached answer can never be stale, and a hit
needs no parse and no readiness pass (nor their imports). Best effort: any problem with
the cache only means computing the answer.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path
from typing import Any

from wf import __version__
from wf.base.fsutil import atomic_write, read_bytes
from wf.base.project import Project

KEEP = 8


def key(
    project: Project, options: tuple[Any, ...], tasks: bytes | None, archive: bytes | None
) -> bytes | None:
    """The key of an answer computed from ``tasks`` and ``archive`` (the bytes the caller
    read, settled: ``backlog.read_settled``) and wf.toml as it is now."""
    h = hashlib.sha256(b"wf-list\0")  # SHA-256: hashed in hardware, twice as fast as BLAKE2b here
    h.update(f"{__version__}\0{options!r}\0".encode())
    for data in (tasks, archive, read_bytes(project.config_path)):
        if data is None:
            h.update(b"\1")
        else:
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    h.update(holds_digest(project.wf_dir))
    return h.digest()[:20]


def holds_digest(wf_dir: Path) -> bytes:
    """The bytes the holds of every task depend on beyond TASKS.md: the handback records
    (``holds.held_dir``, ``.wf/orch/held/``) and the lane records (``.wf/orch/``). Here,
    not in ``wf.tasks.holds``: a cached answer needs no import of the holds' classes."""
    h = hashlib.blake2b(digest_size=16)
    for folder in (wf_dir / "orch" / "held", wf_dir / "orch"):
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".json") and e.is_file())
        except OSError:
            h.update(b"\1")
            continue
        for name in names:
            try:
                data = (folder / name).read_bytes()
            except OSError:
                data = b"\2"
            h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.digest()


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
    if not project.wf_dir.is_dir():
        return
    path = _file(project, k)
    try:
        atomic_write(path, marshal.dumps((k, value)), durable=False)  # a cache: lost is only slower
        entries = sorted(
            (e.stat().st_mtime_ns, e.path)
            for e in os.scandir(path.parent)
            if e.name.startswith("list.") and e.name.endswith(".answer")
        )
        for _, stale in entries[:-KEEP]:
            os.unlink(stale)
    except (OSError, ValueError):
        pass
