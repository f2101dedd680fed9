"""``wf res`` jobs: their records, history, suggested limits and memory reservations.

A record ``$XDG_STATE_HOME/wf/res/jobs/<id>.json`` per job; one line per ended job in
``hist.jsonl``; the reservations of running jobs in ``reservations.json``, changed under
``res.lock``. A record that says running whose supervisor is gone is finalised ``lost``
by ``sweep`` (every ``wf res`` command runs it first).
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base.errors import UsageError, WfError
from wf.base.fsutil import append_line
from wf.base.homes import wf_state
from wf.base.lock import project_lock
from wf.base.stamps import now_iso as now_iso  # the stamps of job records
from wf.base.stamps import seconds_between
from wf.night.resbackend import Backend, Limits
from wf.workers import procs

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
    return wf_state() / "res"


def ensure_state_dir() -> Path:
    """The state folder, made if missing; one that cannot be made is an error (exit 1)."""
    path = state_dir()
    try:
        (path / "jobs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WfError(
            f"wf's state folder {path} cannot be made: {e.strerror or e} (see $XDG_STATE_HOME)"
        ) from None
    return path


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
    peak_rss: int | None = None  # bytes, the whole tree at its largest; None: not known
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
        """From a record as written; a value of the wrong type raises ValueError or
        TypeError (the record is then skipped, or named as unreadable)."""
        if not isinstance(d, dict):
            raise TypeError("not a JSON object")

        def num(key: str) -> float | None:
            v = d.get(key)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise TypeError(f"{key}: {v!r} is not a finite number")
            if v < 0 and key != "exit":  # an exit may be -N: ended by signal N
                raise TypeError(f"{key}: {v!r} is negative")
            return float(v)

        def text(key: str) -> str | None:
            v = d.get(key)
            if v is not None and not isinstance(v, str):
                raise TypeError(f"{key}: not a string")
            return v

        exit_, child = num("exit"), num("child")
        return cls(
            id=check_job_id(str(d["id"])),
            title=str(d.get("title") or ""),
            argv=tuple(str(a) for a in d.get("argv") or ()),
            cwd=str(d.get("cwd") or ""),
            backend=Backend(d.get("backend") or "watchdog"),
            limits=Limits.from_dict(d.get("limits") or {}),
            start=str(d.get("start") or ""),
            state=State(d.get("state") or "running"),
            end=text("end"),
            dur_s=num("dur_s"),
            exit=None if exit_ is None else int(exit_),
            peak_rss=known_peak(d.get("peak_rss")),
            cpu_s=num("cpu_s") or 0.0,
            pid=int(num("pid") or 0),
            pid_start=num("pid_start"),
            child=None if child is None else int(child),
            token=str(d.get("token") or ""),
            skipped={str(k): str(v) for k, v in dict(d.get("skipped") or {}).items()},
            notes=tuple(str(x) for x in d.get("notes") or ()),
            updated=text("updated"),
        )


# ------------------------------------------------------------------ records


def _jobs() -> Path:
    return state_dir() / "jobs"


def check_job_id(job_id: str) -> str:
    if not _ID.fullmatch(job_id):
        raise UsageError(f"job id {job_id!r}: expected YYYYMMDD-HHMMSS-PID, as wf res ls shows")
    return job_id


def save(job: Job) -> None:
    store.write_json(_jobs() / f"{job.id}.json", job.as_dict())


def load_file(f: Path) -> Job | None:
    """The job in ``f``, None if there is no such file; CorruptRecord otherwise."""

    data = store.load_json(f)
    if data is None and not f.exists():
        return None
    try:
        job = Job.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, UsageError) as e:
        raise store.CorruptRecord(f, f"not a job record: {e}") from None
    if f"{job.id}.json" != f.name:
        raise store.CorruptRecord(f, f"it names job {job.id}, not {f.stem}")
    return job


def load(job_id: str) -> Job | None:
    return load_file(_jobs() / f"{check_job_id(job_id)}.json")


def record_files() -> list[Path]:
    folder = _jobs()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def records() -> list[Job]:
    """Every job record; CorruptRecord for one that cannot be trusted (a running job it
    hides would otherwise be read as "no running jobs")."""
    return [j for f in record_files() if (j := load_file(f)) is not None]


def finish(job: Job) -> None:
    """The final record, its history line, and its reservation given back."""
    save(job)
    append_line(hist_file(), json.dumps(job.hist()))
    release(job.id)


def sweep() -> list[Job]:
    """Finalise as ``lost`` every running record whose supervisor is gone (ending what is
    left of its tree: with no supervisor, nothing would hold it to its limits)."""
    lost: list[Job] = []
    if not _jobs().is_dir():
        return lost  # no job ever ran here: nothing to look at, nothing to create
    with project_lock(ensure_state_dir(), timeout=30, name="res.lock"):
        for job in records():
            if job.state is not State.RUNNING or procs.alive_as(job.pid, job.pid_start):
                continue
            if job.token:
                procs.kill_tree(None, job.token, grace=2.0, var=TOKEN_VAR, signals=TERM_KILL)
            end = job.updated or now_iso()
            gap = seconds_between(job.start, end)  # as UTC: a DST change is no hour more or less
            job = replace(job, state=State.LOST, end=end, dur_s=None if gap is None else max(0.0, gap))
            finish(job)
            lost.append(job)
    return lost


def running() -> list[Job]:
    sweep()
    return [j for j in records() if j.state is State.RUNNING]


def history(title: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Past jobs, newest first."""

    path = hist_file()
    lines = store.read_lines(path) or []
    out = []
    for n, line in reversed(list(enumerate(lines, 1))):
        if not line.strip():
            continue
        try:
            d = json.loads(line, parse_constant=store.no_constant)
        except ValueError as e:
            raise store.CorruptRecord(path, f"line {n} is not JSON: {e}") from None
        if not _sane(d):
            raise store.CorruptRecord(path, f"line {n} is not a job of wf's: {line[:80]!r}")
        if title is None or d.get("title") == title:
            out.append({**d, "peak_rss": known_peak(d.get("peak_rss"))})
            if limit is not None and len(out) >= limit:
                break
    return out


def hist_file() -> Path:
    return state_dir() / "hist.jsonl"


def known_peak(v: Any) -> int | None:
    """A peak as a number of bytes, or None when it is not known: a job that ran had
    some memory, so a 0 (what an older wf wrote for a job no sample saw) is unknown too."""
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        return None
    return int(v)


def _sane(d: Any) -> bool:
    """A history line with the fields the report and the suggestions read, of their types."""
    if not isinstance(d, dict) or not isinstance(d.get("id"), str):
        return False
    for key in ("peak_rss", "dur_s", "cpu_s", "exit"):
        v = d.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            return False
    return all(isinstance(d.get(k), str | None) for k in ("title", "state", "backend"))


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
    peaks = [int(d["peak_rss"]) for d in done if d.get("peak_rss")]  # unknown peaks say nothing
    longest = max(float(d.get("dur_s") or 0) for d in done)
    mem = max(1, math.ceil(max(peaks) * 1.25 / ROUND)) * ROUND if peaks else None
    return Suggestion(title, mem, round(longest * 1.5, 1) or None, len(done))


# ------------------------------------------------------------------ reservations


def _ledger() -> Path:
    return state_dir() / "reservations.json"


def budget() -> int:
    """What reservations may sum to: the machine's memory (or $WF_RES_MEMORY) less 1 GB."""
    text = os.environ.get(MEMORY_VAR)
    if text:
        from wf.base.quantity import parse_size

        total = parse_size(text, MEMORY_VAR)
    else:
        total = procs.total_memory()
    return max(0, total - HEADROOM)


def _read_ledger() -> dict[str, dict[str, Any]]:
    """Every reservation as written; CorruptRecord if the ledger cannot be trusted (read
    as none, memory would be promised twice)."""

    path = _ledger()
    data = store.load_json(path)
    if data is None and not path.exists():
        return {}
    if not isinstance(data, dict):
        raise store.CorruptRecord(path, f"expected a JSON object, found {type(data).__name__}")
    for k, v in data.items():
        if not isinstance(v, dict):
            raise store.CorruptRecord(path, f"reservation {k!r} is not an object")
        pid, started, mem = v.get("pid"), v.get("pid_start"), v.get("mem")
        if not (
            isinstance(pid, int)
            and not isinstance(pid, bool)
            and pid > 0
            and isinstance(started, float | int)
            and isinstance(mem, int)
            and not isinstance(mem, bool)
            and mem >= 0
        ):
            raise store.CorruptRecord(path, f"reservation {k!r} is not one wf wrote: {v!r}")
    return data


def reserved() -> dict[str, dict[str, Any]]:
    """The live reservations: job id -> {mem, pid, pid_start, title}."""
    return {k: v for k, v in _read_ledger().items() if procs.alive_as(int(v["pid"]), float(v["pid_start"]))}


def reserve(
    job_id: str, title: str, mem: int, *, wait: bool, on_wait: Callable[[str], None] | None = None
) -> None:
    """Add ``mem`` to the ledger for this process, waiting for room (or refusing)."""
    room = budget()
    if mem > room:
        raise WfError(f"--mem {mem >> 20}M can never fit: wf may reserve {room >> 20}M here in all")
    said = False
    while True:
        with project_lock(ensure_state_dir(), timeout=30, name="res.lock"):
            live = reserved()
            used = sum(int(v.get("mem") or 0) for v in live.values())
            if used + mem <= room:
                me = {"mem": mem, "pid": os.getpid(), "pid_start": procs.started(os.getpid())}
                live[job_id] = {**me, "title": title}
                store.write_json(_ledger(), live)
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


def release(job_id: str) -> None:
    """Give back a job's reservation. A ledger that cannot be trusted is left as it is
    (every reservation refuses until wf doctor --fix moves it aside): the job has ended
    whatever the ledger says."""

    with project_lock(state_dir(), timeout=30, name="res.lock"):
        try:
            live = reserved()
        except store.CorruptRecord:
            return
        live.pop(job_id, None)
        store.write_json(_ledger(), live)


TERM_KILL = (signal.SIGTERM, signal.SIGKILL)


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}"
