"""Waiting on a run's units: monitor (wake on the first that needs attention) and
gather (every unit landed, then their answers).

Exit codes (shared/conventions.md): 0 every unit done; 4 a unit needs attention; 5 gave
up waiting (--timeout); 130 interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from wf.base.text import safe, safe_line
from wf.cli.base import _echo_json, _project, cli
from wf.cli.workers import Live

if TYPE_CHECKING:
    from wf.base.project import Project


@cli.command()
@click.argument("run")
@click.argument("units", nargs=-1)
@click.option(
    "--running",
    is_flag=True,
    help="Watch only the units still running (call again after handling a failure).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600,
    show_default=True,
    help="Give up after S seconds (exit 5).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: run, code, watching, units.")
@click.pass_context
def monitor(
    ctx: click.Context, run: str, units: tuple[str, ...], running: bool, timeout: float, as_json: bool
) -> int:
    """Wait for the first thing that needs attention among the units watched (all,
    the UNITs named, or with --running those still running), then print one line per
    unit (running ones: growing, or quiet for how long).

    A run that has not started yet (a monitor called right after 'wf run') is waited
    for, within the same --timeout.

    Exit 0: every watched unit is done. 4: one failed, stalled, timed out, was
    interrupted, lost its supervisor, or is done with an answer that breaks the
    return contract ('invalid'). 5: --timeout passed first.

    \b
    wf monitor r1                   # wakes on the first failure
    wf monitor r1 --running         # after handling it: wait on the rest
    """
    from wf.fanout import report, watch

    proj = _project(ctx)
    waiting = f"monitor {run}: waiting for run {run} to start (wf run, wf dispatch)"
    left = watch.wait_for_start(proj, run, timeout, on_wait=None if as_json else lambda: click.echo(waiting))
    if left is None:
        if as_json:
            _echo_json(report.monitor_json(run, watch.Watch(watch.GAVE_UP, [], [], [])))
        else:
            click.echo(f"monitor {run}: gave up after {timeout:g}s; run {run} has not started")
        return watch.GAVE_UP
    watched = watch.watch_set(proj, run, list(units), running)
    live = Live(as_json)
    if not as_json:
        click.echo(f"monitor {run}: watching {report.watching(proj, run, watched)}")
    result = watch.monitor(
        proj, run, watched, timeout=left, on_tick=lambda sts: live.tick_statuses(proj, run, sts)
    )
    live.done()
    if as_json:
        _echo_json(report.monitor_json(run, result))
        return result.code
    for line in report.unit_lines(proj, run, result.units):
        click.echo(safe_line(line))
    for line in report.legend(result.units):
        click.echo(line)
    if result.code == watch.GAVE_UP:
        click.echo(f"monitor {run}: gave up after {timeout:g}s; still running")
    return result.code


@cli.command()
@click.argument("run")
@click.argument("units", nargs=-1)
@click.option(
    "--quiet",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds every unit's files must stay unchanged.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600,
    show_default=True,
    help="Give up after S seconds (exit 5).",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Line up the answers of each panel (wf run --panel) section by section: agree, differ, missing.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object: run, code, units (each with its output, result, verdict), attention.",
)
@click.pass_context
def gather(
    ctx: click.Context,
    run: str,
    units: tuple[str, ...],
    quiet: float,
    timeout: float,
    compare: bool,
    as_json: bool,
) -> int:
    """Wait until every unit (or the UNITs named) has ended and its results stayed
    quiet, printing 'DONE UNIT STATE' as each lands, then each answer under a
    '== UNIT (state)' header. A unit whose supervisor is gone is lost, and counts
    as landed. Each answer is checked against the return contract: a done unit
    whose answer lacks a section, is empty or only a FALLBACK is 'invalid'. At the
    end, every unit without a valid result (invalid, failed, never started) is
    named with its reason. Exit 0 all done and valid, 4 one is not, 5 --timeout
    passed first.

    With --compare, each panel's answers are lined up instead, one row per
    section marked agree (the same text, files or stated Verdict), differ (files
    named by one unit and not another, opposite verdicts, other text) or missing;
    exit 0 when every section of every panel agrees, 4 when one differs or is
    missing (or a unit is not done), 1 at once for a run with no panel.

    \b
    wf gather r1 > answers.txt
    wf gather r1 --json | jq -r '.units[].output'
    wf gather r1 --json | jq -r '.attention[].unit'   # then: wf runs retry r1 --invalid
    wf gather q1 --compare --json | jq '.panels[].sections[] | select(.mark != "agree")'
    """
    from wf.fanout import report, watch

    proj = _project(ctx)
    if compare:
        if units:
            raise click.UsageError("--compare compares whole panels: name no UNITs")
        return _compare(proj, run, quiet=quiet, timeout=timeout, as_json=as_json)
    live = Live(as_json)
    result = watch.gather(
        proj,
        run,
        list(units) or None,
        quiet=quiet,
        timeout=timeout,
        on_landed=lambda st: live.echo(report.landed_line(st)),
        on_tick=lambda sts: live.tick_statuses(proj, run, sts),
    )
    live.done()
    answers = report.outputs(proj, run, result.units)
    if as_json:
        _echo_json(report.gather_json(run, result, answers))
        return result.code
    if result.code == watch.GAVE_UP:
        click.echo(f"gather {run}: gave up after {timeout:g}s; not every unit has landed")
        return result.code
    for st in result.units:
        click.echo(safe_line(report.answer_header(st)))
        click.echo(safe(answers[str(st["unit"])].rstrip("\n")))
    for line in report.attention_lines(run, result.attention, "gather"):
        click.echo(safe_line(line))
    return result.code


def _compare(proj: Project, run: str, *, quiet: float, timeout: float, as_json: bool) -> int:
    """wf gather RUN --compare: a run with no panel refused at once (a run not started
    yet waited for first), then gather's wait, then the panels side by side."""
    from wf.fanout import compare, report, watch

    waiting = f"gather {run}: waiting for run {run} to start (wf run, wf dispatch)"
    left = watch.wait_for_start(proj, run, timeout, on_wait=None if as_json else lambda: click.echo(waiting))
    if left is None:
        if as_json:
            _echo_json(compare.run_json(run, watch.GAVE_UP, []))
        else:
            click.echo(f"gather {run}: gave up after {timeout:g}s; run {run} has not started")
        return watch.GAVE_UP
    if not compare.has_panel(proj, run):
        raise compare.NoPanel(run)
    live = Live(as_json)
    result = watch.gather(
        proj,
        run,
        None,
        quiet=quiet,
        timeout=left,
        on_landed=lambda st: live.echo(report.landed_line(st)),
        on_tick=lambda sts: live.tick_statuses(proj, run, sts),
    )
    live.done()
    panels = compare.compare_run(proj, run, result.units)
    code = compare.exit_code(result.code, panels)
    if as_json:
        _echo_json(compare.run_json(run, code, panels))
        return code
    for n, panel in enumerate(panels):
        if n:
            click.echo("")
        for line in compare.table(run, panel):
            click.echo(safe_line(line))
    if result.code == watch.GAVE_UP:
        click.echo(f"gather {run}: gave up after {timeout:g}s; not every unit has landed")
    return code
