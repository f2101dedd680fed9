"""Headless workers: dispatch, run (the runs group is in wf/cli/runs.py, monitor and
gather in wf/cli/watch.py).

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
from wf.cli.base import _echo_json, _project, cli

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


class Live:
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
@click.option(
    "--no-contract",
    "no_contract",
    is_flag=True,
    help="Do not end the prompt with the return contract, nor check the answer against it.",
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
    no_contract: bool,
    as_json: bool,
) -> int:
    """Run one headless unit in the foreground. Exit 0 when it is done, 4 when it
    failed, stalled or timed out, 130 on Ctrl-C. Its prompt ends with the return
    contract and its line says 'invalid' when the answer breaks it (wf gather then
    exits 4); --no-contract: neither.

    Its files go to .wf/runs/RUN/UNIT/ (prompt.txt, worker.log, output.txt,
    session.txt, status.json); by default it runs in scratch/ there. The prompt goes
    to the worker on stdin, never through a shell.

    \b
    wf dispatch r1 fix --adapter codex --prompt "Fix the flaky test"
    wf dispatch r1 docs prompts/docs.md --clone
    echo "Summarise" | wf dispatch r1 sum - --adapter auto
    """
    from wf import adapters
    from wf.fanout import fanout, ledger, report
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
        contract=not no_contract,
    )
    live = Live(as_json)
    outcome = fanout.dispatch(_project(ctx), run, req, on_tick=live.tick_units)
    live.done()
    u = outcome.units[0]
    if as_json:
        _echo_json({**u.status, "verdict": ledger.word(u.status)})
    else:
        click.echo(safe_line(report.unit_line(u.status)))
        for line in report.legend([u.status]):
            click.echo(line)
    return outcome.code


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
    "--no-contract",
    "no_contract",
    is_flag=True,
    help="Every unit without the return contract (as if the manifest said contract = false).",
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
    no_contract: bool,
    as_json: bool,
) -> int:
    """Run the units of a JSON or TOML manifest in parallel; one line per unit as it
    ends. Each prompt ends with the return contract and each answer is checked
    against it (a line says 'invalid' when it breaks it; wf gather then exits 4).
    Exit 0 all done, 4 a unit failed or was left undone (given up, corrupt), 130 on
    Ctrl-C.

    \b
    {"defaults": {"adapter": "cmd", "timeout": 600, "max_parallel": 5},
     "units": [{"id": "u1", "prompt": "...", "cmd": ["python", "job.py"]},
               {"id": "u2", "prompt_file": "p2.md", "adapter": "claude",
                "model": "sonnet", "mode": "clone"}]}
    Unit keys: id, prompt | prompt_file, adapter (or "auto"), model, effort,
    timeout, stall, mode (scratch | clone | cwd), cwd, resume_from, session, cmd,
    and tool access: permission_mode, allowed_tools, sandbox, network,
    isolate_mcp, extra_args (refused if the tool cannot honour them); contract
    (false: no return contract), sections (or required_sections: the answer's
    required sections instead of Conclusion, Files, Open items, Verification).
    "tasks" is another name for "units".
    \b
    wf run units.json --max-parallel 5
    wf run units.json --run r1      # again: skips what is done, retries the rest
    """
    from wf.fanout import fanout, report
    from wf.fanout import manifest as manifestmod

    if not manifestmod.load_manifest(Path(manifest))[1]:
        raise click.UsageError(f"{manifest} has no units: nothing to run (its 'units' list is empty)")
    live = Live(as_json)
    proj = _project(ctx)
    outcome = fanout.run_manifest(
        proj,
        Path(manifest),
        run=run_id,
        max_parallel=max_parallel,
        max_retries=max_retries,
        contract=not no_contract,
        on_end=lambda u: live.echo(report.unit_line(u.status)),
        on_tick=live.tick_units,
    )
    live.done()
    outcome_report(proj, outcome, as_json)
    return outcome.code


def outcome_report(proj: Project, outcome: Outcome, as_json: bool) -> None:
    """The end of wf run and wf runs retry: the JSON object, or the units skipped, the
    run's total and the legend of its marks."""
    from wf.fanout import report
    from wf.workers import runs

    if as_json:
        _echo_json(outcome.as_json())
        return
    for s in outcome.skipped:
        click.echo(safe_line(f"{s.unit}: skipped: {s.why}"))
    units = runs.units(proj, outcome.run)
    click.echo(report.total_line(outcome.run, units))
    for line in report.legend(units):
        click.echo(line)
