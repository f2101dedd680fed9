"""Processes: the only user of psutil.

Who is using a folder (a live process whose cwd is inside it, a Claude Code session
whose recorded cwd points into it), whether a pid lives, and process trees.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import psutil


class User(NamedTuple):
    """Someone using a folder: a process or an agent session."""

    kind: str  # "process" or "claude-session"
    pid: int
    what: str

    def __str__(self) -> str:
        return f"{self.kind} pid {self.pid} ({self.what})"


def alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def describe(pid: int) -> str:
    try:
        p = psutil.Process(pid)
        cmd = " ".join(p.cmdline()) or p.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    return cmd if len(cmd) <= 60 else cmd[:57] + "..."


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def processes_in(folder: Path) -> list[User]:
    """Live processes (other than this one) whose cwd is inside ``folder``."""
    target = str(folder.resolve())
    me = os.getpid()
    users = []
    for p in psutil.process_iter(["pid", "cwd", "name"]):
        try:
            cwd = p.info.get("cwd")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if not cwd or p.info["pid"] == me or not _inside(cwd, target):
            continue
        if p.info["pid"] in _ancestors():
            continue  # the shell or tool that started this wf is not a user of the tree
        users.append(User("process", p.info["pid"], p.info.get("name") or "?"))
    return users


_ANCESTORS: set[int] | None = None


def _ancestors() -> set[int]:
    global _ANCESTORS
    if _ANCESTORS is None:
        try:
            _ANCESTORS = {p.pid for p in psutil.Process().parents()}
        except psutil.Error:
            _ANCESTORS = set()
    return _ANCESTORS


def claude_roots() -> list[Path]:
    """Claude Code's config roots: $CLAUDE_CONFIG_DIR (comma-separated), else ~/.claude."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    if env:
        return [Path(p).expanduser() for p in env.split(",") if p.strip()]
    home = Path.home()
    return [home / ".config" / "claude", home / ".claude"]


def claude_sessions_in(folder: Path) -> list[User]:
    """Claude Code sessions (``<root>/sessions/<pid>.json``) whose ``cwd`` is inside
    ``folder`` and whose ``pid`` lives."""
    target = str(folder.resolve())
    users = []
    for root in claude_roots():
        sessions = root / "sessions"
        if not sessions.is_dir():
            continue
        for f in sessions.glob("*.json"):
            try:
                info = json.loads(f.read_text("utf-8"))
                cwd = str(info.get("cwd") or "")
                pid = int(info.get("pid") or 0)
            except (OSError, ValueError, TypeError, AttributeError):
                continue
            if cwd and _inside(os.path.realpath(cwd), target) and alive(pid):
                users.append(User("claude-session", pid, str(info.get("sessionId") or f.stem)))
    return users


def users_of(folder: Path) -> list[User]:
    return processes_in(folder) + claude_sessions_in(folder)


def git_processes() -> list[int]:
    """Pids of running git processes (a lock file is stale only if none runs)."""
    pids = []
    for p in psutil.process_iter(["pid", "name"]):
        if (p.info.get("name") or "").startswith("git"):
            pids.append(p.info["pid"])
    return pids
