"""Git: the one module that talks to git, and the only one that imports GitPython.

Every git process runs with an argument list (never a shell), no terminal prompts, stdin
closed, ``LC_ALL=C``/``LANGUAGE=C`` (the English messages ``GitError.reason`` reads) and in
a process group of its own (a Ctrl-C reaches wf, which lets git finish). The repository-
location variables (``GIT_DIR`` and friends) are removed from each git child's environment,
never from wf's own. ``GIT_CEILING_DIRECTORIES`` is the folder above the one a command runs
in, which must hold its own ``.git``: a worktree whose ``.git`` file vanished never falls
through to the main checkout above it. Failures become ``GitError`` (argv, exit status,
stderr): no GitPython type leaves this module.

GitPython is imported on first use (the commands that run no git never pay its ~50 ms).
One ``Repo`` per checkout is kept, closed at exit or at the end of a ``with session():``.
A read that would cost a git process (a ref, a commit, a file at a commit, the branch) is
answered in-process when GitPython answers it as git does, else asked of git.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from wf.base.errors import WfError
from wf.trees import gitfiles, objects
from wf.trees.gitfiles import MergeTree, WorktreeEntry
from wf.workers import procs

dir_size, stale_indexes = gitfiles.dir_size, gitfiles.stale_indexes  # callers' names for them

if TYPE_CHECKING:
    import git

# What GitPython itself reads from the process environment when it opens a repository:
# with either set it would read another object store or refs, so git answers instead.
_GITPYTHON_READS = ("GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


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


# ------------------------------------------------------------------ GitPython, contained

_lock = threading.RLock()  # GitPython's cat-file pipes serve one question at a time
_api: tuple[Any, type[Any], type[Any]] | None = None  # (git module, wf's Git, wf's Repo)
_repos: dict[str, tuple[tuple[int, int], git.Repo]] = {}  # checkout -> (its .git's id, Repo)
_odbs: dict[str, Any] = {}  # object folder -> the object reader its checkouts share


def _load() -> tuple[Any, type[Any], type[Any]]:
    if shutil.which("git") is None:  # GitPython's import would fail (or warn) without it
        raise WfError("git is not installed (or not on PATH)")
    try:
        import git
    except ImportError as e:
        raise WfError(f"cannot load GitPython: {e}") from None

    class WfGit(git.Git):
        GIT_PYTHON_GIT_EXECUTABLE = "git"  # not a GIT_PYTHON_GIT_EXECUTABLE from the environment
        wf_git_dir: str | None = None  # set: an object reader of this git folder

        def execute(self, command: Any, *args: Any, **kwargs: Any) -> Any:
            cwd = None if self._working_dir is None or self.wf_git_dir else os.fspath(self._working_dir)
            env = {
                "GIT_TERMINAL_PROMPT": "0",
                "GCM_INTERACTIVE": "never",
                **({"GIT_CEILING_DIRECTORIES": str(Path(cwd).resolve().parent)} if cwd else {}),
                **(kwargs.pop("env", None) or {}),
            }
            kwargs.setdefault("process_group", 0)
            done = super().execute(
                gitfiles.scrubbed(list(command), cwd, self.wf_git_dir, env), *args, env=env, **kwargs
            )
            if self.wf_git_dir and kwargs.get("as_process"):  # a reader kept open: not a stray
                procs.own_child(done.proc.pid)  # a supervisor adopted (nor one to reap)
            return done

    class WfRepo(git.Repo):
        GitCommandWrapperType = WfGit

    return git, WfGit, WfRepo


def _gitpython() -> tuple[Any, type[Any], type[Any]]:
    global _api
    with _lock:
        if _api is None:
            _api = _load()
            atexit.register(close_all)
            os.register_at_fork(after_in_child=_forget_after_fork)
        return _api


def _repo(cwd: Path) -> git.Repo | None:
    """The cached Repo of the checkout ``cwd`` (a new one if its .git changed), or None
    when GitPython cannot be trusted to read it: git is asked then."""
    try:
        st = (cwd / ".git").stat()
    except OSError:
        raise NotARepository(cwd) from None
    if any(v in os.environ for v in _GITPYTHON_READS):
        return None
    key, ident = os.path.abspath(cwd), (st.st_dev, st.st_ino)
    with _lock:
        held = _repos.get(key)
        if held is not None and held[0] == ident:
            return held[1]
        if held is not None:
            _close(key)
        gitmod, git_type, repo_type = _gitpython()
        try:
            repo = repo_type(key)
            common = os.path.realpath(repo.common_dir)
        except Exception:  # git says what is wrong with it, in run()
            return None
        if not _plain_format(repo):
            return None
        if common not in _odbs:  # one reader per object store: worktrees share theirs
            reader = git_type("/")
            reader.wf_git_dir = common
            _odbs[common] = gitmod.db.GitCmdObjectDB(os.path.join(common, "objects"), reader)
        repo.odb = _odbs[common]
        _repos[key] = (ident, repo)
        return repo  # type: ignore[no-any-return]


def _plain_format(repo: git.Repo) -> bool:
    """SHA-1 objects and refs in files: what GitPython reads (a reftable or SHA-256
    repository is git's to read)."""
    want = {"objectformat": "sha1", "refstorage": "files"}
    try:
        cfg = repo.config_reader("repository")
        found = [str(cfg.get_value("extensions", k, v)).lower() for k, v in want.items()]
    except Exception:
        return False
    return found == list(want.values())


def _close(key: str) -> None:
    _ident, repo = _repos.pop(key)
    repo.close()
    common = os.path.realpath(repo.common_dir)
    if _odbs.get(common) is repo.odb and not any(r.odb is repo.odb for _, r in _repos.values()):
        del _odbs[common]
        repo.odb._git.clear_cache()  # its cat-file processes


def close_all() -> None:
    """Close every Repo gitops opened, and the git processes GitPython keeps for them."""
    with _lock:
        while _repos:
            _close(next(iter(_repos)))


@contextmanager
def session() -> Iterator[None]:
    """``with gitops.session():`` closes every Repo (and its git processes) when it ends."""
    try:
        yield
    finally:
        close_all()


def _forget_after_fork() -> None:
    """A forked child must not use (nor, as the Repos go, stop) its parent's git processes."""
    global _lock
    _lock = threading.RLock()
    for _ident, repo in _repos.values():
        for holder in (repo.git, repo.odb._git):
            for name in ("cat_file_all", "cat_file_header"):
                held = getattr(holder, name, None)
                if held is not None:
                    held.proc = None
    _repos.clear()
    _odbs.clear()


class _AskGit(Exception):
    """GitPython cannot answer this one as git would: run git."""


def _answer(cwd: Path, spec: str, then: Callable[[Any], Any]) -> Any:
    """``then`` of GitPython's object for ``spec`` in ``cwd`` (None if it names none);
    _AskGit when the question is git's to answer, or GitPython fails to answer it."""
    if not gitfiles.plain_rev(spec):
        raise _AskGit
    with _lock:
        repo = _repo(Path(cwd))
        if repo is None:
            raise _AskGit
        gitmod = _gitpython()[0]
        name = gitfiles.REV.match(spec)
        full = name["name"] if name and gitfiles.FULL_ID.fullmatch(name["name"]) else None
        try:
            try:
                if full:  # GitPython takes 000...0 for a commit without asking
                    repo.odb.info(bytes.fromhex(full))
                obj = repo.rev_parse(spec)
            except (gitmod.BadName, gitmod.BadObject, KeyError):
                return None
            return then(obj)
        except Exception:
            repo.odb._git.clear_cache()  # its cat-file may be broken: a fresh one next time
            raise _AskGit from None


def _commit_id(obj: Any) -> str | None:
    while obj.type == "tag":
        obj = obj.object
    return str(obj.hexsha) if obj.type == "commit" else None


def resolve(cwd: Path, spec: str) -> str | None:
    """The id of the object ``spec`` names (a commit, tree or blob), or None."""
    try:
        return _answer(cwd, spec, lambda obj: str(obj.hexsha))  # type: ignore[no-any-return]
    except _AskGit:
        r = run(cwd, "rev-parse", "--verify", "--quiet", spec, ok=(0, 1))
        return (r.out.strip() or None) if r.status == 0 else None


def rev(cwd: Path, revision: str) -> str | None:
    """The commit ``revision`` names (a tag is followed to its commit), or None: only a
    commit id gets through."""
    try:
        return _answer(cwd, revision, _commit_id)  # type: ignore[no-any-return]
    except _AskGit:
        r = run(cwd, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", ok=(0, 1))
        return (r.out.strip() or None) if r.status == 0 else None


def read_blob(cwd: Path, blob: str) -> bytes:
    """The bytes of the blob ``blob`` (a full id)."""
    try:
        data = _answer(cwd, blob, lambda obj: bytes(obj.data_stream.read()) if obj.type == "blob" else None)
        if data is not None:
            return data  # type: ignore[no-any-return]
    except _AskGit:
        pass
    return run(cwd, "cat-file", "blob", blob).out.encode("utf-8", "surrogateescape")


def show(cwd: Path, revision: str, path: str) -> str | None:
    """A file's text at a revision, or None if it is not there."""
    blob = resolve(cwd, f"{revision}:{path}")
    return None if blob is None else read_blob(cwd, blob).decode("utf-8", "surrogateescape")


def subject(cwd: Path, revision: str) -> str | None:
    """The subject line of a commit (``%s``: its first paragraph on one line), or None."""
    sha = rev(cwd, revision)
    if sha is None:
        return None
    try:
        message = str(_answer(cwd, sha, lambda obj: obj.message))
    except _AskGit:
        return out(cwd, "log", "-1", "--format=%s", sha).strip()
    first = message.lstrip("\n").split("\n\n", 1)[0]
    return " ".join(line.strip() for line in first.splitlines()).strip()


def current_branch(cwd: Path) -> str | None:
    with _lock:
        repo = _repo(Path(cwd))
        try:
            ref = None if repo is None else str(repo.head.reference.path)
        except TypeError:  # detached
            return None
        except Exception:  # git says what is wrong with HEAD
            ref = None
    if ref is not None and ref.startswith("refs/heads/"):
        return ref.removeprefix("refs/heads/")
    r = run(cwd, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
    return r.out.strip() if r.status == 0 else None


def git_dir(cwd: Path) -> Path:
    """The checkout's git folder (a worktree's own, under the main one's ``worktrees/``)."""
    with _lock:
        repo = _repo(Path(cwd))
        if repo is not None:
            return Path(os.path.realpath(repo.git_dir))
    return Path(out(cwd, "rev-parse", "--absolute-git-dir").strip())


# ------------------------------------------------------------------ running git


def run(cwd: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> Result:
    """Run ``git args...`` at the top of the checkout ``cwd``."""
    return _run(Path(cwd), list(args), ok, {}, stdin)


def env_run(cwd: Path, extra: dict[str, str], *args: str) -> Result:
    """``run`` with extra environment (a temporary index)."""
    return _run(Path(cwd), list(args), (0,), extra, None)


def _run(cwd: Path, argv: list[str], ok: tuple[int, ...], extra: dict[str, str], stdin: str | None) -> Result:
    if not (cwd / ".git").exists():
        raise NotARepository(cwd)
    status, o, e = _execute(cwd, argv, extra, None if stdin is None else stdin.encode())
    if status not in ok:
        raise GitError(argv, status, e, cwd)
    return Result(status, o, e)


def _execute(cwd: Path, argv: list[str], extra: dict[str, str], stdin: bytes | None) -> tuple[int, str, str]:
    """Run git in ``cwd`` through the checkout's Repo (a bare ``Git`` outside one): its
    (status, stdout, stderr), whatever the status."""
    if not cwd.is_dir():
        raise WfError(f"cannot run git in {cwd}: the folder does not exist")
    gitmod, git_type, _ = _gitpython()
    repo = _repo(cwd) if (cwd / ".git").exists() else None
    runner = repo.git if repo is not None else git_type(str(cwd))
    try:
        wrapped = runner.execute(
            ["git", *argv], as_process=True, istream=subprocess.PIPE if stdin is not None else None, env=extra
        )
    except gitmod.GitCommandNotFound:
        raise WfError("git is not installed (or not on PATH)") from None
    proc: subprocess.Popen[bytes] = wrapped.proc  # type: ignore[assignment]
    wrapped.proc = None  # wf's to wait for: GitPython would stop it when dropped
    return _communicate(proc, stdin)


def _communicate(proc: subprocess.Popen[bytes], stdin: bytes | None) -> tuple[int, str, str]:
    try:
        stdout, stderr = proc.communicate(stdin)
    except BaseException:
        # a Ctrl-C (a KeyboardInterrupt here) must not stop git half-way through a commit:
        # git is let finish and wf stops after it (a second one leaves it running)
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


def branch_exists(cwd: Path, branch: str) -> bool:
    return resolve(cwd, f"refs/heads/{branch}") is not None


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
    return backup_refs(cwd, [(name, sha)], stamp)[0]


def backup_refs(cwd: Path, tips: list[tuple[str, str]], stamp: str) -> list[str]:
    """Keep each (name, sha) reachable under ``refs/wf/backup/<name>/<stamp>``, all in
    one ``update-ref --stdin`` transaction (all or none); return the refs. A backup is
    never overwritten (``create``: only if the ref does not exist): one made the same
    second for another commit (the clone's fetch, then the merge) gets ``<stamp>-2``, ..."""
    refs: list[str] = []
    lines = []
    for name, sha in tips:
        ref, n = f"refs/wf/backup/{name}/{stamp}", 2
        while (held := rev(cwd, ref)) is not None and held != sha:
            ref, n = f"refs/wf/backup/{name}/{stamp}-{n}", n + 1
        refs.append(ref)
        if held is None:
            lines.append(f"create {ref} {sha}\n")
    if lines:
        run(cwd, "update-ref", "-m", "wf backup", "--stdin", stdin="".join(lines))
    return refs


def delete_branch(cwd: Path, branch: str) -> None:
    """Delete a branch git considers merged (``-d``: never unmerged work)."""
    run(cwd, "branch", "-d", "--", branch)


def dirty_paths(cwd: Path, among: set[str] | None = None) -> list[str]:
    """Paths with uncommitted changes, untracked ones included (ignored ones not), of ``among``."""
    args = ["status", "--porcelain=v1", "-z", "--untracked-files=all", *gitfiles.pathspecs(among)]
    return [p for p in gitfiles.parse_status(out(cwd, *args)) if among is None or p in among]


def changed_paths(cwd: Path, base: str, tip: str) -> dict[str, str]:
    """The paths that differ from ``base`` to ``tip``, each with its status letter (``A``:
    not in ``base``; ``M``, ``D``, ``T``: in it)."""
    text = out(cwd, "diff", "--name-status", "-z", "--no-renames", base, tip)
    fields = text.split("\0")
    return {fields[i + 1]: fields[i] for i in range(0, len(fields) - 1, 2) if fields[i + 1]}


def merge_tree(cwd: Path, ours: str, theirs: str) -> MergeTree:
    """Merge two commits in memory (``git merge-tree --write-tree``): nothing in any
    checkout, index or ref changes, whatever the outcome."""
    r = run(cwd, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs, ok=(0, 1))
    return gitfiles.parse_merge_tree(r.out, r.status == 0)


def commit_files(cwd: Path, branch: str, files: dict[str, str], message: str) -> str:
    """Commit new contents of ``files`` on top of ``branch`` without touching the
    working tree or other staged changes: blobs and a tree are written in-process (else
    built by git in a temporary index), the branch moves by compare-and-swap, and the
    real index takes just these paths' new blobs. Returns the new commit."""
    head = rev(cwd, branch)
    if head is None:
        raise WfError(f"no branch {branch}")
    data = {p: text.encode() for p, text in files.items()}
    tree = tree_in_process(cwd, head, data)
    blobs = {p: objects.blob_id(d) for p, d in data.items()}
    if tree is None:
        blobs = {
            p: run(cwd, "hash-object", "-w", "--stdin", stdin=text).out.strip() for p, text in files.items()
        }
    entries = [a for p, blob in blobs.items() for a in ("--cacheinfo", f"100644,{blob},{p}")]
    if tree is None:
        tree = _tree_in_index(cwd, head, entries)
    commit = commit_tree(cwd, tree, [head], message)
    update_ref(cwd, f"refs/heads/{branch}", commit, head, reason=message.splitlines()[0])
    run(cwd, "update-index", "--add", *entries)
    return commit


def _tree_in_index(cwd: Path, head: str, entries: list[str]) -> str:
    """The tree of ``head`` with ``entries`` (``--cacheinfo`` pairs), built by git in a
    temporary index."""
    tmp_index = {
        "GIT_INDEX_FILE": str(git_dir(cwd) / f"{gitfiles.TMP_INDEX}{gitfiles.tmp_index_id(os.getpid())}")
    }
    try:
        env_run(cwd, tmp_index, "read-tree", head)
        env_run(cwd, tmp_index, "update-index", "--add", *entries)
        return env_run(cwd, tmp_index, "write-tree").out.strip()
    finally:
        Path(tmp_index["GIT_INDEX_FILE"]).unlink(missing_ok=True)


def tree_in_process(cwd: Path, head: str, files: dict[str, bytes]) -> str | None:
    """The tree of ``head`` with ``files`` set, its objects written in-process; None when
    git must write them (settings of its own, a path that is not a plain file, an error)."""
    if any(v in os.environ for v in objects.CONFIG_VARS):
        return None
    with _lock:
        repo = _repo(Path(cwd))
        if repo is None:
            return None
        try:
            cfg = repo.config_reader()
            if cfg.has_section("core") and objects.git_writes(cfg.options("core")):
                return None
            odb, store = repo.odb, Path(repo.common_dir) / "objects"
            return objects.tree_with(
                lambda sha: bytes(odb.stream(bytes.fromhex(sha)).read()),
                lambda kind, data: objects.write_loose(store, kind, data, odb),
                repo.commit(head).tree.hexsha,
                files,
            )
        except Exception:  # objects.Unfit, or GitPython failed: git writes them
            repo.odb._git.clear_cache()  # its cat-file may be broken: a fresh one next time
            return None


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


def worktrees(cwd: Path) -> list[WorktreeEntry]:
    return gitfiles.parse_worktrees(out(cwd, "worktree", "list", "--porcelain", "-z"))


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
