"""Run folders: ``.wf/runs/<run>/<unit>/`` holds everything about one headless unit.

| file | what |
|---|---|
| prompt.txt | the prompt the worker got |
| worker.log | its standard output, the raw event stream |
| worker.err | its standard error |
| output.txt | the clean final answer (or a FALLBACK made from the log's tail) |
| session.txt | the session id, as soon as it is known (not for a cmd unit: status.json has it) |
| status.json | unit, adapter, model, mode, state, failure, times, session, lineage, cwd, pid, usage, cost |
| scratch/ | where a unit of mode scratch (the default) runs |

``.wf/runs/<run>/manifest.json`` keeps the requests of a ``wf run`` (for ``--missing``).

Every file wf writes here is written atomically (temporary file, rename), so a run folder
can be read while the run goes on. Only what must survive a crash is also fsynced: the
final status.json and the answer (or its FALLBACK); intermediate updates are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.base import records
from wf.base.errors import WfError
from wf.base.fsutil import atomic_write
from wf.base.project import Project
from wf.base.stamps import now_iso as now_iso  # the stamps of status.json
from wf.tasks.taskfile import check_id

CORRUPT = "corrupt"  # what readers show for a unit whose status.json cannot be trusted
FINAL = ("done", "failed", "stalled", "timeout", "interrupted", "killed", "lost", CORRUPT)
ATTENTION = ("failed", "stalled", "timeout", "interrupted", "killed", "lost", CORRUPT)
CORRUPT_FIX = (
    "repair that file, or move the unit's folder away and run it again (wf runs retry RUN --missing)"
)
LIVE = ("queued", "running")
STATES = (*LIVE, *FINAL)


@dataclass(frozen=True)
class UnitCore:
    """The fields of a unit's status.json that every reader relies on (the record
    holds more; they are read as they are)."""

    run: str
    unit: str
    state: str
    adapter: str


def runs_dir(project: Project) -> Path:
    return project.wf_dir / "runs"


def run_dir(project: Project, run: str) -> Path:
    return runs_dir(project) / check_id(run, "run id")


def unit_dir(project: Project, run: str, unit: str) -> Path:
    return run_dir(project, run) / check_id(unit, "unit id")


def write_file(path: Path, data: bytes, *, durable: bool, dir_sync: bool | None = None) -> None:
    """wf's one atomic write (``fsutil.atomic_write``) for a run folder: readers see the
    old or the new file, never half of one. ``durable`` adds the fsyncs (file, then
    folder) that make it survive a crash of the machine; intermediate bookkeeping skips
    them. ``dir_sync=False`` leaves the folder's fsync to a durable write that follows in
    the same folder. A run folder that is gone is not made anew."""
    atomic_write(path, data, durable=durable, dir_sync=dir_sync, make_dirs=False)


def write_new(path: Path, data: bytes) -> None:
    """A file of a unit nobody can see yet (its status.json, written after it, is what
    makes a unit visible): written in place, no temporary file, no rename."""
    with open(path, "wb") as f:
        f.write(data)


def stdin_file(folder: Path, data: bytes) -> Any:
    """A worker's stdin: its prompt.txt, opened read-only, when that holds exactly
    ``data`` (no second file for the same bytes); else an unlinked copy in ``folder``."""
    try:
        f = open(folder / "prompt.txt", "rb")  # noqa: SIM115 - the worker's stdin, closed by the caller
    except OSError:
        f = None
    if f is not None:
        if f.read(len(data) + 1) == data:
            f.seek(0)
            return f
        f.close()
    import tempfile  # only for an adapter whose stdin is not its prompt

    copy = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 - closed by the caller
    copy.write(data)
    copy.flush()
    copy.seek(0)
    return copy


def write_status(folder: Path, status: dict[str, Any], *, durable: bool = False) -> None:
    """``finite=False``: the status holds what the worker reported (a cost it printed as
    NaN); read_status takes it, and a worker's odd number must not crash its supervisor."""
    path = folder / "status.json"
    records.write_json(path, status, indent=None, durable=durable, make_dirs=False, finite=False)


class CorruptStatus(records.CorruptRecord):
    """A unit's status.json that cannot be trusted (unreadable, not JSON, no core
    fields, an unknown state, or it names another unit). Readers show such a unit as
    ``corrupt``; nothing moves it aside (the unit would vanish from every reader)."""

    def __init__(self, path: Path, why: str) -> None:
        WfError.__init__(self, f"{path}: cannot be trusted ({why}); {CORRUPT_FIX}")
        self.path = path
        self.why = why


def read_status(folder: Path) -> dict[str, Any] | None:
    """A unit's status.json; None only when there is none (yet). One that cannot be read,
    is not JSON, or lacks the core fields raises CorruptStatus: never read as "none"."""
    path = folder / "status.json"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CorruptStatus(path, f"cannot read it: {e.strerror or e}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
        core = records.from_dict(UnitCore, data, path)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptStatus(path, f"not JSON: {e}") from None
    except records.CorruptRecord as e:
        raise CorruptStatus(path, e.why) from None
    if core.state not in STATES or (core.run, core.unit) != (folder.parent.name, folder.name):
        why = f"unknown state {core.state!r}" if core.state not in STATES else "it names another unit"
        raise CorruptStatus(path, why)
    return dict(data)


def corrupt_unit(run: str, folder: Path, why: str) -> dict[str, Any]:
    """What readers show for a unit whose status.json cannot be trusted."""
    return {"run": run, "unit": folder.name, "state": CORRUPT, "adapter": "?", "failure": None,
            "reason": f"status.json cannot be trusted: {why}", "error": why, "exit_code": None}  # fmt: skip


def units(project: Project, run: str) -> list[dict[str, Any]]:
    folder = run_dir(project, run)
    if not folder.is_dir():
        raise WfError(f"no run {run!r} (wf runs lists them)")
    out = []
    for d in sorted(folder.iterdir()):
        if not d.is_dir():
            continue
        try:
            st = read_status(d)
        except CorruptStatus as e:
            st = corrupt_unit(run, d, e.why)
        if st is not None:
            out.append(st)
    return out


def all_runs(project: Project) -> list[tuple[str, float]]:
    folder = runs_dir(project)
    if not folder.is_dir():
        return []
    found = [(d.name, d.stat().st_mtime) for d in folder.iterdir() if d.is_dir()]
    return sorted(found, key=lambda x: x[1], reverse=True)


def preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def answered_after_signal(folder: Path) -> bool:
    """Whether wf signalled the unit's tree (``procs.mark_signalled``) before its worker
    last wrote where its answer comes from (its stdout, its answer file): what it said
    then answers the signal (a child's "wf: interrupted"), not the task. A write in the
    same clock tick as the mark counts as after it: a crash recovered in place loses
    nothing, a false handback parks a task for a person."""
    from wf.workers.procs import SIGNALLED

    try:
        mark = (folder / SIGNALLED).stat().st_mtime_ns
    except OSError:
        return False
    names = ["worker.log", "answer.out"]
    try:
        if (read_status(folder) or {}).get("answer") == "output_file":
            names.append("output.txt")  # written by the worker itself (codex -o, answer.out)
    except WfError:
        names.append("output.txt")
    for name in names:
        try:
            if (folder / name).stat().st_mtime_ns >= mark:
                return True
        except OSError:
            continue
    return False


def read_output(folder: Path) -> str:
    try:
        return (folder / "output.txt").read_text("utf-8", errors="replace")
    except OSError:
        return ""
