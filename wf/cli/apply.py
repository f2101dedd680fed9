"""``wf apply``: bring a clone unit's changes into the main checkout, unstaged.

Exit codes (shared/conventions.md): 0 applied (or, with --check, it applies); 4 it does
not apply (a conflict, uncommitted changes to its files, an unsafe path): nothing
changed; 1 an error (no such unit, not a clone unit, still running).
"""

from __future__ import annotations

import click

from wf.base.text import safe_line
from wf.cli.base import _echo_json, _project, cli


@cli.command("apply")
@click.argument("run")
@click.argument("unit")
@click.option("--check", is_flag=True, help="Only say whether it applies; change nothing.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object: run, unit, base, target, patch, files, applies, applied, refusal, blocked, code.",
)
@click.pass_context
def apply_cmd(ctx: click.Context, run: str, unit: str, check: bool, as_json: bool) -> int:
    """Bring a clone unit's changes (its commits, edits and new files since the commit it
    started from) into the main checkout's files, unstaged: nothing is committed and the
    index is not touched. Exit 0 applied, 4 it does not apply (nothing changed; the files
    are named), 1 an error.

    The patch is kept as .wf/runs/RUN/UNIT/changes.patch. Refused, changing nothing: a
    unit still running, one not run with --clone, files of the patch with uncommitted
    changes in the checkout, a patch that does not apply.

    \b
    wf apply r1 refactor --check && wf apply r1 refactor
    git diff            # review it; commit it yourself, or git checkout -- . to drop it
    """
    from wf.fanout.apply import apply

    result = apply(_project(ctx), run, unit, check=check)
    if as_json:
        _echo_json(result.as_json())
    else:
        for line in result.lines():
            click.echo(safe_line(line), err=not result.applies)
    return result.code
