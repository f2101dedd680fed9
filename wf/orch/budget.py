"""A run's budget gate: before a task starts, what the run spent plus the task's forecast
must stay within ``--budget``, and the plan's weekly window must keep its reserve.

``Gate.admit`` is the one place that decides, called by the pick (``wf.orch.pick``)
after it chose a task and before it claims it; a batch's loop and each batch of the
pilot go through it (``wf orch run --budget``). What a run spent: for each task it
started, its cost lines written since the run began (``out/wf-cost.log``), or, while it
runs or when it left no line (a tool whose cost wf cannot read), the figure the gate
counted for it when it started: never $0. A task's figure is its forecast
(``wf.cost.forecast``): its median; with no history of its own, the high figure of all
history; with no history at all, none, and the task does not start under a budget.

The usage windows are the plan's own figures: the newest ``rate_limit_event`` a worker's
stream (``.wf/runs/*/*/worker.log``) carries, utilization per window (``five_hour``,
``seven_day``...). ``weekly_reserve`` (0..1) keeps that share of the weekly window for
the day: no task starts while ``seven_day`` is used above 1 - reserve. A window that has
reset since the event (its ``resetsAt`` is past; without one, the stream is older than
the window) is left out. Unknown (no such event: an API key, another tool) lets tasks
start, and says "unknown".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from wf.base.project import Project
from wf.cost import forecast as fc
from wf.orch.state import Stop, StopReason
from wf.tasks.taskfile import Task

WEEK = "seven_day"
STREAMS = 20  # the newest worker streams read for a rate_limit_event
TAIL = 1 << 18  # of each, the last bytes


def want_of(project: Project, task: Task, lane: str) -> fc.Want:
    """A task as the forecast reads it: its lane, its model (else the lane's), its effort."""
    ln = project.config.lane(lane)
    model = str(task.model or (ln.model if ln else lane))
    effort = f"{task.effort:g}" if task.effort is not None else None
    return fc.Want(task.id, lane, model, effort)


# how long each window lasts: an event older than its window, without a resetsAt, is stale
LENGTH = {"five_hour": 5 * 3600.0, "seven_day": 7 * 86400.0}


def window_length(name: str) -> float | None:
    """The length of a window by its name (``seven_day_opus`` is a week), None if unknown."""
    return next((v for k, v in LENGTH.items() if name == k or name.startswith(k + "_")), None)


@dataclass(frozen=True)
class Windows:
    """The newest utilization per window (0..1) that has not reset yet, the stream it was
    read from, and how old that event is (the stream's last write)."""

    used: dict[str, float]
    source: str | None = None
    age_s: float | None = None
    reset: tuple[str, ...] = ()  # windows the event named that have reset since (left out)

    def lines(self, reserve: float | None) -> list[str]:
        from wf.base.quantity import fmt_duration

        age = f", {fmt_duration(self.age_s)} old" if self.age_s is not None else ""
        gone = f"; reset since: {', '.join(self.reset)}" if self.reset else ""
        if self.used:
            shown = ", ".join(f"{w} {u:.0%}" for w, u in sorted(self.used.items()))
            out = [f"usage windows: {shown} (the newest rate_limit_event, {self.source}{age}){gone}"]
        elif self.source:
            out = [f"usage windows: unknown (the newest rate_limit_event, {self.source}{age}){gone}"]
        else:
            out = ["usage windows: unknown (no rate_limit_event in the workers' streams)"]
        if reserve:
            week = self.used.get(WEEK)
            state = "unknown" if week is None else "reached: no task starts" if week > 1 - reserve else "kept"
            out.append(f"weekly reserve: {reserve:.0%} of {WEEK}: {state}")
        return out


def windows(project: Project) -> Windows:
    """The newest ``rate_limit_event`` of the newest STREAMS workers' streams, without the
    windows that have reset since (its ``resetsAt`` is past; without one, the stream is
    older than the window)."""
    import time

    from wf.base import fsutil
    from wf.workers import runs

    logs: list[tuple[float, Path]] = []
    for p in runs.runs_dir(project).glob("*/*/worker.log"):
        try:
            logs.append((p.stat().st_mtime, p))
        except OSError:
            continue
    now = time.time()
    for mtime, path in sorted(logs, reverse=True)[:STREAMS]:
        try:
            text = fsutil.tail(path, TAIL).decode("utf-8", "replace")
        except OSError:
            continue
        for line in reversed(text.splitlines()):
            found = _event_windows(line)
            if found:
                age = max(0.0, now - mtime)
                used = {w: u for w, (u, at) in found.items() if not _reset(w, at, now, age)}
                gone = tuple(sorted(set(found) - set(used)))
                return Windows(used, str(path.relative_to(project.root)), age, gone)
    return Windows({})


def _reset(name: str, resets_at: float | None, now: float, age: float) -> bool:
    if resets_at is not None:
        return resets_at <= now
    length = window_length(name)
    return length is not None and age > length


def _event_windows(line: str) -> dict[str, tuple[float, float | None]]:
    """Per window of a rate_limit_event line: its utilization and its resetsAt (or None)."""
    if '"rate_limit_event"' not in line:
        return {}
    try:
        ev = json.loads(line)
    except ValueError:
        return {}
    is_event = isinstance(ev, dict) and ev.get("type") == "rate_limit_event"
    info = ev.get("rate_limit_info") if is_event else None
    if not isinstance(info, dict):
        return {}
    out: dict[str, tuple[float, float | None]] = {}
    wins = info.get("unifiedWindows")
    for name, w in (wins if isinstance(wins, dict) else {}).items():
        u = w.get("utilization") if isinstance(w, dict) else None
        if isinstance(name, str) and (f := _fraction(u)) is not None:
            out[name] = (f, _epoch(w.get("resetsAt")))
    kind, u = info.get("rateLimitType"), info.get("utilization")
    if isinstance(kind, str) and (f := _fraction(u)) is not None:
        out[kind] = (f, _epoch(info.get("resetsAt")))
    return out


def _epoch(v: object) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return float(v) if ok and isinstance(v, (int, float)) else None


def _fraction(v: object) -> float | None:
    """A utilization as a number (0..1.5: a window may be reported past full), or None."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1.5
    return float(v) if ok and isinstance(v, (int, float)) else None


class Gate:
    """What a run may still start: ``admit`` per task, before its claim."""

    def __init__(self, project: Project, budget: float | None, reserve: float | None) -> None:
        self.project = project
        self.budget = budget
        self.reserve = reserve or None
        self.offset = fc.log_size(project.root)
        self.hist = fc.history(project.root) if budget is not None else []
        self.counted: dict[str, float] = {}  # per task started: the figure counted for it

    @property
    def active(self) -> bool:
        return self.budget is not None or self.reserve is not None

    def spent(self) -> float | None:
        """The run's tasks: their cost lines since it began, else the figure counted; None
        when a task's line says its cost is not known (unpriced): never $0."""
        actual = fc.spent_since(self.project.root, self.offset)
        total = 0.0
        for tid, figure in self.counted.items():
            if tid in actual and actual[tid] is None:
                return None
            usd = actual.get(tid)
            total += usd if usd is not None else figure
        return total

    def admit(self, project: Project, task: Task, lane: str) -> StopReason | None:
        """Why ``task`` may not start now (Stop.RESERVE, Stop.BUDGET), or None: it may, and
        its figure is counted from now on."""
        if self.reserve is not None:
            week = windows(project).used.get(WEEK)
            if week is not None and week > 1 - self.reserve:
                return StopReason(
                    Stop.RESERVE,
                    f"weekly reserve {self.reserve:.0%}: {WEEK} is {week:.0%} used; {task.id} not started",
                )
        if self.budget is None:
            return None
        tf = fc.one(want_of(project, task, lane), self.hist)
        figure = tf.budget_usd()
        spent = self.spent()
        if spent is None:
            return StopReason(
                Stop.BUDGET,
                f"budget ${self.budget:.2f}: spent unknown (a task's cost line has no price), "
                f"{task.id} not started: a budget never counts an unknown cost as $0",
            )
        if figure is None:
            return StopReason(
                Stop.BUDGET,
                f"budget ${self.budget:.2f}: spent ${spent:.2f}, next task {task.id} has no forecast "
                "(no cost history at all): a budget never counts an unknown cost as $0",
            )
        if spent + figure > self.budget:
            how = "forecast" if tf.known else "no history, counted at the high figure of all history"
            return StopReason(
                Stop.BUDGET,
                f"budget ${self.budget:.2f}: spent ${spent:.2f}, next task {task.id} {how} ${figure:.2f}",
            )
        self.counted[task.id] = figure
        return None
