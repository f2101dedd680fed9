"""The cloud ledger: what cloud sessions cost in the current period, against the budget.

Each session's spend is one line in ``out/wf-cloud.log`` (written by the pull that saw
it end): ``ts=... id=... session=... state=... usd=... dur_s=...``. The period is the
UTC day, week (from Monday) or month of ``cloud_period``. The lane stops when what is
left of ``cloud_budget`` is at or below ``cloud_reserve``, and sends nothing at all while
no budget is set.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wf.base import stamps
from wf.base.fsutil import append_line
from wf.base.project import Project
from wf.base.text import fields


@dataclass(frozen=True)
class Ledger:
    period: str
    since: str  # the period's first moment, UTC
    budget: float
    reserve: float
    spent: float  # of the sessions whose cost is known
    sessions: int  # sessions that ended in the period
    unknown: int  # of which the cost could not be found (usd=?)
    running: int  # sessions still running (their cost is not known until they end)
    bad: tuple[str, ...] = ()  # what in the log could not be read: "line 3: usd=nan ..."

    @property
    def left(self) -> float:
        return round(self.budget - self.spent, 6)

    @property
    def stop(self) -> str | None:
        """Why the cloud lane may not send, or None. A cost that is not known counts as
        the most it could be, the whole budget: never as $0."""
        if self.budget <= 0:
            return "no cloud_budget in wf.toml"
        if self.bad:
            return f"{LOG} cannot be trusted ({self.bad[0]}); fix or remove that line"
        if self.unknown:
            return (
                f"{self.unknown} session(s) of unknown cost (usd=? in {LOG}) count as the whole budget; "
                f"write each one's cost there to go on"
            )
        if self.left <= self.reserve:
            return f"${self.left:.2f} of ${self.budget:.2f} left, reserve ${self.reserve:.2f}"
        return None

    def as_dict(self) -> dict[str, object]:
        return {
            "period": self.period,
            "since": self.since,
            "budget": self.budget,
            "reserve": self.reserve,
            "spent": round(self.spent, 6),
            "left": self.left,
            "sessions": self.sessions,
            "unknown": self.unknown,
            "running": self.running,
            "bad": list(self.bad),
            "stop": self.stop,
        }

    def lines(self) -> list[str]:
        out = [
            f"cloud {self.period} since {self.since}: spent ${self.spent:.2f} of ${self.budget:.2f}"
            + (" plus unknown" if self.unknown or self.bad else "")
            + f", left ${self.left:.2f}, reserve ${self.reserve:.2f}",
            f"sessions ended: {self.sessions}"
            + (f" ({self.unknown} of unknown cost)" if self.unknown else "")
            + f"; running: {self.running}",
        ]
        out.extend(f"{LOG}: {b}" for b in self.bad)
        out.append(f"the cloud lane stops: {self.stop}" if self.stop else "the cloud lane may send")
        return out


LOG = "out/wf-cloud.log"
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def log_path(project: Project) -> Path:
    return project.out_dir / "wf-cloud.log"


def period_start(period: str, now: datetime | None = None) -> datetime:
    now = (now or datetime.now(UTC)).astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def record_spend(
    project: Project, task_id: str, session: str, state: str, usd: float | None, dur_s: float
) -> None:
    ts = stamps.now_iso()
    cost = "?" if usd is None else f"{usd:.6f}"
    append_line(
        log_path(project),
        f"ts={ts} id={task_id} session={session} state={state} usd={cost} dur_s={round(dur_s)}",
    )


def read(project: Project, running: int = 0, now: datetime | None = None) -> Ledger:
    """The period's spend. Every line is checked: a stamp, a cost that is ``?`` or a
    finite number >= 0; anything else (nan, a negative, a line cut short, bytes that are
    not UTF-8, the log being a folder) is named in ``bad``, and the lane stops on it."""
    cfg = project.config
    start = period_start(cfg.cloud_period, now)
    since = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    spent = 0.0
    sessions = unknown = 0
    bad: list[str] = []
    from wf.base import records as store

    try:
        text = (store.read_bytes(log_path(project), 1 << 30) or b"").decode("utf-8")
    except UnicodeDecodeError as e:
        text = ""
        bad.append(f"not UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start})")
    except store.CorruptRecord as e:  # a folder, a FIFO (never waited on), unreadable
        text = ""
        bad.append(e.why)
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        kv = fields(line)
        ts = kv.get("ts", "")
        if not _STAMP.fullmatch(ts):
            bad.append(f"line {n}: no ts= stamp")
            continue
        if ts < since:  # ISO stamps in UTC compare as text
            continue
        usd = kv.get("usd")
        if usd == "?":
            sessions += 1
            unknown += 1
            continue
        try:
            value = float(usd) if usd is not None else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            bad.append(f"line {n}: usd={usd if usd is not None else '(missing)'} is not a cost")
            continue
        sessions += 1
        spent += value
    return Ledger(
        cfg.cloud_period,
        since,
        cfg.cloud_budget,
        cfg.cloud_reserve,
        spent,
        sessions,
        unknown,
        running,
        tuple(bad),
    )
