"""What a wf command costs to start, before and after a change, in the same run.

For each everyday command (`wf --version`, `wf ctx ID`, a claim `wf status ID progress
me`, `wf add`, `wf merge` of a one-commit branch, `wf wt list`) this script measures the
CPU time (user + system, from the kernel's rusage, so machine load inflates it less
than wall time) of one whole process, interleaved per repetition:

- the baseline `python -c "import click"`, in each venv;
- the command with the wf sources of this checkout (the venv `.venv`);
- with `--rev REV`, the same command with the wf sources of REV (exported with `git
  archive`), in a throwaway venv holding the dependencies REV declares (REV before
  11768fd needs GitPython and filelock, which this checkout no longer has).

Every command runs in a fresh small repository made for it (git init, wf init, one
task), so no run sees another's state. It prints a markdown table of medians (ms of CPU)
and each command's cost over its own venv's baseline.

    .venv/bin/python bench/bench_start.py                    # this checkout only
    .venv/bin/python bench/bench_start.py --rev fc175b9      # against an older revision
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import PYTHON, ROOT, BenchError, export_rev, run

Setup = Callable[[Path, list[str]], list[str]]


def _cpu_ms(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace")[-800:]
        raise BenchError(f"{' '.join(argv)} exited {p.returncode}: {err}")
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000.0


def _repo(where: Path, wf: list[str], env: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(dir=where))
    run(["git", "init", "-q", "-b", "main"], root, env=env)
    run(["git", "commit", "-q", "--allow-empty", "-m", "start"], root, env=env)
    run([*wf, "init"], root, env=env)
    run([*wf, "add", "A task", "--id", "t1", "--model", "sonnet", "--done", "true"], root, env=env)
    run(["git", "add", "-A"], root, env=env)
    run(["git", "commit", "-qm", "wf"], root, env=env)
    return root


def _merge_ready(root: Path, wf: list[str], env: dict[str, str]) -> Path:
    run([*wf, "status", "t1", "progress", "bench"], root, env=env)
    run([*wf, "wt", "add", "sonnet", "t1"], root, env=env)
    tree = root / ".worktrees" / "sonnet"
    (tree / "work.txt").write_text("work\n")
    run(["git", "add", "work.txt"], tree, env=env)
    run(["git", "commit", "-qm", "work"], tree, env=env)
    run([*wf, "done", "t1"], tree, env=env)
    return tree


# name, argv after `wf`, and where it runs: the main checkout, or a tree ready to merge
COMMANDS: list[tuple[str, list[str], bool]] = [
    ("wf --version", ["--version"], False),
    ("wf ctx t1", ["ctx", "t1"], False),
    ("wf status t1 progress me (a claim)", ["status", "t1", "progress", "me"], False),
    ("wf add", ["add", "Another task", "--model", "sonnet", "--done", "true"], False),
    ("wf wt list", ["wt", "list"], False),
    ("wf merge (one commit)", ["merge"], True),
]


def _venv_for(rev_src: Path, where: Path) -> Path:
    """A venv with the dependencies the exported revision's pyproject declares."""
    venv = where / "venv-rev"
    run([sys.executable, "-m", "venv", str(venv)], where)
    text = (rev_src / "pyproject.toml").read_text()
    deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    names = [d.strip().strip('",') for d in deps.splitlines() if d.strip().strip('",')]
    run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *names], where)
    return venv / "bin" / "python"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="also measure the wf sources of this git revision")
    ap.add_argument("--reps", type=int, default=15, help="repetitions per command (default 15)")
    args = ap.parse_args()
    base_env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@e.invalid",
                    GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@e.invalid")  # fmt: skip
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)  # both sides cache their bytecode alike
    with tempfile.TemporaryDirectory(prefix="wf-bench-start-") as tmp:
        where = Path(tmp)
        sides: dict[str, tuple[str, dict[str, str]]] = {"this checkout": (str(PYTHON), dict(base_env))}
        if args.rev:
            src = where / "rev"
            sha = export_rev(args.rev, src)
            subprocess.run(["git", "show", f"{sha}:pyproject.toml"], cwd=ROOT, check=True,
                           stdout=(src / "pyproject.toml").open("w"))  # fmt: skip
            rev_python = _venv_for(src, where)
            sides[f"{args.rev} ({sha[:7]})"] = (str(rev_python), dict(base_env, PYTHONPATH=str(src)))
        results: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.reps):
            for side, (py, env) in sides.items():
                results.setdefault((side, "baseline"), []).append(
                    _cpu_ms([py, "-c", "import click"], where, env)
                )
                wf = [py, "-m", "wf"]
                for name, argv, in_tree in COMMANDS:
                    root = _repo(where, wf, env)
                    cwd = _merge_ready(root, wf, env) if in_tree else root
                    results.setdefault((side, name), []).append(_cpu_ms([*wf, *argv], cwd, env))
    print(f"CPU ms per process, medians of {args.reps} ({sys.platform}, {os.cpu_count()} cores)\n")
    names = ["baseline", *(n for n, _, _ in COMMANDS)]
    head = " | ".join(f"{s}: ms | over baseline" for s in sides)
    print(f"| command | {head} |")
    print("|---|" + "---:|---:|" * len(sides))
    for name in names:
        cells = []
        for side in sides:
            med = statistics.median(results[(side, name)])
            base = statistics.median(results[(side, "baseline")])
            cells.append(f"{med:.1f} | {'' if name == 'baseline' else f'+{med - base:.1f}'}")
        label = 'baseline `python -c "import click"`' if name == "baseline" else f"`{name}`"
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
