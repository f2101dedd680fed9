"""The issue's "Done when": ``wf orch run`` on the demo project while a person edits
TASKS.md (a typo, a new task, an uncommitted draft) finishes every valid task, commits
nothing of the person's, and exits with the code that says what happened."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git
from wf.night import demo

ROOT = Path(__file__).resolve().parent.parent.parent

TYPO = "## greet-test: Test the greeting module\nModel: sonnet\nPrio: three\n"
NEW = "\n## wave: A task added during the run\nModel: haiku\nDone: true\n\nscript: write wave.txt hi\n"
DRAFT = "\n## draft-idea: Half written, no Done yet\nModel: sonnet\nNote: think about the\n"


def _events(root: Path) -> str:
    path = root / "out" / "wf-orch-run.log"
    return path.read_text() if path.exists() else ""


@pytest.mark.timeout(240)
def test_the_demo_run_survives_a_person_editing_tasks_md(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    demo.make_repo(root)
    env = dict(os.environ, PYTHONPATH=str(ROOT), WF_RESULT_GRACE="0.5")
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", "orch", "run"], cwd=root, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "start greet " not in _events(root):  # greet-test waits for greet (After)
            assert p.poll() is None and time.monotonic() < deadline, _events(root)
            time.sleep(0.05)
        tasks = root / "TASKS.md"
        text = tasks.read_text()
        assert TYPO.replace("Prio: three\n", "") in text
        # a person's editor: a typo in a task still to come, a new task, a draft
        tasks.write_text(text.replace(TYPO.replace("Prio: three\n", ""), TYPO) + NEW + DRAFT)
        out, err = p.communicate(timeout=200)
    finally:
        if p.poll() is None:
            p.terminate()
            p.communicate(timeout=30)
    assert p.returncode == 4, out + err  # clock was handed back: a person is needed
    assert "haiku: clock handed back" in out
    done = {
        ln.split(" lane=")[0].split()[-1]
        for ln in (root / "DONE.md").read_text().splitlines()
        if " lane=" in ln
    }
    valid = {"greet", "cli", "cli-args", "cli-main", "document-greet-in-the-readme", "wave"}
    assert done == valid, out
    assert "start greet-test" not in out  # its typo keeps it back; nothing else stopped
    # the person's text is in the working tree exactly as typed, and in no commit
    now = tasks.read_text()
    assert TYPO in now and DRAFT in now
    history = git(root, "log", "-p", "main")
    assert "Prio: three" not in history and "draft-idea" not in history
    assert "## wave:" not in history  # the new task's archive line is wf's; its text is not
    assert git(root, "status", "--porcelain") == " M TASKS.md\n"
    subjects = git(root, "log", "--format=%s", "main").splitlines()
    assert not [s for s in subjects if s.startswith("wf: ") and not s.startswith("wf: archive ")]
