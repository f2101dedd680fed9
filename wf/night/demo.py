"""``wf demo``: the real loop on a small made-up project, with the scripted worker.

No network and no API key: the two lanes use the ``cmd`` adapter running
``python -m wf.scripted``, a worker that follows the worker contract (``wf ctx``, edit,
commit, ``wf merge``, ``wf add``, four report lines) by the ``script:`` lines of each
task. Everything else is the real thing: picks, claims, worktrees, merges, posts, logs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from wf.base import project as projectmod
from wf.base.errors import WfError
from wf.base.fsutil import atomic_write_text
from wf.orch import loop as orchloop
from wf.tasks import backlog as backlogmod
from wf.tasks import bootstrap, views

TASKS = """\
# Tasks

A small made-up project, worked by wf's scripted worker in two lanes, haiku and sonnet.

## greet: A greeting module
Model: haiku
Prio: 1
Done: `python3 -c "import greet"`

script: write greet.py def greet(name):\\n    return f"hello {name}"
script: followup Document greet in the README

## greet-test: Test the greeting module
Model: sonnet
After: greet
Done: `python3 -m unittest -q test_greet`

script: write test_greet.py import unittest\\nfrom greet import greet\\n\\n\\nclass T(unittest.TestCase):\\n    def test_greet(self):\\n        self.assertEqual(greet("wf"), "hello wf")

## cli: A command line for greet
Model: sonnet
Effort: 6
Done: `python3 greet_cli.py wf`

Too big for one go (Effort above slice_above): a worker slices it first.
script: slice cli-args=Parse the name argument|cli-main=Print the greeting
script: write greet_cli.py import sys\\nfrom greet import greet\\n\\nprint(greet(sys.argv[1] if len(sys.argv) > 1 else "world"))

## release: Tag the first release
Model: sonnet
Sessions: owner
Done: tag v0.1 exists

Only a person does this one: never runner-ready.

## storage: Choose where greetings are stored
Model: haiku
Status: awaiting: SQLite or plain files?
Done: `test -f STORAGE.md`

## clock: Make the clock test pass
Model: haiku
Prio: 3
Done: `python3 -c "raise SystemExit('the clock test still fails')"`

The worker cannot make its Done pass: it hands the task back and the lane goes on.
script: write clock.py import time
"""


def _toml() -> str:
    cmd = f'["{sys.executable}", "-m", "wf.scripted"]'
    return f"""\
# wf demo: two lanes worked by the scripted worker (the cmd adapter).
slice_above = 4

[lanes.haiku]
model = "haiku"
adapter = "cmd"
cmd = {cmd}

[lanes.sonnet]
model = "sonnet"
adapter = "cmd"
cmd = {cmd}
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, stdin=subprocess.DEVNULL)


def make_repo(root: Path) -> None:
    if root.exists() and any(root.iterdir()):
        raise WfError(f"{root} is not empty; give --dir an empty or new folder")
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "wf demo")
    _git(root, "config", "user.email", "demo@wf.invalid")
    (root / "README.md").write_text("# greet\n\nA made-up project for wf demo.\n")
    bootstrap.init(root)
    atomic_write_text(root / "wf.toml", _toml())
    atomic_write_text(root / "TASKS.md", TASKS)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "A made-up project and its backlog")


def run(dir_: Path | None, echo: Callable[[str], None], *, keep: bool = False) -> int:
    """Run the demo in ``dir_`` (kept), or in a temporary folder removed at the end
    unless ``keep``."""
    if dir_ is not None or keep:
        return _run((dir_ or Path(tempfile.mkdtemp(prefix="wf-demo-"))).resolve(), echo, keep=True)
    root = Path(tempfile.mkdtemp(prefix="wf-demo-")).resolve()
    try:
        return _run(root, echo, keep=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        echo(f"removed {root} (wf demo --keep keeps the project to look at)")


def _run(root: Path, echo: Callable[[str], None], *, keep: bool) -> int:
    make_repo(root)
    project = projectmod.load(root)
    start = time.monotonic()
    echo(f"wf demo in {root}")
    echo("TASKS.md: greet (haiku) -> greet-test (sonnet, After greet); cli (Effort 6: sliced first);")
    echo("          release (Sessions: owner); storage (awaiting); clock (its Done fails)")
    echo("")

    def emit(line: str) -> None:
        echo(f"{time.monotonic() - start:5.1f}s  {line.rstrip()}")

    code = orchloop.Loop(project, ["haiku", "sonnet"], adapter=None, emit=emit).run()
    bl = backlogmod.load(project)
    echo("")
    echo("Lanes:")
    for line in views.lanes_text(views.lanes(bl)):
        echo(f"  {line}")
    echo("Open tasks:")
    records, total = views.list_rows(bl)
    for line in views.list_text(records, total, runner=False):
        echo(f"  {line}")
    echo(f"Archive ({project.config.archive}):")
    for e in bl.archive.entries:
        echo(f"  {e.raw}")
    echo("Orch log (out/wf-orch.log):")
    try:
        for line in (root / "out" / "wf-orch.log").read_text().splitlines():
            echo(f"  {line}")
    except OSError:
        pass
    echo("")
    if code == 4:  # by design: storage awaits an answer and clock was handed back
        echo("The loop exited 4: a person is needed (an awaiting task, a handed-back one), as planned.")
        code = 0
    if not keep:
        echo(f"Done in {time.monotonic() - start:.1f}s.")
        return code
    echo(f"Done in {time.monotonic() - start:.1f}s. Look next at:")
    echo(f"  cd {root} && git log --oneline --graph   # the merges, one per task")
    echo(f"  wf -C {root} list; wf -C {root} show clock  # the handed-back task and its note")
    echo(f"  ls {root}/.wf/runs/                       # every worker's prompt, log and answer")
    return code
