"""The TASKS.md commands: init, config, check, list, lanes, show, ctx, log, add, set,
status, note, edit, done."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wf.base.errors import WfError
from wf.base.text import safe
from wf.cli.base import _backlog, _echo_json, _n, _on_wait, _print, _project, _warn, cli

if TYPE_CHECKING:
    from wf.base.project import Project

# ---------------------------------------------------------------- init / config


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_context
def init(ctx: click.Context, as_json: bool) -> None:
    """Set up wf here: TASKS.md, wf.toml, and .worktrees/, .wf/, out/ in .gitignore.

    Run it at the top of a git repository (from a subfolder, the repository's top is
    used). Existing files are kept; only missing pieces are added.

    \b
    Example:
      wf init && git add TASKS.md wf.toml .gitignore && git commit -m 'wf init'
    """
    from wf.tasks import bootstrap

    start = Path(ctx.obj.get("dir") or ".")
    result = bootstrap.init(start)
    _print(as_json, result, result["lines"])


# a negative VALUE (wf config lock_timeout -1) is a value to refuse by name, not an option
@cli.command("config", context_settings={"ignore_unknown_options": True})
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--unset", is_flag=True, help="Remove KEY from wf.toml (lanes.NAME removes a whole lane).")
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
@click.pass_context
def config_cmd(ctx: click.Context, key: str | None, value: str | None, unset: bool, as_json: bool) -> None:
    """Show the settings, one KEY, or set KEY to VALUE in wf.toml (comments kept).

    \b
    Keys: main, tasks, archive, slice_above, isolation (worktree|clone), gate,
    cloud, lock_timeout, backup_days, notify, and per lane lanes.<name>.model | adapter |
    max_parallel | effort | cmd | permission_mode | allowed_tools.
    VALUE is read as TOML when it is (2, true, ["a", "b"]), else as a string.
    A setting that is not set shows as '# KEY: not set'; --unset removes one
    (main and gate also go back to unset when given "").
    Examples:
      wf config lanes.sonnet.max_parallel 2
      wf config lanes.sonnet
      wf config --unset lanes.haiku
    """
    from wf.base import configedit

    proj = _project(ctx)
    cfg = proj.config
    if unset:
        if key is None or value is not None:
            raise click.UsageError("--unset takes one KEY: wf config --unset lanes.haiku")
        cfg = configedit.unset_value(proj.config_path, key)
    elif value is not None and key is not None:
        configedit.check_key(key)
        if key in ("main", "gate") and value.strip() in ("", '""', "''"):
            cfg = _unset_if_set(proj.config_path, key) or cfg
        else:
            cfg = configedit.set_value(proj.config_path, key, value)
    if unset or value is not None:
        for w in cfg.warnings:
            _warn(str(w))
    data = cfg._asdict()
    data["lanes"] = {  # a lane's models per adapter: a table, as written in wf.toml
        ln.name: {k: v for k, v in {**ln.as_dict(), "models": dict(ln.models)}.items() if k != "name"}
        for ln in cfg.lanes
    }
    data.pop("warnings")
    data["fanout"] = {"models": dict(data.pop("fanout_models")), "expensive": data.pop("fanout_expensive")}
    if unset:
        click.echo(f"removed {key}" if key not in data else f"{key}: back to its default")
        return
    node: Any = data
    if key is not None:
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise WfError(f"no setting {key!r} (wf config lists them)")
            node = node[part]
    if as_json:
        _echo_json(node)
        return
    for line in _setting_lines(key, node):
        click.echo(safe(line))


def _unset_if_set(path: Path, key: str) -> Any:
    from wf.base import configedit

    try:
        return configedit.unset_value(path, key)
    except WfError:
        return None  # not set: nothing to remove


def _setting_lines(key: str | None, node: Any) -> list[str]:
    """``key = value`` lines in TOML syntax, one per leaf; a leaf that is not set is a
    comment saying so."""
    if key and key.endswith(".models") and isinstance(node, dict):  # per adapter: one table
        return (
            [f"{key} = {{{', '.join(f'{k} = {_toml_value(v)}' for k, v in node.items())}}}"]
            if node
            else [f"# {key}: not set"]
        )
    if isinstance(node, dict):
        out: list[str] = []
        for k, v in node.items():
            out += _setting_lines(f"{key}.{k}" if key else k, v)
        return out
    if node is None or node == ():
        return [f"# {key}: not set"]
    return [f"{key} = {_toml_value(node)}"]


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

    Each problem is one line 'FILE:LINE: error|warning: what'. Structural errors (a
    malformed heading, a duplicate or bad id, an open fence hiding a heading, lone CR
    line breaks) make every writing command refuse the file; an error inside one task
    (a bad field value, an unknown status, an unknown After id, an After cycle, a Lane
    wf.toml lacks) refuses only writes to that task and makes it not runner-ready.
    Example: wf check --json
    """
    from wf import adapters
    from wf.base.errors import ParseIssue
    from wf.tasks import views
    from wf.trees import worktrees

    bl = _backlog(ctx)
    issues = bl.check()
    main = worktrees.main_problem(bl.project)
    if main is not None:
        issues.append(ParseIssue("wf.toml", 0, "error", main))
    for lane in bl.config.lanes:  # a lane whose model, effort or access does not fit its tool
        for p in adapters.lane_problems(lane):
            issues.append(ParseIssue("wf.toml", 0, "error", f"lanes.{lane.name}: {p.message}; {p.fix}"))
    if bl.config.shared:  # claims across machines: stale, without a task, tasks without a ref
        from wf.trees import claims

        for ci in claims.audit(bl.project):
            issues.append(ParseIssue("claims", 0, "warning", ci.text))
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
    type=click.Choice(["ready", "pending", "handback", "progress", "awaiting", "blocked", "wip"]),
    help="Only tasks in this state (pending includes ready and handback: handed back, waiting for a person).",
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

    \b
    Example:
      wf list --runner --lane sonnet
    """
    from wf.base import settle
    from wf.tasks import listcache, views

    proj = _project(ctx)
    if lane is not None and proj.config.lane(lane) is None:
        raise WfError(f"no lane {lane!r} (lanes: {', '.join(ln.name for ln in proj.config.lanes)})")
    if limit is None:
        limit = views.RUNNER_LIMIT if runner else 0

    def compute(data: bytes | None, archive_data: bytes | None) -> Any:
        from wf.tasks import backlog  # only now: an answer from the cache needs no backlog

        bl = backlog.load_readable(proj, data, archive_data)
        records, total = views.list_rows(bl, runner=runner, lane=lane, status=status, limit=limit)
        return records, total, views.issue_lines(bl.errors(), limit=10)

    options = ("list", 2, runner, lane, status, limit)
    # never half of a person's save, nor its answer: the bytes are read settled
    records, total, warnings = listcache.answer(proj, options, lambda: settle.read_backlog(proj), compute)
    for line in warnings:
        _warn(line)
    if proj.config.shared:  # which machine holds each claim, as this machine last saw
        from wf.trees import claims

        records = claims.with_machines(proj, records)
    _print(as_json, records, views.list_text(records, total, runner=runner))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of lanes.")
@click.pass_context
def lanes(ctx: click.Context, as_json: bool) -> None:
    """List lanes with their model, adapter, task counts and active worker.

    \b
    Example:
      wf lanes --json
    """
    from wf.tasks import views

    bl = _backlog(ctx)
    virtual = []
    if bl.config.cloud:
        from wf.cloud.lane import lane_row

        virtual.append(lane_row(bl))
    records = views.lanes(bl, virtual)
    if bl.config.shared:  # each lane's machine, and the machine of each claim of its tasks
        from wf.trees import claims

        claims.with_lane_claims(bl, records)
    _print(as_json, records, views.lanes_text(records))


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the task record as JSON.")
@click.pass_context
def show(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """Show a task: where it is, whether it is runner-ready (and why not), its text.

    A held task (handed back, awaiting, wip, blocked, picked) says what holds it and
    the command that releases it ('held (...)', 'release: ...'; --json: hold).
    An archived id shows its archive line.

    \b
    Example:
      wf show fetch-retry
    """
    from wf.tasks import views

    rec = views.show(_backlog(ctx), task_id)
    _print(as_json, rec, views.show_text(rec))


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the context as JSON.")
@click.pass_context
def ctx(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """What a worker needs for task ID: the task, its Done, the archive lines of its
    After tasks, the main tree, worktree and branch.

    \b
    Example:
      wf ctx fetch-retry --json
    """
    from wf.tasks import views

    c = views.ctx(_backlog(ctx), task_id, Path(ctx.obj.get("dir") or "."))
    _print(as_json, c, views.ctx_text(c))


@cli.command()
@click.option(
    "-n", "count", type=click.IntRange(min=0), default=10, show_default=True, help="How many lines."
)
@click.option("--json", "as_json", is_flag=True, help="Print archive entries as JSON.")
@click.pass_context
def log(ctx: click.Context, count: int, as_json: bool) -> None:
    """The last N archived (done) tasks, oldest first.

    \b
    Example:
      wf log -n 5
    """
    bl = _backlog(ctx)
    entries = bl.archive.entries[-count:] if count else []
    if as_json:
        _echo_json([e.as_dict() for e in entries])
        return
    for e in entries:
        click.echo(safe(e.raw))


# ---------------------------------------------------------------- writes


def _check_effort(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad --effort is a usage error (exit 2), as a bad --prio is; '' removes the field."""
    from wf.tasks.fields import EFFORT_EXPECTED, check_field

    if value is not None and value.strip() and check_field("effort", value):
        raise click.BadParameter(f"{EFFORT_EXPECTED}, not {value!r}")
    return value


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
        click.option(
            "--effort",
            callback=_check_effort,
            help="Rough size, a positive number (above slice_above: sliced first).",
        ),
        click.option("--sessions", type=click.Choice(["owner", "solo", ""]), help="owner or solo."),
        click.option("--cloud", type=click.Choice(["yes", "no", ""]), help="Prefer the cloud lane."),
        click.option("--parent", help="This task is a slice of that id."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


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

    \b
    Example:
      wf add "Retry failed fetches" --model sonnet -p 1 --done "`pytest -k retry` passes"
    """
    from wf.tasks import ops

    proj = _project(ctx)
    new_id = ops.add_task(proj, title, task_id=task_id, body=_body(body), on_wait=_on_wait, **_clean(fields))
    _warn_model(proj, fields.get("model"), fields.get("lane"))
    _echo_json({"id": new_id}) if as_json else click.echo(new_id)


def _warn_model(proj: Project, model: str | None, lane: str | None) -> None:
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

    \b
    Example:
      wf set fetch-retry --prio 0 --after http-client
    """
    from wf.tasks import ops

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
    wf status ID pending         back to the queue (removes the Status line and
                                 releases a handback hold)

    \b
    Example:
      wf status fetch-retry awaiting 'Which backoff: linear or exponential?'
    """
    from wf.tasks import ops

    if state != "pending" and not (note or "").strip():
        what = "WHO (the claimer)" if state == "progress" else "a NOTE (why, or the question)"
        raise click.UsageError(f"{state} needs {what}: wf status {task_id} {state} ...")
    proj = _project(ctx)
    if proj.config.shared:  # a claim is also a ref on the shared remote (docs/machines.md)
        from wf.cli.claims import shared_status

        shared_status(proj, task_id, state, note, force, as_json)
        return
    st = ops.set_status(proj, task_id, state, note, force=force, on_wait=_on_wait)
    if as_json:
        _echo_json({"id": task_id, "state": st.state, "status": str(st)})
    else:
        click.echo(safe(f"{task_id}: {st}"))


@cli.command()
@click.argument("task_id", metavar="ID")
@click.argument("text")
@click.pass_context
def note(ctx: click.Context, task_id: str, text: str) -> None:
    """Append a dated 'Note:' line to task ID.

    \b
    Example:
      wf note fetch-retry 'the flaky test is in tests/test_http.py'
    """
    from wf.tasks import ops

    ops.add_note(_project(ctx), task_id, text, on_wait=_on_wait)
    click.echo(f"{task_id}: noted")


@cli.command()
@click.argument("task_id", metavar="ID")
@click.pass_context
def edit(ctx: click.Context, task_id: str) -> None:
    """Edit task ID in $VISUAL or $EDITOR (default vi), safely beside wf's own writes.

    The task's text is edited in a file of its own; it replaces the task only if nobody
    changed the task meanwhile and it still parses with the same id. Else your version
    is kept in .wf/edit/ID.md and the next 'wf edit ID' reopens it. The rest of
    TASKS.md is never touched.

    \b
    Example:
      EDITOR=nano wf edit fetch-retry
    """
    import shlex
    import subprocess

    from wf.tasks import ops

    var = "VISUAL" if os.environ.get("VISUAL") else "EDITOR"
    try:
        editor = shlex.split(os.environ.get(var) or "vi")
    except ValueError as e:
        raise WfError(f"${var} is not a command line wf can split ({e}): {os.environ.get(var)!r}") from None
    if not editor:
        editor = ["vi"]

    def run_editor(path: Path) -> None:
        try:
            code = subprocess.call([*editor, str(path)])
        except OSError as e:
            raise WfError(
                f"cannot start the editor {editor[0]!r} (from ${var}): {e.strerror}; "
                f"set VISUAL or EDITOR to an editor's command; nothing was changed"
            ) from None
        if code != 0:
            raise WfError(f"the editor {editor[0]} exited {code}; nothing was changed (draft: {path})")
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise WfError(
                f"the editor saved {path} in another encoding than UTF-8 (byte {e.object[e.start]:#04x} "
                f"at offset {e.start}); nothing was changed: save it as UTF-8 and edit again"
            ) from None

    def on_reopen(path: Path) -> None:
        _warn(f"reopening your kept draft {path} (a refused edit); delete it to start from the task")

    result = ops.edit_task(_project(ctx), task_id, run_editor, on_reopen=on_reopen, on_wait=_on_wait)
    if result is ops.Edited.KEPT:
        click.echo(f"{task_id}: unchanged (not saved; your draft stays in .wf/edit/{task_id}.md)")
    else:
        click.echo(f"{task_id}: {result.value}")


@cli.command()
@click.argument("task_id", metavar="ID")
@click.option("--commit", metavar="SHA", help="The commit that finished it (recorded in the archive).")
@click.option("--json", "as_json", is_flag=True, help="Print the archive line as JSON.")
@click.pass_context
def done(ctx: click.Context, task_id: str, commit: str | None, as_json: bool) -> None:
    """Archive task ID: one line in the archive, the task removed from TASKS.md.

    \b
    Example:
      wf done fetch-retry --commit 1a2b3c4
    """
    from wf.tasks import ops

    proj = _project(ctx)
    line = ops.done_task(proj, task_id, commit=commit, on_wait=_on_wait)
    if proj.config.shared:
        from wf.trees import claims

        if claims.settle(proj, task_id) is claims.Settled.OFFLINE:
            _warn(f"{task_id}: the shared remote is unreachable; its claim ref stays (wf check lists it)")
    _echo_json({"id": task_id, "archived": line}) if as_json else click.echo(safe(line))
