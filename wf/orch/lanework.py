"""One run's lanes, for ``wf orch run`` (``wf.orch.loop``, which schedules them): each
lane's pick, its worker's start and end, the post, and what stops, holds or parks it.
A stop or a park is written as a typed event (``wf.orch.events``) and said in words
made from it."""

from __future__ import annotations

import abc
import os
import time
from collections.abc import Callable

from wf.adapters import Failure, Spec
from wf.adapters.limits import Limit
from wf.base import stamps
from wf.base.errors import IssueKind, ParseError, WfError
from wf.base.fsutil import append_line
from wf.base.project import Project
from wf.base.quantity import until_text
from wf.orch import events, gate, park, state
from wf.orch.ending import Crashes, infra_failure
from wf.orch.lanetool import LaneTools
from wf.orch.pick import Admit, CloudPlug, Pick, live_holder, pick
from wf.orch.post import Posted, Refused, post, release
from wf.orch.report import captured_report
from wf.orch.state import LaneRecord, Stop, StopReason
from wf.tasks import backlog as backlogmod
from wf.workers import procs, runs
from wf.workers.supervise import Unit

# every lane on that tool stops: the next worker would meet the same wall
TOOL_WIDE = frozenset({Failure.auth, Failure.quota, Failure.rate_limit, Failure.network})
IN_A_ROW = 2  # task-owned stops in a row that stop a lane: a lane failing every task must not burn the night
WAITED = (Failure.usage_limit, Failure.overloaded)  # the lane waits and the task runs again
CONTINUE = (
    "The usage limit (or the overloaded API) that stopped you is over: go on with the task "
    "above where you left it, and end with the four report lines."
)


class LaneWork(abc.ABC):
    """The lanes of one run and what each is doing; ``_start`` (a pick's worker, or the
    lane's stop) and ``_may_start`` (--for, --max-tasks, a broken tool) are the
    scheduler's (``wf.orch.loop.Loop``)."""

    def __init__(
        self,
        project: Project,
        lanes: list[str],
        *,
        adapter: str | None,
        emit: Callable[[str], None],
        for_seconds: float | None,
        timeout: float | None,
        cloud: CloudPlug | None = None,
    ) -> None:
        self.project = project
        self.cloud = cloud  # the cloud lane (wf.cloud.PLUG): each pick leaves it its tasks
        self.lanes = lanes
        self.tools = LaneTools(project, adapter, timeout)  # each lane's tool, model and limits
        self._emit = emit
        self.deadline = time.monotonic() + for_seconds if for_seconds else None
        self.run_id = time.strftime("orch-%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"
        self.units: dict[str, tuple[Unit, LaneRecord]] = {}
        self.stopped: dict[str, StopReason] = {}
        self.seen: list[StopReason] = []  # every stop of this run: the exit code is made from them
        self.broken_tools: dict[str, StopReason] = {}
        self.in_a_row: dict[str, int] = {}  # per lane: task-owned stops since its last task that went on
        self.tired: dict[str, frozenset[str]] = {}  # lanes stopped for stops in a row: their ready ids then
        self.held: list[tuple[str | None, StopReason]] = []  # task-owned stops (task, why): for a person
        self.crashes = Crashes()  # failures without a report, by signature: their tasks
        self.last_done_lane: str | None = None
        self.parked: dict[str, park.Parked] = {}  # lanes waiting out a usage limit or an overload
        self.tool_parked: dict[str, park.Parked] = {}  # per tool: its account's usage limit
        self.rejections: dict[str, int] = {}  # per lane: limited or overloaded runs in a row
        self.count = 0
        self.me = os.getpid()
        self.events = project.out_dir / "wf-orch-run.log"
        self.stop_events = events.path_for(project)  # typed: what a batch reads
        self.gates = gate.Watch(project)  # a red gate is said as soon as it is recorded
        self.admit: Admit | None = None  # the run's budget gate (wf.orch.budget), if it has one

    def emit(self, line: str) -> None:
        ts = stamps.now_iso()
        try:
            append_line(self.events, f"{ts} run={self.run_id} {line}")
        except OSError:
            pass
        self._emit(line)

    # ---------------------------------------------------------------- the scheduler's
    @abc.abstractmethod
    def _start(self, lane: str, p: Pick) -> None:
        """Start a worker on the task just picked (the scheduler counts it)."""

    @abc.abstractmethod
    def _may_start(self, lane: str) -> StopReason | None:
        """Why this lane may not start a task now (--for, --max-tasks, a broken tool), or None."""

    def _stop(self, lane: str, reason: StopReason, task: str | None = None) -> None:
        self.stopped[lane] = reason
        self.seen.append(reason)
        self._event(events.stopped(self.run_id, lane, reason, task))

    def _event(self, ev: events.StopEvent) -> None:
        """Record a stop or a park for the parts that read them, then say it."""
        try:
            events.append(self.stop_events, ev)
        except OSError as e:
            self.emit(f"note: the stop event could not be written to {self.stop_events}: {e}")
        self.emit(events.sentence(ev))

    def _hold(self, lane: str, reason: StopReason, task: str | None = None) -> bool:
        """A stop that belongs to one task: the task waits for a person (its status or a
        hold says so) and the lane goes on (True), unless it is the lane's IN_A_ROW-th
        such stop in a row: then the lane stops (False)."""
        self.held.append((task, reason))
        self.seen.append(reason)
        run = self.in_a_row.get(lane, 0) + 1
        self.in_a_row[lane] = run
        if run >= IN_A_ROW:
            try:
                ready = frozenset(t.id for t in backlogmod.load(self.project).runner_ready(lane))
            except WfError:
                ready = frozenset()
            self.tired[lane] = ready
            self._stop(
                lane,
                StopReason(reason.kind, f"{run} tasks in a row need a person; the last: {reason.text}"),
                task,
            )
            return False
        self.emit(f"{lane}: {reason.text} (held for a person; the lane goes on)")
        return True

    def _launch(self, lane: str, rec: LaneRecord, spec: Spec, *, again: str = "") -> None:
        """Start a unit for the lane's claimed task (``again``: why it runs once more)."""
        self.count += 1
        unit_id = f"{lane}-{rec.id}"[:40] + f"-{self.count}"
        spec = spec._replace(unit=unit_id, folder=runs.unit_dir(self.project, self.run_id, unit_id))
        unit = self.tools.unit(lane, rec, spec)
        adapter = unit.adapter
        unit.queue()
        unit.start()
        pid = unit.proc.pid if unit.proc else None
        rec = rec.but(
            pid=pid,
            pid_since=procs.started(pid),
            run=self.run_id,
            unit=unit_id,
            owner=self.me,
            owner_since=procs.started(self.me),
            adapter=adapter.name,
            token=unit.token,
        )
        state.save(self.project, rec)
        self.units[lane] = (unit, rec)
        extra = (" [slice]" if rec.slice else "") + (f"  (recovery: {rec.recovery})" if rec.recovery else "")
        extra += f"  ({again})" if again else ""
        self.emit(f"{lane}: start {rec.id} with {adapter.name} model={rec.model}{extra}")

    def _pick(self, lane: str) -> None:
        why = self._may_start(lane)
        rec = None
        try:
            rec = state.load(self.project, lane)
            if rec is None:
                if why is not None:
                    self._stop(lane, why)
                    return
                waiting = self._tool_waits(lane)
                if waiting is not None:
                    self.stopped.pop(lane, None)
                    self.parked[lane] = park.Parked(waiting.until, waiting.why)
                    tool = self.tools.adapter_for(lane).name
                    self._event(
                        events.parked(self.run_id, lane, waiting.until, waiting.why, f"{tool}'s usage limit")
                    )
                    return
                p = pick(self.project, lane, owner=self.me, cloud=self.cloud, admit=self.admit)
            else:
                p_or_done = self._take_over(lane, rec)
                if p_or_done is None:
                    return
                p = p_or_done
        except WfError as e:
            self._stop(lane, StopReason(Stop.ERROR, f"pick failed: {e}"))
            return
        self._start(lane, p)

    def _take_over(self, lane: str, rec: LaneRecord) -> Pick | None:
        """A record this run did not make: an interactive orchestrator's (left alone),
        another live run's (left alone), or one whose owner died (taken over: its
        worker's tree is ended, a captured report is posted, else a recovery pick)."""
        if rec.owner is None and rec.pid is None:
            self._stop(
                lane,
                StopReason(
                    Stop.HELD,
                    f"{rec.id} was picked by an interactive orchestrator (wf orch post {lane} ...)",
                ),
                rec.id,
            )
            return None
        if rec.owner and rec.owner != self.me and rec.owner_alive():
            held = StopReason(Stop.HELD, f"{rec.id} is held by wf orch run pid {rec.owner}")
            self._stop(lane, held, rec.id)
            return None
        if rec.pid and rec.worker_alive():
            # its loop is gone: end the orphaned worker's whole tree, then recover
            procs.kill_tree(rec.pid, rec.token)
        if rec.run and rec.unit:  # and what its loop adopted from it (detached, env cleared)
            from wf.fanout.watch import end_strays

            end_strays(runs.unit_dir(self.project, rec.run, rec.unit))
        holder = live_holder(rec)
        if holder:
            self._stop(lane, StopReason(Stop.HELD, f"{rec.id} is held by {holder}"), rec.id)
            return None
        archived = backlogmod.load(self.project).archive.find(rec.id) is not None
        rep = captured_report(self.project, rec)
        if archived or rep is not None:
            self.emit(f"{lane}: {rec.id}: taking over a finished worker from an earlier run")
            result = rep.result if rep is not None else "done"
            self._post_and_go_on(
                lane, rec, result, rep.commit if rep else None, rep.note if rep else "", None, None
            )
            return None
        why = "the previous run was interrupted" if rec.pid is None else "its worker is gone"
        return pick(self.project, lane, recovery=why, owner=self.me, cloud=self.cloud)

    # ---------------------------------------------------------------- parking
    def _park(self, lane: str, unit: Unit, rec: LaneRecord, failure: Failure) -> bool:
        """A usage limit or an overloaded API: the lane waits, its task stays claimed and
        charged nothing, and runs again after the wait (True). False: overloaded too
        often in a row, a failure of its tool like any other."""
        n = self.rejections.get(lane, 0)
        if failure is Failure.overloaded and n >= park.OVERLOADED_TRIES:
            return False
        self.rejections[lane] = n + 1
        limit = Limit.from_dict(unit.status.get("limit")) if failure is Failure.usage_limit else None
        now = time.time()
        until = park.until(failure, limit, n, now)
        why = park.why(failure, limit)
        words = str(unit.status.get("reason") or failure.value)
        if self.deadline is not None and until > now + (self.deadline - time.monotonic()):
            self._release(
                lane,
                StopReason(
                    Stop.LIMIT,
                    f"{unit.adapter.name} {failure.value}: it would wait {until_text(until, why)}, "
                    f"past --for ({words})",
                ),
            )
            return True
        resume = unit.adapter.resumes_after_limit and bool(unit.session_id)
        spec = (
            unit.spec._replace(resume=True, session_id=unit.session_id, prompt=CONTINUE)
            if resume
            else unit.spec._replace(resume=False, session_id=None)
        )
        then = "resumes its session" if resume else "runs again"
        if failure is Failure.overloaded:  # a backoff, not a park: the record does not say parked
            rec = rec.but(pid=None)
            self.emit(
                f"{lane}: {unit.adapter.name} overloaded ({words}): {rec.id} {then} in "
                f"{until - now:.0f}s (backoff {n + 1} of {park.OVERLOADED_TRIES})"
            )
        else:
            rec = rec.but(pid=None, parked_until=until, parked_why=why)
            self.tool_parked[unit.adapter.name] = park.Parked(until, why)
            said = f"{rec.id} stays claimed and {then} then ({unit.adapter.name} {failure.value}: {words})"
            self._event(events.parked(self.run_id, lane, until, why, said, rec.id))
        state.save(self.project, rec)
        self.parked[lane] = park.Parked(until, why, rec, spec)
        return True

    def _release(self, lane: str, reason: StopReason) -> bool:
        """Give the lane's task back as it was before its pick and stop the lane for
        ``reason``; False (the lane stopped as an error) if the release failed."""
        try:
            posted = release(self.project, lane, reason.text)
        except WfError as e:
            self._stop(lane, StopReason(Stop.ERROR, f"release failed: {e}"))
            return False
        for line in posted.lines:
            self.emit(f"{lane}: {line}")
        self._stop(lane, reason, posted.task)
        return True

    def _unpark(self) -> None:
        """Lanes whose wait is over: their task runs again, a lane parked with none picks."""
        now = time.time()
        for lane, p in list(self.parked.items()):
            if p.until > now:
                continue
            del self.parked[lane]
            tool = self.tools.adapter_for(lane).name
            waiting = self.tool_parked.get(tool)
            if waiting is not None and waiting.until <= now:
                del self.tool_parked[tool]
            if p.rec is None or p.spec is None:
                self._pick(lane)
                continue
            rec = p.rec.but(parked_until=None, parked_why=None)
            time_up = StopReason(Stop.TIME_UP, "--for time is up") if self._time_up() else None
            stop = self.broken_tools.get(tool) or time_up  # not the task cap: it is no new task
            if stop is not None:
                self._release(lane, stop)
                continue
            self._launch(lane, rec, p.spec, again=f"again after {p.why}")

    def _tool_waits(self, lane: str) -> park.Parked | None:
        """The usage limit the lane's tool waits out (its account's: every lane on it waits)."""
        waiting = self.tool_parked.get(self.tools.adapter_for(lane).name)
        return waiting if waiting is not None and waiting.until > time.time() else None

    def _time_up(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    # ---------------------------------------------------------------- ending
    def _ended(self, lane: str, unit: Unit, rec: LaneRecord) -> None:
        """Post what the unit's end says, and go on or stop the lane."""
        failure = infra_failure(unit.status)
        if failure not in WAITED:
            self.rejections.pop(lane, None)
        elif self._park(lane, unit, rec, failure):
            return
        if failure is not None:
            self._infra(lane, unit, rec, failure)
            return
        end = self.crashes.read_end(unit, rec)
        for other in end.unblock:
            self._unblock_crashed(other)
        if end.tool_words is not None:
            self._infra(lane, unit, rec, Failure.tool, end.tool_words)
            return
        self.emit(f"{lane}: {end.said}")
        self._post_and_go_on(lane, rec, end.result, end.commit, end.note, unit, end.duration)

    def _unblock_crashed(self, task_id: str) -> None:
        """A task this run blocked as crashed twice, for a failure now known to be its
        tool's: back to pending, so that no task is charged for its tool."""
        from wf.orch.decide import CRASHED_TWICE_NOTE
        from wf.tasks import ops

        try:
            task = backlogmod.load(self.project).doc.find(task_id)
            st = task.status if task is not None else None
            if st is None or (st.state, st.text) != ("blocked", CRASHED_TWICE_NOTE):
                return  # a person (or another outcome) changed it since: theirs to keep
            ops.set_status(self.project, task_id, "pending", force=True)
        except WfError as e:
            self.emit(f"{task_id}: left blocked ({e})")
            return
        self.emit(f"{task_id}: pending again (its crashes were the tool's)")
        for entry in [h for h in self.held if h[0] == task_id]:  # no person is needed for it now
            self.held.remove(entry)
            self.seen.remove(entry[1])

    def _infra(
        self, lane: str, unit: Unit, rec: LaneRecord, failure: Failure, words: str | None = None
    ) -> None:
        words = words or str(unit.status.get("reason") or unit.status.get("error") or failure.value)
        tool = unit.adapter.name
        reason = StopReason(Stop.INFRA, f"{tool} could not run ({failure.value}): {words}")
        if not self._release(lane, reason):
            return
        if failure in TOOL_WIDE:
            self.broken_tools[tool] = reason
            for other in self.lanes:
                idle = other not in self.stopped and other not in self.units
                if other != lane and idle and self.tools.adapter_for(other).name == tool:
                    self._stop(other, reason)

    def _post_and_go_on(
        self,
        lane: str,
        rec: LaneRecord,
        result: str,
        commit: str | None,
        note: str,
        unit: Unit | None,
        duration: float | None,
    ) -> None:
        try:
            try:
                posted = self._post(lane, rec, result, commit, note, unit, duration)
            except WfError:
                if commit is None or not _commit_missing(self.project, commit):
                    raise
                posted = self._post(lane, rec, result, None, note, unit, duration)  # an unknown sha
        except ParseError as e:
            why = f"post failed: {e}"
            bad = [i for i in e.issues if i.kind is IssueKind.NOT_UTF8]
            if bad:  # a person's save, not the task's doing
                why = (
                    f"{self.project.config.tasks} cannot be read ({bad[0]}): {rec.id} keeps its claim "
                    "and its report; once the file is fixed the next wf orch run posts it, not as a handback"
                )
            self._stop(lane, StopReason(Stop.ERROR, why), rec.id)
            return
        except WfError as e:
            self._stop(lane, StopReason(Stop.ERROR, f"post failed: {e}"), rec.id)
            return
        for line in posted.lines:
            self.emit(f"{lane}: {line}")
        if posted.outcome.done:
            self.last_done_lane = lane
        if posted.next is not None:  # a stop line, or the recovery pick after a crash
            stop = posted.next.stop
            if stop is not None and stop.kind.task_owned:
                if self._hold(lane, stop, posted.task):
                    self._pick(lane)
                return
            if stop is not None:
                self._stop(lane, stop, posted.task)
                return
            self._start(lane, posted.next)
            return
        self.in_a_row.pop(lane, None)  # a task that went on: the lane works
        self._pick(lane)

    def _post(
        self,
        lane: str,
        rec: LaneRecord,
        result: str,
        commit: str | None,
        note: str,
        unit: Unit | None,
        duration: float | None,
    ) -> Posted:
        return post(
            self.project,
            lane,
            result,
            commit=commit,
            note=note,
            session=unit.session_id if unit else None,
            adapter=unit.adapter.name if unit else rec.adapter,
            duration=duration,
            no_pick=True,
            task_id=rec.id,
            owner=self.me,
            refused=_refused(lane, unit) if unit else None,
        )

    def _say_red_gates(self) -> None:
        for r in self.gates.red():
            for line in gate.red_lines(self.project, r):
                self.emit(line)


def _refused(lane: str, unit: Unit) -> Refused | None:
    """The calls the unit's tool refused for want of a grant, with the key that grants them."""
    if not unit.parsed.denied:
        return None
    a = unit.adapter
    return Refused(a.name, tuple(unit.parsed.denied), f"wf.toml lanes.{lane}.{a.grant_field}")


def _commit_missing(project: Project, commit: str) -> bool:
    from wf.trees import gitops

    return not gitops.commit_exists(project.root, commit)
