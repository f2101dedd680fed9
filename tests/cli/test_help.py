"""Every --help page shows at least one example: a command line using the command itself."""

from __future__ import annotations

from collections.abc import Iterator

import click

import wf.cli  # noqa: F401  (the table of lazily loaded commands)
from wf.cli.base import cli


def _commands(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=" ".join(["wf", *path]))
        for name in cmd.list_commands(ctx):  # the root loads each command's module here
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, [*path, name])
    yield path, cmd


def _has_example(text: str, path: list[str]) -> bool:
    body = text.split("\nOptions:")[0].splitlines()[1:]  # the page without its Usage line
    call = " ".join(["wf", *path])
    return any(call + " " in line or line.strip() == call for line in body)


def test_every_help_page_has_an_example() -> None:
    missing = []
    for path, cmd in _commands(cli, []):
        text = cmd.get_help(click.Context(cmd, info_name=" ".join(["wf", *path])))
        if not _has_example(text, path[:1] if isinstance(cmd, click.Group) else path):
            missing.append(" ".join(["wf", *path]))
    assert missing == []
