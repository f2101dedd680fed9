"""A batch's N: how many tasks it started, local and cloud, in ``.wf/batch/<stamp>.starts``.

Each local start (by the batch's ``wf orch run``, which knows its batch from ``WF_BATCH``)
and each cloud send (by the batch's sidecar, counted from just before the send and taken
back when the send sent nothing) is one line. The loop starts nothing more at N, and
neither does the sidecar. A cloud task counts when it is sent, as a local task counts
when it is started. Orch owns this count; the cloud lane (``wf.cloud.batchlane``) writes
its sends into it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from wf.base.fsutil import append_line
from wf.base.project import Project

ENV = "WF_BATCH"  # the loop of a batch gets the batch's stamp here
STAMP = re.compile(r"\d{8}T\d{6}Z")

LOCAL = "local"  # a local lane started a task (its id)
CLOUD = "cloud"  # the sidecar is about to send one: counted from now on
UNSENT = "unsent"  # ... and sent none: the count taken back
SENT = "sent"  # ... and sent this task (the id, for a person; not counted again)


def starts_file(project: Project, stamp: str) -> Path:
    if not STAMP.fullmatch(stamp):
        raise ValueError(f"not a batch stamp: {stamp!r}")
    return project.wf_dir / "batch" / f"{stamp}.starts"


def note_start(project: Project, stamp: str, kind: str, task_id: str) -> None:
    append_line(starts_file(project, stamp), f"{kind} {task_id}")  # one short O_APPEND write


def _counts(project: Project, stamp: str) -> dict[str, int]:
    n = {k: 0 for k in (LOCAL, CLOUD, UNSENT, SENT)}
    try:
        lines = starts_file(project, stamp).read_text("utf-8").splitlines()
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
    return v if STAMP.fullmatch(v) else None
