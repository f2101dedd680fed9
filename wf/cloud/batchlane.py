"""The cloud lane inside a batch: open while the batch may send, and the batch's task cap.

While a batch on a ``cloud = true`` project lives, its sidecar sends (as ``wf orch pick
cloud``). The batch marks the cloud lane open in ``.wf/cloud/batch.open`` (the batch
job's pid and start time, its stamp and N) before its loop starts; the sidecar removes
the mark when the cloud lane stops for the rest of the batch (the ledger, a session that
came back awaiting/handback/lost, the stop file, a refusal of the tool, the cap) or the
batch's loop ends. While the mark is there and its batch job lives, local lanes leave
the ``Cloud: yes`` tasks the cloud lane takes to it (``leaves``), so they never race the
sidecar for one.

The batch's N counts both kinds of start in ``.wf/batch/<stamp>.starts``: each local start
(by its ``wf orch run``, which knows its batch from ``WF_BATCH``) and each cloud send,
counted from just before the send (taken back when the send sent nothing); the loop
starts nothing more at N, and neither does the sidecar. A cloud task counts when it is
sent, as a local task counts when it is started.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wf.base.fsutil import append_line, atomic_write_text
from wf.base.project import Project
from wf.workers import procs

if TYPE_CHECKING:
    from wf.tasks.backlog import Backlog
    from wf.tasks.taskfile import Task

ENV = "WF_BATCH"  # the loop of a batch gets the batch's stamp here
_STAMP = re.compile(r"\d{8}T\d{6}Z")


@dataclass(frozen=True)
class Open:
    stamp: str
    pid: int
    pid_start: float | None
    n: int


def _open_file(project: Project) -> Path:
    return project.wf_dir / "cloud" / "batch.open"


def _starts_file(project: Project, stamp: str) -> Path:
    if not _STAMP.fullmatch(stamp):
        raise ValueError(f"not a batch stamp: {stamp!r}")
    return project.wf_dir / "batch" / f"{stamp}.starts"


def open_lane(project: Project, stamp: str, n: int) -> Open:
    """Mark the cloud lane open for this batch (the calling process is the batch job)."""
    mark = Open(stamp, os.getpid(), procs.started(os.getpid()), n)
    path = _open_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(mark.__dict__) + "\n")
    _starts_file(project, stamp).parent.mkdir(parents=True, exist_ok=True)
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
    return mark if _STAMP.fullmatch(mark.stamp) else None


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


# ------------------------------------------------------------------ the batch's N


LOCAL = "local"  # a local lane started a task (its id)
CLOUD = "cloud"  # the sidecar is about to send one: counted from now on
UNSENT = "unsent"  # ... and sent none: the count taken back
SENT = "sent"  # ... and sent this task (the id, for a person; not counted again)


def note_start(project: Project, stamp: str, kind: str, task_id: str) -> None:
    append_line(_starts_file(project, stamp), f"{kind} {task_id}")  # one short O_APPEND write


def _counts(project: Project, stamp: str) -> dict[str, int]:
    n = {k: 0 for k in (LOCAL, CLOUD, UNSENT, SENT)}
    try:
        lines = _starts_file(project, stamp).read_text("utf-8").splitlines()
    except OSError:
        return n
    for ln in lines:
        k = ln.split(" ", 1)[0]
        if k in n:
            n[k] += 1
    return n


def starts(project: Project, stamp: str, kind: str | None = None) -> int:
    """How many tasks this batch started (``kind``: only LOCAL, or only CLOUD): local
    starts, plus the sidecar's sends counted from just before each send."""
    n = _counts(project, stamp)
    cloud = n[CLOUD] - n[UNSENT]
    return n[LOCAL] if kind == LOCAL else cloud if kind == CLOUD else n[LOCAL] + cloud


def settled_cloud_starts(project: Project, stamp: str, timeout: float = 30.0) -> int:
    """``starts(..., CLOUD)``, once no send of the sidecar is under way (counted, neither
    sent nor taken back yet), within ``timeout``: a send that will send nothing must not
    take the loop's last start from it. Past the timeout, the count as it stands (a send
    that never said how it went counts: N is never passed)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        n = _counts(project, stamp)
        if n[CLOUD] - n[UNSENT] - n[SENT] <= 0 or time.monotonic() >= deadline:
            return n[CLOUD] - n[UNSENT]
        time.sleep(0.05)


def loop_stamp() -> str | None:
    """The batch a ``wf orch run`` belongs to (``WF_BATCH``), or None."""
    v = os.environ.get(ENV, "")
    return v if _STAMP.fullmatch(v) else None
