"""The live view: wf top."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from wf.base.text import safe_line
from wf.cli.base import _echo_json, _project, cli

if TYPE_CHECKING:
    from wf.night.top import Watcher


@cli.command("top")
@click.option("--json", "as_json", is_flag=True, help="One snapshot as JSON, then exit.")
@click.option("--once", is_flag=True, help="One snapshot as text, then exit (as when piped).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2, max=3600),
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
    it prints one snapshot.

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
    if once or not sys.stdout.isatty() or not sys.stdin.isatty():
        for line in topmod.lines(watcher.snapshot()):
            click.echo(safe_line(line))
        return
    _live(watcher, interval)


def _live(watcher: Watcher, interval: float) -> None:
    """Refresh in place until q (or Ctrl-C): curses draws, wf only says what."""
    import curses

    def loop(screen: Any) -> None:
        from wf.night import top as topmod

        curses.curs_set(0)
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
