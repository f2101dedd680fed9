"""Several machines sharing one backlog through a git remote, on one test host.

A :class:`Shared` remote is a bare repository, reached by ``file://`` or served by a real
``git daemon`` on a loopback port (started and stopped by the test). Each
:class:`Machine` is a clone of it with its own HOME and state folders, its own git
identity and ``WF_MACHINE``, and runs wf as a separate process, as another computer would::

    with Shared(tmp_path, daemon=True) as remote:
        a = remote.seed("a", TASKS, toml='shared = "origin"\\n')  # the first machine
        b = remote.machine("b")                                    # a clone of what a pushed
        r = a.wf("status", "t1", "progress", "worker")

Nothing reaches beyond 127.0.0.1; the daemon serves only the folder of the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from tests import wfproc

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git_env(home: Path, name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "WF_"))}
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        CODEX_HOME=str(home / ".codex"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=f"Person on {name}",
        GIT_AUTHOR_EMAIL=f"{name}@example.invalid",
        GIT_COMMITTER_NAME=f"Person on {name}",
        GIT_COMMITTER_EMAIL=f"{name}@example.invalid",
        GIT_TERMINAL_PROMPT="0",
        WF_MACHINE=name,
        PYTHONPATH=str(ROOT),
    )
    return env


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stdout


class Machine:
    """One clone of the shared remote, with its own HOME and identity."""

    def __init__(self, root: Path, name: str, home: Path) -> None:
        self.root = root
        self.name = name
        self.home = home
        self.env = _git_env(home, name)

    def wf(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        """``wf ARGS`` run on this machine (a process of its own)."""
        r = wfproc.run(
            [sys.executable, "-m", "wf", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip  (forked from the tests' zygote, as every wf command of the suite)
        if check and r.returncode != 0:
            raise AssertionError(
                f"[{self.name}] wf {' '.join(args)} exited {r.returncode}:\n{r.stdout}{r.stderr}"
            )
        return r

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.root, *args, env=self.env, check=check)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """``wf ARGS`` started, not waited for (to race it, or kill it)."""
        return subprocess.Popen(
            [sys.executable, "-m", "wf", *args], cwd=self.root, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


class Shared:
    """A bare repository the machines share, by ``file://`` or a ``git daemon`` on
    127.0.0.1 (``daemon=True``)."""

    def __init__(self, tmp: Path, *, daemon: bool = False) -> None:
        self.tmp = tmp
        self.bare = tmp / "shared.git"
        self.daemon = daemon
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        git(tmp, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(self.bare, "config", "receive.advertisePushOptions", "true")

    @property
    def url(self) -> str:
        if self.daemon:
            return f"git://127.0.0.1:{self.port}/shared.git"
        return self.bare.as_uri()

    def __enter__(self) -> Shared:
        if self.daemon:
            self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Serve the bare repository (read and push) on a free loopback port."""
        self.port = _free_port()
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={self.port}", "--export-all",
             "--enable=receive-pack", f"--base-path={self.tmp}", "--informative-errors", str(self.tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("git daemon did not start")

    def stop(self) -> None:
        """The network is gone: the daemon stops (a file:// remote is moved away)."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def seed(self, name: str, tasks: str, toml: str = 'shared = "origin"\n') -> Machine:
        """The first machine: a new repository with TASKS.md and wf.toml, pushed as main."""
        home = self.tmp / f"home-{name}"
        home.mkdir()
        root = self.tmp / name
        root.mkdir()
        m = Machine(root, name, home)
        m.git("init", "-q", "-b", "main")
        (root / "TASKS.md").write_text(tasks)
        (root / "wf.toml").write_text(toml)
        m.git("add", "-A")
        m.git("commit", "-qm", "the backlog")
        m.git("remote", "add", "origin", self.url)
        m.git("push", "-q", "origin", "main")
        return m

    def machine(self, name: str) -> Machine:
        """Another machine: a clone of the shared remote."""
        home = self.tmp / f"home-{name}"
        home.mkdir()
        root = self.tmp / name
        m = Machine(root, name, home)
        git(self.tmp, "clone", "-q", self.url, str(root), env=m.env)
        return m

    def refs(self) -> dict[str, str]:
        """Every ref of the shared repository: name -> sha."""
        out = git(self.bare, "for-each-ref", "--format=%(refname) %(objectname)")
        pairs = (line.split(" ", 1) for line in out.splitlines() if line)
        return {name: sha for name, sha in pairs}


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
