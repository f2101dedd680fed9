"""``wf-index.PID.START``: the temporary index of wf's archive commit. A ``kill -9``
inside that commit leaves it in the git folder; no later command may keep it forever:
the next archive commit and merge remove it, ``wf doctor`` names it and ``--fix``
removes it, and a later process given the dead one's pid does not keep it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_hostile import kill_post_at
from tests.orch.test_orch import Orch


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def _kill_post_inside_its_archive_commit(o: Orch, tmp_path: Path) -> list[str]:
    """kill -9 of `wf orch post` (and its hung git) while its temporary index exists."""
    return kill_post_at(o, tmp_path, "tmpindex")


def _indexes(o: Orch) -> list[str]:
    return sorted(p.name for p in (o.root / ".git").glob("wf-index.*"))


@pytest.mark.timeout(120)
def test_a_killed_posts_temporary_index_is_named_by_doctor_and_removed_by_fix(
    o: Orch, tmp_path: Path
) -> None:
    _kill_post_inside_its_archive_commit(o, tmp_path)
    left = _indexes(o)
    assert left, "the kill left no temporary index: the test did not reach its step"
    r = o.proc("doctor")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    for name in left:
        assert f"stale-index: {name}: a temporary index left by a killed wf (--fix removes it)" in r.stdout
    assert _indexes(o) == left  # named, not touched
    r = o.proc("doctor", "--fix")
    assert "Traceback" not in r.stderr, r.stderr
    assert f"stale-index: {left[0]}: a temporary index left by a killed wf [fixed]" in r.stdout, r.stdout
    assert _indexes(o) == []


@pytest.mark.timeout(120)
def test_a_killed_posts_temporary_index_is_removed_by_the_next_post(o: Orch, tmp_path: Path) -> None:
    args = _kill_post_inside_its_archive_commit(o, tmp_path)
    assert _indexes(o)
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _indexes(o) == []
    assert git(o.root, "status", "--porcelain") == ""


@pytest.mark.timeout(60)
def test_a_temporary_index_whose_pid_now_names_another_process_is_stale(wf: WfRunner) -> None:
    """The pid of a killed wf given to a later process (here: a sleep) does not keep the
    dead one's file; a living wf's own file (its pid and start time) is kept."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with open(f"/proc/{sleeper.pid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19].decode()
        git_dir = wf.root / ".git"
        dead = git_dir / f"wf-index.{sleeper.pid}.{int(start) - 1}"  # an earlier process with that pid
        living = git_dir / f"wf-index.{sleeper.pid}.{start}"
        dead.write_bytes(b"")
        living.write_bytes(b"")
        r = wf("doctor", "--fix")
        assert f"stale-index: {dead.name}: a temporary index left by a killed wf [fixed]" in r.out, r.out
        assert living.name not in r.out
        assert not dead.exists() and living.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    r = wf("doctor", "--fix")  # its process is gone now
    assert f"stale-index: {living.name}" in r.out and not living.exists()
