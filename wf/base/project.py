"""Finding the project (the main checkout) from anywhere inside it, without git.

From a linked worktree, the ``.git`` file points at ``<main>/.git/worktrees/<name>``,
whose ``commondir`` leads back to the main repository; from a throwaway clone in
``<main>/.worktrees/<lane>``, the main checkout is two folders up (from a run's clone
unit, ``<main>/.wf/runs/<run>/<unit>/clone``, five). Reading these
files directly keeps ``wf list`` fast (no GitPython, no git process).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

from wf.base import config as configmod
from wf.base.errors import ConfigError, NotAProject


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
    def tasks_in_git(self) -> str:
        """TASKS.md's path as git tracks it: a symlinked TASKS.md is tracked as a link,
        its content at the link's target (check_paths keeps that inside the tree)."""
        return _tracked(self.root, self.config.tasks)

    @property
    def archive_in_git(self) -> str:
        return _tracked(self.root, self.config.archive)

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
                value = float(env)
            except ValueError:
                value = math.nan
            if math.isfinite(value):
                return max(0.0, value)
        return self.config.lock_timeout


def _tracked(root: Path, rel: str) -> str:
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / rel)
    if real != real_root and real.startswith(real_root + os.sep):
        return Path(os.path.relpath(real, real_root)).as_posix()
    return rel


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
            # A throwaway clone lives in <main>/.worktrees/<lane>, or for a unit of a
            # run in <main>/.wf/runs/<run>/<unit>/clone: its project is <main>.
            if d.parent.name == ".worktrees" and (d.parent.parent / ".git").exists():
                return d.parent.parent, True
            up = d.parents
            if (
                d.name == "clone"
                and len(up) > 4
                and (up[2].name, up[3].name) == ("runs", ".wf")
                and (up[4] / ".git").exists()
            ):
                return up[4], True
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


# Folders that belong to git and to wf itself: TASKS.md and the archive never live there.
_OWN_FOLDERS = (".git", ".wf", ".worktrees")


def check_paths(root: Path, cfg: configmod.Config) -> None:
    """Refuse a ``tasks`` or ``archive`` setting whose file, once symlinks are resolved,
    is outside the work tree, inside .git/ (or wf's own folders), wf.toml, the other of
    the two, or a folder. A symlinked file inside the tree is fine: wf writes through it."""
    real_root = Path(os.path.realpath(root))
    seen: dict[Path, str] = {Path(os.path.realpath(root / "wf.toml")): "wf.toml"}
    for key in ("tasks", "archive"):
        value: str = getattr(cfg, key)

        def refuse(why: str, key: str = key, value: str = value) -> ConfigError:
            return ConfigError("wf.toml", f"{key} = {value!r} {why}")

        try:
            real = Path(os.path.realpath(root / value, strict=True))
        except FileNotFoundError:  # no file yet (or a link to none): wf creates it
            real = Path(os.path.realpath(root / value))
        except OSError as e:  # a link that leads to itself, a folder wf may not enter
            raise refuse(f"cannot be resolved: {e.strerror or e}") from None

        if real != real_root and real_root not in real.parents:
            raise refuse(f"leads outside the work tree {real_root} (to {real})")
        parts = real.relative_to(real_root).parts
        if not parts or real.is_dir():
            raise refuse("is a folder; name a file such as TASKS.md")
        if real.exists() and not real.is_file():
            raise refuse("is not a regular file (a pipe, socket or device); name a file such as TASKS.md")
        own = [i for i, p in enumerate(parts) if p == ".git" or (p in _OWN_FOLDERS and i < len(parts) - 1)]
        if own:
            inside = "/".join(parts[: own[0] + 1])
            raise refuse(f"is inside {inside}/, which belongs to git or wf")
        if real in seen:
            raise refuse(f"is the same file as {seen[real]}")
        seen[real] = f"{key} ({value})"


def load(start: Path | None = None) -> Project:
    root, is_git = find_root(start or Path.cwd())
    cfg = configmod.load(root / "wf.toml")
    check_paths(root, cfg)
    return Project(root, cfg, is_git)
