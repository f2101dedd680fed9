"""Holds: what keeps an open task from the runners until a person (or whoever picked it)
acts, and the command that releases it.

A task is held when the loop handed it back (a record ``.wf/orch/held/<id>.json``, valid
while the task's text is what the loop left), when its Status says awaiting, wip or
blocked, or when it is in progress (picked by an orchestrator, or claimed by someone).
``Backlog.blockers`` decides readiness with the handback records as an input (read once
per command from the small ``held/`` folder; a task's text is digested only when it has
a record), so every view and plan agrees; ``Backlog.hold`` names the hold for ``wf show``
and ``wf list --json``.
"""

from __future__ import annotations

import enum
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # wf.base.records is imported where records are read: a cached wf list needs none
    from wf.base.records import CorruptRecord


class HoldKind(enum.StrEnum):
    HANDBACK = "handback"  # the loop handed it back: a person reads its Note and changes it
    AWAITING = "awaiting"  # a question for a person
    WIP = "wip"  # unfinished work was wrapped up
    BLOCKED = "blocked"  # something outside must change (a red post-check, a crash)
    PICKED = "picked"  # an orchestrator works it (its lane record names it)
    CLAIMED = "claimed"  # in progress, claimed by someone without a lane record
    CORRUPT = "corrupt"  # its handback record cannot be trusted: never read as "no hold"


@dataclass(frozen=True)
class Hold:
    kind: HoldKind
    why: str  # what holds it, in a person's words
    release: str  # the command (or act) that releases it
    since: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "why": self.why, "release": self.release, "since": self.since}


@dataclass(frozen=True)
class Held:
    """A task the loop handed back: not picked again until a person changes its text."""

    id: str
    digest: str
    since: str
    why: str


class RecordState(enum.StrEnum):
    PICKING = "picking"  # claimed, tree not ready yet
    READY = "ready"


@dataclass(frozen=True)
class LaneRecord:
    id: str
    lane: str
    model: str
    worktree: str | None
    branch: str
    base: str | None
    started: str
    state: RecordState
    slice: bool = False
    solo: bool = False
    recovery: str | None = None
    crashes: int = 0
    pid: int | None = None  # a headless worker's pid
    run: str | None = None
    unit: str | None = None
    started_at: float = 0.0
    picker: int | None = None  # the pid of the pick that is readying the tree
    owner: int | None = None  # the pid of the wf orch run supervising it; None: interactive
    recoveries: int = 0  # re-picks in place, whatever the reason
    adapter: str | None = None  # the tool of a headless worker
    prior_status: str | None = None  # the task's Status value before the claim (None: no line)
    pick_id: str = ""  # names this pick in the orch log: a post is never logged twice
    token: str | None = None  # the worker's unit token: its whole tree can be found and ended
    pid_since: float | None = None  # when the worker started: a reused pid is not it
    owner_since: float | None = None  # when the owner started (after a reboot its pid is another's)
    parked_until: float | None = None  # epoch: a usage limit (or an overloaded API) parks the lane
    parked_why: str | None = None  # the limit's window (five_hour, ...), "usage limit" or "overloaded"

    def parked(self, now: float | None = None) -> str | None:
        """``parked until 03:10 (five_hour)`` while the lane waits out a limit, else None."""
        import time

        from wf.base.quantity import until_text

        if self.parked_until is None or self.parked_until <= (time.time() if now is None else now):
            return None
        return f"parked {until_text(self.parked_until, self.parked_why)}"

    def but(self, **changes: Any) -> LaneRecord:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        from wf.base import records as store

        return store.as_dict(self)

    def problem(self, path: Path) -> str | None:
        """What makes the record untrustworthy beyond its types: a negative count or pid,
        or a worktree outside wf's own trees (a worker told to work there would work in
        someone else's folder). ``path`` is ``<root>/.wf/orch/<lane>.json``."""
        for name in ("pid", "picker", "owner"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                return f"field {name!r} has a bad value {v!r} (not a process id)"
        for name in ("crashes", "recoveries", "started_at"):
            if getattr(self, name) < 0:
                return f"field {name!r} is negative"
        if self.worktree is not None:
            trees = os.path.realpath(path.parent.parent.parent / ".worktrees")
            if os.path.dirname(os.path.realpath(self.worktree)) != trees:
                return f"field 'worktree' names {self.worktree!r}, which is not one of wf's trees ({trees})"
        return None

    def worker_alive(self) -> bool:
        from wf.base.pids import alive_as

        return alive_as(self.pid, self.pid_since)

    def owner_alive(self) -> bool:
        from wf.base.pids import alive_as

        return alive_as(self.owner, self.owner_since)


def task_digest(text: str) -> str:
    """A task's text, blank lines at its end aside (a task appended after it moves them)."""
    return hashlib.blake2b(text.rstrip().encode("utf-8"), digest_size=16).hexdigest()


def held_dir(wf_dir: Path) -> Path:
    return wf_dir / "orch" / "held"


def held_path(wf_dir: Path, task_id: str) -> Path:
    from wf.tasks.taskfile import check_id

    return held_dir(wf_dir) / f"{check_id(task_id, 'task id')}.json"


@dataclass(frozen=True)
class HeldRecords:
    """The handback records of a project, read once: by task id, those that load and
    those that cannot be trusted."""

    records: dict[str, Held]
    corrupt: dict[str, CorruptRecord]

    @property
    def empty(self) -> bool:
        return not self.records and not self.corrupt


def load_held(wf_dir: Path) -> HeldRecords:
    from wf.base import records as store

    recs: dict[str, Held] = {}
    bad: dict[str, CorruptRecord] = {}
    try:
        entries = [e for e in os.scandir(held_dir(wf_dir)) if e.name.endswith(".json")]
    except OSError:
        return HeldRecords(recs, bad)
    for e in entries:
        task_id = e.name.removesuffix(".json")
        try:
            rec = store.load(Held, Path(e.path))
        except store.CorruptRecord as err:
            bad[task_id] = err
            continue
        if rec is not None:
            recs[task_id] = rec
    return HeldRecords(recs, bad)


def release(wf_dir: Path, task_id: str) -> bool:
    """Drop a task's handback record; True if there was one."""
    try:
        held_path(wf_dir, task_id).unlink()
    except FileNotFoundError:
        return False
    return True


def lane_record(wf_dir: Path, lane: str) -> LaneRecord | None:
    """A lane's orchestration record (who picked what), None if it has none; CorruptRecord
    if it cannot be trusted (the one reader of lane records: ``wf lanes``, ``wf ctx``, the
    holds of ``wf show`` and the loop all read it here)."""
    from wf.base import records as store

    return store.load(LaneRecord, wf_dir / "orch" / f"{lane}.json")
