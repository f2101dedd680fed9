"""API prices: the package's table (wf/data/prices.toml) plus the user's own rows.

A model is looked up by stripping ``[1m]`` and a trailing date (``-YYYYMMDD``,
``-YYYY-MM-DD``, ``@YYYYMMDD``): what is left must be a row's model exactly (a dated
variant of a row is that row; ``gpt-5.5`` is not ``gpt-5``). Among that model's rows the
newest whose ``since`` is not after the request's date wins (the oldest, for a request
older than every row). An unknown model has no price: callers use the tool's own figure
where it reported one, else count it 0, and say so either way (``unpriced=<model>``);
``near`` names the row a prefix would have matched, for the warning.
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from wf.base.errors import ConfigError


class Price(NamedTuple):
    model: str
    since: str
    input: float
    output: float
    cache_read: float
    cache_write_5m: float = 0.0
    cache_write_1h: float = 0.0
    fast: float = 1.0
    # a request whose prompt (input + cache writes + cache reads) passes ``long_above``
    # tokens is priced ``long_mult`` times, all of it (0: no such tier)
    long_above: int = 0
    long_mult: float = 1.0

    def usd(self, inp: int, out: int, cw5: int, cw1: int, cr: int, *, fast: bool = False) -> float:
        """The price of one request in USD."""
        mult = self.fast if fast else 1.0
        if self.long_above and inp + cw5 + cw1 + cr > self.long_above:
            mult *= self.long_mult
        per_m = (
            inp * self.input
            + out * self.output
            + cw5 * self.cache_write_5m
            + cw1 * self.cache_write_1h
            + cr * self.cache_read
        )
        return mult * per_m / 1e6


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
                    long_above=int(row.get("long_above", 0)),
                    long_mult=float(row.get("long_mult", 1)),
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


_DATE_SUFFIX = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})$")


def normalize(model: str) -> str:
    m = model.strip().lower().replace("[1m]", "")
    return _DATE_SUFFIX.sub("", m)


@cache
def lookup(model: str, day: str = "9999-12-31") -> Price | None:
    """The price of ``model`` (exactly a row's model, or a dated variant of it) on ``day``."""
    name = normalize(model)
    rows = sorted((p for p in table() if p.model == name), key=lambda p: p.since)
    if not rows:
        return None
    current = [p for p in rows if p.since <= day]
    return current[-1] if current else rows[0]


def near(model: str) -> str | None:
    """The row a prefix match would have priced an unknown ``model`` by (``gpt-5.5``:
    ``gpt-5``), to say that it was not; None when no row is a prefix of it."""
    name = normalize(model)
    found = [p.model for p in table() if name.startswith(p.model) and name != p.model]
    return max(found, key=len) if found else None
