"""wf/cost/report.py without the command line: one worker's cost, its record, its
warnings and its lines; the report over the cost logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cost.test_usage import SONNET, WORKER_REP, WORKER_USD, asst, tokens, worker_transcript, write
from wf.base.errors import WfError
from wf.cost import costlog, report


def test_measure_makes_the_record_and_the_summary(tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    cost, kind = report.transcript_cost(agent=None, session=None, thread=None, file=str(f))
    m = report.measure(cost, kind, name="worker-7", root=None, lane="sonnet", done=True, now=0.0)
    assert (m.kind, m.warnings) == ("session", ())
    assert m.record["ts"] == "1970-01-01T00:00:00Z"
    assert (m.record["project"], m.record["agent"], m.record["lane"], m.record["done"]) == (
        "-", "worker-7", "sonnet", 1,
    )  # fmt: skip
    assert m.lines() == [
        f"session worker-7  model {SONNET}  turns 2  dur 142s",
        "in 5  out ~50 (42 reported)  cache writes 5m 1000 1h 500  cache reads 11000",
        f"usd ~{WORKER_USD:.4f} (reported output only: {WORKER_REP:.4f})",
        "~ includes estimated output (a lower bound where thinking is hidden)",
    ]
    assert m.as_json() == {**m.record, "malformed": 0, "files": 1}


def test_measure_logs_only_when_asked(tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    cost, kind = report.transcript_cost(agent=None, session=None, thread=None, file=str(f))
    proj = tmp_path / "app"
    report.measure(cost, kind, name="worker-7", root=proj)
    assert not (proj / "out" / "wf-cost.log").exists()
    m = report.measure(cost, kind, name="worker-7", root=proj, log=True, task_id="T")
    assert m.record["project"] == "app"
    assert (proj / "out" / "wf-cost.log").read_text() == costlog.format_line(m.record) + "\n"


def test_measure_warns_of_malformed_lines_and_unpriced_models(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", "garbage", asst(tokens(1, 1), model="mystery-model-9"))
    cost, kind = report.transcript_cost(agent=None, session=None, thread=None, file=str(f))
    m = report.measure(cost, kind, name="t", root=None)
    assert m.warnings[0].startswith("unpriced model mystery-model-9: counted as $0")
    assert m.warnings[-1] == "1 malformed line(s) skipped"


def test_a_file_of_no_requests_is_not_a_transcript(tmp_path: Path) -> None:
    f = write(tmp_path / "notes.jsonl", "garbage", "more garbage")
    with pytest.raises(WfError, match="no API requests and 2 unreadable line"):
        report.transcript_cost(agent=None, session=None, thread=None, file=str(f))


def test_report_says_why_it_is_empty(tmp_path: Path) -> None:
    empty = report.cost_report()
    assert (empty.rows, empty.problems) == ([], [])
    assert empty.lines() == ["no cost lines yet (wf usage --log, wf orch post --agent)"]
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    cost, kind = report.transcript_cost(agent=None, session=None, thread=None, file=str(f))
    report.measure(cost, kind, name="worker-7", root=tmp_path / "app", log=True, now=0.0)
    later = report.cost_report(since="2026-01-01", project="app")
    assert later.lines() == [
        "no cost lines since 2026-01-01 and for project app "
        "(the logs have 1, from 1970-01-01 to 1970-01-01; projects: app)"
    ]
    rows = report.cost_report(by="model").rows
    assert [(r["model"], r["n"]) for r in rows] == [(SONNET, 1)]
