"""Failure classes, progress-based stalls, preflight, tool access and opencode cost,
through the CLI against the fakes (which replay or imitate the real tools' recordings)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.workers.test_workers import FAKES, Workers
from wf import adapters
from wf.adapters import Failure


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    return Workers(wf.root, tmp_path)


def test_claude_not_logged_in_prints_the_reason_and_exits_4(w: Workers) -> None:
    r = w.run("dispatch", "r1", "a1", "--adapter", "claude", "--model", "sonnet", "--prompt", "hi",
              FAKE_LOGGED_OUT="1")  # fmt: skip
    assert r.returncode == 4, r.stderr
    assert "failed auth: Not logged in · Please run /login" in r.stdout
    st = w.status("r1", "a1")
    assert (st["failure"], st["reason"]) == ("auth", "Not logged in · Please run /login")
    assert st["error"] == "Not logged in · Please run /login"
    assert st["model"] == "sonnet"  # never <synthetic>


def test_claude_offline_is_network(w: Workers) -> None:
    r = w.run("dispatch", "r1", "n1", "--adapter", "claude", "--prompt", "OFFLINE")
    assert r.returncode == 4
    st = w.status("r1", "n1")
    assert st["failure"] == "network" and "Can't reach the API server" in st["reason"]


def test_codex_reconnect_then_answer_is_done(w: Workers) -> None:
    r = w.run("dispatch", "r1", "c1", "--adapter", "codex", "--prompt", "RECONNECT please")
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("r1", "c1")
    assert (st["state"], st["failure"], st["reason"], st["error"]) == ("done", None, None, None)
    assert "Reconnecting... 2/5" in (w.unit("r1", "c1") / "worker.log").read_text()


def test_codex_offline_retries_stall_as_network(w: Workers) -> None:
    """Retry notices keep the log growing; the unit still stalls, since nothing progressed."""
    r = w.run("dispatch", "r1", "o1", "--adapter", "codex", "--stall", "1.5", "--timeout", "30",
              "--prompt", "OFFLINE")  # fmt: skip
    assert r.returncode == 4
    st = w.status("r1", "o1")
    assert st["state"] == "stalled", st
    assert st["failure"] == "network"
    assert st["reason"].startswith("Reconnecting... waiting for network")
    assert "stalled network: Reconnecting... waiting for network" in r.stdout


def test_claude_api_retries_are_not_progress(w: Workers) -> None:
    r = w.run("dispatch", "r1", "p1", "--adapter", "claude", "--stall", "1.5", "--timeout", "30",
              "--prompt", "RETRYING")  # fmt: skip
    assert r.returncode == 4
    st = w.status("r1", "p1")
    assert st["state"] == "stalled" and st["failure"] == "network"


def test_model_events_are_progress(w: Workers) -> None:
    r = w.run("dispatch", "r1", "s1", "--adapter", "codex", "--stall", "1", "--prompt", "SLEEP 2.5")
    assert r.returncode == 0, r.stdout
    assert w.status("r1", "s1")["state"] == "done"


def test_hang_is_a_stall(w: Workers) -> None:
    r = w.run(
        "dispatch", "r1", "h1", "--adapter", "opencode", "--model", "a/b", "--stall", "1", "--prompt", "HANG"
    )
    assert r.returncode == 4
    st = w.status("r1", "h1")
    assert (st["state"], st["failure"], st["reason"]) == ("stalled", "stall", "no model event for 1s")


def test_timeout_class_and_default_timeout(w: Workers) -> None:
    r = w.run("dispatch", "r1", "t1", "--adapter", "codex", "--timeout", "1", "--prompt", "FOREVER")
    assert r.returncode == 4
    assert w.status("r1", "t1")["failure"] == "timeout"
    w.run("dispatch", "r1", "t2", "--adapter", "codex", "--prompt", "x")
    assert w.status("r1", "t2")["timeout_s"] == adapters.get("codex").default_timeout > 0


def test_unknown_sessions_are_tool_failures(w: Workers) -> None:
    assert (
        w.run("dispatch", "r1", "o1", "--adapter", "opencode", "--model", "a/b", "--prompt", "x").returncode
        == 0
    )
    # the opencode store holds the session now: a follow-up resumes it
    assert w.run("dispatch", "r1", "o2", "--resume-from", "o1", "--prompt", "more").returncode == 0
    db = Path(w.env["HOME"]) / ".local/share/opencode/opencode.db"
    db.unlink()
    r = w.run("dispatch", "r1", "o3", "--resume-from", "o1", "--prompt", "more")
    assert r.returncode == 4
    st = w.status("r1", "o3")
    assert (st["failure"], st["reason"]) == ("tool", "Error: Session not found")


def test_opencode_bad_model_through_the_fake_is_model(tmp_path: Path) -> None:
    """wf refuses such a model before it starts; a tool that gets one anyway (the fake,
    as the real 1.18.33 does) fails with an opaque error and the real one in its log."""
    import subprocess

    spec = adapters.Spec("r", "u", tmp_path, tmp_path, "x", model="sonnet")
    a = adapters.get("opencode")
    argv = [str(FAKES / "opencode"), *a.argv(spec)[1:]]
    p = subprocess.run(argv, input="x", capture_output=True, text=True, timeout=30, cwd=tmp_path)
    parsed = adapters.Parsed()
    for line in p.stdout.splitlines():
        event = adapters.parse_line(line)
        if event is not None:
            a.feed(parsed, event)
    assert a.classify(parsed, p.returncode, p.stdout, p.stderr) == (
        Failure.model,
        "ProviderModelNotFoundError: Model not found: sonnet/.",
    )


def test_cmd_that_cannot_start_or_import_is_tool(w: Workers, tmp_path: Path) -> None:
    r = w.run("dispatch", "r1", "x1", "--adapter", "cmd", "--cmd", "no-such-program-wf", "--prompt", "x")
    assert r.returncode == 4
    assert w.status("r1", "x1")["failure"] == "tool"
    script = tmp_path / "job.py"
    script.write_text("import no_such_module_wf\n")
    r = w.run(
        "dispatch", "r1", "x2", "--adapter", "cmd", "--cmd", f"{sys.executable} {script}", "--prompt", "x"
    )
    st = w.status("r1", "x2")
    assert (st["failure"], st["reason"]) == (
        "tool",
        "ModuleNotFoundError: No module named 'no_such_module_wf'",
    )
    assert "failed tool: ModuleNotFoundError" in r.stdout
    r = w.run("dispatch", "r1", "x3", "--adapter", "cmd", "--cmd", "sh -c 'exit 127'", "--prompt", "x")
    assert w.status("r1", "x3")["failure"] == "tool"
    r = w.run(
        "dispatch", "r1", "x4", "--adapter", "cmd", "--cmd", "sh -c 'echo no >&2; exit 1'", "--prompt", "x"
    )
    assert (w.status("r1", "x4")["failure"], w.status("r1", "x4")["reason"]) == ("task", "no")


def test_claude_task_error_is_task(w: Workers) -> None:
    w.run("dispatch", "r1", "e1", "--adapter", "claude", "--prompt", "ERROR")
    st = w.status("r1", "e1")
    assert (st["failure"], st["reason"]) == ("task", "fake error during execution")


def test_done_units_have_null_failure_and_their_access(w: Workers) -> None:
    assert w.run("dispatch", "r1", "d1", "--adapter", "claude", "--prompt", "x").returncode == 0
    st = w.status("r1", "d1")
    assert st["failure"] is None and st["reason"] is None
    assert st["access"] == {"permission_mode": "acceptEdits", "allowed_tools": [], "sandbox": "workspace-write",
                            "network": False, "isolate_mcp": False, "extra_args": []}  # fmt: skip


def test_manifest_tool_access_reaches_argv_and_status(w: Workers, tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    m.write_text(
        '{"units": [{"id": "ro", "adapter": "codex", "prompt": "x", "sandbox": "read-only", "isolate_mcp": true},'
        ' {"id": "web", "adapter": "claude", "prompt": "x", "network": true, "allowed_tools": ["Bash"]}]}'
    )
    r = w.run("run", str(m), "--run", "acc")
    assert r.returncode == 0, r.stdout + r.stderr
    calls = {c[0].rsplit("/", 1)[-1]: c for c in w.argv_calls()}
    assert (
        calls["codex"][calls["codex"].index("-s") + 1] == "read-only"
        and "--ignore-user-config" in calls["codex"]
    )
    assert "--allowedTools=Bash,WebFetch,WebSearch" in calls["claude"]
    assert w.status("acc", "ro")["access"]["sandbox"] == "read-only"
    assert w.status("acc", "web")["access"]["network"] is True
    m.write_text('{"units": [{"id": "bad", "adapter": "codex", "prompt": "x", "sandbox": "none"}]}')
    r = w.run("run", str(m), "--run", "acc2")
    assert r.returncode == 1 and "sandbox must be one of" in r.stderr


def test_opencode_units_get_a_cost_line(w: Workers) -> None:
    r = w.run(
        "dispatch",
        "r1",
        "oc",
        "--adapter",
        "opencode",
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("r1", "oc")
    assert st["cost"]["kind"] == "opencode" and st["cost"]["model"] == "anthropic/claude-sonnet-4-5"
    assert st["cost"]["usd"] > 0 and st["cost_check"] == "agrees"


# ---------------------------------------------------------------- preflight, check, doctor


@pytest.fixture
def fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


def test_preflight(fakes_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert adapters.preflight("claude", "sonnet", "high") == []
    assert adapters.preflight("codex", "gpt-5.5", None) == []
    monkeypatch.setenv("FAKE_LOGGED_OUT", "1")
    monkeypatch.setenv("CODEX_HOME", os.environ["CODEX_HOME"] + "-2")  # another login: asked again
    [p] = adapters.preflight("codex", "gpt-5.5", None)
    assert p.failure is Failure.auth and p.failure.infrastructure and "codex login" in p.fix
    assert "Not logged in" in p.message
    probs = adapters.preflight("codex", "sonnet", "max")
    assert [x.failure for x in probs] == [Failure.model, Failure.model, Failure.auth]
    assert [x.failure for x in adapters.preflight("opencode", None, None)] == [Failure.model]
    assert [x.failure for x in adapters.preflight("opencode", "anthropic/claude-sonnet-4-5", None)] == [
        Failure.auth
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    assert adapters.preflight("opencode", "anthropic/claude-sonnet-4-5", None) == []
    [p] = adapters.preflight("cmd", None, None, cmd=("no-such-program-wf",))
    assert p.failure is Failure.tool
    assert adapters.preflight("cmd", None, None, cmd=(sys.executable,)) == []
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    [p] = adapters.preflight("claude", "sonnet", None)
    assert p.failure is Failure.tool and "not installed" in p.message


def test_check_reports_a_lane_whose_model_does_not_fit(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text('[lanes.fast]\nmodel = "sonnet"\nadapter = "codex"\n')
    r = wf("check")
    assert r.code == 1
    assert "wf.toml: error: lanes.fast: 'sonnet' is not a codex (OpenAI) model name" in r.out
    (wf.root / "wf.toml").write_text(
        '[lanes.fast]\nmodel = "sonnet"\nadapter = "codex"\nmodels = {codex = "gpt-5.3-codex"}\n'
    )
    assert "lanes.fast" not in wf("check").out


def test_doctor_reports_login_lanes_and_limits(
    wf: WfRunner, fakes_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (wf.root / "wf.toml").write_text(
        '[lanes.fast]\nmodel = "sonnet"\nadapter = "codex"\n[lanes.s]\nmodel = "sonnet"\n'
    )
    monkeypatch.setenv("FAKE_LOGGED_OUT", "1")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.environ["CLAUDE_CONFIG_DIR"] + "-doctor")
    r = wf("doctor")
    assert "lane: fast: 'sonnet' is not a codex (OpenAI) model name" in r.out
    assert "login: claude: not logged in: run `claude` once and /login" in r.out
    assert "adapter: claude: 2.1.332 (Claude Code) at " in r.out and "(stall 720s, timeout 7200s)" in r.out
    assert r.code == 1


def test_doctor_finds_a_flag_missing_from_a_subcommand_help(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A codex whose `exec resume --help` lacks -o is reported, though `exec --help` lists
    it and the resume help has a longer option that contains it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$2" = resume ]; then echo "  --json  -m, --model  -c, --config  --skip-git-repo-check"; '
        'echo "  --output-last-message <F>  -oo"; exit 0; fi\n'
        f'exec {FAKES / "codex"} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{FAKES}{os.pathsep}{os.environ['PATH']}")
    r = wf("doctor")
    assert "`codex exec resume --help` lacks -o;" in r.out
    assert "`codex exec --help` lacks" not in r.out


def test_dispatch_refuses_a_model_or_effort_the_tool_does_not_take(w: Workers) -> None:
    r = w.run("dispatch", "r1", "m1", "--adapter", "opencode", "--prompt", "x")
    assert r.returncode == 1 and "opencode needs a provider/model" in r.stderr
    r = w.run("dispatch", "r1", "m2", "--adapter", "codex", "--model", "sonnet", "--prompt", "x")
    assert r.returncode == 1 and "'sonnet' is not a codex (OpenAI) model name" in r.stderr
    r = w.run("dispatch", "r1", "m3", "--adapter", "claude", "--effort", "bogus", "--prompt", "x")
    assert r.returncode == 1 and "effort 'bogus' is not one of claude's" in r.stderr
    r = w.run("dispatch", "r1", "m4", "--adapter", "claude", "--model", "<synthetic>", "--prompt", "x")
    assert r.returncode == 1 and "placeholder" in r.stderr
    assert w.argv_calls() == []  # nothing started


# ---------------------------------------------------------------- every class, on every line

# unit id -> (its manifest entry, the failure class, the head of its line)
EVERY_CLASS: dict[str, tuple[dict[str, object], str, str]] = {
    "au": ({"adapter": "claude", "prompt": "NOLOGIN"}, "auth", "failed auth: Not logged in · Please run /login"),
    "qu": ({"adapter": "claude", "prompt": "APIERROR billing_error"}, "quota",
           "failed quota: Credit balance is too low"),
    "pl": ({"adapter": "claude", "prompt": "APIERROR plan_limit"}, "usage_limit",
           "failed usage_limit: You've hit your session limit"),
    "ov": ({"adapter": "claude", "prompt": "APIERROR overloaded"}, "overloaded",
           "failed overloaded: API Error: Repeated 529 Overloaded errors"),
    "ra": ({"adapter": "claude", "prompt": "APIERROR rate_limit"}, "rate_limit",
           "failed rate_limit: API Error: Request rejected (429)"),
    "ne": ({"adapter": "claude", "prompt": "OFFLINE"}, "network", "failed network: API Error: Can't reach"),
    "mo": ({"adapter": "claude", "prompt": "APIERROR model_not_found"}, "model",
           "failed model: There's an issue with the selected model"),
    "to": ({"adapter": "cmd", "cmd": ["no-such-program-wf"], "prompt": "x"}, "tool",
           "failed tool: cannot start no-such-program-wf"),
    "ta": ({"adapter": "claude", "prompt": "ERROR"}, "task", "failed task: fake error during execution"),
    "de": ({"adapter": "claude", "prompt": "DENIED ERROR"}, "denied",
           "failed denied: fake error during execution (claude denied Bash `git commit -qm work`)"),
    "st": ({"adapter": "opencode", "model": "a/b", "stall": 1, "prompt": "HANG"}, "stall",
           "stalled: no model event for 1s"),
    "ti": ({"adapter": "codex", "timeout": 1, "prompt": "FOREVER"}, "timeout", "timeout: still running after 1s"),
}  # fmt: skip


def test_every_failure_class_is_in_status_json_and_on_every_line(w: Workers, tmp_path: Path) -> None:
    """The class and the tool's own words in status.json, on wf run's line as each unit
    ends, in wf runs status and in wf monitor."""
    import json

    assert {c for _, c, _ in EVERY_CLASS.values()} == {f.value for f in Failure}
    units = [{"id": uid, **entry} for uid, (entry, _, _) in EVERY_CLASS.items()]
    m = tmp_path / "every.json"
    m.write_text(json.dumps({"units": units}))
    r = w.run("run", str(m), "--run", "ev", "--max-parallel", str(len(units)), timeout=120)
    assert r.returncode == 4, r.stdout + r.stderr
    status = w.run("runs", "status", "ev")
    monitor = w.run("monitor", "ev", "--timeout", "5")
    assert monitor.returncode == 4
    for uid, (_, failure, head) in EVERY_CLASS.items():
        st = w.status("ev", uid)
        assert st["failure"] == failure and st["reason"], (uid, st)
        for out in (r.stdout, status.stdout, monitor.stdout):
            assert f"\n{uid}: {head}" in f"\n{out}", (uid, out)


@pytest.mark.parametrize("error", ["billing_error", "rate_limit", "model_not_found", "invalid_api_key"])
def test_dispatch_prints_each_api_error_class_and_exits_4(w: Workers, error: str) -> None:
    r = w.run(
        "dispatch", "r1", "e", "--adapter", "claude", "--model", "sonnet", "--prompt", f"APIERROR {error}"
    )
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "e")
    want = {"billing_error": "quota", "rate_limit": "rate_limit", "model_not_found": "model",
            "invalid_api_key": "auth"}[error]  # fmt: skip
    assert st["failure"] == want and r.stdout.startswith(f"e: failed {want}: {st['reason']}")
    assert st["model"] not in (None, "<synthetic>")


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        ("invalid_api_key", "auth"),  # the key went bad after the preflight passed
        ("billing_error", "quota"),
        ("rate_limit", "rate_limit"),
        ("model_not_found", "model"),
    ],
)
def test_orch_run_stops_the_lane_with_the_class_and_releases_the_task(
    wf: WfRunner, w: Workers, error: str, failure: str
) -> None:
    import subprocess

    (wf.root / "TASKS.md").write_text("# Tasks\n\n## c1: A claude task\nModel: sonnet\nDone: true\n")
    subprocess.run(["git", "add", "-A"], cwd=wf.root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=wf.root, check=True)
    before = (wf.root / "TASKS.md").read_bytes()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wf.root, capture_output=True, text=True).stdout
    r = w.run("orch", "run", "sonnet", timeout=120, FAKE_API_ERROR=error)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"stop lane sonnet: claude could not run ({failure}): " in r.stdout, r.stdout
    assert "c1: released" in r.stdout
    assert (wf.root / "TASKS.md").read_bytes() == before
    after = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wf.root, capture_output=True, text=True).stdout
    assert after == head  # no commit on main for a failure that is not the task's


def test_orch_run_adapter_passes_the_lanes_model_for_that_tool(wf: WfRunner, w: Workers) -> None:
    import subprocess

    toml = (wf.root / "wf.toml").read_text()
    (wf.root / "wf.toml").write_text(
        toml.replace(
            '[lanes.sonnet]\nmodel = "sonnet"',
            '[lanes.sonnet]\nmodel = "sonnet"\nmodels = {codex = "gpt-5.3-codex"}',
        )
    )
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## c1: A task\nModel: sonnet\nDone: true\n")
    subprocess.run(["git", "add", "-A"], cwd=wf.root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=wf.root, check=True)
    w.run("orch", "run", "sonnet", "--adapter", "codex", timeout=120)
    [call] = [c for c in w.argv_calls() if c[1:2] == ["exec"]]
    assert call[call.index("-m") + 1] == "gpt-5.3-codex"


def test_a_resume_never_passes_a_placeholder_model(w: Workers) -> None:
    """A record an older wf wrote with model <synthetic>: the follow-up asks no such
    placeholder, but the fan-out default (a unit with no model never gets the tool's own)."""
    import json

    assert w.run("dispatch", "r1", "a", "--adapter", "claude", "--prompt", "hi").returncode == 0
    path = w.unit("r1", "a") / "status.json"
    old = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("model_asked", "model_source")}
    path.write_text(json.dumps({**old, "model": "<synthetic>"}))
    r = w.run("dispatch", "r1", "b", "--resume-from", "a", "--prompt", "more")
    assert r.returncode == 0, r.stdout + r.stderr
    resumed = [c for c in w.argv_calls() if "--resume" in c]
    assert resumed and [a for a in resumed[0] if a.startswith("--model")] == ["--model=sonnet"], resumed
    assert w.status("r1", "b")["model"] != "<synthetic>"


def test_config_shows_a_lanes_models_as_the_table_it_is(wf: WfRunner) -> None:
    import json

    wf.ok("config", "lanes.sonnet.models", '{claude = "sonnet", codex = "gpt-5.3-codex"}')
    assert (
        wf.ok("config", "lanes.sonnet.models")
        == 'lanes.sonnet.models = {claude = "sonnet", codex = "gpt-5.3-codex"}\n'
    )
    assert json.loads(wf.ok("config", "--json", "lanes.sonnet.models")) == {
        "claude": "sonnet",
        "codex": "gpt-5.3-codex",
    }
    assert "# lanes.haiku.models: not set" in wf.ok("config")


def test_doctor_probes_the_login_of_a_tool_no_lane_uses(
    wf: WfRunner, fakes_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LOGGED_OUT", "1")
    monkeypatch.setenv("CODEX_HOME", os.environ["CODEX_HOME"] + "-unused")
    out = wf("doctor").out
    assert "login: codex: not logged in (Not logged in): run `codex login`" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("login: codex:")).endswith("(info)")


def test_a_lanes_stall_and_timeout_reach_its_workers(wf: WfRunner, w: Workers) -> None:
    import json
    import subprocess

    toml = (wf.root / "wf.toml").read_text()
    (wf.root / "wf.toml").write_text(
        toml.replace(
            '[lanes.sonnet]\nmodel = "sonnet"', '[lanes.sonnet]\nmodel = "sonnet"\nstall = 33\ntimeout = 444'
        )
    )
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## c1: A task\nModel: sonnet\nDone: true\n")
    subprocess.run(["git", "add", "-A"], cwd=wf.root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=wf.root, check=True)
    w.run("orch", "run", "sonnet", timeout=120)
    [st] = [json.loads(p.read_text()) for p in (wf.root / ".wf" / "runs").glob("*/*/status.json")]
    assert (st["stall_s"], st["timeout_s"]) == (33.0, 444.0)
