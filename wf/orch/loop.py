"""``wf orch run``: the orchestration loop with no orchestrating agent.

For every lane: pick, start the lane's worker headless in its tree (the lane's adapter
and the task's model), wait, read the four report lines from its answer, post, and go
on with the lane's next pick, until every lane stops. Lanes run in parallel; a lane
that ran dry is looked at again after every post (another lane's merge may have made
its next task ready), and with ``--until-stop`` any stopped lane wakes when runner-ready
work appears for it.

What can go wrong, and what becomes of it:
- the tool could not run (missing program, not logged in, out of credit, offline, the
  model refused, the worker's own imports failed): infrastructure, not the task's
  fault. The claim is released (the task is exactly as before), the lane, or every lane
  on that tool, stops with the tool's own words, and the run exits 1;
- the plan's usage limit rejected the worker: the lane parks until the reset (plus
  WF_PARK_MIN_S, default a minute; never past --for; at most 24 h) and its task, still
  claimed and charged nothing, runs again then (in its own session where the tool can
  resume it); the tool's other lanes wait too, other tools' lanes go on. An overloaded
  API gets a short backoff and the same retry (three in a row: the tool's failure);
- the worker ended without a report: crashed, one recovery pick in place; but a worker
  that died before reading its prompt, or failed the same way (exit status, last error
  line) on two tasks, is its tool's failure, as above;
- a stop that belongs to one task (awaiting, handback, wip, its red post-check, crashed
  twice): the task is held for a person and the lane goes on with its next task; two
  such stops in a row stop the lane. The run exits 4 and names each held task at its end;
- the loop itself died (killed, a reboot): its records name it as owner; the next run
  takes them over once that owner is gone, posting a report that was captured rather
  than working the task again.

Every event also goes to ``out/wf-orch-run.log``, so a closed stdout (``| head``) loses
nothing and never stops the loop. Ctrl-C (or SIGTERM, SIGHUP) stops the workers and
leaves their lane records, so a later run recovers them in place.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from wf import adapters
from wf.adapters import Failure, Spec
from wf.adapters.limits import Limit
from wf.base.errors import IssueKind, ParseError, WfError
from wf.base.fsutil import append_line
from wf.base.project import Project
from wf.base.quantity import until_text
from wf.orch import gate, park, starts, state
from wf.orch.pick import CloudPlug, Pick, live_holder, pick, worker_instructions
from wf.orch.post import Posted, Refused, post, release
from wf.orch.report import captured_report, read_report, run_outcomes
from wf.orch.state import LaneRecord, Stop, StopReason
from wf.tasks import backlog as backlogmod
from wf.workers import procs, runs
from wf.workers.supervise import POLL, Unit, note_strays

# every lane on that tool stops: the next worker would meet the same wall
TOOL_WIDE = frozenset({Failure.auth, Failure.quota, Failure.rate_limit, Failure.network})
IN_A_ROW = 2  # task-owned stops in a row that stop a lane: a lane failing every task must not burn the night
WAKE_EVERY = 10.0  # --until-stop: seconds between looks for new work (and at once when TASKS.md changes)
WAITED = (Failure.usage_limit, Failure.overloaded)  # the lane waits and the task runs again
CONTINUE = (
    "The usage limit (or the overloaded API) that stopped you is over: go on with the task "
    "above where you left it, and end with the four report lines."
)


class CrashSignature(NamedTuple):
    """How a worker failed without a report: the same on two tasks is its tool's fault."""

    adapter: str
    cmd: tuple[str, ...]
    exit_code: int | None
    last_line: str


def infra_failure(status: dict[str, object]) -> Failure | None:
    """The failure class of a unit that failed for want of its tool (None otherwise)."""
    try:
        failure = Failure(status.get("failure"))
    except ValueError:
        return None
    return failure if failure.infrastructure else None


class Loop:
    def __init__(
        self,
        project: Project,
        lanes: list[str],
        *,
        adapter: str | None,
        emit: Callable[[str], None],
        until_stop: bool = False,
        for_seconds: float | None = None,
        timeout: float | None = None,
        max_tasks: int | None = None,
        cloud: CloudPlug | None = None,
    ) -> None:
        self.project = project
        self.cloud = cloud  # the cloud lane (wf.cloud.PLUG): each pick leaves it its tasks
        self.lanes = lanes
        self.adapter = adapter
        self._emit = emit
        self.until_stop = until_stop
        self.deadline = time.monotonic() + for_seconds if for_seconds else None
        self.timeout = timeout
        self.max_tasks = max_tasks
        self.run_id = time.strftime("orch-%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"
        self.units: dict[str, tuple[Unit, LaneRecord]] = {}
        self.stopped: dict[str, StopReason] = {}
        self.seen: list[StopReason] = []  # every stop of this run: the exit code is made from them
        self.broken_tools: dict[str, StopReason] = {}
        self.in_a_row: dict[str, int] = {}  # per lane: task-owned stops since its last task that went on
        self.tired: dict[str, frozenset[str]] = {}  # lanes stopped for stops in a row: their ready ids then
        self.held: list[tuple[str | None, StopReason]] = []  # task-owned stops (task, why): for a person
        self.crashes: dict[CrashSignature, set[str]] = {}  # a failure without a report: its tasks
        self.last_done_lane: str | None = None
        self.parked: dict[str, park.Parked] = {}  # lanes waiting out a usage limit or an overload
        self.tool_parked: dict[str, park.Parked] = {}  # per tool: its account's usage limit
        self.rejections: dict[str, int] = {}  # per lane: limited or overloaded runs in a row
        self.count = 0
        self.started_tasks = 0
        self.batch = starts.loop_stamp()  # the batch this run belongs to (WF_BATCH), or None
        self.me = os.getpid()
        self.events = project.out_dir / "wf-orch-run.log"
        self.gates = gate.Watch(project)  # a red gate is said as soon as it is recorded
        self.began = time.monotonic()
        try:
            self.log_start = (project.out_dir / "wf-orch.log").stat().st_size
        except OSError:
            self.log_start = 0

    def emit(self, line: str) -> None:
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            append_line(self.events, f"{ts} run={self.run_id} {line}")
        except OSError:
            pass
        self._emit(line)

    # ---------------------------------------------------------------- checks
    def _adapter_for(self, lane: str) -> adapters.Adapter:
        cfg = self.project.config.lane(lane)
        return adapters.choose(self.adapter or (cfg.adapter if cfg else None), None)

    def _model_for(self, lane: str, task_model: str | None) -> str | None:
        """The model the lane's worker gets: the task's own on the lane's own tool; with
        --adapter naming another tool, the lane's model for that tool (None: it has none)."""
        cfg = self.project.config.lane(lane)
        adapter = self._adapter_for(lane).name
        if cfg is None or self.adapter is None or self.adapter == cfg.adapter:
            return task_model or (cfg.model if cfg else None)
        return adapters.lane_model_for(cfg, adapter)

    def check_lanes(self) -> None:
        """What can be checked cheaply before anything is claimed: every lane's program
        resolves, its tool is logged in (the tool's own offline probe), and its model and
        effort fit the tool. A problem is an error naming the lane, with nothing claimed."""
        from wf.trees import worktrees

        worktrees.preflight(self.project)  # main a branch, a git identity: before any claim
        from wf.cost import costlog

        state = costlog.state_problem()  # said once, at the start: the night goes on without it
        if state is not None:
            self.emit(f"note: {state}; cost lines still go to out/wf-cost.log")
        main = worktrees.main_branch(self.project)
        for lane in self.lanes:
            try:
                worktrees.lane_clash(lane, main)
            except WfError as e:
                raise worktrees.CannotClaim(e) from None
        problems = []
        for lane in self.lanes:
            cfg = self.project.config.lane(lane)
            if cfg is None:
                raise WfError(f"no lane {lane!r} (wf lanes)")
            adapter = self._adapter_for(lane)
            model = self._model_for(lane, None)
            if model is None:
                problems.append(
                    f"lane {lane}: no model for {adapter.name} (give the lane "
                    f'models = {{{adapter.name} = "..."}} in wf.toml, or drop --adapter)'
                )
                continue
            cmd = tuple(cfg.cmd)
            if adapter.name == "cmd" and cmd and os.sep in cmd[0] and not os.path.isabs(cmd[0]):
                cmd = (str(self.project.root / cmd[0]), *cmd[1:])
            for problem in adapters.preflight(adapter.name, model, cfg.effort, cmd=cmd):
                problems.append(f"lane {lane}: {problem.message} ({problem.failure.value}); {problem.fix}")
        if problems:
            raise WfError("nothing was claimed:\n" + "\n".join(problems))

    # ---------------------------------------------------------------- starting
    def _stop(self, lane: str, reason: StopReason, *, quiet: bool = False) -> None:
        self.stopped[lane] = reason
        self.seen.append(reason)
        if not quiet:
            self.emit(f"stop lane {lane}: {reason.text}")

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
                lane, StopReason(reason.kind, f"{run} tasks in a row need a person; the last: {reason.text}")
            )
            return False
        self.emit(f"{lane}: {reason.text} (held for a person; the lane goes on)")
        return True

    def _start(self, lane: str, p: Pick) -> None:
        if p.stop is not None and p.stop.kind.task_owned:
            if self._hold(lane, p.stop):
                self._pick(lane)
            return
        if p.stop is not None or p.record is None:
            self._stop(lane, p.stop or StopReason(Stop.ERROR, "stopped"))
            return
        self.stopped.pop(lane, None)
        rec = p.record
        cfg = self.project.config.lane(lane)
        adapter = self._adapter_for(lane)
        if rec.recovery is None:
            self.started_tasks += 1
            if self.batch is not None:
                starts.note_start(self.project, self.batch, starts.LOCAL, rec.id)
        spec = Spec(
            run=self.run_id,
            unit="",
            folder=Path(),
            cwd=Path(str(rec.worktree)),
            prompt=worker_instructions(rec.slice) + "\n" + p.prompt,
            model=self._model_for(lane, rec.model),
            effort=cfg.effort if cfg else None,
            cmd=cfg.cmd if cfg and adapter.name == "cmd" else (),
            **(adapters.lane_access(cfg) if cfg else {}),
        )
        self._launch(lane, rec, spec)

    def _launch(self, lane: str, rec: LaneRecord, spec: Spec, *, again: str = "") -> None:
        """Start a unit for the lane's claimed task (``again``: why it runs once more)."""
        cfg = self.project.config.lane(lane)
        adapter = self._adapter_for(lane)
        self.count += 1
        unit_id = f"{lane}-{rec.id}"[:40] + f"-{self.count}"
        spec = spec._replace(unit=unit_id, folder=runs.unit_dir(self.project, self.run_id, unit_id))
        timeout = self.timeout or (cfg.timeout if cfg else None)
        stall = cfg.stall if cfg else None
        unit = Unit(spec, adapter, timeout=timeout, stall=stall, meta={"task": rec.id, "lane": lane})
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

    def _started(self) -> int:
        """Tasks started toward --max-tasks: in a batch, its cloud sends count too."""
        cloud = starts.starts(self.project, self.batch, starts.CLOUD) if self.batch else 0
        return self.started_tasks + cloud

    def _may_start(self, lane: str) -> StopReason | None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return StopReason(Stop.TIME_UP, "--for time is up")
        if self.max_tasks is not None and self._started() >= self.max_tasks:
            # a send of the cloud sidecar under way counts already: wait for it to say
            # whether it sent anything before the cap takes this lane's start
            cloud = starts.settled_cloud_starts(self.project, self.batch) if self.batch else 0
            if self.started_tasks + cloud >= self.max_tasks:
                return StopReason(Stop.TIME_UP, f"{self.max_tasks} task(s) started: the cap is reached")
        broken = self.broken_tools.get(self._adapter_for(lane).name)
        if broken is not None:
            return broken
        return None

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
                    self.emit(
                        f"park lane {lane}: parked {until_text(waiting.until, waiting.why)}: "
                        f"{self._adapter_for(lane).name}'s usage limit"
                    )
                    return
                p = pick(self.project, lane, owner=self.me, cloud=self.cloud)
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
            )
            return None
        if rec.owner and rec.owner != self.me and rec.owner_alive():
            self._stop(lane, StopReason(Stop.HELD, f"{rec.id} is held by wf orch run pid {rec.owner}"))
            return None
        if rec.pid and rec.worker_alive():
            # its loop is gone: end the orphaned worker's whole tree, then recover
            procs.kill_tree(rec.pid, rec.token)
        if rec.run and rec.unit:  # and what its loop adopted from it (detached, env cleared)
            from wf.fanout.watch import end_strays

            end_strays(runs.unit_dir(self.project, rec.run, rec.unit))
        holder = live_holder(rec)
        if holder:
            self._stop(lane, StopReason(Stop.HELD, f"{rec.id} is held by {holder}"))
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

    def _wake(self) -> None:
        """Lanes that stopped may have work now: a soft stop after every post (a merge
        made an After task ready); with --until-stop, any lane whose stop did not come
        from a broken tool, once runner-ready work is there for it."""
        bl: backlogmod.Backlog | None = None
        for lane in self.lanes:
            reason = self.stopped.get(lane)
            if lane in self.units or reason is None:
                continue
            if not reason.kind.soft and not (self.until_stop and reason.kind is not Stop.INFRA):
                continue
            if self._may_start(lane) is not None or self._tool_waits(lane) is not None:
                continue
            if bl is None:
                try:
                    bl = backlogmod.load(self.project)
                except WfError:
                    return  # TASKS.md cannot be read now (a person's save): a later look wakes them
            ready = {t.id for t in bl.runner_ready(lane)}
            if not ready and state.load(self.project, lane) is None:
                continue
            if lane in self.tired:
                if not ready - self.tired[lane]:
                    continue  # stopped for tasks in a row that need a person: only new work wakes it
                del self.tired[lane]
                self.in_a_row.pop(lane, None)
            try:
                p = pick(self.project, lane, owner=self.me, cloud=self.cloud)
            except WfError as e:
                self._stop(lane, StopReason(Stop.ERROR, f"pick failed: {e}"))
                continue
            if p.stop is None:
                self._start(lane, p)
            else:
                self.stopped[lane] = p.stop  # still dry: say nothing new

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
            self._release_parked(
                lane,
                rec,
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
            self.emit(
                f"park lane {lane}: parked {until_text(until, why)}: {rec.id} stays claimed and {then} "
                f"then ({unit.adapter.name} {failure.value}: {words})"
            )
        state.save(self.project, rec)
        self.parked[lane] = park.Parked(until, why, rec, spec)
        return True

    def _release_parked(self, lane: str, rec: LaneRecord, reason: StopReason) -> None:
        """A parked task that will not run in this loop: released as it was."""
        self._release(lane, reason)

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
        self._stop(lane, reason)
        return True

    def _unpark(self) -> None:
        """Lanes whose wait is over: their task runs again, a lane parked with none picks."""
        now = time.time()
        for lane, p in list(self.parked.items()):
            if p.until > now:
                continue
            del self.parked[lane]
            tool = self._adapter_for(lane).name
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
                self._release_parked(lane, rec, stop)
                continue
            self._launch(lane, rec, p.spec, again=f"again after {p.why}")

    def _tool_waits(self, lane: str) -> park.Parked | None:
        """The usage limit the lane's tool waits out (its account's: every lane on it waits)."""
        waiting = self.tool_parked.get(self._adapter_for(lane).name)
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
        answer = runs.read_output(unit.folder)
        late = runs.answered_after_signal(unit.folder)  # wf signalled it first: no answer
        rep = read_report(answer) if not unit.status.get("fallback") and not late else None
        duration = unit.status.get("duration_s")
        if late:
            how = f"{unit.state}, exit {unit.status.get('exit_code')}"
            self.emit(f"{lane}: {rec.id} was signalled by wf before it reported ({how}): a crash to recover")
            result, commit, note = "crashed", None, f"signalled by wf before its report ({how})"
        elif rep is None and unit.state == "done":
            self.emit(f"{lane}: {rec.id} ended without the four report lines")
            result, commit, note = "handback", None, f"no report: {runs.preview(answer, 80)}"
        elif rep is None:
            tool_words = self._tool_crash(unit, rec)
            if tool_words is not None:
                self._infra(lane, unit, rec, Failure.tool, tool_words)
                return
            how = f"{unit.state}, exit {unit.status.get('exit_code')}"
            self.emit(f"{lane}: {rec.id} ended without a report ({how})")
            result, commit, note = "crashed", None, how
        else:
            self.emit(f"{lane}: {rec.id} reported {rep.result}: {rep.note}")
            result, commit, note = rep.result, rep.commit, rep.note
        self._post_and_go_on(
            lane,
            rec,
            result,
            commit,
            note,
            unit,
            float(duration) if isinstance(duration, (int, float)) else None,
        )

    @staticmethod
    def _refused(lane: str, unit: Unit) -> Refused | None:
        """The calls the unit's tool refused for want of a grant, with the key that grants them."""
        if not unit.parsed.denied:
            return None
        a = unit.adapter
        return Refused(a.name, tuple(unit.parsed.denied), f"wf.toml lanes.{lane}.{a.grant_field}")

    def _tool_crash(self, unit: Unit, rec: LaneRecord) -> str | None:
        """Why a worker that failed without a report is its tool's fault though its adapter
        could not tell (None: it is the task's crash): it died before reading its prompt,
        or it failed the same way (exit status, last error line) on another task while
        its tool said nothing of why."""
        st = unit.status
        if unit.state != "failed" or st.get("failure") != Failure.task.value:
            return None  # a timeout, a stall, a stop: nothing says the tool is at fault
        code = st.get("exit_code")
        line = str(st.get("reason") or st.get("error") or "")
        size = st.get("stdin_bytes")
        unread = st.get("stdin_read") == 0 and isinstance(size, int) and size > 0
        if unread and _nothing_printed(unit.folder):
            return f"the worker ended (exit {code}) before reading its prompt: {line or 'nothing on stderr'}"
        if unit.parsed.error is not None:
            return None  # the tool named the failure itself (claude's max turns): its adapter's call
        sig = CrashSignature(
            unit.adapter.name, tuple(unit.spec.cmd), code if isinstance(code, int) else None, line
        )
        seen = self.crashes.setdefault(sig, set())
        others = sorted(seen - {rec.id})
        seen.add(rec.id)
        if not others:
            return None
        for other in others:  # blocked before the pattern showed: not theirs either
            self._unblock_crashed(other)
        return f"the worker failed the same way on {', '.join(others)} and {rec.id} (exit {code}): {line}"

    def _unblock_crashed(self, task_id: str) -> None:
        """A task this run blocked as crashed twice, for a failure now known to be its
        tool's: back to pending, so that no task is charged for its tool."""
        from wf.tasks import ops

        try:
            task = backlogmod.load(self.project).doc.find(task_id)
            st = task.status if task is not None else None
            if st is None or st.state != "blocked" or not st.text.startswith("crashed twice"):
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
                if other != lane and idle and self._adapter_for(other).name == tool:
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
            self._stop(lane, StopReason(Stop.ERROR, why))
            return
        except WfError as e:
            self._stop(lane, StopReason(Stop.ERROR, f"post failed: {e}"))
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
                self._stop(lane, stop)
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
            refused=self._refused(lane, unit) if unit else None,
        )

    def _gate_brought_work(self) -> bool:
        """Every lane stopped: wait for a gate still running on the last merge; if it is
        red, the lane that merged last gets its P0 fix task (through a post would be too
        late: nothing is left to post)."""
        sha = gate.pending(self.project)
        if sha is not None:
            self.emit(f"waiting for the gate at {sha[:12]}")
            gate.wait(self.project, sha, gate.TIMEOUT)
            self._say_red_gates()
        red = gate.unhandled_red(self.project)
        if not red or self.last_done_lane is None:
            return False
        lane = self.last_done_lane
        cfg = self.project.config.lane(lane)
        fix = gate.add_fix_task(self.project, red[0], lane, cfg.model if cfg else None)
        self.emit(f"{lane}: {fix.said(red[0])}")
        self.stopped.pop(lane, None)
        self._pick(lane)
        return lane in self.units

    def _say_red_gates(self) -> None:
        for r in self.gates.red():
            for line in gate.red_lines(self.project, r):
                self.emit(line)

    # ---------------------------------------------------------------- the loop
    def status_line(self) -> str:
        """One line: lanes working, tasks done, lanes stopped, elapsed time, then each
        working lane's task and how long its worker has been quiet."""
        now = time.monotonic()
        done = sum(1 for outcome in run_outcomes(self.project, self.log_start) if outcome.done)
        parts = [
            f"{len(self.units)} working, {done} done, {len(self.stopped)} stopped, {now - self.began:.0f}s"
        ]
        for lane, (unit, rec) in sorted(self.units.items(), key=lambda x: x[1][0].last_growth):
            parts.append(f"{lane}={rec.id} {now - unit.started:.0f}s (quiet {now - unit.last_growth:.0f}s)")
        for lane, p in sorted(self.parked.items()):
            waits = "backs off" if p.why == "overloaded" else "parked"
            parts.append(f"{lane} {waits} {until_text(p.until, p.why)}")
        return " | ".join(parts)

    def _poll_all(self, *, then_pick: bool) -> None:
        now = time.monotonic()
        for lane, (unit, rec) in list(self.units.items()):
            if unit.poll(now):
                del self.units[lane]
                if then_pick:
                    self._ended(lane, unit, rec)
                    self._wake()
                else:
                    self._post_only(lane, unit, rec)

    def _post_only(self, lane: str, unit: Unit, rec: LaneRecord) -> None:
        """On the way out: a worker that already reported is posted, nothing new starts."""
        answer = runs.read_output(unit.folder)
        trusted = not unit.status.get("fallback") and not runs.answered_after_signal(unit.folder)
        rep = read_report(answer) if trusted else None
        if rep is None:  # no report, or one said after wf signalled it: a later run recovers it
            state.save(self.project, rec.but(pid=None))
            return
        try:
            posted = self._post(lane, rec, rep.result, rep.commit, rep.note, unit, None)
        except WfError as e:
            self.emit(f"{lane}: post failed: {e}")
            return
        for line in posted.lines:
            self.emit(f"{lane}: {line}")

    def exit_code(self) -> int:
        """0: out of work or told to stop; 4: a person is needed; 1: an error."""
        return state.exit_code(self.seen)

    def run(self, tick: Callable[[str], None] | None = None) -> int:
        self.check_lanes()
        procs.become_subreaper()
        interrupted = threading.Event()

        def handler(signum: int, frame: FrameType | None) -> None:
            interrupted.set()

        sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = {s: signal.signal(s, handler) for s in sigs}
        try:
            for lane in self.lanes:
                if interrupted.is_set():
                    break
                self._pick(lane)
            last_tick = 0.0
            last_look = time.monotonic()
            last_seen = _stamp(self.project.tasks_path)
            strays: set[int] = set()
            while not interrupted.is_set():
                note_strays([u for u, _ in self.units.values()], strays)  # before a unit ends
                self._poll_all(then_pick=True)
                self._unpark()
                self._say_red_gates()
                procs.reap_orphans()
                now = time.monotonic()
                if not self.units and not self.parked:
                    if self._gate_brought_work():
                        continue
                    if not self.until_stop or state.stop_file(self.project).exists():
                        break
                    if self.deadline is not None and now >= self.deadline:
                        break
                    seen = _stamp(self.project.tasks_path)
                    if now - last_look >= WAKE_EVERY or seen != last_seen:
                        last_look, last_seen = now, seen
                        self._wake()
                    time.sleep(POLL)
                    continue
                if tick is not None and now - last_tick >= 1:
                    tick(self.status_line())
                    last_tick = now
                time.sleep(POLL)
            if interrupted.is_set():
                self._poll_all(then_pick=False)  # a worker that already reported is posted
                return 130
            for _task, reason in self.held:
                self.emit(f"needs a person: {reason.text}")
            return self.exit_code()
        finally:
            for lane, (unit, rec) in list(self.units.items()):
                unit.stop("interrupted")
                state.save(self.project, rec.but(pid=None))
                self.emit(f"{lane}: stopped {rec.id}; its record stays for a later recovery")
            self.units.clear()
            for lane, p in self.parked.items():
                if p.rec is not None:  # no loop waits for it now: a later run recovers it
                    state.save(self.project, p.rec.but(parked_until=None, parked_why=None))
                    self.emit(f"{lane}: {p.rec.id} was parked; its record stays for a later recovery")
            self.parked.clear()
            procs.kill_descendants()  # nothing this run started outlives it (but a gate run)
            for s, h in old.items():
                signal.signal(s, h)


def _nothing_printed(folder: Path) -> bool:
    """Whether a unit's worker printed nothing on stdout (it may have read its prompt
    from WF_PROMPT_FILE and run: then its failure is its task's)."""
    try:
        return (folder / "worker.log").stat().st_size == 0
    except OSError:
        return False


def _commit_missing(project: Project, commit: str) -> bool:
    from wf.trees import gitops

    return not gitops.commit_exists(project.root, commit)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file from the one last seen, for one stat: a task a person
    adds during an --until-stop night is picked within a poll, not after WAKE_EVERY."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
