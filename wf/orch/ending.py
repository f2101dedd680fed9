"""What a lane worker's end says, for ``wf orch run``: a report to post, a crash to
recover, or its tool's failure (nothing of the task's doing).

``infra_failure`` reads the failure class the adapter gave the unit (a usage limit, an
overloaded API, no login...). A unit that ended with no such class is read by
``read_end`` into an ``Ending``: the report it gave (none, but it exited cleanly: a
handback, ``report_or_handback``), a crash (it failed, or wf signalled it before it
reported), or its tool's failure that its adapter could not tell: it died before
reading its prompt, or failed the same way (``CrashSignature``) on two tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from wf.adapters import Failure
from wf.orch.report import read_report, report_or_handback
from wf.orch.state import LaneRecord, Result
from wf.workers import runs
from wf.workers.supervise import Unit


class CrashSignature(NamedTuple):
    """How a worker failed without a report: the same on two tasks is its tool's fault."""

    adapter: str
    cmd: tuple[str, ...]
    exit_code: int | None
    last_line: str


def infra_failure(status: dict[str, object]) -> Failure | None:
    """The failure class of a unit that failed for want of its tool (None otherwise)."""
    try:
        failure = Failure(status.get("failure"))
    except ValueError:
        return None
    return failure if failure.infrastructure else None


@dataclass(frozen=True)
class Ending:
    """A unit's end: what to post (``result``, ``commit``, ``note``), or, with
    ``tool_words`` set, its tool's failure in those words (nothing is posted: the claim
    is released). ``said`` is the loop's line about it; ``unblock``: tasks this run
    blocked as crashed twice whose crashes turn out to be the tool's."""

    said: str
    result: str = ""
    commit: str | None = None
    note: str = ""
    duration: float | None = None
    tool_words: str | None = None
    unblock: tuple[str, ...] = ()


class Crashes:
    """The crashes without a report of one run, by signature: the tasks of each."""

    def __init__(self) -> None:
        self.seen: dict[CrashSignature, set[str]] = {}

    def read_end(self, unit: Unit, rec: LaneRecord) -> Ending:
        """What the end of ``unit`` (working on ``rec``'s task) comes to."""
        answer = runs.read_output(unit.folder)
        late = runs.answered_after_signal(unit.folder)  # wf signalled it first: no answer
        rep = read_report(answer) if not unit.status.get("fallback") and not late else None
        took = unit.status.get("duration_s")
        duration = float(took) if isinstance(took, (int, float)) else None
        how = f"{unit.state}, exit {unit.status.get('exit_code')}"
        if late:
            said = f"{rec.id} was signalled by wf before it reported ({how}): a crash to recover"
            return Ending(
                said, Result.CRASHED.value, None, f"signalled by wf before its report ({how})", duration
            )
        if rep is None and unit.state == "done":
            rep = report_or_handback(answer)
            said = f"{rec.id} ended without the four report lines"
            return Ending(said, rep.result, rep.commit, rep.note, duration)
        if rep is None:
            words, others = self._tool_crash(unit, rec)
            if words is not None:
                return Ending("", tool_words=words, unblock=others)
            return Ending(
                f"{rec.id} ended without a report ({how})", Result.CRASHED.value, None, how, duration
            )
        return Ending(
            f"{rec.id} reported {rep.result}: {rep.note}", rep.result, rep.commit, rep.note, duration
        )

    def _tool_crash(self, unit: Unit, rec: LaneRecord) -> tuple[str | None, tuple[str, ...]]:
        """Why a worker that failed without a report is its tool's fault though its adapter
        could not tell (None: it is the task's crash), and the other tasks it failed on
        alike: it died before reading its prompt, or it failed the same way (exit status,
        last error line) on another task while its tool said nothing of why."""
        st = unit.status
        if unit.state != "failed" or st.get("failure") != Failure.task.value:
            return None, ()  # a timeout, a stall, a stop: nothing says the tool is at fault
        code = st.get("exit_code")
        line = str(st.get("reason") or st.get("error") or "")
        size = st.get("stdin_bytes")
        unread = st.get("stdin_read") == 0 and isinstance(size, int) and size > 0
        if unread and _nothing_printed(unit.folder):
            return (
                f"the worker ended (exit {code}) before reading its prompt: {line or 'nothing on stderr'}",
                (),
            )
        if unit.parsed.error is not None:
            return None, ()  # the tool named the failure itself (claude's max turns): its adapter's call
        sig = CrashSignature(
            unit.adapter.name, tuple(unit.spec.cmd), code if isinstance(code, int) else None, line
        )
        seen = self.seen.setdefault(sig, set())
        others = tuple(sorted(seen - {rec.id}))
        seen.add(rec.id)
        if not others:
            return None, ()
        words = f"the worker failed the same way on {', '.join(others)} and {rec.id} (exit {code}): {line}"
        return words, others  # blocked before the pattern showed: not theirs either


def _nothing_printed(folder: Path) -> bool:
    """Whether a unit's worker printed nothing on stdout (it may have read its prompt
    from WF_PROMPT_FILE and run: then its failure is its task's)."""
    try:
        return (folder / "worker.log").stat().st_size == 0
    except OSError:
        return False
