"""Headless workers: dispatch, run, runs, monitor, gather."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from wf.cli.base import _echo_json, _Group, _project, cli
from wf.errors import WfError
from wf.text import safe, safe_line

# ---------------------------------------------------------------- headless workers


def _prompt_text(prompt: str | None, prompt_file: str | None, dash: bool) -> str:
    given = [x for x in (prompt is not None, prompt_file is not None, dash) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --prompt TEXT, --prompt-file F or - (stdin)")
    if prompt is not None:
        return prompt
    if prompt_file is not None:
        try:
            return Path(prompt_file).read_text("utf-8")
        except OSError as e:
            raise WfError(f"cannot read {prompt_file}: {e.strerror}") from None
    return sys.stdin.read()


@cli.command()
@click.argument("run")
@click.argument("unit")
@click.argument("dash", metavar="[-]", required=False, type=click.Choice(["-"]))
@click.option(
    "--adapter",
    type=click.Choice(["claude", "codex", "opencode", "cmd"]),
    help="The tool (default: $WF_ADAPTER, else claude; a resume keeps the earlier one).",
)
@click.option("--model", help="Model to ask for.")
@click.option("--effort", help="Reasoning effort (claude --effort, codex model_reasoning_effort).")
@click.option(
    "--cmd",
    "cmd_line",
    metavar="LINE",
    help="The program for the cmd adapter, split like shell words (no shell).",
)
@click.option("--cwd", "cwd", metavar="DIR", help="Where the worker runs (default: the main checkout).")
@click.option(
    "--clone", is_flag=True, help="Run in a throwaway clone of the repository (no remote, hooks off)."
)
@click.option("--prompt", help="The prompt text.")
@click.option("--prompt-file", metavar="F", help="Read the prompt from a file.")
@click.option(
    "--resume-from", metavar="UNIT", help="Follow up on that unit's session (same adapter and cwd)."
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
    dash: str | None,
    adapter: str | None,
    model: str | None,
    effort: str | None,
    cmd_line: str | None,
    cwd: str | None,
    clone: bool,
    prompt: str | None,
    prompt_file: str | None,
    resume_from: str | None,
    timeout: float | None,
    stall: float | None,
    as_json: bool,
) -> int:
    """Run one headless unit in the foreground; exit 0 if it ended with an answer.

    Its files go to .wf/runs/RUN/UNIT/ (prompt.txt, worker.log, output.txt,
    session.txt, status.json). The prompt goes to the worker on stdin, never
    through a shell.
    """
    from wf import adapters, workers

    text = _prompt_text(prompt, prompt_file, dash == "-")
    if clone and cwd:
        raise click.UsageError("--cwd and --clone exclude each other")
    req = workers.UnitRequest(
        id=unit,
        prompt=text,
        adapter=adapter,
        model=model,
        effort=effort,
        timeout=timeout,
        stall=stall,
        cwd=cwd,
        clone=clone,
        resume_from=resume_from,
        cmd=adapters.split_cmd(cmd_line) if cmd_line else (),
    )
    u = workers.dispatch(_project(ctx), run, req)
    if as_json:
        _echo_json(u.status)
    else:
        click.echo(f"{workers.end_line(u)}  {adapters.describe(u.status)}")
    if u.state == "interrupted":
        return 130
    return 0 if u.state == "done" else 4


@cli.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--max-parallel", type=click.IntRange(min=1), help="Units at once (default: the manifest's, else 4)."
)
@click.option("--run", "run_id", metavar="RUN", help="Run id (default: the manifest's name and the time).")
@click.pass_context
def run_cmd(ctx: click.Context, manifest: str, max_parallel: int | None, run_id: str | None) -> int:
    """Run the units of a JSON or TOML manifest in parallel; one line per unit as it
    ends; exit 1 if any did not end with an answer, 130 on Ctrl-C.

    \b
    {"defaults": {"adapter": "cmd", "timeout": 600, "max_parallel": 5},
     "units": [{"id": "u1", "prompt": "...", "cmd": ["python", "job.py"]},
               {"id": "u2", "prompt_file": "p2.md", "adapter": "claude",
                "model": "sonnet", "clone": true}]}
    Unit keys: id, prompt | prompt_file, adapter, model, effort, timeout, stall,
    cwd | clone, resume_from, cmd, permission_mode.
    """
    from wf import workers

    if not workers.load_manifest(Path(manifest))[1]:
        raise click.UsageError(f"{manifest} has no units: nothing to run (its 'units' list is empty)")
    run, units, completed = workers.run_manifest(
        _project(ctx),
        Path(manifest),
        run=run_id,
        max_parallel=max_parallel,
        on_end=lambda u: click.echo(workers.end_line(u)),
    )
    click.echo(f"run {run}: {sum(u.state == 'done' for u in units)}/{len(units)} done")
    if not completed:
        return 130
    return 0 if all(u.state == "done" for u in units) else 1


@cli.group(cls=_Group, invoke_without_command=True)
@click.option("-n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="How many runs.")
@click.pass_context
def runs(ctx: click.Context, count: int) -> None:
    """Recent runs (newest first); subcommands show one run's units."""
    if ctx.invoked_subcommand is not None:
        return
    from wf import runs as runsmod

    found = runsmod.all_runs(_project(ctx))
    if not found:
        click.echo("no runs yet (wf dispatch, wf run)")
    proj = _project(ctx)
    for name, _mtime in found[:count]:
        units = runsmod.units(proj, name)
        states: dict[str, int] = {}
        for u in units:
            states[str(u.get("state"))] = states.get(str(u.get("state")), 0) + 1
        summary = " ".join(f"{k}={v}" for k, v in sorted(states.items()))
        click.echo(f"{name}  {len(units)} units  {summary}")


@runs.command("status")
@click.argument("run")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of the units' status.json.")
@click.pass_context
def runs_status(ctx: click.Context, run: str, as_json: bool) -> None:
    """State, exit code, time, session and a preview of the answer of each unit."""
    from wf import runs as runsmod
    from wf import workers

    proj = _project(ctx)
    units = runsmod.units(proj, run)
    if as_json:
        _echo_json(units)
        return
    for st in units:
        answer = runsmod.read_output(runsmod.unit_dir(proj, run, str(st["unit"])))
        click.echo(
            safe_line(f"{workers.status_line(st)}  {runsmod.preview(answer) if answer else ''}".rstrip())
        )


@runs.command("output")
@click.argument("run")
@click.argument("unit")
@click.option("--log", "show_log", is_flag=True, help="The raw worker.log instead of the answer.")
@click.pass_context
def runs_output(ctx: click.Context, run: str, unit: str, show_log: bool) -> None:
    """A unit's answer (output.txt), or with --log its raw stream."""
    from wf import runs as runsmod

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
    """What a --clone unit changed in its clone (commits, untracked files, the diff)."""
    from wf import workers

    click.echo(workers.diff(_project(ctx), run, unit), nl=False)


@cli.command()
@click.argument("run")
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after S seconds (exit 2).")
@click.pass_context
def monitor(ctx: click.Context, run: str, timeout: float | None) -> int:
    """Wait for the first event that needs attention, then print one line per unit.

    Exit 0: every unit ended well. 3: a unit failed, stalled, timed out or was
    interrupted. 2: this monitor's own --timeout passed.
    """
    from wf import workers

    code, lines = workers.monitor(_project(ctx), run, timeout=timeout)
    for line in lines:
        click.echo(line)
    return code


@cli.command()
@click.argument("run")
@click.option(
    "--quiet",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds every unit's files must stay unchanged.",
)
@click.option("--timeout", type=click.FloatRange(min=0), help="Give up after S seconds (exit 2).")
@click.pass_context
def gather(ctx: click.Context, run: str, quiet: float, timeout: float | None) -> int:
    """Wait until every unit has ended and its results stayed quiet, then print each
    unit's answer under a '== UNIT (state)' header."""
    from wf import runs as runsmod
    from wf import workers

    proj = _project(ctx)
    landed, units = workers.gather(proj, run, quiet=quiet, timeout=timeout)
    for st in units:
        click.echo(f"== {st['unit']} ({st['state']}{', FALLBACK' if st.get('fallback') else ''})")
        click.echo(runsmod.read_output(runsmod.unit_dir(proj, run, str(st["unit"]))).rstrip("\n"))
    return 0 if landed else 2
