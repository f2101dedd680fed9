"""The parse cache gives exactly what parsing gives, and never for other bytes."""

from __future__ import annotations

from pathlib import Path

from wf.base.errors import IssueKind
from wf.tasks import parsecache, taskfile

TEXT = "# T\n\n## a: A\nMODEL: haiku\nNote: one\nNote: two\n\nbody\n\n## b: B\nDone: x\n##warn\n"


def test_round_trip_equals_parse(tmp_path: Path) -> None:
    data = TEXT.encode()
    doc = taskfile.parse(data)
    parsecache.store(tmp_path, doc, data)
    cached = parsecache.load(tmp_path, "TASKS.md", data, TEXT)
    assert cached is not None
    assert [(t.id, t.title, t.start, t.end, t.pairs, t.kv, t.span) for t in cached.tasks] == [
        (t.id, t.title, t.start, t.end, t.pairs, t.kv, t.span) for t in doc.tasks
    ]
    assert [str(i) for i in cached.issues] == [str(i) for i in doc.issues]
    assert cached.task("a").notes == ["one", "two"]


def test_other_bytes_miss_and_corrupt_files_are_ignored(tmp_path: Path) -> None:
    data = TEXT.encode()
    parsecache.store(tmp_path, taskfile.parse(data), data)
    other = TEXT.replace("haiku", "opus")
    assert parsecache.load(tmp_path, "TASKS.md", other.encode(), other) is None
    for f in tmp_path.iterdir():
        f.write_bytes(b"\x00garbage")
    assert parsecache.load(tmp_path, "TASKS.md", data, TEXT) is None


def test_keeps_a_few_entries(tmp_path: Path) -> None:
    for i in range(10):
        text = TEXT + f"\n## t{i}: T\n"
        parsecache.store(tmp_path, taskfile.parse_text(text), text.encode())
    assert len(list(tmp_path.glob("*.parse"))) == parsecache.KEEP


def test_an_issue_keeps_its_kind_through_the_cache(tmp_path: Path) -> None:
    """Code acts on an issue's kind (an unclosed fence refuses an edit): a cached parse
    must give the same kinds as a fresh one."""
    data = b"# Tasks\n\n## a: A\n```\n## b: B\n"
    doc = taskfile.parse(data)
    assert [i.kind for i in doc.issues] == [IssueKind.UNCLOSED_FENCE]
    parsecache.store(tmp_path, doc, data)
    cached = parsecache.load(tmp_path, "TASKS.md", data, data.decode())
    assert cached is not None
    assert [(i.line, i.kind) for i in cached.issues] == [(i.line, i.kind) for i in doc.issues]
