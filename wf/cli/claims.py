"""Claims across machines: claims (list), claims steal, claims release, claims renew."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from wf.base.text import safe
from wf.cli.base import _echo_json, _Group, _on_wait, _print, _project, _warn, cli

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.trees.claims import Claim


def _record(c: Claim, now: float, last: float, stale_after: float) -> dict[str, Any]:
    return {**asdict(c), "silent": round(now - last, 1), "stale": now - last > stale_after}


@cli.group(cls=_Group, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of claims.")
@click.pass_context
def claims(ctx: click.Context, as_json: bool) -> None:
    """The claims on the shared remote: who holds each task, on which machine, since when.

    A claim is a ref (claim_refs/ID) on the remote named by shared in wf.toml, made by
    compare-and-swap: of machines claiming one task, exactly one wins.

    \b
    Example:
      wf claims --json
      wf claims steal fetch-retry alice
    """
    if ctx.invoked_subcommand is not None:
        return
    from wf.trees import claims as claimsmod

    proj = _project(ctx)
    everything = claimsmod.refresh(proj)
    now = time.time()
    records = [
        _record(c, now, claimsmod.last_sign(everything, c.machine), proj.config.claim_stale)
        for _, c in sorted(everything.items())
    ]
    lines = [safe(f"{r['task']}  {r['machine']}  {r['who']}  silent {int(r['silent'])} s"
                  + ("  STALE" if r["stale"] else "")) for r in records]  # fmt: skip
    _print(as_json, records, lines or ["no claims"])


@claims.command("steal")
@click.argument("task_id", metavar="ID")
@click.argument("who")
@click.option("--json", "as_json", is_flag=True, help="Print the new claim as JSON.")
@click.pass_context
def steal(ctx: click.Context, task_id: str, who: str, as_json: bool) -> None:
    """Take over the claim of task ID for WHO on this machine, when the machine holding it
    has been silent longer than claim_stale (a lease on the claim seen: if it moved
    meanwhile, nothing is taken). The task's Status becomes 'in progress: WHO since ...'.

    \b
    Example:
      wf claims steal fetch-retry alice
    """
    from wf.tasks import backlog, ops
    from wf.trees import claims as claimsmod

    proj = _project(ctx)
    backlog.load(proj).doc.task(task_id)  # an open task here, before anything is taken
    claim = claimsmod.steal(proj, task_id, who)
    ops.set_status(proj, task_id, "progress", who, force=True, on_wait=_on_wait)
    _print(as_json, asdict(claim), [safe(f"stolen: {claim.line()}")])


@claims.command("release")
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the released claim as JSON.")
@click.pass_context
def release(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Delete the claim ref of task ID (a lease on the claim seen): one this machine
    holds, or any machine's when ID is no open task here (a ref left behind).

    \b
    Example:
      wf claims release fetch-retry
    """
    from wf.tasks import backlog
    from wf.trees import claims as claimsmod

    proj = _project(ctx)
    open_here = backlog.load(proj).doc.find(task_id) is not None
    gone = claimsmod.release(proj, task_id, mine_only=open_here)
    data = asdict(gone) if gone else None
    _print(as_json, data, [safe(f"released: {gone.line()}") if gone else f"{task_id}: no claim ref"])


@claims.command("renew")
@click.option("--json", "as_json", is_flag=True, help="Print the renewed claims as JSON.")
@click.pass_context
def renew(ctx: click.Context, as_json: bool) -> None:
    """Make this machine's claims anew with the time now: a sign of life, so that a long
    task is not taken for the claim of a silent machine.

    \b
    Example:
      wf claims renew
    """
    from wf.trees import claims as claimsmod

    done = claimsmod.renew(_project(ctx))
    _print(as_json, [asdict(c) for c in done], [safe(f"renewed: {c.line()}") for c in done] or ["no claims"])


def shared_status(
    proj: Project, task_id: str, state: str, note: str | None, force: bool, as_json: bool
) -> None:
    """``wf status`` with a shared remote (called by wf.cli.tasks): a claim is a ref too."""
    from wf.trees import claims

    st, claim, settled = claims.set_status(proj, task_id, state, note, force=force, on_wait=_on_wait)
    if settled is claims.Settled.OFFLINE:
        _warn(
            f"{task_id}: the shared remote is unreachable; its claim ref stays (wf claims release {task_id})"
        )
    if as_json:
        machine = claim.machine if claim else None
        _echo_json({"id": task_id, "state": st.state, "status": str(st), "machine": machine})
    else:
        click.echo(safe(f"{task_id}: {st}" + (f" (on {claim.machine})" if claim else "")))
