"""``wf merge`` killed (``kill -9`` of its whole process group, git included) at random
moments on two machines merging at the same time through one shared remote, then run
again until it finishes: no commit, archive line or task is lost, none is archived
twice, and no file gets conflict markers (issue 24, items 4 and 6).

:func:`kill_rounds` is the scenario; ``bench/bench_xmerge_kills.py`` runs more rounds of
it for the figures in bench/RESULTS.md."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.machines import Machine, Shared, git

MARKERS = ("<<<<<<<", ">>>>>>>", "\n=======\n")


@dataclass
class Figures:
    merges: int = 0  # task branches merged (each once killed, then finished)
    kills: int = 0  # kills that landed while wf merge was still running
    reruns: int = 0  # wf merge runs after a kill, until it finished
    killed_before: int = 0  # kills before the merge commit was on this machine's main
    killed_between: int = 0  # kills after it, before the shared main had it (in or before the push)
    killed_after: int = 0  # kills after the push of main (parking the tree, deleting branches)
    redone: int = 0  # runs that found the shared main moved and redid this machine's commits
    doctor: int = 0  # wf doctor --fix runs for a git lock a kill left
    lost_commits: int = 0  # task branch tips that the shared main does not hold
    lost_lines: int = 0  # merged tasks without an archive line on the shared main
    double_lines: int = 0  # archive lines beyond one per task
    lost_tasks: int = 0  # tasks nobody merged that are gone from the shared TASKS.md
    lost_edits: int = 0  # a person's uncommitted edits gone from their machine's TASKS.md
    marker_files: int = 0  # files with conflict markers (TASKS.md, the archive, on each side)
    notes: list[str] = field(default_factory=list)

    def lost(self) -> int:
        return (
            self.lost_commits
            + self.lost_lines
            + self.double_lines
            + self.lost_tasks
            + self.lost_edits
            + self.marker_files
        )


def _tasks(merged: int, kept: int) -> str:
    body = "".join(
        f"## t{n}: Task {n}\nModel: sonnet\nDone: true\n\nBody of task {n}.\n\n"
        for n in range(1, merged + kept + 1)
    )
    return "# Tasks\n\n" + body


def _branch(m: Machine, task: str) -> str:
    m.git("switch", "-qc", f"sonnet/{task}")
    (m.root / f"{task}.txt").write_text(f"work of {task} on {m.name}\n")
    m.git("add", f"{task}.txt")
    m.git("commit", "-qm", f"work {task}")
    m.git("switch", "-q", "main")
    return m.git("rev-parse", f"sonnet/{task}").strip()


def _age_git_locks(m: Machine) -> None:
    """A kill left git's lock file: it is old now (as a minute later), for wf doctor."""
    old = time.time() - 3600
    for lock in (m.root / ".git").rglob("*.lock"):
        os.utime(lock, (old, old))


def _finish(m: Machine, task: str, figures: Figures, lock: threading.Lock) -> None:
    for _ in range(12):
        r = m.wf("merge", task, "--no-gate")
        with lock:
            figures.reruns += 1
        with lock:
            figures.redone += "redid this machine's commits" in r.stdout
        if r.returncode == 0:
            return
        if ".lock" in r.stderr:
            _age_git_locks(m)
            m.wf("doctor", "--fix")
            with lock:
                figures.doctor += 1
            continue
        with lock:
            figures.notes.append(f"[{m.name}] wf merge {task}: {r.returncode} {r.stderr.strip()[:300]}")
        if "kept moving" not in r.stderr and "unreachable" not in r.stderr:
            return
    raise AssertionError(f"[{m.name}] wf merge {task} did not finish: {figures.notes[-3:]}")


def _machine_merges(
    m: Machine, bare: Path, tasks: list[str], rng: random.Random, figures: Figures, lock: threading.Lock
) -> None:
    for task in tasks:
        tip = m.git("rev-parse", f"sonnet/{task}").strip()
        p = m.popen("merge", task, "--no-gate")
        if rng.random() < 0.5:  # anywhere in the run
            time.sleep(rng.uniform(0.2, 2.5))
        else:  # once the branch is on the remote: in the merge, the archive or the pushes of main
            _wait_for_branch(p, bare, f"refs/heads/sonnet/{task}")
            time.sleep(rng.uniform(0.0, 1.0))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            with lock:
                figures.kills += 1
                _where(m, bare, tip, figures)
        p.communicate()
        _finish(m, task, figures, lock)
        with lock:
            figures.merges += 1


def _wait_for_branch(p: subprocess.Popen[str], bare: Path, ref: str) -> None:
    deadline = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < deadline:
        r = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=bare, capture_output=True)
        if r.returncode == 0:
            return
        time.sleep(0.02)


def _where(m: Machine, bare: Path, tip: str, figures: Figures) -> None:
    """Where the kill landed, read from the refs it left."""

    def holds(cwd: Path) -> bool:
        return (
            subprocess.run(
                ["git", "merge-base", "--is-ancestor", tip, "main"], cwd=cwd, capture_output=True
            ).returncode
            == 0
        )

    if holds(bare):
        figures.killed_after += 1
    elif holds(m.root):
        figures.killed_between += 1
    else:
        figures.killed_before += 1


def kill_rounds(tmp: Path, rounds: int, per_machine: int, seed: int) -> Figures:
    """``rounds`` times: two machines each merge ``per_machine`` task branches at the
    same time, every first run killed at a random moment and run again; then count what
    the shared main lost."""
    figures = Figures()
    for n in range(rounds):
        _round(tmp / f"round{n}", per_machine, random.Random(seed + n), figures)
    return figures


def _round(tmp: Path, per_machine: int, rng: random.Random, figures: Figures) -> None:
    tmp.mkdir(parents=True)
    merged = 2 * per_machine
    with Shared(tmp, daemon=True) as shared:
        a = shared.seed("a", _tasks(merged, 2))
        b = shared.machine("b")
        jobs = {a: [f"t{i}" for i in range(1, merged + 1, 2)], b: [f"t{i}" for i in range(2, merged + 1, 2)]}
        tips = [_branch(m, t) for m, ts in jobs.items() for t in ts]
        edits = {a: f"t{merged + 1}", b: f"t{merged + 2}"}
        for m, task in edits.items():
            path = m.root / "TASKS.md"
            path.write_text(
                path.read_text().replace(f"Body of {task.replace('t', 'task ')}.", f"{m.name} edited.")
            )
        lock = threading.Lock()
        threads = [
            threading.Thread(target=_machine_merges, args=(m, shared.bare, ts, rng, figures, lock))
            for m, ts in jobs.items()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for m in (a, b):  # the one that finished first has not seen the other's last push yet
            m.wf("merge", jobs[m][-1], "--no-gate")
        _count(shared, (a, b), tips, merged, edits, figures)


def _count(
    shared: Shared,
    machines: tuple[Machine, ...],
    tips: list[str],
    merged: int,
    edits: dict[Machine, str],
    figures: Figures,
) -> None:
    for tip in tips:
        r = subprocess.run(
            ["git", "merge-base", "--is-ancestor", tip, "main"], cwd=shared.bare, capture_output=True
        )
        figures.lost_commits += r.returncode != 0
    done = git(shared.bare, "show", "main:DONE.md")
    ids = [ln.split()[2] for ln in done.splitlines() if ln.startswith("- ")]
    figures.lost_lines += sum(f"t{i}" not in ids for i in range(1, merged + 1))
    figures.double_lines += len(ids) - len(set(ids))
    tasks = git(shared.bare, "show", "main:TASKS.md")
    figures.lost_tasks += sum(f"## t{i}:" not in tasks for i in (merged + 1, merged + 2))
    figures.lost_tasks += sum(f"## t{i}:" in tasks for i in range(1, merged + 1))  # merged yet still open
    figures.marker_files += sum(any(x in text for x in MARKERS) for text in (done, tasks))
    for m in machines:
        here = (m.root / "TASKS.md").read_text()
        figures.lost_edits += f"{m.name} edited." not in here
        figures.marker_files += any(x in here for x in MARKERS)
        archive = m.root / "DONE.md"
        figures.marker_files += archive.exists() and any(x in archive.read_text() for x in MARKERS)


@pytest.mark.slow
def test_kills_of_wf_merge_on_two_racing_machines_lose_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("WF_KILL_SEED", random.randrange(1 << 30)))
    figures = kill_rounds(tmp_path, rounds=1, per_machine=3, seed=seed)  # more: bench/bench_xmerge_kills.py
    print(f"seed {seed}: {figures}")
    assert figures.merges == 6
    assert figures.lost() == 0, (seed, figures)
