"""The real claude, codex and opencode against the scripted model API of
tests/model_api.py: what the "model" says is scripted, what the tools then do (their
permission decisions, tool runs, streams, transcripts, retries and error events) is
their own. Run when WF_REAL_TOOLS names the folder holding the pinned binaries (.ci/run
installs them). The argv is wf's own (wf.adapters); every tool's proxy is the server,
which refuses anywhere but itself, so nothing leaves 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.model_api import (
    BAD_KEY,
    NO_CREDIT,
    OVERLOADED,
    RATE_LIMITED,
    SERVER_ERROR,
    Cut,
    Fault,
    ModelApi,
    Reply,
    Request,
    Step,
    Text,
    ToolUse,
    usage_headers,
    usage_limit,
)
from wf import adapters
from wf.adapters import Spec

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
TIMEOUT = 90  # seconds any one run of a tool may take (they take a few)


def binary(tool: str) -> str:
    path = Path(REAL_BIN) / tool
    if not path.exists():
        pytest.skip(f"{tool} is not in WF_REAL_TOOLS ({REAL_BIN})")
    return str(path)


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]

    def of(self, kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("type") == kind and (subtype is None or e.get("subtype") == subtype)
        ]

    @property
    def result(self) -> dict[str, Any]:
        [result] = self.of("result")
        return result


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository to work in; opencode's store and every cache in the test's folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    Path(os.environ["CODEX_HOME"]).mkdir(parents=True, exist_ok=True)
    folder = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def spec(work: Path, **kw: Any) -> Spec:
    return Spec(run="r1", unit="u1", folder=work.parent, cwd=work, prompt="Do the task.", **kw)


def launch(tool: str, spec: Spec, api: ModelApi, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment wf starts the tool with, the server as its model API."""
    adapter = adapters.get(tool)
    argv = adapter.argv(spec)
    argv[0] = binary(tool)
    drop = ("ANTHROPIC_", "OPENAI_", "CODEX_API", "IS_SANDBOX")  # the test says which it wants
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return argv, {**adapter.env(spec, base), "TERM": "dumb", "NO_COLOR": "1", **api.env(), **env}


def run(tool: str, spec: Spec, api: ModelApi, env: dict[str, str]) -> Run:
    argv, full = launch(tool, spec, api, env)
    p = subprocess.run(argv, cwd=spec.cwd, input=adapters.get(tool).stdin(spec), env=full, capture_output=True,
                       timeout=TIMEOUT)  # fmt: skip
    return Run(p.returncode, p.stdout.decode(), p.stderr.decode())


# ------------------------------------------------------------------------------ claude


def claude(api: ModelApi, spec: Spec, *, oauth: bool = False, env: dict[str, str] | None = None) -> Run:
    """API-key mode, or (``oauth``) a subscription, the only mode that reads the plan's
    usage-limit headers; one retry at most. No traffic but the model's (else it calls
    api.anthropic.com)."""
    key = {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-scripted"} if oauth else {"ANTHROPIC_API_KEY": "x"}
    base = {"ANTHROPIC_BASE_URL": api.url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    return run("claude", spec, api, {**base, **key, "CLAUDE_CODE_MAX_RETRIES": "1", **(env or {})})


def test_claude_answers_a_scripted_text_and_keeps_its_transcript(work: Path) -> None:
    sid = str(uuid.uuid4())
    with ModelApi([Text("Hello from the script.")]) as api:
        r = claude(api, spec(work, session_id=sid, model="sonnet"))
    assert r.code == 0, r.err
    [init] = r.of("system", "init")
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY" and init["session_id"] == sid
    res = r.result
    assert (res["is_error"], res["subtype"], res["result"]) == (False, "success", "Hello from the script.")
    assert res["permission_denials"] == [] and res["num_turns"] == 1
    assert res["usage"]["input_tokens"] == 100 and res["usage"]["output_tokens"] == 20
    [request] = api.requests
    assert request.path.startswith("/v1/messages") and request.body["stream"] is True
    assert request.says("Do the task.") and "Bash" in request.tool_names
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(work))
    transcript = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects" / slug / f"{sid}.jsonl"
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    said = [b for ln in lines if ln.get("type") == "assistant" for b in ln["message"]["content"]]
    assert {"type": "text", "text": "Hello from the script."} in said
    assert api.outside == []  # with non-essential traffic off, nothing but the model API


def bash_then_done(command: str) -> Any:
    def script(request: Request) -> Step:
        return (
            ToolUse("Bash", {"command": command, "description": "make a file"})
            if request.step == 0
            else Text("done")
        )

    return script


def test_claude_runs_a_bash_call_its_argv_grants(work: Path) -> None:
    with ModelApi(bash_then_done("python3 -c \"open('made.txt', 'w')\"")) as api:
        r = claude(api, spec(work, allowed_tools=("Bash(python3:*)",)))
    assert r.code == 0, r.err
    assert (work / "made.txt").exists()
    assert r.result["permission_denials"] == [] and r.result["result"] == "done"
    [result] = api.requests[1].blocks("tool_result")
    assert result["tool_use_id"] == "toolu_01" and result["is_error"] is False


def test_claude_denies_a_bash_call_its_argv_does_not_grant(work: Path) -> None:
    """Under wf's default (acceptEdits, Bash granted only for echo) a command that
    writes is denied: not run, named in a permission_denied event, sent back as an
    error tool_result, listed in the result. The run itself succeeds (exit 0)."""
    command = "python3 -c \"open('made.txt', 'w')\""
    with ModelApi(bash_then_done(command)) as api:
        r = claude(api, spec(work, allowed_tools=("Bash(echo:*)",)))
    assert r.code == 0, r.err
    assert not (work / "made.txt").exists()
    res = r.result
    assert (res["is_error"], res["result"]) == (False, "done")
    tool_input = {"command": command, "description": "make a file"}
    assert res["permission_denials"] == [
        {"tool_name": "Bash", "tool_use_id": "toolu_01", "tool_input": tool_input}
    ]
    [denied] = r.of("system", "permission_denied")
    assert (denied["tool_name"], denied["tool_use_id"]) == ("Bash", "toolu_01") and denied["message"]
    [result] = api.requests[1].blocks("tool_result")
    assert result["is_error"] is True and result["tool_use_id"] == "toolu_01"


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for root only")
def test_claude_bypass_permissions_as_root_needs_is_sandbox(work: Path) -> None:
    """As root, bypassPermissions is refused before any request unless IS_SANDBOX=1; with
    it the command runs without a grant."""
    command = "python3 -c \"open('made.txt', 'w')\""
    with ModelApi(bash_then_done(command)) as api:
        refused = claude(api, spec(work, permission_mode="bypassPermissions"))
        assert refused.code == 1 and refused.out == "" and api.requests == []
        assert "--dangerously-skip-permissions cannot be used with root/sudo privileges" in refused.err
        assert not (work / "made.txt").exists()
        r = claude(api, spec(work, permission_mode="bypassPermissions"), env={"IS_SANDBOX": "1"})
    assert r.code == 0, r.err
    assert (work / "made.txt").exists() and r.result["permission_denials"] == []


@pytest.mark.parametrize(("window", "words"), [("five_hour", "5-hour"), ("seven_day", "weekly")])
def test_claude_subscription_usage_limit_is_a_rate_limit_event(work: Path, window: str, words: str) -> None:
    """A plan's limit: one request (the one retry allowed is not made), a rate_limit_event
    with the reset, a <synthetic> message with error rate_limit, a result with is_error
    and 429; exit 1."""
    reset = int(time.time()) + 3600  # far enough that a slow start under load never passes it
    with ModelApi([usage_limit(reset, window=window)]) as api:
        r = claude(api, spec(work), oauth=True)
    assert r.code == 1, r.err
    assert r.of("system", "init")[0]["apiKeySource"] == "none"
    [event] = r.of("rate_limit_event")
    info = event["rate_limit_info"]
    assert (info["status"], info["resetsAt"], info["rateLimitType"]) == ("rejected", reset, window)
    assert info["isUsingOverage"] is False
    windows = info["unifiedWindows"]
    assert windows[window] == {"utilization": 1, "resetsAt": reset, "status": "rejected"}
    other = "seven_day" if window == "five_hour" else "five_hour"
    assert (windows[other]["utilization"], windows[other]["status"]) == (0.5, "allowed")
    [message] = r.of("assistant")
    assert message["message"]["model"] == "<synthetic>" and message["error"] == "rate_limit"
    assert (message["api_error_status"], message["api_error"]) == (429, "usage_limit_reached")
    assert message["api_error_params"]["rate_limit_info"]["resetsAt"] == reset
    assert message["message"]["content"][0]["text"].startswith(f"You've hit your {words} limit · resets ")
    res = r.result
    assert (res["is_error"], res["api_error_status"], res["terminal_reason"]) == (True, 429, "api_error")
    assert res["result"] == message["message"]["content"][0]["text"]
    assert len(api.requests) == 1


def test_claude_subscription_reports_its_usage_with_every_answer(work: Path) -> None:
    """Usage headers on an answer: a rate_limit_event after the message, status allowed;
    allowed_warning (with utilization and surpassedThreshold) once a threshold is past.
    An API key ignores the headers."""
    reset = int(time.time()) + 3600
    warn = usage_headers("allowed_warning", reset, used=0.92, threshold=0.9)
    script = [Reply((Text("fine"),), headers=usage_headers("allowed", reset, used=0.3))]
    with ModelApi(script) as api:
        r = claude(api, spec(work), oauth=True)
        plain = claude(api, spec(work))
    with ModelApi([Reply((Text("fine"),), headers=warn)]) as api:
        warned = claude(api, spec(work), oauth=True)
    assert (r.code, r.result["is_error"], warned.code, warned.result["is_error"]) == (0, False, 0, False)
    assert plain.of("rate_limit_event") == []
    [event] = r.of("rate_limit_event")
    info = event["rate_limit_info"]
    assert (info["status"], info["rateLimitType"], info["resetsAt"]) == ("allowed", "five_hour", reset)
    assert info["unifiedWindows"]["five_hour"] == {"utilization": 0.3, "resetsAt": reset, "status": "allowed"}
    [event] = warned.of("rate_limit_event")
    info = event["rate_limit_info"]
    assert (info["status"], info["utilization"], info["surpassedThreshold"]) == ("allowed_warning", 0.92, 0.9)


def test_claude_api_key_429_is_no_usage_limit(work: Path) -> None:
    """The same 429 to an API key: a retry, then 'Request rejected', no rate_limit_event."""
    with ModelApi([usage_limit(int(time.time()) + 5)]) as api:
        r = claude(api, spec(work))
    assert r.code == 1, r.err
    assert r.of("rate_limit_event") == []
    assert [e["error_status"] for e in r.of("system", "api_retry")] == [429]
    assert r.result["result"].startswith("API Error: Request rejected (429)")
    assert (r.of("assistant")[0]["error"], r.result["api_error_status"]) == ("rate_limit", 429)


@pytest.mark.parametrize(
    ("fault", "error", "retried", "words"),
    [
        (OVERLOADED, "server_error", "overloaded", "API Error: 529 Overloaded."),
        (SERVER_ERROR, "server_error", "server_error", "API Error: 500 Internal server error."),
        (RATE_LIMITED, "rate_limit", "rate_limit", "API Error: Request rejected (429) · Number of requests"),
        (BAD_KEY, "authentication_failed", "authentication_failed", "Invalid API key · Fix external API key"),
        (NO_CREDIT, "billing_error", None, "Credit balance is too low"),
    ],
    ids=["529", "500", "429", "401", "400-credit"],
)
def test_claude_api_errors(work: Path, fault: Fault, error: str, retried: str | None, words: str) -> None:
    """With CLAUDE_CODE_MAX_RETRIES=1: one system/api_retry (its own error name), then a
    <synthetic> assistant message with the error value and the result; exit 1. A 529 is
    retried as 'overloaded' but ends as 'server_error'; a 400 is not retried."""
    with ModelApi([fault]) as api:
        r = claude(api, spec(work))
    assert r.code == 1, r.err
    retries = r.of("system", "api_retry")
    assert [(e["error"], e["error_status"]) for e in retries] == (
        [(retried, fault.status)] if retried else []
    )
    assert len(api.requests) == (2 if retried else 1)
    [message] = r.of("assistant")
    assert (message["error"], message["api_error_status"], message["api_error_type"]) == (
        error,
        fault.status,
        fault.kind,
    )
    res = r.result
    assert (res["is_error"], res["subtype"], res["api_error_status"]) == (True, "success", fault.status)
    assert res["result"].startswith(words), res["result"]


def test_claude_cut_stream_is_retried_without_streaming(work: Path) -> None:
    with ModelApi([Cut(), Text("recovered")]) as api:
        r = claude(api, spec(work))
    assert r.code == 0, r.err
    assert (r.result["is_error"], r.result["result"]) == (False, "recovered")
    assert [q.body.get("stream") for q in api.requests] == [True, False]


def test_claude_subagent_runs_in_the_background_with_its_own_transcript(work: Path) -> None:
    """The Agent tool of 2.1.332 is asynchronous: its tool_result says the agent was
    launched; the subagent asks the model with its own prompt (and a tools list without
    ListAgents); its end wakes the main session for another turn, so the stream holds
    two results. Its transcript lands in <session>/subagents/agent-<id>.jsonl."""

    def script(request: Request) -> Step:
        if not request.says("Do the task."):  # the subagent: its conversation starts from its prompt
            return Text("sub done")
        if request.step == 0:
            return ToolUse(
                "Agent", {"description": "look", "prompt": "Say sub.", "subagent_type": "general-purpose"}
            )
        return Text("main done")

    sid = str(uuid.uuid4())
    with ModelApi(script) as api:
        r = claude(api, spec(work, session_id=sid))
    assert r.code == 0, r.err
    results = r.of("result")
    assert results and all(x["result"] == "main done" and not x["is_error"] for x in results)
    main = [q for q in api.requests if q.says("Do the task.")]
    sub = [q for q in api.requests if not q.says("Do the task.")]
    assert sub and all(q.says("Say sub.") and q.is_subagent for q in sub) and "Agent" in sub[0].tool_names
    assert not any(q.is_subagent for q in main)
    [launched] = main[1].blocks("tool_result")
    assert "Async agent launched" in json.dumps(launched)
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(work))
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects" / slug / sid / "subagents"
    assert [p.suffix for p in folder.glob("agent-*.jsonl")] == [".jsonl"]


# ------------------------------------------------------------------------------- codex


def codex(api: ModelApi, spec: Spec, *, retries: bool = False) -> Run:
    """wf's argv with a provider whose base_url is the server; no retries of its own
    unless ``retries`` (a 500 then takes 30 requests and ~25 s before it fails)."""
    provider = (
        f'model_providers.scripted={{name="scripted", base_url="{api.url}/v1", env_key="OPENAI_API_KEY", '
        'wire_api="responses"' + ("}" if retries else ", request_max_retries=0, stream_max_retries=0}")
    )
    extra = ("-c", 'model_provider="scripted"', "-c", provider)
    return run("codex", spec._replace(extra_args=spec.extra_args + extra), api, {"OPENAI_API_KEY": "x"})


def test_codex_answers_a_scripted_text_with_its_usage(work: Path) -> None:
    with ModelApi([Text("Hello from the script.")]) as api:
        r = codex(api, spec(work, model="gpt-5.5"))
    assert r.code == 0, r.err
    assert [e["type"] for e in r.events] == [
        "thread.started",
        "turn.started",
        "item.completed",
        "turn.completed",
    ]
    assert (
        r.events[2]["item"]["type"] == "agent_message"
        and r.events[2]["item"]["text"] == "Hello from the script."
    )
    usage = r.events[3]["usage"]
    assert (usage["input_tokens"], usage["cached_input_tokens"], usage["output_tokens"]) == (100, 0, 20)
    # the answer with no newline after it (the fake claims one: tests/fakes/README.md)
    assert (work.parent / "output.txt").read_text() == "Hello from the script."
    [request] = api.requests
    assert request.path == "/v1/responses" and request.body["stream"] is True
    assert request.body["model"] == "gpt-5.5" and "exec_command" in request.tool_names
    thread = r.events[0]["thread_id"]
    assert list(Path(os.environ["CODEX_HOME"]).glob(f"sessions/*/*/*/rollout-*-{thread}.jsonl"))


def exec_then_done(command: str) -> Any:
    def script(request: Request) -> Step:
        return ToolUse("exec_command", {"cmd": command}, id="call_1") if request.step == 0 else Text("done")

    return script


def test_codex_runs_a_shell_call_in_its_workspace(work: Path) -> None:
    with ModelApi(exec_then_done("touch made.txt && echo made")) as api:
        r = codex(api, spec(work))
    assert r.code == 0, r.err
    assert (work / "made.txt").exists()
    [done] = [e["item"] for e in r.of("item.completed") if e["item"]["type"] == "command_execution"]
    assert (done["exit_code"], done["aggregated_output"], done["status"]) == (0, "made\n", "completed")
    [output] = api.requests[1].blocks("function_call_output")
    assert output["call_id"] == "call_1" and "made" in output["output"]


def test_codex_read_only_sandbox_stops_a_write(work: Path) -> None:
    """In -s read-only the command runs and fails (the file system is read-only); no
    command_execution item is printed; the model sees the failure in its output."""
    with ModelApi(exec_then_done("touch made.txt")) as api:
        r = codex(api, spec(work, sandbox="read-only"))
    assert r.code == 0, r.err
    assert not (work / "made.txt").exists()
    [output] = api.requests[1].blocks("function_call_output")
    assert "Read-only file system" in output["output"] and "exited with code 1" in output["output"]


@pytest.mark.parametrize(
    ("step", "words"),
    [
        (RATE_LIMITED, "exceeded retry limit, last status: 429 Too Many Requests"),
        (SERVER_ERROR, "We’re currently experiencing high demand, which may cause temporary errors."),
        (BAD_KEY, "unexpected status 401 Unauthorized: invalid x-api-key, url: "),
        (
            Fault(429, "insufficient_quota", "You exceeded your current quota"),
            "Quota exceeded. Check your plan",
        ),
        (
            Fault(429, "usage_limit_reached", "The usage limit has been reached"),
            "You’ve hit your usage limit.",
        ),
        (Cut(), "stream disconnected before completion: stream closed before response.completed"),
    ],
    ids=["429", "500", "401", "quota", "usage-limit", "cut"],
)
def test_codex_api_errors(work: Path, step: Step, words: str) -> None:
    """Each ends the turn: an error event, then turn.failed with the same message; exit 1,
    and the -o file stays empty."""
    with ModelApi([step]) as api:
        r = codex(api, spec(work))
    assert r.code == 1, r.err
    assert [e["type"] for e in r.events] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert r.events[2]["message"] == r.events[3]["error"]["message"]
    assert r.events[3]["error"]["message"].startswith(words)
    assert len(api.requests) == 1
    assert (work.parent / "output.txt").read_text() == ""


def test_codex_reconnects_after_a_cut_stream(work: Path) -> None:
    """With its default retries a cut stream is a transient error event ("Reconnecting...
    1/5 (...)"), and the turn goes on to its answer."""
    with ModelApi([Cut(), Text("recovered")]) as api:
        r = codex(api, spec(work), retries=True)
    assert r.code == 0, r.err
    [error] = r.of("error")
    assert error["message"].startswith("Reconnecting... 1/5 (stream disconnected before completion")
    assert [e["item"]["text"] for e in r.of("item.completed")] == ["recovered"] and r.of("turn.completed")


def test_codex_usage_limit_with_a_reset_names_the_time(work: Path) -> None:
    reset = int(time.time()) + 3600
    fault = Fault(429, "usage_limit_reached", "limit", extra={"plan_type": "plus", "resets_at": reset})
    with ModelApi([fault]) as api:
        r = codex(api, spec(work))
    assert r.code == 1
    message = r.of("turn.failed")[0]["error"]["message"]
    assert message.startswith("You’ve hit your usage limit.") and re.search(r"try again at \d", message), (
        message
    )
    assert len(api.requests) == 1


# ---------------------------------------------------------------------------- opencode


def opencode_launch(api: ModelApi, spec: Spec) -> tuple[list[str], dict[str, str]]:
    """wf's argv, with a project opencode.json provider (the bundled @ai-sdk/anthropic)
    whose baseURL is the server; no fetch of models.dev, no update, no LSP download."""
    provider = {
        "npm": "@ai-sdk/anthropic",
        "name": "Scripted",
        "options": {"baseURL": f"{api.url}/v1", "apiKey": "x"},
        "models": {"claude-sonnet-4-6": {"name": "Scripted Sonnet"}},
    }
    config = {"$schema": "https://opencode.ai/config.json", "provider": {"scripted": provider}}
    (spec.cwd / "opencode.json").write_text(json.dumps(config))
    quiet = {f"OPENCODE_DISABLE_{x}": "1" for x in ("MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "SHARE")}
    return launch("opencode", spec._replace(model="scripted/claude-sonnet-4-6"), api, quiet)


def opencode(api: ModelApi, spec: Spec) -> Run:
    argv, env = opencode_launch(api, spec)
    p = subprocess.run(argv, cwd=spec.cwd, input=spec.prompt.encode(), env=env, capture_output=True,
                       timeout=TIMEOUT)  # fmt: skip
    return Run(p.returncode, p.stdout.decode(), p.stderr.decode())


@pytest.mark.slow
def test_opencode_answers_a_scripted_text(work: Path) -> None:
    """opencode asks twice: a title (no tools), then the turn."""
    with ModelApi([Text("Hello from the script.")]) as api:
        r = opencode(api, spec(work))
    assert r.code == 0, r.err
    assert [e["type"] for e in r.events] == ["step_start", "text", "step_finish"]
    assert r.events[1]["part"]["text"] == "Hello from the script."
    finish = r.events[2]["part"]
    assert finish["reason"] == "stop" and (finish["tokens"]["input"], finish["tokens"]["output"]) == (100, 20)
    assert len({e["sessionID"] for e in r.events}) == 1
    turn = [q for q in api.requests if q.tool_names]
    assert len(turn) == 1 and "bash" in turn[0].tool_names and turn[0].says("Do the task.")
    assert api.outside == []


@pytest.mark.slow
def test_opencode_gives_up_on_a_500_after_its_retries(work: Path) -> None:
    """A 500 is retried (here at once: the answer says retry-after-ms 50), then an error
    event (APIError, the status, isRetryable true) and exit 1."""
    fault = Fault(500, "api_error", "Internal server error", {"retry-after-ms": "50"})
    with ModelApi([fault]) as api:
        r = opencode(api, spec(work))
    assert r.code == 1, r.err
    [error] = r.of("error")
    assert error["error"]["name"] == "APIError"
    data = error["error"]["data"]
    assert (data["message"], data["statusCode"], data["isRetryable"]) == ("Internal server error", 500, True)
    assert len([q for q in api.requests if q.tool_names]) > 1


@pytest.mark.slow
def test_opencode_waits_out_a_429_retry_after_in_silence(work: Path) -> None:
    """A 429 whose retry-after is an hour: after the one request opencode waits, saying
    nothing on stdout (wf's stall timer is what will end such a unit)."""
    limit = "Number of requests has exceeded your rate limit."
    with ModelApi([Fault(429, "rate_limit_error", limit, {"retry-after": "3600"})]) as api:
        argv, env = opencode_launch(api, spec(work))
        p = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(b"Do the task.")
            p.stdin.close()
            deadline = time.monotonic() + TIMEOUT
            while not any(q.tool_names for q in api.requests) and p.poll() is None:
                assert time.monotonic() < deadline, "opencode never asked"
                time.sleep(0.1)
            time.sleep(2)  # long enough for a retry that did not wait
            assert p.poll() is None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        out = p.stdout.read()
    assert len([q for q in api.requests if q.tool_names]) == 1
    assert out == b""
