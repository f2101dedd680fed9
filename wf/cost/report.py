"""What ``wf usage`` shows: one worker's cost from its own transcript (and its cost-log
line), or the report over every project's cost log. The words a person reads are made
here; the command line only collects the options and prints."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.base.errors import WfError
from wf.cost import costlog, usage
from wf.cost.usage import Cost

# ---------------------------------------------------------------- one worker


def transcript_cost(
    *, agent: str | None, session: str | None, thread: str | None, file: str | None
) -> tuple[Cost, str]:
    """The cost of the one transcript named (a subagent, a session with its subagents, a
    Codex thread or a file) and its kind; a file with no request and unreadable lines is
    refused as no transcript."""
    if agent:
        return usage.for_agent(agent)
    if session:
        return usage.claude_cost(usage.session_files(session)), "session"
    if thread:
        return usage.codex_cost(usage.thread_file(thread)), "codex"
    cost, kind = usage.for_file(Path(str(file)))
    if cost.turns == 0 and cost.malformed:
        raise WfError(f"{file}: no API requests and {cost.malformed} unreadable line(s): not a transcript?")
    return cost, kind


@dataclass(frozen=True)
class Measured:
    """One worker's cost, its cost-log record, and what a person should be warned of."""

    cost: Cost
    kind: str
    record: dict[str, Any]
    warnings: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {**self.record, "malformed": self.cost.malformed, "files": self.cost.files}

    def lines(self) -> list[str]:
        """The summary: what ran, the tokens, the dollars (per model when several), the legend."""
        cost, rec = self.cost, self.record
        tilde = "~" if cost.est else ""
        mark = costlog.MARKS[cost.source]
        out = [
            f"{self.kind} {rec['agent']}  model {cost.model or '-'}  turns {cost.turns}  dur {rec['dur_s']}s",
            f"in {cost.inp}  out {tilde}{cost.out + cost.est}"
            + (f" ({cost.out} reported)" if cost.est else "")
            + f"  cache writes 5m {cost.cw5m} 1h {cost.cw1h}  cache reads {cost.cr}",
            f"usd {tilde}{cost.usd:.4f}{mark}"
            + (f" (reported output only: {cost.usd_rep:.4f}{mark})" if cost.est else ""),
        ]
        if len(cost.by_model) > 1:
            out.append(
                "by model: "
                + ", ".join(
                    f"{m} {t} turns usd {tilde}{u:.4f}{costlog.model_mark(cost, m)}"
                    for m, t, u, _ in cost.by_model
                )
            )
        return out + costlog.legends([cost.source], bool(cost.est))


def measure(
    cost: Cost,
    kind: str,
    *,
    name: str,
    root: Path | None,
    log: bool = False,
    task_id: str | None = None,
    lane: str | None = None,
    effort: str | None = None,
    done: bool | None = None,
    duration: float | None = None,
    now: float | None = None,
) -> Measured:
    """The cost record of a worker named ``name`` (in the project at ``root``, if any),
    appended to the project's cost log with ``log``."""
    rec = costlog.line_for(
        cost,
        ts=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        project=root.name if root else "-",
        task_id=task_id,
        agent=name,
        kind=kind,
        lane=lane,
        effort=effort,
        done=done,
        duration=duration,
    )
    warnings = _logged(root, rec) if log and root is not None else []
    warnings += costlog.price_warnings(cost)
    if cost.malformed:
        warnings.append(f"{cost.malformed} malformed line(s) skipped")
    return Measured(cost, kind, rec, tuple(warnings))


def _logged(root: Path, rec: dict[str, Any]) -> list[str]:
    """Append ``rec`` to the project's cost log; a warning if the report across projects
    will miss it (wf's state folder cannot be written)."""
    costlog.append(root, rec)
    unwritable = costlog.state_problem()
    if unwritable is None:
        return []
    log = root / "out" / "wf-cost.log"
    return [f"{unwritable}; the cost line is in {log}, but wf usage --report across projects misses it"]


# ---------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """The cost log's lines grouped ``by`` lane, model or run, from ``since`` on, for
    ``project``; ``problems`` are the log lines that could not be read."""

    rows: list[dict[str, Any]]
    recs: list[dict[str, str]]
    problems: list[str]
    by: str
    since: str | None
    project: str | None

    def lines(self) -> list[str]:
        """The table (or why it is empty), then the lines whose costs disagree."""
        table = costlog.report_text(self.rows, self.by) or [nothing_found(self.since, self.project)]
        return table + costlog.disagreements(self.recs)


def cost_report(*, since: str | None = None, project: str | None = None, by: str = "lane") -> Report:
    """The report over every known project's cost log (``since``: a first day, YYYY-MM-DD)."""
    recs, bad = costlog.records(since, project)
    return Report(costlog.report(recs, by), recs, bad, by, since, project)


def nothing_found(since: str | None, project: str | None) -> str:
    """Why the report is empty: no line at all, or none passed the filters (say which)."""
    everything, _ = costlog.records()
    if not everything:
        return "no cost lines yet (wf usage --log, wf orch post --agent)"
    what = " and ".join(
        x for x in (f"since {since}" if since else "", f"for project {project}" if project else "") if x
    )
    projects = sorted({r.get("project", "-") for r in everything})
    days = sorted(r.get("ts", "")[:10] for r in everything)
    return (
        f"no cost lines {what} (the logs have {len(everything)}, from {days[0]} to {days[-1]}; "
        f"projects: {', '.join(projects)})"
    )
