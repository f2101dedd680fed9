"""How long a lane waits when its tool says "not now": a plan's usage limit parks it
until the reset plus a margin (a backoff of 1 to 30 minutes when no reset was given; at
most 24 h), an overloaded API gets a short backoff. Neither is charged to the task.

``WF_PARK_MIN_S`` (seconds, default 60) is the margin after a reset and the first
backoff; tests set it to a second or two so that they wait seconds, not minutes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from wf.adapters import Failure, Spec
from wf.adapters.limits import Limit
from wf.orch.state import LaneRecord

MAX_PARK = 24 * 3600.0
MAX_BACKOFF = 30 * 60.0  # a limit without a reset time: 1, 2, 4 ... 30 minutes
MAX_OVERLOADED = 120.0
OVERLOADED_TRIES = 3  # overloaded runs of one lane in a row before it counts as its tool's failure


def park_min() -> float:
    """The margin after a reset and the first backoff (WF_PARK_MIN_S, default 60 s)."""
    try:
        value = float(os.environ.get("WF_PARK_MIN_S", "60"))
    except ValueError:
        return 60.0
    return value if value > 0 else 60.0


@dataclass(frozen=True)
class Parked:
    """A lane waiting: until when (epoch), why (the limit's window, or overloaded), and
    what runs when the wait is over (None: a lane parked before it claimed anything)."""

    until: float
    why: str
    rec: LaneRecord | None = None
    spec: Spec | None = None  # the rejected unit's spec: run again (resumed where the tool can)


def until(failure: Failure, limit: Limit | None, in_a_row: int, now: float) -> float:
    """When a lane rejected ``in_a_row`` times in a row (0: the first) may run again."""
    margin = park_min()
    if failure is Failure.overloaded:
        return now + min(max(margin / 4, 1.0) * 2.0**in_a_row, MAX_OVERLOADED)
    if limit is not None and limit.resets_at is not None and limit.resets_at > now:
        at = limit.resets_at + margin
    else:  # no reset said, or one gone by (the tool's clock, another window): back off
        at = now + min(margin * 2.0**in_a_row, MAX_BACKOFF)
    return min(at, now + MAX_PARK)


def why(failure: Failure, limit: Limit | None) -> str:
    if failure is Failure.overloaded:
        return "overloaded"
    return (limit.window if limit else None) or "usage limit"
