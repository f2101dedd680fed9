"""wf batch K --prep: target selection, the prep prompt, the summary lines and a commit of
only the lines prep changed. The worker is a small scripted preparer in a cmd lane: it
follows ``prep:`` lines in each task's text, with the wf commands the prompt names."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.night.test_batch import Batch


@pytest.fixture
def b(wf: WfRunner) -> Iterator[Batch]:
    batch = Batch(wf)
    yield batch
    batch.end_live()


PREPARER = """
import json, re, subprocess, sys
from tests import wfproc
prompt = sys.stdin.read()
def wf(*a):
    return wfproc.run([sys.executable, "-m", "wf", *a], capture_output=True, text=True)
ids = re.search(r"^Tasks: (.+)$", prompt, re.M).group(1).split(", ")
for tid in ids:
    text = json.loads(wf("show", tid, "--json").stdout)["text"]
    done = re.search(r"^prep: done (.+)$", text, re.M)
    ask = re.search(r"^prep: ask (.+)$", text, re.M)
    if done:
        wf("set", tid, "--done", done.group(1), "--model", "ma")
        print(f"{tid} -> Done: {done.group(1)}")
    elif ask:
        q = wf("add", "Question: " + ask.group(1), "-s", "awaiting: " + ask.group(1)).stdout.split()[0]
        wf("status", tid, "blocked", "waits for " + q)
        print(f"{tid} -> awaiting {q}")
"""


def setup(b: Batch, tasks: str, tmp: Path) -> None:
    worker = tmp / "preparer.py"
    worker.write_text(PREPARER)
    cmd = json.dumps([sys.executable, str(worker)])
    b.setup(f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n', tasks)


def t(tid: str, *lines: str) -> str:
    return f"\n## {tid}: Task {tid}\n" + "".join(f"{x}\n" for x in lines)


TASKS = (
    t("ready", "Model: ma", "Done: true")  # runner-ready already: not a target
    + t("later", "Prio: 0", "After: ready", "", "prep: done test -f later.txt")  # not pickable yet
    + t("clear", "Prio: 1", "", "prep: done test -f clear.txt")
    + t("vague", "Prio: 1", "", "prep: ask Which endpoint?")
    + t("mine", "Sessions: owner")
    + t("held", "Status: wip: half", "")
    + t("parent", "Model: ma", "")
    + t("child", "Parent: parent", "Model: ma", "Done: true")
)


def test_dry_run_lists_the_targets_in_order(b: Batch, tmp_path: Path) -> None:
    setup(b, TASKS, tmp_path)
    r = b.batch("3", "--prep", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "targets: clear (Done, Model), vague (Done, Model), later (Done, Model; after ready)" in r.stdout
    assert "workers: 1 (lane a: clear, vague, later)" in r.stdout
    assert "run " in r.stdout and "prep" in r.stdout
    assert git(b.root, "status", "--porcelain") == ""
    assert not (b.root / ".wf" / "batch").exists()


def test_nothing_to_prepare(b: Batch, tmp_path: Path) -> None:
    setup(b, t("ready", "Model: ma", "Done: true") + t("mine", "Sessions: owner"), tmp_path)
    r = b.batch("3", "--prep")
    assert r.returncode == 0 and r.stdout.strip() == "prep: nothing to prepare"
    assert b.status() == {"alive": False, "job": None}


@pytest.mark.timeout(180)
def test_prep_batch_prepares_asks_and_commits_only_its_lines(b: Batch, wf: WfRunner, tmp_path: Path) -> None:
    setup(b, TASKS, tmp_path)
    # a person's own uncommitted edit of TASKS.md, which prep must not commit
    text = (b.root / "TASKS.md").read_text()
    (b.root / "TASKS.md").write_text(text.replace("# Tasks\n", "# Tasks\n\nMy own note.\n"))
    r = b.batch("2", "--prep")
    assert r.returncode == 0, r.stderr
    st = b.wait_ended()
    assert st["reason"] == "prep done", st
    lines = b.summary(st)
    assert "- clear -> Done: test -f clear.txt" in lines
    q = next(x for x in lines if x.startswith("- vague -> awaiting "))
    qid = q.split()[-1]
    assert qid.startswith("question-which-endpoint")
    assert not any(x.startswith("- later ->") for x in lines)  # K=2: the two pickable ones
    show = json.loads(wf.ok("show", "vague", "--json"))
    assert show["status"] == f"blocked: waits for {qid}"
    assert json.loads(wf.ok("show", qid, "--json"))["status"] == "awaiting: Which endpoint?"
    # committed: prep's lines; not committed: the person's note
    head = git(b.root, "show", "HEAD:TASKS.md")
    assert "Done: test -f clear.txt" in head and f"waits for {qid}" in head
    assert "My own note." not in head
    assert "My own note." in (b.root / "TASKS.md").read_text()
    assert git(b.root, "log", "-1", "--format=%s").startswith("wf: prep batch ")
    assert git(b.root, "status", "--porcelain") == " M TASKS.md\n"
    assert any("committed prep's lines of TASKS.md" in x for x in lines)
