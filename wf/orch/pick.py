"""``wf orch pick``: choose, claim and ready a lane's next task.

One call: stop file check; refuse a lane that already has an active record (unless
recovering it); choose the lane's first runner-ready task (a handed-back task is not);
claim it; ready the lane's tree and branch; write the record; return the prompt.
The record is written before the claim, so a claim never exists without one, and a
pick that died half-way is finished by the next pick, never doubled.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from importlib import resources
from typing import NamedTuple, Protocol

from wf.base.config import CLOUD_LANE
from wf.base.errors import ClaimError, WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.orch import state
from wf.orch.state import LaneRecord, RecordState, Stop, StopReason
from wf.tasks import backlog as backlogmod
from wf.tasks import ops
from wf.tasks.taskfile import Task, check_id, utc_stamp
from wf.trees import worktrees


class Pick(NamedTuple):
    lane: str
    stop: StopReason | None
    record: LaneRecord | None
    prompt: str

    def text(self) -> str:
        if self.stop is not None:
            return f"stop lane {self.lane}: {self.stop.text}"
        return self.prompt


# the run's budget gate: why a fresh pick's task may not start (before its claim), or None
Admit = Callable[[Project, Task, str], StopReason | None]


def stopped(lane: str, kind: Stop, text: str) -> Pick:
    return Pick(lane, StopReason(kind, text), None, "")


def _template(name: str) -> str:
    return resources.files("wf").joinpath(f"data/{name}").read_text("utf-8")


def prompt_for(project: Project, rec: LaneRecord) -> str:
    lines = [
        f"spawn: wf-worker model={rec.model} background",
        f"Task: {rec.id}  Lane: {rec.lane}  Model: {rec.model}",
        f"Main tree: {project.root}  Worktree: {rec.worktree}  Branch: {rec.branch}",
    ]
    if rec.recovery:
        lines.append(f"Recovery: {rec.recovery}")
    if rec.slice:
        lines.append(
            f"Slice job: split {rec.id} into runner-ready tasks with 'wf add ... --parent {rec.id}'; "
            f"do not implement it; report result: sliced."
        )
    lines.append("Final message: the 4 report lines only.")
    return "\n".join(lines) + "\n"


def worker_instructions(slice_job: bool) -> str:
    """What a headless worker gets before the prompt lines (a subagent has it in its
    definition, agents/wf-worker.md)."""
    return _template("slice-prompt.md" if slice_job else "prompt.md")


def live_holder(rec: LaneRecord) -> str | None:
    """Who still works on a record's task: a live headless worker, the ``wf orch run``
    that owns it, or a pick still readying its tree (None if nobody)."""
    from wf.workers import procs

    me = os.getpid()
    if rec.pid and rec.worker_alive():
        return f"worker pid {rec.pid}"
    if rec.owner and rec.owner != me and rec.owner_alive():
        return f"wf orch run pid {rec.owner}"
    if rec.state is RecordState.PICKING and rec.picker and rec.picker != me and procs.alive(rec.picker):
        return f"a pick by pid {rec.picker}"
    return None


class CloudPlug(Protocol):
    """The cloud lane as a pick sees it: orch owns this interface, ``wf.cloud`` implements
    it (``wf.cloud.PLUG``), and the commands that pick pass it in, so orch never imports
    the cloud lane."""

    def send(self, project: Project, task_id: str | None, on_wait: Callable[[str], None] | None) -> Pick:
        """``wf orch pick cloud``: send the first fitting task (or ``task_id``) to a session."""
        ...

    def leaves(self, project: Project, bl: backlogmod.Backlog, task: Task) -> bool:
        """Whether a local lane leaves this ready task to the cloud lane (a batch's open one)."""
        ...


def pick(
    project: Project,
    lane: str | None = None,
    *,
    task_id: str | None = None,
    recovery: str | None = None,
    owner: int | None = None,
    on_wait: Callable[[str], None] | None = None,
    cloud: CloudPlug | None = None,
    admit: Admit | None = None,
    synced: bool = False,
) -> Pick:
    """Choose, claim and ready the next task of a lane (or of the first lane that has one).

    ``owner`` is the pid of a ``wf orch run`` that will supervise the worker (None: an
    interactive orchestrator). A record is only ever taken over when whoever held it is
    gone. ``cloud``: the cloud lane, which a project with ``cloud = true`` must be given.
    ``admit``: the run's budget gate (``wf.orch.budget``), asked about a fresh pick's task
    before its claim; its stop reason stops the lane with nothing claimed."""
    if lane is not None:
        check_id(lane, "lane")
    if task_id is not None:
        check_id(task_id, "task id")
    if recovery is not None and "\n" in recovery:
        raise WfError("--recovery WHY must be one line")
    if project.config.cloud:
        if cloud is None:  # a bug of the caller: its local lanes would race the cloud lane
            raise RuntimeError("a pick on a project with cloud = true needs the cloud lane (wf.cloud.PLUG)")
        if lane == CLOUD_LANE:  # the virtual lane: a cloud session
            if recovery is not None:
                raise WfError("the cloud lane has no recovery pick: wf cloud pull, then wf orch post cloud")
            return cloud.send(project, task_id, on_wait)
    # every check that can refuse runs before the first write (a claim, a record)
    worktrees.preflight(project, lane)
    if state.stop_file(project).exists() and recovery is None:
        where = state.stop_file(project).relative_to(project.root)
        return stopped(lane or "*", Stop.STOP_FILE, f"stop file {where} exists")
    _sync_first(project, synced, on_wait)
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        bl = backlogmod.load(project)
        if lane is None:
            lane = _first_lane(project, bl, task_id, cloud)
            if lane is None:
                return stopped("*", Stop.NO_WORK, "no runner-ready task in any free lane")
        if project.config.lane(lane) is None:
            raise WfError(f"no lane {lane!r} (wf lanes)")
        elsewhere = _elsewhere(project, lane)
        if elsewhere is not None:
            return stopped(lane, Stop.NO_WORK, elsewhere)
        worktrees.lane_clash(lane, worktrees.main_branch(project))  # a lane chosen here
        rec = state.load(project, lane)
        if recovery is not None:
            got = _recovered(project, bl, lane, rec, recovery, owner)
            if isinstance(got, Pick):
                return got
            rec = got
            _keep_claim(project, rec)
        elif rec is not None and (rec.state is RecordState.READY or live_holder(rec)):
            raise WfError(
                f"lane {lane} already has an active task {rec.id} (since {rec.started}); "
                f"post its report (wf orch post {lane} ...) or re-pick it with --recovery WHY"
            )
        elif rec is None:
            got = _fresh(project, bl, lane, task_id, cloud, admit, owner)
            if isinstance(got, Pick):
                return got
            rec = got
        else:  # a record left "picking" by a pick that died: finish that one, never a second
            _keep_claim(project, rec)
        rec = rec.but(picker=os.getpid())
        state.save(project, rec)  # first the record, then the claim: a claim never exists without it
        task_now = backlogmod.load(project).doc.find(rec.id)
        if task_now is not None and task_now.status.state != "progress":
            ops.set_status(
                project, rec.id, "progress", state.WHO, force=rec.recovery is not None, on_wait=on_wait
            )
    tree = worktrees.allocate(project, lane, rec.id, on_wait=on_wait)
    rec = rec.but(worktree=tree.path, base=tree.base, state=RecordState.READY, picker=None)
    state.save(project, rec)
    return Pick(lane, None, rec, prompt_for(project, rec))


def _sync_first(project: Project, synced: bool, on_wait: Callable[[str], None] | None) -> None:
    """With a shared remote (wf.toml), the backlog of every machine first (wf sync),
    unless ``synced`` (a post just did)."""
    if project.config.shared and not synced:
        from wf.trees import sync  # only with a shared remote

        sync.if_shared(project, on_wait=on_wait)


def _fresh(
    project: Project,
    bl: backlogmod.Backlog,
    lane: str,
    task_id: str | None,
    cloud: CloudPlug | None,
    admit: Admit | None,
    owner: int | None,
) -> LaneRecord | Pick:
    """The record of a fresh pick, or the stop. With a shared remote the task's claim ref
    is taken here, before any write: tasks other machines hold are skipped, a race lost
    to another machine picks the next task, an offline remote refuses (OfflineClaim)."""
    skip: set[str] = set()
    if project.config.shared:
        from wf.trees import claims

        skip = claims.for_pick(project, lane)
    while True:
        chosen = _choose(project, bl, lane, task_id, cloud, skip)
        if isinstance(chosen, StopReason):
            return Pick(lane, chosen, None, "")
        refused = admit(project, chosen, lane) if admit is not None else None
        if refused is not None:
            return Pick(lane, refused, None, "")
        if project.config.shared and not claims.take_for_pick(project, chosen.id, state.WHO, lane):
            if task_id is not None:
                raise ClaimError(task_id, "another machine claimed it first (wf claims)")
            skip.add(chosen.id)
            continue
        return _new_record(project, bl, lane, chosen, owner)


def _keep_claim(project: Project, rec: LaneRecord) -> None:
    """A pick that goes on with a record's task: with a shared remote, its claim ref must
    still be this machine's (another machine may have stolen a stale one)."""
    if project.config.shared:
        from wf.trees import claims

        if not claims.take_for_pick(project, rec.id, state.WHO, rec.lane):
            raise ClaimError(
                rec.id, "another machine holds its claim now (wf claims); drop this lane's record"
            )


def _elsewhere(project: Project, lane: str) -> str | None:
    """Why this machine does not run ``lane`` (its ``machine`` is another), or None.
    Only with a shared remote: without one, nothing changes."""
    ln = project.config.lane(lane)
    if ln is None or ln.machine is None or not project.config.shared:
        return None
    from wf.base.machine import this_machine

    me = this_machine()
    return None if ln.machine == me else f"lane {lane} runs on machine {ln.machine} (this is {me})"


def _recovered(
    project: Project,
    bl: backlogmod.Backlog,
    lane: str,
    rec: LaneRecord | None,
    recovery: str,
    owner: int | None,
) -> LaneRecord | Pick:
    """The lane's record taken over for a recovery pick, or the stop when its task was
    re-picked too often (then blocked). Refuses while someone still works the task."""
    if rec is None:
        raise WfError(f"lane {lane} has no active task to recover")
    holder = live_holder(rec)
    if holder:
        raise WfError(f"lane {lane}: {rec.id} is still being worked ({holder}); nothing to recover")
    if bl.archive.find(rec.id) is not None:
        raise WfError(f"{rec.id} is already done (archived); post it: wf orch post {lane} --result done")
    if rec.recoveries >= state.MAX_RECOVERIES:
        ops.set_status(project, rec.id, "blocked", f"re-picked {rec.recoveries} times", force=True)
        state.drop(project, lane)
        return stopped(lane, Stop.REPICKED, f"{rec.id} was re-picked {rec.recoveries} times; blocked")
    return rec.but(
        recovery=recovery,
        state=RecordState.PICKING,
        pid=None,
        pid_since=None,
        owner=owner,
        owner_since=_since(owner),
        recoveries=rec.recoveries + 1,
    )


def _new_record(
    project: Project, bl: backlogmod.Backlog, lane: str, task: Task, owner: int | None
) -> LaneRecord:
    """The record of a fresh pick of ``task`` (still "picking": no tree yet)."""
    return LaneRecord(
        id=task.id,
        lane=lane,
        model=str(task.model or _lane_model(project, lane)),
        worktree=None,
        branch=worktrees.branch_name(lane, task.id),
        base=None,
        started=utc_stamp(),
        state=RecordState.PICKING,
        slice=bl.is_slice_job(task),
        solo=task.sessions == "solo",
        started_at=time.time(),
        owner=owner,
        owner_since=_since(owner),
        prior_status=task.get("status"),
        pick_id=uuid.uuid4().hex[:12],
    )


def _since(pid: int | None) -> float | None:
    from wf.workers import procs

    return procs.started(pid) if pid else None


def _lane_model(project: Project, lane: str) -> str:
    ln = project.config.lane(lane)
    return ln.model if ln else lane


def _first_lane(
    project: Project, bl: backlogmod.Backlog, task_id: str | None, cloud: CloudPlug | None
) -> str | None:
    if task_id is not None:
        task = bl.doc.task(task_id)
        lane = bl.lane_of(task)
        if lane is None:
            raise WfError(f"task {task_id} has no lane (no Model or Lane)")
        return lane
    busy = {r.lane for r in state.records(project)}
    for ln in project.config.lanes:
        if (
            ln.name not in busy
            and _elsewhere(project, ln.name) is None
            and isinstance(_choose(project, bl, ln.name, None, cloud), Task)
        ):
            return ln.name
    return None


def _choose(
    project: Project,
    bl: backlogmod.Backlog,
    lane: str,
    task_id: str | None,
    cloud: CloudPlug | None,
    skip: frozenset[str] | set[str] = frozenset(),
) -> Task | StopReason:
    """The task to pick, or the reason to stop the lane."""
    others = [r for r in state.records(project) if r.lane != lane]
    solo_running = next((r for r in others if r.solo), None)
    if solo_running is not None:
        return StopReason(Stop.SOLO, f"solo task {solo_running.id} runs alone (lane {solo_running.lane})")
    if task_id is not None:
        task = bl.doc.task(task_id)
        if bl.lane_of(task) != lane:
            raise WfError(f"task {task_id} is in lane {bl.lane_of(task)}, not {lane}")
        why = bl.blockers(task, handback=False)  # naming a task overrides a hold: a person asked for it
        if why:
            raise WfError(f"task {task_id} is not runner-ready: {'; '.join(why)}")
        if bl.handback(task) is not None:
            state.unhold(project, task_id)  # a person named it: its handback hold is released
        head = task
    else:
        _check_holds(project, bl, lane)
        ready_all = bl.runner_ready(lane)  # a handed-back task is not ready: one rule, the backlog's
        # a batch's open cloud lane takes its Cloud: yes tasks: local lanes leave them to it
        left = {t.id for t in ready_all if cloud is not None and cloud.leaves(project, bl, t)}
        ready = [t for t in ready_all if t.id not in left and t.id not in skip]
        if not ready:
            counts, handed = _lane_counts(bl, lane)
            if handed:
                counts = ", ".join(x for x in (counts, f"{handed} handed back, waiting for a person") if x)
            if left:
                counts = ", ".join(x for x in (counts, f"{len(left)} left to the cloud lane") if x)
            taken = [t for t in ready_all if t.id in skip]
            if taken:
                counts = ", ".join(x for x in (counts, f"{len(taken)} claimed on other machines") if x)
            text = f"no runner-ready task ({counts})" if counts else "no runner-ready task"
            return StopReason(Stop.NO_WORK, text)
        head = ready[0]
    if head.sessions == "solo" and others:
        return StopReason(Stop.SOLO, f"solo task {head.id} waits for other lanes")
    return head


def _check_holds(project: Project, bl: backlogmod.Backlog, lane: str) -> None:
    """Under the lock: a hold record that cannot be trusted on a task of the lane stops the
    pick (CorruptRecord: never read as "no hold"); a record whose task a person changed
    since, or that was archived, is dropped (the change released it for good)."""
    held = bl.held
    for tid, err in sorted(held.corrupt.items()):
        task = bl.doc.find(tid)
        if task is not None and bl.lane_of(task) == lane and not bl.blockers(task, handback=False):
            raise err
    for tid in sorted(held.records):
        task = bl.doc.find(tid)
        if (task is None and bl.archive.find(tid) is not None) or (
            task is not None and bl.handback(task) is None
        ):
            state.unhold(project, tid)


def _lane_counts(bl: backlogmod.Backlog, lane: str) -> tuple[str, int]:
    """The lane's tasks by status (handed-back ones aside), and how many were handed back."""
    counts: dict[str, int] = {}
    handed = 0
    for t in bl.doc.tasks:
        if bl.lane_of(t) == lane:
            st = t.status.state
            if st == "pending" and bl.handback(t) is not None:
                handed += 1
                continue
            counts[st] = counts.get(st, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), handed
