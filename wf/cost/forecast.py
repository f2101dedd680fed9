"""What tasks will likely cost and take, from the project's cost log (``out/wf-cost.log``).

History is read per task: the cost lines of one task id summed (its worker, a recovery,
a second night after a handback), kept with the lane, model and effort of its first line.
A task to forecast (a ``Want``) is matched against that history with the same (lane,
model, effort), else the same (model, effort), else the same model; the newest ``LAST``
matches give its median and its high figure (the 90th percentile, nearest rank; the
largest while fewer than 10 are known), for dollars and for seconds.

A task that matches nothing has no history (``Basis.NONE``): it is named, and its median
is not known. Where a budget needs a figure for it, ``budget_usd`` gives the high figure
of all the project's history (``Basis`` says so), never $0; with no history at all there
is no figure, and a budget refuses to start it.

A logged model matches a task's model when it is the same name, a dated variant of it
(``claude-sonnet-4-5`` for ``claude-sonnet-4-5-20250929``) or, for a one-word model such
as ``sonnet``, a logged name with that word in it (``claude-sonnet-4-5``): the cost log
keeps the model the transcript names, TASKS.md the name a person wrote.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.cost import costlog
from wf.cost.usage import CostSource

LAST = 20  # the newest matching tasks a forecast reads
FULL_P90 = 10  # below this many, the high figure is the largest


class Basis(enum.StrEnum):
    """Which history a task's forecast came from."""

    LANE = "lane+model+effort"
    EFFORT = "model+effort"
    MODEL = "model"
    ALL = "all history"  # no history of its own: a budget counts it at the high figure of all tasks
    NONE = "none"  # no history at all


KNOWN = (Basis.LANE, Basis.EFFORT, Basis.MODEL)


@dataclass(frozen=True)
class Want:
    """A task to forecast: its id, lane, model (as TASKS.md names it) and effort (as the
    cost log writes it: ``%g``, or None)."""

    id: str
    lane: str
    model: str
    effort: str | None


@dataclass(frozen=True)
class Sample:
    """One task of the history: its cost lines summed."""

    id: str
    lane: str
    model: str
    effort: str
    usd: float
    dur_s: float | None


@dataclass(frozen=True)
class Figures:
    n: int  # tasks the figures come from
    usd: float  # median
    usd_high: float
    dur_s: float | None
    dur_high: float | None


@dataclass(frozen=True)
class TaskForecast:
    id: str
    lane: str
    model: str
    effort: str | None
    basis: Basis
    figures: Figures | None  # None: no history at all

    @property
    def known(self) -> bool:
        return self.basis in KNOWN

    @property
    def usd(self) -> float | None:
        """Its median cost, None when it has no history of its own."""
        return self.figures.usd if self.known and self.figures else None

    def budget_usd(self) -> float | None:
        """What a budget counts for it: its median, else the high figure of all history,
        else None (nothing to go on: a budget refuses it)."""
        if self.figures is None:
            return None
        return self.figures.usd if self.known else self.figures.usd_high

    def as_dict(self) -> dict[str, Any]:
        f = self.figures
        return {
            "id": self.id,
            "lane": self.lane,
            "model": self.model,
            "effort": self.effort,
            "basis": self.basis.value,
            "history": f.n if f and self.known else 0,
            "usd": round(f.usd, 4) if f and self.known else None,
            "usd_high": round(f.usd_high, 4) if f and self.known else None,
            "dur_s": _r(f.dur_s) if f and self.known else None,
            "dur_high_s": _r(f.dur_high) if f and self.known else None,
            "budget_usd": None if self.budget_usd() is None else round(self.budget_usd() or 0.0, 4),
        }


@dataclass(frozen=True)
class Forecast:
    tasks: tuple[TaskForecast, ...]
    history: int  # tasks in the cost log's history

    @property
    def unknown(self) -> list[str]:
        return [t.id for t in self.tasks if not t.known]

    @property
    def usd(self) -> float:
        """The sum of the medians of the tasks with history."""
        return sum(t.usd or 0.0 for t in self.tasks)

    @property
    def usd_high(self) -> float:
        return sum(t.figures.usd_high for t in self.tasks if t.known and t.figures)

    @property
    def dur_s(self) -> float:
        return sum(t.figures.dur_s or 0.0 for t in self.tasks if t.known and t.figures)

    @property
    def dur_high(self) -> float:
        return sum(t.figures.dur_high or 0.0 for t in self.tasks if t.known and t.figures)

    def of(self, task_id: str) -> TaskForecast | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks": [t.as_dict() for t in self.tasks],
            "total": {
                "usd": round(self.usd, 4),
                "usd_high": round(self.usd_high, 4),
                "dur_s": _r(self.dur_s),
                "dur_high_s": _r(self.dur_high),
            },
            "no_history": self.unknown,
            "history_tasks": self.history,
        }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


# ------------------------------------------------------------------ history


def known_usd(rec: dict[str, str]) -> float | None:
    """The dollars of one cost line, or None when they are not known: no figure, or a
    line that leaves out unpriced models (its $ counts them as 0, a budget must not)."""
    if costlog.source_of(rec) is CostSource.unpriced:
        return None
    return costlog.num(rec.get("usd"))


def samples(recs: Iterable[dict[str, str]]) -> list[Sample]:
    """The cost lines grouped by task id (lines without an id are left out), in the order
    each task first appears; a task with a line whose cost is not known is left out
    (unknown, never $0)."""
    groups: dict[str, list[dict[str, str]]] = {}
    for r in recs:
        tid = r.get("id", "-")
        if tid in ("", "-"):
            continue
        groups.setdefault(tid, []).append(r)
    out: list[Sample] = []
    for tid, rs in groups.items():
        usd = [known_usd(r) for r in rs]
        if any(x is None for x in usd):
            continue
        durs = [costlog.num(r.get("dur_s")) for r in rs]
        dur = None if any(d is None for d in durs) else sum(d or 0.0 for d in durs)
        first = rs[0]
        out.append(
            Sample(
                tid,
                first.get("lane", "-"),
                first.get("model", "-"),
                first.get("effort", "-"),
                sum(x or 0.0 for x in usd),
                dur,
            )
        )
    return out


def history(root: Path) -> list[Sample]:
    """The project's own history; CorruptRecord if its cost log cannot be read."""
    from wf.base import records as store

    raw = store.read_bytes(root / "out" / "wf-cost.log", 1 << 30)
    return samples(costlog.parse_lines(raw)) if raw else []


def same_model(want: str, logged: str) -> bool:
    if logged == want or logged.startswith(want + "-"):
        return True
    return "-" not in want and want in logged.split("-")


def high(values: list[float]) -> float:
    """The 90th percentile (nearest rank), or the largest of fewer than FULL_P90."""
    s = sorted(values)
    if len(s) < FULL_P90:
        return s[-1]
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


def figures(found: list[Sample]) -> Figures:
    last = found[-LAST:]
    usd = [s.usd for s in last]
    durs = [s.dur_s for s in last if s.dur_s is not None]
    return Figures(
        len(last),
        statistics.median(usd),
        high(usd),
        statistics.median(durs) if durs else None,
        high(durs) if durs else None,
    )


def one(want: Want, hist: list[Sample]) -> TaskForecast:
    """The forecast of one task from ``hist`` (oldest first)."""
    tiers = (
        (Basis.LANE, lambda s: s.lane == want.lane and s.effort == (want.effort or "-")),
        (Basis.EFFORT, lambda s: s.effort == (want.effort or "-")),
        (Basis.MODEL, lambda s: True),
    )
    mine = [s for s in hist if same_model(want.model, s.model)]
    for basis, keep in tiers:
        found = [s for s in mine if keep(s)]
        if found:
            return TaskForecast(want.id, want.lane, want.model, want.effort, basis, figures(found))
    if hist:
        return TaskForecast(want.id, want.lane, want.model, want.effort, Basis.ALL, figures(hist))
    return TaskForecast(want.id, want.lane, want.model, want.effort, Basis.NONE, None)


def forecast(wants: Iterable[Want], hist: list[Sample]) -> Forecast:
    return Forecast(tuple(one(w, hist) for w in wants), len(hist))


# ------------------------------------------------------------------ what a run spent


def log_size(root: Path) -> int:
    try:
        return (root / "out" / "wf-cost.log").stat().st_size
    except OSError:
        return 0


def spent_since(root: Path, offset: int) -> dict[str, float | None]:
    """$ per task id of the cost lines written after byte ``offset`` (None: a line whose
    cost is not known)."""
    try:
        with open(root / "out" / "wf-cost.log", "rb") as f:
            f.seek(offset)
            raw = f.read()
    except OSError:
        return {}
    out: dict[str, float | None] = {}
    for rec in costlog.parse_lines(raw[: raw.rfind(b"\n") + 1]):
        tid = rec.get("id", "-")
        usd = known_usd(rec)
        before = out.get(tid, 0.0)
        out[tid] = None if usd is None or before is None else before + usd
    return out


# ------------------------------------------------------------------ words


def money(usd: float | None) -> str:
    return "unknown" if usd is None else f"${usd:.2f}"


def task_line(t: TaskForecast) -> str:
    from wf.base.quantity import fmt_duration

    f = t.figures
    if not t.known or f is None:
        counted = f" (a budget counts {money(t.budget_usd())}, the high figure of all history)" if f else ""
        return f"{t.id} ({t.lane}, {t.model}, effort {t.effort or '-'}): no history{counted}"
    dur = f", {fmt_duration(f.dur_s)} (high {fmt_duration(f.dur_high)})" if f.dur_s is not None else ""
    return (
        f"{t.id} ({t.lane}, {t.model}, effort {t.effort or '-'}): {money(f.usd)} (high {money(f.usd_high)})"
        f"{dur}, from {f.n} task(s) by {t.basis.value}"
    )


def lines(fc: Forecast) -> list[str]:
    """The forecast as a person reads it: a line per task, the total, the tasks without history."""
    from wf.base.quantity import fmt_duration

    if not fc.tasks:
        return ["forecast: no task to run"]
    out = [f"forecast (from {fc.history} task(s) of out/wf-cost.log):"]
    out += [f"  {task_line(t)}" for t in fc.tasks]
    known = len(fc.tasks) - len(fc.unknown)
    total = (
        f"  total: {money(fc.usd)} (high {money(fc.usd_high)}), "
        f"{fmt_duration(fc.dur_s)} of work (high {fmt_duration(fc.dur_high)}), "
        f"for {known} task(s) with history"
    )
    out.append(total)
    if fc.unknown:
        out.append(f"  no history: {', '.join(fc.unknown)} (not in the total)")
    return out
