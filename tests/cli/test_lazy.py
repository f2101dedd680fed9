"""The root group loads a command's module only when that command runs; what wf --help
and completion show of a command comes from wf.cli.COMMANDS, which must say what the
modules define."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
from click.utils import _make_default_short_help

from wf.cli import COMMANDS, HIDDEN
from wf.cli.base import cli


def _project(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "TASKS.md").write_text("# Tasks\n\n## a: A task\nModel: sonnet\nDone: `true`\n")
    return tmp_path


def _python(code: str, cwd: Path, **env: str) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env={**os.environ, **env}
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_table_says_what_the_modules_define() -> None:
    for module in {m for m, _ in COMMANDS.values()}:
        cli.load(module)
    assert set(cli.commands) == set(COMMANDS)
    for name, (module, summary) in COMMANDS.items():
        cmd = cli.commands[name]
        assert cmd.callback is not None and cmd.callback.__module__ == f"wf.cli.{module}", name
        assert _make_default_short_help(cmd.help or "", 10**6) == summary, name
        assert cmd.short_help is None and not cmd.deprecated, name  # the table holds neither
        assert cmd.hidden == (name in HIDDEN), name


def test_list_show_and_ctx_import_no_other_command_group(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from wf.cli import main\n"
        "for argv in (['list'], ['list', '--runner'], ['show', 'a'], ['ctx', 'a']):\n"
        "    assert main(argv) == 0, argv\n"
        "print(sorted(m for m in sys.modules if m.startswith('wf.cli.')))\n"
    )
    out = _python(probe, _project(tmp_path))
    assert out.strip().splitlines()[-1] == "['wf.cli.base', 'wf.cli.tasks']"


def test_help_lists_every_command_without_loading_one(tmp_path: Path) -> None:
    """wf --help from the table is the same text as from the loaded commands."""
    probe = (
        "import sys\n"
        "import click\n"
        "from wf.cli import cli, COMMANDS\n"
        "def page():\n"
        "    return cli.get_help(click.Context(cli, info_name='wf'))\n"
        "before = page()\n"
        "print(sorted(m for m in sys.modules if m.startswith('wf.cli.')))\n"
        "for module, _ in COMMANDS.values():\n"
        "    cli.load(module)\n"
        "assert page() == before\n"
        "print(before)\n"
    )
    out = _python(probe, tmp_path, COLUMNS="200")
    first, page = out.split("\n", 1)
    assert first == "['wf.cli.base']"
    for name in COMMANDS:
        listed = [line for line in page.splitlines() if line.strip().startswith(name + " ")]
        assert bool(listed) == (name not in HIDDEN), name
    assert "List open tasks, one short row each." in page


def _complete(words: str, cword: int, cwd: Path) -> list[str]:
    probe = "import sys\nfrom wf.cli import entry\nentry()\n"
    env = {"_WF_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    r = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, env={**os.environ, **env}
    )
    return r.stdout.splitlines()


def test_completion_of_command_names_and_options(tmp_path: Path) -> None:
    # completion goes through click's own entry point, under the prog name the probe has
    names = _complete("wf ", 1, tmp_path)
    visible = [n for n in COMMANDS if n not in HIDDEN]
    assert sorted(line.split(",", 1)[1] for line in names) == sorted(visible)
    assert _complete("wf li", 1, tmp_path) == ["plain,list"]
    assert "plain,--runner" in _complete("wf list --", 2, tmp_path)
    assert "plain,pick" in _complete("wf orch p", 2, tmp_path)


def test_an_unknown_command_still_gets_a_suggestion() -> None:
    ctx = click.Context(cli, info_name="wf")
    assert cli.get_command(ctx, "lsit") is None
    try:
        cli.resolve_command(ctx, ["lsit"])
    except click.UsageError as e:
        assert "Did you mean 'list'?" in e.format_message()
    else:
        raise AssertionError("lsit resolved")
