"""What the run commands show, built without the command line (wf/fanout/report.py and
fanout.Outcome): the exit code of an outcome, the recent runs, a unit's answer or log,
what a monitor watches, and the JSON of wf run, monitor and gather."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import WfRunner
from wf.base import project
from wf.base.errors import WfError
from wf.fanout import fanout, report, watch
from wf.fanout.retry import Skip
from wf.fanout.units import UnitRequest


def _unit(unit: str, code: str) -> UnitRequest:
    return UnitRequest(id=unit, prompt="x", adapter="cmd", cmd=(sys.executable, "-c", code), contract=False)


@pytest.fixture
def runs_made(wf: WfRunner) -> project.Project:
    """Run r1: u1 says hello and is done, u2 fails."""
    proj = project.load(wf.root)
    assert fanout.dispatch(proj, "r1", _unit("u1", "print('hello')")).code == 0
    assert fanout.dispatch(proj, "r1", _unit("u2", "import sys; sys.exit(3)")).code == 4
    return proj


def test_outcome_code_and_json(runs_made: project.Project) -> None:
    done = fanout.dispatch(runs_made, "r2", _unit("ok", "print('fine')"))
    assert done.code == 0
    assert done._replace(completed=False).code == 130, "interrupted"
    left = done._replace(skipped=[Skip("old", "gave up after 3 attempts")])
    assert left.code == 4, "a unit left undone is for a person, even when what ran is done"
    assert done._replace(skipped=[Skip("old", "done before", done=True)]).code == 0
    assert left.as_json() == {
        "run": "r2",
        "code": 4,
        "completed": True,
        "units": [{**done.units[0].status, "verdict": "done"}],
        "skipped": [{"unit": "old", "why": "gave up after 3 attempts", "done": False}],
    }


def test_recent_runs_count_the_states(runs_made: project.Project) -> None:
    fanout.dispatch(runs_made, "r2", _unit("ok", "print('fine')"))
    rows = report.recent_runs(runs_made, 10)
    assert {r.run: (r.units, r.states) for r in rows} == {
        "r1": (2, {"done": 1, "failed": 1}),
        "r2": (1, {"done": 1}),
    }
    r1 = next(r for r in rows if r.run == "r1")
    assert r1.line() == "r1  2 units  done=1 failed=1"
    assert r1.as_json() == {"run": "r1", "units": 2, "states": {"done": 1, "failed": 1}}
    assert len(report.recent_runs(runs_made, 1)) == 1


def test_a_units_files_and_status_lines(runs_made: project.Project) -> None:
    assert report.unit_file(runs_made, "r1", "u1") == "hello\n"
    assert "hello" in report.unit_file(runs_made, "r1", "u1", log=True)
    with pytest.raises(WfError, match="no unit u9 in run r1"):
        report.unit_file(runs_made, "r1", "u9")
    statuses = watch.statuses(runs_made, "r1")
    lines = report.status_lines(runs_made, "r1", statuses)
    assert lines[0].startswith("u1: done ") and lines[0].endswith("s  hello"), "the answer's preview"
    assert lines[1].startswith("u2: failed") and "FALLBACK" in lines[1]
    answers = report.outputs(runs_made, "r1", statuses)
    assert answers["u1"] == "hello\n" and answers["u2"].startswith(
        "FALLBACK: unit u2 ended without an answer"
    )


def test_what_a_monitor_watches_and_the_json_it_prints(runs_made: project.Project) -> None:
    assert report.watching(runs_made, "r1", None) == "every unit (u1, u2)"
    assert report.watching(runs_made, "r1", ["u2"]) == "u2"
    assert report.watching(runs_made, "r1", []) == "nothing (no unit is running)"
    result = watch.monitor(runs_made, "r1", ["u1"], timeout=5)
    assert report.monitor_json("r1", result) == {
        "run": "r1",
        "code": watch.OK,
        "watching": ["u1"],
        "lost": [],
        "units": result.units,
        "attention": [],
    }
    gathered = watch.gather(runs_made, "r1", quiet=0, timeout=5)
    answers = report.outputs(runs_made, "r1", gathered.units)
    js = report.gather_json("r1", gathered, answers)
    assert (js["code"], js["lost"], [u["output"] for u in js["units"]]) == (
        watch.ATTENTION, [], [answers["u1"], answers["u2"]],
    )  # fmt: skip
    assert [u["unit"] for u in js["units"]] == ["u1", "u2"] and answers["u1"] == "hello\n"
    assert report.landed_line(gathered.units[0]) == "DONE u1 done"
    assert report.answer_header(gathered.units[1]).startswith("== u2 (failed")


def test_a_monitor_waits_for_its_run_within_one_timeout(runs_made: project.Project) -> None:
    told: list[str] = []
    left = watch.wait_for_start(runs_made, "r1", 30.0, on_wait=lambda: told.append("waiting"))
    assert left is not None and 29.0 < left <= 30.0 and told == [], "a run that exists: no wait"
    assert watch.wait_for_start(runs_made, "r9", 0.2, on_wait=lambda: told.append("waiting")) is None
    assert told == ["waiting"]
    lines = report.unit_lines(runs_made, "r1", watch.statuses(runs_made, "r1"))
    assert [ln.split(":")[0] for ln in lines] == ["u1", "u2"] and "hello" not in lines[0]
