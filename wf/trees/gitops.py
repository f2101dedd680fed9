"""Git: the one module that runs ``git``, as small named helpers.

Every call runs ``git`` with an argument list (never a shell), no terminal prompts,
stdin closed, and the repository-location variables (``GIT_DIR`` and friends) removed
from the environment. ``GIT_CEILING_DIRECTORIES`` is set to the folder above the one a
command runs in, and that folder must hold its own ``.git``: a worktree whose ``.git``
file vanished can never fall through to the main checkout above it. Failures become
``GitError`` carrying the argv, exit status and stderr.

git runs through ``subprocess`` directly, the way GitPython's ``Git.execute`` runs it
(``LC_ALL=C`` and ``LANGUAGE=C`` so its messages are the English ones ``GitError.reason``
reads, output decoded as UTF-8 with surrogate escapes): that was all wf used GitPython
for, and importing it cost about 60 ms and a ``git version`` process in every wf
command that touched git, more than the rest of such a command's start.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

from wf.base import pids
from wf.base.errors import WfError

# Variables that point git at another repository than the folder it runs in.
_LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG_PARAMETERS",  # -c settings of a git that started wf (a hook, an alias)
    "GIT_CONFIG_COUNT",
)


class GitError(WfError):
    def __init__(self, argv: list[str], status: int, stderr: str, cwd: Path) -> None:
        self.argv = argv
        self.status = status
        self.stderr = stderr.strip()
        self.cwd = cwd
        super().__init__(f"git {' '.join(argv)} (in {cwd}) failed: {self.reason}")

    @property
    def reason(self) -> str:
        """git's own error line (``error:``/``fatal:``), not its hints or 'Aborting'."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        for ln in lines:
            if ln.startswith(("error:", "fatal:")):
                return ln
        hints = ("hint:", "If you are sure", "Aborting", "Please commit", "Please move")
        useful = [ln for ln in lines if not ln.startswith(hints)]
        return (useful or lines or [f"exit {self.status}"])[0]


class NotARepository(WfError):
    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            f"{path} is not a git checkout (no .git there); refusing to let git look for one above it"
        )


class Result(NamedTuple):
    status: int
    out: str
    err: str


def _scrub_environment() -> None:
    for var in _LOCATION_VARS:
        os.environ.pop(var, None)


_scrub_environment()


def run(cwd: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> Result:
    """Run ``git args...`` at the top of the checkout ``cwd``."""
    cwd = Path(cwd)
    if not (cwd / ".git").exists():
        raise NotARepository(cwd)
    argv = list(args)
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CEILING_DIRECTORIES": str(cwd.resolve().parent),
        "GCM_INTERACTIVE": "never",
    }
    status, out, err = _execute(cwd, argv, env, None if stdin is None else stdin.encode())
    if status not in ok:
        raise GitError(argv, status, err, cwd)
    return Result(status, out, err)


def _execute(cwd: Path, argv: list[str], extra: dict[str, str], stdin: bytes | None) -> tuple[int, str, str]:
    env = {**os.environ, "LANGUAGE": "C", "LC_ALL": "C", **extra}
    try:
        proc = subprocess.Popen(
            ["git", *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # its own process group: a Ctrl-C at the terminal reaches wf, which finishes or
            # stops cleanly, never a git half-way through a commit
            process_group=0,
        )
    except FileNotFoundError as e:
        if e.filename not in (None, "git"):  # the folder, not git, is missing
            raise WfError(f"cannot run git in {cwd}: the folder does not exist") from None
        raise WfError("git is not installed (or not on PATH)") from None
    try:
        stdout, stderr = proc.communicate(stdin)
    except BaseException:
        # not subprocess.run, which SIGKILLs the child on any exception: a Ctrl-C (a
        # KeyboardInterrupt here) must not stop git half-way through a commit, so git is
        # let finish, as GitPython did, and wf stops after it (a second one leaves it running)
        try:
            proc.communicate()
        except BaseException:
            pass
        raise
    err = stderr.decode("utf-8", "surrogateescape")
    return proc.returncode, stdout.decode("utf-8", "surrogateescape"), err.removesuffix("\n")


def out(cwd: Path, *args: str) -> str:
    return run(cwd, *args).out


# ------------------------------------------------------------------ refs and commits


def rev(cwd: Path, revision: str) -> str | None:
    r = run(cwd, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", ok=(0, 1))
    return (r.out.strip() or None) if r.status == 0 else None


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
        r = run(cwd, "var", var, ok=(0, 128))
        if r.status != 0:
            return NoIdentity(cwd, GitError(["var", var], r.status, r.err, cwd).reason)
    return None


def current_branch(cwd: Path) -> str | None:
    r = run(cwd, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
    return r.out.strip() if r.status == 0 else None


def branch_exists(cwd: Path, branch: str) -> bool:
    return run(cwd, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", ok=(0, 1)).status == 0


def branches(cwd: Path, pattern: str) -> list[str]:
    text = out(cwd, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{pattern}")
    return [b for b in text.splitlines() if b]


def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    return run(cwd, "merge-base", "--is-ancestor", ancestor, descendant, ok=(0, 1)).status == 0


def count(cwd: Path, range_: str) -> int:
    return int(out(cwd, "rev-list", "--count", range_).strip() or 0)


def commit_exists(cwd: Path, sha: str) -> bool:
    return rev(cwd, sha) is not None


def update_ref(cwd: Path, ref: str, new: str, old: str | None = None, reason: str = "wf") -> None:
    """Move ``ref`` to ``new``, only if it still points at ``old`` (compare and swap)."""
    args = ["update-ref", "-m", reason, ref, new]
    if old is not None:
        args.append(old)
    run(cwd, *args)


def backup_ref(cwd: Path, name: str, sha: str, stamp: str) -> str:
    """Keep ``sha`` reachable under ``refs/wf/backup/<name>/<stamp>``; return the ref.
    A backup is never overwritten: one made the same second for another commit (the
    clone's fetch, then the merge) gets ``<stamp>-2``, ``-3``, ..."""
    ref, n = f"refs/wf/backup/{name}/{stamp}", 2
    while True:
        held = rev(cwd, ref)
        if held == sha:
            return ref
        if held is None:
            run(cwd, "update-ref", "-m", "wf backup", ref, sha, "")  # "": only if it does not exist
            return ref
        ref, n = f"refs/wf/backup/{name}/{stamp}-{n}", n + 1


def delete_branch(cwd: Path, branch: str) -> None:
    """Delete a branch git considers merged (``-d``: never unmerged work)."""
    run(cwd, "branch", "-d", "--", branch)


def dirty_paths(cwd: Path) -> list[str]:
    """Paths with uncommitted changes, untracked ones included (ignored ones not)."""
    text = out(cwd, "status", "--porcelain=v1", "-z", "--untracked-files=all")
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


def changed_paths(cwd: Path, base: str, tip: str) -> list[str]:
    text = out(cwd, "diff", "--name-only", "-z", "--no-renames", base, tip)
    return [p for p in text.split("\0") if p]


class MergeTree(NamedTuple):
    tree: str | None  # None on conflict
    conflicts: list[str]


def merge_tree(cwd: Path, ours: str, theirs: str) -> MergeTree:
    """Merge two commits in memory (``git merge-tree --write-tree``): nothing in any
    checkout, index or ref changes, whatever the outcome."""
    r = run(cwd, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs, ok=(0, 1))
    parts = r.out.split("\0")
    tree = parts[0].strip()
    if r.status == 0:
        return MergeTree(tree, [])
    conflicts = [p for p in parts[1:] if p.strip()]
    return MergeTree(None, sorted(set(conflicts)))


def show(cwd: Path, revision: str, path: str) -> str | None:
    """A file's text at a revision, or None if it is not there."""
    r = run(cwd, "cat-file", "-p", f"{revision}:{path}", ok=(0, 128))
    return r.out if r.status == 0 else None


def commit_files(cwd: Path, branch: str, files: dict[str, str], message: str) -> str:
    """Commit new contents of ``files`` on top of ``branch`` without touching the
    working tree or other staged changes: blobs and a tree are built in a temporary
    index, the branch moves by compare-and-swap, and the real index takes just these
    paths' new blobs. Returns the new commit."""
    head = rev(cwd, branch)
    if head is None:
        raise WfError(f"no branch {branch}")
    blobs = {p: run(cwd, "hash-object", "-w", "--stdin", stdin=text).out.strip() for p, text in files.items()}
    git_dir = Path(out(cwd, "rev-parse", "--absolute-git-dir").strip())
    tmp_index = git_dir / f"{TMP_INDEX}{_tmp_index_id(os.getpid())}"
    try:
        env_run(cwd, {"GIT_INDEX_FILE": str(tmp_index)}, "read-tree", head)
        for p, blob in blobs.items():
            env_run(
                cwd,
                {"GIT_INDEX_FILE": str(tmp_index)},
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob},{p}",
            )
        tree = env_run(cwd, {"GIT_INDEX_FILE": str(tmp_index)}, "write-tree").out.strip()
    finally:
        tmp_index.unlink(missing_ok=True)
    commit = commit_tree(cwd, tree, [head], message)
    update_ref(cwd, f"refs/heads/{branch}", commit, head, reason=message.splitlines()[0])
    for p, blob in blobs.items():
        run(cwd, "update-index", "--add", "--cacheinfo", f"100644,{blob},{p}")
    return commit


TMP_INDEX = "wf-index."  # commit_files' temporary index in the git folder: wf-index.PID.START


def _tmp_index_id(pid: int) -> str:
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


def env_run(cwd: Path, extra: dict[str, str], *args: str) -> Result:
    """``run`` with extra environment (a temporary index)."""
    cwd = Path(cwd)
    if not (cwd / ".git").exists():
        raise NotARepository(cwd)
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CEILING_DIRECTORIES": str(cwd.resolve().parent), **extra}
    status, o, e = _execute(cwd, list(args), env, None)
    if int(status or 0) != 0:
        raise GitError(list(args), int(status or 0), str(e), cwd)
    return Result(0, str(o), str(e))


def commit_tree(cwd: Path, tree: str, parents: list[str], message: str) -> str:
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    return run(cwd, *args, "-F", "-", stdin=message).out.strip()


def find_merge_of(cwd: Path, main: str, tip: str) -> str | None:
    """The merge commit on ``main``'s first-parent line that brought in ``tip``."""
    text = out(cwd, "rev-list", "--first-parent", "--merges", "--parents", "-n", "200", main)
    for line in text.splitlines():
        shas = line.split()
        if tip in shas[2:]:
            return shas[0]
    return None


# ------------------------------------------------------------------ worktrees


class WorktreeEntry(NamedTuple):
    path: Path
    head: str | None
    branch: str | None  # short name, None when detached
    prunable: bool
    locked: bool


def worktrees(cwd: Path) -> list[WorktreeEntry]:
    text = out(cwd, "worktree", "list", "--porcelain", "-z")
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


def worktree_add(cwd: Path, path: Path, branch: str, start: str) -> None:
    run(cwd, "worktree", "add", "--quiet", "--no-track", "-b", branch, str(path), start)


def worktree_add_detached(cwd: Path, path: Path, start: str) -> None:
    run(cwd, "worktree", "add", "--quiet", "--detach", str(path), start)


def worktree_remove(cwd: Path, path: Path) -> None:
    run(cwd, "worktree", "remove", str(path))


def switch_new_branch(cwd: Path, branch: str, start: str) -> None:
    run(cwd, "switch", "--quiet", "--no-track", "-c", branch, start)


def switch(cwd: Path, branch: str) -> None:
    run(cwd, "switch", "--quiet", branch)


def detach(cwd: Path, commit: str) -> None:
    run(cwd, "switch", "--quiet", "--detach", commit)


def fast_forward(cwd: Path, commit: str) -> None:
    """Move the checked-out branch of ``cwd`` to ``commit``, updating files; refuses
    (and changes nothing) if local changes would be overwritten."""
    run(cwd, "merge", "--quiet", "--ff-only", commit)


# ------------------------------------------------------------------ clones


def clone_local(source: Path, dest: Path) -> None:
    """A throwaway clone: objects shared by hard links, no remote, hooks off."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    argv = ["clone", "--quiet", "--local", "--no-checkout", str(source), str(dest)]
    status, _, err = _execute(dest.parent, argv, {"GIT_TERMINAL_PROMPT": "0"}, None)
    if status:
        raise GitError(["clone", "--local", str(source), str(dest)], status, err, dest.parent)
    run(dest, "remote", "remove", "origin")
    run(dest, "config", "core.hooksPath", "/dev/null")
    # no local copy of the default branch: the clone only ever holds task branches
    run(dest, "update-ref", "-d", "HEAD")


def fetch(cwd: Path, source: Path, refspec: str) -> None:
    run(cwd, "fetch", "--quiet", "--no-tags", "--", str(source), refspec)


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
