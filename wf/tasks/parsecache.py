"""A cache of parsed TASKS.md files in ``.wf/cache/``, keyed by a hash of the exact bytes.

Parsing a 10,000-task file costs about 100 ms of pure Python; loading its parse from
here costs a tenth of that. The key is a SHA-256 digest of the file's bytes (plus the
wf version), so a cached parse is never used for other content:
there is nothing to invalidate. Writers store the parse of what they wrote, so the next
command starts warm. Everything here is best effort: a missing, corrupt or unwritable
cache only means parsing again.

Storing is cheap after an edit: the tasks' content (id, title, field lines, fields) is
kept in chunks of a few hundred tasks, each marshalled on its own, and their places
(lines and characters) apart. An edit changes one task and moves the others, so a write
re-marshals the one chunk that changed and copies the bytes of the others as this
process loaded them. The same bytes stored again (a claim given back) are not rewritten.

A claim needs one task of the file, not all of them (``open_index``): the file keeps each
chunk's places (lines, characters) in a blob of its own, beside an index of every id's
row, each parent's children and where each chunk starts. A claim loads the index and the
claimed task's chunk, and stores the edited file by remaking that chunk only: the chunks
after it move by the lines and characters the edit added, kept as a shift per chunk that
a full load adds to their places.
"""

from __future__ import annotations

import bisect
import gc
import hashlib
import marshal
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wf import __version__
from wf.base.errors import IssueKind, ParseIssue
from wf.base.fsutil import atomic_write
from wf.tasks.taskfile import Task, TasksFile, open_children

FORMAT = 8  # bump whenever the rows change shape, or the parser finds other issues
CHUNK = 256  # tasks per marshalled chunk of content

# id, title, field lines ("Key:value" joined by newlines), fields (lowercased key -> value)
Content = tuple[str, str, str, dict[str, str]]
# a task's first line, end line (exclusive), and character span
Place = tuple[int, int, tuple[int, int]]

# The chunks of the parse this process last loaded or stored, by the id of the first
# task's fields dict (held here, so the id stays that dict's): (contents, marshalled).
_known: dict[int, tuple[list[Content], bytes]] = {}


def _key(data: bytes) -> bytes:
    # SHA-256: CPUs hash it in hardware (SHA extensions), twice as fast as BLAKE2b here
    h = hashlib.sha256(b"wf-tasks\0")
    h.update(data)
    return h.digest()[:20] + __version__.encode()


KEEP = 4  # parses kept per file: a person's save and wf's writes can alternate


def _file(cache_dir: Path, name: str, key: bytes) -> Path:
    return cache_dir / f"{name.replace('/', '_')}.{key[:8].hex()}.parse"


_froze = False  # gc.freeze() done: once per process


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection in the block (restored after). Loading or editing a
    parse of 10,000 tasks makes some 100,000 objects that live on (tuples, dicts, strings:
    no cycles, freed by their counts). The collector would walk them again and again for
    no garbage: 20-40 ms of a claim or a ``wf show``. The first block to end moves every
    object there is into the permanent generation, out of the collector's sight; only once
    per process, so that a long-running one (``wf orch run``) keeps at most the cyclic
    garbage of that moment."""
    global _froze
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not _froze:
            _froze = True
            gc.freeze()
        if was:
            gc.enable()


def load(cache_dir: Path, name: str, data: bytes, text: str) -> TasksFile | None:
    with gc_paused():
        return _load(cache_dir, name, data, text)


def _read(cache_dir: Path, name: str, key: bytes) -> tuple[Path, tuple[Any, ...] | None]:
    """The cache file of ``key`` and its parts (FORMAT, key, index, blobs, place blobs,
    shifts, issues), or None when it is missing or of another format or key."""
    path = _file(cache_dir, name, key)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return path, None
    try:
        parts = marshal.loads(raw)  # loads of bytes: faster than load
        if not isinstance(parts, tuple) or len(parts) != 7 or parts[0] != FORMAT or parts[1] != key:
            raise ValueError("another format or key")
    except (ValueError, EOFError, TypeError):
        _drop(path)
        return path, None
    return path, parts


def _drop(path: Path) -> None:
    try:  # not left in place: a store of the same bytes would take it as stored
        path.unlink()
    except OSError:
        pass


def _places(blob: bytes, shift: tuple[int, int]) -> list[Place]:
    places: list[Place] = marshal.loads(blob)
    dl, dc = shift
    if dl or dc:
        places = [(s + dl, e + dl, (a + dc, b + dc)) for s, e, (a, b) in places]
    return places


def _load(cache_dir: Path, name: str, data: bytes, text: str) -> TasksFile | None:
    path, parts = _read(cache_dir, name, _key(data))
    if parts is None:
        return None
    try:
        _, _, _, blobs, place_blobs, shifts, issues = parts
        chunks: list[list[Content]] = [marshal.loads(b) for b in blobs]
        places: list[Place] = []
        for pb, sh in zip(place_blobs, shifts, strict=True):
            places += _places(pb, sh)  # extended in C, not a Python loop per task
        new = tuple.__new__  # a Task without the Python-level __new__ of NamedTuple: ~3 ms less
        rows = zip((c for chunk in chunks for c in chunk), places, strict=True)  # ValueError if they disagree
        tasks = [new(Task, (i, title, s, e, fl, kv, span)) for (i, title, fl, kv), (s, e, span) in rows]
        if tasks and not (isinstance(tasks[0].kv, dict) and isinstance(tasks[0].raw_pairs, str)):
            raise ValueError("rows of another shape")
        found = _issues(name, issues)
    except (ValueError, EOFError, TypeError):
        _drop(path)
        return None
    _remember(chunks, blobs)
    return TasksFile(name, text, tasks, found)


def _issues(name: str, issues: list[tuple[int, str, str, str | None, str]]) -> list[ParseIssue]:
    return [ParseIssue(name, ln, lv, msg, tk, IssueKind(kd)) for ln, lv, msg, tk, kd in issues]


def _remember(chunks: list[list[Content]], blobs: list[bytes]) -> None:
    _known.clear()
    for chunk, blob in zip(chunks, blobs, strict=True):
        if chunk:
            _known[id(chunk[0][3])] = (chunk, blob)


def _compact(t: Task) -> str:
    raw = t.raw_pairs
    if isinstance(raw, str):  # still in the form the cache gave it (an edit moved, not changed, it)
        return raw
    return "\n".join(f"{k}:{v}" for k, v in raw)


def _same(tasks: list[Task], at: int, chunk: list[Content]) -> bool:
    """Whether the tasks from ``at`` on have exactly the chunk's content."""
    if len(tasks) - at < len(chunk):
        return False
    for t, (i, title, fl, kv) in zip(tasks[at : at + len(chunk)], chunk, strict=True):
        if t.kv is not kv or t.id != i or t.title != title or (t.raw_pairs is not fl and _compact(t) != fl):
            return False
    return True


def _chunks(tasks: list[Task]) -> tuple[list[list[Content]], list[bytes]]:
    """The tasks' content in chunks, each with its marshalled bytes: a run of tasks that
    is a chunk this process already has keeps that chunk's bytes."""
    chunks: list[list[Content]] = []
    blobs: list[bytes] = []
    pending: list[Content] = []

    def flush() -> None:
        if pending:
            chunks.append(pending[:])
            blobs.append(marshal.dumps(chunks[-1]))
            pending.clear()

    at = 0
    while at < len(tasks):
        known = _known.get(id(tasks[at].kv))
        if known is not None and _same(tasks, at, known[0]):
            flush()
            chunks.append(known[0])
            blobs.append(known[1])
            at += len(known[0])
            continue
        t = tasks[at]
        pending.append((t.id, t.title, _compact(t), t.kv))
        at += 1
        if len(pending) >= CHUNK:
            flush()
    flush()
    return chunks, blobs


def store(cache_dir: Path, doc: TasksFile, data: bytes) -> None:
    key = _key(data)
    path = _file(cache_dir, doc.path, key)
    try:
        os.utime(path)  # stored already (the same bytes parse the same): kept as the newest
        return
    except OSError:
        pass
    chunks, blobs = _chunks(doc.tasks)
    tasks = doc.tasks
    place_blobs, starts, at = [], [], 0
    for chunk in chunks:
        starts.append(at)
        place_blobs.append(marshal.dumps([(t.start, t.end, t.span) for t in tasks[at : at + len(chunk)]]))
        at += len(chunk)
    index = marshal.dumps(({t.id: i for i, t in enumerate(tasks)}, open_children(tasks), starts))
    _write(cache_dir, doc.path, (FORMAT, key, index, blobs, place_blobs, [(0, 0)] * len(chunks), _rows(doc)))
    _remember(chunks, blobs)


def _rows(doc: TasksFile) -> list[tuple[int, str, str, str | None, str]]:
    return [(i.line, i.level, i.message, i.task, i.kind.value) for i in doc.issues]


def _write(cache_dir: Path, name: str, parts: tuple[Any, ...]) -> None:
    try:
        atomic_write(_file(cache_dir, name, parts[1]), marshal.dumps(parts), durable=False)
        _prune(cache_dir, name)
    except OSError:
        pass


class Index:
    """A cached parse opened for one task (``open_index``): every id's row, each
    parent's children (``taskfile.open_children``), the file's issues; the
    one task is loaded by ``task``, and ``store_edit`` stores the file as it is after an
    edit of that task alone."""

    def __init__(self, name: str, parts: tuple[Any, ...]) -> None:
        self.name = name
        self._parts = list(parts)
        ids, children, starts = marshal.loads(parts[2])
        self.ids: dict[str, int] = ids
        self.children: dict[str, list[str]] = children
        self._starts: list[int] = starts
        self.issues = _issues(name, parts[6])
        self._loaded: tuple[int, list[Content], list[Place]] | None = None

    def task(self, row: int) -> Task:
        k = bisect.bisect_right(self._starts, row) - 1
        contents: list[Content] = marshal.loads(self._parts[3][k])
        places = _places(self._parts[4][k], self._parts[5][k])
        if len(contents) != len(places) or not 0 <= row - self._starts[k] < len(contents):
            raise ValueError("a chunk of another shape")
        self._loaded = (k, contents, places)
        (i, title, fl, kv), (s, e, span) = contents[row - self._starts[k]], places[row - self._starts[k]]
        return Task(i, title, s, e, fl, kv, span)

    def store_edit(self, cache_dir: Path, old: Task, new: Task, doc: TasksFile, data: bytes) -> None:
        """Store the parse of ``data``: this file with ``old`` (the task last loaded)
        replaced by ``new``, the file's issues now ``doc``'s."""
        if self._loaded is None:
            raise ValueError("no task loaded")
        key = _key(data)
        try:
            os.utime(_file(cache_dir, self.name, key))  # stored already, as in ``store``
            return
        except OSError:
            pass
        k, contents, places = self._loaded
        at = self.ids[old.id] - self._starts[k]
        dl, dc = new.end - old.end, new.span[1] - old.span[1]
        contents[at] = (new.id, new.title, _compact(new), new.kv)
        places[at] = (new.start, new.end, new.span)
        places[at + 1 :] = [(s + dl, e + dl, (a + dc, b + dc)) for s, e, (a, b) in places[at + 1 :]]
        parts = self._parts
        blobs, place_blobs, shifts = list(parts[3]), list(parts[4]), list(parts[5])
        blobs[k], place_blobs[k], shifts[k] = marshal.dumps(contents), marshal.dumps(places), (0, 0)
        shifts[k + 1 :] = [(a + dl, b + dc) for a, b in shifts[k + 1 :]]
        _write(cache_dir, self.name, (FORMAT, key, parts[2], blobs, place_blobs, shifts, _rows(doc)))


def open_index(cache_dir: Path, name: str, data: bytes) -> Index | None:
    """The cached parse of ``data`` opened for one task, or None (no usable cache)."""
    path, parts = _read(cache_dir, name, _key(data))
    if parts is None:
        return None
    try:
        return Index(name, parts)
    except (ValueError, EOFError, TypeError):
        _drop(path)
        return None


def _prune(cache_dir: Path, name: str) -> None:
    prefix = name.replace("/", "_") + "."
    entries = []
    for entry in os.scandir(cache_dir):
        if entry.name.startswith(prefix) and entry.name.endswith(".parse"):
            try:
                entries.append((entry.stat().st_mtime_ns, entry.path))
            except OSError:
                pass
    for _, stale in sorted(entries, reverse=True)[KEEP:]:
        try:
            os.unlink(stale)
        except OSError:
            pass
