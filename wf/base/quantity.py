"""Sizes (``4G``, ``512M``) and durations (``90s``, ``6h``): one parser for all of wf; and
the words for when a usage limit resets (``until 03:10 (five_hour)``).

A bad value raises ``UsageError`` (exit 2) saying what was expected.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from wf.base.errors import UsageError

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)", re.I)
_SIZE_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DUR = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)", re.I)
_DUR_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from ``4G``, ``512M``, ``1.5g``, ``100k`` or a plain number of bytes
    (units are powers of 1024; a trailing ``B`` or ``iB`` is allowed)."""
    m = _SIZE.fullmatch(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{what} {text!r}: expected a size such as 512M or 4G")
    return int(float(m.group(1)) * _SIZE_UNIT[m.group(2).lower()])


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from ``90s``, ``20m``, ``6h``, ``1d`` or a plain number of seconds."""
    m = _DUR.fullmatch(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{what} {text!r}: expected a duration such as 90s, 20m or 6h")
    return float(m.group(1)) * _DUR_UNIT[m.group(2).lower()]


def parse_cpus(text: str) -> float:
    """Cores' worth of CPU (``1.5``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"cpus {text!r}: expected a positive number of cores such as 1.5")
    return value


def fmt_size(n: int | None) -> str:
    """``1.5G``, ``300M``, ``12K``; ``-`` for None."""
    if n is None:
        return "-"
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 and unit == "G" else f"{value:.0f}{unit}"
    return f"{n}B"


def fmt_duration(s: float | None) -> str:
    """``42s``, ``12m05s``, ``3h20m``; ``-`` for None."""
    if s is None:
        return "-"
    s = round(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def until_text(resets_at: float, window: str | None) -> str:
    """``until 03:10 (five_hour)``: local time, with the date when it is not today."""
    when = dt.datetime.fromtimestamp(resets_at).astimezone()
    today = dt.datetime.now().astimezone().date()
    clock = when.strftime("%H:%M") if when.date() == today else when.strftime("%b %d %H:%M")
    return f"until {clock}" + (f" ({window})" if window else "")
