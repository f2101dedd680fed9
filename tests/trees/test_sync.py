"""``wf sync`` between machines (clones with their own state) around a bare repository
served by git daemon on loopback (and by file://): TASKS.md merged by task, the archive
and the cost log as unions, pushes that are leases, conflicts shown and never written."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
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


def edit(m: Machine, old: str, new: str) -> None:
    text = tasks(m)
    assert old in text
    (m.root / "TASKS.md").write_text(text.replace(old, new, 1))


def test_a_persons_text_changed_on_both_is_a_conflict_shown_never_written(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        edit(a, "Body of one.", "A's body.")
        sync(a)
        edit(b, "Body of one.", "B's body.")
        edit(b, "## t3: Three\n", "## t3: Three on b\n")  # a change that merges cleanly
        before_b, remote_before = tasks(b), shared.refs()["refs/heads/main"]
        head_b = b.git("rev-parse", "HEAD")
        r = b.wf("sync")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "t1: body" in r.stderr and "A's body." in r.stderr and "B's body." in r.stderr
        assert tasks(b) == before_b and b.git("rev-parse", "HEAD") == head_b
        assert shared.refs()["refs/heads/main"] == remote_before
        j = b.wf("sync", "--json")
        assert j.returncode == 4
        [c] = json.loads(j.stdout)["conflicts"]
        assert (c["task"], c["part"], c["kind"]) == ("t1", "body", "text")
        assert "B's body." in c["ours"] and "A's body." in c["theirs"]
        no_markers(tasks(a), tasks(b), remote_tasks(shared))
        # the person decides: the remote's text of t1; t3's rename still merges
        sync(b, "--theirs", "t1")
        assert "A's body." in tasks(b) and "B's body." not in tasks(b) and "## t3: Three on b\n" in tasks(b)
        assert remote_tasks(shared) == tasks(b)


def test_ours_keeps_this_machines_text_of_a_conflicting_task(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        edit(a, "## t2: Two\n", "## t2: Two by a\n")
        sync(a)
        edit(b, "## t2: Two\n", "## t2: Two by a and b\n")
        assert b.wf("sync").returncode == 4
        sync(b, "--ours", "t2")
        sync(a)
        for text in (tasks(a), tasks(b), remote_tasks(shared)):
            assert "## t2: Two by a and b\n" in text
        r = b.wf("sync", "--ours", "t2", "--theirs", "t2")
        assert r.returncode == 2 and "both name t2" in r.stderr
        r = b.wf("sync", "--ours", "../x")
        assert r.returncode == 1 and "bad id" in r.stderr


def test_tasks_added_on_each_machine_are_all_kept_in_place(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        edit(a, "## t2: Two\n", "## a1: Added on a\nModel: haiku\nDone: true\n\n## t2: Two\n")
        a.wf("add", "Last on a", "--id", "a2", check=True)
        b.wf("add", "Last on b", "--id", "b1", check=True)
        b.wf("note", "t3", "a note from b", check=True)
        a.wf("note", "t3", "a note from a", check=True)
        sync(a)
        out = sync(b)
        assert out["added"] == ["a1", "a2"]
        sync(a)
        assert tasks(a) == tasks(b) == remote_tasks(shared)
        text = tasks(a)
        assert text.index("## t1:") < text.index("## a1:") < text.index("## t2:") < text.index("## t3:")
        assert "## b1: Last on b" in text and "## a2: Last on a" in text
        assert "a note from a" in text and "a note from b" in text
        assert a.wf("check").returncode == 0


def test_the_newer_status_wins_when_both_machines_changed_it(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS.replace("## t1: One\n", "## t1: One\nStatus: wip: half done\n"))
        b = shared.machine("b")
        edit(a, "Status: wip: half done\n", "Status: in progress: worker since 2026-01-01T10:00Z\n")
        edit(b, "Status: wip: half done\n", "Status: in progress: pat since 2026-01-01T11:00Z\n")
        sync(a)
        sync(b)  # no conflict: wf's own status line, the newer wins
        sync(a)
        for text in (tasks(a), tasks(b), remote_tasks(shared)):
            assert "Status: in progress: pat since 2026-01-01T11:00Z\n" in text and "worker since" not in text


def test_the_archive_is_a_union_and_an_archived_task_leaves_a_claim_behind(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        a.wf("done", "t1", check=True)
        a.git("add", "TASKS.md", "DONE.md")
        a.git("commit", "-qm", "archive t1 on a")
        b.wf("status", "t1", "progress", "worker", check=True)  # b claimed it meanwhile: wf's lines only
        b.wf("done", "t3", check=True)
        sync(a)
        out = sync(b)
        assert out["removed"] == ["t1"] and out["archived"] == 1
        sync(a)
        done_a, done_b = (a.root / "DONE.md").read_text(), (b.root / "DONE.md").read_text()
        assert done_a == done_b == git(shared.bare, "show", "main:DONE.md")
        assert done_a.count(" t1 lane=") == 1 and done_a.count(" t3 lane=") == 1
        for text in (tasks(a), tasks(b), remote_tasks(shared)):
            assert "## t1:" not in text and "## t3:" not in text and "## t2: Two\n" in text
        assert a.wf("check").returncode == 0 and b.wf("check").returncode == 0


def test_a_task_archived_there_and_edited_here_is_a_conflict(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        a.wf("done", "t1", check=True)
        sync(a)
        edit(b, "Body of one.", "Body b rewrote.")
        r = b.wf("sync", "--json")
        assert r.returncode == 4
        [c] = json.loads(r.stdout)["conflicts"]
        assert (c["task"], c["kind"], c["theirs"]) == ("t1", "deleted", None) and "Body b rewrote." in c[
            "ours"
        ]
        sync(b, "--theirs", "t1")
        assert "## t1:" not in tasks(b) and " t1 lane=" in (b.root / "DONE.md").read_text()


def test_the_cost_log_is_a_union_without_duplicates(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        for m, lines in ((a, ["ts=1 id=t1 usd=1", "ts=2 id=t2 usd=2"]), (b, ["ts=3 id=t3 usd=3"])):
            (m.root / "out").mkdir()
            (m.root / "out" / "wf-cost.log").write_text("".join(x + "\n" for x in lines))
        sync(a)
        assert sync(b)["cost_lines"] == 2
        assert sync(a)["cost_lines"] == 1
        assert sync(b)["state"] == "up to date"
        want = {"ts=1 id=t1 usd=1", "ts=2 id=t2 usd=2", "ts=3 id=t3 usd=3"}
        for m in (a, b):
            got = (m.root / "out" / "wf-cost.log").read_text().splitlines()
            assert sorted(got) == sorted(want)
        shared_log = git(shared.bare, "show", "refs/wf/cost/log:wf-cost.log").splitlines()
        assert sorted(shared_log) == sorted(want)


def test_offline_sync_refuses_and_writes_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        edit(a, "Body of one.", "Edited offline.")
        before, head = tasks(a), a.git("rev-parse", "HEAD")
        shared.stop()
        r = a.wf("sync")
        assert r.returncode == 1 and "unreachable" in r.stderr and "Traceback" not in r.stderr
        assert tasks(a) == before and a.git("rev-parse", "HEAD") == head


def test_without_a_shared_remote_sync_says_how_to_set_one(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS, toml="")
        r = a.wf("sync")
        assert r.returncode == 1 and 'set shared = "<remote>" in wf.toml' in r.stderr
        assert "Traceback" not in r.stderr and shared.refs() == {
            "refs/heads/main": a.git("rev-parse", "HEAD").strip()
        }


def test_uncommitted_changes_to_a_file_the_merge_changes_are_never_overwritten(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        (a.root / "code.py").write_text("x = 1\n")
        a.git("add", "code.py")
        a.git("commit", "-qm", "code on a")
        sync(a)
        (b.root / "code.py").write_text("mine = 2\n")  # untracked on b, where a's commit adds it
        edit(b, "Body of two.", "Two on b.")
        head = b.git("rev-parse", "HEAD")
        r = b.wf("sync")
        assert r.returncode == 1 and "code.py" in r.stderr
        assert (b.root / "code.py").read_text() == "mine = 2\n" and b.git("rev-parse", "HEAD") == head
        assert "Two on b." in tasks(b) and "Two on b." not in remote_tasks(shared)


def fresh(shared: Shared, name: str, text: str) -> Machine:
    """A machine that made its own repository (wf init on its own), the remote empty."""
    home, root = shared.tmp / f"home-{name}", shared.tmp / name
    home.mkdir()
    root.mkdir()
    m = Machine(root, name, home)
    m.git("init", "-q", "-b", "main")
    (root / "TASKS.md").write_text(text)
    (root / "wf.toml").write_text('shared = "origin"\n')
    (root / ".gitignore").write_text(".wf/\nout/\n")
    m.git("add", "-A")
    m.git("commit", "-qm", f"the backlog of {name}")
    m.git("remote", "add", "origin", shared.url)
    return m


def wait_all(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    return [(p.wait(timeout=120), (p.communicate()[1] or "")) for p in procs]


def test_a_first_sync_on_two_machines_at_once_makes_one_history(tmp_path: Path) -> None:
    for round_ in range(3):
        (tmp_path / str(round_)).mkdir()
        with Shared(tmp_path / str(round_), daemon=True) as shared:
            a = fresh(shared, "a", "# Tasks\n\n## x1: From a\nModel: sonnet\nDone: true\n")
            b = fresh(shared, "b", "# Tasks\n\n## y1: From b\nModel: sonnet\nDone: true\n")
            ends = wait_all([a.popen("sync"), b.popen("sync")])
            assert [code for code, _ in ends] == [0, 0], ends
            sync(a)
            sync(b)
            main = shared.refs()["refs/heads/main"]
            for m in (a, b):
                assert m.git("rev-parse", "HEAD").strip() == main
                for root in git(m.root, "rev-list", "--max-parents=0", "main").split():
                    git(shared.bare, "merge-base", "--is-ancestor", root, main)
                assert "## x1: From a" in tasks(m) and "## y1: From b" in tasks(m)
            assert len(git(shared.bare, "rev-list", "--max-parents=0", "main").split()) == 2
            assert [r for r in shared.refs() if r.startswith("refs/heads/")] == ["refs/heads/main"]


def test_three_machines_syncing_at_once_lose_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        first = shared.seed("a", TASKS)
        ms = [first, shared.machine("b"), shared.machine("c")]
        added = []
        for n in range(3):
            for m in ms:
                tid = f"{m.name}{n}"
                m.wf("add", f"Task {tid}", "--id", tid, check=True)
                added.append(tid)
            ends = wait_all([m.popen("sync") for m in ms])
            assert all(code == 0 for code, _ in ends), ends
            # a sync that ended well pushed its tasks (it retried when another machine won)
            on_remote = remote_tasks(shared)
            assert [tid for tid in added if f"## {tid}: " not in on_remote] == []
        for m in [*ms, *ms]:
            sync(m)
        for m in ms:
            text = tasks(m)
            assert all(f"## {tid}: Task {tid}\n" in text for tid in added), text
            assert text == remote_tasks(shared)
            no_markers(text)


def test_kills_of_wf_sync_during_its_push_lose_no_task_archive_or_cost_line(tmp_path: Path) -> None:
    rng = random.Random(24)
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        added: list[str] = []
        archived: list[str] = []
        costs: list[str] = []
        killed = 0
        for n in range(8):
            for m in (a, b):
                tid = f"{m.name}{n}"
                m.wf("add", f"Task {tid}", "--id", tid, check=True)
                added.append(tid)
                (m.root / "out").mkdir(exist_ok=True)
                with open(m.root / "out" / "wf-cost.log", "a") as f:
                    f.write(f"ts={n} id={tid} usd=0.{n}\n")
                costs.append(f"ts={n} id={tid} usd=0.{n}")
            if n % 3 == 2:
                a.wf("done", f"a{n - 1}", check=True)
                archived.append(f"a{n - 1}")
            procs = [a.popen("sync"), b.popen("sync")]
            time.sleep(rng.uniform(0.0, 1.5))
            for p in procs:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGKILL)
                    killed += 1
                p.wait(timeout=60)
                p.communicate()
        for m in (a, b, a, b):
            sync(m)
        print(f"wf sync kills: {killed} of {2 * 8} syncs killed; lost tasks 0, archive lines 0, cost lines 0")
        assert killed > 0
        for m in (a, b):
            text, done = tasks(m), (m.root / "DONE.md").read_text()
            for tid in added:
                assert (f"## {tid}: Task {tid}\n" in text) != (f" {tid} lane=" in done), tid
            for tid in archived:
                assert done.count(f" {tid} lane=") == 1 and f"## {tid}:" not in text
            log = (m.root / "out" / "wf-cost.log").read_text().splitlines()
            assert sorted(log) == sorted(costs)
            no_markers(text, done)
            assert text == remote_tasks(shared)


def test_orch_pick_syncs_before_it_picks_and_post_after_it_posts(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", "# Tasks\n\n## t1: One\nModel: sonnet\nDone: true\n")
        (a.root / ".gitignore").write_text(".wf/\n.worktrees/\nout/\n")
        a.git("add", ".gitignore")
        a.git("commit", "-qm", "ignore wf's folders")
        a.git("push", "-q", "origin", "main")
        b = shared.machine("b")
        a.wf("add", "Urgent", "--id", "u1", "-p", "0", "--model", "sonnet", "--done", "true", check=True)
        sync(a)
        picked = json.loads(b.wf("orch", "pick", "--json", check=True).stdout)
        assert picked["record"]["id"] == "u1"  # a's task, known to b only through the sync
        r = b.wf("orch", "post", "sonnet", "--result", "wip", "--note", "half way", "--no-pick", check=True)
        assert "not synced" not in r.stdout
        assert "## u1: Urgent\nModel: sonnet\nPrio: 0\nDone: true\nStatus: wip: half way\n" in remote_tasks(
            shared
        )
        sync(a)
        assert "Status: wip: half way\n" in tasks(a)


def test_a_file_both_machines_changed_that_git_cannot_merge_refuses_the_sync(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        for m, text in ((a, "x = 'a'\n"), (b, "x = 'b'\n")):
            (m.root / "code.py").write_text(text)
            m.git("add", "code.py")
            m.git("commit", "-qm", f"code on {m.name}")
        sync(a)
        edit(b, "Body of two.", "Two on b.")
        head, remote_main = b.git("rev-parse", "HEAD"), shared.refs()["refs/heads/main"]
        r = b.wf("sync", "--json")
        assert r.returncode == 4 and json.loads(r.stdout)["paths"] == ["code.py"]
        assert b.git("rev-parse", "HEAD") == head and shared.refs()["refs/heads/main"] == remote_main
        assert (b.root / "code.py").read_text() == "x = 'b'\n" and "Two on b." in tasks(b)
        no_markers((b.root / "code.py").read_text(), tasks(b))


def test_archive_lines_added_on_both_machines_since_their_last_sync_are_kept_once(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        a.wf("done", "t3", check=True)
        sync(a)
        sync(b)
        a.wf("done", "t1", check=True)
        b.wf("done", "t2", check=True)
        sync(a)
        sync(b)
        sync(a)
        for m in (a, b):
            done = (m.root / "DONE.md").read_text()
            assert [done.count(f" {t} lane=") for t in ("t1", "t2", "t3")] == [1, 1, 1], done
            assert done == git(shared.bare, "show", "main:DONE.md")


def test_a_host_that_takes_only_branches_gets_the_cost_log_under_refs_heads(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        hook = shared.bare / "hooks" / "update"
        hook.write_text(
            '#!/bin/sh\ncase "$1" in refs/heads/*) exit 0;; esac\necho "only branches here" >&2\nexit 1\n'
        )
        hook.chmod(0o755)
        a = shared.seed("a", TASKS)
        (a.root / "out").mkdir()
        (a.root / "out" / "wf-cost.log").write_text("ts=1 id=t1 usd=1\n")
        r = a.wf("sync")
        assert r.returncode == 1 and "refused refs/wf/cost/log" in r.stderr
        assert 'claim_refs = "refs/heads/wf-claims"' in r.stderr
        (a.root / "wf.toml").write_text('shared = "origin"\nclaim_refs = "refs/heads/wf-claims"\n')
        sync(a)
        assert git(shared.bare, "show", "refs/heads/wf-cost/log:wf-cost.log") == "ts=1 id=t1 usd=1\n"
        b = shared.machine("b")
        (b.root / "wf.toml").write_text('shared = "origin"\nclaim_refs = "refs/heads/wf-claims"\n')
        assert sync(b)["cost_lines"] == 1
        assert (b.root / "out" / "wf-cost.log").read_text() == "ts=1 id=t1 usd=1\n"


@pytest.mark.parametrize("whole_group", [True, False])
def test_a_sync_killed_while_the_host_takes_its_push_loses_nothing(tmp_path: Path, whole_group: bool) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        marker = tmp_path / "receiving"
        hook = shared.bare / "hooks" / "pre-receive"
        hook.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch '{marker}'\nsleep 3\n")
        hook.chmod(0o755)
        a.wf("add", "Added on a", "--id", "a1", check=True)
        edit(a, "Body of one.", "Edited on a.")
        a.wf("done", "t3", check=True)
        p = a.popen("sync")
        for _ in range(600):  # until the host is taking the push (its hook runs)
            if marker.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists() and p.poll() is None
        if whole_group:  # the machine goes down: git's push dies with wf
            os.killpg(p.pid, signal.SIGKILL)
        else:
            os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=60)
        p.communicate()
        hook.unlink()
        b.wf("add", "Added on b", "--id", "b1", check=True)
        for m in (b, a, b):
            sync(m)
        for text in (tasks(a), tasks(b), remote_tasks(shared)):
            assert "## a1: Added on a" in text and "## b1: Added on b" in text and "Edited on a." in text
            assert "## t3:" not in text
        for m in (a, b):
            assert (m.root / "DONE.md").read_text().count(" t3 lane=") == 1
        assert tasks(a) == tasks(b)
