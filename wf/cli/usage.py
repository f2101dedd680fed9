"""Usage and cost: wf usage."""

from __future__ import annotations

import time
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
    from wf.cost import costlog, usage

    if (since or project) and not report:
        raise click.UsageError("--since and --project go with --report")
    if report:
        first_day = None
        if since is not None:
            try:
                first_day = costlog.since_date(since)
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="--since") from None
        recs, bad = costlog.records(first_day, project)
        rows = costlog.report(recs, by)
        if as_json:
            _echo_json(rows)
        else:
            for line in costlog.report_text(rows, by) or [_nothing_found(first_day, project)]:
                click.echo(safe_line(line))
            for line in costlog.disagreements(recs):
                click.echo(safe_line(line))
        for problem in bad:
            _warn(safe_line(problem))
        return 0
    sources = [x for x in (agent, session, thread, file_) if x]
    if len(sources) != 1:
        raise click.UsageError("give exactly one of --agent, --session, --thread, --file (or --report)")
    if agent:
        cost, kind = usage.for_agent(agent)
    elif session:
        cost, kind = usage.claude_cost(usage.session_files(session)), "session"
    elif thread:
        cost, kind = usage.codex_cost(usage.thread_file(thread)), "codex"
    else:
        cost, kind = usage.for_file(Path(str(file_)))
        if cost.turns == 0 and cost.malformed:
            raise WfError(
                f"{file_}: no API requests and {cost.malformed} unreadable line(s): not a transcript?"
            )
    proj_root: Path | None = None
    try:
        proj_root = _project(ctx).root
    except WfError:
        if log_:
            raise

    rec = costlog.line_for(
        cost,
        ts=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        project=proj_root.name if proj_root else "-",
        task_id=task_id,
        agent=agent or session or thread or Path(str(file_)).stem,
        kind=kind,
        lane=lane,
        effort=effort,
        done=None if done is None else done == "1",
        duration=duration,
    )
    if log_ and proj_root is not None:
        costlog.append(proj_root, rec)
        unwritable = costlog.state_problem()
        if unwritable is not None:
            log = proj_root / "out" / "wf-cost.log"
            _warn(f"{unwritable}; the cost line is in {log}, but wf usage --report across projects misses it")
    for line in costlog.price_warnings(cost):
        _warn(line)
    if cost.malformed:
        _warn(f"{cost.malformed} malformed line(s) skipped")
    if as_json:
        _echo_json({**rec, "malformed": cost.malformed, "files": cost.files})
        return 0
    tilde = "~" if cost.est else ""
    mark = costlog.MARKS[cost.source]
    click.echo(
        safe_line(
            f"{kind} {rec['agent']}  model {cost.model or '-'}  turns {cost.turns}  dur {rec['dur_s']}s"
        )
    )
    click.echo(
        f"in {cost.inp}  out {tilde}{cost.out + cost.est}"
        + (f" ({cost.out} reported)" if cost.est else "")
        + f"  cache writes 5m {cost.cw5m} 1h {cost.cw1h}  cache reads {cost.cr}"
    )
    click.echo(
        f"usd {tilde}{cost.usd:.4f}{mark}"
        + (f" (reported output only: {cost.usd_rep:.4f}{mark})" if cost.est else "")
    )
    if len(cost.by_model) > 1:
        click.echo(
            safe_line(
                "by model: "
                + ", ".join(
                    f"{m} {t} turns usd {tilde}{u:.4f}{costlog.model_mark(cost, m)}"
                    for m, t, u, _ in cost.by_model
                )
            )
        )
    for line in costlog.legends([cost.source], bool(cost.est)):
        click.echo(line)
    return 0


def _nothing_found(since: str | None, project: str | None) -> str:
    """Why the report is empty: no line at all, or none passed the filters (say which)."""
    from wf.cost import costlog

    everything, _ = costlog.records()
    if not everything:
        return "no cost lines yet (wf usage --log, wf orch post --agent)"
    what = " and ".join(
        x for x in (f"since {since}" if since else "", f"for project {project}" if project else "") if x
    )
    projects = sorted({r.get("project", "-") for r in everything})
    days = sorted(r.get("ts", "")[:10] for r in everything)
    return (
        f"no cost lines {what} (the logs have {len(everything)}, from {days[0]} to {days[-1]}; "
        f"projects: {', '.join(projects)})"
    )
