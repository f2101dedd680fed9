"""The live view: wf top."""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from wf.base.text import safe_line
from wf.cli.base import _echo_json, _project, cli

if TYPE_CHECKING:
    from wf.night.top import Watcher

INTERVAL = (0.2, 3600.0)  # seconds between refreshes, at least and at most


class Interval(click.ParamType[float]):
    """Seconds between refreshes: a finite number from 0.2 to 3600 (nan and inf are refused)."""

    name = "S"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        lo, hi = INTERVAL
        if not (math.isfinite(v) and lo <= v <= hi):
            self.fail(f"must be a number of seconds from {lo:g} to {hi:g}, not {value}", param, ctx)
        return v


@cli.command("top")
@click.option("--json", "as_json", is_flag=True, help="One snapshot as JSON, then exit.")
@click.option("--once", is_flag=True, help="One snapshot as text, then exit (as when piped).")
@click.option(
    "--interval",
    type=Interval(),
    default=2.0,
    show_default=True,
    metavar="S",
    help="Seconds between refreshes of the live view.",
)
@click.pass_context
def top(ctx: click.Context, as_json: bool, once: bool, interval: float) -> None:
    """What the night is doing now: who waits for a person, each lane's task, time and cost.

    Read-only: the tasks waiting for a person first, then each lane (task, tool,
    worker, elapsed, quiet, cost so far, parked until), then the batch against its N
    and --for.

    On a terminal it refreshes in place (q quits); piped, or with --once or --json,
    it prints one snapshot, as it does when the terminal cannot be drawn on (TERM
    unset, dumb or unknown).

    \b
    Example:
      wf top
      wf top --json | jq '.lanes[] | {lane, task, cost_usd}'
    """
    from wf.night import top as topmod

    proj = _project(ctx)
    watcher = topmod.Watcher(proj)
    if as_json:
        _echo_json(watcher.snapshot().as_dict())
        return
    if once or not sys.stdout.isatty() or not sys.stdin.isatty() or not drawable():
        _once(watcher)
        return
    if not _live(watcher, interval):
        _once(watcher)


def drawable() -> bool:
    """Whether curses may draw here: a TERM that names a real terminal."""
    return os.environ.get("TERM", "") not in ("", "dumb", "unknown")


def _once(watcher: Watcher) -> None:
    from wf.night import top as topmod

    for line in topmod.lines(watcher.snapshot()):
        click.echo(safe_line(line))


def _live(watcher: Watcher, interval: float) -> bool:
    """Refresh in place until q (or Ctrl-C): curses draws, wf only says what. False when
    the terminal cannot be drawn on (curses.error: an unknown TERM, one without the
    capabilities): the caller prints one snapshot instead."""
    import curses

    def loop(screen: Any) -> None:
        from wf.night import top as topmod

        try:
            curses.curs_set(0)
        except curses.error:  # a terminal that cannot hide its cursor draws with it
            pass
        screen.timeout(int(interval * 1000))
        while True:
            rows, cols = screen.getmaxyx()
            screen.erase()
            for y, line in enumerate(topmod.lines(watcher.snapshot())[: max(rows - 1, 0)]):
                screen.addnstr(y, 0, safe_line(line), max(cols - 1, 0))
            if rows > 1:
                screen.addnstr(rows - 1, 0, "q quits", max(cols - 1, 0), curses.A_DIM)
            screen.refresh()
            key = screen.getch()
            if key in (ord("q"), ord("Q"), 27):
                return

    try:
        curses.wrapper(loop)
    except KeyboardInterrupt:
        pass
    except curses.error:
        return False
    return True
