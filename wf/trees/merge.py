"""``wf merge``: bring a task's branch into the main branch without ever losing work.

The merge is computed in memory first (``git merge-tree``): a conflict changes nothing
anywhere. The merge commit ``<id>: <title>`` is then created with ``commit-tree`` and the
main checkout fast-forwarded to it (git refuses, changing nothing, if that would touch a
file with uncommitted changes). Backup refs under ``refs/wf/backup/`` keep both tips
first. Then the task is archived, the bookkeeping (TASKS.md and the archive, named
explicitly) committed, the tree moved to a detached HEAD at the new main commit, and the
branch deleted with ``git branch -d``, which refuses unmerged work.

Each step looks at the state before acting, so running ``wf merge`` again after it
succeeded, failed, or was killed anywhere finishes the job or says what is left.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from wf.base import settle
from wf.base.errors import ParseError, WfError
from wf.base.fsutil import read_bytes
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.tasks import backlog as backlogmod
from wf.tasks import ops
from wf.tasks.taskfile import check_id
from wf.trees import gitops, worktrees, xmerge
from wf.trees.books import ARCHIVE_TRAILER, archived_by, bookkeeping_files


class MergeConflict(WfError):
    def __init__(self, branch: str, main: str, paths: list[str]) -> None:
        self.branch = branch
        self.paths = paths
        listed = "\n".join(f"  {p}" for p in paths)
        super().__init__(
            f"merging {branch} into {main} conflicts; nothing was changed (main and the branch are as "
            f"they were). Conflicting paths:\n{listed}\nRebase or merge {main} into the branch, "
            "resolve, commit, and run wf merge again."
        )


class DirtyMain(WfError):
    def __init__(self, root: Path, paths: list[str]) -> None:
        self.paths = paths
        listed = "\n".join(f"  {p}" for p in paths[:20])
        super().__init__(
            f"the main checkout {root} has uncommitted changes to files this merge changes; "
            f"nothing was changed (wf never stashes or overwrites them). Commit or revert:\n{listed}"
        )


class NotArchived(WfError):
    """The merge commit is on main, but TASKS.md has errors that stop every write."""

    def __init__(
        self, project: Project, branch: str, main: str, task_id: str, commit: str | None, cause: ParseError
    ) -> None:
        self.task_id = task_id
        self.commit = commit
        self.cause = cause
        super().__init__(
            f"merged {branch} into {main} as {(commit or '-')[:12]}, but {task_id} is not archived: "
            f"{project.config.tasks} has errors that stop every write:\n{cause}\n"
            f"Fix them (wf check), then run wf merge {task_id} again (or wf doctor --fix) to archive it."
        )


class Parked(enum.Enum):
    """What became of the task's tree after the merge."""

    DETACHED = "detached"  # at the new main commit: free for the lane's next task
    KEPT = "kept"  # left as it was (its .git is missing, it holds uncommitted work, or a
    # clone kept its branch): it stays the task's until a person looks


class Outcome(NamedTuple):
    task: str
    branch: str
    merge_commit: str | None
    already: bool  # the branch was already in main when this run started
    archived: str | None
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


def repair(project: Project, main: str) -> list[str]:
    """Finish what a killed archive commit left half-made, and say what was done.

    ``gitops.commit_files`` moves the branch first and then updates the real index: a
    ``kill -9`` in between leaves the index staging the old TASKS.md and archive (the
    next ``git commit`` would revert the archiving). When the main commit is wf's own
    archive commit and an index entry (or a working-tree file) of those two files still
    holds exactly the version before it, that entry is set to the commit's version.
    Temporary index files of processes that are gone are removed."""
    root = project.root
    done: list[str] = []
    for stray in gitops.stale_indexes(gitops.git_dir(root)):
        stray.unlink(missing_ok=True)
        done.append(f"removed {stray.name}, left by a killed wf")
    if not archived_by(root, main) or gitops.rev(root, f"{main}^") is None:
        return done
    paths = (project.tasks_in_git, project.archive_in_git)
    staged: dict[str, str] | None = None  # path -> its blob in the index, read once
    for path in paths:
        now = gitops.resolve(root, f"{main}:{path}")
        before = gitops.resolve(root, f"{main}^:{path}")
        if now == before:
            continue
        if staged is None:
            listed = gitops.out(root, "ls-files", "--stage", "-z", "--", *paths).split("\0")
            staged = {}
            for ln in listed:  # "mode blob stage\tpath"; the first stage of a conflict
                if "\t" in ln:
                    staged.setdefault(ln.split("\t", 1)[1], ln.split()[1])
        index = staged.get(path)
        if index == before:
            if now is None:
                gitops.run(root, "update-index", "--force-remove", "--", path)
            else:
                gitops.run(root, "update-index", "--add", "--cacheinfo", f"100644,{now},{path}")
            done.append(f"the index staged {path} as before the archive commit; set to {main}'s")
        work = read_bytes(root / path)
        if now is not None and work == (gitops.read_blob(root, before) if before is not None else None):
            settle.replace_checked(root / path, gitops.read_blob(root, now), work, project.lock_timeout)
            done.append(f"{path} held the version before the archive commit; set to {main}'s")
    return done


def resolve(project: Project, target: str | None, cwd: Path) -> tuple[str, str]:
    """(lane, id) of what to merge: an id, a ``<lane>/<id>`` branch, or the branch of
    the tree ``cwd`` is in."""
    if target:
        if "/" in target:
            return worktrees.parse_branch(target)
        task_id = check_id(target, "task id")
        for held in worktrees.records(project):
            if held.task == task_id:
                return held.lane, task_id
        found = gitops.branches(project.root, f"*/{task_id}")
        if len(found) == 1:
            return worktrees.parse_branch(found[0])
        if found:
            raise WfError(f"several branches end in /{task_id}: {', '.join(found)}; name one")
        bl = backlogmod.load(project)
        task = bl.doc.find(task_id)
        if task is not None and bl.lane_of(task):
            return str(bl.lane_of(task)), task_id
        entry = bl.archive.find(task_id)
        if entry is not None and entry.lane != "-":
            return entry.lane, task_id
        raise WfError(f"no branch for task {task_id} (looked for */{task_id})")
    here = cwd.resolve()
    wt_dir = project.worktrees_dir.resolve()
    if wt_dir not in here.parents:  # outside .worktrees/, or the folder itself (no tree)
        raise WfError("give an ID or a <lane>/<id> branch, or run wf merge inside the task's worktree")
    name = here.relative_to(wt_dir).parts[0]
    rec = worktrees.load_record(project, name)
    if rec is not None and rec.branch:
        return worktrees.parse_branch(rec.branch)
    branch = gitops.current_branch(wt_dir / name)
    if branch is None:
        raise WfError(f"{wt_dir / name} is not on a task branch; give an ID or a <lane>/<id> branch")
    return worktrees.parse_branch(branch)


def _tree_of(project: Project, task_id: str, branch: str) -> worktrees.Record | None:
    for found in worktrees.records(project):
        if found.task == task_id or found.branch == branch:
            return found
    for name in worktrees.tree_names(project):
        path = project.worktrees_dir / name
        if (path / ".git").exists() and gitops.current_branch(path) == branch:
            return worktrees.load_record(project, name) or worktrees.Record(
                name,
                branch.split("/")[0],
                str(path),
                task_id,
                branch,
                None,
                worktrees.isolation_of(path),
                "",
            )
    return None


def merge(
    project: Project,
    target: str | None,
    cwd: Path,
    *,
    on_wait: Callable[[str], None] | None = None,
) -> Outcome:
    lane, task_id = resolve(project, target, cwd)
    branch = worktrees.branch_name(lane, task_id)
    root = project.root
    notes: list[str] = []
    with project_lock(project.wf_dir, project.lock_timeout, on_wait):
        main = worktrees.main_branch(project)
        if gitops.current_branch(root) != main:
            raise WfError(f"the main checkout {root} is not on {main}; switch it back first")
        tree = _tree_of(project, task_id, branch)
        if tree is not None and (Path(tree.path) / ".git").exists():
            worktrees.verify(project, Path(tree.path))
        if tree is not None and tree.isolation == "clone":
            _fetch_from_clone(project, Path(tree.path), branch)
        notes.extend(repair(project, main))
        tip = gitops.rev(root, branch)
        if project.config.shared:  # the branch on the remote first, then main level with the remote's
            tip = xmerge.before(project, main, branch, tip, notes)
        bl = backlogmod.load(project)
        entry = bl.archive.find(task_id)
        task = bl.doc.find(task_id)
        title = task.title if task is not None else entry.title if entry is not None else branch
        main_sha = gitops.rev(root, main)
        if main_sha is None:
            raise WfError(f"the main branch {main} has no commit")
        already = False
        merge_commit: str | None
        if tip is None:
            if entry is None:
                raise WfError(f"no branch {branch} to merge, and {task_id} is not archived")
            already = True
            merge_commit = entry.commit if entry.commit != "-" else None
        elif gitops.is_ancestor(root, tip, main_sha):
            already = True
            merge_commit = gitops.find_merge_of(root, main_sha, tip)
            if merge_commit is None:
                raise WfError(f"{branch} has no commits that are not in {main}: nothing to merge")
        else:
            merge_commit = _merge(project, main, main_sha, branch, tip, task_id, title)
        if tip is not None and tree is not None and _tree_head(project, tree, branch) not in (tip, None):
            raise WfError(
                f"{branch} got new commits while it was being merged; main has the work up to "
                f"{tip[:12]}; run wf merge {task_id} again to merge the rest"
            )

        archived = _archive(project, bl, main, branch, lane, task_id, merge_commit, notes)
        if project.config.shared and xmerge.sync_main(project, main, notes):  # a lost race: redone
            archived, merge_commit = _redone(project, task_id, tip, merge_commit, archived)
        new_main = gitops.rev(root, main) or main_sha
        parked = _park_tree(project, tree, branch, new_main, notes) if tree is not None else None
        if gitops.branch_exists(root, branch):
            try:
                gitops.delete_branch(root, branch)
            except gitops.GitError as e:
                notes.append(f"kept branch {branch}: {e.reason}")
        if tree is not None and parked is Parked.DETACHED:
            with project_lock(project.wf_dir, worktrees.WT_LOCK_TIMEOUT, on_wait, name="wt.lock"):
                worktrees.release(project, tree.name)
        if project.config.shared and tip is not None:
            xmerge.drop_branch(project, branch, tip, notes)
        notes.extend(_prune_backups(project))
        return Outcome(task_id, branch, merge_commit, already, archived, notes)


def _redone(
    project: Project, task_id: str, tip: str | None, merge_commit: str | None, archived: str | None
) -> tuple[str | None, str | None]:
    """(archive line, merge commit) after main was redone on the shared remote's main."""
    root = project.root
    main = worktrees.main_branch(project)
    if tip is not None:
        merge_commit = gitops.find_merge_of(root, gitops.rev(root, main) or main, tip) or merge_commit
    entry = backlogmod.load(project).archive.find(task_id)
    return (entry.raw if entry is not None else archived), merge_commit


def _archive(
    project: Project,
    bl: backlogmod.Backlog,
    main: str,
    branch: str,
    lane: str,
    task_id: str,
    merge_commit: str | None,
    notes: list[str],
) -> str | None:
    """Archive the task (naming the merge commit) unless an earlier run finished that,
    and commit that on main; return its archive line. done_task also completes an
    archiving that was interrupted half-way. The work is on main: a person's typo in the
    task's text does not stop it (the text is kept under the archive line)."""
    entry = bl.archive.find(task_id)
    archived = entry.raw if entry is not None else None
    if bl.doc.find(task_id) is not None:
        if bl.task_errors(task_id):
            notes.append(
                f"{task_id} had errors in {project.config.tasks}; archived anyway, its text kept "
                f"under its line in {project.config.archive}"
            )
        try:
            archived = ops.done_task(project, task_id, commit=merge_commit, lane=lane, merged=True)
        except ParseError as e:  # the file itself cannot be written: say what is done already
            raise NotArchived(project, branch, main, task_id, merge_commit, e) from None
    elif archived is None:
        notes.append(f"{task_id} is neither in {project.config.tasks} nor archived; not archived")
    if archived is not None:
        _commit_bookkeeping(project, main, task_id, archived)
    return archived


def _prune_backups(project: Project) -> list[str]:
    """Each merge writes two backup refs; the ones older than ``backup_days`` whose
    commits main holds go (a night of merges must not pile them up)."""
    from wf.trees import treeadmin

    try:
        n = treeadmin.prune_backups(project)
    except gitops.GitError as e:  # a backup ref moved meanwhile: kept, next time
        return [f"kept the old backup refs: {e.reason}"]
    return [treeadmin.backups_said(project, n)] if n else []


def _tree_head(project: Project, tree: worktrees.Record, branch: str) -> str | None:
    """The tip of the task's branch as its tree has it now (None if unknown)."""
    path = Path(tree.path)
    if not (path / ".git").exists():
        return None
    if tree.isolation == "clone":
        return gitops.rev(path, f"refs/heads/{branch}") if gitops.branch_exists(path, branch) else None
    return gitops.rev(project.root, branch)


def _fetch_from_clone(project: Project, clone: Path, branch: str) -> None:
    """Bring the clone's branch into the main repository. A main-repository branch of
    the same name that the clone's does not contain is backed up before it moves."""
    if not (clone / ".git").is_dir() or not gitops.branch_exists(clone, branch):
        return
    root = project.root
    clone_tip = gitops.rev(clone, f"refs/heads/{branch}")
    mine = gitops.rev(root, branch)
    contained = (
        mine is not None
        and gitops.commit_exists(clone, mine)
        and gitops.is_ancestor(clone, mine, str(clone_tip))
    )
    if mine is not None and clone_tip is not None and mine != clone_tip and not contained:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        gitops.backup_ref(root, branch, mine, stamp)
    gitops.fetch(root, clone, f"+refs/heads/{branch}:refs/heads/{branch}")


def _merge(
    project: Project, main: str, main_sha: str, branch: str, tip: str, task_id: str, title: str
) -> str:
    root = project.root
    result = gitops.merge_tree(root, main_sha, tip)
    if result.tree is None:
        raise MergeConflict(branch, main, result.conflicts)
    changes = gitops.changed_paths(root, main_sha, result.tree)
    touched = set(changes)
    dirty = gitops.dirty_paths(root, touched)
    # an ignored or untracked file the merge would write over (a path main does not
    # track: one the merge adds) is someone's data too
    dirty += [p for p in sorted(touched) if changes[p] == "A" and (root / p).exists() and p not in dirty]
    if dirty:
        raise DirtyMain(root, dirty)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    gitops.backup_refs(root, [(branch, tip), (main, main_sha)], stamp)  # one transaction
    commit = gitops.commit_tree(root, result.tree, [main_sha, tip], f"{task_id}: {title}\n")
    try:
        gitops.fast_forward(root, commit)
    except gitops.GitError as e:
        if "overwritten" in e.stderr or "untracked" in e.stderr:
            raise DirtyMain(root, sorted(gitops.dirty_paths(root, touched)) or [e.stderr]) from None
        raise
    return commit


def _commit_bookkeeping(project: Project, main: str, task_id: str, line: str) -> None:
    """Commit the archiving of ``task_id`` on main: TASKS.md and the archive as they are
    in the main commit, minus the task and plus its archive line. Other uncommitted
    changes of those files (a claim, a person's edit) stay uncommitted."""
    from wf.tasks import archive as archivemod

    kept = archivemod.kept_under(archivemod.parse(read_bytes(project.archive_path)), task_id)
    files = bookkeeping_files(project, main, task_id, line, kept)
    if files:
        gitops.commit_files(
            project.root, main, files, f"wf: archive {task_id}\n\n{ARCHIVE_TRAILER}: {task_id}\n"
        )


def _park_tree(
    project: Project, tree: worktrees.Record, branch: str, new_main: str, notes: list[str]
) -> Parked:
    """Move the task's tree to a detached HEAD at the new main commit (a branch that is
    checked out cannot be deleted); leave it alone if it holds uncommitted work."""
    path = Path(tree.path)
    if not (path / ".git").exists():
        notes.append(f"left {path}: its .git is missing (wf doctor)")
        return Parked.KEPT
    if gitops.dirty_paths(path):
        notes.append(f"left {path} on {branch}: it has uncommitted changes")
        return Parked.KEPT
    if tree.isolation == "clone":
        gitops.fetch(path, project.root, f"+refs/heads/{worktrees.main_branch(project)}:refs/wf/base")
        gitops.detach(path, new_main)
        if gitops.branch_exists(path, branch):
            try:
                gitops.delete_branch(path, branch)
            except gitops.GitError as e:
                notes.append(f"left {path}: kept its branch {branch}: {e.reason}")
                return Parked.KEPT
        return Parked.DETACHED
    if gitops.rev(path, "HEAD") != new_main or gitops.current_branch(path) is not None:
        gitops.detach(path, new_main)
    return Parked.DETACHED
