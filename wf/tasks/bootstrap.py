"""``wf init``: the files a project needs, added without touching what exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wf.base import config as configmod
from wf.base.errors import WfError
from wf.base.fsutil import atomic_write, read_bytes
from wf.base.project import find_root

TASKS_TEMPLATE = """\
# Tasks

The backlog of this project, read and written by `wf` (`wf --help`).
Each task is a level-2 heading "<id>: <title>" with "Key: value" fields right under it
(Model, Done, Prio, Effort, After, Lane, Sessions, Parent, Status, Note), then any text.
"""

IGNORED = (".worktrees/", ".wf/", "out/")


def _git_top(start: Path) -> Path | None:
    try:
        root, is_git = find_root(start)
    except Exception:
        return None
    return root if is_git else None


def _refuse_git_dir(start: Path) -> None:
    """A bare repository (or a .git folder) has no work tree: the files would land among
    git's own. A folder is a git directory as git itself tells one (a HEAD file and
    objects/ and refs/ folders), in ``start`` or above it."""
    for d in (start, *start.parents):
        if (d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir():
            raise WfError(
                f"{d} is a bare repository or a .git folder: wf needs a work tree; "
                f"clone it (git clone {d} DIR) and run wf init in DIR"
            )


def init(start: Path) -> dict[str, Any]:
    start = start.resolve()
    root = _git_top(start)
    if root is None:
        _refuse_git_dir(start)
        root = start
    lines: list[str] = []
    created: list[str] = []
    tasks = root / "TASKS.md"
    toml = root / "wf.toml"
    if toml.exists():
        cfg = configmod.load(toml)
        lines.append("kept    wf.toml")
    else:
        atomic_write(toml, configmod.DEFAULT_TOML.encode("utf-8"))
        cfg = configmod.load(toml)
        created.append("wf.toml")
        lines.append("created wf.toml")
    tasks = root / cfg.tasks
    if tasks.exists():
        lines.append(f"kept    {cfg.tasks}")
    else:
        atomic_write(tasks, TASKS_TEMPLATE.encode("utf-8"))
        created.append(cfg.tasks)
        lines.append(f"created {cfg.tasks}")
    gitignore = root / ".gitignore"
    data = (read_bytes(gitignore) or b"").decode("utf-8", "replace")
    present = {line.strip().rstrip("/") for line in data.splitlines()}
    missing = [p for p in IGNORED if p.rstrip("/") not in present and "/" + p.rstrip("/") not in present]
    if missing:
        text = data
        if text and not text.endswith("\n"):
            text += "\n"
        text += "".join(f"{p}\n" for p in missing)
        atomic_write(gitignore, text.encode("utf-8"))
        lines.append(f"ignored {' '.join(missing)} (.gitignore)")
    (root / ".wf").mkdir(exist_ok=True)
    is_git = (root / ".git").exists()
    if not is_git:
        lines.append("note    not a git repository: tasks work, worktrees and merges need 'git init'")
    lines.append(f"ready   {root}")
    if is_git and created:
        lines.append(f"next    git add {' '.join(created)} .gitignore && git commit -m 'wf init'")
    return {"root": str(root), "created": created, "ignored": missing, "git": is_git, "lines": lines}
