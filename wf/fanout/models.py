"""The model a fan-out unit asks for, and why.

The point of fanning out is to spend cheaper or separate quota, so a unit that names no
model never runs on whatever its tool would pick (often the orchestrating session's own
expensive model). The model comes from, in order: the unit itself or the command line
(``explicit``), the manifest's ``defaults`` (``manifest``), wf.toml's ``[fanout] models``
(``config``), else wf's own fan-out default for the adapter (``default``: claude
``sonnet``; for the other tools their own default, no model passed). An expensive model
(``[fanout] expensive``, else the opus, fable and mythos families and ``best``; and the
model of the Claude Code session running wf, when its environment names one that is not
a sonnet or haiku model) is taken
only when named explicitly (``explicit`` or ``manifest``), never as a default.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import NamedTuple

from wf.base.config import Config
from wf.base.errors import WfError

DEFAULT_MODELS: dict[str, str] = {"claude": "sonnet"}  # other tools: their own default
EXPENSIVE = ("opus", "fable", "mythos", "best")  # parts of a model's name
_FAMILIES = ("opus", "sonnet", "haiku", "fable", "mythos")
CHEAP = ("sonnet", "haiku")  # a session on these spares nothing by keeping units off its model


class ModelSource(str, enum.Enum):  # noqa: UP042 - its value is what status.json records
    explicit = "explicit"  # the unit itself, or --model
    manifest = "manifest"  # the manifest's defaults
    config = "config"  # wf.toml [fanout] models
    default = "default"  # wf's fan-out default for the adapter


class Choice(NamedTuple):
    model: str | None  # None: no model passed, the tool's own default
    source: ModelSource


def _family(model: str) -> str | None:
    low = model.lower()
    return next((f for f in _FAMILIES if f in low), None)


def orchestrator_model(env: Mapping[str, str]) -> str | None:
    """The model of the Claude Code session wf runs in, when its environment names it
    (Claude Code sets CLAUDECODE=1 for its commands; ANTHROPIC_MODEL picks its model)."""
    if env.get("CLAUDECODE") == "1":
        return env.get("ANTHROPIC_MODEL") or None
    return None


def why_expensive(model: str, config: Config, env: Mapping[str, str]) -> str | None:
    """Why a model counts as expensive for a fan-out default (None: it does not)."""
    low = model.lower()
    listed = EXPENSIVE if config.fanout_expensive is None else config.fanout_expensive
    hit = next((e for e in listed if e.lower() in low), None)
    if hit is not None:
        where = "wf's list" if config.fanout_expensive is None else "wf.toml [fanout] expensive"
        return f"an expensive model ({hit!r} in {where})"
    session = orchestrator_model(env)
    if session and _family(session) in CHEAP:
        return None  # the session itself runs on a cheap model: sharing it spends nothing dear
    if session and (session == model or (_family(session) or "-") == _family(model)):
        return f"the model of the Claude Code session running wf (ANTHROPIC_MODEL={session})"
    return None


def choose(
    unit: str,
    adapter: str,
    model: str | None,
    source: ModelSource | None,
    config: Config,
    env: Mapping[str, str] | None = None,
) -> Choice:
    """The model for a unit on this adapter: the one it was given (with its source), else
    the configured or wf's fan-out default, which may never be an expensive one."""
    if model is not None:
        return Choice(model, source or ModelSource.explicit)
    configured = dict(config.fanout_models).get(adapter)
    choice = (
        Choice(configured, ModelSource.config)
        if configured
        else Choice(DEFAULT_MODELS.get(adapter), ModelSource.default)
    )
    if choice.model is None or adapter == "cmd":
        return choice
    why = why_expensive(choice.model, config, os.environ if env is None else env)
    if why:
        where = "wf.toml [fanout] models" if choice.source is ModelSource.config else "wf's fan-out default"
        raise WfError(
            f"unit {unit}: no model named, and {choice.model} ({where}) is {why}: a unit runs on it"
            f" only when named (the unit's model, the manifest's defaults, --model); or set"
            f' [fanout] models = {{{adapter} = "..."}} in wf.toml'
        )
    return choice
