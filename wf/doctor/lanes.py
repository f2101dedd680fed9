"""The orchestration part of ``wf doctor``: lane records that cannot be trusted or
whose worker is gone, and worker claims no lane record holds. It lives with the loop
(doctor's other checks are below it and never import it); the CLI joins the two."""

from __future__ import annotations

from wf.base import records as recstore
from wf.base.project import Project
from wf.doctor.checks import Finding
from wf.orch import state as orchstate
from wf.tasks import backlog as backlogmod


def findings(project: Project, *, fix: bool = False) -> list[Finding]:
    out: list[Finding] = []
    bl = backlogmod.load(project)
    held_ids = set()
    for f in orchstate.record_files(project):
        try:
            lrec = recstore.load(orchstate.LaneRecord, f)
        except recstore.CorruptRecord as e:
            fixed = False
            why = e.why
            if fix:
                dest = recstore.move_aside(f)
                fixed = True
                why += f"; moved to {dest.name}"
            out.append(Finding("orch", f.stem, f"record cannot be trusted: {why} ({f})", "problem", fixed))
            continue
        if lrec is None:
            continue
        held_ids.add(lrec.id)
        if lrec.pid and not lrec.worker_alive() and not (lrec.owner and lrec.owner_alive()):
            out.append(
                Finding(
                    "orch",
                    f.stem,
                    f"worker pid {lrec.pid} is gone (wf orch run takes it over; or wf orch pick --recovery)",
                    "problem",
                )
            )
    from wf.orch import gate

    # (kind, what it is, the bad records, a companion file that goes aside with each)
    for kind, what, bad_records, companion in (
        ("held", "hold record (the loop may pick the task again)", orchstate.corrupt_held(project), None),
        # a gate whose .log has no result looks still running: its .log goes too
        ("gate", "gate result (no fix task will come of it)", gate.corrupt_results(project), ".log"),
    ):
        for bad in bad_records:
            why = bad.why
            if fix:
                why += f"; moved to {recstore.move_aside(bad.path).name}"
                if companion is not None and bad.path.with_suffix(companion).exists():
                    recstore.move_aside(bad.path.with_suffix(companion))
            out.append(
                Finding(kind, bad.path.stem, f"{what} cannot be trusted: {why} ({bad.path})", "problem", fix)
            )
    from wf.cloud import records as cloudrecs

    for f in sorted(cloudrecs.folder(project).glob("*.json")) if cloudrecs.folder(project).is_dir() else []:
        try:
            cloudrecs.load_file(f)
        except recstore.CorruptRecord as e:
            why = e.why + (f"; moved to {recstore.move_aside(f).name}" if fix else "")
            out.append(
                Finding("cloud", f.stem, f"cloud record cannot be trusted: {why} ({f})", "problem", fix)
            )
    out += stranded_claims(project, fix=fix)
    out += _night_findings(project, fix=fix)
    for t in bl.doc.tasks:
        st = t.status
        if st.state == "progress" and st.who == "worker" and t.id not in held_ids:
            out.append(
                Finding(
                    "claim",
                    t.id,
                    "claimed by a worker but no lane record holds it; if no worker lives, "
                    f"wf status {t.id} pending",
                    "problem",
                )
            )
    return out


def stranded_claims(project: Project, *, fix: bool) -> list[Finding]:
    """Lane records of picks that ended before their tree was ready (killed half-way)
    with nobody left to finish them: their task stays claimed, and ``wf orch run`` leaves
    such a record alone as an interactive orchestrator's. ``--fix`` releases the claim
    under the project lock, after looking again: the task's status goes back to what it
    was before the pick and the record is dropped."""
    from wf.base.errors import WfError
    from wf.base.lock import project_lock
    from wf.orch.pick import live_holder
    from wf.orch.post import release

    def stranded(lane: str) -> orchstate.LaneRecord | None:
        try:
            rec = orchstate.load(project, lane)
        except WfError:
            return None  # a record that cannot be trusted is the check above's finding
        if rec is None or rec.state is not orchstate.RecordState.PICKING or live_holder(rec):
            return None
        return rec

    out = []
    for path in orchstate.record_files(project):
        rec = stranded(path.stem)
        if rec is None:
            continue
        was = rec.prior_status or "pending"
        msg = f"{rec.id} is claimed by a pick (pid {rec.picker}) that ended before its tree was ready"
        fixed = False
        if fix:
            with project_lock(project.wf_dir, project.lock_timeout, None):
                if stranded(rec.lane) is not None:
                    release(project, rec.lane, "a stranded pick, released by wf doctor --fix")
                    fixed = True
        msg += f": released, {rec.id} is {was} again" if fixed else f" (--fix releases it: {was} again)"
        out.append(Finding("claim", rec.lane, msg, "problem", fixed))
    return out


def _night_findings(project: Project, *, fix: bool) -> list[Finding]:
    """Batch records of this project, and the res jobs, history and reservations of this
    user: each one that cannot be trusted, moved aside with ``fix``."""
    from wf.doctor.checks import corrupt_of, state_finding
    from wf.night import batchplan, resjobs

    out: list[Finding] = []
    for bad in recstore.corrupt_in(batchplan.Record, batchplan.record_files(project)):
        out += state_finding("batch", "batch record (wf batch --status would misreport)", bad, fix=fix)
    for f in resjobs.record_files():
        out += state_finding(
            "res",
            "res job record (a running job would be missed)",
            corrupt_of(lambda f=f: resjobs.load_file(f)),
            fix=fix,
        )
    out += state_finding("res", "res history (the limits it suggests)", corrupt_of(resjobs.history), fix=fix)
    out += state_finding(
        "res",
        "res reservations (read as none, memory would be promised twice; moved aside, the "
        "jobs that run now are not counted until they end)",
        corrupt_of(resjobs.reserved),
        fix=fix,
    )
    return out
