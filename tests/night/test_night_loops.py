"""Nights with nobody watching: a stop that belongs to one task holds that task and the
lane goes on (two in a row stop it); a worker that fails for want of its own program
(it died before reading its prompt, or failed the same way on two tasks) stops the lane
naming the error, and no task is blocked or charged a crash for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.night.test_batch import Batch
from tests.night.test_night import _events, _popen, _wait_for
from tests.orch.test_orch import Orch, lanes_toml, task

FAILS = '`python3 -c "raise SystemExit(1)"`'  # a Done check that fails: the worker hands back


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def cmd_lane(lane: str, argv: list[str]) -> str:
    return f'[lanes.{lane}]\nmodel = "m{lane}"\nadapter = "cmd"\ncmd = {json.dumps(argv)}\n'


# ------------------------------------------------------------------ the lane goes on


@pytest.mark.timeout(180)
def test_a_handback_holds_its_task_and_the_lane_goes_on(o: Orch) -> None:
    """a1 is handed back, a2 works, a3 awaits, a4 works: each stop holds its own task,
    the lane goes on (a done in between starts the count again), and the run still
    exits 4 naming what needs a person."""
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", done=FAILS, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2")
        + task("a3", "a", "awaiting Blue or green?", extra="Prio: 3")
        + task("a4", "a", "write a4.txt x", extra="Prio: 3"),
    )
    r = o.proc("orch", "run", "a", timeout=170)
    assert r.returncode == 4, r.stdout + r.stderr  # a person is needed
    assert sorted(o.archived()) == ["a2", "a4"], r.stdout
    assert "a: a1 handed back: Done check failed" in r.stdout
    assert "(held for a person; the lane goes on)" in r.stdout
    assert "stop lane a: a1 handed back" not in r.stdout
    assert o.status("a1") == "pending" and o.status("a3") == "awaiting: Blue or green?"
    assert "needs a person: a1 handed back: Done check failed" in r.stdout
    assert "needs a person: a3 awaits an answer: Blue or green?" in r.stdout
    assert [(e["id"], e["outcome"]) for e in o.orch_log()] == [
        ("a1", "handback"),
        ("a2", "done"),
        ("a3", "awaiting"),
        ("a4", "done"),
    ]
    # the handed-back task is ready in no view, and the next run does not pick it
    assert o.wf.ok("list", "--runner") == ""
    [row] = [t for t in json.loads(o.wf.ok("list", "--json")) if t["id"] == "a1"]
    assert (row["ready"], row["state"], row["hold"]["kind"]) == (False, "handback", "handback"), row
    again = o.proc("orch", "run", "a")
    assert "start a1" not in again.stdout and "handed back, waiting for a person" in again.stdout


@pytest.mark.timeout(180)
def test_two_task_owned_stops_in_a_row_stop_the_lane(o: Orch) -> None:
    """A lane that fails every task does not burn the night: after two stops in a row
    that each belong to one task, the lane stops and its next task is not started."""
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "awaiting Which colour?", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", done=FAILS, extra="Prio: 2")
        + task("a3", "a", "write a3.txt x", extra="Prio: 3"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "stop lane a: 2 tasks in a row need a person; the last: a2 handed back" in r.stdout
    assert "start a3" not in r.stdout and o.status("a3") == "pending"
    assert o.archived() == []
    assert "needs a person: a1 awaits an answer: Which colour?" in r.stdout


def test_a_task_re_picked_too_often_is_blocked_and_the_lane_goes_on(o: Orch) -> None:
    """A record a dead run left, its task re-picked too often already: the next run
    blocks that task (a person must look) and goes on with the lane's next one."""
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
    )
    o.wf.ok("orch", "pick", "a")
    rec_path = o.root / ".wf" / "orch" / "a.json"
    rec = json.loads(rec_path.read_text())
    rec.update(owner=1, owner_since=1.0, recoveries=3)  # pid 1, but not the run that started then
    rec_path.write_text(json.dumps(rec))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "a: a1 was re-picked 3 times; blocked (held for a person; the lane goes on)" in r.stdout
    assert o.status("a1") == "blocked: re-picked 3 times"
    assert o.archived() == ["a2"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_until_stop_wakes_a_lane_stopped_for_stops_in_a_row_only_for_new_work(o: Orch) -> None:
    """With --until-stop, a lane stopped for two task-owned stops in a row does not wake
    for the ready task it stopped before; a task a person adds wakes it."""
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "awaiting Which colour?", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", done=FAILS, extra="Prio: 2")
        + task("a3", "a", "write a3.txt x", extra="Prio: 3"),
    )
    p = _popen(o, "orch", "run", "a", "--until-stop")
    _wait_for(lambda: "stop lane a: 2 tasks in a row" in _events(o), what="the stop")
    o.wf.ok(
        "add",
        "New",
        "--id",
        "a4",
        "--model",
        "ma",
        "--prio",
        "1",
        "--done",
        "true",
        "--body",
        "script: write a4.txt y",
    )
    _wait_for(lambda: "a3: done" in _events(o), what="a3 after the new work")
    (o.root / "out" / "wf-batch.stop").touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 4, out + err
    assert out.index("start a4") < out.index("start a3"), out  # only the new task woke the lane


@pytest.mark.timeout(180)
def test_a_batch_goes_on_past_a_handback_and_its_summary_lists_it(wf: WfRunner) -> None:
    """wf batch over the loop: the handed-back task is a line of the summary with its
    outcome and is what needs a person; the lane's next task was done that night."""
    b = Batch(wf)
    try:
        b.setup(
            lanes_toml("a"),
            task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
            + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
        )
        assert b.batch("3").returncode == 0
        st = b.wait_ended()
    finally:
        b.end_live()
    assert st["exit"] == 4, st  # a person is needed
    assert b.archived() == ["a2"]
    tasks = [x.split()[2:5] for x in b.summary(st) if " commit=" in x]
    assert tasks == [["a", "h1", "handback"], ["a", "a2", "done"]]
    assert [(x["id"], x["kind"]) for x in st["needs_person"]] == [("h1", "handback")]


# ------------------------------------------------------------------ the worker's own failure


def test_a_worker_that_dies_before_reading_its_prompt_is_not_the_tasks_fault(o: Orch) -> None:
    """A cmd lane whose program cannot be imported (python -m of a module that is not
    there, run outside its venv: no traceback, and its prompt never read): the lane
    stops naming Python's words, the task is exactly as before, no crash is charged."""
    o.setup(cmd_lane("a", [sys.executable, "-m", "no_such_worker_wf"]), task("a1", "a", "write a1.txt x"))
    before = (o.root / "TASKS.md").read_bytes()
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "stop lane a: cmd could not run (tool): the worker ended (exit 1) before reading its prompt: "
        in r.stdout
    )
    assert "No module named no_such_worker_wf" in r.stdout
    assert "crashed" not in r.stdout
    assert (o.root / "TASKS.md").read_bytes() == before
    assert [e["outcome"] for e in o.orch_log()] == ["released"]
    assert o.wf.ok("orch", "status").strip() == "no active lanes"


def test_a_worker_that_ran_on_its_prompt_file_and_failed_is_the_tasks_crash(o: Orch) -> None:
    """Read its prompt from WF_PROMPT_FILE, printed, failed: it ran, so it is the task's
    crash (a recovery, then blocked), not a tool that could not start."""
    worker = "import os, sys; print(open(os.environ['WF_PROMPT_FILE']).read()[:20]); sys.exit(3)"
    o.setup(cmd_lane("a", [sys.executable, "-c", worker]), task("a1", "a", "write a1.txt x"))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "a1 crashed: one recovery pick" in r.stdout
    assert o.status("a1") == "blocked: crashed twice"


def test_a_worker_that_fails_the_same_way_on_two_tasks_stops_the_lane(o: Orch) -> None:
    """The worker reads its prompt, then fails on its own configuration, the same way
    every time: on the second task that is the worker's failure, not the task's: the
    lane stops naming it, the second task is released as it was, and the first task,
    blocked as crashed twice before anything could tell, is pending again."""
    worker = "import sys; sys.stdin.read(); sys.exit('worker config missing: WORKER_KEY')"
    o.setup(
        cmd_lane("a", [sys.executable, "-c", worker]),
        task("a1", "a", "write a1.txt x", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "stop lane a: cmd could not run (tool): the worker failed the same way on a1 and a2 (exit 1): "
        "worker config missing: WORKER_KEY"
    ) in r.stdout
    assert "a1: pending again (its crashes were the tool's)" in r.stdout
    assert "needs a person: a1" not in r.stdout  # nobody is needed for it any more
    assert o.status("a1") == "pending"
    assert o.status("a2") == "pending"
    assert [(e["id"], e["outcome"]) for e in o.orch_log() if e["id"] == "a2"] == [("a2", "released")]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_tasks_that_time_out_alike_are_each_the_tasks(o: Orch) -> None:
    """Timeouts look alike on every task ("still running after N s"): they are never a
    crash signature; each task gets its recovery pick and the lane goes on."""
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", "hang", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", "hang", extra="Prio: 2"),
    )
    r = o.proc("orch", "run", "a", "--timeout", "4", timeout=170)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(o.archived()) == ["a1", "a2"]
    assert "could not run" not in r.stdout


def test_a_failure_the_tool_named_itself_is_never_a_crash_signature(wf: WfRunner, tmp_path: Path) -> None:
    """The fake claude fails every prompt with the word ERROR in it (here: the project's
    path) with claude's own words for a failed task: the same on both tasks, but the
    tool said why, so each is its task's crash (blocked), never 'claude could not run'."""
    fakes = Path(__file__).parent.parent / "fakes"
    o = Orch(wf)
    o.root = tmp_path / "ERROR" / "proj"
    o.root.mkdir(parents=True)
    git(o.root, "init", "-q", "-b", "main")
    o.env["PATH"] = f"{fakes}:{o.env['PATH']}"
    two = "".join(f"\n## c{i}: Task {i}\nModel: sonnet\nDone: true\n" for i in (1, 2))
    o.setup('[lanes.sonnet]\nmodel = "sonnet"\nadapter = "claude"\n', two)
    r = o.proc("orch", "run", "sonnet")
    assert r.returncode == 4, r.stdout + r.stderr
    assert "could not run" not in r.stdout
    assert "stop lane sonnet: 2 tasks in a row need a person; the last: c2 crashed twice" in r.stdout
    for tid in ("c1", "c2"):
        assert json.loads(o.wf.ok("show", tid, "--json", cwd=o.root))["status"] == "blocked: crashed twice"


def test_only_the_status_the_loop_wrote_is_taken_back_when_crashes_were_the_tools(o: Orch) -> None:
    """When crashes turn out to be the tool's, the loop sets the task it blocked as
    crashed twice back to pending, but only if its Status is still exactly what the loop
    wrote: a person who added to it meanwhile keeps the task blocked."""
    from wf.base import project as projectmod
    from wf.orch.loop import Loop

    worker = "import sys; sys.exit(1)"
    o.setup(
        cmd_lane("a", [sys.executable, "-c", worker]),
        task("a1", "a", extra="Status: blocked: crashed twice")
        + task("a2", "a", extra="Status: blocked: crashed twice, and I looked at it (Ann)"),
    )
    said: list[str] = []
    loop = Loop(projectmod.load(o.root), ["a"], adapter=None, emit=said.append)
    loop._unblock_crashed("a1")
    loop._unblock_crashed("a2")
    assert o.status("a1") == "pending"
    assert o.status("a2") == "blocked: crashed twice, and I looked at it (Ann)"
    assert said == ["a1: pending again (its crashes were the tool's)"]
