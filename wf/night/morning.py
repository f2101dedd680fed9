"""A batch's morning page: ``out/wf-batch-<stamp>.html``, next to its markdown summary.

One self-contained HTML file (its CSS inline; no script, font or image from anywhere,
a viewport for a phone), made from what the summary is made from: the batch's typed
task rows (``.wf/batch/<stamp>.tasks.jsonl``), its loop's stop events, the tasks that
wait for a person, and the titles in TASKS.md and the archive. Its parts: what merged
(with the commit), what waits for whom and why, cost per task and per lane as bars,
forecast against actual (from the rows' ``forecast_usd`` when a row has one), the usage
windows the lanes parked for, and every task of the summary. Every string that comes
from a person or a tool (a title, a note, a reason) is escaped; the page is written
atomically each time the summary gets a line (``wf.night.batchlog.Follower``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.base import records as store
from wf.base.errors import WfError
from wf.base.fsutil import append_line, atomic_write_text
from wf.base.project import Project
from wf.base.quantity import fmt_duration
from wf.orch.events import EventKind, StopEvent

if TYPE_CHECKING:
    from wf.night.batchplan import Record

FORECAST_KEYS = ("forecast_usd", "forecast")  # a row's forecast, as the forecast writes it
WHOM = {  # why a task waits -> who it waits for
    "awaiting": "a person: the answer to its question",
    "handback": "a person: the task changed, then set pending",
    "blocked": "a person: what blocks it removed",
    "wip": "a person: the work in progress finished",
}
DONE = ("done", "done-gate-red")  # outcomes that archived the task (wf.orch.state.Outcome.done)

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:56rem;padding:.8rem;color:#1b1b1b}
h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:1.6rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%}td,th{padding:.25rem .4rem;text-align:left;
border-bottom:1px solid #eee;vertical-align:top}code{font-size:.9em}
.bar{background:#4a7fc1;height:.9rem;min-width:1px}.bars td:first-child{width:38%}
.none{color:#777}.wrap{overflow-x:auto}
@media (prefers-color-scheme:dark){body{background:#151515;color:#e4e4e4}td,th{border-color:#333}}
"""


@dataclass(frozen=True)
class Night:
    """What the page shows of one batch."""

    stamp: str
    started: str
    lanes: tuple[str, ...]
    ended: str | None  # why it ended; None: it still runs
    rows: tuple[dict[str, Any], ...]  # the task rows as written (a forecast rides along by key)
    events: tuple[StopEvent, ...]
    waiting: tuple[dict[str, Any], ...] | None  # None: TASKS.md could not be read just now
    titles: dict[str, str] = field(default_factory=dict)


def page_path(project: Project, summary: str) -> Path:
    """The page next to the summary ``out/wf-batch-<stamp>.md``."""
    return (project.root / summary).with_suffix(".html")


def read_rows(path: Path) -> tuple[dict[str, Any], ...]:
    """The rows file's objects (a line that is not one is left out: the summary says so)."""
    out = []
    for line in store.read_lines(path) or []:
        try:
            data = json.loads(line, parse_constant=store.no_constant)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            out.append(data)
    return tuple(out)


def titles(project: Project) -> dict[str, str]:
    """Every task's title, open or archived ({} when TASKS.md cannot be read just now)."""
    from wf.tasks import backlog

    try:
        bl = backlog.load(project)
    except WfError:
        return {}
    found = {e.id: e.title for e in bl.archive.entries}
    found.update({t.id: t.title for t in bl.doc.tasks})
    return found


def write(project: Project, rec: Record, night: Night) -> Path:
    path = page_path(project, rec.summary)
    atomic_write_text(path, render(night))
    return path


def tell_ended(project: Project, stamp: str) -> None:
    """The ``batch_ended`` notice of batch ``stamp`` (wf.toml ``notify``), sent by its job
    once the batch lock is free; its notifier gets its whole time box, then is ended, and
    what went wrong with it is a line of the batch's log."""
    from wf.night.batchplan import Record, folder
    from wf.orch import notify

    if not project.config.notify:
        return
    try:
        rec = store.load(Record, folder(project) / f"{stamp}.json")
    except WfError:
        return
    if rec is None or rec.state != "ended":
        return
    rows = read_rows(folder(project) / f"{stamp}.tasks.jsonl")
    done = sum(1 for r in rows if r.get("outcome") in DONE)
    notice = notify.Notice(
        notify.Kind.BATCH_ENDED,
        str(project.root),
        f"batch {stamp} ended: {rec.reason}; {done} of {len(rows)} task(s) done",
        rec.ended or _now(),
        batch=stamp,
        end=rec.reason,
        summary=str(project.root / rec.summary),
        page=str(page_path(project, rec.summary)),
        done=done,
        posted=len(rows),
    )
    log = project.root / rec.log
    notifier = notify.Notifier(project, lambda line: append_line(log, f"{_now()} {line}"))
    notifier.send(notice)
    notifier.close(grace=notify.timeout() + 1.0)  # its own time box ends it first, and says so


# ------------------------------------------------------------------ rendering


def render(n: Night) -> str:
    state = f"ended: {n.ended}" if n.ended else "running"
    done = [r for r in n.rows if r.get("outcome") in DONE]
    head = (
        f"<h1>wf batch {escape(n.stamp)}</h1>\n"
        f"<p>started {escape(n.started)}; {escape(state)}; lanes {escape(', '.join(n.lanes) or '-')}; "
        f"{len(done)} of {len(n.rows)} task(s) done; {escape(_total(n.rows))}</p>\n"
    )
    body = "".join(
        (
            head,
            _merged(n, done),
            _waiting(n),
            _costs(n),
            _forecast(n),
            _windows(n),
            _tasks(n),
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>wf batch {escape(n.stamp)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f'<body>\n{body}<p class="none">written {escape(_now())}</p>\n</body>\n</html>\n'
    )


def _section(title: str, inner: str) -> str:
    return f"<section>\n<h2>{escape(title)}</h2>\n{inner}</section>\n"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table; the cells given are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>\n" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f'<div class="wrap"><table{attr}>\n<tr>{head}</tr>\n{body}</table></div>\n'


def _none(text: str) -> str:
    return f'<p class="none">{escape(text)}</p>\n'


def _task(n: Night, tid: str) -> str:
    title = n.titles.get(tid)
    return f"<code>{escape(tid)}</code>" + (f" {escape(title)}" if title else "")


def _commit(row: dict[str, Any]) -> str:
    return f"<code>{escape(str(row.get('commit', '-')))}</code>"


def _usd(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _money(value: float | None) -> str:
    return "$?" if value is None else f"${value:.2f}"


def _total(rows: Iterable[dict[str, Any]]) -> str:
    known = [u for u in (_usd(r.get("usd")) for r in rows) if u is not None]
    return f"total {_money(sum(known))}" if known else "total $?"


def _merged(n: Night, done: list[dict[str, Any]]) -> str:
    rows = [(_task(n, str(r["id"])), escape(str(r.get("lane", ""))), _commit(r)) for r in done]
    inner = _table(("task", "lane", "commit"), rows) if rows else _none("nothing merged")
    return _section("Merged", inner)


def _waiting(n: Night) -> str:
    if n.waiting is None:
        return _section("Waiting", _none("unknown: TASKS.md could not be read just now"))
    rows = [
        (
            _task(n, str(w.get("id", ""))),
            escape(WHOM.get(str(w.get("kind")), "a person")),
            escape(f"{w.get('kind', '')}: {w.get('text', '')}"),
        )
        for w in n.waiting
    ]
    for ev in n.events:  # lanes that stopped for a person, beside the tasks
        person = ev.kind is EventKind.STOP and ev.reason is not None and ev.reason.person
        if person and not any(w.get("id") == ev.task for w in n.waiting):
            who = escape(f"lane {ev.lane}") + (f", {_task(n, ev.task)}" if ev.task else "")
            rows.append((who, "a person", escape(ev.text)))
    inner = _table(("task", "waits for", "why"), rows) if rows else _none("nothing waits for a person")
    return _section("Waiting", inner)


def _bars(items: list[tuple[str, float | None]]) -> str:
    """Rows of (label HTML, dollars) as a bar chart; an unknown cost has no bar."""
    top = max((u for _, u in items if u is not None), default=0.0)
    rows = []
    for label, usd in items:
        width = 0.0 if usd is None or top <= 0 else max(0.0, usd) / top * 100
        bar = f'<div class="bar" style="width:{width:.1f}%"></div>' if usd is not None else ""
        rows.append((label, escape(_money(usd)), bar))
    return _table(("", "cost", ""), rows, "bars")


def _costs(n: Night) -> str:
    if not n.rows:
        return _section("Cost", _none("no task posted yet"))
    per_task = [(_task(n, str(r["id"])), _usd(r.get("usd"))) for r in n.rows]
    lanes: dict[str, float | None] = {}
    for r in n.rows:
        lane, usd = str(r.get("lane", "")), _usd(r.get("usd"))
        if lane not in lanes:
            lanes[lane] = usd
        elif usd is not None:
            lanes[lane] = (lanes[lane] or 0.0) + usd
    per_lane = [(escape(lane), usd) for lane, usd in lanes.items()]
    return _section("Cost per task", _bars(per_task)) + _section("Cost per lane", _bars(per_lane))


def _forecast(n: Night) -> str:
    rows = []
    for r in n.rows:
        fc = next((_usd(r[k]) for k in FORECAST_KEYS if k in r), None)
        if fc is not None:
            rows.append((_task(n, str(r["id"])), escape(_money(fc)), escape(_money(_usd(r.get("usd"))))))
    inner = _table(("task", "forecast", "actual"), rows) if rows else _none("no forecast")
    return _section("Forecast against actual", inner)


def _windows(n: Night) -> str:
    rows = [
        (
            escape(ev.why or "?"),
            escape(f"lane {ev.lane}"),
            escape(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ev.until)) if ev.until else "?"),
        )
        for ev in n.events
        if ev.kind is EventKind.PARK
    ]
    none = _none("unknown: no lane met a usage limit")
    inner = _table(("window", "parked", "until"), rows) if rows else none
    return _section("Usage windows", inner)


def _tasks(n: Night) -> str:
    rows = [
        (
            escape(str(r.get("ts", ""))[11:16] or "--:--"),
            _task(n, str(r["id"])),
            escape(str(r.get("lane", ""))),
            escape(str(r.get("outcome", "?"))),
            _commit(r),
            escape(_money(_usd(r.get("usd")))),
            escape(fmt_duration(float(d)) if (d := _usd(r.get("dur_s"))) is not None else "-"),
        )
        for r in n.rows
    ]
    header = ("time", "task", "lane", "outcome", "commit", "cost", "took")
    inner = _table(header, rows) if rows else _none("no task posted yet")
    return _section("Every task", inner)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
