"""Worker adapters: how to start Claude Code, Codex, opencode or any command headless,
how to read what they print, and why they failed.

One module per tool (``claude``, ``codex``, ``opencode``, ``cmd``), each owning its argv,
its event parser, its failure classification, its login probe and its model and effort
vocabulary; ``base`` holds what they share, ``limits`` a plan's usage limit (its
reset and window), ``versions`` the tool versions wf is tested with. This module is the registry, the checks
run before a lane's first worker (:func:`preflight`), the one-line description of
a unit's end (:func:`describe`) and a session's cost read where its tool keeps it
(:func:`session_cost`).

May import: ``wf.base``, ``wf.cost`` (each adapter reads its transcripts with the readers
there); the cost package never imports an adapter.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any

from wf.adapters.base import (
    SANDBOXES,
    Adapter,
    Denial,
    Failure,
    Parsed,
    Problem,
    Spec,
    a_model,
    denied_words,
    one_line,
    parse_line,
)
from wf.adapters.claude import Claude
from wf.adapters.cmd import Command
from wf.adapters.codex import Codex
from wf.adapters.opencode import Opencode
from wf.base.config import PERMISSION_MODES
from wf.base.errors import WfError

if TYPE_CHECKING:
    from wf.cost.usage import Cost

__all__ = [
    "ADAPTERS",
    "PERMISSION_MODES",
    "SANDBOXES",
    "Adapter",
    "Denial",
    "Failure",
    "Parsed",
    "Problem",
    "Spec",
    "a_model",
    "access_fields",
    "choose",
    "describe",
    "get",
    "lane_access",
    "lane_model_for",
    "lane_problems",
    "parse_line",
    "preflight",
    "session_cost",
    "split_cmd",
]

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (Claude(), Codex(), Opencode(), Command())}


def get(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise WfError(f"unknown adapter {name!r}: expected one of {', '.join(ADAPTERS)}") from None


def session_cost(adapter: str, session_id: str | None) -> tuple[Cost, str] | None:
    """The transcript cost of a headless unit's session, read where its tool keeps it
    (each adapter knows), when it is found."""
    if not session_id or adapter not in ADAPTERS:
        return None
    return ADAPTERS[adapter].cost(session_id)


def choose(unit: str | None, lane: str | None, default: str = "claude") -> Adapter:
    """Per unit, else per lane, else $WF_ADAPTER, else the default."""
    return get(unit or lane or os.environ.get("WF_ADAPTER") or default)


def split_cmd(line: str) -> tuple[str, ...]:
    """A command line split the way a shell splits words (no shell runs it)."""
    try:
        parts = tuple(shlex.split(line))
    except ValueError as e:
        raise WfError(f"bad --cmd {line!r}: {e}") from None
    if not parts:
        raise WfError("--cmd is empty")
    return parts


# ---------------------------------------------------------------- before a lane starts


def vocabulary_problems(adapter_name: str, model: str | None, effort: str | None) -> list[Problem]:
    """The model and effort checked against the tool's vocabulary (no process runs)."""
    a = get(adapter_name)
    out = []
    why = a.model_problem(model)
    if why:
        out.append(
            Problem(Failure.model, why, f'give the lane a {a.name} model: models = {{{a.name} = "..."}}')
        )
    why = a.effort_problem(effort)
    if why:
        fix = f"use one of {', '.join(a.efforts)}" if a.efforts else "drop effort for this lane"
        out.append(Problem(Failure.model, why, fix))
    return out


def preflight(
    adapter_name: str, model: str | None, effort: str | None, *, cmd: tuple[str, ...] = ()
) -> list[Problem]:
    """What keeps a lane's worker from running, found before anything is claimed: the
    program resolves, the tool is logged in (its own offline probe, asked once per
    process), the model fits the tool, the effort is one it takes."""
    import shutil

    a = get(adapter_name)
    out: list[Problem] = []
    if a.name == "cmd":
        if not cmd:
            out.append(
                Problem(Failure.tool, "the cmd adapter has no command", 'give the lane cmd = ["prog", ...]')
            )
        elif shutil.which(cmd[0]) is None and not (os.sep in cmd[0] and os.access(cmd[0], os.X_OK)):
            out.append(Problem(Failure.tool, f"{cmd[0]} is not an executable program", "fix the lane's cmd"))
        return out
    out += vocabulary_problems(a.name, model, effort)
    if a.executable() is None:
        out.append(
            Problem(
                Failure.tool, f"{a.binary} is not installed (not on PATH)", f"install {a.binary}; wf doctor"
            )
        )
        return out
    state, words = a.login(model)
    if state is False:
        said = f": {words}" if words else ""
        out.append(Problem(Failure.auth, f"{a.name} is not logged in{said}", a.login_fix))
    return out


def lane_model_for(lane_cfg: Any, adapter_name: str) -> str | None:
    """The model a lane asks of this adapter: its ``models`` entry for it, else its own
    model when the lane runs that adapter or the model fits it; None: the lane has no
    model for this tool (refuse)."""
    models = dict(getattr(lane_cfg, "models", ()) or ())
    if adapter_name in models:
        return str(models[adapter_name])
    model = getattr(lane_cfg, "model", None)
    if adapter_name == "cmd":
        return model
    if model and (
        getattr(lane_cfg, "adapter", None) == adapter_name or get(adapter_name).model_problem(model) is None
    ):
        return str(model)
    return None


def lane_problems(lane_cfg: Any) -> list[Problem]:
    """A lane's settings checked against its adapter (and each per-adapter model
    against its own adapter): what ``wf check`` and ``wf doctor`` report."""
    adapter = getattr(lane_cfg, "adapter", "claude")
    out = []
    if adapter != "cmd":
        out += vocabulary_problems(
            adapter, lane_model_for(lane_cfg, adapter), getattr(lane_cfg, "effort", None)
        )
    for name, model in dict(getattr(lane_cfg, "models", ()) or ()).items():
        if name != adapter:
            out += [p for p in vocabulary_problems(name, model, None)]
    spec = access_spec(lane_cfg)
    out += [
        Problem(Failure.tool, why, "fix the lane's tool access") for why in get(adapter).access_problems(spec)
    ]
    return out


ACCESS_KEYS = ("allowed_tools", "sandbox", "network", "isolate_mcp", "extra_args")


def access_fields(given: dict[str, Any]) -> dict[str, Any]:
    """A unit's tool access from a manifest entry (keys of ACCESS_KEYS), validated, as
    Spec keyword arguments."""
    out: dict[str, Any] = {}
    for key in ("allowed_tools", "extra_args"):
        if key in given:
            v = given[key]
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise WfError(f"{key} must be a list of strings")
            out[key] = tuple(v)
    if "sandbox" in given:
        if given["sandbox"] not in SANDBOXES:
            raise WfError(f"sandbox must be one of {', '.join(SANDBOXES)}, not {given['sandbox']!r}")
        out["sandbox"] = given["sandbox"]
    for key in ("network", "isolate_mcp"):
        if key in given:
            if not isinstance(given[key], bool):
                raise WfError(f"{key} must be true or false")
            out[key] = given[key]
    return out


def lane_access(lane_cfg: Any) -> dict[str, Any]:
    """A lane's tool access as Spec keyword arguments (for the loop that builds its Spec)."""
    spec = access_spec(lane_cfg)
    return {k: getattr(spec, k) for k in ("permission_mode", *ACCESS_KEYS)}


def access_spec(lane_cfg: Any) -> Spec:
    """A Spec carrying only a lane's tool access (for checks)."""
    from pathlib import Path

    return Spec(
        run="check",
        unit="check",
        folder=Path("."),
        cwd=Path("."),
        prompt="",
        permission_mode=getattr(lane_cfg, "permission_mode", "acceptEdits"),
        allowed_tools=tuple(getattr(lane_cfg, "allowed_tools", ())),
        sandbox=getattr(lane_cfg, "sandbox", None) or "workspace-write",
        network=bool(getattr(lane_cfg, "network", False)),
        isolate_mcp=bool(getattr(lane_cfg, "isolate_mcp", False)),
        extra_args=tuple(getattr(lane_cfg, "extra_args", ())),
    )


# ---------------------------------------------------------------- after a unit ends


def describe(status: dict[str, Any]) -> str:
    """A unit's end in words a person reads: ``done``, ``failed auth: Not logged in ·
    Please run /login``, ``stalled: no model event for 720s``."""
    state = str(status.get("state") or "?")
    failure = status.get("failure")
    reason = one_line(status.get("reason") or (status.get("error") if state != "done" else None), 200)
    head = (
        state if not failure or failure in (state, {"stalled": "stall"}.get(state)) else f"{state} {failure}"
    )
    refused = [d for d in map(Denial.from_json, status.get("denied") or []) if d is not None]
    denied = f" ({denied_words(str(status.get('adapter') or 'the tool'), refused)})"
    if state in ("queued", "running", "done") and not failure:
        return head + (denied if refused else "")
    out = f"{head}: {reason}" if reason else head
    return out + (denied if refused else "")
