"""API prices: the package's table (wf/data/prices.toml) plus the user's own rows.

A model is looked up by stripping ``[1m]`` and a trailing ``-YYYYMMDD``, then taking the
longest row prefix that matches, and among that prefix's rows the newest whose ``since``
is not after the request's date (the oldest, for a request older than every row). An
unknown model has no price: callers price it 0 and say so (``unpriced=<model>``).
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from wf.errors import ConfigError


class Price(NamedTuple):
    model: str
    since: str
    input: float
    output: float
    cache_read: float
    cache_write_5m: float = 0.0
    cache_write_1h: float = 0.0
    fast: float = 1.0


def user_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "wf" / "prices.toml"


def _rows(data: dict[str, Any], where: str) -> list[Price]:
    rows = data.get("price", [])
    if not isinstance(rows, list):
        raise ConfigError(where, "expected [[price]] rows")
    out = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or "model" not in row or "input" not in row or "output" not in row:
            raise ConfigError(where, f"price row {n} needs model, input and output")
        try:
            out.append(
                Price(
                    model=str(row["model"]),
                    since=str(row.get("since", "2000-01-01")),
                    input=float(row["input"]),
                    output=float(row["output"]),
                    cache_read=float(row.get("cache_read", 0)),
                    cache_write_5m=float(row.get("cache_write_5m", 0)),
                    cache_write_1h=float(row.get("cache_write_1h", 0)),
                    fast=float(row.get("fast", 1)),
                )
            )
        except (TypeError, ValueError):
            raise ConfigError(where, f"price row {n} has a value that is not a number") from None
    return out


@cache
def table() -> tuple[Price, ...]:
    text = resources.files("wf").joinpath("data/prices.toml").read_text("utf-8")
    rows = {(p.model, p.since): p for p in _rows(tomllib.loads(text), "wf/data/prices.toml")}
    path = user_file()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(str(path), f"not valid TOML: {e}") from None
        for p in _rows(data, str(path)):
            rows[(p.model, p.since)] = p
    return tuple(rows.values())


_DATE_SUFFIX = re.compile(r"-\d{8}$")


def normalize(model: str) -> str:
    m = model.strip().lower().replace("[1m]", "")
    return _DATE_SUFFIX.sub("", m)


@cache
def lookup(model: str, day: str = "9999-12-31") -> Price | None:
    name = normalize(model)
    matches = [p for p in table() if name.startswith(p.model)]
    if not matches:
        return None
    longest = max(len(p.model) for p in matches)
    rows = sorted((p for p in matches if len(p.model) == longest), key=lambda p: p.since)
    current = [p for p in rows if p.since <= day]
    return current[-1] if current else rows[0]
