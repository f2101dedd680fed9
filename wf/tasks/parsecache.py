"""A cache of parsed TASKS.md files in ``.wf/cache/``, keyed by a hash of the exact bytes.

Parsing a 10,000-task file costs about 100 ms of pure Python; loading its parse from
here costs a tenth of that. The key is a BLAKE2b digest of the file's bytes (plus the
cache format and wf version), so a cached parse is never used for other content:
there is nothing to invalidate. Writers store the parse of what they wrote, so the next
command starts warm. Everything here is best effort: a missing, corrupt or unwritable
cache only means parsing again.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path

from wf import __version__
from wf.base.errors import IssueKind, ParseIssue
from wf.tasks.taskfile import Task, TasksFile

FORMAT = 6  # bump whenever the rows change shape, or the parser finds other issues


def _key(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=20, person=b"wf-tasks").digest() + __version__.encode()


KEEP = 4  # parses kept per file: a person's save and wf's writes can alternate


def _file(cache_dir: Path, name: str, key: bytes) -> Path:
    return cache_dir / f"{name.replace('/', '_')}.{key[:8].hex()}.parse"


def load(cache_dir: Path, name: str, data: bytes, text: str) -> TasksFile | None:
    try:
        key = _key(data)
        with open(_file(cache_dir, name, key), "rb") as f:
            payload = marshal.loads(f.read())  # loads of bytes is several times faster than load
        fmt, stored_key, rows, issues = payload
        if fmt != FORMAT or stored_key != key:
            return None
        tasks = [Task(*row) for row in rows]
        if tasks and not (isinstance(tasks[0].kv, dict) and isinstance(tasks[0].raw_pairs, str)):
            return None
        found = [ParseIssue(name, ln, lv, msg, tk, IssueKind(kd)) for ln, lv, msg, tk, kd in issues]
        return TasksFile(name, text, tasks, found)
    except (OSError, ValueError, EOFError, TypeError):
        return None


def _compact(t: Task) -> str:
    raw = t.raw_pairs
    if isinstance(raw, str):  # still in the form the cache gave it (an edit moved, not changed, it)
        return raw
    return "\n".join(f"{k}:{v}" for k, v in raw)


def store(cache_dir: Path, doc: TasksFile, data: bytes) -> None:
    # Field lines as one string per task: marshal reads a string many times faster
    # than a tuple of small tuples.
    rows = [(t.id, t.title, t.start, t.end, _compact(t), t.kv, t.span) for t in doc.tasks]
    issues = [(i.line, i.level, i.message, i.task, i.kind.value) for i in doc.issues]
    key = _key(data)
    path = _file(cache_dir, doc.path, key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((FORMAT, key, rows, issues)))
        os.replace(tmp, path)
        _prune(cache_dir, doc.path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


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
