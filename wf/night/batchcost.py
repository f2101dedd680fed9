"""What a night will likely cost: the forecast of the tasks a batch (or ``wf orch run``)
would run, the budget it runs under, the plan's usage windows; and the summary's
forecast against what the tasks then cost.

The tasks a batch would likely run are its lanes' runner-ready tasks in each lane's
order, taken from the lanes in turn (the loop runs its lanes side by side), at most N.
The forecast itself is ``wf.cost.forecast``; the gate that keeps a budget is
``wf.orch.budget``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from wf.base.errors import UsageError
from wf.base.project import Project
from wf.cost import forecast as fc

MAX_BUDGET = 1_000_000.0


def parse_budget(text: str, what: str = "--budget") -> float:
    """A budget in dollars (``5``, ``5.00``, ``$5.00``): a finite number > 0, at most
    MAX_BUDGET; UsageError otherwise."""
    raw = text.strip().removeprefix("$")
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not 0 < v <= MAX_BUDGET:  # nan and inf fail this too
        raise UsageError(f"{what} {text!r}: expected dollars, a number above 0 and at most {MAX_BUDGET:g}")
    return v


def next_tasks(project: Project, lanes: list[str], n: int | None) -> list[fc.Want]:
    """The tasks a run on ``lanes`` would likely start, at most ``n`` (None: all ready)."""
    from wf.orch.budget import want_of
    from wf.tasks import backlog

    bl = backlog.load(project)
    queues = [[want_of(project, t, lane) for t in bl.runner_ready(lane)] for lane in lanes]
    out: list[fc.Want] = []
    while any(queues) and (n is None or len(out) < n):
        for q in queues:
            if q and (n is None or len(out) < n):
                out.append(q.pop(0))
    return out


@dataclass(frozen=True)
class Outlook:
    """A run's forecast, budget and usage windows, as ``--dry-run`` shows them."""

    forecast: fc.Forecast
    budget: float | None
    used: dict[str, float]
    used_source: str | None
    reserve: float | None
    problem: str | None = None  # why the cost log could not be read (no budget: a forecast of none)
    windows_age: float | None = None  # how old the event of ``used`` is (seconds)
    windows_reset: tuple[str, ...] = ()  # windows that event named that have reset since

    def within(self) -> list[str]:
        """The tasks that would start under the budget, in order: the gate's own rule (a
        task whose figure would pass what is left stops its lane; the others go on)."""
        if self.budget is None:
            return [t.id for t in self.forecast.tasks]
        total, out, stopped = 0.0, [], set()
        for t in self.forecast.tasks:
            figure = t.budget_usd()
            if t.lane in stopped or figure is None or total + figure > self.budget:
                stopped.add(t.lane)
                continue
            total += figure
            out.append(t.id)
        return out

    def lines(self) -> list[str]:
        from wf.orch.budget import Windows

        out = fc.lines(self.forecast)
        if self.problem:
            out.append(f"  the history is left out: {self.problem}")
        if self.budget is not None:
            ok = self.within()
            out.append(
                f"budget: ${self.budget:.2f}: "
                + (
                    f"{len(ok)} of {len(self.forecast.tasks)} task(s) fit ({', '.join(ok) or 'none'})"
                    if self.forecast.tasks
                    else "no task to run"
                )
            )
        out += Windows(self.used, self.used_source, self.windows_age, self.windows_reset).lines(self.reserve)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "forecast": self.forecast.as_dict(),
            "budget": self.budget,
            "budget_starts": self.within() if self.budget is not None else None,
            "usage_windows": self.used,
            "usage_windows_age_s": None if self.windows_age is None else round(self.windows_age),
            "weekly_reserve": self.reserve,
            "problem": self.problem,
        }


def outlook(project: Project, lanes: list[str], n: int | None, budget: float | None) -> Outlook:
    from wf.base.records import CorruptRecord
    from wf.orch.budget import windows

    problem = None
    try:
        hist = fc.history(project.root)
    except CorruptRecord as e:
        if budget is not None:  # a budget cannot be kept without the log: refused, by name
            raise
        hist, problem = [], str(e)
    fcast = fc.forecast(next_tasks(project, lanes, n), hist)
    w = windows(project)
    reserve = project.config.weekly_reserve or None
    return Outlook(fcast, budget, w.used, w.source, reserve, problem, w.age_s, w.reset)


dry_run = outlook  # ``wf orch run --dry-run``


# ------------------------------------------------------------------ the summary


def header_lines(plan_forecast: dict[str, Any] | None, budget: float | None) -> list[str]:
    """The summary's lines of the forecast the batch started with."""
    if not plan_forecast:
        return []
    total = plan_forecast["total"]
    unknown = plan_forecast.get("no_history") or []
    out = [
        f"- forecast: ${total['usd']:.2f} (high ${total['usd_high']:.2f}) for "
        f"{len(plan_forecast['tasks']) - len(unknown)} task(s) with history"
        + (f"; no history: {', '.join(unknown)}" if unknown else "")
    ]
    if budget is not None:
        out.append(f"- budget: ${budget:.2f}")
    return out


def row_forecast(plan_forecast: dict[str, Any] | None, task_id: str) -> float | None:
    for t in (plan_forecast or {}).get("tasks", []):
        if t.get("id") == task_id:
            usd = t.get("usd")
            return float(usd) if isinstance(usd, (int, float)) else None
    return None


def footer_line(plan_forecast: dict[str, Any] | None, rows: list[tuple[str, float | None]]) -> str | None:
    """``forecast vs actual``: for the tasks the batch posted (id, actual $ or None),
    the sum of their forecasts against the sum of what they cost."""
    if plan_forecast is None:
        return None
    both = [(tid, row_forecast(plan_forecast, tid), usd) for tid, usd in rows]
    known = [(f, a) for _, f, a in both if f is not None and a is not None]
    if not known:
        return "forecast vs actual: no posted task has both a forecast and a cost"
    f_sum = sum(f for f, _ in known)
    a_sum = sum(a for _, a in known)
    off = f" ({(a_sum - f_sum) / f_sum:+.0%})" if f_sum > 0 else ""
    return f"forecast vs actual: forecast ${f_sum:.2f}, actual ${a_sum:.2f}{off} for {len(known)} task(s)"
