"""The cost log (``out/wf-cost.log``, one key=value line per worker) and the report over
every project's log.

Projects are remembered in the user's state folder (``$XDG_STATE_HOME/wf/projects``)
whenever wf writes a line, so ``wf usage --report`` can read them all.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from wf.base import fsutil
from wf.base.fsutil import append_line
from wf.base.homes import wf_state
from wf.cost.usage import Cost, CostSource

KEYS = (
    "ts", "project", "id", "agent", "kind", "lane", "model", "effort", "done", "turns", "dur_s",
    "in", "out", "est", "cw5m", "cw1h", "cr", "usd", "usd_rep", "models", "unpriced",
    "cost_source", "run", "unit", "check", "tool_usd",
)  # fmt: skip

# how a dollar figure is marked, after it, by where it came from (table: no mark)
MARKS = {CostSource.table: "", CostSource.tool: "*", CostSource.unpriced: "?"}
LEGENDS = {
    CostSource.tool: "* the tool's own figure (a model wf's price table lacks, or opencode's own cost)",
    CostSource.unpriced: "? leaves out unpriced model(s), counted as $0 (add to ~/.config/wf/prices.toml)",
}
_RANK = (CostSource.table, CostSource.tool, CostSource.unpriced)


def source_of(rec: Mapping[str, Any]) -> CostSource:
    """Where a cost record's dollars came from (a line written before ``cost_source=``
    existed: unpriced if it names unpriced models, else the table)."""
    try:
        return CostSource(str(rec.get("cost_source")))
    except ValueError:
        return CostSource.unpriced if rec.get("unpriced") not in (None, "", "-") else CostSource.table


def worst(sources: Iterable[CostSource]) -> CostSource:
    """The source of a sum: unpriced if any part is, else the tool's if any part is."""
    return max(sources, key=_RANK.index, default=CostSource.table)


def money(usd: float, source: CostSource, *, est: bool = False, digits: int = 4) -> str:
    """A dollar figure as a person reads it: ``~`` before it when it includes estimated
    output, ``*`` after it for the tool's own figure, ``?`` when unpriced models are left out."""
    return f"{'~' if est else ''}${usd:.{digits}f}{MARKS[source]}"


def legends(sources: Iterable[CostSource], est: bool = False) -> list[str]:
    """What the marks used mean, one line each."""
    used = set(sources)
    out = [LEGENDS[s] for s in (CostSource.tool, CostSource.unpriced) if s in used]
    return (["~ includes estimated output (a lower bound where thinking is hidden)"] if est else []) + out


def _clean(value: Any) -> str:
    text = str(value).strip()
    return "".join(c if c.isprintable() and not c.isspace() and c != "=" else "_" for c in text) or "-"


def model_mark(cost: Cost, model: str) -> str:
    """The mark of one model's dollars within ``cost``."""
    if model in cost.unpriced:
        return MARKS[CostSource.unpriced]
    if model in cost.tool_priced or cost.tool_figure:
        return MARKS[CostSource.tool]
    return ""


def price_warnings(cost: Cost) -> list[str]:
    """What a person should know about the prices of ``cost``: unpriced models (and the
    row a prefix would have wrongly used), models priced by the tool's own figure."""
    from wf.cost import prices

    out = []
    for m in cost.unpriced:
        near = prices.near(m)
        why = f" (not priced as {near}: a row prices its exact model or a dated variant)" if near else ""
        out.append(f"unpriced model {m}{why}: counted as $0; add it to ~/.config/wf/prices.toml")
    if cost.tool_priced:
        out.append(
            f"model(s) {', '.join(cost.tool_priced)} not in wf's price table: "
            "their cost is the tool's own figure (*)"
        )
    return out


def line_for(
    cost: Cost,
    *,
    ts: str,
    project: str,
    task_id: str | None = None,
    agent: str | None = None,
    kind: str | None = None,
    lane: str | None = None,
    effort: str | None = None,
    done: bool | None = None,
    duration: float | None = None,
) -> dict[str, Any]:
    """The one cost record of a worker: what ``wf usage --log`` writes, what a headless
    run records, and what the orchestration loop's post will write."""
    rec: dict[str, Any] = {
        "ts": ts,
        "project": project,
        "id": task_id or "-",
        "agent": agent or "-",
        "kind": kind or cost.kind,
        "lane": lane or "-",
        "model": cost.model or "-",
        "effort": effort or "-",
        "done": "-" if done is None else int(done),
        "turns": cost.turns,
        "dur_s": round(duration if duration is not None else (cost.dur_s or 0)),
        "in": cost.inp,
        "out": cost.out,
        "est": cost.est,
        "cw5m": cost.cw5m,
        "cw1h": cost.cw1h,
        "cr": cost.cr,
        "usd": round(cost.usd, 4),
        "usd_rep": round(cost.usd_rep, 4),
    }
    if cost.unpriced:
        rec["unpriced"] = ",".join(cost.unpriced)
    rec["cost_source"] = cost.source.value
    if len(cost.by_model) > 1:  # a session whose subagents ran on other models: $ per model
        rec["models"] = ",".join(f"{_clean(m).replace(',', '_')}:{usd:.4f}" for m, _, usd, _ in cost.by_model)
    return rec


def models_of(rec: dict[str, str]) -> dict[str, float]:
    """$ per model of one log line: its ``models=`` breakdown, else all of it on ``model``."""
    out: dict[str, float] = {}
    for part in (rec.get("models") or "").split(","):
        model, sep, usd = part.rpartition(":")
        value = _num(usd)
        if sep and model and value is not None:
            out[model] = out.get(model, 0.0) + value
    whole = _num(rec.get("usd"))
    if not out and whole is not None:  # an unknown cost is no model's $0
        out[rec.get("model", "-")] = whole
    return out


def format_line(rec: dict[str, Any]) -> str:
    return " ".join(f"{k}={_clean(rec[k])}" for k in KEYS if k in rec)


def append(root: Path, rec: dict[str, Any]) -> Path:
    path = root / "out" / "wf-cost.log"
    append_line(path, format_line(rec))
    remember(root)
    return path


def has_line(root: Path, task_id: str, agent: str) -> bool:
    """Whether the project's cost log already has the line of this task's worker ``agent``
    (a post that was stopped after writing it, then run again). The log's last MiB is read:
    a post that is run again follows the one that wrote it. CorruptRecord if it cannot be
    read (a folder): the post stops there and, run again after the log is fixed, writes
    nothing twice."""
    path = root / "out" / "wf-cost.log"
    try:
        # a FIFO here blocks (tests use it to stop a post here)
        tail = fsutil.tail(path, 1 << 20).decode("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        from wf.base.records import CorruptRecord

        raise CorruptRecord(path, f"cannot read it: {e.strerror or e}") from None
    want = {"id": _clean(task_id), "agent": _clean(agent)}
    for line in tail.splitlines():
        rec = parse_line(line)
        if rec is not None and all(rec.get(k) == v for k, v in want.items()):
            return True
    return False


def remember(root: Path) -> None:
    """Add the project to the list ``wf usage --report`` reads. Never raises: the list is
    an index, and a fault in it (reported by the report and by ``wf doctor``) must not
    stop the write of a cost line, nor a post that makes one."""
    from wf.base import records as store

    try:
        if str(root) not in known_projects():
            append_line(projects_file(), str(root))
    except (store.CorruptRecord, OSError):
        pass


def state_problem() -> str | None:
    """Why wf's state folder (``$XDG_STATE_HOME/wf``, or ``~/.local/state/wf``) cannot be
    written, or None. Cost lines still go to the project's own log; only the list of
    projects that ``wf usage --report`` reads across projects misses this one."""
    folder = wf_state()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"wf's state folder {folder} cannot be made: {e.strerror or e} (see $XDG_STATE_HOME, $HOME)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"wf's state folder {folder} cannot be written (see $XDG_STATE_HOME, $HOME)"
    return None


def projects_file() -> Path:
    return wf_state() / "projects"


def known_projects() -> list[str]:
    """The projects whose cost logs the report reads; CorruptRecord if the list cannot be
    trusted (not a file, not UTF-8, a NUL, a line that is not an absolute path)."""
    from wf.base import records as store

    path = projects_file()
    seen: list[str] = []
    for n, line in enumerate(store.read_lines(path) or [], 1):
        p = line.strip()
        if not p:
            continue
        if not os.path.isabs(p):
            raise store.CorruptRecord(path, f"line {n} is not a project's path: {p[:80]!r}")
        if p not in seen:
            seen.append(p)
    return seen


def _decoded(raw: bytes) -> list[str | None]:
    """The log's lines, None for one that is not UTF-8 (counted, never guessed at)."""
    out: list[str | None] = []
    for b in raw.split(b"\n"):
        if not b.strip():
            continue
        try:
            out.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(None)
    return out


def parse_lines(raw: bytes) -> list[dict[str, str]]:
    """The cost lines of a log's bytes that can be read (``line_faults`` counts the rest)."""
    return [rec for t in _decoded(raw) if t is not None and (rec := parse_line(t)) is not None]


def line_faults(raw: bytes) -> tuple[int, int]:
    """Of a cost log's bytes: lines that cannot be read, and lines whose cost is not a
    finite number >= 0 (unknown, never $0)."""
    bad = unknown = 0
    for t in _decoded(raw):
        rec = parse_line(t) if t is not None else None
        if rec is None:
            bad += 1
        elif _num(rec.get("usd")) is None:
            unknown += 1
    return bad, unknown


def parse_line(text: str) -> dict[str, str] | None:
    rec: dict[str, str] = {}
    for part in text.split():
        k, sep, v = part.partition("=")
        if not sep:
            return None
        rec[k] = v
    return rec if "usd" in rec else None


def _num(v: str | None) -> float | None:
    """A finite, non-negative number, or None: not known (never $0, never nan or inf)."""
    try:
        x = float(v) if v not in (None, "-") else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) and x >= 0 else None


num = _num  # a log value as a number, None when it is none


SINCE_FORMS = "YYYY-MM-DD, today, yesterday, or Nd (N days ago, e.g. 7d)"


def since_date(text: str, now: float | None = None) -> str:
    """The first day ``--since`` means, as YYYY-MM-DD (UTC); ValueError if it is none of
    SINCE_FORMS."""
    import datetime as dt
    import re
    import time

    t = text.strip().lower()
    today = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.UTC).date()
    m = re.fullmatch(r"(\d{1,5})d", t)
    if t in ("today", "yesterday") or m:
        days = 0 if t == "today" else 1 if t == "yesterday" else int(m.group(1) if m else 0)
        return (today - dt.timedelta(days=days)).isoformat()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t):
        try:
            return dt.date.fromisoformat(t).isoformat()
        except ValueError:
            pass
    raise ValueError(f"{text!r} is not a date: use {SINCE_FORMS}")


def records(since: str | None = None, project: str | None = None) -> tuple[list[dict[str, str]], list[str]]:
    """Every cost line of every known project (newer than ``since``); and what could not
    be read, one sentence per file naming it (CorruptRecord if the projects list itself
    cannot be trusted: every log would be missing from the report)."""
    from wf.base import records as store

    out: list[dict[str, str]] = []
    problems: list[str] = []
    for root in known_projects():
        path = Path(root) / "out" / "wf-cost.log"
        try:
            raw = store.read_bytes(path, 1 << 30)
        except store.CorruptRecord as e:
            if not Path(root).is_dir():
                continue  # a project that is gone: nothing to count there
            problems.append(f"{path}: {e.why}; its costs are left out")
            continue
        if raw is None:
            continue
        bad, unknown = line_faults(raw)
        for rec in parse_lines(raw):
            if since and rec.get("ts", "") < since:
                continue
            if project and project not in (rec.get("project"), root, Path(root).name):
                continue
            out.append(rec)
        if bad:
            problems.append(f"{path}: {bad} unreadable line(s) skipped; their costs are not known")
        if unknown:
            problems.append(f"{path}: {unknown} line(s) whose usd= is not a finite number: costs unknown")
    return out, problems


GROUPINGS: dict[str, tuple[str, ...]] = {
    "lane": ("lane", "model", "effort"),
    "model": ("model",),
    "run": ("run",),
}


def report(recs: list[dict[str, str]], by: str = "lane") -> list[dict[str, Any]]:
    """Rows grouped ``by`` lane (with model and effort), model, or run (fan-out units;
    other lines under run "-")."""
    fields = GROUPINGS[by]
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in recs:
        key = tuple(r.get(f, "-") for f in fields)
        groups.setdefault(key, []).append(r)
    rows: list[dict[str, Any]] = []
    for key, rs in sorted(groups.items()):
        usd = [x for x in (_num(r.get("usd")) for r in rs) if x is not None]
        unknown = len(rs) - len(usd)  # a cost that cannot be read is not known: never $0
        turns = [x for x in (_num(r.get("turns")) for r in rs) if x is not None]
        durs = [x for x in (_num(r.get("dur_s")) for r in rs) if x is not None]
        done = sum(1 for r in rs if r.get("done") == "1")
        total = sum(usd)
        by_model: dict[str, float] = {}
        for r in rs:
            for m, v in models_of(r).items():
                by_model[m] = by_model.get(m, 0.0) + v
        rows.append(
            {
                **dict(zip(fields, key, strict=True)),
                "n": len(rs),
                "done": done,
                "median_usd": round(statistics.median(usd), 4) if usd else None,
                "total_usd": None if unknown else round(total, 4),
                "usd_per_done": round(total / done, 4) if done and not unknown else None,
                "median_turns": statistics.median(turns) if turns else None,
                "median_dur_s": statistics.median(durs) if durs else None,
                "estimated": any((_num(r.get("est")) or 0) > 0 for r in rs),
                "unpriced": sorted({r["unpriced"] for r in rs if r.get("unpriced")}),
                "cost_source": worst(source_of(r) for r in rs).value,
            }
        )
        if len(by_model) > 1:  # subagents on other models: $ per model, largest first
            rows[-1]["models"] = {m: round(v, 4) for m, v in sorted(by_model.items(), key=lambda x: -x[1])}
        if unknown:  # only then, like cost_check_differs
            rows[-1]["unknown_usd"] = unknown
        differs = sum(1 for r in rs if r.get("check") == "differs")
        if differs:  # only then: the rows keep their shape for every other log
            rows[-1]["cost_check_differs"] = differs
    return rows


def disagreements(recs: list[dict[str, str]]) -> list[str]:
    """Lines whose tool-reported cost and transcript cost disagree (cost_check)."""
    out = []
    for r in recs:
        if r.get("check") != "differs":
            continue
        where = (
            f"run {r.get('run', '-')} unit {r.get('unit', '-')}" if r.get("run") else f"id {r.get('id', '-')}"
        )
        out.append(
            f"cost_check differs: {where} ({r.get('model', '-')}): the tool reported "
            f"${r.get('tool_usd', '?')}, the transcript gives ${r.get('usd_rep', '?')}"
        )
    return out


def report_text(rows: list[dict[str, Any]], by: str = "lane") -> list[str]:
    from wf.base.text import table as aligned

    if not rows:
        return []
    fields = GROUPINGS[by]

    def cell(v: float | None, r: dict[str, Any], unknown: int = 0) -> str:
        if unknown:  # a cost that is not known: the sum is not known either, never $0 or nan
            return "unknown"
        if v is None:
            return "-"
        return money(v, CostSource(r["cost_source"]), est=r["estimated"], digits=2).replace("$", "", 1)

    table = [[*fields, "n", "done", "median $", "total $", "$/done", "turns", "dur"]]
    for r in rows:
        table.append(
            [
                *(str(r[f]) for f in fields),
                str(r["n"]),
                str(r["done"]),
                cell(r["median_usd"], r),
                cell(r["total_usd"], r, r.get("unknown_usd", 0)),
                cell(r["usd_per_done"], r, r.get("unknown_usd", 0) if r["done"] else 0),
                "-" if r["median_turns"] is None else f"{r['median_turns']:g}",
                "-" if r["median_dur_s"] is None else f"{r['median_dur_s']:g}s",
            ]
        )
    lines = aligned(table)
    lines += legends((CostSource(r["cost_source"]) for r in rows), any(r["estimated"] for r in rows))
    for r in rows:
        if len(r.get("models") or ()) > 1:
            source = CostSource(r["cost_source"])
            parts = ", ".join(
                f"{m} {money(v, source, est=r['estimated'], digits=2).replace('$', '', 1)}"
                for m, v in r["models"].items()
            )
            key = " ".join(str(r[f]) for f in fields)  # the row's own grouping: lane, model or run
            lines.append(f"{key}: $ by model: {parts}")
    unknown = sum(r.get("unknown_usd", 0) for r in rows)
    if unknown:
        lines.append(f"{unknown} line(s) with a cost that is not a finite number: their totals are unknown")
    unpriced = sorted({m for r in rows for m in r["unpriced"]})
    if unpriced:
        lines.append(f"unpriced (counted as $0): {', '.join(unpriced)}")
    return lines
