"""Usage and cost: wf usage."""

from __future__ import annotations

from pathlib import Path

import click

from wf.base.errors import WfError
from wf.base.text import safe_line
from wf.cli.base import _echo_json, _project, _warn, cli

# ---------------------------------------------------------------- usage and cost


@cli.command("usage")
@click.option("--agent", metavar="ID", help="A Claude Code subagent (found under the Claude roots).")
@click.option("--session", metavar="ID", help="A claude -p session: its transcript and its subagents'.")
@click.option("--thread", metavar="ID", help="A Codex thread (its rollout under $CODEX_HOME).")
@click.option("--file", "file_", metavar="PATH", type=click.Path(dir_okay=False), help="A transcript file.")
@click.option("--log", "log_", is_flag=True, help="Append the key=value line to out/wf-cost.log.")
@click.option("--id", "task_id", metavar="ID", help="Task id for the log line.")
@click.option("--lane", help="Lane for the log line.")
@click.option("--effort", help="Effort for the log line.")
@click.option("--done", type=click.Choice(["0", "1"]), help="Whether the task got done (1) or not (0).")
@click.option("--duration", type=click.FloatRange(min=0), help="Wall seconds (default: from the transcript).")
@click.option("--report", is_flag=True, help="The report over every project's cost log instead.")
@click.option(
    "--since",
    metavar="DATE",
    help="With --report: only lines from this day on (YYYY-MM-DD, today, yesterday, 7d).",
)
@click.option("--project", metavar="P", help="With --report: only this project (name or path).")
@click.option(
    "--by",
    type=click.Choice(["lane", "model", "run"]),
    default="lane",
    show_default=True,
    help="With --report: group by lane (and model, effort), by model, or by fan-out run.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object (the log line's keys), or the report rows."
)
@click.pass_context
def usage_cmd(
    ctx: click.Context,
    agent: str | None,
    session: str | None,
    thread: str | None,
    file_: str | None,
    log_: bool,
    task_id: str | None,
    lane: str | None,
    effort: str | None,
    done: str | None,
    duration: float | None,
    report: bool,
    since: str | None,
    project: str | None,
    by: str,
    as_json: bool,
) -> int:
    """What a worker really spent, from its own transcript; or --report.

    Each API request is counted once (transcripts repeat it on several lines), output a
    subagent's transcript never got is estimated (shown with '~'; a lower bound where
    thinking is hidden), and every request is priced from wf's price table plus your
    ~/.config/wf/prices.toml (a model's exact name or a dated variant of it, never a
    prefix). A model the table lacks is priced by the tool's own figure where it reported
    one (marked '*'), else counted as 0 and named (unpriced=..., marked '?').

    \b
    The report groups every known project's out/wf-cost.log by lane, model and effort
    (--by model, --by run: fan-out units of wf run/dispatch): n, done, median and total $,
    $ per done task, median turns and duration; a group whose sessions ran subagents on
    other models also gets its $ per model; then the lines whose tool-reported cost and
    transcript cost disagree (cost_check). --since takes YYYY-MM-DD, today, yesterday or
    Nd (N days ago, UTC).

    \b
    Examples:
      wf usage --session 3f1c... --json
      wf usage --report --since 7d --project app
      wf usage --report --by run --since 2026-01-01
    """
    from wf.cost import report as costreport

    if (since or project) and not report:
        raise click.UsageError("--since and --project go with --report")
    if report:
        return _report(since, project, by, as_json)
    if len([x for x in (agent, session, thread, file_) if x]) != 1:
        raise click.UsageError("give exactly one of --agent, --session, --thread, --file (or --report)")
    cost, kind = costreport.transcript_cost(agent=agent, session=session, thread=thread, file=file_)
    proj_root: Path | None = None
    try:
        proj_root = _project(ctx).root
    except WfError:
        if log_:
            raise
    measured = costreport.measure(
        cost,
        kind,
        name=agent or session or thread or Path(str(file_)).stem,
        root=proj_root,
        log=log_,
        task_id=task_id,
        lane=lane,
        effort=effort,
        done=None if done is None else done == "1",
        duration=duration,
    )
    for line in measured.warnings:
        _warn(line)
    if as_json:
        _echo_json(measured.as_json())
    else:
        for line in measured.lines():
            click.echo(safe_line(line))
    return 0


def _report(since: str | None, project: str | None, by: str, as_json: bool) -> int:
    """wf usage --report: the rows as JSON or the table, then the unreadable log lines."""
    from wf.cost import costlog
    from wf.cost import report as costreport

    first_day = None
    if since is not None:
        try:
            first_day = costlog.since_date(since)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--since") from None
    found = costreport.cost_report(since=first_day, project=project, by=by)
    if as_json:
        _echo_json(found.rows)
    else:
        for line in found.lines():
            click.echo(safe_line(line))
    for problem in found.problems:
        _warn(safe_line(problem))
    return 0
