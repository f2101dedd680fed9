"""One of each small thing in wf/base (issue 22): the atomic write, a folder's fsync, the
pid check, the tail of a log, the JSON writer and wf's state folder. Where the copies a
helper replaced behaved differently, the test says which behaviour was kept."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wf.base import fsutil, homes, lock, pids, records
from wf.workers import procs, runs


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What the writes ask of the disk, in order: a file's fsync, a folder's, a rename."""
    seen: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append("fsync folder" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    def replace(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> None:
        seen.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    yield seen


def test_a_durable_write_is_synced_before_its_rename_and_its_folder_after(
    tmp_path: Path, calls: list[str]
) -> None:
    """A crash of the machine leaves the old file or the whole new one: the data reaches
    the disk before the name points at it, and the new name reaches it after."""
    fsutil.atomic_write(tmp_path / "a", b"one")
    records.write_json(tmp_path / "b.json", {"x": 1})
    runs.write_status(tmp_path, {"state": "done"}, durable=True)
    assert calls == ["fsync file", "replace", "fsync folder"] * 3


def test_bookkeeping_skips_the_fsyncs_and_dir_sync_false_leaves_the_folder(
    tmp_path: Path, calls: list[str]
) -> None:
    runs.write_status(tmp_path, {"state": "running"})
    fsutil.atomic_write(tmp_path / "out", b"answer", dir_sync=False)  # status.json follows
    assert calls == ["replace", "fsync file", "replace"]


@pytest.mark.parametrize("planted", ["file", "symlink"])
def test_the_temporary_file_is_new_whatever_holds_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """The temporary file is made exclusively (as ``tempfile.mkstemp`` makes it, which
    wf no longer imports): a file or a symlink already at the name it draws is left as it
    is, and another name is drawn."""
    draws = iter([b"\x01" * 6, b"\x02" * 6])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    victim = tmp_path / "victim"
    victim.write_bytes(b"someone's")
    taken = tmp_path / f".out.{'01' * 6}.tmp"
    if planted == "file":
        taken.write_bytes(b"someone's")
    else:
        taken.symlink_to(victim)
    fsutil.atomic_write(tmp_path / "out", b"wf's")
    assert (tmp_path / "out").read_bytes() == b"wf's"
    assert victim.read_bytes() == b"someone's" and taken.is_symlink() == (planted == "symlink")
    assert taken.read_bytes() == b"someone's"
    assert not (tmp_path / f".out.{'02' * 6}.tmp").exists()


def test_a_write_replaces_the_file_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Readers holding the old file keep reading the old file: the write makes a new one
    and renames it over the name (never writes in place), keeping its permission bits."""
    path = tmp_path / "status.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    held = open(path, "rb")  # noqa: SIM115 - a reader that keeps the old file open
    try:
        ino = os.stat(path).st_ino
        runs.write_file(path, b"new", durable=False)
        assert os.stat(path).st_ino != ino and held.read() == b"old"
    finally:
        held.close()
    assert path.read_bytes() == b"new" and os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


def test_a_run_folder_someone_removed_is_not_made_anew(tmp_path: Path) -> None:
    """Kept from runs.write_file: a unit's folder removed under a live supervisor stays
    removed (the general write makes a missing folder, as for a first record)."""
    gone = tmp_path / "run" / "unit"
    with pytest.raises(FileNotFoundError):
        runs.write_status(gone, {"state": "done"}, durable=True)
    with pytest.raises(FileNotFoundError):
        runs.write_file(gone / "output.txt", b"the answer", durable=True)
    assert not (tmp_path / "run").exists()
    records.write_json(gone / "x.json", [1])
    assert records.load_json(gone / "x.json") == [1]


def test_the_json_writer_keeps_the_readers_limits(tmp_path: Path) -> None:
    """A NaN would make a record that load_json calls corrupt: it is refused before any
    byte is written, and the old record stays."""
    path = tmp_path / "rec.json"
    records.write_json(path, {"cost": 1.5, "at": tmp_path})
    assert records.load_json(path) == {"cost": 1.5, "at": str(tmp_path)}
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            records.write_json(path, {"cost": bad})
    assert records.load_json(path) == {"cost": 1.5, "at": str(tmp_path)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]


def test_a_status_keeps_the_odd_number_a_worker_reported(tmp_path: Path) -> None:
    """Kept from runs.write_status: a cost a worker printed as NaN is written as it came
    (read_status takes it), never a crash of the supervisor that writes it."""
    folder = tmp_path / "run" / "unit"
    folder.mkdir(parents=True)
    status = {
        "run": "run",
        "unit": "unit",
        "state": "done",
        "adapter": "claude",
        "usage": {"usd_rep": math.nan},
    }
    runs.write_status(folder, status, durable=True)
    read = runs.read_status(folder)
    assert read is not None and math.isnan(read["usage"]["usd_rep"])


def test_the_json_writer_refuses_a_record_larger_than_the_reader_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "MAX_RECORD", 64)
    path = tmp_path / "rec.json"
    records.write_json(path, "x" * 40)
    with pytest.raises(ValueError):
        records.write_json(path, "x" * 80)
    assert records.load_json(path) == "x" * 40


# ------------------------------------------------------------------ the pid check


@pytest.fixture
def zombie() -> Iterator[int]:
    p = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{p.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield p.pid
    p.wait()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_a_lock_holder_that_exited_is_said_to_have_exited(tmp_path: Path, zombie: int) -> None:
    """The lock's own check (signal 0) took a zombie for alive; the one check does not:
    an exited holder has released its flock, whether or not its parent collected it."""
    owner = tmp_path / "lock.owner"
    owner.write_text(json.dumps({"pid": zombie, "cmd": "wf claim", "since": "then"}))
    assert "has exited" in lock.describe_holder(owner)
    owner.write_text(json.dumps({"pid": os.getpid(), "cmd": "wf claim", "since": "then"}))
    assert lock.describe_holder(owner) == f"pid {os.getpid()} (wf claim) since then"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_alive_as_tells_a_reused_pid(zombie: int) -> None:
    me = pids.started(os.getpid())
    assert me is not None and pids.alive_as(os.getpid(), me) and pids.alive_as(os.getpid(), None)
    assert not pids.alive_as(os.getpid(), me - 5)  # the pid now names a later process
    assert not pids.alive_as(zombie, None) and not pids.alive(zombie)
    for bad in (0, -1, None, True):
        assert not pids.alive(bad) and pids.start_ticks(bad) is None
    assert procs.alive is pids.alive and procs.alive_as is pids.alive_as


def test_without_proc_a_pid_lives_when_signal_0_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc cannot tell, nothing live is taken for dead: alive by signal 0, and a
    start time that cannot be read does not make a live process a stranger."""

    def no_proc(pid: int) -> tuple[str, int] | None:
        raise pids.NoProc("no /proc")

    monkeypatch.setattr(pids, "stat", no_proc)
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert pids.alive(os.getpid()) and pids.alive(1)  # pid 1: signal 0 is refused, it exists
    assert not pids.alive(gone.pid)
    assert pids.alive_as(os.getpid(), 1.0) and pids.started(os.getpid()) is None


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_tree_usage_reads_what_proc_says() -> None:
    """res's watchdog measures through psutil: the same figures as /proc/<pid>/statm and
    stat, and a gone pid counts nothing."""
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"])
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        deadline = time.monotonic() + 20
        while int(Path(f"/proc/{child.pid}/statm").read_text().split()[1]) * page < 64 << 20:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rss, cpu = procs.tree_usage([child.pid])
        statm = int(Path(f"/proc/{child.pid}/statm").read_text().split()[1]) * page
        assert abs(rss - statm) < 4 << 20 and cpu > 0
    finally:
        child.kill()
        child.wait()
    assert procs.tree_usage([child.pid]) == (0, 0.0)


# ------------------------------------------------------------------ tails, state folder


def test_the_tail_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"first line\nsecond\nthird\n")
    assert fsutil.tail(log, 10) == b"ond\nthird\n"
    assert fsutil.tail_text(log, 10) == "third\n"  # the cut line is dropped
    assert fsutil.tail_text(log, 1000) == "first line\nsecond\nthird\n"  # nothing cut, nothing dropped
    assert fsutil.tail_text(log, 24) == "first line\nsecond\nthird\n"  # exactly the file
    with pytest.raises(FileNotFoundError):
        fsutil.tail(tmp_path / "none", 10)
    assert fsutil.tail_text(tmp_path / "none", 10) == ""


def test_one_state_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wf.cost import costlog
    from wf.night import resjobs

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert homes.wf_state() == tmp_path / "state" / "wf"
    assert costlog.projects_file().parent == homes.wf_state() == resjobs.state_dir().parent
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert homes.wf_state() == tmp_path / "home" / ".local" / "state" / "wf"
