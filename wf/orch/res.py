"""``wf res``: run a command under limits on its whole process tree.

A job is supervised by the ``wf`` process that started it (the watchdog): it samples
the tree's summed RSS and CPU every second, ends the tree (SIGTERM, a grace period,
SIGKILL, a sweep for survivors) past the memory cap or the deadline, and keeps a record
``$XDG_STATE_HOME/wf/res/jobs/<id>.json`` (written atomically while it runs, final when
it ends) and a line in ``hist.jsonl``. A record that says running whose supervisor is
gone is finalised as ``lost`` by the next ``wf res`` command. Memory reservations
(``--mem``) of running jobs are kept in a ledger; their sum may not pass the machine's
memory less 1 GB.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from wf import procs
from wf.errors import UsageError, WfError
from wf.fsutil import append_line, atomic_write_text
from wf.lock import project_lock
from wf.orch import resbackend
from wf.orch.resbackend import Backend, Limits

TOKEN_VAR = "WF_RES_TOKEN"  # every process of a job's tree carries it
JOB_VAR = "WF_RES_JOB"
MEMORY_VAR = "WF_RES_MEMORY"  # the memory wf may hand out (default: the machine's)
SAMPLE = 1.0  # seconds between samples
SAVE_EVERY = 5.0  # seconds between record writes while a job runs
GRACE = 5.0  # SIGTERM -> SIGKILL
HEADROOM = 1 << 30  # the machine's memory less this is what reservations may sum to
ROUND = 256 << 20
_ID = re.compile(r"\d{8}-\d{6}-\d{1,10}")


class State(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    OOM = "oom"
    TIMEOUT = "timeout"
    KILLED = "killed"
    LOST = "lost"


EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_OOM = 137  # 128 + SIGKILL
EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "wf" / "res"


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass(frozen=True)
class Job:
    id: str
    title: str
    argv: tuple[str, ...]
    cwd: str
    backend: Backend
    limits: Limits
    start: str
    state: State = State.RUNNING
    end: str | None = None
    dur_s: float | None = None
    exit: int | None = None
    peak_rss: int = 0
    cpu_s: float = 0.0
    pid: int = 0  # the supervisor
    pid_start: float | None = None
    child: int | None = None
    token: str = ""
    skipped: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    updated: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["argv"] = list(self.argv)
        d["backend"] = self.backend.value
        d["state"] = self.state.value
        d["limits"] = self.limits.as_dict()
        d["notes"] = list(self.notes)
        return d

    def hist(self) -> dict[str, Any]:
        d = self.as_dict()
        keys = ("id", "title", "argv", "cwd", "backend", "limits", "start", "end", "dur_s", "state", "exit")
        return {**{k: d[k] for k in keys}, "peak_rss": self.peak_rss, "cpu_s": round(self.cpu_s, 2)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(
            id=str(d["id"]),
            title=str(d.get("title") or ""),
            argv=tuple(str(a) for a in d.get("argv") or ()),
            cwd=str(d.get("cwd") or ""),
            backend=Backend(d.get("backend") or "watchdog"),
            limits=Limits.from_dict(d.get("limits") or {}),
            start=str(d.get("start") or ""),
            state=State(d.get("state") or "running"),
            end=d.get("end"),
            dur_s=d.get("dur_s"),
            exit=d.get("exit"),
            peak_rss=int(d.get("peak_rss") or 0),
            cpu_s=float(d.get("cpu_s") or 0.0),
            pid=int(d.get("pid") or 0),
            pid_start=d.get("pid_start"),
            child=d.get("child"),
            token=str(d.get("token") or ""),
            skipped=dict(d.get("skipped") or {}),
            notes=tuple(d.get("notes") or ()),
            updated=d.get("updated"),
        )


# ------------------------------------------------------------------ records


def _jobs() -> Path:
    return state_dir() / "jobs"


def check_job_id(job_id: str) -> str:
    if not _ID.fullmatch(job_id):
        raise UsageError(f"job id {job_id!r}: expected YYYYMMDD-HHMMSS-PID, as wf res ls shows")
    return job_id


def save(job: Job) -> None:
    atomic_write_text(_jobs() / f"{job.id}.json", json.dumps(job.as_dict(), indent=1) + "\n")


def load(job_id: str) -> Job | None:
    try:
        return Job.from_dict(json.loads((_jobs() / f"{check_job_id(job_id)}.json").read_text("utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise WfError(f"job record {job_id}: unreadable ({e})") from None


def records() -> list[Job]:
    out: list[Job] = []
    folder = _jobs()
    if not folder.is_dir():
        return out
    for f in sorted(folder.glob("*.json")):
        try:
            out.append(Job.from_dict(json.loads(f.read_text("utf-8"))))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half-written by hand or from an older wf: not ours to judge here
    return out


def _finish(job: Job) -> None:
    """The final record, its history line, and its reservation given back."""
    save(job)
    append_line(state_dir() / "hist.jsonl", json.dumps(job.hist()))
    _release(job.id)


def sweep() -> list[Job]:
    """Finalise as ``lost`` every running record whose supervisor is gone (ending what is
    left of its tree: with no supervisor, nothing would hold it to its limits)."""
    lost = []
    with project_lock(state_dir(), timeout=30, name="res.lock"):
        for job in records():
            if job.state is not State.RUNNING or procs.same_process(job.pid, job.pid_start):
                continue
            if job.token:
                procs.kill_tree(None, job.token, grace=2.0, var=TOKEN_VAR, signals=_TERM_KILL)
            end = job.updated or now_iso()
            job = replace(job, state=State.LOST, end=end, dur_s=_between(job.start, end))
            _finish(job)
            lost.append(job)
    return lost


def _between(start: str, end: str) -> float | None:
    try:
        t0 = time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%SZ"))
        t1 = time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None
    return max(0.0, t1 - t0)


def running() -> list[Job]:
    sweep()
    return [j for j in records() if j.state is State.RUNNING]


def history(title: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Past jobs, newest first."""
    path = state_dir() / "hist.jsonl"
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in reversed(lines):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and (title is None or d.get("title") == title):
            out.append(d)
            if limit is not None and len(out) >= limit:
                break
    return out


@dataclass(frozen=True)
class Suggestion:
    title: str
    mem: int | None
    for_s: float | None
    based_on: int  # how many done jobs


def suggest(title: str) -> Suggestion:
    """Memory 1.25 x the largest peak of the last 10 ``done`` jobs of ``title``, rounded
    up to 256 MB; wall time 1.5 x the longest of them."""
    done = [d for d in history(title) if d.get("state") == State.DONE.value][:10]
    if not done:
        return Suggestion(title, None, None, 0)
    peak = max(int(d.get("peak_rss") or 0) for d in done)
    longest = max(float(d.get("dur_s") or 0) for d in done)
    mem = max(1, math.ceil(peak * 1.25 / ROUND)) * ROUND
    return Suggestion(title, mem, round(longest * 1.5, 1) or None, len(done))


# ------------------------------------------------------------------ reservations


def _ledger() -> Path:
    return state_dir() / "reservations.json"


def budget() -> int:
    """What reservations may sum to: the machine's memory (or $WF_RES_MEMORY) less 1 GB."""
    text = os.environ.get(MEMORY_VAR)
    if text:
        from wf.quantity import parse_size

        total = parse_size(text, MEMORY_VAR)
    else:
        total = procs.total_memory()
    return max(0, total - HEADROOM)


def _read_ledger() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_ledger().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def reserved() -> dict[str, dict[str, Any]]:
    """The live reservations: job id -> {mem, pid, pid_start, title}."""
    return {
        k: v
        for k, v in _read_ledger().items()
        if procs.same_process(int(v.get("pid") or 0), v.get("pid_start"))
    }


def reserve(
    job_id: str, title: str, mem: int, *, wait: bool, on_wait: Callable[[str], None] | None = None
) -> None:
    """Add ``mem`` to the ledger for this process, waiting for room (or refusing)."""
    room = budget()
    if mem > room:
        raise WfError(f"--mem {mem >> 20}M can never fit: wf may reserve {room >> 20}M here in all")
    said = False
    while True:
        with project_lock(state_dir(), timeout=30, name="res.lock"):
            live = reserved()
            used = sum(int(v.get("mem") or 0) for v in live.values())
            if used + mem <= room:
                me = {"mem": mem, "pid": os.getpid(), "pid_start": procs.start_time(os.getpid())}
                live[job_id] = {**me, "title": title}
                atomic_write_text(_ledger(), json.dumps(live, indent=1) + "\n")
                return
        holders = ", ".join(
            f"{k} ({v.get('title')}, {int(v.get('mem') or 0) >> 20}M)" for k, v in live.items()
        )
        why = f"{mem >> 20}M does not fit: {used >> 20}M of {room >> 20}M is reserved by {holders}"
        if not wait:
            raise WfError(f"{why} (without --no-wait it would wait for room)")
        if not said and on_wait is not None:
            on_wait(f"waiting for room: {why}")
            said = True
        time.sleep(SAMPLE)


def _release(job_id: str) -> None:
    with project_lock(state_dir(), timeout=30, name="res.lock"):
        live = reserved()
        live.pop(job_id, None)
        atomic_write_text(_ledger(), json.dumps(live, indent=1) + "\n")


# ------------------------------------------------------------------ running a job

_TERM_KILL = (signal.SIGTERM, signal.SIGKILL)


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"


def exit_code(job: Job) -> int:
    """As timeout(1): the command's own status; 124 on the wall limit; 137 on the memory cap."""
    if job.state is State.TIMEOUT:
        return EXIT_TIMEOUT
    if job.state is State.OOM:
        return EXIT_OOM
    return job.exit if job.exit is not None else 1


def run(
    argv: list[str],
    *,
    title: str,
    limits: Limits,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
    on_start: Callable[[Job], None] | None = None,
    on_sample: Callable[[Job], None] | None = None,
    job_id: str | None = None,
) -> Job:
    """Run ``argv`` under ``limits`` and supervise it to its end; returns the final job.

    ``on_sample`` is called after every sample (about once a second) with the job as it
    stands. SIGTERM, SIGINT or SIGHUP to this process end the job as ``killed``.
    """
    if not argv:
        raise UsageError("give the command to run after --")
    sweep()
    job_id = job_id or new_id()
    plan = resbackend.plan(argv, limits, job_id)
    if limits.mem:
        reserve(job_id, title, limits.mem, wait=wait, on_wait=on_wait)
    token = uuid.uuid4().hex
    job = Job(
        id=job_id,
        title=title,
        argv=tuple(argv),
        cwd=str(cwd or Path.cwd()),
        backend=plan.backend,
        limits=limits,
        start=now_iso(),
        pid=os.getpid(),
        pid_start=procs.start_time(os.getpid()),
        token=token,
        skipped=plan.skipped,
        notes=plan.notes,
    )
    try:
        return _supervise(job, plan, env, on_start, on_sample)
    finally:
        _release(job_id)


def _supervise(
    job: Job,
    plan: resbackend.Plan,
    env: dict[str, str] | None,
    on_start: Callable[[Job], None] | None,
    on_sample: Callable[[Job], None] | None,
) -> Job:
    limits = job.limits
    stop_sig: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        stop_sig.append(signum)

    in_main = threading.current_thread() is threading.main_thread()
    old = {}
    if in_main:
        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    procs.become_subreaper()
    if plan.cgroup:
        resbackend.cgroup_make(plan.cgroup, limits)

    def preexec() -> None:
        if plan.cgroup:
            resbackend.cgroup_join(plan.cgroup)
        if limits.cpus and plan.backend is Backend.WATCHDOG:
            resbackend.pin(limits.cpus)

    child_env = dict(os.environ if env is None else env, **{TOKEN_VAR: job.token, JOB_VAR: job.id})
    usage0 = _children_usage()
    maxrss0 = _children_maxrss()  # a max over every child ever: counts only if the job passes it
    t0 = time.monotonic()
    save(job)
    try:
        try:
            proc = subprocess.Popen(
                list(plan.argv),
                cwd=job.cwd,
                env=child_env,
                start_new_session=True,
                preexec_fn=preexec if (plan.cgroup or limits.cpus) else None,
            )
        except OSError as e:
            code = EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_CANNOT_RUN
            job = replace(job, state=State.FAILED, exit=code, end=now_iso(), dur_s=0.0)
            job = replace(job, notes=(*job.notes, f"cannot start {plan.argv[0]}: {e.strerror or e}"))
            _finish(job)
            return job
        procs.own_child(proc.pid)
        job = replace(job, child=proc.pid, updated=now_iso())
        save(job)
        if on_start is not None:
            on_start(job)
        ended_by: State | None = None
        last_save = time.monotonic()
        cpu_live = 0.0
        exited = _ExitWaiter(proc)
        while True:
            if exited(SAMPLE):
                break
            now = time.monotonic()
            rss, cpu_live = procs.tree_usage(procs.tree(os.getpid())[1:])
            job = replace(job, peak_rss=max(job.peak_rss, rss))
            procs.reap_orphans()
            if stop_sig:
                ended_by = State.KILLED
            elif limits.mem and rss > limits.mem:
                ended_by = State.OOM
            elif limits.for_s and now - t0 >= limits.for_s:
                ended_by = State.TIMEOUT
            if ended_by is not None:
                break
            if now - last_save >= SAVE_EVERY:
                job = replace(job, updated=now_iso(), cpu_s=_children_usage() - usage0 + cpu_live)
                save(job)
                last_save = now
            if on_sample is not None:
                on_sample(job)
        exited.close()
        # end the tree: what the cap or the deadline ended, or what the command left behind
        grace = 1.0 if ended_by is State.OOM else GRACE
        procs.kill_tree(proc.pid, job.token, grace=grace, var=TOKEN_VAR, signals=_TERM_KILL)
        for pid in procs.tree(os.getpid())[1:]:
            procs.kill_tree(pid, None, grace=grace, signals=_TERM_KILL)
        rc = proc.wait()
        procs.reap_orphans()
        peak_cg = 0
        if plan.cgroup:
            oom, peak_cg = resbackend.cgroup_end(plan.cgroup)
            if oom and ended_by is None:
                ended_by = State.OOM
        if ended_by is None and plan.backend is Backend.SYSTEMD and limits.mem and rc == -signal.SIGKILL:
            ended_by = State.OOM  # the kernel's OOM killer, inside the scope's MemoryMax
        if ended_by is None:
            state = State.DONE if rc == 0 else State.FAILED
        else:
            state = ended_by
        code = rc if rc >= 0 else 128 - rc
        if state is State.KILLED and stop_sig:
            code = 128 + stop_sig[0]
        maxrss = _children_maxrss()
        peak = max(job.peak_rss, peak_cg, maxrss if maxrss > maxrss0 else 0)
        job = replace(
            job,
            state=state,
            exit=code,
            end=now_iso(),
            dur_s=round(time.monotonic() - t0, 2),
            peak_rss=peak,
            cpu_s=round(max(_children_usage() - usage0, cpu_live), 2),
            updated=now_iso(),
        )
        if state in (State.OOM, State.TIMEOUT):
            job = replace(job, exit=exit_code(job))
        _finish(job)
        return job
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _ExitWaiter:
    """Waits up to S seconds for ``proc`` to exit and says whether it did: on a pidfd
    where Linux has one (no polling), else by subprocess's own wait."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        try:
            self.fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.fd = -1

    def __call__(self, seconds: float) -> bool:
        if self.fd >= 0:
            import select

            select.select([self.fd], [], [], seconds)
            return self.proc.poll() is not None
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _children_usage() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(r.ru_utime + r.ru_stime)


def _children_maxrss() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def stop(job_id: str, timeout: float = 30.0) -> Job:
    """End a running job and its whole tree; returns its final record."""
    sweep()
    job = load(check_job_id(job_id))
    if job is None:
        raise WfError(f"no job {job_id} (wf res ls, wf res hist)")
    if job.state is not State.RUNNING:
        return job
    if procs.same_process(job.pid, job.pid_start):
        try:
            os.kill(job.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cur = load(job_id)
        if cur is not None and cur.state is not State.RUNNING:
            return cur
        time.sleep(0.2)
    raise WfError(f"job {job_id}: its supervisor (pid {job.pid}) did not end it within {timeout:g}s")
