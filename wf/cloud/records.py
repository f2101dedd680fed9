"""A cloud session's record, ``.wf/cloud/<id>.json``, and the lock that guards it.

A record exists from the claim until its post: ``sending`` (claimed, the session is
being created), ``running``, then the state it ended in (done, awaiting, handback,
lost) once a pull saw it end. Each record has its own lock (``.wf/cloud/<id>.lock``,
an flock): a pull takes it without waiting, so two pulls of one id never both act.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base.errors import LockTimeout, WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.cloud.backend import SessionState, valid_session
from wf.tasks.taskfile import check_id


@dataclass(frozen=True)
class CloudRecord:
    id: str
    lane: str  # the task's own (local) lane: where it goes back to
    model: str
    branch: str  # cloud/<id>: where its work lands in this repository
    base: str | None  # main's commit when it was sent
    started: str
    started_at: float
    state: SessionState
    session: str | None = None
    url: str | None = None
    prior_status: str | None = None  # the task's Status line before the claim
    sender: int | None = None  # the pid of the send creating the session
    ended_at: float = 0.0
    cost_usd: float | None = None
    polls_usd: float = 0.0  # what reading its state cost while it ran (a local turn each)
    note: str = ""
    commit: str | None = None  # the tip of the pulled branch

    def but(self, **changes: Any) -> CloudRecord:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return store.as_dict(self)

    @property
    def duration(self) -> float:
        end = self.ended_at or 0.0
        return max(0.0, end - self.started_at) if end else 0.0


def folder(project: Project) -> Path:
    return project.wf_dir / "cloud"


def path(project: Project, task_id: str) -> Path:
    return folder(project) / f"{check_id(task_id, 'task id')}.json"


def _checked(rec: CloudRecord | None, f: Path) -> CloudRecord | None:
    """A record as wf wrote it, or CorruptRecord: its id, branch and session reach git refs,
    argvs and paths, so one that is not what wf writes is never acted on."""
    if rec is None:
        return None
    why = None
    if rec.id != f.stem:
        why = f"its id {rec.id!r} is not its file's name"
    elif rec.branch != f"cloud/{rec.id}":
        why = f"its branch {rec.branch!r} is not cloud/{rec.id}"
    elif rec.session is not None and not valid_session(rec.session):
        why = f"its session {rec.session!r} is not a session id"
    if why is not None:
        raise store.CorruptRecord(f, why)
    return rec


def load_file(f: Path) -> CloudRecord | None:
    return _checked(store.load(CloudRecord, f), f)


def load(project: Project, task_id: str) -> CloudRecord | None:
    return load_file(path(project, task_id))


def save(project: Project, rec: CloudRecord) -> None:
    store.save(path(project, rec.id), rec)


def drop(project: Project, task_id: str) -> None:
    path(project, task_id).unlink(missing_ok=True)


def all_records(project: Project) -> list[CloudRecord]:
    out = []
    d = folder(project)
    for f in sorted(d.glob("*.json")) if d.is_dir() else []:
        rec = load_file(f)
        if rec is not None:
            out.append(rec)
    return out


class Busy(WfError):
    """Another wf holds this record's lock (a pull or a post of the same id)."""

    def __init__(self, task_id: str, holder: str) -> None:
        self.task_id = task_id
        self.holder = holder
        super().__init__(f"{task_id}: another pull holds it ({holder}); skipped")


@contextmanager
def locked(
    project: Project, task_id: str, *, wait: float = 0.0, on_wait: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold the record's own lock; Busy at once (or after ``wait`` seconds, saying so
    through ``on_wait``) if another process holds it."""
    name = f"{check_id(task_id, 'task id')}.lock"
    try:
        with project_lock(folder(project), wait, on_wait, name=name):
            yield
    except LockTimeout as e:
        raise Busy(task_id, e.holder) from None
