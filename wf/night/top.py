"""What ``wf top`` shows: one :class:`Snapshot` of the night, read from the state wf
already keeps and never written to.

- the tasks waiting for a person (awaiting, blocked, wip, handed back), first;
- each lane: its task, tool and model, whether its worker lives, how long it has run,
  how long it has been quiet (its stream's last write), what it has cost so far (its
  transcript, as ``wf usage`` counts it), or that it is parked until a usage limit resets;
- the newest batch: tasks posted against its N, time against its ``--for``.

A :class:`Watcher` keeps what is dear to read (the backlog's waiting tasks, a worker's
transcript cost) and reads it again only when its file changed, so a refresh every
second or two costs next to nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.base.errors import WfError
from wf.base.project import Project
from wf.base.quantity import fmt_duration
from wf.base.records import CorruptRecord

if TYPE_CHECKING:
    from wf.tasks.backlog import Backlog


@dataclass(frozen=True)
class LaneView:
    lane: str
    task: str | None
    state: str | None
    adapter: str | None
    model: str | None
    worker: str  # alive | gone | interactive | unknown
    elapsed_s: float | None
    quiet_s: float | None  # since the worker's stream last grew; None: no stream
    cost_usd: float | None  # so far, from its transcript; None: not known (yet)
    parked: str | None = None  # "parked until 03:10 (five_hour)"
    corrupt: str | None = None  # the record cannot be trusted: why


@dataclass(frozen=True)
class BatchView:
    stamp: str
    alive: bool
    state: str
    n: int | None  # tasks it may post
    posted: int  # tasks posted so far
    done: int  # of them, merged (done)
    for_s: float | None  # nothing new starts after it
    elapsed_s: float | None
    reason: str | None  # why it ended
    corrupt: str | None = None


@dataclass(frozen=True)
class Snapshot:
    at: float
    needs_person: list[dict[str, Any]]
    lanes: list[LaneView]
    batch: BatchView | None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["needs_person_count"] = len(self.needs_person)
        return d


def _mtime(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    from wf.base.stamps import parse_utc

    return parse_utc(stamp)


class Watcher:
    """Reads snapshots of one project; what is dear is read again only when it changed."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._waiting: tuple[Any, list[dict[str, Any]], list[str]] | None = None
        self._costs: dict[tuple[str, str], tuple[Any, float | None]] = {}

    def snapshot(self) -> Snapshot:
        problems: list[str] = []
        batch_rec = None
        try:
            from wf.night.batchplan import newest

            batch_rec = newest(self.project)
        except CorruptRecord as e:
            problems.append(f"batch record cannot be trusted: {e.why} ({e.path}; wf doctor --fix)")
        now = time.time()
        return Snapshot(
            at=now,
            needs_person=self._needs_person(batch_rec, problems),
            lanes=self._lanes(now),
            batch=self._batch(batch_rec, now, problems),
            problems=problems,
        )

    # -------------------------------------------------------------- who waits for a person

    def _needs_person(self, rec: Any, problems: list[str]) -> list[dict[str, Any]]:
        from wf.night.batchlog import needs_person
        from wf.night.taskrows import rows_file

        key = (
            _mtime(self.project.tasks_path),
            rec.stamp if rec is not None else None,
            _mtime(rows_file(self.project, rec.stamp)) if rec is not None else None,
            _mtime(self.project.wf_dir / "orch" / "held"),  # the handback records: holds too
            _mtime(self.project.wf_dir / "orch"),
        )
        if self._waiting is None or self._waiting[0] != key:
            said: list[str] = []
            try:
                from wf.tasks import backlog

                bl = backlog.load(self.project)
                found = needs_person(self.project, rec, bl)
                said += _backlog_errors(bl)
            except CorruptRecord as e:
                found, said = [], [f"cannot be trusted: {e.why} ({e.path})"]
            except WfError as e:
                found, said = [], [str(e)]
            self._waiting = (key, found, said)
        problems += self._waiting[2]
        return self._waiting[1]

    # -------------------------------------------------------------- the lanes

    def _lanes(self, now: float) -> list[LaneView]:
        from wf.orch import state

        out = []
        for r in state.status(self.project):
            if "corrupt" in r:
                out.append(LaneView(r["lane"], None, None, None, None, "unknown", None, None, None,
                                    corrupt=f"{r['corrupt']} ({r['path']}; wf doctor --fix)"))  # fmt: skip
                continue
            alive = r.get("worker_alive")
            worker = (
                "interactive"
                if not r.get("pid")
                else "unknown"
                if alive is None
                else "alive"
                if alive
                else "gone"
            )
            quiet, cost = self._worker(r, now)
            out.append(
                LaneView(
                    lane=r["lane"],
                    task=r.get("id"),
                    state=str(r.get("state")) if r.get("state") is not None else None,
                    adapter=r.get("adapter"),
                    model=r.get("model"),
                    worker=worker,
                    elapsed_s=float(r["age_s"]) if r.get("age_s") is not None else None,
                    quiet_s=quiet,
                    cost_usd=cost,
                    parked=r.get("parked"),
                )
            )
        return out

    def _worker(self, r: dict[str, Any], now: float) -> tuple[float | None, float | None]:
        """How long the lane's worker has been quiet, and what it has cost so far."""
        run, unit = r.get("run"), r.get("unit")
        if not run or not unit:
            return None, None
        from wf.workers import runs

        try:
            folder = runs.unit_dir(self.project, run, unit)
        except WfError:
            return None, None
        log = _mtime(folder / "worker.log")
        quiet = max(0.0, now - log[0] / 1e9) if log else None
        st = runs.read_status(folder) or {}
        session, adapter = st.get("session_id"), st.get("adapter") or r.get("adapter") or "claude"
        if not isinstance(session, str) or not session:
            return quiet, None
        key = (str(adapter), session)
        seen = self._costs.get(key)
        if seen is not None and seen[0] == log:
            return quiet, seen[1]
        from wf import adapters

        try:
            found = adapters.session_cost(str(adapter), session)
        except (WfError, OSError, ValueError):
            found = None
        cost = round(found[0].usd, 6) if found is not None else None
        self._costs[key] = (log, cost)
        return quiet, cost

    # -------------------------------------------------------------- the batch

    def _batch(self, rec: Any, now: float, problems: list[str]) -> BatchView | None:
        if rec is None:
            return None
        from wf.night.taskrows import is_done, read_task_rows, rows_file

        posted = done = 0
        try:
            rows = read_task_rows(rows_file(self.project, rec.stamp)) or []
            posted = len(rows)
            done = sum(1 for row in rows if is_done(row.outcome))
        except CorruptRecord as e:
            problems.append(f"batch rows cannot be trusted: {e.why} ({e.path})")
        plan = rec.plan if isinstance(rec.plan, dict) else {}
        start = _epoch(rec.started)
        end = _epoch(rec.ended) if rec.ended else None
        alive = bool(rec.alive)
        return BatchView(
            stamp=rec.stamp,
            alive=alive,
            state=str(rec.job_state or rec.state) if not alive else "running",
            n=int(plan["n"]) if isinstance(plan.get("n"), int) else None,
            posted=posted,
            done=done,
            for_s=float(plan["for_s"]) if isinstance(plan.get("for_s"), (int, float)) else None,
            elapsed_s=round((end or now) - start, 1) if start is not None else None,
            reason=rec.reason,
        )


def _backlog_errors(bl: Backlog) -> list[str]:
    """TASKS.md's errors, said once: a task that cannot be read may be one waiting for a
    person (never a silent "nobody waits")."""
    errors = bl.errors()
    if not errors:
        return []
    first = errors[0]
    more = f" (and {len(errors) - 1} more; wf check)" if len(errors) > 1 else " (wf check)"
    return [f"{first.path}:{first.line}: {first.message}{more}"]


def snapshot(project: Project) -> Snapshot:
    """One look, for the one-shot form."""
    return Watcher(project).snapshot()


# ------------------------------------------------------------------ the words

SHOW_WAITING = 8  # the waiting tasks the lines name (the count says how many in all)
HEADER = f"{'lane':<10} {'task':<24} {'tool':<16} {'worker':<11} {'elapsed':>8} {'quiet':>7} {'cost':>9}"


def lines(snap: Snapshot) -> list[str]:
    """The snapshot as the lines a person reads (the same in the live view and the
    one-shot form)."""
    out = [f"wf top  {time.strftime('%H:%M:%S', time.localtime(snap.at))}"]
    b = snap.batch
    if b is not None:
        n = f"{b.posted}/{b.n}" if b.n is not None else str(b.posted)
        when = fmt_duration(b.elapsed_s) + (f" of {fmt_duration(b.for_s)}" if b.for_s else "")
        ended = "" if b.alive else f" ({b.state}{': ' + b.reason if b.reason else ''})"
        out.append(f"batch {b.stamp}: {n} tasks posted, {b.done} done, {when}{ended}")
    else:
        out.append("no batch yet")
    out.append(f"needs a person: {len(snap.needs_person)}")
    out += [f"  {w['id']} {w['kind']}: {w.get('text') or '-'}" for w in snap.needs_person[:SHOW_WAITING]]
    if len(snap.needs_person) > SHOW_WAITING:
        out.append(f"  ... and {len(snap.needs_person) - SHOW_WAITING} more (wf top --json lists them all)")
    for p in snap.problems:
        out.append(f"! {p}")
    if not snap.lanes:
        out.append("no active lanes")
    else:
        out.append(HEADER)
    for lane in snap.lanes:
        if lane.corrupt:
            out.append(f"{lane.lane:<10} record cannot be trusted: {lane.corrupt}")
            continue
        tool = f"{lane.adapter or '-'} {lane.model or ''}".strip()
        cost = f"${lane.cost_usd:.4f}" if lane.cost_usd is not None else "?"
        row = (
            f"{lane.lane:<10} {lane.task or '-':<24} {tool:<16} {lane.worker:<11} "
            f"{fmt_duration(lane.elapsed_s):>8} {fmt_duration(lane.quiet_s):>7} {cost:>9}"
        )
        out.append(row + (f"  {lane.parked}" if lane.parked else ""))
    return out


def cpu_seconds() -> float:
    """This process's own CPU so far (for the bench and --debug)."""
    t = os.times()
    return t.user + t.system
