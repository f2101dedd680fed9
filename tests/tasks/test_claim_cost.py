"""What a claim (or any write) does once and not twice: the cross-file check runs once, the
parse cache re-marshals only the chunk of tasks the edit changed, and the same bytes are
not stored again. Each of these is about work, so each test counts it; and the cache a
cheap store leaves must still give exactly what a parse gives."""

from __future__ import annotations

import gc
import marshal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import WfRunner
from wf.tasks import backlog, parsecache, taskfile


def _add_tasks(wf: WfRunner, n: int) -> list[str]:
    return [wf.ok("add", f"Task {i}", "--model", "sonnet", "--done", "x").split()[-1] for i in range(n)]


def _cached(wf: WfRunner) -> taskfile.TasksFile | None:
    data = (wf.root / "TASKS.md").read_bytes()
    return parsecache.load(wf.root / ".wf" / "cache", "TASKS.md", data, data.decode())


def _rows(doc: taskfile.TasksFile) -> list[tuple[Any, ...]]:
    return [(t.id, t.title, t.start, t.end, t.pairs, t.kv, t.span) for t in doc.tasks]


def test_a_status_change_checks_the_backlog_once(wf: WfRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write checks the whole backlog; the status change then asks for its task's
    errors: one check, not two (at 10,000 tasks each costs ~15 ms). (A claim of a ready
    task checks none: tests/tasks/test_claim_fast.py.)"""
    task_id = _add_tasks(wf, 2)[0]
    calls: list[str] = []
    real = backlog.Backlog._cycles

    def counted(self: backlog.Backlog) -> Any:
        calls.append("cycles")
        return real(self)

    monkeypatch.setattr(backlog.Backlog, "_cycles", counted)
    wf.ok("status", task_id, "awaiting", "which one?")
    assert calls == ["cycles"]


def _content(value: Any) -> bool:
    """A chunk of content rows (id, title, fields, kv), not of places."""
    return isinstance(value, list) and bool(value) and len(value[0]) == 4 and isinstance(value[0][3], dict)


@pytest.mark.parametrize("write", [("status", "progress", "me"), ("status", "awaiting", "which one?")])
def test_a_write_marshals_only_the_chunk_it_changed(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch, write: tuple[str, ...]
) -> None:
    """A claim (the fast path) and a status change (the full path) alike."""
    monkeypatch.setattr(parsecache, "CHUNK", 4)
    ids = _add_tasks(wf, 20)
    wf.ok("list")  # loads the parse the last add stored: this process knows its chunks
    dumped: list[int] = []

    def dumps(value: Any, *args: Any) -> bytes:
        if _content(value):
            dumped.append(len(value))
        return marshal.dumps(value, *args)

    monkeypatch.setattr(parsecache, "marshal", SimpleNamespace(dumps=dumps, loads=marshal.loads))
    wf.ok(write[0], ids[9], *write[1:])
    assert dumped == [4]  # the chunk of ids[8:12], and none of the other four
    monkeypatch.setattr(parsecache, "marshal", marshal)
    cached = _cached(wf)
    assert cached is not None
    fresh = taskfile.parse((wf.root / "TASKS.md").read_bytes())
    assert _rows(cached) == _rows(fresh)


def test_the_cache_after_many_edits_gives_what_a_parse_gives(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks kept, split and remade over adds, claims, notes and dones stay exact."""
    monkeypatch.setattr(parsecache, "CHUNK", 3)
    ids = _add_tasks(wf, 10)
    wf.ok("status", ids[4], "progress", "me")
    wf.ok("note", ids[0], "a note on the first")
    wf.ok("done", ids[7])
    wf.ok("add", "One more", "--model", "haiku", "--done", "y")
    wf.ok("set", ids[2], "--title", "Renamed")
    wf.ok("status", ids[4], "pending")
    cached = _cached(wf)
    assert cached is not None
    assert _rows(cached) == _rows(taskfile.parse((wf.root / "TASKS.md").read_bytes()))


def test_the_same_bytes_are_not_stored_again(wf: WfRunner) -> None:
    """A claim given back puts back the bytes the cache has a parse of: that file stays."""
    task_id = _add_tasks(wf, 3)[1]
    data = (wf.root / "TASKS.md").read_bytes()
    entry = parsecache._file(wf.root / ".wf" / "cache", "TASKS.md", parsecache._key(data))
    inode = entry.stat().st_ino
    wf.ok("status", task_id, "progress", "me")
    wf.ok("status", task_id, "pending")
    assert (wf.root / "TASKS.md").read_bytes() == data
    assert entry.stat().st_ino == inode


def test_a_corrupt_cache_file_is_stored_again(wf: WfRunner) -> None:
    """A file that does not load is removed, so that the store after the parse writes a
    good one (not skipped as stored already)."""
    _add_tasks(wf, 2)
    data = (wf.root / "TASKS.md").read_bytes()
    for p in (wf.root / ".wf" / "cache").glob("*.parse"):
        p.write_bytes(b"\x00garbage")
    assert "Task 1" in wf.ok("show", "task-1")
    cached = _cached(wf)
    assert cached is not None and _rows(cached) == _rows(taskfile.parse(data))


def test_collection_is_back_on_after_a_write_and_a_read(wf: WfRunner) -> None:
    """Collection pauses while a parse is built or loaded, and only then."""
    task_id = _add_tasks(wf, 2)[0]
    assert gc.isenabled()
    wf.ok("status", task_id, "progress", "me")
    assert gc.isenabled()
    wf.ok("show", task_id)
    assert gc.isenabled()
    gc.disable()
    try:
        with parsecache.gc_paused():
            pass
        assert not gc.isenabled()  # a caller's choice is kept too
    finally:
        gc.enable()


def test_a_cache_that_cannot_be_written_is_no_error(wf: WfRunner, tmp_path: Path) -> None:
    ids = _add_tasks(wf, 2)
    cache = wf.root / ".wf" / "cache"
    for p in cache.iterdir():
        p.unlink()
    cache.rmdir()
    cache.write_text("not a folder")
    wf.ok("status", ids[0], "progress", "me")
    assert "in progress: me" in wf.ok("show", ids[0])


def test_a_list_answered_from_its_cache_imports_no_parser(wf: WfRunner) -> None:
    """`wf list --runner` asked again with nothing changed reads the files and its cached
    answer: the TASKS.md parser, the archive reader and the parse cache stay unimported."""
    import os
    import subprocess
    import sys
    import textwrap

    _add_tasks(wf, 3)
    wf.ok("list", "--runner")  # stores the answer
    code = textwrap.dedent(
        f"""
        import sys
        from wf.cli import main
        assert main(["-C", {str(wf.root)!r}, "list", "--runner"]) == 0
        print(sorted(m for m in ("wf.tasks.taskfile", "wf.tasks.archive", "wf.tasks.parsecache") if m in sys.modules))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "[]", p.stdout


def test_what_a_parse_leaves_is_frozen_once_per_process(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first parse the collector no longer walks the loaded tasks (gc.freeze);
    a long-running process does that once, not at every write."""
    task_id = _add_tasks(wf, 2)[0]
    gc.unfreeze()
    monkeypatch.setattr(parsecache, "_froze", False)
    try:
        wf.ok("show", task_id)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        wf.ok("status", task_id, "progress", "me")
        wf.ok("show", task_id)
        assert gc.get_freeze_count() <= frozen  # frozen objects freed since, none added
        assert gc.isenabled()
    finally:
        gc.unfreeze()
