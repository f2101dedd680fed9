"""A sealed test environment: temporary HOME and state folders, a fixed git identity,
and a guard that fails the run if anything touched the real ~/.claude or ~/.codex."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import wfproc
from wf.cli import main

# PYTHONDONTWRITEBYTECODE is set on this workplace's machines and in CI; without a cache
# pytest rewrites every test module's asserts anew in every worker, every run
sys.dont_write_bytecode = False

REAL_HOME = Path(os.path.expanduser("~"))
GUARDED = [REAL_HOME / ".claude", REAL_HOME / ".codex", REAL_HOME / ".config" / "wf"]


def _snapshot() -> dict[str, float]:
    snap: dict[str, float] = {}
    for root in GUARDED:
        if not root.exists():
            snap[str(root)] = -1.0
            continue
        for dirpath, _dirs, files in os.walk(root):
            snap[dirpath] = os.stat(dirpath).st_mtime
            for f in files:
                p = os.path.join(dirpath, f)
                try:
                    snap[p] = os.stat(p).st_mtime
                except OSError:
                    pass
    return snap


def pytest_configure(config: pytest.Config) -> None:
    """Compile wf's modules (and the fake tools'), before any test starts a process. With
    PYTHONDONTWRITEBYTECODE set (as it is on this workplace's machines and in CI) no
    process writes a cache, and every ``python -m wf`` would compile wf's source anew:
    about 60 ms of CPU per start, over the suite's thousands of starts."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall
    import importlib

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "wf"), quiet=2, workers=1)
    compileall.compile_dir(
        str(Path(__file__).resolve().parent / "fakes"), quiet=2, workers=1
    )  # their modules
    if config.getoption("numprocesses", None):
        # pytest rewrites each test module's asserts on import, and caches the result only
        # where bytecode may be written: import them here once (sys.dont_write_bytecode is
        # off above), so that the workers load the rewritten modules instead of each
        # rewriting all of them again (~3.5 s of CPU a worker)
        here = Path(__file__).resolve().parent
        for path in sorted(here.glob("test_*.py")):
            if _asked_for(config, path):
                try:
                    importlib.import_module(f"tests.{path.stem}")
                except (Exception, pytest.skip.Exception, pytest.fail.Exception):
                    # a module that fails to import (or skips itself at import) is the
                    # workers' to report, as a collection error or a skip of that module:
                    # raised here it would stop the whole run with an INTERNALERROR
                    continue


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How the wf commands ran, so that a failure can be replayed (docs/testing.md)."""
    how = "each a real exec (WF_TEST_EXEC=1)" if wfproc.EXEC else "forked from tests/zygote.py"
    terminalreporter.write_line(
        f"wf commands: {how}; hash seed {wfproc.HASHSEED} (replay: WF_TEST_HASHSEED={wfproc.HASHSEED})"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (modules, test items, hypothesis strategies) lives until the
    run ends: out of the collector's sight, and collections less often, the property
    tests' garbage costs ~10% less CPU (a worker spent ~1 s in every 10 collecting)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def _asked_for(config: pytest.Config, module: Path) -> bool:
    """Whether the run's arguments (none: the testpaths) take in this test module."""
    for arg in config.args or [str(module.parent)]:
        target = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if target == module or target in module.parents:
            return True
    return False


@pytest.fixture(scope="session", autouse=True)
def _guard_real_home() -> Iterator[None]:
    before = _snapshot()
    yield
    after = _snapshot()
    assert before == after, "a test touched the real ~/.claude, ~/.codex or ~/.config/wf"


@pytest.fixture(scope="session", autouse=True)
def _bare_machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Beneath each test's sealed environment, the whole run sees a fresh machine: an
    empty HOME, no git identity and no system git config. A test that undoes its
    monkeypatch (and with it the sealed environment) then fails here as it would on CI,
    instead of committing with the identity of whoever runs the suite."""
    saved = dict(os.environ)
    for var in list(os.environ):
        if var.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_", "EMAIL")):
            del os.environ[var]
    os.environ["HOME"] = str(tmp_path_factory.mktemp("bare-home"))
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def sealed_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for var in list(os.environ):
        if var.startswith(("GIT_", "CLAUDE", "CODEX_", "WF_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(home))
    # `python3` (the fakes' `#!/usr/bin/env python3`, a Done command's `python3 -c`) is the
    # interpreter running the tests, as in an activated venv: not a version manager's shim
    # that starts a shell and several processes before Python (~100 ms a start here)
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("WF_LOCK_TIMEOUT", "20")
    # nothing a test starts reaches past this machine: the real agent CLIs call home
    # (their APIs, github.com, telemetry) even offline or logged out. Every proxy is a
    # closed loopback port (refused at once); a test that plays the model API sets its own
    # (tests/model_api.py). Loopback itself is never proxied.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost,::1")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = t@e.invalid\n"
    )
    return home


@dataclass
class Result:
    code: int
    out: str
    err: str


class WfRunner:
    """Runs wf in this process (fast) or as a real subprocess."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys

    def __call__(self, *args: str, cwd: Path | None = None) -> Result:
        self.capsys.readouterr()
        code = main(["-C", str(cwd or self.root), *args])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        r = self(*args, cwd=cwd)
        assert r.code == 0, f"wf {' '.join(args)} exited {r.code}: {r.err}"
        return r.out

    def proc(self, *args: str, cwd: Path | None = None, input: str | None = None) -> Result:
        p = wfproc.run(
            [sys.executable, "-m", "wf", *args],
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
        )
        return Result(p.returncode, p.stdout, p.stderr)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True).stdout


_template: Path | None = None


@pytest.fixture
def repo(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty git repository with one commit, not yet set up for wf: made by git once
    per worker, then copied (a third of the CPU of git init, add and commit; the commit
    is the same anyway, its dates being fixed)."""
    global _template
    if _template is None:
        made = tmp_path_factory.mktemp("template") / "repo"
        made.mkdir()
        git(made, "init", "-q", "-b", "main")
        (made / "README.md").write_text("hello\n")
        git(made, "add", "README.md")
        git(made, "commit", "-qm", "initial")
        _template = made
    root = tmp_path / "repo"
    shutil.copytree(_template, root, symlinks=True)
    return root


@pytest.fixture
def wf(repo: Path, capsys: pytest.CaptureFixture[str]) -> WfRunner:
    """A wf runner in a repository where 'wf init' has run."""
    runner = WfRunner(repo, capsys)
    runner.ok("init")
    return runner


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first: with workers, a long test started last ends the run
    alone while the other workers idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
