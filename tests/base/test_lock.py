"""The project lock (wf.base.lock, a filelock.FileLock): one holder at a time, whether the
other is a process or a thread of the same process; re-entrant within one thread; taken
only on the file at the path; the holder named while others wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from wf.base.errors import LockTimeout
from wf.base.lock import project_lock
from wf.cli import main


def _free_for_another(path: Path) -> bool:
    """Whether a new open file description of ``path`` can take the flock (as another
    process, or another thread, would)."""
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _in_thread(fn: object) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())  # type: ignore[operator]
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out


# ------------------------------------------------------------------ threads


def test_another_thread_waits_for_the_lock_and_gives_up_naming_this_process(tmp_path: Path) -> None:
    """The batch's cloud sidecar is a thread: while one thread holds the lock, another
    thread of the same process must wait for it like another process does (a re-entrancy
    count shared by the process would let it in)."""
    said: list[str] = []

    def take() -> str:
        with project_lock(tmp_path, timeout=0.3, on_wait=said.append):
            return "entered"

    with project_lock(tmp_path, timeout=1):
        t, out = _in_thread(take)
        t.join(10)
    assert isinstance(out[0], LockTimeout), out
    assert f"pid {os.getpid()}" in str(out[0]) and "gave up after" in str(out[0])
    assert len(said) == 1 and f"held by pid {os.getpid()}" in said[0]


def test_another_thread_takes_the_lock_once_the_first_lets_go(tmp_path: Path) -> None:
    events: list[str] = []
    first_holds = threading.Event()

    def first() -> None:
        with project_lock(tmp_path, timeout=1):
            first_holds.set()
            time.sleep(0.3)
            events.append("first lets go")

    def second() -> None:
        first_holds.wait(5)
        with project_lock(tmp_path, timeout=5):
            events.append("second holds")

    a, _ = _in_thread(first)
    b, out = _in_thread(second)
    a.join(10)
    b.join(10)
    assert events == ["first lets go", "second holds"], (events, out)


def test_a_claim_from_another_thread_waits_for_the_lock(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI: a claim run in a second thread while this thread holds the project
    lock gives up (exit 1, naming the holder) instead of writing under our hold."""
    task_id = wf.ok("add", "A task", "--model", "sonnet", "--done", "x").split()[-1]
    monkeypatch.setenv("WF_LOCK_TIMEOUT", "0.3")
    with project_lock(wf.root / ".wf", timeout=1):
        t, out = _in_thread(lambda: main(["-C", str(wf.root), "status", task_id, "progress", "w"]))
        t.join(30)
    err = wf.capsys.readouterr().err
    assert out == [1], (out, err)
    assert "gave up after" in err and f"pid {os.getpid()}" in err
    assert "in progress" not in (wf.root / "TASKS.md").read_text()


# ------------------------------------------------------------------ one thread


def test_the_lock_is_reentrant_in_one_thread_and_held_until_the_outer_block_ends(tmp_path: Path) -> None:
    with project_lock(tmp_path, timeout=1):
        with project_lock(tmp_path, timeout=0):  # no wait: this thread holds it
            assert not _free_for_another(tmp_path / "lock")
        assert not _free_for_another(tmp_path / "lock")
    assert _free_for_another(tmp_path / "lock")


def test_the_lock_is_free_again_after_an_error_in_the_block(tmp_path: Path) -> None:
    with pytest.raises(ValueError), project_lock(tmp_path, timeout=1):
        raise ValueError("boom")
    assert _free_for_another(tmp_path / "lock")


def test_the_owner_file_names_this_process_and_when(tmp_path: Path) -> None:
    with project_lock(tmp_path, timeout=1, name="gate.lock"):
        info = json.loads((tmp_path / "gate.lock.owner").read_text())
    assert info["pid"] == os.getpid()
    assert info["cmd"] and time.strptime(info["since"], "%Y-%m-%dT%H:%M:%SZ")


def test_a_stale_owner_file_is_said_to_be_stale_and_then_replaced(tmp_path: Path) -> None:
    """A holder that has not written its name yet: the owner file still names the last
    holder, which has exited; the waiter says so instead of naming a dead pid as holder."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "lock.owner").write_text(json.dumps({"pid": dead.pid, "cmd": "wf add", "since": "then"}))
    import fcntl

    tmp_path.joinpath("lock").touch()
    fd = os.open(tmp_path / "lock", os.O_RDWR)  # held without writing an owner file
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(LockTimeout) as info, project_lock(tmp_path, timeout=0.1):
            pass
        assert f"the last recorded holder, pid {dead.pid}, has exited" in str(info.value)
    finally:
        os.close(fd)
    with project_lock(tmp_path, timeout=1):
        assert json.loads((tmp_path / "lock.owner").read_text())["pid"] == os.getpid()


# ------------------------------------------------------------------ the file at the path


def test_a_lock_file_replaced_while_locking_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flock must be on the file at the path, the one the next waiter opens: a file
    replaced between the open and the flock (removed by hand, an editor's save) is let
    go, and the next try locks the new one."""
    import fcntl

    path = tmp_path / "lock"
    path.touch()
    real = fcntl.flock
    replaced: list[bool] = []

    def flock_after_a_replace(fd: int, op: int) -> None:
        if not replaced and op & fcntl.LOCK_EX:
            replaced.append(True)
            (tmp_path / "new").write_text("")
            os.replace(tmp_path / "new", path)
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_replace)
    with project_lock(tmp_path, timeout=2):
        monkeypatch.setattr(fcntl, "flock", real)
        assert replaced
        assert not _free_for_another(path)


def test_a_lock_file_renamed_away_while_locking_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed away, the old file still has a link (filelock's own check misses it): the
    next waiter would make a new file at the path and hold a second lock."""
    import fcntl

    path = tmp_path / "lock"
    path.touch()
    real = fcntl.flock
    moved: list[bool] = []

    def flock_after_a_rename(fd: int, op: int) -> None:
        if not moved and op & fcntl.LOCK_EX:
            moved.append(True)
            os.rename(path, tmp_path / "lock.aside")
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_rename)
    with project_lock(tmp_path, timeout=2):
        monkeypatch.setattr(fcntl, "flock", real)
        assert moved and path.exists()
        assert not _free_for_another(path)


# ------------------------------------------------------------------ processes

FORKED = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from wf.base.lock import project_lock
    wf_dir = Path(sys.argv[1])
    with project_lock(wf_dir, timeout=2):
        pass
    pid = os.fork()
    if pid == 0:
        try:
            with project_lock(wf_dir, timeout=2):
                code = 0
        except BaseException as e:
            print(type(e).__name__, e, flush=True)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


def test_a_forked_child_takes_the_lock_its_parent_took_before(tmp_path: Path) -> None:
    """A process forked after wf took (and let go of) the lock takes it again itself:
    filelock refuses a lock object made before the fork, so each process makes its own."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    p = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path)], capture_output=True, text=True, timeout=30, env=env
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_list_and_show_do_not_import_filelock_but_a_claim_does(wf: WfRunner) -> None:
    task_id = wf.ok("add", "A task", "--model", "sonnet", "--done", "x").split()[-1]
    code = textwrap.dedent(
        f"""
        import sys
        from wf.cli import main
        for argv in (["list", "--runner"], ["show", {task_id!r}]):
            assert main(["-C", {str(wf.root)!r}, *argv]) == 0
        print("after list/show:", "filelock" in sys.modules)
        assert main(["-C", {str(wf.root)!r}, "status", {task_id!r}, "progress", "w"]) == 0
        print("after a claim:", "filelock" in sys.modules)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert "after list/show: False" in p.stdout and "after a claim: True" in p.stdout
