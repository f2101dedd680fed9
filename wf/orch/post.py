"""``wf orch post``: a worker's report, checked, applied by the outcome table, logged.

``wf.orch.decide`` turns the report into an ``Outcome`` (post-checking a done, merging
it if the worker did not); ``TABLE`` says, per outcome, what becomes of the task and of
the lane; ``apply`` carries that out. The one place that commits is ``wf merge`` (the merge and
its archive commit): a status change, a note or a claim is never committed, and a
person's uncommitted edits of TASKS.md stay where they are.

A post is atomic and idempotent. Everything it can be refused for (the lane, the task,
the commit, a TASKS.md wf cannot read, the worker's transcript) is checked before its
first write. Then its writes come in an order where every prefix can be finished by the
next post: the merge (which finishes a half-done one), the task's status and note in one
write (a task that no longer carries its claim has them), the hold, the tree, the cost
line (one per task and worker), and last the orch log line, which marks the post as
made: a post run again after it does not log twice.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from wf.base import stamps
from wf.base.errors import WfError
from wf.base.fsutil import append_line, tail_text
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.orch import state
from wf.orch.decide import Decision, decide, denied_decision
from wf.orch.decide import Refused as Refused
from wf.orch.pick import CloudPlug, Pick, pick
from wf.orch.state import LaneRecord, Outcome, Result, Stop, StopReason
from wf.tasks import backlog as backlogmod
from wf.tasks import ops
from wf.tasks.taskfile import check_id, utc_stamp
from wf.trees import gitops, worktrees

if TYPE_CHECKING:
    from wf.cost.usage import Cost


class Next(enum.Enum):
    PICK = "pick"  # the lane goes on with its next task
    RECOVERY = "recovery"  # the same task again, in place
    STOP = "stop"


@dataclass(frozen=True)
class Rule:
    """What an outcome does: the task's new status (None: leave it), the lane's next step,
    the stop kind, whether the tree is freed, whether the loop holds the task back until
    a person changes it."""

    status: str | None
    next: Next
    stop: Stop | None = None
    free_tree: bool = True
    hold: bool = False


# Next.STOP is what an interactive orchestrator is told. A headless loop (wf orch run)
# holds the task of a stop whose kind is ``task_owned`` and goes on with the lane's next
# task; only two such stops in a row on one lane stop it (wf.orch.loop).
TABLE: dict[Outcome, Rule] = {
    Outcome.DONE: Rule(None, Next.PICK, free_tree=False),
    Outcome.DONE_GATE_RED: Rule(None, Next.PICK, free_tree=False),
    Outcome.MODEL_RAISED: Rule("pending", Next.PICK),
    Outcome.SLICED: Rule("pending", Next.PICK),
    Outcome.AWAITING: Rule("awaiting", Next.STOP, Stop.AWAITING),
    Outcome.HANDBACK: Rule("pending", Next.STOP, Stop.HANDBACK, hold=True),
    Outcome.WIP: Rule("wip", Next.STOP, Stop.WIP),
    Outcome.POST_CHECK_RED: Rule("blocked", Next.STOP, Stop.POST_CHECK_RED),
    Outcome.CRASHED_RECOVERY: Rule(None, Next.RECOVERY, free_tree=False),
    Outcome.CRASHED_TWICE: Rule("blocked", Next.STOP, Stop.CRASHED_TWICE),
    Outcome.RELEASED: Rule(None, Next.STOP, Stop.INFRA),
    Outcome.REDO: Rule(None, Next.PICK),  # the file is readable again: the lane goes on
    Outcome.LOST: Rule("pending", Next.STOP, Stop.LOST),  # the cloud lane (wf.cloud.lane)
}


class Posted(NamedTuple):
    lane: str
    task: str
    outcome: Outcome
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
    owner: int | None = None,
    on_wait: Callable[[str], None] | None = None,
    refused: Refused | None = None,
    cloud: CloudPlug | None = None,
) -> Posted:
    """Post a worker's report. Everything up to the next pick runs under the project
    lock (it changes TASKS.md and may merge in the main checkout); the next pick, which
    readies a tree for seconds, runs after it (``cloud``: as ``pick``'s)."""
    check_id(lane, "lane")
    try:
        res = Result(result)
    except ValueError:
        raise WfError(
            f"unknown result {result!r}: expected one of {', '.join(r.value for r in Result)}"
        ) from None
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        rec = state.load(project, lane)
        if rec is None:
            raise WfError(f"lane {lane} has no active task (wf orch status); nothing to post")
        if task_id is not None and task_id != rec.id:
            raise WfError(
                f"lane {lane} is working on {rec.id}, not {task_id}; nothing was changed (a repeated post?)"
            )
        if commit is not None and commit != "-" and not _commit_known(project, rec, commit):
            raise WfError(f"no commit {commit} in this repository; nothing was changed")
        if duration is None and rec.started_at:
            duration = max(0.0, time.time() - rec.started_at)
        logged = _logged(project, rec)
        if logged is not None:  # a post that was killed after its log line: finish it
            posted = _finish_logged(project, rec, logged)
            if logged is not Outcome.CRASHED_RECOVERY:
                return posted
            d = Decision(logged, None, None, None, ())
        else:
            # what can refuse the post is read before its first write: TASKS.md (a person's
            # save wf cannot read stops it here) and the worker's transcript
            backlogmod.load(project)
            _read_records(project)
            spent = _read_cost(project, rec, agent, session, adapter)
            d = decide(project, rec, res, _one_line(note), on_wait)
            d = denied_decision(d, rec.id, refused, _one_line(note))
            posted = apply(project, rec, d, spent=spent, duration=duration)
    _settle_claim(project, rec.id)
    rule = TABLE[d.outcome]
    if project.config.shared:
        posted = _synced(project, posted, on_wait)
    if rule.next is Next.RECOVERY:
        why = f"crashed{': ' + d.status_note if d.status_note else ''}"
        return posted._replace(
            next=pick(project, lane, recovery=why, owner=owner, on_wait=on_wait, cloud=cloud, synced=True)
        )
    if rule.next is Next.PICK and not no_pick:
        return posted._replace(
            next=pick(project, lane, owner=owner, on_wait=on_wait, cloud=cloud, synced=True)
        )
    return posted


def _synced(project: Project, posted: Posted, on_wait: Callable[[str], None] | None) -> Posted:
    """The post shared with the other machines (wf sync); the post stands if that fails
    (the next sync carries it), and says why in its lines."""
    from wf.trees import sync  # only with a shared remote

    try:
        line = sync.if_shared(project, on_wait=on_wait)
    except WfError as e:
        line = f"not synced: {e}"
    return posted._replace(lines=[*posted.lines, line]) if line else posted


def release(project: Project, lane: str, why: str, *, on_wait: Callable[[str], None] | None = None) -> Posted:
    """An infrastructure failure (the tool could not start, is not logged in, is out of
    credit, offline, refused the model): the claim is released and the task is exactly as
    it was before the pick (no note, no crash count, no commit); the lane stops."""
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        rec = state.load(project, lane)
        if rec is None:
            raise WfError(f"lane {lane} has no active task; nothing to release")
        task = backlogmod.load(project).doc.find(rec.id)
        if task is not None and task.status.state == "progress":
            _restore_status(project, rec.id, rec.prior_status, on_wait)
        d = Decision(Outcome.RELEASED, None, why, None, ())
        posted = apply(project, rec, d, spent=None, duration=None)
    _settle_claim(project, rec.id)
    return posted


def _settle_claim(project: Project, task_id: str) -> None:
    """With a shared remote: this machine's claim ref of a task no longer in progress is
    released (offline it stays, and wf check lists it)."""
    if project.config.shared:
        from wf.trees import claims

        claims.settle(project, task_id)


def _restore_status(
    project: Project, task_id: str, value: str | None, on_wait: Callable[[str], None] | None
) -> None:
    """Put back the Status line a claim replaced, as it was (no line: none)."""
    from wf.tasks import edits

    def change(bl: backlogmod.Backlog) -> ops.Change:
        return ops.Change(tasks=edits.set_field(bl.doc, task_id, "status", value))

    ops.transact(project, change, on_wait=on_wait)


def _one_line(note: str | None) -> str:
    """The worker's note as one line of text: bytes that were not UTF-8 (a report read from
    a pipe) become U+FFFD, never a refused post."""
    note = note or ""
    try:
        raw = note.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = note.encode("utf-8", "replace")
    note = " ".join(raw.decode("utf-8", "replace").split())
    return note[:297] + "..." if len(note) > 300 else note  # it goes into TASKS.md and a context


def apply(
    project: Project,
    rec: LaneRecord,
    d: Decision,
    *,
    spent: Spent | None,
    duration: float | None,
) -> Posted:
    """Carry out the outcome table's row for a decision (under the project lock), each
    write done so that a retry after a kill anywhere writes nothing twice."""
    rule = TABLE[d.outcome]
    task_id = rec.id
    task = backlogmod.load(project).doc.find(task_id)
    released = d.outcome in (Outcome.RELEASED, Outcome.REDO)
    if released and task is not None and task.status.state == "progress":
        _restore_status(project, task_id, rec.prior_status, None)  # the claim, as if never made
    if task is not None and (rule.status is not None or d.task_note):
        _mark_task(project, task_id, rule.status, d.status_note, d.task_note)
    if rule.hold:
        now = backlogmod.load(project).doc.find(task_id)
        if now is not None:
            text = backlogmod.load(project).doc.text[now.span[0] : now.span[1]]
            state.hold(project, task_id, text, utc_stamp(), d.outcome.value)  # since: handed back
    if rule.free_tree:
        _free_tree(project, rec)
    if spent is not None:
        _write_cost(project, rec, spent, duration, done=d.outcome.done)
    _log(project, rec, d.outcome, d.commit, duration)
    if rule.next is Next.RECOVERY:
        state.save(project, rec.but(crashes=1))
    else:
        state.drop(project, rec.lane)
    lines = [f"{task_id}: {d.outcome.value}" + (f" as {d.commit[:12]}" if d.commit else ""), *d.lines]
    if d.outcome is Outcome.CRASHED_RECOVERY:
        lines = list(d.lines)
    stop = None
    if rule.stop is not None:
        stop = Pick(rec.lane, StopReason(rule.stop, d.stop_text or d.outcome.value), None, "")
    return Posted(rec.lane, task_id, d.outcome, d.commit, lines, stop)


def _commit_known(project: Project, rec: LaneRecord, commit: str) -> bool:
    if not all(c in "0123456789abcdef" for c in commit.lower()) or not 4 <= len(commit) <= 64:
        return False
    if gitops.commit_exists(project.root, commit):
        return True
    tree = Path(rec.worktree) if rec.worktree else None
    return tree is not None and (tree / ".git").exists() and gitops.commit_exists(tree, commit)


def _free_tree(project: Project, rec: LaneRecord) -> None:
    """The worker is gone: its tree can take the lane's next task. The task's branch is
    kept while it has commits main does not (two guards: this is-merged check, and
    ``git branch -d``, which refuses unmerged work); a branch with no commits of its own
    is deleted, so the next pick of the task starts from main."""
    root = project.root
    for wt in worktrees.records(project):
        if wt.task != rec.id:
            continue
        with project_lock(project.wf_dir, worktrees.WT_LOCK_TIMEOUT, None, name="wt.lock"):
            worktrees.release(project, wt.name)
            tree = Path(wt.path)
            tip = gitops.rev(root, rec.branch)
            if tip is None or has_own_work(project, tip):
                continue  # the branch holds work main does not have: keep it
            if (tree / ".git").is_file() and gitops.current_branch(tree) == rec.branch:
                if gitops.dirty_paths(tree):
                    continue
                gitops.detach(tree, tip)
            try:
                gitops.delete_branch(root, rec.branch)
            except gitops.GitError:
                pass


def has_own_work(project: Project, tip: str) -> bool:
    """Whether a branch at ``tip`` holds commits the main branch does not (or main is
    unknown: then it is kept too)."""
    main_sha = gitops.rev(project.root, worktrees.main_branch(project))
    return main_sha is None or not gitops.is_ancestor(project.root, tip, main_sha)


def _log_key(rec: LaneRecord) -> str:
    return f"lane={rec.lane} model={rec.model} id={rec.id} pick={rec.pick_id or rec.started}"


def _logged(project: Project, rec: LaneRecord) -> Outcome | None:
    """The outcome this pick's post already logged (a post killed after its log line), or
    None. A crash that led to a recovery pick logs with the same pick stamp: only a final
    outcome counts."""
    path = project.out_dir / "wf-orch.log"
    tail = tail_text(path, 65536)
    key = _log_key(rec) + " outcome="
    for line in reversed(tail.splitlines()):
        at = line.find(key)
        if at >= 0:
            word = line[at + len(key) :].split(" ", 1)[0]
            try:
                outcome = Outcome(word)
            except ValueError:
                continue
            if outcome is not Outcome.CRASHED_RECOVERY or rec.crashes == 0:
                return outcome  # a crash logged, but killed before its record counted it
            return None
    return None


def _finish_logged(project: Project, rec: LaneRecord, logged: Outcome) -> Posted:
    """A post killed after its log line: only its lane record is left to write."""
    said = [f"{rec.id}: {logged.value} (posted already)"]
    if logged is Outcome.CRASHED_RECOVERY:
        state.save(project, rec.but(crashes=1))
        return Posted(rec.lane, rec.id, logged, None, said, None)
    state.drop(project, rec.lane)
    stop = TABLE[logged].stop
    nxt = None if stop is None else Pick(rec.lane, StopReason(stop, f"{rec.id}: {logged.value}"), None, "")
    return Posted(rec.lane, rec.id, logged, None, said, nxt)


def _log(
    project: Project, rec: LaneRecord, outcome: Outcome, commit: str | None, duration: float | None
) -> None:
    ts = stamps.now_iso()
    dur = "-" if duration is None else str(round(duration))
    append_line(
        project.out_dir / "wf-orch.log",
        f"ts={ts} {_log_key(rec)} outcome={outcome.value} commit={commit or '-'} dur_s={dur}",
    )


@dataclass(frozen=True)
class Spent:
    """A worker's cost, read from its transcript before the post writes anything."""

    cost: Cost
    kind: str
    agent: str
    effort: str | None


def _read_records(project: Project) -> None:
    """The state records a post reads after it started writing (the gate's results, the
    trees' records): one that cannot be trusted refuses the post here (CorruptRecord,
    ``wf doctor --fix``), before the merge or the note, not half-way."""
    from wf.orch import gate

    gate.results(project)
    worktrees.records(project)


def _read_cost(
    project: Project, rec: LaneRecord, agent: str | None, session: str | None, adapter: str | None
) -> Spent | None:
    """The worker's cost (None: no --agent or session, or a headless session's transcript
    is not found). A transcript named by --agent that is missing refuses the post, with
    nothing changed."""
    from wf.cost import usage

    found: tuple[usage.Cost, str] | None
    if agent:
        try:
            found = usage.for_agent(agent)
        except WfError as e:
            raise WfError(
                f"{e}; nothing was changed (post again once it is there, or without --agent "
                "to leave its cost out)"
            ) from None
    elif session:
        from wf import adapters

        found = adapters.session_cost(adapter or "claude", session)
    else:
        return None
    if found is None:
        return None
    task = backlogmod.load(project).doc.find(rec.id)
    effort = f"{task.effort:g}" if task is not None and task.effort is not None else None
    return Spent(found[0], found[1], str(agent or session), effort)


def _write_cost(
    project: Project, rec: LaneRecord, spent: Spent, duration: float | None, *, done: bool
) -> None:
    """The cost line, unless an earlier try of this post wrote it (a task and a worker
    have one line: a worker's cost is never counted twice)."""
    from wf.cost import costlog

    if costlog.has_line(project.root, rec.id, spent.agent):
        return
    line = costlog.line_for(
        spent.cost,
        ts=stamps.now_iso(),
        project=project.root.name,
        task_id=rec.id,
        agent=spent.agent,
        kind=spent.kind,
        lane=rec.lane,
        effort=spent.effort,
        done=done,
        duration=duration,
    )
    costlog.append(project.root, line)


def _mark_task(
    project: Project, task_id: str, status: str | None, status_note: str | None, note: str | None
) -> None:
    """The task's new status and its dated note, in one write. Only a task that still
    carries its claim is changed: one whose status is no longer "in progress" had this
    write from an earlier try of the same post (killed after it), which is not repeated."""
    from wf.tasks import edits

    def change(bl: backlogmod.Backlog) -> ops.Change:
        task = bl.doc.find(task_id)
        if task is None or task.status.state != "progress":
            return ops.Change()
        doc = bl.doc
        if status is not None:
            value = None if status == "pending" else f"{status}: {status_note or status}"
            doc = edits.set_field(doc, task_id, "status", value)
        if note:
            doc = edits.add_note(doc, task_id, note)
        return ops.Change(tasks=doc)

    ops.transact(project, change)
