"""Benchmark wf's git layer as whole processes on generated repositories.

The script builds two git repositories in a temporary folder, each with F files (default
5,000, 2-6 KB of text each, in 50 packages of 10 folders) committed on `main`, then
`wf init` (committed) and a TASKS.md of tasks t0..tN (`Model: sonnet`, `Done: true`),
committed; the second also declares lanes `l0`..`l15` (`model = "m0"`, ...) in wf.toml.

1. Readying a lane for a new task by REUSING its free worktree, against a fresh
   `git worktree add` of the same commit, in the same run (first repository).
   `wf wt add sonnet t0` makes `.worktrees/sonnet` once (untimed). Each repetition then
   times, in alternating order:

   - `wf wt add sonnet tK`: must reuse `.worktrees/sonnet` (checked after every run);
     then, untimed, the tree is freed as `wf merge` leaves it: the record keeps the lane
     but no task, the tree is detached at main, the branch is deleted;
   - the git work inside it alone, `git -C TREE switch --quiet --no-track -c B main`,
     undone the same way;
   - `git worktree add --quiet --detach TMP/fresh/fresh-K main`;
   - `python -c "import click"` (the venv's interpreter): Python's own startup, and
     `python -c "import click, wf.cli, wf.tasks.backlog, wf.trees.worktrees"`: startup plus what
     `wf wt add` imports (psutil and filelock come with wf.trees.worktrees).

   The fresh trees are removed (`git worktree remove --force`, untimed) only at the end.
   Deleting thousands of files slows every file creation for the next minutes on ext4
   without a journal (`recently_deleted()` in fs/ext4/ialloc.c skips inodes freed in the
   last 60-300 s, scanning past each): removing each fresh tree right away made the next
   `git worktree add` 5-15x slower, which would flatter the reuse. That pattern (remove
   the previous tree, then add) is timed separately, last, as "replace". Runs should be
   a few minutes apart for the same reason (each run ends by deleting its trees).

   With `--churn M`, main gets a commit changing M files after every repetition, so the
   reused tree is one commit behind (as after another lane's merge) and git must update
   those files. The goal: reuse well under half a fresh add (ratio < 0.5).

2. `wf wt list` with T worktrees (default 16: `wf wt add lJ tJ` for lanes l0..l15 in the
   second repository; the even ones keep their task and get an untracked file, the odd
   ones are freed), against `git worktree list`, interleaved. Then a cProfile of
   `wf wt list` in-process (`wf.cli.main(["-C", repo, "wt", "list"])`, the lazy imports
   included) with the calls and cumulative time of the functions that matter, and
   in-process timings of each per-tree step (psutil scan, git status, dir_size walk,
   one git call through gitops against the same git command with plain subprocess).

Reuse is also profiled the same way (`wt add sonnet tK`, then freed), and
`python -X importtime` splits the import cost by module.

Every timed command is a separate process started with an argument list (no shell);
timings are wall clock, warm-up repetitions are dropped, the tables give medians.

    .venv/bin/python bench/bench_git.py                  # full run (15 reps, 5,000 files)
    .venv/bin/python bench/bench_git.py --quick          # smoke run (1,000 files, 4 trees)
    .venv/bin/python bench/bench_git.py --files 20000 --reps 9 --churn 50
    .venv/bin/python bench/bench_git.py --rev HEAD       # wf as committed, not the working tree
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    PYTHON,
    ROOT,
    WF,
    BenchError,
    describe_sources,
    export_rev,
    run,
    sources_digest,
    timed,
    wf,
    wf_package,
)

BASELINE_PY = [str(PYTHON), "-c", "import click"]
# what `wf wt add` imports (wf.trees.worktrees brings psutil and filelock)
IMPORTS_PY = [str(PYTHON), "-c", "import click, wf.cli, wf.tasks.backlog, wf.trees.worktrees"]
IMPORT_MODULES = (
    "click",
    "wf.cli",
    "wf.tasks.backlog",
    "wf.trees.worktrees",
    "wf.trees.gitops",
    "wf.workers.procs",
    "psutil",
)
REUSE_GOAL = 0.5  # wf wt add (reuse) / git worktree add (fresh)
LANE = "sonnet"
MAIN = "main"

WORDS = (
    "alpha",
    "beta",
    "delta",
    "retry",
    "cache",
    "token",
    "parser",
    "index",
    "branch",
    "commit",
    "merge",
    "worker",
    "lane",
    "report",
)


# ---------------------------------------------------------------- running


def git(*args: str) -> list[str]:
    return ["git", *args]


@dataclass
class Case:
    name: str
    argv: Callable[[int], list[str]]  # repetition index -> command line
    cwd: Path
    reset: Callable[[int], None] | None = None  # untimed, right after each run
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def interleave(
    cases: list[Case], reps: int, warmup: int, after_rep: Callable[[int], None] | None = None
) -> None:
    """Run every case once per repetition, in alternating order, so that no case always
    runs first (or last) in a repetition; keep the timings after the warm-up."""
    for i in range(warmup + reps):
        for c in cases if i % 2 == 0 else list(reversed(cases)):
            t = timed(c.argv(i), c.cwd)
            if c.reset is not None:
                c.reset(i)
            if i >= warmup:
                c.times.append(t)
        if after_rep is not None:
            after_rep(i)


# ---------------------------------------------------------------- the repository


def write_files(repo: Path, n: int, seed: int) -> int:
    """``n`` text files of 2-6 KB in 50 packages of 10 folders; returns their bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(n):
        folder = repo / "src" / f"pkg{i % 50:02d}" / f"sub{(i // 50) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        target = rng.randint(2048, 6144)
        lines = [f"# file {i}: generated by bench/bench_git.py"]
        size = len(lines[0]) + 1
        while size < target:
            line = " ".join(rng.choices(WORDS, k=rng.randint(4, 12)))
            lines.append(line)
            size += len(line) + 1
        data = "\n".join(lines) + "\n"
        (folder / f"m{i:05d}.txt").write_text(data, "utf-8")
        total += len(data)
    return total


def tracked_files(n: int) -> list[str]:
    return [f"src/pkg{i % 50:02d}/sub{(i // 50) % 10}/m{i:05d}.txt" for i in range(n)]


def tasks_text(n: int) -> str:
    out = ["# Tasks\n\nGenerated by bench/bench_git.py.\n"]
    for i in range(n):
        out.append(f"\n## t{i}: Bench task {i}\nModel: sonnet\nDone: true\n\nNothing to do.\n")
    return "".join(out)


def lanes_toml(n: int) -> str:
    return "".join(f'\n[lanes.l{j}]\nmodel = "m{j}"\n' for j in range(n))


def commit_all(repo: Path, message: str) -> None:
    run(git("add", "-A"), repo)
    run(git("commit", "--quiet", "--no-verify", "-m", message), repo)


def make_repo(parent: Path, name: str, files: int, tasks: int, lanes: int, seed: int) -> tuple[Path, int]:
    repo = parent / name
    repo.mkdir()
    run(git("init", "--quiet", "--initial-branch", MAIN), repo)
    for key, value in (
        ("user.name", "wf bench"),
        ("user.email", "bench@example.invalid"),
        ("commit.gpgsign", "false"),
    ):
        run(git("config", key, value), repo)
    size = write_files(repo, files, seed)
    commit_all(repo, f"{files} generated files")
    run(wf("init"), repo)
    commit_all(repo, "wf init")
    with open(repo / "wf.toml", "a", encoding="utf-8") as f:
        f.write(lanes_toml(lanes))
    (repo / "TASKS.md").write_text(tasks_text(tasks), "utf-8")
    commit_all(repo, f"{tasks} tasks, {lanes} more lanes")
    check = run(wf("check", "--json"), repo, check=False)
    try:
        summary = json.loads(check.stdout)
    except ValueError:
        raise BenchError(f"wf check --json gave no JSON:\n{check.stderr}") from None
    if summary["errors"] or summary["tasks"] != tasks:
        raise BenchError(f"wf check: {summary['tasks']} tasks, {summary['errors']} errors: {summary}")
    return repo, size


# ---------------------------------------------------------------- trees


class Trees:
    """Helpers on the repository's lane trees (all untimed)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def path(self, name: str) -> Path:
        return self.repo / ".worktrees" / name

    def record_file(self, name: str) -> Path:
        return self.repo / ".wf" / "wt" / f"{name}.json"

    def record(self, name: str) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.record_file(name).read_text("utf-8"))
        return data

    def free(self, name: str, branch: str, at: str = MAIN) -> None:
        """Leave the tree as `wf merge` does: record without a task, HEAD detached at
        ``at`` (main), the task branch deleted."""
        rec = self.record(name)
        rec.update(task=None, branch=None, base=None)
        self.record_file(name).write_text(json.dumps(rec, indent=1) + "\n", "utf-8")
        run(git("-C", str(self.path(name)), "switch", "--quiet", "--detach", at), self.repo)
        run(git("branch", "--quiet", "-D", branch), self.repo)

    def expect(self, name: str, task: str, branch: str) -> None:
        """`wf wt add` gave task ``task`` the tree ``name`` on ``branch``, and no other."""
        rec = self.record(name)
        if rec.get("task") != task or rec.get("name") != name:
            raise BenchError(f"expected {name} to hold {task}; its record says {rec}")
        head = run(git("-C", str(self.path(name)), "symbolic-ref", "--short", "HEAD"), self.repo)
        if head.stdout.strip() != branch:
            raise BenchError(f"{name} is on {head.stdout.strip()!r}, expected {branch}")

    def names(self) -> list[str]:
        folder = self.repo / ".worktrees"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def registered(self) -> int:
        text = run(git("worktree", "list", "--porcelain"), self.repo).stdout
        return sum(1 for line in text.splitlines() if line.startswith("worktree "))


# ---------------------------------------------------------------- in-process profiles

PROFILE_CODE = """\
import cProfile, io, json, os, pstats, sys, time
argv = json.loads(sys.argv[1])
top = int(sys.argv[2])
from wf.cli import main
real = sys.stdout
sys.stdout = open(os.devnull, "w")
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
rc = main(argv)
prof.disable()
wall = time.perf_counter() - t0
sys.stdout = real
st = pstats.Stats(prof).strip_dirs()
funcs = {}
for (fn, _line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():
    row = funcs.setdefault(fn + ":" + func, [0, 0.0, 0.0])
    row[0] += nc
    row[1] += tt * 1000
    row[2] += ct * 1000
texts = {}
for sort in ("cumulative", "tottime"):
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(sort).print_stats(top)
    texts[sort] = buf.getvalue()
print(json.dumps({"rc": rc, "wall_ms": wall * 1000, "funcs": funcs, "texts": texts}))
"""

# (label, "file:function" as pstats names it after strip_dirs)
FOCUS = (
    ("imports inside the command (lazy)", "<frozen importlib._bootstrap>:_find_and_load"),
    ("backlog.load (TASKS.md)", "backlog.py:load"),
    ("lock.project_lock (wt.lock)", "lock.py:project_lock"),
    ("worktrees.allocate", "worktrees.py:allocate"),
    ("treeadmin.listing", "treeadmin.py:listing"),
    ("treeadmin.describe", "treeadmin.py:describe"),
    ("worktrees.inspect", "worktrees.py:inspect"),
    ("worktrees.main_branch", "worktrees.py:main_branch"),
    ("worktrees._reuse", "worktrees.py:_reuse"),
    ("worktrees._catch_up", "worktrees.py:_catch_up"),
    ("worktrees.verify (reads .git links)", "worktrees.py:verify"),
    ("worktrees.unsaved_commits (rev-list)", "worktrees.py:unsaved_commits"),
    ("procs.users_of", "procs.py:users_of"),
    ("procs.processes_in (psutil scan)", "procs.py:processes_in"),
    ("procs.claude_sessions_in", "procs.py:claude_sessions_in"),
    ("gitops.dir_size (os.walk + lstat)", "gitops.py:dir_size"),
    ("gitops.run (one git process each)", "gitops.py:run"),
    ("gitops.dirty_paths (git status -uall)", "gitops.py:dirty_paths"),
    ("gitops.current_branch", "gitops.py:current_branch"),
    ("gitops.rev", "gitops.py:rev"),
    ("gitops.count (rev-list --count)", "gitops.py:count"),
    ("gitops.branch_exists", "gitops.py:branch_exists"),
    ("gitops.worktrees (git worktree list)", "gitops.py:worktrees"),
    ("gitops.is_ancestor", "gitops.py:is_ancestor"),
    ("gitops.switch_new_branch", "gitops.py:switch_new_branch"),
    ("Popen.communicate (waiting for git)", "subprocess.py:communicate"),
)


@dataclass
class Profile:
    command: str
    wall_ms: float
    funcs: dict[str, list[float]]
    texts: dict[str, str]

    def focus(self) -> list[tuple[str, int, float]]:
        rows = []
        for label, key in FOCUS:
            row = self.funcs.get(key)
            if row and row[0]:
                rows.append((label, int(row[0]), row[2]))
        return rows


def profile(repo: Path, args: list[str], top: int = 25) -> Profile:
    argv = ["-C", str(repo), *args]
    p = run([str(PYTHON), "-c", PROFILE_CODE, json.dumps(argv), str(top)], repo)
    data = json.loads(p.stdout.strip().splitlines()[-1])
    if data["rc"] != 0:
        raise BenchError(f"in-process wf {' '.join(args)} returned {data['rc']}:\n{p.stderr}")
    return Profile("wf " + " ".join(args), data["wall_ms"], data["funcs"], data["texts"])


STEPS_CODE = """\
import json, os, statistics, subprocess, sys, time
from pathlib import Path
repo, free_tree, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
from wf.trees import gitops, treeadmin, worktrees
from wf.workers import procs
from wf.base import project as projmod
proj = projmod.load(repo)

def med(f):
    f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)

calls = {"git": 0}
real_run = gitops.run
def counting_run(*a, **k):
    calls["git"] += 1
    return real_run(*a, **k)
gitops.run = counting_run
treeadmin.listing(proj)
gitops.run = real_run
plain = ["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]
status = ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"]
out = {
    "processes": sum(1 for d in os.listdir("/proc") if d.isdigit()),
    "git_calls_per_listing": calls["git"],
    "steps": [
        ["treeadmin.listing (all trees, in-process)", med(lambda: treeadmin.listing(proj))],
        ["procs.users_of (1 tree)", med(lambda: procs.users_of(free_tree))],
        ["procs.processes_in (1 tree: psutil scan)", med(lambda: procs.processes_in(free_tree))],
        ["procs.claude_sessions_in (1 tree)", med(lambda: procs.claude_sessions_in(free_tree))],
        ["gitops.dir_size (1 tree)", med(lambda: gitops.dir_size(free_tree))],
        ["gitops.dirty_paths (1 tree)", med(lambda: gitops.dirty_paths(free_tree))],
        ["git status -uall (plain subprocess)",
         med(lambda: subprocess.run(status, cwd=free_tree, capture_output=True))],
        ["gitops.rev(tree, HEAD)", med(lambda: gitops.rev(free_tree, "HEAD"))],
        ["git rev-parse (plain subprocess)",
         med(lambda: subprocess.run(plain, cwd=free_tree, capture_output=True))],
    ],
}
print(json.dumps(out))
"""


def step_timings(repo: Path, free_tree: Path, n: int) -> dict[str, Any]:
    p = run([str(PYTHON), "-c", STEPS_CODE, str(repo), str(free_tree), str(n)], repo)
    data: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return data


def import_times(cwd: Path, n: int) -> dict[str, float]:
    """Median cumulative import time (ms) of IMPORT_MODULES in ``python -X importtime``
    of IMPORTS_PY, over ``n`` runs."""
    seen: dict[str, list[float]] = {m: [] for m in IMPORT_MODULES}
    for _ in range(n):
        p = run([str(PYTHON), "-X", "importtime", *IMPORTS_PY[1:]], cwd)
        for line in p.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            parts = line[len("import time:") :].split("|")
            name = parts[2].strip()
            if name in seen:
                seen[name].append(int(parts[1]) / 1000)
    return {m: statistics.median(v) for m, v in seen.items() if v}


# ---------------------------------------------------------------- the two benchmarks


@dataclass
class ReuseResult:
    reuse: Case
    switch: Case
    fresh: Case
    python: Case
    imports: Case
    profile: Profile
    import_ms: dict[str, float]
    replace: Case | None = None

    @property
    def ratio(self) -> float:
        return self.reuse.median / self.fresh.median


def bench_reuse(
    repo: Path, tmp: Path, files: int, reps: int, warmup: int, churn: int, top: int
) -> ReuseResult:
    trees = Trees(repo)
    tree = trees.path(LANE)
    run(wf("wt", "add", LANE, "t0"), repo)  # makes .worktrees/sonnet (untimed)
    trees.expect(LANE, "t0", f"{LANE}/t0")
    trees.free(LANE, f"{LANE}/t0")
    fresh_dir = tmp / "fresh"
    fresh_dir.mkdir()
    paths = tracked_files(files)
    # where each case's reset leaves the tree: main as of the start of the repetition
    # (with --churn, main then moves one commit ahead before the next repetition)
    base = [run(git("rev-parse", MAIN), repo).stdout.strip()]

    def task(i: int) -> str:
        return f"t{i + 1}"

    def reuse_done(i: int) -> None:
        branch = f"{LANE}/{task(i)}"
        trees.expect(LANE, task(i), branch)
        if trees.names() != [LANE]:
            raise BenchError(f"wf wt add made another tree instead of reusing: {trees.names()}")
        trees.free(LANE, branch, base[0])

    def switch_done(i: int) -> None:
        run(git("-C", str(tree), "switch", "--quiet", "--detach", base[0]), repo)
        run(git("branch", "--quiet", "-D", f"bench/s{i}"), repo)

    def fresh_done(i: int) -> None:
        # kept until the end: deleting 5,000 files now would slow the next adds (see above)
        if not (fresh_dir / f"fresh-{i}" / ".git").is_file():
            raise BenchError(f"git worktree add made no worktree at {fresh_dir / f'fresh-{i}'}")

    def advance_main(i: int) -> None:
        if not churn:
            return
        rng = random.Random(i)
        changed = rng.sample(paths, min(churn, len(paths)))
        for rel in changed:
            with open(repo / rel, "a", encoding="utf-8") as f:
                f.write(f"churn {i}\n")
        base[0] = run(git("rev-parse", MAIN), repo).stdout.strip()
        run(git("commit", "--quiet", "--no-verify", "-m", f"churn {i}", "--", *changed), repo)
        run(git("-C", str(tree), "switch", "--quiet", "--detach", base[0]), repo)

    reuse = Case(f"wf wt add {LANE} tK (reuse)", lambda i: wf("wt", "add", LANE, task(i)), repo, reuse_done)
    switch = Case(
        "git -C TREE switch --quiet --no-track -c B main (git part of reuse)",
        lambda i: git("-C", str(tree), "switch", "--quiet", "--no-track", "-c", f"bench/s{i}", MAIN),
        repo,
        switch_done,
    )
    fresh = Case(
        "git worktree add --quiet --detach TMP/fresh-K main (fresh)",
        lambda i: git("worktree", "add", "--quiet", "--detach", str(fresh_dir / f"fresh-{i}"), MAIN),
        repo,
        fresh_done,
    )
    python = Case('python -c "import click" (Python startup)', lambda i: BASELINE_PY, repo)
    imports = Case(
        'python -c "import click, wf.cli, wf.tasks.backlog, wf.trees.worktrees" (startup + imports)',
        lambda i: IMPORTS_PY,
        repo,
    )
    interleave([reuse, switch, fresh, python, imports], reps, warmup, advance_main)

    k = warmup + reps + 1
    prof = profile(repo, ["wt", "add", LANE, task(k)], top)
    reuse_done(k)
    return ReuseResult(reuse, switch, fresh, python, imports, prof, import_times(repo, 7))


def bench_replace(repo: Path, tmp: Path, n: int) -> Case:
    """A fresh add right after removing the previous fresh tree (`git worktree remove
    --force`, untimed), as a remove-and-recreate-per-task scheme would do. Run last: each
    removal deletes thousands of files, which slows every file creation that follows
    on a filesystem that avoids reusing recently deleted inodes (see the docstring)."""
    fresh_dir = tmp / "fresh"
    previous = [fresh_dir / "fresh-0"]

    def before(i: int) -> list[str]:
        run(git("worktree", "remove", "--force", str(previous[0])), repo)
        previous[0] = fresh_dir / f"replace-{i}"
        return git("worktree", "add", "--quiet", "--detach", str(previous[0]), MAIN)

    replace = Case("git worktree remove (untimed), then git worktree add (replace)", before, repo)
    interleave([replace], n, 1)
    return replace


@dataclass
class ListResult:
    trees: int
    wf_list: Case
    git_list: Case
    create: list[float]
    profile: Profile
    steps: dict[str, Any]
    output: str

    @property
    def ratio(self) -> float:
        return self.wf_list.median / self.git_list.median


def bench_list(repo: Path, n_trees: int, reps: int, warmup: int, top: int) -> ListResult:
    trees = Trees(repo)
    create = []
    for j in range(n_trees):
        lane, task = f"l{j}", f"t{j}"
        create.append(timed(wf("wt", "add", lane, task), repo))
        trees.expect(lane, task, f"{lane}/{task}")
        if j % 2:
            trees.free(lane, f"{lane}/{task}")
        else:
            (trees.path(lane) / "WIP.txt").write_text("work in progress\n", "utf-8")
    if trees.names() != sorted(f"l{j}" for j in range(n_trees)) or trees.registered() != n_trees + 1:
        raise BenchError(f"expected {n_trees} lane trees, found {trees.names()}")
    output = run(wf("wt", "list"), repo).stdout
    if len(output.splitlines()) != n_trees + 1:
        raise BenchError(f"wf wt list printed {len(output.splitlines())} lines:\n{output}")
    wf_list = Case("wf wt list", lambda i: wf("wt", "list"), repo)
    git_list = Case("git worktree list", lambda i: git("worktree", "list"), repo)
    interleave([wf_list, git_list], reps, warmup)
    prof = profile(repo, ["wt", "list"], top)
    steps = step_timings(repo, trees.path("l1" if n_trees > 1 else "l0"), 7)  # l1 is free
    return ListResult(n_trees, wf_list, git_list, create, prof, steps, output)


# ---------------------------------------------------------------- report


def machine() -> str:
    git_version = run(git("--version"), ROOT).stdout.strip()
    return (
        f"nproc {os.cpu_count()}, Python {platform.python_version()} ({PYTHON}), {git_version}, "
        f"{platform.system()} {platform.release()} {platform.machine()}"
    )


def case_rows(cases: list[Case], ref: Case) -> list[str]:
    out = [
        f"| command | median ms | min ms | max ms | vs `{ref.name.split(' (')[0]}` |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in cases:
        out.append(
            f"| `{c.name}` | {c.median:.1f} | {min(c.times):.1f} | {max(c.times):.1f} | "
            f"{c.median / ref.median:.2f}x |"
        )
    return out


def focus_rows(prof: Profile) -> list[str]:
    out = [
        f"In-process `{prof.command}` under cProfile: {prof.wall_ms:.0f} ms wall "
        "(Python startup and `import wf.cli` not included; the profiler inflates Python-heavy code).",
        "",
        "| function | calls | cumulative ms |",
        "|---|---:|---:|",
    ]
    out += [f"| {label} | {calls} | {ct:.1f} |" for label, calls, ct in prof.focus()]
    return out


def report_reuse(r: ReuseResult, files: int, churn: int) -> tuple[list[str], bool]:
    lines = [f"### Readying a lane for a new task ({files:,} files, {len(r.reuse.times)} timed reps)", ""]
    if churn:
        lines += [f"Main advances by one commit changing {churn} files between repetitions.", ""]
    rows = [r.reuse, r.switch, r.fresh, r.python, r.imports] + ([r.replace] if r.replace else [])
    lines += case_rows(rows, r.fresh)
    met = r.ratio < REUSE_GOAL
    overhead = r.reuse.median - r.switch.median
    startup, imports = r.python.median, r.imports.median - r.python.median
    rest = r.reuse.median - r.imports.median - r.switch.median
    lines += [
        "",
        f"- reuse / fresh = {r.reuse.median:.1f} / {r.fresh.median:.1f} ms = **{r.ratio:.2f}** "
        f"(goal < {REUSE_GOAL:g}): **{'MET' if met else 'NOT MET'}**",
        f"- conservative: reuse median / the fastest fresh add = {r.reuse.median:.1f} / "
        f"{min(r.fresh.times):.1f} ms = {r.reuse.median / min(r.fresh.times):.2f}",
        f"- git's own work in a reuse (`git switch -c`): {r.switch.median:.1f} ms; wf's overhead "
        f"around it: {overhead:.1f} ms = Python + click startup ~{startup:.1f} ms + importing wf, "
        f"psutil and filelock ~{imports:.1f} ms + wf's checks and its other git "
        f"calls ~{rest:.1f} ms",
        "- `python -X importtime` of the imports above, cumulative ms (medians of 7): "
        + ", ".join(f"{m} {ms:.1f}" for m, ms in r.import_ms.items()),
        "",
    ]
    lines += focus_rows(r.profile)
    return lines, met


def report_list(r: ListResult) -> list[str]:
    lines = [
        f"### `wf wt list` with {r.trees} worktrees ({len(r.wf_list.times)} timed reps)",
        "",
        "Half the trees hold a task and an untracked file, half are free.",
        "",
    ]
    lines += case_rows([r.wf_list, r.git_list], r.git_list)
    lines += [
        "",
        f"- `wf wt list` / `git worktree list` = **{r.ratio:.1f}x** "
        f"({r.wf_list.median:.0f} ms, {r.wf_list.median / r.trees:.0f} ms per tree); no goal was set",
        f"- making each tree with `wf wt add LANE ID` (a new tree): "
        f"median {statistics.median(r.create):.0f} ms",
        "",
    ]
    lines += focus_rows(r.profile)
    steps = r.steps
    lines += [
        "",
        f"Per-step timings in-process, no profiler (medians of 7; {steps['processes']} processes on "
        f"the machine; {steps['git_calls_per_listing']} git processes per listing):",
        "",
        "| step | ms |",
        "|---|---:|",
    ]
    for name, ms in steps["steps"]:
        lines.append(f"| {name} | {ms:.1f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 reps, 1,000 files, 4 trees")
    ap.add_argument("--reps", type=int, help="timed repetitions (default 15, --quick 3)")
    ap.add_argument("--files", type=int, help="files in the generated repository (default 5000)")
    ap.add_argument("--trees", type=int, help="worktrees for `wf wt list` (default 16)")
    ap.add_argument("--churn", type=int, default=0, help="files main changes between reuse repetitions")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated files")
    ap.add_argument("--top", type=int, default=20, help="rows of each full cProfile listing")
    ap.add_argument(
        "--rev",
        metavar="REV",
        help="benchmark the wf package as committed at git revision REV (exported with git "
        "archive and put first on PYTHONPATH) instead of the working tree",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--strict", action="store_true", help="exit 1 if the reuse goal is not met")
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 15)
    warmup = 1 if args.quick else 2
    files = args.files or (1000 if args.quick else 5000)
    n_trees = args.trees or (4 if args.quick else 16)
    if reps < 1 or files < 1 or n_trees < 1 or args.churn < 0:
        ap.error("--reps, --files and --trees must be positive, --churn not negative")
    for exe in (PYTHON, WF):
        if not exe.exists():
            print(f"bench: {exe} not found; create the venv first", file=sys.stderr)
            return 2

    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-git-"))
    # As in bench_tasks.py: every process runs from cached bytecode, as an installed wf does.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    if args.rev:
        try:
            sha = export_rev(args.rev, tmp / "src")
        except (BenchError, subprocess.CalledProcessError) as e:
            print(f"bench: cannot export {args.rev}: {e}", file=sys.stderr)
            shutil.rmtree(tmp, ignore_errors=True)
            return 2
        os.environ["PYTHONPATH"] = os.pathsep.join(
            x for x in (str(tmp / "src"), os.environ.get("PYTHONPATH")) if x
        )
        print(f"# code: wf as committed at {sha} (git archive)")
    pkg = wf_package(tmp)
    digest = sources_digest(pkg)
    print(f"# wf package: {describe_sources(pkg)}")
    print(f"# machine: {machine()}")
    print(f"# reps: {reps} timed (+{warmup} warm-up), bytecode cached under {tmp / 'pycache'}", flush=True)
    try:
        t0 = time.perf_counter()
        n_tasks = warmup + reps + 3  # t0, t1.. per repetition, one for the profile
        repo, size = make_repo(tmp, "repo", files, n_tasks, 0, args.seed)
        list_repo, _ = make_repo(tmp, "repo-list", files, n_trees, n_trees, args.seed)
        print(
            f"# repos: {repo} ({files:,} files, {size / 1e6:.1f} MB, {n_tasks} tasks) for the reuse, "
            f"{list_repo} (the same files, {n_trees} tasks, lanes l0..l{n_trees - 1}) for the "
            f"listing; set up in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        reuse = bench_reuse(repo, tmp, files, reps, warmup, args.churn, args.top)
        listed = bench_list(list_repo, n_trees, reps, warmup, args.top)
        reuse.replace = bench_replace(repo, tmp, max(3, reps // 3))
        lines, met = report_reuse(reuse, files, args.churn)
        print()
        print("\n".join(lines))
        print()
        print("\n".join(report_list(listed)))
        print()
        print("`wf wt list` output:")
        print()
        print("```")
        print(listed.output.rstrip())
        print("```")
        for prof in (reuse.profile, listed.profile):
            for sort in ("cumulative", "tottime"):
                print()
                print(f"#### cProfile of `{prof.command}`, top {args.top} by {sort}")
                print()
                print("```")
                print(prof.texts[sort].strip())
                print("```")
        if sources_digest(pkg) != digest:
            print(f"\n# WARNING: {pkg} changed during the run; the numbers mix two versions of wf")
        if args.keep:
            print(f"\n# kept {tmp}")
        return 1 if args.strict and not met else 0
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
