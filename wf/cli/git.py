"""Worktrees, merges and the doctor: wt add|list|prune, merge, doctor."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from wf.base.errors import UsageError, WfError
from wf.base.text import safe
from wf.cli.base import _echo_json, _Group, _n, _on_wait, _project, cli

if TYPE_CHECKING:
    from wf.base.project import Project

# ---------------------------------------------------------------- git: worktrees, merge, doctor


@cli.group(cls=_Group)
def wt() -> None:
    """Lane worktrees (or clones) in .worktrees/: add, list, rm, prune.

    \b
    Example: wf wt list
    """


@wt.command("add")
@click.argument("lane")
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the tree's record as JSON.")
@click.pass_context
def wt_add(ctx: click.Context, lane: str, task_id: str, as_json: bool) -> None:
    """Ready a tree for task ID in LANE and print where it is.

    Reuses .worktrees/LANE when it is free (a new branch LANE/ID from the main
    branch's current commit, no tracking config), else the next free LANE-2,
    LANE-3, ... A tree is busy while a task holds it, a live process has its cwd
    in it, a Claude Code session points into it, or it has uncommitted changes.
    Asking again for the same task gives the same tree (never a second one).
    The tree is free again once its task is archived, set awaiting, blocked, wip
    or pending again (its branch stays while it has commits main lacks).

    \b
    Example: wf status fetch-retry progress me && wf wt add sonnet fetch-retry
    """
    from wf.tasks import backlog
    from wf.tasks.taskfile import check_id
    from wf.trees import worktrees

    proj = _project(ctx)
    check_id(lane, "lane")
    backlog.load(proj).doc.task(check_id(task_id, "task id"))
    if proj.config.lane(lane) is None:
        raise WfError(f"no lane {lane!r} (wf lanes)")
    rec = worktrees.allocate(proj, lane, task_id, on_wait=_on_wait)
    if as_json:
        _echo_json(rec.as_dict())
    else:
        click.echo(safe(f"{rec.path}  branch {rec.branch}  base {rec.base[:12] if rec.base else '-'}"))


@wt.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_context
def wt_list(ctx: click.Context, as_json: bool) -> None:
    """Each tree: name, branch, task, free or busy (and by whom), dirty paths,
    commits behind main, size on disk.

    \b
    Example: wf wt list --json
    """
    from wf.trees import treeadmin

    rows = treeadmin.listing(_project(ctx))
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo("no worktrees (wf wt add LANE ID makes one)")
        return
    table = [["tree", "branch", "task", "state", "dirty", "behind", "size"]]
    for r in rows:
        state = r["state"] + (f" ({r['by']})" if r["by"] else "")
        table.append(
            [
                r["name"] + (" [clone]" if r["isolation"] == "clone" else ""),
                r["branch"] or "(detached)" if r["state"] in ("free", "busy") else "-",
                r["task"] or "-",
                state,
                "-" if r["dirty"] is None else str(r["dirty"]),
                "-" if r["behind"] is None else str(r["behind"]),
                _size(r["size"]),
            ]
        )
    from wf.base.text import table as aligned

    for line in aligned(table):
        click.echo(safe(line))


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{n}B"


@wt.command("rm")
@click.argument("name")
@click.pass_context
def wt_rm(ctx: click.Context, name: str) -> None:
    """Remove the free tree .worktrees/NAME (and its record).

    \b
    Refused, saying why, when the tree is busy (a task in progress holds it, a
    process runs in it, a Claude Code session points into it), has uncommitted
    changes, or has commits not in the main branch. The branch of an archived,
    merged task goes with it; any other branch is kept.
    Example: wf wt rm sonnet-2
    """
    from wf.trees import treeadmin

    click.echo(treeadmin.remove(_project(ctx), name))


@wt.command("prune")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.pass_context
def wt_prune(ctx: click.Context, dry_run: bool) -> None:
    """Remove free, clean trees whose HEAD is already in main, stale git
    registrations, and backup refs (refs/wf/backup/) older than backup_days
    (wf.toml, default 14) whose commits main holds. Never a tree with
    uncommitted or unmerged work, never a backup main lacks.

    \b
    Example: wf wt prune --dry-run
    """
    from wf.trees import treeadmin

    done = treeadmin.prune(_project(ctx), dry_run=dry_run)
    for line in done or ["nothing to prune"]:
        click.echo(safe(("would " if dry_run and done else "") + line))


@cli.command("merge")
@click.argument("target", metavar="[ID|BRANCH]", required=False)
@click.option(
    "--no-gate", is_flag=True, help="Do not start the gate (wf.toml's gate command) after the merge."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def merge_cmd(ctx: click.Context, target: str | None, no_gate: bool, as_json: bool) -> None:
    """Merge task branch LANE/ID into the main branch in the main checkout.

    \b
    Without an argument, merges the branch of the worktree you are in.
    - a merge commit "<id>: <title>" on main (computed in memory first: a
      conflict changes nothing and lists the conflicting paths, exit 1);
    - refused if main's uncommitted changes touch files the merge changes;
    - backup refs under refs/wf/backup/ before anything moves;
    - the task archived and TASKS.md + the archive committed (nothing else);
    - the worktree left detached at the new main commit, the branch deleted
      (git branch -d: never unmerged work);
    - a task whose text has errors (a person's typo) is archived all the same,
      its text kept under its line in the archive;
    - backup refs older than backup_days (wf.toml) that main holds deleted;
    - the gate (wf.toml's gate) started in the background at the new main
      commit, as wf orch post does (--no-gate: not started, and said so).
    Running it again after success, failure or a kill finishes what is left.
    With shared = "origin" in wf.toml (docs/machines.md): the branch is pushed
    to the remote first, main brought level with the remote's before the merge
    and pushed with a lease after it; a lost race is redone on the new main.
    Examples:
      wf merge fetch-retry
      cd .worktrees/sonnet && wf merge
      wf merge fetch-retry --no-gate   # a merge whose gate run is not wanted now
    """
    from wf.trees import merge

    proj = _project(ctx)
    outcome = merge.merge(proj, target, Path(ctx.obj.get("dir") or "."), on_wait=_on_wait)
    started, at = "none", None  # no gate in wf.toml: wf.orch is not even imported (~35 ms)
    if proj.config.gate:
        from wf.orch import gate

        done, at = gate.after_merge(proj, skip=no_gate)
        started = done.value
    if as_json:
        _echo_json({**outcome.as_dict(), "gate": started, "gate_commit": at})
        return
    sha = (outcome.merge_commit or "-")[:12]
    verb = "already merged" if outcome.already else "merged"
    click.echo(f"{verb} {outcome.branch} as {sha}")
    for n in outcome.notes:
        click.echo(safe(f"note: {n}"))
    said = {
        "started": f"gate: `{proj.config.gate}` started at {(at or '-')[:12]} in the background "
        "(wf orch status shows its result)",
        "already": f"gate: {(at or '-')[:12]} has a result or a run under way (wf orch status)",
        "skipped": f"gate: not run (--no-gate); `{proj.config.gate}` was not started",
    }.get(started)
    if said:
        click.echo(safe(said))


@cli.command("sync")
@click.option(
    "--ours", "ours", multiple=True, metavar="ID", help="On a conflict in task ID, keep this machine's text."
)
@click.option(
    "--theirs",
    "theirs",
    multiple=True,
    metavar="ID",
    help="On a conflict in task ID, take the remote's text.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome (or the conflicts) as JSON.")
@click.pass_context
def sync_cmd(ctx: click.Context, ours: tuple[str, ...], theirs: tuple[str, ...], as_json: bool) -> None:
    """Share the backlog with the other machines: fetch, merge TASKS.md by task, push with a lease.

    \b
    Needs shared = "<remote>" in wf.toml. One round:
    - fetch the remote's main (and its cost log ref);
    - merge TASKS.md task by task with it: tasks added on either side are kept,
      a Status both changed: the newer wins, notes are a union; a person's text
      both changed is a conflict (exit 4, both texts shown, nothing written);
    - the archive and out/wf-cost.log: unions without duplicates;
    - commit that on main (TASKS.md and the archive, with this machine's
      uncommitted edits of them), the working files following;
    - push main and the cost log, each a lease on what was fetched; if another
      machine pushed first: fetch, merge and push again.
    Never --force; nothing is pushed before what was fetched is merged.
    Examples:
      wf sync
      wf sync --theirs fetch-retry   # a conflict in fetch-retry: take the remote's text
      wf sync --json
    """
    from wf.tasks.merge3 import Side
    from wf.tasks.taskfile import check_id
    from wf.trees import sync

    both = set(ours) & set(theirs)
    if both:
        raise UsageError(f"--ours and --theirs both name {', '.join(sorted(both))}")
    take = {check_id(i): Side.OURS for i in ours} | {check_id(i): Side.THEIRS for i in theirs}
    try:
        outcome = sync.sync(_project(ctx), take=take, on_wait=_on_wait)
    except sync.SyncConflict as e:
        if not as_json:
            raise
        _echo_json({"state": "conflict", "conflicts": [c.as_dict() for c in e.conflicts], "paths": e.paths})
        ctx.exit(e.exit_code)
    _see_claims(_project(ctx))
    if as_json:
        _echo_json(outcome.as_dict())
        return
    click.echo(f"{outcome.state.value}: {outcome.main} at {outcome.commit[:12]} on {outcome.remote}")
    for word, ids in (("from the remote", outcome.added), ("deleted on the remote", outcome.removed)):
        if ids:
            click.echo(safe(f"tasks {word}: {', '.join(ids)}"))
    if outcome.archived or outcome.cost_lines:
        click.echo(
            f"from the remote: {_n(outcome.archived, 'archive line')}, {_n(outcome.cost_lines, 'cost line')}"
        )


@cli.command()
@click.option("--fix", is_flag=True, help="Repair what can be repaired safely.")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool, as_json: bool) -> int:
    """Reconcile tree records, worktrees, LANE/* branches, live pids and stale git
    lock files; one line per disagreement, repaired with --fix. Exit 1 if anything
    needs attention and was not fixed.

    \b
    --fix never removes work: it releases trees whose task let go, deletes the
    merged branches of archived tasks, archives a task whose branch was merged but
    that was left unarchived (not while it is in progress), deletes backup refs
    older than backup_days that main holds (all are counted), forgets
    registrations whose folder is gone and removes stale git locks; what it
    leaves says why.
    Example: wf doctor --fix
    """
    from wf.doctor import checks as doctormod
    from wf.doctor import lanes as health

    proj = _project(ctx)
    findings = doctormod.run(proj, fix=fix)
    if proj.is_git:
        findings += health.findings(proj, fix=fix)
    if as_json:
        _echo_json([f.as_dict() for f in findings])
    else:
        for f in findings:
            click.echo(safe(str(f)))
    problems = sum(1 for f in findings if not f.fixed and f.level == "problem")
    if not as_json:
        click.echo("all consistent" if not problems else f"{_n(problems, 'problem')} to look at")
    return 1 if problems else 0


def _see_claims(proj: Project) -> None:
    """After a sync, what wf list and wf lanes show of other machines' claims is fetched
    too (the claim refs; a remote that went away meanwhile leaves the last look)."""
    from wf.trees import claims
    from wf.trees.remote import RemoteError

    try:
        claims.refresh(proj)
    except RemoteError:
        pass
