"""The runs group: recent runs, a fresh run folder, one run's units (status, an answer,
a clone's diff), and retrying what did not land.

Exit codes (shared/conventions.md): 0 every unit done; 4 a unit needs attention; 130
interrupted.
"""

from __future__ import annotations

import click

from wf.base.text import safe, safe_line
from wf.cli.base import _echo_json, _Group, _project, cli
from wf.cli.workers import Live, outcome_report


@cli.group(cls=_Group, invoke_without_command=True)
@click.option("-n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="How many runs.")
@click.option("--json", "as_json", is_flag=True, help='A JSON list: {"run", "units", "states"} per run.')
@click.pass_context
def runs(ctx: click.Context, count: int, as_json: bool) -> None:
    """Recent runs (newest first); subcommands show one run's units.

    \b
    wf runs status r1 · wf runs output r1 u1 · wf runs retry r1 --failed
    """
    if ctx.invoked_subcommand is not None:
        return
    from wf.fanout import report

    rows = report.recent_runs(_project(ctx), count)
    if as_json:
        _echo_json([row.as_json() for row in rows])
        return
    if not rows:
        click.echo("no runs yet (wf dispatch, wf run)")
    for row in rows:
        click.echo(safe_line(row.line()))


@runs.command("new")
@click.argument("name", required=False, default="run")
@click.option("--json", "as_json", is_flag=True, help='{"run": ID, "folder": PATH}.')
@click.pass_context
def runs_new(ctx: click.Context, name: str, as_json: bool) -> None:
    """Make a fresh, empty run folder and print its path (its name is the run id).

    \b
    RUN=$(basename "$(wf runs new review)"); wf dispatch "$RUN" u1 prompt.md
    """
    from wf.fanout.manifest import new_run

    run, folder = new_run(_project(ctx), name)
    if as_json:
        _echo_json({"run": run, "folder": str(folder)})
    else:
        click.echo(str(folder))


@runs.command("status")
@click.argument("run")
@click.option(
    "--json", "as_json", is_flag=True, help="A JSON list of the units' status.json, with result and verdict."
)
@click.pass_context
def runs_status(ctx: click.Context, run: str, as_json: bool) -> None:
    """Each unit's state (with the failure in the tool's own words; 'invalid' and
    why for a done unit whose answer breaks the return contract), time, cost, a
    preview of its answer, and changes it left in a checkout it did not own; the
    run's total. Units whose supervisor is gone are marked lost first.

    \b
    wf runs status r1 --json | jq '.[] | select(.state != "done") | .unit'
    """
    from wf.fanout import ledger, report
    from wf.fanout.watch import repair_lost
    from wf.workers import runs as runsmod

    proj = _project(ctx)
    repair_lost(proj, run)
    units = ledger.annotate(proj, run, runsmod.units(proj, run))
    if as_json:
        _echo_json(units)
        return
    for line in report.status_lines(proj, run, units):
        click.echo(safe_line(line))
    click.echo(report.total_line(run, units))
    for line in report.legend(units):
        click.echo(line)


@runs.command("output")
@click.argument("run")
@click.argument("unit")
@click.option("--log", "show_log", is_flag=True, help="The raw worker.log instead of the answer.")
@click.pass_context
def runs_output(ctx: click.Context, run: str, unit: str, show_log: bool) -> None:
    """A unit's answer (output.txt), or with --log its raw stream.

    \b
    wf runs output r1 u1 > answer.md
    """
    from wf.fanout import report

    click.echo(safe(report.unit_file(_project(ctx), run, unit, log=show_log)), nl=False)


@runs.command("diff")
@click.argument("run")
@click.argument("unit")
@click.pass_context
def runs_diff(ctx: click.Context, run: str, unit: str) -> None:
    """What a clone unit changed in its clone (commits, untracked files, the diff).

    \b
    wf runs diff r1 refactor
    """
    from wf.fanout.diff import diff

    click.echo(safe(diff(_project(ctx), run, unit)), nl=False)


@runs.command("retry")
@click.argument("run")
@click.argument("units", nargs=-1)
@click.option("--failed", is_flag=True, help="Units whose latest attempt is not done, or is a FALLBACK.")
@click.option("--missing", is_flag=True, help="Units of the run's manifest that never started.")
@click.option(
    "--invalid",
    is_flag=True,
    help="Every unit wf gather names: an answer that breaks the return contract, or no result.",
)
@click.option(
    "--resume/--fresh", default=False, help="Continue the last attempt's session, or start over (default)."
)
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Attempts beyond the first.",
)
@click.option(
    "--max-parallel", type=click.IntRange(min=1), default=4, show_default=True, help="Units at once."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object at the end: run, code, units, skipped."
)
@click.pass_context
def runs_retry(
    ctx: click.Context,
    run: str,
    units: tuple[str, ...],
    failed: bool,
    missing: bool,
    invalid: bool,
    resume: bool,
    max_retries: int,
    max_parallel: int,
    as_json: bool,
) -> int:
    """Re-run what did not land, as new units (UNIT-r1, UNIT-r2, ...) that record
    retry_of and their count, keeping the earlier attempts; without UNITs and
    flags, all of --failed, --missing and --invalid. Exit 0 all retried units done
    (whether their answers keep the contract is wf gather's), 4 one failed or was
    not retried, 130 on Ctrl-C.

    \b
    wf runs retry r1 --failed
    wf runs retry r1 --invalid      # exactly the units wf gather named
    wf runs retry r1 u3 --resume --max-retries 3
    """
    from wf.fanout import fanout, report

    live = Live(as_json)
    proj = _project(ctx)
    outcome = fanout.retry(
        proj,
        run,
        list(units),
        failed=failed,
        missing=missing,
        invalid=invalid,
        resume=resume,
        max_retries=max_retries,
        max_parallel=max_parallel,
        on_end=lambda u: live.echo(report.unit_line(u.status)),
        on_tick=live.tick_units,
    )
    live.done()
    if not outcome.units and not outcome.skipped and not as_json:
        click.echo(f"run {run}: nothing to retry")
    outcome_report(proj, outcome, as_json)
    return outcome.code
