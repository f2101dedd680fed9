"""The cloud lane against the real claude (no login, no network): run when WF_REAL_TOOLS
names the folder holding it. The recordings of tests/fixtures/real/claude-*/cloud/ must
still be what the installed binary says, and wf's real backend (wf.cloud.claude) must
read the real binary's refusals as what they are: not logged in, a dirty tree, offline,
no GitHub remote (that one before claude ever runs). Each case seeds its config the way
record.py did; the offline cases run claude under `unshare -n`."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from wf.cloud.backend import CloudRefused, Refusal
from wf.cloud.claude import ClaudeBackend

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
ROOT = Path(__file__).resolve().parent.parent.parent
REC = ROOT / "tests" / "fixtures" / "real" / "claude-2.1.332" / "cloud"
GITHUB = "https://github.com/example/app.git"


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wf_cloud_record", REC / "record.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RECORD = _recorder()


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


UNSHARE = _can_unshare()


def rec(name: str) -> dict[str, Any]:
    return dict(json.loads((REC / f"{name}.json").read_text()))


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder first on PATH whose `claude` is the real one, run without a network when
    this machine can (unshare -n), as the recordings were made."""
    real = shutil.which("claude", path=REAL_BIN)
    assert real is not None, f"no claude in {REAL_BIN}"
    d = tmp_path / "bin"
    d.mkdir()
    wrapper = d / "claude"
    prefix = "unshare -n " if UNSHARE else ""
    wrapper.write_text(f'#!/bin/sh\nexec {prefix}"{os.path.realpath(real)}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    for var in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    if UNSHARE:  # no network at all in its namespace: as recorded, without the sealed proxy
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
    return d


def config() -> Path:
    cfg = Path(os.environ["CLAUDE_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    return cfg


# ------------------------------------------------------------------ the recordings are current

PRINT = [
    "create-nopty",
    "create-print",
    "send-print-no-prompt",
    "teleport-print-dirty",
    "teleport-print-stream-json",
    "teleport-print-no-remote",
    "teleport-print-offline",
    "send-print-json-offline",
]


def _shape(text: str) -> list[dict[str, Any]] | str:
    events = [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]
    keys = ("type", "subtype", "is_error", "num_turns", "total_cost_usd", "errors")
    return [{k: e.get(k) for k in keys} for e in events] if events else text


@pytest.mark.parametrize("name", PRINT)
def test_the_real_claude_still_says_what_was_recorded(name: str, tmp_path: Path, bin_dir: Path) -> None:
    r = rec(name)
    if r["seed"] == "fake-login" and not UNSHARE:
        pytest.skip("offline cases need unshare -n")
    repo = RECORD.make_repo(tmp_path, r["repo"])
    RECORD.seed_config(config(), repo, r["seed"])
    p = subprocess.run(
        [str(bin_dir / "claude"), *r["argv"][1:]],
        cwd=repo,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (p.returncode, p.stderr) == (r["exit"], r["stderr"]), p.stdout[-400:]
    assert _shape(p.stdout) == _shape(r["stdout"])


# ------------------------------------------------------------------ the real backend on the real binary


def _repo(tmp_path: Path, kind: str, seed: str) -> Path:
    repo = RECORD.make_repo(tmp_path, kind)
    RECORD.seed_config(config(), repo, seed)
    return Path(repo)


def test_create_without_a_github_remote_is_refused_before_claude_runs(tmp_path: Path, bin_dir: Path) -> None:
    repo = _repo(tmp_path, "no-remote", "onboarded")
    (bin_dir / "claude").write_text('#!/bin/sh\necho ran >> "$0.ran"\nexit 1\n')  # would leave a trace
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().create(repo, "Fix the flaky test", "t")
    assert e.value.kind is Refusal.NO_GITHUB_REMOTE and "git remote add" in str(e.value)
    assert not (bin_dir / "claude.ran").exists()


@pytest.mark.timeout(120)
def test_create_not_logged_in_is_refused_with_the_real_words(tmp_path: Path, bin_dir: Path) -> None:
    repo = _repo(tmp_path, "github", "onboarded")
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().create(repo, "Fix the flaky test", "t")
    assert e.value.kind is Refusal.NOT_LOGGED_IN, str(e.value)
    assert "Cloud sessions need a claude.ai sign-in" in e.value.words and "claude auth login" in str(e.value)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not UNSHARE, reason="needs unshare -n")
def test_create_offline_is_refused_as_offline(tmp_path: Path, bin_dir: Path) -> None:
    repo = _repo(tmp_path, "github", "fake-login")
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().create(repo, "Fix the flaky test", "t")
    assert e.value.kind is Refusal.OFFLINE, str(e.value)


@pytest.mark.timeout(120)
def test_state_refuses_a_dirty_tree_then_not_logged_in(tmp_path: Path, bin_dir: Path) -> None:
    repo = _repo(tmp_path, "dirty", "fresh")
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().state(repo, RECORD.SID, repo)
    assert e.value.kind is Refusal.DIRTY_TREE and "uncommitted changes" in e.value.words
    git(repo, "checkout", "--", "README.md")
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().state(repo, RECORD.SID, repo)
    assert e.value.kind is Refusal.NOT_LOGGED_IN, str(e.value)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not UNSHARE, reason="needs unshare -n")
def test_state_offline_is_refused_as_offline(tmp_path: Path, bin_dir: Path) -> None:
    repo = _repo(tmp_path, "github", "fake-login")
    with pytest.raises(CloudRefused) as e:
        ClaudeBackend().state(repo, RECORD.SID, repo)
    assert e.value.kind is Refusal.OFFLINE, str(e.value)


# ------------------------------------------------------------------ wf cloud on the real binary


@pytest.mark.timeout(180)
def test_wf_cloud_send_and_pull_on_a_logged_out_claude_change_nothing(wf: WfRunner, bin_dir: Path) -> None:
    root = wf.root
    RECORD.seed_config(config(), root, "onboarded")
    git(root, "remote", "add", "origin", GITHUB)
    (root / "wf.toml").write_text('cloud = true\ncloud_budget = 5\n[lanes.opus]\nmodel = "opus"\n')
    (root / "TASKS.md").write_text("# Tasks\n\n## big: A big task\nModel: opus\nDone: true\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tasks")
    before = (root / "TASKS.md").read_bytes()
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return wfproc.run([sys.executable, "-m", "wf", *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=150, stdin=subprocess.DEVNULL)  # fmt: skip

    r = run("cloud", "send")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stop lane cloud: not logged in: Cloud sessions need a claude.ai sign-in" in r.stdout
    assert (root / "TASKS.md").read_bytes() == before  # the claim was released
    assert not list((root / ".wf" / "cloud").glob("*.json"))
    # a record of a running session (as a send that worked leaves it): its pull is refused
    from wf.base import project as projectmod
    from wf.base import records as store
    from wf.cloud import records
    from wf.cloud.backend import SessionState

    proj = projectmod.load(root)
    store.save(
        records.path(proj, "big"),
        records.CloudRecord(id="big", lane="opus", model="opus", branch="cloud/big", base=None,
                            started="2026-01-01T00:00:00Z", started_at=1.0, state=SessionState.RUNNING,
                            session=RECORD.SID),
    )  # fmt: skip
    r = run("cloud", "pull", "big")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith(f"big: cannot read session {RECORD.SID}: not logged in: "), r.stdout
    kept = records.load(proj, "big")
    assert kept is not None and kept.state is SessionState.RUNNING  # nothing was decided
    assert not list((root / ".worktrees").glob("_cloud-*"))  # its teleport tree was removed
