"""Quick checks of the fake agent CLIs in tests/fakes (see tests/fakes/README.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

FAKES = Path(__file__).parent.parent / "fakes"
SID = "0b6f3f0e-6a43-4a8e-9f0c-1d2e3f405162"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "CLAUDE", "CODEX_"))}
    e.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        CODEX_HOME=str(home / ".codex"),
        IS_SANDBOX="1",
        # `#!/usr/bin/env -S python3 -S` finds this interpreter first: faster than a pyenv shim
        PATH=os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", os.defpath)]),
    )
    return e


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "work dir"
    d.mkdir()
    (d / ".git").mkdir()
    (d / ".git" / "HEAD").write_text("ref: refs/heads/feature-x\n")
    return Path(os.path.realpath(d))


def run(
    name: str, args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FAKES / name), *args], input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=30
    )


def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def claude_args(*extra: str) -> list[str]:
    return ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits", *extra]


def codex_args(out: Path, *extra: str) -> list[str]:
    return [
        "exec",
        "--json",
        "-o",
        str(out),
        "--color",
        "never",
        "--skip-git-repo-check",
        "-s",
        "workspace-write",
        *extra,
    ]


def transcript(env: dict[str, str], cwd: Path, sid: str) -> Path:
    return (
        Path(env["CLAUDE_CONFIG_DIR"]) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd)) / f"{sid}.jsonl"
    )


def test_executables_and_cli_surface(env: dict[str, str], work: Path) -> None:
    for name in ("claude", "codex", "opencode"):
        path = FAKES / name
        assert os.access(path, os.X_OK)
        assert path.read_text().startswith("#!/usr/bin/env -S python3 -S\n")  # -S: no site, a faster start
    assert run("claude", ["--version"], env, work).stdout.strip() == "2.1.332 (Claude Code)"
    assert run("codex", ["--version"], env, work).stdout.strip() == "codex-cli 0.171.0"
    assert run("opencode", ["--version"], env, work).stdout.strip() == "1.18.33"
    help_text = run("claude", ["--help"], env, work).stdout
    for flag in (
        "--session-id",
        "stream-json",
        "--resume",
        "--fork-session",
        "--permission-mode",
        "--effort",
    ):
        assert flag in help_text
    exec_help = run("codex", ["exec", "--help"], env, work).stdout
    for flag in ("--json", "--skip-git-repo-check", "--output-last-message", "--sandbox", "--cd", "resume"):
        assert flag in exec_help
    assert "--format" in run("opencode", ["run", "--help"], env, work).stderr  # yargs: on stderr

    bad = run("claude", ["-p", "--bogus"], env, work, "x")
    assert bad.returncode == 1 and "unknown option" in bad.stderr
    bad = run("codex", ["exec", "--full-auto", "-"], env, work, "x")
    assert bad.returncode == 2 and "unexpected argument" in bad.stderr
    bad = run("codex", ["exec", "--json", "resume", SID, "-C", str(work), "-"], env, work, "x")
    assert bad.returncode == 2
    bad = run("opencode", ["run", "--bogus", "hi"], env, work)
    assert bad.returncode == 1 and "bogus" in bad.stderr
    r = run("claude", ["-p", "--output-format", "stream-json"], env, work, "x")
    assert r.returncode == 1 and "requires --verbose" in r.stderr
    if os.geteuid() == 0:
        no_sandbox = {k: v for k, v in env.items() if k != "IS_SANDBOX"}
        r = run("claude", ["-p", "--permission-mode", "bypassPermissions"], no_sandbox, work, "x")
        assert r.returncode == 1 and "root" in r.stderr


def test_claude_stream_json_transcript_and_resume(env: dict[str, str], work: Path) -> None:
    r = run("claude", claude_args("--session-id", SID, "--model", "sonnet"), env, work, "hello there\nmore\n")
    assert r.returncode == 0, r.stderr
    ev = events(r.stdout)
    init, result = ev[0], ev[-1]
    assert (init["type"], init["subtype"], init["session_id"]) == ("system", "init", SID)
    assert init["cwd"] == str(work) and init["model"] == "claude-sonnet-4-6"
    assert init["permissionMode"] == "acceptEdits" and "Bash" in init["tools"]
    assert {e["type"] for e in ev[1:-1]} == {"assistant", "user"}
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "ok: hello there" and result["session_id"] == SID
    assert result["num_turns"] == 2 and result["total_cost_usd"] > 0
    assert set(result["modelUsage"]) == {"claude-sonnet-4-6"}

    path = transcript(env, work, SID)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "user" and lines[0]["message"]["content"] == "hello there\nmore\n"
    assistant = [x for x in lines if x["type"] == "assistant"]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for x in assistant:
        assert x["sessionId"] == SID and x["cwd"] == str(work) and x["gitBranch"] == "feature-x"
        assert x["uuid"] and x["timestamp"].endswith("Z") and x["requestId"].startswith("req_")
        by_id.setdefault(x["message"]["id"], []).append(x)
    assert len(by_id) == 2
    in_tokens = out_tokens = cw = cr = 0
    for group in by_id.values():
        assert len(group) >= 2 and len({g["requestId"] for g in group}) == 1
        outs = [g["message"]["usage"]["output_tokens"] for g in group]
        assert outs == sorted(outs) and outs[0] < outs[-1]
        assert [g["message"]["stop_reason"] is not None for g in group] == [False] * (len(group) - 1) + [True]
        usage = group[-1]["message"]["usage"]
        assert set(usage["cache_creation"]) == {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}
        in_tokens += usage["input_tokens"]
        out_tokens += usage["output_tokens"]
        cw += usage["cache_creation_input_tokens"]
        cr += usage["cache_read_input_tokens"]
    assert (in_tokens, out_tokens, cw, cr) == tuple(
        result["usage"][k]
        for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    assert result["total_cost_usd"] == pytest.approx(
        (3 * in_tokens + 15 * out_tokens + 3.75 * cw + 0.3 * cr) / 1e6
    )
    assert not list((Path(env["CLAUDE_CONFIG_DIR"]) / "sessions").iterdir())

    again = run("claude", claude_args("--resume", SID), env, work, "second round")
    assert again.returncode == 0, again.stderr
    ev = events(again.stdout)
    assert ev[0]["session_id"] == SID and ev[-1]["session_id"] == SID
    assert ev[-1]["result"] == f"resumed {SID}: ok: second round"
    assert len(path.read_text().splitlines()) > len(lines)

    forked = run("claude", claude_args("--resume", SID, "--fork-session"), env, work, "branch")
    new_sid = events(forked.stdout)[0]["session_id"]
    assert new_sid != SID and transcript(env, work, new_sid).exists()
    assert events(forked.stdout)[-1]["result"] == f"resumed {SID}: ok: branch"

    missing = run("claude", claude_args("--resume", "9d0c8a55-0000-4000-8000-000000000000"), env, work, "x")
    assert missing.returncode == 1 and "No conversation found" in missing.stderr
    reused = run("claude", claude_args("--session-id", SID), env, work, "x")
    assert reused.returncode == 1 and "already in use" in reused.stderr
    text = run("claude", ["-p", "--output-format", "json"], env, work, "plain")
    assert json.loads(text.stdout)["result"] == "ok: plain"


@pytest.mark.parametrize(
    ("keyword", "code", "result"),
    [("ERROR", 1, "error_during_execution"), ("CRASH", 1, None), ("NOANSWER", 0, None)],
)
def test_claude_failures(
    env: dict[str, str], work: Path, keyword: str, code: int, result: str | None
) -> None:
    r = run("claude", claude_args(), env, work, f"please {keyword} now")
    assert r.returncode == code
    ev = events(r.stdout)
    assert ev[0]["subtype"] == "init" and any(e["type"] == "assistant" for e in ev)
    results = [e for e in ev if e["type"] == "result"]
    if result is None:
        assert results == []
    else:
        assert results[-1]["subtype"] == result and results[-1]["is_error"] is True
    if keyword == "CRASH":
        assert "fake crash" in r.stderr


def test_codex_exec_rollout_and_resume(env: dict[str, str], work: Path, tmp_path: Path) -> None:
    out = tmp_path / "output.txt"
    args = codex_args(out, "-C", str(work), "-m", "gpt-5.1-codex", "-c", 'model_reasoning_effort="high"', "-")
    r = run("codex", args, env, tmp_path, "fix the bug\ndetails\n")
    assert r.returncode == 0, r.stderr
    ev = events(r.stdout)
    assert [e["type"] for e in ev[:2]] == ["thread.started", "turn.started"]
    thread = ev[0]["thread_id"]
    messages = [
        e["item"] for e in ev if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages[-1]["text"] == "ok: fix the bug" and messages[-1]["id"].startswith("item_")
    assert ev[-1]["type"] == "turn.completed"
    assert set(ev[-1]["usage"]) == {"input_tokens", "cached_input_tokens", "output_tokens"}
    assert out.read_text() == "ok: fix the bug\n"

    rollouts = list((Path(env["CODEX_HOME"]) / "sessions").glob("*/*/*/*.jsonl"))
    assert len(rollouts) == 1
    name = rollouts[0].name
    assert re.fullmatch(rf"rollout-\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d-{thread}\.jsonl", name)
    assert rollouts[0].parent.name == name[16:18] and rollouts[0].parent.parent.name == name[13:15]
    recs = [json.loads(line) for line in rollouts[0].read_text().splitlines()]
    assert recs[0]["type"] == "session_meta" and recs[0]["payload"]["id"] == thread
    assert recs[0]["payload"]["cwd"] == str(work)
    contexts = [x["payload"] for x in recs if x["type"] == "turn_context"]
    assert contexts[-1]["model"] == "gpt-5.1-codex" and contexts[-1]["effort"] == "high"
    counts = [
        x["payload"]["info"]
        for x in recs
        if x["type"] == "event_msg" and x["payload"]["type"] == "token_count"
    ]
    assert counts[0] is None and counts[1] == counts[2]
    assert counts[-1]["total_token_usage"]["input_tokens"] == ev[-1]["usage"]["input_tokens"]

    again = run("codex", [*codex_args(out, "-C", str(work)), "resume", thread, "-"], env, tmp_path, "next")
    assert again.returncode == 0, again.stderr
    ev2 = events(again.stdout)
    assert ev2[0] == {"type": "thread.started", "thread_id": thread}
    assert out.read_text() == f"resumed {thread}: ok: next\n"
    assert ev2[-1]["usage"]["input_tokens"] > ev[-1]["usage"]["input_tokens"]
    assert len(rollouts[0].read_text().splitlines()) > len(recs)
    assert len(list((Path(env["CODEX_HOME"]) / "sessions").glob("*/*/*/*.jsonl"))) == 1


@pytest.mark.parametrize("keyword", ["CRASH", "ERROR", "NOANSWER"])
def test_codex_failures(env: dict[str, str], work: Path, tmp_path: Path, keyword: str) -> None:
    out = tmp_path / "output.txt"
    r = run("codex", codex_args(out, "-"), env, work, f"{keyword} please")
    ev = events(r.stdout)
    assert ev[0]["type"] == "thread.started"
    assert out.read_text() == ""  # created empty at the start (0.171), never filled
    assert not any(e.get("item", {}).get("type") == "agent_message" for e in ev)
    if keyword == "NOANSWER":
        assert r.returncode == 0 and ev[-1]["type"] == "turn.completed"
    else:
        assert r.returncode == 1 and ev[-1]["type"] == "turn.failed" and ev[-1]["error"]["message"]
    if keyword == "ERROR":
        assert any(e["type"] == "error" for e in ev)


def test_opencode_run(env: dict[str, str], work: Path) -> None:
    r = run(
        "opencode",
        ["run", "--format", "json", "-m", "anthropic/claude-sonnet-4-5", "--dir", str(work), "do", "it"],
        env,
        work,
        "extra",
    )
    assert r.returncode == 0, r.stderr
    ev = events(r.stdout)
    assert [e["type"] for e in ev] == [
        "step_start",
        "tool_use",
        "step_finish",
        "step_start",
        "text",
        "step_finish",
    ]
    sid = ev[0]["sessionID"]
    assert sid.startswith("ses_") and all(e["sessionID"] == sid and e["timestamp"] > 0 for e in ev)
    assert ev[4]["part"]["text"] == "ok: do it"
    tokens = ev[-1]["part"]["tokens"]
    assert set(tokens) == {"input", "output", "reasoning", "cache"} and set(tokens["cache"]) == {
        "read",
        "write",
    }
    assert ev[-1]["part"]["reason"] == "stop" and ev[-1]["part"]["cost"] > 0

    again = run("opencode", ["run", "--format", "json", "--session", sid, "next"], env, work)
    ev2 = events(again.stdout)
    assert ev2[0]["sessionID"] == sid
    assert [e["part"]["text"] for e in ev2 if e["type"] == "text"] == [f"resumed {sid}: ok: next"]

    err = run("opencode", ["run", "--format", "json", "ERROR"], env, work)
    assert err.returncode == 1
    assert events(err.stdout)[-1]["type"] == "error" and events(err.stdout)[-1]["error"]["data"]["message"]
    noanswer = run("opencode", ["run", "--format", "json", "NOANSWER"], env, work)
    assert noanswer.returncode == 0 and "text" not in {e["type"] for e in events(noanswer.stdout)}


def test_fork_argv_log_and_concurrency(env: dict[str, str], work: Path, tmp_path: Path) -> None:
    pidfile, argv_log, conc = tmp_path / "gc.pid", tmp_path / "argv.log", tmp_path / "conc"
    env = {
        **env,
        "FAKE_GRANDCHILD_PIDFILE": str(pidfile),
        "FAKE_ARGV_LOG": str(argv_log),
        "FAKE_CONCURRENCY_DIR": str(conc),
    }
    args = claude_args("--model", "opus")
    r = run("claude", args, env, work, "FORK a helper")
    assert r.returncode == 0 and events(r.stdout)[-1]["result"] == "ok: FORK a helper"
    pid = int(pidfile.read_text())
    try:
        assert os.getsid(pid) == pid  # alive, in its own session
    finally:
        os.kill(pid, signal.SIGKILL)
    assert json.loads(argv_log.read_text().splitlines()[-1]) == [str(FAKES / "claude"), *args]
    assert conc.joinpath("counts.txt").read_text() == "1\n"
    assert not list(conc.glob("running-*"))

    conc.joinpath("counts.txt").unlink()
    out = tmp_path / "o.txt"
    procs = [
        subprocess.Popen(
            [str(FAKES / "claude"), *claude_args()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=work,
            text=True,
        ),
        subprocess.Popen(
            [str(FAKES / "codex"), *codex_args(out, "-")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=work,
            text=True,
        ),
        subprocess.Popen(
            [str(FAKES / "opencode"), "run", "--format", "json", "SLEEP 0.4"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
            cwd=work,
            text=True,
        ),
    ]
    for p in procs[:2]:
        assert p.stdin is not None
        p.stdin.write("SLEEP 0.4")
        p.stdin.close()
    for p in procs:
        assert p.stdout is not None
        p.stdout.read()
        assert p.wait(timeout=30) == 0
    assert max(int(x) for x in conc.joinpath("counts.txt").read_text().split()) == 3
    assert not list(conc.glob("running-*"))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("claude", claude_args()),
        ("codex", ["exec", "--json", "--skip-git-repo-check", "-"]),
        ("opencode", ["run", "--format", "json"]),
    ],
)
def test_hang_and_forever(env: dict[str, str], work: Path, name: str, args: list[str]) -> None:
    conc = work.parent / "conc"
    env = {**env, "FAKE_CONCURRENCY_DIR": str(conc)}
    for keyword in ("HANG", "FOREVER"):
        p = subprocess.Popen(
            [str(FAKES / name), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=work,
            text=True,
        )
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(f"{keyword}\n")
        p.stdin.close()
        try:
            first = json.loads(p.stdout.readline())
            assert first["type"] in ("system", "thread.started", "step_start")
            if keyword == "FOREVER":
                start = time.monotonic()
                for _ in range(6):
                    json.loads(p.stdout.readline())
                assert time.monotonic() - start < 3
            else:
                time.sleep(0.15)
            assert p.poll() is None
        finally:
            p.terminate()
            p.wait(timeout=10)
        assert not list(conc.glob("running-*"))
        if name == "claude":
            assert not list((Path(env["CLAUDE_CONFIG_DIR"]) / "sessions").iterdir())


def test_claude_sleep_and_linger(env: dict[str, str], work: Path) -> None:
    start = time.monotonic()
    r = run("claude", claude_args(), env, work, "SLEEP 0.3 then answer")
    assert r.returncode == 0 and time.monotonic() - start >= 0.3
    ev = events(r.stdout)
    assert ev[-1]["result"] == "ok: SLEEP 0.3 then answer"
    assert sum("still working" in json.dumps(e) for e in ev) >= 2

    p = subprocess.Popen(
        [str(FAKES / "claude"), *claude_args()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=work,
        text=True,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("LINGER 0.3")
    p.stdin.close()
    try:
        while (line := p.stdout.readline()) and json.loads(line)["type"] != "result":
            pass
        assert json.loads(line)["result"] == "ok: LINGER 0.3"
        assert p.poll() is None
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()


def test_the_fake_claude_prints_its_config_folder_as_pathlib_did(tmp_path: Path) -> None:
    """The fakes dropped pathlib for a faster start: `auth status` still tidies
    CLAUDE_CONFIG_DIR (doubled and trailing slashes, "." parts) as Path() did."""
    env = {**os.environ, "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": f"{tmp_path}//cfg/./sub/"}
    r = subprocess.run([str(FAKES / "claude"), "auth", "status"], env=env, capture_output=True, text=True)
    data = json.loads(r.stdout)
    assert data["configDirectory"] == str(Path(env["CLAUDE_CONFIG_DIR"])) == f"{tmp_path}/cfg/sub"
    assert data["projectsDirectory"] == f"{tmp_path}/cfg/sub/projects"
