"""The typed state of orchestration: results, outcomes, stop reasons and lane records.

A worker reports a ``Result``; ``post`` turns it into an ``Outcome`` through the outcome
table (``wf.orch.post.TABLE``); a lane that cannot go on carries a ``StopReason`` whose
``Stop`` kind knows whether it is soft (the lane may have work again later in the same
run), whether a person is needed, whether it is an error, and whether it belongs to one
task (a headless loop then holds that task and goes on with the lane's next one). Code branches on these
types; the words a person reads are made from them at the edge.

A lane's active task lives in ``.wf/orch/<lane>.json`` (a ``LaneRecord``); a task the
loop handed back and that waits for a person to change it lives in
``.wf/orch/held/<id>.json`` (a ``Held``). Both load through ``wf.base.records``: a corrupt
record is reported, never read as "none".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base.project import Project
from wf.tasks import holds
from wf.tasks.holds import Held, task_digest
from wf.tasks.holds import LaneRecord as LaneRecord
from wf.tasks.holds import RecordState as RecordState
from wf.tasks.taskfile import check_id

MAX_RECOVERIES = 3  # interruptions and crashes together: a task is never re-picked without end
WHO = "worker"


class Result(enum.StrEnum):
    """What a worker reported (``crashed``: it ended without a report)."""

    DONE = "done"
    AWAITING = "awaiting"
    HANDBACK = "handback"
    WIP = "wip"
    SLICED = "sliced"
    CRASHED = "crashed"


class Outcome(enum.StrEnum):
    """What ``post`` made of a report (the orch log's ``outcome=``)."""

    DONE = "done"
    DONE_GATE_RED = "done-gate-red"
    MODEL_RAISED = "model-raised"
    SLICED = "sliced"
    AWAITING = "awaiting"
    HANDBACK = "handback"
    WIP = "wip"
    POST_CHECK_RED = "post-check-red"
    CRASHED_RECOVERY = "crashed-recovery"
    CRASHED_TWICE = "crashed-twice"
    RELEASED = "released"  # an infrastructure failure: the claim was released
    REDO = "redo"  # the worker met TASKS.md unreadable (a person's save): released, picked again
    LOST = "lost"  # a cloud session that ended without a report, or vanished

    @property
    def done(self) -> bool:
        return self in (Outcome.DONE, Outcome.DONE_GATE_RED)


class Stop(enum.Enum):
    """Why a lane stopped: (soft, a person is needed, an error).

    Each member has a value of its own (its name): members with the same three flags
    would otherwise be aliases of one another (``Stop.SOLO is Stop.NO_WORK``)."""

    def __new__(cls, soft: bool, person: bool, error: bool) -> Stop:
        obj = object.__new__(cls)
        obj._value_ = len(cls.__members__)
        return obj

    NO_WORK = (True, False, False)
    SOLO = (True, False, False)
    HELD = (True, False, False)  # another run or an interactive orchestrator holds the lane
    STOP_FILE = (False, False, False)
    TIME_UP = (False, False, False)
    AWAITING = (False, True, False)
    HANDBACK = (False, True, False)
    WIP = (False, True, False)
    POST_CHECK_RED = (False, True, False)
    CRASHED_TWICE = (False, True, False)
    REPICKED = (False, True, False)
    INFRA = (False, False, True)  # the tool could not run: nothing of the task's doing
    ERROR = (False, False, True)  # wf could not get past an error
    LEDGER = (False, False, False)  # the cloud lane: the budget's reserve is reached
    MAX_PARALLEL = (True, False, False)  # the cloud lane: as many sessions run as it may
    LOST = (False, True, False)  # the cloud lane: a session ended without a report
    LIMIT = (False, False, False)  # a usage limit resets only after --for ends: the task was released
    BUDGET = (False, False, False)  # --budget: spent + the next task's forecast would pass it
    RESERVE = (False, False, False)  # weekly_reserve: the plan's weekly window is used past it

    def __init__(self, soft: bool, person: bool, error: bool) -> None:
        self.soft = soft
        self.person = person
        self.error = error

    @property
    def task_owned(self) -> bool:
        """A stop that belongs to one task, not to the lane or its tool: a headless loop
        holds that task for a person and goes on with the lane's next one."""
        return self in _TASK_OWNED


_TASK_OWNED = frozenset(
    {Stop.AWAITING, Stop.HANDBACK, Stop.WIP, Stop.POST_CHECK_RED, Stop.CRASHED_TWICE, Stop.REPICKED}
)


@dataclass(frozen=True)
class StopReason:
    kind: Stop
    text: str


def exit_code(stops: list[StopReason]) -> int:
    """``wf orch run``: 1 if an error stopped a lane, else 4 if a person is needed, else 0."""
    if any(s.kind.error for s in stops):
        return 1
    if any(s.kind.person for s in stops):
        return 4
    return 0


def _dir(project: Project) -> Path:
    return project.wf_dir / "orch"


def record_path(project: Project, lane: str) -> Path:
    return _dir(project) / f"{check_id(lane, 'lane')}.json"


def load(project: Project, lane: str) -> LaneRecord | None:
    """The lane's record, None if it has none; CorruptRecord if it cannot be trusted."""
    check_id(lane, "lane")
    return holds.lane_record(project.wf_dir, lane)


def save(project: Project, rec: LaneRecord) -> None:
    store.save(record_path(project, rec.lane), rec)


def drop(project: Project, lane: str) -> None:
    record_path(project, lane).unlink(missing_ok=True)


def record_files(project: Project) -> list[Path]:
    folder = _dir(project)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def records(project: Project) -> list[LaneRecord]:
    """Every lane record (CorruptRecord on the first that cannot be trusted)."""
    out = []
    for f in record_files(project):
        rec = store.load(LaneRecord, f)
        if rec is not None:
            out.append(rec)
    return out


def stop_file(project: Project) -> Path:
    return project.out_dir / "wf-batch.stop"


# ------------------------------------------------------------------ held tasks


def hold(project: Project, task_id: str, text: str, since: str, why: str) -> None:
    store.save(holds.held_path(project.wf_dir, task_id), Held(task_id, task_digest(text), since, why))


def held_files(project: Project) -> list[Path]:
    folder = holds.held_dir(project.wf_dir)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def corrupt_held(project: Project) -> list[store.CorruptRecord]:
    """The hold records that cannot be trusted (``wf doctor`` reports them)."""
    return store.corrupt_in(Held, held_files(project))


def unhold(project: Project, task_id: str) -> None:
    holds.release(project.wf_dir, task_id)


def status(project: Project) -> list[dict[str, Any]]:
    """Every lane record with its age and whether its worker lives; a record that cannot
    be trusted is listed with ``corrupt`` saying why (``wf doctor --fix`` moves it aside)."""
    import time

    out: list[dict[str, Any]] = []
    now = time.time()
    for f in record_files(project):
        try:
            rec = store.load(LaneRecord, f)
        except store.CorruptRecord as e:
            out.append({"lane": f.stem, "corrupt": e.why, "path": str(f)})
            continue
        if rec is None:
            continue
        out.append(
            {
                **rec.as_dict(),
                "age_s": round(now - rec.started_at) if rec.started_at else None,
                "worker_alive": rec.worker_alive() if rec.pid else None,
                "parked": rec.parked(now),  # "parked until 03:10 (five_hour)" while it waits
            }
        )
    return out
