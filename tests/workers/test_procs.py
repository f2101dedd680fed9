"""wf.base.pids (through wf.workers.procs) reads liveness and start times from /proc: the figures psutil gives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from wf.base import pids
from wf.workers import procs

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")


def test_boot_time_is_read_anew_as_psutil_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wall-clock step moves btime; a long-lived wf must follow it, as psutil does, or
    the start times it records match no other process's reading."""
    stat = tmp_path / "stat"
    monkeypatch.setattr(pids, "_STAT", str(stat), raising=False)
    stat.write_text("cpu 1 2 3\nbtime 1000\n")
    assert pids._boot_time() == 1000.0
    stat.write_text("cpu 1 2 3\nbtime 1042\n")  # the clock was stepped 42 s
    assert pids._boot_time() == 1042.0


def test_alive_and_started_agree_with_psutil() -> None:
    """A command name with ')', spaces and a newline, and a zombie."""
    code = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'a) b (c)\\n Z', 0, 0, 0); time.sleep(30)"
    weird = subprocess.Popen([sys.executable, "-c", code])
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 5
        while (
            psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE
            or b") b" not in Path(f"/proc/{weird.pid}/stat").read_bytes()
        ):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for pid in (os.getpid(), weird.pid, zombie.pid, 1):
            p = psutil.Process(pid)
            assert procs.alive(pid) == (p.status() != psutil.STATUS_ZOMBIE)
            assert procs.started(pid) == pytest.approx(p.create_time(), abs=1e-6)
        assert not procs.alive(zombie.pid)
        assert procs.alive(weird.pid)
    finally:
        weird.kill()
        weird.wait()
        zombie.wait()
    for gone in (0, -1, None, zombie.pid):
        assert not procs.alive(gone)
        assert procs.started(gone) is None
