"""``wf merge`` across machines (issue 24, item 4), through the CLI: machines are clones
of a bare repository served by git daemon on loopback, each running wf as its own
process. A machine behind the remote fetches first; main is pushed with a lease; a lost
race is redone on the new main; the task's branch reaches the remote before anything
else; whatever refuses changes nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.machines import Machine, Shared, git

TASKS = "".join(
    f"## t{n}: Task {n}\nModel: sonnet\nDone: true\n\nBody of task {n}.\n\n" for n in range(1, 7)
).join(["# Tasks\n\n", ""])
MARKERS = ("<<<<<<<", ">>>>>>>", "=======")


def branch(m: Machine, task: str, text: str | None = None) -> str:
    """A task branch ``sonnet/<task>`` with one commit of its own; its tip."""
    m.git("switch", "-qc", f"sonnet/{task}")
    (m.root / f"{task}.txt").write_text(text or f"work of {task} on {m.name}\n")
    m.git("add", f"{task}.txt")
    m.git("commit", "-qm", f"work {task}")
    m.git("switch", "-q", "main")
    return m.git("rev-parse", f"sonnet/{task}").strip()


def edit(m: Machine, old: str, new: str) -> str:
    """A person's uncommitted edit of TASKS.md; the file's new text."""
    path = m.root / "TASKS.md"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path.read_text()


def _show(shared: Shared, spec: str) -> str:
    return git(shared.bare, "show", spec)


def _is_ancestor(shared: Shared, sha: str) -> bool:
    r = subprocess.run(
        ["git", "merge-base", "--is-ancestor", sha, "main"], cwd=shared.bare, capture_output=True
    )
    return r.returncode == 0


@pytest.mark.parametrize("daemon", [True, False], ids=["git-daemon", "file"])
def test_a_machine_behind_fetches_first_and_keeps_a_persons_uncommitted_edit(
    tmp_path: Path, daemon: bool
) -> None:
    with Shared(tmp_path, daemon=daemon) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        t1, t2 = branch(a, "t1"), branch(b, "t2")
        a.wf("merge", "t1", check=True)
        mine = edit(b, "Body of task 5.", "Body of task 5, as a person on b rewrote it.")
        r = b.wf("merge", "t2", check=True)
        assert "brought main up to origin's" in r.stdout
        assert _is_ancestor(shared, t1) and _is_ancestor(shared, t2)
        assert b.git("rev-parse", "main") == a.git("ls-remote", "origin", "refs/heads/main").split()[0] + "\n"
        done = _show(shared, "main:DONE.md")
        assert " t1 " in done and " t2 " in done
        tasks = _show(shared, "main:TASKS.md")
        assert "## t1:" not in tasks and "## t2:" not in tasks and "Body of task 5.\n" in tasks
        # the person's edit is still uncommitted on b, on top of the new main
        here = (b.root / "TASKS.md").read_text()
        assert "as a person on b rewrote it" in here and "## t1:" not in here and "## t2:" not in here
        assert here == mine.replace(
            "## t1: Task 1\nModel: sonnet\nDone: true\n\nBody of task 1.\n\n", ""
        ).replace("## t2: Task 2\nModel: sonnet\nDone: true\n\nBody of task 2.\n\n", "")
        assert b.git("status", "--porcelain", "--untracked-files=no") == " M TASKS.md\n"
        assert (b.root / "t1.txt").exists()
        # the task branches were pushed first, and go once main holds them
        assert not [r for r in shared.refs() if r.startswith("refs/heads/sonnet/")]
        for m in (a, b):
            assert not any(x in (m.root / "TASKS.md").read_text() for x in MARKERS)


def test_a_lost_race_redoes_the_merge_on_the_new_main(tmp_path: Path) -> None:
    """b merged t2 and lost the race for main (the remote is set back to before its
    push, as if a had pushed first); a then merges t1. b's next merge redoes its own
    merge and archive commit on a's main: nothing of either is lost."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        start = shared.refs()["refs/heads/main"]
        t1, t2, t3 = branch(a, "t1"), branch(b, "t2"), branch(b, "t3")
        b.wf("merge", "t2", check=True)
        git(shared.bare, "update-ref", "refs/heads/main", start)  # b's push never happened
        a.wf("merge", "t1", check=True)
        edit(b, "Body of task 6.", "Body of task 6, edited on b.")
        r = b.wf("merge", "t3", check=True)
        assert "redid this machine's commits" in r.stdout
        for tip in (t1, t2, t3):
            assert _is_ancestor(shared, tip)
        done = _show(shared, "main:DONE.md")
        lines = [ln for ln in done.splitlines() if ln.startswith("- ")]
        assert [ln.split()[2] for ln in lines] == ["t1", "t2", "t3"]
        # each archive line names a merge commit that is on the shared main
        for ln in lines:
            sha = ln.split("commit=")[1].split()[0]
            assert _is_ancestor(shared, sha), ln
            assert len(git(shared.bare, "rev-list", "--parents", "-n1", sha).split()) == 3
        tasks = _show(shared, "main:TASKS.md")
        assert [x for x in ("## t1:", "## t2:", "## t3:") if x in tasks] == []
        assert "Body of task 6, edited on b." in (b.root / "TASKS.md").read_text()
        assert "Body of task 6, edited on b." not in tasks
        assert b.git("rev-parse", "main").strip() == shared.refs()["refs/heads/main"]


def test_the_branch_reaches_the_remote_before_main_does(tmp_path: Path) -> None:
    """A host that refuses main: the merge stays on this machine (exit 1, said), but the
    task's branch is on the remote already, so the work survives the machine."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        hook = shared.bare / "hooks" / "pre-receive"
        hook.write_text(
            '#!/bin/sh\nwhile read old new ref; do [ "$ref" = refs/heads/main ] && exit 1; done\nexit 0\n'
        )
        hook.chmod(0o755)
        t1 = branch(a, "t1")
        r = a.wf("merge", "t1")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "origin refused main" in r.stderr and "Traceback" not in r.stderr
        assert shared.refs()["refs/heads/sonnet/t1"] == t1


def test_offline_a_merge_refuses_and_changes_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        branch(a, "t1")
        before = (a.git("rev-parse", "main", "sonnet/t1"), (a.root / "TASKS.md").read_bytes())
        shared.stop()
        r = a.wf("merge", "t1")
        assert r.returncode == 1 and "unreachable" in r.stderr and "Traceback" not in r.stderr
        assert (a.git("rev-parse", "main", "sonnet/t1"), (a.root / "TASKS.md").read_bytes()) == before


def test_an_uncommitted_edit_that_clashes_with_the_remote_refuses_and_changes_nothing(tmp_path: Path) -> None:
    """b's person edits t1's text while a archives t1: b's merge cannot carry the edit
    over (never conflict markers), so it refuses and leaves b exactly as it was."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        branch(a, "t1")
        branch(b, "t2")
        a.wf("merge", "t1", check=True)
        mine = edit(b, "Body of task 1.", "Body of task 1, still wanted on b.")
        main_before = b.git("rev-parse", "main")
        r = b.wf("merge", "t2")
        assert r.returncode == 1 and "cannot be carried over" in r.stderr, r.stdout + r.stderr
        assert (b.root / "TASKS.md").read_text() == mine
        assert b.git("rev-parse", "main") == main_before
        assert b.git("rev-parse", "--verify", "-q", "sonnet/t2")
        assert not (b.root / ".wf" / "xmerge-carry.json").exists()


def test_a_remote_branch_with_commits_this_one_lacks_is_not_overwritten(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        theirs = branch(a, "t2", "a's version\n")
        a.git("push", "-q", "origin", "sonnet/t2")
        branch(b, "t2", "b's version\n")
        main_before = b.git("rev-parse", "main")
        r = b.wf("merge", "t2")
        assert r.returncode == 1 and "has commits this machine's sonnet/t2 lacks" in r.stderr
        assert shared.refs()["refs/heads/sonnet/t2"] == theirs
        assert b.git("rev-parse", "main") == main_before


def test_a_persons_unpushed_commit_is_not_rewritten_when_main_diverged(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        branch(a, "t1")
        branch(b, "t2")
        a.wf("merge", "t1", check=True)
        (b.root / "notes.txt").write_text("a person's commit on b\n")
        b.git("add", "notes.txt")
        b.git("commit", "-qm", "notes")
        mine = b.git("rev-parse", "main")
        r = b.wf("merge", "t2")
        assert r.returncode == 1 and "have diverged" in r.stderr and mine[:12] in r.stderr
        assert b.git("rev-parse", "main") == mine


def test_without_a_shared_remote_wf_merge_never_talks_to_it(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, toml="")
        branch(a, "t1")
        before = shared.refs()
        r = a.wf("merge", "t1", check=True)
        assert "origin" not in r.stdout
        assert shared.refs() == before
        assert a.git("rev-list", "--count", "origin/main..main").strip() == "3"


def test_edits_next_to_the_remotes_changes_are_carried_task_by_task(tmp_path: Path) -> None:
    """a's person renames t4 (the heading right below t3, which b archives) and appends a
    line to the archive (where b appends t3's): a line merge would conflict on both; wf
    carries both over, task by task and as a union, with no markers."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        branch(a, "t1")
        a.wf("merge", "t1", check=True)
        b.git("pull", "-q", "origin", "main")
        branch(b, "t3")
        branch(a, "t5")
        edit(a, "## t4: Task 4\n", "## t4: Task four, renamed on a\n")
        with (a.root / "DONE.md").open("a") as f:
            f.write("A person's note at the end of the archive.\n")
        b.wf("merge", "t3", check=True)
        a.wf("merge", "t5", check=True)
        here = (a.root / "TASKS.md").read_text()
        assert "## t4: Task four, renamed on a\n" in here and "## t3:" not in here and "## t5:" not in here
        archive = (a.root / "DONE.md").read_text()
        assert "\nA person's note at the end of the archive.\n" in archive
        assert [ln.split()[2] for ln in archive.splitlines() if ln.startswith("- ")] == ["t1", "t3", "t5"]
        assert not any(x in here + archive for x in MARKERS)
        remote_archive = _show(shared, "main:DONE.md")
        assert [ln.split()[2] for ln in remote_archive.splitlines() if ln.startswith("- ")] == [
            "t1",
            "t3",
            "t5",
        ]
        assert "A person's note" not in remote_archive and "Task four" not in _show(shared, "main:TASKS.md")


def test_a_conflict_with_the_remotes_main_is_found_before_merging(tmp_path: Path) -> None:
    """a merges a branch that writes shared.txt; b's branch writes it too. b fetches
    first, so its merge conflicts on the remote's main and makes no merge commit at all
    (its main is the remote's, the branch untouched)."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        for m, task in ((a, "t1"), (b, "t2")):
            m.git("switch", "-qc", f"sonnet/{task}")
            (m.root / "shared.txt").write_text(f"{m.name}'s version\n")
            m.git("add", "shared.txt")
            m.git("commit", "-qm", f"work {task}")
            m.git("switch", "-q", "main")
        a.wf("merge", "t1", check=True)
        tip = b.git("rev-parse", "sonnet/t2")
        r = b.wf("merge", "t2")
        assert r.returncode == 1 and "conflicts" in r.stderr and "shared.txt" in r.stderr
        assert b.git("rev-parse", "main").strip() == shared.refs()["refs/heads/main"]
        assert b.git("rev-parse", "sonnet/t2") == tip
        assert b.git("rev-list", "--merges", "main").count("\n") == 1  # a's merge only


def test_another_uncommitted_file_the_move_would_touch_refuses(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, toml='shared = "origin"\n\n\n\n# a comment\n')
        b = shared.machine("b")
        branch(b, "t2")
        (a.root / "wf.toml").write_text('shared = "origin"\n\n\n\n# a comment, changed on a\n')
        a.git("commit", "-qam", "a's wf.toml")
        a.git("push", "-q", "origin", "main")
        mine = 'shared = "origin"  # b\'s own note\n\n\n\n# a comment\n'
        (b.root / "wf.toml").write_text(mine)
        main_before = b.git("rev-parse", "main")
        r = b.wf("merge", "t2")
        assert r.returncode == 1 and "wf.toml" in r.stderr, r.stdout + r.stderr
        assert (b.root / "wf.toml").read_text() == mine
        assert b.git("rev-parse", "main") == main_before


def test_a_move_of_main_killed_half_way_is_finished_by_the_next_merge(tmp_path: Path) -> None:
    """The state a kill leaves inside a move of main (see xmerge.advance): TASKS.md set
    back to the old main's version, the person's bytes saved in .wf/xmerge-carry.json.
    The next wf merge puts them back before doing anything else."""
    import base64

    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        branch(a, "t1")
        mine = edit(a, "Body of task 4.", "Body of task 4, a person's words.")
        head = a.git("rev-parse", "HEAD").strip()
        (a.root / "TASKS.md").write_text(TASKS)  # as the move left it, before git moved main
        saved = base64.b64encode(mine.encode()).decode()
        record = {"old": head, "new": "0" * 40, "files": {"TASKS.md": [saved, saved]}}
        (a.root / ".wf").mkdir(exist_ok=True)
        (a.root / ".wf" / "xmerge-carry.json").write_text(json.dumps(record))
        r = a.wf("merge", "t1", check=True)
        assert "put back the uncommitted changes of TASKS.md" in r.stdout
        here = (a.root / "TASKS.md").read_text()
        assert "Body of task 4, a person's words." in here and "## t1:" not in here
        assert not (a.root / ".wf" / "xmerge-carry.json").exists()


def test_a_branch_another_machine_pushed_is_merged_from_the_remote(tmp_path: Path) -> None:
    """a pushed its task's branch (the first step of its wf merge) and went away; b has
    no such branch, and merges the remote's."""
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        tip = branch(a, "t1")
        a.git("push", "-q", "origin", "sonnet/t1")
        r = b.wf("merge", "t1", check=True)
        assert "fetched sonnet/t1 from origin" in r.stdout
        assert _is_ancestor(shared, tip) and " t1 " in _show(shared, "main:DONE.md")
        assert "refs/heads/sonnet/t1" not in shared.refs()


def test_a_carry_record_wf_did_not_write_is_refused(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        branch(a, "t1")
        head = a.git("rev-parse", "HEAD").strip()
        (a.root / ".wf").mkdir(exist_ok=True)
        record = {"old": head, "new": head, "files": {"../outside": ["", ""]}}
        (a.root / ".wf" / "xmerge-carry.json").write_text(json.dumps(record))
        r = a.wf("merge", "t1")
        assert r.returncode == 1 and "is not one wf wrote" in r.stderr and "Traceback" not in r.stderr
        assert not (a.root.parent / "outside").exists()
        assert a.git("rev-parse", "main").strip() == head


def test_a_merge_killed_before_its_archive_commit_is_finished_on_the_new_main(tmp_path: Path) -> None:
    """The state a kill of a's wf merge leaves after the merge commit and the archiving,
    before the archive commit: the merge commit unpushed, TASKS.md without t1 and a new
    archive with t1's line, both uncommitted. Meanwhile b merged t2 (its archive is new
    too). a's next wf merge redoes the merge on b's main and keeps both archive lines,
    t1's naming the redone merge commit."""
    from wf.tasks.archive import HEADER

    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        tip = branch(a, "t1")
        branch(b, "t2")
        a.git("merge", "-q", "--no-ff", "-m", "t1: Task 1", "sonnet/t1")
        made = a.git("rev-parse", "HEAD").strip()
        edit(a, "## t1: Task 1\nModel: sonnet\nDone: true\n\nBody of task 1.\n\n", "")
        line = f"- 2026-12-03T10:00Z t1 lane=sonnet model=sonnet commit={made} -- Task 1\n"
        (a.root / "DONE.md").write_text(HEADER + line)
        b.wf("merge", "t2", check=True)
        r = a.wf("merge", "t1", check=True)
        assert "redid this machine's commits" in r.stdout
        remote_archive = _show(shared, "main:DONE.md")
        lines = [ln for ln in remote_archive.splitlines() if ln.startswith("- ")]
        assert [ln.split()[2] for ln in lines] == ["t2", "t1"]
        named = lines[1].split("commit=")[1].split()[0]
        assert named != made and _is_ancestor(shared, named) and _is_ancestor(shared, tip)
        assert "## t1:" not in _show(shared, "main:TASKS.md")
        assert (a.root / "DONE.md").read_text() == remote_archive
