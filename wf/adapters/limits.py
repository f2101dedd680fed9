"""A plan's usage limit, read from a tool's structured event or, failing that, its words.

Claude Code (subscription) prints ``rate_limit_event`` with ``rate_limit_info.status``
``rejected`` (``allowed`` and ``allowed_warning`` are reports, not rejections),
``resetsAt`` (epoch seconds), ``rateLimitType`` (five_hour, seven_day, seven_day_opus...),
``utilization`` and ``unifiedWindows``. Codex says ``usage_limit_reached`` with
``resets_at`` / ``resets_in_seconds`` where its event keeps them, else "try again at
3:28 PM". The words forms are the fallback: "You've hit your session limit · resets
12:50am (America/Los_Angeles)", "5-hour limit reached · resets 3pm", "You've hit your
weekly limit · resets Sep 18 at 3am", the older "Claude AI usage limit reached|<epoch>".
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass
from typing import Any

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_EPOCH = re.compile(r"usage limit reached\|(\d{9,11})\b", re.I)
_RESETS = re.compile(
    r"(?:\bresets|\btry again at)\s+(?:(?P<mon>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    r"(?:,\s*(?P<year>\d{4}))?(?:,|\s+at)?\s+)?(?P<h>\d{1,2})(?::(?P<m>\d\d))?\s*(?P<ap>[ap]\.?m\.?)?"
    r"(?:\s*\((?P<tz>[^)]+)\))?",
    re.I,
)
# The words that name a window, in the order they are tried.
_WINDOWS = (
    ("seven_day_opus", re.compile(r"\bopus limit", re.I)),
    ("seven_day", re.compile(r"weekly limit|7-day limit|seven.day", re.I)),
    ("five_hour", re.compile(r"session limit|5-hour limit|five.hour", re.I)),
)


@dataclass(frozen=True)
class Limit:
    """A rejection by the plan's usage limit: which window, when it resets (epoch
    seconds; None: the tool did not say), how much of it was used (0..1; None: unsaid)."""

    window: str | None = None
    resets_at: float | None = None
    utilization: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"window": self.window, "resets_at": self.resets_at, "utilization": self.utilization}

    @classmethod
    def from_dict(cls, data: Any) -> Limit | None:
        if not isinstance(data, dict):
            return None
        return cls(_str(data.get("window")), _num(data.get("resets_at")), _num(data.get("utilization")))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def claude_event(info: Any) -> Limit | None:
    """A ``rate_limit_event``'s ``rate_limit_info``: a Limit when its status is
    ``rejected``, None for ``allowed``/``allowed_warning`` (a report, not a rejection)."""
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return None
    window = _str(info.get("rateLimitType"))
    used = _num(info.get("utilization"))
    windows = info.get("unifiedWindows")
    if used is None and isinstance(windows, dict) and isinstance(windows.get(window), dict):
        used = _num(windows[window].get("utilization"))
    return Limit(window, _num(info.get("resetsAt")), used)


def codex_fields(obj: Any, now: float | None = None) -> Limit | None:
    """Codex's ``usage_limit_reached`` error object, where an event carries it: its
    ``resets_at`` (epoch) or ``resets_in_seconds``."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type") or obj.get("code") or obj.get("error")
    if kind != "usage_limit_reached":
        return None
    at = _num(obj.get("resets_at"))
    if at is None and _num(obj.get("resets_in_seconds")) is not None:
        at = (time.time() if now is None else now) + float(obj["resets_in_seconds"])
    return Limit(None, at, None)


def from_words(text: str | None, now: float | None = None) -> Limit | None:
    """A Limit from a tool's message, when it is a usage limit's: the window it names and
    the reset it gives (the next such moment after ``now``), else None."""
    if not text:
        return None
    now = time.time() if now is None else now
    window = next((name for name, pattern in _WINDOWS if pattern.search(text)), None)
    m = _EPOCH.search(text)
    if m:
        return Limit(window, float(m.group(1)), None)
    if not re.search(r"limit", text, re.I):
        return None
    m = _RESETS.search(text)
    return Limit(window, _reset_time(m, now) if m else None, None)


def _reset_time(m: re.Match[str], now: float) -> float | None:
    hour, minute = int(m.group("h")), int(m.group("m") or 0)
    ap = (m.group("ap") or "").lower().replace(".", "")
    if ap:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ap == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    tz: dt.tzinfo | None = None
    if m.group("tz"):
        tz = _zone(m.group("tz"))
    base = dt.datetime.fromtimestamp(now, tz) if tz else dt.datetime.fromtimestamp(now).astimezone()
    try:
        if m.group("mon"):
            month = MONTHS.index(m.group("mon").lower()[:3]) + 1
            year = int(m.group("year") or base.year)
            when = base.replace(year=year, month=month, day=int(m.group("day")), hour=hour,
                                minute=minute, second=0, microsecond=0)  # fmt: skip
            if when.timestamp() < now - 86400 and not m.group("year"):
                when = when.replace(year=year + 1)  # "Jan 2" said on Dec 30
        else:
            when = base.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if when.timestamp() <= now:
                when += dt.timedelta(days=1)
    except ValueError:
        return None
    return when.timestamp()


def _zone(name: str) -> dt.tzinfo | None:
    name = name.strip()
    if name.upper() in ("UTC", "GMT", "Z"):
        return dt.UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (ValueError, KeyError, OSError, ImportError):
        return None
