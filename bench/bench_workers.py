"""Benchmark `wf`'s headless workers as whole processes: `wf run` and `wf monitor`.

In a git repository in a temporary folder, with `wf init` run in it, this script measures:

1. Supervision overhead. `wf run m.json --max-parallel 8` on N units (default 100) of the
   `cmd` adapter that each run `true` (prompt "x"), against `xargs -P 8 -I{} true` fed the
   same N lines on stdin, and `wf run` on one unit (wf's fixed cost). The cases are
   interleaved in every repetition (their order rotates), medians are reported, and the
   overhead per unit is (wf run - xargs) / N. With --what-if, three more variants run `wf`
   in a fresh interpreter with os.fsync made a no-op and/or procs.with_token and
   procs.reap_orphans stubbed out (nothing to clean up after `true`), to show what those
   parts cost. --profile adds cProfile of one `wf run` (`python -m cProfile -m wf run ...`)
   and `python -X importtime`.
2. Watching cost. `wf run` with 16 `cmd` units that each run `sleep 60` (--max-parallel 16) in
   the background, and `wf monitor RUN --timeout 70` once all 16 are running. It reports
   the CPU time (user + sys, from os.wait4) of the monitor over its whole life and its CPU %
   of wall time, the same over a steady window that leaves out start-up (from
   /proc/PID/stat and /proc/PID/schedstat), the CPU of a one-shot `wf monitor RUN --timeout 0`
   (start-up plus one pass), and the same figures for the `wf run` supervisor.

Both parts run on the machine as it is and again with --busy-procs idle `sleep` processes
added (default 400), because the supervisor's process scans (psutil ppid maps, every
/proc/PID/environ) grow with the number of processes on the machine. In part 1 every
repetition runs both states (the idle processes are started and ended around the busy
state's cases), so they are compared under the same disk and load; part 2 runs the states
one after the other.

Every process the script starts carries a marker in its environment. At the end the
script ends any marked process still alive (there should be none) and reports the count.

    .venv/bin/python bench/bench_workers.py --profile --what-if   # full run (~4 min)
    .venv/bin/python bench/bench_workers.py --quick               # smoke run (~40 s)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import pstats
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    PYTHON,
    WF,
    BenchError,
    describe_sources,
    export_rev,
    run,
    sources_digest,
    wf,
    wf_package,
)

MARK_VAR = "WF_BENCH_MARK"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Run `wf` in a fresh interpreter with parts switched off (never in this process: wf run
# installs signal handlers and makes its process a child subreaper).
WHATIF_CODE = """\
import os, sys
from wf.workers import procs
if {no_fsync!r}:
    os.fsync = lambda fd: None
if {no_scans!r}:
    procs.with_token = lambda token: []
    procs.reap_orphans = lambda: None
from wf.cli import main
sys.exit(main(sys.argv[1:]))
"""


# ---------------------------------------------------------------- running


def timed(argv: Sequence[str], cwd: Path, stdin: bytes | None = None) -> tuple[float, float]:
    """Wall time and CPU time (user + sys of the process and the children it waited for,
    from getrusage(RUSAGE_CHILDREN)) of one whole process, in milliseconds. Only one
    child is reaped meanwhile: the idle processes of the busy state are reaped later."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(list(argv), cwd=cwd, capture_output=True, input=stdin)
    ms = (time.perf_counter() - t0) * 1000.0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        out = (p.stdout + p.stderr).decode("utf-8", "replace")[-2000:]
        raise BenchError(f"{' '.join(argv)} exited {p.returncode}:\n{out}")
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000.0
    return ms, cpu


def wf_whatif(no_fsync: bool, no_scans: bool, *args: str) -> list[str]:
    code = WHATIF_CODE.format(no_fsync=no_fsync, no_scans=no_scans)
    return [str(PYTHON), "-c", code, *args]


def make_repo(parent: Path) -> Path:
    repo = parent / "repo"
    repo.mkdir()
    run(["git", "init", "-q"], repo)
    run(wf("init"), repo)
    return repo


def write_manifest(path: Path, n: int, cmd: list[str], prefix: str = "u") -> Path:
    units = [{"id": f"{prefix}{i:03d}", "prompt": "x", "cmd": cmd} for i in range(n)]
    path.write_text(json.dumps({"defaults": {"adapter": "cmd"}, "units": units}), "utf-8")
    return path


def runs_dir(repo: Path) -> Path:
    return repo / ".wf" / "runs"


def statuses(repo: Path, run_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    folder = runs_dir(repo) / run_id
    if not folder.is_dir():
        return out
    for d in sorted(folder.iterdir()):
        try:
            out.append(json.loads((d / "status.json").read_text("utf-8")))
        except (OSError, ValueError):
            continue
    return out


# ---------------------------------------------------------------- processes and CPU


def process_count() -> int:
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def marked_pids(mark: str) -> list[int]:
    """Live processes (not this one) whose environment carries our marker."""
    needle = f"{MARK_VAR}={mark}".encode()
    me = os.getpid()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(d))
    return found


def sweep(mark: str) -> int:
    """SIGKILL every marked process still alive; return how many there were."""
    pids = marked_pids(mark)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


class BusyProcs:
    """``n`` idle `sleep 3600` processes, so the machine has as many processes as a
    developer's desktop; ended by ``stop``."""

    def __init__(self, n: int) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(n):
                self.procs.append(
                    subprocess.Popen(
                        ["sleep", "3600"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


@dataclass
class Cpu:
    user: float  # seconds
    sys: float
    total: float  # seconds on CPU (schedstat, ns precision; else user + sys)


def proc_cpu(pid: int) -> Cpu | None:
    """The CPU a live process has used so far (its own, not its children's)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    user, sys_ = int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK
    total = user + sys_
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            ns = int(f.read().split()[0])
        if ns > 0:
            total = ns / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return Cpu(user, sys_, total)


@dataclass
class Ended:
    code: int
    user: float
    sys: float
    wall: float

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def wait_rusage(p: subprocess.Popen[bytes], started: float, timeout: float) -> Ended:
    """Reap ``p`` with os.wait4 and return its exit code and CPU (its own plus that of the
    children it waited for)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            code = os.waitstatus_to_exitcode(status)
            p.returncode = code
            return Ended(code, ru.ru_utime, ru.ru_stime, time.monotonic() - started)
        if time.monotonic() >= deadline:
            raise BenchError(f"{p.args!r} still running after {timeout:.0f} s")
        time.sleep(0.02)


def stop_process(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM (wf run then stops its units' trees), then SIGKILL."""
    if p.returncode is not None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# ---------------------------------------------------------------- 1. overhead


@dataclass
class Case:
    key: str
    name: str
    argv: Callable[[str], list[str]]  # run id -> command line
    stdin: bytes | None = None
    uses_run: bool = True
    times: list[float] = field(default_factory=list)  # wall ms, one per repetition
    cpus: list[float] = field(default_factory=list)  # CPU ms, one per repetition

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)

    def spread(self) -> str:
        return f"{min(self.times):.0f}-{max(self.times):.0f}"


def paired(a: list[float], b: list[float], per: int = 1) -> float:
    """Median over repetitions of (a - b) / per: the pairs ran in the same repetition."""
    return statistics.median((x - y) / per for x, y in zip(a, b, strict=True))


def overhead_cases(tmp: Path, n: int, parallel: int, what_if: bool) -> list[Case]:
    many = write_manifest(tmp / f"m{n}.json", n, ["true"])
    one = write_manifest(tmp / "m1.json", 1, ["true"])
    par = str(parallel)
    lines = "".join(f"{i}\n" for i in range(1, n + 1)).encode()
    cases = [
        Case(
            "wf",
            f"wf run m.json --max-parallel {par} ({n} units)",
            lambda r: wf("run", str(many), "--max-parallel", par, "--run", r),
        ),
        Case(
            "xargs",
            f"xargs -P {par} -I{{}} true ({n} lines on stdin)",
            lambda r: ["xargs", "-P", par, "-I{}", "true"],
            lines,
            uses_run=False,
        ),
        Case(
            "wf1",
            "wf run m.json (1 unit)",
            lambda r: wf("run", str(one), "--max-parallel", par, "--run", r),
        ),
    ]

    def variant(no_fsync: bool, no_scans: bool) -> Callable[[str], list[str]]:
        return lambda r: wf_whatif(no_fsync, no_scans, "run", str(many), "--max-parallel", par, "--run", r)

    if what_if:
        for key, name, nf, ns in (
            ("nofsync", "os.fsync a no-op", True, False),
            ("noscan", "with_token and reap_orphans stubbed", False, True),
            ("neither", "both", True, True),
        ):
            cases.append(Case(key, f"wf run ({n} units), {name}", variant(nf, ns)))
        # The same wrapper with nothing switched off: what the wrapper itself costs.
        cases.append(Case("wrapped", f"wf run ({n} units), wrapper only", variant(False, False)))
    return cases


@dataclass
class State:
    """The machine as it is, or with ``extra`` idle processes added."""

    label: str
    extra: int
    cases: list[Case]
    procs: int = 0


def bench_overhead(repo: Path, states: list[State], n: int, reps: int, warmup: int) -> None:
    """Every repetition runs every case in every state (busy processes started and ended
    around the state's cases), so the states are compared under the same disk and load."""
    for i in range(warmup + reps):
        for state in states if i % 2 == 0 else states[::-1]:
            busy = BusyProcs(state.extra) if state.extra else None
            try:
                state.procs = max(state.procs, process_count())
                cases = state.cases
                order = cases[i % len(cases) :] + cases[: i % len(cases)]  # nobody always first
                for c in order:
                    run_id = f"{state.label.replace(' ', '')}-{c.key}-{i}"
                    t, cpu = timed(c.argv(run_id), repo, c.stdin)
                    if c.uses_run:
                        st = statuses(repo, run_id)
                        want = n if c.key != "wf1" else 1
                        if len(st) != want or any(s.get("state") != "done" for s in st):
                            raise BenchError(f"run {run_id}: expected {want} done units, got {len(st)}")
                        shutil.rmtree(runs_dir(repo) / run_id)  # untimed: .wf/runs stays the same
                    if i >= warmup:
                        c.times.append(t)
                        c.cpus.append(cpu)
            finally:
                if busy is not None:
                    busy.stop()


# ---------------------------------------------------------------- 2. watching


@dataclass
class Watch:
    label: str
    procs: int
    monitor: Ended
    supervisor: Ended
    window: float  # seconds of the steady window
    mon_window: Cpu
    sup_window: Cpu
    oneshot: list[float]  # CPU seconds of `wf monitor RUN --timeout 0`


def bench_watch(repo: Path, tmp: Path, units: int, sleep_s: int, label: str, oneshots: int) -> Watch:
    key = label.replace(" ", "")
    manifest = write_manifest(tmp / f"sleep-{key}.json", units, ["sleep", str(sleep_s)], prefix="s")
    run_id = f"watch-{key}"
    warm = 2.0 if sleep_s < 30 else 3.0
    log = open(tmp / f"{run_id}.out", "wb")  # noqa: SIM115 - closed in finally
    started = time.monotonic()
    sup = subprocess.Popen(
        wf("run", str(manifest), "--max-parallel", str(units), "--run", run_id),
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    mon: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 30
        while True:
            st = statuses(repo, run_id)
            if len(st) == units and all(s.get("state") == "running" for s in st):
                break
            if sup.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"wf run {run_id} did not get {units} units running: {st[:2]}")
            time.sleep(0.05)
        all_running = time.monotonic()
        mon_started = time.monotonic()
        mon = subprocess.Popen(
            wf("monitor", run_id, "--timeout", str(sleep_s + 10)),
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        time.sleep(warm)
        a = (time.monotonic(), proc_cpu(mon.pid), proc_cpu(sup.pid))
        time.sleep(max(0.5, all_running + sleep_s - warm - time.monotonic()))
        b = (time.monotonic(), proc_cpu(mon.pid), proc_cpu(sup.pid))
        m_end = wait_rusage(mon, mon_started, sleep_s + 30)
        s_end = wait_rusage(sup, started, 60)
        if m_end.code != 0 or s_end.code != 0:
            raise BenchError(f"{run_id}: wf monitor exited {m_end.code}, wf run exited {s_end.code}")
        if None in (a[1], a[2], b[1], b[2]):
            raise BenchError(f"{run_id}: a process ended before the end of the steady window")
        st = statuses(repo, run_id)
        if len(st) != units or any(s.get("state") != "done" for s in st):
            raise BenchError(f"{run_id}: not all {units} units done")
        oneshot = []
        for _ in range(oneshots):
            t0 = time.monotonic()
            p = subprocess.Popen(
                wf("monitor", run_id, "--timeout", "0"),
                cwd=repo,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            e = wait_rusage(p, t0, 60)
            if e.code != 0:
                raise BenchError(f"wf monitor {run_id} --timeout 0 exited {e.code}")
            oneshot.append(e.cpu)

        def diff(x: Cpu | None, y: Cpu | None) -> Cpu:
            assert x is not None and y is not None
            return Cpu(y.user - x.user, y.sys - x.sys, y.total - x.total)

        return Watch(
            label,
            process_count(),
            m_end,
            s_end,
            b[0] - a[0],
            diff(a[1], b[1]),
            diff(a[2], b[2]),
            oneshot,
        )
    finally:
        for proc in (mon, sup):
            if proc is not None:
                stop_process(proc)
        log.close()


# ---------------------------------------------------------------- profile

# (file suffix, function) -> label, for the grouped view of the profile.
HOT = (
    ("wf/workers/supervise.py", "supervise", "supervise() in all"),
    ("wf/workers/supervise.py", "queue", "Unit.queue: prompt.txt, session.txt, status.json"),
    ("wf/workers/supervise.py", "start", "Unit.start: Popen, stdin thread, status.json"),
    ("wf/workers/supervise.py", "_finish", "Unit._finish"),
    ("wf/workers/supervise.py", "tool_version", "tool_version"),
    ("wf/workers/procs.py", "kill_tree", "procs.kill_tree (in _finish)"),
    ("wf/workers/procs.py", "with_token", "procs.with_token: every /proc/PID/environ"),
    ("wf/workers/procs.py", "reap_orphans", "procs.reap_orphans: psutil children (ppid map)"),
    ("wf/workers/runs.py", "write_status", "runs.write_status (status.json)"),
    ("wf/base/fsutil.py", "atomic_write", "fsutil.atomic_write (all run-folder files)"),
    ("~", "<built-in method posix.fsync>", "os.fsync (file + folder)"),
    ("subprocess.py", "_execute_child", "subprocess fork/exec"),
    ("threading.py", "start", "threading.Thread.start (stdin feeder)"),
    ("~", "<built-in method time.sleep>", "time.sleep"),
)


def profile_run(repo: Path, tmp: Path, manifest: Path, n: int, parallel: int) -> list[str]:
    out_prof = tmp / "wf-run.prof"
    argv = [str(PYTHON), "-m", "cProfile", "-o", str(out_prof), "-m", "wf", "run", str(manifest)]
    run([*argv, "--max-parallel", str(parallel), "--run", "profiled"], repo)
    shutil.rmtree(runs_dir(repo) / "profiled")
    st = pstats.Stats(str(out_prof))
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = st.stats  # type: ignore[attr-defined]
    total = st.total_tt  # type: ignore[attr-defined]
    lines = [
        f"cProfile of `wf run` ({n} units of `true`, --max-parallel {parallel}); "
        f"{total * 1000:.0f} ms under the profiler in all.",
        "",
        "| function | calls | cumulative ms | per unit ms | share |",
        "|---|---:|---:|---:|---:|",
    ]
    for suffix, func, label in HOT:
        calls, cum = 0, 0.0
        for (fname, _line, name), (_cc, nc, tt, ct, _callers) in raw.items():
            if name == func and (fname == suffix if suffix == "~" else fname.endswith(suffix)):
                calls += nc
                cum += tt if suffix == "~" else ct
        if calls:
            lines.append(
                f"| {label} | {calls:,} | {cum * 1000:.1f} | {cum * 1000 / n:.2f} | {cum / total:.0%} |"
            )
    text = io.StringIO()
    pstats.Stats(str(out_prof), stream=text).sort_stats("tottime").print_stats(15)
    body = text.getvalue()
    start = body.find("   ncalls")
    lines += ["", "Top 15 by own time:", "", "```", body[start:].rstrip(), "```"]
    return lines


def import_times(repo: Path, manifest: Path, top: int = 10) -> list[str]:
    p = run([str(PYTHON), "-X", "importtime", "-m", "wf", "run", str(manifest), "--run", "importtime"], repo)
    shutil.rmtree(runs_dir(repo) / "importtime")
    rows: list[tuple[int, int, str]] = []
    total = 0
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:") :].split("|")
        self_us, cum_us, name = int(parts[0]), int(parts[1]), parts[2]
        if not name.startswith("  "):
            total += cum_us
        rows.append((cum_us, self_us, name.strip()))
    rows.sort(reverse=True)
    out = [
        f"`python -X importtime -m wf run m1.json` (1 unit): {total / 1000:.1f} ms of imports; "
        "top cumulative:",
        "",
        "| module | cumulative ms | self ms |",
        "|---|---:|---:|",
    ]
    out += [f"| {name} | {cum / 1000:.1f} | {s / 1000:.1f} |" for cum, s, name in rows[:top]]
    return out


# ---------------------------------------------------------------- sources / machine


def machine(tmp: Path) -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    fs = run(["df", "-T", str(tmp)], tmp, check=False).stdout.splitlines()
    fstype = fs[1].split()[1] if len(fs) > 1 and len(fs[1].split()) > 1 else "?"
    return (
        f"nproc {os.cpu_count()} ({cpu}), Python {platform.python_version()} ({PYTHON}), "
        f"{platform.system()} {platform.release()} {platform.machine()}, temp folder on {fstype}"
    )


# ---------------------------------------------------------------- report


def overhead_table(states: list[State], n: int) -> list[str]:
    out = [
        "| processes on the machine | command | wall ms, median | wall ms, min-max | CPU ms, median |",
        "|---|---|---:|---:|---:|",
    ]
    for state in states:
        for key in ("wf", "xargs", "wf1"):
            one = next(x for x in state.cases if x.key == key)
            where = f"{state.label} (~{state.procs})"
            out.append(f"| {where} | `{one.name}` | {one.median:.0f} | {one.spread()} | {one.cpu:.0f} |")
    out += [
        "",
        f"| processes on the machine | overhead per unit, wall ms: (wf - xargs) / {n} | "
        f"same, CPU ms | fixed cost: `wf run` of 1 unit, wall ms | "
        f"marginal per unit, wall ms: (wf {n} - wf 1) / {n - 1} |",
        "|---|---:|---:|---:|---:|",
    ]
    for state in states:
        c = {x.key: x for x in state.cases}
        wf_n, xa, wf1 = c["wf"], c["xargs"], c["wf1"]
        out.append(
            f"| {state.label} (~{state.procs}) | **{paired(wf_n.times, xa.times, n):.2f}** | "
            f"{paired(wf_n.cpus, xa.cpus, n):.2f} | {wf1.median:.0f} | "
            f"{paired(wf_n.times, wf1.times, n - 1):.2f} |"
        )
    return out


def whatif_table(cases: list[Case], n: int) -> list[str]:
    c = {x.key: x for x in cases}
    base = c["wrapped"]
    out = [
        f"| variant ({n} units) | wall ms, median | wall ms, min-max | CPU ms, median | "
        "saved per unit vs wrapper only, wall ms | same, CPU ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in ("wf", "wrapped", "nofsync", "noscan", "neither"):
        x = c[key]
        out.append(
            f"| {x.name} | {x.median:.0f} | {x.spread()} | {x.cpu:.0f} | "
            f"{paired(base.times, x.times, n):.2f} | {paired(base.cpus, x.cpus, n):.2f} |"
        )
    return out


def watch_table(watches: list[Watch], sleep_s: int, units: int) -> list[str]:
    out = [
        "| processes on the machine | process | wall s | CPU s (user + sys) | CPU % of wall | "
        "steady window s | steady CPU ms | steady CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for w in watches:
        for name, e, win in (
            (f"`wf monitor RUN --timeout {sleep_s + 10}`", w.monitor, w.mon_window),
            (f"`wf run` supervisor ({units} x `sleep {sleep_s}`)", w.supervisor, w.sup_window),
        ):
            out.append(
                f"| {w.label} (~{w.procs}) | {name} | {e.wall:.1f} | {e.cpu:.3f} "
                f"({e.user:.3f} + {e.sys:.3f}) | {100 * e.cpu / e.wall:.2f} | {w.window:.1f} | "
                f"{win.total * 1000:.0f} | **{100 * win.total / w.window:.2f}** |"
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20 units, 10 s sleeps, 3 reps: a smoke run")
    ap.add_argument("--units", type=int, help="units of `true` in part 1 (default 100, --quick 20)")
    ap.add_argument("--parallel", type=int, default=8, help="--max-parallel and xargs -P in part 1")
    ap.add_argument("--reps", type=int, help="timed repetitions in part 1 (default 9, --quick 3)")
    ap.add_argument("--watch-units", type=int, default=16, help="`sleep` units in part 2 (default 16)")
    ap.add_argument("--sleep", type=int, help="seconds each part-2 unit sleeps (default 60, --quick 10)")
    ap.add_argument(
        "--busy-procs",
        type=int,
        help="idle processes added for the busy pass (default 400, --quick 100; 0: skip)",
    )
    ap.add_argument("--what-if", action="store_true", help="time wf with fsync / process scans switched off")
    ap.add_argument("--profile", action="store_true", help="cProfile and -X importtime of `wf run`")
    ap.add_argument(
        "--as-is-env",
        action="store_true",
        help="keep the inherited environment (by default PYTHONDONTWRITEBYTECODE is dropped and "
        "PYTHONPYCACHEPREFIX points into the temp folder, so wf runs from cached bytecode)",
    )
    ap.add_argument("--rev", metavar="REV", help="benchmark wf as committed at REV (git archive)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args(argv)
    n = args.units or (20 if args.quick else 100)
    reps = args.reps or (3 if args.quick else 9)
    warmup = 1
    sleep_s = args.sleep or (10 if args.quick else 60)
    busy_n = args.busy_procs if args.busy_procs is not None else (100 if args.quick else 400)
    if n < 2 or reps < 1 or sleep_s < 6 or args.watch_units < 1:
        ap.error("need --units >= 2, --reps >= 1, --sleep >= 6, --watch-units >= 1")
    for exe in (PYTHON, WF):
        if not exe.exists():
            print(f"bench: {exe} not found; create the venv first", file=sys.stderr)
            return 2
    if shutil.which("xargs") is None or not Path("/proc/self/environ").exists():
        print("bench: needs xargs and a Linux /proc", file=sys.stderr)
        return 2

    mark = uuid.uuid4().hex
    os.environ[MARK_VAR] = mark  # every process started from here on carries it
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-workers-"))
    if not args.as_is_env:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    busy: BusyProcs | None = None
    try:
        if args.rev:
            sha = export_rev(args.rev, tmp / "src")
            os.environ["PYTHONPATH"] = os.pathsep.join(
                x for x in (str(tmp / "src"), os.environ.get("PYTHONPATH")) if x
            )
            print(f"# code: wf as committed at {sha} (git archive)")
        pkg = wf_package(tmp)
        digest = sources_digest(pkg)
        print(f"# wf package: {describe_sources(pkg)}")
        print(f"# machine: {machine(tmp)}")
        print(
            f"# part 1: {n} units of `true`, --max-parallel {args.parallel}, {reps} timed reps "
            f"(+{warmup} warm-up), medians; part 2: {args.watch_units} units of `sleep {sleep_s}`; "
            f"busy pass: +{busy_n} idle processes",
            flush=True,
        )
        repo = make_repo(tmp)
        states = [State("as is", 0, overhead_cases(tmp, n, args.parallel, args.what_if))]
        if busy_n > 0:
            states.append(State("busy", busy_n, overhead_cases(tmp, n, args.parallel, args.what_if)))
        t0 = time.perf_counter()
        bench_overhead(repo, states, n, reps, warmup)
        print(f"# part 1 done in {time.perf_counter() - t0:.0f} s", flush=True)
        watches: list[Watch] = []
        for state in states:
            if state.extra:
                busy = BusyProcs(state.extra)
            t0 = time.perf_counter()
            oneshots = 3 if args.quick else 5
            watches.append(bench_watch(repo, tmp, args.watch_units, sleep_s, state.label, oneshots))
            print(f"# part 2 ({state.label}) done in {time.perf_counter() - t0:.0f} s", flush=True)
            if busy is not None:
                busy.stop()
                busy = None

        print()
        print(f"## 1. `wf run`: {n} units of `true` against `xargs -P {args.parallel}` (medians, ms)")
        print()
        print("\n".join(overhead_table(states, n)))
        for state in states if args.what_if else []:
            print()
            print(
                f"What-if, {state.label} (~{state.procs} processes); same repetitions as above, "
                "wf started through `python -c` in every variant but the first; savings are "
                "medians of the differences within each repetition:"
            )
            print()
            print("\n".join(whatif_table(state.cases, n)))
        print()
        print(f"## 2. CPU while {args.watch_units} units run `sleep {sleep_s}`")
        print()
        print("\n".join(watch_table(watches, sleep_s, args.watch_units)))
        print()
        for w in watches:
            print(
                f"- {w.label}: one-shot `wf monitor RUN --timeout 0` (start-up + one pass): median "
                f"{statistics.median(w.oneshot) * 1000:.0f} ms CPU over {len(w.oneshot)} runs; "
                f"monitor steady user/sys {w.mon_window.user * 1000:.0f}/{w.mon_window.sys * 1000:.0f} ms, "
                f"supervisor steady user/sys {w.sup_window.user * 1000:.0f}/"
                f"{w.sup_window.sys * 1000:.0f} ms (clock ticks)"
            )
        if args.profile:
            print()
            print("## Profile")
            print()
            many = write_manifest(tmp / "mprof.json", n, ["true"])
            print("\n".join(profile_run(repo, tmp, many, n, args.parallel)))
            print()
            print("\n".join(import_times(repo, tmp / "m1.json")))
        if sources_digest(pkg) != digest:
            print(f"\n# WARNING: {pkg} changed during the run; the numbers mix two versions of wf")
        return 0
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        if busy is not None:
            busy.stop()
        leftovers = sweep(mark)
        print(f"\n# leftover processes from this benchmark (ended now): {leftovers}")
        if args.keep:
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
