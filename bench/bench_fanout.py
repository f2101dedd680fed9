"""wf's own cost per fan-out unit: `wf run M --max-parallel 8` on N `cmd` units that run
`true` (mode scratch, the default: a run folder and an empty scratch/ per unit, the
unit's whole tree ended and checked when it ends), against `xargs -P 8 -n 1 true` over
the same N items, in the same repetitions (the order alternates), for N = 100 and 1,000.

wf's CPU per unit is the CPU of wf's whole process tree beyond its units' commands:

- the wf process's rusage from ``os.wait4`` is its own user + sys plus that of every
  child it waited for (its units' `true` processes, and any orphan it reaped as a
  subreaper), so it is wf plus its units;
- the units' own CPU is measured in the same repetition: the benchmark itself starts N
  `true` processes (``os.posix_spawn``, 8 at a time) and sums each one's ``wait4``
  rusage. That is what N `true` commands cost however they are started; whatever wf's
  forked child does before its exec (closing descriptors, setsid) counts as wf's.
- wf's CPU = wf's tree − the N `true`s; per unit = that / N ("all in": wf's start-up,
  ~0.1 s, included) and, with ``wf run`` of 1 unit timed alongside, the marginal cost
  (wf_N − wf_1 − (N − 1) `true`s) / (N − 1).

The wall ratio is wf's median wall time over xargs' median wall time for the same N.
``--rev REV`` adds wf as committed at REV (exported with ``git archive``, put first on
PYTHONPATH) as a baseline in the same repetitions. Both wf versions run as ``python -m
wf`` from bytecode cached under the temporary folder.

    .venv/bin/python bench/bench_fanout.py --rev main --reps 7
    .venv/bin/python bench/bench_fanout.py --units 100 --reps 3            # quick
    .venv/bin/python bench/bench_fanout.py --units 1000 --profile prof.out # cProfile of one wf run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import PYTHON, ROOT, BenchError, describe_sources, export_rev

TRUE = shutil.which("true") or "/bin/true"
# cProfile of one wf command with CPU time (time.process_time: every thread of the
# process) as its clock, not wall time: on a shared machine wall time is mostly waiting
PROFILE = """
import cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = ["wf", *sys.argv[2:]]
pr = cProfile.Profile(time.process_time)
pr.enable()
try:
    runpy.run_module("wf", run_name="__main__")
except SystemExit:
    pass
finally:
    pr.disable()
    pr.dump_stats(out)
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> tuple[float, float]:
    """Wall and CPU ms (user + sys of the process and every child it waited for)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)  # fmt: skip
    assert p.stdin is not None and p.stderr is not None
    if stdin:
        p.stdin.write(stdin)  # at most a few KB: within the pipe's buffer
    p.stdin.close()
    err = p.stderr.read()
    p.stderr.close()
    _, status, usage = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1000.0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise BenchError(f"{' '.join(argv)} exited {code}:\n{err.decode('utf-8', 'replace')[-2000:]}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000.0


def trues_cpu(n: int, parallel: int) -> float:
    """CPU ms of ``n`` `true` processes themselves (each one's wait4 rusage), ``parallel``
    at a time."""
    total = 0.0
    live = 0
    for _ in range(n):
        if live >= parallel:
            _pid, _st, ru = os.wait4(-1, 0)
            total += ru.ru_utime + ru.ru_stime
            live -= 1
        os.posix_spawn(TRUE, [TRUE], os.environ)
        live += 1
    while live:
        _pid, _st, ru = os.wait4(-1, 0)
        total += ru.ru_utime + ru.ru_stime
        live -= 1
    return total * 1000.0


def make_repo(tmp: Path, env: dict[str, str], sizes: list[int]) -> tuple[Path, dict[int, Path]]:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([str(PYTHON), "-m", "wf", "init"], cwd=repo, env={**env, "PYTHONPATH": str(ROOT)},
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b.invalid", "commit", "-qm", "init"],
                   cwd=repo, check=True)  # fmt: skip
    manifests = {}
    for n in sorted({1, *sizes}):
        units = [{"id": f"u{i}", "prompt": "x", "cmd": [TRUE]} for i in range(n)]
        m = tmp / f"m{n}.json"
        m.write_text(json.dumps({"defaults": {"adapter": "cmd"}, "units": units}))
        manifests[n] = m
    return repo, manifests


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", metavar="REV", help="also time wf as committed at REV (the baseline)")
    ap.add_argument("--units", default="100,1000", help="comma-separated unit counts (default 100,1000)")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (plus one warm-up)")
    ap.add_argument("--profile", metavar="FILE", help="instead: cProfile (CPU time) one wf run into FILE")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.units.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-fanout-"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        trees = {"wf (work tree)": str(ROOT)}
        if args.rev:
            sha = export_rev(args.rev, tmp / "base")
            trees = {f"wf at {sha[:7]} ({args.rev})": str(tmp / "base"), **trees}
        repo, manifests = make_repo(tmp, env, sizes)
        if args.profile:
            run = [str(PYTHON), "-c", PROFILE, os.path.abspath(args.profile), "run"]
            run += [str(manifests[sizes[0]]), "--run", "prof", "--max-parallel", str(args.parallel)]
            print(timed(run, repo, {**env, "PYTHONPATH": str(ROOT)}))
            return 0
        return measure(args, sizes, trees, repo, manifests, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(
    args: argparse.Namespace,
    sizes: list[int],
    trees: dict[str, str],
    repo: Path,
    manifests: dict[int, Path],
    env: dict[str, str],
) -> int:
    xargs = f"xargs -P {args.parallel} -n 1 true"
    # (case, n) -> [(wall, cpu)]; "true" -> the units' own CPU of that n, per repetition
    res: dict[tuple[str, int], list[tuple[float, float]]] = {}
    trues: dict[int, list[float]] = {n: [] for n in sizes}
    cases = [xargs, *trees]
    loads = []
    k = 0
    for rep in range(args.reps + 1):  # the first is a warm-up
        loads.append(os.getloadavg()[0])
        for n in sizes:
            order = cases if (rep + n) % 2 == 0 else cases[::-1]
            got: dict[tuple[str, int], tuple[float, float]] = {}
            for case in order:
                if case == xargs:
                    items = "".join(f"{i}\n" for i in range(n)).encode()
                    argv = ["xargs", "-P", str(args.parallel), "-n", "1", TRUE]
                    got[case, n] = timed(argv, repo, env, items)
                    continue
                for m in (n, 1):
                    k += 1
                    argv = [str(PYTHON), "-m", "wf", "run", str(manifests[m]), "--run", f"r{k}"]
                    argv += ["--max-parallel", str(args.parallel)]
                    got[case, m if m == n else -n] = timed(argv, repo, {**env, "PYTHONPATH": trees[case]})
            t = trues_cpu(n, args.parallel)
            if rep:
                trues[n].append(t)
                for key, v in got.items():
                    res.setdefault(key, []).append(v)
    report(args, sizes, trees, res, trues, xargs, loads)
    return 0


def report(
    args: argparse.Namespace,
    sizes: list[int],
    trees: dict[str, str],
    res: dict[tuple[str, int], list[tuple[float, float]]],
    trues: dict[int, list[float]],
    xargs: str,
    loads: list[float],
) -> None:
    med = statistics.median
    print(f"`true` units, --max-parallel {args.parallel}, {args.reps} repetitions (+1 warm-up), medians")
    for label, path in trees.items():
        print(f"- {label}: {describe_sources(Path(path) / 'wf')}")
    print()
    print("| N | case | wall ms | wall ms min-max | CPU ms (tree) | wf CPU ms per unit, all in"
          " | wf CPU ms per unit, marginal | wall / xargs |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        true_n = med(trues[n])
        base = med(w for w, _c in res[xargs, n])
        for case in [xargs, *trees]:
            times = res[case, n]
            walls = [w for w, _ in times]
            wall, cpu = med(walls), med(c for _, c in times)
            spread = f"{min(walls):.0f}-{max(walls):.0f}"
            if case == xargs:
                print(f"| {n} | `{case}` | {wall:.0f} | {spread} | {cpu:.0f} | | | 1.0x |")
                continue
            # per repetition, then the median: the load moves between repetitions
            per = [(c - t) / n for (_w, c), t in zip(times, trues[n], strict=True)]
            one = [c1 for _w, c1 in res[case, -n]]
            marg = [
                (c - c1 - t * (n - 1) / n) / (n - 1)
                for (_w, c), c1, t in zip(times, one, trues[n], strict=True)
            ]
            print(f"| {n} | {case} | {wall:.0f} | {spread} | {cpu:.0f} | **{med(per):.2f}** |"
                  f" {med(marg):.2f} | **{wall / base:.1f}x** |")  # fmt: skip
        one_wall = {case: med(w for w, _ in res[case, -n]) for case in trees}
        fixed = ", ".join(f"{c}: {w:.0f} ms" for c, w in one_wall.items())
        print(f"|  | (N={n}: the N `true`s alone, CPU {true_n:.0f} ms; `wf run` of 1 unit, wall {fixed}) |"
              "  |  |  |  |  |  |")  # fmt: skip
    print(f"\nmachine: nproc {os.cpu_count()}, load average (1 min) {min(loads):.1f}-{max(loads):.1f}"
          f" during the run; python {sys.version.split()[0]}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
