"""The orchestration loop with the scripted worker: pick, the worker's four lines, post."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from wf.orch import report as orchrun

ROOT = Path(__file__).resolve().parent.parent.parent


def lanes_toml(*names: str, gate: str | None = None) -> str:
    cmd = json.dumps([sys.executable, "-m", "wf.scripted"])
    out = f"gate = {json.dumps(gate)}\n" if gate else ""
    for n in names:
        out += f'[lanes.{n}]\nmodel = "m{n}"\nadapter = "cmd"\ncmd = {cmd}\n'
    return out


def task(tid: str, lane: str, *script: str, done: str = "true", extra: str = "") -> str:
    body = "".join(f"script: {s}\n" for s in script)
    fields = f"Model: m{lane}\nDone: {done}\n" + (f"{extra}\n" if extra else "")
    return f"\n## {tid}: Task {tid}\n{fields}\n{body}"


class Orch:
    def __init__(self, wf: WfRunner) -> None:
        self.wf = wf
        self.root = wf.root
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), WF_RESULT_GRACE="0.5")

    def setup(self, toml: str, tasks: str) -> None:
        (self.root / "wf.toml").write_text(toml)
        (self.root / "TASKS.md").write_text("# Tasks\n" + tasks)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", "setup")

    def proc(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return wfproc.run(
            [sys.executable, "-m", "wf", *args], cwd=self.root, capture_output=True, text=True, env=self.env,
            timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def work(self, prompt: str) -> orchrun.Report | None:
        """Run the scripted worker on a pick's prompt, as an orchestrator's worker would."""
        p = subprocess.run(
            [sys.executable, "-m", "wf.scripted"], input=prompt, capture_output=True, text=True, env=self.env,
            cwd=self.root, timeout=120,
        )  # fmt: skip
        return orchrun.read_report(p.stdout)

    def status(self, tid: str) -> str:
        return str(json.loads(self.wf.ok("show", tid, "--json"))["status"])

    def archived(self) -> list[str]:
        return [e["id"] for e in json.loads(self.wf.ok("log", "-n", "100", "--json"))]

    def orch_log(self) -> list[dict[str, str]]:
        path = self.root / "out" / "wf-orch.log"
        if not path.exists():
            return []
        return [dict(p.split("=", 1) for p in line.split()) for line in path.read_text().splitlines()]


def lane_worker_pid(root: Path, lane: str, timeout: float = 60) -> int:
    """The worker pid in the lane's orchestration record, once a running loop wrote it."""
    record = root / ".wf" / "orch" / f"{lane}.json"
    deadline = time.monotonic() + timeout
    while not (record.exists() and json.loads(record.read_text()).get("pid")):
        assert time.monotonic() < deadline, f"no worker pid in {record}"
        time.sleep(0.05)
    return int(json.loads(record.read_text())["pid"])


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_orch_run_three_lanes(o: Orch) -> None:
    tasks = (
        task("a1", "a", "write a1.txt hello", "followup Tidy after a1", extra="Prio: 1")
        + task("a2", "a", "awaiting Which colour?", extra="Prio: 3")
        + task("b1", "b", "slice b1-x=First half|b1-y=Second half", "write b1.txt joined", extra="Effort: 6")
        + task("b2", "b", "write b2.txt x", done='`python3 -c "raise SystemExit(1)"`', extra="Prio: 3")
        + task("c1", "c", "raise mb", "write c1.txt x", extra="Prio: 1")
        + task("c2", "c", "write c2.txt x", "wip half way", extra="Prio: 2")
        + task("owner-only", "a", extra="Sessions: owner")
    )
    o.setup(lanes_toml("a", "b", "c"), tasks)
    start = git(o.root, "rev-parse", "main").strip()
    r = o.proc("orch", "run", timeout=200)
    assert r.returncode == 4, r.stderr + r.stdout  # a2 awaits, b2 was handed back, c2 is wip: a person
    out = r.stdout
    done = o.archived()
    for tid in ("a1", "tidy-after-a1", "b1-x", "b1-y", "b1", "c1"):
        assert tid in done, (tid, out)
    assert done.count("a1") == 1
    assert o.status("a2") == "awaiting: Which colour?"
    assert o.status("b2") == "pending" and "handback: Done check failed" in " ".join(
        json.loads(o.wf.ok("show", "b2", "--json"))["notes"]
    )
    assert json.loads(o.wf.ok("show", "c1", "--json"))["model"] == "mb"
    assert o.status("c2") == "wip: half way"
    assert o.status("owner-only") == "pending"
    outcomes = {(e["id"], e["outcome"]) for e in o.orch_log()}
    assert {
        ("a1", "done"),
        ("b1", "sliced"),
        ("a2", "awaiting"),
        ("b2", "handback"),
        ("c1", "model-raised"),
        ("c2", "wip"),
        ("b1", "done"),
    } <= outcomes
    assert "a: a2 awaits an answer: Which colour? (held for a person; the lane goes on)" in out
    assert "c: c2 is wip: half way (held" in out
    # every lane stopped, no record left, the main checkout clean apart from nothing
    assert o.wf.ok("orch", "status").strip() == "no active lanes"
    # status changes are never committed: only TASKS.md differs, by status and note lines
    assert git(o.root, "status", "--porcelain") == " M TASKS.md\n"
    changed = [ln for ln in git(o.root, "diff", "-U0", "TASKS.md").splitlines() if ln[:1] in "+-"]
    assert all(ln[1:].startswith(("Status:", "Note:", "++", "--")) for ln in changed), changed
    # a quiet history: per finished task one merge and one archive commit, nothing else of wf's
    subjects = git(o.root, "log", "--format=%s", "main").splitlines()
    assert not [x for x in subjects if x.startswith("wf: ") and not x.startswith("wf: archive ")]
    # exactly two on main's own line per finished task: its merge and its archive commit
    mainline = git(o.root, "log", "--first-parent", "--format=%s", f"{start}..main").splitlines()
    assert len(mainline) == 2 * len(done), mainline
    assert sorted(x.removeprefix("wf: archive ") for x in mainline if x.startswith("wf: archive ")) == sorted(
        done
    )
    # the merged work is on main
    for f in ("a1.txt", "b1.txt", "b1-x.txt", "b1-y.txt"):
        assert (o.root / f).exists(), f


# ------------------------------------------------------------------ pick and post, step by step


def test_pick_prints_the_spawn_line_and_prompt(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    out = o.wf.ok("orch", "pick", "a")
    lines = out.splitlines()
    assert lines[0] == "spawn: wf-worker model=ma background"
    assert lines[1] == "Task: a1  Lane: a  Model: ma"
    assert lines[2] == f"Main tree: {o.root}  Worktree: {o.root / '.worktrees' / 'a'}  Branch: a/a1"
    assert lines[-1] == "Final message: the 4 report lines only."
    assert o.status("a1").startswith("in progress: worker since ")
    rec = json.loads((o.root / ".wf" / "orch" / "a.json").read_text())
    assert rec["id"] == "a1" and rec["state"] == "ready" and rec["base"]
    # a second pick on the lane refuses; the task stays claimed once
    r = o.wf("orch", "pick", "a")
    assert r.code == 1 and "already has an active task a1" in r.err


def test_done_post_merges_if_the_worker_did_not_and_picks_next(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "nomerge") + task("a2", "a", "write a2.txt y"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.result == "done"
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit))
    assert out.splitlines()[0].startswith("a1: done as ")
    assert "merged a/a1 (the worker had not)" in out
    assert "Task: a2  Lane: a" in out
    assert "a1" in o.archived()
    log = o.orch_log()
    assert log[-1]["outcome"] == "done" and log[-1]["commit"] == git(o.root, "rev-parse", "HEAD~1").strip()


def test_post_check_red_when_the_branch_has_no_commits(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a"))
    o.wf.ok("orch", "pick", "a")
    out = o.wf.ok("orch", "post", "a", "--result", "done")
    assert "stop lane a: post-check red for a1: a/a1 has no commits of its own" in out
    assert o.status("a1") == "blocked: post-check red: a/a1 has no commits of its own"


def test_crashed_once_recovers_in_place_then_blocks(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    first = o.wf.ok("orch", "pick", "a")
    tree = o.root / ".worktrees" / "a"
    out = o.wf.ok("orch", "post", "a", "--result", "crashed")
    assert "a1 crashed: one recovery pick" in out and "Recovery: crashed" in out
    assert f"Worktree: {tree}  Branch: a/a1" in out and f"Worktree: {tree}  Branch: a/a1" in first
    assert len(list((o.root / ".worktrees").iterdir())) == 1
    out = o.wf.ok("orch", "post", "a", "--result", "crashed")
    assert "stop lane a: a1 crashed twice" in out
    assert o.status("a1") == "blocked: crashed twice"


def test_solo_owner_and_stop_file(o: Orch) -> None:
    o.setup(
        lanes_toml("a", "b"),
        task("a1", "a", "write a1.txt x")
        + task("b1", "b", extra="Sessions: solo")
        + task("a0", "a", extra="Sessions: owner"),
    )
    assert o.wf.ok("orch", "pick", "a").startswith("spawn:")
    assert o.wf.ok("orch", "pick", "b") == "stop lane b: solo task b1 waits for other lanes\n"
    o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "not now")
    assert o.wf.ok("orch", "pick", "b").startswith("spawn:")  # alone now
    assert o.wf.ok("orch", "pick", "a") == "stop lane a: solo task b1 runs alone (lane b)\n"
    o.wf.ok("orch", "post", "b", "--result", "wip", "--note", "x", "--no-pick")
    (o.root / "out").mkdir(exist_ok=True)
    (o.root / "out" / "wf-batch.stop").touch()
    assert o.wf.ok("orch", "pick", "a") == "stop lane a: stop file out/wf-batch.stop exists\n"
    (o.root / "out" / "wf-batch.stop").unlink()
    # a1 was handed back: it waits for a person to change it; the owner task is never picked
    assert "1 handed back, waiting for a person" in o.wf.ok("orch", "pick", "a")
    o.wf.ok("note", "a1", "go ahead now")
    assert "Task: a1 " in o.wf.ok("orch", "pick", "a")


@pytest.mark.timeout(120)
def test_red_gate_adds_a_p0_fix_task_that_is_the_next_pick(o: Orch, tmp_path: Path) -> None:
    """The gate (started by a1's merge) turns red after a1's post: the next post, a2's,
    is done-gate-red and adds the P0 fix task, which is the lane's next pick. The gate
    finishes only once a1 is posted, so the test does not race it."""
    go = tmp_path / "go"
    (tmp_path / "gate.py").write_text(GATE_AFTER_GO)
    gate = f"{sys.executable} {tmp_path / 'gate.py'} {go}"
    o.setup(
        lanes_toml("a", gate=gate),
        task("a1", "a", "write breaks-gate.txt oops")
        + task("a2", "a", "write a2.txt x")
        + task("a3", "a", "write a3.txt x"),
    )
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit))
    assert "Task: a2" in out
    go.write_text("")
    main = git(o.root, "rev-parse", "HEAD").strip()
    result = o.root / ".wf" / "gate" / f"{main}.json"
    deadline = time.monotonic() + 60
    while not result.exists():
        assert time.monotonic() < deadline, "the gate never recorded a result"
        time.sleep(0.1)
    assert json.loads(result.read_text())["ok"] is False
    rep = o.work(_prompt_of(o, "a"))
    assert rep is not None and rep.result == "done"
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit))
    assert out.splitlines()[0].startswith("a2: done-gate-red as ")
    assert "gate red at" in out and "added P0 task fix-gate-" in out
    assert "Task: fix-gate-" in out  # the next pick is the fix, before a3
    fix = json.loads(o.wf.ok("show", out.split("Task: ")[1].split()[0], "--json"))
    assert fix["prio"] == 0 and fix["lane"] == "a"
    # the fix task says what failed, where the whole log is, and its Done is a command
    assert fix["done"].startswith("`") and fix["done"].endswith("` passes")
    shown = o.wf.ok("show", fix["id"])
    assert "exit 1" in shown and ".wf/gate/" in shown


def _prompt_of(o: Orch, lane: str) -> str:
    """The prompt of the lane's active record (as the last pick printed it)."""
    from wf.base import project
    from wf.orch import pick, state

    rec = state.load(project.load(o.root), lane)
    assert rec is not None
    return pick.prompt_for(project.load(o.root), rec)


def test_post_errors_change_nothing(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    r = o.wf("orch", "post", "a", "--result", "done")
    assert r.code == 1 and "lane a has no active task" in r.err
    o.wf.ok("orch", "pick", "a")
    before = ((o.root / "TASKS.md").read_bytes(), (o.root / ".wf" / "orch" / "a.json").read_bytes())
    r = o.wf("orch", "post", "a", "--result", "finished")
    assert r.code == 2 and "'finished' is not one of" in r.err
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", "deadbeef")
    assert r.code == 1 and "no commit deadbeef" in r.err
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", "--x")
    assert r.code in (1, 2)
    after = ((o.root / "TASKS.md").read_bytes(), (o.root / ".wf" / "orch" / "a.json").read_bytes())
    assert before == after


RACE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wf.cli import main
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    sys.exit(main(["-C", sys.argv[1], "orch", "pick", "a"]))
    """
)


@pytest.mark.timeout(120)
def test_two_picks_on_one_lane_one_winner(o: Orch, tmp_path: Path) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    go = tmp_path / "go"
    ps = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(o.root), str(go)],
            env=o.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(0.4)
    go.touch()
    results = [(*p.communicate(timeout=100), p.returncode) for p in ps]
    winners = [r for r in results if r[2] == 0 and r[0].startswith("spawn:")]
    losers = [r for r in results if r[2] == 1]
    assert len(winners) == 1 and len(losers) == 1, results
    assert "already has an active task" in losers[0][1]
    statuses = [o.status("a1"), o.status("a2")]
    assert sum(s.startswith("in progress") for s in statuses) == 1


@pytest.mark.timeout(180)
def test_worker_killed_half_way_resumes_in_place(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt first", "hang"))
    runner = subprocess.Popen(
        [sys.executable, "-m", "wf", "orch", "run", "a"], cwd=o.root, env=o.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    record = o.root / ".wf" / "orch" / "a.json"
    deadline = time.monotonic() + 60
    pid = None
    while time.monotonic() < deadline:
        if record.exists():
            rec = json.loads(record.read_text())
            tree = Path(rec["worktree"]) if rec.get("worktree") else None
            if rec.get("pid") and tree and git(tree, "log", "--format=%s", "-1").startswith("a1:"):
                pid = rec["pid"]
                break
        time.sleep(0.05)
    assert pid and tree is not None, "the worker never committed"
    committed = git(tree, "rev-parse", "HEAD").strip()
    os.kill(pid, signal.SIGKILL)
    out, err = runner.communicate(timeout=150)
    assert runner.returncode == 0, err
    assert "a1 ended without a report" in out and "recovery: crashed" in out
    assert o.archived() == ["a1"]
    assert git(o.root, "merge-base", "--is-ancestor", committed, "main", check=False) == ""
    assert [p.name for p in (o.root / ".worktrees").iterdir()] == ["a"]
    assert git(o.root, "log", "--merges", "--format=%s", "main").count("a1: Task a1") == 1
    assert (o.root / "a1.txt").read_text() == "first\n"


def test_ctrl_c_leaves_records_and_the_next_run_recovers(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "hang"))
    runner = subprocess.Popen(
        [sys.executable, "-m", "wf", "orch", "run", "a"], cwd=o.root, env=o.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    record = o.root / ".wf" / "orch" / "a.json"
    pid = lane_worker_pid(o.root, "a")
    time.sleep(0.5)
    runner.send_signal(signal.SIGINT)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130
    assert "its record stays for a later recovery" in out
    rec = json.loads(record.read_text())
    assert rec["id"] == "a1" and rec["pid"] is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # the next run recovers it in the same tree (the scripted worker does not hang on a recovery)
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stderr
    assert "recovery: the previous run was interrupted" in r.stdout
    assert o.archived() == ["a1"]


def test_install_links_the_worker_and_skills(o: Orch, tmp_path: Path) -> None:
    out = o.wf.ok("install", "--target", str(tmp_path / "claude"))
    assert out.count("linked  ") == 4
    agent = tmp_path / "claude" / "agents" / "wf-worker.md"
    assert agent.is_symlink() and agent.read_text().startswith("---\nname: wf-worker")
    for skill in ("wf-orchestrate", "wf-design", "wf-pilot"):
        assert (tmp_path / "claude" / "skills" / skill / "SKILL.md").exists()
    assert o.wf.ok("install", "--target", str(tmp_path / "claude")).count("kept    ") == 4


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_demo_runs_the_real_loop(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    r = wfproc.run(
        [sys.executable, "-m", "wf", "demo"], capture_output=True, text=True,
        env=env, timeout=110, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    out = r.stdout
    # its temporary folder is gone when it is done, and it says so
    assert list(tmp.iterdir()) == [] and f"removed {tmp.resolve()}/wf-demo-" in out
    assert "sonnet: start cli with cmd model=sonnet [slice]" in out
    assert "haiku: clock handed back: Done check failed" in out
    for tid in ("greet", "greet-test", "cli-args", "cli-main", "cli", "document-greet-in-the-readme"):
        assert f" {tid} lane=" in out, tid
    assert "storage  haiku   p2  awaiting" in out and "release  sonnet  p2  pending" in out
    assert "clock    haiku   p3  handback" in out  # handed back: not ready in the demo's views either


# ------------------------------------------------------------------ from the review


def test_report_lines_tolerate_markdown() -> None:
    rep = orchrun.read_report(
        "All done.\n\n- **result:** done.\n- commit: `abc1234def`\nfollowups: -\n> note: fine\n"
    )
    assert rep == orchrun.Report("done", "abc1234def", "-", "fine")
    assert orchrun.read_report("result: finished\ncommit: -\n") is None
    assert orchrun.read_report("no report at all") is None


def test_orch_run_never_takes_over_an_interactive_pick(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    o.wf.ok("orch", "pick", "a")
    r = o.proc("orch", "run", "a")
    assert "stop lane a: a1 was picked by an interactive orchestrator" in r.stdout
    assert not list((o.root / ".wf" / "runs").glob("*/*"))  # no worker started
    assert o.status("a2") == "pending"


def test_a_repeated_post_is_refused(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None
    o.wf.ok("orch", "post", "a", "--id", "a1", "--result", "done", "--commit", str(rep.commit))
    before = (o.root / "TASKS.md").read_bytes()
    r = o.wf("orch", "post", "a", "--id", "a1", "--result", "done")
    assert r.code == 1 and "lane a is working on a2, not a1" in r.err
    assert (o.root / "TASKS.md").read_bytes() == before


def test_crash_reported_after_the_worker_merged_is_done(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))  # merges, then (say) the notice is lost
    assert rep is not None and "a1" in o.archived()
    out = o.wf.ok("orch", "post", "a", "--result", "crashed", "--no-pick")
    assert "a1 is already archived: posted as done" in out and out.splitlines()[0].startswith("a1: done")


def test_pick_without_lane_skips_a_lane_whose_solo_task_waits(o: Orch) -> None:
    o.setup(
        lanes_toml("a", "b", "c"),
        task("c1", "c", "write c1.txt x")
        + task("a1", "a", extra="Sessions: solo")
        + task("b1", "b", "write b1.txt x"),
    )
    o.wf.ok("orch", "pick", "c")
    assert "Task: b1  Lane: b" in o.wf.ok("orch", "pick")


def test_orch_run_exits_4_when_a_post_check_is_red(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "nomerge"))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4  # a person must look at a1
    assert "a: post-check red for a1" in r.stdout and "needs a person: post-check red for a1" in r.stdout


def test_doctor_flags_a_claim_without_a_record(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a"))
    o.wf.ok("status", "a1", "progress", "worker")
    assert "claim: a1: claimed by a worker but no lane record holds it" in o.wf("doctor").out


@pytest.mark.timeout(120)
def test_no_report_holds_the_task_and_a_crash_twice_blocks(o: Orch) -> None:
    o.setup(lanes_toml("a", "b"), task("a1", "a", "noreport") + task("b1", "b", "crash"))
    r = o.proc("orch", "run")
    assert r.returncode == 4, r.stdout  # b1 crashed twice and is blocked: a person must look
    assert "a: a1 ended without the four report lines" in r.stdout
    assert "a: a1 handed back: no report: all finished, but I forgot the report lines" in r.stdout
    assert "b: b1 crashed: one recovery pick" in r.stdout
    assert "b: b1 crashed twice (held" in r.stdout
    assert o.status("b1") == "blocked: crashed twice"
    outcomes = [(e["id"], e["outcome"]) for e in o.orch_log()]
    assert ("b1", "crashed-recovery") in outcomes and ("b1", "crashed-twice") in outcomes


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_orch_run_timeout_stops_a_hung_worker_and_recovers_it(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "hang"))
    r = o.proc("orch", "run", "a", "--timeout", "6")  # room for the recovery (about 1 s) on a loaded machine
    assert r.returncode == 0, r.stdout + r.stderr
    assert "a1 ended without a report (timeout" in r.stdout
    assert "(recovery: crashed: timeout" in r.stdout
    assert o.archived() == ["a1"]
    status = json.loads(o.wf.ok("orch", "status", "--json"))
    assert status == []


def test_orch_run_for_starts_nothing_after_the_time(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    r = o.proc("orch", "run", "a", "--for", "0.001s")
    assert "stop lane a: --for time is up" in r.stdout
    assert o.archived() == [] and o.status("a1") == "pending"


GATE_AFTER_GO = """import os, sys, time
for _ in range(2400):  # at most 2 minutes
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
sys.exit(1 if os.path.exists("breaks-gate.txt") else 0)
"""


@pytest.mark.timeout(180)
def test_orch_run_waits_for_the_last_gate_and_acts_on_red(o: Orch, tmp_path: Path) -> None:
    """The gate (started by the worker's own merge) is still running when the lane runs
    out of work: the loop waits for it, then acts on its red result. The gate finishes
    only once the loop says it waits, so the test does not race it."""
    go = tmp_path / "go"
    (tmp_path / "gate.py").write_text(GATE_AFTER_GO)
    gate = f"{sys.executable} {tmp_path / 'gate.py'} {go}"
    o.setup(lanes_toml("a", gate=gate), task("a1", "a", "write breaks-gate.txt oops"))
    log = o.root / "out" / "wf-orch-run.log"

    def release_gate_when_waited_for() -> None:
        for _ in range(3400):
            if log.exists() and "waiting for the gate at" in log.read_text():
                break
            time.sleep(0.05)
        go.write_text("")

    releaser = threading.Thread(target=release_gate_when_waited_for, daemon=True)
    releaser.start()
    r = o.proc("orch", "run", "a", timeout=170)
    releaser.join()
    assert "waiting for the gate at" in r.stdout, r.stdout
    assert "a: gate red at" in r.stdout and "added P0 task fix-gate-" in r.stdout
    fix_id = r.stdout.split("added P0 task ")[1].split()[0]
    assert f"a: start {fix_id} with cmd" in r.stdout  # the fix is picked at once
    assert json.loads(o.wf.ok("show", fix_id, "--json"))["prio"] == 0


def test_a_task_is_not_recovered_without_end(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    for i in range(3):
        assert "Recovery: try" in o.wf.ok("orch", "pick", "a", "--recovery", f"try {i}")
    out = o.wf.ok("orch", "pick", "a", "--recovery", "again")
    assert out == "stop lane a: a1 was re-picked 3 times; blocked\n"
    assert o.status("a1") == "blocked: re-picked 3 times"
    assert o.wf.ok("orch", "status").strip() == "no active lanes"


def test_post_takes_the_worker_report_as_it_is(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    prompt = o.wf.ok("orch", "pick", "a")
    p = subprocess.run([sys.executable, "-m", "wf.scripted"], input=prompt, capture_output=True, text=True,
                       env=o.env, cwd=o.root, timeout=120)  # fmt: skip
    r = wfproc.run([sys.executable, "-m", "wf", "orch", "post", "a", "--id", "a1", "--report", "-"],
                       input="Done, here you go:\n\n" + p.stdout, capture_output=True, text=True, env=o.env,
                       cwd=o.root, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("a1: done as ") and "Task: a2" in r.stdout
    again = o.wf("orch", "post", "a", "--id", "a2", "--report", "I could not finish, sorry")
    assert "stop lane a: a2 handed back: no report: I could not finish, sorry" in again.out
