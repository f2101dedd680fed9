"""A batch's typed task rows (``.wf/batch/<stamp>.tasks.jsonl``, one ``TaskRow`` per
posted task): written by the summary (``wf.night.batchlog``), read by the summary's
footer, the morning page (``wf.night.morning``) and ``wf top``; and the one rule of
which outcomes archived a task (``wf.orch.state.Outcome.done``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from wf.base import records as store
from wf.base.project import Project
from wf.base.records import CorruptRecord


@dataclass(frozen=True)
class TaskRow:
    """One posted task of the batch, as its summary line says it."""

    ts: str
    lane: str
    id: str
    outcome: str
    commit: str
    usd: float | None  # None: no cost line
    source: str  # CostSource of the dollars: table, tool, unpriced
    estimated: bool  # includes estimated output
    dur_s: float | None
    forecast: float | None = None  # the median the batch's forecast gave it (None: none)


def rows_file(project: Project, stamp: str) -> Path:
    """The batch's posted tasks, one JSON row each."""
    return project.wf_dir / "batch" / f"{stamp}.tasks.jsonl"


def read_task_rows(path: Path) -> list[TaskRow] | None:
    """The rows of a batch's rows file; None when there is none. CorruptRecord for a
    row that cannot be trusted."""
    lines = store.read_lines(path)
    if lines is None:
        return None
    out = []
    for n, line in enumerate(lines, 1):
        try:
            data = json.loads(line, parse_constant=store.no_constant)
        except ValueError as e:
            raise CorruptRecord(path, f"line {n} is not a JSON row: {e}") from None
        out.append(store.from_dict(TaskRow, data, path))
    return out


def is_done(outcome: str) -> bool:
    """Whether an orch log outcome archived the task (``Outcome.done``: done, done-gate-red)."""
    from wf.orch.state import Outcome

    try:
        return Outcome(outcome).done
    except ValueError:
        return False
