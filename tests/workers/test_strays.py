"""Issue 26, item 8: a unit's whole tree, including a descendant that detached (setsid,
reparented to the supervisor) and cleared its environment (``env -i``: no token), is
ended when its supervisor is gone, by whichever command notices first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import WfRunner
from tests.orch.test_orch import Orch, lane_worker_pid, task
from tests.workers.test_workers import Workers, manifest, w  # noqa: F401 - the fixture
from wf.workers.procs import alive

# a worker that starts a grandchild which detaches (setsid forks: the grandchild is
# reparented to the supervisor) with an empty environment, then goes quiet: it stalls
ESCAPES = (
    "import subprocess, sys, time; "
    "subprocess.run(['setsid', '-f', 'env', '-i', 'sh', '-c', 'echo $$ > {pidfile}; exec sleep 300']); "
    "print('started', flush=True); time.sleep(300)"
)


def _wait(pred: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_detached_env_cleared_grandchild_of_a_stalled_unit_ends_once_wf_run_is_killed(
    w: Workers,
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "escaped.pid"
    script = ESCAPES.format(pidfile=pidfile)
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "quiet", "prompt": "x", "cmd": [sys.executable, "-c", script], "stall": 1},
            {"id": "long", "prompt": "x", "cmd": [sys.executable, "-c", "import time; time.sleep(300)"]},
        ],
        adapter="cmd",
    )
    p = w.start("run", str(m), "--run", "k9")
    try:
        _wait(lambda: pidfile.exists() and pidfile.read_text().strip(), "the grandchild never started")
        escaped = int(pidfile.read_text())
        st = w.unit("k9", "quiet") / "status.json"
        _wait(lambda: st.exists() and json.loads(st.read_text())["state"] == "stalled", "quiet never stalled")
        assert alive(escaped)  # the unit ended; its escaped grandchild did not (no token, not in its tree)
        r = w.run("runs", "status", "k9")  # while wf run lives, what it adopted is its own to end
        assert alive(escaped), r.stdout
        os.kill(p.pid, signal.SIGKILL)  # wf run: nothing of it finishes the job now
        p.wait(timeout=30)
        r = w.run("runs", "status", "k9")  # the first command to look at the run
        assert r.returncode in (0, 4), r.stdout + r.stderr
        _wait(lambda: not alive(escaped), f"the escaped grandchild {escaped} survived", timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if pidfile.exists() and pidfile.read_text().strip() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_wf_orch_run_ends_what_a_killed_run_adopted_from_its_worker(wf: WfRunner, tmp_path: Path) -> None:
    """The loop is a supervisor too: kill -9 of ``wf orch run`` while its worker's
    detached, environment-cleared grandchild lives; the next run, taking the lane over,
    ends that grandchild with the worker."""
    o = Orch(wf)
    pidfile = tmp_path / "escaped.pid"
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import subprocess, sys, time\n"
        "prompt = sys.stdin.read()\n"
        "if 'Recovery:' in prompt:\n"
        "    sys.exit(subprocess.run([sys.executable, '-m', 'wf.scripted'], input=prompt, text=True).returncode)\n"
        + f"exec({ESCAPES.format(pidfile=pidfile)!r})\n"
    )
    cmd = json.dumps([sys.executable, str(worker)])
    o.setup(f'[lanes.a]\nmodel = "ma"\nadapter = "cmd"\ncmd = {cmd}\n', task("a1", "a", "write a1.txt x"))
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", "orch", "run"], cwd=o.root, env=o.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    escaped = 0
    try:
        _wait(lambda: pidfile.exists() and pidfile.read_text().strip(), "the grandchild never started")
        escaped = int(pidfile.read_text())
        lane_worker_pid(o.root, "a")  # the record names the worker's unit
        rec = json.loads((o.root / ".wf" / "orch" / "a.json").read_text())
        folder = o.root / ".wf" / "runs" / rec["run"] / rec["unit"]
        _wait(lambda: json.loads((folder / "status.json").read_text()).get("strays"), "never noted")
        os.killpg(p.pid, signal.SIGKILL)  # the loop and its worker (its own session): not the grandchild
        p.wait(timeout=30)
        assert alive(escaped)
        r = o.proc("orch", "run")  # takes the lane over: recovers a1 in place
        assert r.returncode == 0, r.stdout + r.stderr
        assert not alive(escaped), "the escaped grandchild survived the take-over"
        assert o.archived() == ["a1"]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if escaped and alive(escaped):
            os.kill(escaped, signal.SIGKILL)
