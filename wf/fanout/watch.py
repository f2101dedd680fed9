"""Readers of a run: lost units, ``wf monitor`` and ``wf gather``.

Every reader first finds units whose supervisor (the ``wf run`` or ``wf dispatch`` that
watched them) is gone: it ends the unit's whole tree by the unit's token, salvages a
FALLBACK answer from its log and marks it ``lost`` (a final state). Exit codes follow
the conventions: 0 all done, 4 a unit needs attention, 5 gave up waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from wf.base import pids
from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout import ledger
from wf.workers import procs, runs
from wf.workers.answer import salvage

DEFAULT_TIMEOUT = 600.0
OK, ATTENTION, GAVE_UP = 0, 4, 5


def _orphaned(st: dict[str, Any]) -> bool:
    """A unit that says it runs, but whose supervisor is gone (or its pid now names
    another process)."""
    return st.get("state") in runs.LIVE and _supervisor_gone(st)


def _supervisor_gone(st: dict[str, Any]) -> bool:
    sup = st.get("supervisor")
    if not procs.alive(sup):
        return True
    started = st.get("supervisor_start")
    return started is not None and pids.start_ticks(sup) != started


def repair_lost(project: Project, run: str) -> list[str]:
    """Mark the units of ``run`` whose supervisor is gone as ``lost`` (after ending their
    trees and salvaging an answer); returns their ids."""
    marked = []
    for st in runs.units(project, run):
        if st.get("strays") and _supervisor_gone(st):
            end_strays(runs.unit_dir(project, run, str(st.get("unit"))))
        if not _orphaned(st):
            continue
        folder = runs.unit_dir(project, run, str(st.get("unit")))
        try:
            fresh = runs.read_status(folder)  # its supervisor may have finished it meanwhile
        except runs.CorruptStatus:
            continue  # the next runs.units() shows it as corrupt; nothing in it is acted on
        if fresh is None or not _orphaned(fresh):
            continue
        token = fresh.get("token")
        # by the token only, never by the recorded pid: that worker may be long gone and
        # its pid reused by a process that is none of wf's business
        killed = procs.kill_tree(None, str(token), grace=1.0) if token else []
        fresh.update(
            state="lost",
            ended=runs.now_iso(),
            error=(
                f"its supervisor (wf, pid {fresh.get('supervisor')}) is gone"
                + (f"; {len(killed)} process(es) of the unit were ended" if killed else "")
                + ("" if fresh.get("started") else "; it never started")
            ),
            leftovers_killed=len(killed),
        )
        salvage(folder, fresh, [], None)
        runs.write_status(folder, fresh, durable=True)
        marked.append(str(fresh.get("unit")))
    return marked


def end_strays(folder: Path) -> None:
    """End the processes a unit's supervisor adopted while the unit ran (detached, maybe
    environment-cleared descendants), once that supervisor is gone: nobody else would."""
    try:
        st = runs.read_status(folder)
    except runs.CorruptStatus:
        return
    strays = st.get("strays") if st else None
    if not st or not isinstance(strays, list) or not _supervisor_gone(st):
        return
    pairs = [
        [int(x[0]), float(x[1])]
        for x in strays
        if isinstance(x, list) and len(x) == 2 and all(isinstance(v, (int, float)) for v in x)
    ]
    ended = procs.end_strays(pairs)
    st.update(strays=[], strays_ended=len(ended) + int(st.get("strays_ended") or 0))
    runs.write_status(folder, st, durable=True)


def superseded(found: list[dict[str, Any]]) -> set[str]:
    """Attempts that a later attempt of the same unit (a retry) replaced."""
    from wf.fanout.retry import families

    return {str(st["unit"]) for attempts in families(found).values() for st in attempts[:-1]}


def statuses(project: Project, run: str, only: list[str] | None = None) -> list[dict[str, Any]]:
    """The units named, else every unit of the run but the attempts retries replaced;
    each with the check of its answer (``ledger.annotate``)."""
    found = runs.units(project, run)
    if only is None:
        old = superseded(found)
        return ledger.annotate(project, run, [st for st in found if str(st.get("unit")) not in old])
    by_id = {str(st.get("unit")): st for st in found}
    missing = [u for u in only if u not in by_id]
    if missing:
        raise WfError(f"no unit {', '.join(missing)} in run {run}")
    return ledger.annotate(project, run, [by_id[u] for u in only])


class Watch(NamedTuple):
    code: int  # OK, ATTENTION or GAVE_UP
    watched: list[str]
    units: list[dict[str, Any]]  # the watched units' status.json, as last read, annotated
    lost: list[str]  # units this reader marked lost
    attention: list[ledger.Entry] = []  # noqa: RUF012 - never mutated; the units needing a person


def _needing(project: Project, run: str, found: list[dict[str, Any]], whole: bool) -> list[ledger.Entry]:
    """The ledger's list for what a reader watched; for the whole run, with the
    manifest's units that never started."""
    never = ledger.never_started(project, run, runs.units(project, run)) if whole else []
    return ledger.entries(found, never)


def every_unit(project: Project, run: str) -> list[str]:
    """The units a monitor of the whole run watches, for its start line: those that
    exist (but the attempts retries replaced) and, while the ``wf run`` of the run's
    manifest is still queueing them, the requests of that manifest with no status yet.

    That run is under way while a unit it asked for is live (repair_lost ran: a live
    unit has a supervisor). A retry's or a dispatch's unit is not in the manifest, so
    a request an earlier run never queued is not promised for them."""
    from wf.fanout.manifest import saved_requests

    found = runs.units(project, run)
    made = {str(st.get("unit")) for st in found}
    live = {str(st.get("unit")) for st in found if st.get("state") in runs.LIVE}
    asked = {r.id for r in saved_requests(project, run)}
    names = made - superseded(found)
    return sorted(names | (asked - made) if live & asked else names)


def watch_set(project: Project, run: str, units: list[str] | None, running: bool) -> list[str] | None:
    """What a monitor watches: the units named, else (with ``running``) those still
    running or queued now, else None: every unit of the run, as they appear."""
    repair_lost(project, run)
    found = statuses(project, run, units or None)
    if units:
        return [str(st["unit"]) for st in found]
    if running:
        return [str(st["unit"]) for st in found if st.get("state") in runs.LIVE]
    return None


def wait_for_run(project: Project, run: str, timeout: float | None, interval: float = 0.2) -> bool:
    """Wait (up to ``timeout``) for the folder of ``run`` to appear: a monitor started
    just after ``wf run`` must not fail before that run has made it. Whether it exists;
    a bad run id is an error at once."""
    folder = runs.run_dir(project, run)
    start = time.monotonic()
    while not folder.is_dir():
        if timeout is not None and time.monotonic() - start >= timeout:
            return False
        time.sleep(interval)
    return True


def wait_for_start(
    project: Project, run: str, timeout: float, on_wait: Callable[[], None] | None = None
) -> float | None:
    """Wait for ``run`` to start (calling ``on_wait`` first, if it has not): the seconds
    of ``timeout`` left for what follows (one timeout for both waits), None if it never did."""
    began = time.monotonic()
    if not runs.run_dir(project, run).is_dir():
        if on_wait is not None:
            on_wait()
        if not wait_for_run(project, run, timeout):
            return None
    return max(0.0, timeout - (time.monotonic() - began))


def monitor(
    project: Project,
    run: str,
    watched: list[str] | None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    interval: float = 1.0,
    on_tick: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Watch:
    """Wait for the first thing among ``watched`` (None: every unit of the run, waiting
    for the first to appear) that needs attention (4), or for all of them to end well
    (0), or for ``timeout`` (5)."""
    start = time.monotonic()
    lost: list[str] = []
    while True:
        lost += repair_lost(project, run)
        found = statuses(project, run, watched) if watched != [] else []
        names = [str(st.get("unit")) for st in found]
        if any(st.get("state") in runs.ATTENTION or ledger.invalid(st) for st in found):
            return Watch(ATTENTION, names, found, lost, _needing(project, run, found, False))
        if (found or watched == []) and all(st.get("state") in runs.FINAL for st in found):
            return Watch(OK, names, found, lost)
        if timeout is not None and time.monotonic() - start >= timeout:
            return Watch(GAVE_UP, names, found, lost)
        if on_tick:
            on_tick(found)
        time.sleep(interval)


def _signature(folder: Path, st: dict[str, Any]) -> tuple[Any, ...]:
    sizes: list[tuple[int, int] | None] = []
    for name in ("output.txt", "status.json", "worker.log"):
        try:
            s = (folder / name).stat()
            sizes.append((s.st_size, s.st_mtime_ns))
        except OSError:
            sizes.append(None)
    return (st.get("state"), *sizes)


def gather(
    project: Project,
    run: str,
    watched: list[str] | None = None,
    *,
    quiet: float = 2.0,
    timeout: float | None = DEFAULT_TIMEOUT,
    interval: float = 0.5,
    on_landed: Callable[[dict[str, Any]], None] | None = None,
    on_tick: Callable[[list[dict[str, Any]]], None] | None = None,
) -> Watch:
    """Wait until every unit has ended (``lost`` counts) and its files stayed unchanged
    for ``quiet`` seconds, calling ``on_landed`` as each one lands; 0 if all are done
    with answers that keep the contract, 4 if any is not (the ledger's list says which,
    with the manifest's units that never started when the whole run is gathered), 5 on
    ``timeout``. An attempt a retry replaced is left out."""
    start = time.monotonic()
    sigs: dict[str, tuple[Any, ...]] = {}
    since: dict[str, float] = {}
    landed: set[str] = set()
    lost: list[str] = []
    while True:
        lost += repair_lost(project, run)
        found = statuses(project, run, watched)
        names = [str(st.get("unit")) for st in found]
        now = time.monotonic()
        for st in found:
            name = str(st.get("unit"))
            sig = _signature(runs.unit_dir(project, run, name), st)
            if sigs.get(name) != sig:
                sigs[name], since[name] = sig, now
            if name not in landed and st.get("state") in runs.FINAL and now - since[name] >= quiet:
                landed.add(name)
                if on_landed:
                    on_landed(st)
        if found and all(n in landed for n in names):
            needing = _needing(project, run, found, watched is None)
            return Watch(ATTENTION if needing else OK, names, found, lost, needing)
        if timeout is not None and now - start >= timeout:
            return Watch(GAVE_UP, names, found, lost)
        if on_tick:
            on_tick(found)
        time.sleep(interval)
