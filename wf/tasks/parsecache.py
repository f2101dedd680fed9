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
"""

from __future__ import annotations

import gc
import hashlib
import marshal
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wf import __version__
from wf.base.errors import IssueKind, ParseIssue
from wf.base.fsutil import atomic_write
from wf.tasks.taskfile import Task, TasksFile

FORMAT = 7  # bump whenever the rows change shape, or the parser finds other issues
CHUNK = 256  # tasks per marshalled chunk of content

# id, title, field lines ("Key:value" joined by newlines), fields (lowercased key -> value)
Content = tuple[str, str, str, dict[str, str]]

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


def _load(cache_dir: Path, name: str, data: bytes, text: str) -> TasksFile | None:
    key = _key(data)
    path = _file(cache_dir, name, key)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        fmt, stored_key, blobs, places, issues = marshal.loads(raw)  # loads of bytes: faster than load
        if fmt != FORMAT or stored_key != key:
            raise ValueError("another format or key")
        chunks: list[list[Content]] = [marshal.loads(b) for b in blobs]
        new = tuple.__new__  # a Task without the Python-level __new__ of NamedTuple: ~3 ms less
        rows = zip((c for chunk in chunks for c in chunk), places, strict=True)  # ValueError if they disagree
        tasks = [new(Task, (i, title, s, e, fl, kv, span)) for (i, title, fl, kv), (s, e, span) in rows]
        if tasks and not (isinstance(tasks[0].kv, dict) and isinstance(tasks[0].raw_pairs, str)):
            raise ValueError("rows of another shape")
        found = [ParseIssue(name, ln, lv, msg, tk, IssueKind(kd)) for ln, lv, msg, tk, kd in issues]
    except (ValueError, EOFError, TypeError):
        try:  # not left in place: a store of the same bytes would take it as stored
            path.unlink()
        except OSError:
            pass
        return None
    _remember(chunks, blobs)
    return TasksFile(name, text, tasks, found)


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
    places = [(t.start, t.end, t.span) for t in doc.tasks]
    issues = [(i.line, i.level, i.message, i.task, i.kind.value) for i in doc.issues]
    try:
        atomic_write(path, marshal.dumps((FORMAT, key, blobs, places, issues)), durable=False)  # a cache
        _prune(cache_dir, doc.path)
    except OSError:
        pass
    _remember(chunks, blobs)


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
