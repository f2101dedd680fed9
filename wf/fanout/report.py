"""The words a person reads about units: one line per unit (state, the failure in the
tool's or the system's own words, time, activity, FALLBACK, cost), and run totals.
Made from status.json at the edge; nothing branches on these strings."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.base.errors import WfError
from wf.base.stamps import parse_utc
from wf.fanout import ledger
from wf.fanout.contract import Invalid
from wf.workers import runs

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.cost.usage import CostSource
    from wf.fanout.watch import Watch

GROWING_S = 3.0  # a log that changed this recently counts as growing


def _one_line(text: str, width: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def describe(st: dict[str, Any]) -> str:
    """``state``, its failure class and the tool's or the system's words, in the
    adapters' wording (``failed auth: Not logged in · Please run /login``), then the exit
    code of a worker that failed: never a bare exit code, never None. Whether a done
    unit's answer keeps the return contract is :func:`invalid_mark`, shown beside it."""
    from wf import adapters

    base = adapters.describe(st)
    state = str(st.get("state") or "unknown")
    bits: list[str] = []
    code = st.get("exit_code")
    if isinstance(code, int) and code != 0 and state != "done":
        said = f"exit {code}" if code > 0 else f"ended by signal {-code}"
        if said not in base:
            bits.append(said)
    words = ": " in base
    if not words and not bits:
        if state == "stalled" and st.get("stall_s"):
            bits.append(f"no model event for {st['stall_s']:g}s")
        elif state == "timeout" and st.get("timeout_s"):
            bits.append(f"ran past its {st['timeout_s']:g}s timeout")
        elif state == "failed":
            bits.append("ended without an answer")
    if not bits:
        return base
    return f"{base}, {', '.join(bits)}" if words else f"{base}: {', '.join(bits)}"


_BREACH = {
    Invalid.NO_ANSWER: "no answer (no output.txt)",
    Invalid.FALLBACK: "no answer of its own, only a FALLBACK salvage of its log",
    Invalid.EMPTY: "an empty answer",
}


def breach(st: dict[str, Any]) -> str:
    """How a unit's answer breaks the contract, in words."""
    rec = st.get("result")
    why = rec.get("why") if isinstance(rec, dict) else None
    words = next((w for k, w in _BREACH.items() if k.value == why), None)
    return words or ledger.reason(st)


def invalid_mark(st: dict[str, Any]) -> str | None:
    """``invalid: <how>`` for a done unit whose answer breaks the return contract
    (``invalid: missing sections: Verification``), else None."""
    return f"{ledger.INVALID}: {breach(st)}" if ledger.invalid(st) else None


def entry_reason(e: ledger.Entry) -> str:
    """Why a unit is on the ledger's list, in words."""
    if e.status is None:
        return e.need.value
    return invalid_mark(e.status) or describe(e.status)


def entry_line(e: ledger.Entry) -> str:
    """A unit on the ledger's list, as ``wf gather`` ends with it."""
    return f"{e.unit}: {entry_reason(e)}"


def entry_json(e: ledger.Entry) -> dict[str, Any]:
    why = e.why.value if e.why else None
    return {"unit": e.unit, "need": e.need.value, "why": why, "reason": entry_reason(e)}


def attention_lines(run: str, entries: list[ledger.Entry], command: str) -> list[str]:
    """The end of ``wf gather`` (and ``wf monitor``): every unit whose result is missing
    or invalid, by name, and the command that re-runs exactly them."""
    if not entries:
        return []
    n = len(entries)
    head = f"{command} {run}: {n} unit{'s' if n > 1 else ''} without a valid result:"
    return [head, *(f"  {entry_line(e)}" for e in entries), f"  (wf runs retry {run} --invalid re-runs them)"]


def elapsed(st: dict[str, Any], now: float | None = None) -> float | None:
    """Seconds the unit ran (or has been running)."""
    dur = st.get("duration_s")
    if isinstance(dur, (int, float)):
        return float(dur)
    started = parse_utc(str(st.get("started")))
    if started is None or st.get("state") not in runs.LIVE:
        return None
    return max(0.0, (now or time.time()) - started)


def quiet_for(folder: Path, now: float | None = None) -> float | None:
    """Seconds since the unit's worker.log or worker.err last changed."""
    mtimes = []
    for name in ("worker.log", "worker.err"):
        try:
            mtimes.append((folder / name).stat().st_mtime)
        except OSError:
            pass
    if not mtimes:
        return None
    return max(0.0, (now or time.time()) - max(mtimes))


def activity(folder: Path, now: float | None = None) -> str:
    """``growing`` or ``quiet Ns`` for a running unit."""
    q = quiet_for(folder, now)
    if q is None:
        return "quiet"
    return "growing" if q < GROWING_S else f"quiet {q:.0f}s"


def usd(st: dict[str, Any]) -> float | None:
    cost = st.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("usd"), (int, float)):
        return float(cost["usd"])
    return None


def _marked(statuses: list[dict[str, Any]]) -> tuple[CostSource, bool]:
    """Where the units' dollars came from (the worst of them) and whether any is estimated."""
    from wf.cost import costlog

    costs = [st["cost"] for st in statuses if usd(st) is not None]
    est = any(isinstance(c.get("est"), (int, float)) and c["est"] > 0 for c in costs)
    return costlog.worst(costlog.source_of(c) for c in costs), est


def money(statuses: list[dict[str, Any]]) -> str | None:
    """The units' dollars, marked when a part is the tool's own figure, unpriced or
    estimated; None when no unit has a cost."""
    from wf.cost import costlog

    costs = [x for x in (usd(st) for st in statuses) if x is not None]
    if not costs:
        return None
    source, est = _marked(statuses)
    return costlog.money(sum(costs), source, est=est)


def legend(statuses: list[dict[str, Any]]) -> list[str]:
    """What the marks of these units' dollars mean."""
    from wf.cost import costlog

    source, est = _marked(statuses)
    return costlog.legends([source], est)


def unit_line(st: dict[str, Any], folder: Path | None = None, now: float | None = None) -> str:
    parts = [f"{st.get('unit')}: {describe(st)}"]
    secs = elapsed(st, now)
    if secs is not None:
        parts.append(f"{secs:.1f}s")
    if st.get("state") in runs.LIVE and folder is not None:
        parts.append(activity(folder, now))
    if st.get("state") in runs.LIVE and st.get("timeout_s") == 0:
        parts.append("no timeout")
    if st.get("fallback"):
        parts.append("FALLBACK")
    mark = invalid_mark(st)
    if mark:
        parts.append(mark)
    cost = money([st])
    if cost is not None:
        parts.append(cost)
    if st.get("retry_of"):
        parts.append(f"(retry {st.get('retry')} of {st['retry_of']})")
    changed = st.get("left_changes")
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        parts.append(f"LEFT CHANGES in {st.get('checkout')}: {shown}")
    return " ".join(parts)


def counts(statuses: list[dict[str, Any]]) -> dict[str, int]:
    out = {"running": 0, "done": 0, "failed": 0, "queued": 0, "invalid": 0}
    for st in statuses:
        state = st.get("state")
        if state == "running":
            out["running"] += 1
        elif state == "queued":
            out["queued"] += 1
        elif state == "done":
            out["done"] += 1
            out["invalid"] += ledger.invalid(st)  # done, and its answer breaks the contract
        else:
            out["failed"] += 1
    return out


def progress_text(statuses: list[dict[str, Any]], folders: dict[str, Path], started: float) -> str:
    """The live status line: running, done, failed, elapsed, the quietest running unit."""
    c = counts(statuses)
    text = f"{c['running']} running, {c['done']} done, {c['failed']} failed"
    if c["invalid"]:
        text += f", {c['invalid']} invalid"
    if c["queued"]:
        text += f", {c['queued']} queued"
    text += f", {time.monotonic() - started:.0f}s"
    quietest: tuple[float, str] | None = None
    for st in statuses:
        folder = folders.get(str(st.get("unit")))
        if st.get("state") != "running" or folder is None:
            continue
        q = quiet_for(folder)
        if q is not None and (quietest is None or q > quietest[0]):
            quietest = (q, str(st.get("unit")))
    if quietest is not None:
        text += f"; quietest {quietest[1]} ({quietest[0]:.0f}s)"
    return text


def total_line(run: str, statuses: list[dict[str, Any]]) -> str:
    """The run's units counted by their latest attempt (an attempt a retry replaced is
    not counted again); the cost of every attempt."""
    from wf.fanout.watch import superseded

    old = superseded(statuses)
    latest = [st for st in statuses if str(st.get("unit")) not in old]
    c = counts(latest)
    cost = money(statuses)
    line = f"run {run}: {c['done']}/{len(latest)} done"
    if c["invalid"]:
        line += f", {c['invalid']} invalid"
    if c["failed"]:
        line += f", {c['failed']} not"
    if c["running"] or c["queued"]:
        line += f", {c['running'] + c['queued']} running"
    if old:
        line += f" ({len(old)} earlier attempt{'s' if len(old) > 1 else ''} replaced by retries)"
    if cost is not None:
        line += f", {cost} in all"
    return line


# ---------------------------------------------------------------- what the run commands show


@dataclass(frozen=True)
class RunSummary:
    """One run of ``wf runs``: how many units, how many in each state, and (last, as
    ``invalid``) how many of the done ones have an answer that breaks the contract."""

    run: str
    units: int
    states: dict[str, int]  # state -> units, in the order of the states' names

    def as_json(self) -> dict[str, Any]:
        return {"run": self.run, "units": self.units, "states": self.states}

    def line(self) -> str:
        summary = " ".join(f"{k}={v}" for k, v in self.states.items())
        return f"{self.run}  {self.units} units  {summary}"


def recent_runs(project: Project, count: int) -> list[RunSummary]:
    """The ``count`` newest runs, newest first."""
    out = []
    for name, _mtime in runs.all_runs(project)[:count]:
        units = ledger.annotate(project, name, runs.units(project, name))
        states: dict[str, int] = {}
        for u in units:
            states[str(u.get("state"))] = states.get(str(u.get("state")), 0) + 1
        states = dict(sorted(states.items()))
        invalid = sum(ledger.invalid(u) for u in units)
        if invalid:  # the done units whose answer breaks the contract, after the states
            states[ledger.INVALID] = invalid
        out.append(RunSummary(name, len(units), states))
    return out


def unit_lines(project: Project, run: str, statuses: list[dict[str, Any]]) -> list[str]:
    """Each unit's line, a running one with its activity (``wf monitor``)."""
    return [unit_line(st, runs.unit_dir(project, run, str(st["unit"]))) for st in statuses]


def status_lines(project: Project, run: str, statuses: list[dict[str, Any]]) -> list[str]:
    """Each unit's line with a preview of its answer (``wf runs status``)."""
    out = []
    for st in statuses:
        folder = runs.unit_dir(project, run, str(st["unit"]))
        answer = runs.read_output(folder)
        out.append(f"{unit_line(st, folder)}  {runs.preview(answer) if answer else ''}".rstrip())
    return out


def unit_file(project: Project, run: str, unit: str, *, log: bool = False) -> str:
    """A unit's answer (output.txt), or with ``log`` its raw stream (worker.log)."""
    folder = runs.unit_dir(project, run, unit)
    if runs.read_status(folder) is None:
        raise WfError(f"no unit {unit} in run {run}")
    name = "worker.log" if log else "output.txt"
    try:
        return (folder / name).read_text("utf-8", errors="replace")
    except OSError:
        raise WfError(f"unit {unit} has no {name} yet") from None


def watching(project: Project, run: str, watched: list[str] | None) -> str:
    """What a monitor watches, for its first line (None: every unit of the run)."""
    if watched is None:
        from wf.fanout.watch import every_unit

        names = every_unit(project, run)
        return f"every unit ({', '.join(names) if names else 'none yet'})"
    return ", ".join(watched) if watched else "nothing (no unit is running)"


def monitor_json(run: str, result: Watch) -> dict[str, Any]:
    """What ``wf monitor --json`` prints."""
    return {
        "run": run,
        "code": result.code,
        "watching": result.watched,
        "lost": result.lost,
        "units": result.units,
        "attention": [entry_json(e) for e in result.attention],
    }


def outputs(project: Project, run: str, statuses: list[dict[str, Any]]) -> dict[str, str]:
    """Each unit's answer, by unit."""
    return {
        str(st["unit"]): runs.read_output(runs.unit_dir(project, run, str(st["unit"]))) for st in statuses
    }


def gather_json(run: str, result: Watch, answers: dict[str, str]) -> dict[str, Any]:
    """What ``wf gather --json`` prints: each unit's status with its answer."""
    units = [{**st, "output": answers[str(st["unit"])]} for st in result.units]
    attention = [entry_json(e) for e in result.attention]
    return {"run": run, "code": result.code, "lost": result.lost, "units": units, "attention": attention}


def landed_line(st: dict[str, Any]) -> str:
    """What ``wf gather`` prints as a unit lands."""
    marks = [m for m in ("FALLBACK" if st.get("fallback") else None, invalid_mark(st)) if m]
    return " ".join([f"DONE {st['unit']} {describe(st)}", *marks])


def answer_header(st: dict[str, Any]) -> str:
    """The line above a unit's answer in ``wf gather``."""
    marks = [m for m in ("FALLBACK" if st.get("fallback") else None, invalid_mark(st)) if m]
    return f"== {st['unit']} ({', '.join([describe(st), *marks])})"
