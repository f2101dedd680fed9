"""Headless workers: dispatch, run (the runs group is in wf/cli/runs.py, monitor and
gather in wf/cli/watch.py).

Exit codes (shared/conventions.md): 0 every unit done; 4 a unit needs attention (failed,
stalled, timed out, interrupted, lost); 5 a waiting command gave up (--timeout);
130 interrupted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wf.base.config import ADAPTERS, PERMISSION_MODES, SANDBOXES
from wf.base.text import safe, safe_line
from wf.cli.base import _echo_json, _project, cli

if TYPE_CHECKING:
    from wf.base.project import Project
    from wf.fanout.fanout import Outcome
    from wf.fanout.units import UnitRequest

ADAPTER_CHOICE = click.Choice([*ADAPTERS, "auto"])


class Seconds(click.ParamType[float]):
    """A number of seconds above 0; 0 too where ``zero`` says what it means."""

    name = "S"

    def __init__(self, zero: str | None = None) -> None:
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or v < 0 or (v == 0 and not self.zero):
            rule = f">= 0 (0: {self.zero})" if self.zero else "above 0"
            self.fail(f"must be a number of seconds {rule}, not {value}", param, ctx)
        return v


TIMEOUT_OPTION = click.option(
    "--timeout",
    type=Seconds(zero="no timeout"),
    help="Stop the whole tree after S seconds (default 7200; 0: no timeout, the stall watch stays).",
)
STALL_OPTION = click.option(
    "--stall",
    type=Seconds(),
    help="Stop it after S seconds with no model event (for cmd: no output); default 600, claude 720.",
)


def access_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The unit's tool access, the same as the manifest keys of the same names."""
    options = (
        click.option(
            "--sandbox",
            type=click.Choice(SANDBOXES),
            help="codex -s (default workspace-write); read-only runs claude in plan mode.",
        ),
        click.option(
            "--network/--no-network",
            default=None,
            help="Network for the tool (codex sandbox; claude WebFetch, WebSearch); default off.",
        ),
        click.option(
            "--permission-mode",
            type=click.Choice(PERMISSION_MODES),
            help="claude --permission-mode (default acceptEdits).",
        ),
        click.option(
            "--allowed-tools",
            metavar="TOOLS",
            multiple=True,
            help="claude --allowedTools: tools allowed without asking, comma-separated or repeated"
            ' ("Bash(git:*),Read").',
        ),
    )
    for option in reversed(options):
        f = option(f)
    return f


def split_tools(given: tuple[str, ...]) -> list[str]:
    """``--allowed-tools`` values: each split at the commas outside parentheses."""
    out: list[str] = []
    for value in given:
        depth, word = 0, ""
        for ch in value:
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                out.append(word.strip())
                word = ""
            else:
                word += ch
        out.append(word.strip())
    tools = [t for t in out if t]
    if given and not tools:
        raise click.UsageError("--allowed-tools names no tool")
    return tools


def access_given(
    sandbox: str | None, network: bool | None, permission_mode: str | None, allowed_tools: tuple[str, ...]
) -> dict[str, Any]:
    """The access options given, as the manifest keys they stand for."""
    given: dict[str, Any] = {"sandbox": sandbox, "network": network, "permission_mode": permission_mode}
    if allowed_tools:
        given["allowed_tools"] = split_tools(allowed_tools)
    return {k: v for k, v in given.items() if v is not None}


def _prompt_text(
    prompt: str | None, prompt_file: str | None, positional: str | None, *, positional_is_text: bool = False
) -> str:
    given = [x for x in (prompt, prompt_file, positional) if x is not None]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --prompt TEXT, --prompt-file F, "
            + ("a PROMPT" if positional_is_text else "a prompt file or - (stdin)")
        )
    if prompt is not None:
        return prompt
    if positional_is_text and positional is not None:
        return positional
    from wf.fanout.manifest import read_prompt

    return read_prompt(str(prompt_file if prompt_file is not None else positional))


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
@TIMEOUT_OPTION
@STALL_OPTION
@access_options
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
    sandbox: str | None,
    network: bool | None,
    permission_mode: str | None,
    allowed_tools: tuple[str, ...],
    no_contract: bool,
    as_json: bool,
) -> int:
    """Run one headless unit in the foreground. Exit 0 when it is done, 4 when it
    failed, stalled or timed out, 130 on Ctrl-C. Its prompt ends with the return
    contract and its line says 'invalid' when the answer breaks it (wf gather then
    exits 4); --no-contract: neither.

    Its files go to .wf/runs/RUN/UNIT/ (prompt.txt, worker.log, output.txt,
    session.txt, status.json); by default it runs in scratch/ there. The prompt goes
    to the worker on stdin, never through a shell. With no --model it asks its
    tool for wf's fan-out default (claude: sonnet; wf.toml [fanout] models), never
    an expensive model unless --model names it.

    \b
    wf dispatch r1 fix --adapter codex --prompt "Fix the flaky test"
    wf dispatch r1 docs prompts/docs.md --clone
    echo "Summarise" | wf dispatch r1 sum - --adapter auto
    wf dispatch r1 long --timeout 0 --sandbox workspace-write --network --prompt "..."
    wf dispatch r1 edit --permission-mode bypassPermissions --allowed-tools "Bash(git:*),Read" --prompt "..."
    """
    from wf import adapters
    from wf.fanout import fanout, ledger, report
    from wf.fanout.units import UnitRequest

    text = _prompt_text(prompt, prompt_file, prompt_arg)
    if mode and cwd:
        raise click.UsageError(f"--cwd and --{mode} exclude each other")
    access = access_given(sandbox, network, permission_mode, allowed_tools)
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
        permission_mode=access.pop("permission_mode", None),
        access=access,
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
@click.argument("manifest", metavar="[MANIFEST | PROMPT]", required=False)
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
@click.option("--model", help="Model for every unit that names none (over the manifest's defaults).")
@TIMEOUT_OPTION
@STALL_OPTION
@access_options
@click.option(
    "--panel",
    "panel_tools",
    metavar="TOOLS",
    help="Ask one question (PROMPT) of several tools: claude,codex or claude:sonnet,codex:gpt-5.5.",
)
@click.option("--prompt", help="With --panel: the question (instead of PROMPT).")
@click.option("--prompt-file", metavar="F", help="With --panel: read the question from F (- for stdin).")
@click.option("--clone", "panel_clone", is_flag=True, help="With --panel: each unit in a throwaway clone.")
@click.option("--cwd", "panel_cwd", metavar="DIR", help="With --panel: every unit runs in DIR (mode cwd).")
@click.option("--cmd", "panel_cmd", metavar="LINE", help="With --panel: the program of its cmd units.")
@click.option(
    "--no-contract",
    "no_contract",
    is_flag=True,
    help="Every unit without the return contract (as if the manifest said contract = false).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object at the end: run, code, units, skipped."
)
@click.option(
    "--templates",
    is_flag=True,
    help="List the prompt templates (name, what for, placeholders); with a NAME instead of "
    "MANIFEST, print that template.",
)
@click.pass_context
def run_cmd(
    ctx: click.Context,
    manifest: str | None,
    max_parallel: int | None,
    run_id: str | None,
    max_retries: int,
    model: str | None,
    timeout: float | None,
    stall: float | None,
    sandbox: str | None,
    network: bool | None,
    permission_mode: str | None,
    allowed_tools: tuple[str, ...],
    panel_tools: str | None,
    prompt: str | None,
    prompt_file: str | None,
    panel_clone: bool,
    panel_cwd: str | None,
    panel_cmd: str | None,
    no_contract: bool,
    as_json: bool,
    templates: bool,
) -> int:
    """Run the units of a JSON or TOML manifest in parallel; one line per unit as it
    ends. Each prompt ends with the return contract (see wf gather). With --panel,
    ask one question of several tools instead (a panel: one unit per tool, named by
    it; compare their answers with wf gather RUN --compare). Exit 0 all done, 4 a
    unit failed or was left undone (given up, corrupt), 130 on Ctrl-C.

    \b
    {"defaults": {"adapter": "cmd", "timeout": 600, "max_parallel": 5},
     "units": [{"id": "u1", "prompt": "...", "cmd": ["python", "job.py"]},
               {"id": "u2", "prompt_file": "p2.md", "adapter": "claude",
                "model": "sonnet", "mode": "clone"}]}
    Unit keys: id, prompt | prompt_file, adapter (or "auto"), model, effort,
    timeout, stall, mode (scratch | clone | cwd), cwd, resume_from, session, cmd,
    panel (units sharing one answer the same prompt, compared together),
    and tool access: permission_mode, allowed_tools, sandbox, network,
    isolate_mcp, extra_args (refused if the tool cannot honour them); contract
    (false: no return contract), sections (or required_sections: the answer's
    required sections instead of Conclusion, Files, Open items, Verification).
    "tasks" is another name for "units". A unit may instead take a prompt
    template (research, code, review, verify, fix) with "template" and "vars";
    a var {"unit": "ID"} is the answer of that unit of the run:
    {"id": "v1", "template": "verify",
     "vars": {"task": "...", "result": {"unit": "u1"}}}
    The options --model, --timeout, --stall and the tool access ones are
    defaults for every unit: they replace the manifest's defaults, never a key
    a unit sets itself. A unit with no model gets wf's fan-out default
    (claude: sonnet), never an expensive one.
    
    wf run units.json --max-parallel 5
    wf run units.json --run r1      # again: skips what is done, retries the rest
    wf run units.json --timeout 0 --sandbox workspace-write --permission-mode acceptEdits
    wf run --panel claude,codex "Is the parser safe on empty input?" --clone --run q1
    wf gather q1 --compare          # their answers section by section
    wf run --templates              # the templates; wf run --templates verify: one
    """
    if templates:
        if panel_tools is not None:
            raise click.UsageError("--templates and --panel exclude each other")
        _templates(manifest, as_json)
        return 0
    given = access_given(sandbox, network, permission_mode, allowed_tools)
    given.update(
        {k: v for k, v in (("model", model), ("timeout", timeout), ("stall", stall)) if v is not None}
    )
    panel_only = {"--prompt": prompt, "--prompt-file": prompt_file, "--clone": panel_clone or None,
                  "--cwd": panel_cwd, "--cmd": panel_cmd}  # fmt: skip
    reqs: list[UnitRequest] | None = None
    if panel_tools is not None:
        text = _prompt_text(prompt, prompt_file, manifest, positional_is_text=True)
        reqs = _panel_requests(panel_tools, text, panel_clone, panel_cwd, panel_cmd, given)
    else:
        _check_manifest_form(manifest, panel_only)
    return _run_units(ctx, manifest, reqs, run_id, max_parallel, given, max_retries, not no_contract, as_json)


def _run_units(
    ctx: click.Context,
    manifest: str | None,
    reqs: list[UnitRequest] | None,
    run_id: str | None,
    max_parallel: int | None,
    given: dict[str, Any],
    max_retries: int,
    contract: bool,
    as_json: bool,
) -> int:
    """wf run's units (a panel's ``reqs``, else the manifest's), one line each as it
    ends, then the run's report: its exit code."""
    from wf.fanout import fanout, report
    from wf.fanout import manifest as manifestmod

    live = Live(as_json)
    proj = _project(ctx)
    common: dict[str, Any] = {
        "max_retries": max_retries,
        "contract": contract,
        "on_end": lambda u: live.echo(report.unit_line(u.status)),
        "on_tick": live.tick_units,
    }
    if reqs is not None:
        run = run_id or manifestmod.default_run_id(Path("panel"))
        outcome = fanout.run_requests(proj, reqs, run=run, max_parallel=max_parallel or len(reqs), **common)
    else:
        outcome = fanout.run_manifest(
            proj, Path(str(manifest)), run=run_id, max_parallel=max_parallel, given=given, **common
        )
    live.done()
    outcome_report(proj, outcome, as_json)
    return outcome.code


def _check_manifest_form(manifest: str | None, panel_only: Mapping[str, object]) -> None:
    """wf run without --panel: a manifest with units, and none of the panel's options."""
    from wf.fanout import manifest as manifestmod

    wrong = [flag for flag, value in panel_only.items() if value is not None]
    if wrong:
        raise click.UsageError(f"{', '.join(wrong)}: only with --panel (a manifest gives its own)")
    if manifest is None:
        raise click.UsageError("Missing argument 'MANIFEST' (or --panel TOOLS with a PROMPT).")
    if not manifestmod.load_manifest(Path(manifest))[1]:
        raise click.UsageError(f"{manifest} has no units: nothing to run (its 'units' list is empty)")


def _panel_requests(
    tools: str, text: str, clone: bool, cwd: str | None, cmd: str | None, given: dict[str, Any]
) -> list[UnitRequest]:
    """The units of ``wf run --panel``, where they run given by --clone or --cwd; the
    options every unit takes (--model, --timeout, --stall, tool access) in ``given``."""
    from wf import adapters
    from wf.fanout import manifest

    if clone and cwd:
        raise click.UsageError("--cwd and --clone exclude each other")
    return manifest.panel_requests(
        tools,
        text,
        mode="clone" if clone else "cwd" if cwd else None,
        cwd=str(Path(cwd).resolve()) if cwd else None,
        cmd=adapters.split_cmd(cmd) if cmd else (),
        given=given,
    )


def _templates(name: str | None, as_json: bool) -> None:
    """``wf run --templates [NAME]``: the list, or one template's text."""
    from wf.base.text import table
    from wf.fanout import prompts

    if name is not None:
        try:
            template = prompts.get(name)
        except prompts.TemplateError as e:
            raise click.UsageError(str(e)) from None
        if as_json:
            _echo_json({**template.as_json(), "text": template.text()})
        else:
            click.echo(template.text(), nl=False)
        return
    found = prompts.all_templates()
    if as_json:
        _echo_json([t.as_json() for t in found])
        return
    rows = [[t.name, ", ".join(f"{{{p}}}" for p in t.placeholders), t.summary] for t in found]
    for line in table(rows):
        click.echo(line)
    click.echo('wf run --templates NAME shows one; a unit uses it with "template": NAME, "vars": {...}')


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
