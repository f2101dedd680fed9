"""The orchestration loop: orch pick|post|status|run, gate-run, install, demo."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from wf.base.config import ADAPTERS
from wf.base.errors import WfError
from wf.base.quantity import parse_duration
from wf.base.text import safe, safe_line
from wf.cli.base import _echo_json, _Group, _on_wait, _print, _project, cli

# ---------------------------------------------------------------- the orchestration loop


def _budget(value: str | None) -> float | None:
    """A --budget in dollars (UsageError for anything but a finite number above 0)."""
    from wf.night.batchcost import parse_budget

    return None if value is None else parse_budget(value)


@cli.group(cls=_Group)
def orch() -> None:
    """The orchestration loop: pick a lane's next task, post its worker's report.

    \b
    wf orch pick [LANE]                    -> spawn line + worker prompt, or 'stop lane L: why'
    (spawn the wf-worker with that model; it ends with four lines:)
      result: done | awaiting | handback | wip | sliced
      commit: <sha or ->
      followups: <ids or ->
      note: <one line>
    wf orch post LANE --result R [--commit SHA] [--note TEXT] [--agent ID]
                                           -> checks, merges, logs, then the next pick
    wf orch run [LANES...]                 -> the same loop, headless, no agent needed

    \b
    Example:
      wf orch pick sonnet
    """


def _echo_pick(p: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(
            {
                "lane": p.lane,
                "stop": p.stop.text if p.stop else None,
                "stop_kind": p.stop.kind.name.lower() if p.stop else None,
                "record": p.record.as_dict() if p.record else None,
                "prompt": p.prompt or None,
            }
        )
    else:
        click.echo(safe(p.text()), nl=not p.text().endswith("\n"))


@orch.command("pick")
@click.argument("lane", required=False)
@click.option(
    "--id", "task_id", metavar="ID", help="Pick this task (it must be runner-ready and in the lane)."
)
@click.option(
    "--recovery", metavar="WHY", help="Re-pick the lane's crashed task in place (same tree and branch)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the pick as JSON.")
@click.pass_context
def orch_pick(
    ctx: click.Context, lane: str | None, task_id: str | None, recovery: str | None, as_json: bool
) -> None:
    """Claim the lane's first runner-ready task, ready its tree and branch, and print
    the spawn line and the worker prompt; or one line 'stop lane LANE: WHY' (exit 0).

    Without LANE: the first lane (in wf.toml's order) that has a runner-ready task.
    A lane has at most one active record (.wf/orch/LANE.json): two picks racing on a
    lane give exactly one winner; a pick that died half-way is finished, never doubled.

    \b
    Example:
      wf orch pick sonnet --json
    """
    from wf.cloud import PLUG
    from wf.orch.pick import pick

    picked = pick(_project(ctx), lane, task_id=task_id, recovery=recovery, on_wait=_on_wait, cloud=PLUG)
    _echo_pick(picked, as_json)


@orch.command("post")
@click.argument("lane")
@click.option(
    "--result",
    "result",
    type=click.Choice(["done", "awaiting", "handback", "wip", "sliced", "crashed"]),
    help="What the worker reported; crashed when it ended with no report.",
)
@click.option(
    "--report",
    metavar="TEXT|-",
    help="The worker's final message as it is ('-': stdin): result, commit and note are read from its "
    "four lines; with none, it is a handback 'no report'.",
)
@click.option("--commit", metavar="SHA", help="The commit the worker reported.")
@click.option("--note", metavar="TEXT", help="The worker's note line (the question, the reason).")
@click.option("--agent", metavar="ID", help="The worker subagent's id: its cost goes to out/wf-cost.log.")
@click.option("--duration", type=click.FloatRange(min=0), help="Seconds the worker took.")
@click.option("--no-pick", is_flag=True, help="Do not pick the lane's next task.")
@click.option(
    "--id", "task_id", metavar="ID", help="The task being posted; refused if the lane works on another."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def orch_post(
    ctx: click.Context,
    lane: str,
    result: str | None,
    report: str | None,
    commit: str | None,
    note: str | None,
    agent: str | None,
    duration: float | None,
    no_pick: bool,
    task_id: str | None,
    as_json: bool,
) -> None:
    """Post a worker's report: post-check (a done is merged here if the worker did not),
    set the task's status (never committed: only merges commit), log, then pick the
    lane's next task or print 'stop lane LANE: WHY'.

    \b
    done, checks green    -> next task       sliced      -> next task
    done, gate red        -> P0 fix task added, and it is the next pick
    awaiting / handback / wip / post-check red -> stop the lane, saying why
    crashed (no report)   -> one recovery pick in the same tree; twice -> blocked
    LANE cloud (cloud = true): posts the sessions 'wf cloud pull' saw end; no --result

    \b
    Example:
      wf orch post sonnet --id fetch-retry --report - < worker-final-message.txt
    """
    from wf.cloud import PLUG
    from wf.orch.post import post
    from wf.orch.report import report_or_handback

    if lane == "cloud" and _project(ctx).config.cloud:
        _post_cloud(ctx, result or report, task_id, no_pick, as_json)
        return
    if report is not None:
        rep = report_or_handback(sys.stdin.read() if report == "-" else report)
        result = result or rep.result
        commit = commit or rep.commit
        note = note or rep.note
    if result is None:
        raise click.UsageError("give --result R (or --report with the worker's four lines)")
    posted = post(
        _project(ctx),
        lane,
        result,
        commit=commit,
        note=note,
        agent=agent,
        duration=duration,
        no_pick=no_pick,
        task_id=task_id,
        on_wait=_on_wait,
        cloud=PLUG,
    )
    if as_json:
        nxt = posted.next
        _echo_json(
            {
                "lane": posted.lane,
                "task": posted.task,
                "outcome": posted.outcome.value,
                "commit": posted.commit,
                "lines": posted.lines,
                "next": None
                if nxt is None
                else {
                    "stop": nxt.stop.text if nxt.stop else None,
                    "stop_kind": nxt.stop.kind.name.lower() if nxt.stop else None,
                    "record": nxt.record.as_dict() if nxt.record else None,
                    "prompt": nxt.prompt,
                },
            }
        )
    else:
        click.echo(safe(posted.text()), nl=False)


def _post_cloud(
    ctx: click.Context, given: str | None, task_id: str | None, no_pick: bool, as_json: bool
) -> None:
    """The cloud lane's post: the result of each session comes from its pull."""
    from wf.cloud import lane

    if given is not None:
        raise click.UsageError("the cloud lane's results come from 'wf cloud pull'; drop --result/--report")
    posts = lane.post(_project(ctx), task_id, no_pick=no_pick, on_wait=_on_wait)
    if as_json:
        _echo_json(
            [
                {
                    "lane": p.lane,
                    "task": p.task,
                    "outcome": p.outcome.value,
                    "commit": p.commit,
                    "lines": p.lines,
                    "stop": p.next.stop.text if p.next and p.next.stop else None,
                    "stop_kind": p.next.stop.kind.name.lower() if p.next and p.next.stop else None,
                    "next": p.next.prompt if p.next and not p.next.stop else None,
                }
                for p in posts
            ]
        )
        return
    for p in posts:
        click.echo(safe(p.text()), nl=False)


@orch.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the active records as JSON.")
@click.pass_context
def orch_status(ctx: click.Context, as_json: bool) -> None:
    """Active lanes: task, age, tree, and whether a headless worker still lives;
    first, when the newest gate result is red, its command, exit and output's tail
    (the text only: --json lists the lanes, wf batch --status --json has the gate).

    \b
    Example:
      wf orch status --json
    """
    from wf.orch import state

    proj = _project(ctx)
    recs = state.status(proj)
    if as_json:
        _echo_json(recs)
        return
    if state.stop_file(proj).exists():
        click.echo("stop file out/wf-batch.stop is set: picks stop")
    from wf.orch import gate

    last = gate.latest(proj)
    if last is not None and last.ok is False:  # the newest gate result is red: say so first
        for line in gate.red_lines(proj, last):
            click.echo(safe_line(line))
    if not recs:
        click.echo("no active lanes")
    for r in recs:
        if "corrupt" in r:
            click.echo(
                safe_line(
                    f"{r['lane']}: record cannot be trusted: {r['corrupt']} ({r['path']}; wf doctor --fix)"
                )
            )
            continue
        alive = {True: "worker alive", False: "worker gone", None: "worker unknown"}[r["worker_alive"]]
        age = f"{r['age_s']}s" if r["age_s"] is not None else "-"
        click.echo(
            safe(
                f"{r['lane']}: {r['id']} {r['state']} {age} {alive} {r['worktree'] or '-'}"
                + (f" recovery: {r['recovery']}" if r["recovery"] else "")
                + (f" {r['parked']}" if r.get("parked") else "")
            )
        )


@orch.command("run")
@click.argument("lanes", nargs=-1)
@click.option(
    "--adapter",
    type=click.Choice(list(ADAPTERS)),
    help="The tool for every lane (default: each lane's adapter in wf.toml).",
)
@click.option(
    "--until-stop",
    is_flag=True,
    help="Keep going when lanes stop: wake a lane when runner-ready work appears for it, "
    "until the stop file.",
)
@click.option("--for", "for_", metavar="DURATION", help="Start no new task after this long (e.g. 90m, 8h).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Stop a worker after S seconds.")
@click.option(
    "--max-tasks", type=click.IntRange(min=1), help="Start at most N tasks (recoveries not counted)."
)
@click.option(
    "--budget",
    metavar="USD",
    callback=lambda ctx, param, v: _budget(v),
    help="Start no task when what this run spent plus the task's forecast would pass USD.",
)
@click.option("--dry-run", is_flag=True, help="Print the forecast of the tasks it would run; start nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print the forecast as JSON.")
@click.pass_context
def orch_run(
    ctx: click.Context,
    lanes: tuple[str, ...],
    adapter: str | None,
    until_stop: bool,
    for_: str | None,
    timeout: float | None,
    max_tasks: int | None,
    budget: float | None,
    dry_run: bool,
    as_json: bool,
) -> int:
    """Run the loop headless: pick, start the lane's worker, wait, read its four report
    lines (none = crashed), post, repeat; lanes in parallel, until every lane stops.

    One line per event (also kept in out/wf-orch-run.log, so a closed stdout loses
    nothing); a live status line on a terminal. Ctrl-C stops the workers and leaves
    their records: the next run takes them over in place.

    \b
    Exit codes:
      0  out of work, or told to stop (stop file, --for, --max-tasks)
      4  a person is needed (awaiting, handback, wip, blocked, post-check red)
      1  an error it could not get past (a tool not installed or logged in, ...)

    --budget (else wf.toml's budget) stops each lane, before its claim, at the first task
    whose forecast, added to what the run spent, would pass it (a normal stop: exit 0);
    wf.toml's weekly_reserve keeps that share of the plan's weekly window.

    \b
    Examples:
      wf orch run sonnet haiku --for 8h --until-stop
      wf orch run sonnet --max-tasks 3 --budget 5.00
      wf orch run sonnet --max-tasks 3 --dry-run
    """
    from wf.cloud import PLUG
    from wf.orch.loop import Loop
    from wf.tasks.taskfile import check_id

    proj = _project(ctx)
    names = [check_id(x, "lane") for x in lanes] or [ln.name for ln in proj.config.lanes]
    for name in names:
        if proj.config.lane(name) is None:
            raise WfError(f"no lane {name!r} (wf lanes)")
    if as_json and not dry_run:
        raise click.UsageError("--json goes with --dry-run (the loop itself prints event lines)")
    if dry_run:
        from wf.night import batchcost

        shown = batchcost.dry_run(proj, names, max_tasks, budget or proj.config.budget or None)
        _print(as_json, shown.as_dict(), shown.lines())
        return 0
    out = _Out()
    loop = Loop(
        proj,
        names,
        adapter=adapter,
        emit=out.line,
        until_stop=until_stop,
        for_seconds=parse_duration(for_, "--for") if for_ else None,
        timeout=timeout,
        max_tasks=max_tasks,
        cloud=PLUG,
        budget=budget or proj.config.budget or None,
        weekly_reserve=proj.config.weekly_reserve or None,
    )
    code = loop.run(tick=out.status)
    out.clear()
    return code


class _Out:
    """The loop's terminal: event lines, and the live status line of the workers'
    ``ProgressLine`` on a tty. A closed stdout (a reader that went away, as with
    '| head') is said once on stderr and then ignored, never a reason to stop."""

    def __init__(self) -> None:
        from wf.fanout.progress import ProgressLine

        self.progress = ProgressLine(every=1.0)
        self.closed = False

    def _closed(self) -> None:
        self.closed = True
        self.progress.enabled = False
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        try:
            sys.stderr.write("wf: stdout was closed; the loop goes on (events: out/wf-orch-run.log)\n")
        except OSError:
            pass

    def line(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.progress.clear()
            sys.stdout.write(f"{time.strftime('%H:%M:%S')} {safe_line(text.rstrip())}\n")
            sys.stdout.flush()
        except (OSError, ValueError):  # BrokenPipeError is an OSError
            self._closed()

    def status(self, text: str) -> None:
        try:
            self.progress.update(text)
        except (OSError, ValueError):
            self._closed()

    def clear(self) -> None:
        try:
            self.progress.clear()
        except (OSError, ValueError):
            self._closed()


@cli.command("gate-run", hidden=True)
@click.argument("sha")
@click.pass_context
def gate_run(ctx: click.Context, sha: str) -> int:
    """Run the gate at SHA (started by wf orch post in the background)."""
    from wf.orch import gate

    result = gate.run(_project(ctx), sha)
    return 0 if result.ok is not False else 1


@cli.command()
@click.option(
    "--target", metavar="DIR", help="Where to link them (default: $CLAUDE_CONFIG_DIR or ~/.claude)."
)
@click.pass_context
def install(ctx: click.Context, target: str | None) -> None:
    """Link the wf-worker subagent and the wf skills into Claude Code's folders
    (agents/wf-worker.md, skills/wf-orchestrate, skills/wf-design, skills/wf-pilot).

    \b
    Example:
      wf install --target ~/.claude
    """
    from wf.orch import install as installmod

    for line in installmod.install(Path(target) if target else None):
        click.echo(line)


@cli.command()
@click.option(
    "--dir", "dir_", metavar="DIR", help="Make the demo repository here (default: a new temp folder)."
)
@click.option("--keep", is_flag=True, help="Keep the temporary folder (and say where it is).")
@click.pass_context
def demo(ctx: click.Context, dir_: str | None, keep: bool) -> int:
    """Run the real loop on a small made-up project, with a scripted worker (no network,
    no API key): two lanes, a task with After, an owner task, an awaiting one, one big
    enough to be sliced, one whose Done fails. Shows each step, then the lanes, the
    archive and the orch log. The temporary folder is removed at the end unless --keep
    (or --dir) is given; then it says where to look next.

    \b
    Example: wf demo --keep
    """
    from wf.night import demo as demomod

    return demomod.run(Path(dir_) if dir_ else None, echo=click.echo, keep=keep)
