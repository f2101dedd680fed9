"""Run folders: ``.wf/runs/<run>/<unit>/`` holds everything about one headless unit.

| file | what |
|---|---|
| prompt.txt | the prompt the worker got |
| worker.log | its standard output, the raw event stream |
| worker.err | its standard error |
| output.txt | the clean final answer (or a FALLBACK made from the log's tail) |
| session.txt | the session id, as soon as it is known |
| status.json | unit, adapter, model, state, exit code, times, session, lineage, cwd, pid, usage |

Every file wf writes here is written atomically, so a run folder can be read while the
run goes on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from wf.errors import WfError
from wf.fsutil import atomic_write_text
from wf.project import Project
from wf.taskfile import check_id

FINAL = ("done", "failed", "stalled", "timeout", "interrupted", "killed")
ATTENTION = ("failed", "stalled", "timeout", "interrupted", "killed")


def runs_dir(project: Project) -> Path:
    return project.wf_dir / "runs"


def unit_dir(project: Project, run: str, unit: str) -> Path:
    return runs_dir(project) / check_id(run, "run id") / check_id(unit, "unit id")


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_status(folder: Path, status: dict[str, Any]) -> None:
    atomic_write_text(folder / "status.json", json.dumps(status, indent=1, sort_keys=False) + "\n")


def read_status(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "status.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def units(project: Project, run: str) -> list[dict[str, Any]]:
    folder = runs_dir(project) / check_id(run, "run id")
    if not folder.is_dir():
        raise WfError(f"no run {run!r} (wf runs lists them)")
    out = []
    for d in sorted(folder.iterdir()):
        st = read_status(d) if d.is_dir() else None
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


def read_output(folder: Path) -> str:
    try:
        return (folder / "output.txt").read_text("utf-8", errors="replace")
    except OSError:
        return ""
