"""``wf cloud pull``: read each cloud session's state and bring back what ended.

Per record, under its own lock taken without waiting (a second pull of the same id
says so and skips): read the session's state in a clean tree of its own
(``.worktrees/_cloud-<id>``, detached at main); a session that ended has its work
brought back as the branch ``cloud/<id>``, its cost found and logged in
``out/wf-cloud.log``, and its record marked with how it ended, ready for
``wf orch post cloud``. One line per session: ``<id>: <state> (<duration>, $<cost>)``.

``sidecar`` is the same pull every few minutes, with the post of what ended, for a
batch to run beside its loop (``wf cloud pull --watch`` runs it in the foreground).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from wf.base.errors import WfError
from wf.base.project import Project
from wf.base.quantity import fmt_duration
from wf.base.text import safe_line
from wf.cloud import batchlane, records
from wf.cloud import ledger as ledgermod
from wf.cloud.backend import Backend, CloudRefused, SessionState
from wf.cloud.records import CloudRecord
from wf.orch import starts
from wf.tasks.taskfile import check_id
from wf.trees import gitops

SENDING_GRACE = 600.0  # seconds a send may take before its record counts as lost


@dataclass
class Pulled:
    lines: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """4 while some still run, 1 if a session could not be read, else 0."""
        if self.running:
            return 4
        return 1 if self.failed else 0

    def as_dict(self) -> dict[str, object]:
        return {
            "lines": self.lines,
            "running": self.running,
            "ended": self.ended,
            "skipped": self.skipped,
            "failed": self.failed,
        }


def line_for(rec: CloudRecord) -> str:
    cost = "?" if rec.cost_usd is None else f"{rec.cost_usd:.2f}"
    dur = rec.duration if rec.state.ended else max(0.0, time.time() - rec.started_at)
    return f"{rec.id}: {rec.state.value} ({fmt_duration(dur)}, ${cost})"


def pull(
    project: Project,
    ids: list[str] | None = None,
    *,
    backend: Backend | None = None,
) -> Pulled:
    """Pull the given ids, or every record (``ids`` None)."""
    from wf.cloud.lane import backend_for

    be = backend or backend_for(project)
    out = Pulled()
    if ids is None:
        targets = [r.id for r in records.all_records(project)]
    else:
        targets = [check_id(i, "task id") for i in ids]
        for i in targets:
            if records.load(project, i) is None:
                raise WfError(f"no cloud record for {i} (wf cloud pull --all)")
    if not targets:
        out.lines.append("no cloud sessions")
    for task_id in targets:
        try:
            with records.locked(project, task_id):
                _pull_one(project, task_id, be, out)
        except records.Busy as e:
            out.skipped.append(task_id)
            out.lines.append(str(e))
    return out


def _pull_one(project: Project, task_id: str, be: Backend, out: Pulled) -> None:
    rec = records.load(project, task_id)  # again, under the lock
    if rec is None:
        out.lines.append(f"{task_id}: posted already")
        return
    if rec.state.ended:
        out.ended.append(rec.id)
        out.lines.append(line_for(rec) + " (post it: wf orch post cloud)")
        return
    if rec.state is SessionState.SENDING or rec.session is None:
        from wf.workers import procs

        if rec.sender and procs.alive(rec.sender) and time.time() - rec.started_at < SENDING_GRACE:
            out.running.append(rec.id)
            out.lines.append(f"{rec.id}: sending (pid {rec.sender})")
            return
        _end(project, rec, SessionState.LOST, "the send ended before a session was recorded", None, None)
        out.ended.append(rec.id)
        out.lines.append(line_for(records.load(project, rec.id) or rec))
        return
    session = rec.session
    try:
        workdir = _workdir(project, rec.id)
    except WfError as e:
        out.failed.append(rec.id)
        out.lines.append(f"{rec.id}: cannot read session {session}: {e}")
        return
    try:
        status = be.state(project.root, session, workdir)
        if not status.state.ended:
            rec = rec.but(polls_usd=round(rec.polls_usd + (be.cost(status) or 0.0), 6))
            records.save(project, rec)
            out.running.append(rec.id)
            out.lines.append(line_for(rec))
            return
        tip = be.pull(project.root, session, workdir, rec.branch)
        cost = be.cost(status)
        if cost is not None:
            cost = round(cost + rec.polls_usd, 6)
    except CloudRefused as e:
        out.failed.append(rec.id)
        out.lines.append(f"{rec.id}: cannot read session {rec.session}: {e}")
        return
    finally:
        _drop_workdir(project, workdir)
    _end(project, rec, status.state, status.note, tip, cost)
    out.ended.append(rec.id)
    out.lines.append(line_for(records.load(project, rec.id) or rec))


def _end(
    project: Project,
    rec: CloudRecord,
    state: SessionState,
    note: str,
    tip: str | None,
    cost: float | None,
) -> None:
    note = safe_line(" ".join(note.split()))[:300]  # the tool's words go to TASKS.md: shown, never run
    rec = rec.but(state=state, note=note, commit=tip, cost_usd=cost, ended_at=time.time())
    ledgermod.record_spend(project, rec.id, rec.session or "-", state.value, cost, rec.duration)
    records.save(project, rec)


def _workdir(project: Project, task_id: str) -> Path:
    """A clean tree of the repository, detached at main, for one session's teleport."""
    from wf.trees import worktrees

    path = project.worktrees_dir / f"_cloud-{task_id}"
    main = gitops.rev(project.root, worktrees.main_branch(project))
    if main is None:
        raise WfError("the main branch has no commit")
    if (path / ".git").exists():
        if gitops.dirty_paths(path):
            raise WfError(f"{path} has uncommitted changes; wf leaves them for a person (remove the tree)")
        gitops.detach(path, main)
    else:
        gitops.worktree_add_detached(project.root, path, main)
    return path


def _drop_workdir(project: Project, path: Path) -> None:
    if (path / ".git").exists() and not gitops.dirty_paths(path):
        gitops.worktree_remove(project.root, path)


# ------------------------------------------------------------------ the sidecar


def sidecar(
    project: Project,
    stop: threading.Event,
    *,
    interval: float = 600.0,
    linger: float = 24 * 3600.0,
    on_line: Callable[[str], None] | None = None,
    backend: Backend | None = None,
    batch: batchlane.Open | None = None,
    linger_here: bool = True,
    give_up: Callable[[], str | None] | None = None,
) -> int:
    """Pull every ``interval`` seconds and post what ended (``--no-pick``), reporting each
    pull as one line through ``on_line``. Until ``stop`` is set (the batch ended) this
    goes on for good, and with ``batch`` (the batch's open mark) each round also sends
    (as ``wf orch pick cloud``) until the cloud lane stops for the batch; after ``stop``,
    only pulls, until no record is left, the stop file appears, or ``linger`` seconds
    passed. With ``linger_here`` False it returns as soon as ``stop`` is set (a batch's
    tail, a job of its own, pulls what is left); after ``stop`` it also ends when
    ``give_up`` gives a reason (another tail took over). Returns the number of pulls."""
    from wf.orch import state

    say = on_line or (lambda _line: None)
    lane = _BatchSends(project, batch, backend, say) if batch is not None else None
    pulls = 0
    stopped_at: float | None = None
    try:
        while True:
            try:
                if stop.is_set() and stopped_at is None:
                    stopped_at = time.monotonic()
                    if lane is not None:
                        lane.close(None)
                    if not linger_here:
                        return pulls
                if stopped_at is not None:
                    left = ", ".join(r.id for r in records.all_records(project))
                    if not left:
                        say("cloud: no session left")
                        return pulls
                    if state.stop_file(project).exists():
                        say(f"cloud: the stop file is set; sessions left: {left}")
                        return pulls
                    why = give_up() if give_up is not None else None
                    if why:
                        say(f"cloud: {why}; sessions left: {left}")
                        return pulls
                    if time.monotonic() - stopped_at > linger:
                        say(f"cloud: gave up after {fmt_duration(linger)}; sessions left: {left}")
                        return pulls
                if records.all_records(project):
                    pulls += 1
                    line = _one_round(project, backend, lane)
                    if line is not None:
                        say(line)
                if lane is not None:
                    lane.send_round(stop)  # sends only while the batch lives
                if stopped_at is None:
                    stop.wait(interval)
                else:
                    _sleep(interval, project)
            except WfError as e:  # a record wf cannot trust: a person looks at it (wf doctor)
                say(f"cloud: {e}; the sidecar stops pulling")
                return pulls
    finally:
        if lane is not None:
            lane.close(None)


class _BatchSends:
    """The cloud lane of a live batch: sends on each round while it is open; a stop that
    holds for the rest of the batch closes it (local lanes may then take its tasks)."""

    def __init__(
        self, project: Project, batch: batchlane.Open, backend: Backend | None, say: Callable[[str], None]
    ) -> None:
        self.project = project
        self.batch = batch
        self.backend = backend
        self.say = say
        self.open = True
        self.last_stop: str | None = None

    def _stop_line(self, text: str) -> None:
        if text != self.last_stop:  # a lane that stays dry says so once
            self.say(f"{time.strftime('%H:%M', time.gmtime())} stop lane cloud: {text}")
        self.last_stop = text

    def close(self, why: str | None) -> None:
        if why is not None and self.open:
            self._stop_line(why)
        self.open = False
        batchlane.close(self.project, self.batch.stamp)

    def send_round(self, ended: threading.Event) -> None:
        """Send the first fitting task, again and again, until the cloud lane stops."""
        from wf.cloud import lane as lanemod
        from wf.orch.state import Stop

        while self.open and not ended.is_set():  # never after the batch's loop
            if starts.starts(self.project, self.batch.stamp) >= self.batch.n:
                self.close(f"{self.batch.n} task(s) started: the cap is reached")
                return
            # counted before the send (the batch's loop sees it at once), taken back if none was sent
            starts.note_start(self.project, self.batch.stamp, starts.CLOUD, "?")
            try:
                sent = lanemod.send(self.project, backend=self.backend)
            except WfError as e:
                starts.note_start(self.project, self.batch.stamp, starts.UNSENT, "?")
                self.close(f"send failed: {e}")
                return
            if sent.pick.stop is not None or sent.record is None:
                starts.note_start(self.project, self.batch.stamp, starts.UNSENT, "?")
            else:
                starts.note_start(self.project, self.batch.stamp, starts.SENT, sent.record.id)
                self.last_stop = None
                self.say(
                    f"{time.strftime('%H:%M', time.gmtime())} cloud: sent {sent.record.id} "
                    f"(lane {sent.record.lane}) to session {sent.record.session}"
                )
                continue
            stop = sent.pick.stop
            if stop is None:
                return
            if stop.kind in (Stop.MAX_PARALLEL, Stop.NO_WORK):  # it stays open: sends again later
                self._stop_line(stop.text)
                return
            self.close(stop.text)

    def posted_stop(self, text: str) -> None:
        """A session came back awaiting, handback or lost (or red): the lane stops."""
        if self.open:
            self.close(text)


def _sleep(seconds: float, project: Project) -> bool:
    """Sleep, waking early for the stop file."""
    from wf.orch import state

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if state.stop_file(project).exists():
            return True
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
    return False


def _one_round(project: Project, backend: Backend | None, lane: _BatchSends | None = None) -> str | None:
    from wf.cloud import lane as lanemod

    stamp = time.strftime("%H:%M", time.gmtime())
    try:
        pulled = pull(project, backend=backend)
    except WfError as e:
        return f"{stamp} cloud pull failed: {e}"
    posted: list[str] = []
    stops: list[str] = []
    if any(r.state.ended for r in records.all_records(project)):
        try:
            for p in lanemod.post(project, no_pick=True, backend=backend):
                posted.append(f"{p.task} {p.outcome.value}")
                if lane is not None and p.next is not None and p.next.stop is not None:
                    stops.append(p.next.stop.text)
        except WfError as e:
            posted.append(f"post failed: {e}")
    text = "; ".join(pulled.lines)
    if posted:
        text += " | posted: " + ", ".join(posted)
    if lane is not None and stops:  # after the pull's line: the lane stops for the batch
        lane.say(f"{stamp} cloud pull: {text}")
        lane.posted_stop(stops[0])
        return None
    return f"{stamp} cloud pull: {text}"


def watch(
    project: Project,
    *,
    interval: float = 600.0,
    duration: float = 24 * 3600.0,
    on_line: Callable[[str], None] | None = None,
) -> int:
    """``wf cloud pull --watch``: the sidecar in the foreground, as after a batch."""
    stop = threading.Event()
    stop.set()
    sidecar(project, stop, interval=interval, linger=duration, on_line=on_line)
    return 4 if records.all_records(project) else 0
