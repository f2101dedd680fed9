"""The cloud lane: tasks run as Claude Code cloud sessions, pulled back and posted like
any worker's.

- ``backend``: the interface (create, state, pull, cost) and its typed refusals;
- ``claude``: the implementation that drives the real ``claude`` (``--cloud`` under a
  pty, ``-p --teleport``);
- ``records``: ``.wf/cloud/<id>.json`` and its lock; ``ledger``: spend against the budget;
- ``lane``: send (``wf orch pick cloud``) and post (``wf orch post cloud``);
- ``pull``: ``wf cloud pull`` and the batch's sidecar; ``batchlane``: a batch's open cloud
  lane and the tasks local lanes leave to it.

A batch starts the sidecar in a thread: ``wf.cloud.sidecar(project, stop_event)``. Orch
never imports this package: the commands that pick hand it ``PLUG``, the cloud lane as
``wf.orch.pick.CloudPlug`` (sending, and leaving a batch's ``Cloud: yes`` tasks to it).

May import: every part below it (base to orch); orch never imports it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.cloud.batchlane import Open
    from wf.orch.pick import Pick
    from wf.tasks.backlog import Backlog
    from wf.tasks.taskfile import Task


@dataclass(frozen=True)
class _Plug:
    """``wf.orch.pick.CloudPlug``: what it does is imported only when a pick asks."""

    def send(self, project: Project, task_id: str | None, on_wait: Callable[[str], None] | None) -> Pick:
        from wf.cloud.lane import send

        return send(project, task_id, on_wait=on_wait).pick

    def leaves(self, project: Project, bl: Backlog, task: Task) -> bool:
        from wf.cloud.batchlane import leaves

        return leaves(project, bl, task)


PLUG = _Plug()


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
