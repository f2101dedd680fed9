"""Bring a clone unit's changes into the main checkout: ``wf apply RUN UNIT``.

A clone unit's changes are everything its clone holds beyond the commit it started from
(status.json ``base``): its commits, its uncommitted edits and its untracked files
(ignored ones not). They are read as one tree by a git that never reads the clone's own
git folder beyond its objects (``sealed_git``: the unit wrote that folder's config, so
nothing it planted there runs), the clone's index untouched, written as a binary patch
to the unit's folder (``changes.patch``) and applied with ``git apply`` to the main checkout's files only:
the changes are left unstaged, nothing is committed and the index is never written.
``git apply`` is all or nothing, so a patch that does not apply changes nothing.

Refused, with nothing changed: a unit still running, one that did not run in a clone,
a clone record that points anywhere but the run's own folder, a clone whose files git
will not read as a tree (a path that would leave the checkout, such as ``../x``), files
of the patch with uncommitted changes in the checkout, and a patch that does not apply
(the files that do not are named). Symlinks of the patch that point outside the checkout
go in, named in a warning.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from wf.base.errors import WfError
from wf.base.ids import valid_id
from wf.base.project import Project
from wf.workers import procs, runs

OK, DOES_NOT_APPLY = 0, 4
PATCH = "changes.patch"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_GLOB = re.compile(r"([*?\[\]\\])")


class Refusal(Enum):
    """Why a unit's changes do not go into the checkout."""

    DIRTY = "uncommitted changes"  # the checkout has its own changes to files of the patch
    CONFLICT = "does not apply"  # git apply refuses the patch


@dataclass(frozen=True)
class Applied:
    """What ``wf apply`` did (or, with ``check``, would do): the files of the unit's patch,
    and when it did not apply, why and which files."""

    run: str
    unit: str
    base: str
    target: Path
    patch: Path | None
    files: tuple[str, ...]
    check: bool
    refusal: Refusal | None = None
    blocked: tuple[str, ...] = field(default_factory=tuple)
    links_out: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (symlink, its target)

    @property
    def applies(self) -> bool:
        return self.refusal is None

    @property
    def code(self) -> int:
        return OK if self.applies else DOES_NOT_APPLY

    def lines(self) -> list[str]:
        """The words a person reads."""
        who = f"{self.run}/{self.unit}"
        if not self.files:
            return [f"{who}: no changes to apply (its clone is at {self.base[:12]})"]
        if self.refusal is Refusal.DIRTY:
            return [
                f"{who}: not applied: {self.target} has uncommitted changes to {', '.join(self.blocked)}"
                " (commit or stash them first); nothing changed"
            ]
        if self.refusal is Refusal.CONFLICT:
            return [
                f"{who}: does not apply to {self.target}: {', '.join(self.blocked)}; nothing changed"
                f" (the patch: {self.patch})"
            ]
        verb = "applies cleanly" if self.check else "applied (unstaged, not committed)"
        return [
            f"{who}: {verb}: {len(self.files)} file(s) in {self.target}",
            *(f"  {f}" for f in self.files),
            *(f"warning: symlink {p} points outside the checkout: {t}" for p, t in self.links_out),
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "unit": self.unit,
            "base": self.base,
            "target": str(self.target),
            "patch": str(self.patch) if self.patch else None,
            "files": list(self.files),
            "check": self.check,
            "applies": self.applies,
            "applied": self.applies and not self.check and bool(self.files),
            "refusal": self.refusal.value if self.refusal else None,
            "blocked": list(self.blocked),
            "symlinks_outside": [{"path": p, "target": t} for p, t in self.links_out],
            "code": self.code,
        }


def apply(project: Project, run: str, unit: str, *, check: bool = False) -> Applied:
    """Apply unit ``unit`` of ``run``'s clone changes to the main checkout's files (with
    ``check``: only say whether they apply). Errors (no such unit, not a clone unit, still
    running, a damaged record) raise WfError; a patch that does not go in is an Applied
    with its refusal."""
    from wf.fanout.watch import repair_lost
    from wf.trees import gitops

    folder = runs.unit_dir(project, run, unit)  # the ids are checked here
    repair_lost(project, run)
    clone, base = _clone_of(project, run, unit, folder)
    with sealed_git(clone, folder, base) as git:
        tree = _worktree_tree(git, clone, base, unit)
        names = git("diff", "--name-only", "-z", "--no-renames", base, tree)
        files = tuple(p for p in names.split("\0") if p)
        result = Applied(run, unit, base, project.root, None, files, check)
        if not files:
            return result
        patch = _write_patch(git, base, tree, folder)
        links = _links_out(git, tree, set(files))
    result = _replace(result, patch=patch, links_out=links)
    dirty = tuple(gitops.dirty_paths(project.root, set(files)))
    if dirty:
        return _replace(result, refusal=Refusal.DIRTY, blocked=dirty)
    if _git_apply(project.root, patch, check=True, only=None) != 0:
        blocked = tuple(p for p in files if _git_apply(project.root, patch, check=True, only=p) != 0)
        return _replace(result, refusal=Refusal.CONFLICT, blocked=blocked or files)
    if not check and _git_apply(project.root, patch, check=False, only=None) != 0:
        return _replace(result, refusal=Refusal.CONFLICT, blocked=files)  # the tree changed meanwhile
    return result


def _replace(result: Applied, **changes: Any) -> Applied:
    return dataclasses.replace(result, **changes)


def _clone_of(project: Project, run: str, unit: str, folder: Path) -> tuple[Path, str]:
    """The unit's clone and the commit it started from, both checked (``clone_and_base``),
    for a unit that ran in a clone and has ended."""
    st = runs.read_status(folder)
    if st is None:
        raise WfError(f"no unit {unit} in run {run}")
    mode = st.get("mode") or ("clone" if st.get("clone") else "cwd")
    if mode != "clone":
        where = st.get("cwd") or "its own folder"
        raise WfError(
            f"unit {unit} ran in mode {mode}, not clone: its files are in {where}, nothing to apply"
        )
    if st.get("state") not in runs.FINAL or procs.alive(st.get("pid")):
        raise WfError(f"unit {unit} is still running ({st.get('state')}); apply it once it has ended")
    return clone_and_base(project, run, unit, st)


def clone_and_base(project: Project, run: str, unit: str, st: dict[str, Any]) -> tuple[Path, str]:
    """The clone of status ``st`` and the commit it started from, both checked: the clone
    is a ``clone`` folder of a unit of the same run (a resumed unit works in its first
    unit's clone), and the base is a commit id the clone holds."""
    from wf.trees import gitops

    recorded = st.get("clone")
    clone = Path(str(recorded)).resolve() if isinstance(recorded, str) and recorded else None
    run_folder = runs.run_dir(project, run).resolve()
    if (
        clone is None
        or clone.name != "clone"
        or clone.parent.parent != run_folder
        or not valid_id(clone.parent.name)
    ):
        raise WfError(f"unit {unit}: its recorded clone {recorded!r} is not a clone folder of run {run}")
    if not (clone / ".git").is_dir():
        raise WfError(f"unit {unit}: its clone {clone} is gone (or is not a git clone)")
    base = st.get("base")
    if not isinstance(base, str) or not _SHA.fullmatch(base) or not gitops.commit_exists(clone, base):
        raise WfError(f"unit {unit}: its recorded start commit {base!r} is not a commit of its clone")
    return clone, base


Git = Callable[..., str]


@contextmanager
def sealed_git(clone: Path, folder: Path, base: str) -> Iterator[Git]:
    """git on the clone's files and objects that never reads the clone's own git folder
    beyond its objects (and ``info/exclude``): the unit wrote that folder, and its config
    can name programs git would run (``core.fsmonitor``, a ``filter.*.clean`` for its
    ``.gitattributes``, hooks) or a work tree elsewhere (``core.worktree``). A fresh git
    folder in the unit's ``folder`` (removed after) borrows the clone's objects; no
    system or user config is read either. Each call: ``git args...``'s output."""
    from wf.trees import gitops

    tmp = Path(tempfile.mkdtemp(prefix=".sealed-git.", dir=folder))
    try:
        (tmp / "objects" / "info").mkdir(parents=True)
        (tmp / "refs").mkdir()
        (tmp / "info").mkdir()
        (tmp / "HEAD").write_text("ref: refs/heads/sealed\n")
        sha256 = "[extensions]\n\tobjectformat = sha256\n" if len(base) == 64 else ""
        (tmp / "config").write_text(f"[core]\n\trepositoryformatversion = {1 if sha256 else 0}\n{sha256}")
        exclude = clone / ".git" / "info" / "exclude"
        if exclude.is_file():
            shutil.copyfile(exclude, tmp / "info" / "exclude")  # the clone's ignored files stay ignored
        env = {
            "GIT_DIR": str(tmp),
            "GIT_WORK_TREE": str(clone),
            "GIT_INDEX_FILE": str(tmp / "index"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(clone / ".git" / "objects"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        sealed = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")

        def git(*args: str) -> str:
            return gitops.env_run(clone, env, *sealed, *args).out

        yield git
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _worktree_tree(git: Git, clone: Path, base: str, unit: str) -> str:
    """The tree of the clone's files as they are (tracked and untracked, ignored ones
    not), built in the sealed git's own index: the clone's index is never touched."""
    from wf.trees import gitops

    head = gitops.rev(clone, "HEAD") or base  # the files the unit tracks (ignored or not)
    try:
        # git refuses a path that would leave the checkout (``..``, ``.git``) right here
        git("read-tree", head)
        git("add", "--all", "--", ".")
        return git("write-tree").strip()
    except gitops.GitError as e:
        raise WfError(f"unit {unit}: its clone's files cannot be read as a tree: {e.reason}") from None


def _links_out(git: Git, tree: str, files: set[str]) -> tuple[tuple[str, str], ...]:
    """The symlinks among ``files`` of ``tree`` whose target leaves the checkout (an
    absolute path, or one that climbs above the top with ``..``), with their targets."""
    out = []
    for entry in git("ls-tree", "-r", "-z", "--full-tree", tree).split("\0"):
        meta, _, path = entry.partition("\t")
        if not meta.startswith("120000 ") or path not in files:
            continue
        target = git("cat-file", "blob", meta.split()[2])
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or inside == ".." or inside.startswith("../"):
            out.append((path, target))
    return tuple(out)


def _write_patch(git: Git, base: str, tree: str, folder: Path) -> Path:
    """The binary patch from ``base`` to ``tree``, kept as the unit's ``changes.patch``
    (git writes its bytes: a file that is not UTF-8 text goes through unchanged)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{PATCH}.", dir=folder)
    os.close(fd)
    try:
        git(
            "diff", "--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv",
            f"--output={tmp}", base, tree,
        )  # fmt: skip
        os.replace(tmp, folder / PATCH)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return folder / PATCH


def _git_apply(checkout: Path, patch: Path, *, check: bool, only: str | None) -> int:
    """``git apply`` of ``patch`` to the checkout's files (never ``--index``, never
    ``--3way``: the index is not touched); with ``only``, the one path of it. Its exit
    status: 0 it applies (or applied)."""
    from wf.trees import gitops

    args = ["apply", "--binary", "--whitespace=nowarn"]
    if check:
        args.append("--check")
    if only is not None:
        args.append("--include=" + _GLOB.sub(r"\\\1", only))
    return gitops.run(checkout, *args, "--", str(patch), ok=(0, 1, 128)).status
