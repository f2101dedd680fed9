"""What wf reads of git without running it: the files git (and wf's archive commit) leave
in a repository's folder, git's output, the revisions GitPython reads as git does, a git
command line (``scrubbed``) and what a tree weighs on disk (``gitops`` runs git)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from wf.base import pids
from wf.base.gitenv import LOCATION_VARS

TMP_INDEX = "wf-index."  # commit_files' temporary index in the git folder: wf-index.PID.START


def tmp_index_id(pid: int) -> str:
    """PID.START: the pid and its start time name one process for as long as the machine
    runs, so a later process given the same pid does not keep a dead one's file."""
    ticks = pids.start_ticks(pid)
    return str(pid) if ticks is None else f"{pid}.{ticks}"


def stale_indexes(git_dir: Path) -> list[Path]:
    """Temporary index files of ``commit_files`` (and git's locks of them) that no living
    wf uses: their process is gone (a kill -9 inside the commit), or its pid now names a
    later process. A name wf does not make is stale too."""
    stale = []
    for path in sorted(git_dir.glob(f"{TMP_INDEX}*")):
        parts = path.name.removeprefix(TMP_INDEX).split(".")
        if parts[-1] == "lock":
            parts.pop()
        if not 1 <= len(parts) <= 2 or not all(x.isdigit() for x in parts):
            stale.append(path)
            continue
        ticks = pids.start_ticks(int(parts[0]))
        if not pids.alive(int(parts[0])):
            stale.append(path)
        elif len(parts) == 2 and ticks is not None and str(ticks) != parts[1]:
            stale.append(path)  # the pid was given to a later process
    return stale


def dir_size(path: Path) -> int:
    """Bytes on disk under ``path``: ``du`` when there is one (a tree of 5,000 files costs
    it milliseconds, Python's walk tens of them), else a walk."""
    import shutil
    import subprocess

    du = shutil.which("du")
    if du:
        try:
            p = subprocess.run([du, "-sk", "--", str(path)], capture_output=True, text=True, timeout=60)
            if p.returncode == 0 and p.stdout.split():
                return int(p.stdout.split()[0]) * 1024
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


class WorktreeEntry(NamedTuple):
    path: Path
    head: str | None
    branch: str | None  # short name, None when detached
    prunable: bool
    locked: bool


def parse_worktrees(text: str) -> list[WorktreeEntry]:
    """``git worktree list --porcelain -z``, read."""
    entries: list[WorktreeEntry] = []
    cur: dict[str, str] = {}
    for field in [*text.split("\0"), ""]:
        if field == "":
            if cur.get("worktree"):
                branch = cur.get("branch", "")
                entries.append(
                    WorktreeEntry(
                        Path(cur["worktree"]),
                        cur.get("HEAD"),
                        branch.removeprefix("refs/heads/") or None,
                        "prunable" in cur,
                        "locked" in cur,
                    )
                )
            cur = {}
            continue
        key, _, value = field.partition(" ")
        cur[key] = value
    return entries


def pathspecs(paths: set[str] | None, most: int = 200) -> list[str]:
    """``-- :(literal)p ...`` for a few paths (none: every path; nor for many: git's
    command line has a limit, and a walk of everything answers the same)."""
    if not paths or len(paths) > most:
        return []
    return ["--", *(f":(literal){p}" for p in sorted(paths))]


def parse_status(text: str) -> list[str]:
    """The paths of ``git status --porcelain=v1 -z``."""
    paths = []
    entries = text.split("\0")
    i = 0
    while i < len(entries):
        e = entries[i]
        if len(e) > 3:
            paths.append(e[3:])
            if e[0] in "RC" or e[1] in "RC":  # a rename or copy lists its source next
                i += 1
        i += 1
    return paths


class MergeTree(NamedTuple):
    tree: str | None  # None on conflict
    conflicts: list[str]


def parse_merge_tree(text: str, clean: bool) -> MergeTree:
    """``git merge-tree --write-tree --name-only -z``, read (``clean``: it exited 0)."""
    parts = text.split("\0")
    if clean:
        return MergeTree(parts[0].strip(), [])
    return MergeTree(None, sorted({p for p in parts[1:] if p.strip()}))


# a name GitPython resolves as git does (no @{...}, no ..; an abbreviated id it asks git's
# cat-file, which also knows a ref of that name), then ^ and ~N, then an optional :path
FULL_ID = re.compile(r"[0-9a-f]{40}")
REV = re.compile(r"(?P<name>[A-Za-z0-9_][A-Za-z0-9_./-]*)(?P<ops>(?:\^|~[1-9][0-9]{0,3})*)")


def plain_rev(spec: str) -> bool:
    """Whether GitPython reads ``spec`` as git does."""
    rev, colon, path = spec.partition(":")
    m = REV.fullmatch(rev)
    if m is None:
        return False
    name = m["name"]
    if ".." in name or "//" in name or "/." in name or name.endswith(("/", ".", ".lock")):
        return False
    parts = path.split("/")
    return not colon or all(p not in ("", ".", "..") and "\n" not in p and "\0" not in p for p in parts)


def scrubbed(command: list[str], cwd: str | None, git_dir: str | None, given: Mapping[str, str]) -> list[str]:
    """``git -C cwd ...`` (git fails rather than run elsewhere if cwd went away; GitPython
    would use wf's own folder), or ``git --git-dir=...`` for an object reader (run from
    ``/``: no tree looks in use for it), under ``env -u`` for each location variable wf's
    environment has and wf did not set itself (only then: a rare hook's or alias's)."""
    if command and command[0] == "git":
        where = [f"--git-dir={git_dir}"] if git_dir else ["-C", cwd] if cwd else []
        command = ["git", *where, *command[1:]]
    drop = [v for v in LOCATION_VARS if v in os.environ and v not in given]
    return ["env", *(a for v in drop for a in ("-u", v)), *command] if drop else command
