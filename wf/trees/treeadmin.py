"""Looking after the lane trees once they exist: ``wf wt list``, ``wf wt rm``, ``wf wt
prune``, and the release of a tree whose task no longer holds it.

Nothing with work in it is ever removed: a tree that is busy, dirty, or whose HEAD (for
a clone, any of its branches) has commits not in the main branch is refused or skipped,
and a backup ref is pruned only when the main branch already holds its commit.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, NamedTuple

from wf.base.errors import WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.base.stamps import parse_utc
from wf.tasks.backlog import Backlog
from wf.tasks.taskfile import valid_id
from wf.trees import gitops
from wf.trees.worktrees import (
    WT_LOCK_TIMEOUT,
    _backlog,
    _records_dir,
    drop_done_branch,
    holder,
    inspect,
    isolation_of,
    load_record,
    main_branch,
    release,
    tree_names,
)
from wf.workers import procs

BACKUP_PREFIX = "refs/wf/backup/"


def describe(project: Project, name: str, main_sha: str | None, bl: Backlog | None = None) -> dict[str, Any]:
    path = project.worktrees_dir / name
    rec = load_record(project, name)
    state = inspect(project, name, bl)
    held = rec is not None and holder(project, rec, bl).holds
    info: dict[str, Any] = {
        "name": name,
        "lane": rec.lane if rec else name.rsplit("-", 1)[0] if name[-1:].isdigit() and "-" in name else name,
        "path": str(path),
        "isolation": isolation_of(path) if (path / ".git").exists() else (rec.isolation if rec else None),
        "task": rec.task if rec and held else None,
        "branch": None,
        "state": state.kind,
        "by": state.why or None,
        "dirty": None,
        "behind": None,
        "size": gitops.dir_size(path) if path.exists() else 0,
    }
    if state.kind in ("free", "busy") and path.exists():
        info["branch"] = gitops.current_branch(path)
        info["dirty"] = state.dirty if state.dirty is not None else len(gitops.dirty_paths(path))
        head = gitops.rev(path, "HEAD")
        if head == main_sha:
            info["behind"] = 0
        elif head and main_sha:
            if info["isolation"] == "clone":
                info["behind"] = (
                    None
                    if not gitops.commit_exists(path, main_sha)
                    else gitops.count(path, f"HEAD..{main_sha}")
                )
            else:
                info["behind"] = gitops.count(project.root, f"{head}..{main_sha}")
    return info


def listing(project: Project) -> list[dict[str, Any]]:
    main_sha = gitops.rev(project.root, main_branch(project))
    bl = _backlog(project)
    return [describe(project, n, main_sha, bl) for n in tree_names(project)]


def _holds_caller(path: Path) -> bool:
    """The tree this wf (or the shell that started it) runs in is never removed."""
    here = Path.cwd().resolve()
    target = path.resolve()
    return here == target or target in here.parents or procs.ancestors_inside(target)


def _unmerged(project: Project, path: Path, main_sha: str) -> int:
    """How many commits of the tree (its HEAD; for a clone, also every branch, which
    live only there) the main branch lacks; 0 when all are in it."""
    root = project.root
    head = gitops.rev(path, "HEAD")
    if head is None:
        return 0
    if isolation_of(path) == "clone":
        if gitops.commit_exists(path, main_sha):
            r = gitops.run(path, "rev-list", "--count", "HEAD", "--branches", "--not", main_sha)
            return int(r.out.strip() or 0)
        tips = [head] + [
            t for t in gitops.out(path, "for-each-ref", "--format=%(objectname)", "refs/heads").split() if t
        ]
        merged = all(gitops.commit_exists(root, t) and gitops.is_ancestor(root, t, main_sha) for t in tips)
        return 0 if merged else 1
    return 0 if gitops.is_ancestor(root, head, main_sha) else gitops.count(root, f"{main_sha}..{head}")


def _delete_tree(project: Project, name: str, path: Path) -> None:
    rec = load_record(project, name)
    branch = gitops.current_branch(path) if isolation_of(path) == "worktree" else None
    if isolation_of(path) == "clone":
        shutil.rmtree(path)
    else:
        gitops.worktree_remove(project.root, path)
    (_records_dir(project) / f"{name}.json").unlink(missing_ok=True)
    for b in {branch, rec.branch if rec else None} - {None}:
        drop_done_branch(project, str(b))


def remove(project: Project, name: str) -> str:
    """``wf wt rm NAME``: remove one free tree, or say why not."""
    if not valid_id(name):
        raise WfError(f"bad tree name {name!r}: trees are named <lane> or <lane>-<n> (wf wt list)")
    path = project.worktrees_dir / name
    with project_lock(project.wf_dir, WT_LOCK_TIMEOUT, None, name="wt.lock"):
        if not path.exists():
            if load_record(project, name) is not None:
                (_records_dir(project) / f"{name}.json").unlink(missing_ok=True)
                return f"dropped the record of {name}, whose folder was already gone"
            raise WfError(f"no tree {name} in {project.worktrees_dir} (wf wt list)")
        state = inspect(project, name)
        if state.kind == "broken":
            raise WfError(f"{name} is broken ({state.why}); see wf doctor")
        if state.kind == "busy":
            raise WfError(f"{name} is busy ({state.why}); it is removed once it is free")
        if _holds_caller(path):
            raise WfError(f"{name} holds the folder you run wf from; leave it first")
        main = main_branch(project)
        main_sha = gitops.rev(project.root, main) or main
        unmerged = _unmerged(project, path, main_sha)
        if unmerged:
            on = gitops.current_branch(path)
            where = f" (on branch {on})" if on else ""
            raise WfError(
                f"{name} has {unmerged} commit{'s' if unmerged != 1 else ''} not in {main}{where}; "
                f"merge them first (wf merge), or remove the tree with git if they are not wanted"
            )
        _delete_tree(project, name, path)
    return f"removed {name}"


def retire(project: Project, name: str, bl: Backlog | None = None) -> str | None:
    """Release a tree whose record names a task that no longer holds it, and delete the
    task's branch if the task is archived and main has all of it (the tree is first
    detached at the branch's tip, if it is clean and on it). None if there is nothing
    to do; else what was done."""
    path = project.worktrees_dir / name
    with project_lock(project.wf_dir, WT_LOCK_TIMEOUT, None, name="wt.lock"):
        rec = load_record(project, name)  # read under the lock: an allocation may have come first
        if rec is None or rec.task is None or holder(project, rec, bl).holds:
            return None
        release(project, name)
        branch = rec.branch
        if branch and (path / ".git").is_file() and gitops.current_branch(path) == branch:
            tip = gitops.rev(path, "HEAD")
            if tip and not gitops.dirty_paths(path):
                gitops.detach(path, tip)
        if branch and drop_done_branch(project, branch, bl):
            return f"released; deleted branch {branch}"
    return "released"


class Backup(NamedTuple):
    ref: str
    sha: str
    age_days: float


def stale_backups(project: Project, days: float, now: float | None = None) -> list[Backup]:
    """Backup refs older than ``days`` (by the time in their name) whose commit the main
    branch already holds. A ref whose time cannot be read, or whose commit main lacks,
    is kept."""
    root = project.root
    main_sha = gitops.rev(root, main_branch(project))
    if main_sha is None:
        return []
    now = time.time() if now is None else now
    text = gitops.out(
        root, "for-each-ref", f"--merged={main_sha}", "--format=%(refname) %(objectname)", BACKUP_PREFIX
    )
    out = []
    for line in text.splitlines():
        ref, _, sha = line.partition(" ")
        made = parse_utc(ref.rsplit("/", 1)[-1])
        if made is not None and now - made > days * 86400:
            out.append(Backup(ref, sha, (now - made) / 86400))
    return out


def prune(project: Project, *, dry_run: bool = False, now: float | None = None) -> list[str]:
    """Remove free, clean trees whose HEAD is in the main branch, registrations whose
    folder is gone, and backup refs older than ``backup_days`` that main holds. Never a
    tree with uncommitted or unmerged work."""
    from wf.trees.worktrees import forget

    done: list[str] = []
    with project_lock(project.wf_dir, WT_LOCK_TIMEOUT, None, name="wt.lock"):
        main = main_branch(project)
        main_sha = gitops.rev(project.root, main) or main
        for entry in gitops.worktrees(project.root):
            if entry.prunable and not entry.path.exists():
                done.append(f"forget stale registration {entry.path}")
                if not dry_run:
                    forget(project, entry.path)
        for name in tree_names(project):
            path = project.worktrees_dir / name
            if not path.exists():
                if load_record(project, name) is not None:
                    done.append(f"drop record of vanished {name}")
                    if not dry_run:
                        (_records_dir(project) / f"{name}.json").unlink(missing_ok=True)
                continue
            if inspect(project, name).kind != "free" or _holds_caller(path):
                continue
            if gitops.rev(path, "HEAD") is None or _unmerged(project, path, main_sha):
                continue
            done.append(f"remove {name} (clean, at a commit of {main})")
            if not dry_run:
                _delete_tree(project, name, path)
        old = stale_backups(project, project.config.backup_days, now)
        if old:
            done.append(backups_said(project, len(old), "delete"))
            if not dry_run:
                delete_backups(project, old)
    return done


def backups_said(project: Project, n: int, verb: str = "deleted") -> str:
    """``<verb> N backup refs older than D days whose commits are in <main>``."""
    return (
        f"{verb} {n} backup ref{'s' if n != 1 else ''} older than {project.config.backup_days:g} "
        f"days whose commits are in {main_branch(project)}"
    )


def delete_backups(project: Project, old: list[Backup]) -> None:
    """Delete these backup refs, each only if it still names the commit it named when
    it was found (a compare-and-swap: a ref moved meanwhile makes git refuse them all)."""
    if old:
        gitops.run(
            project.root, "update-ref", "--stdin", stdin="".join(f"delete {b.ref} {b.sha}\n" for b in old)
        )


def prune_backups(project: Project, now: float | None = None) -> int:
    """Delete the backup refs older than ``backup_days`` whose commits main holds (after
    a merge, by ``wf doctor --fix``); how many were deleted."""
    old = stale_backups(project, project.config.backup_days, now)
    delete_backups(project, old)
    return len(old)


def backup_count(project: Project) -> int:
    """How many backup refs there are, old or new."""
    return len(gitops.out(project.root, "for-each-ref", "--format=%(refname)", BACKUP_PREFIX).splitlines())
