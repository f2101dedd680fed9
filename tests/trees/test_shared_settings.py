"""The settings of a backlog shared between machines (wf.toml ``shared``, ``claim_refs``,
``claim_stale``, a lane's ``machine``), and the test harness of several machines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.machines import Shared

TASKS = "# Tasks\n\n## t1: One\nModel: sonnet\nDone: true\n"


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ('shared = "--upload-pack=evil"\n', "shared must name a git remote"),
        ('shared = "https://example.com/x.git"\n', "shared must name a git remote"),
        ('claim_refs = "refs/tags/x"\n', "claim_refs must be one of refs/wf/claims, refs/heads/wf-claims"),
        ('claim_stale = "soon"\n', "claim_stale 'soon': expected a duration"),
        ("claim_stale = -1\n", "claim_stale"),
        ('[lanes.a]\nmodel = "sonnet"\nmachine = "../x"\n', "lanes.a.machine must be a machine's name"),
    ],
)
def test_bad_shared_settings_are_refused_by_name(tmp_path: Path, toml: str, words: str) -> None:
    with Shared(tmp_path) as remote:
        a = remote.seed("a", TASKS, toml=toml)
        r = a.wf("list")
    assert r.returncode != 0 and words in r.stderr, r.stdout + r.stderr


def test_good_shared_settings_read_back(tmp_path: Path) -> None:
    toml = (
        'shared = "origin"\nclaim_refs = "refs/heads/wf-claims"\nclaim_stale = "2h"\n'
        '[lanes.a]\nmodel = "sonnet"\nmachine = "build-box"\n'
    )
    with Shared(tmp_path) as remote:
        a = remote.seed("a", TASKS, toml=toml)
        assert a.wf("config", "shared").stdout == 'shared = "origin"\n'
        assert "7200" in a.wf("config", "claim_stale").stdout
        assert "build-box" in a.wf("config", "lanes.a.machine").stdout
        r = a.wf("config", "lanes.a.machine", "desk")
        assert r.returncode == 0, r.stderr


def test_the_harness_serves_a_remote_by_git_daemon_on_loopback(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as remote:
        assert remote.url.startswith("git://127.0.0.1:")
        a = remote.seed("a", TASKS)
        b = remote.machine("b")
        assert (b.root / "TASKS.md").read_text() == TASKS
        (b.root / "note.txt").write_text("from b\n")
        b.git("add", "note.txt")
        b.git("commit", "-qm", "b's note")
        b.git("push", "-q", "origin", "main")
        a.git("pull", "-q", "origin", "main")
        assert (a.root / "note.txt").read_text() == "from b\n"
        assert set(remote.refs()) == {"refs/heads/main"}
        remote.stop()
        r = subprocess.run(["git", "fetch", "origin"], cwd=a.root, env=a.env, capture_output=True, timeout=60)
        assert r.returncode != 0  # the network is gone
