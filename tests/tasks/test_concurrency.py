"""Real processes racing on one TASKS.md: nothing lost, exactly one winner per claim."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from wf.base.errors import LockTimeout
from wf.base.lock import project_lock
from wf.tasks import taskfile

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from wf.cli import main
    root, n, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.001)
    add = main(["-C", root, "add", f"Task from {n}", "--model", "haiku", "--done", "true"])
    claim = main(["-C", root, "status", f"c{n % 8}", "progress", f"w{n}"])
    print(f"RESULT {n} {add} {claim}", flush=True)
    """
)

EDITOR = textwrap.dedent(
    """
    import os, random, sys, time
    from pathlib import Path
    from wf.base.lock import project_lock
    root, stop = Path(sys.argv[1]), Path(sys.argv[2])
    path = root / "TASKS.md"
    version = {}
    saves = 0
    while not stop.exists():
        text = path.read_text()            # the editor's buffer
        lines = text.split("\\n")
        i = random.randrange(8)
        v = version.get(i, 0) + 1
        lines = [f"body c{i} v{v}" if l.startswith(f"body c{i} v") else l for l in lines]
        time.sleep(0.002)                  # the person types
        # Save like a careful editor: write a temp file and rename it over, after
        # checking that nobody changed the file since it was read.
        with project_lock(root / ".wf", timeout=30):
            if path.read_text() != text:
                continue
            tmp = path.with_name(".TASKS.md.editor")
            tmp.write_text("\\n".join(lines))
            os.replace(tmp, path)
        version[i] = v
        saves += 1
    print("VERSIONS", saves, " ".join(f"{i}={v}" for i, v in sorted(version.items())), flush=True)
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent.parent)
    return env


@pytest.mark.timeout(120)
def test_sixteen_processes_add_and_claim_while_an_editor_saves(wf: WfRunner, tmp_path: Path) -> None:
    path = wf.root / "TASKS.md"
    with path.open("a") as f:
        for i in range(8):
            f.write(f"\n## c{i}: Claim target {i}\nModel: sonnet\nDone: true\n\nbody c{i} v0\n")
    go = tmp_path / "go"
    stop = tmp_path / "stop"
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(wf.root), str(stop)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(wf.root), str(n), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for n in range(16)
    ]
    time.sleep(0.5)  # let every worker reach the start line
    go.touch()
    results = {}
    errors = {}
    for p in workers:
        out, err = p.communicate(timeout=90)
        line = next(x for x in out.splitlines() if x.startswith("RESULT"))
        _, who, add, claim = line.split()
        results[int(who)] = (int(add), int(claim))
        errors[int(who)] = err
    stop.touch()
    editor_out, _ = editor.communicate(timeout=30)

    assert all(add == 0 for add, _ in results.values()), errors
    doc = taskfile.parse(path.read_bytes())
    assert doc.errors == []
    titles = [t.title for t in doc.tasks]
    for n in range(16):
        assert titles.count(f"Task from {n}") == 1
    ids = [t.id for t in doc.tasks]
    assert len(ids) == len(set(ids))
    # every claim target has exactly one winner, and the file names that winner
    for i in range(8):
        claimers = [n for n in range(16) if n % 8 == i]
        winners = [n for n in claimers if results[n][1] == 0]
        assert len(winners) == 1, (i, results)
        loser = next(n for n in claimers if n not in winners)
        assert f"already claimed by w{winners[0]}" in errors[loser]
        assert doc.task(f"c{i}").status.who == f"w{winners[0]}"
    # the editor's last save of each body survived every wf write
    words = editor_out.split()
    assert words[0] == "VERSIONS" and int(words[1]) > 0
    text = path.read_text()
    for pair in words[2:]:
        body, version = pair.split("=")
        assert f"body c{body} v{version}\n" in text


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wf.base.lock import project_lock
    with project_lock(Path(sys.argv[1]), timeout=5):
        print("held", flush=True)
        time.sleep(60)
    """
)


def _hold_lock(wf_dir: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(wf_dir)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "held"
    return p


def test_waiter_names_the_holder_and_gives_up(tmp_path: Path) -> None:
    holder = _hold_lock(tmp_path)
    try:
        said: list[str] = []
        with pytest.raises(LockTimeout) as info, project_lock(tmp_path, timeout=0.3, on_wait=said.append):
            pass
        assert len(said) == 1
        assert f"held by pid {holder.pid}" in said[0]
        assert f"pid {holder.pid}" in str(info.value) and "gave up after" in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_dead_holder_is_taken_over(tmp_path: Path) -> None:
    holder = _hold_lock(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with project_lock(tmp_path, timeout=2):
        info = (tmp_path / "lock.owner").read_text()
    assert str(os.getpid()) in info


def test_lock_timeout_through_the_cli(wf: WfRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = _hold_lock(wf.root / ".wf")
    try:
        monkeypatch.setenv("WF_LOCK_TIMEOUT", "0.3")
        r = wf("add", "Blocked add")
        assert r.code == 1
        assert r.err.count("wf: waiting for the project lock") == 1
        assert "gave up after" in r.err and f"pid {holder.pid}" in r.err
    finally:
        holder.kill()
        holder.wait()


def test_a_child_started_under_the_lock_does_not_keep_it(tmp_path: Path) -> None:
    """A worker started while wf holds the lock must not hold it after wf lets go."""
    child = None
    try:
        with project_lock(tmp_path, timeout=2):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
        with project_lock(tmp_path, timeout=1):
            pass
    finally:
        if child is not None:
            child.kill()
            child.wait()


def test_a_lock_folder_removed_while_waiting_is_made_again(tmp_path: Path) -> None:
    """The folder of the lock removed while a waiter polls (the holder's file with it):
    the waiter makes it again and takes the lock on the new file, as filelock did, and
    does not fail with FileNotFoundError."""
    import shutil
    import threading

    wf_dir = tmp_path / ".wf"
    holder = _hold_lock(wf_dir)
    try:
        remover = threading.Timer(0.2, shutil.rmtree, (wf_dir,))
        remover.start()
        with project_lock(wf_dir, timeout=5):
            assert (wf_dir / "lock").exists()
        remover.join()
    finally:
        holder.kill()
        holder.wait()
