"""Parts of wf talk through types, not sentences: the loop's stops reach a batch's
summary and the pilot as typed events (rewording the sentence changes nothing they
see; a line that is not an event is said, never read as "no stops"); a worker without
a report is handed back by one rule, from ``wf orch post --report`` and from the loop
alike; ``wf merge`` knows its own archive commit by a trailer, not by its subject."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.night.test_batch import Batch
from tests.orch.test_orch import ROOT, Orch, lanes_toml, task

FAILS = '`python3 -c "raise SystemExit(1)"`'  # a Done check that fails: the worker hands back
SLOW = '`python3 -c "import time; time.sleep(8)"`'  # a Done check that takes a while, then passes

# Loaded by every wf process of a test (PYTHONPATH): the words of a stop become others.
REWORD = """
from wf.orch import events

def reworded(ev):
    return f"LANE {ev.lane} HALTED [{ev.kind.value}] because {ev.text}"

events.sentence = reworded
"""


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


@pytest.fixture
def b(wf: WfRunner) -> Iterator[Batch]:
    batch = Batch(wf)
    yield batch
    batch.end_live()


def reworded_env(b: Batch, tmp_path: Path) -> dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(REWORD)
    return dict(b.env, PYTHONPATH=f"{hook}:{ROOT}")


def pilot(b: Batch, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--batch", "3", "--for", "5m", "--poll", "0.3", "--no-prep", *args],
        cwd=b.root, capture_output=True, text=True, env=env, timeout=200, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def summary_of(b: Batch) -> list[str]:
    [path] = sorted((b.root / "out").glob("wf-batch-*.md"))
    return path.read_text().splitlines()


# ------------------------------------------------------------------ stop events


@pytest.mark.timeout(240)
def test_a_reworded_stop_sentence_still_reaches_the_summary_and_the_pilot(b: Batch, tmp_path: Path) -> None:
    """Two handbacks in a row stop lane a. With the stop's sentence reworded in every wf
    process, the loop says the new words, and the batch summary and the pilot still
    show that stop, in those words (nothing greps for "stop lane")."""
    b.setup(
        lanes_toml("a"),
        task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 1")
        + task("h2", "a", "write h2.txt x", done=FAILS, extra="Prio: 2"),
    )
    env = reworded_env(b, tmp_path)
    r = pilot(b, env)
    assert r.returncode == 4, r.stdout + r.stderr  # the handed-back tasks wait for a person
    said = [x for x in r.stdout.splitlines() if "LANE a HALTED [stop] because 2 tasks in a row" in x]
    assert len(said) == 1, r.stdout
    assert "stop lane a" not in r.stdout
    lines = summary_of(b)
    assert [x for x in lines if "LANE a HALTED [stop] because 2 tasks in a row need a person" in x], lines
    assert not [x for x in lines if "stop lane a" in x], lines
    # the batch's own log (the loop's stdout) has the new words too: nothing read those
    [log] = sorted((b.root / "out").glob("wf-batch-*.log"))
    assert "LANE a HALTED [stop]" in log.read_text() and "stop lane a" not in log.read_text()
    [stamp] = [p.name.split(".")[0] for p in (b.root / ".wf" / "batch").glob("*.events.jsonl")]
    events = [
        json.loads(x) for x in (b.root / ".wf" / "batch" / f"{stamp}.events.jsonl").read_text().splitlines()
    ]
    assert [(e["lane"], e["kind"], e["stop"], e["task"]) for e in events] == [("a", "stop", "HANDBACK", "h2")]


@pytest.mark.timeout(240)
def test_a_stop_event_line_that_is_not_an_event_is_said_never_read_as_no_stops(b: Batch) -> None:
    """A line of a batch's events file that is not an event (a disk fault, a person's
    edit) is a record that cannot be trusted: the summary says so once, and so does the
    pilot watching that batch, instead of showing no stop."""
    b.setup(lanes_toml("a"), task("s1", "a", "write s1.txt x", done=SLOW))
    assert b.batch("1").returncode == 0
    st = b.status()
    events = b.root / ".wf" / "batch" / f"{st['stamp']}.events.jsonl"
    events.parent.mkdir(parents=True, exist_ok=True)
    with open(events, "a") as f:
        f.write('{"lane": "a", "kind": "stop", "text": "no ts, no run"}\n')
    r = pilot(b, b.env)
    assert f"batch {st['stamp']} ended: " in r.stdout, r.stdout  # it watched the live batch
    assert " started: lanes " not in r.stdout, r.stdout
    assert "its stop events cannot be read: " in r.stdout and "corrupt record" in r.stdout, r.stdout
    bad = [x for x in summary_of(b) if "stop events: " in x]
    assert len(bad) == 1 and "corrupt record (line 1: field 'ts' is missing)" in bad[0], summary_of(b)


def test_the_events_reader_takes_whole_lines_of_known_stops_only(tmp_path: Path) -> None:
    """An event read back is the event written; a line still being written (no newline
    yet) waits for the next read; a stop of a kind wf does not have is corrupt."""
    from wf.base.records import CorruptRecord
    from wf.orch import events
    from wf.orch.state import Stop, StopReason

    path = tmp_path / "events.jsonl"
    ev = events.stopped("run-1", "a", StopReason(Stop.HANDBACK, "a1 handed back"), "a1")
    events.append(path, ev)
    with open(path, "a") as f:
        f.write('{"ts": "2026-01-01T00:00:00Z", "run": "run-1", "lane": "b"')  # half a line
    found, offset = events.read(path)
    assert found == [ev] and found[0].reason is Stop.HANDBACK
    assert events.read(path, offset) == ([], offset)
    with open(path, "a") as f:
        f.write(', "kind": "stop", "text": "?", "stop": "NO_SUCH_KIND"}\n')
    with pytest.raises(CorruptRecord, match="line 2: field 'stop' has a bad value 'NO_SUCH_KIND'"):
        events.read(path, offset)


def test_a_batch_made_before_stop_events_is_finished_and_shown(b: Batch) -> None:
    """A batch folder of an older wf (its record has the old offsets, there is no events
    file) whose job is gone: --status finishes it without a crash, and its summary keeps
    the stop lines its own wf wrote."""
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    stamp = "20200101T000000Z"
    folder = b.root / ".wf" / "batch"
    folder.mkdir(parents=True, exist_ok=True)
    summary = f"out/wf-batch-{stamp}.md"
    (b.root / "out").mkdir(exist_ok=True)
    (b.root / summary).write_text("# wf batch\n\n- 01:00 stop lane a: no runner-ready task\n")
    rec = {
        "stamp": stamp, "started": "2020-01-01T00:00:00Z", "summary": summary, "log": f"out/wf-batch-{stamp}.log",
        "plan": {"lanes": ["a"]}, "pid": 999999, "pid_start": 1.0, "job": None, "state": "running",
        "offsets": {"orch": 0, "cost": 0, "events": 0}, "known_ids": ["a1"],
    }  # fmt: skip
    (folder / f"{stamp}.json").write_text(json.dumps(rec))
    r = b.batch("--status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert (st["stamp"], st["alive"], st["reason"]) == (stamp, False, "lost"), st
    text = (b.root / summary).read_text()
    assert "- 01:00 stop lane a: no runner-ready task" in text
    assert "ended: lost at " in text


# ------------------------------------------------------------------ no report: a handback, one rule


def test_a_worker_without_a_report_is_handed_back_alike_by_post_and_by_the_loop(o: Orch) -> None:
    """The same final message without the four lines, long enough to be cut: the loop's
    worker and an orchestrator's `wf orch post --report` hand the task back with the
    same note."""
    said = "I looked at everything in this repository and changed what I could, " * 3
    worker = json.dumps([sys.executable, "-c", f"print({said!r})"])
    o.setup(
        lanes_toml("b") + f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {worker}\n',
        task("a1", "a", "write a1.txt x") + task("b1", "b", "write b1.txt x"),
    )
    r = o.proc("orch", "run", "a")
    assert r.returncode == 4, r.stdout + r.stderr
    [loop_note] = [
        x.split("a1 handed back: ", 1)[1] for x in r.stdout.splitlines() if "needs a person: a1" in x
    ]
    o.wf.ok("orch", "pick", "b")
    out = o.wf.ok("orch", "post", "b", "--report", said)
    post_note = next(x for x in out.splitlines() if "b1 handed back: " in x).split("b1 handed back: ", 1)[1]
    assert loop_note.startswith("no report: I looked at everything")
    assert post_note == loop_note
    assert o.status("a1") == o.status("b1") == "pending"


# ------------------------------------------------------------------ wf's archive commit, by its trailer


def test_the_archive_commit_names_its_task_in_a_trailer(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert o.proc("orch", "run", "a").returncode == 0
    assert git(o.root, "log", "-1", "--format=%s", "main").strip() == "wf: archive a1"
    trailer = git(o.root, "log", "-1", "--format=%(trailers:key=Wf-Archive,valueonly)", "main")
    assert trailer.strip() == "a1"


def test_a_commit_that_only_looks_like_an_archive_commit_is_never_repaired(o: Orch) -> None:
    """A person's commit whose subject starts "wf: archive " and that changed TASKS.md,
    with TASKS.md staged and kept as before it (on purpose): the next merge leaves that
    alone. Only wf's own archive commit (its trailer) is finished by a merge."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("b1", "a", "write b1.txt x"))
    text = (o.root / "TASKS.md").read_text()
    (o.root / "TASKS.md").write_text(text.replace("## b1: Task b1\n", "## b1: Task b1, reworded\n"))
    git(o.root, "commit", "-qam", "wf: archive notes by hand")
    git(o.root, "reset", "-q", "main^", "--", "TASKS.md")
    git(o.root, "checkout", "main^", "--", "TASKS.md")  # the person keeps the old title
    o.wf.ok("orch", "pick", "a")
    rec = json.loads((o.root / ".wf" / "orch" / "a.json").read_text())
    wt = Path(rec["worktree"])
    (wt / "a1.txt").write_text("x\n")
    git(wt, "add", "a1.txt")
    git(wt, "commit", "-qm", "a1: work")
    r = o.wf("merge", "a1")
    assert r.code == 0, r.err
    assert "set to main's" not in r.out
    assert "## b1: Task b1\n" in (o.root / "TASKS.md").read_text()  # the person's choice stands
