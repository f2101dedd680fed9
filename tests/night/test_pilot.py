"""wf pilot: batches back to back, a prep batch per idle spell, the questions after each
batch, the cost report at the end; a real wf process over real detached batches."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import WfRunner
from tests.night.test_batch import Batch
from tests.night.test_prep import PREPARER

# one lane worker for both roles: a prep prompt goes to the preparer, a task to the scripted worker
WORKER = (
    "import io, subprocess, sys\n"
    "prompt = sys.stdin.read()\n"
    "if prompt.startswith('You prepare tasks'):\n"
    "    sys.stdin = io.StringIO(prompt)\n"
    "    exec(compile(PREPARER, 'preparer', 'exec'), {'__name__': 'prep'})\n"
    "else:\n"
    "    sys.exit(subprocess.run([sys.executable, '-m', 'wf.scripted'], input=prompt, text=True).returncode)\n"
)


@pytest.fixture
def b(wf: WfRunner) -> Iterator[Batch]:
    batch = Batch(wf)
    yield batch
    batch.end_live()


def t(tid: str, *lines: str) -> str:
    return f"\n## {tid}: Task {tid}\n" + "".join(f"{x}\n" for x in lines)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_pilot_runs_batches_then_prep_then_the_prepared_work(b: Batch, tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(f"PREPARER = {PREPARER!r}\n" + WORKER)
    cmd = json.dumps([sys.executable, str(worker)])
    b.setup(
        f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n',
        t("r1", "Model: ma", "Done: true", "", "script: write r1.txt x")
        + t("r2", "Model: ma", "Done: true", "", "script: write r2.txt x")
        + t("r3", "Model: ma", "Done: true", "", "script: write r3.txt x")
        + t("p1", "", "prep: done true", "script: write p1.txt x")
        + t("q1", "", "prep: ask Which colour?"),
    )
    r = wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--batch", "3", "--for", "10m", "--poll", "0.3"],
        cwd=b.root, capture_output=True, text=True, env=b.env, timeout=200, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 4, r.stderr + r.stdout  # a question waits for a person
    out = r.stdout
    assert sorted(b.archived()) == ["p1", "r1", "r2", "r3"]
    kinds = [line.split()[1] for line in out.splitlines() if " started: lanes " in line]
    assert kinds == ["batch", "prep", "batch"], out
    assert "question question-which-colour: Which colour?" in out
    assert "pilot ended: nothing left to run or prepare" in out
    assert "cost since " in out
    assert b.status("q1") == "blocked: waits for question-which-colour"


@pytest.mark.parametrize("args", [[], ["--lanes", "a"], ["--lanes", "a", "--no-prep"]])
def test_pilot_with_nothing_to_do_ends_at_once(b: Batch, args: list[str]) -> None:
    """Nothing runner-ready, nothing to prepare (or --no-prep): no batch starts, even on
    lanes given by name (a batch there would find nothing and end, again and again)."""
    b.setup(
        '[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["true"]\n',
        t("mine", "Sessions: owner") + (t("vague", "Model: ma") if "--no-prep" in args else ""),
    )
    r = wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--poll", "0.3", "--for", "30s", *args], cwd=b.root,
        capture_output=True, text=True, env=b.env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "pilot ended: nothing left to run or prepare" in r.stdout
    assert "started" not in r.stdout


def test_pilot_stops_at_the_stop_file(b: Batch) -> None:
    b.setup('[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["true"]\n', t("r1", "Model: ma", "Done: true"))
    (b.root / "out").mkdir(exist_ok=True)
    (b.root / "out" / "wf-batch.stop").write_text("")
    r = wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--poll", "0.3"], cwd=b.root, capture_output=True, text=True,
        env=b.env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "pilot ended: stop file" in r.stdout and "started" not in r.stdout


def test_skills_live_at_the_top_ship_in_the_package_and_take_arguments(tmp_path: Path, wf: WfRunner) -> None:
    root = Path(__file__).resolve().parent.parent.parent
    from importlib import resources

    packaged = Path(str(resources.files("wf").joinpath("data/claude")))
    for rel, hint in (
        ("skills/wf-orchestrate/SKILL.md", "argument-hint: [go | batch N]"),
        ("skills/wf-pilot/SKILL.md", "argument-hint: [--batch K] [--lanes a,b] [--for 8h]"),
        ("skills/wf-design/SKILL.md", "argument-hint: [topic | id]"),
    ):
        top = (root / rel).read_text()
        assert hint in top.split("\n---\n")[0] and "$ARGUMENTS" in top
        assert (packaged / rel).read_text() == top  # the package ships the same file
    assert (packaged / "agents" / "wf-worker.md").read_text() == (
        root / "agents" / "wf-worker.md"
    ).read_text()
    out = wf.ok("install", "--target", str(tmp_path / "claude"))
    assert out.count("linked  ") == 4
    assert (
        out.splitlines()[-1].startswith("a Claude Code session started before this install")
        and "restart" in out
    )


def test_the_built_package_ships_the_same_agent_and_skills_as_the_top(tmp_path: Path) -> None:
    """What a wheel gets (setuptools' build_py of this tree, links followed) holds every
    file of agents/ and skills/, byte for byte, and nothing else under data/claude."""
    import shutil

    root = Path(__file__).resolve().parent.parent.parent
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("wf", "agents", "skills"):
        shutil.copytree(root / name, src / name, symlinks=True, ignore=junk)
    r = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "-d", str(tmp_path / "b")],
        cwd=src, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    shipped = tmp_path / "b" / "wf" / "data" / "claude"

    def files(base: Path) -> dict[str, bytes]:
        return {str(f.relative_to(base)): f.read_bytes() for f in sorted(base.rglob("*")) if f.is_file()}

    top = {**{f"agents/{k}": v for k, v in files(root / "agents").items()},
           **{f"skills/{k}": v for k, v in files(root / "skills").items()}}  # fmt: skip
    assert "agents/wf-worker.md" in top and "skills/wf-pilot/SKILL.md" in top
    assert files(shipped) == top
    assert not any(p.is_symlink() for p in shipped.rglob("*"))  # real files in the wheel


@pytest.mark.timeout(120)
def test_a_stop_during_a_batch_ends_the_batch_then_the_pilot(b: Batch) -> None:
    slow = 'Done: `python3 -c "import time; time.sleep(1)"`'
    cmd = json.dumps([sys.executable, "-m", "wf.scripted"])
    b.setup(
        f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n',
        t("r1", "Model: ma", slow, "", "script: write r1.txt x") + t("r2", "Model: ma", slow),
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", "pilot", "--batch", "5", "--poll", "0.3"], cwd=b.root, text=True,
        env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        b.wait_for(lambda: str(b.status("r1")).startswith("in progress"))
        assert b.batch("--stop").returncode == 0
        out, err = p.communicate(timeout=90)
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert out.count(" started: lanes ") == 1
    assert " ended: stop file (summary out/wf-batch-" in out and "pilot ended: stop file" in out
    assert b.archived() == ["r1"] and b.status("r2") == "pending"


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_pilot_starts_no_batch_again_on_a_lane_that_made_no_progress(b: Batch, tmp_path: Path) -> None:
    """The lane's program cannot even import: its batch stops the lane (the tool's
    failure) with every task as it was. The pilot does not start the same batch again
    every poll: it leaves that lane, ends at once, and exits 1 (a tool to fix)."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "myworker.py").write_text("import nosuchdep\n")
    cmd = json.dumps(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path / 'w')!r}); import myworker"]
    )
    b.setup(
        f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n',
        t("r1", "Model: ma", "Done: true") + t("r2", "Model: ma", "Done: true"),
    )
    r = wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--batch", "2", "--for", "40s", "--poll", "0.3", "--no-prep"],
        cwd=b.root, capture_output=True, text=True, env=b.env, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr + r.stdout
    assert r.stdout.count(" started: lanes ") == 1, r.stdout
    assert "lanes a made no progress in batch " in r.stdout
    assert "pilot ended: no lane with work made progress" in r.stdout
    assert b.status("r1") == "pending" and b.status("r2") == "pending"


@pytest.mark.timeout(120)
def test_pilot_at_for_says_what_waits_for_a_person_and_exits_4(b: Batch) -> None:
    """--for ends it while a task is handed back and another awaits an answer: the end
    names them, and the exit says a person must act, as at any other end."""
    b.setup(
        '[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = ["true"]\n',
        t("a1", "Model: ma", "Done: true")
        + t("a2", "Model: ma", "Done: true")
        + t("q1", "Model: ma", "Done: true", "Status: awaiting: Which colour?"),
    )
    assert "Task: a1 " in b.wf.ok("orch", "pick", "a")  # the lane is held: the pilot waits for it
    r = wfproc.run(
        [sys.executable, "-m", "wf", "pilot", "--for", "2s", "--poll", "0.3", "--no-prep"],
        cwd=b.root, capture_output=True, text=True, env=b.env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 4, r.stderr + r.stdout
    assert "pilot ended: --for" in r.stdout
    assert "waiting for a person: 1 awaiting (q1)" in r.stdout
