"""``wf sync``: share the backlog with the other machines through the shared remote.

One round: fetch the remote's main branch and its cost log ref; under the project lock,
merge TASKS.md by task and the archive as a union (:mod:`wf.tasks.merge3`) with what
was fetched, the rest of the tree with ``git merge-tree``, and commit that on the local
main (the working files follow); append the cost lines the remote has to the local log;
then push main and the cost ref, each a lease on the sha just fetched and merged. A push
that loses the race (another machine pushed first) starts a new round: fetch, merge,
push. Nothing is pushed before what was fetched is merged, never with ``--force``.

Refusals change nothing anywhere: a conflict in a person's text (:class:`SyncConflict`,
exit 4, both texts shown, never markers), a file both sides changed that is not the
backlog, uncommitted changes to a file the merge would change, a remote that cannot
be reached.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wf.base.errors import WfError
from wf.base.fsutil import atomic_write, read_bytes
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.tasks import archive as archivemod
from wf.tasks.merge3 import Conflict, Side, merge_archive, merge_tasks, union_lines
from wf.trees import gitfiles, gitops, remote, worktrees
from wf.trees.merge import DirtyMain

ROUNDS = 8  # rounds lost to other machines' pushes before giving up
COST_LOG = "wf-cost.log"  # the one file of the cost ref's tree


class SyncConflict(WfError):
    """Both sides changed the same text: nothing was written or pushed."""

    exit_code = 4

    def __init__(self, conflicts: tuple[Conflict, ...], paths: list[str]) -> None:
        self.conflicts = conflicts
        self.paths = paths
        lines = []
        for c in conflicts:
            where = c.task or "(text before the first task)"
            lines.append(f"  {where}: {c.part} ({c.kind.value})")
            lines.append(f"    here:   {_shown(c.ours)}")
            lines.append(f"    remote: {_shown(c.theirs)}")
        lines += [f"  {p}: changed here and on the remote" for p in paths]
        hint = (
            "Keep one side of a task with --ours ID or --theirs ID (edit it here first to combine both), "
            "or make this machine's text the same as the remote's, then run wf sync again."
            if conflicts
            else "Merge the remote's main into this main with git (resolve, commit), then run wf sync again."
        )
        super().__init__(
            "wf sync: nothing was written or pushed; both sides changed:\n" + "\n".join(lines) + "\n" + hint
        )


def _shown(text: str | None) -> str:
    if text is None:
        return "(deleted)"
    one = text.strip().replace("\r", "").replace("\n", " | ")
    return one if len(one) <= 200 else one[:197] + "..."


class State(enum.Enum):
    PUSHED = "pushed"  # the remote took this machine's main (and cost log)
    UP_TO_DATE = "up to date"  # nothing to push: the remote had it all


@dataclass
class Outcome:
    remote: str
    main: str
    state: State = State.UP_TO_DATE
    commit: str = ""  # main after the sync, here and on the remote
    rounds: int = 0
    added: list[str] = field(default_factory=list)  # tasks that came from the remote
    removed: list[str] = field(default_factory=list)  # tasks the remote deleted or archived
    archived: int = 0  # archive lines that came from the remote
    cost_lines: int = 0  # cost log lines that came from the remote

    def as_dict(self) -> dict[str, object]:
        return {
            "remote": self.remote,
            "main": self.main,
            "state": self.state.value,
            "commit": self.commit,
            "rounds": self.rounds,
            "added": self.added,
            "removed": self.removed,
            "archived": self.archived,
            "cost_lines": self.cost_lines,
        }


def cost_ref(claim_refs: str) -> str:
    """Where the shared cost log lives: beside the claims (a strict host's refs/heads)."""
    return "refs/heads/wf-cost/log" if claim_refs.startswith("refs/heads/") else "refs/wf/cost/log"


def sync(
    project: Project,
    *,
    take: Mapping[str, Side] | None = None,
    rounds: int = ROUNDS,
    on_wait: Callable[[str], None] | None = None,
) -> Outcome:
    """Fetch, merge, push with a lease; again while another machine wins the race."""
    name = project.config.shared
    if not name:
        raise WfError('no shared remote: set shared = "<remote>" in wf.toml (docs/machines.md)')
    root = project.root
    main = worktrees.main_branch(project)
    if gitops.current_branch(root) != main:
        raise WfError(f"the main checkout {root} is not on {main}; switch it back first")
    costref = cost_ref(project.config.claim_refs)
    out = Outcome(name, main)
    for n in range(1, rounds + 1):
        out.rounds = n
        theirs, theirs_cost = _fetch(root, name, main, costref)
        with project_lock(project.wf_dir, project.lock_timeout, on_wait):
            head = _merge_local(project, main, theirs, take or {}, out)
        cost = _cost_commit(root, theirs_cost, out)
        updates = []
        if head != theirs:
            updates.append(remote.Update(head, f"refs/heads/{main}", theirs or ""))
        if cost != theirs_cost and cost is not None:
            updates.append(remote.Update(cost, costref, theirs_cost or ""))
        out.commit = head
        if not updates:
            return out
        pushed = remote.push(root, name, updates)
        refused = [p for p in pushed if p.outcome is remote.PushOutcome.REFUSED]
        if refused:
            raise WfError(
                f"shared remote {name!r} refused {', '.join(p.ref for p in refused)}: {refused[0].detail}"
                + (
                    ' (a host that takes only refs/heads/: claim_refs = "refs/heads/wf-claims")'
                    if any(p.ref == costref for p in refused) and not costref.startswith("refs/heads/")
                    else ""
                )
            )
        if all(p.outcome is not remote.PushOutcome.STALE for p in pushed):
            out.state = State.PUSHED
            return out
    raise WfError(
        f"wf sync: other machines pushed to {name!r} first {rounds} times in a row; nothing is lost "
        "(this main has everything merged so far); run wf sync again"
    )


def if_shared(project: Project, *, on_wait: Callable[[str], None] | None = None) -> str | None:
    """Sync when wf.toml names a shared remote (``wf orch pick`` before it picks, ``post``
    after it posts); None when synced or nothing is shared. A remote that cannot be reached
    is said in the line returned (local work goes on: a claim of shared work refuses on
    its own); any other refusal (a conflict a person must settle) is raised."""
    if not project.config.shared:
        return None
    try:
        sync(project, on_wait=on_wait)
    except remote.RemoteError as e:
        if e.fault is not remote.RemoteFault.UNREACHABLE:
            raise
        return f"not synced: {e}"
    return None


def _fetch(root: Path, name: str, main: str, costref: str) -> tuple[str | None, str | None]:
    """The remote's main and cost ref as fetched now (None: it has none)."""
    heads = remote.ls_remote(root, name, "refs/heads")
    costs = remote.ls_remote(root, name, costref.rsplit("/", 1)[0])
    specs = []
    track = f"refs/remotes/{name}/{main}"
    if f"refs/heads/{main}" in heads:
        specs.append(f"+refs/heads/{main}:{track}")
    if costref in costs:
        specs.append(f"+{costref}:refs/wf/sync/cost")
    if specs:
        remote.fetch(root, name, *specs)
    theirs = gitops.rev(root, track) if f"refs/heads/{main}" in heads else None
    theirs_cost = gitops.rev(root, "refs/wf/sync/cost") if costref in costs else None
    return theirs, theirs_cost


def _merge_local(
    project: Project, main: str, theirs: str | None, take: Mapping[str, Side], out: Outcome
) -> str:
    """Merge ``theirs`` into the local main and its working files; the new main."""
    root = project.root
    head = gitops.rev(root, main)
    if head is None:
        raise WfError(f"the main branch {main} has no commit yet")
    tasks_rel, archive_rel = project.tasks_in_git, project.archive_in_git
    ours_t = read_bytes(project.tasks_path)
    ours_a = read_bytes(project.archive_path)
    base_t, base_a, theirs_t, theirs_a, theirs_time = "", None, "", None, 0.0
    if theirs is not None:
        mb = gitops.run(root, "merge-base", head, theirs, ok=(0, 1)).out.strip() or None
        base_t = (gitops.show(root, mb, tasks_rel) or "") if mb else ""
        base_a = gitops.show(root, mb, archive_rel) if mb else None
        theirs_t = gitops.show(root, theirs, tasks_rel) or ""
        theirs_a = gitops.show(root, theirs, archive_rel)
        theirs_time = float(gitops.out(root, "log", "-1", "--format=%ct", theirs).strip() or 0)
    ours_text = (ours_t or b"").decode("utf-8", "surrogateescape")
    ours_arch = ours_a.decode("utf-8", "surrogateescape") if ours_a is not None else None
    merged_a = merge_archive(base_a, ours_arch, theirs_a, project.config.archive)
    arch = archivemod.parse(merged_a.encode() if merged_a is not None else None, project.config.archive)
    mtime = os.stat(project.tasks_path).st_mtime if ours_t is not None else 0.0
    m = merge_tasks(
        base_t, ours_text, theirs_t, times=(mtime, theirs_time), archived=frozenset(arch.ids()),
        take=take, path=project.config.tasks,
    )  # fmt: skip
    if m.conflicts:
        raise SyncConflict(m.conflicts, [])
    parents, code_tree = _code_merge(root, head, theirs, {tasks_rel, archive_rel})
    files = {tasks_rel: m.text}
    if merged_a is not None:
        files[archive_rel] = merged_a
    tree = _tree_with(root, code_tree, files)
    if len(parents) == 1 and tree == gitops.out(root, "rev-parse", f"{parents[0]}^{{tree}}").strip():
        new = parents[0]
    else:
        new = gitops.commit_tree(root, tree, parents, "wf sync: the backlog of every machine\n")
    _check_clean(root, head, new, {tasks_rel, archive_rel})
    if not atomic_write(project.tasks_path, m.text.encode("utf-8", "surrogateescape"), expect=ours_t):
        raise WfError(
            f"{project.config.tasks} changed while wf sync merged it (an editor?); run wf sync again"
        )
    if merged_a is not None and merged_a.encode() != (ours_a or b""):
        atomic_write(project.archive_path, merged_a.encode("utf-8", "surrogateescape"))
    gitops.run(root, "update-index", "--add", "--", *files)
    if new != head:
        gitops.fast_forward(root, new)
    out.added += [i for i in m.added if i not in out.added]
    out.removed += [i for i in m.removed if i not in out.removed]
    before = archivemod.parse(ours_a, project.config.archive).ids() if ours_a is not None else set()
    out.archived += len(arch.ids() - before)
    return new


def _code_merge(root: Path, head: str, theirs: str | None, backlog: set[str]) -> tuple[list[str], str]:
    """The parents of the synced main and the tree its other files come from."""
    if theirs is None or gitops.is_ancestor(root, theirs, head):
        return [head], head
    if gitops.is_ancestor(root, head, theirs):
        return [theirs], theirs
    r = gitops.run(
        root, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z",
        "--allow-unrelated-histories", head, theirs, ok=(0, 1),
    )  # fmt: skip
    parts = r.out.split("\0")
    others = sorted({p for p in parts[1:] if p.strip()} - backlog) if r.status else []
    if others:
        raise SyncConflict((), others)
    return [head, theirs], parts[0].strip()


def _tree_with(root: Path, treeish: str, files: dict[str, str]) -> str:
    blobs = {
        p: gitops.run(root, "hash-object", "-w", "--stdin", stdin=t).out.strip() for p, t in files.items()
    }
    entries = [a for p, b in blobs.items() for a in ("--cacheinfo", f"100644,{b},{p}")]
    index = gitops.git_dir(root) / f"{gitfiles.TMP_INDEX}{gitfiles.tmp_index_id(os.getpid())}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        gitops.env_run(root, env, "read-tree", treeish)
        gitops.env_run(root, env, "update-index", "--add", *entries)
        return gitops.env_run(root, env, "write-tree").out.strip()
    finally:
        index.unlink(missing_ok=True)


def _check_clean(root: Path, head: str, new: str, backlog: set[str]) -> None:
    """Refuse (changing nothing) when the person's uncommitted changes touch a file the
    merge would change (the backlog's files are merged, not overwritten)."""
    if new == head:
        return
    changes = {p: s for p, s in gitops.changed_paths(root, head, new).items() if p not in backlog}
    dirty = gitops.dirty_paths(root, set(changes))
    dirty += [p for p in sorted(changes) if changes[p] == "A" and (root / p).exists() and p not in dirty]
    if dirty:
        raise DirtyMain(root, dirty)


def _cost_commit(root: Path, theirs: str | None, out: Outcome) -> str | None:
    """Append the remote's cost lines this machine lacks to its log; the commit of the
    union to push (None: neither side has a line; ``theirs``: the remote has them all)."""
    path = root / "out" / COST_LOG
    ours = read_bytes(path) or b""
    shown = gitops.show(root, theirs, COST_LOG) if theirs else None
    remote_log = shown.encode("utf-8", "surrogateescape") if shown is not None else b""
    missing = union_lines(b"", remote_log)
    have = set(ours.splitlines())
    new_here = [ln for ln in missing.splitlines() if ln not in have]
    if new_here:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:  # appended, never rewritten: a worker may append its own line now
            if ours and not ours.endswith(b"\n"):
                f.write(b"\n")
            f.write(b"".join(ln + b"\n" for ln in new_here))
        out.cost_lines += len(new_here)
    union = union_lines(remote_log, ours)
    if union == remote_log:
        return theirs
    text = union.decode("utf-8", "surrogateescape")
    empty = gitops.run(root, "hash-object", "-t", "tree", "-w", "--stdin", stdin="").out.strip()
    tree = _tree_with(root, empty, {COST_LOG: text})
    return gitops.commit_tree(root, tree, [theirs] if theirs else [], "wf sync: cost log\n")
