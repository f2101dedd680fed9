"""Fuzzing the commands with hostile TASKS.md, wf.toml and archive bytes: wf may refuse,
but it never crashes (exit 3) and never answers with an exit code outside its table."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wf.cli import main

TASK_FRAGMENTS = [
    "# Tasks\n",
    "## a: A\n",
    "## b: B\n",
    "##a: x\n",
    " ## a: indented\n",
    "## A_B: bad\n",
    "Model: haiku\n",
    "Model: \x1b[2J\n",
    "Done: true\n",
    "Prio: three\n",
    "Prio: 1\n",
    "Effort: 9\n",
    "After: a\n",
    "After: ghost, b\n",
    "Parent: a\n",
    "Lane: nowhere\n",
    "Status: in progress: w since 2026-01-01T00:00Z\n",
    "Status: sleeping\n",
    "Note: " + " " * 5000 + "x\n",
    "Sessions: owner\n",
    "```\n",
    "~~~\n",
    "\r",
    "\r\n",
    "\n",
    "\ufeff",
    "\x00",
    "é中😀",
]
TOML_FRAGMENTS = [
    'tasks = ".git/config"\n',
    'tasks = "."\n',
    'tasks = "wf.toml"\n',
    'archive = "TASKS.md"\n',
    'main = "HEAD~1"\n',
    'main = "main"\n',
    "lock_timeout = nan\n",
    "lock_timeout = 1\n",
    "slice_above = -1\n",
    "slice_above = 2\n",
    'isolation = "clone"\n',
    "[lanes.haiku]\n",
    'model = "haiku"\n',
    "max_parallel = 0\n",
    'adapter = "cmd"\n',
    "[lanes.Bad_Name]\n",
    "= = =\n",
    "\n",
]
ARCHIVE_FRAGMENTS = [
    "# Done\n",
    "- 2026-01-01T00:00Z a lane=haiku model=haiku commit=- -- A\n",
    "- 2026-01-01T00:00Z b lane=haiku model=haiku commit=abc parent=a -- B\n",
    "- 2026-01-01T00:00Z broken\n",
    "- 2026-01-01T00:00Z a lane=x -- again\n",
    "\r",
    "\n",
]


def _blob(fragments: list[str]) -> st.SearchStrategy[bytes]:
    text = st.lists(st.sampled_from(fragments) | st.text(max_size=6), max_size=12).map("".join)
    return st.one_of(
        text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40), st.just(b"")
    )


COMMANDS = [
    ("check",),
    ("list",),
    ("list", "--runner", "--json"),
    ("lanes",),
    ("show", "a"),
    ("log",),
    ("add", "Fuzzed task", "--model", "haiku", "--done", "true"),
    ("note", "a", "a note"),
    ("set", "b", "-p", "1"),
    ("status", "a", "progress", "me"),
    ("done", "b"),
]


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tasks=_blob(TASK_FRAGMENTS),
    toml=st.one_of(st.none(), _blob(TOML_FRAGMENTS)),
    archive=st.one_of(st.none(), _blob(ARCHIVE_FRAGMENTS)),
)
def test_hostile_files_never_crash_a_command(tasks: bytes, toml: bytes | None, archive: bytes | None) -> None:
    root = Path(tempfile.mkdtemp(prefix="wf-fuzz-"))
    old = os.environ.get("WF_LOCK_TIMEOUT")
    os.environ["WF_LOCK_TIMEOUT"] = "1"
    try:
        (root / "TASKS.md").write_bytes(tasks)
        if toml is not None:
            (root / "wf.toml").write_bytes(toml)
        if archive is not None:
            (root / "DONE.md").write_bytes(archive)
        for args in COMMANDS:
            code = main(["-C", str(root), *args])
            assert code in (0, 1, 2, 4), (args, code)
    finally:
        if old is None:
            os.environ.pop("WF_LOCK_TIMEOUT", None)
        else:
            os.environ["WF_LOCK_TIMEOUT"] = old
        shutil.rmtree(root, ignore_errors=True)
