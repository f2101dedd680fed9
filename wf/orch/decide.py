"""What a worker's report comes to: ``decide`` turns it into a ``Decision`` (an
``Outcome``, the words for the task's status and for the lane's stop), post-checking a
done and merging it if the worker did not; ``denied_decision`` makes a worker whose tool
calls were refused a handback naming the grant. ``wf.orch.post`` applies a decision
through the outcome table; nothing here writes TASKS.md but the merge and a gate's fix
task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wf.base.errors import WfError
from wf.base.project import Project
from wf.orch.state import LaneRecord, Outcome, Result
from wf.tasks import backlog as backlogmod
from wf.trees import gitops, worktrees

if TYPE_CHECKING:
    from wf.adapters.base import Denial

# The Status text of a task blocked for two crashes: wf's own, compared whole when wf
# unblocks it (a person's change to it keeps it blocked).
CRASHED_TWICE_NOTE = "crashed twice"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    status_note: str | None  # the status's note (awaiting: the question; blocked: why)
    stop_text: str | None
    commit: str | None
    lines: tuple[str, ...]
    task_note: str | None = None  # a dated Note: line to add (handback)


@dataclass(frozen=True)
class Refused:
    """Tool calls a worker's tool refused for want of a grant: which tool (the adapter),
    the calls, and the wf.toml key that grants them."""

    tool: str
    calls: tuple[Denial, ...]
    grant: str

    def text(self) -> str:
        from wf.adapters.base import denied_words

        return f"{denied_words(self.tool, self.calls)} (grant it in {self.grant})"


# a report that did not finish the task, when calls were refused: the grant is the cause
_DENIAL_OVERRIDES = frozenset(
    {Outcome.POST_CHECK_RED, Outcome.HANDBACK, Outcome.WIP, Outcome.CRASHED_RECOVERY, Outcome.CRASHED_TWICE}
)


def denied_decision(d: Decision, task: str, refused: Refused | None, note: str) -> Decision:
    """A worker whose calls were refused and whose work did not land is handed back with a
    note naming the refused calls and their grant; a done that passed its post-checks (or
    a question, a slice, a raised model) stands: the post-checks judge, not the exit code."""
    if refused is None or not refused.calls or d.outcome not in _DENIAL_OVERRIDES or d.commit:
        return d
    why = refused.text()
    said = d.status_note if d.outcome is Outcome.POST_CHECK_RED else note
    full = f"{why}; {said}" if said else why
    return Decision(Outcome.HANDBACK, None, f"{task} handed back: {full}", None, d.lines, f"handback: {full}")


def decide(
    project: Project, rec: LaneRecord, res: Result, note: str, on_wait: Callable[[str], None] | None
) -> Decision:
    """The outcome of a report. A done (or any report of a task that is archived: it
    merged before it reported) is post-checked and merged; a report made while TASKS.md
    could not be read is the file's problem (redo); any other is what the worker said."""
    task = rec.id
    lines: list[str] = []
    if res is not Result.DONE and backlogmod.load(project).archive.find(task) is not None:
        lines.append(f"{task} is already archived: posted as done")  # it merged before reporting
        res = Result.DONE
    if res is Result.DONE:
        return _decide_done(project, rec, lines, on_wait)
    if res is not Result.SLICED:
        trouble = _file_trouble(project, rec, res)
        if trouble is not None:
            name = project.config.tasks
            return Decision(
                Outcome.REDO,
                None,
                None,
                None,
                (*lines, f"{task} was not handed back: {name} could not be read during its run "
                 f"({trouble}); the task is as it was, and the lane picks again"),
            )  # fmt: skip
    return _decide_said(project, rec, res, note, lines)


def _decide_done(
    project: Project, rec: LaneRecord, lines: list[str], on_wait: Callable[[str], None] | None
) -> Decision:
    """A done: post-checked (merged here if the worker did not); a red gate on main adds
    its fix task to the lane."""
    red, merge_commit = _post_check_done(project, rec, lines, on_wait)
    if red:
        return Decision(
            Outcome.POST_CHECK_RED,
            f"post-check red: {red}",
            f"post-check red for {rec.id}: {red}",
            merge_commit,
            tuple(lines),
        )
    from wf.orch import gate

    outcome = Outcome.DONE
    for sha in gate.unhandled_red(project):
        fix = gate.add_fix_task(project, sha, rec.lane, rec.model, on_wait=on_wait)
        outcome = Outcome.DONE_GATE_RED
        lines.append(fix.said(sha))
    gate.start(project)
    return Decision(outcome, None, None, merge_commit, tuple(lines))


def _decide_said(project: Project, rec: LaneRecord, res: Result, note: str, lines: list[str]) -> Decision:
    """A report that is not a done: a slice (checked: its slices exist), a question, wip,
    a handback (or a model the worker raised), a crash (one recovery, then blocked)."""
    task = rec.id
    if res is Result.SLICED:
        kids = [t.id for t in backlogmod.load(project).doc.tasks if t.parent == task]
        if not kids:
            why = "reported sliced but no task has Parent: " + task
            return Decision(
                Outcome.POST_CHECK_RED,
                "post-check red: sliced without slices",
                f"post-check red for {task}: {why}",
                None,
                tuple(lines),
            )
        return Decision(Outcome.SLICED, None, None, None, (*lines, f"{task} sliced into {', '.join(kids)}"))
    if res is Result.AWAITING:
        return Decision(
            Outcome.AWAITING,
            note or "a question (the worker gave none)",
            f"{task} awaits an answer: {note or '(no question given)'}",
            None,
            tuple(lines),
        )
    if res is Result.WIP:
        return Decision(
            Outcome.WIP, note or "unfinished", f"{task} is wip: {note or '(no note)'}", None, tuple(lines)
        )
    if res is Result.HANDBACK:
        current = backlogmod.load(project).doc.find(task)
        handback = f"handback: {note or '(no reason given)'}"
        if current is not None and current.model and current.model != rec.model:
            # the worker raised the model: go on; the next pick (of that model's lane) uses it
            lines.append(f"{task} goes back to the queue with model {current.model}")
            return Decision(Outcome.MODEL_RAISED, None, None, None, tuple(lines), handback)
        return Decision(
            Outcome.HANDBACK,
            None,
            f"{task} handed back: {note or '(no reason given)'}",
            None,
            tuple(lines),
            handback,
        )
    # crashed: one recovery pick, then blocked
    if rec.crashes == 0:
        return Decision(
            Outcome.CRASHED_RECOVERY, note or None, None, None, (f"{task} crashed: one recovery pick",)
        )
    return Decision(Outcome.CRASHED_TWICE, CRASHED_TWICE_NOTE, f"{task} crashed twice", None, tuple(lines))


def _file_trouble(project: Project, rec: LaneRecord, res: Result) -> str | None:
    """What was wrong with TASKS.md if wf met it unreadable (not UTF-8: a person's save)
    while this worker ran, and the worker gave up (not a done, a slice, or a model it
    raised, which it could only make with the file readable): then its report is the
    file's problem, never the task's. None otherwise."""
    from wf.base import settle

    if not rec.started_at:
        return None
    why = settle.unreadable_since(project.wf_dir, project.config.tasks, rec.started_at)
    if why is None:
        return None
    task = backlogmod.load(project).doc.find(rec.id)
    if res is Result.HANDBACK and task is not None and task.model and task.model != rec.model:
        return None
    return why


def _post_check_done(
    project: Project, rec: LaneRecord, lines: list[str], on_wait: Callable[[str], None] | None
) -> tuple[str | None, str | None]:
    """(what is red, or None; the merge commit). The post-checks of a done: archived,
    branch gone, ``wf check`` clean, tree clean, its HEAD in main."""
    from wf.trees import merge

    root = project.root
    main = worktrees.main_branch(project)
    entry = backlogmod.load(project).archive.find(rec.id)
    tip = gitops.rev(root, rec.branch)
    # Archived, but the branch is still there and in main: a merge killed after its
    # archive (commit), before it parked the tree and deleted the branch. Finish it.
    half_done = (
        entry is not None
        and tip is not None
        and gitops.is_ancestor(root, tip, gitops.rev(root, main) or main)
    )
    if entry is None or half_done:
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
        if (
            gitops.commit_exists(root, tip)
            and gitops.is_ancestor(root, tip, main_sha)
            and gitops.find_merge_of(root, main_sha, tip) is None
        ):
            return f"{rec.branch} has no commits of its own", None
        try:
            outcome = merge.merge(project, rec.branch, root, on_wait=on_wait)
        except WfError as e:
            return f"merge failed: {str(e).splitlines()[0]}", None
        lines.append(
            f"merged {rec.branch} (the worker had not)"
            if not outcome.already
            else f"finished the merge of {rec.branch}"
        )
        lines.extend(f"note: {n}" for n in outcome.notes)
        entry = backlogmod.load(project).archive.find(rec.id)
    bl = backlogmod.load(project)
    if entry is None:
        return f"{rec.id} is not in the archive", None
    if gitops.branch_exists(root, rec.branch):
        return f"branch {rec.branch} still exists", entry.commit
    # a person's typo in another task is that task's problem, not this one's
    errors = bl.structural_errors() + bl.task_errors(rec.id)
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
