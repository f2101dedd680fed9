"""The adapters against recordings of the real tools (tests/fixtures/real/<tool>-<version>/,
made by scripts/record-real-tools): each recorded stream goes through the real adapter
code, and each failure class the taxonomy names is read from the tool's own words."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from wf import adapters
from wf.adapters import Failure, Parsed, opencode
from wf.base import config
from wf.cost import usage
from wf.doctor.checks import help_options

REAL = Path(__file__).parent.parent / "fixtures" / "real"
CLAUDE = REAL / "claude-2.1.332"
CODEX = REAL / "codex-0.171.0"
OPENCODE = REAL / "opencode-1.18.33"


def manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return data


def case(folder: Path, name: str) -> tuple[str, str, int | None]:
    code = next(c["exit_code"] for c in manifest(folder)["cases"] if c["case"] == name)
    return (folder / f"{name}.stdout").read_text(), (folder / f"{name}.stderr").read_text(), code


def replay(tool: str, stdout: str) -> Parsed:
    a = adapters.get(tool)
    parsed = Parsed()
    for line in stdout.splitlines():
        event = adapters.parse_line(line)
        if event is not None:
            a.feed(parsed, event)
    return parsed


def classify(tool: str, folder: Path, name: str) -> tuple[Parsed, Failure, str | None]:
    out, err, code = case(folder, name)
    parsed = replay(tool, out)
    failure, reason = adapters.get(tool).classify(parsed, code, out, err)
    return parsed, failure, reason


# ---------------------------------------------------------------- the taxonomy


def test_failure_values_and_infrastructure() -> None:
    assert [f.value for f in Failure] == [
        "auth", "quota", "rate_limit", "network", "model", "tool", "task", "stall", "timeout",
        "usage_limit", "overloaded", "denied",
    ]  # fmt: skip
    assert {f for f in Failure if f.infrastructure} == {
        Failure.auth, Failure.quota, Failure.rate_limit, Failure.network, Failure.model, Failure.tool,
        Failure.usage_limit, Failure.overloaded,
    }  # fmt: skip
    assert Failure("auth") is Failure.auth and Failure.auth == "auth"


def test_recordings_are_named_by_version() -> None:
    for folder in (CLAUDE, CODEX, OPENCODE):
        m = manifest(folder)
        assert folder.name == f"{m['tool']}-{m['version']}"
        assert (folder / "version.stdout").read_text().split()[-1 if m["tool"] == "codex" else 0] == m[
            "version"
        ]


# ---------------------------------------------------------------- claude


def test_claude_not_logged_in_is_auth_with_its_words() -> None:
    parsed, failure, reason = classify("claude", CLAUDE, "nologin")
    assert failure is Failure.auth and reason == "Not logged in · Please run /login"
    assert parsed.error == "Not logged in · Please run /login"  # not "success: ..."
    assert parsed.model != "<synthetic>" and parsed.progress == 0
    assert parsed.finished and parsed.answer is None


def test_claude_synthetic_messages_never_set_the_model() -> None:
    """An assistant message from no model (an interruption notice) says <synthetic>."""
    init, assistant, _ = case(CLAUDE, "nologin")[0].splitlines()
    event = json.loads(assistant)
    del event["error"]
    parsed = replay("claude", init + "\n" + json.dumps(event))
    assert parsed.model == "claude-opus-5-5" and parsed.failure is None


def test_claude_offline_is_network_and_its_retries_are_not_progress() -> None:
    parsed, failure, reason = classify("claude", CLAUDE, "offline")
    assert failure is Failure.network and reason is not None and "Can't reach the API server" in reason
    assert parsed.progress == 0  # two system/api_retry events, no model event


def test_claude_unknown_session_is_tool_with_errors_text() -> None:
    _, failure, reason = classify("claude", CLAUDE, "unknown-session")
    assert failure is Failure.tool
    assert reason == "No conversation found with session ID: 22222222-3333-4444-8555-666666666666"


def test_claude_bad_model_and_effort_still_say_not_logged_in() -> None:
    for name in ("nologin-bad-model", "nologin-bad-effort"):
        _, failure, _ = classify("claude", CLAUDE, name)
        assert failure is Failure.auth, name
    assert "Unknown --effort value 'bogus'" in case(CLAUDE, "nologin-bad-effort")[1]


@pytest.mark.parametrize(
    ("error", "text", "failure"),
    [
        ("billing_error", "Credit balance is too low", Failure.quota),
        ("rate_limit", "API Error: Request rejected (429)", Failure.rate_limit),
        ("unknown", "There's an issue with the selected model (claude-x). It may not exist", Failure.model),
        ("invalid_request", "Invalid API key · Fix external API key", Failure.auth),
        ("invalid_request", "Prompt is too long", Failure.task),
    ],
)
def test_claude_api_errors_in_the_recorded_shape(error: str, text: str, failure: Failure) -> None:
    """The not-logged-in recording with another error and text: the same shape carries
    every API error (2.1.332 lists these error values)."""
    lines = []
    for line in case(CLAUDE, "nologin")[0].splitlines():
        event = json.loads(line)
        if event["type"] == "assistant":
            event["error"] = error
            event["message"]["content"][0]["text"] = text
        if event["type"] == "result":
            event["result"] = text
        lines.append(json.dumps(event))
    parsed = replay("claude", "\n".join(lines))
    assert adapters.get("claude").classify(parsed, 1, "", "") == (failure, text)


def test_claude_task_failure_keeps_errors() -> None:
    parsed = replay(
        "claude",
        json.dumps(
            {
                "type": "assistant",
                "message": {"model": "claude-x", "content": [{"type": "text", "text": "hi"}]},
            }
        )
        + "\n"
        + json.dumps(
            {"type": "result", "subtype": "error_max_turns", "is_error": True, "errors": ["max turns"]}
        ),
    )
    assert adapters.get("claude").classify(parsed, 1, "", "") == (Failure.task, "max turns")


def test_claude_auth_status_probe() -> None:
    out, err, code = case(CLAUDE, "auth-status")
    assert code == 1 and adapters.get("claude").logged_in(1, out, err) is False
    assert adapters.get("claude").logged_in(0, out.replace("false", "true", 1), "") is True


# ---------------------------------------------------------------- codex


def test_codex_offline_stream_is_transient_only() -> None:
    for name in ("offline", "nologin"):
        parsed = replay("codex", case(CODEX, name)[0])
        assert parsed.failure is None and parsed.error is None, name
        assert parsed.progress == 0 and parsed.session_id
        assert parsed.transient is not None and parsed.transient.startswith(
            "Reconnecting... waiting for network"
        )
        assert parsed.transient_failure is Failure.network


def test_a_retry_counts_only_until_the_next_progress() -> None:
    """A unit that recovered from a reconnect and then went quiet stalled; it was not offline."""
    recorded = case(CODEX, "offline")[0].splitlines()[:7]
    parsed = replay("codex", "\n".join(recorded))
    assert parsed.retrying() == (Failure.network, parsed.transient)
    item = {"type": "item.completed", "item": {"id": "item_1", "type": "reasoning", "text": "thinking"}}
    parsed = replay("codex", "\n".join([*recorded, json.dumps(item)]))
    assert parsed.retrying() is None


def test_codex_reconnect_then_answer_is_a_success() -> None:
    recorded = case(CODEX, "offline")[0].splitlines()[:7]  # thread, turn, reconnects, the fallback item
    answer = [
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "done"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2},
        },
    ]
    parsed = replay("codex", "\n".join(recorded + [json.dumps(e) for e in answer]))
    assert parsed.error is None and parsed.failure is None and parsed.finished and parsed.answer == "done"


def test_codex_bad_model_warning_item_is_not_a_failure() -> None:
    parsed = replay("codex", case(CODEX, "bad-model")[0])
    assert parsed.failure is None and parsed.progress == 0


def test_codex_unknown_session_is_tool() -> None:
    _, failure, reason = classify("codex", CODEX, "unknown-session")
    assert failure is Failure.tool and reason is not None
    assert reason.startswith("Error: thread/resume: thread/resume failed: no rollout found for thread id")


def test_codex_turn_failed_words_decide() -> None:
    for message, failure in (
        ("You've hit your usage limit. Upgrade to Plus to continue using Codex", Failure.usage_limit),
        ("unexpected status 401 Unauthorized: Missing bearer", Failure.auth),
        ("Rate limit reached for gpt-5.5", Failure.rate_limit),
        ("The model `sonnet` does not exist or you do not have access to it.", Failure.model),
        ("the agent gave up", Failure.task),
    ):
        parsed = replay("codex", json.dumps({"type": "turn.failed", "error": {"message": message}}))
        assert (parsed.failure, parsed.error) == (failure, message)


def test_codex_login_status_probe() -> None:
    out, err, code = case(CODEX, "login-status")
    assert code == 1 and adapters.get("codex").logged_in(1, out, err) is False


# ---------------------------------------------------------------- opencode


def test_opencode_unknown_session_is_tool() -> None:
    _, failure, reason = classify("opencode", OPENCODE, "unknown-session")
    assert (failure, reason) == (Failure.tool, "Error: Session not found")


def test_opencode_offline_its_first_logged_error_decides() -> None:
    """Recorded offline: opencode first fails to fetch its model list (HttpClientError),
    then says the model is not found (a bad one, and a good one it could not list alike):
    the first logged error is the cause, so both are network (preflight refuses a model
    that is not provider/model, and finds a missing key, before anything runs)."""
    for case in ("bad-model-logs", "provider-nokey"):
        _, failure, reason = classify("opencode", OPENCODE, case)
        assert failure is Failure.network and reason is not None, case
        assert reason.startswith("HttpClientError: Transport error (GET https://models.opencode.ai/api.json)")


def test_opencode_hosted_default_offline_is_network() -> None:
    _, failure, reason = classify("opencode", OPENCODE, "no-provider")
    assert failure is Failure.network and reason is not None and reason.startswith("APIError: Cannot connect")


def test_opencode_cost_reads_a_store_the_real_binary_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = OPENCODE / "no-provider.opencode.db"
    sid = json.loads(case(OPENCODE, "no-provider")[0].splitlines()[0])["sessionID"]
    cost = opencode.store_cost(sid, db)
    assert (cost.kind, cost.model, cost.turns, cost.usd) == ("opencode", "opencode/big-pickle", 1, 0.0)
    assert cost.dur_s is not None and cost.dur_s > 0
    # the same store with what a paid turn records (the real schema, real message shape)
    import sqlite3

    copy = tmp_path / "opencode.db"
    shutil.copy(db, copy)
    with sqlite3.connect(copy) as con:
        (raw,) = con.execute("SELECT data FROM message WHERE data LIKE '%assistant%'").fetchone()
        msg = json.loads(raw)
        msg.update(
            cost=0.25, tokens={"input": 100, "output": 20, "reasoning": 5, "cache": {"read": 7, "write": 3}}
        )
        con.execute("UPDATE message SET data = ? WHERE data LIKE '%assistant%'", (json.dumps(msg),))
    con.close()
    cost = opencode.store_cost(sid, copy)
    assert (cost.inp, cost.out, cost.cr, cost.cw5m, cost.usd, cost.usd_rep) == (100, 25, 7, 3, 0.25, 0.25)
    with pytest.raises(Exception, match="no opencode session"):
        opencode.store_cost("ses_unknown", copy)
    # where opencode keeps it: $XDG_DATA_HOME/opencode/opencode.db (wf orch post reads it so)
    (tmp_path / "opencode").mkdir()
    copy.rename(tmp_path / "opencode" / "opencode.db")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    found = adapters.session_cost("opencode", sid)
    assert found is not None and found[1] == "opencode" and found[0].usd == 0.25


# ---------------------------------------------------------------- help and vocabulary


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_every_flag_wf_passes_is_in_the_recorded_help(tool: str) -> None:
    folder = {"claude": CLAUDE, "codex": CODEX, "opencode": OPENCODE}[tool]
    files = {
        ("claude", "--help"): "help",
        ("codex", "exec", "--help"): "exec-help",
        ("codex", "exec", "resume", "--help"): "exec-resume-help",
        ("opencode", "run", "--help"): "run-help",
    }
    for argv, flags in adapters.get(tool).help_probes:
        out, err, _ = case(folder, files[argv])
        listed = help_options(out + err)
        assert [f for f in flags if f not in listed] == [], argv


def test_help_options_are_exact_tokens() -> None:
    listed = help_options(
        "  --allowedTools, --allowed-tools <tools...>\n  -m, --model <M>  use --effortless\n"
    )
    assert {"--allowedTools", "--allowed-tools", "-m", "--model", "--effortless"} <= listed
    assert "--effort" not in listed  # a substring of another option is not the option
    assert help_options("[possible values: read-only, workspace-write, danger-full-access]") == set()


@pytest.mark.parametrize(
    ("tool", "model", "fits"),
    [
        ("claude", "sonnet", True),
        ("claude", "claude-opus-4-6", True),
        ("claude", "opus[1m]", True),
        ("claude", "gpt-5.5", False),
        ("claude", "<synthetic>", False),
        ("codex", "gpt-5.3-codex", True),
        ("codex", "o3", True),
        ("codex", "sonnet", False),
        ("opencode", "anthropic/claude-sonnet-4-5", True),
        ("opencode", "sonnet", False),
        ("opencode", None, False),
    ],
)
def test_models_fit_their_tool(tool: str, model: str | None, fits: bool) -> None:
    problems = adapters.vocabulary_problems(tool, model, None)
    assert (problems == []) is fits
    assert all(p.failure is Failure.model for p in problems)


def test_efforts_per_tool() -> None:
    assert adapters.vocabulary_problems("claude", "sonnet", "max") == []
    assert adapters.vocabulary_problems("codex", "gpt-5.5", "minimal") == []
    assert adapters.vocabulary_problems("opencode", "a/b", "high") == []
    assert adapters.vocabulary_problems("codex", "gpt-5.5", "max") != []
    assert adapters.vocabulary_problems("claude", "sonnet", "bogus") != []


def test_effort_maps_to_each_tools_flag(tmp_path: Path) -> None:
    spec = adapters.Spec("r", "u", tmp_path, tmp_path, "p", model="m/x", effort="high", session_id="s")
    assert "--effort=high" in adapters.get("claude").argv(spec)
    assert 'model_reasoning_effort="high"' in adapters.get("codex").argv(spec)
    argv = adapters.get("opencode").argv(spec)
    assert argv[argv.index("--variant") + 1] == "high"


def test_tool_access_reaches_the_argv(tmp_path: Path) -> None:
    base = adapters.Spec("r", "u", tmp_path, tmp_path, "p", session_id="s", allowed_tools=("Bash",))
    claude = adapters.get("claude").argv(base)
    assert "--allowedTools=Bash" in claude and "--disallowedTools=WebFetch,WebSearch" in claude
    assert "--strict-mcp-config" not in claude
    open_ = base._replace(network=True, isolate_mcp=True, sandbox="read-only", extra_args=("--x",))
    claude = adapters.get("claude").argv(open_)
    assert "--allowedTools=Bash,WebFetch,WebSearch" in claude and "--strict-mcp-config" in claude
    assert not any(a.startswith("--disallowedTools") for a in claude) and claude[-1] == "--x"
    codex = adapters.get("codex").argv(open_)
    assert codex[codex.index("-s") + 1] == "read-only" and "--ignore-user-config" in codex
    codex = adapters.get("codex").argv(base._replace(network=True))
    assert "sandbox_workspace_write.network_access=true" in codex


def test_lane_model_for_and_lane_problems() -> None:
    cfg = config.from_dict(
        {
            "lanes": {
                "s": {"model": "sonnet", "models": {"codex": "gpt-5.3-codex"}},
                "plain": {"model": "sonnet"},
                "bad": {"model": "sonnet", "adapter": "codex", "effort": "max"},
                "oc": {"model": "sonnet", "adapter": "opencode"},
            }
        }
    )
    s, plain, bad, oc = (cfg.lane(n) for n in ("s", "plain", "bad", "oc"))
    assert adapters.lane_model_for(s, "claude") == "sonnet"
    assert adapters.lane_model_for(s, "codex") == "gpt-5.3-codex"
    assert adapters.lane_model_for(plain, "codex") is None  # refuse: sonnet is no codex model
    assert adapters.lane_model_for(plain, "opencode") is None
    assert adapters.lane_problems(s) == [] and adapters.lane_problems(plain) == []
    assert {p.failure for p in adapters.lane_problems(bad)} == {Failure.model}
    assert len(adapters.lane_problems(bad)) == 2  # the model and the effort
    assert adapters.lane_problems(oc)[0].message.startswith("'sonnet' is not provider/model")


def test_lane_access_settings_are_validated() -> None:
    cfg = config.from_dict({"lanes": {"ro": {"model": "gpt-5.5", "adapter": "codex", "sandbox": "read-only",
                                               "network": True, "isolate_mcp": True, "extra_args": ["--x"],
                                               "stall": 30, "timeout": 600}}})  # fmt: skip
    ro = cfg.lane("ro")
    assert ro is not None and (ro.sandbox, ro.network, ro.isolate_mcp, ro.extra_args) == (
        "read-only",
        True,
        True,
        ("--x",),
    )
    assert (ro.stall, ro.timeout) == (30.0, 600.0)
    assert adapters.lane_access(ro)["sandbox"] == "read-only"
    for bad in ({"sandbox": "none"}, {"network": "yes"}, {"extra_args": "--x"}, {"models": {"gemini": "x"}},
                {"stall": 0}):  # fmt: skip
        with pytest.raises(Exception, match=r"lanes\.l"):
            config.from_dict({"lanes": {"l": {"model": "sonnet", **bad}}})


# ---------------------------------------------------------------- describe


def test_describe() -> None:
    d = adapters.describe
    assert d({"state": "done"}) == "done"
    assert d({"state": "running"}) == "running"
    assert d({"state": "failed", "failure": "auth", "reason": "Not logged in · Please run /login"}) == (
        "failed auth: Not logged in · Please run /login"
    )
    assert d({"state": "stalled", "failure": "stall", "reason": "no model event for 5s"}) == (
        "stalled: no model event for 5s"
    )
    assert d({"state": "stalled", "failure": "network", "reason": "Reconnecting..."}) == (
        "stalled network: Reconnecting..."
    )
    assert (
        d({"state": "failed", "failure": None, "reason": None, "error": "old record"}) == "failed: old record"
    )


def test_cmd_failures() -> None:
    cmd = adapters.get("cmd")
    p = Parsed()
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'foo'\n"
    assert cmd.classify(p, 1, "", tb) == (Failure.tool, "ModuleNotFoundError: No module named 'foo'")
    assert cmd.classify(p, 1, "partial output", tb)[0] is Failure.task  # it ran: its own failure
    assert cmd.classify(p, 127, "", "sh: nope: not found")[0] is Failure.tool
    assert cmd.classify(p, 126, "", "")[0] is Failure.tool
    assert cmd.classify(p, 1, "", "boom\n") == (Failure.task, "boom")


def test_access_the_tool_cannot_honour_is_a_lane_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config.from_dict({"lanes": {"oc": {"model": "a/b", "adapter": "opencode", "sandbox": "read-only"}}})
    [p] = adapters.lane_problems(cfg.lane("oc"))
    assert p.failure is Failure.tool and "not enforced" in p.message
    cfg = config.from_dict({"lanes": {"oc": {"model": "a/b", "adapter": "opencode"}}})
    assert adapters.lane_problems(cfg.lane("oc")) == []


def rollout_shape(path: Path) -> dict[str, set[str]]:
    """Per line kind (type, or type/payload.type), the keys its lines have."""
    shape: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        payload = rec["payload"]
        kind = rec["type"] + (f"/{payload['type']}" if rec["type"] == "event_msg" else "")
        shape.setdefault(kind, set()).update({*rec, *(f"payload.{k}" for k in payload)})
    return shape


def test_the_fake_codex_rollout_has_the_real_lines_wf_reads(tmp_path: Path) -> None:
    """0.171 numbers its lines and writes world_state; the lines wf usage reads
    (session_meta, turn_context, token_count) carry the keys it reads, in both."""
    import os
    import subprocess

    real = CODEX / "offline-model.rollout.jsonl"
    assert usage.codex_cost(real).model == "gpt-5.5" and usage.codex_cost(real).malformed == 0
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex")}
    fake = Path(__file__).parent.parent / "fakes" / "codex"
    subprocess.run([str(fake), "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5", "-"], input="hi",
                   env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    [made] = (tmp_path / "codex" / "sessions").rglob("rollout-*.jsonl")
    real_shape, fake_shape = rollout_shape(real), rollout_shape(made)
    for kind in ("session_meta", "turn_context", "world_state", "event_msg/task_started"):
        assert kind in real_shape and kind in fake_shape, kind
    for key in ("timestamp", "ordinal", "type", "payload"):
        assert key in real_shape["session_meta"] and key in fake_shape["session_meta"]
    for key in ("payload.model", "payload.effort", "payload.approval_policy", "payload.sandbox_policy"):
        assert key in real_shape["turn_context"] and key in fake_shape["turn_context"], key
    for key in ("payload.id", "payload.cwd", "payload.cli_version", "payload.originator"):
        assert key in real_shape["session_meta"] and key in fake_shape["session_meta"], key


# ---------------------------------------------------------------- each rule alone (mutants)


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        ("authentication_failed", Failure.auth), ("oauth_org_not_allowed", Failure.auth),
        ("verification_required", Failure.auth), ("cloud_credential_error", Failure.auth),
        ("billing_error", Failure.quota), ("account_on_hold", Failure.quota),
        ("rate_limit", Failure.rate_limit), ("overloaded", Failure.overloaded),
        ("model_not_found", Failure.model), ("server_error", Failure.network),
        ("invalid_request", Failure.task), ("unknown", Failure.task), ("max_output_tokens", Failure.task),
    ],
)  # fmt: skip
def test_claude_error_values_decide_when_the_words_do_not(error: str, failure: Failure) -> None:
    """The recorded shape with words that name no class: the error value alone decides,
    and the result that follows keeps the class the assistant event gave."""
    lines = []
    for line in case(CLAUDE, "nologin")[0].splitlines():
        event = json.loads(line)
        if event["type"] == "assistant":
            event["error"] = error
            event["message"]["content"][0]["text"] = "Something went wrong"
        if event["type"] == "result":
            event["result"] = "Something went wrong"
        lines.append(json.dumps(event))
    parsed = replay("claude", "\n".join(lines))
    assert adapters.get("claude").classify(parsed, 1, "", "") == (failure, "Something went wrong")


def test_claude_connection_failed_is_network_whatever_the_message_said() -> None:
    lines = []
    for line in case(CLAUDE, "offline")[0].splitlines():
        event = json.loads(line)
        if event["type"] == "assistant":
            event["error"] = "unknown"
            event["message"]["content"][0]["text"] = "API Error: request ended"
        if event["type"] == "result":
            event["result"] = "API Error: request ended"
        lines.append(json.dumps(event))
    parsed = replay("claude", "\n".join(lines))
    assert adapters.get("claude").classify(parsed, 1, "", "") == (Failure.network, "API Error: request ended")


@pytest.mark.parametrize(
    ("words", "failure"),
    [
        ("Not logged in", Failure.auth),
        ("exceeded retry limit, last status: 429", Failure.rate_limit),
        ("Can't reach the API server", Failure.network),
        ("You've hit your weekly limit", Failure.usage_limit),
        ("Claude AI usage limit reached|1758000000", Failure.usage_limit),
        ("Credit balance is too low", Failure.quota),
        ("API Error: Repeated 529 Overloaded errors", Failure.overloaded),
        ("There's an issue with the selected model (x)", Failure.model),
        ("the agent gave up", None),
    ],
)
def test_words_name_their_class(words: str, failure: Failure | None) -> None:
    from wf.adapters.base import classify_words

    assert classify_words(words) is failure


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_an_exit_before_the_first_event_is_the_tools(tool: str) -> None:
    a = adapters.get(tool)
    assert a.classify(Parsed(), 1, "", "Error: EACCES: permission denied, open '/x'\n") == (
        Failure.tool, "Error: EACCES: permission denied, open '/x'",
    )  # fmt: skip
    if tool == "claude":  # the others say so before their first event already
        assert a.classify(Parsed(), 127, "", "") == (Failure.tool, "exit 127: the program could not run")


def test_codex_says_its_error_line_not_the_log_after_it() -> None:
    err = case(CODEX, "unknown-session")[1] + "2026-12-01T07:57:52.405397Z ERROR codex_core: shutting down\n"
    failure, reason = adapters.get("codex").classify(Parsed(), 1, "", err)
    assert failure is Failure.tool and reason is not None and reason.startswith("Error: thread/resume")


def test_opencode_error_names_decide_when_the_words_do_not() -> None:
    for name, failure in (("ProviderModelNotFoundError", Failure.model), ("ProviderAuthError", Failure.auth),
                          ("ModelNotFoundError", Failure.model)):  # fmt: skip
        event = {"type": "error", "sessionID": "ses_x", "error": {"name": name, "data": {"message": "x"}}}
        parsed = replay("opencode", json.dumps(event))
        assert (parsed.failure, parsed.error) == (failure, f"{name}: x")
