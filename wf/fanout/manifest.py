"""Manifests: a JSON or TOML file of unit requests (``units``, or ``tasks`` as the
orchestrate design spells it) with optional ``defaults``; the requests of a panel (one
question to several tools, ``wf run --panel`` or units sharing a ``panel`` key)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wf import adapters
from wf.base import records as store
from wf.base.errors import UsageError, WfError
from wf.base.ids import ID_HELP, valid_id
from wf.base.project import Project
from wf.fanout import prompts
from wf.fanout.units import UnitRequest
from wf.tasks.taskfile import check_id
from wf.workers import runs

_UNIT_KEYS = (set(UnitRequest._fields) - {"retry_of", "retry", "access"}) | {
    "prompt_file",
    "clone",
    "required_sections",
    "template",
    "vars",
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


def requests_from(
    path: Path,
    defaults: dict[str, Any],
    entries: list[dict[str, Any]],
    answer: Callable[[str], str] | None = None,
    given: dict[str, Any] | None = None,
) -> list[UnitRequest]:
    """The requests of a manifest's units; ``answer(unit)`` reads the answer of a unit of
    the run, for a template's var given as ``{"unit": "ID"}``. ``given``: manifest keys
    from the command line (``wf run --model ... --sandbox ...``), defaults for every unit
    that replace the manifest's own ``defaults`` but never a key the unit sets itself."""
    given = given or {}
    out = []
    seen: set[str] = set()
    base = path.parent
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise WfError(f"{path.name}: unit {n} must be a table")
        merged = _merged(path, n, defaults, given, entry)
        unknown = set(merged) - _UNIT_KEYS
        if unknown:
            raise WfError(f"{path.name}: unit {n}: unknown keys {', '.join(sorted(unknown))}")
        uid = str(merged.get("id") or "")
        check_id(uid, "unit id")
        if uid in seen:
            raise WfError(f"{path.name}: unit id {uid} twice")
        seen.add(uid)
        prompt = merged.get("prompt")
        if "vars" in merged and "template" not in merged:
            raise WfError(f"{path.name}: unit {uid}: vars are for a template (template = NAME)")
        if "template" in merged:
            if "prompt" in merged or "prompt_file" in merged:
                raise WfError(f"{path.name}: unit {uid}: give one of prompt, prompt_file and template")
            tvars = merged.pop("vars", None)
            prompt = prompts.for_unit(uid, merged.pop("template"), tvars, answer or _no_run)
        if "prompt_file" in merged:
            pf = Path(str(merged.pop("prompt_file")))
            pf = pf if pf.is_absolute() else base / pf
            prompt = read_prompt(str(pf), f"unit {uid}: ")
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
                model_source=_model_source(entry, given, defaults),
                effort=_str(merged.get("effort"), uid, "effort"),
                timeout=_num(merged.get("timeout"), uid, "timeout", zero="no timeout"),
                stall=_num(merged.get("stall"), uid, "stall"),
                cwd=cwd,
                mode=_str(mode, uid, "mode"),
                resume_from=_str(merged.get("resume_from"), uid, "resume_from"),
                session=_str(merged.get("session"), uid, "session"),
                cmd=tuple(cmd),
                permission_mode=_str(merged.get("permission_mode"), uid, "permission_mode"),
                access={k: merged[k] for k in adapters.ACCESS_KEYS if k in merged},
                panel=_panel(merged.get("panel"), uid),
                **_contract_fields(merged),
            )
        )
    check_panels(path.name, out)
    return out


def _merged(
    path: Path, n: int, defaults: dict[str, Any], given: dict[str, Any], entry: dict[str, Any]
) -> dict[str, Any]:
    """A unit's keys: its own over the command line's over the manifest's defaults, each
    table's contract keys checked."""
    level = {k: v for k, v in defaults.items() if k != "max_parallel"}
    return {**_contract_keys(path, "defaults", level), **given, **_contract_keys(path, f"unit {n}", entry)}


def _contract_fields(merged: dict[str, Any]) -> dict[str, Any]:
    return {"contract": merged.get("contract", True), "sections": merged.get("sections", ())}


def _contract_keys(path: Path, where: str, table: dict[str, Any]) -> dict[str, Any]:
    """A manifest table (defaults or a unit) with its contract keys checked: ``contract``
    true or false; ``sections`` (or ``required_sections``) the names that replace the
    default four, read as the contract spells them. ``contract: false`` switches the
    contract off (sections it inherits then ask nothing), and sections switch on a
    contract inherited as off (the table nearer the unit wins); one table giving both is
    refused."""
    from wf.fanout import contract

    table = dict(table)
    if "sections" in table and "required_sections" in table:
        raise WfError(f"{path.name}: {where}: give sections or required_sections, not both")
    if "required_sections" in table:
        table["sections"] = table.pop("required_sections")
    if "contract" in table and not isinstance(table["contract"], bool):
        raise WfError(f"{path.name}: {where}: contract must be true or false, not {table['contract']!r}")
    if "sections" in table:
        if table.get("contract") is False:
            raise WfError(f"{path.name}: {where}: sections with contract = false: the contract is off")
        try:
            table["sections"] = contract.required_sections(table["sections"])
        except contract.BadSections as e:
            raise WfError(f"{path.name}: {where}: {e}") from None
        table["contract"] = True
    return table


PANEL = "panel"  # the panel id of ``wf run --panel``


def _panel(v: Any, uid: str) -> str | None:
    name = _str(v, uid, "panel")
    if name is not None and not valid_id(name):
        raise WfError(f"unit {uid}: bad panel id {name!r}: {ID_HELP}")
    return name


def check_panels(where: str, reqs: list[UnitRequest]) -> None:
    """Every panel has two units or more, all asked the same question (the same prompt):
    only then do their answers line up (``wf gather --compare``)."""
    panels: dict[str, list[UnitRequest]] = {}
    for r in reqs:
        if r.panel:
            panels.setdefault(r.panel, []).append(r)
    for name, members in panels.items():
        if len(members) < 2:
            raise WfError(f"{where}: panel {name} has one unit ({members[0].id}); a panel needs two or more")
        odd = [r.id for r in members if r.prompt != members[0].prompt]
        if odd:
            raise WfError(
                f"{where}: panel {name}: {', '.join(odd)} asked another question than {members[0].id};"
                " every unit of a panel gets the same prompt"
            )


def panel_requests(
    tools: str,
    prompt: str,
    *,
    mode: str | None = None,
    cwd: str | None = None,
    cmd: tuple[str, ...] = (),
    given: dict[str, Any] | None = None,
) -> list[UnitRequest]:
    """The units of ``wf run --panel claude,codex:gpt-5.5``: one per tool, named by the
    tool (a repeated tool: ``claude-2``, ...), each with the same prompt; ``tool:model``
    asks that tool for a model. ``given``: the options every unit takes (``model``,
    ``timeout``, ``stall``, ``permission_mode`` and the tool access keys), as manifest keys."""
    given = given or {}
    if not prompt.strip():
        raise UsageError("--panel: the prompt is empty")
    out: list[UnitRequest] = []
    seen: dict[str, int] = {}
    for item in tools.split(","):
        tool, sep, model = item.strip().partition(":")
        if tool not in adapters.ADAPTERS:
            raise UsageError(
                f"--panel: unknown tool {tool!r} (in {tools!r}); give tools of {', '.join(adapters.ADAPTERS)}"
            )
        if sep and not model.strip():
            raise UsageError(f"--panel: {item.strip()!r} names no model after the colon")
        seen[tool] = seen.get(tool, 0) + 1
        uid = tool if seen[tool] == 1 else f"{tool}-{seen[tool]}"
        out.append(
            UnitRequest(
                id=uid,
                prompt=prompt,
                adapter=tool,
                model=model.strip() or _str(given.get("model"), uid, "model"),
                timeout=_num(given.get("timeout"), uid, "timeout", zero="no timeout"),
                stall=_num(given.get("stall"), uid, "stall"),
                cwd=cwd,
                mode=mode,
                cmd=cmd if tool == "cmd" else (),
                permission_mode=_str(given.get("permission_mode"), uid, "permission_mode"),
                access={k: given[k] for k in adapters.ACCESS_KEYS if k in given},
                panel=PANEL,
            )
        )
    if len(out) < 2:
        raise UsageError(f"--panel {tools}: a panel needs two tools or more (claude,codex; claude,claude)")
    return out


def read_prompt(path: str, who: str = "") -> str:
    """The text of prompt file ``path`` (``-``: all of stdin), which must be UTF-8: a
    WfError says what is wrong (``who``: the manifest unit it is for, ``unit ID: ``)
    before anything is made from it."""
    name = ("prompt_file " if who else "") + path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        raise WfError(f"{who}cannot read {name}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        where = "the prompt on stdin" if path == "-" else name
        raise WfError(f"{who}{where} is not UTF-8 text (byte {e.start} is {data[e.start]:#04x})") from None


def _no_run(unit: str) -> str:
    raise WfError(f"a var reads the answer of unit {unit}, but there is no run to read it from")


def _str(v: Any, uid: str, what: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise WfError(f"unit {uid}: {what} must be a non-empty string")
    return v


def _model_source(entry: dict[str, Any], given: dict[str, Any], defaults: dict[str, Any]) -> str | None:
    """Why a unit's model is the one it is: named by the unit or the command line
    (explicit), by the manifest's defaults (manifest); None: no model named."""
    if entry.get("model") is not None or given.get("model") is not None:
        return "explicit"
    return "manifest" if defaults.get("model") is not None else None


def _num(v: Any, uid: str, what: str, zero: str | None = None) -> float | None:
    """Seconds: a positive number; 0 too when ``zero`` says what it means."""
    if v is None:
        return None
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and v == v and v != float("inf")
    if not ok or v < 0 or (v == 0 and not zero):
        rule = f">= 0 (0: {zero})" if zero else "above 0"
        raise WfError(f"unit {uid}: {what} must be a number of seconds {rule}, not {v!r}")
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
    sections = d.get("sections") or ()
    if not (isinstance(sections, list | tuple) and all(isinstance(c, str) for c in sections)):
        return None
    return UnitRequest(**{**d, "cmd": tuple(cmd), "sections": tuple(sections)})  # the keys are fields
