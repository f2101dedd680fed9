"""Headless workers: dispatch, run, runs, monitor, gather.

Exit codes (shared/conventions.md): 0 every unit done; 4 a unit needs attention (failed,
stalled, timed out, interrupted, lost); 5 a waiting command gave up (--timeout);
130 interrupted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wf.base.config import ADAPTERS
from wf.base.errors import WfError
from wf.base.text import safe, safe_line
from wf.cli.base import _echo_json, _Group, _project, cli

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.fanout.fanout import Outcome

ADAPTER_CHOICE = click.Choice([*ADAPTERS, "auto"])


def _prompt_text(prompt: str | None, prompt_file: str | None, positional: str | None) -> str:
    given = [x for x in (prompt, prompt_file, positional) if x is not None]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --prompt TEXT, --prompt-file F, a prompt file or - (stdin)"
        )
    if prompt is not None:
        return prompt
    path = prompt_file if prompt_file is not None else positional
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(str(path)).read_text("utf-8")
    except OSError as e:
        raise WfError(f"cannot read {path}: {e.strerror}") from None


class _Live:
    """The live status line of a command that waits on units, and the ordinary lines
    printed around it."""

    def __init__(self, as_json: bool) -> None:
        from wf.fanout.progress import ProgressLine

        self.as_json = as_json
        self.line = ProgressLine()
        self.started = time.monotonic()

    def echo(self, text: str) -> None:
        if self.as_json:
            return
        self.line.clear()
        click.echo(safe(text))

    def tick_units(self, units: list[Any]) -> None:
        if self.as_json or not self.line.enabled:
            return
        from wf.fanout import report

        self.line.update(
            report.progress_text(
                [u.status for u in units], {u.spec.unit: u.folder for u in units}, self.started
            )
        )

    def tick_statuses(self, proj: Project, run: str, statuses: list[dict[str, Any]]) -> None:
        if self.as_json or not self.line.enabled:
            return
        from wf.fanout import report
        from wf.workers import runs

        folders = {str(st["unit"]): runs.unit_dir(proj, run, str(st["unit"])) for st in statuses}
        self.line.update(report.progress_text(statuses, folders, self.started))

    def done(self) -> None:
        self.line.clear()


def _end_code(outcome: Outcome) -> int:
    if not outcome.completed:
        return 130
    return 0 if all(u.state == "done" for u in outcome.units) else 4


@cli.command()
@click.argument("run")
@click.argument("unit")
@click.argument("prompt_arg", metavar="[PROMPT_FILE | -]", required=False)
@click.option(
    "--adapter",
    type=ADAPTER_CHOICE,
    help="The tool (default: $WF_ADAPTER, else claude; auto: the first installed).",
)
@click.option("--model", help="Model to ask for.")
@click.option("--effort", help="Reasoning effort (claude --effort, codex model_reasoning_effort).")
@click.option(
    "--cmd",
    "cmd_line",
    metavar="LINE",
    help="The program for the cmd adapter, split like shell words (no shell).",
)
@click.option(
    "--scratch",
    "mode",
    flag_value="scratch",
    help="Run in an empty folder inside the unit's run folder (the default).",
)
@click.option(
    "--clone",
    "mode",
    flag_value="clone",
    help="Run in a throwaway clone of the repository (no remote, hooks off).",
)
@click.option("--cwd", "cwd", metavar="DIR", help="Run in DIR, a folder the unit does not own (mode cwd).")
@click.option("--prompt", help="The prompt text.")
@click.option("--prompt-file", metavar="F", help="Read the prompt from a file.")
@click.option(
    "--resume-from", metavar="UNIT", help="Follow up on that unit's session (same adapter and folder)."
)
@click.option(
    "--session",
    metavar="RAW",
    help="Resume this session (thread) id of the tool; runs in --cwd (default: the main checkout).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), help="Stop the whole tree after S seconds."
)
@click.option(
    "--stall",
    type=click.FloatRange(min=0, min_open=True),
    help="Stop it after S seconds with no model event (for cmd: no output); default 600, claude 720.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the final status.json.")
@click.pass_context
def dispatch(
    ctx: click.Context,
    run: str,
    unit: str,
    prompt_arg: str | None,
    adapter: str | None,
    model: str | None,
    effort: str | None,
    cmd_line: str | None,
    mode: str | None,
    cwd: str | None,
    prompt: str | None,
    prompt_file: str | None,
    resume_from: str | None,
    session: str | None,
    timeout: float | None,
    stall: float | None,
    as_json: bool,
) -> int:
    """Run one headless unit in the foreground. Exit 0 when it is done, 4 when it
    failed, stalled or timed out, 130 on Ctrl-C.

    Its files go to .wf/runs/RUN/UNIT/ (prompt.txt, worker.log, output.txt,
    session.txt, status.json); by default it runs in scratch/ there. The prompt goes
    to the worker on stdin, never through a shell.

    \b
    wf dispatch r1 fix --adapter codex --prompt "Fix the flaky test"
    wf dispatch r1 docs prompts/docs.md --clone
    echo "Summarise" | wf dispatch r1 sum - --adapter auto
    """
    from wf import adapters
    from wf.fanout import fanout, report
    from wf.fanout.units import UnitRequest

    text = _prompt_text(prompt, prompt_file, prompt_arg)
    if mode and cwd:
        raise click.UsageError(f"--cwd and --{mode} exclude each other")
    req = UnitRequest(
        id=unit,
        prompt=text,
        adapter=adapter,
        model=model,
        effort=effort,
        timeout=timeout,
        stall=stall,
        cwd=cwd,
        mode="cwd" if cwd else mode,
        resume_from=resume_from,
        session=session,
        cmd=adapters.split_cmd(cmd_line) if cmd_line else (),
    )
    live = _Live(as_json)
    outcome = fanout.dispatch(_project(ctx), run, req, on_tick=live.tick_units)
    live.done()
    u = outcome.units[0]
    if as_json:
        _echo_json(u.status)
    else:
        click.echo(safe_line(report.unit_line(u.status)))
        for line in report.legend([u.status]):
            click.echo(line)
    return _end_code(outcome)


@cli.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--max-parallel", type=click.IntRange(min=1), help="Units at once (default: the manifest's, else 4)."
)
@click.option(
    "--run",
    "run_id",
    metavar="RUN",
    help="Run id (default: the manifest's name and the time). An existing run: what is done is skipped.",
)
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="On an existing run: attempts beyond the first.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object at the end: run, code, units, skipped."
)
@click.pass_context
def run_cmd(
    ctx: click.Context,
    manifest: str,
    max_parallel: int | None,
    run_id: str | None,
    max_retries: int,
    as_json: bool,
) -> int:
    """Run the units of a JSON or TOML manifest in parallel; one line per unit as it
    ends. Exit 0 all done, 4 a unit failed or was left undone (given up, corrupt),
    130 on Ctrl-C.

    \b
    {"defaults": {"adapter": "cmd", "timeout": 600, "max_parallel": 5},
     "units": [{"id": "u1", "prompt": "...", "cmd": ["python", "job.py"]},
               {"id": "u2", "prompt_file": "p2.md", "adapter": "claude",
                "model": "sonnet", "mode": "clone"}]}
    Unit keys: id, prompt | prompt_file, adapter (or "auto"), model, effort,
    timeout, stall, mode (scratch | clone | cwd), cwd, resume_from, session, cmd,
    and tool access: permission_mode, allowed_tools, sandbox, network,
    isolate_mcp, extra_args (refused if the tool cannot honour them).
    "tasks" is another name for "units".
    \b
    wf run units.json --max-parallel 5
    wf run units.json --run r1      # again: skips what is done, retries the rest
    """
    from wf.fanout import fanout, report
    from wf.fanout import manifest as manifestmod

    if not manifestmod.load_manifest(Path(manifest))[1]:
        raise click.UsageError(f"{manifest} has no units: nothing to run (its 'units' list is empty)")
    live = _Live(as_json)
    proj = _project(ctx)
    outcome = fanout.run_manifest(
        proj,
        Path(manifest),
        run=run_id,
        max_parallel=max_parallel,
        max_retries=max_retries,
        on_end=lambda u: live.echo(report.unit_line(u.status)),
        on_tick=live.tick_units,
    )
    live.done()
    code = _end_code(outcome)
    if code == 0 and any(not s.done for s in outcome.skipped):
        code = 4  # a unit it did not run (gave up, corrupt, running elsewhere) is not done
    _outcome_report(proj, outcome, code, as_json)
    return code


def _outcome_report(proj: Project, outcome: Outcome, code: int, as_json: bool) -> None:
    from wf.fanout import report
    from wf.workers import runs

    if as_json:
        _echo_json(
            {
                "run": outcome.run,
                "code": code,
                "completed": outcome.completed,
                "units": [u.status for u in outcome.units],
                "skipped": [s._asdict() for s in outcome.skipped],
            }
        )
        return
    for s in outcome.skipped:
        click.echo(safe_line(f"{s.unit}: skipped: {s.why}"))
    units = runs.units(proj, outcome.run)
    click.echo(report.total_line(outcome.run, units))
    for line in report.legend(units):
        click.echo(line)


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
    from wf.workers import runs as runsmod

    proj = _project(ctx)
    found = runsmod.all_runs(proj)
    if not found and not as_json:
        click.echo("no runs yet (wf dispatch, wf run)")
    rows = []
    for name, _mtime in found[:count]:
        units = runsmod.units(proj, name)
        states: dict[str, int] = {}
        for u in units:
            states[str(u.get("state"))] = states.get(str(u.get("state")), 0) + 1
        rows.append({"run": name, "units": len(units), "states": dict(sorted(states.items()))})
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        summary = " ".join(f"{k}={v}" for k, v in row["states"].items())  # type: ignore[attr-defined]
        click.echo(safe_line(f"{row['run']}  {row['units']} units  {summary}"))


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
@click.option("--json", "as_json", is_flag=True, help="A JSON list of the units' status.json.")
@click.pass_context
def runs_status(ctx: click.Context, run: str, as_json: bool) -> None:
    """Each unit's state (with the failure in the tool's own words), time, cost, a
    preview of its answer, and changes it left in a checkout it did not own; the
    run's total. Units whose supervisor is gone are marked lost first.

    \b
    wf runs status r1 --json | jq '.[] | select(.state != "done") | .unit'
    """
    from wf.fanout import report
    from wf.fanout.watch import repair_lost
    from wf.workers import runs as runsmod

    proj = _project(ctx)
    repair_lost(proj, run)
    units = runsmod.units(proj, run)
    if as_json:
        _echo_json(units)
        return
    for st in units:
        folder = runsmod.unit_dir(proj, run, str(st["unit"]))
        answer = runsmod.read_output(folder)
        line = f"{report.unit_line(st, folder)}  {runsmod.preview(answer) if answer else ''}"
        click.echo(safe_line(line.rstrip()))
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
    from wf.workers import runs as runsmod

    folder = runsmod.unit_dir(_project(ctx), run, unit)
    if runsmod.read_status(folder) is None:
        raise WfError(f"no unit {unit} in run {run}")
    name = "worker.log" if show_log else "output.txt"
    try:
        click.echo(safe((folder / name).read_text("utf-8", errors="replace")), nl=False)
    except OSError:
        raise WfError(f"unit {unit} has no {name} yet") from None


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
    resume: bool,
    max_retries: int,
    max_parallel: int,
    as_json: bool,
) -> int:
    """Re-run what did not land, as new units (UNIT-r1, UNIT-r2, ...) that record
    retry_of and their count; without UNITs and flags, --failed and --missing.
    Exit 0 all retried units done, 4 one failed or was not retried, 130 on Ctrl-C.

    \b
    wf runs retry r1 --failed
    wf runs retry r1 u3 --resume --max-retries 3
    """
    from wf.fanout import fanout, report

    live = _Live(as_json)
    proj = _project(ctx)
    outcome = fanout.retry(
        proj,
        run,
        list(units),
        failed=failed,
        missing=missing,
        resume=resume,
        max_retries=max_retries,
        max_parallel=max_parallel,
        on_end=lambda u: live.echo(report.unit_line(u.status)),
        on_tick=live.tick_units,
    )
    live.done()
    code = _end_code(outcome)
    if code == 0 and any(not s.done for s in outcome.skipped):
        code = 4  # something is left that a person must look at
    if not outcome.units and not outcome.skipped and not as_json:
        click.echo(f"run {run}: nothing to retry")
    _outcome_report(proj, outcome, code, as_json)
    return code


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
    interrupted or lost its supervisor. 5: --timeout passed first.

    \b
    wf monitor r1                   # wakes on the first failure
    wf monitor r1 --running         # after handling it: wait on the rest
    """
    from wf.fanout import report, watch
    from wf.workers import runs as runsmod

    proj = _project(ctx)
    began = time.monotonic()
    if not runsmod.run_dir(proj, run).is_dir():
        if not as_json:
            click.echo(f"monitor {run}: waiting for run {run} to start (wf run, wf dispatch)")
        if not watch.wait_for_run(proj, run, timeout):
            if as_json:
                _echo_json({"run": run, "code": watch.GAVE_UP, "watching": [], "lost": [], "units": []})
            else:
                click.echo(f"monitor {run}: gave up after {timeout:g}s; run {run} has not started")
            return watch.GAVE_UP
    left = max(0.0, timeout - (time.monotonic() - began))  # one --timeout for both waits
    watched = watch.watch_set(proj, run, list(units), running)
    live = _Live(as_json)
    if not as_json:
        if watched is None:
            names = watch.every_unit(proj, run)
            what = f"every unit ({', '.join(names) if names else 'none yet'})"
        else:
            what = ", ".join(watched) if watched else "nothing (no unit is running)"
        click.echo(f"monitor {run}: watching {what}")
    result = watch.monitor(
        proj, run, watched, timeout=left, on_tick=lambda sts: live.tick_statuses(proj, run, sts)
    )
    live.done()
    if as_json:
        _echo_json(
            {
                "run": run,
                "code": result.code,
                "watching": result.watched,
                "lost": result.lost,
                "units": result.units,
            }
        )
        return result.code
    for st in result.units:
        click.echo(safe_line(report.unit_line(st, runsmod.unit_dir(proj, run, str(st["unit"])))))
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
    "--json", "as_json", is_flag=True, help="One JSON object: run, code, units (each with its output)."
)
@click.pass_context
def gather(
    ctx: click.Context, run: str, units: tuple[str, ...], quiet: float, timeout: float, as_json: bool
) -> int:
    """Wait until every unit (or the UNITs named) has ended and its results stayed
    quiet, printing 'DONE UNIT STATE' as each lands, then each answer under a
    '== UNIT (state)' header. A unit whose supervisor is gone is lost, and counts
    as landed. Exit 0 all done, 4 one is not, 5 --timeout passed first.

    \b
    wf gather r1 > answers.txt
    wf gather r1 --json | jq -r '.units[].output'
    """
    from wf.fanout import report, watch
    from wf.workers import runs as runsmod

    proj = _project(ctx)
    live = _Live(as_json)

    def landed(st: dict[str, Any]) -> None:
        live.echo(f"DONE {st['unit']} {report.describe(st)}{' FALLBACK' if st.get('fallback') else ''}")

    result = watch.gather(
        proj,
        run,
        list(units) or None,
        quiet=quiet,
        timeout=timeout,
        on_landed=landed,
        on_tick=lambda sts: live.tick_statuses(proj, run, sts),
    )
    live.done()
    outputs = {
        str(st["unit"]): runsmod.read_output(runsmod.unit_dir(proj, run, str(st["unit"])))
        for st in result.units
    }
    if as_json:
        _echo_json(
            {
                "run": run,
                "code": result.code,
                "lost": result.lost,
                "units": [{**st, "output": outputs[str(st["unit"])]} for st in result.units],
            }
        )
        return result.code
    if result.code == watch.GAVE_UP:
        click.echo(f"gather {run}: gave up after {timeout:g}s; not every unit has landed")
        return result.code
    for st in result.units:
        click.echo(
            safe_line(f"== {st['unit']} ({report.describe(st)}{', FALLBACK' if st.get('fallback') else ''})")
        )
        click.echo(safe(outputs[str(st["unit"])].rstrip("\n")))
    return result.code
