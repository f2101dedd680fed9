"""The git layer against real repositories: worktrees, clones, merges, prune, doctor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from wf.base import project as projectmod
from wf.trees import worktrees


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
    """A repository set up for wf with committed TASKS.md holding tasks a..h."""
    for i, tid in enumerate("abcdefgh"):
        wf.ok("add", f"Task {tid}", "--id", tid, "--model", "sonnet", "--done", "true")
        del i
    commit_all(wf.root, "wf setup")
    return wf


def all_commits(root: Path) -> set[str]:
    out = git(root, "rev-list", "--all", "--reflog")
    return set(out.split())


def reachable(root: Path) -> set[str]:
    return set(git(root, "rev-list", "--all").split())


# ------------------------------------------------------------------ allocation


def test_add_reuse_and_same_task_again(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    assert rec["path"] == str(proj.root / ".worktrees" / "sonnet")
    assert rec["branch"] == "sonnet/a"
    assert rec["base"] == git(proj.root, "rev-parse", "main").strip()
    wt = Path(rec["path"])
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == "sonnet/a"
    assert git(proj.root, "config", "--get-regexp", "branch\\.sonnet/a\\..*", check=False) == ""
    # asking again for the same task gives the same tree
    again = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    assert again["path"] == rec["path"]
    # a second task while the first holds the tree gets sonnet-2
    other = json.loads(proj.ok("wt", "add", "sonnet", "b", "--json"))
    assert other["path"].endswith("/.worktrees/sonnet-2")


def test_busy_by_process_and_by_claude_session(proj: WfRunner, sealed_env: Path) -> None:
    wt = proj.root / ".worktrees" / "sonnet"
    git(proj.root, "worktree", "add", "-q", "--detach", str(wt))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=wt)
    try:
        rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
        assert rec["path"].endswith("/.worktrees/sonnet-2")
    finally:
        sleeper.kill()
        sleeper.wait()
    # separately: a Claude Code session file pointing into the tree, with a live pid
    wt3 = proj.root / ".worktrees" / "opus"
    git(proj.root, "worktree", "add", "-q", "--detach", str(wt3))
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sessions = sealed_env / ".claude" / "sessions"
        sessions.mkdir(parents=True)
        (sessions / f"{live.pid}.json").write_text(
            json.dumps({"pid": live.pid, "sessionId": "s-1", "cwd": str(wt3 / "src"), "kind": "interactive"})
        )
        rec = json.loads(proj.ok("wt", "add", "opus", "b", "--json"))
        assert rec["path"].endswith("/.worktrees/opus-2")
    finally:
        live.kill()
        live.wait()
    # once the session's pid is gone, the tree is free again
    rec = json.loads(proj.ok("wt", "add", "opus", "c", "--json"))
    assert rec["path"].endswith("/.worktrees/opus")


ALLOCATE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from wf.base import project
    from wf.trees import worktrees
    root, lane, tid, go = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.001)
    rec = worktrees.allocate(project.load(root), lane, tid)
    print(json.dumps(rec.as_dict()))
    """
)


@pytest.mark.timeout(180)
def test_eight_lanes_at_once(proj: WfRunner, tmp_path: Path) -> None:
    lanes = [f"l{i}" for i in range(8)]
    toml = proj.root / "wf.toml"
    toml.write_text("".join(f'[lanes.{ln}]\nmodel = "m{ln}"\n' for ln in lanes))
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ALLOCATE, str(proj.root), lane, tid, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for lane, tid in zip(lanes, "abcdefgh", strict=True)
    ]
    time.sleep(0.5)
    go.touch()
    recs = []
    for p in procs:
        out, err = p.communicate(timeout=150)
        assert p.returncode == 0, err
        assert "lock" not in err.lower()
        recs.append(json.loads(out))
    paths = [r["path"] for r in recs]
    assert len(set(paths)) == 8
    for r, lane, tid in zip(recs, lanes, "abcdefgh", strict=True):
        assert r["path"].endswith(f"/.worktrees/{lane}")
        assert git(Path(r["path"]), "symbolic-ref", "--short", "HEAD").strip() == f"{lane}/{tid}"
    assert len(git(proj.root, "worktree", "list").splitlines()) == 9


def test_tree_with_deleted_dotgit_is_repaired_and_main_untouched(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "work.txt").write_text("work\n")
    work = commit_all(wt, "work")
    worktrees.release(projectmod.load(proj.root), "sonnet")  # the worker went away
    (wt / ".git").unlink()
    main_head = git(proj.root, "rev-parse", "HEAD")
    main_status = git(proj.root, "status", "--porcelain")
    rows = {r["name"]: r for r in json.loads(proj.ok("wt", "list", "--json"))}
    assert rows["sonnet"]["state"] == "broken"
    assert "tree: sonnet: its .git file is missing; git still knows it" in proj("doctor").out
    # allocation repairs the link and reuses the tree; the work stays on its branch
    rec = json.loads(proj.ok("wt", "add", "sonnet", "c", "--json"))
    assert rec["path"] == str(wt)
    assert (wt / ".git").is_file()
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == "sonnet/c"
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == work
    assert git(proj.root, "rev-parse", "HEAD") == main_head
    assert git(proj.root, "status", "--porcelain") == main_status


def test_doctor_fix_restores_a_dotgit_file(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / ".git").unlink()
    proj.ok("doctor", "--fix")
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == "sonnet/a"


def test_git_never_walks_up_from_a_broken_tree(proj: WfRunner) -> None:
    from wf.trees import gitops

    wt = proj.root / ".worktrees" / "x"
    git(proj.root, "worktree", "add", "-q", "--detach", str(wt))
    (wt / ".git").unlink()
    with pytest.raises(gitops.NotARepository):
        gitops.run(wt, "status")
    # even a subfolder: the ceiling stops discovery at the tree
    (wt / "sub").mkdir()
    (wt / "sub" / ".git").mkdir()
    with pytest.raises(gitops.GitError):
        gitops.run(wt / "sub", "status")


# ------------------------------------------------------------------ merge


def test_merge_from_the_worktree(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "feature.txt").write_text("feature\n")
    tip = commit_all(wt, "feature")
    # a person's unrelated uncommitted edit and a claim in the main checkout stay
    (proj.root / "notes.txt").write_text("mine\n")
    proj.ok("status", "b", "progress", "worker")
    out = proj.ok("merge", cwd=wt)
    assert out.startswith("merged sonnet/a as ")
    log = git(proj.root, "log", "--format=%s", "-3", "main").splitlines()
    assert log[:2] == ["wf: archive a", "a: Task a"]
    merge_commit = git(proj.root, "rev-parse", "main~1").strip()
    assert git(proj.root, "rev-parse", "main~1^2").strip() == tip
    assert f"commit={merge_commit}" in (proj.root / "DONE.md").read_text()
    assert git(proj.root, "branch", "--list", "sonnet/a") == ""
    assert git(wt, "rev-parse", "HEAD").strip() == git(proj.root, "rev-parse", "main").strip()
    assert git(wt, "symbolic-ref", "-q", "HEAD", check=False) == ""
    assert (proj.root / "notes.txt").read_text() == "mine\n"
    assert "?? notes.txt" in git(proj.root, "status", "--porcelain")
    # the bookkeeping commit holds only TASKS.md and DONE.md, and not the claim of b
    files = git(proj.root, "show", "--name-only", "--format=", "main").split()
    assert sorted(files) == ["DONE.md", "TASKS.md"]
    committed = git(proj.root, "show", "main:TASKS.md")
    assert "## a: Task a" not in committed and "in progress: worker" not in committed
    assert "Status: in progress: worker" in (proj.root / "TASKS.md").read_text()
    assert git(proj.root, "status", "--porcelain", "--", "TASKS.md").startswith(" M")
    # the tree is free again: the next task reuses it
    rec2 = json.loads(proj.ok("wt", "add", "sonnet", "c", "--json"))
    assert rec2["path"] == str(wt)
    # and running merge again says so
    again = proj.ok("merge", "a")
    assert again.startswith("already merged sonnet/a")


def test_merge_conflict_changes_nothing(proj: WfRunner) -> None:
    (proj.root / "shared.txt").write_text("base\n")
    commit_all(proj.root, "base")
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "shared.txt").write_text("branch\n")
    tip = commit_all(wt, "branch side")
    (proj.root / "shared.txt").write_text("main\n")
    main_sha = commit_all(proj.root, "main side")
    tasks_before = (proj.root / "TASKS.md").read_bytes()
    r = proj("merge", "a")
    assert r.code == 1
    assert "conflicts; nothing was changed" in r.err and "  shared.txt" in r.err
    assert git(proj.root, "rev-parse", "main").strip() == main_sha
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip
    assert git(proj.root, "status", "--porcelain") == ""
    assert (proj.root / "TASKS.md").read_bytes() == tasks_before
    assert (proj.root / "shared.txt").read_text() == "main\n"


def test_dirty_main_is_refused(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "README.md").write_text("branch edit\n")
    tip = commit_all(wt, "edit readme")
    (proj.root / "README.md").write_text("uncommitted person's edit\n")
    main_sha = git(proj.root, "rev-parse", "main").strip()
    r = proj("merge", "a")
    assert r.code == 1
    assert "uncommitted changes to files this merge changes" in r.err and "README.md" in r.err
    assert git(proj.root, "rev-parse", "main").strip() == main_sha
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip
    assert (proj.root / "README.md").read_text() == "uncommitted person's edit\n"
    assert git(proj.root, "for-each-ref", "refs/wf/backup") == ""  # refused before anything was written


def test_the_dirty_paths_among_a_merges_paths_are_those_paths_literally(proj: WfRunner) -> None:
    """Only the paths asked about, each taken as it is spelled (not a glob, not magic)."""
    from wf.trees import gitops

    for name in ("[ab].txt", ":(top)b.txt", "a.txt", "sub/x.txt"):
        (proj.root / name).parent.mkdir(exist_ok=True)
        (proj.root / name).write_text("committed\n")
    commit_all(proj.root, "files")
    (proj.root / "[ab].txt").write_text("changed\n")
    (proj.root / "a.txt").write_text("changed\n")
    (proj.root / ":(top)b.txt").write_text("changed\n")  # not pathspec magic here
    (proj.root / "sub" / "new.txt").write_text("untracked\n")
    with gitops.session():
        assert gitops.dirty_paths(proj.root, {"[ab].txt"}) == ["[ab].txt"]
        assert gitops.dirty_paths(proj.root, {"sub/new.txt", "sub/x.txt"}) == ["sub/new.txt"]
        assert gitops.dirty_paths(proj.root, {":(top)b.txt"}) == [":(top)b.txt"]
        assert gitops.dirty_paths(proj.root, set()) == []
        assert sorted(gitops.dirty_paths(proj.root)) == [":(top)b.txt", "[ab].txt", "a.txt", "sub/new.txt"]


def test_branch_without_commits_is_not_merged(proj: WfRunner) -> None:
    proj.ok("wt", "add", "sonnet", "a")
    r = proj("merge", "a")
    assert r.code == 1 and "has no commits that are not in main" in r.err


def test_backup_refs_hold_both_tips(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    tip = commit_all(wt, "f")
    main_before = git(proj.root, "rev-parse", "main").strip()
    proj.ok("merge", "a")
    backups = git(proj.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/wf/backup")
    assert "refs/wf/backup/sonnet/a/" in backups and tip in backups
    assert "refs/wf/backup/main/" in backups and main_before in backups


def test_unmerged_branch_of_an_archived_task_is_kept(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    tip = commit_all(wt, "unmerged")
    git(wt, "switch", "-q", "--detach", "main")
    proj.ok("done", "a")  # archived by hand, never merged
    r = proj("doctor", "--fix")
    assert "sonnet/a: task archived but the branch has commits not in main" in r.out
    assert git(proj.root, "rev-parse", "sonnet/a").strip() == tip


def test_reuse_never_leaves_commits_behind(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    commit_all(wt, "f")
    proj.ok("merge", "a")
    (wt / "late.txt").write_text("late\n")
    late = commit_all(wt, "late work on the detached tree")
    rows = {r["name"]: r for r in json.loads(proj.ok("wt", "list", "--json"))}
    assert rows["sonnet"]["state"] == "busy" and rows["sonnet"]["by"] == "1 commits on no branch"
    rec = json.loads(proj.ok("wt", "add", "sonnet", "b", "--json"))
    assert rec["path"].endswith("/sonnet-2")
    assert git(wt, "rev-parse", "HEAD").strip() == late


def test_a_tree_linked_to_the_main_checkout_is_never_used(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    commit_all(wt, "f")
    proj.ok("merge", "a")
    (wt / ".git").write_text(f"gitdir: {proj.root / '.git'}\n")  # now it points at the main repo
    main_branch = git(proj.root, "symbolic-ref", "--short", "HEAD")
    rows = {r["name"]: r for r in json.loads(proj.ok("wt", "list", "--json"))}
    assert rows["sonnet"]["state"] == "broken"
    # allocation relinks the tree to its own registration before using it
    rec = json.loads(proj.ok("wt", "add", "sonnet", "b", "--json"))
    assert rec["path"] == str(wt)
    assert "/.git/worktrees/" in (wt / ".git").read_text()
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == "sonnet/b"
    assert git(proj.root, "symbolic-ref", "--short", "HEAD") == main_branch


def test_merge_never_overwrites_an_ignored_file(proj: WfRunner) -> None:
    (proj.root / ".gitignore").write_text((proj.root / ".gitignore").read_text() + "local.cfg\n")
    commit_all(proj.root, "ignore local.cfg")
    (proj.root / "local.cfg").write_text("secret\n")
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "local.cfg").write_text("from the branch\n")
    git(wt, "add", "-f", "local.cfg")
    git(wt, "commit", "-qm", "track local.cfg")
    r = proj("merge", "a")
    assert r.code == 1 and "local.cfg" in r.err
    assert (proj.root / "local.cfg").read_text() == "secret\n"


# A `git` earlier on PATH that runs the real one, except that it hangs at one step of a
# merge (so that the test can kill wf there): before the merge is computed, before the two
# backup refs are written (one transaction), after the fast-forward, before the archive
# commit (its blobs and tree just written in-process), after it was made but before main
# moves to it, after main moved but before the real index took the new files, before the
# tree is detached, before the branch is deleted; and, where git builds the archive's tree
# in a temporary index (a setting makes wf leave the objects to git), while that exists.
FAKE_GIT = """#!/bin/sh
[ "$1" = -C ] && shift 2  # wf's `git -C TREE ...` (it runs in TREE too): the steps match the rest
hang() {{ echo $$ > "$WF_FAKE_GIT_MARKER"; exec sleep 3600; }}
case "$WF_FAKE_GIT_STEP:$*" in
  start:merge-tree*) hang ;;
  backups:update-ref\\ -m\\ wf\\ backup\\ --stdin) hang ;;
  archived:commit-tree*) [ "$5" = -F ] && hang ;;  # one parent: the archive commit
  archivemade:update-ref\\ -m\\ wf:\\ archive*) hang ;;
  tmpindex:write-tree*) hang ;;
  halfmade:update-index\\ --add\\ --cacheinfo*) [ -z "$GIT_INDEX_FILE" ] && hang ;;
  committed:switch\\ --quiet\\ --detach*) hang ;;
  detached:branch\\ -d*) hang ;;
  merged:merge\\ --quiet\\ --ff-only*) {git} "$@" && hang; exit $? ;;
esac
exec {git} "$@"
"""

KILL_STEPS = [
    "start",
    "backups",
    "merged",
    "archived",
    "archivemade",
    "tmpindex",
    "halfmade",
    "committed",
    "detached",
]
# a setting with which git writes objects its own way: wf builds the archive's tree in a
# temporary index then (the only way the tmpindex step is reached)
GIT_WRITES = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.fsyncObjectFiles",
    "GIT_CONFIG_VALUE_0": "false",
}


@pytest.mark.parametrize("step", KILL_STEPS)
@pytest.mark.timeout(120)
def test_kill_merge_at_each_step_then_finish(proj: WfRunner, step: str, tmp_path: Path) -> None:
    import shutil

    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    tip = commit_all(wt, "work to keep")
    before = reachable(proj.root)
    bin_dir = tmp_path / "fakegit"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(FAKE_GIT.format(git=shutil.which("git")))
    (bin_dir / "git").chmod(0o755)
    marker = tmp_path / "hung"
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        WF_FAKE_GIT_STEP=step,
        WF_FAKE_GIT_MARKER=str(marker),
        PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent),
        **(GIT_WRITES if step == "tmpindex" else {}),
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", "merge", "a"],
        cwd=proj.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text().strip():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    os.kill(int(marker.read_text()), signal.SIGKILL)  # the hung git, in its own process group
    git_dir = proj.root / ".git"
    if step == "halfmade":  # the state the issue found: main archived, the index not
        assert "DONE.md" in git(proj.root, "diff", "--cached", "--name-only")
    if step == "tmpindex":
        assert list(git_dir.glob("wf-index.*")) != []
    # nothing lost: every commit that was reachable still is (from main, a branch or a backup ref)
    assert before <= reachable(proj.root)
    r = proj("merge", "a")
    assert r.code == 0, r.err
    assert git(proj.root, "merge-base", "--is-ancestor", tip, "main", check=False) == ""
    assert (
        "- " in (proj.root / "DONE.md").read_text()
        and " a lane=sonnet" in (proj.root / "DONE.md").read_text()
    )
    assert git(proj.root, "branch", "--list", "sonnet/a") == ""
    assert git(proj.root, "status", "--porcelain") == ""
    assert git(proj.root, "log", "--format=%s", "main").count("a: Task a") == 1
    assert "## a: " not in (proj.root / "TASKS.md").read_text()
    merge_commit = git(proj.root, "log", "--format=%H", "--grep=^a: Task a$", "main").strip()
    assert (
        f" a lane=sonnet model=sonnet commit={merge_commit} -- Task a" in (proj.root / "DONE.md").read_text()
    )
    assert "## a: " not in (proj.root / "TASKS.md").read_text()
    merge_commit = git(proj.root, "log", "--format=%H", "--grep=^a: Task a$", "main").strip()
    assert (
        f" a lane=sonnet model=sonnet commit={merge_commit} -- Task a" in (proj.root / "DONE.md").read_text()
    )
    assert before <= reachable(proj.root)
    assert git(proj.root, "diff", "--cached", "--name-only") == ""
    assert list(git_dir.glob("wf-index.*")) == []


def test_rerun_repairs_a_half_made_archive_commit_made_by_hand(proj: WfRunner) -> None:
    """The exact state a kill inside the archive commit can leave, made with git itself:
    main at the archive commit, index and files of TASKS.md and DONE.md as before it."""
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    commit_all(wt, "work")
    proj.ok("merge", "a")
    git(proj.root, "reset", "-q", "main^", "--", "TASKS.md", "DONE.md")
    git(proj.root, "checkout", "main^", "--", "TASKS.md")
    (proj.root / "DONE.md").unlink()
    assert git(proj.root, "status", "--porcelain") != ""
    r = proj("merge", "a")
    assert r.code == 0, r.err
    assert "set to main's" in r.out
    assert git(proj.root, "status", "--porcelain") == ""
    assert " a lane=sonnet" in (proj.root / "DONE.md").read_text()
    assert "## a: " not in (proj.root / "TASKS.md").read_text()


# ------------------------------------------------------------------ clones


def test_clone_mode_commit_arrives_through_merge(proj: WfRunner) -> None:
    proj.ok("config", "isolation", "clone")
    commit_all(proj.root, "clone mode")
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    clone = Path(rec["path"])
    assert rec["isolation"] == "clone"
    assert (clone / ".git").is_dir()
    assert git(clone, "remote") == ""
    assert git(clone, "config", "core.hooksPath").strip() == "/dev/null"
    (clone / "cloned.txt").write_text("from the clone\n")
    tip = commit_all(clone, "clone work")
    out = proj.ok("merge", cwd=clone)
    assert out.startswith("merged sonnet/a")
    assert (proj.root / "cloned.txt").read_text() == "from the clone\n"
    assert git(proj.root, "rev-parse", "main~1^2").strip() == tip
    assert git(clone, "for-each-ref", "refs/heads") == ""
    # reused for the next task, from main's new commit
    rec2 = json.loads(proj.ok("wt", "add", "sonnet", "b", "--json"))
    assert rec2["path"] == str(clone)
    assert git(clone, "rev-parse", "HEAD").strip() == git(proj.root, "rev-parse", "main").strip()


# ------------------------------------------------------------------ list, prune, doctor


def test_wt_list_and_prune(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    commit_all(wt, "f")
    proj.ok("wt", "add", "opus", "b")
    proj.ok("merge", "a")
    rows = {r["name"]: r for r in json.loads(proj.ok("wt", "list", "--json"))}
    assert rows["sonnet"]["state"] == "free" and rows["sonnet"]["task"] is None
    assert rows["opus"]["state"] == "busy" and rows["opus"]["by"] == "task b"
    assert rows["opus"]["branch"] == "opus/b"
    assert rows["sonnet"]["size"] > 0
    assert "would remove sonnet" in proj.ok("wt", "prune", "--dry-run")
    assert wt.exists()
    proj.ok("wt", "prune")
    assert not wt.exists()
    assert (proj.root / ".worktrees" / "opus").exists()  # busy: kept


def test_prune_never_removes_unmerged_or_dirty(proj: WfRunner) -> None:
    rec = json.loads(proj.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "f.txt").write_text("f\n")
    commit_all(wt, "unmerged work")
    worktrees.release(projectmod.load(proj.root), "sonnet")  # free, but its HEAD is not in main
    assert proj.ok("wt", "prune") == "nothing to prune\n"
    assert wt.exists()
    git(wt, "switch", "-q", "--detach", "main")
    (wt / "scratch.txt").write_text("dirty\n")
    assert proj.ok("wt", "prune") == "nothing to prune\n"
    assert (wt / "scratch.txt").exists()


def test_doctor_finds_and_fixes(proj: WfRunner) -> None:
    lock = proj.root / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 600
    os.utime(lock, (old, old))
    wt = proj.root / ".worktrees" / "gone"
    git(proj.root, "worktree", "add", "-q", "--detach", str(wt))
    subprocess.run(["rm", "-rf", str(wt)], check=True)
    r = proj("doctor")
    assert r.code == 1
    assert "stale-lock: .git/index.lock" in r.out
    assert "registration:" in r.out and "folder is gone" in r.out
    r = proj("doctor", "--fix")
    assert not lock.exists()
    r = proj("doctor")
    assert r.code == 0 and r.out.endswith("all consistent\n")
    assert "adapter: claude: 2.1.332 (Claude Code) at " in r.out


@pytest.mark.parametrize("bad", ["../x", "-x", "a..b", "x.lock", "A", "--upload-pack=evil", "a b", "a/../b"])
def test_unsafe_names_never_reach_git(proj: WfRunner, bad: str) -> None:
    before = git(proj.root, "for-each-ref")
    for args in (
        ("wt", "add", "--", bad, "a"),
        ("wt", "add", "--", "sonnet", bad),
        ("merge", "--", bad),
        ("merge", f"sonnet/{bad}"),
        ("merge", "--", f"{bad}/a"),
    ):
        r = proj(*args)
        assert r.code == 1, (args, r.err)
        assert "bad " in r.err, (args, r.err)
        assert "git " not in r.err, (args, r.err)  # refused before any git command ran
    assert git(proj.root, "for-each-ref") == before
    assert not (proj.root / ".worktrees").exists()


def test_git_speaks_english_to_wf_whatever_the_users_language(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wf reads git's `error:`/`fatal:` lines (GitError.reason): a person whose git speaks
    German must still get git's reason, not a hint line or 'exit 1'."""
    from wf.trees import gitops

    monkeypatch.setenv("LANGUAGE", "de")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # a locale this machine has; LANGUAGE picks German
    with pytest.raises(gitops.GitError) as info:
        gitops.run(repo, "checkout", "no-such-branch")
    assert info.value.reason.startswith("error:"), info.value.stderr


def test_git_output_that_is_not_utf8_is_kept_byte_for_byte(repo: Path) -> None:
    """A file name git prints raw (core.quotePath off) in another encoding survives the
    round trip through wf's text (surrogate escapes), and so names the same file."""
    from wf.trees import gitops

    name = "caf\xe9.txt".encode("latin-1")
    (repo / os.fsdecode(name)).write_bytes(b"x")
    out = gitops.run(repo, "-c", "core.quotePath=false", "status", "--porcelain", "-uall").out
    assert os.fsencode(out.split(maxsplit=1)[1].rstrip("\n")) == name


def test_an_interrupt_lets_a_running_git_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (KeyboardInterrupt in wf) while git runs: git is in its own process group
    so that it is never stopped half-way through a commit; wf must not kill it either (as
    subprocess.run does on any exception). wf stops once git has finished."""
    import threading

    from wf.trees import gitops

    gitops._execute(tmp_path, ["version"], {}, None)  # GitPython loaded (its import runs `git version`)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "finished"
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\nsleep 1\necho done > '{marker}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # an xdist worker may ignore it
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gitops._execute(tmp_path, ["commit"], {}, None)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    assert marker.exists(), "git was killed by wf's interrupt"


def test_a_vanished_folder_is_not_reported_as_git_missing(tmp_path: Path) -> None:
    from wf.base.errors import WfError
    from wf.trees import gitops

    with pytest.raises(WfError) as e:
        gitops._execute(tmp_path / "gone", ["version"], {}, None)
    assert "not installed" not in str(e.value) and "gone" in str(e.value)
