"""The cloud lane inside a batch: open while the batch may send, and the batch's task cap.

While a batch on a ``cloud = true`` project lives, its sidecar sends (as ``wf orch pick
cloud``). The batch marks the cloud lane open in ``.wf/cloud/batch.open`` (the batch
job's pid and start time, its stamp and N) before its loop starts; the sidecar removes
the mark when the cloud lane stops for the rest of the batch (the ledger, a session that
came back awaiting/handback/lost, the stop file, a refusal of the tool, the cap) or the
batch's loop ends. While the mark is there and its batch job lives, local lanes leave
the ``Cloud: yes`` tasks the cloud lane takes to it (``leaves``), so they never race the
sidecar for one.

The batch's N counts both kinds of start, local starts and cloud sends; orch owns that
count (``wf.orch.starts``), and the sidecar notes each send in it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wf.base import records as store
from wf.base.project import Project
from wf.orch.starts import CLOUD, SENT, STAMP, note_start, starts, starts_file
from wf.workers import procs

if TYPE_CHECKING:
    from wf.tasks.backlog import Backlog
    from wf.tasks.taskfile import Task

# The batch's N (CLOUD, SENT, note_start, starts) is orch's, named here too beside the
# open mark whose N caps it (the cloud lane's tests read both through this module).
__all__ = ["CLOUD", "SENT", "note_start", "starts"]
__all__ += ["Open", "close", "current", "fits_model", "leaves", "open_lane", "takes"]


@dataclass(frozen=True)
class Open:
    stamp: str
    pid: int
    pid_start: float | None
    n: int


def _open_file(project: Project) -> Path:
    return project.wf_dir / "cloud" / "batch.open"


def open_lane(project: Project, stamp: str, n: int) -> Open:
    """Mark the cloud lane open for this batch (the calling process is the batch job)."""
    mark = Open(stamp, os.getpid(), procs.started(os.getpid()), n)
    path = _open_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_json(path, mark.__dict__, indent=None)
    starts_file(project, stamp).parent.mkdir(parents=True, exist_ok=True)
    return mark


def close(project: Project, stamp: str) -> None:
    """The cloud lane stopped for the rest of this batch: local lanes may take its tasks."""
    mark = _read(project)
    if mark is None or mark.stamp == stamp:
        _open_file(project).unlink(missing_ok=True)


def _read(project: Project) -> Open | None:
    try:
        d = json.loads(_open_file(project).read_text("utf-8"))
        mark = Open(str(d["stamp"]), int(d["pid"]), d.get("pid_start"), int(d["n"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return mark if STAMP.fullmatch(mark.stamp) else None


def current(project: Project) -> Open | None:
    """The open mark of a batch that still lives (a batch killed -9 leaves a mark nobody heeds)."""
    mark = _read(project)
    if mark is None or not procs.alive_as(mark.pid, mark.pid_start):
        return None
    return mark


def fits_model(project: Project, model: str) -> bool:
    allowed = project.config.cloud_models
    return model in allowed if allowed else "opus" in model.lower()


def takes(project: Project, bl: Backlog, task: Task, lane_model: str) -> bool:
    """Whether the cloud lane takes this runner-ready task (its Model, Cloud, Sessions)."""
    if (task.get("cloud") or "").strip().lower() == "no" or task.sessions == "solo":
        return False
    return not bl.is_slice_job(task) and fits_model(project, task.model or lane_model)


def leaves(project: Project, bl: Backlog, task: Task) -> bool:
    """A local lane leaves this task to the cloud: it says ``Cloud: yes``, the cloud lane
    takes it, and a live batch has the cloud lane open."""
    if not project.config.cloud or not task.cloud:
        return False
    lane = project.config.lane(bl.lane_of(task) or "")
    if lane is None or not takes(project, bl, task, lane.model):
        return False
    return current(project) is not None
