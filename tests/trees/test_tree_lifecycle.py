"""A tree comes back when its task lets go of it: done, awaiting, wip, blocked or pending
again; `wf wt rm`; `wf doctor --fix` on what it reports; backup refs pruned by age."""

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
    monkeypatch.setenv("PATH", f"{Path(__file__).parent.parent / 'fakes'}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def proj(wf: WfRunner) -> WfRunner:
    for tid in "abc":
        wf.ok("add", f"Task {tid}", "--id", tid, "--model", "sonnet", "--done", "true")
    commit_all(wf.root, "wf setup")
    return wf


def tree_of(proj: WfRunner, task: str) -> str:
    return Path(json.loads(proj.ok("wt", "add", "sonnet", task, "--json"))["path"]).name


def rows(proj: WfRunner) -> dict[str, dict[str, object]]:
    return {r["name"]: r for r in json.loads(proj.ok("wt", "list", "--json"))}


def branches(proj: WfRunner) -> list[str]:
    return git(proj.root, "branch", "--format=%(refname:short)").split()


def test_done_by_hand_frees_the_tree(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    assert tree_of(proj, "a") == "sonnet"
    assert rows(proj)["sonnet"]["state"] == "busy"
    proj.ok("done", "a")
    row = rows(proj)["sonnet"]
    assert row["state"] == "free" and row["task"] is None
    proj.ok("status", "b", "progress", "me")
    assert tree_of(proj, "b") == "sonnet"  # not sonnet-2
    # the archived task's branch held nothing main lacks: it went with the reuse
    assert "sonnet/a" not in branches(proj)


@pytest.mark.parametrize("state", ["awaiting", "wip", "blocked", "pending"])
def test_a_task_that_lets_go_frees_its_tree_and_keeps_its_work(proj: WfRunner, state: str) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    (wt / "work.txt").write_text("half done\n")
    commit_all(wt, "half of a")
    proj.ok("status", "a", state, *([] if state == "pending" else ["why"]))
    assert rows(proj)["sonnet"]["state"] == "free"
    proj.ok("status", "b", "progress", "me")
    assert tree_of(proj, "b") == "sonnet"
    assert "sonnet/a" in branches(proj)  # unmerged work stays on its branch
    assert git(proj.root, "log", "-1", "--format=%s", "sonnet/a").strip() == "half of a"
    # and the task picks its work up again in a tree of its own
    proj.ok("status", "a", "progress", "me", "--force")
    assert tree_of(proj, "a") == "sonnet-2"
    assert (proj.root / ".worktrees" / "sonnet-2" / "work.txt").read_text() == "half done\n"


def test_a_hand_edit_of_the_status_frees_the_tree(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    tasks = proj.root / "TASKS.md"
    text = tasks.read_text()
    tasks.write_text("\n".join(ln for ln in text.split("\n") if not ln.startswith("Status: in progress")))
    assert rows(proj)["sonnet"]["state"] == "free"


def test_a_tree_given_before_any_claim_is_held_while_pending(proj: WfRunner) -> None:
    assert tree_of(proj, "a") == "sonnet"
    assert rows(proj)["sonnet"]["by"] == "task a"
    assert tree_of(proj, "b") == "sonnet-2"
    proj.ok("status", "a", "wip", "later")
    assert rows(proj)["sonnet"]["state"] == "free"


def test_doctor_fix_releases_and_deletes_what_it_calls_safe(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    proj.ok("done", "a")
    r = proj("doctor")
    assert r.code == 1
    assert "record: sonnet: names task a, which is done (archived)" in r.out
    assert "branch: sonnet/a: task done and merged into main; safe to delete" in r.out
    r = proj("doctor", "--fix")
    assert "[fixed]" in r.out
    r = proj("doctor")
    assert r.code == 0, r.out
    assert "sonnet/a" not in branches(proj)
    wt = proj.root / ".worktrees" / "sonnet"
    assert git(wt, "rev-parse", "HEAD").strip() == git(proj.root, "rev-parse", "main").strip()


def test_doctor_fix_says_why_it_leaves_a_branch(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    proj.ok("done", "a")
    (wt / "scratch.txt").write_text("not yet committed\n")
    r = proj("doctor", "--fix")
    assert r.code == 1
    assert "not fixed: checked out in" in r.out and "uncommitted changes" in r.out
    assert "sonnet/a" in branches(proj)
    assert (wt / "scratch.txt").exists()


def test_doctor_fix_never_deletes_unmerged_work_of_an_archived_task(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    (wt / "w.txt").write_text("w\n")
    tip = commit_all(wt, "unmerged")
    proj.ok("done", "a")
    r = proj("doctor", "--fix")
    assert "commits not in main; wf never deletes unmerged work" in r.out
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip


def test_wt_rm(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    r = proj("wt", "rm", "sonnet")
    assert r.code == 1 and "busy (task a)" in r.err
    proj.ok("status", "a", "pending")
    (wt / "scratch.txt").write_text("x\n")
    r = proj("wt", "rm", "sonnet")
    assert r.code == 1 and "uncommitted changes" in r.err
    commit_all(wt, "work of a")
    r = proj("wt", "rm", "sonnet")
    assert r.code == 1 and "1 commit not in main (on branch sonnet/a)" in r.err
    assert wt.exists()
    git(wt, "switch", "-q", "--detach", "main")
    assert proj.ok("wt", "rm", "sonnet") == "removed sonnet\n"
    assert not wt.exists()
    assert not (proj.root / ".wf" / "wt" / "sonnet.json").exists()
    assert "sonnet/a" in branches(proj)  # a task still open keeps its branch
    r = proj("wt", "rm", "sonnet")
    assert r.code == 1 and "no tree sonnet" in r.err
    r = proj("wt", "rm", "../x")
    assert r.code == 1 and "bad tree name" in r.err


def test_wt_rm_takes_the_branch_of_a_done_task(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    proj.ok("done", "a")
    proj.ok("wt", "rm", "sonnet")
    assert not wt.exists() and "sonnet/a" not in branches(proj)


def test_prune_removes_old_backups_main_holds(proj: WfRunner) -> None:
    main_sha = git(proj.root, "rev-parse", "main").strip()
    git(proj.root, "switch", "-qc", "side")
    (proj.root / "side.txt").write_text("side\n")
    side = commit_all(proj.root, "not in main")
    git(proj.root, "switch", "-q", "main")
    refs = {
        "refs/wf/backup/sonnet/a/20200101T000000Z": main_sha,  # old, in main: pruned
        "refs/wf/backup/main/20200101T000000Z": main_sha,  # old, in main: pruned
        "refs/wf/backup/sonnet/b/20200101T000000Z": side,  # old, not in main: kept
        "refs/wf/backup/sonnet/c/29990101T000000Z": main_sha,  # new: kept
        "refs/wf/backup/tree/x/undated": main_sha,  # no time to read: kept
    }
    for ref, sha in refs.items():
        git(proj.root, "update-ref", ref, sha)
    assert "would delete 2 backup refs older than 14 days" in proj.ok("wt", "prune", "--dry-run")
    assert len(git(proj.root, "for-each-ref", "refs/wf/backup/").splitlines()) == 5
    assert "delete 2 backup refs" in proj.ok("wt", "prune")
    left = set(git(proj.root, "for-each-ref", "--format=%(refname)", "refs/wf/backup/").split())
    assert left == set(list(refs)[2:])


def test_backup_days_setting(proj: WfRunner) -> None:
    main_sha = git(proj.root, "rev-parse", "main").strip()
    git(proj.root, "update-ref", "refs/wf/backup/main/20200101T000000Z", main_sha)
    proj.ok("config", "backup_days", "36500")  # a hundred years: the most it takes
    assert proj.ok("wt", "prune") == "nothing to prune\n"
    r = proj("config", "--", "backup_days", "-1")
    assert r.code == 1 and "backup_days must be a number from 0 to" in r.err


def test_a_task_hidden_by_an_error_keeps_its_tree(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    tasks = proj.root / "TASKS.md"
    tasks.write_text(tasks.read_text().replace("## a: Task a", "## a Task a"))
    assert rows(proj)["sonnet"]["state"] == "busy"  # wf cannot tell: the record is believed
    tasks.unlink()
    assert rows(proj)["sonnet"]["state"] == "busy"


def test_wt_rm_keeps_the_branch_of_an_open_task(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    proj.ok("status", "a", "pending")
    proj.ok("wt", "rm", "sonnet")
    assert "sonnet/a" in branches(proj)  # no commits of its own, but its task is still open


def test_wt_rm_never_removes_the_tree_it_runs_in(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    proj.ok("done", "a")
    r = proj.proc("wt", "rm", "sonnet", cwd=wt)
    assert r.code == 1 and "holds the folder you run wf from" in r.err, r.err
    assert wt.exists()
    # free, clean and at a commit of main, so prune would take it: not from inside it
    r = proj.proc("wt", "prune", cwd=wt)
    assert r.code == 0 and "remove sonnet" not in r.out, r.out
    assert wt.exists()
    assert "remove sonnet" in proj.ok("wt", "prune", "--dry-run")  # from elsewhere, it would go


def test_a_clones_other_branches_count_as_unmerged_work(proj: WfRunner) -> None:
    proj.ok("config", "isolation", "clone")
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    assert (wt / ".git").is_dir()
    git(wt, "switch", "-q", "-c", "side")
    (wt / "side.txt").write_text("only here\n")
    commit_all(wt, "work that lives only in the clone")
    git(wt, "switch", "-q", "--detach", "HEAD~1")  # HEAD back at main's commit, the work on 'side'
    proj.ok("done", "a")
    assert rows(proj)["sonnet"]["state"] == "free"
    assert "remove sonnet" not in proj.ok("wt", "prune")
    r = proj("wt", "rm", "sonnet")
    assert r.code == 1 and "1 commit not in main" in r.err, r.err
    assert git(wt, "show", "side:side.txt") == "only here\n"


def test_retire_leaves_a_tree_whose_task_holds_it_again(proj: WfRunner) -> None:
    """doctor finds a tree to release, then (before it takes the lock) the task is
    claimed again: retire re-reads under the lock and leaves the tree to its task."""
    from wf.base import project
    from wf.trees import treeadmin

    proj.ok("status", "a", "progress", "me")
    name = tree_of(proj, "a")
    assert treeadmin.retire(project.load(proj.root), name) is None
    assert rows(proj)[name]["task"] == "a" and rows(proj)[name]["state"] == "busy"
    proj.ok("status", "a", "awaiting", "a question")
    assert treeadmin.retire(project.load(proj.root), name) == "released"


def test_doctor_fix_releases_a_tree_whose_task_went_awaiting(proj: WfRunner) -> None:
    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    proj.ok("status", "a", "awaiting", "which API?")
    r = proj("doctor")
    assert r.code == 1 and "record: sonnet: names task a, which is awaiting, no longer claimed" in r.out
    r = proj("doctor", "--fix")
    assert r.code == 0 and "record: sonnet: names task a, which is awaiting" in r.out and "[fixed]" in r.out
    assert json.loads((proj.root / ".wf" / "wt" / "sonnet.json").read_text())["task"] is None


def test_an_archived_tasks_branch_main_lacks_is_never_deleted(proj: WfRunner) -> None:
    """git's own 'branch -d' would delete it (the main checkout's HEAD holds it): wf's
    check against the main branch alone must keep it."""
    (proj.root / "wf.toml").write_text('main = "main"\n' + (proj.root / "wf.toml").read_text())
    commit_all(proj.root, "main is main")
    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    (wt / "w.txt").write_text("w\n")
    tip = commit_all(wt, "work main lacks")
    git(wt, "switch", "-q", "--detach", "main")
    proj.ok("done", "a")
    commit_all(proj.root, "a done")
    git(proj.root, "switch", "-qc", "side")
    git(proj.root, "merge", "-q", "--no-edit", tip)
    r = proj("doctor", "--fix")
    assert "branch: sonnet/a: task archived but the branch has commits not in main" in r.out
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip


# ------------------------------------------------------------------ a quiet history


def test_a_finished_task_adds_two_commits_of_wfs_own_and_claims_add_none(proj: WfRunner) -> None:
    start = git(proj.root, "rev-parse", "HEAD").strip()
    for tid in "ab":
        proj.ok("status", tid, "progress", "me")
        proj.ok("note", tid, "started")
        tree = proj.root / ".worktrees" / tree_of(proj, tid)
        (tree / f"{tid}.txt").write_text(tid)
        commit_all(tree, f"work on {tid}")
        proj.ok("merge", tid)
    proj.ok("status", "c", "progress", "me")  # a claim, a status change: nothing committed
    proj.ok("status", "c", "awaiting", "a question")
    mainline = git(proj.root, "log", "--first-parent", "--format=%s", f"{start}..main").splitlines()
    assert mainline == ["wf: archive b", "b: Task b", "wf: archive a", "a: Task a"]
    # docs/orchestration.md's recipe: task history without the bookkeeping, one line per finished task
    recipe = ["log", "--first-parent", "--oneline", "--invert-grep", "--grep=^wf: archive ", f"{start}..main"]
    assert [ln.split(" ", 1)[1] for ln in git(proj.root, *recipe).splitlines()] == ["b: Task b", "a: Task a"]
    assert git(proj.root, "status", "--porcelain", "--untracked-files=no") == " M TASKS.md\n"


# ------------------------------------------------------------------ git's own refusals, the second layer


def test_git_worktree_remove_refuses_a_dirty_tree(proj: WfRunner) -> None:
    """wt rm, prune and doctor --fix skip a dirty tree themselves; under that, the removal
    itself (no --force) refuses one too."""
    from wf.trees import gitops

    proj.ok("status", "a", "progress", "me")
    wt = proj.root / ".worktrees" / tree_of(proj, "a")
    (wt / "unsaved.txt").write_text("a person's work\n")
    with pytest.raises(gitops.GitError):
        gitops.worktree_remove(proj.root, wt)
    assert (wt / "unsaved.txt").read_text() == "a person's work\n"


def test_git_refuses_to_delete_a_branch_a_tree_has_checked_out(proj: WfRunner) -> None:
    """drop_done_branch skips a branch a tree has checked out; under that, git branch -d
    refuses it too."""
    from wf.trees import gitops

    proj.ok("status", "a", "progress", "me")
    tree_of(proj, "a")
    with pytest.raises(gitops.GitError):
        gitops.delete_branch(proj.root, "sonnet/a")
    assert "sonnet/a" in branches(proj)


def test_doctor_fix_never_detaches_a_persons_own_worktree(proj: WfRunner, tmp_path: Path) -> None:
    """An archived task's merged branch checked out in a worktree of a person's own, outside
    .worktrees/ (even one named like a lane tree): reported, never detached or deleted."""
    proj.ok("status", "a", "progress", "me")
    lane_tree = proj.root / ".worktrees" / tree_of(proj, "a")
    git(lane_tree, "switch", "-q", "--detach")
    own = tmp_path / "elsewhere" / lane_tree.name
    git(proj.root, "worktree", "add", "-q", str(own), "sonnet/a")
    proj.ok("done", "a")
    proj("doctor", "--fix")
    assert git(own, "branch", "--show-current").strip() == "sonnet/a"
    assert "sonnet/a" in branches(proj)
