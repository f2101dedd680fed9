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


# ------------------------------------------------------------------ item: backup refs are pruned


def backups(root: Path) -> set[str]:
    return set(git(root, "for-each-ref", "--format=%(refname)", "refs/wf/backup/").split())


def old_backups(root: Path) -> dict[str, str]:
    """Backup refs of 2020 (older than any backup_days): two main holds, one it lacks,
    and one whose time cannot be read."""
    main_sha = git(root, "rev-parse", "main").strip()
    git(root, "switch", "-qc", "side")
    (root / "side.txt").write_text("side\n")
    side = commit_all(root, "not in main")
    git(root, "switch", "-q", "main")
    refs = {
        "refs/wf/backup/sonnet/x/20200101T000000Z": main_sha,  # old, in main: pruned
        "refs/wf/backup/main/20200101T000000Z": main_sha,  # old, in main: pruned
        "refs/wf/backup/sonnet/y/20200101T000000Z": side,  # old, not in main: kept
        "refs/wf/backup/tree/z/undated": main_sha,  # no time to read: kept
    }
    for ref, sha in refs.items():
        git(root, "update-ref", ref, sha)
    return refs


def test_a_merge_prunes_the_backup_refs_older_than_backup_days(proj: WfRunner) -> None:
    refs = old_backups(proj.root)
    worked(proj, "a")
    out = proj.ok("merge", "a")
    assert "note: deleted 2 backup refs older than 14 days whose commits are in main" in out
    left = backups(proj.root)
    assert set(list(refs)[2:]) <= left  # main lacks one; the other has no readable time
    assert not set(list(refs)[:2]) & left
    fresh = left - set(refs)
    assert {r.rsplit("/", 1)[0] for r in fresh} == {"refs/wf/backup/sonnet/a", "refs/wf/backup/main"}


def test_doctor_counts_backup_refs_and_fix_prunes_the_old_ones(proj: WfRunner) -> None:
    refs = old_backups(proj.root)
    r = proj("doctor")
    assert r.code == 0, r.out
    assert "backups: refs/wf/backup/: 4 backup refs, 2 older than 14 days whose commits main holds" in r.out
    assert backups(proj.root) == set(refs)
    r = proj("doctor", "--fix", "--json")
    found = [f for f in json.loads(r.out) if f["kind"] == "backups"]
    assert found == [
        {
            "kind": "backups",
            "subject": "refs/wf/backup/",
            "message": "4 backup refs: deleted 2 backup refs older than 14 days whose commits are in main",
            "level": "info",
            "fixed": True,
        }
    ]
    assert backups(proj.root) == set(list(refs)[2:])
    assert "backups: refs/wf/backup/: 2 backup refs, none older than 14 days (info)" in proj.ok("doctor")


def test_backup_days_decides_what_is_old(proj: WfRunner) -> None:
    refs = old_backups(proj.root)
    proj.ok("config", "backup_days", "100000")  # 2020 is not that old
    worked(proj, "a")
    assert "backup ref" not in proj.ok("merge", "a")
    assert set(refs) <= backups(proj.root)
    (proj.root / "wf.toml").write_text('backup_days = "two weeks"\n')
    r = proj("doctor")
    assert r.code == 1 and "backup_days must be a number, not \"two weeks\"" in r.err
    assert "Traceback" not in r.err
