"""wf.toml ``notify``: a program run on the events a person cares about, with the event as
JSON on its stdin, never waited on by the night. Everything through real processes: the
loop (``wf orch run``) and the detached batch with the scripted worker in cmd lanes, the
notifiers small Python programs that record what they got."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner
from tests.model_api import ModelApi, usage_limit
from tests.night.test_batch import Batch, b  # noqa: F401 - the fixture
from tests.orch.test_limits import Worker as ModelWorker
from tests.orch.test_limits import claude_lane, needs_real, orch_run, setup
from tests.orch.test_orch import Orch, lanes_toml, task

FAILS = '`python3 -c "raise SystemExit(1)"`'  # a Done check that fails: the task is handed back

RECORDER = """\
import json, os, sys
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "event": json.loads(data)}) + "\\n")
"""

SLEEPER = """\
import json, os, sys, time
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "event": json.loads(data)}) + "\\n")
time.sleep(60)
with open(sys.argv[1] + ".finished", "a") as f:
    f.write("finished\\n")
"""


def notifier(root: Path, name: str, source: str) -> tuple[str, Path]:
    """A notifier program outside the repository (its record beside it): the wf.toml line."""
    folder = root.parent / "notifiers"
    folder.mkdir(exist_ok=True)
    prog = folder / f"{name}.py"
    prog.write_text(source)
    out = folder / f"{name}.jsonl"
    return f"notify = {json.dumps([sys.executable, str(prog), str(out)])}\n", out


def received(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines()]


def events(out: Path) -> list[dict[str, Any]]:
    return [r["event"] for r in received(out)]


def wait_for(pred: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def run_log(o: Orch) -> list[str]:
    return (o.root / "out" / "wf-orch-run.log").read_text().splitlines()


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


# ------------------------------------------------------------------ the done-when test


@pytest.mark.timeout(180)
def test_a_batch_tells_the_notifier_a_task_was_handed_back_and_that_it_ended(b: Batch) -> None:
    line, out = notifier(b.root, "recorder", RECORDER)
    b.setup(line + lanes_toml("a"), task("h1", "a", "write h1.txt x", done=FAILS))
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    wait_for(lambda: any(e["event"] == "batch_ended" for e in events(out)))
    got = events(out)
    handed = [e for e in got if e["event"] == "needs_person"]
    assert len(handed) == 1, got
    e = handed[0]
    assert (e["task"], e["lane"], e["stop"]) == ("h1", "a", "HANDBACK")
    assert e["project"] == str(b.root) and e["at"].endswith("Z") and "Done check failed" in e["reason"]
    ended = [e for e in got if e["event"] == "batch_ended"]
    assert len(ended) == 1, got
    assert ended[0]["batch"] == st["stamp"] and ended[0]["end"] == "N reached"
    assert (ended[0]["done"], ended[0]["posted"]) == (0, 1)
    assert ended[0]["summary"] == st["summary"] and ended[0]["page"] == st["page"]
    assert [x["kind"] for x in st["needs_person"]] == ["handback"]


# ------------------------------------------------------------------ which events


def test_the_lane_that_stops_for_tasks_in_a_row_tells_once_per_task(o: Orch) -> None:
    """Two handbacks in a row: the first is held (the lane goes on), the second stops the
    lane; each task is one needs_person event, not two."""
    line, out = notifier(o.root, "recorder", RECORDER)
    o.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("h2", "a", "write h2.txt x", done=FAILS, extra="Prio: 2"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    got = events(out)
    assert [(e["event"], e["task"], e["stop"]) for e in got] == [
        ("needs_person", "h1", "HANDBACK"),
        ("needs_person", "h2", "HANDBACK"),
    ], (got, r.stdout, r.stderr, run_log(o))


def test_a_tool_that_cannot_run_stops_the_lane_and_says_so(o: Orch) -> None:
    line, out = notifier(o.root, "recorder", RECORDER)
    worker = o.root.parent / "worker.sh"  # found at preflight, but it cannot be executed
    worker.write_text("#!/nonexistent/interpreter\n")
    worker.chmod(0o755)
    toml = line + f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["{worker}"]\n'
    o.setup(toml, task("t1", "a", "write t1.txt x"))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 1, r.stdout + r.stderr
    got = events(out)
    assert [(e["event"], e["lane"], e["stop"]) for e in got] == [("lane_stopped", "a", "INFRA")], got
    assert o.status("t1") == "pending"


def test_a_lane_out_of_work_tells_nobody(o: Orch) -> None:
    line, out = notifier(o.root, "recorder", RECORDER)
    o.setup(line + lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stop lane a:" in r.stdout  # it stopped: out of work
    assert events(out) == []


@needs_real
@pytest.mark.real
@pytest.mark.timeout(240)
def test_a_lane_parked_for_a_usage_limit_tells_the_window_and_the_reset(wf: WfRunner) -> None:
    line, out = notifier(wf.root, "recorder", RECORDER)
    setup(wf, line + claude_lane(), "c1")
    reset = int(time.time()) + 3
    with ModelApi(ModelWorker([usage_limit(reset, window="five_hour")])) as api:
        r = orch_run(wf, api, "c")
    assert r.returncode == 0, r.stdout + r.stderr
    got = events(out)
    assert [(e["event"], e["lane"], e["task"], e["why"]) for e in got] == [
        ("lane_parked", "c", "c1", "five_hour")
    ], got
    assert got[0]["until"] >= reset


# ------------------------------------------------------------------ a notifier never costs the night


def test_a_slow_notifier_never_holds_up_the_loop(o: Orch) -> None:
    """The notifier of h1's handback sleeps a minute: a2 starts while it runs, the run ends
    with it ended (and says so), and the night's outcome is that of a run without one."""
    line, out = notifier(o.root, "sleeper", SLEEPER)
    o.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    assert o.archived() == ["a2"] and o.status("h1") == "pending"
    pids = [x["pid"] for x in received(out)]
    assert len(pids) == 1 and not alive(pids[0])  # ended with the run, not after its minute
    assert not Path(str(out) + ".finished").exists()
    log = run_log(o)
    start = next(i for i, x in enumerate(log) if "a: start a2" in x)
    ended = [i for i, x in enumerate(log) if "notify: " in x]
    assert len(ended) == 1 and ended[0] > start, log  # a2 started while the notifier ran
    assert "for needs_person: still running when wf ended" in log[ended[0]]


def test_a_notifier_past_its_time_box_is_ended_while_the_loop_goes_on(o: Orch) -> None:
    line, out = notifier(o.root, "sleeper", SLEEPER)
    o.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task(
            "a2", "a", "write a2.txt x", done='`python3 -c "import time; time.sleep(6)"`', extra="Prio: 2"
        ),
    )
    o.env["WF_NOTIFY_TIMEOUT"] = "1"
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    log = run_log(o)
    said = [x for x in log if "notify: " in x]
    assert len(said) == 1 and "for needs_person: still ran after 1s: ended" in said[0], log
    assert log.index(said[0]) < next(i for i, x in enumerate(log) if "a2 done" in x or "post a2" in x.lower())
    assert not any(alive(x["pid"]) for x in received(out))
    assert not Path(str(out) + ".finished").exists()


@pytest.mark.parametrize("kind", ["exits 1", "missing"])
def test_a_failing_notifier_is_logged_and_changes_nothing(o: Orch, kind: str) -> None:
    if kind == "exits 1":
        line, _ = notifier(o.root, "fails", "import sys\nsys.stdin.read()\nsys.exit(1)\n")
    else:
        line = f"notify = {json.dumps([str(o.root.parent / 'no-such-notifier')])}\n"
    o.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr  # as without a notifier: h1 needs a person
    assert o.archived() == ["a2"] and o.status("h1") == "pending"
    assert [x["outcome"] for x in o.orch_log()] == ["handback", "done"]
    said = [x for x in run_log(o) if "notify: " in x]
    why = "exited 1" if kind == "exits 1" else "cannot be started: No such file or directory"
    assert len(said) == 1 and f"for needs_person: {why}" in said[0], said
    assert "notify: " + said[0].split("notify: ", 1)[1] in r.stdout  # said where the loop says things


@pytest.mark.timeout(180)
def test_a_slow_notifier_leaves_the_batch_as_it_would_be(b: Batch) -> None:
    line, out = notifier(b.root, "sleeper", SLEEPER)
    b.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2")
        + task("a3", "a", "write a3.txt x", extra="Prio: 3"),
    )
    assert b.batch("2").returncode == 0
    st = b.wait_ended()
    nxt = b.batch("1")  # batch_ended's notifier sleeps on: it holds up no next batch
    assert nxt.returncode == 0, nxt.stderr
    b.wait_ended()
    assert (st["reason"], st["exit"]) == ("N reached", 4)
    assert [x.split()[2:5] for x in b.summary(st) if " commit=" in x] == [
        ["a", "h1", "handback"],
        ["a", "a2", "done"],
    ]
    wait_for(lambda: len(received(out)) == 3)  # needs_person, then each batch's batch_ended
    assert [e["event"] for e in events(out)] == ["needs_person", "batch_ended", "batch_ended"]
    wait_for(lambda: not any(alive(x["pid"]) for x in received(out)), timeout=60)
    assert not Path(str(out) + ".finished").exists()  # neither got its minute
    log = (b.root / "out" / f"wf-batch-{st['stamp']}.log").read_text()
    wait_for(lambda: "for batch_ended: still ran after 10s: ended" in
             (b.root / "out" / f"wf-batch-{st['stamp']}.log").read_text())  # fmt: skip
    assert "for needs_person: still running when wf ended" in log


# ------------------------------------------------------------------ the setting


@pytest.mark.parametrize(
    "value", ['"notify-send"', "[]", '[""]', '["notify-send", 1]', '["notify\\u0000send"]']
)
def test_a_notify_that_is_no_argv_is_refused_naming_the_key(wf: WfRunner, value: str) -> None:
    (wf.root / "wf.toml").write_text(f"notify = {value}\n")
    r = wf.proc("list")
    assert r.code == 1, r.err
    assert "wf.toml: notify must be a non-empty list of strings" in r.err
    assert "Traceback" not in r.err


def test_wf_config_sets_notify_and_refuses_a_string(wf: WfRunner) -> None:
    r = wf("config", "notify", "notify-send")
    assert r.code == 1 and "notify must be a non-empty list of strings" in r.err
    assert json.loads(wf.ok("config", "notify", "--json")) == []  # nothing written
    wf.ok("config", "notify", '["notify-send", "wf"]')
    assert json.loads(wf.ok("config", "notify", "--json")) == ["notify-send", "wf"]


def test_a_notifier_is_the_loops_own_child_never_a_workers_stray(o: Orch) -> None:
    """While b1's worker runs, h1's notifier (a minute's sleep) is the loop's own child:
    never recorded as a process b1's worker left behind (whose end would end it)."""
    line, out = notifier(o.root, "sleeper", SLEEPER)
    o.setup(
        line + lanes_toml("a", "b"),
        task("h1", "a", "write h1.txt x", done=FAILS)
        + task("b1", "b", "write b1.txt x", done='`python3 -c "import time; time.sleep(4)"`'),
    )
    r = o.proc("orch", "run", "a", "b")
    assert r.returncode == 4, r.stdout + r.stderr
    log = run_log(o)
    assert log.index(next(x for x in log if "notify: " in x)) > log.index(
        next(x for x in log if "b: start b1" in x)
    )
    pids = {x["pid"] for x in received(out)}
    assert len(pids) == 1
    strays = [
        pid
        for status in (o.root / ".wf" / "runs").glob("*/*/status.json")
        for pid, _ in json.loads(status.read_text()).get("strays", [])
    ]
    assert not pids & set(strays), strays


def test_an_interactive_post_of_a_handback_tells_the_notifier(o: Orch) -> None:
    """An orchestrator's own ``wf orch post`` (interactive, or an --agent batch's)."""
    line, out = notifier(o.root, "recorder", RECORDER)
    o.setup(line + lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    r = o.proc("orch", "post", "a", "--result", "handback", "--note", "the spec contradicts itself")
    assert r.returncode == 0, r.stderr
    got = events(out)
    assert [(e["event"], e["task"], e["lane"], e["stop"]) for e in got] == [
        ("needs_person", "a1", "a", "HANDBACK")
    ], got
    assert got[0]["run"] == "wf orch post"


@needs_real
@pytest.mark.real
@pytest.mark.timeout(240)
def test_a_limit_that_resets_after_for_stops_the_lane_and_says_so(wf: WfRunner) -> None:
    line, out = notifier(wf.root, "recorder", RECORDER)
    setup(wf, line + claude_lane(), "c1")
    with ModelApi(ModelWorker([usage_limit(int(time.time()) + 3600, window="seven_day")])) as api:
        r = orch_run(wf, api, "c", "--for", "5m")
    assert r.returncode == 0, r.stdout + r.stderr
    got = events(out)
    assert [(e["event"], e["lane"], e["task"], e["stop"]) for e in got] == [
        ("lane_stopped", "c", "c1", "LIMIT")
    ], got


SPAWNER = """\
import json, subprocess, sys, time
data = sys.stdin.read()
child = subprocess.Popen(["sleep", "60"])
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"pid": child.pid, "event": json.loads(data)}) + "\\n")
time.sleep(60)
"""

CHILD_GONE = """\
import json, os, sys, time
time.sleep(4)  # the notifier's time box (1 s) has passed
pid = json.loads(open(sys.argv[1]).readline())["pid"]
try:
    state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
except OSError:
    state = "gone"
sys.exit(0 if state in ("gone", "Z") else 1)
"""


def test_the_time_box_ends_the_notifiers_own_children_too(o: Orch) -> None:
    """A notifier that started a child of its own: past the time box both are ended (its
    process group), while the loop goes on: a2's Done check passes only if the child is gone."""
    line, out = notifier(o.root, "spawner", SPAWNER)
    check = o.root.parent / "notifiers" / "child_gone.py"
    check.write_text(CHILD_GONE)
    o.setup(
        line + lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", done=f"`{sys.executable} {check} {out}`", extra="Prio: 2"),
    )
    o.env["WF_NOTIFY_TIMEOUT"] = "1"
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    assert o.archived() == ["a2"], r.stdout  # the child was gone before the loop ended
