"""The cloud lane: wf cloud ledger | send | pull (wf orch pick/post cloud are the same
send and post, from the orchestration loop)."""

from __future__ import annotations

import click

from wf.base.errors import UsageError
from wf.base.quantity import parse_duration
from wf.base.text import safe
from wf.cli.base import _echo_json, _Group, _on_wait, _print, _project, cli


@cli.group(cls=_Group)
def cloud() -> None:
    """The cloud lane: tasks run as Claude Code cloud sessions (cloud = true in wf.toml).

    \b
    wf cloud ledger               -> spend this period against cloud_budget and cloud_reserve
    wf cloud send [ID]            -> the first fitting task goes to a new cloud session
    wf cloud pull ID... | --all   -> each session's state; what ended comes back as cloud/<id>
    wf orch post cloud            -> posts what ended (merge, or back to its local lane)

    \b
    Example:
      wf config cloud true && wf config cloud_budget 50 && wf cloud send
    """


@cloud.command("ledger")
@click.option("--json", "as_json", is_flag=True, help="Print the ledger as JSON.")
@click.pass_context
def cloud_ledger(ctx: click.Context, as_json: bool) -> int:
    """Spend of the cloud sessions that ended this period (out/wf-cloud.log) against
    cloud_budget, what is left, the reserve, and whether the cloud lane may send.
    A session of unknown cost (usd=?) counts as the whole budget; a line that cannot be
    read (usd=nan, a negative cost, a line cut short) is named, and the exit is 1.

    \b
    Example:
      wf cloud ledger --json
    """
    from wf.cloud import ledger, records

    proj = _project(ctx)
    running = sum(1 for r in records.all_records(proj) if not r.state.ended)
    led = ledger.read(proj, running)
    _print(as_json, led.as_dict(), led.lines())
    return 1 if led.bad else 0


@cloud.command("send")
@click.argument("task_id", metavar="[ID]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print what was sent (or why not) as JSON.")
@click.pass_context
def cloud_send(ctx: click.Context, task_id: str | None, as_json: bool) -> None:
    """Send a task to a new Claude Code cloud session: ID, or the first fitting one
    across all lanes (runner-ready, an opus-class model unless cloud_models says
    otherwise, 'Cloud: yes' first, then Prio, then the larger Effort). It is claimed
    'in progress: cloud:<session>' and recorded in .wf/cloud/<id>.json. Prints what was
    sent, or 'stop lane cloud: <why>' (exit 0; exit 1 when the tool refused).

    \b
    Example:
      wf cloud send fetch-retry
    """
    from wf.cloud.lane import send

    sent = send(_project(ctx), task_id, on_wait=_on_wait)
    p = sent.pick
    if as_json:
        _echo_json(
            {
                "stop": p.stop.text if p.stop else None,
                "stop_kind": p.stop.kind.name.lower() if p.stop else None,
                "record": sent.record.as_dict() if sent.record else None,
            }
        )
    else:
        click.echo(safe(p.text()), nl=not p.text().endswith("\n"))
    if p.stop is not None and p.stop.kind.error:
        ctx.exit(1)


@cloud.command("pull")
@click.argument("ids", metavar="[ID]...", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Pull every cloud session wf sent.")
@click.option("--watch", is_flag=True, help="Pull and post every --interval until no session is left.")
@click.option("--interval", metavar="DURATION", default="10m", show_default=True, help="With --watch.")
@click.option("--for", "for_", metavar="DURATION", default="24h", show_default=True, help="With --watch.")
@click.option("--json", "as_json", is_flag=True, help="Print the pull as JSON.")
@click.pass_context
def cloud_pull(
    ctx: click.Context, ids: tuple[str, ...], all_: bool, watch: bool, interval: str, for_: str, as_json: bool
) -> None:
    """Read each session's state; one that ended comes back as the branch cloud/<id>,
    its cost goes to out/wf-cloud.log, and it waits for 'wf orch post cloud'. One line
    per session: '<id>: <state> (<duration>, $<cost>)', state running, done, awaiting,
    handback or lost. Exit 4 while some still run. A pull of an id another pull holds
    says so and skips it.

    \b
    Example:
      wf cloud pull --all
    """
    from wf.cloud import pull

    proj = _project(ctx)
    if watch:
        if ids or as_json:
            raise UsageError("--watch pulls every session; it takes no ID and no --json")
        code = pull.watch(
            proj,
            interval=parse_duration(interval, "--interval"),
            duration=parse_duration(for_, "--for"),
            on_line=click.echo,
        )
        ctx.exit(code)
    if bool(ids) == all_:
        raise UsageError("give the ids to pull, or --all")
    result = pull.pull(proj, None if all_ else list(ids))
    _print(as_json, result.as_dict(), result.lines)
    ctx.exit(result.exit_code)
