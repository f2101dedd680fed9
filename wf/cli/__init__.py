"""The command line (``wf``): the only package that imports click.

Each command collects its options, calls one core function and prints the result.
Exit codes: 0 ok, 1 an expected error (message on stderr), 2 a usage error,
3 a bug (traceback saved to a crash log), 4 a person or the caller must act,
5 gave up waiting, 130 interrupted.

May import: every part below it; nothing imports it but ``wf.scripted`` and ``wf.__main__``.
"""

from wf.cli import batch, cloud, git, orch, runs, tasks, usage, watch, workers  # noqa: F401  (they register the commands)
from wf.cli.base import cli, entry, main

__all__ = ["cli", "entry", "main"]
