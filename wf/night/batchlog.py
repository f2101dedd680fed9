"""A batch's summary ``out/wf-batch-<stamp>.md``, written as the batch goes.

It is made from what the loop leaves anyway: each new line of ``out/wf-orch.log`` (one
per post, on the batch's lanes) becomes ``- <HH:MM> <lane> <id> <outcome>
commit=<sha|-> $<cost|?> <duration>`` (the cost from ``out/wf-cost.log``, which post
writes first; marked ``*`` when it is the tool's own figure, ``?`` when unpriced models
are left out, ``~`` before it when it includes estimated output); each stop event of the
batch's loop (``.wf/batch/<stamp>.events.jsonl``, typed: ``wf.orch.events``) becomes a
line in the words of ``events.sentence`` (``stop lane <lane>: <why>``, ``park lane
<lane>: parked until 03:10 (five_hour) ...``). Each task line is also kept as a typed
row (``.wf/batch/<stamp>.tasks.jsonl``, ``TaskRow``): the footer and the questions for a
person count those rows, never the summary's words, so the footer of a batch that died
can still be written later, by another process.

A batch made by a wf before the events file has none: its summary keeps the stop lines
its own wf wrote, and the pilot shows none for it. A line of the events file that is
not an event is said once in the summary, as a record that cannot be trusted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.base import records as store
from wf.base.errors import WfError
from wf.base.fsutil import append_line, atomic_write_text
from wf.base.project import Project
from wf.base.quantity import fmt_duration, fmt_size
from wf.base.records import CorruptRecord
from wf.base.text import fields
from wf.cost import costlog
from wf.cost.usage import CostSource
from wf.night import batchcost
from wf.night.taskrows import TaskRow, is_done, read_task_rows, rows_file

if TYPE_CHECKING:
    from wf.night.batchplan import Plan, Record
    from wf.orch.events import StopEvent
    from wf.tasks.backlog import Backlog


def _row_line(row: TaskRow) -> str:
    """The summary's words for a row: ``- HH:MM lane id outcome commit=sha $cost dur``."""
    shown = (
        "$?"
        if row.usd is None
        else costlog.money(row.usd, CostSource(row.source), est=row.estimated, digits=2)
    )
    dur = fmt_duration(row.dur_s) if row.dur_s is not None else "-"
    line = f"- {row.ts[11:16] or '--:--'} {row.lane} {row.id} {row.outcome} commit={row.commit} {shown} {dur}"
    return line + (f" (forecast ${row.forecast:.2f})" if row.forecast is not None else "")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> tuple[list[str], int]:
    """Whole lines after ``offset``, and the offset after the last whole line."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    return data[:end].decode("utf-8", "replace").splitlines(), offset + end


def events_file(project: Project, stamp: str) -> Path:
    """Where the loop of batch ``stamp`` writes its stop events (``wf.orch.events.ENV``)."""
    from wf.night.batchplan import folder

    return folder(project) / f"{stamp}.events.jsonl"


def stop_events(project: Project, stamp: str, offset: int = 0) -> tuple[list[StopEvent], int]:
    """The stop events of batch ``stamp`` after ``offset`` (none for a batch made before
    wf wrote them), and the offset after them; CorruptRecord for a line that is not one."""
    from wf.orch import events

    return events.read(events_file(project, stamp), offset)


def task_ids(project: Project) -> set[str]:
    """Every id in TASKS.md and the archive."""
    from wf.tasks import backlog

    bl = backlog.load(project)
    return {t.id for t in bl.doc.tasks} | bl.archive.ids()


def _plan_forecast(plan: dict[str, Any]) -> dict[str, Any] | None:
    """The forecast a batch's plan started with (None: a plan made without one)."""
    outlook = plan.get("forecast")
    found = outlook.get("forecast") if isinstance(outlook, dict) else None
    return found if isinstance(found, dict) else None


def summary_header(project: Project, rec: Record, p: Plan) -> None:
    skipped = "; ".join(f"{k}: {v}" for k, v in p.skipped.items())
    text = (
        f"# wf batch {rec.stamp}\n\n"
        f"- started: {rec.started}  job: {rec.job}  pid: {rec.pid}\n"
        f"- lanes: {', '.join(p.lanes)}  N: {p.n}\n"
        f"- limits: mem {fmt_size(p.limits.mem)} ({p.sources['mem']}); for {fmt_duration(p.for_s)} "
        f"({p.sources['for']}); wall {fmt_duration(p.limits.for_s)}\n"
        f"- backend: {p.backend}"
        + (f" (skipped {skipped})" if skipped else "")
        + "\n"
        + "".join(f"{x}\n" for x in batchcost.header_lines(_plan_forecast(rec.plan), p.budget))
        + (f"- {p.budget_note}\n" if p.budget_note else "")
        + "\n"
    )
    atomic_write_text(project.root / rec.summary, text)


class Follower:
    """Turns the loop's logs into summary lines, from where they stood when the batch began."""

    def __init__(self, project: Project, rec: Record) -> None:
        self.project = project
        self.rec = rec
        self.summary = project.root / rec.summary
        self.lanes = set(rec.plan.get("lanes") or ())
        if project.config.cloud:
            self.lanes.add("cloud")  # the batch's cloud sessions are posted tasks too
        out = project.out_dir
        self.files = {
            "orch": out / "wf-orch.log",
            "cost": out / "wf-cost.log",
        }
        self.offsets = dict(rec.offsets) or {k: _size(v) for k, v in self.files.items()}
        self.offsets.setdefault("stops", 0)
        self.rows = rows_file(project, rec.stamp)
        self.corrupt: str | None = None  # the events file's fault, once said
        self.known_ids = rec.known_ids or tuple(sorted(task_ids(project)))
        self.forecast = _plan_forecast(rec.plan)
        self.costs: dict[str, float] = {}
        self.sources: dict[str, list[CostSource]] = {}  # where each task's dollars came from
        self.estimated: set[str] = set()
        self.dirty = False  # the summary got a line the morning page does not show yet
        self.page_fault: str | None = None  # why the page could not be written, once said
        from wf.orch import gate

        self.gates = gate.Watch(project)  # a red gate is a summary line as soon as it is recorded

    @property
    def posted(self) -> int:
        """How many tasks the batch posted: its rows, counted without reading them."""
        raw = store.read_bytes(self.rows)
        return raw.count(b"\n") if raw else 0

    def begin(self) -> None:
        """The batch begins: its rows file exists from now on (empty: no task posted yet),
        so that a footer tells "none posted" from "begun by a wf that kept no rows"."""
        self.rows.parent.mkdir(parents=True, exist_ok=True)
        self.rows.touch()

    def poll(self) -> None:
        """Append the summary lines for what happened since the last poll."""
        lines, self.offsets["cost"] = _read_from(self.files["cost"], self.offsets["cost"])
        for line in lines:
            kv = fields(line)
            usd = costlog.num(kv.get("usd"))  # nan, inf: not known (never a NaN in a row)
            if "id" not in kv or usd is None:
                continue
            self.costs[kv["id"]] = self.costs.get(kv["id"], 0.0) + usd
            self.sources.setdefault(kv["id"], []).append(costlog.source_of(kv))
            if (costlog.num(kv.get("est")) or 0) > 0:
                self.estimated.add(kv["id"])
        lines, self.offsets["orch"] = _read_from(self.files["orch"], self.offsets["orch"])
        for line in lines:
            kv = fields(line)
            if kv.get("lane") not in self.lanes or "id" not in kv:
                continue
            dur = kv.get("dur_s", "-")
            row = TaskRow(
                ts=kv.get("ts", ""),
                lane=kv["lane"],
                id=kv["id"],
                outcome=kv.get("outcome", "?"),
                commit=kv.get("commit", "-")[:12],
                usd=self.costs.get(kv["id"]),
                source=costlog.worst(self.sources.get(kv["id"], [])).value,
                estimated=kv["id"] in self.estimated,
                dur_s=float(dur) if dur.replace(".", "", 1).isdigit() else None,
                forecast=batchcost.row_forecast(self.forecast, kv["id"]),
            )
            append_line(self.rows, json.dumps(store.as_dict(row), separators=(",", ":")))
            self._add(_row_line(row))
        self._poll_stops()
        from wf.orch import gate

        for r in self.gates.red():
            head, *tail = gate.red_lines(self.project, r)
            self._add(f"- {time.strftime('%H:%M', time.gmtime())} {head}")
            for line in tail:
                self._add(f"  {line}")
        if self.dirty:
            self.page()

    def _poll_stops(self) -> None:
        """A line per stop or park of the batch's loop, made from its event."""
        from wf.orch import events

        try:
            found, self.offsets["stops"] = stop_events(self.project, self.rec.stamp, self.offsets["stops"])
        except CorruptRecord as e:
            if e.why != self.corrupt:  # said once: every poll meets it again
                self._add(f"- {time.strftime('%H:%M', time.gmtime())} stop events: {e}")
                self.corrupt = e.why
            return
        for ev in found:
            if ev.lane in self.lanes:
                self._add(f"- {ev.ts[11:16]} {events.sentence(ev)}")

    def _add(self, line: str) -> None:
        append_line(self.summary, line)
        self.dirty = True

    def page(self, ended: str | None = None) -> None:
        """Write the morning page (``wf.night.morning``) from the rows, events and waits
        the summary is made from; a page that cannot be written costs the summary nothing."""
        from wf.night import morning

        self.dirty = False
        try:
            try:
                waiting: tuple[dict[str, Any], ...] | None = tuple(needs_person(self.project, self.rec))
            except (WfError, OSError):
                waiting = None  # TASKS.md cannot be read just now (a person's save)
            try:
                found, _ = stop_events(self.project, self.rec.stamp)
            except CorruptRecord:
                found = []
            night = morning.Night(
                self.rec.stamp,
                self.rec.started,
                tuple(sorted(self.lanes)),
                ended,
                tuple(read_task_rows(self.rows) or ()),
                tuple(ev for ev in found if ev.lane in self.lanes),
                waiting,
                morning.titles(self.project),
            )
            morning.write(self.project, self.rec, night)
        except (WfError, OSError) as e:
            if str(e) != self.page_fault:  # said once: every line of the summary meets it again
                self.page_fault = str(e)
                append_line(self.summary, f"- note: the morning page cannot be written: {e}")

    def task_rows(self) -> list[TaskRow] | None:
        """The batch's posted tasks; None for a batch begun by a wf that kept no rows.
        CorruptRecord for a row that cannot be trusted."""
        return read_task_rows(self.rows)

    def footer(self, reason: str, note: str = "", *, counted: bool = True) -> None:
        """The footer; ``counted=False`` (a prep batch) leaves out the task counts and dollars."""
        try:
            rows = self.task_rows()
        except CorruptRecord as e:
            rows, note = None, "; ".join(x for x in (note, f"its task rows cannot be read: {e}") if x)
        if rows is None:
            counted = False  # begun by an older wf, or rows that cannot be trusted: no counts
        tasks = rows or []
        done = sum(1 for r in tasks if is_done(r.outcome))
        total = sum(r.usd for r in tasks if r.usd is not None)
        unpriced = sum(1 for r in tasks if r.usd is None)
        used = {CostSource(r.source) for r in tasks if r.usd is not None}
        marks = "".join(sorted({costlog.MARKS[s] for s in used} - {""}))  # "*", "?", "*?"
        est = any(r.estimated for r in tasks if r.usd is not None)
        try:
            added = sorted(task_ids(self.project) - set(self.known_ids))
        except Exception:  # a TASKS.md with errors must not cost the footer
            added = []
        lines = [
            "",
            *([f"done: {done}, not done: {len(tasks) - done}"] if counted else []),
            f"added: {', '.join(added) or '-'}",
            *(
                [
                    f"total: {'~' if est else ''}${total:.2f}{marks}"
                    + (f" ({unpriced} task(s) without a cost)" if unpriced else "")
                ]
                if counted
                else []
            ),
            *(
                costlog.legends(
                    (s for s in CostSource if costlog.MARKS[s] and costlog.MARKS[s] in marks), est
                )
                if counted
                else []
            ),
            *(
                [x]
                if counted and (x := batchcost.footer_line(self.forecast, [(r.id, r.usd) for r in tasks]))
                else []
            ),
            f"ended: {reason} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
            + (f" ({note})" if note else ""),
        ]
        for line in lines:
            self._add(line)
        self.page(ended=reason)


def needs_person(project: Project, rec: Record | None, bl: Backlog | None = None) -> list[dict[str, Any]]:
    """Every open task held for a person (``Backlog.hold``, the rule ``wf show`` uses): a
    handback (in this batch or not), an awaiting question, blocked and wip tasks, a hold
    record that cannot be trusted. ``rec``: the batch (the same tasks wait whatever batch
    is shown). ``bl``: the backlog, if loaded already."""
    from wf.tasks import backlog
    from wf.tasks.holds import HoldKind

    person = (HoldKind.HANDBACK, HoldKind.AWAITING, HoldKind.WIP, HoldKind.BLOCKED, HoldKind.CORRUPT)
    bl = bl or backlog.load(project)
    out: list[dict[str, Any]] = []
    for t in bl.doc.tasks:
        hold = bl.hold(t)
        if hold is None or hold.kind not in person:
            continue
        if hold.kind is HoldKind.HANDBACK:
            text = t.notes[-1] if t.notes else hold.why
        else:
            text = t.status.text if hold.kind is not HoldKind.CORRUPT else hold.why
        out.append({"id": t.id, "kind": hold.kind.value, "text": text})
    return out
