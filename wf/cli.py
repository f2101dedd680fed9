"""The command line: the only module that imports click.

Each command collects its options, calls one core function and prints the result.
Exit codes: 0 ok, 1 an expected error (message on stderr), 2 a usage error,
3 a bug (traceback saved to a crash log), 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from wf import __version__
from wf.errors import ParseError, WfError

STATES_HELP = "pending, progress, awaiting, blocked or wip"


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=None, ensure_ascii=False, sort_keys=False))


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _warn(line: str) -> None:
    click.echo(f"wf: {line}", err=True)


def _project(ctx: click.Context) -> Any:
    from wf import project

    start = ctx.find_root().obj.get("dir") if ctx.find_root().obj else None
    if start and not Path(start).is_dir():
        raise WfError(f"-C {start}: no such directory")
    return project.load(Path(start) if start else None)


def _backlog(ctx: click.Context) -> Any:
    from wf import backlog

    return backlog.load(_project(ctx))


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added, not sorted


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="wf")
@click.option(
    "-C",
    "directory",
    metavar="DIR",
    help="Run as if wf was started in DIR.",
)
@click.pass_context
def cli(ctx: click.Context, directory: str | None) -> None:
    """wf turns a human-edited TASKS.md into parallel, checked work by AI coding agents.

    \b
    A task is a '## <id>: <title>' heading with 'Key: value' fields under it
    (Model, Done, Prio, Effort, After, Lane, Sessions, Parent, Status, Note).
    Runner-ready = pending, Model and Done set, its lane exists, every After
    id archived, not 'Sessions: owner', no open slices.

    \b
    First:     wf demo (the whole loop on a made-up project, no API key)
    Everyday:  wf init · wf add "Title" --model sonnet --done "pytest -q" ·
               wf list --runner · wf show ID · wf status ID progress me · wf done ID
    Loop:      wf orch pick · wf orch post LANE --result R · wf orch run
    Trees:     wf wt add LANE ID · wf merge · wf wt list · wf doctor
    Workers:   wf dispatch RUN UNIT · wf run MANIFEST · wf monitor RUN
    Cost:      wf usage --agent ID · wf usage --report
    Exit codes: 0 ok, 1 error (message on stderr), 2 usage, 3 bug (crash log).
    """
    ctx.obj = {"dir": directory}


# ---------------------------------------------------------------- init / config


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_context
def init(ctx: click.Context, as_json: bool) -> None:
    """Set up wf here: TASKS.md, wf.toml, and .worktrees/, .wf/, out/ in .gitignore.

    Run it at the top of a git repository (from a subfolder, the repository's top is
    used). Existing files are kept; only missing pieces are added.
    """
    from wf import bootstrap

    start = Path(ctx.obj.get("dir") or ".")
    result = bootstrap.init(start)
    if as_json:
        _echo_json(result)
        return
    for line in result["lines"]:
        click.echo(line)


@cli.command("config")
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
@click.pass_context
def config_cmd(ctx: click.Context, key: str | None, value: str | None, as_json: bool) -> None:
    """Show the settings, one KEY, or set KEY to VALUE in wf.toml (comments kept).

    \b
    Keys: main, tasks, archive, slice_above, isolation (worktree|clone), gate,
    cloud, lock_timeout, and per lane lanes.<name>.model | adapter | max_parallel |
    effort | cmd | permission_mode | allowed_tools.
    VALUE is read as TOML when it is (2, true, ["a", "b"]), else as a string.
    Example: wf config lanes.sonnet.max_parallel 2
    """
    from wf import config as configmod

    proj = _project(ctx)
    cfg = proj.config
    if value is not None and key is not None:
        configmod.check_key(key)
        cfg = configmod.set_value(proj.config_path, key, value)
    data = cfg._asdict()
    data["lanes"] = {ln.name: {k: v for k, v in ln.as_dict().items() if k != "name"} for ln in cfg.lanes}
    data.pop("warnings")
    if key is not None:
        node: Any = data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise WfError(f"no setting {key!r} (wf config lists them)")
            node = node[part]
        if as_json:
            _echo_json(node)
        else:
            click.echo(f"{key} = {_toml_value(node)}")
        return
    if as_json:
        _echo_json(data)
        return
    for k, v in data.items():
        if k == "lanes":
            for name, spec in v.items():
                for a2, b2 in spec.items():
                    click.echo(f"lanes.{name}.{a2} = {_toml_value(b2)}")
        else:
            click.echo(f"{k} = {_toml_value(v)}")


def _toml_value(v: Any) -> str:
    if v is None:
        return '""'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


# ---------------------------------------------------------------- read-only


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print counts and issues as JSON.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> int:
    """Check TASKS.md, the archive and wf.toml; exit 1 if there are errors.

    Each problem is one line 'FILE:LINE: error|warning: what'. Errors (a malformed
    heading, a duplicate or bad id, a bad field value, an unknown status, an After id
    that does not exist, an After cycle) make every writing command refuse the file.
    """
    from wf import views

    bl = _backlog(ctx)
    issues = bl.check()
    summary = views.check_summary(bl, issues)
    if as_json:
        _echo_json(summary)
    else:
        for line in views.issue_lines(issues, limit=1000):
            click.echo(line)
        click.echo(
            f"{bl.doc.path}: {_n(summary['tasks'], 'task')}, {summary['ready']} runner-ready, "
            f"{summary['archived']} archived, {_n(summary['errors'], 'error')}, "
            f"{_n(summary['warnings'], 'warning')}"
        )
    return 1 if summary["errors"] else 0


@cli.command("list")
@click.option(
    "--runner", is_flag=True, help="Only runner-ready tasks, in pick order (lane, Prio, file order)."
)
@click.option("--lane", metavar="LANE", help="Only tasks of this lane.")
@click.option(
    "--status",
    "status",
    type=click.Choice(["ready", "pending", "progress", "awaiting", "blocked", "wip"]),
    help="Only tasks in this state (pending includes ready).",
)
@click.option(
    "--limit",
    type=int,
    default=None,
    help=f"Rows at most (default {20} with --runner, else all); 0 = all.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of task records.")
@click.pass_context
def list_cmd(
    ctx: click.Context, runner: bool, lane: str | None, status: str | None, limit: int | None, as_json: bool
) -> None:
    """List open tasks, one short row each.

    \b
    Rows:           ID  LANE  pPRIO  STATE  TITLE
    With --runner:  ID  LANE  pPRIO  eEFFORT  TITLE  ('slice: ID' = split it first)
    A file with errors is still listed: its problems go to stderr with line numbers.
    """
    from wf import listcache, views

    proj = _project(ctx)
    if lane is not None and proj.config.lane(lane) is None:
        raise WfError(f"no lane {lane!r} (lanes: {', '.join(ln.name for ln in proj.config.lanes)})")
    if limit is None:
        limit = views.RUNNER_LIMIT if runner else 0
    k = listcache.key(proj, ("list", runner, lane, status, limit))
    cached = listcache.load(proj, k) if k else None
    if cached is not None:
        records, total, warnings = cached
    else:
        from wf import backlog

        bl = backlog.load(proj)
        records, total = views.list_rows(bl, runner=runner, lane=lane, status=status, limit=limit)
        warnings = views.issue_lines(bl.doc.errors, limit=10)
        if k:
            listcache.store(proj, k, (records, total, warnings))
    for line in warnings:
        _warn(line)
    if as_json:
        _echo_json(records)
        return
    for line in views.list_text(records, total, runner=runner):
        click.echo(line)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of lanes.")
@click.pass_context
def lanes(ctx: click.Context, as_json: bool) -> None:
    """List lanes with their model, adapter, task counts and active worker."""
    from wf import views

    bl = _backlog(ctx)
    records = views.lanes(bl)
    if as_json:
        _echo_json(records)
        return
    for line in views.lanes_text(records):
        click.echo(line)


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the task record as JSON.")
@click.pass_context
def show(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Show a task: where it is, whether it is runner-ready (and why not), its text.

    An archived id shows its archive line.
    """
    from wf import views

    rec = views.show(_backlog(ctx), task_id)
    if as_json:
        _echo_json(rec)
        return
    for line in views.show_text(rec):
        click.echo(line)


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the context as JSON.")
@click.pass_context
def ctx(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """What a worker needs for task ID: the task, its Done, the archive lines of its
    After tasks, the main tree, worktree and branch."""
    from wf import views

    c = views.ctx(_backlog(ctx), task_id, Path(ctx.obj.get("dir") or "."))
    if as_json:
        _echo_json(c)
        return
    for line in views.ctx_text(c):
        click.echo(line)


@cli.command()
@click.option(
    "-n", "count", type=click.IntRange(min=0), default=10, show_default=True, help="How many lines."
)
@click.option("--json", "as_json", is_flag=True, help="Print archive entries as JSON.")
@click.pass_context
def log(ctx: click.Context, count: int, as_json: bool) -> None:
    """The last N archived (done) tasks, oldest first."""
    bl = _backlog(ctx)
    entries = bl.archive.entries[-count:] if count else []
    if as_json:
        _echo_json([e.as_dict() for e in entries])
        return
    for e in entries:
        click.echo(e.raw)


# ---------------------------------------------------------------- writes


def _field_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "-p", "--prio", type=click.IntRange(0, 3), help="Prio 0..3 (0 is most urgent; default 2)."
        ),
        click.option(
            "-s",
            "--status",
            "status",
            metavar="STATUS",
            help="Status, e.g. 'awaiting: which API?' or 'blocked: needs key'.",
        ),
        click.option("--model", help="The cheapest model that fits (haiku, sonnet, opus, a lane's model)."),
        click.option("--lane", help="Lane (default: the lane of the Model)."),
        click.option("--done", help="How a machine can tell it is done (a command, a test, a file)."),
        click.option("--after", help="Ids that must be done first, comma-separated."),
        click.option("--effort", help="Rough size, a positive number (above slice_above: sliced first)."),
        click.option("--sessions", type=click.Choice(["owner", "solo", ""]), help="owner or solo."),
        click.option("--cloud", type=click.Choice(["yes", "no", ""]), help="Prefer the cloud lane."),
        click.option("--parent", help="This task is a slice of that id."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _on_wait(line: str) -> None:
    _warn(line)


def _body(body: str | None) -> str | None:
    if body == "-":
        return sys.stdin.read()
    return body


@cli.command()
@click.argument("title")
@click.option("--id", "task_id", metavar="ID", help="Use this id (default: drawn from the title).")
@_field_options
@click.option("--body", metavar="TEXT|-", help="Body text under the fields; '-' reads stdin.")
@click.option("--json", "as_json", is_flag=True, help="Print {'id': ...} as JSON.")
@click.pass_context
def add(
    ctx: click.Context, /, title: str, task_id: str | None, body: str | None, as_json: bool, **fields: Any
) -> None:
    """Add a task at the end of TASKS.md and print its id.

    The id is drawn under the project lock from the title (or --id), unique across
    TASKS.md and the archive. After and Parent ids must exist.
    """
    from wf import ops

    proj = _project(ctx)
    new_id = ops.add_task(proj, title, task_id=task_id, body=_body(body), on_wait=_on_wait, **_clean(fields))
    _warn_model(proj, fields.get("model"), fields.get("lane"))
    _echo_json({"id": new_id}) if as_json else click.echo(new_id)


def _warn_model(proj: Any, model: str | None, lane: str | None) -> None:
    """A Model no lane runs is allowed (a lane may be added later) but said at once."""
    if model and not lane and proj.config.lane_for_model(model) is None:
        names = ", ".join(f"{ln.name} ({ln.model})" for ln in proj.config.lanes)
        _warn(f"no lane runs model {model!r}, so the task is not runner-ready; lanes: {names}")


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


@cli.command("set")
@click.argument("task_id", metavar="ID")
@click.option("--title", help="New title.")
@_field_options
@click.option("--json", "as_json", is_flag=True, help="Print the changed keys as JSON.")
@click.pass_context
def set_cmd(ctx: click.Context, /, task_id: str, title: str | None, as_json: bool, **fields: Any) -> None:
    """Change fields of task ID; an empty value ('') removes the field.

    Only the lines of the changed fields are rewritten.
    """
    from wf import ops

    proj = _project(ctx)
    changed = ops.set_fields(proj, task_id, title=title, on_wait=_on_wait, **_clean(fields))
    _warn_model(proj, fields.get("model"), fields.get("lane"))
    if as_json:
        _echo_json({"id": task_id, "changed": changed})
    else:
        click.echo(f"{task_id}: " + (", ".join(changed) if changed else "unchanged"))


@cli.command()
@click.argument("task_id", metavar="ID")
@click.argument(
    "state", metavar="STATE", type=click.Choice(["pending", "progress", "awaiting", "blocked", "wip"])
)
@click.argument("note", required=False)
@click.option("--force", is_flag=True, help="Claim even if the task is claimed or not runner-ready.")
@click.option("--json", "as_json", is_flag=True, help="Print the new status as JSON.")
@click.pass_context
def status(
    ctx: click.Context, task_id: str, state: str, note: str | None, force: bool, as_json: bool
) -> None:
    """Set the status of task ID: STATE is pending, progress, awaiting, blocked or wip.

    \b
    wf status ID progress WHO    claim it (fails naming the holder if taken)
    wf status ID awaiting 'Q'    needs a ruling from the owner
    wf status ID blocked 'WHY'   cannot go on until something outside changes
    wf status ID wip 'NOTE'      unfinished work was wrapped up
    wf status ID pending         back to the queue (removes the Status line)
    """
    from wf import ops

    if state != "pending" and not (note or "").strip():
        what = "WHO (the claimer)" if state == "progress" else "a NOTE (why, or the question)"
        raise click.UsageError(f"{state} needs {what}: wf status {task_id} {state} ...")
    st = ops.set_status(_project(ctx), task_id, state, note, force=force, on_wait=_on_wait)
    if as_json:
        _echo_json({"id": task_id, "state": st.state, "status": str(st)})
    else:
        click.echo(f"{task_id}: {st}")


@cli.command()
@click.argument("task_id", metavar="ID")
@click.argument("text")
@click.pass_context
def note(ctx: click.Context, task_id: str, text: str) -> None:
    """Append a dated 'Note:' line to task ID."""
    from wf import ops

    ops.add_note(_project(ctx), task_id, text, on_wait=_on_wait)
    click.echo(f"{task_id}: noted")


@cli.command()
@click.argument("task_id", metavar="ID")
@click.pass_context
def edit(ctx: click.Context, task_id: str) -> None:
    """Edit task ID in $VISUAL or $EDITOR (default vi), safely beside wf's own writes.

    The task's text is edited in a file of its own; it replaces the task only if nobody
    changed the task meanwhile (else your version is kept and the path printed), and
    only if it still parses with the same id. The rest of TASKS.md is never touched.
    """
    import shlex
    import subprocess

    from wf import ops

    editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")

    def run_editor(path: Path) -> None:
        code = subprocess.call([*editor, str(path)])
        if code != 0:
            raise WfError(f"the editor {editor[0]} exited {code}; nothing was changed (draft: {path})")

    changed = ops.edit_task(_project(ctx), task_id, run_editor, on_wait=_on_wait)
    click.echo(f"{task_id}: {'edited' if changed else 'unchanged'}")


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--commit", metavar="SHA", help="The commit that finished it (recorded in the archive).")
@click.option("--json", "as_json", is_flag=True, help="Print the archive line as JSON.")
@click.pass_context
def done(ctx: click.Context, task_id: str, commit: str | None, as_json: bool) -> None:
    """Archive task ID: one line in the archive, the task removed from TASKS.md."""
    from wf import ops

    line = ops.done_task(_project(ctx), task_id, commit=commit, on_wait=_on_wait)
    _echo_json({"id": task_id, "archived": line}) if as_json else click.echo(line)


# ---------------------------------------------------------------- git: worktrees, merge, doctor


@cli.group(cls=_Group)
def wt() -> None:
    """Lane worktrees (or clones) in .worktrees/: add, list, prune."""


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
    """
    from wf import backlog, worktrees
    from wf.taskfile import check_id

    proj = _project(ctx)
    check_id(lane, "lane")
    backlog.load(proj).doc.task(check_id(task_id, "task id"))
    if proj.config.lane(lane) is None:
        raise WfError(f"no lane {lane!r} (wf lanes)")
    rec = worktrees.allocate(proj, lane, task_id, on_wait=_on_wait)
    if as_json:
        _echo_json(rec.as_dict())
    else:
        click.echo(f"{rec.path}  branch {rec.branch}  base {rec.base[:12] if rec.base else '-'}")


@wt.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_context
def wt_list(ctx: click.Context, as_json: bool) -> None:
    """Each tree: name, branch, task, free or busy (and by whom), dirty paths,
    commits behind main, size on disk."""
    from wf import worktrees

    rows = worktrees.listing(_project(ctx))
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
    from wf.views import _table

    for line in _table(table):
        click.echo(line)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{n}B"


@wt.command("prune")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.pass_context
def wt_prune(ctx: click.Context, dry_run: bool) -> None:
    """Remove free, clean trees whose HEAD is already in main, and stale git
    registrations. Never a tree with uncommitted or unmerged work."""
    from wf import worktrees

    done = worktrees.prune(_project(ctx), dry_run=dry_run)
    for line in done or ["nothing to prune"]:
        click.echo(("would " if dry_run and done else "") + line)


@cli.command("merge")
@click.argument("target", metavar="[ID|BRANCH]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def merge_cmd(ctx: click.Context, target: str | None, as_json: bool) -> None:
    """Merge task branch LANE/ID into the main branch in the main checkout.

    \b
    Without an argument, merges the branch of the worktree you are in.
    - a merge commit "<id>: <title>" on main (computed in memory first: a
      conflict changes nothing and lists the conflicting paths, exit 1);
    - refused if main's uncommitted changes touch files the merge changes;
    - backup refs under refs/wf/backup/ before anything moves;
    - the task archived and TASKS.md + the archive committed (nothing else);
    - the worktree left detached at the new main commit, the branch deleted
      (git branch -d: never unmerged work).
    Running it again after success, failure or a kill finishes what is left.
    """
    from wf import merge

    outcome = merge.merge(_project(ctx), target, Path(ctx.obj.get("dir") or "."), on_wait=_on_wait)
    if as_json:
        _echo_json(outcome.as_dict())
        return
    sha = (outcome.merge_commit or "-")[:12]
    verb = "already merged" if outcome.already else "merged"
    click.echo(f"{verb} {outcome.branch} as {sha}")
    for n in outcome.notes:
        click.echo(f"note: {n}")


@cli.command()
@click.option("--fix", is_flag=True, help="Repair what can be repaired safely.")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool, as_json: bool) -> int:
    """Reconcile tree records, worktrees, LANE/* branches, live pids and stale git
    lock files; one line per disagreement, repaired with --fix. Exit 1 if anything
    needs attention and was not fixed."""
    from wf import doctor as doctormod

    findings = doctormod.run(_project(ctx), fix=fix)
    if as_json:
        _echo_json([f.as_dict() for f in findings])
    else:
        for f in findings:
            click.echo(str(f))
    problems = sum(1 for f in findings if not f.fixed and f.level == "problem")
    if not as_json:
        click.echo("all consistent" if not problems else f"{_n(problems, 'problem')} to look at")
    return 1 if problems else 0


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
    help="Stop it when its output has not grown for S seconds (default 600; claude 720).",
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
        click.echo(workers.end_line(u))
    if u.state == "interrupted":
        return 130
    return 0 if u.state == "done" else 1


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
        click.echo(f"{workers.status_line(st)}  {runsmod.preview(answer) if answer else ''}".rstrip())


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
        click.echo((folder / name).read_text("utf-8", errors="replace"), nl=False)
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


# ---------------------------------------------------------------- the orchestration loop


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
    """


def _echo_pick(p: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(
            {
                "lane": p.lane,
                "stop": p.stop,
                "record": p.record.as_dict() if p.record else None,
                "prompt": p.prompt or None,
            }
        )
    else:
        click.echo(p.text(), nl=not p.text().endswith("\n"))


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
    """
    from wf import orch as orchmod

    _echo_pick(
        orchmod.pick(_project(ctx), lane, task_id=task_id, recovery=recovery, on_wait=_on_wait), as_json
    )


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
    set the task's status, commit leftover bookkeeping, log, then pick the lane's next
    task or print 'stop lane LANE: WHY'.

    \b
    done, checks green    -> next task       sliced      -> next task
    done, gate red        -> P0 fix task added, and it is the next pick
    awaiting / handback / wip / post-check red -> stop the lane, saying why
    crashed (no report)   -> one recovery pick in the same tree; twice -> blocked
    """
    from wf import orch as orchmod

    if report is not None:
        from wf import orchrun

        text = sys.stdin.read() if report == "-" else report
        rep = orchrun.read_report(text)
        if rep is None:
            result = result or "handback"
            note = note or f"no report: {' '.join(text.split())[:80]}"
        else:
            result = result or rep.result
            commit = commit or rep.commit
            note = note or rep.note
    if result is None:
        raise click.UsageError("give --result R (or --report with the worker's four lines)")
    posted = orchmod.post(
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
    )
    if as_json:
        nxt = posted.next
        _echo_json(
            {
                "lane": posted.lane,
                "task": posted.task,
                "outcome": posted.outcome,
                "commit": posted.commit,
                "lines": posted.lines,
                "next": None
                if nxt is None
                else {
                    "stop": nxt.stop,
                    "record": nxt.record.as_dict() if nxt.record else None,
                    "prompt": nxt.prompt,
                },
            }
        )
    else:
        click.echo(posted.text(), nl=False)


@orch.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the active records as JSON.")
@click.pass_context
def orch_status(ctx: click.Context, as_json: bool) -> None:
    """Active lanes: task, age, tree, and whether a headless worker still lives."""
    from wf import orch as orchmod

    proj = _project(ctx)
    recs = orchmod.status(proj)
    if as_json:
        _echo_json(recs)
        return
    if orchmod.stop_file(proj).exists():
        click.echo("stop file out/wf-batch.stop is set: picks stop")
    if not recs:
        click.echo("no active lanes")
    for r in recs:
        alive = {True: "worker alive", False: "worker gone", None: "worker unknown"}[r["worker_alive"]]
        age = f"{r['age_s']}s" if r["age_s"] is not None else "-"
        click.echo(
            f"{r['lane']}: {r['id']} {r['state']} {age} {alive} {r['worktree'] or '-'}"
            + (f" recovery: {r['recovery']}" if r["recovery"] else "")
        )


@orch.command("run")
@click.argument("lanes", nargs=-1)
@click.option(
    "--adapter",
    type=click.Choice(["claude", "codex", "opencode", "cmd"]),
    help="The tool for every lane (default: each lane's adapter in wf.toml).",
)
@click.option(
    "--until-stop", is_flag=True, help="When lanes run dry, keep looking for work until the stop file."
)
@click.option("--for", "for_", metavar="DURATION", help="Start no new task after this long (e.g. 90m, 8h).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Stop a worker after S seconds.")
@click.pass_context
def orch_run(
    ctx: click.Context,
    lanes: tuple[str, ...],
    adapter: str | None,
    until_stop: bool,
    for_: str | None,
    timeout: float | None,
) -> int:
    """Run the loop headless: pick, start the lane's worker, wait, read its four report
    lines (none = crashed), post, repeat; lanes in parallel, until every lane stops.

    One line per event; a live status line when attached to a terminal. Ctrl-C stops
    the workers and leaves their records: the next run resumes them in place.
    """
    from wf import orchrun
    from wf.taskfile import check_id

    proj = _project(ctx)
    names = [check_id(x, "lane") for x in lanes] or [ln.name for ln in proj.config.lanes]
    for name in names:
        if proj.config.lane(name) is None:
            raise WfError(f"no lane {name!r} (wf lanes)")
    tty = sys.stdout.isatty()

    def emit(line: str) -> None:
        if tty:
            click.echo("\r\033[K", nl=False)
        click.echo(f"{time.strftime('%H:%M:%S')} {line.rstrip()}")

    def tick(status: str) -> None:
        if tty:
            click.echo(f"\r\033[K{status}", nl=False)

    loop = orchrun.Loop(
        proj,
        names,
        adapter=adapter,
        emit=emit,
        until_stop=until_stop,
        for_seconds=_duration(for_) if for_ else None,
        timeout=timeout,
    )
    code = loop.run(tick=tick)
    if tty:
        click.echo("\r\033[K", nl=False)
    return code


def _duration(text: str) -> float:
    import re as _re

    m = _re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", text.strip())
    if not m:
        raise click.BadParameter(f"{text!r}: expected a number with s, m, h or d (e.g. 90m)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


@cli.command("gate-run", hidden=True)
@click.argument("sha")
@click.pass_context
def gate_run(ctx: click.Context, sha: str) -> int:
    """Run the gate at SHA (started by wf orch post in the background)."""
    from wf import gate

    result = gate.run(_project(ctx), sha)
    return 0 if result["ok"] else 1


@cli.command()
@click.option(
    "--target", metavar="DIR", help="Where to link them (default: $CLAUDE_CONFIG_DIR or ~/.claude)."
)
@click.pass_context
def install(ctx: click.Context, target: str | None) -> None:
    """Link the wf-worker subagent and the wf skills into Claude Code's folders
    (agents/wf-worker.md, skills/wf-orchestrate, skills/wf-design, skills/wf-pilot)."""
    from wf import setup_claude

    for line in setup_claude.install(Path(target) if target else None):
        click.echo(line)


@cli.command()
@click.option(
    "--dir", "dir_", metavar="DIR", help="Make the demo repository here (default: a new temp folder)."
)
@click.pass_context
def demo(ctx: click.Context, dir_: str | None) -> int:
    """Run the real loop on a small made-up project, with a scripted worker (no network,
    no API key): two lanes, a task with After, an owner task, an awaiting one, one big
    enough to be sliced, one whose Done fails. Shows each step, then the lanes, the
    archive, the orch log and where to look next."""
    from wf import demo as demomod

    return demomod.run(Path(dir_) if dir_ else None, echo=click.echo)


# ---------------------------------------------------------------- usage and cost


@cli.command("usage")
@click.option("--agent", metavar="ID", help="A Claude Code subagent (found under the Claude roots).")
@click.option("--session", metavar="ID", help="A claude -p session: its transcript and its subagents'.")
@click.option("--thread", metavar="ID", help="A Codex thread (its rollout under $CODEX_HOME).")
@click.option("--file", "file_", metavar="PATH", type=click.Path(dir_okay=False), help="A transcript file.")
@click.option("--log", "log_", is_flag=True, help="Append the key=value line to out/wf-cost.log.")
@click.option("--id", "task_id", metavar="ID", help="Task id for the log line.")
@click.option("--lane", help="Lane for the log line.")
@click.option("--effort", help="Effort for the log line.")
@click.option("--done", type=click.Choice(["0", "1"]), help="Whether the task got done (1) or not (0).")
@click.option("--duration", type=click.FloatRange(min=0), help="Wall seconds (default: from the transcript).")
@click.option("--report", is_flag=True, help="The report over every project's cost log instead.")
@click.option("--since", metavar="DATE", help="With --report: only lines from this date (YYYY-MM-DD) on.")
@click.option("--project", metavar="P", help="With --report: only this project (name or path).")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object (the log line's keys), or the report rows."
)
@click.pass_context
def usage_cmd(
    ctx: click.Context,
    agent: str | None,
    session: str | None,
    thread: str | None,
    file_: str | None,
    log_: bool,
    task_id: str | None,
    lane: str | None,
    effort: str | None,
    done: str | None,
    duration: float | None,
    report: bool,
    since: str | None,
    project: str | None,
    as_json: bool,
) -> int:
    """What a worker really spent, from its own transcript; or --report.

    Each API request is counted once (transcripts repeat it on several lines), output a
    subagent's transcript never got is estimated (shown with '~'; a lower bound where
    thinking is hidden), and every request is priced from wf's price table plus your
    ~/.config/wf/prices.toml. An unknown model costs 0 and is named (unpriced=...).

    \b
    The report groups every known project's out/wf-cost.log by lane, model and effort:
    n, done, median and total $, $ per done task, median turns and duration.
    """
    from wf import costlog, usage

    if report:
        recs, bad = costlog.records(since, project)
        rows = costlog.report(recs)
        if as_json:
            _echo_json(rows)
        else:
            for line in costlog.report_text(rows) or [
                "no cost lines yet (wf usage --log, wf orch post --agent)"
            ]:
                click.echo(line)
        if bad:
            _warn(f"{bad} unreadable line(s) in cost logs were skipped")
        return 0
    sources = [x for x in (agent, session, thread, file_) if x]
    if len(sources) != 1:
        raise click.UsageError("give exactly one of --agent, --session, --thread, --file (or --report)")
    if agent:
        cost, kind = usage.for_agent(agent)
    elif session:
        cost, kind = usage.claude_cost(usage.session_files(session)), "session"
    elif thread:
        cost, kind = usage.codex_cost(usage.thread_file(thread)), "codex"
    else:
        cost, kind = usage.for_file(Path(str(file_)))
        if cost.turns == 0 and cost.malformed:
            raise WfError(
                f"{file_}: no API requests and {cost.malformed} unreadable line(s): not a transcript?"
            )
    proj_root: Path | None = None
    try:
        proj_root = _project(ctx).root
    except WfError:
        if log_:
            raise
    import time

    rec = costlog.line_for(
        cost,
        ts=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        project=proj_root.name if proj_root else "-",
        task_id=task_id,
        agent=agent or session or thread or Path(str(file_)).stem,
        kind=kind,
        lane=lane,
        effort=effort,
        done=None if done is None else done == "1",
        duration=duration,
    )
    if log_ and proj_root is not None:
        costlog.append(proj_root, rec)
    if cost.unpriced:
        names = ", ".join(cost.unpriced)
        _warn(f"unpriced model(s) {names}: counted as $0; add them to ~/.config/wf/prices.toml")
    if cost.malformed:
        _warn(f"{cost.malformed} malformed line(s) skipped")
    if as_json:
        _echo_json({**rec, "malformed": cost.malformed, "files": cost.files})
        return 0
    tilde = "~" if cost.est else ""
    click.echo(f"{kind} {rec['agent']}  model {cost.model or '-'}  turns {cost.turns}  dur {rec['dur_s']}s")
    click.echo(
        f"in {cost.inp}  out {tilde}{cost.out + cost.est}"
        + (f" ({cost.out} reported)" if cost.est else "")
        + f"  cache writes 5m {cost.cw5m} 1h {cost.cw1h}  cache reads {cost.cr}"
    )
    click.echo(
        f"usd {tilde}{cost.usd:.4f}" + (f" (reported output only: {cost.usd_rep:.4f})" if cost.est else "")
    )
    return 0


# ---------------------------------------------------------------- entry point


def _crash_log(exc: BaseException) -> str:
    import tempfile
    import time
    import traceback

    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    folder = Path(base) / "wf"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir())
    path = folder / f"crash-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    text = f"wf {__version__} {' '.join(sys.argv)}\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    path.write_text(text, "utf-8")
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="wf", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("wf: interrupted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except ParseError as e:
        click.echo(str(e), err=True)
        click.echo(
            f"wf: {len(e.issues)} error(s); wf writes nothing to the file until they are fixed (wf check)",
            err=True,
        )
        return e.exit_code
    except WfError as e:
        click.echo(f"wf: {e}", err=True)
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("wf: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: keep the traceback, show one line
        path = _crash_log(e)
        click.echo(f"wf: internal error: {type(e).__name__}: {e} (traceback in {path})", err=True)
        return 3
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    sys.exit(main())
