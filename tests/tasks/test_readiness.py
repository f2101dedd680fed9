"""One readiness, everywhere: a held task (handed back, awaiting, wip, blocked, picked)
is ready in no view and no plan; ``wf status ID pending`` releases a handback hold; the
pilot ends or waits, and never starts a batch with no task to run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner
from tests.night.test_batch import Batch
from tests.orch.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


@pytest.fixture
def b(wf: WfRunner) -> Iterator[Batch]:
    batch = Batch(wf)
    yield batch
    batch.end_live()


def handed_back(o: Orch, *more: str) -> None:
    """Lane a: a1 handed back by its worker (through the CLI, as an orchestrator does);
    ``more`` tasks after it."""
    o.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x") + "".join(more))
    assert "Task: a1 " in o.wf.ok("orch", "pick", "a", "--id", "a1")
    out = o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "the spec is unclear", "--no-pick")
    assert "a1 handed back: the spec is unclear" in out


def record(o: Orch, tid: str) -> dict[str, Any]:
    recs = [r for r in json.loads(o.wf.ok("list", "--json")) if r["id"] == tid]
    assert len(recs) == 1
    return dict(recs[0])


def runner_ids(o: Orch, *args: str) -> list[str]:
    return [r["id"] for r in json.loads(o.wf.ok("list", "--runner", "--json", *args))]


# ------------------------------------------------------------------ one readiness


def test_a_handed_back_task_is_ready_in_no_view_and_no_plan(b: Batch) -> None:
    handed_back(b)
    shown = b.wf.ok("show", "a1")
    assert "state=handback" in shown and "runner-ready: no" in shown
    assert "runner-ready: yes" not in shown
    assert "held (handback since " in shown
    assert "release: change the task (wf edit a1, wf set, an editor) or wf status a1 pending" in shown
    rec = record(b, "a1")
    assert rec["ready"] is False and rec["state"] == "handback"
    assert rec["hold"]["kind"] == "handback" and "wf status a1 pending" in rec["hold"]["release"]
    assert rec["hold"]["since"] and rec["hold"]["since"].startswith("20")  # when it was handed back
    assert runner_ids(b) == [] and "a1" not in b.wf.ok("list", "--runner")
    assert [r["id"] for r in json.loads(b.wf.ok("list", "--status", "handback", "--json"))] == ["a1"]
    assert [r["id"] for r in json.loads(b.wf.ok("list", "--status", "pending", "--json"))] == ["a1"]
    assert json.loads(b.wf.ok("list", "--status", "ready", "--json")) == []
    lane = next(r for r in json.loads(b.wf.ok("lanes", "--json")) if r["lane"] == "a")
    assert lane["ready"] == 0 and lane["handback"] == 1 and lane["pending"] == 0
    assert json.loads(b.wf.ok("check", "--json"))["ready"] == 0
    dry = b.batch("3", "--dry-run")
    assert "lanes: - (no lane has runner-ready work)" in dry.stdout, dry.stdout + dry.stderr
    assert "1 handed back, waiting for a person" in b.wf.ok("orch", "pick", "a")


def test_every_other_hold_names_itself_and_what_releases_it(o: Orch) -> None:
    o.setup(
        lanes_toml("a", "b"),
        task("a1", "a", extra="Status: awaiting: SQLite or files?")
        + task("a2", "a", extra="Status: wip: half of it")
        + task("a3", "a", extra="Status: blocked: post-check red: tree dirty")
        + task("b1", "b", "write b1.txt x")
        + task("b2", "b", extra="Status: in progress: ann since 2026-11-30T10:00Z"),
    )
    assert "Task: b1 " in o.wf.ok("orch", "pick", "b")  # an interactive orchestrator's pick
    holds = {r["id"]: r["hold"] for r in json.loads(o.wf.ok("list", "--json"))}
    assert {k: v["kind"] for k, v in holds.items()} == {
        "a1": "awaiting",
        "a2": "wip",
        "a3": "blocked",
        "b1": "picked",
        "b2": "claimed",
    }
    assert holds["a1"]["why"] == "SQLite or files?"
    assert holds["a1"]["release"] == "answer it in the task, then wf status a1 pending"
    assert holds["b1"]["why"] == "picked by an interactive orchestrator in lane b"
    assert holds["b1"]["release"].startswith("wf orch post b ")
    assert holds["b2"]["why"] == "claimed by ann" and holds["b2"]["since"] == "2026-11-30T10:00Z"
    shown = o.wf.ok("show", "b1")
    assert "held (picked since " in shown and "release: wf orch post b --result R" in shown


def test_a_hold_record_that_cannot_be_trusted_holds_its_task_in_every_view(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a"))
    held = o.root / ".wf" / "orch" / "held" / "a1.json"
    held.parent.mkdir(parents=True)
    held.write_text("{not json")
    assert runner_ids(o) == ["a2"]
    rec = record(o, "a1")
    assert rec["ready"] is False and rec["hold"]["kind"] == "corrupt"
    assert "wf doctor --fix" in o.wf.ok("show", "a1")


# ------------------------------------------------------------------ releasing holds


def test_the_list_cache_follows_the_holds(o: Orch) -> None:
    """``wf list`` answers from a cache keyed by what it depends on: a hold released
    without a change of TASKS.md (``wf status ID pending`` on a pending task) is seen."""
    handed_back(o)
    assert runner_ids(o) == [] and runner_ids(o) == []  # the second answer is the cached one
    assert o.wf.ok("status", "a1", "pending") == "a1: pending\n"
    assert runner_ids(o) == ["a1"]


def test_status_pending_releases_a_handback_hold(o: Orch) -> None:
    handed_back(o)
    claim = o.wf("status", "a1", "progress", "me")
    assert claim.code == 1 and "handed back, waiting for a person" in claim.err
    assert "wf status a1 pending" in claim.err
    assert o.wf.ok("status", "a1", "pending") == "a1: pending\n"
    assert not (o.root / ".wf" / "orch" / "held" / "a1.json").exists()
    assert "runner-ready: yes" in o.wf.ok("show", "a1")
    assert "Task: a1 " in o.wf.ok("orch", "pick", "a")


def test_editing_the_task_releases_its_hold_in_every_view(o: Orch) -> None:
    handed_back(o)
    o.wf.ok("set", "a1", "--prio", "1")
    assert runner_ids(o) == ["a1"] and record(o, "a1")["hold"] is None
    assert "Task: a1 " in o.wf.ok("orch", "pick", "a")


def test_a_release_by_an_edit_is_for_good_once_a_pick_saw_it(o: Orch) -> None:
    """A pick drops the record of a hold an edit released: changing the text back later
    does not hold the task again."""
    handed_back(o, task("b1", "b", "write b1.txt x"))
    o.wf.ok("set", "a1", "--effort", "3")
    assert "Task: b1 " in o.wf.ok("orch", "pick", "b")
    o.wf.ok("set", "a1", "--effort", "")
    assert runner_ids(o) == ["a1"]


def test_the_hold_record_of_a_task_done_since_is_dropped_by_the_next_pick(o: Orch) -> None:
    handed_back(o, task("b1", "b", "write b1.txt x"))
    o.wf.ok("done", "a1")
    assert "Task: b1 " in o.wf.ok("orch", "pick", "b")
    assert not (o.root / ".wf" / "orch" / "held" / "a1.json").exists()


def test_naming_a_handed_back_task_picks_it_and_releases_the_hold(o: Orch) -> None:
    handed_back(o)
    assert "Task: a1 " in o.wf.ok("orch", "pick", "a", "--id", "a1")
    assert not (o.root / ".wf" / "orch" / "held" / "a1.json").exists()


# ------------------------------------------------------------------ the pilot


def pilot(b: Batch, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--poll", "0.3", *args], cwd=b.root, capture_output=True,
        text=True, env=b.env, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_pilot_with_only_handed_back_work_ends_at_once_saying_what_waits(b: Batch) -> None:
    handed_back(b, task("q1", "a", extra="Status: awaiting: Which colour?"))
    r = pilot(b, "--for", "10m", "--no-prep")
    assert r.returncode == 4, r.stderr + r.stdout  # a person must act, as every wf command says it
    assert "started" not in r.stdout and not list((b.root / ".wf" / "batch").glob("*.json"))
    assert "waiting for a person: 1 handed back (a1), 1 awaiting (q1)" in r.stdout
    assert "question q1: Which colour?" in r.stdout
    assert "pilot ended: nothing left to run or prepare" in r.stdout


@pytest.mark.timeout(120)
def test_the_pilot_waits_while_a_lane_is_held_by_an_interactive_pick(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt x"))
    assert "Task: a1 " in b.wf.ok("orch", "pick", "a")
    dry = b.batch("3", "--dry-run")
    assert "lanes: - (no lane has runner-ready work)" in dry.stdout, dry.stdout
    refused = b.batch("3")
    assert (
        refused.returncode == 1
        and "lane a is held: a1 was picked by an interactive orchestrator" in refused.stderr
    )
    r = pilot(b, "--for", "3s")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "started" not in r.stdout and not list((b.root / ".wf" / "batch").glob("*.json"))
    assert r.stdout.count("waiting: lane a is held: a1 was picked by an interactive orchestrator") == 1
    assert "pilot ended: --for" in r.stdout


def test_a_batch_leaves_out_a_lane_someone_holds(b: Batch) -> None:
    b.setup(
        lanes_toml("a", "b"),
        task("a1", "a", "write a1.txt x")
        + task("a2", "a", "write a2.txt x")
        + task("b1", "b", "write b1.txt x"),
    )
    assert "lanes: a, b\n" in b.batch("3", "--dry-run").stdout
    assert "Task: a1 " in b.wf.ok("orch", "pick", "a")  # an interactive orchestrator holds lane a
    assert "lanes: b\n" in b.batch("3", "--dry-run").stdout


@pytest.mark.timeout(120)
def test_the_pilot_waits_while_a_solo_task_waits_for_a_held_lane(b: Batch) -> None:
    """A batch on lane b would stop at once (its next task runs alone, and lane a is
    held): no batch takes it, and the pilot waits instead of starting one every poll."""
    b.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x") + task("b1", "b", extra="Sessions: solo"))
    assert "Task: a1 " in b.wf.ok("orch", "pick", "a")
    assert "lanes: - (no lane has runner-ready work)" in b.batch("3", "--dry-run").stdout
    r = pilot(b, "--for", "3s")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "started" not in r.stdout and not list((b.root / ".wf" / "batch").glob("*.json"))
    assert "waiting: lane b waits: its solo task b1 runs alone, and lane a is held: a1 was picked" in r.stdout
    assert "pilot ended: --for" in r.stdout


def test_no_batch_takes_a_lane_while_a_held_lane_works_a_solo_task(b: Batch) -> None:
    b.setup(lanes_toml("a", "b"), task("a1", "a", extra="Sessions: solo") + task("b1", "b", "write b1.txt x"))
    assert "lanes: a, b\n" in b.batch("3", "--dry-run").stdout
    assert "Task: a1 " in b.wf.ok("orch", "pick", "a")
    assert "lanes: - (no lane has runner-ready work)" in b.batch("3", "--dry-run").stdout
    refused = b.batch("3")
    assert refused.returncode == 1
    assert "lane b waits for lane a, whose solo task runs alone: a1 was picked" in refused.stderr
