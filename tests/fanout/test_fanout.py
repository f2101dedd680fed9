"""Fan-out a coordinator can trust (issue 12; issue 15 item 7): where units run, failures
in words, retries, lost supervisors, monitor/gather exit codes, live progress, --json,
cost lines, the orchestrate design's spellings, the fsync budget, parallel stops."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner, git
from tests.night.test_night import _popen, _wait_for
from tests.orch.test_orch import Orch, lanes_toml, task
from tests.workers.test_workers import ROOT, Workers, alive, manifest


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    return Workers(wf.root, tmp_path)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def wait_for(cond: Any, what: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def running(w: Workers, run: str, unit: str) -> bool:
    f = w.unit(run, unit) / "status.json"
    return f.exists() and w.status(run, unit)["state"] == "running"


# ------------------------------------------------------------------ 1. where a unit runs


def test_a_unit_runs_in_its_scratch_folder_by_default(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "s1", "prompt": "x", "cmd": py("open('stray.txt','w').write('x'); print('hi')")}],
        adapter="cmd",
    )
    r = w.run("run", str(m), "--run", "r1")
    assert r.returncode == 0, r.stderr
    st = w.status("r1", "s1")
    assert st["mode"] == "scratch" and st["cwd"] == str(w.unit("r1", "s1") / "scratch")
    assert (w.unit("r1", "s1") / "scratch" / "stray.txt").exists()
    assert not (w.root / "stray.txt").exists()
    assert git(w.root, "status", "--porcelain") == ""


def test_a_cwd_unit_that_left_changes_in_the_checkout_is_flagged(w: Workers) -> None:
    r = w.run(
        "dispatch",
        "r1",
        "c1",
        "--cwd",
        str(w.root),
        "--adapter",
        "cmd",
        "--cmd",
        f"{sys.executable} -c \"open('left.txt','w').write('x'); print('ok')\"",
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stderr
    st = w.status("r1", "c1")
    assert st["mode"] == "cwd" and st["left_changes"] == ["left.txt"]
    assert "checkout_before" not in st
    status = w.run("runs", "status", "r1").stdout
    assert f"LEFT CHANGES in {w.root}: left.txt" in status
    clean = w.run(
        "dispatch",
        "r1",
        "c2",
        "--cwd",
        str(w.root),
        "--adapter",
        "cmd",
        "--cmd",
        "echo fine",
        "--prompt",
        "x",
    )
    assert clean.returncode == 0 and w.status("r1", "c2")["left_changes"] == []
    assert "c2: done" in w.run("runs", "status", "r1").stdout
    assert "LEFT CHANGES" not in next(
        ln for ln in w.run("runs", "status", "r1").stdout.splitlines() if ln.startswith("c2")
    )


def test_mode_clone_in_a_manifest_and_bad_modes(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json", [{"id": "k1", "prompt": "x", "mode": "clone", "cmd": ["pwd"]}], adapter="cmd"
    )
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    st = w.status("r1", "k1")
    assert st["mode"] == "clone" and w.output("r1", "k1") == st["clone"]
    bad = manifest(
        tmp_path / "b.json", [{"id": "k2", "prompt": "x", "mode": "elsewhere", "cmd": ["pwd"]}], adapter="cmd"
    )
    r = w.run("run", str(bad), "--run", "r2")
    assert r.returncode == 1 and "mode 'elsewhere' is not one of scratch, clone, cwd" in r.stderr


# ------------------------------------------------------------------ 2. failures in words


def test_a_program_that_cannot_start_says_why_and_never_none(w: Workers) -> None:
    r = w.run("dispatch", "r1", "n1", "--adapter", "cmd", "--cmd", "/nonexistent/prog", "--prompt", "x")
    assert r.returncode == 4
    line = r.stdout.strip()
    assert (
        line.startswith("n1: failed") and "cannot start /nonexistent/prog: No such file or directory" in line
    )
    assert "None" not in line and "exit=" not in line
    assert "None" not in w.run("runs", "status", "r1").stdout
    assert "None" not in w.output("r1", "n1")


def test_a_running_unit_line_has_no_none(w: Workers) -> None:
    p = w.start("dispatch", "r1", "s1", "--adapter", "claude", "--prompt", "SLEEP 30")
    try:
        wait_for(lambda: running(w, "r1", "s1"), "a running unit")
        out = w.run("runs", "status", "r1").stdout
        assert out.startswith("s1: running ") and "None" not in out
        assert " growing" in out or " quiet" in out
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)


def test_a_failed_unit_line_carries_the_tools_words(w: Workers) -> None:
    r = w.run("dispatch", "r1", "c1", "--adapter", "claude", "--prompt", "CRASH")
    assert r.returncode == 4
    assert r.stdout.startswith("c1: failed") and "fake crash" in r.stdout and "exit 1" in r.stdout


# ------------------------------------------------------------------ 3. retries

FLAKY = "import os, sys; f = 'flaky.mark'; first = not os.path.exists(f); open(f, 'a').write('x'); sys.exit(1) if first else print('second time lucky')"


def test_run_again_skips_what_is_done_and_retries_the_rest(w: Workers, tmp_path: Path) -> None:
    mark = tmp_path / "flaky.mark"
    code = FLAKY.replace("'flaky.mark'", repr(str(mark)))
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "ok", "prompt": "x", "cmd": ["echo", "fine"]},
            {"id": "flaky", "prompt": "x", "cmd": py(code)},
        ],
        adapter="cmd",
        contract=False,
    )
    first = w.run("run", str(m), "--run", "r1")
    assert first.returncode == 4 and "flaky: failed" in first.stdout
    again = w.run("run", str(m), "--run", "r1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ok: skipped: done (ok)" in again.stdout
    st = w.status("r1", "flaky-r1")
    assert st["retry_of"] == "flaky" and st["retry"] == 1 and st["state"] == "done"
    assert w.output("r1", "flaky-r1") == "second time lucky"
    third = w.run("run", str(m), "--run", "r1")
    assert third.returncode == 0 and "flaky: skipped: done (flaky-r1)" in third.stdout


def test_runs_retry_failed_is_capped(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "bad", "prompt": "x", "cmd": ["false"]}, {"id": "good", "prompt": "x", "cmd": ["echo", "y"]}],
        adapter="cmd",
    )
    assert w.run("run", str(m), "--run", "r1").returncode == 4
    for n in (1, 2):
        r = w.run("runs", "retry", "r1", "--failed")
        assert r.returncode == 4 and f"bad-r{n}: failed" in r.stdout, r.stdout
        st = w.status("r1", f"bad-r{n}")
        assert st["retry_of"] == "bad" and st["retry"] == n
    r = w.run("runs", "retry", "r1", "--failed")
    assert r.returncode == 4 and "bad: skipped: gave up: 2 retries already (--max-retries 2)" in r.stdout
    assert not w.unit("r1", "bad-r3").exists() and not w.unit("r1", "good-r1").exists()
    r = w.run("runs", "retry", "r1", "bad", "--max-retries", "3", "--json")
    data = json.loads(r.stdout)
    assert [u["unit"] for u in data["units"]] == ["bad-r3"] and data["code"] == 4


def test_runs_retry_missing_runs_what_never_started(w: Workers, tmp_path: Path) -> None:
    mark = tmp_path / "quick"
    m = manifest(
        tmp_path / "m.json",
        [
            {
                "id": "s0",
                "prompt": "x",
                "cmd": py(
                    f"import os, time; time.sleep(0 if os.path.exists({str(mark)!r}) else 30); print(1)"
                ),
            },
            {"id": "s1", "prompt": "x", "cmd": ["echo", "late"]},
        ],
        adapter="cmd",
    )
    p = w.start("run", str(m), "--run", "r1", "--max-parallel", "1")
    wait_for(lambda: running(w, "r1", "s0"), "s0 running")
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    import shutil

    shutil.rmtree(w.unit("r1", "s1"))  # stands for a unit wf never got to write down
    r = w.run("runs", "retry", "r1", "--missing", "--json")
    data = json.loads(r.stdout)
    assert [u["unit"] for u in data["units"]] == ["s1"] and data["units"][0]["state"] == "done"
    assert w.output("r1", "s1") == "late"
    mark.touch()
    r = w.run("runs", "retry", "r1", "--failed", "--json")  # s0 was lost with its supervisor
    assert [u["unit"] for u in json.loads(r.stdout)["units"]] == ["s0-r1"]


def test_runs_retry_resume_continues_the_session(w: Workers) -> None:
    assert w.run("dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "CRASH").returncode == 4
    sid = w.status("r1", "u1")["session_id"]
    r = w.run("runs", "retry", "r1", "u1", "--resume")
    st = w.status("r1", "u1-r1")
    assert st["resumed_from"] == "u1" and st["session_id"] == sid and st["retry_of"] == "u1"
    assert r.returncode in (0, 4)


# ------------------------------------------------------------------ 4. dead supervisors


@pytest.mark.timeout(120)
def test_kill_9_of_wf_run_the_readers_end_the_worker_and_mark_it_lost(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "slow", "prompt": "FORK SLEEP 60"}, {"id": "quick", "prompt": "hi"}],
        adapter="codex",
        contract=False,
    )
    pidfile = tmp_path / "gc.pid"
    p = w.start("run", str(m), "--run", "k9", FAKE_GRANDCHILD_PIDFILE=str(pidfile))
    wait_for(lambda: running(w, "k9", "slow") and pidfile.exists(), "slow running with its grandchild")
    wait_for(
        lambda: (
            (w.unit("k9", "quick") / "status.json").exists() and w.status("k9", "quick")["state"] == "done"
        ),
        "quick done",
    )
    worker = w.status("k9", "slow")["pid"]
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    time.sleep(0.3)
    assert alive(worker)  # nobody ended it yet
    r = w.run("runs", "status", "k9")
    assert "slow: lost" in r.stdout and "its supervisor" in r.stdout
    st = w.status("k9", "slow")
    assert st["state"] == "lost" and st["fallback"] is True
    assert not alive(worker) and not alive(int(pidfile.read_text().split()[0]))
    assert w.output("k9", "slow").startswith("FALLBACK: unit slow ended without an answer (state lost)")
    g = w.run("gather", "k9", "--quiet", "0.2", "--timeout", "30")
    assert (
        g.returncode == 4
        and "DONE slow lost: its supervisor (wf, pid" in g.stdout
        and "FALLBACK" in g.stdout
        and "== quick (done)" in g.stdout
    )


def _a_run_killed_under_its_unit(w: Workers, tmp_path: Path) -> int:
    """`wf run` k9 killed -9 while its unit `slow` runs: the unit's worker pid."""
    m = manifest(tmp_path / "m.json", [{"id": "slow", "prompt": "SLEEP 60"}], adapter="codex", contract=False)
    p = w.start("run", str(m), "--run", "k9")
    wait_for(lambda: running(w, "k9", "slow"), "slow running")
    worker = int(w.status("k9", "slow")["pid"])
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    return worker


@pytest.mark.timeout(120)
def test_monitor_and_gather_find_a_lost_unit_themselves(w: Workers, tmp_path: Path) -> None:
    worker = _a_run_killed_under_its_unit(w, tmp_path)
    r = w.run("gather", "k9", "--quiet", "0.2", "--timeout", "30")
    assert r.returncode == 4 and "DONE slow lost" in r.stdout
    assert not alive(worker)


# ------------------------------------------------------------------ 5. monitor a coordinator can call again


@pytest.mark.timeout(120)
def test_monitor_started_before_its_run_waits_for_it_to_appear(w: Workers, tmp_path: Path) -> None:
    """wf monitor RUN right after wf run (whose folder is not made yet) waits for the run
    within its --timeout, saying so, instead of failing with 'no run'."""
    m = manifest(
        tmp_path / "m.json",
        [{"id": "a", "prompt": "x", "cmd": py("print('a')")}],
        adapter="cmd",
        contract=False,
    )
    mon = w.start("monitor", "late", "--timeout", "60")
    assert mon.stdout is not None
    first = mon.stdout.readline()  # printed before it waits
    assert first == "monitor late: waiting for run late to start (wf run, wf dispatch)\n", first
    sup = w.start("run", str(m), "--run", "late")
    out, _ = mon.communicate(timeout=60)
    assert mon.returncode == 0 and "monitor late: watching every unit" in out and "a: done" in out, (
        first + out
    )
    sup.communicate(timeout=60)


def test_monitor_of_a_run_that_never_appears_gives_up_with_5(w: Workers) -> None:
    r = w.run("monitor", "never", "--timeout", "0.3")
    assert r.returncode == 5 and r.stdout.splitlines()[-1] == (
        "monitor never: gave up after 0.3s; run never has not started"
    ), r.stdout + r.stderr
    r = w.run("monitor", "never", "--timeout", "0.3", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 5 and data == {
        "run": "never",
        "code": 5,
        "watching": [],
        "lost": [],
        "units": [],
        "attention": [],
    }
    assert w.run("monitor", "../x", "--timeout", "0.3").returncode == 1  # a bad id is not waited for


@pytest.mark.timeout(120)
def test_monitor_names_the_units_the_supervisor_has_yet_to_queue(w: Workers, tmp_path: Path) -> None:
    """The supervisor writes its units' first status one at a time: a monitor started in
    between names the whole manifest, not the units queued so far; once no supervisor
    is alive, a request that never got a unit is not promised."""
    go = tmp_path / "go"
    slow = py(f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('a')")
    m = manifest(
        tmp_path / "m.json", [{"id": "a", "prompt": "x", "cmd": slow}], adapter="cmd", contract=False
    )
    p = w.start("run", str(m), "--run", "q")
    try:
        wait_for(lambda: (w.unit("q", "a") / "status.json").exists(), "a queued")
        saved = w.root / ".wf" / "runs" / "q" / "manifest.json"
        reqs = json.loads(saved.read_text())
        saved.write_text(json.dumps([*reqs, dict(reqs[0], id="b")]))  # b: asked for, not yet queued
        r = w.run("monitor", "q", "--timeout", "0")
        assert r.returncode == 5 and r.stdout.startswith("monitor q: watching every unit (a, b)\n"), r.stdout
    finally:
        go.touch()
        p.communicate(timeout=60)
    r = w.run("monitor", "q", "--timeout", "5")
    assert r.returncode == 0 and r.stdout.startswith("monitor q: watching every unit (a)\n"), r.stdout


@pytest.mark.timeout(120)
def test_monitor_promises_no_request_for_a_retry_and_reads_a_bad_manifest(w: Workers, tmp_path: Path) -> None:
    """A retry's unit is not in the manifest: a request an earlier wf run never queued
    is not named while only the retry runs. A manifest.json whose entries are not
    requests (edited or damaged) is skipped, not a crash (exit 3)."""
    go, first = tmp_path / "go", tmp_path / "first"
    code = (
        f"import os, sys, time\nif not os.path.exists({str(first)!r}):\n    open({str(first)!r}, 'w').close()\n"
        f"    sys.exit(1)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('a')"
    )
    m = manifest(tmp_path / "m.json", [{"id": "a", "prompt": "x", "cmd": py(code)}], adapter="cmd")
    assert w.run("run", str(m), "--run", "rr").returncode == 4  # a failed once
    saved = w.root / ".wf" / "runs" / "rr" / "manifest.json"
    reqs = json.loads(saved.read_text())
    saved.write_text(json.dumps([*reqs, dict(reqs[0], id="b")]))  # b: asked for, never queued
    p = w.start("runs", "retry", "rr", "--failed")
    try:
        wait_for(lambda: running(w, "rr", "a-r1"), "a-r1 running")
        r = w.run("monitor", "rr", "--timeout", "0")
        assert r.returncode == 5 and r.stdout.startswith("monitor rr: watching every unit (a-r1)\n"), r.stdout
        bads = (
            [{"id": 5, "prompt": "x"}],
            [{"prompt": "x"}],
            [{"id": "y"}],
            [{"id": "z", "prompt": "x", "cmd": 5}],
        )
        for bad in bads:
            saved.write_text(json.dumps([*reqs, *bad]))
            r = w.run("monitor", "rr", "--timeout", "0")
            assert r.returncode == 5 and r.stdout.startswith("monitor rr: watching every unit (a-r1)\n"), (
                bad,
                r.stdout + r.stderr,
            )
    finally:
        go.touch()
        p.communicate(timeout=60)
    assert p.returncode == 0


@pytest.mark.timeout(120)
def test_monitor_running_waits_on_what_still_runs(w: Workers, tmp_path: Path) -> None:
    go = tmp_path / "go"
    slow = py(f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('slow')")
    m = manifest(
        tmp_path / "m.json",
        [{"id": "bad", "prompt": "CRASH", "adapter": "codex"}, {"id": "slow", "prompt": "x", "cmd": slow}],
        adapter="cmd",
        contract=False,
    )
    p = w.start("run", str(m), "--run", "mon")
    try:
        wait_for(
            lambda: (
                (w.unit("mon", "bad") / "status.json").exists()
                and w.status("mon", "bad")["state"] == "failed"
            ),
            "bad failed",
        )
        r = w.run("monitor", "mon", "--timeout", "30")
        assert r.returncode == 4 and r.stdout.startswith("monitor mon: watching every unit (bad, slow)\n")
        assert "bad: failed" in r.stdout and "slow: running" in r.stdout
        again = w.run("monitor", "mon", "--timeout", "30")
        assert again.returncode == 4  # without --running it wakes at once: bad still failed
        waiting = w.start("monitor", "mon", "--running", "--timeout", "60")
        assert waiting.stdout is not None
        first = waiting.stdout.readline()  # printed before it waits
        assert first == "monitor mon: watching slow\n", first
        go.touch()
        out, _ = waiting.communicate(timeout=60)
        assert waiting.returncode == 0 and "slow: done" in out, first + out
        r = w.run("monitor", "mon", "--running", "--timeout", "5")
        assert r.returncode == 0 and "watching nothing" in r.stdout
    finally:
        go.touch()
        p.communicate(timeout=60)
    assert p.returncode == 4


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_monitor_gives_up_with_5_and_shows_activity(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "busy", "prompt": "FOREVER"}, {"id": "mute", "prompt": "HANG"}],
        adapter="codex",
    )
    p = w.start("run", str(m), "--run", "mon")
    try:
        wait_for(lambda: running(w, "mon", "busy") and running(w, "mon", "mute"), "both running")
        time.sleep(3.5)
        r = w.run("monitor", "mon", "--timeout", "0.5")
        assert r.returncode == 5, r.stdout
        lines = r.stdout.splitlines()
        busy = next(x for x in lines if x.startswith("busy:"))
        mute = next(x for x in lines if x.startswith("mute:"))
        assert busy.endswith("growing") and " quiet " in mute
        data = json.loads(w.run("monitor", "mon", "busy", "--timeout", "0.2", "--json").stdout)
        assert data["code"] == 5 and data["watching"] == ["busy"] and data["units"][0]["state"] == "running"
        g = w.run("gather", "mon", "--timeout", "0.5")
        assert g.returncode == 5 and "gave up" in g.stdout
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)


def test_gather_streams_done_lines_and_json(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "a", "prompt": "x", "cmd": ["echo", "A"]}, {"id": "b", "prompt": "x", "cmd": ["echo", "B"]}],
        adapter="cmd",
        contract=False,
    )
    assert w.run("run", str(m), "--run", "g1").returncode == 0
    g = w.run("gather", "g1", "--quiet", "0.1")
    assert g.returncode == 0
    lines = g.stdout.splitlines()
    assert sorted(lines[:2]) == ["DONE a done", "DONE b done"] and lines[2:] == [
        "== a (done)",
        "A",
        "== b (done)",
        "B",
    ]
    data = json.loads(w.run("gather", "g1", "--quiet", "0.1", "--json").stdout)
    assert data["code"] == 0 and [(u["unit"], u["output"]) for u in data["units"]] == [
        ("a", "A\n"),
        ("b", "B\n"),
    ]
    bad = w.run("monitor", "g1", "nosuch")
    assert bad.returncode == 1 and "no unit nosuch in run g1" in bad.stderr


# ------------------------------------------------------------------ 6. live progress, --json


def _pty_run(args: list[str], env: dict[str, str], cwd: Path, limit: float = 60) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=30), out


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_progress_line_on_a_terminal_only(w: Workers, tmp_path: Path) -> None:
    m = manifest(tmp_path / "m.json", [{"id": "p1", "prompt": "SLEEP 2"}], adapter="codex", contract=False)
    env = {**w.env, "TERM": "xterm"}
    code, out = _pty_run(["run", str(m), "--run", "tty"], env, w.root)
    assert code == 0, out
    assert b"\r1 running, 0 done, 0 failed" in out and b"\x1b[K" in out
    frames = [f.split(b"\x1b[K")[0] for f in out.split(b"\r") if b"running," in f]
    assert frames and all(len(f) <= 40 for f in frames)
    code, out = _pty_run(["gather", "tty", "--quiet", "1.5"], env, w.root)  # waits 1.5 s: ticks
    assert code == 0 and b"\r0 running, 1 done, 0 failed" in out and out.rstrip().endswith(b"ok: SLEEP 2")
    quick = manifest(
        tmp_path / "q.json", [{"id": "p1", "prompt": "SLEEP 1"}], adapter="codex", contract=False
    )
    code, out = _pty_run(["run", str(quick), "--run", "dumb"], {**env, "TERM": "dumb"}, w.root)
    assert code == 0 and b"running," not in out and b"\x1b[K" not in out
    piped = w.run("run", str(quick), "--run", "pipe", TERM="xterm")
    assert "running," not in piped.stdout and "\r" not in piped.stdout
    code, out = _pty_run(["dispatch", "tty", "d1", "--adapter", "codex", "--prompt", "SLEEP 2"], env, w.root)
    assert code == 0 and b"\r1 running, 0 done, 0 failed" in out, out
    slow = manifest(tmp_path / "s.json", [{"id": "s1", "prompt": "HANG"}], adapter="codex", contract=False)
    sup = w.start("run", str(slow), "--run", "slow")
    try:
        wait_for(lambda: running(w, "slow", "s1"), "s1 running")
        code, out = _pty_run(["monitor", "slow", "--timeout", "2.5"], env, w.root)
        assert code == 5 and b"\r1 running, 0 done, 0 failed" in out and b"; qui" in out, (
            out
        )  # quietest, cut at 40
    finally:
        sup.send_signal(signal.SIGINT)
        sup.communicate(timeout=60)


def test_json_on_runs_and_runs_status(w: Workers) -> None:
    assert (
        w.run("dispatch", "jr", "u1", "--adapter", "cmd", "--cmd", "false", "--prompt", "x").returncode == 4
    )
    rows = json.loads(w.run("runs", "--json").stdout)
    assert rows == [{"run": "jr", "units": 1, "states": {"failed": 1}}]
    [st] = json.loads(w.run("runs", "status", "jr", "--json").stdout)
    assert st["unit"] == "u1" and st["failure"] == "task"


def test_json_on_run_and_dispatch(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "j1", "prompt": "x", "cmd": ["echo", "J"]}, {"id": "j2", "prompt": "x", "cmd": ["false"]}],
        adapter="cmd",
    )
    r = w.run("run", str(m), "--run", "js", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 4 and data["code"] == 4 and data["run"] == "js"
    assert {u["unit"]: u["state"] for u in data["units"]} == {"j1": "done", "j2": "failed"}
    d = w.run("dispatch", "js", "j3", "--adapter", "cmd", "--cmd", "echo x", "--prompt", "x", "--json")
    assert json.loads(d.stdout)["state"] == "done"


# ------------------------------------------------------------------ 7. cost


def test_unit_costs_reach_the_cost_log_the_status_and_the_report(w: Workers, tmp_path: Path) -> None:
    m = manifest(
        tmp_path / "m.json",
        [{"id": "c1", "prompt": "one"}, {"id": "c2", "prompt": "two two"}],
        adapter="claude",
        model="sonnet",
        contract=False,
    )
    assert w.run("run", str(m), "--run", "cost").returncode == 0
    log = (w.root / "out" / "wf-cost.log").read_text().splitlines()
    assert len(log) == 2
    recs = [dict(kv.split("=", 1) for kv in line.split()) for line in log]
    assert {(r["kind"], r["run"], r["unit"]) for r in recs} == {("run", "cost", "c1"), ("run", "cost", "c2")}
    assert all(r["check"] == "agrees" and r["project"] == w.root.name for r in recs)
    total = sum(w.status("cost", u)["cost"]["usd"] for u in ("c1", "c2"))
    status = w.run("runs", "status", "cost").stdout.splitlines()
    assert status[0].startswith("c1: done") and f"${w.status('cost', 'c1')['cost']['usd']:.4f}" in status[0]
    assert status[-1] == f"run cost: 2/2 done, ${total:.4f} in all"
    rep = json.loads(w.run("usage", "--report", "--by", "run", "--json").stdout)
    row = next(x for x in rep if x["run"] == "cost")
    assert row["n"] == 2 and abs(row["total_usd"] - total) < 0.001
    by_model = w.run("usage", "--report", "--by", "model").stdout
    assert by_model.startswith("model") and "claude-sonnet-4-6" in by_model
    by_lane = json.loads(w.run("usage", "--report", "--by", "lane", "--json").stdout)
    assert sum(x["n"] for x in by_lane) == 2 and abs(sum(x["total_usd"] for x in by_lane) - total) < 0.001


def test_the_report_shows_cost_check_disagreements(w: Workers) -> None:
    from wf.cost import costlog

    costlog.append(
        w.root,
        {
            "ts": "2026-01-01T00:00:00Z",
            "project": "p",
            "id": "u9",
            "kind": "run",
            "model": "m",
            "usd": 1.0,
            "usd_rep": 1.0,
            "run": "r9",
            "unit": "u9",
            "check": "differs",
            "tool_usd": 2.5,
        },
    )
    rows = json.loads(w.run("usage", "--report", "--by", "run", "--json").stdout)
    assert [(r["run"], r["cost_check_differs"]) for r in rows] == [("r9", 1)]
    out = w.run("usage", "--report", "--by", "run").stdout
    assert "cost_check differs: run r9 unit u9 (m): the tool reported $2.5, the transcript gives $1.0" in out


# ------------------------------------------------------------------ 8. tool access


def test_access_a_tool_cannot_honour_is_refused_before_anything_runs(w: Workers, tmp_path: Path) -> None:
    """A unit that asks for read-only of a tool with no sandbox, or a permission mode
    claude does not have, is refused with the reason; no unit of the manifest is left
    behind half-made, so the fixed manifest runs under the same run id."""
    m = tmp_path / "m.json"
    units: list[dict[str, Any]] = [
        {"id": "ok", "adapter": "cmd", "cmd": ["echo", "fine"], "prompt": "x"},
        {"id": "ro", "adapter": "opencode", "model": "anthropic/claude-sonnet-4-5", "prompt": "x",
         "sandbox": "read-only"},
    ]  # fmt: skip
    m.write_text(json.dumps({"units": units}))
    r = w.run("run", str(m), "--run", "acc")
    assert r.returncode == 1 and "unit ro: opencode has no sandbox" in r.stderr, r.stderr
    units[1] = {"id": "ro", "adapter": "claude", "prompt": "x", "permission_mode": "bogus"}
    m.write_text(json.dumps({"units": units}))
    r = w.run("run", str(m), "--run", "acc")
    assert r.returncode == 1 and "unit ro: permission_mode 'bogus' is not one of" in r.stderr, r.stderr
    assert not (w.root / ".wf" / "runs" / "acc" / "ok").exists()
    units[1] = {"id": "ro", "adapter": "codex", "prompt": "CRASH", "sandbox": "read-only"}
    m.write_text(json.dumps({"units": units}))
    r = w.run("run", str(m), "--run", "acc")
    assert r.returncode == 4 and "ok: done" in r.stdout and "ro: failed" in r.stdout, r.stdout + r.stderr
    assert w.status("acc", "ro")["access"]["sandbox"] == "read-only"
    r = w.run("runs", "retry", "acc", "ro", "--fresh")  # a retry gets the same access, never wider
    assert w.status("acc", "ro-r1")["access"] == w.status("acc", "ro")["access"], r.stdout + r.stderr


def test_doctor_checks_a_lanes_tool_access(w: Workers) -> None:
    (w.root / "wf.toml").write_text(
        '[lanes.oc]\nadapter = "opencode"\nmodel = "anthropic/claude-sonnet-4-5"\nsandbox = "read-only"\n'
    )
    r = w.run("doctor")
    assert "lane: oc: opencode has no sandbox, network or MCP switch" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ 9. spellings


def test_tasks_is_units_and_adapter_auto_is_the_first_installed(w: Workers, tmp_path: Path) -> None:
    only_codex = tmp_path / "bin"
    only_codex.mkdir()
    (only_codex / "codex").symlink_to(ROOT / "tests" / "fakes" / "codex")
    path = os.pathsep.join([str(Path(sys.executable).parent), str(only_codex), "/usr/bin", "/bin"])
    m = tmp_path / "m.toml"
    m.write_text('[defaults]\nadapter = "auto"\n\n[[tasks]]\nid = "t1"\nprompt = "hello"\n')
    r = w.run("run", str(m), "--run", "auto", PATH=path)
    assert r.returncode == 0, r.stderr
    assert w.status("auto", "t1")["adapter"] == "codex" and w.output("auto", "t1") == "ok: hello"
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"units": [], "tasks": []}))
    assert "not both" in w.run("run", str(both)).stderr
    none = w.run(
        "dispatch",
        "auto",
        "t2",
        "--adapter",
        "auto",
        "--prompt",
        "x",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
    )
    assert (
        none.returncode == 1 and "adapter auto: none of claude, codex, opencode is installed" in none.stderr
    )


def test_runs_new_positional_prompt_file_and_session(w: Workers, tmp_path: Path) -> None:
    folder = Path(w.run("runs", "new", "review").stdout.strip())
    assert folder.is_dir() and folder.parent == w.root / ".wf" / "runs" and folder.name.startswith("review-")
    run = folder.name
    prompt = tmp_path / "p.md"
    prompt.write_text("from a file\n")
    r = w.run("dispatch", run, "u1", str(prompt), "--adapter", "claude")
    assert r.returncode == 0, r.stderr
    assert w.output(run, "u1") == "ok: from a file"
    sid = w.status(run, "u1")["session_id"]
    cwd = w.status(run, "u1")["cwd"]
    r = w.run(
        "dispatch", run, "u2", "--session", sid, "--cwd", cwd, "--adapter", "claude", "--prompt", "more"
    )
    assert r.returncode == 0, r.stderr
    assert w.output(run, "u2") == f"resumed {sid}: ok: more"
    bad = w.run("dispatch", run, "u3", "--session", "x;rm -rf /", "--adapter", "claude", "--prompt", "x")
    assert bad.returncode == 1 and "bad session id" in bad.stderr
    two = w.run("dispatch", run, "u4", str(prompt), "--prompt", "x", "--adapter", "claude")
    assert two.returncode == 2


# ------------------------------------------------------------------ issue 15 item 7 and the fsync budget


def test_an_empty_answer_is_a_fallback(w: Workers) -> None:
    r = w.run("dispatch", "r1", "e1", "--adapter", "cmd", "--cmd", "true", "--prompt", "x")
    assert r.returncode == 0 and "FALLBACK" in r.stdout
    st = w.status("r1", "e1")
    assert st["fallback"] is True and st["answer"] == "fallback"
    assert w.output("r1", "e1").startswith("FALLBACK: unit e1 ended without an answer (state done, exit 0)")
    r = w.run("runs", "retry", "r1", "--failed", "--json")
    assert [u["unit"] for u in json.loads(r.stdout)["units"]] == ["e1-r1"]  # a FALLBACK is retried


def test_output_txt_is_not_a_second_copy_of_the_stream(w: Workers) -> None:
    code = "import sys; b = b'x' * 1024 + b'\\n'; [sys.stdout.buffer.write(b) for _ in range(20 * 1024)]"
    r = w.run(
        "dispatch", "r1", "big", "--adapter", "cmd", "--cmd", f'{sys.executable} -c "{code}"', "--prompt", "x"
    )
    assert r.returncode == 0, r.stderr
    folder = w.unit("r1", "big")
    out, log = (folder / "output.txt").stat(), (folder / "worker.log").stat()
    assert out.st_size == log.st_size == 20 * 1025 * 1024
    assert out.st_ino == log.st_ino  # the same file, not a copy


FSYNC_SPY = """
import os, runpy, sys
seen = []
real = os.fsync
def spy(fd):
    try:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
    return real(fd)
os.fsync = spy
sys.argv = ["wf", *sys.argv[1:]]
try:
    runpy.run_module("wf", run_name="__main__")
finally:
    with open(os.environ["FSYNC_LOG"], "w") as f:
        f.write("\\n".join(seen))
"""


def test_only_final_files_are_fsynced(w: Workers, tmp_path: Path) -> None:
    log = tmp_path / "fsync.log"
    p = subprocess.run(
        [sys.executable, "-c", FSYNC_SPY, "dispatch", "r1", "u1", "--adapter", "claude", "--prompt", "hi"],
        cwd=w.root,
        env={**w.env, "FSYNC_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    synced = [Path(x) for x in log.read_text().splitlines()]
    names = [x.name for x in synced if x.parent.name == "u1" or x.name == "u1"]
    assert any(".status.json." in n for n in names) and any(".output.txt." in n for n in names)
    assert not any("prompt.txt" in n or "session.txt" in n for n in names)
    assert sum(".status.json." in n for n in names) == 1  # the final one only


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_units_that_stall_together_are_stopped_together(w: Workers, tmp_path: Path) -> None:
    # silent from the start, so all three stall in the same pass; SIGINT and SIGTERM
    # ignored, so each stop takes its full grace periods before SIGKILL
    stubborn = ["sh", "-c", "trap '' INT TERM; sleep 60"]
    m = manifest(
        tmp_path / "m.json",
        [{"id": f"h{i}", "prompt": "x", "stall": 1, "cmd": stubborn} for i in range(3)],
        adapter="cmd",
    )
    r = w.run("run", str(m), "--run", "st", timeout=100)
    assert r.returncode == 4
    sts = [w.status("st", f"h{i}") for i in range(3)]
    assert all(st["state"] == "stalled" for st in sts)
    windows = [st["stopped_between"] for st in sts]
    # one after the other, no two stops would overlap
    assert max(b for b, _ in windows) < min(e for _, e in windows), windows


@pytest.mark.timeout(120)
def test_the_coordinators_loop_from_the_readme(w: Workers, tmp_path: Path) -> None:
    """runs new, run in the background, monitor (waits for the units to appear), a
    failure, monitor --running, retry, gather."""
    mark, go = tmp_path / "second", tmp_path / "go"
    flaky = (
        f"import os, sys; first = not os.path.exists({str(mark)!r}); sys.exit(1) if first else print('fixed')"
    )
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "parser", "prompt": "x", "cmd": py(flaky)},
            {
                "id": "docs",
                "prompt": "x",
                "cmd": py(
                    f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('docs')"
                ),
            },
        ],
        adapter="cmd",
        contract=False,
    )
    run = Path(w.run("runs", "new", "review").stdout.strip()).name
    mon = w.start("monitor", run, "--timeout", "60")
    time.sleep(1.0)  # the monitor is waiting on a run with no unit yet
    sup = w.start("run", str(m), "--run", run)
    out, _ = mon.communicate(timeout=60)
    assert mon.returncode == 4 and "parser: failed" in out and "docs: running" in out, out
    status = w.run("runs", "status", run).stdout
    assert "parser: failed task: exit 1" in status
    waiting = w.start("monitor", run, "--running", "--timeout", "60")
    assert waiting.stdout is not None
    first = waiting.stdout.readline()  # printed before it waits
    assert first == f"monitor {run}: watching docs\n", first
    go.touch()  # docs ends now, while the monitor waits on it
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, first + out
    sup.communicate(timeout=60)
    assert sup.returncode == 4
    mark.touch()
    r = w.run("runs", "retry", run, "--failed")
    assert r.returncode == 0 and "parser-r1: done" in r.stdout, r.stdout
    g = w.run("gather", run, "--quiet", "0.2")
    assert "DONE parser-r1 done" in g.stdout and "== parser-r1 (done)\nfixed" in g.stdout
    assert g.returncode == 0 and "== parser (" not in g.stdout  # the retry replaced it
    assert w.run("monitor", run, "--timeout", "5").returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_readme_coordinator_loop_runs_as_written(w: Workers) -> None:
    """The docs' coordinator loop, taken from docs/fanout.md and run by bash as it stands."""
    text = (ROOT / "docs" / "fanout.md").read_text()
    block = text.split("<!-- coordinator-loop -->\n```sh\n", 1)[1].split("\n```\n", 1)[0]
    r = subprocess.run(
        ["bash", "-c", block], cwd=w.root, env=w.env, capture_output=True, text=True, timeout=150
    )
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    run = out.split(":", 1)[0].removeprefix("monitor ")
    lines = out.splitlines()
    # the monitor may start before or after the supervisor made the units
    assert lines[0] in (
        f"monitor {run}: watching every unit (none yet)",
        f"monitor {run}: watching every unit (docs, parser)",
    ), out
    failed = next(x for x in lines if x.startswith("parser: failed task: "))
    assert "data.csv" in failed and "FALLBACK" in failed, failed  # the shell's own words
    # the second monitor waits on docs (or, on a slow machine, docs was done before it began)
    assert f"monitor {run}: watching docs" in out or f"monitor {run}: watching nothing" in out, out
    assert "parser-r1: done" in out and "(retry 1 of parser)" in out, out
    assert f"run {run}: 2/2 done (1 earlier attempt replaced by retries)" in out, out
    assert "DONE docs done" in out and "DONE parser-r1 done" in out, out
    assert out.endswith("== docs (done)\ndocs written\n== parser-r1 (done)\n2\n"), out


def test_retry_never_starts_a_second_attempt_beside_a_live_one(w: Workers, tmp_path: Path) -> None:
    p = w.start("dispatch", "r1", "s1", "--adapter", "claude", "--prompt", "SLEEP 30")
    try:
        wait_for(lambda: running(w, "r1", "s1"), "s1 running")
        r = w.run("runs", "retry", "r1", "s1")
        assert r.returncode == 4 and "s1: skipped: still running (s1)" in r.stdout
        assert not w.unit("r1", "s1-r1").exists()
        r = w.run("runs", "retry", "r1", "--failed")  # a running unit has not failed
        assert r.returncode == 0 and "nothing to retry" in r.stdout, r.stdout
        assert not w.unit("r1", "s1-r1").exists()
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)


RSS_SPY = """
import os, resource, runpy, sys
sys.argv = ["wf", *sys.argv[1:]]
try:
    runpy.run_module("wf", run_name="__main__")
finally:
    with open(os.environ["RSS_LOG"], "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))  # KiB, wf alone
"""


@pytest.mark.timeout(120)
def test_a_big_stream_does_not_grow_wf(w: Workers, tmp_path: Path) -> None:
    """80 MB of output: wf reads it in bounded chunks and links output.txt to it; its own
    peak memory stays near that of a unit that prints one line."""
    peaks = {}
    for unit, mb in (("small", 0), ("big", 80)):
        # one write: the whole stream lands between two polls
        code = f"import sys; sys.stdout.buffer.write((b'y' * 1023 + b'\\\\n') * ({mb} * 1024)); print('end')"
        log = tmp_path / f"{unit}.rss"
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                RSS_SPY,
                "dispatch",
                "r1",
                unit,
                "--adapter",
                "cmd",
                "--cmd",
                f'{sys.executable} -c "{code}"',
                "--prompt",
                "x",
            ],
            cwd=w.root,
            env={**w.env, "RSS_LOG": str(log)},
            capture_output=True,
            text=True,
            timeout=100,
        )
        assert p.returncode == 0, p.stderr
        peaks[unit] = int(log.read_text()) / 1024
    assert (w.unit("r1", "big") / "worker.log").stat().st_size == 80 * 1024 * 1024 + 4
    assert peaks["big"] < peaks["small"] + 10, peaks  # MB


def test_a_reader_never_signals_a_recorded_pid_that_is_not_the_units(w: Workers, tmp_path: Path) -> None:
    """A lost unit's recorded pid may belong to another process by now: only processes
    carrying the unit's token are ended."""
    bystander = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        folder = w.unit("old", "u1")
        folder.mkdir(parents=True)
        status = {
            "run": "old",
            "unit": "u1",
            "state": "running",
            "adapter": "cmd",
            "pid": bystander.pid,
            "supervisor": gone.pid,
            "token": "0" * 32,
            "started": "2026-01-01T00:00:00Z",
        }
        (folder / "status.json").write_text(json.dumps(status))
        r = w.run("runs", "status", "old")
        assert "u1: lost" in r.stdout and "it never started" not in r.stdout
        assert alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_supervisor_pid_reused_by_another_process_is_a_lost_supervisor(w: Workers) -> None:
    other = subprocess.Popen(["sleep", "60"])
    try:
        folder = w.unit("old", "u1")
        folder.mkdir(parents=True)
        status = {
            "run": "old",
            "unit": "u1",
            "state": "running",
            "adapter": "cmd",
            "supervisor": other.pid,
            "supervisor_start": 1,
            "token": "1" * 32,
        }
        (folder / "status.json").write_text(json.dumps(status))
        assert "u1: lost" in w.run("runs", "status", "old").stdout
        assert alive(other.pid)
    finally:
        other.kill()
        other.wait()


def test_a_corrupt_unit_status_is_shown_never_dropped(w: Workers) -> None:
    r = w.run("dispatch", "r1", "u1", "--adapter", "cmd", "--cmd", "echo hi", "--prompt", "-")
    assert r.returncode == 0, r.stdout + r.stderr
    status = w.root / ".wf" / "runs" / "r1" / "u1" / "status.json"
    status.write_text('{"run": "r1", "unit": "u1", "state": 5')
    r = w.run("runs", "status", "r1")
    assert "u1: corrupt" in r.stdout and "status.json cannot be trusted" in r.stdout, r.stdout
    mon = w.run("monitor", "r1", "--timeout", "5")
    assert mon.returncode == 4, mon.stdout + mon.stderr


def test_every_reader_treats_a_corrupt_unit_alike(w: Workers, tmp_path: Path) -> None:
    """runs status, monitor, gather, runs output, runs retry and wf run --run: a unit
    whose status.json cannot be trusted is shown (never dropped), needs attention (4),
    and is never re-run or acted on from what the file says."""
    m = manifest(
        tmp_path / "m.json",
        [{"id": "a", "prompt": "x", "cmd": ["false"]}, {"id": "b", "prompt": "x", "cmd": ["echo", "b"]}],
        adapter="cmd",
        contract=False,
    )
    assert w.run("run", str(m), "--run", "c1").returncode == 4
    (w.unit("c1", "a") / "status.json").write_text("{not json")
    st = json.loads(w.run("runs", "status", "c1", "--json").stdout)
    assert [(u["unit"], u["state"]) for u in st] == [("a", "corrupt"), ("b", "done")]
    assert "a: corrupt: status.json cannot be trusted: not JSON" in w.run("runs", "status", "c1").stdout
    assert w.run("monitor", "c1", "--timeout", "5").returncode == 4
    mon = w.run("monitor", "c1", "--running", "--timeout", "5")
    assert mon.returncode == 0 and "watching nothing" in mon.stdout  # a corrupt unit is not running
    g = w.run("gather", "c1", "--quiet", "0", "--timeout", "20")
    assert g.returncode == 4 and "DONE a corrupt: status.json cannot be trusted" in g.stdout, g.stdout
    out = w.run("runs", "output", "c1", "a")
    assert out.returncode == 1 and "cannot be trusted (not JSON" in out.stderr
    for again in (("runs", "retry", "c1", "--failed"), ("run", str(m), "--run", "c1")):
        r = w.run(*again)
        assert r.returncode == 4, r.stdout + r.stderr
        assert "a: skipped: a's status.json cannot be trusted (not JSON" in r.stdout, r.stdout
    assert sorted(p.name for p in (w.root / ".wf" / "runs" / "c1").iterdir()) == ["a", "b", "manifest.json"]
    # a record that names another unit is not trusted either (readers act on the unit it names)
    b = json.loads((w.unit("c1", "b") / "status.json").read_text())
    (w.unit("c1", "b") / "status.json").write_text(json.dumps({**b, "unit": "a"}))
    assert (
        "b: corrupt: status.json cannot be trusted: it names another unit"
        in w.run("runs", "status", "c1").stdout
    )
    # what the words say to do works: move the folder away, retry what is missing
    w.unit("c1", "a").rename(tmp_path / "a-aside")
    r = w.run("runs", "retry", "c1", "--missing", "--json")
    assert [u["unit"] for u in json.loads(r.stdout)["units"]] == ["a"], r.stdout + r.stderr


@pytest.mark.timeout(120)
def test_a_corrupt_status_of_a_running_unit_is_never_marked_lost(w: Workers, tmp_path: Path) -> None:
    """kill -9 of wf run, then the running unit's record is damaged: no reader ends a
    process or writes a lost record from a file it cannot trust."""
    worker = _a_run_killed_under_its_unit(w, tmp_path)
    bad = '{"run": "k9", "unit": "slow", "state": "running"}'  # no adapter: not a record wf wrote
    (w.unit("k9", "slow") / "status.json").write_text(bad)
    try:
        assert "slow: corrupt" in w.run("runs", "status", "k9").stdout
        assert w.run("gather", "k9", "--quiet", "0", "--timeout", "20").returncode == 4
        assert (w.unit("k9", "slow") / "status.json").read_text() == bad
        assert alive(worker)
    finally:
        os.kill(worker, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_orch_loop_takes_nothing_from_a_corrupt_unit_status(wf: WfRunner) -> None:
    """kill -9 of wf orch run after its worker reported; then the unit's status.json is
    damaged: the next run does not post the captured report from a record it cannot
    trust; it works the task again (a recovery)."""
    o = Orch(wf)
    # the worker lingers after its answer (as claude does), so the loop is still waiting on
    # it when it is killed: the answer is captured, not yet posted
    o.setup(lanes_toml("a"), task("a1", "a", "awaiting Which colour?", "linger 4"))
    p = _popen(o, "orch", "run", "a")
    rec_path = o.root / ".wf" / "orch" / "a.json"
    _wait_for(lambda: rec_path.exists() and json.loads(rec_path.read_text()).get("unit"), what="the record")
    rec = json.loads(rec_path.read_text())
    folder = o.root / ".wf" / "runs" / rec["run"] / rec["unit"]
    _wait_for(lambda: "result: awaiting" in runs_text(folder / "worker.log"), what="the answer")
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)
    other = {"run": rec["run"], "unit": "x", "state": "done", "adapter": "cmd"}  # names another unit
    (folder / "status.json").write_text(json.dumps(other))
    r = o.proc("orch", "run", "a", timeout=120)
    assert "taking over a finished worker" not in r.stdout, r.stdout
    assert "a1" in r.stdout and r.returncode == 4, r.stdout + r.stderr
    assert [e["outcome"] for e in o.orch_log()] == ["awaiting"]


def runs_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_a_unit_whose_model_wf_cannot_price_is_marked_on_every_line(w: Workers) -> None:
    """No bare $0.0000: a unit on a model that neither wf's table nor the tool's transcript
    prices shows '?' on its line, the run's total and wf runs status, with the legend;
    cost_source is "unpriced" in status.json and in --json."""
    r = w.run(
        "dispatch",
        "zz",
        "z1",
        "--adapter",
        "claude",
        "--model",
        "claude-zeta-9-9",
        "--prompt",
        "one",
        "--no-contract",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    st = w.status("zz", "z1")
    assert (st["cost"]["cost_source"], st["cost"]["unpriced"]) == ("unpriced", "claude-zeta-9-9")
    assert r.stdout.splitlines()[0].endswith(" $0.0000?")
    assert r.stdout.splitlines()[1].startswith("? leaves out unpriced model(s)")
    status = w.run("runs", "status", "zz").stdout.splitlines()
    assert " $0.0000?  " in status[0] and status[1] == "run zz: 1/1 done, $0.0000? in all"
    assert status[2].startswith("? leaves out unpriced model(s)")
    [unit] = json.loads(w.run("runs", "status", "zz", "--json").stdout)
    assert unit["cost"]["cost_source"] == "unpriced"


WRITE_SPY = """
import os, runpy, sys
seen = []
real_fsync, real_replace = os.fsync, os.replace
def fsync(fd):
    try:
        seen.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
    return real_fsync(fd)
def replace(src, dst, **kw):
    seen.append(f"replace {src} {dst}")
    return real_replace(src, dst, **kw)
os.fsync, os.replace = fsync, replace
sys.argv = ["wf", *sys.argv[1:]]
try:
    runpy.run_module("wf", run_name="__main__")
finally:
    with open(os.environ["SPY_LOG"], "w") as f:
        f.write("\\n".join(seen))
"""


def test_a_units_final_status_is_written_once_durably_with_its_contract_check(
    w: Workers, tmp_path: Path
) -> None:
    """status.json is written three times (queued, running, final); the contract check
    and the changes left in a checkout are in the final write, which is the one fsynced,
    not in a fourth write after it (issue 23, item 7)."""
    log = tmp_path / "spy.log"
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "s1", "prompt": "x", "cmd": py("print('# result\\\\nfine')")},
            {"id": "c1", "prompt": "x", "mode": "cwd", "cwd": str(w.root),
             "cmd": py("open('left.txt','w').write('x')"), "contract": False},
        ],
        adapter="cmd",
    )  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-c", WRITE_SPY, "run", str(m), "--run", "r1", "--max-parallel", "1"],
        cwd=w.root,
        env={**w.env, "SPY_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    events = log.read_text().splitlines()
    for unit in ("s1", "c1"):
        final = str(w.unit("r1", unit) / "status.json")
        writes = [i for i, e in enumerate(events) if e.startswith("replace ") and e.endswith(" " + final)]
        assert len(writes) == 3, [events[i] for i in writes]
        tmp = events[writes[-1]].split()[1]
        assert f"fsync {tmp}" in events[: writes[-1]]  # the last write is the durable one
        assert not any(f"fsync {events[i].split()[1]}" in events for i in writes[:-1])
    st = w.status("r1", "s1")
    assert isinstance(st["result"]["valid"], bool) and st["contract"]  # checked, in the final write
    c1 = w.status("r1", "c1")
    assert c1["left_changes"] == ["left.txt"] and "checkout_before" not in c1 and "result" not in c1
    # a cmd unit's session id is wf's own: in status.json, no session.txt (one file less a unit)
    assert st["session_id"] and not (w.unit("r1", "s1") / "session.txt").exists()
