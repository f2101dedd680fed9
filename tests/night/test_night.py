"""The loop survives a real night: people editing TASKS.md, tools that cannot run, a
loop that dies, a closed stdout, handed-back tasks, and exit codes that say what
happened. Each test reproduces one symptom through the CLI with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _end_started_loops() -> Iterator[None]:
    """A test that fails half-way never leaves its wf orch run behind (a --until-stop
    loop would run on): SIGTERM, which stops its workers too."""
    yield
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            p.terminate()
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


def _popen(o: Orch, *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", *args], cwd=o.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=o.env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    _STARTED.append(p)
    return p


def _wait_for(pred: object, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _events(o: Orch) -> str:
    path = o.root / "out" / "wf-orch-run.log"
    return path.read_text() if path.exists() else ""


def _commits(o: Orch) -> int:
    return int(git(o.root, "rev-list", "--count", "main").strip())


# ------------------------------------------------------------------ infrastructure


def test_a_worker_that_cannot_start_is_not_the_tasks_fault(o: Orch) -> None:
    """The program resolves at preflight but cannot be executed (a bad interpreter): the
    claim is released, the task is byte-for-byte as before, no commit, exit 1, and the
    system's own words are on the terminal."""
    worker = o.root.parent / "worker.sh"
    worker.write_text("#!/nonexistent/interpreter\n")
    worker.chmod(0o755)
    o.setup(
        f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["{worker}"]\n', task("a1", "a", "write a1.txt x")
    )
    before = (o.root / "TASKS.md").read_bytes()
    commits = _commits(o)
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stop lane a: cmd could not run (tool): cannot start" in r.stdout
    assert "No such file or directory" in r.stdout
    assert (o.root / "TASKS.md").read_bytes() == before
    assert _commits(o) == commits
    assert o.wf.ok("orch", "status").strip() == "no active lanes"
    assert not list((o.root / ".wf" / "orch").glob("*.json"))
    # nothing counted against the task: the next run (tool fixed) just works it
    worker.write_text(f"#!{sys.executable}\nfrom wf.scripted import main\nraise SystemExit(main())\n")
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert o.archived() == ["a1"]


def test_preflight_refuses_a_missing_program_before_claiming_anything(o: Orch) -> None:
    o.setup('[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["/nonexistent/python3"]\n', task("a1", "a"))
    before = (o.root / "TASKS.md").read_bytes()
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1
    assert "nothing was claimed" in r.stderr and "/nonexistent/python3" in r.stderr
    assert (o.root / "TASKS.md").read_bytes() == before


def test_a_tool_wide_failure_stops_every_lane_on_that_tool(o: Orch) -> None:
    """One lane's worker says the tool is not logged in: the other lanes on that tool do
    not start theirs (each would fail the same way)."""
    from wf.orch.loop import TOOL_WIDE, infra_failure

    assert infra_failure({"failure": "auth"}) == "auth" and "auth" in TOOL_WIDE
    assert infra_failure({"failure": "task"}) is None and infra_failure({}) is None


def test_a_tool_wide_failure_stops_the_other_idle_lanes_on_that_tool(o: Orch) -> None:
    """Lane a's worker met a not-logged-in tool: the claim is released, and lane b (same
    tool, not started yet) stops with the same words instead of claiming b1. No adapter
    of this version classifies a login failure (only 'tool': it cannot start), so the
    failure is handed to the loop as the supervisor would record it."""
    from types import SimpleNamespace

    from wf.base import project
    from wf.orch.loop import Loop
    from wf.orch.pick import pick

    o.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x") + task("b1", "b", "write b1.txt y"))
    before = (o.root / "TASKS.md").read_bytes()
    proj = project.load(o.root)
    lines: list[str] = []
    loop = Loop(proj, ["a", "b"], adapter=None, emit=lines.append)
    p = pick(proj, "a", owner=loop.me)
    assert p.record is not None
    unit = SimpleNamespace(
        status={"state": "failed", "failure": "auth", "reason": "Not logged in"},
        adapter=SimpleNamespace(name="cmd"),
    )
    loop._ended("a", unit, p.record)  # type: ignore[arg-type]
    stop = "cmd could not run (auth): Not logged in"
    assert f"stop lane a: {stop}" in lines and f"stop lane b: {stop}" in lines
    loop._pick("b")  # a later look at lane b (a wake, the next round) starts nothing
    loop._wake()
    assert not loop.units and (o.root / "TASKS.md").read_bytes() == before
    assert o.wf.ok("orch", "status").strip() == "no active lanes"
    assert loop.exit_code() == 1


# ------------------------------------------------------------------ people editing TASKS.md


@pytest.mark.timeout(180)
def test_person_edits_during_a_run_are_never_committed(o: Orch) -> None:
    """A person appends a half-written draft and a new task while the loop runs: every
    valid task is finished, nothing of the person's is committed, the draft stays in the
    working tree exactly as typed."""
    o.setup(
        lanes_toml("a", "b"),
        task("a1", "a", "write a1.txt x", "linger 1") + task("b1", "b", "write b1.txt y", "linger 1"),
    )
    p = _popen(o, "orch", "run")
    _wait_for(lambda: "start a1" in _events(o), what="the first start")
    tasks = o.root / "TASKS.md"
    draft = "\n## draft-idea: Half written, no Done yet\nModel: ma\nNote: think about the\n"
    new = "\n## a2: A task added during the run\nModel: ma\nDone: true\n\nscript: write a2.txt z\n"
    with open(tasks, "a") as f:  # an editor appending, outside wf's lock
        f.write(new + draft)
    out, err = p.communicate(timeout=150)
    assert p.returncode == 0, out + err
    assert sorted(o.archived()) == ["a1", "a2", "b1"]
    text = tasks.read_text()
    assert draft in text  # exactly as typed, still there
    assert "draft-idea" not in git(o.root, "show", "main:TASKS.md")
    assert "draft-idea" not in git(o.root, "log", "-p", "main")
    subjects = git(o.root, "log", "--format=%s", "main").splitlines()
    assert not [s for s in subjects if s.startswith("wf: ") and not s.startswith("wf: archive ")]


# ------------------------------------------------------------------ a loop that dies


@pytest.mark.timeout(120)
def test_a_killed_loop_is_taken_over_and_its_finished_report_posted(o: Orch) -> None:
    """kill -9 of wf orch run after its worker reported (the worker lingers, as claude
    does): the next run ends the orphaned worker, posts the captured report and does not
    work the task again."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "linger 30"))
    p = _popen(o, "orch", "run", "a")
    rec_path = o.root / ".wf" / "orch" / "a.json"
    _wait_for(lambda: rec_path.exists() and json.loads(rec_path.read_text()).get("unit"), what="the record")
    rec = json.loads(rec_path.read_text())
    log = o.root / ".wf" / "runs" / rec["run"] / rec["unit"] / "worker.log"
    _wait_for(lambda: log.exists() and "result: done" in log.read_text(), what="the report")
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    worker = int(rec["pid"])
    assert _alive(worker)  # orphaned: nobody will post it
    r = o.proc("orch", "run", "a", timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "taking over a finished worker" in r.stdout
    assert "start a1" not in r.stdout  # not worked again
    assert o.archived() == ["a1"]
    assert not _alive(worker)
    outcomes = [e["outcome"] for e in o.orch_log() if e["id"] == "a1"]
    assert outcomes == ["done"]


@pytest.mark.timeout(120)
def test_a_killed_loops_captured_report_is_posted_not_worked_again(o: Orch) -> None:
    """kill -9 of wf orch run after its worker reported awaiting (nothing merged, so the
    archive cannot tell): the next run posts the captured report; the task is not worked
    again."""
    o.setup(lanes_toml("a"), task("a1", "a", "awaiting Which colour?", "linger 30"))
    p = _popen(o, "orch", "run", "a")
    rec_path = o.root / ".wf" / "orch" / "a.json"
    _wait_for(lambda: rec_path.exists() and json.loads(rec_path.read_text()).get("unit"), what="the record")
    rec = json.loads(rec_path.read_text())
    log = o.root / ".wf" / "runs" / rec["run"] / rec["unit"] / "worker.log"
    _wait_for(lambda: log.exists() and "result: awaiting" in log.read_text(), what="the report")
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    r = o.proc("orch", "run", "a", timeout=90)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "taking over a finished worker" in r.stdout
    assert "start a1" not in r.stdout
    assert "a: a1 awaits an answer: Which colour? (held" in r.stdout
    assert o.status("a1") == "awaiting: Which colour?"
    assert [e["outcome"] for e in o.orch_log()] == ["awaiting"]


@pytest.mark.timeout(120)
def test_a_live_runs_worker_is_left_alone_by_a_second_run(o: Orch) -> None:
    """A second wf orch run on a lane another live run works: it stops the lane as held
    and never touches the first run's worker or record."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "hang"))
    first = _popen(o, "orch", "run", "a")
    rec_path = o.root / ".wf" / "orch" / "a.json"
    try:
        _wait_for(
            lambda: rec_path.exists() and json.loads(rec_path.read_text()).get("pid"), what="the worker"
        )
        before = rec_path.read_bytes()
        worker = int(json.loads(before)["pid"])
        r = o.proc("orch", "run", "a", timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"stop lane a: a1 is held by wf orch run pid {first.pid}" in r.stdout
        assert _alive(worker)
        assert rec_path.read_bytes() == before
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert "a1 ended without a report" not in _events(o)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(120)
def test_a_closed_stdout_never_stops_the_loop(o: Orch) -> None:
    """wf orch run | head -1: the loop finishes its work, says once on stderr that
    stdout went away, keeps every event in out/wf-orch-run.log; the next run finds
    nothing left to take over."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt y"))
    p = _popen(o, "orch", "run", "a")
    assert p.stdout is not None
    p.stdout.readline()
    p.stdout.close()  # the reader went away
    err = p.stderr.read() if p.stderr else ""
    p.wait(timeout=100)
    assert p.returncode == 0, err
    assert "stdout was closed; the loop goes on" in err
    assert sorted(o.archived()) == ["a1", "a2"]
    assert "a2: done" in _events(o)
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0 and "no runner-ready task" in r.stdout


# ------------------------------------------------------------------ handbacks and --until-stop


def test_a_handed_back_task_waits_for_a_person(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a2", "a", "raise ma"))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4 and "a: a2 handed back" in r.stdout
    # not picked again by the next run
    r = o.proc("orch", "run", "a")
    assert "start a2" not in r.stdout and "handed back, waiting for a person" in r.stdout
    # a person changes the task: it is ready again
    o.wf.ok("set", "a2", "--prio", "1")
    r = o.proc("orch", "run", "a")
    assert "start a2" in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_until_stop_wakes_a_lane_stopped_by_a_handback(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "raise ma"))
    p = _popen(o, "orch", "run", "a", "--until-stop")
    _wait_for(lambda: "a: a1 handed back" in _events(o), what="the handback")
    o.wf.ok(
        "add", "New work", "--id", "a2", "--model", "ma", "--done", "true", "--body", "script: write a2.txt x"
    )
    _wait_for(lambda: "a2: done" in _events(o), what="the new task to be done")
    (o.root / "out" / "wf-batch.stop").touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 4, out + err  # a1 still waits for a person
    assert out.count("start a1") == 1  # handed back once, never picked again


# ------------------------------------------------------------------ typed records


def test_a_corrupt_lane_record_is_reported_never_read_as_none(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    rec = o.root / ".wf" / "orch" / "a.json"
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text('{"id": "a1", "lane": 7')
    r = o.wf("orch", "pick", "a")
    assert r.code == 1 and "corrupt record" in r.err and "wf doctor --fix" in r.err
    assert "record cannot be trusted" in o.wf.ok("orch", "status")
    run = o.proc("orch", "run", "a")
    assert run.returncode == 1 and "corrupt record" in run.stdout
    rec.write_text(json.dumps({"id": "a1", "lane": "a", "model": 3}))
    assert "field 'model' has a bad value" in o.wf("orch", "pick", "a").err
    out = o.wf("doctor", "--fix").out
    assert "orch: a: record cannot be trusted" in out and "[fixed]" in out
    assert not rec.exists() and list(rec.parent.glob("a.json.corrupt-*"))
    assert o.wf.ok("orch", "pick", "a").startswith("spawn:")


def test_every_stop_kind_maps_to_one_exit_code() -> None:
    from wf.orch.state import Stop, StopReason, exit_code

    assert len(list(Stop)) == len(Stop.__members__)  # no kind is an alias of another
    assert exit_code([StopReason(Stop.NO_WORK, "")]) == 0
    assert exit_code([StopReason(Stop.STOP_FILE, ""), StopReason(Stop.TIME_UP, "")]) == 0
    for kind in (Stop.AWAITING, Stop.HANDBACK, Stop.WIP, Stop.POST_CHECK_RED, Stop.CRASHED_TWICE):
        assert exit_code([StopReason(Stop.NO_WORK, ""), StopReason(kind, "")]) == 4
    assert exit_code([StopReason(Stop.AWAITING, ""), StopReason(Stop.INFRA, "")]) == 1
    assert exit_code([StopReason(Stop.ERROR, "")]) == 1


def test_the_outcome_table_is_data() -> None:
    from wf.orch.post import TABLE, Next
    from wf.orch.state import Outcome, Stop

    assert set(TABLE) == set(Outcome)
    assert TABLE[Outcome.AWAITING].stop is Stop.AWAITING and TABLE[Outcome.AWAITING].status == "awaiting"
    assert TABLE[Outcome.HANDBACK].hold and TABLE[Outcome.HANDBACK].status == "pending"
    assert TABLE[Outcome.CRASHED_RECOVERY].next is Next.RECOVERY
    assert TABLE[Outcome.DONE_GATE_RED].next is Next.PICK and TABLE[Outcome.DONE_GATE_RED].stop is None
    assert TABLE[Outcome.RELEASED].status is None and TABLE[Outcome.RELEASED].stop is Stop.INFRA


def test_worker_claims_and_status_changes_are_not_committed(o: Orch) -> None:
    o.setup(lanes_toml("a", "b"), task("a1", "a") + task("b1", "b", "write b1.txt x"))
    commits = _commits(o)
    o.wf.ok("orch", "pick", "a")  # a claim of another lane stays in the working tree
    o.wf.ok("orch", "pick", "b")
    o.wf.ok("orch", "post", "b", "--result", "awaiting", "--note", "which?")
    assert _commits(o) == commits
    assert git(o.root, "status", "--porcelain") == " M TASKS.md\n"


def test_posting_a_killed_posts_merge_finishes_it_as_done(o: Orch) -> None:
    """A post killed between its merge and the archive: the next post finishes the
    archive and posts done (not 'post-check red: no commits of its own'), logged once."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "nomerge"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None
    # the merge commit lands on main as the post's merge would make it, then the post dies
    git(o.root, "merge", "--no-ff", "--no-edit", "-m", "a1: Task a1", "a/a1")
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit), "--no-pick")
    assert out.splitlines()[0].startswith("a1: done as ")
    assert o.archived() == ["a1"]
    assert [e["outcome"] for e in o.orch_log()] == ["done"]
    assert git(o.root, "status", "--porcelain") == ""


def test_a_post_run_again_after_its_log_line_does_not_log_twice(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a"))
    o.wf.ok("orch", "pick", "a")
    saved = (o.root / ".wf" / "orch" / "a.json").read_bytes()
    o.wf.ok("orch", "post", "a", "--result", "awaiting", "--note", "q", "--no-pick")
    (o.root / ".wf" / "orch" / "a.json").write_bytes(saved)  # killed after the log line, before the drop
    out = o.wf.ok("orch", "post", "a", "--result", "awaiting", "--note", "q", "--no-pick")
    assert "posted already" in out
    assert len(o.orch_log()) == 1
    assert not (o.root / ".wf" / "orch" / "a.json").exists()


def _tree(o: Orch, lane: str) -> Path:
    return o.root / ".worktrees" / lane


def test_a_typo_in_another_task_never_stops_a_finished_merge(o: Orch) -> None:
    """A person writes 'Prio: three' in b1 while a1's worker runs: a1's merge, archive and
    post go through as done; b1 is not runner-ready and wf check names its line."""
    o.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x") + task("b1", "b", "write b1.txt y"))
    prompt = o.wf.ok("orch", "pick", "a")
    text = (o.root / "TASKS.md").read_text()
    (o.root / "TASKS.md").write_text(
        text.replace("## b1: Task b1\nModel: mb\n", "## b1: Task b1\nModel: mb\nPrio: three\n")
    )
    rep = o.work(prompt)
    assert rep is not None and rep.result == "done", rep
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit), "--no-pick")
    assert out.startswith("a1: done as "), out
    assert o.archived() == ["a1"]
    check = o.wf("check")
    assert check.code == 1 and "Prio" in check.out + check.err
    assert "stop lane b: no runner-ready task" in o.wf.ok("orch", "pick", "b")
    assert "Prio: three" in (o.root / "TASKS.md").read_text()  # the person's text is untouched


@pytest.mark.timeout(180)
def test_the_loop_finishes_every_valid_task_around_a_persons_typo(o: Orch) -> None:
    o.setup(
        lanes_toml("a", "b"),
        task("a1", "a", "write a1.txt x", "linger 1")
        + task("a2", "a", "write a2.txt x")
        + task("b1", "b", "write b1.txt y", "linger 1")
        + task("b2", "b", "write b2.txt y"),
    )
    p = _popen(o, "orch", "run")
    _wait_for(lambda: "start a1" in _events(o) and "start b1" in _events(o), what="the first starts")
    tasks = o.root / "TASKS.md"
    tasks.write_text(
        tasks.read_text().replace("## b2: Task b2\nModel: mb\n", "## b2: Task b2\nModel: mb\nPrio: three\n")
    )
    out, err = p.communicate(timeout=150)
    assert p.returncode == 0, out + err
    assert sorted(o.archived()) == ["a1", "a2", "b1"]
    assert "Prio: three" in tasks.read_text()


def test_a_corrupt_tree_record_is_reported_and_moved_aside(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("wt", "add", "a", "a1")
    rec = o.root / ".wf" / "wt" / "a.json"
    rec.write_text('{"name": "a", "lane": "a", "path": 12}')
    r = o.wf("wt", "list")
    assert r.code == 1 and "corrupt record" in r.err and "field 'path'" in r.err
    assert "tree record cannot be trusted" in o.wf("doctor").out
    out = o.wf("doctor", "--fix").out
    assert "tree record cannot be trusted" in out and "moved to a.json.corrupt-" in out
    assert not rec.exists()
    assert o.wf("wt", "list").code == 0


# ------------------------------------------------------------------ the preflight, with the agent tools


def _claude_lanes(o: Orch, toml: str = "") -> None:
    from tests.workers.test_workers import FAKES

    o.env["PATH"] = f"{FAKES}{os.pathsep}{o.env['PATH']}"
    o.setup(toml, "\n## c1: A claude task\nModel: sonnet\nDone: true\n")


def test_orch_run_on_a_logged_out_claude_lane_claims_nothing(o: Orch) -> None:
    _claude_lanes(o)
    o.env["FAKE_LOGGED_OUT"] = "1"
    before = (o.root / "TASKS.md").read_bytes()
    r = o.proc("orch", "run", "sonnet")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nothing was claimed" in r.stderr and "not logged in" in r.stderr
    assert "/login" in r.stderr  # what to do, in the tool's own terms
    assert (o.root / "TASKS.md").read_bytes() == before
    assert not (o.root / ".wf" / "orch").exists() or not list((o.root / ".wf" / "orch").glob("*.json"))


def test_orch_run_adapter_uses_the_lanes_model_for_that_tool_or_refuses(o: Orch) -> None:
    _claude_lanes(o)
    r = o.proc("orch", "run", "sonnet", "--adapter", "codex")
    assert r.returncode == 1 and "lane sonnet: no model for codex" in r.stderr, r.stderr
    assert "codex -m sonnet" not in r.stdout


@pytest.mark.timeout(120)
def test_orch_run_shows_a_live_status_line_on_a_terminal_only(o: Orch) -> None:
    from tests.fanout.test_fanout import _pty_run

    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "linger 2"))
    env = {**o.env, "TERM": "xterm"}
    code, out = _pty_run(["orch", "run", "a"], env, o.root)
    assert code == 0, out
    assert b"\r1 working, 0 done, 0 stopped" in out and b"\x1b[K" in out  # cut to the 40 columns
    # piped: only the event lines
    r = o.proc("orch", "run", "a")
    assert "working," not in r.stdout and "\x1b[K" not in r.stdout
