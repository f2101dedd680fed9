"""One unit request made ready to run: where it runs (its mode), which tool, which session.

Modes: ``scratch`` (the default: an empty folder ``scratch/`` inside the unit's run
folder), ``clone`` (a throwaway clone of the repository there) and ``cwd`` (a folder the
unit does not own, such as the main checkout: ``--cwd DIR``). A ``cwd`` unit inside a git
checkout has that checkout's uncommitted state noted before it starts, so the readers can
flag the changes it left there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from wf import adapters
from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout import models
from wf.tasks.taskfile import check_id
from wf.workers import procs, runs
from wf.workers.supervise import Unit

MODES = ("scratch", "clone", "cwd")
AUTO_ORDER = tuple(n for n in adapters.ADAPTERS if n != "cmd")  # the agent tools, in the registry's order
_SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


class UnitRequest(NamedTuple):
    id: str
    prompt: str
    adapter: str | None = None  # a name, "auto" (the first installed tool), None: $WF_ADAPTER or claude
    model: str | None = None
    model_source: str | None = None  # a models.ModelSource value: why this model (None: explicit)
    effort: str | None = None
    timeout: float | None = None
    stall: float | None = None
    cwd: str | None = None
    mode: str | None = None  # scratch | clone | cwd; None: cwd when cwd is given, else scratch
    resume_from: str | None = None  # a unit of the same run
    session: str | None = None  # a raw session (thread) id of the tool, to resume
    cmd: tuple[str, ...] = ()
    permission_mode: str | None = None
    retry_of: str | None = None
    retry: int = 0
    access: dict[str, Any] = {}  # noqa: RUF012 - never mutated; allowed_tools, sandbox, network, isolate_mcp, extra_args
    panel: str | None = None  # the panel (one question to several tools) this unit answers in
    contract: bool = True  # the prompt ends with the return contract, and the answer is checked against it
    sections: tuple[str, ...] = ()  # the contract's required sections; (): contract.SECTIONS


def adapter_named(name: str | None) -> adapters.Adapter:
    """The adapter for a unit: its name, else $WF_ADAPTER, else claude; "auto" is the
    first of claude, codex, opencode that is installed."""
    name = name or os.environ.get("WF_ADAPTER") or "claude"
    if name != "auto":
        return adapters.get(name)
    for candidate in AUTO_ORDER:
        a = adapters.get(candidate)
        if a.executable() is not None:
            return a
    raise WfError(f"adapter auto: none of {', '.join(AUTO_ORDER)} is installed (on PATH)")


def mode_of(req: UnitRequest, resume: bool = False) -> str:
    if req.mode is None:
        return "cwd" if req.cwd or req.session else "scratch"
    if req.mode not in MODES:
        raise WfError(f"unit {req.id}: mode {req.mode!r} is not one of {', '.join(MODES)}")
    if req.cwd and req.mode != "cwd" and not resume:
        raise WfError(f"unit {req.id}: cwd is only for mode cwd (not {req.mode})")
    return req.mode


def _clone_for(project: Project, folder: Path) -> tuple[Path, str]:
    """A throwaway clone of the repository (no remote, hooks off) at the main branch."""
    from wf.trees import gitops, worktrees

    main = worktrees.main_branch(project)
    base = gitops.rev(project.root, main)
    if base is None:
        raise WfError(f"the main branch {main} has no commit to clone")
    dest = folder / "clone"
    gitops.clone_local(project.root, dest)
    gitops.fetch(dest, project.root, f"+refs/heads/{main}:refs/wf/base")
    gitops.detach(dest, base)
    return dest, base


def checkout_of(folder: Path) -> Path | None:
    """The top of the git checkout that holds ``folder``, if any."""
    for d in (folder, *folder.parents):
        if (d / ".git").exists():
            return d
    return None


def checkout_state(top: Path) -> dict[str, list[int]]:
    """The uncommitted paths of a checkout with their size and mtime (deleted: -1)."""
    from wf.trees import gitops

    state: dict[str, list[int]] = {}
    for rel in gitops.dirty_paths(top):
        try:
            s = (top / rel).stat()
            state[rel] = [s.st_size, s.st_mtime_ns]
        except OSError:
            state[rel] = [-1, -1]
    return state


def left_changes(status: dict[str, Any]) -> list[str] | None:
    """Paths of the checkout a ``cwd`` unit ran in that changed while it ran (None: not
    checked)."""
    top, before = status.get("checkout"), status.get("checkout_before")
    if not top or not isinstance(before, dict):
        return None
    try:
        after = checkout_state(Path(top))
    except WfError:
        return None
    changed = {p for p, v in after.items() if before.get(p) != v}
    changed |= {p for p in before if p not in after}
    return sorted(changed)


def _resume_meta(project: Project, run: str, req: UnitRequest) -> tuple[UnitRequest, dict[str, Any], str]:
    prior_dir = runs.unit_dir(project, run, check_id(str(req.resume_from), "unit id"))
    prior = runs.read_status(prior_dir)
    if prior is None:
        raise WfError(f"no unit {req.resume_from} in run {run} to resume from")
    if prior.get("state") not in runs.FINAL or procs.alive(prior.get("pid")):
        raise WfError(f"unit {req.resume_from} is still running; never resume a live session")
    session_id = prior.get("session_id")
    if not session_id:
        raise WfError(f"unit {req.resume_from} has no session id to resume")
    name = req.adapter or prior.get("adapter")
    if name != prior.get("adapter"):
        raise WfError(
            f"unit {req.resume_from} ran with {prior.get('adapter')}; a resume uses the same adapter"
        )
    prior_mode = prior.get("mode") or ("clone" if prior.get("clone") else "cwd")
    meta = {"resumed_from": req.resume_from, "clone": prior.get("clone"), "base": prior.get("base")}
    req = req._replace(
        adapter=name,
        cmd=req.cmd or tuple(prior.get("cmd") or ()),
        model=req.model or adapters.a_model(prior.get("model")),  # never <synthetic> from an old record
        model_source=req.model_source if req.model else prior.get("model_source"),
        mode=prior_mode,
        cwd=prior.get("cwd"),
    )
    return req, meta, str(session_id)


def prompt_of(req: UnitRequest, meta: dict[str, Any]) -> str:
    """The prompt a unit is given: ending with the return contract, unless it is off;
    ``meta`` (its status.json) records the contract: its required sections, or False."""
    if not req.contract:
        meta["contract"] = False
        return req.prompt
    from wf.fanout import contract

    required = req.sections or contract.SECTIONS
    meta["contract"] = list(required)
    return contract.with_contract(req.prompt, required)


def _with_model(project: Project, adapter: str, req: UnitRequest, meta: dict[str, Any]) -> UnitRequest:
    """The request with the model it runs on (models.choose); why, noted in ``meta``."""
    try:
        source = models.ModelSource(req.model_source) if req.model_source else None
    except ValueError:  # an edited saved request: the model it names counts as named
        source = None
    picked = models.choose(req.id, adapter, req.model, source, project.config)
    meta.update(model_asked=picked.model, model_source=picked.source.value)
    return req._replace(model=picked.model)


def build_unit(project: Project, run: str, req: UnitRequest) -> Unit:
    """Validate a request and make its Unit (nothing runs yet)."""
    check_id(run, "run id")
    check_id(req.id, "unit id")
    folder = runs.unit_dir(project, run, req.id)
    if folder.exists():
        raise WfError(
            f"unit {req.id} already exists in run {run}; use --resume-from {req.id} for a follow-up"
            f" or wf runs retry {run} {req.id}"
        )
    meta: dict[str, Any] = {"project": project.root.name}
    session_id: str | None = None
    resume = False
    if req.resume_from and req.session:
        raise WfError(f"unit {req.id}: resume_from and session exclude each other")
    if req.resume_from:
        req, more, session_id = _resume_meta(project, run, req)
        meta.update(more)
        resume = True
    elif req.session:
        if not _SESSION_RE.fullmatch(req.session):
            raise WfError(f"unit {req.id}: bad session id {req.session!r}")
        session_id, resume = req.session, True
        meta["session_given"] = True
    mode = mode_of(req, resume and not req.session)
    adapter = adapter_named(req.adapter)
    if adapter.name == "cmd":
        if not req.cmd:
            raise WfError(f"unit {req.id}: the cmd adapter needs a command (cmd in the manifest, or --cmd)")
        meta["cmd"] = list(req.cmd)
    elif adapter.executable() is None:
        raise WfError(f"{adapter.binary} is not installed (not on PATH); wf doctor lists the adapters")
    req = _with_model(project, adapter.name, req, meta)
    problems = adapters.vocabulary_problems(adapter.name, req.model, req.effort)
    if problems:  # e.g. codex asked for "sonnet", opencode with no provider/model
        raise WfError(f"unit {req.id}: {problems[0].message} ({problems[0].fix})")
    access = adapters.access_fields(req.access)
    permission_mode = req.permission_mode or "acceptEdits"
    probe = adapters.Spec(run, req.id, folder, folder, "", permission_mode=permission_mode, **access)
    refused = adapter.access_problems(probe)
    if refused:  # e.g. read-only asked of a tool that cannot enforce it: never run it wider
        raise WfError(f"unit {req.id}: {refused[0]}")
    meta.update(mode=mode)
    if req.retry_of:
        meta.update(retry_of=req.retry_of, retry=req.retry)
    if req.permission_mode:
        meta["permission_mode"] = req.permission_mode
    if req.panel:
        meta["panel"] = check_id(req.panel, "panel id")
    if mode == "cwd":
        cwd = Path(req.cwd).resolve() if req.cwd else project.root
        if not cwd.is_dir():
            raise WfError(f"unit {req.id}: cwd {cwd} is not a folder")
        top = checkout_of(cwd)
        if top is not None:
            meta.update(checkout=str(top), checkout_before=checkout_state(top))
    elif resume:
        cwd = Path(str(req.cwd))
    elif mode == "clone":
        folder.mkdir(parents=True)
        cwd, base = _clone_for(project, folder)
        meta.update(clone=str(cwd), base=base)
    else:
        cwd = folder / "scratch"
        cwd.mkdir(parents=True)
    spec = adapters.Spec(
        run=run,
        unit=req.id,
        folder=folder,
        cwd=cwd,
        prompt=prompt_of(req, meta),
        model=req.model,
        effort=req.effort,
        session_id=session_id,
        resume=resume,
        cmd=req.cmd,
        permission_mode=permission_mode,
        **access,
    )
    return Unit(spec, adapter, timeout=req.timeout, stall=req.stall, meta=meta)
