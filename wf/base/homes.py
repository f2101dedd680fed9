"""Where the agent tools keep their files: the ground that usage (transcripts), procs
(live sessions) and the adapters all read, so none of them imports another for it."""

from __future__ import annotations

import os
from pathlib import Path


def claude_roots() -> list[Path]:
    """Claude Code's config roots: $CLAUDE_CONFIG_DIR (comma-separated), else ~/.config/claude
    and ~/.claude."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    if env:
        return [Path(p).expanduser() for p in env.split(",") if p.strip()]
    home = Path.home()
    return [home / ".config" / "claude", home / ".claude"]


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
