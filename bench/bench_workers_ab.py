"""A/B of `wf run` against a baseline revision, in the same run: N units of `true` at
`--max-parallel P`, wf as committed at REV (git archive) against wf as it is in the work
tree, both against `xargs -P P -I{} true` fed N lines. The three cases are interleaved in
every repetition (the order flips each time); medians of wall time and of CPU time (user +
sys of the process and the children it waited for) are reported, with each wall median
as a multiple of xargs'.

    .venv/bin/python bench/bench_workers_ab.py --base 0d201bb --reps 9
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import PYTHON, ROOT, export_rev


def timed(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, input=stdin, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall * 1000, cpu * 1000


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, metavar="REV", help="the baseline revision")
    ap.add_argument("--units", type=int, default=100)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-ab-"))
    try:
        sha = export_rev(args.base, tmp / "base")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")  # both run from cached bytecode
        trees = {f"wf at {sha[:7]} (base)": str(tmp / "base"), "wf in the work tree": str(ROOT)}
        repo = tmp / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run([str(PYTHON), "-m", "wf", "init"], cwd=repo, env={**env, "PYTHONPATH": str(ROOT)},
                       check=True, capture_output=True)  # fmt: skip
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", "wf init"], cwd=repo, check=True)
        units = [{"id": f"u{i}", "prompt": "x", "cmd": ["true"]} for i in range(args.units)]
        manifest = tmp / "m.json"
        manifest.write_text(json.dumps({"defaults": {"adapter": "cmd"}, "units": units}))
        lines = "".join(f"{i}\n" for i in range(args.units)).encode()
        xargs = f"xargs -P {args.parallel} -I{{}} true"
        results: dict[str, list[tuple[float, float]]] = {xargs: [], **{k: [] for k in trees}}
        n = 0
        for rep in range(args.reps + 1):  # the first is a warm-up
            order = list(results) if rep % 2 == 0 else list(results)[::-1]
            for case in order:
                if case == xargs:
                    got = timed(["xargs", "-P", str(args.parallel), "-I{}", "true"], repo, env, lines)
                else:
                    n += 1
                    run = [str(PYTHON), "-m", "wf", "run", str(manifest), "--run", f"ab{n}"]
                    run += ["--max-parallel", str(args.parallel)]
                    got = timed(run, repo, {**env, "PYTHONPATH": trees[case]})
                if rep:
                    results[case].append(got)
        base_wall = statistics.median(w for w, _c in results[xargs])
        print(f"{args.units} units of `true`, --max-parallel {args.parallel}, {args.reps} reps (+1 warm-up)")
        print()
        print("| case | wall ms, median | wall ms, min-max | CPU ms, median | wall / xargs |")
        print("|---|---:|---:|---:|---:|")
        for case, times in results.items():
            walls = [w for w, _c in times]
            wall, cpu = statistics.median(walls), statistics.median(c for _w, c in times)
            spread = f"{min(walls):.0f}-{max(walls):.0f}"
            print(f"| {case} | {wall:.0f} | {spread} | {cpu:.0f} | {wall / base_wall:.1f}x |")
        print(f"\n# machine: nproc {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at the end")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
