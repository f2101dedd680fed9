"""Headless workers against fake claude, codex and opencode executables that speak the
real tools' formats. wf runs as a real process (it becomes a subreaper and handles
signals, which a test process must not)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner

FAKES = Path(__file__).parent.parent / "fakes"
ROOT = Path(__file__).resolve().parent.parent.parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


class Workers:
    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        self.tmp = tmp
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(FAKES), self.env["PATH"]])
        self.env["PYTHONPATH"] = str(ROOT)
        self.env["FAKE_ARGV_LOG"] = str(tmp / "argv.log")
        self.env["WF_RESULT_GRACE"] = "0.5"

    def run(self, *args: str, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
        return wfproc.run(
            [sys.executable, "-m", "wf", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **extra},
            stdin=subprocess.DEVNULL,
        )

    def start(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "wf", *args],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **extra},
            stdin=subprocess.DEVNULL,
        )

    def status(self, run: str, unit: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.unit(run, unit) / "status.json").read_text())
        return data

    def unit(self, run: str, unit: str) -> Path:
        return self.root / ".wf" / "runs" / run / unit

    def output(self, run: str, unit: str) -> str:
        """The answer, without the final newline some tools add (codex -o)."""
        return (self.unit(run, unit) / "output.txt").read_text().removesuffix("\n")

    def argv_calls(self) -> list[list[str]]:
        path = self.tmp / "argv.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    return Workers(wf.root, tmp_path)


# ------------------------------------------------------------------ normal answers


def test_claude_answer_session_and_transcript(w: Workers, sealed_env: Path) -> None:
    r = w.run("dispatch", "r1", "u1", "--adapter", "claude", "--model", "sonnet", "--prompt", "hello world")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("u1: done ")
    assert w.output("r1", "u1") == "ok: hello world"
    st = w.status("r1", "u1")
    sid = (w.unit("r1", "u1") / "session.txt").read_text().strip()
    assert st["session_id"] == sid and st["state"] == "done" and st["answer"] == "result"
    assert st["version"] == "2.1.332 (Claude Code)"
    assert st["usage"]["turns"] == 2 and st["usage"]["usd_rep"] > 0
    slug = "".join(c if c.isalnum() else "-" for c in str(w.unit("r1", "u1") / "scratch"))
    assert (sealed_env / ".claude" / "projects" / slug / f"{sid}.jsonl").exists()
    call = next(c for c in w.argv_calls() if "-p" in c)
    assert call[1:6] == ["-p", "--output-format", "stream-json", "--verbose", "--session-id"]
    assert "--model=sonnet" in call and "--permission-mode=acceptEdits" in call
    assert "hello world" not in " ".join(call)  # the prompt went on stdin


def test_claude_resume(w: Workers) -> None:
    assert w.run("dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "first").returncode == 0
    sid = w.status("r1", "u1")["session_id"]
    r = w.run("dispatch", "r1", "u2", "--resume-from", "u1", "--prompt", "second")
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "u2") == f"resumed {sid}: ok: second"
    st = w.status("r1", "u2")
    assert st["resumed_from"] == "u1" and st["session_id"] == sid and st["adapter"] == "claude"
    assert ["--resume", sid] == next(c for c in w.argv_calls() if "--resume" in c)[5:7]


def test_codex_answer_and_resume(w: Workers) -> None:
    r = w.run("dispatch", "r1", "c1", "--adapter", "codex", "--model", "gpt-5.3-codex", "--prompt", "fix it")
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "c1") == "ok: fix it"
    st = w.status("r1", "c1")
    thread = st["session_id"]
    assert thread and st["answer"] == "output_file" and st["usage"]["out"] > 0
    r = w.run("dispatch", "r1", "c2", "--resume-from", "c1", "--prompt", "and more")
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "c2") == f"resumed {thread}: ok: and more"
    call = w.argv_calls()[-1]
    assert call[call.index("resume") + 1] == thread and call[-1] == "-"
    assert call.index("-C") < call.index("resume")


def test_opencode_answer(w: Workers) -> None:
    r = w.run(
        "dispatch",
        "r1",
        "o1",
        "--adapter",
        "opencode",
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--prompt",
        "tidy up",
    )
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "o1") == "ok: tidy up"
    st = w.status("r1", "o1")
    assert st["session_id"].startswith("ses_") and st["usage"]["out"] > 0


def test_cmd_output_file_and_env(w: Workers) -> None:
    script = (
        "import os, sys; p = sys.stdin.read(); "
        "open(os.environ['WF_OUTPUT_FILE'], 'w').write('answer for ' + p + ' ' + os.environ['WF_SESSION_ID'])"
    )
    r = w.run(
        "dispatch",
        "r1",
        "k1",
        "--adapter",
        "cmd",
        "--cmd",
        f'{sys.executable} -c "{script}"',
        "--prompt",
        "P",
        "--no-contract",  # its stdin is the prompt as given
    )
    assert r.returncode == 0, r.stderr
    sid = w.status("r1", "k1")["session_id"]
    assert w.output("r1", "k1") == f"answer for P {sid}"


def test_a_worker_never_gets_the_git_location_of_whoever_started_wf(w: Workers) -> None:
    """wf leaves its own environment alone, but a GIT_DIR (or GIT_WORK_TREE, a -c of the git
    that started wf) must not send a worker's own git to another repository."""
    script = (
        "import os; open(os.environ['WF_OUTPUT_FILE'], 'w').write("
        "' '.join(os.environ.get(v, '-') for v in ('GIT_DIR', 'GIT_WORK_TREE', 'GIT_CONFIG_PARAMETERS', 'KEEP')))"
    )
    r = w.run(
        "dispatch", "r1", "g1", "--adapter", "cmd", "--cmd", f'{sys.executable} -c "{script}"', "--prompt", "P",
        GIT_DIR="/elsewhere/.git", GIT_WORK_TREE="/elsewhere", GIT_CONFIG_PARAMETERS="'a.b=c'", KEEP="kept",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "g1") == "- - - kept"


def test_same_unit_twice_is_refused(w: Workers) -> None:
    assert w.run("dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "x").returncode == 0
    r = w.run("dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "x")
    assert r.returncode == 1 and "already exists in run r1; use --resume-from u1" in r.stderr


# ------------------------------------------------------------------ failures


def test_hang_is_stalled_and_its_tree_killed(w: Workers, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    r = w.run(
        "dispatch",
        "r1",
        "h1",
        "--adapter",
        "claude",
        "--stall",
        "1.5",
        "--prompt",
        "FORK HANG",
        FAKE_GRANDCHILD_PIDFILE=str(pidfile),
    )
    assert r.returncode == 4
    st = w.status("r1", "h1")
    assert st["state"] == "stalled" and st["fallback"] is True
    assert not alive(st["pid"])
    assert not alive(int(pidfile.read_text()))
    assert w.output("r1", "h1").startswith("FALLBACK: unit h1 ended without an answer (state stalled")


@pytest.mark.timeout(120)
def test_a_stop_ends_the_whole_tree_at_once_while_others_run(w: Workers, tmp_path: Path) -> None:
    """A stalled unit's child that cleared its environment (no token) is ended with the
    unit when it is stopped, not only when the whole run ends."""
    pidfile, go = tmp_path / "child.pid", tmp_path / "go"
    hang = (
        "import subprocess, time; "
        "p = subprocess.Popen(['env', '-i', 'sleep', '300']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)"
    )
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('long')"
    m = manifest(
        tmp_path / "m.json",
        [{"id": "hang", "prompt": "x", "cmd": [sys.executable, "-c", hang], "stall": 1},
         {"id": "long", "prompt": "x", "cmd": [sys.executable, "-c", wait]}],
        adapter="cmd",
    )  # fmt: skip
    p = w.start("run", str(m), "--run", "st")
    try:
        status = w.unit("st", "hang") / "status.json"
        deadline = time.monotonic() + 60
        while not (status.exists() and w.status("st", "hang")["state"] == "stalled"):
            assert time.monotonic() < deadline, "hang was never stopped"
            time.sleep(0.05)
        assert w.status("st", "long")["state"] == "running"  # the run goes on
        assert not alive(int(pidfile.read_text()))
    finally:
        go.touch()
        p.communicate(timeout=60)


def test_printing_forever_times_out(w: Workers) -> None:
    r = w.run("dispatch", "r1", "f1", "--adapter", "codex", "--timeout", "1.5", "--prompt", "FOREVER")
    assert r.returncode == 4
    st = w.status("r1", "f1")
    assert st["state"] == "timeout" and not alive(st["pid"])
    assert st["duration_s"] < 30


def test_grandchild_does_not_outlive_the_unit(w: Workers, tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    r = w.run(
        "dispatch", "r1", "g1", "--adapter", "codex", "--prompt", "FORK", FAKE_GRANDCHILD_PIDFILE=str(pidfile)
    )
    assert r.returncode == 0, r.stderr
    assert w.output("r1", "g1") == "ok: FORK"
    gc = int(pidfile.read_text())
    assert not alive(gc)
    assert w.status("r1", "g1")["leftovers_killed"] >= 1


@pytest.mark.timeout(120)
def test_units_ending_together_each_end_their_own_leftovers(w: Workers, tmp_path: Path) -> None:
    """Units that exit in the same pass are settled together, the ones that left
    nothing behind without a thread of their own: each that left a detached grandchild
    has it ended at its own end (the run still going), none is taken for another."""
    fork = (
        "import subprocess, sys; "
        "p = subprocess.Popen(['sleep', '300'], start_new_session=True); "
        f"open({str(tmp_path)!r} + '/' + sys.argv[1] + '.pid', 'w').write(str(p.pid))"
    )
    check = (
        "import os, sys, time\n"
        "def dead(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] in 'ZX'\n"
        "    except OSError:\n"
        "        return True\n"
        f"files = [{str(tmp_path)!r} + f'/g{{i}}.pid' for i in range(3)]\n"
        "deadline = time.monotonic() + 60\n"
        "while time.monotonic() < deadline:\n"
        "    if all(os.path.exists(f) and open(f).read() and dead(int(open(f).read())) for f in files):\n"
        "        print('all ended'); sys.exit(0)\n"
        "    time.sleep(0.05)\n"
        "sys.exit(1)\n"
    )
    units = [{"id": f"g{i}", "prompt": "x", "cmd": [sys.executable, "-c", fork, f"g{i}"]} for i in range(3)]
    units += [{"id": f"q{i}", "prompt": "x", "cmd": ["true"]} for i in range(4)]
    units.append({"id": "watch", "prompt": "x", "cmd": [sys.executable, "-c", check]})
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    r = w.run("run", str(m), "--run", "tg", "--max-parallel", "8", timeout=100)
    assert r.returncode == 0, r.stdout + r.stderr
    assert w.output("tg", "watch") == "all ended"  # ended while the run still went on
    for i in range(3):
        st = w.status("tg", f"g{i}")
        assert st["state"] == "done" and st["leftovers_killed"] == 1
        assert not alive(int((tmp_path / f"g{i}.pid").read_text()))
    for i in range(4):
        assert w.status("tg", f"q{i}")["leftovers_killed"] == 0


def test_crash_gets_a_fallback_answer(w: Workers) -> None:
    r = w.run("dispatch", "r1", "c1", "--adapter", "claude", "--prompt", "CRASH")
    assert r.returncode == 4
    st = w.status("r1", "c1")
    assert st["state"] == "failed" and st["exit_code"] == 1 and st["fallback"] is True
    assert "fake crash" in (st["error"] or "")
    assert w.output("r1", "c1").startswith("FALLBACK:")


def test_no_answer_gets_a_fallback(w: Workers) -> None:
    for adapter in ("claude", "codex", "opencode"):
        model = (
            "anthropic/claude-sonnet-4-5"
            if adapter == "opencode"
            else "sonnet"
            if adapter == "claude"
            else "o3"
        )
        r = w.run(
            "dispatch", "r1", f"n-{adapter}", "--adapter", adapter, "--model", model, "--prompt", "NOANSWER"
        )
        assert r.returncode == 4, adapter
        st = w.status("r1", f"n-{adapter}")
        assert st["fallback"] is True and st["answer"] == "fallback", adapter
        assert w.output("r1", f"n-{adapter}").startswith("FALLBACK: unit"), adapter


def test_error_result_is_failed(w: Workers) -> None:
    r = w.run("dispatch", "r1", "e1", "--adapter", "claude", "--prompt", "ERROR")
    assert r.returncode == 4
    st = w.status("r1", "e1")
    assert (st["failure"], st["reason"]) == ("task", "fake error during execution")


def test_claude_lingering_after_its_result_is_done(w: Workers) -> None:
    r = w.run("dispatch", "r1", "l1", "--adapter", "claude", "--prompt", "LINGER 60")
    assert r.returncode == 0, r.stderr
    st = w.status("r1", "l1")
    assert st["state"] == "done" and st["duration_s"] < 30 and not alive(st["pid"])
    assert w.output("r1", "l1") == "ok: LINGER 60"


def test_answer_written_before_a_stall_is_kept(w: Workers) -> None:
    script = "import os, time; open(os.environ['WF_OUTPUT_FILE'], 'w').write('kept answer'); time.sleep(60)"
    r = w.run(
        "dispatch",
        "r1",
        "k1",
        "--adapter",
        "cmd",
        "--stall",
        "1",
        "--cmd",
        f'{sys.executable} -c "{script}"',
        "--prompt",
        "x",
    )
    assert r.returncode == 4
    st = w.status("r1", "k1")
    assert st["state"] == "stalled" and st["fallback"] is False
    assert w.output("r1", "k1") == "kept answer"


# ------------------------------------------------------------------ many units


def manifest(path: Path, units: list[dict[str, Any]], **defaults: Any) -> Path:
    path.write_text(json.dumps({"defaults": defaults, "units": units}))
    return path


@pytest.mark.timeout(120)
def test_twenty_units_never_more_than_four_at_once(w: Workers, tmp_path: Path) -> None:
    conc = tmp_path / "conc"
    conc.mkdir()
    m = manifest(
        tmp_path / "m.json", [{"id": f"u{i:02d}", "prompt": "SLEEP 0.4"} for i in range(20)], adapter="codex"
    )
    r = w.run(
        "run", str(m), "--max-parallel", "4", "--run", "many", timeout=100, FAKE_CONCURRENCY_DIR=str(conc)
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len([ln for ln in lines if ": done " in ln]) == 20
    assert lines[-1].startswith("run many: 20/20 done")
    counts = [int(x) for x in (conc / "counts.txt").read_text().split()]
    assert len(counts) == 20 and max(counts) <= 4
    assert max(counts) == 4  # and it did run four at once


@pytest.mark.timeout(120)
def test_monitor_wakes_on_the_first_stall(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "hang", "prompt": "HANG", "stall": 1.5}, {"id": "slow", "prompt": "SLEEP 20"}],
        adapter="codex",
    )
    runner = w.start("run", str(m), "--run", "mon")
    try:
        deadline = time.monotonic() + 30
        while not (w.root / ".wf" / "runs" / "mon").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        r = w.run("monitor", "mon", "--timeout", "60", timeout=90)
        assert r.returncode == 4, (r.stdout, r.stderr)
        assert "hang: stalled" in r.stdout and "slow: running" in r.stdout
        assert time.monotonic() - t0 < 19  # woke before the slow unit ended
    finally:
        runner.send_signal(signal.SIGINT)
        runner.communicate(timeout=60)


@pytest.mark.timeout(120)
def test_ctrl_c_leaves_no_worker_and_every_status_final(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json", [{"id": f"s{i}", "prompt": "FORK SLEEP 60"} for i in range(3)], adapter="claude"
    )
    pidfile = tmp_path / "gc.pid"
    runner = w.start(
        "run", str(m), "--max-parallel", "2", "--run", "cc", FAKE_GRANDCHILD_PIDFILE=str(pidfile)
    )
    deadline = time.monotonic() + 30
    while True:
        states = [
            w.status("cc", f"s{i}")["state"]
            for i in range(3)
            if (w.unit("cc", f"s{i}") / "status.json").exists()
        ]
        if states.count("running") == 2 and pidfile.exists():
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.05)
    time.sleep(0.3)
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    for i in range(3):
        st = w.status("cc", f"s{i}")
        assert st["state"] == "interrupted", st
        if st.get("pid"):
            assert not alive(st["pid"])
    assert not alive(int(pidfile.read_text().split()[0]))


def test_runs_views(w: Workers) -> None:
    w.run("dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "alpha", "--no-contract")
    w.run("dispatch", "r1", "u2", "--adapter", "claude", "--prompt", "CRASH", "--no-contract")
    listing = w.run("runs").stdout
    assert listing.startswith("r1  2 units  done=1 failed=1")
    status = w.run("runs", "status", "r1").stdout.splitlines()
    assert status[0].startswith("u1: done ") and status[0].endswith("ok: alpha")
    data = json.loads(w.run("runs", "status", "r1", "--json").stdout)
    assert [d["unit"] for d in data] == ["u1", "u2"]
    assert w.run("runs", "output", "r1", "u1").stdout == "ok: alpha"
    assert '"type":"result"' in w.run("runs", "output", "r1", "u1", "--log").stdout.replace(" ", "")
    g = w.run("gather", "r1", "--quiet", "0.2")
    assert (
        g.returncode == 4
        and "== u1 (done)\nok: alpha" in g.stdout
        and "== u2 (failed task: fake crash, exit 1, FALLBACK)" in g.stdout
    )


def test_clone_unit_changes_stay_in_the_clone(w: Workers) -> None:
    from tests.conftest import git

    git(w.root, "add", "-A")
    git(w.root, "commit", "-qm", "setup")
    script = "open('made.txt', 'w').write('by the worker\\n'); print('wrote it')"
    r = w.run(
        "dispatch",
        "r1",
        "c1",
        "--clone",
        "--adapter",
        "cmd",
        "--cmd",
        f'{sys.executable} -c "{script}"',
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stderr
    st = w.status("r1", "c1")
    clone = Path(st["clone"])
    assert (clone / "made.txt").exists() and not (w.root / "made.txt").exists()
    assert git(clone, "remote") == ""
    d = w.run("runs", "diff", "r1", "c1").stdout
    assert "untracked:\n  made.txt" in d
    assert git(w.root, "status", "--porcelain") == ""


def test_doctor_lists_adapters(w: Workers) -> None:
    r = w.run("doctor")
    assert "adapter: claude: 2.1.332 (Claude Code) at " in r.stdout
    assert "adapter: codex: codex-cli 0.171.0 at " in r.stdout
    bare = w.run("doctor", PATH=str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    assert bare.returncode == 1
    assert "adapter: claude: not installed (lanes haiku, opus, sonnet use it)" in bare.stdout
    assert "adapter: codex: not installed; install: npm install -g @openai/codex (info)\n" in bare.stdout


def test_status_records_the_transcript_cost(w: Workers) -> None:
    assert (
        w.run("dispatch", "r1", "u1", "--adapter", "claude", "--model", "sonnet", "--prompt", "hi").returncode
        == 0
    )
    st = w.status("r1", "u1")
    cost = st["cost"]
    assert cost["kind"] == "session" and cost["agent"] == st["session_id"] and cost["turns"] == 2
    assert cost["model"].startswith("claude-sonnet") and cost["usd_rep"] > 0
    assert st["cost_check"] == "agrees"
    assert (
        w.run(
            "dispatch", "r1", "c1", "--adapter", "codex", "--model", "gpt-5.3-codex", "--prompt", "hi"
        ).returncode
        == 0
    )
    st = w.status("r1", "c1")
    assert st["cost"]["kind"] == "codex" and st["cost"]["model"] == "gpt-5.3-codex" and st["cost"]["usd"] > 0


def test_dispatch_ctrl_c_exits_130(w: Workers) -> None:
    p = w.start("dispatch", "r1", "s1", "--adapter", "claude", "--prompt", "SLEEP 30")
    deadline = time.monotonic() + 30
    while not (w.unit("r1", "s1") / "status.json").exists() or w.status("r1", "s1")["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode == 130
    st = w.status("r1", "s1")
    assert st["state"] == "interrupted" and not alive(st["pid"])


def test_monitor_says_a_unit_is_lost_when_its_supervisor_was_killed(w: Workers, tmp_path: Path) -> None:
    m = manifest(tmp_path / "m.json", [{"id": "slow", "prompt": "SLEEP 60"}], adapter="codex")
    p = w.start("run", str(m), "--run", "k9")
    deadline = time.monotonic() + 30
    while not (w.unit("k9", "slow") / "status.json").exists() or w.status("k9", "slow")["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    worker = w.status("k9", "slow")["pid"]
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    os.kill(worker, signal.SIGKILL)
    time.sleep(0.2)
    r = w.run("monitor", "k9", "--timeout", "10")
    assert r.returncode == 4 and "slow: lost" in r.stdout


def test_a_child_that_cleared_its_environment_does_not_outlive_dispatch(w: Workers, tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped.pid"
    script = (
        "import os, subprocess, sys; "
        "p = subprocess.Popen(['env', '-i', 'setsid', 'sleep', '300'], start_new_session=True); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); print('started')"
    )
    r = w.run(
        "dispatch",
        "r1",
        "e1",
        "--adapter",
        "cmd",
        "--cmd",
        f'{sys.executable} -c "{script}"',
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stderr
    time.sleep(0.2)
    assert not alive(int(pidfile.read_text()))


def test_output_on_stderr_alone_keeps_a_worker_from_stalling(w: Workers) -> None:
    script = "import sys, time\nfor i in range(8):\n    print(i, file=sys.stderr, flush=True); time.sleep(0.4)\nprint('fine')"
    r = w.run(
        "dispatch",
        "r1",
        "s1",
        "--adapter",
        "cmd",
        "--stall",
        "1.5",
        "--cmd",
        f'{sys.executable} -c "{script}"',
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stdout
    assert w.status("r1", "s1")["state"] == "done" and w.output("r1", "s1") == "fine"
