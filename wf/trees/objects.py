"""The blobs and trees of wf's archive commit, written in-process as git writes loose
objects (``gitops.commit_files``; it asks git instead where this would not do exactly
what git does): the trees are built here, every object is stored by GitPython's object
database (gitdb). An object already there is only freshened (its time set to now, as git
does, so that a ``gc`` does not prune it before it is used).

A kill at any point leaves at most objects nothing refers to (git's gc removes them): no
ref, index or working-tree file changes here."""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

TREE, BLOB = 0o40000, 0o100644

# git -c, or config files other than the ones GitPython reads: settings git has, GitPython not
CONFIG_VARS = (
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG",
)
# core settings with which git writes objects otherwise than write_loose does (git writes them then)
GIT_SETTINGS = ("sharedrepository", "fsync", "fsyncobjectfiles", "fsyncmethod")

Entry = tuple[int, bytes, bytes]  # (mode, name, 20-byte id)


class Unfit(Exception):
    """The tree holds something at a path to write that git would have to sort out (a
    file where a folder is needed, a submodule): git's index is asked instead."""


def git_writes(core: list[str]) -> bool:
    """Whether these ``[core]`` keys make git write objects its own way."""
    return any(k.lower() in GIT_SETTINGS for k in core)


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0%s" % (len(data), data)).hexdigest()


def write_loose(objects: Path, kind: str, data: bytes, odb: Any) -> str:
    """Store one object under the folder ``objects`` through ``odb``, GitPython's object
    database (gitdb writes it, compressed, through a temporary file renamed into place,
    read-only); return its id. One already there is only freshened, as git does. The
    object goes to gitdb compressed (zlib level 1, git's ``core.looseCompression``) and
    with its id: without the id, GitPython's ``store`` runs ``git hash-object`` for it."""
    raw = f"{kind} {len(data)}\0".encode() + data
    sha = hashlib.sha1(raw).hexdigest()
    try:
        os.utime(objects / sha[:2] / sha[2:])
        return sha
    except OSError:
        pass
    from gitdb.base import IStream  # type: ignore[import-untyped]

    stream = IStream(kind.encode(), len(data), BytesIO(zlib.compress(raw, 1)), bytes.fromhex(sha))
    return str(odb.store(stream).hexsha.decode())


def parse_tree(data: bytes) -> list[Entry]:
    entries: list[Entry] = []
    i = 0
    while i < len(data):
        space = data.index(b" ", i)
        nul = data.index(b"\0", space)
        entries.append((int(data[i:space], 8), data[space + 1 : nul], data[nul + 1 : nul + 21]))
        i = nul + 21
    return entries


def format_tree(entries: list[Entry]) -> bytes:
    """A tree's bytes, its entries in git's order (a folder sorts as if its name ended in /)."""
    ordered = sorted(entries, key=lambda e: e[1] + b"/" if e[0] == TREE else e[1])
    return b"".join(b"%o %s\0%s" % (mode, name, sha) for mode, name, sha in ordered)


def tree_with(
    read_tree: Callable[[str], bytes],
    write: Callable[[str, bytes], str],
    tree: str | None,
    files: dict[str, bytes],
) -> str:
    """The id of ``tree`` (None: an empty one) with each path of ``files`` set to a
    regular file (mode 100644, as ``update-index --cacheinfo 100644`` sets it) holding its
    bytes; every other entry kept as it is."""
    entries = {name: (mode, sha) for mode, name, sha in (parse_tree(read_tree(tree)) if tree else [])}
    here: dict[bytes, bytes] = {}
    below: dict[bytes, dict[str, bytes]] = {}
    for path, data in files.items():
        first, slash, rest = path.partition("/")
        name = first.encode()
        if not first or first in (".", "..", ".git"):
            raise Unfit(path)
        if slash:
            below.setdefault(name, {})[rest] = data
        else:
            here[name] = data
    for name, data in here.items():
        if name in entries and entries[name][0] == TREE:
            raise Unfit(name.decode())
        entries[name] = (BLOB, bytes.fromhex(write("blob", data)))
    for name, sub in below.items():
        held = entries.get(name)
        if held is not None and held[0] != TREE:
            raise Unfit(name.decode())
        inner = tree_with(read_tree, write, held[1].hex() if held else None, sub)
        entries[name] = (TREE, bytes.fromhex(inner))
    return write("tree", format_tree([(mode, name, sha) for name, (mode, sha) in entries.items()]))
