"""A batch seen from outside: ``wf batch --status`` (the newest batch, its summary's
tail, the lanes, what needs a person, the gate, its memory, its cloud tail) and ``wf
batch --stop`` (the stop file); and the batches whose job died (killed, a reboot),
finished by whoever finds them first."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from wf.base.errors import WfError
from wf.base.fsutil import atomic_write_text
from wf.base.project import Project
from wf.night import res
from wf.night.batchlog import Follower
from wf.night.batchplan import End, Record, newest, records, save, stop_file
from wf.night.morning import page_path
from wf.workers import procs


def finish_dead(project: Project, found_by: str) -> list[Record]:
    """Batches whose record says running but whose job is gone (killed, a reboot): their
    res job is finalised (lost) and their summary gets the footer it never wrote."""
    res.sweep()
    done = []
    for rec in records(project):
        if rec.state != "running" or rec.alive:
            continue
        job = res.load(rec.job) if rec.job else None
        state = job.state.value if job else "lost"
        reason = state if state in (End.OOM, End.TIMEOUT, End.KILLED) else End.LOST.value
        rec = replace(
            rec,
            state="ended",
            ended=res.now_iso(),
            job_state=state,
            exit=job.exit if job else None,
            reason=reason,
        )
        Follower(project, rec).footer(reason, note=f"the batch job vanished; found by {found_by}")
        save(project, rec)
        done.append(rec)
    return done


def live(project: Project) -> Record | None:
    for rec in reversed(records(project)):
        if rec.alive:
            return rec
    return None


def describe(rec: Record) -> str:
    return f"job {rec.job or '?'}, pid {rec.pid}, started {rec.started}, summary {rec.summary}"


def status(project: Project) -> dict[str, Any]:
    finish_dead(project, "wf batch --status")
    rec = newest(project)
    if rec is None:
        return {"alive": False, "job": None}
    from wf.night.batchlog import needs_person

    summary = project.root / rec.summary
    try:
        tail = summary.read_text("utf-8").splitlines()[-12:]
    except OSError:
        tail = []
    from wf.orch import state

    return {
        "stamp": rec.stamp,
        "job": rec.job,
        "alive": rec.alive,
        "pid": rec.pid,
        "state": rec.job_state or rec.state,
        "exit": rec.exit,
        "reason": rec.reason,
        "started": rec.started,
        "ended": rec.ended,
        "summary": str(summary),
        "page": str(page_path(project, rec.summary)),  # the morning page (wf.night.morning)
        "tail": tail,
        "lanes": state.status(project),
        "needs_person": needs_person(project, rec),
        "gate": _gate(project),
        "usage": _usage(rec),
        "cloud_tail": cloud_tail(project),
    }


def page(project: Project) -> str:
    """The newest batch's morning page (``wf batch --status --open``), written afresh from
    its rows, events and what waits now (a batch made by an older wf gets one too): its path."""
    finish_dead(project, "wf batch --status --open")
    rec = newest(project)
    if rec is None:
        raise WfError("no batch has run here (wf batch N starts one)")
    Follower(project, rec).page(ended=rec.reason if rec.state == "ended" else None)
    path = page_path(project, rec.summary)
    if not path.is_file():
        raise WfError(f"the morning page of batch {rec.stamp} could not be written (its summary says why)")
    return str(path)


def cloud_tail(project: Project) -> dict[str, Any] | None:
    """The cloud tail of the newest batch that left one: its res job, whether it still
    pulls, and the cloud sessions left; None if no batch left one."""
    rec = next((r for r in reversed(records(project)) if r.tail_job), None)
    if rec is None or rec.tail_job is None:
        return None
    from wf.cloud import records as cloud_records

    try:
        job = res.load(rec.tail_job)
    except WfError:
        job = None
    alive = job is not None and job.state is res.State.RUNNING and procs.alive_as(job.pid, job.pid_start)
    return {
        "batch": rec.stamp,
        "job": rec.tail_job,
        "alive": alive,
        "state": job.state.value if job else None,
        "pid": job.pid if job else None,
        "started": job.start if job else None,
        "ended": job.end if job else None,
        "limits": job.limits.as_dict() if job else None,
        "sessions": [r.id for r in cloud_records.all_records(project)],
    }


def _gate(project: Project) -> dict[str, Any] | None:
    """The newest gate result (None: none yet), and for a red one the lines that say it."""
    from wf.orch import gate

    last = gate.latest(project)
    if last is None:
        return None
    red = gate.red_lines(project, last) if last.ok is False else []
    return {"sha": last.sha, "cmd": last.cmd, "ok": last.ok, "exit": last.exit, "red": red}


def _usage(rec: Record) -> dict[str, Any] | None:
    """The res job's peak memory, CPU and limits (as last written: every few seconds)."""
    try:
        job = res.load(rec.job) if rec.job else None
    except WfError:
        return None
    if job is None:
        return None
    return {"peak_rss": job.peak_rss, "cpu_s": job.cpu_s, "limits": job.limits.as_dict()}


def stop(project: Project) -> list[str]:
    """Write the stop file: running tasks finish, nothing new starts."""
    path = stop_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, f"stop requested {res.now_iso()}\n")
    from wf.orch import state

    rec = live(project)
    lines = [f"wrote {path.relative_to(project.root)}: running tasks finish, nothing new starts"]
    if rec is None:
        lines.append(
            "no batch is running: the stop file stops wf orch pick and wf orch run, and the next "
            f"wf batch refuses to start until you remove {path.relative_to(project.root)}"
        )
    else:
        lines.append(f"batch {rec.stamp} ({describe(rec)}) ends when its running tasks end")
    tail = cloud_tail(project)
    if tail is not None and tail["alive"]:
        lines.append(
            f"the cloud tail of batch {tail['batch']} (job {tail['job']}) stops at its next pull; "
            f"end it now: wf res stop {tail['job']}"
        )
    for r in state.status(project):
        lines.append(f"still running: {r['lane']}: {r['id']}")
    return lines
