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

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from wf.base.errors import UsageError, WfError
from wf.night import resbackend
from wf.night.resbackend import Backend, Limits
from wf.night.resjobs import (
    JOB_VAR,
    SAMPLE,
    TERM_KILL,
    TOKEN_VAR,
    Job,
    State,
    check_job_id,
    ensure_state_dir,
    finish,
    history,
    load,
    new_id,
    now_iso,
    release,
    reserve,
    running,
    save,
    suggest,
    sweep,
)
from wf.workers import procs

__all__ = [
    "JOB_VAR",
    "TOKEN_VAR",
    "Job",
    "Limits",
    "State",
    "exit_code",
    "history",
    "is_own_peak",
    "load",
    "new_id",
    "now_iso",
    "run",
    "running",
    "stop",
    "suggest",
    "sweep",
]

GRACE = 5.0  # SIGTERM -> SIGKILL
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_OOM = 137  # 128 + SIGKILL
EXIT_NOT_FOUND = 127
EXIT_CANNOT_RUN = 126
SAVE_EVERY = 5.0  # seconds between record writes while a job runs
# a reaped command's maxrss counts as its own only this far above wf's own peak
PEAK_MARGIN_MIN = 4 << 20
PEAK_MARGIN_DIV = 8  # or an eighth of wf's peak, if more
# the first samples come soon after the start, then every SAMPLE: a job of 100 ms has a peak
EARLY_SAMPLES = (0.0, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6)


# ------------------------------------------------------------------ running a job


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
    stdin: Path | None = None,
) -> Job:
    """Run ``argv`` under ``limits`` and supervise it to its end; returns the final job.

    ``on_sample`` is called after every sample (about once a second) with the job as it
    stands. SIGTERM, SIGINT or SIGHUP to this process end the job as ``killed``.
    """
    if not argv:
        raise UsageError("give the command to run after --")
    ensure_state_dir()
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
        pid_start=procs.started(os.getpid()),
        token=token,
        skipped=plan.skipped,
        notes=plan.notes,
    )
    try:
        return _supervise(job, plan, env, on_start, on_sample, stdin)
    finally:
        release(job_id)


def _supervise(
    job: Job,
    plan: resbackend.Plan,
    env: dict[str, str] | None,
    on_start: Callable[[Job], None] | None,
    on_sample: Callable[[Job], None] | None,
    stdin: Path | None = None,
) -> Job:
    """Start the command, sample it to its end or its limit, end its tree, and record
    how it ended."""
    with _stop_signals() as stop_sig:
        procs.become_subreaper()
        procs.tree_usage([])  # imports psutil now: a short job's first samples must not wait for it
        if plan.cgroup:
            resbackend.cgroup_make(plan.cgroup, job.limits)
        child_env = dict(os.environ if env is None else env, **{TOKEN_VAR: job.token, JOB_VAR: job.id})
        start = _Start.now()
        save(job)
        try:
            proc = _spawn(job, plan, child_env, stdin)
        except OSError as e:
            job = _cannot_start(job, plan, e)
            finish(job)
            return job
        procs.own_child(proc.pid)
        job = replace(job, child=proc.pid, updated=now_iso())
        save(job)
        if on_start is not None:
            on_start(job)
        exited = _ExitWaiter(proc)
        job, ended_by, cpu_live = _watch(job, exited, start, stop_sig, on_sample)
        exited.close()
        rc = _end_tree(proc, job, exited, grace=1.0 if ended_by is State.OOM else GRACE)
        peak_cg = 0
        if plan.cgroup:
            oom, peak_cg = resbackend.cgroup_end(plan.cgroup)
            if oom and ended_by is None:
                ended_by = State.OOM
        if ended_by is None and plan.backend is Backend.SYSTEMD and job.limits.mem and rc == -signal.SIGKILL:
            ended_by = State.OOM  # the kernel's OOM killer, inside the scope's MemoryMax
        job = _ended(job, ended_by, rc, stop_sig, start, exited, peak_cg, cpu_live)
        finish(job)
        return job


@contextmanager
def _stop_signals() -> Iterator[list[int]]:
    """SIGTERM, SIGINT and SIGHUP, while the job runs, only noted (in the list given):
    the watch loop then ends the job as killed. Only the main thread can catch them."""
    stop_sig: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        stop_sig.append(signum)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield stop_sig
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass(frozen=True)
class _Start:
    """What the job's figures are measured from: the children's CPU and peak memory so
    far (a max over every child ever: it counts only if the job passes it), and the time."""

    cpu: float
    maxrss: int
    at: float

    @classmethod
    def now(cls) -> _Start:
        return cls(_children_usage(), _children_maxrss(), time.monotonic())


def _spawn(
    job: Job, plan: resbackend.Plan, env: dict[str, str], stdin: Path | None
) -> subprocess.Popen[bytes]:
    """The command in a session of its own, in its cgroup or pinned to its CPUs."""
    limits = job.limits

    def preexec() -> None:
        if plan.cgroup:
            resbackend.cgroup_join(plan.cgroup)
        if limits.cpus and plan.backend is Backend.WATCHDOG:
            resbackend.pin(limits.cpus)

    with open(stdin or os.devnull, "rb") as given:  # the child keeps its own copy
        return subprocess.Popen(
            list(plan.argv),
            stdin=given if stdin else None,
            cwd=job.cwd,
            env=env,
            start_new_session=True,
            preexec_fn=preexec if (plan.cgroup or limits.cpus) else None,
        )


def _cannot_start(job: Job, plan: resbackend.Plan, e: OSError) -> Job:
    """The job of a command that could not be started: 127 not found, else 126."""
    code = EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_CANNOT_RUN
    job = replace(job, state=State.FAILED, exit=code, end=now_iso(), dur_s=0.0)
    return replace(job, notes=(*job.notes, f"cannot start {plan.argv[0]}: {e.strerror or e}"))


def _watch(
    job: Job,
    exited: _ExitWaiter,
    start: _Start,
    stop_sig: list[int],
    on_sample: Callable[[Job], None] | None,
) -> tuple[Job, State | None, float]:
    """Sample the tree until the command exits or a limit ends it: the job with its peak
    so far, what ended it (None: it exited), and the CPU its live processes used."""
    limits = job.limits
    last_save = time.monotonic()
    cpu_live = 0.0
    waits = iter(EARLY_SAMPLES)
    while not exited(next(waits, SAMPLE)):
        now = time.monotonic()
        rss, cpu_live = procs.tree_usage(procs.tree(os.getpid())[1:])
        if rss > 0:
            job = replace(job, peak_rss=max(job.peak_rss or 0, rss))
        procs.reap_orphans()
        if stop_sig:
            return job, State.KILLED, cpu_live
        if limits.mem and rss > limits.mem:
            return job, State.OOM, cpu_live
        if limits.for_s and now - start.at >= limits.for_s:
            return job, State.TIMEOUT, cpu_live
        if now - last_save >= SAVE_EVERY:
            job = replace(job, updated=now_iso(), cpu_s=_children_usage() - start.cpu + cpu_live)
            save(job)
            last_save = now
        if on_sample is not None:
            on_sample(job)
    return job, None, cpu_live


def _end_tree(proc: subprocess.Popen[bytes], job: Job, exited: _ExitWaiter, grace: float) -> int:
    """End the tree: what the cap or the deadline ended, or what the command left behind;
    the command's exit code (as subprocess gives it)."""
    procs.kill_tree(proc.pid, job.token, grace=grace, var=TOKEN_VAR, signals=TERM_KILL)
    for pid in procs.tree(os.getpid())[1:]:
        procs.kill_tree(pid, None, grace=grace, signals=TERM_KILL)
    rc = exited.reap()
    procs.reap_orphans()
    return rc


def _ended(
    job: Job,
    ended_by: State | None,
    rc: int,
    stop_sig: list[int],
    start: _Start,
    exited: _ExitWaiter,
    peak_cg: int,
    cpu_live: float,
) -> Job:
    """The final record: its state and exit code, duration, peak memory and CPU."""
    state = ended_by if ended_by is not None else State.DONE if rc == 0 else State.FAILED
    code = rc if rc >= 0 else 128 - rc
    if state is State.KILLED and stop_sig:
        code = 128 + stop_sig[0]
    maxrss = exited.maxrss if exited.maxrss is not None else _children_maxrss()
    fresh = exited.maxrss is not None or maxrss > start.maxrss
    own = maxrss if fresh and is_own_peak(maxrss, _self_maxrss()) else 0
    peak = max(job.peak_rss or 0, peak_cg, own) or None  # None: no figure seen
    job = replace(
        job,
        state=state,
        exit=code,
        end=now_iso(),
        dur_s=round(time.monotonic() - start.at, 2),
        peak_rss=peak,
        cpu_s=round(max(_children_usage() - start.cpu, cpu_live), 2),
        updated=now_iso(),
    )
    if state in (State.OOM, State.TIMEOUT):
        job = replace(job, exit=exit_code(job))
    return job


class _ExitWaiter:
    """Waits up to S seconds for ``proc`` to exit and says whether it did: on a pidfd
    where Linux has one (no polling), else by subprocess's own wait."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.maxrss: int | None = None  # the command's own peak, when wf reaped it itself
        try:
            self.fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.fd = -1

    def __call__(self, seconds: float) -> bool:
        if self.fd >= 0:
            import select

            select.select([self.fd], [], [], seconds)
            return self._reap(os.WNOHANG)
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def reap(self) -> int:
        """Wait for the command to be gone; its exit code (as subprocess gives it)."""
        self._reap(0)
        return self.proc.wait()

    def _reap(self, flags: int) -> bool:
        """Reap it with wait4, as soon as it has exited, keeping its own rusage (its peak
        memory, covering the descendants it waited for)."""
        if self.proc.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.proc.pid, flags)
        except ChildProcessError:  # reaped elsewhere: subprocess knows its code
            return self.proc.poll() is not None
        if pid == 0:
            return False
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.maxrss = int(usage.ru_maxrss) * 1024
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def is_own_peak(maxrss: int, wf_peak: int) -> bool:
    """Whether a reaped command's maxrss is its own peak rather than wf's size.

    Linux starts a child's maxrss at the memory wf had when it forked (it counts the
    parent's pages from the fork until the exec), so every command wf starts reads at
    least about as big as wf. "About": the kernel's RSS counters are approximate (per-CPU
    batches) and reclaim can shrink wf's resident set without moving its high-water mark,
    so the inherited figure can come out a few pages over wf's own. Only a maxrss clearly
    above wf's (by the margin below) is the command's; a smaller command's peak is what
    the samples saw."""
    return maxrss > wf_peak + max(PEAK_MARGIN_MIN, wf_peak // PEAK_MARGIN_DIV)


def _children_usage() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return float(r.ru_utime + r.ru_stime)


def _children_maxrss() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def _self_maxrss() -> int:
    """wf's own peak: its address space's high-water mark (VmHWM). Not RUSAGE_SELF, which
    also holds the peak of whatever wf was forked from (Linux folds the parent's memory
    into a child's maxrss until its exec): started by a big parent, wf would read as big
    as it, and a job smaller than that parent would lose its peak."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def stop(job_id: str, timeout: float = 30.0) -> Job:
    """End a running job and its whole tree; returns its final record."""
    sweep()
    job = load(check_job_id(job_id))
    if job is None:
        raise WfError(f"no job {job_id} (wf res ls, wf res hist)")
    if job.state is not State.RUNNING:
        return job
    if procs.alive_as(job.pid, job.pid_start):
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
