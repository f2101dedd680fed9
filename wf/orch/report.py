"""The worker's four report lines, read from its final message."""

from __future__ import annotations

import re
from typing import NamedTuple

from wf.orch.state import Result

_REPORT = re.compile(r"^[\s>*_`#-]*(result|commit|followups|note)[*_`\s]*:[ \t]*(.*?)[ \t]*$", re.I | re.M)
_SHA = re.compile(r"\b[0-9a-f]{7,64}\b")


class Report(NamedTuple):
    result: str
    commit: str | None
    followups: str
    note: str


def read_report(answer: str) -> Report | None:
    """The four lines of a worker's final message (the last of each), or None. Markdown
    a model may add (bullets, bold, backticks, a final period) is tolerated."""
    found: dict[str, str] = {}
    for m in _REPORT.finditer(answer):
        found[m.group(1).lower()] = m.group(2).strip("`*_ ")
    words = re.findall(r"[a-z]+", found.get("result", "").lower())
    result = words[0] if words else ""
    if result not in {r.value for r in Result} or result == Result.CRASHED:
        return None
    sha = _SHA.search(found.get("commit", "").lower())
    note = " ".join(found.get("note", "").split())[:300]
    return Report(result, sha.group(0) if sha else None, found.get("followups", "-"), note)
