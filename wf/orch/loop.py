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

Each stop and park of a lane is also a typed event (``wf.orch.events``): what a batch's
summary and the pilot read. The lanes' own work (pick, start, end, post, hold, park) is
``wf.orch.lanework``; reading a worker's end, ``wf.orch.ending``; a lane's tool and
model, ``wf.orch.lanetool``.

Every event also goes to ``out/wf-orch-run.log``, so a closed stdout (``| head``) loses
nothing and never stops the loop. Ctrl-C (or SIGTERM, SIGHUP) stops the workers and
leaves their lane records, so a later run recovers them in place.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from wf.base.errors import WfError
from wf.base.project import Project
from wf.base.quantity import until_text
from wf.orch import gate, starts, state
from wf.orch.budget import Gate
from wf.orch.ending import infra_failure as infra_failure
from wf.orch.lanework import TOOL_WIDE as TOOL_WIDE
from wf.orch.lanework import LaneWork
from wf.orch.pick import CloudPlug, Pick, pick
from wf.orch.report import read_report, run_outcomes
from wf.orch.state import LaneRecord, Stop, StopReason
from wf.tasks import backlog as backlogmod
from wf.workers import procs, runs
from wf.workers.supervise import POLL, Unit, note_strays

WAKE_EVERY = 10.0  # --until-stop: seconds between looks for new work (and at once when TASKS.md changes)


class Loop(LaneWork):
    """The scheduler over the lanes (``LaneWork``): what may start (--for, --max-tasks,
    a broken tool), the polling of the workers, the waking of stopped lanes, the gate's
    last word, the status line, and the end (its exit code, or a signal)."""

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
        budget: float | None = None,
        weekly_reserve: float | None = None,
    ) -> None:
        super().__init__(
            project, lanes, adapter=adapter, emit=emit, for_seconds=for_seconds, timeout=timeout, cloud=cloud
        )
        self.until_stop = until_stop
        self.max_tasks = max_tasks
        self.started_tasks = 0
        self.batch = starts.loop_stamp()  # the batch this run belongs to (WF_BATCH), or None
        self.began = time.monotonic()
        self.budget = Gate(project, budget, weekly_reserve)
        if self.budget.active:
            self.admit = self.budget.admit
        try:
            self.log_start = (project.out_dir / "wf-orch.log").stat().st_size
        except OSError:
            self.log_start = 0

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
        if rec.recovery is None:
            self.started_tasks += 1
            if self.batch is not None:
                starts.note_start(self.project, self.batch, starts.LOCAL, rec.id)
        self._launch(lane, rec, self.tools.spec(lane, rec, p.prompt, self.run_id))

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
        broken = self.broken_tools.get(self.tools.adapter_for(lane).name)
        if broken is not None:
            return broken
        return None

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
                p = pick(self.project, lane, owner=self.me, cloud=self.cloud, admit=self.admit)
            except WfError as e:
                self._stop(lane, StopReason(Stop.ERROR, f"pick failed: {e}"))
                continue
            if p.stop is None:
                self._start(lane, p)
            else:
                self.stopped[lane] = p.stop  # still dry: say nothing new

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
        self.tools.check(self.lanes, self.emit)
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


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file from the one last seen, for one stat: a task a person
    adds during an --until-stop night is picked within a poll, not after WAKE_EVERY."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
