"""The cloud lane: ``wf cloud send`` (= ``wf orch pick cloud``) and the post of what ended
(= ``wf orch post cloud``), through the same outcome table as local lanes.

Send: the first fitting task across all lanes (runner-ready; opus-class models unless
``cloud_models`` says otherwise; ``Cloud: yes`` first, then Prio, then the larger Effort,
then file order) is claimed ``in progress: cloud:<session>`` and recorded in
``.wf/cloud/<id>.json``, while fewer than ``cloud_max_parallel`` sessions run and the
ledger has more than the reserve left. The record and the claim come first (as
``cloud:sending``), so no local lane can pick the task while its session is created.

Post: done is merged from ``cloud/<id>`` and archived (``wf merge``); awaiting, handback
and lost send the task back to its own local lane (pending, ``Cloud: no``, a
``Recovery: cloud attempt ...`` note) and stop the cloud lane, never a local one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from wf.base import stamps
from wf.base.config import CLOUD_LANE
from wf.base.errors import WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.cloud import batchlane, records
from wf.cloud import ledger as ledgermod
from wf.cloud.backend import Backend, CloudRefused, SessionState, valid_session
from wf.cloud.records import CloudRecord
from wf.orch import state
from wf.orch.pick import Pick, stopped
from wf.orch.post import Next, Posted, Rule
from wf.orch.state import Outcome, Stop
from wf.tasks import backlog as backlogmod
from wf.tasks import ops
from wf.tasks.taskfile import Task, check_id, utc_stamp

# The outcome table, cloud rows: what an ended session does to its task and to the lane.
TABLE: dict[SessionState, tuple[Outcome, Rule]] = {
    SessionState.DONE: (Outcome.DONE, Rule(None, Next.PICK)),
    SessionState.AWAITING: (Outcome.AWAITING, Rule("pending", Next.STOP, Stop.AWAITING)),
    SessionState.HANDBACK: (Outcome.HANDBACK, Rule("pending", Next.STOP, Stop.HANDBACK)),
    SessionState.LOST: (Outcome.LOST, Rule("pending", Next.STOP, Stop.LOST)),
}
POST_CHECK_RED = Rule("blocked", Next.STOP, Stop.POST_CHECK_RED)


def backend_for(project: Project) -> Backend:
    from wf.cloud.claude import ClaudeBackend

    return ClaudeBackend()


def _need_cloud(project: Project) -> None:
    if not project.config.cloud:
        raise WfError("the cloud lane is off: set cloud = true in wf.toml (wf config cloud true)")


# ------------------------------------------------------------------ choosing


def fitting(project: Project, bl: backlogmod.Backlog) -> list[Task]:
    """Tasks the cloud lane may take, in the order it takes them."""
    out: list[tuple[int, int, float, int, Task]] = []
    for lane in project.config.lanes:
        for t in bl.runner_ready(lane.name):
            if not batchlane.takes(project, bl, t, lane.model):
                continue
            out.append((0 if t.cloud else 1, t.prio, -(t.effort or 0.0), t.start, t))
    out.sort(key=lambda x: x[:4])
    return [x[4] for x in out]


def lane_row(bl: backlogmod.Backlog) -> dict[str, object]:
    """The cloud lane's row of ``wf lanes``: what it would take (ready), its sessions
    running (progress) and ended but not yet posted, and the tasks they work on (active)."""
    project = bl.project
    bad: WfError | None = None
    try:
        recs = records.all_records(project)
    except WfError as e:  # a record wf cannot trust: the row says so (wf doctor --fix)
        recs, bad = [], e
    running = [r for r in recs if not r.state.ended]
    models = project.config.cloud_models
    return {
        "lane": CLOUD_LANE,
        "model": ",".join(models) if models else "opus-class",
        "adapter": "cloud",
        "max_parallel": project.config.cloud_max_parallel,
        "ready": len(fitting(project, bl)),
        "progress": len(running),
        "awaiting": 0,
        "handback": 0,
        "blocked": 0,
        "wip": 0,
        "pending": 0,
        "ended": len(recs) - len(running),  # pulled, waiting for wf orch post cloud
        "active": ",".join(r.id for r in running) or None,
        "sessions": [{"id": r.id, "session": r.session, "state": r.state.value} for r in recs],
        "virtual": True,
        **({"corrupt": str(bad)} if bad else {}),
    }


def _running(recs: list[CloudRecord]) -> int:
    return sum(1 for r in recs if not r.state.ended)


def prompt_for(project: Project, bl: backlogmod.Backlog, task: Task) -> str:
    head = resources.files("wf").joinpath("data/cloud-prompt.md").read_text("utf-8")
    text = bl.doc.text[task.span[0] : task.span[1]].rstrip() + "\n"
    return head + text


# ------------------------------------------------------------------ send


def _limits(project: Project) -> Pick | None:
    """The stop of the cloud lane's limits (max parallel, then the ledger), or None."""
    running = _running(records.all_records(project))
    mp = project.config.cloud_max_parallel
    if running >= mp:
        return stopped(CLOUD_LANE, Stop.MAX_PARALLEL, f"max parallel ({running} of {mp} running)")
    led = ledgermod.read(project, running)
    if led.stop is not None:
        return stopped(CLOUD_LANE, Stop.LEDGER, f"ledger ({led.stop})")
    return None


@dataclass(frozen=True)
class Sent:
    pick: Pick  # the orch pick: a stop, or the lines saying what was sent
    record: CloudRecord | None


def send(
    project: Project,
    task_id: str | None = None,
    *,
    backend: Backend | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Sent:
    """Send the first fitting task (or ``task_id``) to a new cloud session."""
    _need_cloud(project)
    if task_id is not None:
        check_id(task_id, "task id")
    if state.stop_file(project).exists():
        where = state.stop_file(project).relative_to(project.root)
        return Sent(stopped(CLOUD_LANE, Stop.STOP_FILE, f"stop file {where} exists"), None)
    be = backend or backend_for(project)
    early = _limits(project)
    if early is not None:
        return Sent(early, None)
    try:
        be.check(project.root)
    except CloudRefused as e:
        return Sent(stopped(CLOUD_LANE, Stop.INFRA, str(e)), None)
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        late = _limits(project)  # again under the lock: two sends never pass max_parallel
        if late is not None:
            return Sent(late, None)
        bl = backlogmod.load(project)
        cands = fitting(project, bl)
        if task_id is not None:
            chosen = next((t for t in cands if t.id == task_id), None)
            if chosen is None:
                why = "; ".join(bl.blockers(bl.doc.task(task_id))) or "not a task the cloud lane takes"
                raise WfError(f"{task_id} cannot go to the cloud: {why} (wf cloud send --help)")
        elif not cands:
            ready = sum(len(bl.runner_ready(ln.name)) for ln in project.config.lanes)
            why = f"none fit ({ready} runner-ready, none for the cloud)"
            return Sent(stopped(CLOUD_LANE, Stop.NO_WORK, why), None)
        else:
            chosen = cands[0]
        if records.load(project, chosen.id) is not None:
            raise WfError(f"{chosen.id} already has a cloud record (wf cloud pull {chosen.id})")
        rec = CloudRecord(
            id=chosen.id,
            lane=bl.lane_of(chosen) or "",
            model=chosen.model or "",
            branch=f"{CLOUD_LANE}/{chosen.id}",
            base=None,
            started=utc_stamp(),
            started_at=time.time(),
            state=SessionState.SENDING,
            prior_status=chosen.get("status"),
            sender=os.getpid(),
        )
        records.save(project, rec)  # the record first: a claim never exists without it
        ops.set_status(project, chosen.id, "progress", f"{CLOUD_LANE}:sending", on_wait=on_wait)
        prompt = prompt_for(project, bl, chosen)
    try:
        session = be.create(project.root, prompt, f"{chosen.id}: {chosen.title}"[:80])
        if not valid_session(session.id):
            raise WfError(f"claude --cloud gave a session id wf does not accept: {session.id!r}")
    except (CloudRefused, WfError) as e:
        with project_lock(project.wf_dir, project.lock_timeout, on_wait):
            _release(project, rec, on_wait)
        return Sent(stopped(CLOUD_LANE, Stop.INFRA, str(e)), None)
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        from wf.trees import gitops

        rec = rec.but(
            session=session.id, url=session.url, state=SessionState.RUNNING, sender=None,
            base=gitops.rev(project.root, "HEAD") if project.is_git else None,
        )  # fmt: skip
        records.save(project, rec)
        ops.set_status(project, rec.id, "progress", f"{CLOUD_LANE}:{session.id}", force=True, on_wait=on_wait)
    text = (
        f"sent {rec.id} (lane {rec.lane}, model {rec.model}) to cloud session {session.id}\n"
        + (f"View: {session.url}\n" if session.url else "")
        + f"Pull: wf cloud pull {rec.id}\n"
    )
    return Sent(Pick(CLOUD_LANE, None, None, text), rec)


def _release(project: Project, rec: CloudRecord, on_wait: Callable[[str], None] | None) -> None:
    """Undo a claim whose session could not be created: the task as it was before."""
    from wf.tasks import edits

    task = backlogmod.load(project).doc.find(rec.id)
    if task is not None and task.status.state == "progress":

        def change(bl: backlogmod.Backlog) -> ops.Change:
            return ops.Change(tasks=edits.set_field(bl.doc, rec.id, "status", rec.prior_status))

        ops.transact(project, change, on_wait=on_wait)
    records.drop(project, rec.id)


# ------------------------------------------------------------------ post


def post(
    project: Project,
    task_id: str | None = None,
    *,
    no_pick: bool = False,
    backend: Backend | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> list[Posted]:
    """Post every ended cloud session (or ``task_id``'s) through the outcome table; then,
    unless a row stopped the lane or ``no_pick``, send the next task."""
    _need_cloud(project)
    recs = records.all_records(project)
    if task_id is not None:
        check_id(task_id, "task id")
        rec = records.load(project, task_id)
        if rec is None:
            raise WfError(f"no cloud record for {task_id} (wf cloud pull --all lists them)")
        if not rec.state.ended:
            raise WfError(f"{task_id}'s session is {rec.state.value}; pull first: wf cloud pull {task_id}")
        recs = [rec]
    out: list[Posted] = []
    stop: Pick | None = None
    for rec in recs:
        if not rec.state.ended:
            continue
        try:
            with records.locked(project, rec.id, wait=project.lock_timeout, on_wait=on_wait):
                fresh = records.load(project, rec.id)
                if fresh is None or not fresh.state.ended:
                    continue  # another post took it
                posted = _post_one(project, fresh, on_wait)
        except records.Busy as e:
            out.append(Posted(CLOUD_LANE, rec.id, Outcome.RELEASED, None, [str(e)], None))
            continue
        out.append(posted)
        if posted.next is not None and stop is None:
            stop = posted.next
    if not out:
        raise WfError("no cloud session has ended (wf cloud pull --all)")
    if stop is None and not no_pick:
        nxt = send(project, backend=backend, on_wait=on_wait).pick
        last = out[-1]
        out[-1] = last._replace(next=nxt)
    return out


def _post_one(project: Project, rec: CloudRecord, on_wait: Callable[[str], None] | None) -> Posted:
    outcome, rule = TABLE[rec.state]
    lines: list[str] = []
    commit = None
    stop_text = ""
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        task = backlogmod.load(project).doc.find(rec.id)
        if rec.state is SessionState.DONE:
            red, commit = _merge(project, rec, lines, on_wait)
            if red is not None:
                outcome, rule = Outcome.POST_CHECK_RED, POST_CHECK_RED
                stop_text = f"post-check red for {rec.id}: {red}"
                if task is not None:
                    ops.set_status(project, rec.id, "blocked", f"post-check red: {red}", force=True)
        elif task is not None:
            note = rec.note or "(no note)"
            where = f"; its work is on branch {rec.branch}" if rec.commit else ""
            ops.set_status(project, rec.id, "pending", force=True)
            ops.set_fields(project, rec.id, cloud="no", on_wait=on_wait)
            ops.add_note(
                project,
                rec.id,
                f"Recovery: cloud attempt {rec.session} ended {rec.state.value}: {note}{where}",
                on_wait=on_wait,
            )
            stop_text = f"{rec.id} came back {rec.state.value}: {note} (back to lane {rec.lane})"
        _log(project, rec, outcome, commit)
        records.drop(project, rec.id)
    lines.insert(0, f"{rec.id}: {outcome.value}" + (f" as {commit[:12]}" if commit else ""))
    nxt = None
    if rule.next is Next.STOP and rule.stop is not None:
        nxt = stopped(CLOUD_LANE, rule.stop, stop_text or outcome.value)
    return Posted(CLOUD_LANE, rec.id, outcome, commit, lines, nxt)


def _merge(
    project: Project, rec: CloudRecord, lines: list[str], on_wait: Callable[[str], None] | None
) -> tuple[str | None, str | None]:
    """(what is red, or None; the merge commit): merge ``cloud/<id>`` as ``wf merge`` does."""
    from wf.trees import gitops, merge

    bl = backlogmod.load(project)
    entry = bl.archive.find(rec.id)
    if entry is None:
        if gitops.rev(project.root, rec.branch) is None:
            return f"no branch {rec.branch}: the session reported done but brought back no commits", None
        try:
            outcome = merge.merge(project, rec.branch, project.root, on_wait=on_wait)
        except WfError as e:
            return f"merge failed: {str(e).splitlines()[0]}", None
        lines.append(f"merged {rec.branch}")
        lines.extend(f"note: {n}" for n in outcome.notes)
        entry = backlogmod.load(project).archive.find(rec.id)
    if entry is None:
        return f"{rec.id} is not in the archive", None
    if gitops.branch_exists(project.root, rec.branch):
        return f"branch {rec.branch} still exists", entry.commit
    return None, entry.commit if entry.commit != "-" else None


def _log(project: Project, rec: CloudRecord, outcome: Outcome, commit: str | None) -> None:
    from wf.base.fsutil import append_line

    ts = stamps.now_iso()
    append_line(
        project.out_dir / "wf-orch.log",
        f"ts={ts} lane={CLOUD_LANE} model={rec.model} id={rec.id} pick={rec.session} "
        f"outcome={outcome.value} commit={commit or '-'} dur_s={round(rec.duration)}",
    )
