"""Merges nobody watches: a person's typo never strands merged work, the gate runs on
every merge and says so at once, and backup refs do not pile up."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task
from tests.trees.test_tree_lifecycle import _fake_tools, commit_all, proj  # noqa: F401  (fixtures)


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
    proj.ok("config", "backup_days", "36500")  # a hundred years (the most it takes): 2020 is not that old
    worked(proj, "a")
    assert "backup ref" not in proj.ok("merge", "a")
    assert set(refs) <= backups(proj.root)
    (proj.root / "wf.toml").write_text('backup_days = "two weeks"\n')
    r = proj("doctor")
    assert r.code == 1 and 'backup_days must be a number, not "two weeks"' in r.err
    assert "Traceback" not in r.err


# ------------------------------------------------------------------ item: the gate

GATE = (
    f"{sys.executable} -c \"import os, sys; print('checking'); "
    "print('boom: breaks-gate.txt is here') if os.path.exists('breaks-gate.txt') else None; "
    "sys.exit(1 if os.path.exists('breaks-gate.txt') else 0)\""
)


def gate_result(root: Path, sha: str) -> dict[str, Any]:
    """The gate's result at ``sha``, once the background run has recorded it."""
    path = root / ".wf" / "gate" / f"{sha}.json"
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, "the gate never recorded a result"
        time.sleep(0.1)
    return dict(json.loads(path.read_text()))


def main_sha(root: Path) -> str:
    return git(root, "rev-parse", "main").strip()


def red_merge(o: Orch, tid: str) -> str:
    """``wf merge`` of a branch that breaks the gate; the main commit it ran at."""
    wt = Path(json.loads(o.wf.ok("wt", "add", "a", tid, "--json"))["path"])
    (wt / "breaks-gate.txt").write_text(f"{tid}\n")
    commit_all(wt, f"{tid} breaks the gate")
    out = o.wf.ok("merge", tid)
    sha = main_sha(o.root)
    assert f"gate: `{GATE}` started at {sha[:12]} in the background" in out
    assert gate_result(o.root, sha)["ok"] is False
    return sha


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


@pytest.mark.timeout(120)
def test_a_manual_merge_runs_the_gate_and_a_red_one_shows_in_orch_status(o: Orch) -> None:
    o.setup(lanes_toml("a", gate=GATE), task("a1", "a") + task("a2", "a"))
    sha = red_merge(o, "a1")
    assert not (o.root / ".wf" / "gate" / f"{sha}.log").read_bytes().startswith(b"Traceback")
    out = o.wf.ok("orch", "status")
    assert out.splitlines()[:3] == [
        f"gate red at {sha[:12]}: `{GATE}` exit 1 (whole output: .wf/gate/{sha}.out)",
        "| checking",
        "| boom: breaks-gate.txt is here",
    ]
    assert out.splitlines()[-1] == "no active lanes"
    # a green gate after it: orch status says nothing of the gate any more
    wt = Path(json.loads(o.wf.ok("wt", "add", "a", "a2", "--json"))["path"])
    (wt / "breaks-gate.txt").unlink()
    commit_all(wt, "a2 mends the gate")
    r = json.loads(o.wf.ok("merge", "a2", "--json"))
    assert r["gate"] == "started" and r["gate_commit"] == main_sha(o.root)
    assert gate_result(o.root, main_sha(o.root))["ok"] is True
    assert o.wf.ok("orch", "status") == "no active lanes\n"


def test_merge_no_gate_does_not_start_it_and_says_so(o: Orch) -> None:
    o.setup(lanes_toml("a", gate=GATE), task("a1", "a"))
    wt = Path(json.loads(o.wf.ok("wt", "add", "a", "a1", "--json"))["path"])
    (wt / "breaks-gate.txt").write_text("x\n")
    commit_all(wt, "breaks it")
    out = o.wf.ok("merge", "a1", "--no-gate")
    assert f"gate: not run (--no-gate); `{GATE}` was not started" in out
    assert not list((o.root / ".wf" / "gate").glob("*")) if (o.root / ".wf" / "gate").exists() else True
    assert "--no-gate" in o.wf.ok("merge", "--help")


def test_a_merge_without_a_gate_says_nothing_of_it(proj: WfRunner) -> None:
    worked(proj, "a")
    r = json.loads(proj.ok("merge", "a", "--json"))
    assert r["gate"] == "none" and r["gate_commit"] is None
    worked(proj, "b")
    assert "gate" not in proj.ok("merge", "b")


def worker_merged(o: Orch, tid: str) -> str:
    """Pick ``tid`` and let the scripted worker do it (it runs wf merge, which starts the
    gate): the main commit of its merge, once the gate has a result there."""
    rep = o.work(o.wf.ok("orch", "pick", "a", "--id", tid))
    assert rep is not None and rep.result == "done"
    sha = main_sha(o.root)
    assert gate_result(o.root, sha)["ok"] is False
    return sha


@pytest.mark.timeout(180)
def test_one_open_fix_task_however_many_red_commits(o: Orch) -> None:
    o.setup(
        lanes_toml("a", gate=GATE),
        task("a1", "a")
        + task("a2", "a", "write a2.txt x")
        + task("a3", "a", "write a3.txt x")
        + task("a4", "a", "write a4.txt x"),
    )
    red_merge(o, "a1")
    second = worker_merged(o, "a2")
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--no-pick")
    fix = f"fix-gate-{second[:8]}"
    assert f"gate red at {second[:12]}: added P0 task {fix}" in out
    # the fix task is handed back: it waits for a person, and wf's note does not wake it
    assert f"Task: {fix} " in o.wf.ok("orch", "pick", "a")
    o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "cannot", "--no-pick")
    third = worker_merged(o, "a3")
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--no-pick")
    assert f"gate still red at {third[:12]}: noted on the open fix task {fix}" in out
    assert json.loads((o.root / ".wf" / "gate" / f"{third}.json").read_text())["handled"] == fix
    assert "Task: a4 " in o.wf.ok("orch", "pick", "a")  # not the held P0 fix task
    o.wf.ok("orch", "post", "a", "--result", "wip", "--note", "later", "--no-pick")
    o.wf.ok("status", "a4", "pending")
    fixes = [t["id"] for t in json.loads(o.wf.ok("list", "--json")) if t["id"].startswith("fix-gate-")]
    assert fixes == [fix]
    notes = json.loads(o.wf.ok("show", fix, "--json"))["notes"]
    assert any(
        f"the gate is still red at {third[:12]} (exit 1: boom: breaks-gate.txt is here)" in n for n in notes
    )
    # once that fix task is done, a later red gate gets a fix task of its own
    o.wf.ok("done", fix)
    fourth = worker_merged(o, "a4")
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--no-pick")
    assert f"gate red at {fourth[:12]}: added P0 task fix-gate-{fourth[:8]}" in out


@pytest.mark.timeout(180)
def test_orch_run_says_a_red_gate_with_its_command_and_tail(o: Orch) -> None:
    o.setup(lanes_toml("a", gate=GATE), task("a1", "a", "write breaks-gate.txt oops"))
    r = o.proc("orch", "run", "a", timeout=170)
    lines = [ln.split(" ", 1)[1] for ln in r.stdout.splitlines()]  # after the time of day
    at = next(i for i, ln in enumerate(lines) if ln.startswith("gate red at "))
    sha = lines[at].split()[3].rstrip(":")
    assert lines[at].endswith(f"`{GATE}` exit 1 (whole output: .wf/gate/{main_sha(o.root)}.out)")
    assert main_sha(o.root).startswith(sha)
    assert lines[at + 1 : at + 3] == ["| checking", "| boom: breaks-gate.txt is here"]
    # the post that meets the red result adds the fix task: before or after the gate's own
    # line, as the gate (started by the worker's merge) and the post happen to finish
    assert any(ln.startswith("a: gate red at") and "added P0 task" in ln for ln in lines)


@pytest.mark.timeout(180)
def test_a_red_gate_is_in_the_batch_summary_and_status(wf: WfRunner) -> None:
    from tests.night.test_batch import Batch

    b = Batch(wf)
    try:
        b.setup(lanes_toml("a", gate=GATE), task("a1", "a", "write breaks-gate.txt oops"))
        assert b.batch("1").returncode == 0
        st = b.wait_ended()
        lines = b.summary(st)
        at = next(i for i, ln in enumerate(lines) if " gate red at " in ln)
        assert lines[at].startswith("- ")
        assert f"`{GATE}` exit 1 (whole output: .wf/gate/" in lines[at]
        assert lines[at + 1 : at + 3] == ["  | checking", "  | boom: breaks-gate.txt is here"]
        assert st["gate"]["ok"] is False and st["gate"]["cmd"] == GATE
        assert st["gate"]["red"][1:] == ["| checking", "| boom: breaks-gate.txt is here"]
        text = b.batch("--status")
        assert st["gate"]["red"][0] in text.stdout.splitlines()
    finally:
        b.end_live()


def test_a_gate_run_under_way_or_done_is_not_run_again(o: Orch, tmp_path: Path) -> None:
    go = tmp_path / "go"
    slow = f'{sys.executable} -c "import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)"'
    o.setup(lanes_toml("a", gate=slow), task("a1", "a"))
    wt = Path(json.loads(o.wf.ok("wt", "add", "a", "a1", "--json"))["path"])
    (wt / "x.txt").write_text("x\n")
    commit_all(wt, "x")
    assert "gate: `" in o.wf.ok("merge", "a1")
    sha = main_sha(o.root)
    again = o.wf.ok("merge", "a1")  # finishes nothing, and the gate of that commit is under way
    assert f"gate: {sha[:12]} has a result or a run under way" in again
    go.write_text("")
    first = gate_result(o.root, sha)
    assert first["ok"] is True
    assert o.wf("gate-run", sha).code == 0  # a second start of that commit: the result stands
    assert json.loads((o.root / ".wf" / "gate" / f"{sha}.json").read_text()) == first


@pytest.mark.timeout(120)
def test_the_newest_gate_result_is_the_last_to_finish_whatever_the_file_times(o: Orch) -> None:
    o.setup(lanes_toml("a", gate=GATE), task("a1", "a") + task("a2", "a"))
    wt = Path(json.loads(o.wf.ok("wt", "add", "a", "a1", "--json"))["path"])
    (wt / "fine.txt").write_text("x\n")
    commit_all(wt, "fine")
    o.wf.ok("merge", "a1")
    green = main_sha(o.root)
    assert gate_result(o.root, green)["ok"] is True
    red = red_merge(o, "a2")
    future = time.time() + 3600  # the green result's file rewritten later (as marking one handled does)
    os.utime(o.root / ".wf" / "gate" / f"{green}.json", (future, future))
    assert o.wf.ok("orch", "status").startswith(f"gate red at {red[:12]}: ")


def test_a_merge_that_cannot_archive_says_the_work_is_on_main_and_doctor_finishes_it(proj: WfRunner) -> None:
    _, tip = worked(proj, "a")
    tasks = proj.root / "TASKS.md"
    tasks.write_text(tasks.read_text() + "\n## a broken heading\n")  # no write at all until fixed
    r = proj("merge", "a")
    made = git(proj.root, "rev-parse", "main").strip()
    assert r.code == 1
    assert f"merged sonnet/a into main as {made[:12]}, but a is not archived" in r.err
    assert "run wf merge a again (or wf doctor --fix)" in r.err and "Traceback" not in r.err
    assert git(proj.root, "rev-parse", "main^2").strip() == tip
    tasks.write_text(tasks.read_text().replace("\n## a broken heading\n", ""))
    r = proj("doctor", "--fix")
    assert (
        f"merge: a: sonnet/a was merged into main as {made[:12]} but a is not archived: archived [fixed]"
        in r.out
    )
    assert json.loads(proj.ok("log", "--json"))[0]["commit"] == made


@pytest.mark.timeout(120)
def test_a_typo_typed_while_the_worker_works_does_not_hand_the_task_back(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    prompt = o.wf.ok("orch", "pick", "a")
    typo(o.root, "a1")  # a person, meanwhile
    rep = o.work(prompt)
    assert rep is not None and rep.result == "done", rep
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", str(rep.commit))
    assert out.startswith("a1: done as ") and "Task: a2" in out
    assert o.archived() == ["a1"]
    assert "  > Prio: high" in (o.root / "DONE.md").read_text()
