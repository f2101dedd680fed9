"""What `wf top` costs while it watches: the CPU share of one core it takes, refreshing
on a terminal (a pty), on a project of N tasks with lanes at work.

Method: a generated repository (bench_tasks.make_repo) with three lanes picked (`wf orch
pick`, so their records and trees exist); `wf top --interval S` runs in a pty for D
seconds, then gets `q`; its CPU (user + system, from wait4) less the CPU of a one-shot
`wf top --once` in the same run (its start-up: imports, the first read) is what the
watching cost, divided by D. A second pass edits TASKS.md every 10 s (each edit makes top
read the backlog again). The goal (issue 25): under 1% of a core.

    .venv/bin/python bench/bench_top.py [--tasks 10000] [--seconds 30] [--interval 1]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, run, wf
from bench_tasks import make_repo

LANES = ("sonnet", "haiku", "opus")


def cpu_of(
    argv: list[str], cwd: Path, seconds: float, touch_every: float | None = None
) -> tuple[float, bytes]:
    """Run ``argv`` on a pty for ``seconds`` (then `q`); its CPU seconds and its output."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execve(argv[0], argv, {**os.environ, "TERM": "xterm", "LINES": "40", "COLUMNS": "120"})
    out = b""
    start = time.monotonic()
    next_touch = start + touch_every if touch_every else None
    while time.monotonic() - start < seconds:
        if next_touch is not None and time.monotonic() >= next_touch:
            tasks = cwd / "TASKS.md"
            tasks.write_text(tasks.read_text("utf-8") + "\n", "utf-8")
            next_touch += touch_every or 0
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    os.write(fd, b"q")
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status, usage = os.wait4(pid, 0)
    os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} exited {status}:\n{out[-2000:]!r}")
    return usage.ru_utime + usage.ru_stime, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wf-bench-top-") as tmp:
        repo, _ready, _ = make_repo(Path(tmp), args.tasks, 1)
        run(["git", "add", "-A"], repo)
        run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "tasks"], repo)
        for lane in LANES:
            run(wf("orch", "pick", lane), repo)
        once, shown = cpu_of([str(PYTHON), "-m", "wf", "top", "--once"], repo, 0)
        lanes = sum(shown.decode("utf-8", "replace").count(f"\n{lane} ") for lane in LANES)
        rows = [f"`wf top --once` (start-up and one read): {once * 1000:.0f} ms CPU; lanes shown: {lanes}"]
        for label, touch in (("idle", None), ("TASKS.md edited every 10 s", 10.0)):
            argv = [str(PYTHON), "-m", "wf", "top", "--interval", str(args.interval)]
            cpu, _ = cpu_of(argv, repo, args.seconds, touch)
            share = max(cpu - once, 0.0) / args.seconds * 100
            rows.append(
                f"{label}: {cpu * 1000:.0f} ms CPU in {args.seconds:g} s at --interval {args.interval:g}; "
                f"watching: {share:.2f}% of a core (goal < 1%)"
            )
    print(f"tasks: {args.tasks}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
