"""A batch's morning page: ``out/wf-batch-<stamp>.html``, next to its markdown summary.

One self-contained HTML file (its CSS inline; no script, font or image from anywhere,
a viewport for a phone), made from what the summary is made from: the batch's typed
task rows (``.wf/batch/<stamp>.tasks.jsonl``), its loop's stop events, the tasks that
wait for a person, and the titles in TASKS.md and the archive. Its parts: what merged
(with the commit), what waits for whom and why, cost per task and per lane as bars,
forecast against actual (from the rows' ``forecast`` when a row has one), the usage
windows the lanes parked for, and every task of the summary. A cost that is not known is
never shown as part of a complete sum (``$1.20 + ?``), and the summary's cost marks are
kept (``*`` the tool's own figure, ``?`` unpriced models left out, ``~`` estimated). Every string that comes
from a person or a tool (a title, a note, a reason) is escaped; the page is written
atomically each time the summary gets a line (``wf.night.batchlog.Follower``).
"""

from __future__ import annotations

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
from wf.cost import costlog
from wf.cost.usage import CostSource
from wf.night.taskrows import TaskRow, is_done, read_task_rows
from wf.orch.events import EventKind, StopEvent

if TYPE_CHECKING:
    from wf.night.batchplan import Record

WHOM = {  # why a task waits -> who it waits for
    "awaiting": "a person: the answer to its question",
    "handback": "a person: the task changed, then set pending",
    "blocked": "a person: what blocks it removed",
    "wip": "a person: the work in progress finished",
}

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
    rows: tuple[TaskRow, ...]  # the batch's typed task rows (wf.night.taskrows)
    events: tuple[StopEvent, ...]
    waiting: tuple[dict[str, Any], ...] | None  # None: TASKS.md could not be read just now
    titles: dict[str, str] = field(default_factory=dict)


def page_path(project: Project, summary: str) -> Path:
    """The page next to the summary ``out/wf-batch-<stamp>.md``."""
    return (project.root / summary).with_suffix(".html")


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
    try:
        rows = read_task_rows(folder(project) / f"{stamp}.tasks.jsonl") or []
    except WfError:
        return
    done = sum(1 for r in rows if is_done(r.outcome))
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
    done = [r for r in n.rows if is_done(r.outcome)]
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


def _commit(row: TaskRow) -> str:
    return f"<code>{escape(row.commit)}</code>"


def _source(row: TaskRow) -> CostSource:
    try:
        return CostSource(row.source)
    except ValueError:
        return CostSource.unpriced  # a source wf does not know: never shown as complete


def _money(value: float | None) -> str:
    return "$?" if value is None else f"${value:.2f}"


def _cost(rows: Iterable[TaskRow]) -> str:
    """The rows' dollars as the summary marks them: ``$1.20*`` (the tool's figure), ``$1.20?``
    (unpriced models left out), ``$1.20 + ?`` (some costs not known), ``$?`` (none known)."""
    rows = list(rows)
    known = [r for r in rows if r.usd is not None]
    if not known:
        return "$?"
    src = costlog.worst(_source(r) for r in known)
    shown = costlog.money(
        sum(r.usd or 0.0 for r in known), src, est=any(r.estimated for r in known), digits=2
    )
    return shown + (" + ?" if len(known) < len(rows) else "")


def _total(rows: Iterable[TaskRow]) -> str:
    return f"total {_cost(rows)}"


def _merged(n: Night, done: list[TaskRow]) -> str:
    rows = [(_task(n, r.id), escape(r.lane), _commit(r)) for r in done]
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


def _bars(items: list[tuple[str, list[TaskRow]]]) -> str:
    """Rows of (label HTML, its task rows) as a bar chart of their known dollars, each
    shown with its marks; a cost not known at all has no bar."""
    known = [sum(r.usd or 0.0 for r in rs) if any(r.usd is not None for r in rs) else None for _, rs in items]
    top = max((u for u in known if u is not None), default=0.0)
    rows = []
    for (label, rs), usd in zip(items, known, strict=True):
        width = 0.0 if usd is None or top <= 0 else max(0.0, usd) / top * 100
        bar = f'<div class="bar" style="width:{width:.1f}%"></div>' if usd is not None else ""
        rows.append((label, escape(_cost(rs)), bar))
    return _table(("", "cost", ""), rows, "bars")


def _costs(n: Night) -> str:
    if not n.rows:
        return _section("Cost", _none("no task posted yet"))
    per_task = [(_task(n, r.id), [r]) for r in n.rows]
    lanes: dict[str, list[TaskRow]] = {}
    for r in n.rows:
        lanes.setdefault(r.lane, []).append(r)
    per_lane = [(escape(lane), rs) for lane, rs in sorted(lanes.items())]  # by name: the same every time
    known = [r for r in n.rows if r.usd is not None]
    marks = costlog.legends((_source(r) for r in known), est=any(r.estimated for r in known))
    if len(known) < len(n.rows):
        marks.append("+ ? some tasks left no cost wf could read: the sum is what is known")
    legend = "".join(f'<p class="none">{escape(m)}</p>' for m in marks)
    return _section("Cost per task", _bars(per_task)) + _section("Cost per lane", _bars(per_lane) + legend)


def _forecast(n: Night) -> str:
    rows = []
    for r in n.rows:
        if r.forecast is not None:
            rows.append((_task(n, r.id), escape(_money(r.forecast)), escape(_cost([r]))))
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
            escape(r.ts[11:16] or "--:--"),
            _task(n, r.id),
            escape(r.lane),
            escape(r.outcome),
            _commit(r),
            escape(_cost([r])),
            escape(fmt_duration(r.dur_s) if r.dur_s is not None else "-"),
        )
        for r in n.rows
    ]
    header = ("time", "task", "lane", "outcome", "commit", "cost", "took")
    inner = _table(header, rows) if rows else _none("no task posted yet")
    return _section("Every task", inner)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
