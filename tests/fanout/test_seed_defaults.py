"""Fan-out seed defaults (issue 23, item 6): a unit's hard timeout can be switched off
(``--timeout 0``; the stall watch stays), dispatch and run set a unit's tool access, and a
unit that names no model runs on wf's cheaper fan-out default, never on an expensive
model unless the manifest or the command line names it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.test_grants_real import real_env
from tests.conftest import WfRunner, git
from tests.model_api import ModelApi, Request, Step, Text, ToolUse
from tests.workers.test_workers import Workers, manifest

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
needs_real = pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)")


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    return Workers(wf.root, tmp_path)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def runs_of_tool(w: Workers) -> list[list[str]]:
    """The argv of each run of a fake tool (not its --version probe)."""
    return [a for a in w.argv_calls() if "--version" not in a]


TALKER = "import time; [(print(i, flush=True), time.sleep(0.2)) for i in range(12)]; print('finished')"
SILENT = "import time; time.sleep(30)"


# ------------------------------------------------------------------ --timeout 0


def test_timeout_0_lets_a_talking_unit_run_past_its_timeout(w: Workers) -> None:
    """A unit that prints every 0.2 s for ~2.4 s: with --timeout 1 it is stopped
    (timeout), with --timeout 0 it finishes done, recorded timeout_s 0."""
    cmd = shlex.join(py(TALKER))
    r = w.run("dispatch", "t", "short", "--adapter", "cmd", "--cmd", cmd, "--prompt", "x", "--timeout", "1")
    assert r.returncode == 4 and w.status("t", "short")["state"] == "timeout", r.stdout + r.stderr
    r = w.run("dispatch", "t", "free", "--adapter", "cmd", "--cmd", cmd, "--prompt", "x", "--timeout", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("t", "free")
    assert st["state"] == "done" and st["timeout_s"] == 0
    assert w.output("t", "free").endswith("finished")


def test_timeout_0_keeps_the_stall_watch(w: Workers) -> None:
    r = w.run("dispatch", "t", "mute", "--adapter", "cmd", "--cmd", shlex.join(py(SILENT)),
              "--prompt", "x", "--timeout", "0", "--stall", "1")  # fmt: skip
    st = w.status("t", "mute")
    assert r.returncode == 4 and st["state"] == "stalled" and st["timeout_s"] == 0, r.stdout + r.stderr


def test_timeout_0_in_a_manifest_and_on_run_and_its_retry(w: Workers, tmp_path: Path) -> None:
    """``timeout: 0`` in a manifest, and ``wf run --timeout 0`` over a manifest whose
    defaults say 1 s, switch the hard timeout off; a unit's own timeout still wins over
    the command line; a retry keeps no timeout."""
    units: list[dict[str, Any]] = [
        {"id": "own0", "cmd": py(TALKER), "timeout": 0},
        {"id": "dflt", "cmd": py(TALKER)},
        {"id": "fail", "cmd": py("import sys; sys.exit(3)")},
        {"id": "own1", "cmd": py(TALKER), "timeout": 1},
    ]
    m = manifest(tmp_path / "m.json", [{**u, "prompt": "x"} for u in units], adapter="cmd", timeout=1)
    r = w.run("run", str(m), "--run", "r0", "--timeout", "0")
    assert r.returncode == 4, r.stdout + r.stderr
    states = {
        u: (w.status("r0", u)["state"], w.status("r0", u)["timeout_s"]) for u in ("own0", "dflt", "own1")
    }
    assert states == {"own0": ("done", 0), "dflt": ("done", 0), "own1": ("timeout", 1)}
    r = w.run("runs", "retry", "r0", "fail")
    assert w.status("r0", "fail-r1")["timeout_s"] == 0, r.stdout + r.stderr
    r = w.run("run", str(m), "--run", "r1")  # without the option the manifest's 1 s holds
    assert w.status("r1", "dflt")["state"] == "timeout", r.stdout + r.stderr


def test_a_running_unit_with_no_timeout_says_so(w: Workers) -> None:
    cmd = shlex.join(py(TALKER))
    p = w.start("dispatch", "t", "slow", "--adapter", "cmd", "--cmd", cmd, "--prompt", "x", "--timeout", "0")
    try:
        lines: list[str] = []
        for _ in range(200):
            st = w.unit("t", "slow") / "status.json"
            if st.exists() and w.status("t", "slow")["state"] == "running":
                lines = [
                    ln for ln in w.run("runs", "status", "t").stdout.splitlines() if ln.startswith("slow:")
                ]
                break
            time.sleep(0.05)
        assert lines and "running" in lines[0] and "no timeout" in lines[0], lines
    finally:
        p.communicate(timeout=60)
    done = [ln for ln in w.run("runs", "status", "t").stdout.splitlines() if ln.startswith("slow:")]
    assert "no timeout" not in done[0], done


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-1", "must be a number of seconds >= 0 (0: no timeout), not -1"),
        ("nan", "must be a number of seconds >= 0"),
        ("soon", "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_timeout_is_a_usage_error(w: Workers, value: str, words: str) -> None:
    r = w.run("dispatch", "t", "u", "--adapter", "cmd", "--cmd", "true", "--prompt", "x", "--timeout", value)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (w.root / ".wf" / "runs" / "t").exists()


def test_a_bad_timeout_in_a_manifest_is_refused_by_name(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json", [{"id": "u", "prompt": "x", "cmd": ["true"], "timeout": -5}], adapter="cmd"
    )
    r = w.run("run", str(m), "--run", "bad")
    assert (
        r.returncode == 1
        and "unit u: timeout must be a number of seconds >= 0 (0: no timeout), not -5" in r.stderr
    )
    m = manifest(
        tmp_path / "m.json", [{"id": "u", "prompt": "x", "cmd": ["true"], "stall": 0}], adapter="cmd"
    )
    r = w.run("run", str(m), "--run", "bad")
    assert r.returncode == 1 and "unit u: stall must be a number of seconds above 0, not 0" in r.stderr
    (tmp_path / "nan.json").write_text(
        '{"units": [{"id": "u", "prompt": "x", "cmd": ["true"], "timeout": NaN}]}'
    )
    r = w.run("run", str(tmp_path / "nan.json"), "--run", "bad")
    assert r.returncode == 1 and "unit u: timeout must be a number of seconds >= 0" in r.stderr, r.stderr
    r = w.run("run", str(m), "--run", "bad", "--stall", "0")
    assert r.returncode == 2 and "must be a number of seconds above 0, not 0" in r.stderr


# ------------------------------------------------------------------ tool access


def test_dispatch_access_options_reach_the_tool_and_status(w: Workers) -> None:
    """codex (the fake, which checks its options as the real one does): the sandbox and
    network given on dispatch are in its argv and in status.json access."""
    r = w.run("dispatch", "a", "u", "--adapter", "codex", "--prompt", "hi", "--sandbox", "danger-full-access")
    assert r.returncode == 0, r.stdout + r.stderr
    r = w.run("dispatch", "a", "v", "--adapter", "codex", "--prompt", "hi", "--network")
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = runs_of_tool(w)[-2:]
    assert first[first.index("-s") + 1] == "danger-full-access"
    assert second[second.index("-s") + 1] == "workspace-write"
    assert "sandbox_workspace_write.network_access=true" in second
    assert "sandbox_workspace_write.network_access=true" not in first
    assert w.status("a", "u")["access"]["sandbox"] == "danger-full-access"
    assert w.status("a", "v")["access"]["network"] is True


def test_claude_access_options_and_run_defaults(w: Workers, tmp_path: Path) -> None:
    """--permission-mode and --allowed-tools on dispatch reach claude's argv; on wf run
    they are defaults for every unit: a unit's own keys win."""
    r = w.run("dispatch", "a", "c", "--adapter", "claude", "--prompt", "hi", "--permission-mode", "plan",
              "--allowed-tools", "Bash(git:*),Read", "--allowed-tools", "Edit")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    argv = runs_of_tool(w)[-1]
    assert "--permission-mode=plan" in argv and "--allowedTools=Bash(git:*),Read,Edit" in argv
    access = w.status("a", "c")["access"]
    assert access["permission_mode"] == "plan" and access["allowed_tools"] == ["Bash(git:*)", "Read", "Edit"]
    m = manifest(tmp_path / "m.json", [{"id": "mine", "prompt": "x", "permission_mode": "acceptEdits"},
                                       {"id": "theirs", "prompt": "y"}], adapter="claude", permission_mode="dontAsk")  # fmt: skip
    r = w.run("run", str(m), "--run", "rd", "--permission-mode", "plan", "--allowed-tools", "Read")
    assert r.returncode == 0, r.stdout + r.stderr
    assert w.status("rd", "mine")["access"]["permission_mode"] == "acceptEdits"
    assert w.status("rd", "theirs")["access"]["permission_mode"] == "plan"
    assert w.status("rd", "theirs")["access"]["allowed_tools"] == ["Read"]


@pytest.mark.parametrize(
    ("option", "value", "choices"),
    [
        ("--sandbox", "open", "'read-only', 'workspace-write', 'danger-full-access'"),
        ("--permission-mode", "yolo", "'acceptEdits', 'auto', 'bypassPermissions'"),
    ],
)
def test_unknown_access_values_are_usage_errors_naming_the_choices(
    w: Workers, tmp_path: Path, option: str, value: str, choices: str
) -> None:
    r = w.run("dispatch", "a", "u", "--adapter", "codex", "--prompt", "hi", option, value)
    assert r.returncode == 2 and choices in r.stderr, r.stderr
    m = manifest(tmp_path / "m.json", [{"id": "u", "prompt": "x"}], adapter="codex")
    r = w.run("run", str(m), option, value)
    assert r.returncode == 2 and choices in r.stderr, r.stderr
    r = w.run("dispatch", "a", "u", "--adapter", "claude", "--prompt", "hi", "--allowed-tools", " , ")
    assert r.returncode == 2 and "--allowed-tools names no tool" in r.stderr, r.stderr
    assert not (w.root / ".wf" / "runs" / "a").exists()


def test_access_a_tool_cannot_honour_is_refused_on_dispatch_too(w: Workers) -> None:
    """The same check as a manifest's keys: read-only asked of claude with a permission
    mode that contradicts plan mode is refused before anything runs."""
    r = w.run("dispatch", "a", "u", "--adapter", "claude", "--prompt", "hi", "--sandbox", "read-only",
              "--permission-mode", "dontAsk")  # fmt: skip
    assert r.returncode == 1 and "permission_mode dontAsk contradicts it" in r.stderr, r.stderr
    assert runs_of_tool(w) == []


# ------------------------------------------------------------------ the model


def test_a_unit_with_no_model_gets_the_fanout_default(w: Workers, tmp_path: Path) -> None:
    r = w.run("dispatch", "m", "plain", "--adapter", "claude", "--prompt", "hi")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--model=sonnet" in runs_of_tool(w)[-1]
    st = w.status("m", "plain")
    assert (st["model_asked"], st["model_source"]) == ("sonnet", "default")
    r = w.run("dispatch", "m", "cx", "--adapter", "codex", "--prompt", "hi")  # codex: its own default
    assert "-m" not in runs_of_tool(w)[-1] and w.status("m", "cx")["model_source"] == "default"
    assert w.status("m", "cx")["model_asked"] is None


def test_model_sources_explicit_manifest_config(w: Workers, tmp_path: Path) -> None:
    """The unit's own model and --model are explicit; the manifest's defaults are
    manifest; wf.toml [fanout] models is config; an expensive model is allowed for the
    first two (the manifest names it), and the command line beats the manifest's defaults."""
    (w.root / "wf.toml").write_text('[fanout]\nmodels = {claude = "haiku"}\n')
    m = manifest(tmp_path / "m.json", [{"id": "own", "prompt": "x", "model": "opus"}, {"id": "dflt", "prompt": "y"}],
                 adapter="claude", model="claude-opus-4-1")  # fmt: skip
    r = w.run("run", str(m), "--run", "s1")
    assert r.returncode == 0, r.stdout + r.stderr
    asked = {
        u: (w.status("s1", u)["model_asked"], w.status("s1", u)["model_source"]) for u in ("own", "dflt")
    }
    assert asked == {"own": ("opus", "explicit"), "dflt": ("claude-opus-4-1", "manifest")}
    r = w.run("run", str(m), "--run", "s2", "--model", "sonnet")
    asked = {
        u: (w.status("s2", u)["model_asked"], w.status("s2", u)["model_source"]) for u in ("own", "dflt")
    }
    assert asked == {"own": ("opus", "explicit"), "dflt": ("sonnet", "explicit")}, r.stderr
    m2 = manifest(tmp_path / "m2.json", [{"id": "bare", "prompt": "CRASH"}], adapter="claude")
    r = w.run("run", str(m2), "--run", "s3")
    st = w.status("s3", "bare")
    assert (st["model_asked"], st["model_source"]) == ("haiku", "config"), r.stderr
    assert "--model=haiku" in runs_of_tool(w)[-1]
    r = w.run("dispatch", "s4", "big", "--adapter", "claude", "--model", "opus", "--prompt", "hi")
    assert r.returncode == 0 and w.status("s4", "big")["model_source"] == "explicit", r.stderr
    r = w.run(
        "runs", "retry", "s3", "bare"
    )  # it failed; a retry asks for the same model, for the same reason
    st = w.status("s3", "bare-r1")
    assert (st["model_asked"], st["model_source"]) == ("haiku", "config"), r.stdout + r.stderr


@pytest.mark.parametrize(
    ("toml", "env", "words"),
    [
        ('[fanout]\nmodels = {claude = "opus"}\n', {}, "opus (wf.toml [fanout] models) is an expensive model ('opus' in wf's list)"),
        ('[fanout]\nmodels = {claude = "claude-fable-5-2"}\n', {}, "('fable' in wf's list)"),
        ('[fanout]\nexpensive = ["sonnet"]\n', {}, "sonnet (wf's fan-out default) is an expensive model ('sonnet' in wf.toml [fanout] expensive)"),
        ('[fanout]\nmodels = {claude = "claude-nova-1"}\n', {"CLAUDECODE": "1", "ANTHROPIC_MODEL": "claude-nova-1"},
         "is the model of the Claude Code session running wf (ANTHROPIC_MODEL=claude-nova-1)"),
    ],
)  # fmt: skip
def test_an_expensive_default_model_is_refused_unless_named(
    w: Workers, tmp_path: Path, toml: str, env: dict[str, Any], words: str
) -> None:
    (w.root / "wf.toml").write_text(toml)
    r = w.run("dispatch", "x", "u", "--adapter", "claude", "--prompt", "hi", **env)
    assert r.returncode == 1 and words in r.stderr and "--model" in r.stderr, r.stdout + r.stderr
    assert runs_of_tool(w) == [] and not (w.root / ".wf" / "runs" / "x" / "u").exists()
    m = manifest(tmp_path / "m.json", [{"id": "u", "prompt": "x"}], adapter="claude")
    r = w.run("run", str(m), "--run", "y", **env)
    assert r.returncode == 1 and words in r.stderr, r.stdout + r.stderr
    named = next((x for x in ("opus", "claude-fable-5-2", "claude-nova-1") if x in toml), "sonnet")
    r = w.run("dispatch", "x", "v", "--adapter", "claude", "--model", named, "--prompt", "hi", **env)
    assert r.returncode == 0 and w.status("x", "v")["model_source"] == "explicit", r.stdout + r.stderr


def test_the_expensive_list_can_be_emptied_and_a_session_model_outside_claude_is_not_one(
    w: Workers,
) -> None:
    (w.root / "wf.toml").write_text('[fanout]\nmodels = {claude = "opus"}\nexpensive = []\n')
    r = w.run("dispatch", "x", "u", "--adapter", "claude", "--prompt", "hi")
    assert r.returncode == 0 and w.status("x", "u")["model_source"] == "config", r.stderr
    (w.root / "wf.toml").write_text("")
    r = w.run("dispatch", "x", "v", "--adapter", "claude", "--prompt", "hi", ANTHROPIC_MODEL="sonnet")
    assert r.returncode == 0, r.stderr  # not inside Claude Code: no session whose model to spare
    # a session on a cheap model spares nothing by keeping units off it: sonnet stays the default
    r = w.run("dispatch", "x", "s", "--adapter", "claude", "--prompt", "hi", CLAUDECODE="1",
              ANTHROPIC_MODEL="claude-sonnet-4-6")  # fmt: skip
    assert r.returncode == 0 and w.status("x", "s")["model_source"] == "default", r.stderr


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ('[fanout]\nmodels = {gemini = "x"}\n', "fanout.models must map adapters to model names"),
        ('[fanout]\nexpensive = "opus"\n', "fanout.expensive must be a list of model names"),
    ],
)
def test_bad_fanout_settings_are_refused_by_name(w: Workers, toml: str, words: str) -> None:
    (w.root / "wf.toml").write_text(toml)
    r = w.run("dispatch", "x", "u", "--adapter", "claude", "--prompt", "hi")
    assert r.returncode == 1 and words in r.stderr, r.stderr


def test_wf_config_sets_fanout_models(w: Workers) -> None:
    r = w.run("config", "fanout.models", '{claude = "haiku"}')
    assert r.returncode == 0, r.stderr
    w.run("dispatch", "x", "u", "--adapter", "claude", "--prompt", "hi")
    assert w.status("x", "u")["model_asked"] == "haiku"


# ------------------------------------------------------------------ the real tools


def main_requests(api: ModelApi) -> list[Request]:
    return [q for q in api.requests if q.path.startswith("/v1/messages") and "Bash" in q.tool_names]


@pytest.mark.real
@needs_real
@pytest.mark.timeout(240)
@pytest.mark.parametrize("named", [None, "opus"])
def test_real_claude_asks_the_api_for_the_cheap_default(w: Workers, named: str | None) -> None:
    """The real claude, ANTHROPIC_MODEL=opus in its environment (its own default would
    then be opus): a unit that names no model asks the API for sonnet; one that names
    opus gets it."""
    with ModelApi([Text("done")]) as api:
        env = {**real_env(api), "ANTHROPIC_MODEL": "opus"}
        extra = ["--model", named] if named else []
        r = subprocess.run([sys.executable, "-m", "wf", "dispatch", "rc", "u", "--adapter", "claude", "--prompt",
                            "Say done.", *extra], cwd=w.root, env=env, capture_output=True, text=True, timeout=200,
                           stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    asked = {q.body.get("model") for q in main_requests(api)}
    assert asked and all(("opus" if named else "sonnet") in str(m) for m in asked), asked
    st = w.status("rc", "u")
    assert st["model_source"] == ("explicit" if named else "default")


def writer(request: Request) -> Step:
    """A worker that writes a file with a Bash command claude's acceptEdits does not
    allow by itself (a python3 -c, not an edit), then answers."""
    code = "open('made.txt','w').write('made')"
    calls: list[Step] = [
        ToolUse("Bash", {"command": f'python3 -c "{code}"', "description": "write"}),
        Text("done"),
    ]
    return calls[min(request.step, len(calls) - 1)]


@pytest.mark.real
@needs_real
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("options", "made"),
    [
        ([], False),
        (["--allowed-tools", "Bash(python3:*)"], True),
        (["--permission-mode", "bypassPermissions"], True),
        (["--allowed-tools", "Bash(python3:*)", "--sandbox", "read-only"], False),
    ],
)
def test_real_claude_writes_what_the_access_options_allow(w: Workers, options: list[str], made: bool) -> None:
    """The real claude decides: the default (acceptEdits, no Bash) denies the command and
    records the denial; --allowed-tools or --permission-mode bypassPermissions let it
    run; read-only (plan mode) refuses it whatever the grants."""
    with ModelApi(writer) as api:
        env = {**real_env(api), "IS_SANDBOX": "1"}
        r = subprocess.run([sys.executable, "-m", "wf", "dispatch", "ra", "u", "--adapter", "claude", "--prompt",
                            "Write made.txt.", *options], cwd=w.root, env=env, capture_output=True, text=True,
                           timeout=250, stdin=subprocess.DEVNULL)  # fmt: skip
    assert api.outside == [], api.outside
    st = w.status("ra", "u")
    scratch = w.unit("ra", "u") / "scratch"
    assert (scratch / "made.txt").exists() == made, r.stdout + r.stderr
    assert st["state"] == "done", r.stdout + r.stderr
    assert bool(st.get("denied")) == (not made), st.get("denied")
    if "--permission-mode" in options:
        assert st["access"]["permission_mode"] == "bypassPermissions"


def codex_home(api: ModelApi) -> None:
    """The real codex's config: the scripted server as its model provider, no retries."""
    home = Path(os.environ["CODEX_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model_provider = "scripted"\nmodel = "gpt-5.5"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{api.url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )


def touch_then_done(request: Request) -> Step:
    return (
        ToolUse("exec_command", {"cmd": "touch made.txt"}, id="call_1") if request.step == 0 else Text("done")
    )


@pytest.mark.real
@needs_real
@pytest.mark.timeout(240)
@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write"])
def test_real_codex_runs_in_the_sandbox_dispatch_names(w: Workers, sandbox: str) -> None:
    if not (Path(REAL_BIN) / "codex").exists():
        pytest.skip(f"codex is not in WF_REAL_TOOLS ({REAL_BIN})")
    with ModelApi(touch_then_done) as api:
        codex_home(api)
        env = {**real_env(api), "OPENAI_API_KEY": "x", "CODEX_HOME": os.environ["CODEX_HOME"]}
        r = subprocess.run([sys.executable, "-m", "wf", "dispatch", "rx", "u", "--adapter", "codex", "--prompt",
                            "Make made.txt.", "--sandbox", sandbox], cwd=w.root, env=env, capture_output=True,
                           text=True, timeout=200, stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("rx", "u")
    assert st["access"]["sandbox"] == sandbox
    assert (w.unit("rx", "u") / "scratch" / "made.txt").exists() == (sandbox == "workspace-write")
    [output] = api.requests[1].blocks("function_call_output")
    assert ("Read-only file system" in output["output"]) == (sandbox == "read-only")
