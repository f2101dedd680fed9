"""The fakes against the recordings of the real tools: each recorded case is run again
through the fake, with the recorded argv, stdin and variables (and the trigger that
stands for what the recording had: no login, no network), and what the fake prints is
compared with what the real tool printed: the help each subcommand lists, the version,
exit codes, the events and their fields, the words on stderr. A fake that drifts from
the real tool fails here, not in production."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from wf.doctor.checks import help_options

HERE = Path(__file__).parent.parent
FAKES = HERE / "fakes"
REAL = HERE / "fixtures" / "real"
FOLDERS = {
    "claude": REAL / "claude-2.1.332",
    "codex": REAL / "codex-0.171.0",
    "opencode": REAL / "opencode-1.18.33",
}
# case -> what stands in for the recording's conditions (variables, the prompt)
TRIGGERS: dict[tuple[str, str], tuple[dict[str, str], str | None]] = {
    ("claude", "auth-status"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("claude", "nologin"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("claude", "nologin-bad-model"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("claude", "nologin-bad-effort"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("claude", "offline"): ({}, "OFFLINE\n"),
    ("codex", "login-status"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("codex", "nologin"): ({"FAKE_LOGGED_OUT": "1"}, None),
    ("codex", "offline"): ({}, "OFFLINE\n"),
}
HELP_CASES = {
    ("claude", "--help"): "help",
    ("codex", "exec", "--help"): "exec-help",
    ("codex", "exec", "resume", "--help"): "exec-resume-help",
    ("opencode", "run", "--help"): "run-help",
}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\bses_[0-9A-Za-z]{26}\b")


def cases(tool: str) -> dict[str, dict[str, Any]]:
    data = json.loads((FOLDERS[tool] / "manifest.json").read_text())
    return {c["case"]: c for c in data["cases"]}


def recorded(tool: str, name: str) -> tuple[str, str, int | None]:
    folder = FOLDERS[tool]
    code = cases(tool)[name]["exit_code"]
    return (folder / f"{name}.stdout").read_text(), (folder / f"{name}.stderr").read_text(), code


def words(text: str) -> list[str]:
    """Lines a person reads: colours, ids, the temporary folder, codex's PATH-alias
    warning and timestamped log lines gone."""
    out = []
    for line in ANSI.sub("", text).splitlines():
        if not line.strip() or line.startswith("WARNING: proceeding") or re.match(r"\d{4}-\d\d-\d\dT", line):
            continue
        out.append(IDS.sub("<id>", line.strip()))
    return out


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[dict[str, str], Path]:
    home = tmp_path / "home"
    for d in (".claude", ".codex", ".config", ".local/share", ".local/state", ".cache"):
        (home / d).mkdir(parents=True)
    work = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    return env, tmp_path


def replay(
    tool: str, name: str, sealed: tuple[dict[str, str], Path], *, lines: int | None = None
) -> tuple[str, str, int | None]:
    """The fake run as the recorded case ran; with `lines`: a case the real tool never
    ended (it was killed), the fake's first lines and whether it was still running."""
    env, tmp = sealed
    case = cases(tool)[name]
    extra, prompt = TRIGGERS.get((tool, name), ({}, None))
    argv = [str(FAKES / tool), *(a.replace("$TMP", str(tmp)) for a in case["argv"][1:])]
    stdin = prompt if prompt is not None else case["stdin"]
    full_env = {**env, **case["env"], **extra}
    if lines is None:
        p = subprocess.run(argv, input=stdin or "", capture_output=True, text=True, env=full_env,
                           cwd=tmp / "w", timeout=60)  # fmt: skip
        return p.stdout, p.stderr, p.returncode
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=full_env, cwd=tmp / "w")  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin or "")
    proc.stdin.close()
    got = [proc.stdout.readline() for _ in range(lines)]
    time.sleep(0.3)
    code = proc.poll()
    proc.kill()
    proc.wait()
    return "".join(got), "", code


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# ---------------------------------------------------------------- help and version


@pytest.mark.parametrize(
    ("tool", "name"),
    [("claude", "help"), ("codex", "help"), ("codex", "exec-help"), ("codex", "exec-resume-help"),
     ("opencode", "help"), ("opencode", "run-help")],
)  # fmt: skip
def test_each_help_lists_only_real_options_on_the_real_stream(
    tool: str, name: str, sealed: tuple[dict[str, str], Path]
) -> None:
    """Every option a fake's help lists, the real help lists (the fake invents none), on
    the same stream (opencode's yargs prints help on stderr), with the same exit code;
    and every option wf passes is in both (tests/adapters/test_adapters.py checks the real one)."""
    from wf import adapters

    real_out, real_err, real_code = recorded(tool, name)
    out, err, code = replay(tool, name, sealed)
    assert code == real_code == 0
    real, fake = help_options(real_out + real_err), help_options(out + err)
    assert sorted(fake - real) == []
    assert bool(out.strip()) == bool(real_out.strip()) and bool(words(err)) == bool(words(real_err))
    for argv, flags in adapters.get(tool).help_probes:
        if HELP_CASES[argv] == name:
            assert [f for f in flags if f not in fake] == [], argv


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_the_version_is_the_recorded_one(tool: str, sealed: tuple[dict[str, str], Path]) -> None:
    assert replay(tool, "version", sealed)[0] == recorded(tool, "version")[0]


# ---------------------------------------------------------------- claude


@pytest.mark.parametrize("name", ["nologin", "nologin-bad-model", "nologin-bad-effort", "offline"])
def test_claude_failure_streams_match(name: str, sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("claude", name)
    out, err, code = replay("claude", name, sealed)
    assert code == real_code == 1
    real, fake = events(real_out), events(out)
    assert [(e["type"], e.get("subtype")) for e in fake] == [(e["type"], e.get("subtype")) for e in real]
    for r, f in zip(real, fake, strict=True):
        if r["type"] == "assistant":
            assert {k: f.get(k) for k in ("error", "is_api_error_message")} == {
                k: r.get(k) for k in ("error", "is_api_error_message")
            }
            assert f["message"]["model"] == r["message"]["model"] == "<synthetic>"
            assert f["message"]["content"] == r["message"]["content"]
        if r["type"] == "result":
            keys = ("subtype", "is_error", "result", "errors", "num_turns", "terminal_reason", "api_error")
            assert {k: f.get(k) for k in keys} == {k: r.get(k) for k in keys}
        if r.get("subtype") == "init":
            assert f["model"] == r["model"]  # as asked (--model=gpt-5 shows as gpt-5), else the default
    assert words(err) == words(real_err)  # the bad-effort warning, word for word


def test_claude_unknown_session_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("claude", "unknown-session")
    out, err, code = replay("claude", "unknown-session", sealed)
    assert code == real_code == 1
    [r], [f] = events(real_out), events(out)
    keys = ("type", "subtype", "is_error", "num_turns", "errors", "session_id")
    assert {k: f.get(k) for k in keys} == {k: r.get(k) for k in keys}
    assert words(err) == words(real_err) == ["No conversation found with session ID: <id>"]


def test_claude_auth_status_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, _, real_code = recorded("claude", "auth-status")
    out, _, code = replay("claude", "auth-status", sealed)
    assert code == real_code == 1
    real, fake = json.loads(real_out), json.loads(out)
    assert sorted(fake) == sorted(real) and fake["loggedIn"] is real["loggedIn"] is False


# ---------------------------------------------------------------- codex


@pytest.mark.parametrize("name", ["nologin", "offline"])
def test_codex_offline_retries_match_and_never_end(name: str, sealed: tuple[dict[str, str], Path]) -> None:
    """Not logged in or offline, codex 0.171.0 reconnects, warns with an error item,
    then waits for the network forever (the recording was killed): so does the fake,
    event for event, and it creates the -o file empty at once, as the real one does."""
    real_out, _, real_code = recorded("codex", name)
    real = events(real_out)
    out, _, code = replay("codex", name, sealed, lines=len(real))
    assert real_code is None and code is None  # both still running
    fake = events(out)

    def shape(e: dict[str, Any]) -> tuple[Any, ...]:
        item = e.get("item") or {}
        return e["type"], e.get("message"), item.get("type"), item.get("message")

    assert [shape(e) for e in fake] == [shape(e) for e in real]
    assert (sealed[1] / "out.txt").read_text() == ""


def test_codex_unknown_session_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("codex", "unknown-session")
    out, err, code = replay("codex", "unknown-session", sealed)
    assert code == real_code == 1 and out == real_out == ""
    assert words(err) == words(real_err)


def test_codex_bad_flag_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("codex", "bad-flag")
    out, err, code = replay("codex", "bad-flag", sealed)
    assert code == real_code == 2 and out == real_out == ""
    assert words(err)[0] == words(real_err)[0] == "error: unexpected argument '--no-such-flag' found"


def test_codex_login_status_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("codex", "login-status")
    out, err, code = replay("codex", "login-status", sealed)
    assert code == real_code == 1 and out == real_out == ""
    assert words(err) == words(real_err) == ["Not logged in"]


# ---------------------------------------------------------------- opencode


def test_opencode_unknown_session_matches(sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("opencode", "unknown-session")
    out, err, code = replay("opencode", "unknown-session", sealed)
    assert code == real_code == 1 and out == real_out == ""
    assert words(err) == words(real_err) == ["Error: Session not found"]


@pytest.mark.parametrize("name", ["bad-model", "bad-model-logs"])
def test_opencode_bad_model_matches(name: str, sealed: tuple[dict[str, str], Path]) -> None:
    real_out, real_err, real_code = recorded("opencode", name)
    out, err, code = replay("opencode", name, sealed)
    assert code == real_code == 1
    [r], [f] = events(real_out), events(out)
    assert (f["type"], f["error"]["name"], f["error"]["data"]["message"]) == (
        r["type"], r["error"]["name"], r["error"]["data"]["message"],
    )  # fmt: skip
    assert sorted(f) == sorted(r) and f["sessionID"].startswith("ses_")
    said = 'error="ProviderModelNotFoundError: Model not found: sonnet/."'
    assert (said in err) == (said in real_err) == (name == "bad-model-logs")
