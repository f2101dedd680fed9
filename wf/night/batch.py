"""``wf batch N``: the nightly run, detached, under ``wf res`` limits.

``start`` plans the batch (lanes, limits and where they came from, the command), then
detaches a job (double fork, ``setsid``; stdin from /dev/null, output to
``out/wf-batch-<stamp>.log``) and returns once the job said it runs or why it refused.
The job (``job_main``) holds ``.wf/batch.lock`` for its whole life (one batch per
project: the kernel frees the lock however the job dies), finishes the record of a
batch that died before it, and runs ``wf orch run LANES --max-tasks N --for F`` under
``wf res`` (title ``wf-batch``). About once a second it turns the new lines of
``out/wf-orch.log`` and the loop's stop events (``.wf/batch/<stamp>.events.jsonl``)
into the summary ``out/wf-batch-<stamp>.md``, so a batch that dies still leaves what it
did. The batch record is ``.wf/batch/<stamp>.json``. ``--status`` and ``--stop`` are
``wf.night.batchstatus``.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base import stamps
from wf.base.errors import LockTimeout, WfError
from wf.base.fsutil import append_line, atomic_write_text, tail_text
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.base.quantity import fmt_duration
from wf.night import res
from wf.night.batchlog import Follower, summary_header
from wf.night.batchplan import (
    TAIL,
    TAIL_LINGER,
    TAIL_MEM,
    TAIL_TITLE,
    End,
    Plan,
    Record,
    prompt_text,
    save,
    stop_file,
)
from wf.night.batchplan import folder as _dir
from wf.night.batchstatus import describe, finish_dead, live
from wf.night.batchstatus import status as status
from wf.night.batchstatus import stop as stop
from wf.workers import procs

# ------------------------------------------------------------------ starting (the caller's side)


@dataclass(frozen=True)
class Started:
    stamp: str
    job: str
    pid: int
    summary: str
    plan: Plan
    waiting: str = ""  # what it waits for before it starts (room for its memory)


def start(project: Project, p: Plan) -> Started:
    """Detach the batch job and return once it runs (or raise why it refused)."""
    finish_dead(project, "wf batch")
    other = live(project)
    if other is not None:
        raise WfError(f"a batch is running already: {describe(other)} (wf batch --status; wf batch --stop)")
    if stop_file(project).exists():
        raise WfError(f"{stop_file(project).relative_to(project.root)} exists: remove it to start a batch")
    if not p.lanes:
        from wf.night.batchplan import lane_work

        held = "".join(f"; lane {lane} {why}" for lane, why in lane_work(project).waiting.items())
        raise WfError(
            f"no lane has runner-ready work that a batch may take{held} (wf list --runner; wf batch K --prep)"
        )
    from wf.trees import worktrees

    worktrees.preflight(project)  # main a branch, a git identity: before the batch writes anything
    stamp, log = _new_stamp(project)
    _dir(project).mkdir(parents=True, exist_ok=True)
    store.write_json(_dir(project) / f"{stamp}.plan.json", p.as_dict(), indent=None)
    answer = _detach(project, "batch-job", stamp, log)
    word, _, rest = answer.strip().partition(" ")
    if word == "ok":
        job, job_pid, *waiting = rest.split(" ", 2)
        return Started(stamp, job, int(job_pid or 0), f"out/wf-batch-{stamp}.md", p, " ".join(waiting))
    if word == "refused":
        raise WfError(rest)
    raise WfError(f"the batch job did not start (its output: {log.relative_to(project.root)})")


def _detach(project: Project, command: str, stamp: str, log: Path) -> str:
    """Start ``wf COMMAND STAMP`` detached (double fork, ``setsid``; stdin /dev/null,
    output appended to ``log``) and return what it said on its ready pipe."""
    r, w = os.pipe()
    argv = [sys.executable, "-m", "wf", "-C", str(project.root), command, stamp, "--ready-fd", str(w)]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        try:
            os.close(r)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.set_inheritable(w, True)
            os.chdir(project.root)
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)
    os.close(w)
    os.waitpid(pid, 0)
    return _read_all(r, timeout=60.0)


def _new_stamp(project: Project) -> tuple[str, Path]:
    """A UTC stamp no other batch has: its log file is created exclusively (two batches
    started in the same second get different stamps, and only one of them runs)."""
    project.out_dir.mkdir(parents=True, exist_ok=True)
    while True:
        stamp = stamps.compact_now()
        log = project.out_dir / f"wf-batch-{stamp}.log"
        try:
            os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return stamp, log
        except FileExistsError:
            time.sleep(0.25)


def _read_all(fd: int, timeout: float) -> str:
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            data = os.read(fd, 4096)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


# ------------------------------------------------------------------ the job (detached)


class _Ready:
    """Tells the command that started a detached job, once, how its start went: one line
    on the pipe it waits on (None: nobody waits)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def __call__(self, text: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, text.encode() + b"\n")
            os.close(self.fd)
        except OSError:
            pass
        self.fd = None


def job_main(project: Project, stamp: str, ready_fd: int | None) -> int:
    """The detached batch: lock, record, run the loop under res limits, follow, footer."""

    say = _Ready(ready_fd)

    plan_file = _dir(project) / f"{stamp}.plan.json"
    try:
        p = Plan.from_dict(json.loads(plan_file.read_text("utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as e:
        say(f"refused the batch plan {plan_file} cannot be read: {e}")
        return 1
    try:
        with project_lock(project.wf_dir, timeout=0, name="batch.lock"):
            plan_file.unlink()
            return _run_locked(project, stamp, p, say)
    except LockTimeout:
        other = live(project)
        plan_file.unlink(missing_ok=True)
        say(
            "refused a batch is running already: " + (describe(other) if other else "it holds .wf/batch.lock")
        )
        return 1


def _run_locked(project: Project, stamp: str, p: Plan, say: Any) -> int:
    finish_dead(project, f"batch {stamp}")
    job_id = res.new_id()
    rec = Record(
        stamp=stamp,
        started=res.now_iso(),
        summary=f"out/wf-batch-{stamp}.md",
        log=f"out/wf-batch-{stamp}.log",
        plan=p.as_dict(),
        pid=os.getpid(),
        pid_start=procs.started(os.getpid()),
        job=job_id,
    )
    follower = Follower(project, rec)
    follower.begin()
    rec = replace(rec, offsets=follower.offsets, known_ids=follower.known_ids)
    save(project, rec)
    summary_header(project, rec, p)
    said = False

    def on_start(job: res.Job) -> None:
        nonlocal said
        say(f"ok {job.id} {os.getpid()}")
        said = True

    def on_sample(job: res.Job) -> None:
        follower.poll()

    def on_wait(line: str) -> None:  # its memory does not fit yet: it waits, and says so
        nonlocal said
        append_line(project.root / rec.summary, f"- note: {line}")
        say(f"ok {job_id} {os.getpid()} {line}")
        said = True

    stdin, env, argv = _job_input(project, stamp, p, rec)
    prepared = None
    cloud = _CloudSidecar(project, rec, p) if project.config.cloud and p.kind != "prep" else None
    if cloud is not None and cloud.batch is not None:
        env = dict(env or os.environ, WF_BATCH=stamp)  # its loop counts the cloud's sends toward N
    try:
        if p.kind == "prep":
            prepared = _prep_begin(project, stamp, p)
        job = res.run(
            argv,
            stdin=stdin,
            env=env,
            title=p.title,
            limits=p.limits,
            cwd=project.root,
            job_id=job_id,
            on_wait=on_wait,
            on_start=on_start,
            on_sample=on_sample,
        )
    except WfError as e:
        if not said:
            say(f"refused {e}")
        tail_job = cloud.finish() if cloud is not None else None
        follower.footer(End.FAILED.value, note=str(e))
        rec = replace(rec, state="ended", ended=res.now_iso(), reason=End.FAILED.value, tail_job=tail_job)
        save(project, rec)
        return 1
    if not said:
        say(f"ok {job.id} {os.getpid()}")
    follower.poll()
    tail_job = None
    if cloud is not None:
        tail_job = cloud.finish()
        follower.poll()
    _ended(project, p, replace(rec, tail_job=tail_job), job, follower, prepared)
    return 0


def _job_input(
    project: Project, stamp: str, p: Plan, rec: Record
) -> tuple[Path | None, dict[str, str], list[str]]:
    """What the job runs with: its stdin (an agent batch's prompt), its environment (its
    loop writes its stop events where the summary and the pilot read them:
    ``wf.orch.events``) and its argv."""
    from wf.night.batchlog import events_file
    from wf.orch import events

    stdin = None
    if p.stdin:
        stdin = _dir(project) / f"{stamp}.prompt.md"
        atomic_write_text(stdin, prompt_text(p, str(project.root / rec.summary)))
    env = dict(os.environ, **{k: v for k, v in p.env.items() if not v.startswith("<")})
    env[events.ENV] = str(events_file(project, stamp))
    argv = [a.replace("<stamp>", stamp).replace("<run>", stamp.lower()) for a in p.argv]
    return stdin, env, argv


def _ended(
    project: Project,
    p: Plan,
    rec: Record,
    job: res.Job,
    follower: Follower,
    prepared: tuple[bytes, list[Any]] | None,
) -> None:
    """A batch whose job ran: its footer (why it ended), the stop file consumed, its record
    ended with what the next batches learn their limits from."""
    reason = _why_ended(project, p, job, follower)
    if prepared is not None:
        follower.footer(reason.value, note=_prep_end(project, rec.stamp, prepared), counted=False)
    else:
        follower.footer(reason.value, note=_loop_exit(project, p, rec, job))
    if reason is End.STOP_FILE:
        stop_file(project).unlink(missing_ok=True)  # consumed: the next batch may start
    save(
        project,
        replace(
            rec,
            state="ended",
            ended=res.now_iso(),
            job_state=job.state.value,
            exit=job.exit,
            reason=reason.value,
            tasks=len(prepared[1]) if prepared is not None else follower.posted,
            peak_rss=job.peak_rss,
            dur_s=job.dur_s,
        ),
    )


class _CloudSidecar:
    """On a ``cloud = true`` project a batch pulls its cloud sessions every
    ``cloud_pull_every`` seconds while its loop runs, posting what ended; a loop batch
    also sends on each round (as ``wf orch pick cloud``) until the cloud lane stops for
    the batch, each send counting toward N. When its loop ends, the sessions still
    running go to the batch's cloud tail (``wf batch-tail``): a detached job under its
    own ``wf res`` record and limits, so that the batch ends (and frees the batch lock)
    at once. Each pull, send and stop of the cloud lane is a line of the batch summary
    (``wf.cloud.batchlane``)."""

    def __init__(self, project: Project, rec: Record, p: Plan) -> None:
        import threading

        from wf.cloud import batchlane, sidecar

        summary = project.root / rec.summary
        # the mark comes before the loop starts: its local lanes leave Cloud: yes tasks to the cloud
        self.batch = batchlane.open_lane(project, rec.stamp, p.n) if p.kind == "loop" else None
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=sidecar,
            args=(project, self.stop),
            kwargs={
                "interval": project.config.cloud_pull_every,
                "on_line": lambda line: append_line(summary, f"- {line}"),
                "batch": self.batch,
                "linger_here": False,
            },
            daemon=True,
        )
        self.project = project
        self.rec = rec
        self.summary = summary
        self.thread.start()

    def finish(self) -> str | None:
        """Stop pulling here; hand what is left to a cloud tail. Its res job id, or None."""
        from wf.cloud import records

        self.stop.set()
        self.thread.join()
        left = ", ".join(r.id for r in records.all_records(self.project))
        if not left:
            append_line(self.summary, "- cloud: no session left")
            return None
        if stop_file(self.project).exists():
            append_line(self.summary, f"- cloud: the stop file is set; sessions left: {left}")
            return None
        answer = _detach(self.project, "batch-tail", self.rec.stamp, self.project.root / self.rec.log)
        word, _, rest = answer.strip().partition(" ")
        if word != "ok":
            why = rest if word == "refused" else f"no answer (its output: {self.rec.log})"
            append_line(self.summary, f"- cloud: the tail did not start: {why}; sessions left: {left}")
            return None
        job = rest.split(" ", 1)[0]
        append_line(
            self.summary,
            f"- cloud: the loop ended; sessions left: {left}: the cloud tail (job {job}, "
            f"{TAIL_TITLE} under its own limits) pulls them, {fmt_duration(TAIL_LINGER)} at most",
        )
        return job


def tail_main(project: Project, stamp: str, ready_fd: int | None) -> int:
    """The cloud tail of batch ``stamp`` (detached by its batch job): ``wf batch-tail
    STAMP --pull`` under ``wf res`` (title wf-batch-cloud, its own memory cap and wall
    time). Its last line in the batch summary says how it ended."""
    from wf.cloud import records

    say = _Ready(ready_fd)

    summary = project.root / f"out/wf-batch-{stamp}.md"
    argv = [sys.executable, "-m", "wf", "-C", str(project.root), "batch-tail", stamp, "--pull"]
    limits = res.Limits(mem=TAIL_MEM, cpus=None, for_s=TAIL_LINGER + TAIL)

    def on_wait(line: str) -> None:
        append_line(summary, f"- cloud tail: {line}")

    try:
        job = res.run(
            argv,
            title=TAIL_TITLE,
            limits=limits,
            cwd=project.root,
            on_wait=on_wait,
            on_start=lambda job: say(f"ok {job.id} {os.getpid()}"),
        )
    except WfError as e:
        say(f"refused {e}")
        return 1
    left = ", ".join(r.id for r in records.all_records(project))
    append_line(
        summary,
        f"- cloud tail: ended {job.state.value} at {res.now_iso()} (job {job.id})"
        + (f"; sessions left: {left} (wf cloud pull --watch)" if left else ""),
    )
    return 0


def tail_pull(project: Project, stamp: str) -> int:
    """Inside the tail's res job: pull and post until no cloud session is left, the stop
    file appears, TAIL_LINGER passed or a newer batch's tail took over (one tail pulls
    at a time: the newest, whose 24 h started last); each pull a line of the summary."""
    import threading

    from wf.cloud import sidecar

    summary = project.root / f"out/wf-batch-{stamp}.md"
    mark = _dir(project) / "cloud-tail"  # the stamp of the newest tail: the one that pulls
    atomic_write_text(mark, stamp + "\n")

    def taken_over() -> str | None:
        try:
            newer = mark.read_text("utf-8").strip()
        except OSError:
            return None
        return f"the cloud tail of batch {newer} took over" if newer != stamp else None

    ended = threading.Event()
    ended.set()  # the batch's loop ended: pull only, never send
    sidecar(
        project,
        ended,
        interval=project.config.cloud_pull_every,
        linger=TAIL_LINGER,
        on_line=lambda line: append_line(summary, f"- {line}"),
        give_up=taken_over,
    )
    return 0


def _prep_begin(project: Project, stamp: str, p: Plan) -> tuple[bytes, list[Any]]:
    """The prep batch's targets (chosen afresh) and TASKS.md as it is before they run."""
    from wf.night import prep

    chosen = prep.targets(project, p.n, list(p.lanes))
    if not chosen:
        raise WfError("prep: nothing to prepare")
    prep.manifest(project, chosen, _dir(project) / f"{stamp}.prep.json")
    return project.tasks_path.read_bytes(), chosen


def _prep_end(project: Project, stamp: str, prepared: tuple[bytes, list[Any]]) -> str:
    """One summary line per target, then a commit of only the lines prep changed."""
    from wf.night import prep

    before, chosen = prepared
    summary = project.root / f"out/wf-batch-{stamp}.md"
    refused = prep.refusals(project, f"prep-{stamp.lower()}", chosen)
    for line in prep.outcome_lines(project, chosen, refused):
        append_line(summary, f"- {line}")
    return prep.commit_changes(project, before, stamp)


def _loop_exit(project: Project, p: Plan, rec: Record, job: res.Job) -> str:
    """What the loop's own exit status says (``wf orch run``: 4 a person is needed, 1 an
    error); for an agent batch, claude's exit and the last line it printed."""
    if job.state is not res.State.FAILED:
        return ""
    if p.kind == "agent":
        said = _last_line(project.root / rec.log)
        return f"claude exit {job.exit}" + (f": {said}" if said else "") + f"; its output: {rec.log}"
    meaning = {4: "a person is needed", 1: "an error it could not get past"}.get(job.exit or 0, "")
    return f"wf orch run exit {job.exit}" + (f": {meaning}" if meaning else "")


def _last_line(path: Path) -> str:
    """The last non-blank line of a log, printable characters only, at most 200."""
    for line in reversed(tail_text(path, 4096).splitlines()):
        text = "".join(ch for ch in line if ch.isprintable()).strip()
        if text:
            return text[:200]
    return ""


def _kept(project: Project, stamp: str) -> End | None:
    """End.BUDGET or End.RESERVE when a lane of the batch's loop stopped for it (its typed
    stop events), else None."""
    from wf.night.batchlog import stop_events
    from wf.orch.state import Stop

    try:
        found, _ = stop_events(project, stamp)
    except store.CorruptRecord:
        return None
    kinds = {ev.reason for ev in found}
    if Stop.BUDGET in kinds:
        return End.BUDGET
    if Stop.RESERVE in kinds:
        return End.RESERVE
    return None


def _why_ended(project: Project, p: Plan, job: res.Job, follower: Follower) -> End:
    if job.state in (res.State.OOM, res.State.TIMEOUT, res.State.KILLED):
        return End(job.state.value)
    if p.kind == "prep":
        return End.PREP_DONE
    if stop_file(project).exists():
        return End.STOP_FILE
    if follower.posted >= p.n:
        return End.N_REACHED
    if p.kind == "agent" and job.state is res.State.FAILED:
        return End.AGENT_FAILED  # its lanes did not stop: the orchestrator did
    kept = _kept(project, follower.rec.stamp)
    if kept is not None:
        return kept
    if (job.dur_s or 0) >= p.for_s:
        return End.FOR
    return End.ALL_STOPPED
