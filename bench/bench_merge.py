"""`wf merge` against `git merge --no-ff` of the same kind of branch (issue 22, item 10).

The script builds one repository per side (F files, default 5,000, as bench_git.py makes
them; `wf init` and a TASKS.md of tasks t0..tN committed). Each repetition, untimed, readies
one branch per side with one commit that changes one file, then waits 1.2 s (a merge
comes long after the claim; see SETTLE):

- for each wf side: `wf wt add sonnet tK` (reusing `.worktrees/sonnet` from the second
  repetition on), a commit in the tree; then `wf merge tK` is timed from the main checkout
  (it merges, archives tK in a second commit, detaches and frees the tree, deletes the
  branch);
- for git: a branch `gK` made with plumbing (no checkout); then `git merge --no-ff -q -m
  gK gK` is timed in the main checkout.

Sides: this checkout (`python -m wf` with this checkout's `wf` first on PYTHONPATH) and,
with `--rev REV`, the `wf` package of REV (exported with `git archive`), in the same venv.
Commands run interleaved, in an order that flips each repetition; the table gives wall
medians. Then one more merge per side runs with `GIT_TRACE` set (untimed) to count the git
processes it starts (each git process logs one `trace: built-in:` line).

    .venv/bin/python bench/bench_merge.py --rev 3381491            # ~3 min
    .venv/bin/python bench/bench_merge.py --quick                  # smoke: 500 files, 3 reps
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import PYTHON, ROOT, BenchError, export_rev, run
from bench_git import make_repo, tracked_files

GOAL = 8.0  # wf merge / git merge --no-ff
# a merge comes long after the claim: wf reads a TASKS.md that lost a task only once it
# has been still for settle.LOST_QUIET (1 s), which the claim just before would cost it
SETTLE = 1.2


def _env(pythonpath: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms of the process and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise BenchError(
            f"{' '.join(argv)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-800:]}"
        )
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _ready_wf(repo: Path, wf: list[str], env: dict[str, str], k: int, path: str) -> None:
    run([*wf, "wt", "add", "sonnet", f"t{k}"], repo, env=env)
    tree = repo / ".worktrees" / "sonnet"
    with open(tree / path, "a", encoding="utf-8") as f:
        f.write(f"wf change {k}\n")
    run(["git", "commit", "-q", "--no-verify", "-am", f"work on t{k}"], tree, env=env)


def _ready_git(repo: Path, env: dict[str, str], k: int, path: str) -> None:
    index = dict(env, GIT_INDEX_FILE=str(repo / ".git" / "bench-index"))
    run(["git", "read-tree", "main"], repo, env=index)
    text = (repo / path).read_text("utf-8") + f"git change {k}\n"
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=repo,
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    run(["git", "update-index", "--cacheinfo", f"100644,{blob},{path}"], repo, env=index)
    tree = run(["git", "write-tree"], repo, env=index).stdout.strip()
    commit = run(["git", "commit-tree", tree, "-p", "main", "-m", f"g{k}"], repo, env=env).stdout.strip()
    run(["git", "branch", f"g{k}", commit], repo, env=env)


def _git_processes(argv: list[str], cwd: Path, env: dict[str, str], trace: Path) -> list[str]:
    """The git processes of one run: each ``trace: built-in:`` line's command line."""
    trace.unlink(missing_ok=True)
    run(argv, cwd, env=dict(env, GIT_TRACE=str(trace)))
    lines = trace.read_text(errors="replace").splitlines()
    return [line.split("trace: built-in: ", 1)[1] for line in lines if "trace: built-in: " in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="also measure the wf package of this git revision")
    ap.add_argument("--reps", type=int, help="timed repetitions (default 15, --quick 3)")
    ap.add_argument("--files", type=int, help="files in each repository (default 5000, --quick 500)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--list-git", action="store_true", help="print the git processes of each side's merge")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 15)
    files = args.files or (500 if args.quick else 5000)
    warmup = 2
    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-merge-"))
    try:
        os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        sides: dict[str, Path] = {"this checkout": ROOT}
        if args.rev:
            sha = export_rev(args.rev, tmp / "rev")
            sides[f"{args.rev} ({sha[:7]})"] = tmp / "rev"
        n = warmup + reps + 2
        repos = {side: make_repo(tmp, f"repo{i}", files, n, 0, 1)[0] for i, side in enumerate(sides)}
        git_repo = make_repo(tmp, "repo-git", files, n, 0, 1)[0]
        paths = tracked_files(files)
        base_env = _env(ROOT)
        wall: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        names = [*(f"wf merge ({side})" for side in sides), "git merge --no-ff"]
        for k in range(warmup + reps + 1):
            path = paths[(k * 37) % len(paths)]
            jobs = []
            for side, src in sides.items():
                env, wf = _env(src), [str(PYTHON), "-m", "wf"]
                _ready_wf(repos[side], wf, env, k, path)
                jobs.append((f"wf merge ({side})", [*wf, "merge", f"t{k}"], repos[side], env))
            _ready_git(git_repo, base_env, k, path)
            jobs.append(
                (
                    "git merge --no-ff",
                    ["git", "merge", "--no-ff", "-q", "-m", f"g{k}", f"g{k}"],
                    git_repo,
                    base_env,
                )
            )
            time.sleep(SETTLE)
            if k == warmup + reps:  # the last one: counted, not timed
                trace = tmp / "trace"
                counts = {name: _git_processes(argv, cwd, env, trace) for name, argv, cwd, env in jobs}
                break
            for name, argv, cwd, env in jobs if k % 2 == 0 else reversed(jobs):
                ms, c = _timed(argv, cwd, env)
                if k >= warmup:
                    wall.setdefault(name, []).append(ms)
                    cpu.setdefault(name, []).append(c)
        ref = statistics.median(wall["git merge --no-ff"])
        print(f"{reps} timed repetitions (+{warmup} warm-up), {files:,} files, {os.cpu_count()} cores, "
              f"{run(['git', '--version'], ROOT).stdout.strip()}\n")  # fmt: skip
        print("| command | wall median ms | min | max | CPU median ms | git processes | vs git merge |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name in names:
            w = wall[name]
            n_git = len(counts[name])
            print(
                f"| `{name}` | {statistics.median(w):.1f} | {min(w):.1f} | {max(w):.1f} | "
                f"{statistics.median(cpu[name]):.1f} | {n_git} | {statistics.median(w) / ref:.1f}x |"
            )
        for name in names if args.list_git else ():
            print(f"\ngit processes of `{name}`:")
            print("\n".join(f"    {line}" for line in counts[name]))
        mine = statistics.median(wall["wf merge (this checkout)"]) / ref
        verdict = "MET" if mine <= GOAL else "NOT MET"
        print(f"\nthis checkout: {mine:.1f}x git merge --no-ff (goal {GOAL:g}x): {verdict}")
        return 0
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
