"""The cloud backend's interface: create a session for a task, read its state, pull its
work as a branch, find its cost.

One implementation drives the real ``claude`` (``wf.cloud.claude``); the tests run it
against a fake ``claude`` that replays the real binary's recorded messages
(``tests/fakes/cloud/claude``, checked against ``tests/fixtures/real/claude-*/cloud/``).
Everything here is typed: a refusal carries a ``Refusal`` kind that code branches on,
and the tool's own words for a person.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from wf.base.errors import WfError

# What wf accepts as a session id from the tool's output, before it reaches an argv, a
# record or a path: a letter or digit first (never an option), then letters, digits, _ and -.
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def valid_session(session: str) -> bool:
    return SESSION_ID.fullmatch(session) is not None


class SessionState(enum.StrEnum):
    """Where a cloud session is: running, or how it ended."""

    SENDING = "sending"  # claimed; the session is being created
    RUNNING = "running"
    DONE = "done"
    AWAITING = "awaiting"
    HANDBACK = "handback"
    LOST = "lost"  # gone, or ended without a report

    @property
    def ended(self) -> bool:
        return self not in (SessionState.SENDING, SessionState.RUNNING)


class Refusal(enum.Enum):
    """Why the tool would not create, read or pull a session."""

    NOT_LOGGED_IN = "not logged in"
    NO_GITHUB_REMOTE = "no GitHub remote"
    DIRTY_TREE = "uncommitted changes"
    OFFLINE = "offline"
    NEEDS_TERMINAL = "needs a terminal"
    WRONG_CHECKOUT = "not a checkout of the session's repository"
    NOT_FOUND = "no such session"
    NO_PROGRAM = "claude is not installed"
    NEEDS_SETUP = "claude needs a first run by a person"
    TOO_OLD = "claude is too old for the cloud lane"
    OTHER = "refused"

    @property
    def infrastructure(self) -> bool:
        """Nothing the task did: the claim is released and the lane stops."""
        return self is not Refusal.NOT_FOUND


class CloudRefused(WfError):
    def __init__(self, kind: Refusal, words: str, fix: str = "") -> None:
        self.kind = kind
        self.words = words
        super().__init__(f"{kind.value}: {words}" + (f" ({fix})" if fix else ""))


@dataclass(frozen=True)
class Session:
    id: str
    url: str | None
    title: str


@dataclass(frozen=True)
class SessionStatus:
    state: SessionState
    note: str = ""
    commit: str | None = None  # the commit the session reported
    local_session: str | None = None  # the local session whose transcript holds its cost


class Backend(Protocol):
    """What the cloud lane needs from Claude Code's cloud sessions."""

    name: str

    def check(self, repo: Path) -> None:
        """Refuse (CloudRefused) what can be known before anything is claimed: no program,
        no GitHub remote."""
        ...

    def create(self, repo: Path, prompt: str, title: str) -> Session:
        """Start a session on ``repo``'s GitHub repository; CloudRefused if it cannot."""
        ...

    def state(self, repo: Path, session: str, workdir: Path) -> SessionStatus:
        """Read the session's state from a clean checkout ``workdir`` of ``repo``."""
        ...

    def pull(self, repo: Path, session: str, workdir: Path, branch: str) -> str | None:
        """Make ``branch`` in ``repo`` hold the session's work; its tip (None: no work)."""
        ...

    def cost(self, status: SessionStatus) -> float | None:
        """What the session cost in USD, when it can be found."""
        ...


_ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[()][0-9A-Za-z]|\x1b[78=>]"
)


_MOVE = re.compile(r"\x1b\[\d*[CG]")  # cursor moves a full-screen program puts between words


def plain(text: str) -> str:
    """A terminal's output as text: cursor moves become spaces, other escape sequences,
    carriage returns and lines of drawing (no letter in them) go."""
    text = _ANSI.sub("", _MOVE.sub(" ", text)).replace("\x0f", "").replace("\r", "")
    return "\n".join(ln for ln in text.split("\n") if not ln.strip() or re.search("[A-Za-z]", ln))


# (pattern of the tool's words, kind, what a person does); recorded from 2.1.332
_CLASSES: tuple[tuple[re.Pattern[str], Refusal, str], ...] = (
    (
        re.compile(r"claude\.ai sign-in|Not logged in|/login", re.I),
        Refusal.NOT_LOGGED_IN,
        "run: claude auth login",
    ),
    (re.compile(r"uncommitted changes", re.I), Refusal.DIRTY_TREE, "commit or stash them"),
    (
        re.compile(r"EAI_AGAIN|ENOTFOUND|ECONNREFUSED|ETIMEDOUT|Unable to connect", re.I),
        Refusal.OFFLINE,
        "check the network",
    ),
    (re.compile(r"interactive terminal", re.I), Refusal.NEEDS_TERMINAL, ""),
    (re.compile(r"from a checkout of", re.I), Refusal.WRONG_CHECKOUT, ""),
    (re.compile(r"not found|archived|no such session", re.I), Refusal.NOT_FOUND, ""),
)


def classify(words: str) -> tuple[Refusal, str]:
    """The kind of a refusal from the tool's words, and what a person does about it."""
    for pattern, kind, fix in _CLASSES:
        if pattern.search(words):
            return kind, fix
    return Refusal.OTHER, ""


def refused(words: str) -> CloudRefused:
    words = " ".join(words.split())
    if words.lower().startswith("error:"):
        words = words[6:].strip()
    kind, fix = classify(words)
    return CloudRefused(kind, words or "no reason given", fix)


def is_github(url: str) -> bool:
    """A remote URL on github.com (https, ssh or scp-like)."""
    return bool(re.match(r"^(?:https://|ssh://git@|git@)github\.com[:/][^/\s]+/[^/\s]+?(?:\.git)?/?$", url))
