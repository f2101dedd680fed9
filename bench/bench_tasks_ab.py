"""bench_tasks.py's commands for two versions of wf in the same repetitions.

On a shared machine the load changes from minute to minute, so a run of one version
after a run of the other compares two loads as much as two versions. Here each
repetition runs every command with the old wf (``--rev``, exported with git archive and
put first on PYTHONPATH), with the working tree's wf, and the baseline ``python -c
"import click"``, in an order that alternates; each version works in its own copy of
the generated repository, so that its caches are its own. The table gives medians and
each version's ratio to the baseline of the same repetitions, of wall time and of CPU
time (user + system of the process, from wait4): on a busy machine a process also waits
for a CPU, which the wall time counts and the CPU time does not.

    .venv/bin/python bench/bench_tasks_ab.py --rev 3381491
    .venv/bin/python bench/bench_tasks_ab.py --rev 3381491 --sizes 10000 --commands list,status
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from _common import BenchError, export_rev
from bench_tasks import BASELINE, GOALS, Case, cases_for, make_repo, parse_sizes


def timed(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU time (user + system) of one whole process, in milliseconds."""
    t0 = time.perf_counter()
    p = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1000.0
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    if p.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {p.returncode}:\n{err.decode('utf-8', 'replace')[-2000:]}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000.0


@contextmanager
def using(path: str | None) -> Iterator[None]:
    """Child processes started in the block import wf from ``path`` (None: the working
    tree, through the venv's editable install)."""
    before = os.environ.get("PYTHONPATH")
    if path is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def measure(
    versions: list[tuple[str, str | None]], parent: Path, n: int, args: argparse.Namespace
) -> list[str]:
    """Table rows for size ``n``: command, N, then per version median and ratio."""
    groups: list[tuple[str | None, Path, list[Case]]] = []
    for label, path in versions:
        folder = parent / label
        folder.mkdir(exist_ok=True)
        with using(path):
            repo, ready, _ = make_repo(folder, n, args.seed)
            groups.append((path, repo, cases_for(repo, ready, args.commands)))
    time.sleep(args.age)  # files as a poller finds them between saves (wf.tasks.listcache)
    base: list[list[tuple[float, float]]] = [[] for _ in groups[0][2]]
    cpu: list[list[list[float]]] = [[[] for _ in groups[0][2]] for _ in groups]
    for i in range(args.warmup + args.reps):
        for j in range(len(base)):
            order = [*range(len(groups)), -1]  # -1: the baseline
            if i % 2:
                order.reverse()
            for g in order:
                if g < 0:
                    pair = timed(BASELINE, groups[0][1])
                    continue
                path, repo, cases = groups[g]
                with using(path):
                    t, c = timed(cases[j].argv(i), repo)
                    if cases[j].reset is not None:
                        cases[j].reset(i)
                if i >= args.warmup:
                    cases[j].times.append(t)
                    cpu[g][j].append(c)
            if i >= args.warmup:
                base[j].append(pair)
    rows = []
    for j, case in enumerate(groups[0][2]):
        b = statistics.median(x[0] for x in base[j])
        bc = statistics.median(x[1] for x in base[j])
        cells = [f"`{case.name}`", f"{n:,}", f"{b:.1f}", f"{bc:.1f}"]
        for g, (_, _, cases) in enumerate(groups):
            m, mc = statistics.median(cases[j].times), statistics.median(cpu[g][j])
            cells += [f"{m:.1f}", f"{m / b:.2f}x", f"{mc:.1f}", f"{mc / bc:.2f}x"]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", required=True, help="the old version: wf as committed at this git revision")
    ap.add_argument("--sizes", type=parse_sizes, default=[1000, 10000], help="task counts")
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions (default 15)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed repetitions first (default 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--age",
        type=float,
        default=0.0,
        help="seconds to wait after making the repositories, before the first run (default 0); "
        "4 lets a list of unchanged files be answered by their identities",
    )
    ap.add_argument(
        "--commands",
        type=lambda text: {x.strip() for x in text.split(",") if x.strip()},
        help="only these commands, e.g. list,status (default: all of bench_tasks.py's)",
    )
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-ab-"))
    # as bench_tasks.py: every process, the baseline included, runs from cached bytecode
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        sha = export_rev(args.rev, tmp / "src")
        versions = [(f"wf@{sha[:7]}", str(tmp / "src")), ("wf (working tree)", None)]
        print(f"# old: wf as committed at {sha}; new: the working tree; {args.reps} reps (+{args.warmup})")
        head = ["command", "N", "baseline ms", "baseline CPU ms"]
        for label, _ in versions:
            head += [f"{label} ms", "ratio", "CPU ms", "CPU ratio"]
        print()
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1), flush=True)
        for n in args.sizes:
            for row in measure(versions, tmp, n, args):
                print(row, flush=True)
        print()
        print("Goals (issue 22): " + "; ".join(f"`{c}` within {lim:g}x" for c, (_, lim) in GOALS.items()))
        return 0
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
