"""``wf sync`` between machines (clones with their own state) around a bare repository
served by git daemon on loopback (and by file://): TASKS.md merged by task, the archive
and the cost log as unions, pushes that are leases, conflicts shown and never written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.machines import Machine, Shared, git

TASKS = (
    "# Tasks\n\nNotes for people.\n\n"
    "## t1: One\nModel: sonnet\nDone: true\n\nBody of one.\n\n"
    "## t2: Two\nModel: sonnet\nDone: true\n\nBody of two.\n\n"
    "## t3: Three\nModel: sonnet\nDone: true\n"
)


def tasks(m: Machine) -> str:
    return (m.root / "TASKS.md").read_text()


def remote_tasks(shared: Shared) -> str:
    return git(shared.bare, "show", "main:TASKS.md")


def no_markers(*texts: str) -> None:
    for t in texts:
        assert "<<<<<<<" not in t and ">>>>>>>" not in t and "=======" not in t


def sync(m: Machine, *args: str) -> dict[str, object]:
    r = m.wf("sync", "--json", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


@pytest.mark.parametrize("daemon", [True, False])
@pytest.mark.parametrize("first", ["a", "b"])
def test_an_edit_on_a_and_a_claim_on_b_both_survive_a_sync_on_either_side(
    tmp_path: Path, daemon: bool, first: str
) -> None:
    with Shared(tmp_path, daemon=daemon) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        # a person edits t1 on a (title, Done and body) in an editor: uncommitted
        (a.root / "TASKS.md").write_text(
            tasks(a).replace("## t1: One\n", "## t1: One, reworded\n").replace("Body of one.", "New body.")
        )
        b.wf("status", "t2", "progress", "worker", check=True)  # a claim on b
        one, other = (a, b) if first == "a" else (b, a)
        assert sync(one)["state"] == "pushed"
        assert sync(other)["state"] == "pushed"
        assert sync(one)["state"] == "up to date"
        for text in (tasks(a), tasks(b), remote_tasks(shared)):
            assert "## t1: One, reworded\n" in text and "New body." in text and "Body of one." not in text
            assert "## t2: Two\nModel: sonnet\nDone: true\nStatus: in progress: worker since " in text
            assert "## t3: Three\n" in text
            no_markers(text)
        assert tasks(a) == tasks(b) == remote_tasks(shared)
        assert (
            a.git("rev-parse", "HEAD").strip()
            == b.git("rev-parse", "HEAD").strip()
            == shared.refs()["refs/heads/main"]
        )
        assert a.git("status", "--porcelain", "-uno") == b.git("status", "--porcelain", "-uno") == ""
