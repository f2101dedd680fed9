"""Conformance against the real claude, codex and opencode (no login, no network
needed): run when WF_REAL_TOOLS names the folder holding them (.ci/run installs the
pinned versions from npm and sets it). Each run has the sealed HOME of conftest."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.workers.test_workers import Workers
from wf import adapters
from wf.adapters import Failure, Parsed, Spec
from wf.doctor.checks import help_options

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
FIXTURES = Path(__file__).parent.parent / "fixtures" / "real"


@pytest.fixture(autouse=True)
def real_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", f"{REAL_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    Path(os.environ["CODEX_HOME"]).mkdir(parents=True, exist_ok=True)


def run(
    argv: list[str], cwd: Path, stdin: str = "", timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env} if env else None
    return subprocess.run(
        argv, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=timeout, env=full
    )


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_the_installed_version_was_recorded(tool: str, tmp_path: Path) -> None:
    out = run([tool, "--version"], tmp_path).stdout.split()
    version = out[1] if tool == "codex" else out[0]
    assert (FIXTURES / f"{tool}-{version}" / "manifest.json").is_file(), (
        f"{tool} {version} has no recordings: run scripts/record-real-tools"
    )


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_every_flag_wf_passes_is_in_the_real_help(tool: str, tmp_path: Path) -> None:
    for argv, flags in adapters.get(tool).help_probes:
        p = run(list(argv), tmp_path)
        listed = help_options(p.stdout + p.stderr)
        assert [f for f in flags if f not in listed] == [], argv


def test_login_probes_say_not_logged_in(tmp_path: Path) -> None:
    for tool in ("claude", "codex"):
        a = adapters.get(tool)
        p = run(list(a.login_argv), tmp_path)
        assert a.logged_in(p.returncode, p.stdout, p.stderr) is False, (tool, p.stdout, p.stderr)
        [problem] = adapters.preflight(tool, "sonnet" if tool == "claude" else "gpt-5.5", None)
        assert problem.failure is Failure.auth


def test_dispatch_claude_not_logged_in_exits_4_with_the_reason(wf: WfRunner, tmp_path: Path) -> None:
    w = Workers(wf.root, tmp_path)
    w.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])
    r = w.run(
        "dispatch", "r1", "a1", "--adapter", "claude", "--model", "sonnet", "--prompt", "Say ok.", timeout=120
    )
    assert r.returncode == 4, r.stdout + r.stderr
    assert "failed auth: Not logged in" in r.stdout
    st = w.status("r1", "a1")
    assert st["failure"] == "auth" and st["model"] != "<synthetic>"


def test_orch_run_on_a_real_logged_out_claude_lane_claims_nothing(wf: WfRunner, tmp_path: Path) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## c1: A claude task\nModel: sonnet\nDone: true\n")
    subprocess.run(["git", "add", "-A"], cwd=wf.root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=wf.root, check=True)
    before = (wf.root / "TASKS.md").read_bytes()
    head = subprocess.run(["git", "log", "--oneline"], cwd=wf.root, capture_output=True, text=True,
                          check=True).stdout.count("\n")  # fmt: skip
    w = Workers(wf.root, tmp_path)
    w.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])
    r = w.run("orch", "run", "sonnet", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nothing was claimed" in r.stderr and "claude is not logged in" in r.stderr
    assert "/login" in r.stderr
    assert (wf.root / "TASKS.md").read_bytes() == before
    assert subprocess.run(["git", "log", "--oneline"], cwd=wf.root, capture_output=True, text=True,
                          check=True).stdout.count("\n") == head  # fmt: skip
    assert subprocess.run(["git", "status", "--porcelain"], cwd=wf.root, capture_output=True, text=True,
                          check=True).stdout == ""  # fmt: skip


@pytest.mark.slow
def test_dispatch_real_codex_offline_stalls_as_network(wf: WfRunner, tmp_path: Path) -> None:
    """Offline, the real codex prints reconnect notices for ever: the log grows, nothing
    progresses, and the unit stalls with the tool's own words."""
    w = Workers(wf.root, tmp_path)
    w.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])
    w.env["OPENAI_API_KEY"] = "sk-wf-test-not-a-key"
    r = w.run("dispatch", "r1", "c1", "--adapter", "codex", "--model", "gpt-5.5", "--stall", "8",
              "--prompt", "Say ok.", timeout=120)  # fmt: skip
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "c1")
    assert (st["state"], st["failure"]) == ("stalled", "network"), st
    assert st["reason"].startswith("Reconnecting...") and "stalled network: Reconnecting..." in r.stdout
    assert (w.unit("r1", "c1") / "worker.log").read_text().count("Reconnecting") >= 2


def test_doctor_on_the_real_tools(wf: WfRunner) -> None:
    """Every flag wf passes is in the real subcommands' help; each tool's login is
    probed: claude (the default lanes use it) is a problem, codex worth knowing."""
    r = wf("doctor")
    assert "lacks" not in r.out, r.out
    for tool, version in (
        ("claude", "2.1.332 (Claude Code)"),
        ("codex", "codex-cli 0.171.0"),
        ("opencode", "1.18.33"),
    ):
        assert f"adapter: {tool}: {version} at " in r.out, r.out
    assert "login: claude: not logged in: run `claude` once and /login" in r.out
    assert (
        "login: codex: not logged in (Not logged in): run `codex login`" in r.out
        and r.out.count("(info)") >= 4
    )
    assert r.code == 1


def feed(tool: str, text: str) -> Parsed:
    parsed = Parsed()
    for line in text.splitlines():
        event = adapters.parse_line(line)
        if event is not None:
            adapters.get(tool).feed(parsed, event)
    return parsed


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_resuming_an_unknown_session_is_a_tool_failure(tool: str, tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    sid = "ses_000000000000wfUnknownSess" if tool == "opencode" else str(uuid.uuid4())
    spec = Spec("r", "u", tmp_path, work, "Say ok.", model="anthropic/claude-sonnet-4-5" if tool == "opencode" else None,
                session_id=sid, resume=True)  # fmt: skip
    a = adapters.get(tool)
    # opencode would first fetch models.dev (refused here: slow under load, then "network")
    quiet = {f"OPENCODE_DISABLE_{x}": "1" for x in ("MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "SHARE")}
    p = run(a.argv(spec), work, "Say ok.\n", timeout=150, env=quiet if tool == "opencode" else None)
    parsed = feed(tool, p.stdout)
    failure, reason = a.classify(parsed, p.returncode, p.stdout, p.stderr)
    assert p.returncode == 1 and failure is Failure.tool, (p.stdout[-500:], p.stderr[-500:])
    assert reason and ("found" in reason.lower()), reason


def test_real_codex_creates_its_o_file_empty_at_once(tmp_path: Path) -> None:
    """What the fake does too (tests/adapters/test_fakes_real.py): an empty -o file is no answer."""
    work = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    out = tmp_path / "out.txt"
    p = subprocess.Popen(["codex", "exec", "--json", "-o", str(out), "--skip-git-repo-check", "-C", str(work), "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env={**os.environ, "OPENAI_API_KEY": "sk-wf-test-not-a-key"})  # fmt: skip
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("Say ok.\n")
    p.stdin.close()
    try:
        first = [p.stdout.readline() for _ in range(3)]
        assert '"thread.started"' in first[0]
        assert out.exists() and out.read_text() == ""
    finally:
        p.kill()
        p.wait()
