"""``wf pilot``: batches back to back for hours, in the foreground.

When no batch is alive and there is runner-ready work, start ``wf batch K``; when there
is none but some tasks are not runner-ready, run one prep batch per idle spell (a spell
ends when a batch runs again); after each batch print its stop lines and the questions a
person must answer; end at ``--for``, at the stop file (or a batch that ended for it), or
when nothing is left to run or prepare; end with the cost report for the time it ran.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from pathlib import Path

from wf.errors import WfError
from wf.orch import batch, batchplan
from wf.project import Project


class PilotEnd(enum.StrEnum):
    FOR = "--for"
    STOP_FILE = "stop file"
    NOTHING_LEFT = "nothing left to run or prepare"


def _after_batch(project: Project, stamp: str, emit: Callable[[str], None]) -> bool:
    """Say how the batch ended, its stop lines and the questions; True if it ended for
    the stop file (the pilot stops too)."""
    from wf.orch.batchlog import needs_person

    rec = next((r for r in batchplan.records(project) if r.stamp == stamp), None)
    if rec is None:
        return False
    emit(f"batch {stamp} ended: {rec.reason} (summary {rec.summary})")
    try:
        lines = (project.root / rec.summary).read_text("utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        if " stop lane " in line:
            emit(f"  {line.removeprefix('- ')}")
    for item in needs_person(project, rec):
        if item["kind"] == "awaiting":
            emit(f"  question {item['id']}: {item['text']}")
    return rec.reason == batchplan.End.STOP_FILE.value


def _has_work(project: Project, plan: batchplan.Plan) -> bool:
    """Whether a lane of the plan has runner-ready work (or a record a dead run left).
    Lanes given with --lanes are in the plan with work or without (a lane may get work
    during the batch, when another lane merges what its task comes after), so a batch
    on them alone would start, find nothing and end, again and again."""
    ready = set(batchplan.ready_lanes(project))
    return any(lane in ready for lane in plan.lanes)


def run(
    project: Project,
    *,
    k: int,
    lanes: list[str] | None,
    for_s: float,
    prep: bool,
    poll: float,
    emit: Callable[[str], None],
) -> tuple[PilotEnd, str]:
    """Drive batches until the end; returns why it ended and the ISO time it began."""
    from wf.orch import res

    began = res.now_iso()
    deadline = time.monotonic() + for_s
    watched: str | None = None
    prepped = False  # a prep batch ran in this idle spell
    end: PilotEnd
    while True:
        live = batch.live(project)
        if live is not None:  # a batch runs (the stop file ends it first, then the pilot)
            watched = watched or live.stamp
            time.sleep(poll)
            continue
        batch.finish_dead(project, "wf pilot")
        if watched is not None:
            stopped = _after_batch(project, watched, emit)
            watched = None
            if stopped:
                end = PilotEnd.STOP_FILE
                break
        if batchplan.stop_file(project).exists():
            end = PilotEnd.STOP_FILE
            break
        left = deadline - time.monotonic()
        if left <= 0:
            end = PilotEnd.FOR
            break
        for_ = f"{max(1, round(left))}s"
        plan = batchplan.plan(project, k, lanes=lanes, for_=for_)
        kind = "batch"
        if not _has_work(project, plan):
            if not prep or prepped:
                end = PilotEnd.NOTHING_LEFT
                break
            plan = batchplan.plan(project, k, lanes=lanes, for_=for_, prep=True)
            kind = "prep batch"
            if not plan.lanes:
                end = PilotEnd.NOTHING_LEFT
                break
        try:
            started = batch.start(project, plan)
        except WfError as e:
            emit(f"cannot start a {kind}: {e}")
            end = PilotEnd.NOTHING_LEFT
            break
        prepped = kind == "prep batch"
        watched = started.stamp
        emit(f"{kind} {started.stamp} started: lanes {', '.join(plan.lanes)}, at most {k} task(s)")
    return end, began


def cost_lines(project: Project, since: str) -> list[str]:
    from wf import costlog

    recs, _bad = costlog.records(since, str(Path(project.root)))
    return costlog.report_text(costlog.report(recs)) or ["no cost lines in this time"]
