"""The gate: the project's own check (``gate`` in wf.toml, e.g. its test command), run
after each merge (``wf orch post`` and a manual ``wf merge``) in the background, in its
own tree ``.worktrees/_gate`` detached at the new main commit, so it never holds a lane
or touches the main checkout. Its result is recorded per main commit in
``.wf/gate/<sha>.json``; a red result is shown at once (``wf orch run``'s output,
``wf orch status``, a batch's summary) with its command and the tail of its output, and
turns the next ``post`` into "done, gate red": a P0 fix task is added, or, while one
added for an earlier red gate is still open, a note on that one.
"""

from __future__ import annotations

import enum
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from wf.base import records as store
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.trees import gitops, worktrees

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
    finished: float = 0.0  # epoch seconds (0: a result written before wf kept it)


def results(project: Project) -> list[GateResult]:
    """Every recorded result, oldest first, by when it finished (CorruptRecord for one
    that cannot be trusted). Not by the file's time: marking a result handled rewrites it."""
    folder = _dir(project)
    if not folder.is_dir():
        return []
    out = []
    for f in folder.glob("*.json"):
        rec = store.load(GateResult, f)
        if rec is not None:
            out.append((rec.finished or f.stat().st_mtime, rec))
    return [rec for _, rec in sorted(out, key=lambda x: x[0])]


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


def latest(project: Project) -> GateResult | None:
    """The newest finished result (green or red; None if none)."""
    done = [r for r in results(project) if r.ok is not None]
    return done[-1] if done else None


def red_lines(project: Project, r: GateResult, tail: int = 5) -> list[str]:
    """What a red result says, for a person: the command, how it ended, where its whole
    output is, then the last lines of that output (each as ``| line``)."""
    how = f"exit {r.exit}" if r.exit is not None else "did not finish"
    out = output_path(project, r.sha)
    where = out.relative_to(project.root) if out.is_relative_to(project.root) else out
    lines = [f"gate red at {r.sha[:12]}: `{r.cmd}` {how} (whole output: {where})"]
    kept = [ln.rstrip() for ln in r.tail.splitlines() if ln.strip()][-tail:]
    return lines + [f"| {ln}" for ln in kept]


class Watch:
    """The gate results recorded since it was made (or last asked), for a loop that
    reports a red gate as soon as it is known."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.seen = self._names()

    def _names(self) -> set[str]:
        folder = _dir(self.project)
        return {f.name for f in folder.glob("*.json")} if folder.is_dir() else set()

    def red(self) -> list[GateResult]:
        """The red results recorded since the last call, oldest first."""
        names = self._names()
        new = names - self.seen
        self.seen = names
        if not new:
            return []
        return [r for r in results(self.project) if f"{r.sha}.json" in new and r.ok is False]


def mark_handled(project: Project, sha: str, fix_task: str) -> None:
    path = _dir(project) / f"{sha}.json"
    rec = store.load(GateResult, path)
    if rec is not None:
        store.save(path, replace(rec, handled=fix_task))


@dataclass(frozen=True)
class Fix:
    """What a red gate brought: a new P0 fix task, or a note on the one still open."""

    task: str
    added: bool  # False: the open fix task of an earlier red gate got a note

    def said(self, sha: str) -> str:
        if self.added:
            return f"gate red at {sha[:12]}: added P0 task {self.task}"
        return f"gate still red at {sha[:12]}: noted on the open fix task {self.task}"


def open_fix(project: Project) -> str | None:
    """The fix task added for a red gate that is still open (in TASKS.md), newest first."""
    from wf.tasks import backlog as backlogmod

    doc = backlogmod.load(project).doc
    for r in reversed(results(project)):
        if r.handled and doc.find(r.handled) is not None:
            return r.handled
    return None


def add_fix_task(
    project: Project,
    sha: str,
    lane: str,
    model: str | None,
    *,
    on_wait: Callable[[str], None] | None = None,
) -> Fix:
    """Add the P0 task that fixes a red gate at ``sha`` (saying what failed and where
    its log is), or, while the fix task of an earlier red gate is still open, add a note
    to that one instead (one open fix task, however many red commits); mark the red
    result handled."""
    from wf.tasks import backlog as backlogmod
    from wf.tasks import ops

    result = store.load(GateResult, _dir(project) / f"{sha}.json") or GateResult(sha)
    still = open_fix(project)
    if still is not None:
        _note(project, still, result, on_wait)
        mark_handled(project, sha, still)
        return Fix(still, False)
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
            return Fix(t.id, True)
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
    return Fix(fix, True)


def _note(project: Project, task_id: str, r: GateResult, on_wait: Callable[[str], None] | None) -> None:
    """A note on the open fix task: the gate is still red at a later commit. A hold on
    that task (handed back, waiting for a person) stays: the note is wf's, not theirs."""
    from wf.base import records as store
    from wf.orch import state
    from wf.tasks import backlog as backlogmod
    from wf.tasks import holds, ops
    from wf.tasks.holds import Held

    def text() -> str:
        doc = backlogmod.load(project).doc
        task = doc.find(task_id)
        return doc.text_of(task) if task is not None else ""

    rec = store.load(Held, holds.held_path(project.wf_dir, task_id))
    hold = rec if rec is not None and rec.digest == holds.task_digest(text()) else None
    last = next((ln.strip() for ln in reversed(r.tail.splitlines()) if ln.strip()), "")
    how = f"exit {r.exit}" if r.exit is not None else "did not finish"
    ops.add_note(
        project,
        task_id,
        f"the gate is still red at {r.sha[:12]} ({how}" + (f": {last[:200]}" if last else "") + ")",
        on_wait=on_wait,
    )
    if hold is not None:
        state.hold(project, task_id, text(), hold.since, hold.why)


class Started(enum.Enum):
    """What ``after_merge`` did about the gate."""

    STARTED = "started"  # running in the background at the new main commit
    SKIPPED = "skipped"  # --no-gate
    NONE = "none"  # no gate in wf.toml
    ALREADY = "already"  # that commit has a result, or a run of it is under way


def after_merge(project: Project, *, skip: bool = False) -> tuple[Started, str | None]:
    """Start the gate after a manual ``wf merge`` (unless ``skip``): (what happened,
    the main commit it is about)."""
    if not project.config.gate or not project.is_git:
        return Started.NONE, None
    sha = gitops.rev(project.root, worktrees.main_branch(project))
    if skip:
        return Started.SKIPPED, sha
    return (Started.STARTED if start(project) is not None else Started.ALREADY), sha


def _running(project: Project, sha: str) -> bool | None:
    """Whether the gate run started for ``sha`` still lives (None: no pid recorded)."""
    from wf.workers import procs

    try:
        pid, since = (_dir(project) / f"{sha}.pid").read_text().split()
        return procs.alive_as(int(pid), float(since))
    except (OSError, ValueError):
        return None


def pending(project: Project) -> str | None:
    """The main commit whose gate was started but has no result yet (None if none)."""
    if not project.config.gate or not project.is_git:
        return None
    sha = gitops.rev(project.root, worktrees.main_branch(project))
    if sha is None:
        return None
    started = (_dir(project) / f"{sha}.log").exists() and _running(project, sha) is not False
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
    if sha is None or (_dir(project) / f"{sha}.json").exists() or _running(project, sha):
        return None  # a result, or a run under way (a merge and its post both start it)
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
    from wf.base.fsutil import atomic_write_text
    from wf.workers import procs

    procs.keep(p.pid)
    atomic_write_text(_dir(project) / f"{sha}.pid", f"{p.pid} {procs.started(p.pid) or 0}\n")
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
        done = store.load(GateResult, _dir(project) / f"{sha}.json")
        if done is not None:  # a second start of the same commit waited for the first
            return done
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
        finished=time.time(),
    )
    store.save(_dir(project) / f"{sha}.json", result)
    return result
