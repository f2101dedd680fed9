"""Unlucky timing with real processes: editors that save in place or by rename while
wf writes. Nothing acknowledged may be lost, and the file never shrinks below what the
person saved."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.test_git import FAKE_GIT, KILL_STEPS
from tests.test_orch import Orch, lanes_toml, task
from wf import taskfile

ROOT = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _wf(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wf", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(**env),
    )


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


# ------------------------------------------------------------------ one in-place save


@pytest.mark.timeout(60)
def test_add_during_an_in_place_save_keeps_the_save_and_the_task(wf: WfRunner) -> None:
    """The issue's reproduction: an editor truncates TASKS.md, then writes it 0.5 s later."""
    path = wf.root / "TASKS.md"
    for i in range(3):
        wf.ok("add", f"Existing {i}")
    before = path.read_bytes()
    editor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; d=open('TASKS.md','rb').read(); f=open('TASKS.md','wb'); "
            "print('truncated', flush=True); time.sleep(0.5); f.write(d+b'human line\\n'); f.close()",
        ],
        cwd=wf.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert editor.stdout is not None and editor.stdout.readline().strip() == "truncated"
    r = _wf(wf.root, "add", "Agent task")
    editor.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    text = path.read_bytes()
    assert text.startswith(before + b"human line\n")
    assert b"## agent-task: Agent task" in text
    assert [t.id for t in taskfile.parse(text).tasks] == [
        "existing-0",
        "existing-1",
        "existing-2",
        "agent-task",
    ]


@pytest.mark.timeout(60)
def test_a_file_held_open_for_writing_is_waited_for_then_refused(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Existing")
    before = path.read_bytes()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; f=open('TASKS.md','ab'); print('open', flush=True); sys.stdin.read()",
        ],
        cwd=wf.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="0.5")
        assert r.returncode == 1
        assert "another program has it open for writing" in r.stderr and "wf wrote nothing" in r.stderr
        assert path.read_bytes() == before
    finally:
        holder.communicate(input="", timeout=10)
    assert _wf(wf.root, "add", "Agent task").returncode == 0


@pytest.mark.timeout(60)
def test_an_empty_file_that_held_tasks_is_never_taken_as_the_truth(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Existing")
    path.write_bytes(b"")  # a save that truncated and never wrote (or has not yet)
    r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="0.5")
    assert r.returncode == 1
    assert "it is empty, but held 1 task(s)" in r.stderr
    assert path.read_bytes() == b""
    path.write_bytes(b"# Tasks\n")  # the person says what the file holds
    assert _wf(wf.root, "add", "Agent task").returncode == 0
    assert [t.id for t in taskfile.parse(path.read_bytes()).tasks] == ["agent-task"]


@pytest.mark.timeout(60)
def test_a_save_in_two_writes_that_lost_tasks_for_a_moment_is_waited_for(wf: WfRunner) -> None:
    """A program that saves in two writes (truncate and write the first part, close,
    then append the rest): between them the file has fewer tasks, and nobody holds it
    open. wf waits for such a file to be still before taking it."""
    path = wf.root / "TASKS.md"
    for i in range(3):
        wf.ok("add", f"Task {i}", "--id", f"t{i}")
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; d=open('TASKS.md','rb').read(); cut=d.index(b'## t2:'); "
            "f=open('TASKS.md','wb'); f.write(d[:cut]); f.close(); print('half', flush=True); "
            "time.sleep(0.2); f=open('TASKS.md','ab'); f.write(d[cut:]+b'human line\\n'); f.close()",
        ],
        cwd=wf.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "half"
    wf.ok("add", "Agent task")
    writer.wait(timeout=30)
    doc = taskfile.parse(path.read_bytes())
    assert [t.id for t in doc.tasks] == ["t0", "t1", "t2", "agent-task"]
    assert "human line\n" in doc.text_of(doc.task("t2"))


def test_a_person_deleting_a_task_is_kept_after_a_pause(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "One")
    wf.ok("add", "Two")
    text = path.read_text()
    path.write_text(text[: text.index("## two:")])
    wf.ok("add", "Three")
    assert [t.id for t in taskfile.parse(path.read_bytes()).tasks] == ["one", "three"]


# ------------------------------------------------------------------ storms

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wf.cli import main
    root, n, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.001)
    for k in range(count):
        if main(["-C", root, "add", f"Writer {n} task {k}"]) == 0:
            print(f"ACK Writer {n} task {k}", flush=True)
    """
)

# An editor saving every 50 ms. Each save reads the file, checks that its own previous
# save is still there (the file never shrinks below what the person saved), and adds one
# line. In place: truncate, pause, write, through one descriptor. By rename: a temporary
# file swapped in atomically; a careful editor (like one that warns "file changed on
# disk") notices a save that slipped in between its read and its rename and redoes its
# edit on top of it, so that every loss the test sees is wf's.
EDITOR = textwrap.dedent(
    """
    import ctypes, os, sys, time
    from pathlib import Path
    root, mode, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    path = root / "TASKS.md"
    tmp = root / ".TASKS.md.editor"
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    saves, problems = 0, []
    while not stop.exists():
        time.sleep(0.05)
        line = f"human {saves}\\n".encode()
        if mode == "inplace":
            with open(path, "r+b") as f:
                base = f.read()
                if saves and f"human {saves - 1}\\n".encode() not in base:
                    problems.append(f"save {saves - 1} lost")
                f.seek(0)
                f.truncate()
                f.flush()
                time.sleep(0.003)
                f.write(base + line)
        else:
            base = path.read_bytes()
            if saves and f"human {saves - 1}\\n".encode() not in base:
                problems.append(f"save {saves - 1} lost")
            at_path, content = base, base + line
            for _ in range(100):
                tmp.write_bytes(content)
                assert renameat2(-100, bytes(tmp), -100, bytes(path), 2) == 0
                replaced = tmp.read_bytes()
                tmp.unlink()
                if replaced == at_path:
                    break
                # someone saved in between: redo the edit on their file
                at_path, content = content, replaced + line
        saves += 1
    print("SAVES", saves, *problems, flush=True)
    """
)


def _storm(wf: WfRunner, tmp_path: Path, mode: str, writers: int = 16, count: int = 2) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Before the storm")
    go, stop = tmp_path / "go", tmp_path / "stop"
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(wf.root), mode, str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(wf.root), str(n), str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(WF_LOCK_TIMEOUT="30"),
        )
        for n in range(writers)
    ]
    time.sleep(0.3)
    go.touch()
    acked: list[str] = []
    errors: list[str] = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=100)
            acked += [line[4:] for line in out.splitlines() if line.startswith("ACK ")]
            if err.strip():
                errors.append(err)
    finally:
        stop.touch()
        editor_out, _ = editor.communicate(timeout=30)
    words = editor_out.split()
    assert words[:1] == ["SAVES"] and int(words[1]) > 0, editor_out
    if mode == "inplace":
        # An editor saving in place waits on wf's lease: it never even sees a version
        # without its last save. A save by rename that slips in between wf's check and
        # its exchange is swapped back at once, but for those microseconds (longer on a
        # starved CPU) the editor may see wf's version; in the end nothing is lost.
        assert words[2:] == [], f"the person's saves were lost: {editor_out}"
    data = path.read_bytes()
    doc = taskfile.parse(data)
    assert doc.errors == []
    titles = [t.title for t in doc.tasks]
    assert "Before the storm" in titles
    missing = [a for a in acked if titles.count(a) != 1]
    assert missing == [], f"acknowledged adds lost or doubled: {missing}"
    assert len(acked) == writers * count, errors
    lost = [k for k in range(int(words[1])) if f"human {k}\n".encode() not in data]
    assert lost == [], f"the person's saves were lost: {lost}"


@pytest.mark.timeout(150)
def test_storm_of_adds_with_an_editor_saving_in_place(wf: WfRunner, tmp_path: Path) -> None:
    _storm(wf, tmp_path, "inplace")


@pytest.mark.timeout(150)
@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "renameat2"), reason="needs renameat2 (Linux)")
def test_storm_of_adds_with_an_editor_saving_by_rename(wf: WfRunner, tmp_path: Path) -> None:
    _storm(wf, tmp_path, "rename")


# ------------------------------------------------------------------ kill -9 inside wf orch post

# The fake git of tests/test_git.py, plus one step: hang right after the post's merge
# deleted the task's branch (the merge's last git write; the post's checks, log line and
# lane record are still to come).
POST_KILL_STEPS = [*KILL_STEPS, "deleted"]
POST_FAKE_GIT = FAKE_GIT.replace(
    "esac",
    '  deleted:branch\\ -d*) {git} "$@" && hang; exit $? ;;\nesac',
)


@pytest.mark.parametrize("step", POST_KILL_STEPS)
@pytest.mark.timeout(150)
def test_kill_orch_post_at_each_step_of_its_merge_then_post_again(o: Orch, step: str, tmp_path: Path) -> None:
    """kill -9 of `wf orch post` at each git step of the merge it makes (the worker did
    not merge): the next post finishes it as done, archived once, logged once; the index
    agrees with main and no temporary index file is left."""
    import shutil

    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "nomerge"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    bin_dir = tmp_path / "fakegit"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(POST_FAKE_GIT.format(git=shutil.which("git")))
    (bin_dir / "git").chmod(0o755)
    marker = tmp_path / "hung"
    env = dict(
        o.env,
        PATH=f"{bin_dir}{os.pathsep}{o.env['PATH']}",
        WF_FAKE_GIT_STEP=step,
        WF_FAKE_GIT_MARKER=str(marker),
    )
    args = ("orch", "post", "a", "--result", "done", "--commit", str(rep.commit), "--no-pick")
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", *args],
        cwd=o.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text().strip():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    os.kill(int(marker.read_text()), signal.SIGKILL)
    assert o.orch_log() == []  # killed before its log line
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("a1: done as "), r.stdout
    assert o.archived() == ["a1"]
    assert [e["outcome"] for e in o.orch_log()] == ["done"]
    assert git(o.root, "status", "--porcelain") == ""
    assert git(o.root, "diff", "--cached", "--name-only") == ""
    assert git(o.root, "log", "--merges", "--format=%s", "main").count("a1: Task a1") == 1
    assert "## a1: " not in (o.root / "TASKS.md").read_text()
    assert list((o.root / ".git").glob("wf-index.*")) == []
    assert not (o.root / ".wf" / "orch" / "a.json").exists()
    # and a third post says it was posted, without logging again
    r = o.proc(*args)
    assert len(o.orch_log()) == 1
