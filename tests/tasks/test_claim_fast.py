"""A claim of a runner-ready task (``wf status ID progress WHO``) is made from the parse
cache's index and the claimed task's chunk, without loading the whole backlog
(``ops._fast_claim``). It must write exactly what the full path writes, leave a cache
that gives exactly what a parse gives, and decline to the full path (which refuses) in
every case the full path refuses. Each refusal below is of a file whose parse is cached
(``_warm``), so that the fast path is asked first."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner
from wf.base import settle
from wf.tasks import backlog, edits, parsecache, taskfile

TASK = "## {id}: Task {id}\nModel: sonnet\nDone: it works\n{extra}\nSome text of {id}.\n\n"


def _task(task_id: str, extra: str = "") -> str:
    return TASK.format(id=task_id, extra=extra.rstrip("\n") + "\n" if extra else "")


def _write(wf: WfRunner, text: str, archive: str | None = None) -> bytes:
    """Write TASKS.md (and DONE.md), then have a command cache its parse."""
    (wf.root / "TASKS.md").write_bytes(text.encode())
    if archive is not None:
        (wf.root / "DONE.md").write_text(archive)
    _warm(wf)
    return text.encode()


def _warm(wf: WfRunner) -> None:
    wf("check")  # loads the backlog: stores the parse of the file's bytes
    data = (wf.root / "TASKS.md").read_bytes()
    assert parsecache.open_index(wf.root / ".wf" / "cache", "TASKS.md", data) is not None


def _rows(doc: taskfile.TasksFile) -> list[tuple[Any, ...]]:
    return [(t.id, t.title, t.start, t.end, t.pairs, t.kv, t.span) for t in doc.tasks]


def _cache_is_a_parse(wf: WfRunner) -> None:
    data = (wf.root / "TASKS.md").read_bytes()
    cached = parsecache.load(wf.root / ".wf" / "cache", "TASKS.md", data, data.decode())
    fresh = taskfile.parse(data)
    assert cached is not None
    assert _rows(cached) == _rows(fresh)
    assert [str(i) for i in cached.issues] == [str(i) for i in fresh.issues]


def _claimed_as_the_full_path_would(before: bytes, after: bytes, task_id: str) -> None:
    value = taskfile.parse(after).task(task_id).get("status")
    assert value is not None and value.startswith("in progress: bench since ")
    assert after == edits.set_field(taskfile.parse(before), task_id, "status", value).render()


@pytest.fixture
def full_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the loads of the whole backlog (``backlog.from_bytes``)."""
    calls: list[int] = []
    real = backlog.from_bytes

    def counted(*args: Any) -> backlog.Backlog:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(backlog, "from_bytes", counted)
    return calls


def test_a_fast_claim_writes_and_caches_what_the_full_path_would(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch, full_loads: list[int]
) -> None:
    """Claims in two chunks (the second moves the first's shifts again), a task with
    warnings after them (their lines move), CRLF lines: each claim is the full path's
    edit byte for byte, and the cache then gives what a parse gives, also to the next
    write of the full path."""
    monkeypatch.setattr(parsecache, "CHUNK", 3)
    ids = [f"t{i}" for i in range(10)]
    text = "# Tasks\n\n" + "".join(_task(i, "Colour: red" if i == "t8" else "") for i in ids)
    data = _write(wf, text.replace("\n", "\r\n"))
    full_loads.clear()
    for task_id in ("t4", "t1", "t9"):
        wf.ok("status", task_id, "progress", "bench")
        after = (wf.root / "TASKS.md").read_bytes()
        _claimed_as_the_full_path_would(data, after, task_id)
        _cache_is_a_parse(wf)
        data = after
    assert full_loads == []  # all three were fast
    wf.ok("note", "t7", "a note")  # the full path loads the shifted chunks
    assert full_loads == [1]
    _cache_is_a_parse(wf)
    assert "unknown field 'Colour'" in wf("check").out


def test_a_claim_of_a_ready_task_loads_no_whole_backlog(wf: WfRunner, full_loads: list[int]) -> None:
    """The point of the fast path: neither the whole parse nor the backlog's check."""
    _write(wf, "".join(_task(f"t{i}") for i in range(5)))
    full_loads.clear()
    wf.ok("status", "t2", "progress", "bench")
    assert full_loads == []
    assert "in progress: bench" in wf.ok("show", "t2")


def test_without_a_cached_parse_the_full_path_claims(wf: WfRunner, full_loads: list[int]) -> None:
    _write(wf, _task("a") + _task("b"))
    shutil.rmtree(wf.root / ".wf" / "cache")
    full_loads.clear()
    wf.ok("status", "b", "progress", "bench")
    assert full_loads == [1]
    wf.ok("status", "a", "progress", "bench")  # the full path stored the parse: fast again
    assert full_loads == [1]


def _refused(wf: WfRunner, task_id: str, *needles: str) -> None:
    before = (wf.root / "TASKS.md").read_bytes()
    r = wf("status", task_id, "progress", "bench")
    assert r.code == 1, (r.code, r.out, r.err)
    for needle in needles:
        assert needle in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_an_error_elsewhere_in_the_file_stops_a_claim(wf: WfRunner) -> None:
    """A structural error (a level-2 heading that is not a task) stops every write."""
    _write(wf, _task("a") + "## Not a task heading\n\n" + _task("b"))
    _refused(wf, "a", "level-2 heading is not a task")


def test_a_task_in_the_archive_too_is_not_claimed(wf: WfRunner) -> None:
    archive = "- 2026-01-01T00:00Z a lane=sonnet model=sonnet commit=- -- Task a\n"
    _write(wf, _task("a") + _task("b"), archive)
    _refused(wf, "a", "already in the archive")


def test_a_task_in_an_after_cycle_is_not_claimed(wf: WfRunner) -> None:
    """``x`` is archived (so ``a``'s After is met) but still in TASKS.md: the cycle a -> x
    -> a is an error of ``a``."""
    archive = "- 2026-01-01T00:00Z x lane=sonnet model=sonnet commit=- -- Task x\n"
    _write(wf, _task("a", "After: x") + _task("x", "After: a"), archive)
    _refused(wf, "a", "After cycle: a -> x -> a")


def test_a_task_with_an_unknown_parent_is_not_claimed(wf: WfRunner) -> None:
    _write(wf, _task("a", "Parent: nosuch") + _task("b"))
    _refused(wf, "a", "Parent names unknown id 'nosuch'")


def test_a_task_with_open_slices_is_not_claimed(wf: WfRunner) -> None:
    """Its children are found in the index: the fast path's doc holds the task alone."""
    _write(wf, _task("a") + _task("b") + _task("c", "Parent: a"))
    _refused(wf, "a", "not runner-ready", "open slices: c")


def test_a_task_claimed_already_or_not_ready_is_not_claimed(wf: WfRunner) -> None:
    _write(wf, _task("a", "Status: in progress: me since 2026-01-01T00:00Z") + "## b: Task b\n\n")
    _refused(wf, "a", "already claimed by me since")
    _refused(wf, "b", "not runner-ready", "no Model")


def test_a_file_that_is_not_utf8_stops_a_claim_with_its_error(wf: WfRunner) -> None:
    _write(wf, _task("a") + _task("b"))
    path = wf.root / "TASKS.md"
    path.write_bytes(path.read_bytes() + b"caf\xe9\n")
    _refused(wf, "a", "not UTF-8 text (byte 0xe9)")


def test_a_save_between_the_read_and_the_write_starts_the_claim_over(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch, full_loads: list[int]
) -> None:
    """A person's editor saves TASKS.md after the fast claim read it and before its
    write: the write is not made, the claim starts over from the person's file (cold in
    the cache: the full path), and both the save and the claim stand."""
    _write(wf, _task("a") + _task("b"))
    real = settle.replace_checked
    saves: list[bytes] = []

    def save_first(path: Path, data: bytes, expect: bytes | None, *args: Any) -> Any:
        if not saves and path.name == "TASKS.md" and expect is not None:
            saves.append(expect + _task("c").encode())
            path.write_bytes(saves[0])
        return real(path, data, expect, *args)

    monkeypatch.setattr(settle, "replace_checked", save_first)
    full_loads.clear()
    wf.ok("status", "a", "progress", "bench")
    after = (wf.root / "TASKS.md").read_bytes()
    _claimed_as_the_full_path_would(saves[0], after, "a")
    assert full_loads == [1]


def test_a_file_with_a_byte_order_mark_keeps_it_through_claims(wf: WfRunner, full_loads: list[int]) -> None:
    """The first task's edit parses the whole file (the mark belongs to the file): that
    claim goes the full way; a later task's is fast. Both are the full path's edit."""
    data = _write(wf, "\ufeff" + _task("a") + _task("b"))
    full_loads.clear()
    for task_id, loads in (("a", [1]), ("b", [1])):
        wf.ok("status", task_id, "progress", "bench")
        after = (wf.root / "TASKS.md").read_bytes()
        _claimed_as_the_full_path_would(data, after, task_id)
        assert after.startswith(b"\xef\xbb\xbf") and full_loads == loads
        _cache_is_a_parse(wf)
        data = after
