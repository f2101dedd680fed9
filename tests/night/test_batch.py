"""wf batch: the detached nightly run over the headless loop, with the scripted worker
in cmd lanes; everything through real processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")  # read before the sealed env drops WF_ variables
SLOW = '`python3 -c "import time; time.sleep(1)"`'  # a Done check that takes a while


class Batch(Orch):
    def batch(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return wfproc.run(
            [sys.executable, "-m", "wf", "batch", *args], cwd=self.root, capture_output=True, text=True,
            env=env or self.env, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def status(self, tid: str | None = None) -> Any:
        if tid is not None:
            return super().status(tid)
        r = self.batch("--status", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def wait_ended(self, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if st["job"] is not None and not st["alive"]:
                return dict(st)
            time.sleep(0.5)
        raise AssertionError(f"the batch did not end: {self.status()}")

    def wait_for(self, pred: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.2)
        raise AssertionError("condition not met in time")

    def summary(self, st: dict[str, Any]) -> list[str]:
        return Path(st["summary"]).read_text().splitlines()

    def end_live(self) -> None:
        """A test that failed half-way must not leave its detached batch running."""
        r = self.batch("--status", "--json")
        st = json.loads(r.stdout) if r.returncode == 0 else {}
        if st.get("alive"):
            wfproc.run([sys.executable, "-m", "wf", "res", "stop", st["job"]], env=self.env, timeout=60,
                           capture_output=True)  # fmt: skip


@pytest.fixture
def b(wf: WfRunner) -> Iterator[Batch]:
    batch = Batch(wf)
    yield batch
    batch.end_live()


def three_ready(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", done=SLOW, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", done=SLOW, extra="Prio: 1")
        + task("a3", "a", "write a3.txt x", done=SLOW, extra="Prio: 2"),
    )


# ------------------------------------------------------------------ the done-when test


@pytest.mark.timeout(180)
def test_batch_runs_detached_archives_n_refuses_a_second_and_summarises(b: Batch, sealed_env: Path) -> None:
    three_ready(b)
    cron = {"PATH": os.environ["PATH"], "HOME": str(sealed_env)}  # cron gives little more than this
    r = b.batch("2", env=cron)
    assert r.returncode == 0, r.stderr
    assert "started: job " in r.stdout and "summary: out/wf-batch-" in r.stdout
    # it returned while the batch still runs: detached
    st = b.status()
    assert st["alive"] is True and st["job"] in r.stdout
    second = b.batch("1")
    assert second.returncode == 1
    assert f"a batch is running already: job {st['job']}, pid {st['pid']}" in second.stderr
    assert len(list((b.root / "out").glob("wf-batch-*.log"))) == 1  # refused before detaching anything
    st = b.wait_ended()
    assert b.archived() == ["a1", "a2"] or sorted(b.archived()) == ["a1", "a2"]
    assert b.status("a3") == "pending"
    assert st["state"] == "done" and st["exit"] == 0 and st["reason"] == "N reached"
    lines = b.summary(st)
    assert lines[0].startswith("# wf batch ")
    assert any(x.startswith("- lanes: a  N: 2") for x in lines)
    tasks = [x for x in lines if " commit=" in x]
    assert [x.split()[2:5] for x in tasks] == [["a", "a1", "done"], ["a", "a2", "done"]]
    assert all(x.split()[6] == "$?" for x in tasks)  # the scripted worker costs nothing known
    assert any(x.endswith("stop lane a: 2 task(s) started: the cap is reached") for x in lines)
    assert "done: 2, not done: 0" in lines
    assert lines[-1].startswith("ended: N reached at ")
    assert st["needs_person"] == []
    assert st["usage"]["peak_rss"] > 0 and st["usage"]["limits"]["mem"] == 4 << 30
    assert git(b.root, "status", "--porcelain") == ""


@pytest.mark.timeout(180)
def test_stop_lets_the_running_task_finish_and_starts_nothing_new(b: Batch) -> None:
    three_ready(b)
    assert b.batch("3").returncode == 0
    b.wait_for(lambda: str(b.status("a1")).startswith("in progress"))
    r = b.batch("--stop")
    assert r.returncode == 0 and "nothing new starts" in r.stdout
    st = b.wait_ended()
    assert b.archived() == ["a1"]  # the running task finished
    assert b.status("a2") == "pending" and b.status("a3") == "pending"  # nothing new started
    assert st["reason"] == "stop file"
    assert b.summary(st)[-1].startswith("ended: stop file")
    assert not (b.root / "out" / "wf-batch.stop").exists()  # consumed: the next batch may run


def test_no_batch_yet(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert b.status() == {"alive": False, "job": None}
    assert b.batch("--status").stdout.strip() == "no batch has run here"


def test_dry_run_prints_everything_and_starts_nothing(b: Batch) -> None:
    three_ready(b)
    r = b.batch("2", "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "lanes: a\n" in out and "tasks: at most 2" in out
    assert "orch run a --max-tasks 2 --for 21600s" in out
    assert "memory: 4.0G (default, no batch of this project to learn from)" in out
    assert "for: 6h00m, nothing new starts after it (default, no batch of this project to learn from)" in out
    assert "backend: " in out and "WF_RES_TOKEN=" in out
    made = {
        p.relative_to(b.root).parts[:2] for p in b.root.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    assert {x for x in made if x[0] in (".wf", "out") and x != (".wf", "cache")} == set()  # no file
    assert git(b.root, "status", "--porcelain") == ""  # no claim
    assert b.status("a1") == "pending"
    r = b.batch("2", "--dry-run", "--for", "90m", "--mem", "1G", "--lanes", "a")
    assert "memory: 1.0G (--mem)" in r.stdout and "for: 1h30m" in r.stdout


def past_batch(b: Batch, stamp: str, reason: str, tasks: int, peak: int, dur: float, lanes: int = 1) -> None:
    """An ended batch of this project, as its record says (what the next batches learn from)."""
    rec = {
        "stamp": stamp, "started": "2026-01-01T00:00:00Z", "summary": f"out/wf-batch-{stamp}.md",
        "log": f"out/wf-batch-{stamp}.log", "plan": {"title": "wf-batch", "lanes": ["a", "b", "c"][:lanes]},
        "state": "ended", "reason": reason, "tasks": tasks, "peak_rss": peak, "dur_s": dur,
    }  # fmt: skip
    folder = b.root / ".wf" / "batch"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stamp}.json").write_text(json.dumps(rec))


@pytest.mark.timeout(180)
def test_a_quick_batch_never_teaches_limits_below_the_floor(b: Batch) -> None:
    """After wf batch 1 on a task of seconds, the next batch's limits are the floor (2G,
    1h), and --dry-run says what its own history would have given, per task and for N."""
    three_ready(b)
    assert b.batch("1").returncode == 0
    assert b.wait_ended()["reason"] == "N reached"
    out = b.batch("3", "--dry-run").stdout
    mem = next(x for x in out.splitlines() if x.startswith("memory: "))
    assert mem.startswith("memory: 2.0G (floor 2.0G; history gives 256M: 1.25 x ") and mem.endswith(
        " per task x 1 at once, from 1 batch(es) of this project)"
    ), mem
    for_ = next(x for x in out.splitlines() if x.startswith("for: "))
    assert for_.startswith("for: 1h00m, nothing new starts after it (floor 1h00m; history gives ") and (
        for_.endswith(" per task x 3 task(s), from 1 batch(es) of this project)")
    ), for_
    assert "--max-tasks 3 --for 3600s" in out
    r = b.batch("3", "--dry-run", "--mem", "512M", "--for", "10m")  # the flags may go below it
    assert (
        "memory: 512M (--mem)" in r.stdout and "for: 10m00s, nothing new starts after it (--for)" in r.stdout
    )


def test_batch_limits_scale_this_projects_figures_per_task_by_n(b: Batch) -> None:
    """Per task: a past batch's peak over the tasks it ran at once (one per lane), its
    time over the tasks it posted; then x the tasks the next runs at once, and x its N."""
    b.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x") + task("b1", "b", "write b1.txt x"))
    g = 1 << 30
    past_batch(b, "20260101T000000Z", "N reached", tasks=2, peak=3 * g, dur=4 * 3600)  # 3G, 2h a task
    past_batch(b, "20260102T000000Z", "all lanes stopped", tasks=4, peak=4 * g, dur=3600, lanes=2)  # 2G each
    past_batch(b, "20260103T000000Z", "oom", tasks=1, peak=20 * g, dur=9 * 3600)  # ended by its cap: not
    past_batch(b, "20260104T000000Z", "N reached", tasks=0, peak=9 * g, dur=9 * 3600)  # posted nothing: not
    out = b.batch("3", "--dry-run", "--lanes", "a").stdout
    assert (
        "memory: 3.8G (history: 1.25 x 3.0G per task x 1 at once, from 2 batch(es) of this project)" in out
    ), out
    assert (
        "for: 9h00m, nothing new starts after it (history: 1.5 x 2h00m per task x 3 task(s), "
        "from 2 batch(es) of this project)" in out
    ), out
    out = b.batch("3", "--dry-run", "--lanes", "a").stdout
    assert "memory: 3.8G (history: 1.25 x 3.0G per task x 1 at once, " in out, out
    assert "memory: 7.5G (history: 1.25 x 3.0G per task x 2 at once, " in b.batch("3", "--dry-run").stdout
    out = b.batch("1", "--dry-run").stdout  # one task: one at once, whatever the lanes
    assert "memory: 3.8G (history: 1.25 x 3.0G per task x 1 at once, " in out, out
    assert "for: 3h00m, nothing new starts after it (history: 1.5 x 2h00m per task x 1 task(s)" in out, out


def test_another_projects_batches_never_set_this_ones_limits(b: Batch) -> None:
    """The res history is the machine's: a quick wf-batch of another project there says
    nothing about this one."""
    three_ready(b)
    hist = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "res" / "hist.jsonl"
    hist.parent.mkdir(parents=True)
    row = {"id": "20260101-000000-1", "title": "wf-batch", "state": "done", "peak_rss": 60 << 20, "dur_s": 3,
           "cwd": "/elsewhere"}  # fmt: skip
    hist.write_text(json.dumps(row) + "\n")
    out = b.batch("2", "--dry-run").stdout
    assert "memory: 4.0G (default, no batch of this project to learn from)" in out, out
    assert "for: 6h00m, nothing new starts after it (default, no batch of this project to learn from)" in out


@pytest.mark.parametrize(
    "args",
    [[], ["2", "--status"], ["--status", "--stop"], ["0"], ["2", "--for", "later"], ["2", "--mem", "x"]],
)
def test_bad_invocations(b: Batch, args: list[str]) -> None:
    three_ready(b)
    r = b.batch(*args)
    assert r.returncode == 2, (args, r.stderr)


def test_a_lane_that_does_not_exist_or_no_work(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", extra="Status: wip: mine"))
    r = b.batch("2", "--lanes", "zz")
    assert r.returncode == 1 and "no lane 'zz'" in r.stderr
    r = b.batch("2", "--lanes", "../x")
    assert r.returncode == 1 and "bad lane '../x'" in r.stderr
    r = b.batch("2")
    assert r.returncode == 1 and "no lane has runner-ready work" in r.stderr
    assert not (b.root / ".wf" / "batch").exists() or not list((b.root / ".wf" / "batch").glob("*.json"))


# ------------------------------------------------------------------ a batch that died


@pytest.mark.timeout(180)
def test_a_killed_batch_is_finished_and_recovered_by_the_next(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("h1", "a", "write h1.txt x", "hang", extra="Prio: 1") + task("h2", "a", "write h2.txt x"),
    )
    assert b.batch("1").returncode == 0
    first = b.status()
    b.wait_for(lambda: (b.root / ".worktrees" / "a" / "h1.txt").exists())
    os.kill(first["pid"], signal.SIGKILL)  # as a reboot would: no footer, lane record left
    b.wait_for(lambda: not b.status()["alive"])
    # the next batch finishes the dead one's record and recovers its task in place
    assert b.batch("2").returncode == 0
    st = b.wait_ended()
    assert st["stamp"] != first["stamp"]
    old = Path(first["summary"]).read_text().splitlines()
    assert old[-1].startswith("ended: lost at ") and "found by" in old[-1]
    assert sorted(b.archived()) == ["h1", "h2"]
    outcomes = [x.split()[2:5] for x in b.summary(st) if " commit=" in x]
    assert ["a", "h1", "done"] in outcomes


@pytest.mark.timeout(180)
def test_the_summary_is_written_as_the_batch_goes_and_kept_when_it_dies(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("d1", "a", "write d1.txt x", extra="Prio: 1") + task("h1", "a", "write h1.txt x", "hang"),
    )
    assert b.batch("2").returncode == 0
    st = b.status()

    def d1_line() -> bool:
        return any(x.split()[2:5] == ["a", "d1", "done"] for x in b.summary(st) if " commit=" in x)

    b.wait_for(d1_line)  # d1's line is there while the batch still runs
    assert b.status()["alive"] is True
    b.wait_for(lambda: (b.root / ".worktrees" / "a" / "h1.txt").exists())
    os.kill(st["pid"], signal.SIGKILL)
    b.wait_for(lambda: not b.status()["alive"])
    lines = b.summary(st)
    assert d1_line() and "done: 1, not done: 0" in lines, lines
    assert lines[-1].startswith("ended: lost at ") and "found by wf batch --status" in lines[-1]
    assert b.status()["state"] == "lost"


@pytest.mark.timeout(180)
def test_res_stop_ends_a_batch_at_once_as_killed_with_its_whole_tree(b: Batch) -> None:
    from tests.night.test_res import carrying

    b.setup(lanes_toml("a"), task("h1", "a", "write h1.txt x", "hang"))
    assert b.batch("1").returncode == 0
    st = b.status()
    b.wait_for(lambda: (b.root / ".worktrees" / "a" / "h1.txt").exists())  # its worker hangs
    jobs = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "res" / "jobs"
    token = json.loads((jobs / f"{st['job']}.json").read_text())["token"]
    assert carrying(token)
    r = wfproc.run([sys.executable, "-m", "wf", "res", "stop", st["job"]], env=b.env, capture_output=True,
                       text=True, timeout=90)  # fmt: skip
    assert r.returncode == 0, r.stderr
    st = b.wait_ended()
    assert st["state"] == "killed" and st["reason"] == "killed"
    assert b.summary(st)[-1].startswith("ended: killed at ")
    assert carrying(token) == []  # the loop and the hanging worker too


def test_the_batch_lock_refuses_a_second_job_even_without_a_record(b: Batch) -> None:
    """The second guard: two batches started at the same instant both pass the record
    check; the lock the job holds for its life lets only one run."""
    from wf.base.lock import project_lock

    three_ready(b)
    with project_lock(b.root / ".wf", timeout=1, name="batch.lock"):
        r = b.batch("1")
    assert r.returncode == 1 and "it holds .wf/batch.lock" in r.stderr
    assert b.status() == {"alive": False, "job": None}
    assert b.status("a1") == "pending"


def test_a_stop_file_left_behind_refuses_a_batch(b: Batch) -> None:
    three_ready(b)
    (b.root / "out").mkdir(exist_ok=True)
    (b.root / "out" / "wf-batch.stop").write_text("")
    r = b.batch("1")
    assert r.returncode == 1 and "out/wf-batch.stop exists" in r.stderr
    assert b.status() == {"alive": False, "job": None}


def test_the_hidden_job_command_checks_its_stamp(b: Batch) -> None:
    three_ready(b)
    r = wfproc.run(
        [sys.executable, "-m", "wf", "batch-job", "../../x"], cwd=b.root, capture_output=True, text=True,
        timeout=30, env=b.env,
    )  # fmt: skip
    assert r.returncode == 2


@pytest.mark.timeout(180)
def test_status_names_what_needs_a_person(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("q1", "a", "awaiting Blue or green?", extra="Prio: 1")
        + task("h1", "a", "write h1.txt x", done='`python3 -c "raise SystemExit(1)"`', extra="Prio: 2"),
    )
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    assert st["needs_person"] == [{"id": "q1", "kind": "awaiting", "text": "Blue or green?"}]
    assert st["reason"] == "N reached" and st["exit"] == 4  # the loop said: a person is needed
    text = b.batch("--status").stdout
    assert "needs a person:\n  awaiting q1: Blue or green?" in text
    assert b.summary(st)[-1].endswith("(wf orch run exit 4: a person is needed)")
    # the next batch takes the handback too
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    kinds = {(x["id"], x["kind"]) for x in st["needs_person"]}
    assert kinds == {("q1", "awaiting"), ("h1", "handback")}


# ------------------------------------------------------------------ --agent

ORCHESTRATOR = '''#!{python}
"""Plays the headless orchestrator: the batch prompt on stdin; wf orch pick, the scripted
worker, wf orch post, as the prompt says."""
import json, os, re, subprocess, sys
prompt = sys.stdin.read()
with open(os.environ["SEEN"], "w") as f:
    json.dump({{"prompt": prompt, "wait": os.environ.get("CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS")}}, f)
m = re.search(r"at most (\\d+) task\\(s\\) in the lanes (.+?);", prompt)
n, lanes = int(m.group(1)), [x.strip() for x in m.group(2).split(",")]
def wf(*args, input=None):
    return subprocess.run([sys.executable, "-m", "wf", *args], capture_output=True, text=True, input=input)
posted, stopped, lines = 0, set(), []
while posted < n and len(stopped) < len(lanes):
    for lane in lanes:
        if lane in stopped or posted >= n:
            continue
        pick = json.loads(wf("orch", "pick", lane, "--json").stdout)
        if pick["stop"]:
            stopped.add(lane)
            lines.append(f"stop lane {{lane}}: {{pick['stop']}}")
            continue
        work = subprocess.run([sys.executable, "-m", "wf.scripted"], input=pick["prompt"], capture_output=True,
                              text=True)
        post = wf("orch", "post", lane, "--id", pick["record"]["id"], "--report", "-", "--no-pick", input=work.stdout)
        posted += 1
        lines += [x for x in post.stdout.splitlines() if x.startswith("stop lane ")]
print("\\n".join(lines + ["added: -"]))
'''


@pytest.mark.timeout(180)
def test_agent_batch_runs_claude_as_orchestrator(b: Batch, tmp_path: Path) -> None:
    b.setup(
        lanes_toml("a"), "".join(task(f"a{i}", "a", f"write a{i}.txt x", extra="Prio: 1") for i in (1, 2, 3))
    )
    script = tmp_path / "orchestrator"
    script.write_text(ORCHESTRATOR.format(python=sys.executable))
    script.chmod(0o755)
    seen, argv_log = tmp_path / "seen.json", tmp_path / "argv.log"
    fakes = Path(__file__).parent.parent / "fakes"
    env = dict(b.env, PATH=f"{fakes}:{os.environ['PATH']}", FAKE_CLAUDE_SCRIPT=str(script), SEEN=str(seen),
               FAKE_ARGV_LOG=str(argv_log))  # fmt: skip
    dry = b.batch("2", "--agent", "--model", "haiku", "--for", "1h", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"argv: {fakes / 'claude'} -p --model haiku" in dry.stdout
    assert "CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS=3600000" in dry.stdout
    assert "stdin: the packaged prompt wf/data/batch-prompt.md, filled in:" in dry.stdout

    def runs() -> list[list[str]]:
        return [json.loads(x) for x in argv_log.read_text().splitlines()] if argv_log.exists() else []

    assert all(a[1:] == ["--help"] for a in runs())  # the dry run started nothing (read its flags)
    r = b.batch("2", "--agent", "--model", "haiku", "--for", "1h", env=env)
    assert r.returncode == 0, r.stderr
    st = b.wait_ended()
    assert sorted(b.archived()) == ["a1", "a2"] and b.status("a3") == "pending"
    got = json.loads(seen.read_text())
    assert got["wait"] == "3600000"
    assert "at most 2 task(s) in the lanes a;" in got["prompt"] and "never implement" in got["prompt"]
    [argv] = [a for a in runs() if a[1:] != ["--help"]]
    assert argv[1:4] == ["-p", "--model", "haiku"]
    lines = b.summary(st)
    assert [x.split()[2:5] for x in lines if " commit=" in x] == [["a", "a1", "done"], ["a", "a2", "done"]]
    assert st["reason"] == "N reached" and st["state"] == "done"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tool", ["false", pytest.param("real", marks=pytest.mark.real)])
def test_an_agent_batch_whose_claude_fails_says_so(b: Batch, tmp_path: Path, tool: str) -> None:
    """Not "all lanes stopped": the orchestrator ended in an error (no login, here), and
    the footer names claude's exit and the last line it printed."""
    if tool == "real":
        if not REAL_BIN:
            pytest.skip("WF_REAL_TOOLS is not set (.ci/run sets it)")
        bindir = Path(REAL_BIN)
    else:
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "claude").symlink_to(shutil.which("false") or "/bin/false")
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    env = dict(b.env, PATH=f"{bindir}:{os.environ['PATH']}")
    for var in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        env.pop(var, None)
    assert b.batch("1", "--agent", "--for", "10m", env=env).returncode == 0
    st = b.wait_ended()
    assert st["reason"] == "orchestrator failed" and st["state"] == "failed", st
    last = b.summary(st)[-1]
    assert last.startswith("ended: orchestrator failed at ") and "(claude exit 1" in last
    assert f"its output: out/wf-batch-{st['stamp']}.log)" in last
    if tool == "real":
        assert "claude exit 1: Not logged in" in last
    assert b.status("a1") == "pending"


def test_model_without_agent_is_a_usage_error(b: Batch) -> None:
    three_ready(b)
    r = b.batch("2", "--model", "opus")
    assert r.returncode == 2 and "--agent" in r.stderr


# ------------------------------------------------------------------ limits


@pytest.mark.timeout(180)
def test_a_batch_past_its_memory_ends_oom_and_the_next_recovers(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", done=SLOW))
    assert b.batch("1", "--mem", "30M").returncode == 0  # wf orch run alone is more than that
    st = b.wait_ended()
    assert st["reason"] == "oom" and st["state"] == "oom" and st["exit"] == 137
    assert b.summary(st)[-1].startswith("ended: oom at ")
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    assert st["reason"] == "N reached" and b.archived() == ["a1"]


@pytest.mark.timeout(120)
def test_a_batch_whose_memory_does_not_fit_yet_waits_and_says_so(b: Batch) -> None:
    three_ready(b)
    env = dict(b.env, WF_RES_MEMORY="2G")  # 1G may be reserved in all
    other = subprocess.Popen(
        [sys.executable, "-m", "wf", "res", "run", "--mem", "800M", "--title", "big", "--", "sleep", "300"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def res(*args: str) -> Any:
        r = wfproc.run([sys.executable, "-m", "wf", "res", *args], capture_output=True, text=True, env=env)
        return json.loads(r.stdout) if "--json" in args else r

    try:
        b.wait_for(lambda: res("ls", "--json"))
        big = res("ls", "--json")[0]
        r = b.batch("1", "--mem", "500M", env=env)
        assert r.returncode == 0, r.stderr
        assert "it waits first: waiting for room: 500M does not fit" in r.stdout and "(big, 800M)" in r.stdout
        assert b.status()["alive"] and b.status("a1") == "pending"  # it waits: nothing claimed yet
        assert res("stop", big["id"]).returncode == 0  # room: the batch goes on
        st = b.wait_ended()
        assert st["reason"] == "N reached" and b.archived() == ["a1"]
        assert any(x.startswith("- note: waiting for room") for x in b.summary(st))
    finally:
        other.kill()


@pytest.mark.timeout(120)
def test_two_batches_started_at_once_give_exactly_one(b: Batch) -> None:
    # the task's Done check waits until all three have answered: the batch that won is
    # still running when the others look, however slowly the machine starts them
    go = b.root.parent / "go"
    script = b.root.parent / "wait_for_go.py"
    script.write_text(f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n")
    wait = f"`python3 {script}`"
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", done=wait, extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", done=wait, extra="Prio: 1"),
    )
    argv = [sys.executable, "-m", "wf", "batch", "1"]
    out, null = subprocess.PIPE, subprocess.DEVNULL
    procs = [
        subprocess.Popen(argv, cwd=b.root, env=b.env, text=True, stdout=out, stderr=out, stdin=null)
        for _ in range(3)
    ]
    results = [(p.wait(timeout=60), p.communicate()) for p in procs]
    go.write_text("")
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1, 1], results
    assert all("a batch is running already" in err for code, (_, err) in results if code == 1)
    st = b.wait_ended()
    assert len(list((b.root / ".wf" / "batch").glob("*.json"))) == 1  # one record, no plan left over
    assert b.archived() == ["a1"] and st["reason"] == "N reached"


@pytest.mark.parametrize(
    "data", ['{"stamp": "x", "pid": "nope", "state": "running"}', "[]", "{", '{"stamp": 1}']
)
def test_a_broken_batch_record_never_crashes(b: Batch, data: str) -> None:
    three_ready(b)
    folder = b.root / ".wf" / "batch"
    folder.mkdir(parents=True)
    (folder / "20260101T000000Z.json").write_text(data)
    for args in (["--status"], ["--status", "--json"], ["--stop"], ["1", "--dry-run"]):
        r = b.batch(*args)
        assert r.returncode in (0, 1, 2), (args, r.stderr)
        assert "internal error" not in r.stderr, (args, r.stderr)


def test_the_summary_marks_a_cost_that_is_the_tools_own_or_unpriced(wf: WfRunner) -> None:
    """A task line's dollars carry the cost log's mark ('*' the tool's own figure, '?'
    unpriced models left out, '~' estimated output); the footer's total carries them with
    their legend, never a bare $0.00 for a cost nobody knows."""
    from wf.base import project as projectmod
    from wf.night.batchlog import Follower
    from wf.night.batchplan import Record

    project = projectmod.load(wf.root)
    out = wf.root / "out"
    out.mkdir(exist_ok=True)
    rec = Record(stamp="s", started="t", summary="out/sum.md", log="out/b.log", plan={"lanes": ["a"]},
                 offsets={"orch": 0, "cost": 0, "events": 0}, known_ids=("t0",))  # fmt: skip
    follower = Follower(project, rec)
    cost = "ts=2026-12-03T01:00:00Z id={} lane=a model=m done=1 est={} usd={} usd_rep={}"
    (out / "wf-cost.log").write_text(
        "\n".join(
            [
                cost.format("t1", 0, "0.5000", "0.5000") + " cost_source=tool",
                cost.format("t2", 0, "0.0000", "0.0000") + " unpriced=zeta cost_source=unpriced",
                cost.format("t3", 5, "0.2500", "0.2000") + " cost_source=table",
                cost.format("t4", 0, "1.0000", "1.0000"),  # a line written before cost_source
            ]
        )
        + "\n"
    )
    orch = "ts=2026-12-03T01:0{}:00Z lane=a id={} outcome=done commit=abc dur_s=60"
    (out / "wf-orch.log").write_text("\n".join(orch.format(n, f"t{n}") for n in range(1, 6)) + "\n")
    follower.poll()
    follower.footer("N reached")
    lines = (wf.root / "out" / "sum.md").read_text().splitlines()
    assert [x.split()[6] for x in lines if " commit=" in x] == ["$0.50*", "$0.00?", "~$0.25", "$1.00", "$?"]
    assert "done: 5, not done: 0" in lines, "every task line is counted, whatever its mark"
    assert "total: ~$1.75*? (1 task(s) without a cost)" in lines
    assert any(x.startswith("* the tool's own figure") for x in lines)
    assert any(x.startswith("? leaves out unpriced model(s)") for x in lines)
    assert any(x.startswith("~ includes estimated output") for x in lines)


def test_the_footer_counts_typed_rows_not_the_summarys_words(wf: WfRunner) -> None:
    """The footer (and the questions for a person) count the batch's typed task rows: a
    summary whose lines were reworded, or that holds a line that only looks like a task,
    is counted as the rows say; a batch begun by a wf that kept no rows gets no counts
    rather than made-up ones."""
    from wf.base import project as projectmod
    from wf.night.batchlog import Follower
    from wf.night.batchplan import Record

    project = projectmod.load(wf.root)
    out = wf.root / "out"
    out.mkdir(exist_ok=True)
    rec = Record(stamp="s", started="t", summary="out/sum.md", log="out/b.log", plan={"lanes": ["a"]},
                 offsets={"orch": 0, "cost": 0, "events": 0}, known_ids=("t0",))  # fmt: skip
    follower = Follower(project, rec)
    follower.begin()
    (out / "wf-cost.log").write_text(
        "ts=2026-12-03T01:00:00Z id=t1 lane=a model=m usd=0.5000 cost_source=table\n"
    )
    orch = "ts=2026-12-03T01:0{}:00Z lane=a id={} outcome={} commit=abc dur_s=60"
    (out / "wf-orch.log").write_text(
        orch.format(1, "t1", "done") + "\n" + orch.format(2, "t2", "handback") + "\n"
    )
    follower.poll()
    summary = out / "sum.md"
    summary.write_text(
        summary.read_text().replace(" done ", " finished ")
        + "- 01:09 a t9 done commit=abc $9.00 1m00s\n"  # looks like a task line; no task was posted
    )
    assert follower.posted == 2
    follower.footer("N reached")
    lines = summary.read_text().splitlines()
    assert "done: 1, not done: 1" in lines and "total: $0.50 (1 task(s) without a cost)" in lines, lines
    older = Follower(project, Record(stamp="old", started="t", summary="out/old.md", log="out/o.log",
                                     plan={"lanes": ["a"]}, offsets={"orch": 0, "cost": 0, "events": 0}))  # fmt: skip
    (out / "old.md").write_text("- 01:01 a t1 done commit=abc $0.50 1m00s\n")
    older.footer("N reached")
    old = (out / "old.md").read_text().splitlines()
    assert not any(x.startswith(("done:", "total:")) for x in old), old
