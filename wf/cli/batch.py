"""Unattended work: wf res (a command under limits), wf batch (the nightly run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from wf.base.text import safe_line
from wf.cli.base import _Group, _print, _project, _warn, cli


def _budget(value: str | None) -> float | None:
    """A --budget in dollars (UsageError for anything but a finite number above 0)."""
    from wf.night.batchcost import parse_budget

    return None if value is None else parse_budget(value)


if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.night.batchplan import Plan

# ---------------------------------------------------------------- wf res


@cli.group(cls=_Group)
def res() -> None:
    """Run a command under limits on its whole process tree (memory, CPU, wall time).

    \b
    wf res run --mem 4G --for 6h --title nightly -- make test
    wf res ls                 jobs running now
    wf res hist               past jobs, newest first, and the limits they suggest
    wf res stop ID            end a job and its whole tree

    \b
    States: done (exit 0), failed (its own non-zero exit), oom (the memory cap ended
    it), timeout (the wall limit), killed (wf res stop or a signal to wf), lost (its
    supervisor vanished). Records: $XDG_STATE_HOME/wf/res/jobs/ID.json, hist.jsonl.
    """


def _limits(mem: str | None, cpus: str | None, for_: str | None) -> Any:
    from wf.base.quantity import parse_cpus, parse_duration, parse_size
    from wf.night.resbackend import Limits

    return Limits(
        parse_size(mem, "--mem") if mem else None,
        parse_cpus(cpus) if cpus else None,
        parse_duration(for_, "--for") if for_ else None,
    )


def _job_line(job: Any) -> str:
    from wf.base.quantity import fmt_duration, fmt_size

    lim = job.limits
    limits = " ".join(
        x
        for x in (
            f"mem<={fmt_size(lim.mem)}" if lim.mem else "",
            f"cpus<={lim.cpus:g}" if lim.cpus else "",
            f"for<={fmt_duration(lim.for_s)}" if lim.for_s else "",
        )
        if x
    )
    exit_ = "-" if job.exit is None else str(job.exit)
    return (
        f"{job.id} {job.title} {job.state.value} exit={exit_} dur={fmt_duration(job.dur_s)} "
        f"peak={fmt_size(job.peak_rss)} cpu={job.cpu_s:.1f}s backend={job.backend.value}"
        + (f" limits: {limits}" if limits else "")
    )


@res.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--mem", metavar="SIZE", help="Memory cap of the whole tree (512M, 4G); also its reservation.")
@click.option("--cpus", metavar="N", help="CPU, in cores' worth (1.5).")
@click.option("--for", "for_", metavar="DURATION", help="Wall time (90s, 20m, 6h): then exit 124.")
@click.option("--title", metavar="T", help="A name for the job (default: the command's name).")
@click.option("--no-wait", is_flag=True, help="Refuse instead of waiting when --mem does not fit yet.")
@click.option("--json", "as_json", is_flag=True, help="Print the final job record as JSON.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def res_run(
    mem: str | None,
    cpus: str | None,
    for_: str | None,
    title: str | None,
    no_wait: bool,
    as_json: bool,
    argv: tuple[str, ...],
) -> int:
    """Run CMD under limits and wait for it; exit as timeout(1) does: the command's
    own status, 124 when the wall limit ended it, 137 when the memory cap did.

    \b
    Example:
      wf res run --mem 2G --cpus 1.5 --for 90m --title tests -- pytest -q
    """
    import os

    from wf.night import res as resmod

    cmd = list(argv[1:] if argv and argv[0] == "--" else argv)
    if not cmd:
        raise click.UsageError("give the command after --: wf res run --mem 1G -- CMD ARGS")
    job = resmod.run(
        cmd,
        title=title or os.path.basename(cmd[0]),
        limits=_limits(mem, cpus, for_),
        wait=not no_wait,
        on_wait=_warn,
    )
    if as_json:
        _print(True, job.as_dict(), [])
    else:
        _warn(_job_line(job))
    return resmod.exit_code(job)


def _or_dash(v: object) -> str:
    """A value a person reads: "-" when it is not known (never "None")."""
    return "-" if v is None else str(v)


@res.command("hist")
@click.option("--title", metavar="T", help="Only jobs with this title.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N jobs.")
@click.option("--json", "as_json", is_flag=True, help="Print jobs and suggestions as JSON.")
def res_hist(title: str | None, limit: int, as_json: bool) -> None:
    """Past jobs, newest first, and per title the limits they suggest: memory 1.25 x
    the largest peak of its last 10 done jobs (rounded up to 256M), wall time 1.5 x
    the longest.

    \b
    Example:
      wf res hist --title wf-batch --limit 5
    """
    from wf.base.quantity import fmt_duration, fmt_size
    from wf.night import res as resmod

    resmod.sweep()
    jobs = resmod.history(title, limit)
    titles = sorted({str(j.get("title")) for j in jobs})
    sugg = [resmod.suggest(t) for t in titles]
    data = {
        "jobs": jobs,
        "suggest": {s.title: {"mem": s.mem, "for": s.for_s, "based_on": s.based_on} for s in sugg},
    }
    lines = []
    for j in jobs:
        lines.append(
            f"{j.get('id')} {j.get('title')} {j.get('state')} exit={_or_dash(j.get('exit'))} "
            f"dur={fmt_duration(j.get('dur_s'))} peak={fmt_size(j.get('peak_rss'))} "
            f"cpu={float(j.get('cpu_s') or 0):.1f}s {j.get('backend')}"
        )
    if not jobs:
        lines.append("no jobs yet")
    for s in sugg:
        if s.based_on:
            lines.append(
                f"suggested for {s.title}: --mem {fmt_size(s.mem)} --for {fmt_duration(s.for_s)} "
                f"(from its last {s.based_on} done job(s))"
            )
    _print(as_json, data, lines)


@res.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print the running jobs' records as JSON.")
def res_ls(as_json: bool) -> None:
    """Jobs running now (a record whose supervisor is gone is finalised as lost).

    \b
    Example:
      wf res ls --json
    """
    from wf.night import res as resmod

    jobs = resmod.running()
    lines = [f"{_job_line(j)} pid={j.pid} since {j.start}" for j in jobs] or ["no running jobs"]
    _print(as_json, [j.as_dict() for j in jobs], lines)


@res.command("stop")
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the final job record as JSON.")
def res_stop(job_id: str, as_json: bool) -> None:
    """End a running job and its whole process tree (SIGTERM, a grace period, SIGKILL);
    it ends as killed.

    \b
    Example:
      wf res stop 20261201-230000-4242
    """
    from wf.night import res as resmod

    job = resmod.stop(job_id)
    _print(as_json, job.as_dict(), [_job_line(job)])


# ---------------------------------------------------------------- wf batch


@cli.command("batch")
@click.argument("n", type=click.IntRange(min=1), required=False)
@click.option("--lanes", metavar="A,B", help="Lanes to run (default: every lane with runner-ready work).")
@click.option(
    "--for",
    "for_",
    metavar="DURATION",
    help="Start nothing new after this long (default: from this project's batches, at least 1h; else 6h).",
)
@click.option(
    "--mem",
    metavar="SIZE",
    help="Memory cap of the whole batch (default: from this project's batches, at least 2G; else 4G).",
)
@click.option("--agent", is_flag=True, help="A headless Claude Code orchestrator (claude -p) runs the batch.")
@click.option("--model", metavar="M", help="With --agent: the orchestrator's model (default sonnet).")
@click.option("--prep", is_flag=True, help="Make up to N tasks runner-ready (Done, Model); never implement.")
@click.option(
    "--dry-run", is_flag=True, help="Print what would run, with limits and their sources; start nothing."
)
@click.option(
    "--status",
    "show_status",
    is_flag=True,
    help="The newest batch: alive or ended, summary tail, needs, its cloud tail.",
)
@click.option(
    "--stop", "stop_", is_flag=True, help="Write the stop file: running tasks finish, nothing new starts."
)
@click.option(
    "--budget",
    metavar="USD",
    callback=lambda ctx, param, v: _budget(v),
    help="Start no task when what the batch spent plus the task's forecast would pass USD "
    "(default: wf.toml's budget).",
)
@click.option(
    "--open", "open_", is_flag=True, help="With --status: print only the path of its morning page (HTML)."
)
@click.option("--json", "as_json", is_flag=True, help="With --status or --dry-run: print it as JSON.")
@click.pass_context
def batch(
    ctx: click.Context,
    n: int | None,
    lanes: str | None,
    for_: str | None,
    mem: str | None,
    agent: bool,
    model: str | None,
    prep: bool,
    dry_run: bool,
    show_status: bool,
    stop_: bool,
    budget: float | None,
    open_: bool,
    as_json: bool,
) -> int:
    """Run up to N tasks unattended: a detached job (it survives the terminal and runs
    from cron) runs 'wf orch run' under 'wf res' limits (title wf-batch) and writes the
    summary out/wf-batch-<stamp>.md as it goes. It ends when N tasks were posted,
    every lane stopped, --for is up, or the stop file out/wf-batch.stop appears.
    One batch per project at a time. --agent runs a headless Claude Code
    orchestrator (claude -p with the packaged batch prompt) under the same limits.
    --prep runs the lanes' workers with the packaged prep prompt on up to N tasks
    that lack Done or Model; wf commits only the lines they changed.
    --dry-run also prints what the tasks it would run will likely cost and take, from
    out/wf-cost.log. --budget (or wf.toml's budget) starts no task whose forecast, added
    to what the batch spent, would pass it; the batch then ends with reason "budget".

    \b
    Examples:
      wf batch 5 --lanes sonnet,haiku --for 6h --mem 4G
      wf batch 5 --dry-run
      wf batch 5 --budget 5.00
      wf batch 3 --agent --model opus --for 4h
      wf batch 6 --prep --lanes sonnet
      wf batch --status          wf batch --stop
      xdg-open "$(wf batch --status --open)"   # the morning page, out/wf-batch-<stamp>.html
    """
    from wf.night import batch as batchmod

    modes = sum(bool(x) for x in (n is not None, show_status, stop_))
    if modes != 1:
        raise click.UsageError("give N, or --status, or --stop")
    if open_ and (not show_status or as_json):
        raise click.UsageError("--open goes with --status alone (--status --json holds the page as 'page')")
    proj = _project(ctx)
    if show_status:
        return _status(proj, open_=open_, as_json=as_json)
    if stop_:
        for line in batchmod.stop(proj):
            click.echo(safe_line(line))
        return 0
    assert n is not None
    from wf.night import batchplan

    plan = batchplan.plan(
        proj,
        n,
        lanes=[x for x in lanes.split(",") if x] if lanes else None,
        for_=for_,
        mem=mem,
        agent=agent,
        model=model,
        prep=prep,
        budget=budget,
    )
    if prep and not plan.lanes:
        click.echo("prep: nothing to prepare")
        return 0
    if dry_run:
        _print(as_json, plan.as_dict(), batchplan.dry_run_lines(plan))
        return 0
    return _start(proj, plan)


def _start(proj: Project, plan: Plan) -> int:
    """Start the batch's detached job, and say where to watch and stop it."""
    from wf.night import batch as batchmod

    started = batchmod.start(proj, plan)
    click.echo(f"batch {started.stamp} started: job {started.job} (pid {started.pid}), "
               f"lanes {', '.join(plan.lanes)}, at most {plan.n} task(s)")  # fmt: skip
    if started.waiting:
        click.echo(f"it waits first: {started.waiting}")
    click.echo(f"summary: {started.summary}")
    click.echo(f"watch: wf batch --status   stop after the running tasks: wf batch --stop   "
               f"end it now: wf res stop {started.job}")  # fmt: skip
    return 0


def _status(proj: Project, *, open_: bool, as_json: bool) -> int:
    """``--status`` (``--json``), or with ``--open`` the morning page's path alone."""
    from wf.night import batchstatus

    if open_:
        click.echo(batchstatus.page(proj))
        return 0
    st = batchstatus.status(proj)
    _print(as_json, st, _status_lines(st))
    return 0


def _status_lines(st: dict[str, Any]) -> list[str]:
    if st.get("stamp") is None:  # no record at all (a record without a job is still a batch)
        return ["no batch has run here"]
    head = (
        f"batch {st['stamp']}: alive (job {st['job']}, pid {st['pid']}, since {st['started']})"
        if st["alive"]
        else f"batch {st['stamp']}: ended {st['ended']}: {st['reason']} (job {st['job']} {st['state']}, "
        f"exit {st['exit']})"
    )
    lines = [head, f"summary: {st['summary']}", f"page: {st['page']}"]
    if st.get("usage"):
        from wf.base.quantity import fmt_size

        u = st["usage"]
        lines.append(
            f"memory: peak {fmt_size(u['peak_rss'])} of {fmt_size(u['limits']['mem'])}, cpu {u['cpu_s']:.0f}s"
        )
    lines += [f"  {x}" for x in st["tail"] if x.strip()]
    for r in st["lanes"]:
        lines.append(
            f"lane {r['lane']}: {r['id']} {r['state']}" + (f" {r['parked']}" if r.get("parked") else "")
        )
    if st.get("gate") and st["gate"]["red"]:  # the newest gate result is red
        lines += st["gate"]["red"]
    tail = st.get("cloud_tail")
    if tail is not None:
        sessions = ", ".join(tail["sessions"]) or "none"
        lines.append(
            f"cloud tail of batch {tail['batch']}: pulling (job {tail['job']}, pid {tail['pid']}, since "
            f"{tail['started']}); sessions left: {sessions}; end it: wf res stop {tail['job']}"
            if tail["alive"]
            else f"cloud tail of batch {tail['batch']}: ended {tail['state'] or 'lost'} at "
            f"{tail['ended'] or '?'} (job {tail['job']}); sessions left: {sessions}"
        )
    if st["needs_person"]:
        lines.append("needs a person:")
        lines += [f"  {x['kind']} {x['id']}: {x['text']}" for x in st["needs_person"]]
    return lines


@cli.command("batch-tail", hidden=True)
@click.argument("stamp")
@click.option("--ready-fd", type=int)
@click.option("--pull", is_flag=True)
@click.pass_context
def batch_tail(ctx: click.Context, stamp: str, ready_fd: int | None, pull: bool) -> int:
    """The cloud tail of a batch (started by the batch job when its loop ends)."""
    import re

    from wf.night import batch as batchmod

    if not re.fullmatch(r"\d{8}T\d{6}Z", stamp):
        raise click.UsageError(f"stamp {stamp!r}: expected YYYYMMDDTHHMMSSZ")
    if pull:
        return batchmod.tail_pull(_project(ctx), stamp)
    return batchmod.tail_main(_project(ctx), stamp, ready_fd)


@cli.command("batch-job", hidden=True)
@click.argument("stamp")
@click.option("--ready-fd", type=int)
@click.pass_context
def batch_job(ctx: click.Context, stamp: str, ready_fd: int | None) -> int:
    """The detached batch (started by wf batch N)."""
    import re

    from wf.night import batch as batchmod

    if not re.fullmatch(r"\d{8}T\d{6}Z", stamp):
        raise click.UsageError(f"stamp {stamp!r}: expected YYYYMMDDTHHMMSSZ")
    return batchmod.job_main(_project(ctx), stamp, ready_fd)


# ---------------------------------------------------------------- wf pilot


@cli.command("pilot")
@click.option(
    "--batch", "k", type=click.IntRange(min=1), default=5, show_default=True, help="Tasks per batch."
)
@click.option("--lanes", metavar="A,B", help="Lanes to run (default: every lane with runner-ready work).")
@click.option(
    "--for", "for_", metavar="DURATION", default="8h", show_default=True, help="End after this long."
)
@click.option("--no-prep", is_flag=True, help="Never run prep batches.")
@click.option(
    "--budget",
    metavar="USD",
    callback=lambda ctx, param, v: _budget(v),
    help="What all its batches together may spend (default: wf.toml's budget).",
)
@click.option("--poll", type=click.FloatRange(min=0.1), default=20.0, hidden=True)
@click.pass_context
def pilot(
    ctx: click.Context, k: int, lanes: str | None, for_: str, no_prep: bool, budget: float | None, poll: float
) -> int:
    """Batches back to back, in the foreground (a terminal multiplexer, a timer): when no
    batch is alive and a free lane has runner-ready work, start 'wf batch K'; when there
    is none, one prep batch per idle spell; after each batch its stop lines and the
    questions a person must answer. While the only ready work is on a lane someone
    holds (an interactive pick, a live wf orch run), it waits; it never starts a batch
    without a task to run. Ends at --for, at the stop file, or when nothing is left to
    run or prepare (saying what waits for a person), with the cost report for the time
    it ran. A batch that changed nothing on its lanes (a tool that cannot run) is not
    started there again. Exit 1 when a batch could not start or no lane with work made
    progress, else 4 when tasks wait for a person at the end, else 0. --budget (or
    wf.toml's budget) is what all its batches may spend: each batch gets what is left,
    and the pilot ends ("budget") after a batch stopped for it.

    \b
    Examples:
      wf pilot --batch 4 --lanes sonnet,haiku --for 8h
      wf pilot --batch 4 --budget 20.00
    """
    import time

    from wf.base.quantity import parse_duration
    from wf.night import pilot as pilotmod

    proj = _project(ctx)

    def emit(line: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} {safe_line(line)}")

    ended = pilotmod.run(
        proj,
        k=k,
        lanes=[x for x in lanes.split(",") if x] if lanes else None,
        for_s=parse_duration(for_, "--for"),
        prep=not no_prep,
        poll=poll,
        emit=emit,
        budget=budget or proj.config.budget or None,
    )
    emit(f"pilot ended: {ended.end.value}")
    click.echo(f"cost since {ended.began}:")
    for line in pilotmod.cost_lines(proj, ended.began):
        click.echo(f"  {safe_line(line)}")
    return ended.exit_code
