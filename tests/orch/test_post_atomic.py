"""``wf orch post`` is atomic and idempotent: what can refuse it is checked before its
first write, and a post stopped at any of its writes, then run again, writes nothing
twice (the note, the cost line, the merge, the archive, the orch log line)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git
from tests.cost.test_usage import claude_root, write_session
from tests.orch.test_orch import Orch, lanes_toml, task

AGENT = "a1b2c3"  # the subagent of tests.cost.test_usage.write_session


@pytest.fixture
def o(wf: object) -> Orch:
    return Orch(wf)  # type: ignore[arg-type]


def _snapshot(o: Orch) -> dict[str, object]:
    """What a post may change: the files, the lane record, main, the branches, out/."""
    out = o.root / "out"
    return {
        "tasks": (o.root / "TASKS.md").read_bytes(),
        "archive": (o.root / "DONE.md").read_bytes() if (o.root / "DONE.md").exists() else None,
        "record": (o.root / ".wf" / "orch" / "a.json").read_bytes(),
        "held": sorted(p.name for p in (o.root / ".wf" / "orch").glob("held/*")),
        "main": git(o.root, "rev-parse", "main"),
        "branches": git(o.root, "branch", "--list"),
        "out": sorted(p.name for p in out.iterdir()) if out.exists() else [],
    }


def _notes(o: Orch, tid: str) -> list[str]:
    return list(json.loads(o.wf.ok("show", tid, "--json"))["notes"])


def _cost_lines(o: Orch) -> list[str]:
    path = o.root / "out" / "wf-cost.log"
    return path.read_text().splitlines() if path.exists() else []


def _picked(o: Orch, *script: str) -> str | None:
    """Lane a picks a1 and its scripted worker works it; the reported commit."""
    o.setup(lanes_toml("a"), task("a1", "a", *script))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None
    return rep.commit if rep.commit and rep.commit != "-" else None


@pytest.mark.parametrize("result", ["done", "handback"])
def test_a_missing_transcript_refuses_the_post_before_any_write(o: Orch, result: str) -> None:
    """--agent names a transcript that is not there: exit 1 saying so, and the merge, the
    note, the status and every log are as before; with the transcript there, the post
    goes through once."""
    commit = _picked(o, "write a1.txt x", "nomerge")
    assert commit
    args = ["orch", "post", "a", "--result", result, "--note", "why", "--commit", commit, "--no-pick"]
    before = _snapshot(o)
    r = o.wf(*args, "--agent", AGENT)
    assert r.code == 1, r.err
    assert f"no transcript for agent {AGENT}" in r.err and "nothing was changed" in r.err
    assert _snapshot(o) == before
    write_session(claude_root())
    out = o.wf.ok(*args, "--agent", AGENT)
    assert out.startswith(f"a1: {result}"), out
    assert len(_cost_lines(o)) == 1 and f"agent={AGENT}" in _cost_lines(o)[0]
    assert [e["outcome"] for e in o.orch_log()] == [result]
    if result == "done":
        assert o.archived() == ["a1"]
    else:
        assert [n for n in _notes(o, "a1") if "handback: why" in n] != []


# Where a post can be stopped after some of its writes: the next write fails (its path
# is taken by a folder), as a kill at that point would leave things; then it runs again.
STOPS = {
    "hold": ".wf/orch/held",  # after the status and note
    "cost": "out/wf-cost.log",  # after the hold and the freed tree
    "log": "out/wf-orch.log",  # after the cost line
}


def _block(o: Orch, where: str) -> Path:
    path = o.root / STOPS[where]
    path.parent.mkdir(parents=True, exist_ok=True)
    if where == "hold":
        path.write_text("not a folder\n")  # the hold record cannot be made under it
    else:
        path.mkdir()
    return path


def _unblock(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", list(STOPS))
def test_a_handback_stopped_at_each_write_then_posted_again_writes_nothing_twice(o: Orch, where: str) -> None:
    _picked(o, "write a1.txt x", "nomerge")
    write_session(claude_root())
    args = ("orch", "post", "a", "--result", "handback", "--note", "why", "--agent", AGENT, "--no-pick")
    blocked = _block(o, where)
    r = o.proc(*args)
    assert r.returncode != 0, r.stdout
    _unblock(blocked)
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([n for n in _notes(o, "a1") if "handback: why" in n]) == 1, _notes(o, "a1")
    assert o.status("a1") == "pending"
    assert len(_cost_lines(o)) == 1, _cost_lines(o)
    assert [e["outcome"] for e in o.orch_log()] == ["handback"]
    assert (o.root / ".wf" / "orch" / "held" / "a1.json").exists()
    assert not (o.root / ".wf" / "orch" / "a.json").exists()
    # and once more: posted already, nothing new
    o.proc(*args)
    assert len(_cost_lines(o)) == 1 and len(o.orch_log()) == 1
    assert len([n for n in _notes(o, "a1") if "handback: why" in n]) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["cost", "log"])
def test_a_done_stopped_after_its_merge_then_posted_again_merges_and_counts_once(o: Orch, where: str) -> None:
    """The post merged (the worker had not) and archived, then stopped before the cost
    line, or between the cost line and the orch log line: run again, it is done with one
    merge, one archive line, one cost line and one log line."""
    commit = _picked(o, "write a1.txt x", "nomerge")
    assert commit
    write_session(claude_root())
    args = ("orch", "post", "a", "--result", "done", "--commit", commit, "--agent", AGENT, "--no-pick")
    blocked = _block(o, where)
    r = o.proc(*args)
    assert r.returncode != 0, r.stdout
    assert o.archived() == ["a1"]  # it got as far as the merge
    _unblock(blocked)
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("a1: done as "), r.stdout
    assert o.archived() == ["a1"]
    assert git(o.root, "log", "--merges", "--format=%s", "main").count("a1: Task a1") == 1
    assert len(_cost_lines(o)) == 1 and "done=1" in _cost_lines(o)[0], _cost_lines(o)
    assert [e["outcome"] for e in o.orch_log()] == ["done"]
    assert git(o.root, "status", "--porcelain") == ""


def test_a_crash_logged_but_not_counted_is_finished_not_blocked(o: Orch) -> None:
    """A post of a crash killed after its log line, before the lane record counted the
    crash: run again, it goes on to the one recovery pick (it is not a second crash)."""
    _picked(o, "write a1.txt x", "nomerge")
    saved = (o.root / ".wf" / "orch" / "a.json").read_bytes()
    out = o.wf.ok("orch", "post", "a", "--result", "crashed")
    assert "a1 crashed: one recovery pick" in out and "Recovery:" in out
    rec = json.loads((o.root / ".wf" / "orch" / "a.json").read_text())
    assert rec["crashes"] == 1
    (o.root / ".wf" / "orch" / "a.json").write_bytes(saved)  # as if killed before it was saved
    out = o.wf.ok("orch", "post", "a", "--result", "crashed")
    assert "posted already" in out and "Recovery:" in out, out
    assert o.status("a1").startswith("in progress")
    assert [e["outcome"] for e in o.orch_log()] == ["crashed-recovery"]
    assert json.loads((o.root / ".wf" / "orch" / "a.json").read_text())["crashes"] == 1


def test_a_corrupt_gate_result_refuses_the_post_before_its_merge(o: Orch) -> None:
    commit = _picked(o, "write a1.txt x", "nomerge")
    assert commit
    gate_dir = o.root / ".wf" / "gate"
    gate_dir.mkdir(parents=True)
    (gate_dir / "0123abcd.json").write_text("{not json")
    before = _snapshot(o)
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", commit, "--no-pick")
    assert r.code == 1 and "corrupt record" in r.err and "wf doctor --fix" in r.err, r.err
    assert _snapshot(o) == before  # not merged, not archived
    o.wf.ok("doctor", "--fix")
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", commit, "--no-pick")
    assert out.startswith("a1: done as ") and o.archived() == ["a1"]


def test_a_post_stopped_before_it_marked_the_red_gate_adds_one_fix_task(o: Orch) -> None:
    """A red gate result: the post adds the P0 fix task, then (killed) never marks the
    result handled. Run again, it finds its fix task, and adds no second one."""
    from wf.base import records
    from wf.orch.gate import GateResult

    o.setup(lanes_toml("a", gate="true"), task("a1", "a", "write a1.txt x"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit and o.archived() == ["a1"]
    main = git(o.root, "rev-parse", "main").strip()
    result = o.root / ".wf" / "gate" / f"{main}.json"
    # the worker's merge started the gate (`true`) in the background: let its green result
    # land before it is replaced by a red one, or it would replace the red one
    deadline = time.monotonic() + 60
    while not (result.exists() and records.load(GateResult, result) is not None):
        assert time.monotonic() < deadline, "the gate started by the merge never finished"
        time.sleep(0.05)
    red = GateResult(main, cmd="true", exit=1, ok=False, tail="boom")
    records.save(result, red)
    saved = (o.root / ".wf" / "orch" / "a.json").read_bytes()
    args = ("orch", "post", "a", "--result", "done", "--commit", rep.commit, "--no-pick")
    out = o.wf.ok(*args)
    assert "added P0 task fix-gate-" in out, out
    # as if killed after the fix task was added: the result unmarked, no log line, the record
    records.save(result, red)
    (o.root / "out" / "wf-orch.log").unlink()
    (o.root / ".wf" / "orch" / "a.json").write_bytes(saved)
    out = o.wf.ok(*args)
    assert out.startswith("a1: done-gate-red"), out
    fixes = [t for t in json.loads(o.wf.ok("list", "--json")) if t["id"].startswith("fix-gate-")]
    assert len(fixes) == 1, fixes


def _blocked_on_a_fifo(pid: int) -> bool:
    """Whether the process waits in open() of a FIFO nobody has opened the other end of."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip() == "wait_for_partner"
    except OSError:
        return False


def _open_other_end(fifo: Path, deadline: float) -> None:
    """Let a reader of ``fifo`` through its open: open the writing end, and close it (the
    reader sees an empty file)."""
    while True:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        assert time.monotonic() < deadline, "the post never opened it"
        time.sleep(0.01)


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs /proc/PID/wchan (Linux)")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["cost", "log"])
def test_kill_9_of_a_handback_post_at_its_cost_or_log_line_then_posted_again(o: Orch, where: str) -> None:
    """kill -9 of a real `wf orch post` blocked opening the cost log (its note and hold
    written), or the orch log (its cost line written too): run again, it writes the note,
    the cost line and the log line once each."""
    _picked(o, "write a1.txt x", "nomerge")
    write_session(claude_root())
    fifo = o.root / STOPS[where]
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    args = ("orch", "post", "a", "--result", "handback", "--note", "why", "--agent", AGENT, "--no-pick")
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", *args], cwd=o.root, env=o.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        if where == "log":  # it reads the orch log first (was it posted already?): let it
            _open_other_end(fifo, deadline)
        while not (_blocked_on_a_fifo(p.pid) and "handback: why" in (o.root / "TASKS.md").read_text()):
            assert p.poll() is None, "the post ended instead of blocking"
            assert time.monotonic() < deadline, "the post never reached the FIFO"
            time.sleep(0.01)
        if where == "log":
            assert len(_cost_lines(o)) == 1  # killed between its cost line and its log line
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    fifo.unlink()
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([n for n in _notes(o, "a1") if "handback: why" in n]) == 1, _notes(o, "a1")
    assert len(_cost_lines(o)) == 1, _cost_lines(o)
    assert [e["outcome"] for e in o.orch_log()] == ["handback"]
    assert not (o.root / ".wf" / "orch" / "a.json").exists()


def test_a_report_whose_note_is_not_utf8_is_posted_with_the_bad_bytes_marked(o: Orch) -> None:
    """A worker's final message piped in with a byte that is not UTF-8: the post goes
    through (a night has nobody to fix a pipe), the bad byte shown as U+FFFD."""
    _picked(o, "write a1.txt x", "nomerge")
    report = b"result: handback\ncommit: -\nfollowups: -\nnote: caf\xe9 is too hard\n"
    r = subprocess.run(
        [sys.executable, "-m", "wf", "orch", "post", "a", "--report", "-", "--no-pick"],
        cwd=o.root, env=o.env, input=report, capture_output=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert any("handback: caf\ufffd is too hard" in n for n in _notes(o, "a1")), _notes(o, "a1")
