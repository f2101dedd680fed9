"""Where the agent tools keep their files: the ground that usage (transcripts), procs
(live sessions) and the adapters all read, so none of them imports another for it; and
where wf keeps its own state across projects."""

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


def claude_home() -> Path:
    """The one folder Claude Code reads its user settings from and where wf installs its
    agents and skills: the first $CLAUDE_CONFIG_DIR entry, else ~/.claude."""
    env = os.environ.get("CLAUDE_CONFIG_DIR", "").split(",")[0].strip()
    return Path(env).expanduser() if env else Path.home() / ".claude"


def wf_state() -> Path:
    """wf's own state folder, across projects: ``$XDG_STATE_HOME/wf``, else
    ``~/.local/state/wf`` (the list of projects, res's jobs, crash logs). Not made here:
    each user says what a folder that cannot be made costs it."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "wf"


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
