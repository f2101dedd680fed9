"""The ledger of a run: each unit's answer checked against the return contract, and the
units that need a person because their result is missing or invalid.

A unit records in status.json, when it is made, what its contract is (``contract``: the
required sections, or ``false`` when it is off) and, when it ends, the check of its
answer (``result``: ``{"valid", "reason", "why", "sections"}``). Readers use that record;
until it is written (the moment between a unit's last status and its end being handled,
or a supervisor killed in between) they derive the same check from ``output.txt`` and
status.json, so every reader agrees. A unit with its contract off, or made before the
contract existed, is never checked: done is done.

``invalid`` is a verdict on a done unit's answer, shown next to the states; the states
themselves (queued, running, done, failed, ...) stay what the supervisor wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from wf.base import fsutil
from wf.base.project import Project
from wf.fanout.contract import Invalid, Verdict, check
from wf.workers import runs

INVALID = "invalid"  # the verdict word of a done unit whose answer breaks the contract
READ_LIMIT = 256 * 1024  # the tail of an answer that is checked (the result block is at its end)


class Need(Enum):
    """Why a unit is on the ledger's list of what needs a person."""

    INVALID = "invalid"  # done, but its answer breaks the contract
    NO_RESULT = "no result"  # ended without being done (failed, stalled, timeout, lost, corrupt, ...)
    NEVER_STARTED = "never started"  # the run's manifest asks for it, and it has no status


@dataclass(frozen=True)
class Entry:
    """A unit on the ledger's list: its latest attempt's id, why it is there, and that
    attempt's (annotated) status (None: it never started). The words are the report's."""

    unit: str
    need: Need
    status: dict[str, Any] | None = None

    @property
    def why(self) -> Invalid | None:
        """For Need.INVALID: the kind of breach."""
        v = _from_record((self.status or {}).get("result"))
        return v.why if v is not None else None


def required(st: dict[str, Any]) -> tuple[str, ...] | None:
    """The sections a unit's answer must give; None: its contract is off (or the unit
    predates the contract), so its answer is never checked."""
    c = st.get("contract")
    if isinstance(c, list) and c and all(isinstance(x, str) for x in c):
        return tuple(c)
    return None


def as_record(v: Verdict) -> dict[str, Any]:
    """The ``result`` status.json keeps."""
    return {
        "valid": v.ok,
        "reason": v.reason(),
        "why": v.why.value if v.why else None,
        "sections": list(v.sections),
    }


def _from_record(rec: Any) -> Verdict | None:
    if not isinstance(rec, dict) or not isinstance(rec.get("valid"), bool):
        return None
    if rec["valid"]:
        return Verdict(True)
    try:
        why = Invalid(rec.get("why"))
    except ValueError:
        return None
    sections = rec.get("sections") or []
    if not (isinstance(sections, list) and all(isinstance(s, str) for s in sections)):
        return None
    return Verdict(False, why, tuple(sections))


def derive(folder: Path, st: dict[str, Any]) -> Verdict | None:
    """The check of a unit's answer made now from its files (None: not checked)."""
    need = required(st)
    if need is None:
        return None
    out = folder / "output.txt"
    text = fsutil.tail_text(out, READ_LIMIT) if out.exists() else None
    return check(text, need, fallback=bool(st.get("fallback")))


def verdict(folder: Path, st: dict[str, Any]) -> Verdict | None:
    """The check of a unit's answer: as recorded when it ended, else derived now."""
    if required(st) is None:
        return None
    return _from_record(st.get("result")) or derive(folder, st)


def record(folder: Path, st: dict[str, Any]) -> None:
    """Write the check of an ended unit's answer into ``st`` (its status), once."""
    v = derive(folder, st)
    if v is not None:
        st["result"] = as_record(v)


def annotate(project: Project, run: str, statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of ``statuses`` that each carry ``result`` (derived now when not recorded
    yet; for a unit that has ended) and ``verdict``: the state, or ``invalid`` for a
    done unit whose answer breaks the contract."""
    out = []
    for st in statuses:
        st = dict(st)
        if st.get("state") in runs.FINAL and st.get("state") != runs.CORRUPT and "unit" in st:
            v = verdict(runs.unit_dir(project, run, str(st["unit"])), st)
            if v is not None:
                st["result"] = as_record(v)
        st["verdict"] = word(st)
        out.append(st)
    return out


def invalid(st: dict[str, Any]) -> bool:
    """A done unit whose (annotated or recorded) result breaks the contract."""
    if st.get("state") != "done" or required(st) is None:
        return False
    v = _from_record(st.get("result"))
    return v is not None and not v.ok


def word(st: dict[str, Any]) -> str:
    """What a person reads in place of the state: ``invalid`` for a done unit whose
    answer breaks the contract, else the state."""
    return INVALID if invalid(st) else str(st.get("state") or "unknown")


def reason(st: dict[str, Any]) -> str:
    """Why a done unit's result is invalid, in words (``missing sections: Verification``)."""
    v = _from_record(st.get("result"))
    return v.reason() if v is not None else ""


def needs(st: dict[str, Any]) -> Need | None:
    """Whether an (annotated) latest attempt needs a person, and why; None: it landed
    well, or it still runs."""
    state = st.get("state")
    if state in runs.LIVE:
        return None
    if state != "done":
        return Need.NO_RESULT
    return Need.INVALID if invalid(st) else None


def entries(statuses: list[dict[str, Any]], never_started: list[str]) -> list[Entry]:
    """The ledger's list: every (annotated) latest attempt that needs a person, then the
    manifest's units that never started."""
    out = []
    for st in statuses:
        need = needs(st)
        if need is not None:
            out.append(Entry(str(st.get("unit")), need, st))
    out += [Entry(u, Need.NEVER_STARTED) for u in never_started]
    return out


def never_started(project: Project, run: str, statuses: list[dict[str, Any]]) -> list[str]:
    """The units the run's manifest asks for that have no status (any attempt)."""
    from wf.fanout.manifest import saved_requests

    made = {str(st.get("unit")) for st in statuses} | {str(st.get("retry_of")) for st in statuses}
    return [r.id for r in saved_requests(project, run) if r.id not in made]
