"""The command line: the wf.cli package is the only code that imports click.

This module holds the group, the shared helpers and the entry point; the commands
live beside it, one module per part (tasks, git, workers, orch, usage).

Each command collects its options, calls one core function and prints the result.
Exit codes: 0 ok, 1 an expected error (message on stderr), 2 a usage error,
3 a bug (traceback saved to a crash log), 4 a person or the caller must act,
5 gave up waiting, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wf import __version__
from wf.base.errors import ParseError, WfError

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from wf.base.project import Project
    from wf.tasks.backlog import Backlog
from wf.base.text import json_safe, safe


def _echo_json(data: Any) -> None:
    """JSON escapes C0 controls itself; DEL, C1 and bidirectional controls (which JSON
    may carry as they are) are written as \\u escapes too: the same text once parsed,
    and nothing a terminal would act on."""
    click.echo(json_safe(json.dumps(data, indent=None, ensure_ascii=False, sort_keys=False)))


def _print(as_json: bool, data: Any, lines: Iterable[str]) -> None:
    """A report: ``data`` as one JSON document, or the text ``lines``."""
    if as_json:
        _echo_json(data)
        return
    for line in lines:
        click.echo(safe(line))


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _warn(line: str) -> None:
    click.echo(safe(f"wf: {line}"), err=True)


def _project(ctx: click.Context) -> Project:
    from wf.base import project

    start = ctx.find_root().obj.get("dir") if ctx.find_root().obj else None
    if start and not Path(start).is_dir():
        raise WfError(f"-C {start}: no such directory")
    return project.load(Path(start) if start else None)


def _backlog(ctx: click.Context) -> Backlog:
    from wf.tasks import backlog

    return backlog.load(_project(ctx))


_ORDER = [
    "init",
    "config",
    "check",
    "list",
    "lanes",
    "show",
    "ctx",
    "log",
    "add",
    "set",
    "status",
    "note",
    "edit",
    "done",
    "wt",
    "merge",
    "doctor",
    "dispatch",
    "run",
    "runs",
    "monitor",
    "gather",
    "orch",
    "usage",
    "install",
    "demo",
    "res",
    "batch",
    "pilot",
]


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        # the order a user meets them in, not the alphabet (nor the order modules load);
        # a group's own subcommands keep the order they are defined in
        if ctx.parent is not None:
            return list(self.commands)
        rank = {name: i for i, name in enumerate(_ORDER)}
        return sorted(self.commands, key=lambda n: (rank.get(n, len(rank)), n))


class _LazyGroup(_Group):
    """The root group: it knows each command's name, module and first sentence of help
    (``lazy``, filled by ``wf.cli``) and imports a command's module only when that
    command is looked up to run (or for its own --help). ``wf --help`` and the completion
    of command names read the table, so they import no command module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str, bool]] = {}  # name -> (module, summary, hidden)

    def list_commands(self, ctx: click.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(_ORDER)}
        return sorted(set(self.commands) | set(self.lazy), key=lambda n: (rank.get(n, len(rank)), n))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in self.lazy:
                self.load(self.lazy[cmd_name][0])
            else:  # not a command: "Did you mean" looks among them all
                for module, _, _ in self.lazy.values():
                    self.load(module)
        return self.commands.get(cmd_name)

    @staticmethod
    def load(module: str) -> None:
        import importlib

        importlib.import_module(f"wf.cli.{module}")  # its decorators register its commands

    def listed(self, name: str) -> click.Command | None:
        """The command as a listing shows it: the real one once loaded, else a stand-in
        with the same name, first sentence of help and hidden flag."""
        if name in self.commands:
            return self.commands[name]
        if name not in self.lazy:
            return None
        _, summary, hidden = self.lazy[name]
        return click.Command(name, help=summary, hidden=hidden)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own, with listed() for get_command()
        from gettext import gettext

        commands = [(n, c) for n in self.list_commands(ctx) if (c := self.listed(n)) and not c.hidden]
        if commands:
            limit = formatter.width - 6 - max(len(n) for n, _ in commands)
            with formatter.section(gettext("Commands")):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in commands])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        results = [
            CompletionItem(n, help=c.get_short_help_str())
            for n in self.list_commands(ctx)
            if n.startswith(incomplete) and (c := self.listed(n)) and not c.hidden
        ]
        results.extend(click.Command.shell_complete(self, ctx, incomplete))
        return results


@click.group(
    cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
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
    id archived, not 'Sessions: owner', no open slices, not handed back.

    \b
    First:     wf demo (the whole loop on a made-up project, no API key)
    Everyday:  wf init · wf add "Title" --model sonnet --done "pytest -q" ·
               wf list --runner · wf show ID · wf status ID progress me · wf done ID
    Loop:      wf orch pick · wf orch post LANE --result R · wf orch run
    Trees:     wf wt add LANE ID · wf merge · wf wt list · wf doctor
    Workers:   wf dispatch RUN UNIT · wf run MANIFEST · wf monitor RUN
    Cost:      wf usage --agent ID · wf usage --report
    Nights:    wf batch N · wf batch --status · wf pilot · wf res run --mem 4G -- CMD
    Exit codes: 0 ok, 1 error (message on stderr), 2 usage, 3 bug (crash log),
    4 a person or the caller must act (a unit failed, a lane stopped for a
    person), 5 gave up waiting (--timeout), 130 interrupted.
    """
    ctx.obj = {"dir": directory}


def _on_wait(line: str) -> None:
    _warn(line)


# ---------------------------------------------------------------- entry point


def _crash_log(exc: BaseException) -> str:
    import tempfile
    import traceback

    from wf.base.homes import wf_state

    folder = wf_state()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(folder)
    except OSError:  # no state folder: the project's own .wf/, else the temp folder
        folder = _project_wf_dir() or Path(tempfile.gettempdir())
    path = folder / f"crash-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    text = f"wf {__version__} {' '.join(sys.argv)}\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    path.write_text(text, "utf-8", errors="backslashreplace")  # argv may not be UTF-8
    return str(path)


def _project_wf_dir() -> Path | None:
    """The ``.wf/`` of the project wf runs in, if one can be found and written."""
    try:
        from wf.base.project import find_root

        start = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "-C"), None)
        root, _ = find_root(Path(start) if start else Path.cwd())
        folder = root / ".wf"
        folder.mkdir(exist_ok=True)
        return folder if os.access(folder, os.W_OK) else None
    except Exception:  # the crash log must be written somewhere, whatever else is broken
        return None


def _wait_for_children() -> None:
    """Undo an inherited SIGCHLD set to 'ignore' (a parent's choice that survives exec):
    with it the kernel reaps wf's children itself, so every exit status reads as 0, a
    failed git or a logged-out tool as a success, and no child's memory can be measured."""
    import signal

    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    _wait_for_children()
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="wf", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("wf: interrupted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except ParseError as e:
        click.echo(safe(str(e)), err=True)
        click.echo(
            f"wf: {len(e.issues)} error(s); wf writes nothing to the file until they are fixed (wf check)",
            err=True,
        )
        return e.exit_code
    except WfError as e:
        click.echo(safe(f"wf: {e}"), err=True)
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("wf: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: keep the traceback, show one line
        path = _crash_log(e)
        click.echo(safe(f"wf: internal error: {type(e).__name__}: {e} (traceback in {path})"), err=True)
        return 3
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    sys.exit(main())
