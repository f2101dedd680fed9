"""``wf orch run``: the orchestration loop with no orchestrating agent.

For every lane: pick, start the lane's worker headless in its tree (the lane's adapter
and the task's model), wait, read the four report lines from its answer (none means it
crashed), post, and go on with the lane's next pick, until every lane stops. Lanes run
in parallel; a lane that ran dry is looked at again after every post (another lane's
merge may have made its next task ready). Ctrl-C (or SIGTERM, SIGHUP) stops the
workers and leaves their lane records, so a later run recovers them in place. The run
owns the records it makes: a record held by an interactive orchestrator, or by another
live run, is never taken over.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from wf import adapters, orch, procs, runs
from wf.adapters import Spec
from wf.errors import WfError
from wf.project import Project
from wf.supervise import POLL, Unit

_REPORT = re.compile(r"^[\s>*_`#-]*(result|commit|followups|note)[*_`\s]*:\s*(.*?)\s*$", re.I | re.M)
_SHA = re.compile(r"\b[0-9a-f]{7,64}\b")
# Stops after which the lane may have work again later in the same run.
_SOFT = ("no runner-ready task", "solo task")


class Report(NamedTuple):
    result: str
    commit: str | None
    followups: str
    note: str


def read_report(answer: str) -> Report | None:
    """The four lines of a worker's final message (the last of each), or None. Markdown
    a model may add (bullets, bold, backticks, a final period) is tolerated."""
    found: dict[str, str] = {}
    for m in _REPORT.finditer(answer):
        found[m.group(1).lower()] = m.group(2).strip("`*_ ")
    words = re.findall(r"[a-z]+", found.get("result", "").lower())
    result = words[0] if words else ""
    if result not in orch.RESULTS or result == "crashed":
        return None
    sha = _SHA.search(found.get("commit", "").lower())
    note = " ".join(found.get("note", "").split())[:300]
    return Report(result, sha.group(0) if sha else None, found.get("followups", "-"), note)


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
    ) -> None:
        self.project = project
        self.lanes = lanes
        self.adapter = adapter
        self.emit = emit
        self.until_stop = until_stop
        self.deadline = time.monotonic() + for_seconds if for_seconds else None
        self.timeout = timeout
        self.run_id = time.strftime("orch-%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"
        self.units: dict[str, tuple[Unit, orch.Record]] = {}
        self.stopped: dict[str, str] = {}
        self.failed = False  # a lane stopped on an error
        self.last_done_lane: str | None = None
        self.count = 0
        self.me = os.getpid()

    # ---------------------------------------------------------------- checks
    def check_lanes(self) -> None:
        """Every lane can start its worker, before anything is claimed."""
        for lane in self.lanes:
            cfg = self.project.config.lane(lane)
            if cfg is None:
                raise WfError(f"no lane {lane!r} (wf lanes)")
            adapter = adapters.choose(self.adapter or cfg.adapter, None)
            if adapter.name == "cmd":
                if not cfg.cmd:
                    raise WfError(f"lane {lane} runs the cmd adapter but wf.toml gives it no cmd = [...]")
            elif adapter.executable() is None:
                raise WfError(f"lane {lane} needs {adapter.binary}, which is not installed (wf doctor)")

    # ---------------------------------------------------------------- starting
    def _stop(self, lane: str, why: str, *, error: bool = False) -> None:
        self.stopped[lane] = why
        self.failed = self.failed or error
        self.emit(f"stop lane {lane}: {why}")

    def _start(self, lane: str, pick: orch.Pick) -> None:
        if pick.stop is not None or pick.record is None:
            self._stop(lane, pick.stop or "stopped")
            return
        self.stopped.pop(lane, None)
        rec = pick.record
        cfg = self.project.config.lane(lane)
        adapter = adapters.choose(self.adapter or (cfg.adapter if cfg else None), None)
        self.count += 1
        unit_id = f"{lane}-{rec.id}"[:40] + f"-{self.count}"
        spec = Spec(
            run=self.run_id,
            unit=unit_id,
            folder=runs.unit_dir(self.project, self.run_id, unit_id),
            cwd=Path(str(rec.worktree)),
            prompt=orch.worker_instructions(rec.slice) + "\n" + pick.prompt,
            model=rec.model,
            effort=cfg.effort if cfg else None,
            cmd=cfg.cmd if cfg and adapter.name == "cmd" else (),
            permission_mode=cfg.permission_mode if cfg else "acceptEdits",
            allowed_tools=cfg.allowed_tools if cfg else (),
        )
        unit = Unit(spec, adapter, timeout=self.timeout, stall=None, meta={"task": rec.id, "lane": lane})
        unit.queue()
        unit.start()
        rec = rec._replace(
            pid=unit.proc.pid if unit.proc else None, run=self.run_id, unit=unit_id, owner=self.me
        )
        orch.save(self.project, rec)
        self.units[lane] = (unit, rec)
        extra = (" [slice]" if rec.slice else "") + (f"  (recovery: {rec.recovery})" if rec.recovery else "")
        self.emit(f"{lane}: start {rec.id} with {adapter.name} model={rec.model}{extra}")

    def _pick(self, lane: str) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._stop(lane, "--for time is up")
            return
        try:
            rec = orch.load(self.project, lane)
            if rec is None:
                pick = orch.pick(self.project, lane, owner=self.me)
            elif rec.owner is None and rec.pid is None:
                self._stop(
                    lane, f"{rec.id} was picked by an interactive orchestrator (wf orch post {lane} ...)"
                )
                return
            else:
                holder = orch._live_holder(rec)
                if holder:
                    self._stop(lane, f"{rec.id} is held by {holder}")
                    return
                why = "the previous run was interrupted" if rec.pid is None else "its worker is gone"
                pick = orch.pick(self.project, lane, recovery=why, owner=self.me)
        except WfError as e:
            self._stop(lane, f"pick failed: {e}", error=True)
            return
        self._start(lane, pick)

    def _wake_idle(self) -> None:
        """Lanes that ran dry may have work now (a merge made an After task ready)."""
        for lane in self.lanes:
            if lane not in self.units and self.stopped.get(lane, "").startswith(_SOFT):
                del self.stopped[lane]
                try:
                    pick = orch.pick(self.project, lane, owner=self.me)
                except WfError as e:
                    self._stop(lane, f"pick failed: {e}", error=True)
                    continue
                if pick.stop is None:
                    self._start(lane, pick)
                else:
                    self.stopped[lane] = pick.stop  # still dry: say nothing new

    # ---------------------------------------------------------------- ending
    def _ended(self, lane: str, unit: Unit, rec: orch.Record) -> bool:
        """Post the unit's report; True if the lane may go on."""
        answer = runs.read_output(unit.folder)
        rep = read_report(answer) if not unit.status.get("fallback") else None
        duration = unit.status.get("duration_s")
        if (
            rep is None
            and unit.status.get("error", "")
            and str(unit.status.get("error")).startswith("cannot start")
        ):
            self._stop(lane, f"{rec.id}: {unit.status['error']}", error=True)
            return False
        if rep is None and unit.state == "done":
            self.emit(f"{lane}: {rec.id} ended without the four report lines")
            result, commit, note = "handback", None, f"no report: {runs.preview(answer, 80)}"
        elif rep is None:
            self.emit(
                f"{lane}: {rec.id} ended without a report ({unit.state}, exit {unit.status.get('exit_code')})"
            )
            result, commit, note = "crashed", None, f"{unit.state}, exit {unit.status.get('exit_code')}"
        else:
            self.emit(f"{lane}: {rec.id} reported {rep.result}: {rep.note}")
            result, commit, note = rep.result, rep.commit, rep.note
        try:
            try:
                posted = self._post(lane, rec, result, commit, note, unit, duration)
            except WfError as e:
                if commit is None or "no commit" not in str(e):
                    raise
                posted = self._post(lane, rec, result, None, note, unit, duration)  # an unknown sha
        except WfError as e:
            self._stop(lane, f"post failed: {e}", error=True)
            return False
        for line in posted.lines:
            self.emit(f"{lane}: {line}")
        if posted.outcome.startswith("done"):
            self.last_done_lane = lane
        if posted.next is not None:  # a stop line, or the recovery pick after a crash
            if posted.next.stop is not None:
                hard = posted.outcome in ("post-check-red", "crashed-twice")
                self._stop(lane, posted.next.stop, error=hard)
                return False
            self._start(lane, posted.next)
            return False
        return True

    def _post(
        self,
        lane: str,
        rec: orch.Record,
        result: str,
        commit: str | None,
        note: str,
        unit: Unit,
        duration: object,
    ) -> orch.Posted:
        return orch.post(
            self.project,
            lane,
            result,
            commit=commit,
            note=note,
            session=unit.session_id,
            adapter=unit.adapter.name,
            duration=float(duration) if isinstance(duration, (int, float)) else None,
            no_pick=True,
            task_id=rec.id,
        )

    def _gate_brought_work(self) -> bool:
        """Every lane stopped: wait for a gate still running on the last merge; if it is
        red, the lane that merged last gets its P0 fix task (through a post would be too
        late: nothing is left to post)."""
        from wf import gate, ops

        sha = gate.pending(self.project)
        if sha is not None:
            self.emit(f"waiting for the gate at {sha[:12]}")
            gate.wait(self.project, sha, gate.TIMEOUT)
        red = gate.unhandled_red(self.project)
        if not red or self.last_done_lane is None:
            return False
        lane = self.last_done_lane
        cfg = self.project.config.lane(lane)
        fix = ops.add_task(
            self.project,
            f"Fix the gate: {self.project.config.gate} fails at {red[0][:12]}",
            prio=0,
            lane=lane,
            model=cfg.model if cfg else None,
            done=f"{self.project.config.gate} passes",
        )
        gate.mark_handled(self.project, red[0], fix)
        self.emit(f"{lane}: gate red at {red[0][:12]}: added P0 task {fix}")
        self.stopped.pop(lane, None)
        self._pick(lane)
        return lane in self.units

    # ---------------------------------------------------------------- the loop
    def status_line(self) -> str:
        now = time.monotonic()
        parts = []
        for lane in self.lanes:
            if lane in self.units:
                unit, rec = self.units[lane]
                parts.append(f"{lane}={rec.id} {now - unit.started:.0f}s")
            elif lane in self.stopped:
                parts.append(f"{lane}=stopped")
        return " | ".join(parts)

    def _poll_all(self, *, then_pick: bool) -> None:
        now = time.monotonic()
        for lane, (unit, rec) in list(self.units.items()):
            if unit.poll(now):
                del self.units[lane]
                if self._ended(lane, unit, rec) and then_pick:
                    self._pick(lane)
                if then_pick:
                    self._wake_idle()

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
            while not interrupted.is_set():
                self._poll_all(then_pick=True)
                procs.reap_orphans()
                now = time.monotonic()
                if not self.units:
                    if self._gate_brought_work():
                        continue
                    if not self.until_stop or orch.stop_file(self.project).exists():
                        break
                    if self.deadline is not None and now >= self.deadline:
                        break
                    time.sleep(10)  # --until-stop: look for new work now and then
                    self._wake_idle()
                    continue
                if tick is not None and now - last_tick >= 1:
                    tick(self.status_line())
                    last_tick = now
                time.sleep(POLL)
            if interrupted.is_set():
                self._poll_all(then_pick=False)  # a worker that already reported is posted
                return 130
            return 1 if self.failed else 0
        finally:
            for lane, (unit, rec) in list(self.units.items()):
                unit.stop("interrupted")
                orch.save(self.project, rec._replace(pid=None))
                self.emit(f"{lane}: stopped {rec.id}; its record stays for a later recovery")
            self.units.clear()
            procs.kill_descendants()  # nothing this run started outlives it (but a gate run)
            for s, h in old.items():
                signal.signal(s, h)
