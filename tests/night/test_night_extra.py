"""More of the night: a worker whose own imports fail (a cmd lane run outside its venv),
and orchestration records that cannot be trusted (a hold on a handed-back task, a gate
result), reported, never read as "none", and moved aside by ``wf doctor --fix``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import WfRunner, git
from tests.night.test_night import _alive
from tests.orch.test_orch import Orch, lane_worker_pid, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def test_a_corrupt_hold_record_is_reported_and_moved_aside(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    held = o.root / ".wf" / "orch" / "held" / "a1.json"
    held.parent.mkdir(parents=True)
    held.write_text('{"id": "a1", "digest": 5}')
    r = o.wf("orch", "pick", "a")
    assert r.code == 1 and "corrupt record" in r.err and "a1.json" in r.err
    assert o.status("a1") == "pending"  # nothing was claimed
    out = o.wf("doctor").out
    assert "held: a1: hold record (the loop may pick the task again) cannot be trusted" in out
    assert "[fixed]" not in out and held.exists()
    out = o.wf("doctor", "--fix").out
    assert "held: a1:" in out and "moved to a1.json.corrupt-" in out and "[fixed]" in out
    assert not held.exists() and list(held.parent.glob("a1.json.corrupt-*"))
    assert "Task: a1" in o.wf.ok("orch", "pick", "a")


def test_a_corrupt_gate_result_is_reported_never_read_as_green(o: Orch) -> None:
    o.setup(lanes_toml("a", gate="true"), task("a1", "a", "write a1.txt x"))
    sha = git(o.root, "rev-parse", "main").strip()
    gate_dir = o.root / ".wf" / "gate"
    gate_dir.mkdir(parents=True)
    (gate_dir / f"{sha}.log").write_text("")
    (gate_dir / f"{sha}.json").write_text("{not json")
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", rep.commit, "--no-pick")
    assert r.code == 1 and "corrupt record" in r.err and "wf doctor --fix" in r.err
    out = o.wf("doctor").out
    assert f"gate: {sha}: gate result (no fix task will come of it) cannot be trusted: not JSON" in out
    out = o.wf("doctor", "--fix").out
    assert f"gate: {sha}:" in out and "[fixed]" in out
    assert not (gate_dir / f"{sha}.json").exists() and not (gate_dir / f"{sha}.log").exists()
    assert len(list(gate_dir.glob(f"{sha}.*.corrupt-*"))) == 2
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", rep.commit, "--no-pick")
    assert out.startswith("a1: done as ")


def test_a_worker_whose_imports_fail_is_infrastructure(o: Orch) -> None:
    """A cmd lane whose program starts but cannot import its own modules (run outside
    its venv): the claim is released byte for byte, nothing is committed or counted
    against the task, the lane stops with Python's own words, and the run exits 1."""
    cmd = json.dumps([sys.executable, "-c", "import no_such_module_wf"])
    o.setup(f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n', task("a1", "a", "write a1.txt x"))
    before = (o.root / "TASKS.md").read_bytes()
    commits = git(o.root, "rev-list", "--count", "main")
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stop lane a: cmd could not run (tool): ModuleNotFoundError: No module named" in r.stdout
    assert (o.root / "TASKS.md").read_bytes() == before
    assert git(o.root, "rev-list", "--count", "main") == commits
    assert o.wf.ok("orch", "status").strip() == "no active lanes"
    assert "a1: released" in r.stdout and "crashed" not in r.stdout


@pytest.mark.timeout(120)
def test_a_post_that_failed_is_posted_by_the_next_run_not_worked_again(o: Orch) -> None:
    """The worker merged, but its post could not be made (a gate result that cannot be
    trusted): the run stops the lane with the error and exits 1; once wf doctor --fix
    has moved the record aside, the next run posts the work already merged, never
    starting the worker again."""
    o.setup(lanes_toml("a", gate="true"), task("a1", "a", "write a1.txt x"))
    sha = git(o.root, "rev-parse", "main").strip()
    gate_dir = o.root / ".wf" / "gate"
    gate_dir.mkdir(parents=True)
    (gate_dir / f"{sha}.json").write_text("{not json")
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stop lane a: post failed:" in r.stdout and "corrupt record" in r.stdout
    assert o.archived() == ["a1"]  # the worker's own merge went through
    assert "[fixed]" in o.wf("doctor", "--fix").out
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "taking over a finished worker" in r.stdout and "start a1" not in r.stdout
    assert [e["outcome"] for e in o.orch_log()] == ["done"]


@pytest.mark.timeout(120)
def test_orch_run_piped_into_head_finishes_and_leaves_nothing_to_take_over(o: Orch) -> None:
    """The shell's own pipe: 'wf orch run | head -1' exits 0 having done every task, and
    the next run finds neither an ownerless record nor an archived task to post."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt y"))
    line = f"{shlex.quote(sys.executable)} -m wf orch run a | head -1; exit ${{PIPESTATUS[0]}}"
    p = subprocess.run(
        ["bash", "-c", line], cwd=o.root, env=o.env, capture_output=True, text=True, timeout=100,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(p.stdout.splitlines()) == 1
    assert sorted(o.archived()) == ["a1", "a2"]
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "interactive orchestrator" not in r.stdout and "post it" not in r.stdout
    assert "no runner-ready task" in r.stdout


@pytest.mark.timeout(120)
def test_after_a_reboot_a_record_whose_owner_pid_was_reused_is_taken_over(o: Orch) -> None:
    """A reboot: the loop and its worker are gone, and their pids now belong to other
    processes. The record names the processes it meant (pid and start time), so the
    next run sees its owner is gone and takes the task over in place."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "hang"))
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", "orch", "run", "a"], cwd=o.root, env=o.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    rec_path = o.root / ".wf" / "orch" / "a.json"
    worker = lane_worker_pid(o.root, "a")
    os.killpg(p.pid, signal.SIGKILL)  # the machine goes down: the loop and its worker
    p.wait(timeout=30)
    try:
        os.killpg(os.getpgid(worker), signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    while _alive(worker):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.5)  # a reboot takes a while: the processes that now have those pids start later
    others = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    try:
        rec = json.loads(rec_path.read_text())
        rec["owner"], rec["pid"] = others[0].pid, others[1].pid  # their pids, reused
        rec_path.write_text(json.dumps(rec))
        r = o.proc("orch", "run", "a", timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "held by" not in r.stdout
        assert "start a1" in r.stdout and "recovery:" in r.stdout
        assert o.archived() == ["a1"]
        assert all(q.poll() is None for q in others)  # nothing of theirs was touched
    finally:
        for q in others:
            q.kill()
            q.wait()


def test_a_crashed_workers_tree_is_kept_for_its_recovery(o: Orch) -> None:
    """The worker died mid-rebase (its tree detached, with uncommitted changes): the
    crash's post keeps the tree the task's, so the recovery pick looks only there; it
    refuses to switch a tree holding someone's changes, and never readies a second tree
    beside the stranded work."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    tree = o.root / ".worktrees" / "a"
    git(tree, "switch", "-q", "--detach")
    (tree / "half.txt").write_text("half done\n")
    r = o.wf("orch", "post", "a", "--result", "crashed")
    assert r.code == 1 and "has uncommitted changes on another branch than a/a1" in r.err
    assert (tree / "half.txt").read_text() == "half done\n"
    assert not (o.root / ".worktrees" / "a-2").exists()
    rec = json.loads((o.root / ".wf" / "wt" / "a.json").read_text())
    assert rec["task"] == "a1"
