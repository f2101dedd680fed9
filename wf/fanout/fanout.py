"""Fan-out: ``wf dispatch`` (one unit in the foreground), ``wf run`` (a manifest's units
in parallel) and ``wf runs retry``; what happens when each unit ends (the changes it
left in a checkout it did not own, its cost line in ``out/wf-cost.log``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout import retry as retrymod
from wf.fanout.manifest import default_run_id, load_manifest, requests_from, save_requests
from wf.fanout.prompts import answer_of
from wf.fanout.units import UnitRequest, build_unit, left_changes
from wf.fanout.watch import repair_lost
from wf.tasks.taskfile import check_id
from wf.workers import runs
from wf.workers.supervise import Unit, supervise


class Outcome(NamedTuple):
    run: str
    units: list[Unit]  # what ran now
    skipped: list[retrymod.Skip]  # what did not, and why
    completed: bool  # False: interrupted (Ctrl-C, SIGTERM)

    @property
    def code(self) -> int:
        """The exit code: 130 interrupted; 4 when a unit that ran is not done, or one was
        left undone (given up, corrupt, running elsewhere: a person must look); else 0.
        Whether a done unit's answer keeps the return contract is the ledger's
        (``wf gather``, ``wf monitor``): it is shown here, never part of this code."""
        if not self.completed:
            return 130
        if any(u.state != "done" for u in self.units) or any(not s.done for s in self.skipped):
            return 4
        return 0

    def as_json(self) -> dict[str, Any]:
        """What ``wf run --json`` and ``wf runs retry --json`` print."""
        from wf.fanout import ledger

        return {
            "run": self.run,
            "code": self.code,
            "completed": self.completed,
            "units": [{**u.status, "verdict": ledger.word(u.status)} for u in self.units],
            "skipped": [s._asdict() for s in self.skipped],
        }


def cost_record(project: Project, st: dict[str, Any]) -> dict[str, Any] | None:
    """The cost line of a fan-out unit (kind run, with its run and unit ids)."""
    cost = st.get("cost")
    if not isinstance(cost, dict):
        return None
    rec = {**cost, "kind": "run", "project": project.root.name, "run": st.get("run"), "unit": st.get("unit")}
    if st.get("lane"):
        rec["lane"] = st["lane"]
    check = st.get("cost_check")
    if check:
        rec["check"] = "agrees" if check == "agrees" else "differs"
    reported = (st.get("usage") or {}).get("usd_rep")
    if isinstance(reported, (int, float)):
        rec["tool_usd"] = round(float(reported), 4)
    return rec


def finalize(u: Unit) -> None:
    """Before a unit's final status.json is written (durably, once): check its answer
    (durable by then) against the return contract, note what it changed in a checkout
    it did not own."""
    from wf.fanout import ledger

    st = u.status
    if ledger.required(st) is not None:
        ledger.record(u.folder, st)
    if st.get("checkout_before") is not None:
        st["left_changes"] = left_changes(st) or []
        st.pop("checkout_before")


def ended(project: Project, u: Unit) -> None:
    """After a unit ends (its final status.json written, ``finalize``'s fields in it):
    log its cost."""
    from wf.cost import costlog

    rec = cost_record(project, u.status)
    if rec is not None:
        costlog.append(project.root, rec)


def build_all(project: Project, run: str, reqs: list[UnitRequest]) -> list[Unit]:
    """Every request made a Unit, or none: when one is refused, the folders the ones
    before it made (this call made them; nothing is in them yet) are removed, so a run
    is never left with unit folders that no status.json names."""
    import shutil

    built: list[Unit] = []
    try:
        for r in reqs:
            built.append(build_unit(project, run, r))
    except BaseException:
        for u in built:
            shutil.rmtree(u.folder, ignore_errors=True)
        raise
    return built


def _run(
    project: Project,
    units: list[Unit],
    max_parallel: int,
    on_end: Callable[[Unit], None] | None,
    on_tick: Callable[[list[Unit]], None] | None,
) -> bool:
    for u in units:
        u.finalize = finalize

    def end(u: Unit) -> None:
        ended(project, u)
        if on_end:
            on_end(u)

    return supervise(units, max_parallel, on_end=end, on_tick=(lambda: on_tick(units)) if on_tick else None)


def dispatch(
    project: Project,
    run: str,
    req: UnitRequest,
    on_end: Callable[[Unit], None] | None = None,
    on_tick: Callable[[list[Unit]], None] | None = None,
) -> Outcome:
    unit = build_unit(project, run, req)
    completed = _run(project, [unit], 1, on_end, on_tick)
    return Outcome(run, [unit], [], completed)


def run_manifest(
    project: Project,
    path: Path,
    *,
    run: str | None = None,
    max_parallel: int | None = None,
    max_retries: int = retrymod.DEFAULT_MAX_RETRIES,
    contract: bool = True,
    given: dict[str, Any] | None = None,
    on_end: Callable[[Unit], None] | None = None,
    on_tick: Callable[[list[Unit]], None] | None = None,
) -> Outcome:
    """Run a manifest's units; on a run that exists, skip what is done and retry what
    did not land (as new attempts, within ``max_retries``). ``given``: manifest keys from
    the command line, defaults for every unit (see ``manifest.requests_from``).
    ``contract`` False: every unit without the return contract, whatever the manifest says."""
    defaults, entries = load_manifest(path)
    run = check_id(run or default_run_id(path), "run id")
    listed = {str(e.get("id")) for e in entries if isinstance(e, dict)}
    reqs = requests_from(path, defaults, entries, lambda u: answer_of(project, str(run), u, listed), given)
    return run_requests(
        project,
        reqs,
        run=run,
        max_parallel=max_parallel or int(defaults.get("max_parallel") or 4),
        max_retries=max_retries,
        contract=contract,
        on_end=on_end,
        on_tick=on_tick,
    )


def run_requests(
    project: Project,
    reqs: list[UnitRequest],
    *,
    run: str,
    max_parallel: int,
    max_retries: int = retrymod.DEFAULT_MAX_RETRIES,
    contract: bool = True,
    on_end: Callable[[Unit], None] | None = None,
    on_tick: Callable[[list[Unit]], None] | None = None,
) -> Outcome:
    """Run these requests (a manifest's, a panel's) as the units of ``run``, as
    :func:`run_manifest` does (``contract`` False: all of them without the contract)."""
    check_id(run, "run id")
    if not contract:
        reqs = [r._replace(contract=False, sections=()) for r in reqs]
    ids = {r.id for r in reqs}
    for r in reqs:
        if r.resume_from and r.resume_from in ids:
            raise WfError(
                f"unit {r.id}: resume_from a unit of the same manifest is not supported; run it after"
            )
    skipped: list[retrymod.Skip] = []
    if runs.run_dir(project, run).is_dir():
        repair_lost(project, run)
        todo, skipped = retrymod.plan_manifest(project, run, reqs, max_retries)
    else:
        todo = reqs
    units = build_all(project, run, todo)
    save_requests(project, run, reqs)
    completed = _run(project, units, max_parallel, on_end, on_tick)
    return Outcome(run, units, skipped, completed)


def retry(
    project: Project,
    run: str,
    units: list[str],
    *,
    failed: bool = False,
    missing: bool = False,
    invalid: bool = False,
    resume: bool = False,
    max_retries: int = retrymod.DEFAULT_MAX_RETRIES,
    max_parallel: int = 4,
    on_end: Callable[[Unit], None] | None = None,
    on_tick: Callable[[list[Unit]], None] | None = None,
) -> Outcome:
    check_id(run, "run id")
    runs.units(project, run)  # the run must exist
    repair_lost(project, run)
    todo, skipped = retrymod.plan_retry(
        project,
        run,
        units,
        failed=failed,
        missing=missing,
        invalid=invalid,
        resume=resume,
        max_retries=max_retries,
    )
    built = build_all(project, run, todo)
    completed = _run(project, built, max_parallel, on_end, on_tick) if built else True
    return Outcome(run, built, skipped, completed)
