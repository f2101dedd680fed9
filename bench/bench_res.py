"""The watchdog's own CPU while it supervises a 16-process tree (``wf res run``).

Starts ``wf res run --mem 4G --for <S+30>s -- python TREE`` where TREE starts 15 children
that each hold 20 MB and sleep (16 processes in all), reads the supervisor's own
utime + stime from /proc at the start and the end of a window of S seconds (after its
start-up, so Python's imports do not count), and reports the share of one core.
Goal: under 1% of a core.

    .venv/bin/python bench/bench_res.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import PYTHON, ROOT

TREE = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "b = bytearray(20 << 20); import time; time.sleep(3600)"])
        for _ in range(15)]
time.sleep(3600)
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_size(pid: int) -> int:
    seen = [pid]
    for p in seen:
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    seen.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return len(seen)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree.py"
        tree.write_text(TREE)
        env = dict(os.environ, XDG_STATE_HOME=str(Path(tmp) / "state"), PYTHONPATH=str(ROOT))
        p = subprocess.Popen(
            [str(PYTHON), "-m", "wf", "res", "run", "--mem", "4G", "--for", f"{args.seconds + 30:.0f}s",
             "--title", "bench", "--", sys.executable, str(tree)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while tree_size(p.pid) < 17 and time.monotonic() < deadline:  # wf + 16
            time.sleep(0.2)
        processes = tree_size(p.pid) - 1
        time.sleep(2)  # past start-up
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(p.pid), time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    share = (c1 - c0) / (t1 - t0) * 100
    print(f"supervised tree: {processes} processes; window {t1 - t0:.1f} s")
    print(f"watchdog CPU: {c1 - c0:.3f} s = {share:.3f}% of one core (goal < 1%)")
    return 0 if share < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
