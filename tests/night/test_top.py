"""wf top: what the night is doing now, read-only, from the state wf keeps. The live
case runs a real batch with the real claude against the scripted model API, and looks
while its worker is mid-task."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.model_api import ModelApi, Request, Step, Text, ToolUse
from tests.orch.test_limits import REPORT, claude_lane, needs_real, real_env, setup, wait_for, wf_real

ROOT = Path(__file__).resolve().parent.parent.parent


def top_json(wf: WfRunner, env: dict[str, str] | None = None) -> dict[str, Any]:
    r = wfproc.run(
        [sys.executable, "-m", "wf", "top", "--json"], cwd=wf.root, capture_output=True, text=True,
        env=env or {**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert isinstance(out, dict)
    return out


def test_who_waits_for_a_person_comes_first_and_a_bad_backlog_is_said(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text(
        "# Tasks\n\n## a1: Ask\nStatus: awaiting: which database?\n\n## b1: Stuck\nStatus: blocked: CI is down\n"
        "\n## c1: Free\n"
    )
    snap = top_json(wf)
    assert snap["needs_person_count"] == 2
    assert [(w["id"], w["kind"]) for w in snap["needs_person"]] == [("a1", "awaiting"), ("b1", "blocked")]
    assert snap["lanes"] == [] and snap["batch"] is None and snap["problems"] == []
    text = wf.ok("top")  # piped: one snapshot, as text
    lines = text.splitlines()
    assert lines[2] == "needs a person: 2" and lines[3].startswith("  a1 awaiting: which database?")
    # a task that cannot be read may be one waiting for a person: never a silent "0"
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## A1: Ask\nStatus: awaiting: which database?\n")
    snap = top_json(wf)
    assert snap["needs_person_count"] == 0 and "bad task id 'A1'" in snap["problems"][0]
    assert "! TASKS.md:3: bad task id 'A1'" in wf.ok("top")


def test_a_lane_record_that_cannot_be_trusted_is_shown_not_skipped(wf: WfRunner) -> None:
    (wf.root / ".wf" / "orch").mkdir(parents=True, exist_ok=True)
    (wf.root / ".wf" / "orch" / "x.json").write_text("{not json")
    snap = top_json(wf)
    assert [(lane["lane"], bool(lane["corrupt"])) for lane in snap["lanes"]] == [("x", True)]
    assert "x          record cannot be trusted:" in wf.ok("top")


def test_the_live_view_draws_in_place_and_q_quits(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a1: Ask\nStatus: awaiting: which database?\n")
    pid, fd = pty.fork()
    if pid == 0:  # the child: wf top on a terminal
        os.chdir(wf.root)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "LINES": "24", "COLUMNS": "100"}
        os.execve(sys.executable, [sys.executable, "-m", "wf", "top", "--interval", "0.3"], env)
    seen = b""
    deadline = time.monotonic() + 60
    while b"q quits" not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    assert b"needs a person: 1" in seen and b"q quits" in seen, seen[-500:]
    assert b"\x1b[" in seen  # drawn by curses, in place, not printed line after line
    os.write(fd, b"q")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0


class Waiting:
    """The model's side of a worker that stops mid-task: its first turn runs a Bash call
    that commits the task's file, then waits until ``go`` exists; then the report."""

    def __init__(self, go: Path) -> None:
        self.go = go

    def __call__(self, request: Request) -> Step:
        if request.step == 0:
            cmd = (
                f"echo hi > c1.txt && git add c1.txt && git commit -qm c1 && "
                f"while [ ! -e {self.go} ]; do sleep 0.2; done"
            )
            return ToolUse("Bash", {"command": cmd, "description": "write, commit, wait"})
        return Text(REPORT.format(tid="c1"))


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_top_during_a_batch_shows_the_running_task_and_its_cost_so_far(wf: WfRunner, tmp_path: Path) -> None:
    setup(wf, claude_lane(), "c1")
    go = tmp_path / "go"
    with ModelApi(Waiting(go)) as api:
        env = real_env(api)
        r = wf_real(wf, api, "batch", "1", "--lanes", "c")
        assert r.returncode == 0, r.stdout + r.stderr
        seen: dict[str, Any] = {}

        def mid_task() -> bool:  # the worker's first turn is in its transcript, and it waits
            seen.update(top_json(wf, env))
            lanes = seen["lanes"]
            # claude may write its first turn before that turn's usage: wait for a cost
            return bool(lanes) and (lanes[0]["cost_usd"] or 0) > 0 and api.requests != []

        wait_for(mid_task, timeout=150)
        lane = seen["lanes"][0]
        assert (lane["lane"], lane["task"], lane["adapter"], lane["worker"]) == ("c", "c1", "claude", "alive")
        assert lane["cost_usd"] > 0 and lane["elapsed_s"] is not None and lane["quiet_s"] is not None
        batch = seen["batch"]
        assert batch["alive"] and batch["n"] == 1 and batch["posted"] == 0, batch
        go.touch()

        def ended() -> bool:
            st = json.loads(wf_real(wf, api, "batch", "--status", "--json").stdout)
            return st["job"] is not None and not st["alive"]

        wait_for(ended, timeout=150)
        after = top_json(wf, env)
    assert api.outside == []
    assert after["lanes"] == []
    assert (after["batch"]["posted"], after["batch"]["done"], after["batch"]["alive"]) == (1, 1, False)
    git(wf.root, "log", "--oneline")


def test_a_handback_outside_any_batch_is_a_task_waiting_for_a_person(wf: WfRunner) -> None:
    """Handed back by an interactive orchestrator (no batch ran): wf show and wf top agree
    it waits for a person (the one hold rule, not a batch's rows)."""
    from tests.orch.test_orch import Orch, lanes_toml, task

    o = Orch(wf)
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    assert wf.ok("orch", "pick", "a").startswith("spawn:")
    wf.ok("orch", "post", "a", "--result", "handback", "--note", "needs a schema first", "--no-pick")
    assert json.loads(wf.ok("show", "a1", "--json"))["hold"]["kind"] == "handback"
    snap = top_json(wf)
    assert [(w["id"], w["kind"]) for w in snap["needs_person"]] == [("a1", "handback")], snap
    assert "needs a person: 1" in wf.ok("top") and "a1 handback: " in wf.ok("top")
    # a person changes the task: its hold ends, and nobody waits any more
    wf.ok("status", "a1", "pending")
    assert top_json(wf)["needs_person"] == []


# ------------------------------------------------------------------ terminals wf top cannot draw on (review 1.6)


def on_a_pty(wf: WfRunner, term: str | None, *args: str, keys: bytes = b"") -> tuple[bytes, int]:
    """``wf top`` on a terminal with TERM ``term`` (None: unset): what it drew, and its
    exit code; ``keys`` are typed once it drew its first screen."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(wf.root)
        env = {k: v for k, v in os.environ.items() if k != "TERM"}
        env |= {"PYTHONPATH": str(ROOT), "LINES": "24", "COLUMNS": "100"} | ({"TERM": term} if term else {})
        os.execve(sys.executable, [sys.executable, "-m", "wf", "top", *args], env)
    seen = b""
    deadline = time.monotonic() + 60
    typed = not keys
    while time.monotonic() < deadline:
        if not typed and b"q quits" in seen:
            os.write(fd, keys)
            typed = True
        if select.select([fd], [], [], 1)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return seen, os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("term", ["dumb", None, "no-such-terminal"])
def test_a_terminal_curses_cannot_draw_on_gets_one_snapshot(wf: WfRunner, term: str | None) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a1: Ask\nStatus: awaiting: which database?\n")
    seen, code = on_a_pty(wf, term)
    assert code == 0, seen[-800:]
    assert b"needs a person: 1" in seen and b"Traceback" not in seen, seen[-800:]
    assert b"q quits" not in seen  # the --once output, not a live view


def test_a_terminal_that_cannot_hide_its_cursor_still_draws_live(wf: WfRunner) -> None:
    """vt100 has no civis: curs_set fails there, and the view draws with the cursor shown."""
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a1: Ask\nStatus: awaiting: which database?\n")
    seen, code = on_a_pty(wf, "vt100", "--interval", "0.3", keys=b"q")
    assert code == 0 and b"q quits" in seen and b"needs a person: 1" in seen, seen[-800:]


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "0.1", "3601", "x"])
def test_a_bad_interval_is_a_usage_error(wf: WfRunner, bad: str) -> None:
    r = wf("top", "--interval", bad)
    assert r.code == 2 and "--interval" in r.err and "Traceback" not in r.err, r.err


@pytest.mark.timeout(180)
def test_wf_batch_status_counts_a_handback_made_after_its_batch(wf: WfRunner) -> None:
    from tests.night.test_batch import Batch
    from tests.orch.test_orch import lanes_toml, task

    b = Batch(wf)
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x", extra="Prio: 2"),
    )
    assert b.batch("1").returncode == 0
    b.wait_ended()
    assert wf.ok("orch", "pick", "a").startswith("spawn:")
    wf.ok("orch", "post", "a", "--result", "handback", "--note", "later", "--no-pick")
    st = json.loads(wf.ok("batch", "--status", "--json"))
    assert [(w["id"], w["kind"]) for w in st["needs_person"]] == [("a2", "handback")], st
