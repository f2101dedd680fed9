"""Where ``wf res`` enforces its limits: the backends, tried in order.

1. ``systemd-run --user --scope`` with ``MemoryMax``, ``CPUQuota`` and ``RuntimeMaxSec``,
   where a user service manager answers;
2. a cgroup v2 folder wf may create and write (memory.max, cpu.max) under its own cgroup;
3. the watchdog alone: wf samples the tree's summed RSS every second and ends it past
   the memory cap or the deadline (containers, CI).

The watchdog runs in every case (it measures the tree and keeps the deadline); the first
two add a limit the kernel enforces. Each backend that was skipped is named with why.
"""

from __future__ import annotations

import enum
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from wf.base.errors import WfError

BACKEND_VAR = "WF_RES_BACKEND"  # force one: systemd, cgroup or watchdog
CGROUP_VAR = "WF_RES_CGROUP"  # the cgroup v2 folder to make job folders in (default: wf's own)


class Backend(enum.StrEnum):
    SYSTEMD = "systemd"
    CGROUP = "cgroup"
    WATCHDOG = "watchdog"


@dataclass(frozen=True)
class Limits:
    mem: int | None = None  # bytes, the whole tree
    cpus: float | None = None  # cores' worth
    for_s: float | None = None  # wall time, seconds

    def as_dict(self) -> dict[str, float | int | None]:
        return {"mem": self.mem, "cpus": self.cpus, "for": self.for_s}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Limits:
        if not isinstance(d, dict):
            raise TypeError("limits: not a JSON object")

        def num(v: object) -> float | None:
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        mem = num(d.get("mem"))
        return cls(int(mem) if mem is not None else None, num(d.get("cpus")), num(d.get("for")))


@dataclass(frozen=True)
class Plan:
    """How a command will run: the backend, the argv as started, what was skipped."""

    backend: Backend
    argv: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    cgroup: str | None = None  # the parent folder for the cgroup backend
    notes: tuple[str, ...] = ()


def _systemd_answers() -> str | None:
    """None when a user service manager answers, else why not."""
    if shutil.which("systemd-run") is None or shutil.which("systemctl") is None:
        return "systemd-run is not installed"
    try:
        p = subprocess.run(
            ["systemctl", "--user", "show-environment"],
            capture_output=True,
            text=True,
            timeout=3,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"systemctl --user did not answer ({e})"
    if p.returncode != 0:
        err = " ".join(p.stderr.split())[:100] or f"exit {p.returncode}"
        return f"no user service manager answers ({err})"
    return None


def cgroup_folder() -> tuple[Path | None, str]:
    """This process's cgroup v2 folder (or $WF_RES_CGROUP's, a delegated one) if wf may
    make children with a memory limit in it, else None and why not."""
    given = os.environ.get(CGROUP_VAR, "").strip()
    if given:
        if not os.path.isabs(given):
            return None, f"{CGROUP_VAR}={given!r} is not an absolute path"
        return _delegates(Path(given))
    try:
        own = next(
            line[3:].strip()
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return None, "no cgroup v2 entry in /proc/self/cgroup"
    mount = None
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split(" ", 1)[0] == "cgroup2":
                mount = left.split()[4]
                break
    except OSError:
        pass
    if mount is None:
        return None, "no cgroup v2 file system is mounted"
    return _delegates(Path(mount) / own.lstrip("/"))


def _delegates(folder: Path) -> tuple[Path | None, str]:
    try:
        controllers = (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None, f"{folder} cannot be read"
    if "memory" not in controllers:
        return None, f"{folder} does not delegate the memory controller to its children"
    if not os.access(folder, os.W_OK):
        return None, f"{folder} is not writable"
    return folder, ""


def plan(argv: list[str], limits: Limits, job_id: str) -> Plan:
    """Choose the backend (the first that works here) and say why the others were skipped."""
    forced = os.environ.get(BACKEND_VAR, "").strip().lower()
    skipped: dict[str, str] = {}
    order = list(Backend)
    if forced:
        if forced not in {b.value for b in Backend}:
            from wf.base.errors import UsageError

            raise UsageError(f"{BACKEND_VAR}={forced!r}: expected systemd, cgroup or watchdog")
        for b in order:
            if b.value != forced:
                skipped[b.value] = f"{BACKEND_VAR}={forced}"
        order = [Backend(forced)]
    notes: list[str] = []
    for backend in order:
        if backend is Backend.SYSTEMD:
            why = _systemd_answers()
            if why:
                skipped[backend.value] = why
                continue
            props: list[str] = []
            if limits.mem:
                props += ["-p", f"MemoryMax={limits.mem}", "-p", "MemorySwapMax=0"]
            if limits.cpus:
                props += ["-p", f"CPUQuota={math.ceil(limits.cpus * 100)}%"]
            if limits.for_s:  # a backstop: the watchdog keeps the deadline itself, with a grace
                props += ["-p", f"RuntimeMaxSec={math.ceil(limits.for_s) + 60}"]
            wrapped = ["systemd-run", "--user", "--scope", "--quiet", "--collect", f"--unit=wf-res-{job_id}"]
            return Plan(backend, (*wrapped, *props, "--", *argv), skipped)
        if backend is Backend.CGROUP:
            folder, why = cgroup_folder()
            if folder is None:
                skipped[backend.value] = why
                continue
            return Plan(backend, tuple(argv), skipped, cgroup=str(folder / f"wf-{job_id}"))
        if limits.cpus:
            notes.append(f"cpus: pinned to {cores_for(limits.cpus)} core(s) (the watchdog cannot throttle)")
        return Plan(Backend.WATCHDOG, tuple(argv), skipped, notes=tuple(notes))
    # only a forced backend can fail here (the watchdog always works)
    raise WfError(f"{BACKEND_VAR}={forced}: that backend does not work here: {skipped.get(forced, '?')}")


def cores_for(cpus: float) -> int:
    try:
        have = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        have = os.cpu_count() or 1
    return max(1, min(have, math.ceil(cpus)))


def pin(cpus: float) -> None:
    """In the child before exec: run on ``ceil(cpus)`` of the allowed cores."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, allowed[: cores_for(cpus)])
    except (AttributeError, OSError):
        pass


# ------------------------------------------------------------------ the cgroup backend


def cgroup_make(folder: str, limits: Limits) -> None:
    path = Path(folder)
    path.mkdir(exist_ok=True)
    if limits.mem:
        (path / "memory.max").write_text(str(limits.mem))
        swap = path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")
    if limits.cpus and (path / "cpu.max").exists():
        (path / "cpu.max").write_text(f"{math.ceil(limits.cpus * 100000)} 100000")


def cgroup_join(folder: str) -> None:
    """In the child before exec: move itself into the job's cgroup."""
    with open(Path(folder) / "cgroup.procs", "w") as f:
        f.write("0")


def cgroup_end(folder: str) -> tuple[bool, int]:
    """Whether the kernel's OOM killer acted in the job's cgroup, and its memory peak
    (0 if unknown); then remove the folder."""
    path = Path(folder)
    oom = False
    peak = 0
    try:
        for line in (path / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value or 0) > 0:
                oom = True
    except (OSError, ValueError):
        pass
    try:
        peak = int((path / "memory.peak").read_text().strip())
    except (OSError, ValueError):
        pass
    try:
        path.rmdir()
    except OSError:
        pass
    return oom, peak
