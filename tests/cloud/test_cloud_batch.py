"""The cloud lane inside a batch: the sidecar's sends, the batch's N, local lanes leaving
Cloud: yes tasks to an open cloud lane, and wf lanes' cloud row (wf.cloud.batchlane).

The whole batch is tests/cloud/test_cloud.py's done-when test; these are the rules, one each."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.cloud.test_cloud import Cloud, c, task, wait_for
from wf.base import project as projectmod
from wf.cloud import batchlane, sidecar

__all__ = ["c"]  # the fixture

STAMP = "20261201T010203Z"


def open_mark(c: Cloud, n: int = 10) -> batchlane.Open:
    """The cloud lane open for a batch whose job is this test's process (alive)."""
    return batchlane.open_lane(projectmod.load(c.root), STAMP, n)


def starts(c: Cloud) -> list[str]:
    """The batch's starts, as ``local ID`` and ``cloud ID`` (the count agrees with them)."""
    p = c.root / ".wf" / "batch" / f"{STAMP}.starts"
    lines = p.read_text().splitlines() if p.exists() else []
    out = [ln.replace("sent ", "cloud ", 1) for ln in lines if ln.startswith(("local ", "sent "))]
    assert batchlane.starts(projectmod.load(c.root), STAMP) == len(out), lines
    return out


def run_sidecar(c: Cloud, mark: batchlane.Open, until: str, *, ended: bool = False) -> list[str]:
    """The sidecar of a live batch (``ended``: of one whose loop ended), until a line has
    ``until`` (then the batch ends; it pulls on until no session is left)."""
    stop = threading.Event()
    if ended:
        stop.set()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        if until in line or len(lines) > 50:  # 50: a sidecar that never says it ends the test
            stop.set()

    sidecar(projectmod.load(c.root), stop, interval=0.05, linger=60, on_line=on_line, batch=mark)
    return lines


@contextmanager
def live_sidecar(c: Cloud, mark: batchlane.Open) -> Iterator[list[str]]:
    """The sidecar of a live batch in a thread; the batch ends when the block does."""
    stop = threading.Event()
    lines: list[str] = []
    side = threading.Thread(
        target=sidecar,
        args=(projectmod.load(c.root), stop),
        kwargs={"interval": 0.05, "linger": 60, "on_line": lines.append, "batch": mark},
    )
    side.start()
    try:
        yield lines
    finally:
        stop.set()
        side.join()


# ------------------------------------------------------------------ local lanes leave Cloud: yes tasks


def test_local_lanes_leave_cloud_yes_tasks_to_a_live_batchs_cloud_lane(c: Cloud) -> None:
    c.setup(
        task("big", "opus", extra="Cloud: yes")  # the cloud lane takes it
        + task("small", "sonnet", extra="Cloud: yes")  # not an opus-class model: the cloud never takes it
    )
    mark = open_mark(c)
    assert c.wf.ok("orch", "pick", "opus") == (
        "stop lane opus: no runner-ready task (pending 1, 1 left to the cloud lane)\n"
    )
    assert c.wf.ok("orch", "pick", "sonnet").startswith("spawn: wf-worker model=msonnet")
    assert c.status("small").startswith("in progress: worker since ")
    # a batch that died (its job gone) leaves a mark nobody heeds
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    p = c.root / ".wf" / "cloud" / "batch.open"
    p.write_text(json.dumps(dict(mark.__dict__, pid=dead.pid)))
    assert c.wf.ok("orch", "pick", "opus").startswith("spawn: wf-worker model=mopus")


def test_once_the_batchs_cloud_lane_stops_local_lanes_take_its_tasks(c: Cloud) -> None:
    c.setup(task("big", "opus", extra="Cloud: yes"))
    open_mark(c)
    assert "1 left to the cloud lane" in c.wf.ok("orch", "pick", "opus")
    batchlane.close(projectmod.load(c.root), STAMP)
    assert c.wf.ok("orch", "pick", "opus").startswith("spawn: wf-worker model=mopus")


# ------------------------------------------------------------------ the sidecar's sends


def test_the_sidecar_of_a_live_batch_sends_up_to_max_parallel_and_counts_each(c: Cloud) -> None:
    yes = "Cloud: yes"
    c.setup(
        task("a", "opus", "cloud: polls 1", "cloud: write a.txt x", extra=yes)
        + task("b", "opus", "cloud: write b.txt x", extra=yes) + task("c3", "opus", extra=yes), parallel=2,
    )  # fmt: skip
    with live_sidecar(c, open_mark(c)) as lines:
        wait_for("max parallel", lambda: any("stop lane cloud: max parallel" in ln for ln in lines))
        # at max parallel the cloud lane is still open: local lanes leave it c3
        assert "1 left to the cloud lane" in c.wf.ok("orch", "pick", "opus")
    sent = [ln.split(" cloud: sent ")[1].split()[0] for ln in lines if " cloud: sent " in ln]
    assert sent == ["a", "b"], lines
    assert next(ln for ln in lines if "stop lane cloud" in ln).endswith("max parallel (2 of 2 running)"), (
        lines
    )
    assert starts(c) == ["cloud a", "cloud b"]
    assert "a" in c.archived() and "b" in c.archived()  # pulled and posted after the batch's end
    assert c.status("c3") == "pending" and c.record("c3") is None  # never sent after the batch
    assert not (c.root / ".wf" / "cloud" / "batch.open").exists()


def test_the_ledger_stops_the_batchs_cloud_lane_for_the_rest_of_the_batch(c: Cloud) -> None:
    c.setup(task("a", "opus", extra="Cloud: yes"), budget=1, reserve=0.5)
    (c.root / "out").mkdir(exist_ok=True)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (c.root / "out" / "wf-cloud.log").write_text(f"ts={now} id=x session=s1 state=done usd=0.6 dur_s=9\n")
    with live_sidecar(c, open_mark(c)) as lines:
        wait_for("the ledger's stop", lambda: any("stop lane cloud: " in ln for ln in lines))
        assert lines[0].endswith("stop lane cloud: ledger ($0.40 of $1.00 left, reserve $0.50)"), lines
        # closed at once, while the batch lives: local lanes take its Cloud: yes task
        assert c.wf.ok("orch", "pick", "opus").startswith("spawn: wf-worker model=mopus")
    assert starts(c) == []


def test_the_sidecar_sends_no_task_past_the_batchs_n(c: Cloud) -> None:
    c.setup(task("a", "opus") + task("b", "opus"), parallel=3)
    mark = open_mark(c, n=2)
    batchlane.note_start(projectmod.load(c.root), STAMP, "local", "l1")  # the loop started one
    lines = run_sidecar(c, mark, "stop lane cloud: ")
    assert next(ln for ln in lines if " cloud: sent " in ln).split(" cloud: sent ")[1].startswith("a "), lines
    assert any(ln.endswith("stop lane cloud: 2 task(s) started: the cap is reached") for ln in lines), lines
    assert c.status("b") == "pending" and starts(c) == ["local l1", "cloud a"]


def test_after_the_batch_the_sidecar_never_sends(c: Cloud) -> None:
    c.setup(task("a", "opus", "cloud: write a.txt x") + task("b", "opus"), parallel=3)
    lines = run_sidecar(c, open_mark(c), "no session left", ended=True)
    assert lines == ["cloud: no session left"], lines
    assert c.status("a") == "pending" and starts(c) == []
    # the batch ends in the middle of a round of sends (here: once a is sent): no more
    lines = run_sidecar(c, open_mark(c), " cloud: sent a ")
    assert [ln for ln in lines if " cloud: sent " in ln] == [lines[0]] and c.status("b") == "pending", lines
    assert starts(c) == ["cloud a"]


def test_the_stop_file_stops_the_batchs_cloud_lane(c: Cloud) -> None:
    c.setup(task("a", "opus", extra="Cloud: yes"))
    (c.root / "out").mkdir(exist_ok=True)
    (c.root / "out" / "wf-batch.stop").write_text("")
    with live_sidecar(c, open_mark(c)) as lines:
        wait_for("the stop", lambda: any("stop lane cloud: " in ln for ln in lines))
        assert lines[0].endswith("stop lane cloud: stop file out/wf-batch.stop exists"), lines
        assert not (c.root / ".wf" / "cloud" / "batch.open").exists()  # closed while the batch lives
    assert c.status("a") == "pending"


def test_a_session_back_awaiting_stops_the_batchs_cloud_lane(c: Cloud) -> None:
    c.setup(task("a", "opus", "cloud: result awaiting", "cloud: note Which?") + task("b", "opus"), parallel=1)
    lines = run_sidecar(c, open_mark(c), "stop lane cloud: a came back awaiting")
    assert any("posted: a awaiting" in ln for ln in lines), lines
    assert any(
        ln.endswith("stop lane cloud: a came back awaiting: Which? (back to lane opus)") for ln in lines
    )
    assert c.status("b") == "pending" and starts(c) == ["cloud a"], lines  # b was never sent
    assert not (c.root / ".wf" / "cloud" / "batch.open").exists()


# ------------------------------------------------------------------ the loop counts the cloud's sends


def test_a_batchs_loop_counts_its_cloud_sends_toward_max_tasks(c: Cloud) -> None:
    c.setup(task("l1", "sonnet", "script: write l1.txt x") + task("l2", "sonnet", "script: write l2.txt x"))
    open_mark(c)
    for kind, tid in ((batchlane.CLOUD, "?"), (batchlane.SENT, "x")):  # the sidecar sent one
        batchlane.note_start(projectmod.load(c.root), STAMP, kind, tid)
    r = c.proc("orch", "run", "sonnet", "--max-tasks", "2", WF_BATCH=STAMP)
    assert "stop lane sonnet: 2 task(s) started: the cap is reached" in r.stdout, r.stdout + r.stderr
    assert starts(c) == ["cloud x", "local l1"]
    assert "l1" in c.archived() and c.status("l2") == "pending"
    r = c.proc("orch", "run", "sonnet", "--max-tasks", "2")  # not a batch's loop: its own count
    assert "l2" in c.archived(), r.stdout + r.stderr


# ------------------------------------------------------------------ wf lanes


def test_wf_lanes_shows_the_cloud_lane(c: Cloud) -> None:
    c.setup(task("big", "opus", "cloud: polls 5") + task("other", "opus") + task("s", "sonnet"), parallel=2)
    c.wf.ok("cloud", "send", "big")
    assert c.wf.ok("lanes") == (
        "lane    model       adapter  ready  progress  awaiting  handback  blocked  active\n"
        "sonnet  msonnet     cmd      1      0         0         0         0        -\n"
        "opus    mopus       cmd      1      1         0         0         0        -\n"
        "cloud   opus-class  cloudx2  1      1         0         0         0        big\n"
    )
    rows = {r["lane"]: r for r in json.loads(c.wf.ok("lanes", "--json"))}
    cloud = rows["cloud"]
    assert (cloud["ready"], cloud["progress"], cloud["active"], cloud["max_parallel"]) == (1, 1, "big", 2)
    assert (
        cloud["sessions"]
        == [{"id": "big", "session": (c.record("big") or {})["session"], "state": "running"}]
        and cloud["virtual"] is True
    )
    c.wf.ok("config", "cloud", "false")
    assert [r["lane"] for r in json.loads(c.wf.ok("lanes", "--json"))] == ["sonnet", "opus"]


@pytest.mark.slow
def test_a_send_under_way_already_counts_toward_n(c: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    c.setup(task("big", "opus") + task("l1", "sonnet", "script: write l1.txt x"))
    monkeypatch.setenv("WF_FAKE_CLOUD_DELAY", "3")  # the session takes its time to be created
    with live_sidecar(c, open_mark(c, n=1)) as lines:
        wait_for("the send", lambda: (c.record("big") or {}).get("state") == "sending")
        r = c.proc("orch", "run", "sonnet", "--max-tasks", "1", WF_BATCH=STAMP)
        assert "stop lane sonnet: 1 task(s) started: the cap is reached" in r.stdout, r.stdout + r.stderr
        wait_for("the session", lambda: any(" cloud: sent big " in ln for ln in lines))
    assert c.status("l1") == "pending" and starts(c) == ["cloud big"]
