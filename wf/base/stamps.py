"""Time stamps: the one reader of the dates wf writes and reads, always as UTC.

wf writes ``2026-10-25T01:30:00Z`` (run, res and batch records) and ``20261025T013000Z``
(backup ref names); the agent tools' transcripts add fractions of a second and offsets.
Each is read here as a moment in UTC, never through the local time zone: a job that ran
across a change of daylight saving time lasted its UTC hours, not one more or less.
A stamp without an offset is UTC. Only a whole date and time (to the second) is a
stamp: ``20261025`` alone, or a bare word, is none (a backup ref so named is not aged).
"""

from __future__ import annotations

import re
import time

_FORM = re.compile(r"\d{4}(-?)\d{2}\1\d{2}T\d{2}(:?)\d{2}\2\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")


def now_iso(t: float | None = None) -> str:
    """The stamp wf writes for ``t`` (now by default): ``2026-10-25T01:30:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def compact_now() -> str:
    """The stamp wf puts in names (backup refs, batches): ``20261025T013000Z``, now."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def parse_utc(text: str) -> float | None:
    """Seconds since the epoch of a stamp, None if ``text`` is none."""
    if not _FORM.fullmatch(text):
        return None
    from datetime import UTC, datetime  # a few ms: only where a stamp is read

    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def seconds_between(start: str, end: str) -> float | None:
    """``end`` minus ``start`` in seconds (negative if it comes first), None if either is
    not a stamp."""
    t0, t1 = parse_utc(start), parse_utc(end)
    return None if t0 is None or t1 is None else t1 - t0
