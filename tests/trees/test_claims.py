"""Claims across machines (wf/trees/claims.py), through the CLI of machines that share a
bare repository served by git daemon on loopback (or by file://): a claim is a ref made by
compare-and-swap, exactly one machine wins, offline nothing is written, lanes run on their
machine, stale and orphan claims are reported by wf check and a stale one can be stolen."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.machines import Machine, Shared

TASKS = (
    "# Tasks\n\n"
    "## t1: One\nModel: sonnet\nDone: true\n\n"
    "## t2: Two\nModel: sonnet\nDone: true\n\n"
    "## t3: Three\nModel: haiku\nLane: desk\nDone: true\n"
)
TOML = 'shared = "origin"\n[lanes.sonnet]\nmodel = "sonnet"\n[lanes.desk]\nmodel = "haiku"\nmachine = "a"\n'
REF = "refs/wf/claims/t1"


def claim_of(shared: Shared, ref: str = REF) -> dict[str, str]:
    """The claim commit's fields, read from the shared repository itself."""
    from tests.machines import git

    body = git(shared.bare, "cat-file", "commit", ref)
    assert "\nparent " not in body.split("\n\n", 1)[0]  # a claim has no parent
    return dict(line.split(": ", 1) for line in body.split("\n\n", 1)[1].splitlines() if ": " in line)


def forge(m: Machine, task: str, machine: str, when: float, ref: str | None = None) -> None:
    """A claim made by another (silent) machine at ``when``, pushed by hand."""
    msg = f"wf claim {task}\n\ntask: {task}\nwho: ghost\nmachine: {machine}\nlane: sonnet\ntime: {when}\n"
    tree = m.git("hash-object", "-t", "tree", "-w", "--stdin").strip()
    sha = m.git("commit-tree", tree, "-m", msg).strip()
    m.git("push", "-q", "origin", f"{sha}:{ref or 'refs/wf/claims/' + task}")


@pytest.mark.parametrize("daemon", [True, False], ids=["git-daemon", "file"])
def test_of_two_machines_claiming_one_task_exactly_one_wins(tmp_path: Path, daemon: bool) -> None:
    with Shared(tmp_path, daemon=daemon) as shared:
        a = shared.seed("a", TASKS, TOML)
        b = shared.machine("b")
        won = a.wf("status", "t1", "progress", "alice", "--json")
        assert won.returncode == 0, won.stderr
        assert json.loads(won.stdout)["machine"] == "a"
        before = (b.root / "TASKS.md").read_bytes()
        lost = b.wf("status", "t1", "progress", "bob")
        assert lost.returncode == 1
        assert "already claimed on machine a" in lost.stderr and "Traceback" not in lost.stderr
        assert (b.root / "TASKS.md").read_bytes() == before  # nothing written on the loser
        claim = claim_of(shared)
        assert (claim["task"], claim["who"], claim["machine"], claim["lane"]) == (
            "t1",
            "alice",
            "a",
            "sonnet",
        )
        # the machine holding it may claim it again (its own lock decides between its processes)
        a.wf("status", "t1", "pending", check=True)
        assert REF not in shared.refs()  # a release: the ref is gone
        assert b.wf("status", "t1", "progress", "bob").returncode == 0
        assert claim_of(shared)["machine"] == "b"


def test_offline_a_shared_claim_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        before = (a.root / "TASKS.md").read_bytes()
        shared.stop()
        r = a.wf("status", "t1", "progress", "alice")
        assert r.returncode == 1 and "nothing was written" in r.stderr and "unreachable" in r.stderr
        p = a.wf("orch", "pick", "sonnet")
        assert p.returncode == 1 and "nothing was written" in p.stderr, p.stdout + p.stderr
        assert (a.root / "TASKS.md").read_bytes() == before
        assert not list((a.root / ".wf").glob("**/sonnet*.json"))  # no lane record
        assert not (a.root / ".worktrees" / "sonnet").exists()
        # a lane that runs on this machine alone needs no ref: it works offline
        assert a.wf("status", "t3", "progress", "alice").returncode == 0
        back = a.wf("status", "t3", "pending")
        assert back.returncode == 0 and not back.stderr, back.stderr  # no ref, nothing to release
        local = a.wf("orch", "pick", "desk")
        assert local.returncode == 0 and "Task: t3" in local.stdout, local.stderr
    assert not any(ref.startswith("refs/wf/claims/") for ref in shared.refs())


def test_a_pick_skips_tasks_other_machines_hold_and_lanes_run_on_their_machine(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        b = shared.machine("b")
        a.wf("status", "t1", "progress", "alice", check=True)
        p = b.wf("orch", "pick", "sonnet")
        assert p.returncode == 0 and "Task: t2" in p.stdout, p.stdout + p.stderr
        assert claim_of(shared, "refs/wf/claims/t2")["machine"] == "b"
        # lane desk runs on machine a: b neither picks it by name nor by looking for work
        d = b.wf("orch", "pick", "desk")
        assert "runs on machine a" in d.stdout + d.stderr and "Task: t3" not in d.stdout
        assert "Status" not in (b.root / "TASKS.md").read_text().split("## t3")[1]
        assert "Task: t3" not in b.wf("orch", "pick").stdout
        # on a, t1 is its own claim and t2 is b's: nothing left for a pick of sonnet
        n = a.wf("orch", "pick", "sonnet")
        # a pick syncs first: b's claim has reached a's TASKS.md (progress 2), or, where b's
        # status line has not been pushed yet, its ref alone keeps t2 from a
        said = n.stdout
        assert "Task:" not in said and ("claimed on other machines" in said or "progress 2" in said), said


def test_a_post_and_done_release_the_claim_ref(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        a.wf("orch", "pick", "sonnet", check=True)
        assert "refs/wf/claims/t1" in shared.refs()
        post = a.wf("orch", "post", "sonnet", "--result", "awaiting", "--note", "which key?", "--no-pick")
        assert post.returncode in (0, 4), post.stderr
        assert "refs/wf/claims/t1" not in shared.refs()
        a.wf("status", "t2", "progress", "alice", check=True)
        assert "refs/wf/claims/t2" in shared.refs()
        a.wf("done", "t2", check=True)
        assert "refs/wf/claims/t2" not in shared.refs()


def test_list_and_lanes_show_which_machine_holds_each_claim(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        b = shared.machine("b")
        a.wf("status", "t1", "progress", "alice", check=True)
        b.wf("status", "t2", "progress", "bob", check=True)
        b.wf("claims", check=True)  # b looks at the remote: it has seen both claims now
        rows = {r["id"]: r for r in json.loads(b.wf("list", "--json", check=True).stdout)}
        assert (rows["t1"]["machine"], rows["t2"]["machine"]) == ("a", "b")
        assert "progress:bob@b" in b.wf("list", check=True).stdout
        lanes = {r["lane"]: r for r in json.loads(b.wf("lanes", "--json", check=True).stdout)}
        assert lanes["sonnet"]["claims"] == {"t1": "a", "t2": "b"}
        assert (lanes["sonnet"]["machine"], lanes["desk"]["machine"]) == (None, "a")
        text = b.wf("lanes", check=True).stdout
        assert "t1@a, t2@b" in text and "machine" in text.splitlines()[0]
        listed = json.loads(b.wf("claims", "--json", check=True).stdout)
        assert [(c["task"], c["machine"], c["who"]) for c in listed] == [
            ("t1", "a", "alice"),
            ("t2", "b", "bob"),
        ]


def test_check_reports_stale_and_orphan_claims_and_a_stale_one_can_be_stolen(tmp_path: Path) -> None:
    toml = TOML.replace('shared = "origin"\n', 'shared = "origin"\nclaim_stale = "1h"\n')
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, toml)
        b = shared.machine("b")
        forge(a, "t1", "c", time.time() - 7200)  # machine c: silent for two hours
        forge(a, "ghost", "c", time.time() - 7200)  # a claim of no task
        a.wf("status", "t2", "progress", "alice", check=True)  # a fresh claim
        text = (b.root / "TASKS.md").read_text()
        (b.root / "TASKS.md").write_text(
            text.replace("Lane: desk\n", "Lane: sonnet\nStatus: in progress: x since 2026-01-01T00:00Z\n")
        )
        r = b.wf("check", "--json")
        assert r.returncode == 0, r.stderr
        said = [i["message"] for i in json.loads(r.stdout)["issues"]]
        assert any("t1" in m and "machine c silent" in m and "steal" in m for m in said), said
        assert any("ghost" in m and "not an open task" in m for m in said), said
        assert any("t3 is in progress" in m and "no machine holds" in m for m in said), said
        assert not any("t2" in m for m in said), said  # a's claim is fresh: nothing to say
        fresh = b.wf("claims", "steal", "t2", "bob")
        assert fresh.returncode == 1 and "not stale" in fresh.stderr
        assert claim_of(shared, "refs/wf/claims/t2")["machine"] == "a"
        stolen = b.wf("claims", "steal", "t1", "bob")
        assert stolen.returncode == 0, stolen.stderr
        assert claim_of(shared)["machine"] == "b"
        assert "Status: in progress: bob since" in (b.root / "TASKS.md").read_text()
        ghost = b.wf("claims", "steal", "ghost", "bob")  # no such task here: nothing is taken
        assert ghost.returncode == 1 and "no task 'ghost'" in ghost.stderr
        assert claim_of(shared, "refs/wf/claims/ghost")["machine"] == "c"
        # a ref left without a task may be released by any machine (a lease on what was seen)
        assert b.wf("claims", "release", "ghost").returncode == 0
        assert "refs/wf/claims/ghost" not in shared.refs()
        # an open task's claim held elsewhere is not released from here
        held = b.wf("claims", "release", "t2")
        assert held.returncode == 1 and "held on machine a" in held.stderr
        assert "refs/wf/claims/t2" in shared.refs()


def test_a_machines_newest_claim_is_its_sign_of_life(tmp_path: Path) -> None:
    toml = TOML.replace('shared = "origin"\n', 'shared = "origin"\nclaim_stale = "1h"\n')
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, toml)
        b = shared.machine("b")
        forge(a, "t1", "c", time.time() - 7200)
        forge(a, "t2", "c", time.time())  # c claimed another task just now: it is alive
        r = b.wf("claims", "steal", "t1", "bob")
        assert r.returncode == 1 and "not stale" in r.stderr
        old = json.loads(a.wf("status", "t3", "progress", "x", "--json").stdout)
        assert old["machine"] is None  # lane desk is a's alone: no ref
        before = {c["task"]: c["time"] for c in json.loads(a.wf("claims", "--json", check=True).stdout)}
        forced = a.wf("status", "t1", "progress", "y", "--force")  # --force is local: c's ref still wins
        assert forced.returncode == 1 and "machine c" in forced.stderr
        assert claim_of(shared)["machine"] == "c"
        after = {c["task"]: c["time"] for c in json.loads(a.wf("claims", "--json", check=True).stdout)}
        assert before == after


def test_renew_makes_this_machines_claims_anew(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        forge(a, "t2", "c", time.time() - 100)
        a.wf("status", "t1", "progress", "alice", check=True)
        sha = shared.refs()[REF]
        first = json.loads(a.wf("claims", "--json", check=True).stdout)
        renewed = json.loads(a.wf("claims", "renew", "--json", check=True).stdout)
        assert [c["task"] for c in renewed] == ["t1"]  # only this machine's
        assert shared.refs()[REF] != sha and renewed[0]["time"] >= first[0]["time"]
        assert claim_of(shared)["who"] == "alice"


def test_a_host_that_refuses_refs_outside_heads_takes_the_fallback(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        hook = shared.bare / "hooks" / "pre-receive"
        hook.write_text(
            "#!/bin/sh\nwhile read old new ref; do case $ref in refs/heads/*) ;; *) exit 1;; esac; done\n"
        )
        hook.chmod(0o755)
        a = shared.seed("a", TASKS, TOML)
        r = a.wf("status", "t1", "progress", "alice")
        assert r.returncode == 1 and 'claim_refs = "refs/heads/wf-claims"' in r.stderr
        assert "in progress" not in (a.root / "TASKS.md").read_text()
        a.wf("config", "claim_refs", "refs/heads/wf-claims", check=True)
        ok = a.wf("status", "t1", "progress", "alice")
        assert ok.returncode == 0, ok.stderr
        assert claim_of(shared, "refs/heads/wf-claims/t1")["machine"] == "a"
        b = shared.machine("b")
        b.wf("config", "claim_refs", "refs/heads/wf-claims", check=True)
        lost = b.wf("status", "t1", "progress", "bob")
        assert lost.returncode == 1 and "machine a" in lost.stderr


def test_without_a_shared_remote_nothing_changes(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML.replace('shared = "origin"\n', ""))
        r = a.wf("status", "t1", "progress", "alice", check=True)
        assert r.stdout.startswith("t1: in progress: alice since") and "(on " not in r.stdout
        assert "progress:alice " in a.wf("list", check=True).stdout
        assert "machine" not in a.wf("lanes", check=True).stdout
        assert set(shared.refs()) == {"refs/heads/main"}
        c = a.wf("claims")
        assert c.returncode == 1 and "no shared remote" in c.stderr


def test_a_ref_left_by_an_offline_release_is_reused_by_its_machine_and_refuses_others(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        b = shared.machine("b")
        a.wf("status", "t1", "progress", "alice", check=True)
        shared.stop()
        back = a.wf("status", "t1", "pending")
        assert back.returncode == 0 and "claim ref stays" in back.stderr
        shared.start()
        a.git("remote", "set-url", "origin", shared.url)
        b.git("remote", "set-url", "origin", shared.url)
        assert REF in shared.refs()
        said = [i["message"] for i in json.loads(a.wf("check", "--json").stdout)["issues"]]
        assert any("t1" in m and "does not claim" in m for m in said), said
        lost = b.wf("status", "t1", "progress", "bob")
        assert lost.returncode == 1 and "machine a" in lost.stderr
        again = a.wf("status", "t1", "progress", "alice")  # its own ref: reused
        assert again.returncode == 0, again.stderr


def test_a_claim_that_cannot_be_written_leaves_no_ref(tmp_path: Path) -> None:
    tasks = TASKS + "\n## t4: Four\nModel: sonnet\nAfter: t1\nDone: true\n"
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", tasks, TOML)
        r = a.wf("status", "t4", "progress", "alice")
        assert r.returncode == 1 and "not runner-ready" in r.stderr
        assert "refs/wf/claims/t4" not in shared.refs()
        two = a.wf("status", "t1", "progress", "al\nice")
        assert two.returncode == 1 and "one line" in two.stderr and "Traceback" not in two.stderr
        assert REF not in shared.refs()


def test_a_pick_that_looks_for_work_passes_lanes_of_other_machines(tmp_path: Path) -> None:
    toml = (
        'shared = "origin"\n[lanes.desk]\nmodel = "haiku"\nmachine = "a"\n[lanes.sonnet]\nmodel = "sonnet"\n'
    )
    with Shared(tmp_path, daemon=True) as shared:
        shared.seed("a", TASKS, toml)
        b = shared.machine("b")
        p = b.wf("orch", "pick")
        assert p.returncode == 0 and "Task: t1" in p.stdout, p.stdout + p.stderr


def test_a_local_only_task_in_progress_needs_no_ref_and_check_says_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        a.wf("status", "t3", "progress", "alice", check=True)
        assert not any("claims" in ref for ref in shared.refs())
        said = [i["message"] for i in json.loads(a.wf("check", "--json").stdout)["issues"]]
        assert not any("t3" in m for m in said), said


def test_a_recovery_pick_stops_when_another_machine_took_the_claim(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        a.wf("orch", "pick", "sonnet", check=True)
        from tests.machines import git

        git(shared.bare, "update-ref", "-d", REF)
        forge(a, "t1", "c", time.time())  # machine c stole it (a was silent)
        r = a.wf("orch", "pick", "sonnet", "--recovery", "the worker died")
        assert r.returncode == 1 and "another machine holds" in r.stderr, r.stdout + r.stderr
        assert claim_of(shared)["machine"] == "c"


def test_a_remote_that_reads_but_takes_no_push_refuses_a_pick_with_nothing_written(tmp_path: Path) -> None:
    """The claims could be read (the pick knows which tasks are free) but the claim's
    push fails: the pick is refused, exit 1, no record, no Status line."""
    import socket
    import subprocess

    from tests.machines import _free_port

    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        before = (a.root / "TASKS.md").read_bytes()
        port = _free_port()
        reader = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", "--export-all",
             f"--base-path={tmp_path}", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    time.sleep(0.05)
            a.git("remote", "set-url", "origin", f"git://127.0.0.1:{port}/shared.git")
            assert a.wf("claims", "--json", check=True).stdout.strip() == "[]"  # reads work
            p = a.wf("orch", "pick", "sonnet")
            assert p.returncode == 1 and "nothing was written" in p.stderr, p.stdout + p.stderr
            assert (a.root / "TASKS.md").read_bytes() == before
            assert not (a.root / ".worktrees" / "sonnet").exists()
        finally:
            reader.terminate()
            reader.wait(timeout=10)


def test_a_steal_for_a_who_of_two_lines_takes_nothing(tmp_path: Path) -> None:
    toml = TOML.replace('shared = "origin"\n', 'shared = "origin"\nclaim_stale = "1h"\n')
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, toml)
        forge(a, "t1", "c", time.time() - 7200)
        sha = shared.refs()[REF]
        r = a.wf("claims", "steal", "t1", "bob\nmachine: c")
        assert r.returncode == 1 and "one line" in r.stderr
        assert shared.refs()[REF] == sha


def test_a_release_on_one_machine_is_seen_by_the_others(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        b = shared.machine("b")
        b.wf("status", "t2", "progress", "bob", check=True)
        assert [c["task"] for c in json.loads(a.wf("claims", "--json", check=True).stdout)] == ["t2"]
        b.wf("status", "t2", "pending", check=True)
        assert json.loads(a.wf("claims", "--json", check=True).stdout) == []
        rows = {r["id"]: r for r in json.loads(a.wf("list", "--json", check=True).stdout)}
        assert rows["t2"]["machine"] is None


def test_without_a_shared_remote_a_lanes_machine_changes_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path) as shared:
        b = shared.seed("b", TASKS, TOML.replace('shared = "origin"\n', ""))
        p = b.wf("orch", "pick", "desk")
        assert p.returncode == 0 and "Task: t3" in p.stdout, p.stdout + p.stderr


def test_a_pick_that_died_half_way_is_not_finished_once_another_machine_holds_the_claim(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from tests.machines import git
    from wf.base.lock import project_lock

    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS, TOML)
        record = a.root / ".wf" / "orch" / "sonnet.json"
        (a.root / ".wf").mkdir(exist_ok=True)
        with project_lock(a.root / ".wf", 5, None, name="wt.lock"):  # the pick waits here, claimed
            p = subprocess.Popen(
                [sys.executable, "-m", "wf", "orch", "pick", "sonnet"], cwd=a.root, env=a.env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while not (record.exists() and "in progress" in (a.root / "TASKS.md").read_text()):
                assert time.monotonic() < deadline and p.poll() is None, "the pick never claimed t1"
                time.sleep(0.05)
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        assert json.loads(record.read_text())["state"] == "picking" and REF in shared.refs()
        git(shared.bare, "update-ref", "-d", REF)
        forge(a, "t1", "c", time.time())  # machine c stole it meanwhile
        r = a.wf("orch", "pick", "sonnet")
        assert r.returncode == 1 and "another machine holds" in r.stderr, r.stdout + r.stderr
        assert claim_of(shared)["machine"] == "c"
        assert not (a.root / ".worktrees" / "sonnet").exists()
