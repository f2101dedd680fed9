"""``wf doctor``: where wf's records, git's worktrees, lane branches, live processes and
git's lock files disagree, one finding each; ``--fix`` repairs what is safe to repair.

Nothing with work in it is ever removed: an unmerged branch, a dirty tree and a folder
git does not know are reported, not touched. The worker tools are checked first
(wf/doctor/tools.py), then the state files, then each check of CHECKS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.base.errors import WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.doctor.findings import Finding as Finding  # lanes.py imports it from here
from wf.doctor.tools import adapter_findings
from wf.doctor.tools import help_options as help_options  # the tests check flags with it
from wf.tasks import backlog as backlogmod
from wf.tasks.backlog import Backlog
from wf.trees import gitfiles, gitops, treeadmin, worktrees
from wf.workers import procs

STALE_LOCK_AGE = 60.0


def _git_dir(project: Project) -> Path:
    return project.root / ".git"


def stale_locks(project: Project, now: float | None = None) -> list[Path]:
    """git lock files older than a minute while no git process runs."""
    now = now or time.time()
    gd = _git_dir(project)
    candidates = [gd / "index.lock", gd / "config.lock", gd / "HEAD.lock", gd / "packed-refs.lock"]
    wt_admin = gd / "worktrees"
    if wt_admin.is_dir():
        for d in wt_admin.iterdir():
            candidates += [d / "index.lock", d / "HEAD.lock"]
    refs = gd / "refs"
    if refs.is_dir():
        candidates += list(refs.rglob("*.lock"))
    old = [p for p in candidates if p.is_file() and now - p.stat().st_mtime > STALE_LOCK_AGE]
    if old and procs.git_processes(project.root):
        return []
    return old


def _free_branch(project: Project, branch: str, user: Path | None, bl: Backlog) -> bool:
    """Delete the merged branch of an archived task; a tree that has it checked out is
    first detached at its tip, if nothing holds that tree (free and clean)."""
    if user is not None:
        wt_dir = project.worktrees_dir.resolve()
        if user.parent != wt_dir:
            return False
        # under the allocators' lock: a tree found free must not be taken meanwhile
        with project_lock(project.wf_dir, worktrees.WT_LOCK_TIMEOUT, None, name="wt.lock"):
            if worktrees.inspect(project, user.name, bl).kind != "free":
                return False
            if gitops.current_branch(user) != branch:
                return False
            worktrees.release(project, user.name)
            tip = gitops.rev(user, "HEAD")
            if tip is None:
                return False
            gitops.detach(user, tip)
    return worktrees.drop_done_branch(project, branch, bl)


def _backups(project: Project, *, fix: bool) -> Finding:
    """How many backup refs there are, and how many are older than ``backup_days`` with
    their commits in main (``--fix`` deletes those, as merges do)."""
    days = project.config.backup_days
    total = treeadmin.backup_count(project)
    old = treeadmin.stale_backups(project, days)
    msg = f"{total} backup ref{'s' if total != 1 else ''}"
    where = treeadmin.BACKUP_PREFIX
    if not old:
        return Finding("backups", where, f"{msg}, none older than {days:g} days", "info")
    if fix:
        try:
            treeadmin.delete_backups(project, old)
        except gitops.GitError as e:  # one moved meanwhile (compare-and-swap): none deleted
            return Finding("backups", where, f"{msg}; {len(old)} old ones kept: {e.reason}", "info")
        return Finding("backups", where, f"{msg}: {treeadmin.backups_said(project, len(old))}", "info", True)
    return Finding(
        "backups",
        where,
        f"{msg}, {len(old)} older than {days:g} days whose commits main holds (--fix deletes them)",
        "info",
    )


def _unarchived(project: Project, bl: Backlog, task_id: str, branch: str, made: str, *, fix: bool) -> Finding:
    """A task whose branch a merge brought onto main but that is still open (its archiving
    was refused or interrupted); ``--fix`` finishes that merge (archive, bookkeeping
    commit, tree parked, branch deleted), unless the task is claimed: a worker may still
    be in its tree."""
    from wf.trees import merge

    main = worktrees.main_branch(project)
    msg = f"{branch} was merged into {main} as {made[:12]} but {task_id} is not archived"
    task = bl.doc.find(task_id)
    if task is not None and task.status.state == "progress":
        return Finding(
            "merge", task_id, f"{msg}; it is in progress: wf merge {task_id} finishes it", "problem"
        )
    if not fix:
        return Finding("merge", task_id, f"{msg} (--fix archives it)", "problem")
    try:
        outcome = merge.merge(project, branch, project.root)
    except WfError as e:
        return Finding("merge", task_id, f"{msg}; not fixed: {str(e).splitlines()[0]}", "problem")
    said = "".join(f"; {n}" for n in outcome.notes)
    return Finding("merge", task_id, f"{msg}: archived{said}", "problem", True)


def state_finding(
    kind: str, what: str, bad: Exception | None, *, fix: bool, money: bool = False
) -> list[Finding]:
    """The finding of one state file that cannot be trusted (none if ``bad`` is None);
    with ``fix``, the file is moved aside, unless it is a log of money that is a regular
    file (moving it would forget what was spent): that one is left to a person."""
    from wf.base import records as recstore

    if not isinstance(bad, recstore.CorruptRecord):
        return []
    why = bad.why
    fixed = False
    if money and recstore.is_regular(bad.path):
        why += "; it records money: mend or move it by hand (wf doctor --fix leaves it)"
    elif fix:
        why += f"; moved to {recstore.move_aside(bad.path).name}"
        fixed = True
    return [Finding(kind, str(bad.path), f"{what} cannot be trusted: {why}", "problem", fixed)]


def corrupt_of(fn: Any) -> Exception | None:
    from wf.base import records as recstore

    try:
        fn()
    except recstore.CorruptRecord as e:
        return e
    return None


def state_findings(project: Project, *, fix: bool = False) -> list[Finding]:
    """The state files below the loop: what wf last saw of TASKS.md (the lost-tasks
    guard), the projects list of the cost report, and the cost and cloud logs."""
    from wf.base import settle
    from wf.cost import costlog

    out = state_finding(
        "seen",
        "what wf last saw of the task files (the lost-tasks guard)",
        corrupt_of(lambda: settle.load_seen(project.wf_dir, project.config.tasks)),
        fix=fix,
    )
    projects = corrupt_of(costlog.known_projects)
    out += state_finding("projects", "the projects list of wf usage --report", projects, fix=fix)
    for log, what in (("wf-cost.log", "the cost log"), ("wf-cloud.log", "the cloud lane's spending log")):
        path = project.out_dir / log
        bad = corrupt_of(lambda path=path: _log_lines(project, path))
        out += state_finding("log", what, bad, fix=fix, money=True)
    return out


def _log_lines(project: Project, path: Path) -> None:
    """CorruptRecord if a money log has a line wf cannot read or a cost that is not one."""
    from wf.base import records as recstore
    from wf.cost import costlog

    raw = recstore.read_bytes(path, 1 << 30)
    if raw is None:
        return
    if path.name == "wf-cost.log":
        bad, unknown = costlog.line_faults(raw)
        faults = [
            f"{n} {w}" for n, w in ((bad, "unreadable line(s)"), (unknown, "cost(s) not a number")) if n
        ]
    else:
        from wf.cloud import ledger

        faults = list(ledger.read(project).bad)
    if faults:
        raise recstore.CorruptRecord(path, "; ".join(faults))


@dataclass(frozen=True)
class Scan:
    """What every check of a git project reads: taken once, before any check repairs."""

    project: Project
    fix: bool
    bl: Backlog
    main: str  # the main branch
    main_sha: str
    regs: list[gitfiles.WorktreeEntry]  # git's worktrees
    open_ids: set[str]  # the tasks of TASKS.md
    archived: set[str]  # the tasks of the archive

    @property
    def root(self) -> Path:
        return self.project.root


def run(project: Project, *, fix: bool = False, adapters: bool = True) -> list[Finding]:
    """Every finding, in order: the tools, the state files, then (in a git repository)
    each check of CHECKS, stopping after the tree records when they cannot be trusted."""
    out: list[Finding] = adapter_findings(project) if adapters else []
    out += state_findings(project, fix=fix)
    if not project.is_git:
        return [*out, Finding("repo", str(project.root), "not a git repository", "info")]
    bl = backlogmod.load(project)
    main = worktrees.main_branch(project)
    root = project.root
    main_sha = gitops.rev(root, main) or main
    scan = Scan(project, fix, bl, main, main_sha, gitops.worktrees(root), bl.doc.ids(), bl.archive.ids())
    for check in CHECKS:
        out += check(scan)
        if check is bad_records and not fix and worktrees.corrupt_records(project):
            break  # the checks below read every tree record: fix these first (wf doctor --fix)
    return out


def stale_lock_findings(scan: Scan) -> list[Finding]:
    """git lock files left by a git that died (--fix removes them)."""
    out = []
    for lock in stale_locks(scan.project):
        if scan.fix:
            lock.unlink(missing_ok=True)
        age = int(time.time() - lock.stat().st_mtime) if lock.exists() else 0
        where = str(lock.relative_to(scan.root))
        out.append(Finding("stale-lock", where, f"left by a git that died (age {age}s)", "problem", scan.fix))
    return out


def stale_index_findings(scan: Scan) -> list[Finding]:
    """Temporary indexes of a wf killed inside an archive commit (--fix removes them)."""
    out = []
    git_dir = Path(gitops.out(scan.root, "rev-parse", "--absolute-git-dir").strip())
    for stray in gitops.stale_indexes(git_dir):
        if scan.fix:
            stray.unlink(missing_ok=True)
        why = "a temporary index left by a killed wf" + ("" if scan.fix else " (--fix removes it)")
        out.append(Finding("stale-index", stray.name, why, "problem", scan.fix))
    return out


def registration_findings(scan: Scan) -> list[Finding]:
    """Worktrees git registers whose folder is gone (--fix makes git forget them)."""
    out = []
    for e in scan.regs:
        if e.prunable and not e.path.exists():
            fixed = scan.fix and worktrees.forget(scan.project, e.path)
            why = "git registers a worktree whose folder is gone"
            out.append(Finding("registration", str(e.path), why, "problem", fixed))
    return out


def bad_records(scan: Scan) -> list[Finding]:
    """Tree records that cannot be trusted (--fix moves them aside)."""
    from wf.base import records as recstore

    out = []
    for bad in worktrees.corrupt_records(scan.project):
        why = bad.why
        if scan.fix:
            why += f"; moved to {recstore.move_aside(bad.path).name}"
        out.append(
            Finding("record", bad.path.stem, f"tree record cannot be trusted: {why}", "problem", scan.fix)
        )
    return out


def tree_findings(scan: Scan) -> list[Finding]:
    """Each tree under the worktrees folder against its record: gone, unlinked from git,
    or naming a task that no longer holds it."""
    out = []
    for name in worktrees.tree_names(scan.project):
        out += _tree_finding(scan, name)
    return out


def _tree_finding(scan: Scan, name: str) -> list[Finding]:
    project, fix = scan.project, scan.fix
    path = project.worktrees_dir / name
    rec = worktrees.load_record(project, name)
    if not path.exists():
        if rec is None:
            return []
        if fix:
            (project.wf_dir / "wt" / f"{name}.json").unlink(missing_ok=True)
        what = f"names task {rec.task}" if rec.task else "is free"
        return [Finding("record", name, f"record {what} but the tree is gone", "problem", fix)]
    if not (path / ".git").exists():
        known = any(e.path == path.resolve() for e in scan.regs)
        repaired = worktrees.repair(project, path) if fix and known else False
        if known:
            msg = "its .git file is missing; git still knows it (--fix restores the link)"
        else:
            msg = "its .git is missing and git does not know it: check its files, then remove it by hand"
        return [Finding("tree", name, msg, "problem", repaired)]
    if rec is None or not rec.task:
        return []
    hold = worktrees.holder(project, rec, scan.bl)
    if hold.holds:
        return []
    done = treeadmin.retire(project, name, scan.bl) if fix else None
    why = {
        "archived": "which is done (archived)",
        "gone": "which is in no file",
    }.get(hold.state, f"which is {hold.state}, no longer claimed")
    said = f" ({done})" if done else " (--fix releases it)"
    return [
        Finding(
            "record",
            name,
            f"names task {rec.task}, {why}: the tree is free{said}",
            "problem",
            done is not None,
        )
    ]


def backup_findings(scan: Scan) -> list[Finding]:
    return [_backups(scan.project, fix=scan.fix)]


def branch_findings(scan: Scan) -> list[Finding]:
    """Each lane's <lane>/<id> branches against their tasks: merged and done (--fix
    deletes them), unmerged work of a done task, merged but not archived, no task, no tree."""
    project, bl = scan.project, scan.bl
    held = {
        r.branch for r in worktrees.records(project) if r.branch and worktrees.holder(project, r, bl).holds
    }
    regs = gitops.worktrees(scan.root)  # again: the checks above may have repaired some
    out = []
    for lane in sorted({ln.name for ln in project.config.lanes}):
        for branch in gitops.branches(scan.root, f"{lane}/*"):
            finding = _branch_finding(scan, branch, held, regs)
            if finding is not None:
                out.append(finding)
    return out


def _branch_finding(
    scan: Scan, branch: str, held: set[str], regs: list[gitfiles.WorktreeEntry]
) -> Finding | None:
    project, root, main = scan.project, scan.root, scan.main
    try:
        _, task_id = worktrees.parse_branch(branch)
    except Exception:
        return Finding("branch", branch, "not a <lane>/<id> name wf would make", "info")
    archived, open_ids = scan.archived, scan.open_ids
    tip = gitops.rev(root, branch) or ""
    merged = gitops.is_ancestor(root, tip, scan.main_sha)
    if task_id in archived and merged:
        user = next((e.path for e in regs if e.branch == branch), None)
        fixed = scan.fix and _free_branch(project, branch, user, scan.bl)
        msg = f"task done and merged into {main}; safe to delete"
        if scan.fix and not fixed and user is not None:
            msg += f"; not fixed: checked out in {user}, which has uncommitted changes or is in use"
        return Finding("branch", branch, msg, "problem", fixed)
    if task_id in archived:
        why = (
            f"task archived but the branch has commits not in {main}; wf never deletes "
            f"unmerged work: merge it (wf merge {branch}) or delete it by hand (git branch -D)"
        )
        return Finding("branch", branch, why, "problem")
    if task_id in open_ids and merged and (made := gitops.find_merge_of(root, scan.main_sha, tip)):
        return _unarchived(project, scan.bl, task_id, branch, made, fix=scan.fix)
    if task_id not in open_ids:
        return Finding("branch", branch, "no task with this id in TASKS.md or the archive", "info")
    if branch not in held and not any(e.branch == branch for e in regs):
        return Finding("branch", branch, "task branch with no tree (wf wt add or wf merge)", "info")
    return None


# The checks of a git project, in the order they run (and their findings are listed).
CHECKS: tuple[Callable[[Scan], list[Finding]], ...] = (
    stale_lock_findings,
    stale_index_findings,
    registration_findings,
    bad_records,
    tree_findings,
    backup_findings,
    branch_findings,
)
