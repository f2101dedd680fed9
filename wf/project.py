"""Finding the project (the main checkout) from anywhere inside it, without git.

From a linked worktree, the ``.git`` file points at ``<main>/.git/worktrees/<name>``,
whose ``commondir`` leads back to the main repository; from a throwaway clone in
``<main>/.worktrees/<lane>``, the main checkout is two folders up. Reading these
files directly keeps ``wf list`` fast (no GitPython, no git process).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from wf import config as configmod
from wf.errors import NotAProject


class Project(NamedTuple):
    root: Path  # the main checkout
    config: configmod.Config
    is_git: bool

    @property
    def tasks_path(self) -> Path:
        return self.root / self.config.tasks

    @property
    def archive_path(self) -> Path:
        return self.root / self.config.archive

    @property
    def config_path(self) -> Path:
        return self.root / "wf.toml"

    @property
    def wf_dir(self) -> Path:
        return self.root / ".wf"

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def worktrees_dir(self) -> Path:
        return self.root / ".worktrees"

    @property
    def lock_timeout(self) -> float:
        env = os.environ.get("WF_LOCK_TIMEOUT")
        if env:
            try:
                return max(0.0, float(env))
            except ValueError:
                pass
        return self.config.lock_timeout


def _main_from_gitfile(gitfile: Path) -> Path | None:
    """The main checkout of the linked worktree whose ``.git`` file this is."""
    try:
        text = gitfile.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:") :].strip())
    if not gitdir.is_absolute():
        gitdir = (gitfile.parent / gitdir).resolve()
    common = gitdir
    try:
        rel = (gitdir / "commondir").read_text("utf-8").strip()
        common = (gitdir / rel).resolve() if not Path(rel).is_absolute() else Path(rel)
    except OSError:
        pass
    if common.name == ".git":
        return common.parent
    return None


def find_root(start: Path) -> tuple[Path, bool]:
    """The main checkout above ``start`` and whether it is a git repository."""
    start = start.resolve()
    fallback: Path | None = None
    for d in (start, *start.parents):
        git = d / ".git"
        if git.is_dir():
            # A throwaway clone lives in <main>/.worktrees/<lane>: its project is <main>.
            if d.parent.name == ".worktrees" and (d.parent.parent / ".git").exists():
                return d.parent.parent, True
            return d, True
        if git.is_file():
            main = _main_from_gitfile(git)
            if main is not None and main.is_dir():
                return main, True
            return d, True
        if fallback is None and ((d / "wf.toml").is_file() or (d / "TASKS.md").is_file()):
            fallback = d
    if fallback is not None:
        return fallback, False
    raise NotAProject(str(start))


def load(start: Path | None = None) -> Project:
    root, is_git = find_root(start or Path.cwd())
    cfg = configmod.load(root / "wf.toml")
    return Project(root, cfg, is_git)
