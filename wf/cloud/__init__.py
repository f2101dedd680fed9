"""The cloud lane: tasks run as Claude Code cloud sessions, pulled back and posted like
any worker's.

- ``backend``: the interface (create, state, pull, cost) and its typed refusals;
- ``claude``: the implementation that drives the real ``claude`` (``--cloud`` under a
  pty, ``-p --teleport``);
- ``records``: ``.wf/cloud/<id>.json`` and its lock; ``ledger``: spend against the budget;
- ``lane``: send (``wf orch pick cloud``) and post (``wf orch post cloud``);
- ``pull``: ``wf cloud pull`` and the batch's sidecar.

A batch starts the sidecar in a thread: ``wf.cloud.sidecar(project, stop_event)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.cloud.batchlane import Open


def sidecar(
    project: Project,
    stop: threading.Event,
    *,
    interval: float = 600.0,
    linger: float = 24 * 3600.0,
    on_line: Callable[[str], None] | None = None,
    batch: Open | None = None,
    linger_here: bool = True,
    give_up: Callable[[], str | None] | None = None,
) -> int:
    """Pull (and post, ``--no-pick``) every ``interval`` seconds while ``stop`` is unset,
    and with ``batch`` (a batch's open cloud lane) send on each round until the cloud lane
    stops; once ``stop`` is set, only pull, until no cloud record is left, the stop file
    appears or ``linger`` seconds passed (``linger_here`` False: it returns once ``stop``
    is set). Each pull, send and stop is one line through ``on_line``. See
    ``wf.cloud.pull.sidecar``."""
    from wf.cloud.pull import sidecar as run

    return run(
        project,
        stop,
        interval=interval,
        linger=linger,
        on_line=on_line,
        batch=batch,
        linger_here=linger_here,
        give_up=give_up,
    )
