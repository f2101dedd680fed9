"""Headless fan-out: ``wf dispatch``, ``wf run``, ``wf monitor``, ``wf gather`` and the
``wf runs`` views, on top of the adapters (how to start a tool) and the supervisor (how
to watch and stop it)."""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from wf import adapters, procs, runs
from wf.errors import WfError
from wf.project import Project
from wf.supervise import Unit, supervise
from wf.taskfile import check_id


class UnitRequest(NamedTuple):
    id: str
    prompt: str
    adapter: str | None = None
    model: str | None = None
    effort: str | None = None
    timeout: float | None = None
    stall: float | None = None
    cwd: str | None = None
    clone: bool = False
    resume_from: str | None = None
    cmd: tuple[str, ...] = ()
    permission_mode: str | None = None
    access: dict[str, Any] = {}  # noqa: RUF012 - never mutated; allowed_tools, sandbox, network, isolate_mcp, extra_args


def _clone_for(project: Project, folder: Path) -> tuple[Path, str]:
    """A throwaway clone of the repository (no remote, hooks off) at the main branch."""
    from wf import gitops, worktrees

    main = worktrees.main_branch(project)
    base = gitops.rev(project.root, main)
    if base is None:
        raise WfError(f"the main branch {main} has no commit to clone")
    dest = folder / "clone"
    gitops.clone_local(project.root, dest)
    gitops.fetch(dest, project.root, f"+refs/heads/{main}:refs/wf/base")
    gitops.detach(dest, base)
    return dest, base


def build_unit(project: Project, run: str, req: UnitRequest) -> Unit:
    """Validate a request and make its Unit (nothing runs yet)."""
    check_id(run, "run id")
    check_id(req.id, "unit id")
    folder = runs.unit_dir(project, run, req.id)
    if folder.exists():
        raise WfError(
            f"unit {req.id} already exists in run {run}; use --resume-from {req.id} for a follow-up"
        )
    meta: dict[str, Any] = {}
    session_id = None
    resume = False
    adapter_name = req.adapter
    cwd = Path(req.cwd).resolve() if req.cwd else project.root
    if req.resume_from:
        prior_dir = runs.unit_dir(project, run, check_id(req.resume_from, "unit id"))
        prior = runs.read_status(prior_dir)
        if prior is None:
            raise WfError(f"no unit {req.resume_from} in run {run} to resume from")
        if prior.get("state") not in runs.FINAL or procs.alive(prior.get("pid")):
            raise WfError(f"unit {req.resume_from} is still running; never resume a live session")
        session_id = prior.get("session_id")
        if not session_id:
            raise WfError(f"unit {req.resume_from} has no session id to resume")
        adapter_name = adapter_name or prior.get("adapter")
        if adapter_name != prior.get("adapter"):
            raise WfError(
                f"unit {req.resume_from} ran with {prior.get('adapter')}; a resume uses the same adapter"
            )
        cwd = Path(prior.get("cwd") or cwd)
        resume = True
        meta.update(resumed_from=req.resume_from, clone=prior.get("clone"), base=prior.get("base"))
        req = req._replace(
            cmd=req.cmd or tuple(prior.get("cmd") or ()), model=req.model or prior.get("model")
        )
    adapter = adapters.choose(adapter_name, None)
    if not cwd.is_dir():
        raise WfError(f"unit {req.id}: cwd {cwd} is not a folder")
    if req.clone and not resume:
        folder.mkdir(parents=True)
        cwd, base = _clone_for(project, folder)
        meta.update(clone=str(cwd), base=base)
    if adapter.name == "cmd":
        if not req.cmd:
            raise WfError(f"unit {req.id}: the cmd adapter needs a command (cmd in the manifest, or --cmd)")
        meta["cmd"] = list(req.cmd)
    elif adapter.executable() is None:
        raise WfError(f"{adapter.binary} is not installed (not on PATH); wf doctor lists the adapters")
    problems = adapters.vocabulary_problems(adapter.name, req.model, req.effort)
    if problems:  # e.g. codex asked for "sonnet", opencode with no provider/model
        raise WfError(f"unit {req.id}: {problems[0].message} ({problems[0].fix})")
    spec = adapters.Spec(
        run=run,
        unit=req.id,
        folder=folder,
        cwd=cwd,
        prompt=req.prompt,
        model=req.model,
        effort=req.effort,
        session_id=session_id,
        resume=resume,
        cmd=req.cmd,
        permission_mode=req.permission_mode or "acceptEdits",
        **adapters.access_fields(req.access),
    )
    return Unit(spec, adapter, timeout=req.timeout, stall=req.stall, meta=meta)


def end_line(u: Unit) -> str:
    st = u.status
    dur = st.get("duration_s")
    dur_s = f"{dur:.1f}s" if isinstance(dur, (int, float)) else "-"
    extra = " FALLBACK" if st.get("fallback") else ""
    return f"{st['unit']}: {st['state']} exit={st.get('exit_code')} {dur_s}{extra}"


def dispatch(
    project: Project, run: str, req: UnitRequest, on_end: Callable[[Unit], None] | None = None
) -> Unit:
    unit = build_unit(project, run, req)
    supervise([unit], 1, on_end=on_end)
    return unit


# ---------------------------------------------------------------- manifests

_UNIT_KEYS = (set(UnitRequest._fields) - {"access"}) | {"prompt_file", *adapters.ACCESS_KEYS}


def load_manifest(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise WfError(f"cannot read manifest {path}: {e.strerror}") from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise WfError(f"{path.name}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("units"), list):
        raise WfError(f"{path.name}: expected a 'units' list (and optional 'defaults')")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise WfError(f"{path.name}: 'defaults' must be a table")
    return defaults, data["units"]


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
        out.append(
            UnitRequest(
                id=uid,
                prompt=prompt,
                adapter=merged.get("adapter"),
                model=merged.get("model"),
                effort=merged.get("effort"),
                timeout=_num(merged.get("timeout"), uid, "timeout"),
                stall=_num(merged.get("stall"), uid, "stall"),
                cwd=cwd,
                clone=bool(merged.get("clone", False)),
                resume_from=merged.get("resume_from"),
                cmd=tuple(cmd),
                permission_mode=merged.get("permission_mode"),
                access={k: merged[k] for k in adapters.ACCESS_KEYS if k in merged},
            )
        )
    return out


def _num(v: Any, uid: str, what: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise WfError(f"unit {uid}: {what} must be a positive number of seconds")
    return float(v)


def default_run_id(path: Path) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-") or "run"
    return f"{stem[:24]}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}"


def run_manifest(
    project: Project,
    path: Path,
    *,
    run: str | None = None,
    max_parallel: int | None = None,
    on_end: Callable[[Unit], None] | None = None,
) -> tuple[str, list[Unit], bool]:
    defaults, entries = load_manifest(path)
    reqs = requests_from(path, defaults, entries)
    run = run or default_run_id(path)
    check_id(run, "run id")
    limit = max_parallel or int(defaults.get("max_parallel") or 4)
    units: list[Unit] = []
    by_id: dict[str, Unit] = {}
    for r in reqs:
        if r.resume_from and r.resume_from in {x.id for x in reqs}:
            raise WfError(
                f"unit {r.id}: resume_from a unit of the same manifest is not supported; run it after"
            )
        u = build_unit(project, run, r)
        units.append(u)
        by_id[r.id] = u
    completed = supervise(units, limit, on_end=on_end)
    return run, units, completed


# ---------------------------------------------------------------- watching


def status_line(st: dict[str, Any]) -> str:
    dur = st.get("duration_s")
    dur_s = f"{dur:.1f}s" if isinstance(dur, (int, float)) else "-"
    return (
        f"{st.get('unit')}: {st.get('state')} exit={st.get('exit_code')} {dur_s} "
        f"session={st.get('session_id') or '-'}{' FALLBACK' if st.get('fallback') else ''}"
    )


def lost(st: dict[str, Any]) -> bool:
    """A unit recorded as running whose worker and supervisor are both gone (wf was
    killed): nobody will ever finish its status."""
    if st.get("state") not in ("running", "queued"):
        return False
    return not procs.alive(st.get("pid")) and not procs.alive(st.get("supervisor"))


def monitor(
    project: Project, run: str, *, timeout: float | None, interval: float = 1.0
) -> tuple[int, list[str]]:
    """Wait for the first thing that needs attention: 0 all done, 3 a unit failed,
    stalled, timed out, was interrupted or was lost, 2 this monitor's own timeout."""
    start = time.monotonic()
    while True:
        units = runs.units(project, run)
        for u in units:
            if lost(u):
                u["state"] = "lost"
        bad = [u for u in units if u.get("state") in (*runs.ATTENTION, "lost")]
        if bad:
            return 3, [status_line(u) for u in units]
        if units and all(u.get("state") in runs.FINAL for u in units):
            return 0, [status_line(u) for u in units]
        if timeout is not None and time.monotonic() - start >= timeout:
            return 2, [status_line(u) for u in units]
        time.sleep(interval)


def gather(
    project: Project, run: str, *, quiet: float = 2.0, timeout: float | None = None, interval: float = 0.5
) -> tuple[bool, list[dict[str, Any]]]:
    """Wait until every unit has ended and its files have stopped changing for ``quiet``
    seconds; return (all landed, the unit statuses)."""
    start = time.monotonic()
    last_sig: tuple[Any, ...] | None = None
    stable_since = time.monotonic()
    while True:
        units = runs.units(project, run)
        sig = tuple(_signature(project, run, u) for u in units)
        now = time.monotonic()
        if sig != last_sig:
            last_sig = sig
            stable_since = now
        done = bool(units) and all(u.get("state") in runs.FINAL for u in units)
        if done and now - stable_since >= quiet:
            return True, units
        if timeout is not None and now - start >= timeout:
            return False, units
        time.sleep(interval)


def _signature(project: Project, run: str, st: dict[str, Any]) -> tuple[Any, ...]:
    folder = runs.unit_dir(project, run, str(st.get("unit")))
    sizes: list[tuple[int, int] | None] = []
    for name in ("output.txt", "status.json", "worker.log"):
        try:
            s = (folder / name).stat()
            sizes.append((s.st_size, s.st_mtime_ns))
        except OSError:
            sizes.append(None)
    return (st.get("unit"), st.get("state"), *sizes)


def diff(project: Project, run: str, unit: str) -> str:
    folder = runs.unit_dir(project, run, unit)
    st = runs.read_status(folder)
    if st is None:
        raise WfError(f"no unit {unit} in run {run}")
    if not st.get("clone"):
        raise WfError(f"unit {unit} did not run in a clone (--clone); its changes are in {st.get('cwd')}")
    from wf import gitops

    clone = Path(st["clone"])
    base = st.get("base") or "HEAD"
    text = gitops.out(clone, "diff", "--stat", "--patch", base)
    untracked = gitops.out(clone, "ls-files", "--others", "--exclude-standard")
    commits = gitops.out(clone, "log", "--oneline", f"{base}..HEAD")
    parts = []
    if commits.strip():
        parts.append("commits:\n" + commits.rstrip())
    if untracked.strip():
        parts.append("untracked:\n" + "\n".join(f"  {p}" for p in untracked.split()))
    parts.append(text.rstrip() or "(no changes)")
    return "\n\n".join(parts) + "\n"
