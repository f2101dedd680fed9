"""The orchestration part of ``wf doctor``: lane records that cannot be trusted or
whose worker is gone, and worker claims no lane record holds. It lives with the loop
(doctor's other checks are below it and never import it); the CLI joins the two."""

from __future__ import annotations

from wf import backlog as backlogmod
from wf import procs
from wf import records as recstore
from wf.doctor import Finding
from wf.orch import state as orchstate
from wf.project import Project


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
            out.append(Finding("orch", f.stem, f"record cannot be trusted: {why}", "problem", fixed))
            continue
        if lrec is None:
            continue
        held_ids.add(lrec.id)
        if lrec.pid and not procs.alive(lrec.pid) and not (lrec.owner and procs.alive(lrec.owner)):
            out.append(
                Finding(
                    "orch",
                    f.stem,
                    f"worker pid {lrec.pid} is gone (wf orch run takes it over; or wf orch pick --recovery)",
                    "problem",
                )
            )
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
