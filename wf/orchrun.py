"""``wf orch run``: the orchestration loop with no orchestrating agent.

For every lane: pick, start the lane's worker headless in its tree (the lane's adapter
and the task's model), wait, read the four report lines from its answer (none means it
crashed), post, and go on with the pick that post made, until every lane stops. Lanes
run in parallel. Ctrl-C stops the workers and leaves the lane records, so a later run
recovers them in the same trees and branches.
"""

from __future__ import annotations

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

_REPORT = re.compile(r"^\s*(result|commit|followups|note)\s*:\s*(.*?)\s*$", re.I | re.M)


class Report(NamedTuple):
    result: str
    commit: str | None
    followups: str
    note: str


def read_report(answer: str) -> Report | None:
    """The four lines of a worker's final message (the last of each), or None."""
    found: dict[str, str] = {}
    for m in _REPORT.finditer(answer):
        found[m.group(1).lower()] = m.group(2)
    result = found.get("result", "").split()[0].lower() if found.get("result") else ""
    if result not in orch.RESULTS or result == "crashed":
        return None
    commit = found.get("commit") or "-"
    return Report(
        result, None if commit in ("-", "") else commit, found.get("followups", "-"), found.get("note", "")
    )


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
        self.run_id = time.strftime("orch-%Y%m%d-%H%M%S", time.gmtime())
        self.units: dict[str, tuple[Unit, orch.Record]] = {}
        self.stopped: dict[str, str] = {}
        self.count = 0

    # ---------------------------------------------------------------- starting
    def _start(self, lane: str, pick: orch.Pick) -> None:
        if pick.stop is not None or pick.record is None:
            self.stopped[lane] = pick.stop or "stopped"
            self.emit(pick.text())
            return
        rec = pick.record
        lane_cfg = self.project.config.lane(lane)
        name = self.adapter or (lane_cfg.adapter if lane_cfg else None)
        adapter = adapters.choose(name, None)
        self.count += 1
        unit_id = f"{lane}-{rec.id}"[:40] + f"-{self.count}"
        folder = runs.unit_dir(self.project, self.run_id, unit_id)
        prompt = orch.worker_instructions(rec.slice) + "\n" + pick.prompt
        spec = Spec(
            run=self.run_id,
            unit=unit_id,
            folder=folder,
            cwd=Path(str(rec.worktree)),
            prompt=prompt,
            model=rec.model,
            effort=lane_cfg.effort if lane_cfg else None,
            cmd=lane_cfg.cmd if lane_cfg and adapter.name == "cmd" else (),
        )
        if adapter.name == "cmd" and not spec.cmd:
            raise WfError(f"lane {lane} uses the cmd adapter but has no cmd in wf.toml")
        unit = Unit(spec, adapter, timeout=self.timeout, stall=None, meta={"task": rec.id, "lane": lane})
        unit.queue()
        unit.start()
        rec = rec._replace(pid=unit.proc.pid if unit.proc else None, run=self.run_id, unit=unit_id)
        orch.save(self.project, rec)
        self.units[lane] = (unit, rec)
        extra = (" [slice]" if rec.slice else "") + (f"  (recovery: {rec.recovery})" if rec.recovery else "")
        self.emit(f"{lane}: start {rec.id} with {adapter.name} model={rec.model}{extra}")

    def _pick(self, lane: str) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stopped[lane] = "--for time is up"
            self.emit(f"stop lane {lane}: --for time is up")
            return
        rec = orch.load(self.project, lane)
        try:
            if rec is not None:
                # left by an earlier run (interrupted, or its worker died): the same tree and branch
                why = "the previous run was interrupted" if rec.pid is None else "its worker is gone"
                if rec.pid is not None and procs.alive(rec.pid):
                    self.stopped[lane] = f"{rec.id} still has a live worker (pid {rec.pid})"
                    self.emit(f"stop lane {lane}: {self.stopped[lane]}")
                    return
                pick = orch.pick(self.project, lane, recovery=why)
            else:
                pick = orch.pick(self.project, lane)
        except WfError as e:
            self.stopped[lane] = str(e)
            self.emit(f"stop lane {lane}: {e}")
            return
        self._start(lane, pick)

    # ---------------------------------------------------------------- ending
    def _ended(self, lane: str, unit: Unit, rec: orch.Record) -> None:
        answer = runs.read_output(unit.folder)
        rep = read_report(answer) if not unit.status.get("fallback") else None
        duration = unit.status.get("duration_s")
        if rep is None and unit.state == "done":
            # it ended normally but did not report: stop the lane, say why
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
            posted = orch.post(
                self.project,
                lane,
                result,
                commit=commit,
                note=note,
                session=unit.session_id,
                adapter=unit.adapter.name,
                duration=float(duration) if isinstance(duration, (int, float)) else None,
                no_pick=self.deadline is not None and time.monotonic() >= self.deadline,
            )
        except WfError as e:
            self.stopped[lane] = f"post failed: {e}"
            self.emit(f"stop lane {lane}: post failed: {e}")
            return
        for line in posted.lines:
            self.emit(f"{lane}: {line}")
        nxt = posted.next
        if nxt is None:
            self.stopped[lane] = "--for time is up"
            self.emit(f"stop lane {lane}: --for time is up")
            return
        self._start(lane, nxt)

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

    def run(self, tick: Callable[[str], None] | None = None) -> int:
        procs.become_subreaper()
        interrupted = threading.Event()

        def handler(signum: int, frame: FrameType | None) -> None:
            interrupted.set()

        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for lane in self.lanes:
                if interrupted.is_set():
                    break
                self._pick(lane)
            last_tick = 0.0
            while not interrupted.is_set():
                now = time.monotonic()
                for lane, (unit, rec) in list(self.units.items()):
                    if unit.poll(now):
                        del self.units[lane]
                        self._ended(lane, unit, rec)
                procs.reap_orphans()
                if not self.units:
                    if not self.until_stop or orch.stop_file(self.project).exists():
                        break
                    if self.deadline is not None and now >= self.deadline:
                        break
                    time.sleep(2)  # --until-stop: look for new work now and then
                    self.stopped.clear()
                    for lane in self.lanes:
                        self._pick(lane)
                    continue
                if tick is not None and now - last_tick >= 1:
                    tick(self.status_line())
                    last_tick = now
                time.sleep(POLL)
            if interrupted.is_set():
                for lane, (unit, rec) in list(self.units.items()):
                    unit.stop("interrupted")
                    orch.save(self.project, rec._replace(pid=None))
                    self.emit(f"{lane}: stopped {rec.id}; its record stays for a later recovery")
                return 130
            return 0
        finally:
            for s, h in old.items():
                signal.signal(s, h)
