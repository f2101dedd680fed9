"""One test per safety rule and per layer: each fails when that rule alone is removed.

A rule guarded twice (the is-merged check and ``git branch -d``) has a test for each
layer: the orch layer's test takes git's guard away (a force delete in its place), so
only the is-merged check stands between the post and the loss of the branch.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task
from wf.trees import gitops


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def _tree(o: Orch) -> Path:
    return o.root / ".worktrees" / "a"


def _worked(o: Orch, *script: str) -> str:
    """Pick a1, let the scripted worker do it; the commit it reported."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", *script) + task("a2", "a", "write a2.txt y"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    return rep.commit


# ------------------------------------------------------------------ the branch of unfinished work


@pytest.mark.parametrize(
    "result,script", [("wip", "wip half"), ("handback", "nomerge"), ("awaiting", "nomerge")]
)
def test_the_branch_of_unfinished_work_survives_post(o: Orch, result: str, script: str) -> None:
    commit = _worked(o, script)
    o.wf.ok("orch", "post", "a", "--result", result, "--note", "n", "--no-pick")
    assert git(o.root, "rev-parse", "a/a1").strip() == commit


@pytest.mark.parametrize("result", ["wip", "handback", "awaiting"])
def test_the_is_merged_check_alone_keeps_the_branch(
    o: Orch, result: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With git's own guard gone (a force delete), the post's is-merged check must still
    keep a branch that holds work main does not have."""
    commit = _worked(o, "nomerge")

    def force_delete(cwd: Path, branch: str) -> None:
        gitops.run(cwd, "branch", "-D", "--", branch)

    monkeypatch.setattr(gitops, "delete_branch", force_delete)
    o.wf.ok("orch", "post", "a", "--result", result, "--note", "n", "--no-pick")
    assert git(o.root, "rev-parse", "a/a1").strip() == commit


def test_git_branch_d_refuses_unmerged_work(repo: Path) -> None:
    git(repo, "switch", "-qc", "topic")
    (repo / "f.txt").write_text("f\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "work")
    git(repo, "switch", "-q", "main")
    with pytest.raises(gitops.GitError):
        gitops.delete_branch(repo, "topic")
    assert git(repo, "rev-parse", "--verify", "-q", "topic").strip()


def test_a_branch_with_no_commits_of_its_own_is_deleted_on_handback(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a"))
    o.wf.ok("orch", "pick", "a")
    o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "n", "--no-pick")
    assert git(o.root, "branch", "--list", "a/a1") == ""


# ------------------------------------------------------------------ the post-checks of a done


def _post_done(o: Orch, commit: str) -> str:
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", commit, "--no-pick")
    assert r.code == 0, r.err
    return r.out


def test_post_check_the_tree_is_clean(o: Orch) -> None:
    commit = _worked(o)
    (_tree(o) / "left-behind.txt").write_text("oops\n")
    out = _post_done(o, commit)
    assert out.startswith("a1: post-check-red") and "has uncommitted changes" in out


def test_post_check_the_trees_head_is_in_main(o: Orch) -> None:
    commit = _worked(o)
    (_tree(o) / "late.txt").write_text("late\n")
    git(_tree(o), "add", "late.txt")
    git(_tree(o), "commit", "-qm", "a commit after the merge")
    out = _post_done(o, commit)
    assert out.startswith("a1: post-check-red") and "HEAD is not in main" in out


def test_post_check_the_branch_is_gone(o: Orch) -> None:
    """The branch came back holding a commit main lacks: the post is red and the branch
    (with that work) stays."""
    commit = _worked(o)
    extra = git(o.root, "commit-tree", f"{commit}^{{tree}}", "-p", commit, "-m", "more work").strip()
    git(o.root, "branch", "a/a1", extra)
    out = _post_done(o, commit)
    assert out.startswith("a1: post-check-red") and "branch a/a1 still exists" in out
    assert git(o.root, "rev-parse", "a/a1").strip() == extra


def test_a_merged_branch_that_is_still_there_is_finished(o: Orch) -> None:
    """Archived, and the branch is still there but wholly in main (a merge killed after its
    archive commit): the post finishes the merge, never a red post-check."""
    commit = _worked(o)
    git(o.root, "branch", "a/a1", commit)
    out = _post_done(o, commit)
    assert out.startswith("a1: done as ") and "finished the merge of a/a1" in out, out
    assert git(o.root, "branch", "--list", "a/a1").strip() == ""


def test_post_check_wf_check_is_clean(o: Orch) -> None:
    commit = _worked(o)
    with open(o.root / "TASKS.md", "a") as f:
        f.write("\n## Not A Task Heading\n")
    out = _post_done(o, commit)
    assert out.startswith("a1: post-check-red") and "wf check has 1 error" in out


def test_post_check_the_task_is_archived(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "nomerge"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    git(_tree(o), "switch", "-q", "--detach")
    git(o.root, "branch", "-D", "a/a1")  # the work is gone, nothing was merged
    out = _post_done(o, rep.commit)
    assert out.startswith("a1: post-check-red") and "no branch a/a1 and a1 is not archived" in out


def test_post_check_the_task_is_archived_after_the_posts_merge(o: Orch) -> None:
    """The worker reported done without merging and a person deleted the task meanwhile:
    the post's merge lands the work but archives nothing, so the post is red, never done."""
    commit = _worked(o, "nomerge")
    text = (o.root / "TASKS.md").read_text()
    (o.root / "TASKS.md").write_text(text[: text.index("\n## a1:")] + text[text.index("\n## a2:") :])
    out = _post_done(o, commit)
    assert out.startswith("a1: post-check-red") and "a1 is not in the archive" in out
    assert o.archived() == []


def test_all_post_checks_green_is_done(o: Orch) -> None:
    commit = _worked(o)
    assert _post_done(o, commit).startswith("a1: done as ")


# ------------------------------------------------------------------ the record before the claim


def test_a_pick_that_failed_after_its_claim_is_finished_by_the_next(o: Orch) -> None:
    """The record is written before the claim: a pick that fails once a1 is claimed (its
    branch cannot be made) leaves a record, and the next pick finishes a1, never a2."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt y"))
    git(o.root, "branch", "a")  # refs/heads/a blocks refs/heads/a/a1
    r = o.wf("orch", "pick", "a")
    assert r.code == 1
    assert o.status("a1").startswith("in progress")
    assert "claimed by a worker but no lane record holds it" not in o.wf("doctor").out
    git(o.root, "branch", "-D", "a")
    out = o.wf.ok("orch", "pick", "a")
    assert "Task: a1  Lane: a" in out
    assert o.status("a2") == "pending"


# ------------------------------------------------------------------ the tree lock


def test_allocations_on_the_same_lane_never_share_a_tree(wf: WfRunner) -> None:
    """Six processes ready trees for six tasks of one lane at once: six different
    trees (.wf/wt.lock serialises the choice of a free tree)."""
    for i in range(6):
        wf.ok("add", f"Task {i}", "--id", f"t{i}", "--model", "sonnet", "--done", "true")
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "tasks")
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "wf", "wt", "add", "sonnet", f"t{i}"],
            cwd=wf.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    paths = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        paths.append(out.strip().splitlines()[-1])
    assert len(set(paths)) == 6, paths


@pytest.mark.parametrize("result", ["wip", "handback", "awaiting"])
def test_git_branch_d_alone_keeps_the_branch_through_post(
    o: Orch, result: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other layer: with the post's is-merged check gone (it says 'nothing of its
    own'), ``git branch -d`` must still refuse to delete a branch with unmerged work."""
    from wf.orch import post

    commit = _worked(o, "nomerge")
    monkeypatch.setattr(post, "has_own_work", lambda project, tip: False)
    o.wf.ok("orch", "post", "a", "--result", result, "--note", "n", "--no-pick")
    assert git(o.root, "rev-parse", "a/a1").strip() == commit


# ------------------------------------------------------------------ wf merge's own guards


def _merge_setup(wf: WfRunner, *, clone: bool = False) -> Path:
    wf.ok("add", "Task a", "--id", "a", "--model", "sonnet", "--done", "true")
    if clone:
        wf.ok("config", "isolation", "clone")
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "setup")
    tree = Path(json.loads(wf.ok("wt", "add", "sonnet", "a", "--json"))["path"])
    (tree / "a.txt").write_text("a\n")
    git(tree, "add", "a.txt")
    git(tree, "commit", "-qm", "work on a")
    return tree


def test_a_tree_left_with_uncommitted_work_stays_the_tasks(wf: WfRunner) -> None:
    """The merge goes through, but a tree that holds uncommitted changes is not moved and
    not released: its record still names the task and branch (whose work it is)."""
    tree = _merge_setup(wf)
    (tree / "scratch.txt").write_text("not committed\n")
    out = wf.ok("merge", "a")
    assert "it has uncommitted changes" in out
    rec = json.loads((wf.root / ".wf" / "wt" / f"{tree.name}.json").read_text())
    assert rec["task"] == "a" and rec["branch"] == "sonnet/a"
    assert (tree / "scratch.txt").read_text() == "not committed\n"


def test_a_branch_that_moved_during_its_merge_is_not_archived(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit lands on the branch while wf merge works (after it read the tip): main
    has the work up to the old tip, the task is not archived, the new commit is kept,
    and the next wf merge brings the rest."""
    from wf.trees import merge

    tree = _merge_setup(wf)
    real = merge._merge

    def merge_then_commit(*args: object, **kw: object) -> str:
        sha = real(*args, **kw)  # type: ignore[arg-type]
        (tree / "late.txt").write_text("late\n")
        git(tree, "add", "late.txt")
        git(tree, "commit", "-qm", "a late commit")
        return sha

    # only this patch is undone below: monkeypatch.undo() would undo the sealed
    # environment too (HOME, the git identity) and the next merge would commit as whoever
    # runs the suite, or fail on a machine with no git identity
    with monkeypatch.context() as m:
        m.setattr(merge, "_merge", merge_then_commit)
        r = wf("merge", "a")
    assert r.code == 1 and "got new commits while it was being merged" in r.err
    late = git(tree, "rev-parse", "HEAD").strip()
    assert git(wf.root, "rev-parse", "sonnet/a").strip() == late
    assert "## a: Task a" in (wf.root / "TASKS.md").read_text()
    assert not (wf.root / "DONE.md").exists() or " a " not in (wf.root / "DONE.md").read_text()
    wf.ok("merge", "a")
    assert git(wf.root, "merge-base", "--is-ancestor", late, "main", check=False) == ""
    assert (wf.root / "late.txt").read_text() == "late\n"


def test_a_clone_fetch_backs_up_the_branch_it_overwrites(wf: WfRunner) -> None:
    """Clone isolation: the main repository's branch of the same name holds a commit the
    clone's does not; the fetch back (a forced update) backs it up first, so the commit
    stays reachable from a ref."""
    clone = _merge_setup(wf, clone=True)
    stray = git(wf.root, "commit-tree", "main^{tree}", "-p", "main", "-m", "made in the main repository")
    stray = stray.strip()
    git(wf.root, "branch", "-f", "sonnet/a", stray)
    wf.ok("merge", cwd=clone)
    holders = git(wf.root, "for-each-ref", "--contains", stray, "--format=%(refname)")
    assert [r for r in holders.split() if r.startswith("refs/wf/backup/sonnet/a/")], holders


def test_a_red_post_check_frees_the_tree_for_the_lanes_next_task(o: Orch) -> None:
    """The worker is gone once its post runs, red or not: its tree is freed (an empty
    branch deleted) and the lane's next pick reuses it, never a second one."""
    o.setup(lanes_toml("a"), task("a1", "a") + task("a2", "a"))
    o.wf.ok("orch", "pick", "a")  # the worker reports done having done nothing: red
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--no-pick")
    assert out.startswith("a1: post-check-red") and "has no commits of its own" in out
    assert git(o.root, "branch", "--list", "a/a1") == ""  # nothing of its own: a new pick starts from main
    out = o.wf.ok("orch", "pick", "a")
    assert f"Worktree: {_tree(o)}  Branch: a/a2" in out


@pytest.mark.parametrize("result", ["handback", "wip"])
def test_a_post_never_frees_a_tree_with_uncommitted_work(o: Orch, result: str) -> None:
    """A worker hands back (or parks as wip) with work it did not commit: the post leaves
    its tree on the task's branch with that work, and keeps the branch, so the task's next
    pick finds it (the dirty-tree guard of ``_free_tree``: without it the tree is detached,
    the empty branch deleted, and the next pick starts from main with the work orphaned)."""
    o.setup(lanes_toml("a"), task("a1", "a") + task("a2", "a"))
    o.wf.ok("orch", "pick", "a")
    tree = _tree(o)
    (tree / "half.txt").write_text("half done\n")
    o.wf("orch", "post", "a", "--result", result, "--note", "needs a person", "--no-pick")
    assert gitops.current_branch(tree) == "a/a1"
    assert git(o.root, "branch", "--list", "a/a1").strip() != ""
    assert (tree / "half.txt").read_text() == "half done\n"
