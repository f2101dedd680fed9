"""Manifests: a JSON or TOML file of unit requests (``units``, or ``tasks`` as the
orchestrate design spells it) with optional ``defaults``."""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from pathlib import Path
from typing import Any

from wf import adapters
from wf.base import records as store
from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout.units import UnitRequest
from wf.tasks.taskfile import check_id
from wf.workers import runs

_UNIT_KEYS = (set(UnitRequest._fields) - {"retry_of", "retry", "access"}) | {
    "prompt_file",
    "clone",
    *adapters.ACCESS_KEYS,
}


def load_manifest(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise WfError(f"cannot read manifest {path}: {e.strerror}") from None
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        data = tomllib.loads(raw.decode("utf-8")) if kind == "TOML" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise WfError(f"{path.name}: not valid {kind}: {e}") from None
    if not isinstance(data, dict):
        raise WfError(f"{path.name}: expected a 'units' (or 'tasks') list and optional 'defaults'")
    if "units" in data and "tasks" in data:
        raise WfError(f"{path.name}: give 'units' or 'tasks' (the same list), not both")
    entries = data.get("units", data.get("tasks"))
    if not isinstance(entries, list):
        raise WfError(f"{path.name}: expected a 'units' (or 'tasks') list and optional 'defaults'")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise WfError(f"{path.name}: 'defaults' must be a table")
    return defaults, entries


def requests_from(path: Path, defaults: dict[str, Any], entries: list[dict[str, Any]]) -> list[UnitRequest]:
    out = []
    seen: set[str] = set()
    base = path.parent
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise WfError(f"{path.name}: unit {n} must be a table")
        merged = {**{k: v for k, v in defaults.items() if k != "max_parallel"}, **entry}
        unknown = set(merged) - _UNIT_KEYS
        if unknown:
            raise WfError(f"{path.name}: unit {n}: unknown keys {', '.join(sorted(unknown))}")
        uid = str(merged.get("id") or "")
        check_id(uid, "unit id")
        if uid in seen:
            raise WfError(f"{path.name}: unit id {uid} twice")
        seen.add(uid)
        prompt = merged.get("prompt")
        if "prompt_file" in merged:
            pf = Path(str(merged.pop("prompt_file")))
            pf = pf if pf.is_absolute() else base / pf
            try:
                prompt = pf.read_text("utf-8")
            except OSError as e:
                raise WfError(f"unit {uid}: cannot read prompt_file {pf}: {e.strerror}") from None
        if not isinstance(prompt, str) or not prompt.strip():
            raise WfError(f"{path.name}: unit {uid} needs a prompt or prompt_file")
        cmd = merged.get("cmd") or ()
        if isinstance(cmd, str):
            cmd = adapters.split_cmd(cmd)
        if not isinstance(cmd, (list, tuple)) or not all(isinstance(c, str) for c in cmd):
            raise WfError(f"{path.name}: unit {uid}: cmd must be an argv list of strings")
        cwd = merged.get("cwd")
        if cwd is not None and not Path(str(cwd)).is_absolute():
            cwd = str((base / str(cwd)).resolve())
        mode = merged.get("mode")
        if merged.get("clone"):
            if mode not in (None, "clone"):
                raise WfError(f"{path.name}: unit {uid}: clone = true and mode = {mode!r} disagree")
            mode = "clone"
        out.append(
            UnitRequest(
                id=uid,
                prompt=prompt,
                adapter=_str(merged.get("adapter"), uid, "adapter"),
                model=_str(merged.get("model"), uid, "model"),
                effort=_str(merged.get("effort"), uid, "effort"),
                timeout=_num(merged.get("timeout"), uid, "timeout"),
                stall=_num(merged.get("stall"), uid, "stall"),
                cwd=cwd,
                mode=_str(mode, uid, "mode"),
                resume_from=_str(merged.get("resume_from"), uid, "resume_from"),
                session=_str(merged.get("session"), uid, "session"),
                cmd=tuple(cmd),
                permission_mode=_str(merged.get("permission_mode"), uid, "permission_mode"),
                access={k: merged[k] for k in adapters.ACCESS_KEYS if k in merged},
            )
        )
    return out


def _str(v: Any, uid: str, what: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise WfError(f"unit {uid}: {what} must be a non-empty string")
    return v


def _num(v: Any, uid: str, what: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
        raise WfError(f"unit {uid}: {what} must be a positive number of seconds")
    return float(v)


def default_run_id(path: Path) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-") or "run"
    return f"{stem[:24]}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}"


def new_run(project: Project, name: str = "run") -> tuple[str, Path]:
    """A fresh, empty run folder (``wf runs new``): its id and its path."""
    stem = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:24] or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for n in range(1000):
        run = check_id(f"{stem}-{stamp}" + (f"-{n}" if n else ""), "run id")
        folder = runs.run_dir(project, run)
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            continue
        return run, folder
    raise WfError(f"no free run id for {stem}-{stamp}")


def save_requests(project: Project, run: str, reqs: list[UnitRequest]) -> None:
    """Remember a run's requests (``wf runs retry --missing`` finds what never started)."""
    folder = runs.run_dir(project, run)
    folder.mkdir(parents=True, exist_ok=True)
    known = {r.id: r for r in saved_requests(project, run)}
    known.update({r.id: r for r in reqs})
    saved = [r._asdict() for r in known.values()]
    store.write_json(folder / "manifest.json", saved, indent=None, durable=False)  # C encoder: one line


def saved_requests(project: Project, run: str) -> list[UnitRequest]:
    try:
        data = json.loads((runs.run_dir(project, run) / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for d in data if isinstance(data, list) else []:
        request = _request(d)
        if request is not None:
            out.append(request)
    return out


def _request(d: Any) -> UnitRequest | None:
    """A saved request, or None for an entry that is not one (wf wrote every entry, so a
    bad one was edited or damaged: it is skipped, never a crash of the reader)."""
    if not (isinstance(d, dict) and set(d) <= set(UnitRequest._fields)):
        return None
    if not (isinstance(d.get("id"), str) and isinstance(d.get("prompt"), str)):
        return None
    cmd = d.get("cmd") or ()
    if not (isinstance(cmd, list | tuple) and all(isinstance(c, str) for c in cmd)):
        return None
    return UnitRequest(**{**d, "cmd": tuple(cmd)})  # the keys are fields, id and prompt given
