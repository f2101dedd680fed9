"""Grants and denials with the real claude against the scripted model API
(tests/model_api.py): the "model" asks for the tool calls a worker makes, the real claude
decides with wf's argv whether it may run them, and wf judges what landed. Run when
WF_REAL_TOOLS names the folder holding the pinned binaries; nothing leaves 127.0.0.1
(every tool's proxy is the server, which refuses and notes anywhere else)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.model_api import ModelApi, Request, Step, Text, ToolUse

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
ROOT = Path(__file__).resolve().parent.parent.parent
REPORT = "result: done\ncommit: -\nfollowups: -\nnote: made and merged"


def real_env(api: ModelApi) -> dict[str, str]:
    """wf's environment: the real claude first on PATH (then wf itself), an API key, the
    scripted API as its model and every proxy, no traffic but the model's."""
    if not (Path(REAL_BIN) / "claude").exists():
        pytest.skip(f"claude is not in WF_REAL_TOOLS ({REAL_BIN})")
    path = os.pathsep.join([REAL_BIN, str(Path(sys.executable).parent), os.environ["PATH"]])
    drop = ("ANTHROPIC_", "OPENAI_", "IS_SANDBOX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return env | {
        "PATH": path,
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "x",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "WF_RESULT_GRACE": "0.5",
        **api.env(),
    }


def wf_run(
    root: Path, env: dict[str, str], *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", *args], cwd=root, capture_output=True, text=True, env=env,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def setup(root: Path, toml: str, tasks: str) -> None:
    (root / "wf.toml").write_text(toml)
    (root / "TASKS.md").write_text("# Tasks\n" + tasks)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "setup")


def steps(*calls: Step) -> Callable[[Request], Step]:
    """One step per model request of the main session, by the tool results it holds."""

    def script(request: Request) -> Step:
        return calls[min(request.step, len(calls) - 1)]

    return script


# ------------------------------------------------------------------ lane workers


def lane_worker(request: Request) -> Step:
    """A lane worker as a model plays it: write the file (Write, an absolute path in the
    worktree its prompt names), `git add`, `git commit`, `wf merge`, the four lines."""
    prompt = " ".join(str(b.get("text")) for b in request.blocks("text"))
    found = re.search(r"Worktree: (\S+)", prompt)
    tree = found.group(1) if found else "."
    calls: list[Step] = [
        ToolUse("Write", {"file_path": f"{tree}/made.txt", "content": "made\n"}, id="toolu_w"),
        # a check the narrow grants refuse (harmless to the task: it prints)
        ToolUse("Bash", {"command": "python3 -c 'print(1)'", "description": "check"}, id="toolu_o"),
        ToolUse("Bash", {"command": "git add made.txt", "description": "stage"}, id="toolu_a"),
        ToolUse("Bash", {"command": "git commit -qm 'make made.txt'", "description": "commit"}, id="toolu_c"),
        ToolUse("Bash", {"command": "wf merge", "description": "merge"}, id="toolu_m"),
        Text(REPORT),
    ]
    return calls[min(request.step, len(calls) - 1)]


LANE = '[lanes.sonnet]\nmodel = "sonnet"\nadapter = "claude"\n'
TASK = "\n## t1: Make made.txt\nModel: sonnet\nDone: test -f made.txt\n"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("grants", ["default", "git and wf", "no git"])
def test_a_lane_without_a_git_grant_hands_back_naming_the_denied_command(wf: WfRunner, grants: str) -> None:
    """The same task with the real claude under three grants. The default grants and
    narrow ones that grant git and wf: `git add`, `git commit` and `wf merge` run and the
    task is merged (the narrow grants refuse a harmless check: the post-checks judge, not
    the refusal). Grants that lack Bash(git ...): claude refuses the git calls (exit 0, the
    report says done), the post-checks find nothing merged, and the task is handed back
    with a note naming the refused commands and the wf.toml key that grants them."""
    toml = LANE
    if grants == "no git":
        toml += 'allowed_tools = ["Bash(wf:*)", "Read", "Edit", "Write", "Glob", "Grep"]\n'
    elif grants == "git and wf":
        toml += 'allowed_tools = ["Bash(git:*)", "Bash(wf:*)", "Read", "Edit", "Write"]\n'
    setup(wf.root, toml, TASK)
    with ModelApi(lane_worker) as api:
        r = wf_run(wf.root, real_env(api), "orch", "run", "sonnet")
    assert api.outside == [], r.stdout + r.stderr
    done = (wf.root / "DONE.md").read_text() if (wf.root / "DONE.md").exists() else ""
    tasks = (wf.root / "TASKS.md").read_text()
    status = json.loads(next((wf.root / ".wf").rglob("sonnet-t1-*/status.json")).read_text())
    assert status["state"] == "done" and status["exit_code"] == 0
    check = {"tool": "Bash", "what": "python3 -c 'print(1)'"}
    if grants != "no git":
        # with the git grant the work lands: the post-checks judge, and it is merged (a
        # refused call or not: the narrow grants refuse the check)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "t1" in done and "t1" not in tasks
        assert (wf.root / "made.txt").read_text() == "made\n"
        assert status.get("denied") == ([check] if grants == "git and wf" else None)
        return
    assert r.returncode == 4, r.stdout + r.stderr
    assert "t1" not in done and not (wf.root / "made.txt").exists()
    [note] = [ln for ln in tasks.splitlines() if ln.startswith("Note:")]
    assert (
        f"handback: claude denied Bash `{check['what']}`, Bash `git add made.txt`, Bash `git commit" in note
    )
    assert "(grant it in wf.toml lanes.sonnet.allowed_tools)" in note
    assert "handed back: claude denied Bash `python3" in r.stdout
    assert status["denied"][:2] == [check, {"tool": "Bash", "what": "git add made.txt"}]


# ------------------------------------------------------------------ prep workers


def preparer(request: Request) -> Step:
    """A prep worker: read the task, give it a Done line and a Model, say so."""
    calls: list[Step] = [
        ToolUse("Bash", {"command": "wf show vague", "description": "read"}, id="toolu_s"),
        ToolUse(
            "Bash",
            {"command": "wf set vague --done 'test -f vague.txt' --model sonnet", "description": "prepare"},
            id="toolu_p",
        ),
        Text("vague -> Done: test -f vague.txt"),
    ]
    return calls[min(request.step, len(calls) - 1)]


def prep_batch(root: Path, script: Callable[[Request], Step]) -> dict[str, Any]:
    setup(root, LANE, "\n## vague: Make it better\n\nSomething vague.\n")
    with ModelApi(script) as api:
        env = real_env(api)
        r = wf_run(root, env, "batch", "1", "--prep")
        assert r.returncode == 0, r.stdout + r.stderr
        st = wait_batch(root, env)
    assert api.outside == []
    return st


def refused_preparer(request: Request) -> Step:
    """A prep worker that tries a command prep workers are not granted, then gives up."""
    calls: list[Step] = [
        ToolUse("Bash", {"command": "python3 -c 'print(1)'", "description": "look"}, id="toolu_x"),
        Text("vague -> unclear"),
    ]
    return calls[min(request.step, len(calls) - 1)]


@pytest.mark.timeout(300)
def test_a_prep_summary_names_the_calls_its_worker_was_refused(wf: WfRunner) -> None:
    st = prep_batch(wf.root, refused_preparer)
    lines = Path(str(st["summary"])).read_text().splitlines()
    want = "- vague -> unchanged (still without Done, Model; claude denied Bash `python3 -c 'print(1)'`)"
    assert want in lines, lines


@pytest.mark.timeout(300)
def test_a_prep_batch_with_the_real_claude_sets_the_done_line(wf: WfRunner) -> None:
    """Prep workers get the grants for `wf show`, `wf set` and `wf add` (without them the
    real claude refused every wf command and the summary said `vague -> unchanged`)."""
    st = prep_batch(wf.root, preparer)
    assert st["reason"] == "prep done", st
    lines = Path(str(st["summary"])).read_text().splitlines()
    assert "- vague -> Done: test -f vague.txt" in lines, lines
    head = git(wf.root, "show", "HEAD:TASKS.md")
    assert "Done: test -f vague.txt" in head and "Model: sonnet" in head
    [unit] = list((wf.root / ".wf").rglob("prep-sonnet-1/status.json"))
    assert "denied" not in json.loads(unit.read_text())


# ------------------------------------------------------------------ one unit


@pytest.mark.timeout(120)
def test_a_dispatched_claude_unit_passes_permission_prompts_none_and_records_its_denials(
    wf: WfRunner,
) -> None:
    """2.1.332's --help lists --permission-prompts: wf passes `none` (a prompt becomes a
    recorded denial, never a wait). A unit with no grants whose Bash call is refused ends
    done (exit 0), with the refusal in status.json and in the line wf prints."""
    command = "python3 -c \"open('made.txt', 'w')\""
    script = steps(ToolUse("Bash", {"command": command, "description": "make"}), Text("done"))
    with ModelApi(script) as api:
        r = wf_run(wf.root, real_env(api), "dispatch", "r1", "u1", "--adapter", "claude", "--model", "sonnet",
                   "--prompt", "Do the task.", timeout=100)  # fmt: skip
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"done (claude denied Bash `{command}`)" in r.stdout
    status = json.loads((wf.root / ".wf" / "runs" / "r1" / "u1" / "status.json").read_text())
    assert "--permission-prompts=none" in status["argv"]
    assert status["state"] == "done" and status["denied"] == [{"tool": "Bash", "what": command}]
    events = [json.loads(x) for x in (wf.root / ".wf" / "runs" / "r1" / "u1" / "worker.log").open()]
    [refusal] = [e for e in events if e.get("subtype") == "permission_denied"]
    assert refusal["decision_reason_type"] == "asyncAgent"  # what --permission-prompts none says


# ------------------------------------------------------------------ the --agent orchestrator

ORCHESTRATOR = "You are the orchestrator of an unattended wf batch"


def said(request: Request, kind: str = "tool_result") -> str:
    """The text of the last block of this kind in the conversation (a tool's output)."""
    blocks = request.blocks(kind)
    if not blocks:
        return ""
    content = blocks[-1].get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text")) for c in content if isinstance(c, dict))
    return str(content)


def agent_batch(request: Request) -> Step:
    """The model plays both the orchestrator (its prompt is the batch prompt) and the
    wf-worker subagent it starts (its conversation starts from the pick's prompt lines)."""
    if request.says(ORCHESTRATOR):
        if request.step == 0:
            return ToolUse("Bash", {"command": "wf orch pick sonnet", "description": "pick"}, id="toolu_p")
        if request.step == 1:
            picked = said(request)
            prompt = picked[picked.index("Task: ") :] if "Task: " in picked else picked
            call = {
                "description": "t1",
                "prompt": prompt,
                "subagent_type": "wf-worker",
                "run_in_background": False,
            }
            return ToolUse("Agent", call, id="toolu_a")
        if request.step == 2:
            report = said(request)
            report = report[report.index("result: ") :] if "result: " in report else report
            command = f"wf orch post sonnet --id t1 --report - --no-pick <<'EOF'\n{report.strip()}\nEOF"
            return ToolUse("Bash", {"command": command, "description": "post"}, id="toolu_o")
        return Text("added: -")
    prompt = " ".join(str(b.get("text")) for b in request.blocks("text"))
    found = re.search(r"Worktree: (\S+)", prompt)
    tree = found.group(1) if found else "."
    calls: list[Step] = [
        ToolUse("Write", {"file_path": f"{tree}/made.txt", "content": "made\n"}, id="toolu_w"),
        ToolUse(
            "Bash",
            {"command": f"cd {tree} && git add made.txt && git commit -qm made", "description": "commit"},
            id="toolu_c",
        ),
        ToolUse("Bash", {"command": f"cd {tree} && wf merge", "description": "merge"}, id="toolu_m"),
        Text(REPORT),
    ]
    return calls[min(request.step, len(calls) - 1)]


def wait_batch(root: Path, env: dict[str, str], timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        st: dict[str, Any] = json.loads(wf_run(root, env, "batch", "--status", "--json").stdout)
        if st["job"] is not None and not st["alive"]:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.5)


@pytest.mark.timeout(300)
def test_an_agent_batch_with_the_real_claude_merges_a_task(wf: WfRunner) -> None:
    """`wf batch --agent`: the real claude orchestrates (wf orch pick, a wf-worker subagent
    in the foreground, wf orch post); the subagent runs under the orchestrator's grants,
    which hold the lane's, so its git add, git commit and wf merge run and the task is
    merged (with only Bash(wf:*) the subagent's commit was refused)."""
    setup(wf.root, LANE, TASK)
    with ModelApi(agent_batch) as api:
        env = real_env(api)
        assert wf_run(wf.root, env, "install").returncode == 0
        r = wf_run(wf.root, env, "batch", "1", "--agent", "--for", "10m")
        assert r.returncode == 0, r.stdout + r.stderr
        st = wait_batch(wf.root, env)
    assert api.outside == []
    log = wf.root / "out" / f"wf-batch-{st['stamp']}.log"
    assert "t1" in (wf.root / "DONE.md").read_text(), (st, log.read_text() if log.exists() else "")
    assert (wf.root / "made.txt").read_text() == "made\n"
    assert any(q.is_subagent and q.says("Task: t1") for q in api.requests)
    lines = Path(str(st["summary"])).read_text().splitlines()
    assert [x.split()[2:5] for x in lines if " commit=" in x] == [["sonnet", "t1", "done"]], lines


@pytest.mark.timeout(120)
def test_an_ask_rule_refuses_a_call_the_argv_grants(wf: WfRunner) -> None:
    """What `wf doctor` warns of (tests/adapters/test_grants.py), with the real claude: a project's
    `permissions.ask` rule wins over the unit's --allowedTools grant; nobody is asked, the
    call is refused."""
    (wf.root / ".claude").mkdir()
    (wf.root / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"ask": ["Bash(python3:*)"]}})
    )
    command = "python3 -c \"open('made.txt', 'w')\""
    unit = {"id": "u1", "adapter": "claude", "model": "sonnet", "prompt": "Do the task.", "mode": "cwd",
            "cwd": str(wf.root), "allowed_tools": ["Bash"]}  # fmt: skip
    (wf.root / ".wf" / "m.json").write_text(json.dumps({"units": [unit]}))
    script = steps(ToolUse("Bash", {"command": command, "description": "make"}), Text("done"))
    with ModelApi(script) as api:
        env = real_env(api)
        r = wf_run(wf.root, env, "run", str(wf.root / ".wf" / "m.json"), "--run", "r1", timeout=100)
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"u1: done (claude denied Bash `{command}`)" in r.stdout
    assert not (wf.root / "made.txt").exists()


@pytest.mark.timeout(120)
def test_a_read_only_claude_unit_writes_nothing(wf: WfRunner) -> None:
    """A read-only fan-out unit (`sandbox = "read-only"`) with claude runs in plan mode:
    the real claude refuses its Write and a Bash command that writes, though the unit
    grants Bash; a read-only command runs."""
    calls = (
        ToolUse("Write", {"file_path": f"{wf.root}/a.txt", "content": "x"}, id="toolu_w"),
        ToolUse(
            "Bash", {"command": "python3 -c \"open('b.txt', 'w')\"", "description": "write"}, id="toolu_b"
        ),
        ToolUse("Bash", {"command": "ls", "description": "look"}, id="toolu_l"),
        Text("looked"),
    )
    unit = {"id": "u1", "adapter": "claude", "model": "sonnet", "prompt": "Review.", "mode": "cwd",
            "cwd": str(wf.root), "allowed_tools": ["Bash", "Read"], "sandbox": "read-only"}  # fmt: skip
    (wf.root / ".wf" / "m.json").write_text(json.dumps({"units": [unit]}))
    with ModelApi(steps(*calls)) as api:
        r = wf_run(wf.root, real_env(api), "run", str(wf.root / ".wf" / "m.json"), "--run", "r1", timeout=100)
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (wf.root / "a.txt").exists() and not (wf.root / "b.txt").exists()
    status = json.loads((wf.root / ".wf" / "runs" / "r1" / "u1" / "status.json").read_text())
    assert [d["tool"] for d in status["denied"]] == ["Write", "Bash"]
    assert "--permission-mode=plan" in status["argv"]
    [looked] = api.requests[3].blocks("tool_result")[-1:]
    assert looked["is_error"] is False
