"""``wf pilot``: batches back to back for hours, in the foreground.

When no batch is alive and a free lane has runner-ready work, start ``wf batch K``; when
there is none but some tasks are not runner-ready, run one prep batch per idle spell (a
spell ends when a batch runs again); after each batch print its stop lines and the
questions a person must answer. While the only ready work is on lanes someone holds (an
interactive pick, a live ``wf orch run``), wait: a batch there would stop at once. End at
``--for``, at the stop file (or a batch that ended for it), or when nothing is left to
run or prepare, saying what waits for a person; end with the cost report for the time it
ran. A batch is started only for a lane with a task to run (one readiness rule, the
backlog's: a handed-back task is not one).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from wf.base.errors import WfError
from wf.base.project import Project
from wf.night import batch, batchplan, batchstatus


class PilotEnd(enum.StrEnum):
    FOR = "--for"
    STOP_FILE = "stop file"
    NOTHING_LEFT = "nothing left to run or prepare"
    NO_PROGRESS = "no lane with work made progress"
    NO_START = "a batch could not start"
    BUDGET = "budget"  # a batch stopped for --budget (or the weekly reserve), or nothing is left of it

    @property
    def error(self) -> bool:
        return self in (PilotEnd.NO_PROGRESS, PilotEnd.NO_START)


@dataclass(frozen=True)
class Ended:
    """How the pilot ended: why, when it began, and what waits for a person then."""

    end: PilotEnd
    began: str
    waiting: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """As every wf command: 1 for an error, else 4 when a person must act, else 0."""
        return 1 if self.end.error else 4 if self.waiting else 0


class _Mark(NamedTuple):
    """What a batch could change on its lanes: the tasks ready there, the archive."""

    ready: frozenset[str]
    archived: frozenset[str]


def _mark(project: Project, lanes: list[str]) -> _Mark:
    from wf.tasks import backlog

    bl = backlog.load(project)
    ready = frozenset(t.id for lane in lanes for t in bl.runner_ready(lane))
    return _Mark(ready, frozenset(bl.archive.ids()))


def _no_progress(
    project: Project, stamp: str, mark: tuple[list[str], _Mark] | None, emit: Callable[[str], None]
) -> list[str]:
    """The lanes batch ``stamp`` ran on (``mark``: them, and what they held when it
    started; None: a prep batch, or one this pilot did not start) if it changed nothing
    there: nothing archived, the same tasks ready. Said once."""
    if mark is None:
        return []
    ran, before = mark
    if _mark(project, ran) != before:
        return []
    emit(
        f"lanes {', '.join(ran)} made no progress in batch {stamp} (nothing archived, "
        f"the same tasks ready): the pilot starts no batch there again"
    )
    return ran


def _after_batch(project: Project, stamp: str, emit: Callable[[str], None]) -> PilotEnd | None:
    """Say how the batch ended, its stop lines and the questions; the pilot's end too
    when the batch ended for the stop file or kept the budget or the weekly reserve."""
    from wf.base.records import CorruptRecord
    from wf.night.batchlog import needs_person, stop_events
    from wf.orch import events

    rec = next((r for r in batchplan.records(project) if r.stamp == stamp), None)
    if rec is None:
        return None
    emit(f"batch {stamp} ended: {rec.reason} (summary {rec.summary})")
    try:
        found, _ = stop_events(project, stamp)
    except CorruptRecord as e:  # said, never taken for "no lane stopped"
        emit(f"  its stop events cannot be read: {e}")
        found = []
    for ev in found:
        if ev.kind is events.EventKind.STOP:
            emit(f"  {ev.ts[11:16]} {events.sentence(ev)}")
    for item in needs_person(project, rec):
        if item["kind"] == "awaiting":
            emit(f"  question {item['id']}: {item['text']}")
    if rec.reason == batchplan.End.STOP_FILE.value:
        return PilotEnd.STOP_FILE
    if rec.reason in (batchplan.End.BUDGET.value, batchplan.End.RESERVE.value):
        return PilotEnd.BUDGET
    return None


def _has_work(project: Project, plan: batchplan.Plan) -> bool:
    """Whether a lane of the plan has runner-ready work (or a record a dead run left).
    Lanes given with --lanes are in the plan with work or without (a lane may get work
    during the batch, when another lane merges what its task comes after), so a batch
    on them alone would start, find nothing and end, again and again."""
    ready = set(batchplan.ready_lanes(project))
    return any(lane in ready for lane in plan.lanes)


def _held_work(project: Project, lanes: list[str] | None) -> dict[str, str]:
    """Lanes (of ``lanes``, or all) whose runner-ready work waits for a lane someone
    holds: the pilot waits for them instead of ending."""
    waiting = batchplan.lane_work(project).waiting
    return {lane: why for lane, why in waiting.items() if lanes is None or lane in lanes}


class _Next(NamedTuple):
    """What the pilot starts next: a plan and its kind, or none (``plan`` None), then
    with the lanes whose ready work waits for a lane someone holds (``held``)."""

    plan: batchplan.Plan | None
    kind: str  # "batch" | "prep batch"
    held: dict[str, str]


def _next(
    project: Project, k: int, usable: list[str] | None, for_: str, prep: bool, budget: float | None = None
) -> _Next:
    """A batch on ``usable`` lanes (None: all) if one of them has work; else a prep
    batch if ``prep`` (none ran in this idle spell) and there is something to prepare;
    else nothing."""
    if usable == []:
        return _Next(None, "", _held_work(project, usable))
    plan = batchplan.plan(project, k, lanes=usable, for_=for_, budget=budget)
    if _has_work(project, plan):
        return _Next(plan, "batch", {})
    prep_plan = batchplan.plan(project, k, lanes=usable, for_=for_, prep=True) if prep else None
    if prep_plan is not None and prep_plan.lanes:
        return _Next(prep_plan, "prep batch", {})
    return _Next(None, "", _held_work(project, usable))


def waiting_lines(project: Project, lanes: list[str] | None) -> list[str]:
    """What waits for a person (on ``lanes``, or all; a task without a lane always):
    ``waiting for a person: 1 handed back (a1), 1 awaiting (q1)``, then the questions."""
    from wf.tasks import backlog
    from wf.tasks.holds import HoldKind

    words = {
        HoldKind.HANDBACK: "handed back",
        HoldKind.AWAITING: "awaiting",
        HoldKind.WIP: "wip",
        HoldKind.BLOCKED: "blocked",
        HoldKind.CORRUPT: "with a hold record that cannot be trusted",
    }
    bl = backlog.load(project)
    ids: dict[HoldKind, list[str]] = {}
    questions = []
    for t in bl.doc.tasks:
        lane = bl.lane_of(t)
        if lanes is not None and lane is not None and lane not in lanes:
            continue
        hold = bl.hold(t)
        if hold is None or hold.kind not in words:
            continue
        ids.setdefault(hold.kind, []).append(t.id)
        if hold.kind is HoldKind.AWAITING:
            questions.append(f"  question {t.id}: {hold.why}")
    if not ids:
        return []
    parts = [f"{len(ids[k])} {w} ({', '.join(ids[k])})" for k, w in words.items() if k in ids]
    return ["waiting for a person: " + ", ".join(parts), *questions]


def run(
    project: Project,
    *,
    k: int,
    lanes: list[str] | None,
    for_s: float,
    prep: bool,
    poll: float,
    emit: Callable[[str], None],
    budget: float | None = None,
) -> Ended:
    """Drive batches until the end. A batch that ran on lanes and changed nothing there
    (the same tasks ready, nothing archived: a tool that cannot run, a task that fails
    before its worker starts) is not started again on those lanes: the pilot leaves
    them and says so, instead of starting the same batch again every poll (``_Purse``: ``budget``)."""
    from wf.night import res

    began = res.now_iso()
    purse = _Purse(project, budget, emit)
    deadline = time.monotonic() + for_s
    watched: str | None = None
    marks: dict[str, tuple[list[str], _Mark]] = {}  # a started batch: its lanes, what they held
    stuck: set[str] = set()  # lanes a batch of this pilot made no progress on
    prepped = False  # a prep batch ran in this idle spell
    waits: dict[str, str] = {}  # the held lanes last said to be waited for
    end: PilotEnd
    while True:
        live = batchstatus.live(project)
        if live is not None:  # a batch runs (the stop file ends it first, then the pilot)
            watched = watched or live.stamp
            time.sleep(poll)
            continue
        batchstatus.finish_dead(project, "wf pilot")
        if watched is not None:
            stopped = _after_batch(project, watched, emit)
            stuck.update(_no_progress(project, watched, marks.pop(watched, None), emit))
            watched = None
            if stopped is not None:
                end = stopped
                break
        if batchplan.stop_file(project).exists():
            end = PilotEnd.STOP_FILE
            break
        left = deadline - time.monotonic()
        if left <= 0:
            end = PilotEnd.FOR
            break
        left_usd = purse.left()
        if left_usd is not None and left_usd <= 0:
            end = PilotEnd.BUDGET
            break
        usable = _usable(project, lanes, stuck)
        nxt = _next(project, k, usable, f"{max(1, round(left))}s", prep and not prepped, left_usd)
        if nxt.plan is None:
            if nxt.held:  # ready work waits behind a lane someone holds: wait, start nothing
                if nxt.held != waits:
                    for lane, why in nxt.held.items():
                        emit(f"waiting: lane {lane} {why}")
                    waits = nxt.held
                time.sleep(min(poll, max(0.0, left)))
                continue
            end = PilotEnd.NO_PROGRESS if stuck else PilotEnd.NOTHING_LEFT
            break
        plan, kind = nxt.plan, nxt.kind
        waits = {}
        try:
            started = batch.start(project, plan)
        except WfError as e:
            emit(f"cannot start a {kind}: {e}")
            end = PilotEnd.NO_START
            break
        prepped = kind == "prep batch"
        watched = started.stamp
        if kind == "batch":
            marks[started.stamp] = (list(plan.lanes), _mark(project, list(plan.lanes)))
        emit(f"{kind} {started.stamp} started: lanes {', '.join(plan.lanes)}, at most {k} task(s)")
    waiting = tuple(waiting_lines(project, lanes))
    for line in waiting:
        emit(line)
    return Ended(end, began, waiting)


def _usable(project: Project, lanes: list[str] | None, stuck: set[str]) -> list[str] | None:
    """The lanes the next batch may take: ``lanes`` (None: all) but the stuck ones."""
    if not stuck:
        return lanes
    return [ln for ln in (lanes or [x.name for x in project.config.lanes]) if ln not in stuck]


class _Purse:
    """The pilot's budget: what is left of it is the budget less every cost line written
    since the pilot began (a line whose cost is not known leaves nothing: an unknown cost
    is never $0). Each batch gets what is left as its own --budget."""

    def __init__(self, project: Project, budget: float | None, emit: Callable[[str], None]) -> None:
        from wf.cost import forecast as fc

        self.project, self.budget, self.emit = project, budget, emit
        self.offset = fc.log_size(project.root)  # its batches' cost lines come after

    def left(self) -> float | None:
        """None: no budget. Nothing left is said."""
        from wf.cost import forecast as fc

        if self.budget is None:
            return None
        spent = fc.spent_since(self.project.root, self.offset).values()
        left = 0.0 if any(x is None for x in spent) else self.budget - sum(x or 0.0 for x in spent)
        if left <= 0:
            self.emit(f"budget ${self.budget:.2f}: nothing left to start a batch with")
        return left


def cost_lines(project: Project, since: str) -> list[str]:
    from wf.cost import costlog

    recs, _bad = costlog.records(since, str(Path(project.root)))
    return costlog.report_text(costlog.report(recs)) or ["no cost lines in this time"]
