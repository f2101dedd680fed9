"""A loop's stop events: one JSON line per lane that stopped or parked.

``wf orch run`` says "stop lane a: ..." to a person; what other parts of wf learn from
(a batch's summary, the pilot) is the ``StopEvent`` it writes next to it: the lane, the
kind (stopped, or parked until a usage limit resets), the ``Stop`` kind of a stop, the
task, the reset time. The words are made from an event at the edge (``sentence``), so
changing them never changes what a reader sees.

A loop writes its events to the file ``WF_ORCH_EVENTS`` names (a batch sets it to its
own ``.wf/batch/<stamp>.events.jsonl``), else to ``out/wf-orch-events.jsonl`` (every
run's, as ``out/wf-orch-run.log`` has every run's lines; each event names its run). Each
line is appended whole (``append_line``); ``read`` checks every line as a record
(``wf.base.records``): a line that is not an event raises ``CorruptRecord``, never
reads as "no stops".
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

from wf.base import records as store
from wf.base import stamps
from wf.base.fsutil import append_line
from wf.base.project import Project
from wf.base.quantity import until_text
from wf.orch.state import Stop, StopReason

ENV = "WF_ORCH_EVENTS"  # the file a loop writes its stop events to (a batch sets it)
FIX = "no stop after it is read from it; the loop's own output says them in words"


class EventKind(enum.StrEnum):
    STOP = "stop"  # the lane stopped (``stop`` says why, as a ``Stop`` name)
    PARK = "park"  # the lane waits out a usage limit (``until``, ``why``), then goes on


@dataclass(frozen=True)
class StopEvent:
    ts: str  # UTC, ISO 8601
    run: str  # the loop's run id
    lane: str
    kind: EventKind
    text: str  # the reason in a person's words (never read by code)
    stop: str | None = None  # a stop: the ``Stop`` member's name
    task: str | None = None  # the task it concerns, when one does
    until: float | None = None  # a park: when the wait ends (epoch seconds)
    why: str | None = None  # a park: the limit's window, or "overloaded"

    @property
    def reason(self) -> Stop | None:
        """The ``Stop`` kind of a stop (None: a park)."""
        return Stop[self.stop] if self.stop is not None else None

    def problem(self, path: Path) -> str | None:
        if self.kind is EventKind.STOP and self.stop not in Stop.__members__:
            return f"field 'stop' has a bad value {self.stop!r}"
        if self.kind is EventKind.PARK and self.until is None:
            return "a park without 'until'"
        return None


def stopped(run: str, lane: str, reason: StopReason, task: str | None = None) -> StopEvent:
    return StopEvent(_now(), run, lane, EventKind.STOP, reason.text, reason.kind.name, task)


def parked(run: str, lane: str, until: float, why: str, text: str, task: str | None = None) -> StopEvent:
    return StopEvent(_now(), run, lane, EventKind.PARK, text, None, task, until, why)


def sentence(ev: StopEvent) -> str:
    """What a person reads for an event: ``stop lane a: ...``, ``park lane a: parked until ...``."""
    if ev.kind is EventKind.PARK:
        return f"park lane {ev.lane}: parked {until_text(ev.until or 0.0, ev.why)}: {ev.text}"
    return f"stop lane {ev.lane}: {ev.text}"


def path_for(project: Project) -> Path:
    """Where a loop writes its events."""
    given = os.environ.get(ENV, "")
    return Path(given) if given else project.out_dir / "wf-orch-events.jsonl"


def append(path: Path, ev: StopEvent) -> None:
    append_line(path, json.dumps(store.as_dict(ev), separators=(",", ":")))


def read(path: Path, offset: int = 0) -> tuple[list[StopEvent], int]:
    """The events after byte ``offset`` (whole lines only) and the offset after them; no
    file: none. CorruptRecord for a line that is not an event (naming its line)."""
    raw = store.read_bytes(path)
    if raw is None:
        return [], offset
    end = raw.rfind(b"\n") + 1
    if end <= offset:
        return [], offset
    out = []
    line_no = raw.count(b"\n", 0, offset)
    for line in raw[offset:end].splitlines():
        line_no += 1
        try:
            data = json.loads(line.decode("utf-8"), parse_constant=store.no_constant)
        except ValueError as e:  # not UTF-8 (UnicodeDecodeError is one), not JSON
            raise store.CorruptRecord(path, f"line {line_no} is not a JSON event: {e}", FIX) from None
        try:
            out.append(store.from_dict(StopEvent, data, path))
        except store.CorruptRecord as e:
            raise store.CorruptRecord(path, f"line {line_no}: {e.why}", FIX) from None
    return out, end


def _now() -> str:
    return stamps.now_iso()
