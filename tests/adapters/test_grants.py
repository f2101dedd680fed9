"""Denials and grants without the real binaries: the claude adapter reads refused calls
from the events 2.1.332 prints (tests/README-model-api.md), the fake claude refuses a
Bash call its argv does not grant as the real one does, and wf reports what was refused
(tests/adapters/test_grants_real.py runs the same with the real claude)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner
from tests.workers.test_workers import Workers
from wf import adapters
from wf.adapters import Denial, Failure, Parsed

COMMAND = "git commit -qm work"
# the events of a refused call as 2.1.332 prints them (tests/adapters/test_model_api.py)
TOOL_USE: dict[str, Any] = {
    "type": "assistant",
    "message": {
        "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                     "input": {"command": COMMAND, "description": "commit"}}],
    },
}  # fmt: skip
REFUSED: dict[str, Any] = {
    "type": "system",
    "subtype": "permission_denied",
    "tool_name": "Bash",
    "tool_use_id": "toolu_01",
    "decision_reason_type": "rule",
    "message": "Claude requested permissions to use Bash, but you haven't granted it yet.",
}
RESULT: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "done",
    "permission_denials": [
        {
            "tool_name": "Bash",
            "tool_use_id": "toolu_01",
            "tool_input": {"command": COMMAND, "description": "x"},
        },
        {
            "tool_name": "Write",
            "tool_use_id": "toolu_02",
            "tool_input": {"file_path": "/etc/x", "content": "y"},
        },
    ],
}


def feed(*events: dict[str, Any]) -> Parsed:
    parsed = Parsed()
    for event in events:
        adapters.get("claude").feed(parsed, event)
    return parsed


def test_claude_result_lists_every_refused_call_with_what_it_wanted() -> None:
    assert feed(RESULT).denied == [Denial("Bash", COMMAND), Denial("Write", "/etc/x")]


def test_claude_refusal_event_counts_before_any_result() -> None:
    """A run killed before its result still tells which call was refused (the event names
    only the call's id: its command comes from the tool_use block)."""
    parsed = feed(TOOL_USE, REFUSED)
    assert parsed.denied == [Denial("Bash", COMMAND)]
    assert feed(TOOL_USE, REFUSED, RESULT).denied == [Denial("Bash", COMMAND), Denial("Write", "/etc/x")]


def test_a_failed_run_with_refused_calls_is_denied_not_task() -> None:
    a = adapters.get("claude")
    parsed = feed(TOOL_USE, REFUSED, {**RESULT, "subtype": "error_max_turns", "is_error": True})
    assert a.classify(parsed, 1, "", "")[0] is Failure.denied
    assert a.classify(feed({**RESULT, "subtype": "error_max_turns", "is_error": True, "permission_denials": []}),
                      1, "", "")[0] is Failure.task  # fmt: skip


# ------------------------------------------------------------------ the fake, through the CLI


@pytest.mark.parametrize("grant", [None, "Bash(git:*)", "Bash(git commit *)", "Bash"])
def test_the_fake_claude_refuses_an_ungranted_bash_call_as_the_real_one(
    wf: WfRunner, tmp_path: Path, grant: str | None
) -> None:
    """As 2.1.332 in print mode: not granted, the call is refused, listed in the result's
    permission_denials, the run goes on and ends done (exit 0); wf records the refusal in
    status.json and says it on the unit's line."""
    w = Workers(wf.root, tmp_path)
    unit: dict[str, object] = {"id": "u1", "adapter": "claude", "model": "sonnet", "prompt": "DENIED"}
    if grant is not None:
        unit["allowed_tools"] = [grant, "Read"]
    (tmp_path / "m.json").write_text(json.dumps({"units": [unit]}))
    r = w.run("run", str(tmp_path / "m.json"), "--run", "r1")
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("r1", "u1")
    assert st["state"] == "done" and st["exit_code"] == 0
    if grant is not None:
        assert "denied" not in st and "denied" not in r.stdout
        return
    assert st["denied"] == [{"tool": "Bash", "what": COMMAND}]
    assert f"u1: done (claude denied Bash `{COMMAND}`)" in r.stdout


# ------------------------------------------------------------------ the loop, with the fake

ASKS = "print('result: awaiting\\ncommit: -\\nfollowups: -\\nnote: Which colour?')\n"
# merges its work, then leaves a stray file in its worktree: a post-check red after the merge
MERGES_UNTIDY = """import subprocess
from pathlib import Path
Path("made.txt").write_text("made\\n")
subprocess.run("git add made.txt && git commit -qm made && wf merge", shell=True, capture_output=True)
Path("stray.txt").write_text("x\\n")
print("result: done\\ncommit: -\\nfollowups: -\\nnote: merged")
"""


def run_fake_lane(root: Path, tmp_path: Path, agent_code: str) -> subprocess.CompletedProcess[str]:
    """`wf orch run` of one claude lane granted only Read, with the fake claude: its Bash
    call is refused, then the agent program plays the rest."""
    from tests.conftest import git
    from tests.workers.test_workers import FAKES as fakes

    agent = tmp_path / "agent.py"
    agent.write_text(f"#!{sys.executable}\n{agent_code}")
    agent.chmod(0o755)
    (root / "wf.toml").write_text(
        '[lanes.s]\nmodel = "sonnet"\nadapter = "claude"\nallowed_tools = ["Read"]\n'
    )
    (root / "TASKS.md").write_text("# Tasks\n\n## t1: Paint it\nModel: sonnet\nDone: true\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "setup")
    env = dict(os.environ, PATH=f"{fakes}{os.pathsep}{os.environ['PATH']}", FAKE_CLAUDE_SCRIPT=str(agent),
               FAKE_CLAUDE_BASH=COMMAND, WF_RESULT_GRACE="0.5",
               PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))  # fmt: skip
    return subprocess.run([sys.executable, "-m", "wf", "orch", "run", "s"], cwd=root, env=env, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_question_with_refused_calls_stays_a_question(wf: WfRunner, tmp_path: Path) -> None:
    """Refused calls hand back only work that did not land and was not a question: a
    worker that asks stays awaiting, with its question, though a call was refused."""
    r = run_fake_lane(wf.root, tmp_path, ASKS)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "t1 awaits an answer: Which colour?" in r.stdout
    tasks = (wf.root / "TASKS.md").read_text()
    assert "Status: awaiting: Which colour?" in tasks and "denied" not in tasks
    [status] = list((wf.root / ".wf").rglob("s-t1-*/status.json"))
    assert json.loads(status.read_text())["denied"] == [{"tool": "Bash", "what": COMMAND}]


def test_a_merged_task_with_refused_calls_is_never_handed_back(wf: WfRunner, tmp_path: Path) -> None:
    """A worker that merged, then left its tree untidy, with a call refused: the post-check
    is red after the merge, and the task stays merged (archived), not handed back."""
    r = run_fake_lane(wf.root, tmp_path, MERGES_UNTIDY)
    assert "post-check red for t1: the worktree" in r.stdout, r.stdout + r.stderr
    assert "handed back" not in r.stdout and "handback" not in (wf.root / "TASKS.md").read_text()
    assert "t1" in (wf.root / "DONE.md").read_text()


def test_doctor_warns_of_an_ask_rule_a_headless_worker_would_meet(wf: WfRunner) -> None:
    """`permissions.ask` in the project's claude settings: claude asks even for a call the
    lane grants, and nobody answers a headless worker (tests/adapters/test_grants_real.py shows
    the real claude refusing such a call)."""
    (wf.root / ".claude").mkdir()
    settings = wf.root / ".claude" / "settings.json"
    settings.write_text(json.dumps({"permissions": {"ask": ["Bash(git push:*)"], "allow": ["Read"]}}))
    r = wf("doctor")
    line = next(x for x in r.out.splitlines() if x.startswith("grants: "))
    assert line.startswith(f"grants: {settings}: permissions.ask Bash(git push:*): a headless claude worker")
    assert "(info)" not in line and r.code != 0  # the default lanes run claude
    settings.write_text(json.dumps({"permissions": {"allow": ["Read"]}}))
    assert "grants: " not in wf("doctor").out


def test_read_only_with_a_mode_that_contradicts_plan_is_refused(wf: WfRunner, tmp_path: Path) -> None:
    """read-only runs claude in plan mode (tests/adapters/test_grants_real.py): a unit that also
    asks for dontAsk is refused before anything starts, never run wider."""
    w = Workers(wf.root, tmp_path)
    unit = {"id": "u1", "adapter": "claude", "model": "sonnet", "prompt": "x", "sandbox": "read-only",
            "permission_mode": "dontAsk"}  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps({"units": [unit]}))
    r = w.run("run", str(tmp_path / "m.json"), "--run", "r1")
    assert r.returncode != 0
    assert "read-only runs claude in plan mode: permission_mode dontAsk contradicts it" in r.stdout + r.stderr
    assert not (tmp_path / "argv.log").exists()
