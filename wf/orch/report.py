"""The worker's four report lines, read from its final message (or, for a worker of a
loop that died, from what its unit folder kept); and a run's outcomes, read from the
orch log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from wf import adapters
from wf.base.project import Project
from wf.base.text import fields
from wf.orch.state import LaneRecord, Outcome, Result
from wf.workers import runs

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


def report_or_handback(answer: str) -> Report:
    """The worker's four lines; a worker that ended without them hands its task back,
    with the start of what it said as the note (one rule for ``wf orch post --report``
    and for the loop)."""
    rep = read_report(answer)
    if rep is not None:
        return rep
    return Report(Result.HANDBACK.value, None, "-", f"no report: {runs.preview(answer, 80)}")


def captured_report(project: Project, rec: LaneRecord) -> Report | None:
    """The four lines a worker of an earlier run left: its landed answer, else (its loop
    died before landing it) what its own stream or answer file holds."""
    if not rec.run or not rec.unit:
        return None
    from wf.base import records

    folder = runs.unit_dir(project, rec.run, rec.unit)
    try:
        status = runs.read_status(folder) or {}
    except records.CorruptRecord:  # its words cannot be trusted: nothing is taken from it
        return None
    if status.get("fallback") or runs.answered_after_signal(folder):
        return None  # what it said after wf signalled it answers the signal: a crash to recover
    rep = read_report(runs.read_output(folder))
    if rep is not None or status.get("state") not in (None, "queued", "running"):
        return rep
    return read_report(stream_answer(folder, rec.adapter))


def stream_answer(folder: Path, adapter_name: str | None) -> str:
    def text(name: str) -> str:
        try:
            return (folder / name).read_text("utf-8", errors="replace")
        except OSError:
            return ""

    if adapter_name in (None, "cmd"):
        return text("answer.out") or text("worker.log")
    adapter = adapters.get(adapter_name)
    parsed = adapters.Parsed()
    for line in text("worker.log").splitlines():
        event = adapters.parse_line(line)
        if event is not None:
            adapter.feed(parsed, event)
    return parsed.answer or ""


def run_outcomes(project: Project, since: int) -> list[Outcome]:
    """The outcomes of the orch log lines written after byte ``since`` (a run's own),
    read from their ``outcome=`` field."""
    try:
        with open(project.out_dir / "wf-orch.log", "rb") as f:
            f.seek(since)
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(Outcome(fields(line).get("outcome", "")))
        except ValueError:
            continue
    return out
