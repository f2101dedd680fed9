"""``wf install``: link the wf-worker subagent and the wf skills into Claude Code's folders."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from wf.base.errors import WfError
from wf.base.homes import claude_home

ITEMS = (
    ("agents", "wf-worker.md"),
    ("skills", "wf-orchestrate"),
    ("skills", "wf-design"),
    ("skills", "wf-pilot"),
)


RESTART = (
    "a Claude Code session started before this install does not see new agents and skills: "
    "restart it (links to the same files pick up later changes by themselves)"
)


def default_target() -> Path:
    return claude_home()


def install(target: Path | None = None) -> list[str]:
    """Symlink each file or folder; an existing link is replaced, anything else that
    is in the way is left alone and reported."""
    target = (target or default_target()).expanduser()
    source = Path(str(resources.files("wf").joinpath("data/claude")))
    if not source.is_dir():
        raise WfError(f"wf's Claude files are missing from the package ({source})")
    lines = []
    for kind, name in ITEMS:
        src = source / kind / name
        dest = target / kind / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink():
            if Path(os.readlink(dest)) == src:
                lines.append(f"kept    {dest} -> {src}")
                continue
            dest.unlink()
        elif dest.exists():
            lines.append(f"skipped {dest}: something else is there (move it away to link wf's)")
            continue
        dest.symlink_to(src, target_is_directory=src.is_dir())
        lines.append(f"linked  {dest} -> {src}")
    lines.append(RESTART)
    return lines
