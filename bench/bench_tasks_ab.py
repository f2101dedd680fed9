"""bench_tasks.py's commands for two versions of wf in the same repetitions.

On a shared machine the load changes from minute to minute, so a run of one version
after a run of the other compares two loads as much as two versions. Here each
repetition runs every command with the old wf (``--rev``, exported with git archive and
put first on PYTHONPATH), with the working tree's wf, and the baseline ``python -c
"import click"``, in an order that alternates; each version works in its own copy of
the generated repository, so that its caches are its own. The table gives medians and
each version's ratio to the baseline of the same repetitions.

    .venv/bin/python bench/bench_tasks_ab.py --rev 3381491
    .venv/bin/python bench/bench_tasks_ab.py --rev 3381491 --sizes 10000 --commands list,status
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from _common import BenchError, export_rev, timed
from bench_tasks import BASELINE, GOALS, Case, cases_for, make_repo, parse_sizes


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
    base: list[list[float]] = [[] for _ in groups[0][2]]
    for i in range(args.warmup + args.reps):
        for j in range(len(base)):
            order = [*range(len(groups)), -1]  # -1: the baseline
            if i % 2:
                order.reverse()
            for g in order:
                if g < 0:
                    b = timed(BASELINE, groups[0][1])
                    continue
                path, repo, cases = groups[g]
                with using(path):
                    t = timed(cases[j].argv(i), repo)
                    if cases[j].reset is not None:
                        cases[j].reset(i)
                if i >= args.warmup:
                    cases[j].times.append(t)
            if i >= args.warmup:
                base[j].append(b)
    rows = []
    for j, c in enumerate(groups[0][2]):
        b = statistics.median(base[j])
        cells = [f"`{c.name}`", f"{n:,}", f"{b:.1f}"]
        for _, _, cases in groups:
            m = statistics.median(cases[j].times)
            cells += [f"{m:.1f}", f"{m / b:.2f}x"]
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
        head = ["command", "N", "baseline ms"]
        for label, _ in versions:
            head += [f"{label} ms", "ratio"]
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
