"""What a task's fields may hold: the known keys and the order wf writes them in, the
forms of a Status, and the check of one value (its error message, or None)."""

from __future__ import annotations

import re
from typing import NamedTuple

from wf.base.ids import ID_HELP, ID_RE, MODEL_RE, valid_id

EFFORT_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)")
EFFORT_EXPECTED = (
    "expected a positive number"  # what a bad Effort is told, in TASKS.md and on the command line
)

# Canonical spelling of the known keys; matching ignores case.
KEYS = {
    k.lower(): k
    for k in (
        "Model",
        "Lane",
        "Prio",
        "Effort",
        "Done",
        "After",
        "Sessions",
        "Cloud",
        "Parent",
        "Status",
        "Note",
    )
}
REPEATABLE = frozenset({"note"})
# The order wf writes fields in a task it creates.
FIELD_ORDER = ("model", "lane", "prio", "effort", "done", "after", "sessions", "cloud", "parent")
STATES = ("pending", "progress", "awaiting", "blocked", "wip")


class Status(NamedTuple):
    state: str  # one of STATES
    text: str  # the note, question, reason, or "<who> since <time>"
    who: str = ""
    since: str = ""

    @property
    def waits_for(self) -> str | None:
        """The task id of ``blocked: waits for <id>`` (what a prep batch sets on a task it
        asked a question about), else None."""
        if self.state != "blocked":
            return None
        head, _, rest = self.text.partition(" ")
        word, _, tail = rest.partition(" ")
        if head != "waits" or word != "for":
            return None
        tid = tail.strip()
        return tid if ID_RE.fullmatch(tid) else None

    def __str__(self) -> str:
        if self.state == "pending":
            return "pending"
        label = "in progress" if self.state == "progress" else self.state
        return f"{label}: {self.text}" if self.text else label


PENDING = Status("pending", "")


def parse_status(value: str) -> Status | None:
    """Parse a Status value; None when it is not one of the known forms."""
    v = value.strip()
    head, _, rest = v.partition(":")
    head = head.strip().lower()
    rest = rest.strip()
    if head == "pending" and not rest:
        return PENDING
    if head == "in progress":
        who, _, since = rest.partition(" since ")
        return Status("progress", rest, who.strip(), since.strip())
    if head in ("awaiting", "blocked", "wip"):
        return Status(head, rest)
    return None


def check_field(key: str, value: str) -> str | None:
    """The error message for a known field's value, or None if it is fine."""
    v = value.strip()
    if not v:
        return f"{KEYS[key]} has no value"
    if key == "model" and not MODEL_RE.fullmatch(v):
        return f"bad Model {v!r}"
    if key == "lane" and not valid_id(v):
        return f"bad Lane {v!r}: lane names follow the id rules ({ID_HELP})"
    if key == "prio" and v not in ("0", "1", "2", "3"):
        return f"bad Prio {v!r}: expected 0, 1, 2 or 3 (0 is most urgent)"
    if key == "effort" and (not EFFORT_RE.fullmatch(v) or float(v) <= 0):
        return f"bad Effort {v!r}: {EFFORT_EXPECTED}"
    if key == "after":
        for part in v.split(","):
            p = part.strip()
            if not valid_id(p):
                return f"bad After {v!r}: expected task ids separated by commas"
    if key == "sessions" and v.lower() not in ("owner", "solo"):
        return f"bad Sessions {v!r}: expected owner or solo"
    if key == "cloud" and v.lower() not in ("yes", "no"):
        return f"bad Cloud {v!r}: expected yes or no"
    if key == "parent" and not valid_id(v):
        return f"bad Parent {v!r}: {ID_HELP}"
    if key == "status" and parse_status(v) is None:
        return (
            f"unknown Status {v!r}: expected 'in progress: <who> since <time>', "
            "'awaiting: <question>', 'blocked: <why>' or 'wip: <note>' (no Status line = pending)"
        )
    return None


def dump_fields(values: dict[str, str | None]) -> list[tuple[str, str]]:
    """Known fields in wf's own order, skipping empty ones."""
    out = [(KEYS[k], v) for k in FIELD_ORDER if (v := values.get(k))]
    if values.get("status"):
        out.append(("Status", values["status"] or ""))
    return out
