"""Dates are read as UTC, whatever the local time zone: one parser (wf.base.stamps) for
every stamp wf writes. A job that ran across a change of daylight saving time lasted what
the clock on the wall of Greenwich says, not an hour more or less."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import wfproc
from wf.base import stamps

ROOT = Path(__file__).resolve().parent.parent.parent


def lost_job(start: str, updated: str, tz: str) -> float:
    """The duration ``wf res ls`` records for a job whose supervisor died (its pid names
    this test's process, started at another time), run under the time zone ``tz``."""
    jobs = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "res" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    rec = {"id": "20261025-000000-1", "title": "dst", "argv": ["x"], "cwd": "/", "backend": "watchdog",
           "limits": {}, "start": start, "state": "running", "pid": os.getpid(), "pid_start": 1.0,
           "updated": updated}  # fmt: skip
    (jobs / "20261025-000000-1.json").write_text(json.dumps(rec))
    r = wfproc.run(
        [sys.executable, "-m", "wf", "res", "ls", "--json"], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT), TZ=tz), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
    hist = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "res" / "hist.jsonl"
    (line,) = hist.read_text().splitlines()
    return float(json.loads(line)["dur_s"])


# Berlin leaves summer time on 2026-10-25 at 01:00 UTC (03:00 CEST becomes 02:00 CET).
@pytest.mark.parametrize(
    ("start", "end", "hours"),
    [
        ("2026-10-25T01:30:00Z", "2026-10-25T03:30:00Z", 2),  # read as Berlin's wall clock: 3 h
        ("2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z", 24),  # read so: 25 h
        ("2026-03-28T12:00:00Z", "2026-03-29T12:00:00Z", 24),  # spring forward, read so: 23 h
    ],
)
def test_a_lost_job_across_a_dst_change_lasted_its_utc_hours(start: str, end: str, hours: int) -> None:
    assert lost_job(start, end, "Europe/Berlin") == hours * 3600


@pytest.fixture
def berlin() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.usefixtures("berlin")
def test_every_form_wf_writes_reads_as_utc() -> None:
    """The forms of the four readers it replaced: run and res stamps, backup ref names,
    transcripts' ISO times (fractions, offsets, and none: taken as UTC)."""
    assert time.localtime(1792887600).tm_isdst == 1  # the zone is in force here
    at = 1792887600.0  # 2026-10-25T00:20:00Z
    assert stamps.parse_utc("2026-10-25T00:20:00Z") == at
    assert stamps.parse_utc("20261025T002000Z") == at
    assert stamps.parse_utc("2026-10-25T00:20:00.250Z") == at + 0.25
    assert stamps.parse_utc("2026-10-25T02:20:00+02:00") == at
    assert stamps.parse_utc("2026-10-25T00:20:00") == at
    for bad in ("", "yesterday", "2026-13-01T00:00:00Z", "2026-10-25T00:20:00Zjunk", "None"):
        assert stamps.parse_utc(bad) is None
    assert stamps.seconds_between("2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z") == 86400.0
    assert stamps.seconds_between("2026-10-25T03:00:00Z", "2026-10-25T01:00:00Z") == -7200.0
    assert stamps.seconds_between("junk", "2026-10-25T01:00:00Z") is None
