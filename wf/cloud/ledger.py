"""The cloud ledger: what cloud sessions cost in the current period, against the budget.

Each session's spend is one line in ``out/wf-cloud.log`` (written by the pull that saw
it end): ``ts=... id=... session=... state=... usd=... dur_s=...``. The period is the
UTC day, week (from Monday) or month of ``cloud_period``. The lane stops when what is
left of ``cloud_budget`` is at or below ``cloud_reserve``, and sends nothing at all while
no budget is set.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wf.fsutil import append_line
from wf.project import Project


@dataclass(frozen=True)
class Ledger:
    period: str
    since: str  # the period's first moment, UTC
    budget: float
    reserve: float
    spent: float
    sessions: int  # sessions that ended in the period
    unknown: int  # of which the cost could not be found
    running: int  # sessions still running (their cost is not known until they end)

    @property
    def left(self) -> float:
        return round(self.budget - self.spent, 6)

    @property
    def stop(self) -> str | None:
        """Why the cloud lane may not send, or None."""
        if self.budget <= 0:
            return "no cloud_budget in wf.toml"
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
            "stop": self.stop,
        }

    def lines(self) -> list[str]:
        out = [
            f"cloud {self.period} since {self.since}: spent ${self.spent:.2f} of ${self.budget:.2f}, "
            f"left ${self.left:.2f}, reserve ${self.reserve:.2f}",
            f"sessions ended: {self.sessions}"
            + (f" ({self.unknown} of unknown cost)" if self.unknown else "")
            + f"; running: {self.running}",
        ]
        out.append(f"the cloud lane stops: {self.stop}" if self.stop else "the cloud lane may send")
        return out


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
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cost = "?" if usd is None else f"{usd:.6f}"
    append_line(
        log_path(project),
        f"ts={ts} id={task_id} session={session} state={state} usd={cost} dur_s={round(dur_s)}",
    )


def read(project: Project, running: int = 0, now: datetime | None = None) -> Ledger:
    cfg = project.config
    start = period_start(cfg.cloud_period, now)
    since = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    spent = 0.0
    sessions = unknown = 0
    try:
        text = log_path(project).read_text("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    for line in text.splitlines():
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if kv.get("ts", "") < since:  # ISO stamps in UTC compare as text
            continue
        sessions += 1
        try:
            spent += float(kv.get("usd", "?"))
        except ValueError:
            unknown += 1
    return Ledger(
        cfg.cloud_period, since, cfg.cloud_budget, cfg.cloud_reserve, spent, sessions, unknown, running
    )
