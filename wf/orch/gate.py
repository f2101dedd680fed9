"""The gate: the project's own check (``gate`` in wf.toml, e.g. its test command), run
after each merge in the background, in its own tree ``.worktrees/_gate`` detached at the
new main commit, so it never holds a lane or touches the main checkout. Its result is
recorded per main commit in ``.wf/gate/<sha>.json``; a red result turns the next
``post`` into "done, gate red" and adds a P0 fix task.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from wf import gitops, worktrees
from wf import records as store
from wf.lock import project_lock
from wf.project import Project

TREE = "_gate"
TIMEOUT = 3600.0


def _dir(project: Project) -> Path:
    return project.wf_dir / "gate"


@dataclass(frozen=True)
class GateResult:
    """``.wf/gate/<sha>.json``: one run of the gate at one main commit."""

    sha: str
    cmd: str = ""
    exit: int | None = None
    ok: bool | None = None  # None: skipped (a newer main commit superseded it)
    started: str = ""
    duration_s: float = 0.0
    tail: str = ""
    handled: str | None = None  # the fix task added for a red result
    pid: int | None = None
    skipped: str | None = None


def results(project: Project) -> list[GateResult]:
    """Every recorded result, oldest first (CorruptRecord for one that cannot be trusted)."""
    folder = _dir(project)
    if not folder.is_dir():
        return []
    out = []
    for f in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
        rec = store.load(GateResult, f)
        if rec is not None:
            out.append(rec)
    return out


def corrupt_results(project: Project) -> list[store.CorruptRecord]:
    """The gate results that cannot be trusted (``wf doctor`` reports them)."""
    folder = _dir(project)
    return store.corrupt_in(GateResult, sorted(folder.glob("*.json")) if folder.is_dir() else [])


def unhandled_red(project: Project) -> list[str]:
    """The newest gate result, if it is red and no fix task was added for it yet (an
    older red that a newer green replaced does not count)."""
    done = [r for r in results(project) if r.ok is not None]
    if not done:
        return []
    newest = done[-1]
    return [newest.sha] if newest.ok is False and not newest.handled else []


def mark_handled(project: Project, sha: str, fix_task: str) -> None:
    path = _dir(project) / f"{sha}.json"
    rec = store.load(GateResult, path)
    if rec is not None:
        store.save(path, replace(rec, handled=fix_task))


def add_fix_task(
    project: Project,
    sha: str,
    lane: str,
    model: str | None,
    *,
    on_wait: Callable[[str], None] | None = None,
) -> str:
    """Add the P0 task that fixes a red gate at ``sha`` (saying what failed and where
    its log is), mark the red result handled, and return the task's id."""
    from wf import backlog as backlogmod
    from wf import ops

    result = store.load(GateResult, _dir(project) / f"{sha}.json") or GateResult(sha)
    tail = [ln.replace("```", "'''") for ln in result.tail.strip().splitlines()[-15:]]
    log = output_path(project, sha)
    where = log.relative_to(project.root) if log.is_relative_to(project.root) else log
    body = f"The gate `{project.config.gate}` failed at {sha[:12]} (exit {result.exit}).\n"
    body += f"Its whole output: {where}\n"
    if tail:
        body += "\n```\n" + "\n".join(tail) + "\n```\n"
    bl = backlogmod.load(project)
    title = f"Fix the gate: it fails at {sha[:12]}"
    base = f"fix-gate-{sha[:8]}"
    for t in bl.doc.tasks:  # added by a post that was stopped before it marked the result
        if t.title == title and (t.id == base or t.id.startswith(base + "-")):
            mark_handled(project, sha, t.id)
            return t.id
    taken = bl.doc.ids() | bl.archive.ids()
    task_id, n = base, 2
    while task_id in taken:
        task_id, n = f"{base}-{n}", n + 1
    fix = ops.add_task(
        project,
        title,
        task_id=task_id,
        body=body,
        prio=0,
        lane=lane,
        model=model,
        done=f"`{project.config.gate}` passes",
        on_wait=on_wait,
    )
    mark_handled(project, sha, fix)
    return fix


def pending(project: Project) -> str | None:
    """The main commit whose gate was started but has no result yet (None if none)."""
    if not project.config.gate or not project.is_git:
        return None
    sha = gitops.rev(project.root, worktrees.main_branch(project))
    if sha is None:
        return None
    started = (_dir(project) / f"{sha}.log").exists()
    return sha if started and not (_dir(project) / f"{sha}.json").exists() else None


def wait(project: Project, sha: str, timeout: float) -> bool:
    """Wait for the gate at ``sha`` to record its result; False on timeout."""
    deadline = time.monotonic() + timeout
    while not (_dir(project) / f"{sha}.json").exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
    return True


def start(project: Project) -> int | None:
    """Start the gate for the main branch's current commit in the background; returns
    the pid (None when no gate is set, or that commit already has a result)."""
    if not project.config.gate or not project.is_git:
        return None
    sha = gitops.rev(project.root, worktrees.main_branch(project))
    if sha is None or (_dir(project) / f"{sha}.json").exists():
        return None
    _dir(project).mkdir(parents=True, exist_ok=True)
    log = open(_dir(project) / f"{sha}.log", "wb")  # noqa: SIM115 - handed to the child
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "wf", "-C", str(project.root), "gate-run", sha],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()
    from wf import procs

    procs.keep(p.pid)
    return p.pid


def output_path(project: Project, sha: str) -> Path:
    """The gate command's whole output at ``sha``."""
    return _dir(project) / f"{sha}.out"


def run(project: Project, sha: str) -> GateResult:
    """Run the gate at ``sha`` in the gate's tree and record the result."""
    if not project.config.gate:
        raise ValueError("no gate")
    with project_lock(project.wf_dir, TIMEOUT, None, name="gate.lock"):  # one gate run at a time
        main_now = gitops.rev(project.root, worktrees.main_branch(project))
        if main_now != sha and main_now is not None and gitops.is_ancestor(project.root, sha, main_now):
            return GateResult(sha, skipped=f"superseded by {main_now[:12]}")
        return _run(project, sha)


def _run(project: Project, sha: str) -> GateResult:
    tree = project.worktrees_dir / TREE
    with project_lock(project.wf_dir, worktrees.WT_LOCK_TIMEOUT, None, name="wt.lock"):
        if not (tree / ".git").exists():
            worktrees.forget(project, tree)
            project.worktrees_dir.mkdir(exist_ok=True)
            gitops.worktree_add_detached(project.root, tree, sha)
        else:
            gitops.run(tree, "reset", "--quiet", "--hard")
            gitops.run(tree, "clean", "-fdq")  # wf's own tree: nothing of anyone's lives here
            gitops.detach(tree, sha)
    argv = shlex.split(project.config.gate)
    started = time.time()
    try:
        with open(output_path(project, sha), "wb") as out:
            p = subprocess.run(argv, cwd=tree, stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT,
                               stdin=subprocess.DEVNULL)  # fmt: skip
        code: int | None = p.returncode
        tail = output_path(project, sha).read_bytes()[-4000:].decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        code, tail = None, str(e)
    result = GateResult(
        sha=sha,
        cmd=project.config.gate or "",
        exit=code,
        ok=code == 0,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        duration_s=round(time.time() - started, 1),
        tail=tail,
        pid=os.getpid(),
    )
    store.save(_dir(project) / f"{sha}.json", result)
    return result
