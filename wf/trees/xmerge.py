"""Merges across machines: ``wf merge`` when wf.toml names a shared remote.

Before the merge, the task's branch is pushed to the remote (a lease on what the remote
had: work survives the machine) and main is brought level with the remote's main
(:func:`sync_main`): a machine that is behind moves its main checkout forward first, so
a merge is never made on a stale main. After the merge, main is pushed with a lease on
the remote's main as last fetched. A push that loses the race (another machine pushed
first) fetches again and *redoes* this machine's own unpushed commits on the new main
(:func:`replay`): a merge commit is merged again from its branch tip, an archive commit
is rebuilt from the new main's TASKS.md and archive (its line naming the new merge
commit), so the push is always a fast-forward of what the remote has. Never ``--force``,
never a push before what was fetched is merged. A commit of a person's on main that
the remote lacks, while the remote moved on, is not rewritten: :class:`Diverged` says so
and nothing is changed.

Moving the main checkout (:func:`advance`) keeps uncommitted changes: of TASKS.md and
the archive (a claim's status line, a person's edit) by a three-way merge of the file
(the old main's version, the file, the new main's version) that must be clean (no
conflict markers are ever written; a conflict refuses and changes nothing); of any
other file the move touches it refuses, as a merge does. The file's uncommitted bytes
are saved in ``.wf/xmerge-carry.json`` first: a kill anywhere in the move is finished
by :func:`recover` on the next run, and nothing a person typed is lost.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from wf.base import settle
from wf.base.errors import WfError
from wf.base.fsutil import atomic_write, read_bytes
from wf.base.project import Project
from wf.trees import books, gitfiles, gitops, remote
from wf.trees.remote import PushOutcome, Update

TRIES = 20  # pushes of main that may lose the race before wf gives up (each one redoes the merge)
REFUSALS = 3  # refusals of a push of main before wf takes it as the host's answer
PENDING = "xmerge-carry.json"
# a file's bytes as the old main has them (None: not there), uncommitted, the new main's, merged
Carried = tuple[bytes | None, bytes, bytes, bytes]


class Diverged(WfError):
    def __init__(self, main: str, shared: str, commit: str, why: str) -> None:
        self.commit = commit
        super().__init__(
            f"{main} and {shared}'s {main} have diverged and {commit[:12]} ({why}) cannot be redone "
            f"by wf; nothing was changed. Bring them together (git pull --rebase {shared} {main}, "
            "or wf sync), then run wf merge again."
        )


class RedoConflict(WfError):
    def __init__(self, main: str, shared: str, commit: str, paths: list[str]) -> None:
        self.commit = commit
        self.paths = paths
        listed = "\n".join(f"  {p}" for p in paths)
        super().__init__(
            f"{shared}'s {main} moved, and redoing {commit[:12]} on it conflicts; nothing was changed "
            f"(the merge is on this machine's {main} only). Conflicting paths:\n{listed}\n"
            f"Merge {shared}'s {main} by hand (git pull {shared} {main}), then run wf merge again."
        )


class Uncarried(WfError):
    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(
            f"main must move to the shared remote's main, but the uncommitted changes of {path} "
            f"cannot be carried over ({why}); nothing was changed. Commit or revert them "
            "(or wf sync), then run wf merge again."
        )


def _shared(project: Project) -> str:
    name = project.config.shared
    if name is None:
        raise WfError("no shared remote in wf.toml")
    return name


def before(project: Project, main: str, branch: str, tip: str | None, notes: list[str]) -> str | None:
    """What ``wf merge`` does first with a shared remote: the task's branch pushed (unless
    main holds it), or fetched when only the remote has it (another machine's work), then
    main made level with the remote's. The branch's tip."""
    if tip is None:
        tip = _fetch_branch(project, branch, notes)
    elif not gitops.is_ancestor(project.root, tip, gitops.rev(project.root, main) or main):
        push_branch(project, branch, tip)
    sync_main(project, main, notes)
    return tip


def _fetch_branch(project: Project, branch: str, notes: list[str]) -> str | None:
    """The task's branch from the remote, when this machine has none (its tip, or None)."""
    shared, root = _shared(project), project.root
    ref = f"refs/heads/{branch}"
    seen = remote.ls_remote(root, shared, f"refs/heads/{branch.split('/')[0]}").get(ref)
    if seen is None:
        return None
    remote.fetch(root, shared, f"{ref}:{ref}")
    notes.append(f"fetched {branch} from {shared} (pushed there by another machine)")
    return gitops.rev(root, branch)


def push_branch(project: Project, branch: str, tip: str) -> None:
    """Put the task's branch on the shared remote before anything else, with a lease on
    the value the remote has (a branch there with commits this one lacks is refused)."""
    shared, root = _shared(project), project.root
    ref = f"refs/heads/{branch}"
    seen = remote.ls_remote(root, shared, f"refs/heads/{branch.split('/')[0]}").get(ref)
    if seen == tip:
        return
    if seen is not None:
        if not gitops.commit_exists(root, seen):
            remote.fetch(root, shared, f"+{ref}:refs/remotes/{shared}/{branch}")
        if not gitops.is_ancestor(root, seen, tip):
            raise WfError(
                f"{shared}'s {branch} has commits this machine's {branch} lacks ({seen[:12]}); nothing "
                f"was changed. Merge them into the branch (git pull {shared} {branch}), then wf merge again."
            )
    [done] = remote.push(root, shared, [Update(tip, ref, seen or "")])
    if done.outcome not in (PushOutcome.OK, PushOutcome.SAME):
        raise WfError(
            f"could not push {branch} to {shared} ({done.outcome.value}: {done.detail}); nothing was merged"
        )


def drop_branch(project: Project, branch: str, tip: str, notes: list[str]) -> None:
    """Delete the task's branch on the remote once the remote's main holds it (a lease on
    the tip pushed: a branch that moved meanwhile stays)."""
    shared, root = _shared(project), project.root
    ref = f"refs/heads/{branch}"
    try:
        seen = remote.ls_remote(root, shared, f"refs/heads/{branch.split('/')[0]}").get(ref)
        if seen != tip:
            return
        [done] = remote.push(root, shared, [Update(None, ref, tip)])
    except remote.RemoteError as e:
        notes.append(f"kept {branch} on {shared}: {e.detail}")
        return
    if done.outcome is not PushOutcome.OK:
        notes.append(f"kept {branch} on {shared}: {done.detail}")


def _remote_main(project: Project, shared: str, main: str) -> str | None:
    """The remote's main (fetched into ``refs/remotes/<shared>/<main>``), None if it has none."""
    root = project.root
    sha = remote.ls_remote(root, shared, "refs/heads").get(f"refs/heads/{main}")
    if sha is not None and not gitops.commit_exists(root, sha):
        remote.fetch(root, shared, f"+refs/heads/{main}:refs/remotes/{shared}/{main}")
    return sha


def sync_main(project: Project, main: str, notes: list[str]) -> bool:
    """Make the shared remote's main and this machine's the same commit: move forward
    when behind, push with a lease when ahead, redo this machine's commits on the
    remote's main when both moved. True if this machine's main changed."""
    shared, root = _shared(project), project.root
    notes.extend(recover(project))
    moved, refused = False, 0
    for _ in range(TRIES):
        theirs = _remote_main(project, shared, main)
        ours = gitops.rev(root, main)
        if ours is None:
            raise WfError(f"the main branch {main} has no commit")
        if ours == theirs:
            return moved
        if theirs is not None and gitops.is_ancestor(root, ours, theirs):
            advance(project, ours, theirs)
            notes.append(f"brought {main} up to {shared}'s {theirs[:12]} first")
            return True
        if theirs is not None and not gitops.is_ancestor(root, theirs, ours):
            redone, renamed = replay(project, main, theirs, ours)
            advance(project, ours, redone, renamed)
            notes.append(f"{shared}'s {main} had moved: redid this machine's commits on {theirs[:12]}")
            ours, moved = redone, True
            if ours == theirs:
                return moved
        [done] = remote.push(root, shared, [Update(ours, f"refs/heads/{main}", theirs or "")])
        if done.outcome in (PushOutcome.OK, PushOutcome.SAME):
            gitops.update_ref(root, f"refs/remotes/{shared}/{main}", ours)
            return moved
        if done.outcome is PushOutcome.REFUSED:  # a hook, or a ref another push held locked: again
            refused += 1
            if refused == REFUSALS:
                raise WfError(f"{shared} refused {main} ({done.detail}); the merge is on this machine only")
    raise WfError(
        f"{shared}'s {main} kept moving: {TRIES} pushes lost the race; the merge is on this "
        "machine's main only. Run wf merge again to push it."
    )


def replay(project: Project, main: str, onto: str, ours: str) -> tuple[str, dict[str, str]]:
    """This machine's commits of ``ours`` that ``onto`` lacks, redone on ``onto``: the
    new tip. Only wf's own kinds of commit are redone (a merge of a branch, an archive
    commit); anything else is :class:`Diverged`."""
    root = project.root
    base = gitops.out(root, "merge-base", onto, ours).strip()
    listed = gitops.out(root, "rev-list", "--reverse", "--first-parent", "--parents", f"{base}..{ours}")
    head = onto
    renamed: dict[str, str] = {}  # a merge commit of ours -> its redone commit
    for line in listed.splitlines():
        commit, *parents = line.split()
        message = gitops.out(root, "log", "-1", "--format=%B", commit)
        task = books.archived_by(root, commit)
        if len(parents) == 2:
            done = gitops.merge_tree(root, head, parents[1])
            if done.tree is None:
                raise RedoConflict(main, str(project.config.shared), commit, done.conflicts)
            if done.tree != gitops.out(root, "rev-parse", f"{head}^{{tree}}").strip():
                head = gitops.commit_tree(root, done.tree, [head, parents[1]], message)
                renamed[commit] = head
            else:  # merged there already (by another machine): its archive line names that
                renamed[commit] = gitops.find_merge_of(root, head, parents[1]) or head
        elif len(parents) == 1 and task is not None:
            files = _rearchive(project, head, commit, task, renamed)
            if files:
                head = gitops.commit_tree(root, _tree(root, head, files), [head], message)
        else:
            raise Diverged(main, str(project.config.shared), commit, "not a merge or archive commit of wf's")
    return head, renamed


def _rearchive(
    project: Project, head: str, commit: str, task: str, renamed: dict[str, str]
) -> dict[str, str]:
    """The files of archive commit ``commit`` (of ``task``), redone on ``head``: its
    archive line names the redone merge commit."""
    from wf.tasks import archive as archivemod

    text = gitops.show(project.root, commit, project.archive_in_git)
    arch = archivemod.parse(text.encode("utf-8", "surrogateescape") if text is not None else None)
    entry = arch.find(task)
    if entry is None:
        return {}
    line = entry.raw.rstrip("\r\n")
    for old, new in renamed.items():
        if entry.commit not in ("-", "") and old.startswith(entry.commit):
            line = line.replace(f"commit={entry.commit}", f"commit={new[: len(entry.commit)]}", 1)
    return books.bookkeeping_files(project, head, task, line, archivemod.kept_under(arch, task))


def _tree(root: Path, head: str, files: dict[str, str]) -> str:
    """The tree of ``head`` with ``files`` set."""
    data = {p: t.encode("utf-8", "surrogateescape") for p, t in files.items()}
    tree = gitops.tree_in_process(root, head, data)
    if tree is not None:
        return tree
    index = gitops.git_dir(root) / f"{gitfiles.TMP_INDEX}{gitfiles.tmp_index_id(os.getpid())}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        gitops.env_run(root, env, "read-tree", head)
        for p, t in files.items():
            blob = gitops.run(root, "hash-object", "-w", "--stdin", stdin=t).out.strip()
            gitops.env_run(root, env, "update-index", "--add", "--cacheinfo", f"100644,{blob},{p}")
        return gitops.env_run(root, env, "write-tree").out.strip()
    finally:
        index.unlink(missing_ok=True)


def _blob(root: Path, commit: str, path: str) -> bytes | None:
    blob = gitops.resolve(root, f"{commit}:{path}")
    return None if blob is None else gitops.read_blob(root, blob)


def carry(root: Path, base: bytes, ours: bytes, theirs: bytes, *, tasks: bool = False) -> bytes | None:
    """The three-way merge of a file's uncommitted bytes ``ours`` with the change from
    ``base`` to ``theirs``; None when it conflicts (no markers are ever returned).
    TASKS.md (``tasks``) merges task by task; an archive whose uncommitted change only
    appends lines gets them after ``theirs`` (a union); else git merges it by lines."""
    if ours in (base, theirs):
        return theirs
    if theirs == base:
        return ours
    merged = _carry_tasks(base, ours, theirs) if tasks else None
    if merged is not None:
        return merged
    if not tasks and ours.startswith(base):
        extra = [
            ln
            for ln in ours[len(base) :].splitlines(keepends=True)
            if ln not in theirs.splitlines(keepends=True)
        ]
        return theirs + (b"\n" if theirs and not theirs.endswith(b"\n") else b"") + b"".join(extra)
    folder = gitops.git_dir(root)
    names = [folder / f"wf-carry-{os.getpid()}-{n}" for n in ("ours", "base", "theirs")]
    try:
        for name, data in zip(names, (ours, base, theirs), strict=True):
            name.write_bytes(data)
        done = gitops.run(root, "merge-file", "-p", "-q", *map(str, names), ok=tuple(range(256)))
    finally:
        for name in names:
            name.unlink(missing_ok=True)
    return done.out.encode("utf-8", "surrogateescape") if done.status == 0 else None


def _chunks(data: bytes) -> tuple[str, dict[str, str], list[str]] | None:
    """(preamble, id -> the task's text up to the next task, the ids in order); None when
    the file has errors that make tasks unclear (a duplicate id, a bad heading)."""
    from wf.tasks import taskfile

    try:
        doc = taskfile.parse_text(data.decode("utf-8"))
    except (UnicodeDecodeError, WfError):
        return None
    if doc.errors:
        return None
    starts = [t.span[0] for t in doc.tasks] + [len(doc.text)]
    texts = {t.id: doc.text[starts[i] : starts[i + 1]] for i, t in enumerate(doc.tasks)}
    return doc.text[: starts[0]], texts, [t.id for t in doc.tasks]


def _carry_tasks(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """TASKS.md merged task by task: a task changed (or added, or removed) on one side
    only takes that side; changed on both the same way, either; else a conflict."""
    split = [_chunks(x) for x in (base, ours, theirs)]
    if split[0] is None or split[1] is None or split[2] is None:
        return None  # tasks unclear on one side: git merges the file by lines
    (b_pre, b, _), (o_pre, o, o_ids), (t_pre, t, t_ids) = split[0], split[1], split[2]

    def pick(was: str | None, mine: str | None, other: str | None) -> tuple[str | None, bool]:
        if mine in (was, other):
            return other, True
        return (mine, True) if other == was else (None, False)

    pre, ok = pick(b_pre, o_pre, t_pre)
    if not ok:
        return None
    order = list(t_ids)
    for i, task_id in enumerate(o_ids):  # a task only ours has: after the task before it in ours
        if task_id not in order:
            before = next((x for x in reversed(o_ids[:i]) if x in order), None)
            order.insert(order.index(before) + 1 if before is not None else 0, task_id)
    out = [pre or ""]
    for task_id in order:
        text, ok = pick(b.get(task_id), o.get(task_id), t.get(task_id))
        if not ok:
            return None
        if text is not None:
            if not out[-1].endswith("\n") and len(out) > 1:  # the last task of a side, now not last
                out[-1] += "\n"
            out.append(text)
    return "".join(out).encode("utf-8")


def advance(project: Project, old: str, new: str, renamed: dict[str, str] | None = None) -> None:
    """Move the main checkout from commit ``old`` to ``new``, carrying over uncommitted
    changes of TASKS.md and the archive; refuses (nothing changed) when it cannot."""
    root = project.root
    changes = gitops.changed_paths(root, old, new)
    dirty = gitops.dirty_paths(root, set(changes))
    bookkeeping = {project.tasks_in_git, project.archive_in_git}
    others = [p for p in dirty if p not in bookkeeping]
    if others:
        raise Uncarried(
            others[0], "a file the remote's main changes; only TASKS.md and the archive are carried"
        )
    carried: dict[str, Carried] = {}
    for path in dirty:
        base, theirs, ours = _blob(root, old, path), _blob(root, new, path), read_bytes(root / path)
        if theirs is None or ours is None or (base is None and path != project.archive_in_git):
            raise Uncarried(path, "it is added or removed on one side")
        # an archive new on both sides (its first line, made on each): their union
        merged = carry(root, base or b"", ours, theirs, tasks=path == project.tasks_in_git)
        if merged is None:
            raise Uncarried(path, "they and the remote's changes touch the same lines")
        if path == project.archive_in_git:  # an uncommitted archive line names the redone merge
            for was, now in (renamed or {}).items():
                merged = merged.replace(f" commit={was} ".encode(), f" commit={now} ".encode())
        carried[path] = (base, ours, theirs, merged)
    pending = project.wf_dir / PENDING
    record = {
        "old": old,
        "new": new,
        "files": {p: [base64.b64encode(x).decode() for x in (v[1], v[3])] for p, v in carried.items()},
    }
    atomic_write(pending, json.dumps(record).encode())
    for path, (base, ours, _, _) in carried.items():
        if not _put(project, path, base, ours):
            _restore(project, carried)
            pending.unlink(missing_ok=True)
            raise Uncarried(path, "it changed while wf was moving main; run wf merge again")
    try:
        gitops.run(root, "update-index", "-q", "--refresh", ok=(0, 1))  # the files' new stat data
        gitops.run(root, "reset", "--quiet", "--keep", new)
    except gitops.GitError as e:
        _restore(project, carried)
        pending.unlink(missing_ok=True)
        raise Uncarried(", ".join(sorted(dirty)) or "main", f"git refused to move it: {e.reason}") from None
    for path, (_, _, theirs, merged) in carried.items():
        _put(project, path, merged, theirs)
    pending.unlink(missing_ok=True)


def _put(project: Project, path: str, data: bytes | None, expect: bytes | None) -> bool:
    """Set a file to ``data`` (None: remove it) if it holds ``expect``; whether it did."""
    target = project.root / path
    if data is None:
        if read_bytes(target) != expect:
            return False
        target.unlink()
        return True
    return settle.replace_checked(target, data, expect, project.lock_timeout) is not None


def _restore(project: Project, carried: dict[str, Carried]) -> None:
    for path, (base, ours, _, _) in carried.items():
        _put(project, path, ours, base)


def recover(project: Project) -> list[str]:
    """Finish a move of the main checkout that a kill interrupted: the saved uncommitted
    bytes of TASKS.md and the archive are put back (merged when main moved)."""
    pending = project.wf_dir / PENDING
    data = read_bytes(pending)
    if data is None:
        return []
    record = json.loads(data)
    root = project.root
    books = {project.tasks_in_git, project.archive_in_git}
    shas = [record.get("old"), record.get("new")]
    if not all(isinstance(x, str) and len(x) == 40 and set(x) <= set("0123456789abcdef") for x in shas) or (
        not set(record.get("files", {})) <= books
    ):
        raise WfError(
            f"{pending} is not one wf wrote (commit ids, TASKS.md and the archive only); look, remove it"
        )
    head = gitops.rev(root, "HEAD")
    moved = head == record["new"]
    done = []
    for path, (ours, merged) in record["files"].items():
        want = base64.b64decode(merged if moved else ours)
        at = _blob(root, record["new"] if moved else record["old"], path)
        now = read_bytes(root / path)
        if now == at and now != want:
            _put(project, path, want, now)
            done.append(f"put back the uncommitted changes of {path} that a killed wf merge was carrying")
    pending.unlink(missing_ok=True)
    return done
