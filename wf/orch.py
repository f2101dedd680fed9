"""The orchestration loop: ``wf orch pick`` / ``wf orch post`` / ``wf orch status``.

A lane has at most one active record, ``.wf/orch/<lane>.json`` (written atomically).
``pick`` chooses the lane's first runner-ready task, claims it, readies the lane's tree
and prints the spawn line and the worker prompt. ``post`` takes the worker's report,
post-checks a ``done`` (merging it if the worker did not), sets the task's status for
every other result, commits leftover bookkeeping, logs one line to ``out/wf-orch.log``
(and, given the worker's agent or session, its cost line), then picks the lane's next
task or prints ``stop lane <lane>: <why>``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from wf import backlog as backlogmod
from wf import gitops, ops, worktrees
from wf.errors import WfError
from wf.fsutil import append_line, atomic_write_text
from wf.lock import project_lock
from wf.project import Project
from wf.taskfile import check_id, utc_stamp

RESULTS = ("done", "awaiting", "handback", "wip", "sliced", "crashed")
MAX_RECOVERIES = 3  # interruptions and crashes together: a task is never re-picked without end
WHO = "worker"


class Record(NamedTuple):
    id: str
    lane: str
    model: str
    worktree: str | None
    branch: str
    base: str | None
    started: str
    state: str  # picking (claimed, tree not ready yet) or ready
    slice: bool = False
    solo: bool = False
    recovery: str | None = None
    crashes: int = 0
    pid: int | None = None  # a headless worker's pid
    run: str | None = None
    unit: str | None = None
    started_at: float = 0.0
    picker: int | None = None  # the pid of the pick that is readying the tree
    owner: int | None = None  # the pid of the wf orch run supervising it; None: interactive
    recoveries: int = 0  # re-picks in place, whatever the reason

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


class Pick(NamedTuple):
    lane: str
    stop: str | None
    record: Record | None
    prompt: str

    def text(self) -> str:
        if self.stop is not None:
            return f"stop lane {self.lane}: {self.stop}"
        return self.prompt


# ------------------------------------------------------------------ records


def _dir(project: Project) -> Path:
    return project.wf_dir / "orch"


def load(project: Project, lane: str) -> Record | None:
    try:
        data = json.loads((_dir(project) / f"{check_id(lane, 'lane')}.json").read_text("utf-8"))
        return Record(**{k: data.get(k, Record._field_defaults.get(k)) for k in Record._fields})
    except (OSError, ValueError, TypeError):
        return None


def save(project: Project, rec: Record) -> None:
    atomic_write_text(_dir(project) / f"{rec.lane}.json", json.dumps(rec.as_dict(), indent=1) + "\n")


def drop(project: Project, lane: str) -> None:
    (_dir(project) / f"{lane}.json").unlink(missing_ok=True)


def records(project: Project) -> list[Record]:
    folder = _dir(project)
    if not folder.is_dir():
        return []
    out = []
    for f in sorted(folder.glob("*.json")):
        rec = load(project, f.stem)
        if rec is not None:
            out.append(rec)
    return out


def stop_file(project: Project) -> Path:
    return project.out_dir / "wf-batch.stop"


# ------------------------------------------------------------------ prompts


def _template(name: str) -> str:
    return resources.files("wf").joinpath(f"data/{name}").read_text("utf-8")


def prompt_for(project: Project, rec: Record) -> str:
    lines = [
        f"spawn: wf-worker model={rec.model} background",
        f"Task: {rec.id}  Lane: {rec.lane}  Model: {rec.model}",
        f"Main tree: {project.root}  Worktree: {rec.worktree}  Branch: {rec.branch}",
    ]
    if rec.recovery:
        lines.append(f"Recovery: {rec.recovery}")
    if rec.slice:
        lines.append(
            f"Slice job: split {rec.id} into runner-ready tasks with 'wf add ... --parent {rec.id}'; "
            f"do not implement it; report result: sliced."
        )
    lines.append("Final message: the 4 report lines only.")
    return "\n".join(lines) + "\n"


def worker_instructions(slice_job: bool) -> str:
    """What a headless worker gets before the prompt lines (a subagent has it in its
    definition, agents/wf-worker.md)."""
    return _template("slice-prompt.md" if slice_job else "prompt.md")


# ------------------------------------------------------------------ pick


def pick(
    project: Project,
    lane: str | None = None,
    *,
    task_id: str | None = None,
    recovery: str | None = None,
    owner: int | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Pick:
    """Choose, claim and ready the next task of a lane (or of the first lane that has one).

    ``owner`` is the pid of a ``wf orch run`` that will supervise the worker (None: an
    interactive orchestrator). A record is only ever taken over when whoever held it is
    gone."""
    if lane is not None:
        check_id(lane, "lane")
    if task_id is not None:
        check_id(task_id, "task id")
    if recovery is not None and "\n" in recovery:
        raise WfError("--recovery WHY must be one line")
    if stop_file(project).exists() and recovery is None:
        return Pick(lane or "*", f"stop file {stop_file(project).relative_to(project.root)} exists", None, "")
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        bl = backlogmod.load(project)
        if lane is None:
            lane = _first_lane(project, bl, task_id)
            if lane is None:
                return Pick("*", "no runner-ready task in any free lane", None, "")
        if project.config.lane(lane) is None:
            raise WfError(f"no lane {lane!r} (wf lanes)")
        rec = load(project, lane)
        if recovery is not None:
            if rec is None:
                raise WfError(f"lane {lane} has no active task to recover")
            holder = _live_holder(rec)
            if holder:
                raise WfError(f"lane {lane}: {rec.id} is still being worked ({holder}); nothing to recover")
            if bl.archive.find(rec.id) is not None:
                raise WfError(
                    f"{rec.id} is already done (archived); post it: wf orch post {lane} --result done"
                )
            if rec.recoveries >= MAX_RECOVERIES:
                ops.set_status(project, rec.id, "blocked", f"re-picked {rec.recoveries} times", force=True)
                drop(project, lane)
                return Pick(lane, f"{rec.id} was re-picked {rec.recoveries} times; blocked", None, "")
            rec = rec._replace(
                recovery=recovery, state="picking", pid=None, owner=owner, recoveries=rec.recoveries + 1
            )
        elif rec is not None and (rec.state == "ready" or _live_holder(rec)):
            raise WfError(
                f"lane {lane} already has an active task {rec.id} (since {rec.started}); "
                f"post its report (wf orch post {lane} ...) or re-pick it with --recovery WHY"
            )
        elif rec is None:
            chosen = _choose(project, bl, lane, task_id)
            if isinstance(chosen, str):
                return Pick(lane, chosen, None, "")
            task = chosen
            rec = Record(
                id=task.id,
                lane=lane,
                model=str(task.model or _lane_model(project, lane)),
                worktree=None,
                branch=worktrees.branch_name(lane, task.id),
                base=None,
                started=utc_stamp(),
                state="picking",
                slice=bl.is_slice_job(task),
                solo=task.sessions == "solo",
                started_at=time.time(),
                owner=owner,
            )
        # else: a record left "picking" by a pick that died: finish that one, never a second
        rec = rec._replace(picker=os.getpid())
        save(project, rec)  # first the record, then the claim: a claim never exists without it
        task = backlogmod.load(project).doc.find(rec.id)
        if task is not None and task.status.state != "progress":
            ops.set_status(project, rec.id, "progress", WHO, force=rec.recovery is not None, on_wait=on_wait)
    tree = worktrees.allocate(project, lane, rec.id, on_wait=on_wait)
    rec = rec._replace(worktree=tree.path, base=tree.base, state="ready", picker=None)
    save(project, rec)
    return Pick(lane, None, rec, prompt_for(project, rec))


def _live_holder(rec: Record) -> str | None:
    """Who still works on a record's task: a live headless worker, the ``wf orch run``
    that owns it, or a pick still readying its tree (None if nobody)."""
    from wf import procs

    me = os.getpid()
    if rec.pid and procs.alive(rec.pid):
        return f"worker pid {rec.pid}"
    if rec.owner and rec.owner != me and procs.alive(rec.owner):
        return f"wf orch run pid {rec.owner}"
    if rec.state == "picking" and rec.picker and rec.picker != me and procs.alive(rec.picker):
        return f"a pick by pid {rec.picker}"
    return None


def _lane_model(project: Project, lane: str) -> str:
    ln = project.config.lane(lane)
    return ln.model if ln else lane


def _first_lane(project: Project, bl: backlogmod.Backlog, task_id: str | None) -> str | None:
    if task_id is not None:
        task = bl.doc.task(task_id)
        lane = bl.lane_of(task)
        if lane is None:
            raise WfError(f"task {task_id} has no lane (no Model or Lane)")
        return lane
    busy = {r.lane for r in records(project)}
    for ln in project.config.lanes:
        if (
            ln.name not in busy
            and bl.runner_ready(ln.name)
            and not isinstance(_choose(project, bl, ln.name, None), str)
        ):
            return ln.name
    return None


def _choose(project: Project, bl: backlogmod.Backlog, lane: str, task_id: str | None) -> Any:
    """The task to pick, or the reason to stop the lane (a string)."""
    others = [r for r in records(project) if r.lane != lane]
    solo_running = next((r for r in others if r.solo), None)
    if solo_running is not None:
        return f"solo task {solo_running.id} runs alone (lane {solo_running.lane})"
    ready = bl.runner_ready(lane)
    if task_id is not None:
        task = bl.doc.task(task_id)
        if bl.lane_of(task) != lane:
            raise WfError(f"task {task_id} is in lane {bl.lane_of(task)}, not {lane}")
        why = bl.blockers(task)
        if why:
            raise WfError(f"task {task_id} is not runner-ready: {'; '.join(why)}")
        head = task
    else:
        if not ready:
            counts = _lane_counts(bl, lane)
            return f"no runner-ready task ({counts})" if counts else "no runner-ready task"
        head = ready[0]
    if head.sessions == "solo" and others:
        return f"solo task {head.id} waits for other lanes"
    return head


def _lane_counts(bl: backlogmod.Backlog, lane: str) -> str:
    counts: dict[str, int] = {}
    for t in bl.doc.tasks:
        if bl.lane_of(t) == lane:
            st = t.status.state
            counts[st] = counts.get(st, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


# ------------------------------------------------------------------ post


class Posted(NamedTuple):
    lane: str
    task: str
    outcome: str
    commit: str | None
    lines: list[str]
    next: Pick | None

    def text(self) -> str:
        out = list(self.lines)
        if self.next is not None:
            out.append(self.next.text().rstrip("\n"))
        return "\n".join(out) + "\n"


def post(
    project: Project,
    lane: str,
    result: str,
    *,
    commit: str | None = None,
    note: str | None = None,
    agent: str | None = None,
    session: str | None = None,
    adapter: str | None = None,
    duration: float | None = None,
    no_pick: bool = False,
    task_id: str | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Posted:
    """Post a worker's report. Everything up to the next pick runs under the project
    lock (it changes TASKS.md and commits in the main checkout, where workers merge);
    the next pick, which readies a tree for seconds, runs after it."""
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        posted, recovery = _post(
            project, lane, result, commit=commit, note=note, agent=agent, session=session,
            adapter=adapter, duration=duration, no_pick=no_pick, task_id=task_id, on_wait=on_wait,
        )  # fmt: skip
    if posted.next is not None or (no_pick and recovery is None):
        return posted
    nxt = pick(project, lane, recovery=recovery, on_wait=on_wait)
    return posted._replace(next=nxt)


def _post(
    project: Project,
    lane: str,
    result: str,
    *,
    commit: str | None,
    note: str | None,
    agent: str | None,
    session: str | None,
    adapter: str | None,
    duration: float | None,
    no_pick: bool,
    task_id: str | None,
    on_wait: Callable[[str], None] | None,
) -> tuple[Posted, str | None]:
    """The post without its next pick; (the outcome, the recovery reason if the next
    pick is a recovery)."""
    check_id(lane, "lane")
    if result not in RESULTS:
        raise WfError(f"unknown result {result!r}: expected one of {', '.join(RESULTS)}")
    rec = load(project, lane)
    if rec is None:
        raise WfError(f"lane {lane} has no active task (wf orch status); nothing to post")
    if task_id is not None and task_id != rec.id:
        raise WfError(
            f"lane {lane} is working on {rec.id}, not {task_id}; nothing was changed (a repeated post?)"
        )
    if commit is not None and commit != "-" and not _commit_known(project, rec, commit):
        raise WfError(f"no commit {commit} in this repository; nothing was changed")
    note = " ".join((note or "").split())
    if len(note) > 300:  # a worker's words go into TASKS.md and into the orchestrator's context
        note = note[:297] + "..."
    if duration is None and rec.started_at:
        duration = max(0.0, time.time() - rec.started_at)
    lines: list[str] = []
    stop: str | None = None
    merge_commit: str | None = None
    task = rec.id
    if result != "done" and backlogmod.load(project).archive.find(task) is not None:
        # the worker merged its task before whatever it reported: it is done
        lines.append(f"{task} is already archived: posted as done")
        result = "done"
    outcome = result
    if result == "done":
        red, merge_commit = _post_check_done(project, rec, lines, on_wait)
        if red:
            outcome = "post-check-red"
            stop = f"post-check red for {task}: {red}"
            _set_status_if_open(project, task, "blocked", f"post-check red: {red}", on_wait)
        else:
            from wf import gate

            for sha in gate.unhandled_red(project):
                fix = ops.add_task(
                    project,
                    f"Fix the gate: {project.config.gate} fails at {sha[:12]}",
                    prio=0,
                    lane=lane,
                    model=rec.model,
                    done=f"{project.config.gate} passes",
                    on_wait=on_wait,
                )
                gate.mark_handled(project, sha, fix)
                outcome = "done-gate-red"
                lines.append(f"gate red at {sha[:12]}: added P0 task {fix}")
            gate.start(project)
    elif result == "sliced":
        bl = backlogmod.load(project)
        kids = [t.id for t in bl.doc.tasks if t.parent == task]
        if not kids:
            outcome = "post-check-red"
            stop = f"post-check red for {task}: reported sliced but no task has Parent: {task}"
            _set_status_if_open(project, task, "blocked", "post-check red: sliced without slices", on_wait)
        else:
            _set_status_if_open(project, task, "pending", None, on_wait)
            lines.append(f"{task} sliced into {', '.join(kids)}")
    elif result == "awaiting":
        _set_status_if_open(project, task, "awaiting", note or "a question (the worker gave none)", on_wait)
        stop = f"{task} awaits an answer: {note or '(no question given)'}"
    elif result == "wip":
        _set_status_if_open(project, task, "wip", note or "unfinished", on_wait)
        stop = f"{task} is wip: {note or '(no note)'}"
    elif result == "handback":
        _set_status_if_open(project, task, "pending", None, on_wait)
        current = backlogmod.load(project).doc.find(task)
        if current is not None:
            ops.add_note(project, task, f"handback: {note or '(no reason given)'}", on_wait=on_wait)
        if current is not None and current.model and current.model != rec.model:
            # the worker raised the model: go on; the next pick (of that model's lane) uses it
            outcome = "model-raised"
            lines.append(f"{task} goes back to the queue with model {current.model}")
        else:
            stop = f"{task} handed back: {note or '(no reason given)'}"
    elif result == "crashed":
        if rec.crashes == 0:
            rec = rec._replace(crashes=1)
            save(project, rec)
            outcome = "crashed-recovery"
            _commit_leftovers(project, task)
            _log(project, rec, outcome, None, duration)
            _cost(project, rec, agent, session, adapter, duration, done=False)
            why = f"crashed{': ' + note if note else ''}"
            return Posted(lane, task, outcome, None, [f"{task} crashed: one recovery pick"], None), why
        _set_status_if_open(project, task, "blocked", "crashed twice", on_wait)
        outcome = "crashed-twice"
        stop = f"{task} crashed twice"
    if result != "done" or stop is not None:
        _free_tree(project, rec)
    _commit_leftovers(project, task)
    _log(project, rec, outcome, merge_commit, duration)
    _cost(project, rec, agent, session, adapter, duration, done=outcome.startswith("done"))
    drop(project, lane)
    lines.insert(0, f"{task}: {outcome}" + (f" as {merge_commit[:12]}" if merge_commit else ""))
    if stop is not None:
        return Posted(lane, task, outcome, merge_commit, lines, Pick(lane, stop, None, "")), None
    return Posted(lane, task, outcome, merge_commit, lines, None), None


def _commit_known(project: Project, rec: Record, commit: str) -> bool:
    if not all(c in "0123456789abcdef" for c in commit.lower()) or not 4 <= len(commit) <= 64:
        return False
    if gitops.commit_exists(project.root, commit):
        return True
    tree = Path(rec.worktree) if rec.worktree else None
    return tree is not None and (tree / ".git").exists() and gitops.commit_exists(tree, commit)


def _set_status_if_open(
    project: Project, task: str, state: str, note: str | None, on_wait: Callable[[str], None] | None
) -> None:
    if backlogmod.load(project).doc.find(task) is not None:
        ops.set_status(project, task, state, note, force=True, on_wait=on_wait)


def _post_check_done(
    project: Project, rec: Record, lines: list[str], on_wait: Callable[[str], None] | None
) -> tuple[str | None, str | None]:
    """(what is red, or None; the merge commit)."""
    from wf import merge

    root = project.root
    main = worktrees.main_branch(project)
    entry = backlogmod.load(project).archive.find(rec.id)
    if entry is None:
        tip = gitops.rev(root, rec.branch)
        tree = Path(rec.worktree) if rec.worktree else None
        if (
            tip is None
            and tree is not None
            and (tree / ".git").is_dir()
            and gitops.branch_exists(tree, rec.branch)
        ):
            tip = gitops.rev(tree, f"refs/heads/{rec.branch}")  # a clone's branch, fetched by the merge
        if tip is None:
            return f"no branch {rec.branch} and {rec.id} is not archived", None
        main_sha = gitops.rev(root, main) or main
        if gitops.commit_exists(root, tip) and gitops.is_ancestor(root, tip, main_sha):
            return f"{rec.branch} has no commits of its own", None
        try:
            outcome = merge.merge(project, rec.branch, root, on_wait=on_wait)
        except WfError as e:
            return f"merge failed: {str(e).splitlines()[0]}", None
        lines.append(f"merged {rec.branch} (the worker had not)")
        lines.extend(f"note: {n}" for n in outcome.notes)
        entry = backlogmod.load(project).archive.find(rec.id)
    bl = backlogmod.load(project)
    if entry is None:
        return f"{rec.id} is not in the archive", None
    if gitops.branch_exists(root, rec.branch):
        return f"branch {rec.branch} still exists", entry.commit
    errors = bl.errors()
    if errors:
        return f"wf check has {len(errors)} error(s): {errors[0]}", entry.commit
    if rec.worktree and (Path(rec.worktree) / ".git").exists():
        tree = Path(rec.worktree)
        if gitops.dirty_paths(tree):
            return f"the worktree {tree} has uncommitted changes", entry.commit
        head = gitops.rev(tree, "HEAD")
        main_sha = gitops.rev(root, main) or main
        if head is None or not (
            gitops.commit_exists(root, head) and gitops.is_ancestor(root, head, main_sha)
        ):
            return f"the worktree's HEAD is not in {main}", entry.commit
    return None, entry.commit if entry.commit != "-" else None


def _free_tree(project: Project, rec: Record) -> None:
    """The worker is gone: its tree can take the lane's next task (its branch keeps the
    work; a tree with uncommitted changes stays busy by itself). A task branch with no
    commits of its own is deleted, so the next pick of the task starts from main."""
    root = project.root
    for wt in worktrees.records(project):
        if wt.task != rec.id:
            continue
        with project_lock(project.wf_dir, worktrees.WT_LOCK_TIMEOUT, None, name="wt.lock"):
            worktrees.release(project, wt.name)
            tree = Path(wt.path)
            tip = gitops.rev(root, rec.branch)
            main_sha = gitops.rev(root, worktrees.main_branch(project))
            if tip is None or main_sha is None or not gitops.is_ancestor(root, tip, main_sha):
                continue
            if (tree / ".git").is_file() and gitops.current_branch(tree) == rec.branch:
                if gitops.dirty_paths(tree):
                    continue
                gitops.detach(tree, tip)
            try:
                gitops.delete_branch(root, rec.branch)
            except gitops.GitError:
                pass


def _commit_leftovers(project: Project, task: str) -> None:
    """Commit TASKS.md and the archive in the main checkout if they changed (named
    explicitly: nothing else of the main checkout is swept in; no hooks)."""
    if not project.is_git:
        return
    root = project.root
    paths = [p for p in (project.config.tasks, project.config.archive) if (root / p).exists()]
    dirty = set(gitops.dirty_paths(root))
    paths = [p for p in paths if p in dirty]
    if not paths:
        return
    gitops.run(root, "add", "--", *paths)
    gitops.run(root, "commit", "--quiet", "--no-verify", "-m", f"wf: bookkeeping for {task}", "--", *paths)


def _log(project: Project, rec: Record, outcome: str, commit: str | None, duration: float | None) -> None:
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dur = "-" if duration is None else str(round(duration))
    append_line(
        project.out_dir / "wf-orch.log",
        f"ts={ts} lane={rec.lane} model={rec.model} id={rec.id} outcome={outcome} "
        f"commit={commit or '-'} dur_s={dur}",
    )


def _cost(
    project: Project,
    rec: Record,
    agent: str | None,
    session: str | None,
    adapter: str | None,
    duration: float | None,
    *,
    done: bool,
) -> None:
    from wf import costlog, usage

    found: tuple[usage.Cost, str] | None
    if agent:
        found = usage.for_agent(agent)
    elif session:
        found = usage.for_session(adapter or "claude", session)
    else:
        return
    if found is None:
        return
    cost, kind = found
    effort = None
    task = backlogmod.load(project).doc.find(rec.id)
    if task is not None and task.effort is not None:
        effort = f"{task.effort:g}"
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = costlog.line_for(
        cost,
        ts=ts,
        project=project.root.name,
        task_id=rec.id,
        agent=agent or session,
        kind=kind,
        lane=rec.lane,
        effort=effort,
        done=done,
        duration=duration,
    )
    costlog.append(project.root, line)


# ------------------------------------------------------------------ status


def status(project: Project) -> list[dict[str, Any]]:
    from wf import procs

    out = []
    now = time.time()
    for rec in records(project):
        alive = procs.alive(rec.pid) if rec.pid else None
        out.append(
            {
                **rec.as_dict(),
                "age_s": round(now - rec.started_at) if rec.started_at else None,
                "worker_alive": alive,
            }
        )
    return out
