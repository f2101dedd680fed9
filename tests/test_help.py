"""Every --help page ends with an example a person can copy."""

from __future__ import annotations

from collections.abc import Iterator

import click

import wf.cli  # noqa: F401  (registers the commands)
from wf.cli.base import cli


def _commands(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            if not sub.hidden:
                yield from _commands(sub, [*path, name])
    yield path, cmd


def test_every_help_page_has_an_example() -> None:
    missing = []
    for path, cmd in _commands(cli, []):
        text = cmd.get_help(click.Context(cmd, info_name=" ".join(["wf", *path])))
        if "Example" not in text:
            missing.append(" ".join(["wf", *path]))
    assert missing == []
