"""Lane worktrees (or throwaway clones) in ``<main>/.worktrees/<name>``.

A lane's worker works in ``.worktrees/<lane>``, reused from task to task; when that one
is in use, the next free of ``<lane>-2``, ``<lane>-3``, ... A tree is in use when its
record in ``.wf/wt/<name>.json`` names a task that still holds it (see ``holder``), a
live process has its cwd inside it, a Claude Code session file points into it, or it
has uncommitted changes. Allocation runs under ``.wf/wt.lock`` (not the project lock:
making a worktree can take seconds), so concurrent allocators never pick the same tree
and never race on git's own locks.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from wf.base import records as store
from wf.base.errors import WfError
from wf.base.fsutil import atomic_write_text
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.tasks.taskfile import check_id, utc_stamp
from wf.trees import gitops
from wf.workers import procs

if TYPE_CHECKING:
    from wf.tasks.backlog import Backlog

WT_LOCK_TIMEOUT = 120.0


@dataclass(frozen=True)
class Record:
    """``.wf/wt/<name>.json``: a tree, and the task it was given (a typed record)."""

    name: str
    lane: str
    path: str
    task: str | None
    branch: str | None
    base: str | None
    isolation: str
    since: str
    # whether the task was claimed (in progress) when it got the tree; None in records
    # written before wf kept it, read as claimed
    claimed: bool | None = None

    def _replace(self, **changes: Any) -> Record:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return store.as_dict(self)


def branch_name(lane: str, task_id: str) -> str:
    return f"{check_id(lane, 'lane')}/{check_id(task_id, 'task id')}"


def parse_branch(branch: str) -> tuple[str, str]:
    """``<lane>/<id>`` -> (lane, id), both validated (no paths, no options, no '..')."""
    lane, sep, task_id = branch.partition("/")
    if not sep:
        raise WfError(f"bad branch {branch!r}: expected '<lane>/<id>'")
    return check_id(lane, "lane"), check_id(task_id, "task id")


def main_branch(project: Project) -> str:
    if project.config.main:
        return project.config.main
    branch = gitops.current_branch(project.root)
    if branch is None:
        raise WfError('the main checkout is not on a branch; set main = "<branch>" in wf.toml')
    return branch


def main_problem(project: Project) -> str | None:
    """Why wf.toml's ``main`` cannot be used (it names no branch), or None. A repository
    with no commit yet has no branch at all: nothing to say then."""
    main = project.config.main
    if not main or not project.is_git or gitops.rev(project.root, f"refs/heads/{main}") is not None:
        return None
    if gitops.rev(project.root, "HEAD") is None:
        return None
    return f"main = {main!r} names no branch of this repository (git branch --list shows them)"


class CannotClaim(WfError):
    """A check that refuses a pick, a claim or a batch failed: nothing was written."""

    def __init__(self, cause: WfError) -> None:
        self.cause = cause
        super().__init__(f"nothing was claimed: {cause}")


def preflight(project: Project, lane: str | None = None) -> None:
    """Every check that can refuse a claim, run before its first write (CannotClaim): a
    git repository, a main branch that is a branch with a commit, a lane that does not
    clash with it, and a git identity (the worker's commits, the merge and the archive
    commit all need one)."""
    try:
        if not project.is_git:
            raise WfError(f"{project.root} is not a git repository; worktrees need one")
        main = main_branch(project)
        problem = main_problem(project)
        if problem is not None:
            raise WfError(problem)
        if lane is not None:
            lane_clash(lane, main)
        if gitops.rev(project.root, main) is None:
            raise WfError(f"the main branch {main!r} has no commit yet")
        no_identity = identity_problem(project.root)
        if no_identity is not None:
            raise no_identity
    except CannotClaim:
        raise
    except WfError as e:
        raise CannotClaim(e) from None


class NoIdentity(WfError):
    """git has no author or committer identity here: every commit (a worker's, a merge,
    an archive commit) would fail."""

    def __init__(self, cwd: Path, reason: str) -> None:
        self.cwd = cwd
        self.reason = reason
        super().__init__(
            f"git has no identity in {cwd} ({reason}); set one: "
            'git config user.name "Your Name" && git config user.email you@example.com '
            "(add --global for every repository)"
        )


def identity_problem(cwd: Path) -> NoIdentity | None:
    """Why git could not commit here for want of a name or email (None: it can), asked of
    git itself (``git var``), so that config, environment and git's own rules all count."""
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        r = gitops.run(cwd, "var", var, ok=(0, 128))
        if r.status != 0:
            return NoIdentity(cwd, gitops.GitError(["var", var], r.status, r.err, cwd).reason)
    return None


def lane_clash(lane: str, main: str) -> None:
    if lane == main or main.startswith(f"{lane}/"):
        raise WfError(f"lane {lane!r} clashes with the main branch {main!r} (branches are <lane>/<id>)")


def _records_dir(project: Project) -> Path:
    return project.wf_dir / "wt"


def record_path(project: Project, name: str) -> Path:
    return _records_dir(project) / f"{name}.json"


def load_record(project: Project, name: str) -> Record | None:
    """The tree's record, None if it has none; CorruptRecord if it cannot be trusted."""
    return store.load(Record, record_path(project, name))


def save_record(project: Project, rec: Record) -> None:
    store.save(record_path(project, rec.name), rec)


def corrupt_records(project: Project) -> list[store.CorruptRecord]:
    """Tree records that cannot be trusted (for wf doctor)."""
    folder = _records_dir(project)
    return store.corrupt_in(Record, sorted(folder.glob("*.json")) if folder.is_dir() else [])


def records(project: Project) -> list[Record]:
    folder = _records_dir(project)
    if not folder.is_dir():
        return []
    out = []
    for f in sorted(folder.glob("*.json")):
        rec = load_record(project, f.stem)
        if rec is not None:
            out.append(rec)
    return out


def release(project: Project, name: str) -> None:
    """Free a tree: its record keeps the lane and path but no task."""
    rec = load_record(project, name)
    if rec is not None and rec.task is not None:
        save_record(project, rec._replace(task=None, branch=None, base=None, since=utc_stamp()))


class Holder(NamedTuple):
    """What a record's task is now, seen from its tree."""

    holds: bool
    state: str  # progress, pending, awaiting, blocked, wip, archived, gone, unknown


def holder(project: Project, rec: Record, bl: Backlog | None = None) -> Holder:
    """Whether the record's task still holds its tree, from the task's status now (so a
    hand edit of TASKS.md counts as much as a wf command): a claimed task (in progress)
    holds it; an archived one, one set awaiting, blocked or wip, one set pending again
    after its claim, or one gone from both files does not. A task given a tree before
    anyone claimed it holds it while it stays pending. When TASKS.md cannot be read
    cleanly, the record is believed."""
    if rec.task is None:
        return Holder(False, "free")
    if bl is None:
        from wf.tasks import backlog

        try:
            bl = backlog.load(project)
        except WfError:
            return Holder(True, "unknown")
    if bl.archive.find(rec.task) is not None:
        return Holder(False, "archived")
    task = bl.doc.find(rec.task)
    if task is None:
        if any(i.level == "error" for i in bl.doc.issues):
            return Holder(True, "unknown")
        return Holder(False, "gone")
    state = task.status.state
    if state == "progress":
        return Holder(True, state)
    if state == "pending" and rec.claimed is False:
        return Holder(True, state)
    return Holder(False, state)


def _names(lane: str) -> list[str]:
    return [lane] + [f"{lane}-{n}" for n in range(2, 100)]


class State(NamedTuple):
    kind: str  # missing, free, busy, broken
    why: str = ""
    dirty: int | None = None  # paths with uncommitted changes, when looked at


class WrongRepository(WfError):
    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"{path} is not the worktree wf made there ({why}); see wf doctor")


def verify(project: Project, path: Path) -> None:
    """Check that the tree at ``path`` is linked to this repository and to itself: a
    worktree's .git file must name ``<main>/.git/worktrees/<x>``, whose gitdir names this
    folder; a clone must have its own .git folder. Anything else could make git act on
    another tree, or on the main checkout."""
    dotgit = path / ".git"
    if dotgit.is_dir():
        return
    try:
        text = dotgit.read_text("utf-8").strip()
    except OSError:
        raise WrongRepository(path, ".git is missing") from None
    if not text.startswith("gitdir:"):
        raise WrongRepository(path, ".git is not a gitdir link")
    admin = Path(text[len("gitdir:") :].strip())
    admin = admin if admin.is_absolute() else (path / admin)
    main_admin = (project.root / ".git" / "worktrees").resolve()
    if admin.resolve().parent != main_admin:
        raise WrongRepository(path, f".git points at {admin}, outside {main_admin}")
    try:
        back = Path((admin / "gitdir").read_text("utf-8").strip())
    except OSError:
        raise WrongRepository(path, f"{admin} is gone") from None
    if back.parent.resolve() != path.resolve():
        raise WrongRepository(path, f"{admin.name} belongs to {back.parent}")


def unsaved_commits(path: Path) -> int:
    """Commits at the tree's HEAD that no branch (nor wf's refs) holds: work that a
    switch to another branch would leave behind."""
    r = gitops.run(
        path, "rev-list", "--count", "HEAD", "--not", "--branches", "--glob=refs/wf/*", ok=(0, 128)
    )
    return int(r.out.strip() or 0) if r.status == 0 else 0


def inspect(project: Project, name: str, bl: Backlog | None = None) -> State:
    """Whether ``.worktrees/<name>`` can take a new task (``bl``: the backlog, if the
    caller has it loaded already)."""
    path = project.worktrees_dir / name
    rec = load_record(project, name)
    if not path.exists():
        return State("missing")
    dotgit = path / ".git"
    if not dotgit.exists():
        return State("broken", ".git is missing")
    try:
        verify(project, path)
    except WrongRepository as e:
        return State("broken", str(e).split("(", 1)[-1].split(")")[0])
    if rec is not None and rec.task is not None and holder(project, rec, bl).holds:
        return State("busy", f"task {rec.task}")
    users = procs.users_of(path)
    if users:
        return State("busy", str(users[0]))
    try:
        dirty = gitops.dirty_paths(path)
    except gitops.GitError as e:
        return State("broken", e.stderr.splitlines()[-1] if e.stderr else "git fails there")
    if dirty:
        return State("busy", f"uncommitted changes ({len(dirty)} paths)", len(dirty))
    unsaved = unsaved_commits(path)
    if unsaved:
        return State("busy", f"{unsaved} commits on no branch", 0)
    return State("free", "", 0)


def _admin_dir(project: Project, path: Path) -> Path | None:
    """git's administrative folder (``.git/worktrees/<x>``) of the worktree at ``path``."""
    admin = project.root / ".git" / "worktrees"
    if not admin.is_dir():
        return None
    for d in admin.iterdir():
        try:
            linked = Path((d / "gitdir").read_text("utf-8").strip())
        except OSError:
            continue
        if linked.parent.resolve() == path.resolve() or linked.parent == path:
            return d
    return None


def forget(project: Project, path: Path) -> bool:
    """Drop git's registration of a worktree whose folder is gone (one entry; unlike
    ``git worktree prune``, never one whose folder still exists but lost its .git)."""
    if path.exists():
        return False
    d = _admin_dir(project, path)
    if d is None:
        return False
    try:
        head = (d / "HEAD").read_text("utf-8").strip()
    except OSError:
        head = ""
    if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
        # a detached HEAD: keep its commits reachable before git forgets the worktree
        r = gitops.run(project.root, "branch", "--contains", head, "--format=%(refname)", ok=(0, 1, 129))
        if not r.out.strip():
            gitops.backup_ref(
                project.root, f"tree/{path.name}", head, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            )
    shutil.rmtree(d)
    return True


def repair(project: Project, path: Path) -> bool:
    """Give a worktree whose ``.git`` file vanished its link back, if git still knows it.
    A folder git does not know is left alone (it may hold someone's work)."""
    if not path.is_dir():
        return False
    d = _admin_dir(project, path)
    if d is None:
        return False
    atomic_write_text(path / ".git", f"gitdir: {d}\n")
    return True


def allocate(
    project: Project,
    lane: str,
    task_id: str,
    *,
    isolation: str | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Record:
    """Ready a tree for ``task_id`` in ``lane``: reuse the lane's free tree (new branch
    ``<lane>/<id>`` from the main branch's current commit) or make the next one. Asking
    again for the same task returns the tree it already has."""
    check_id(lane, "lane")
    check_id(task_id, "task id")
    if not project.is_git:
        raise WfError(f"{project.root} is not a git repository; worktrees need one")
    isolation = isolation or project.config.isolation
    branch = branch_name(lane, task_id)
    with project_lock(project.wf_dir, WT_LOCK_TIMEOUT, on_wait, name="wt.lock"):
        main = main_branch(project)
        lane_clash(lane, main)
        base = gitops.rev(project.root, main)
        if base is None:
            raise WfError(f"the main branch {main!r} has no commit yet")
        bl = _backlog(project)
        task = bl.doc.find(task_id) if bl is not None else None
        claimed = task is not None and task.status.state == "progress"
        for rec in records(project):
            if rec.task == task_id and rec.lane == lane:
                rec = _resume(project, rec, base)
                if claimed and rec.claimed is False:
                    rec = rec._replace(claimed=True)
                    save_record(project, rec)
                return rec
        wt_dir = project.worktrees_dir.resolve()
        for e in gitops.worktrees(project.root):
            if e.branch == branch and e.path.parent == wt_dir and e.path.exists():
                # made by an allocation that was killed before it wrote its record
                rec = Record(
                    e.path.name, lane, str(e.path), task_id, branch, base, "worktree", utc_stamp(), claimed
                )
                rec = _resume(project, rec, base)
                save_record(project, rec)
                return rec
        for name in _names(lane):
            state = inspect(project, name, bl)
            if state.kind == "broken" and repair(project, project.worktrees_dir / name):
                state = inspect(project, name, bl)
            if state.kind in ("busy", "broken"):
                continue
            path = project.worktrees_dir / name
            before = load_record(project, name)
            if state.kind == "missing":
                _create(project, path, branch, base, isolation)
            else:
                _reuse(project, path, branch, base)
            rec = Record(
                name, lane, str(path), task_id, branch, base, isolation_of(path), utc_stamp(), claimed
            )
            save_record(project, rec)
            if before is not None and before.branch and before.branch != branch:
                drop_done_branch(project, before.branch, bl)
            return rec
    raise WfError(f"no free worktree for lane {lane} (tried {lane} to {lane}-99)")


def _backlog(project: Project) -> Backlog | None:
    from wf.tasks import backlog

    try:
        return backlog.load(project)
    except WfError:
        return None


def drop_done_branch(project: Project, branch: str, bl: Backlog | None = None) -> bool:
    """Delete ``branch`` if its task is archived, it holds nothing main lacks and no tree
    has it checked out (``git branch -d``, which refuses unmerged work anyway)."""
    root = project.root
    try:
        _, task_id = parse_branch(branch)
    except WfError:
        return False
    bl = bl or _backlog(project)
    tip = gitops.rev(root, f"refs/heads/{branch}")
    main_sha = gitops.rev(root, main_branch(project))
    if bl is None or bl.archive.find(task_id) is None or tip is None or main_sha is None:
        return False
    if not gitops.is_ancestor(root, tip, main_sha) or any(e.branch == branch for e in gitops.worktrees(root)):
        return False
    try:
        gitops.delete_branch(root, branch)
    except gitops.GitError:
        return False
    return True


def isolation_of(path: Path) -> str:
    return "clone" if (path / ".git").is_dir() else "worktree"


def _create(project: Project, path: Path, branch: str, base: str, isolation: str) -> None:
    root = project.root
    forget(project, path)  # registered, but the folder is gone: forget it first
    project.worktrees_dir.mkdir(exist_ok=True)
    if isolation == "clone":
        try:
            gitops.clone_local(root, path)
            _clone_switch(project, path, branch, base)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # a half-made clone holds no work
            raise
        return
    _catch_up(project, branch, base)
    for attempt in range(5):
        try:
            if gitops.branch_exists(root, branch):
                gitops.run(root, "worktree", "add", "--quiet", str(path), branch)
            else:
                gitops.worktree_add(root, path, branch, base)
            return
        except gitops.GitError as e:
            # Another git (outside wf) may hold a lock for a moment: retry, then give up.
            if ".lock" in e.stderr and attempt < 4:
                time.sleep(0.2 * (attempt + 1))
                continue
            raise


def _clone_switch(project: Project, path: Path, branch: str, base: str) -> None:
    # a clone has no remote: fetch the main branch from the main checkout by path
    gitops.fetch(path, project.root, f"+refs/heads/{main_branch(project)}:refs/wf/base")
    if not gitops.branch_exists(path, branch) and gitops.branch_exists(project.root, branch):
        # the task already has work in the main repository: continue from it
        gitops.fetch(path, project.root, f"refs/heads/{branch}:refs/heads/{branch}")
    if gitops.branch_exists(path, branch):
        gitops.switch(path, branch)
    else:
        gitops.switch_new_branch(path, branch, base)


def _catch_up(project: Project, branch: str, base: str) -> None:
    """A task branch left from an earlier pick with no commits of its own (a slice job,
    a handback before any commit) starts again from the main branch's current commit:
    moving it forward loses nothing, and an old base would hide newer work."""
    root = project.root
    tip = gitops.rev(root, branch)
    if tip is not None and tip != base and gitops.is_ancestor(root, tip, base):
        checked_out = any(e.branch == branch for e in gitops.worktrees(root))
        if not checked_out:
            gitops.update_ref(root, f"refs/heads/{branch}", base, tip, reason="wf: catch up with main")


def _reuse(project: Project, path: Path, branch: str, base: str) -> None:
    if isolation_of(path) == "clone":
        _clone_switch(project, path, branch, base)
        return
    if gitops.current_branch(path) == branch:
        gitops.detach(path, "HEAD")  # let the branch move if it must
    _catch_up(project, branch, base)
    if gitops.branch_exists(project.root, branch):
        gitops.switch(path, branch)
    else:
        gitops.switch_new_branch(path, branch, base)


def _resume(project: Project, rec: Record, base: str) -> Record:
    """The task already has a tree (a second pick after a crash): make sure it is
    there and on the task's branch, never a second one."""
    path = Path(rec.path)
    branch = rec.branch or ""
    if not (path / ".git").exists() and not repair(project, path):
        if path.exists():
            raise WfError(f"{path} lost its .git and git does not know it; see 'wf doctor'")
        _create(project, path, branch, rec.base or base, rec.isolation)
    else:
        verify(project, path)
        if gitops.current_branch(path) != branch:
            if gitops.dirty_paths(path):
                raise WfError(
                    f"{path} has uncommitted changes on another branch than {branch}; commit or clean them"
                )
            _reuse(project, path, branch, rec.base or base)
    return rec


# ------------------------------------------------------------------ listing and pruning


def tree_names(project: Project) -> list[str]:
    names = {r.name for r in records(project)}
    if project.worktrees_dir.is_dir():
        names |= {p.name for p in project.worktrees_dir.iterdir() if p.is_dir()}
    return sorted(names)
