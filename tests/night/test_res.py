"""wf res: a command under limits on its whole tree, with the watchdog backend (the one
that works in containers and CI). wf runs as a real process: it becomes a subreaper and
handles signals, which a test process must not."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from wf.night import res

ROOT = Path(__file__).resolve().parent.parent.parent


def hog_argv() -> list[str]:
    code = (
        "import subprocess, sys, time\n"
        "if 'child' not in sys.argv:\n"
        "    subprocess.Popen([sys.executable, '-c', sys.argv[1], 'child'])\n"
        "b = []\n"
        "for _ in range(150):\n"
        "    b.append(bytearray(10 << 20)); time.sleep(0.05)\n"
    )
    return [sys.executable, "-c", code, code]


def wf_res(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", "res", *args], capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wf", "res", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def state() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "wf" / "res"


def hist() -> list[dict[str, Any]]:
    path = state() / "hist.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def carrying(token: str) -> list[int]:
    """Live processes whose environment carries the job's token."""
    needle = f"WF_RES_TOKEN={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if needle in env and not zombie:
            found.append(int(entry))
    return found


def wait_for(pred: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.25)  # a poll is a wf command: a faster command must not mean more polls
    raise AssertionError("condition not met in time")


def running_jobs() -> list[dict[str, Any]]:
    r = wf_res("ls", "--json")
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


# ------------------------------------------------------------------ the done-when tests


@pytest.mark.timeout(60)
def test_a_memory_hog_ends_oom_137_with_its_whole_tree() -> None:
    r = wf_res("run", "--mem", "150M", "--title", "hog", "--json", "--", *hog_argv())
    assert r.returncode == 137, r.stderr
    job = json.loads(r.stdout)
    assert job["state"] == "oom" and job["exit"] == 137
    assert job["peak_rss"] > 150 << 20
    assert job["backend"] == "watchdog" or job["skipped"] == {}
    assert carrying(job["token"]) == []  # parent and child hog both gone
    assert [h["state"] for h in hist()] == ["oom"]
    assert hist()[0]["limits"] == {"mem": 150 << 20, "cpus": None, "for": None}


@pytest.mark.timeout(90)
def test_the_cap_is_on_the_trees_sum_and_sigterm_is_not_the_end() -> None:
    """Four children of 50 MB each, every one under the 150M cap alone, that ignore
    SIGTERM: the tree's sum passes the cap, and SIGKILL ends them all."""
    kid = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "b = bytearray(50 << 20); b[::4096] = b'x' * len(b[::4096])\n"
        "time.sleep(60)\n"
    )
    code = (
        "import subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', {kid!r}]) for _ in range(4)]\n"
        "time.sleep(60)\n"
    )
    r = wf_res("run", "--mem", "150M", "--for", "40s", "--json", "--", sys.executable, "-c", code)
    assert r.returncode == 137, r.stderr
    job = json.loads(r.stdout)
    assert job["state"] == "oom" and job["peak_rss"] > 150 << 20
    assert carrying(job["token"]) == []


@pytest.mark.timeout(60)
def test_the_wall_limit_ends_the_tree_timeout_124() -> None:
    t0 = time.monotonic()
    r = wf_res("run", "--for", "2s", "--json", "--", "sh", "-c", "sleep 30 & sleep 30")
    assert r.returncode == 124, r.stderr
    assert time.monotonic() - t0 < 20
    job = json.loads(r.stdout)
    assert job["state"] == "timeout" and job["exit"] == 124
    assert carrying(job["token"]) == []  # the backgrounded sleep too


def with_arg(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.timeout(60)
def test_what_left_the_tree_and_its_environment_is_ended_with_the_job() -> None:
    """A process that detached (its parent exited) and cleared its environment (no
    token) is still the job's: wf is its subreaper, and ends it when the job ends."""
    marker = f"61.{os.getpid()}"
    r = wf_res("run", "--json", "--", "sh", "-c", f"(env -i sleep {marker} &); sleep 1")
    assert r.returncode == 0, r.stderr
    assert with_arg(marker) == []


def test_exit_status_is_the_commands_own() -> None:
    ok = wf_res("run", "--json", "--", sys.executable, "-c", "print('hi')")
    assert ok.returncode == 0 and json.loads(ok.stdout.splitlines()[-1])["state"] == "done"
    assert ok.stdout.startswith("hi\n")  # the command's output passes through
    bad = wf_res("run", "--", "sh", "-c", "exit 3")
    assert bad.returncode == 3 and "failed exit=3" in bad.stderr
    missing = wf_res("run", "--", "no-such-program-wf")
    assert missing.returncode == 127
    sig = wf_res("run", "--", "sh", "-c", "kill -9 $$")
    assert sig.returncode == 137 and [h["state"] for h in hist()][-1] == "failed"  # its own death, not oom


def test_the_record_names_the_backend_and_why_others_were_skipped() -> None:
    r = wf_res("run", "--json", "--", "true")
    job = json.loads(r.stdout)
    if job["backend"] == "watchdog":
        assert set(job["skipped"]) == {"systemd", "cgroup"} and all(job["skipped"].values())
    forced = json.loads(wf_res("run", "--json", "--", "true", env={"WF_RES_BACKEND": "watchdog"}).stdout)
    assert forced["backend"] == "watchdog" and forced["skipped"]["systemd"] == "WF_RES_BACKEND=watchdog"
    for key in ("id", "title", "argv", "cwd", "backend", "limits", "start", "end", "dur_s", "state", "exit",
                "peak_rss", "cpu_s"):  # fmt: skip
        assert key in hist()[-1]


def test_peak_memory_is_the_jobs_not_wfs() -> None:
    """A small command's peak is its own, not wf's size (which Linux counts in a child's
    maxrss from the fork to its exec); a big one's is its own too."""
    small = json.loads(wf_res("run", "--json", "--", "sleep", "1.2").stdout)
    assert small["peak_rss"] < 10 << 20, small["peak_rss"]
    code = "import time; b = bytearray(80 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
    big = json.loads(wf_res("run", "--json", "--", sys.executable, "-c", code).stdout)
    assert big["state"] == "done" and big["peak_rss"] > 80 << 20, big


def test_a_maxrss_only_a_little_over_wfs_own_is_wfs_not_the_jobs() -> None:
    """The kernel's RSS counters are approximate: a small command's inherited maxrss (wf's
    size at the fork) can read a few pages over wf's own high-water mark. That is still
    wf's size, not the command's peak (CI once saw `sleep` at 24.7 MB)."""
    wf_peak = 24 << 20
    assert not res.is_own_peak(wf_peak, wf_peak)
    assert not res.is_own_peak(wf_peak + 3 * 4096, wf_peak)  # a few pages of skew
    assert not res.is_own_peak(wf_peak + (2 << 20), wf_peak)
    assert res.is_own_peak(wf_peak + (80 << 20), wf_peak)
    assert res.is_own_peak(200 << 20, 60 << 20)


BIG_80M = "b = bytearray(80 << 20); b[::4096] = b'x' * len(b[::4096])"  # 80 MB, every page touched


def res_runs_under(prelude: str, *argvs: list[str]) -> list[dict[str, Any]]:
    """The records of `wf res run --json -- ARGV` for each argv, run by a Python parent
    that first executes ``prelude`` (ignores SIGCHLD, grows big, ...)."""
    parent = (
        "import json, os, signal, subprocess, sys\n"
        f"{prelude}\n"
        "def run(argv):\n"
        "    p = subprocess.run([sys.executable, '-m', 'wf', 'res', 'run', '--json', '--', *argv],\n"
        "                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=sys.argv[1]))\n"
        "    return json.loads(p.stdout)\n"
        "print(json.dumps([run(a) for a in json.loads(sys.argv[2])]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", parent, str(ROOT), json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


def test_a_big_command_that_ends_before_any_sample_still_counts() -> None:
    """Its peak comes from its own rusage when wf reaps it."""
    big = json.loads(wf_res("run", "--json", "--", sys.executable, "-c", BIG_80M).stdout)
    assert big["state"] == "done" and big["peak_rss"] > 80 << 20, big


def test_a_job_smaller_than_wfs_parent_still_counts() -> None:
    """wf started by a big parent (a test runner, an orchestrator) reads that parent's peak
    in its own RUSAGE_SELF: a job smaller than the parent must not be taken for wf's own size."""
    prelude = "big = bytearray(300 << 20); big[::4096] = b'x' * len(big[::4096])"
    (job,) = res_runs_under(prelude, [sys.executable, "-c", BIG_80M])
    assert job["state"] == "done" and 80 << 20 < job["peak_rss"] < 300 << 20, job


def test_an_inherited_ignored_sigchld_changes_nothing() -> None:
    """A parent may start wf with SIGCHLD ignored (it survives exec): the kernel would then
    reap every child itself, every exit status would read 0 and no rusage would come back.
    wf undoes it: a failing command still fails, a probe that fails is not taken for a
    service manager, and a fast job's peak is still measured."""
    prelude = "signal.signal(signal.SIGCHLD, signal.SIG_IGN)"
    failing, big = res_runs_under(prelude, ["false"], [sys.executable, "-c", BIG_80M])
    assert failing["state"] == "failed" and failing["exit"] == 1, failing
    assert big["state"] == "done" and big["peak_rss"] > 80 << 20, big
    if shutil.which("systemctl"):  # a failing probe must not pass for a user service manager
        probe_rc = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True).returncode
        assert probe_rc == 0 or big["backend"] != "systemd", big


def test_cpus_pin_the_tree_to_that_many_cores() -> None:
    code = "import os; print(len(os.sched_getaffinity(0)))"
    r = wf_res("run", "--cpus", "1", "--", sys.executable, "-c", code)
    assert r.returncode == 0 and r.stdout.strip() == "1"


@pytest.mark.parametrize(
    "args",
    [["--mem", "lots"], ["--for", "soon"], ["--cpus", "-1"], ["--mem", "0"]],
)
def test_bad_limits_are_usage_errors(args: list[str]) -> None:
    r = wf_res("run", *args, "--", "true")
    assert r.returncode == 2 and "expected" in r.stderr
    assert hist() == []


# ------------------------------------------------------------------ stop, lost


@pytest.mark.timeout(60)
def test_stop_ends_the_job_and_its_tree_as_killed() -> None:
    p = start("run", "--title", "sleeper", "--", "sh", "-c", "sleep 60 & sleep 60")
    try:
        jobs = wait_for(lambda: [j for j in running_jobs() if j.get("child")])
        job = jobs[0]
        assert job["title"] == "sleeper" and job["state"] == "running"
        wait_for(lambda: len(carrying(job["token"])) >= 3)
        r = wf_res("stop", job["id"], "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["state"] == "killed"
        assert p.wait(timeout=20) == 128 + signal.SIGTERM
        assert carrying(job["token"]) == []
        assert running_jobs() == []
    finally:
        p.kill()


@pytest.mark.timeout(60)
def test_a_job_whose_supervisor_died_is_found_lost_and_its_tree_ended() -> None:
    p = start("run", "--title", "orphan", "--", "sleep", "60")
    job = wait_for(lambda: [j for j in running_jobs() if j.get("child")])[0]
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    assert carrying(job["token"])  # the sleep outlived its supervisor
    assert running_jobs() == []  # wf res ls found it lost
    rec = json.loads((state() / "jobs" / f"{job['id']}.json").read_text())
    assert rec["state"] == "lost"
    assert [h["state"] for h in hist()] == ["lost"]
    wait_for(lambda: carrying(job["token"]) == [], timeout=10)


@pytest.mark.timeout(60)
def test_the_reservation_of_a_job_whose_supervisor_died_is_free_again() -> None:
    env = {"WF_RES_MEMORY": "2G"}  # 1G may be reserved in all
    p = start("run", "--mem", "800M", "--", "sleep", "60", env=env)
    job = wait_for(lambda: [j for j in running_jobs() if j.get("child")])[0]
    os.kill(p.pid, signal.SIGKILL)  # no release: its ledger entry stays, with a dead pid
    p.wait(timeout=10)
    r = wf_res("run", "--mem", "800M", "--no-wait", "--", "true", env=env)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: carrying(job["token"]) == [], timeout=10)

    # one that died after it reserved, before it wrote its record (so no sweep finds it):
    # its pid is now another process's (this test's, started at another time)
    ghost = {"mem": 800 << 20, "pid": os.getpid(), "pid_start": 1.0, "title": "ghost"}
    (state() / "reservations.json").write_text(json.dumps({"20260101-000000-9": ghost}))
    r = wf_res("run", "--mem", "800M", "--no-wait", "--", "true", env=env)
    assert r.returncode == 0, r.stderr


def test_stop_of_an_unknown_or_bad_id() -> None:
    assert wf_res("stop", "20260101-000000-1").returncode == 1
    assert wf_res("stop", "../x").returncode == 2


# ------------------------------------------------------------------ reservations


@pytest.mark.timeout(90)
def test_reservations_wait_for_room_or_refuse() -> None:
    env = {"WF_RES_MEMORY": "2G"}  # 1G may be reserved in all
    first = start("run", "--mem", "800M", "--title", "big", "--", "sleep", "60", env=env)
    waited: subprocess.Popen[str] | None = None
    try:
        big = wait_for(lambda: running_jobs())[0]
        refused = wf_res("run", "--mem", "500M", "--no-wait", "--", "true", env=env)
        assert refused.returncode == 1
        assert "does not fit" in refused.stderr and "(big, 800M)" in refused.stderr
        fits = wf_res("run", "--mem", "200M", "--no-wait", "--", "true", env=env)
        assert fits.returncode == 0, fits.stderr
        # one that does not fit waits (saying so once) until the big job ends, then runs
        waited = start("run", "--mem", "500M", "--json", "--", "true", env=env)
        assert waited.stderr is not None
        assert "waiting for room: 500M does not fit" in waited.stderr.readline()
        assert waited.poll() is None  # still waiting: the big job holds the room
        assert wf_res("stop", big["id"]).returncode == 0
        out, err = waited.communicate(timeout=30)
        assert waited.returncode == 0, err
        assert json.loads(out)["state"] == "done" and "waiting for room" not in err
        assert first.wait(timeout=20) == 128 + signal.SIGTERM
        never = wf_res("run", "--mem", "3G", "--", "true", env=env)
        assert never.returncode == 1 and "can never fit" in never.stderr
    finally:
        first.kill()
        if waited is not None:
            waited.kill()


@pytest.mark.timeout(180)
def test_jobs_started_at_once_never_reserve_past_the_budget() -> None:
    """Six jobs of 600M started together on a 1G budget: the ledger, changed under its
    lock, lets exactly one in; the others refuse (--no-wait)."""
    env = {"WF_RES_MEMORY": "2G"}
    jobs = [start("run", "--mem", "600M", "--no-wait", "--", "sleep", "300", env=env) for _ in range(6)]
    try:

        def five_ended() -> list[int] | None:
            codes = [p.returncode for p in jobs if p.poll() is not None]
            return codes if len(codes) >= 5 else None

        ended = wait_for(five_ended, timeout=120)
        assert ended == [1] * 5, ended
        live = running_jobs()
        assert len(live) == 1
        assert wf_res("stop", live[0]["id"]).returncode == 0
    finally:
        for p in jobs:
            p.kill()


def test_a_job_gives_its_reservation_back_when_it_ends() -> None:
    """The process that ran a job may live on (a batch job writes its footer, pulls its
    cloud sessions): the job's memory is free for others as soon as the job ends."""
    code = (
        "from wf.night import res, resjobs\n"
        "job = res.run(['true'], title='t', limits=res.Limits(mem=600 << 20))\n"
        "print(job.state.value, sorted(resjobs.reserved()))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT), WF_RES_MEMORY="2G"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done []"


def test_a_job_of_100ms_has_a_peak_and_unknown_reads_as_unknown() -> None:
    """A short job is sampled early enough to have a peak of its own; a job whose peak is
    not known (a command that never started, a line from an older wf with 0) shows '-' in
    text and null in --json, never 0B or 0."""
    r = wf_res("run", "--json", "--", sys.executable, "-c", "import time; time.sleep(0.1)")
    short = json.loads(r.stdout)
    assert r.returncode == 0 and short["state"] == "done" and short["peak_rss"] > 1 << 20, short
    r = wf_res("run", "--json", "--", "/nonexistent/cmd")
    never = json.loads(r.stdout)
    assert r.returncode == 127 and never["peak_rss"] is None, never
    assert " peak=- " in wf_res("run", "--", "/nonexistent/cmd").stderr
    old = "20260101-000000-9"  # an older wf wrote 0 for a peak it did not know
    with open(state() / "hist.jsonl", "a") as f:
        f.write(json.dumps({"id": old, "title": "old", "state": "done", "peak_rss": 0, "dur_s": 1}) + "\n")
    rows = {j["id"]: j for j in json.loads(wf_res("hist", "--json").stdout)["jobs"]}
    assert rows[old]["peak_rss"] is None and rows[never["id"]]["peak_rss"] is None
    assert rows[short["id"]]["peak_rss"] == short["peak_rss"]
    lines = {ln.split()[0]: ln for ln in wf_res("hist").stdout.splitlines() if ln[:1].isdigit()}
    assert " peak=- " in lines[old] and " peak=- " in lines[never["id"]], lines
    assert " peak=- " not in lines[short["id"]] and "0B" not in "".join(lines.values()), lines


# ------------------------------------------------------------------ history and suggestions


def test_hist_suggests_limits_from_done_jobs() -> None:
    state().mkdir(parents=True)
    m = 1 << 20
    rows = [
        {"id": "20260101-000000-1", "title": "night", "state": "done", "peak_rss": 300 * m, "dur_s": 600},
        {"id": "20260101-000000-2", "title": "night", "state": "oom", "peak_rss": 4000 * m, "dur_s": 9000},
        {"id": "20260101-000000-3", "title": "night", "state": "done", "peak_rss": 100 * m, "dur_s": 1200},
        {"id": "20260101-000000-4", "title": "other", "state": "failed", "peak_rss": 5 * m, "dur_s": 1},
    ]
    (state() / "hist.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = json.loads(wf_res("hist", "--json").stdout)
    assert [j["id"][-1] for j in data["jobs"]] == ["4", "3", "2", "1"]  # newest first
    assert data["suggest"]["night"] == {"mem": 512 * m, "for": 1800.0, "based_on": 2}
    assert data["suggest"]["other"]["based_on"] == 0
    text = wf_res("hist", "--title", "night").stdout
    assert "suggested for night: --mem 512M --for 30m00s (from its last 2 done job(s))" in text
    assert "other" not in text


def test_a_record_whose_pid_was_reused_is_lost() -> None:
    """A running record whose pid now belongs to another process (here: this test's,
    started at another time) is not mistaken for a live supervisor."""
    jobs = state() / "jobs"
    jobs.mkdir(parents=True)
    rec = {"id": "20260101-000000-7", "title": "old", "argv": ["x"], "cwd": "/", "backend": "watchdog",
           "limits": {}, "start": "2026-01-01T00:00:00Z", "state": "running", "pid": os.getpid(),
           "pid_start": 1.0, "updated": "2026-01-01T00:00:05Z"}  # fmt: skip
    (jobs / "20260101-000000-7.json").write_text(json.dumps(rec))
    assert running_jobs() == []
    assert [(h["id"], h["state"], h["dur_s"]) for h in hist()] == [("20260101-000000-7", "lost", 5.0)]


# ------------------------------------------------------------------ the systemd backend's command line

SYSTEMD_RUN = """#!{python}
import json, os, sys
from tests import wfproc
from wf.night import res
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
cmd = sys.argv[sys.argv.index("--") + 1:]
os.execvp(cmd[0], cmd)
"""


def test_systemd_backend_wraps_the_command_where_a_user_manager_answers(tmp_path: Path) -> None:
    """Test doubles for a machine with a systemd user session (this one has none): a
    systemctl that answers and a systemd-run that logs its argv and runs the command."""
    bindir, log = tmp_path / "bin", tmp_path / "systemd-run.log"
    bindir.mkdir()
    (bindir / "systemctl").write_text(
        '#!/bin/sh\n[ "$1 $2" = "--user show-environment" ] && exit 0\nexit 1\n'
    )
    (bindir / "systemd-run").write_text(SYSTEMD_RUN.format(python=sys.executable, log=str(log)))
    for f in bindir.iterdir():
        f.chmod(0o755)
    cg = tmp_path / "cg"  # a delegated cgroup folder too: systemd comes first all the same
    cg.mkdir()
    (cg / "cgroup.subtree_control").write_text("memory\n")
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "WF_RES_CGROUP": str(cg)}
    r = wf_res("run", "--mem", "300M", "--cpus", "1.5", "--for", "20s", "--json", "--", "true", env=env)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    assert job["backend"] == "systemd" and job["skipped"] == {} and job["state"] == "done"
    argv = json.loads(log.read_text().splitlines()[0])
    assert argv == [
        "--user", "--scope", "--quiet", "--collect", f"--unit=wf-res-{job['id']}",
        "-p", f"MemoryMax={300 << 20}", "-p", "MemorySwapMax=0", "-p", "CPUQuota=150%",
        "-p", "RuntimeMaxSec=80", "--", "true",
    ]  # fmt: skip
    # a SIGKILL from inside the scope with a memory cap is the kernel's OOM killer
    r = wf_res("run", "--mem", "300M", "--json", "--", "sh", "-c", "kill -9 $$", env=env)
    assert r.returncode == 137 and json.loads(r.stdout)["state"] == "oom"


@pytest.mark.parametrize(
    "name, data",
    [
        ("jobs/20260101-000000-1.json", '{"id": "20260101-000000-1", "state": "running", "pid": "x"}'),
        ("jobs/20260101-000000-2.json", '{"id": "../../x", "state": "running", "pid": 1}'),
        ("jobs/20260101-000000-3.json", '{"id": "20260101-000000-3", "limits": 5, "pid_start": "y"}'),
        ("jobs/20260101-000000-4.json", "[1, 2"),
        ("reservations.json", '{"a": {"pid": "x", "mem": "lots"}, "b": 3}'),
        (
            "hist.jsonl",
            '{"id": "x", "title": "t", "state": "done", "peak_rss": "big", "dur_s": []}\n[]\n{"id": 5}\n',
        ),
    ],
)
def test_broken_records_never_crash(name: str, data: str) -> None:
    path = state() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    for args in (
        ["ls"],
        ["hist"],
        ["hist", "--json"],
        ["run", "--mem", "100M", "--", "true"],
        ["stop", "20260101-000000-1"],
    ):
        r = wf_res(*args)
        assert r.returncode in (0, 1, 2), (args, r.stderr)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_a_state_folder_that_cannot_be_made_is_an_error_not_a_crash() -> None:
    env = {"XDG_STATE_HOME": "/dev/null"}
    assert wf_res("ls", env=env).returncode == 0  # nothing ran: nothing to read, nothing made
    assert wf_res("hist", env=env).stdout.strip() == "no jobs yet"
    r = wf_res("run", "--", "true", env=env)
    assert r.returncode == 1 and "state folder /dev/null/wf/res cannot be made" in r.stderr


def test_cgroup_backend_writes_the_limits_in_a_delegated_folder(tmp_path: Path) -> None:
    """A folder playing a delegated cgroup v2 folder ($WF_RES_CGROUP; this machine's own
    cgroup delegates no memory controller): wf makes the job's folder in it, writes its
    memory cap and moves the command in; without the memory controller it is skipped."""
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "cgroup.subtree_control").write_text("cpu memory pids\n")
    env = {"WF_RES_CGROUP": str(cg)}
    r = wf_res("run", "--mem", "300M", "--json", "--", "true", env=env)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    # tried in order: systemd first (no user manager here), then the cgroup folder
    assert job["backend"] == "cgroup" and set(job["skipped"]) == {"systemd"}, job
    folder = cg / f"wf-{job['id']}"
    assert (folder / "memory.max").read_text() == str(300 << 20)
    assert (folder / "cgroup.procs").read_text() == "0"  # the command joined it before exec
    assert hist()[-1]["backend"] == "cgroup"
    (cg / "cgroup.subtree_control").write_text("cpu pids\n")
    job = json.loads(wf_res("run", "--json", "--", "true", env=env).stdout)
    assert (
        job["backend"] == "watchdog" and "does not delegate the memory controller" in job["skipped"]["cgroup"]
    )


def test_a_forced_backend_that_does_not_work_here_is_an_error() -> None:
    r = wf_res("run", "--", "true", env={"WF_RES_BACKEND": "cgroup", "WF_RES_CGROUP": "/nonexistent"})
    assert r.returncode == 1 and "WF_RES_BACKEND=cgroup: that backend does not work here" in r.stderr
    assert "internal error" not in r.stderr and hist() == []
