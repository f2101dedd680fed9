"""Merges nobody watches: a person's typo never strands merged work, the gate runs on
every merge and says so at once, and backup refs do not pile up."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git


def commit_all(cwd: Path, message: str) -> str:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-qm", message)
    return git(cwd, "rev-parse", "HEAD").strip()


@pytest.fixture(autouse=True)
def _fake_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake claude, codex and opencode on PATH, so that wf doctor finds its adapters."""
    monkeypatch.setenv("PATH", f"{Path(__file__).parent / 'fakes'}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def proj(wf: WfRunner) -> WfRunner:
    """A repository set up for wf with committed TASKS.md holding tasks a, b and c."""
    for tid in "abc":
        wf.ok("add", f"Task {tid}", "--id", tid, "--model", "sonnet", "--done", "true")
    commit_all(wf.root, "wf setup")
    return wf


def worked(proj: WfRunner, tid: str, lane: str = "sonnet") -> tuple[Path, str]:
    """A tree for ``tid`` with one commit on its branch: (the tree, the commit)."""
    wt = Path(json.loads(proj.ok("wt", "add", lane, tid, "--json"))["path"])
    (wt / f"{tid}.txt").write_text(f"{tid}\n")
    return wt, commit_all(wt, f"work on {tid}")


def typo(root: Path, tid: str, line: str = "Prio: high") -> None:
    """A person's uncommitted typo in task ``tid``'s fields."""
    text = (root / "TASKS.md").read_text()
    head = f"## {tid}: Task {tid}\n"
    assert head in text
    (root / "TASKS.md").write_text(text.replace(head, head + line + "\n"))


# ------------------------------------------------------------------ item: merged work is archived


def test_merge_archives_a_task_whose_text_has_a_typo_and_keeps_that_text(proj: WfRunner) -> None:
    wt, tip = worked(proj, "a")
    proj.ok("status", "a", "progress", "worker")
    typo(proj.root, "a")
    assert proj("check").code == 1  # the typo is an error of task a
    r = proj("merge", cwd=wt)
    assert r.code == 0, r.err
    assert "note: a had errors in TASKS.md; archived anyway" in r.out
    assert git(proj.root, "rev-parse", "main~1^2").strip() == tip
    assert "## a: Task a" not in (proj.root / "TASKS.md").read_text()
    assert git(proj.root, "branch", "--list", "sonnet/a") == ""
    # the person's text is kept under the archive line, in the file and in the commit
    for done in ((proj.root / "DONE.md").read_text(), git(proj.root, "show", "main:DONE.md")):
        lines = done.splitlines()
        at = next(i for i, ln in enumerate(lines) if " a lane=sonnet " in ln)
        assert lines[at + 1].startswith("  > archived by wf merge with errors in its text (TASKS.md:")
        assert lines[at + 2 :][:3] == ["  > ## a: Task a", "  > Prio: high", "  > Model: sonnet"]
    assert [e["id"] for e in json.loads(proj.ok("log", "--json"))] == ["a"]
    assert proj("check").code == 0
    files = git(proj.root, "show", "--name-only", "--format=", "main").split()
    assert sorted(files) == ["DONE.md", "TASKS.md"]
    # a second task's merge after it appends normally (the kept lines are not archive lines)
    worked(proj, "b", "opus")
    proj.ok("merge", "b")
    assert [e["id"] for e in json.loads(proj.ok("log", "--json"))] == ["a", "b"]


def test_a_typo_in_another_task_is_left_as_it_is(proj: WfRunner) -> None:
    worked(proj, "a")
    typo(proj.root, "c", "Prio: three")
    proj.ok("merge", "a")
    assert "Prio: three" in (proj.root / "TASKS.md").read_text()
    assert "  > " not in (proj.root / "DONE.md").read_text()


def test_doctor_finds_and_finishes_a_merge_left_unarchived(proj: WfRunner) -> None:
    _, tip = worked(proj, "a")
    git(proj.root, "merge", "-q", "--no-ff", "-m", "a: Task a", "sonnet/a")  # merged, never archived
    made = git(proj.root, "rev-parse", "main").strip()
    r = proj("doctor")
    assert r.code == 1
    assert f"merge: a: sonnet/a was merged into main as {made[:12]} but a is not archived" in r.out
    r = proj("doctor", "--fix", "--json")
    found = [f for f in json.loads(r.out) if f["kind"] == "merge"]
    assert len(found) == 1 and found[0]["fixed"] is True
    entry = json.loads(proj.ok("log", "--json"))[0]
    assert entry["id"] == "a" and entry["commit"] == made
    assert git(proj.root, "log", "-1", "--format=%s", "main").strip() == "wf: archive a"
    assert git(proj.root, "branch", "--list", "sonnet/a") == ""
    assert tip in git(proj.root, "rev-list", "main")
    assert "merge:" not in proj("doctor").out


def test_doctor_leaves_a_merged_task_in_progress_to_its_worker(proj: WfRunner) -> None:
    _, tip = worked(proj, "a")
    proj.ok("status", "a", "progress", "worker")
    git(proj.root, "merge", "-q", "--no-ff", "-m", "a: Task a", "sonnet/a")
    r = proj("doctor", "--fix")
    assert "a is not archived; it is in progress: wf merge a finishes it" in r.out
    assert r.code == 1
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip
    assert "## a: Task a" in (proj.root / "TASKS.md").read_text()


def test_a_branch_with_no_commits_of_its_own_is_not_taken_for_merged(proj: WfRunner) -> None:
    proj.ok("wt", "add", "sonnet", "a")  # a fresh branch: in main, but never merged
    assert "merge:" not in proj("doctor", "--fix").out
    assert "## a: Task a" in (proj.root / "TASKS.md").read_text()
