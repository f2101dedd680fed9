"""``wf doctor`` on the worker tools: installed or not, versions against the tested
ones, flags their --help lacks, logins, each lane's access against its adapter, and the
claude settings that would stop a headless worker at a prompt nobody answers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wf.base.project import Project
from wf.doctor.findings import Finding

if TYPE_CHECKING:
    from wf.adapters.base import Adapter


def help_options(text: str) -> set[str]:
    """The option tokens a --help text lists (``--allowedTools``, ``-m``), exactly."""
    from wf.adapters.base import help_options as listed

    return listed(text)


def adapter_findings(project: Project) -> list[Finding]:
    """Which worker tools are installed, their versions, default stall and timeout,
    the flags wf passes that a subcommand's own --help lacks (by exact option token),
    whether each installed tool is logged in (a problem when a lane uses it), and each
    lane's model, effort and tool access checked against its adapter. A tool newer than
    the newest version wf was tested with is worth knowing; a claude too old for the
    cloud lane is a problem when the lane is on."""
    from wf import adapters

    lanes = project.config.lanes
    out = []
    for a in adapters.ADAPTERS.values():
        if a.name != "cmd":
            out += _tool_findings(project, a)
    for ln in lanes:
        for prob in adapters.lane_problems(ln):
            out.append(Finding("lane", ln.name, f"{prob.message}; {prob.fix}", "problem"))
    out += prompt_findings(project, "claude" in {ln.adapter for ln in lanes})
    return out


def _tool_findings(project: Project, a: Adapter) -> list[Finding]:
    """One worker tool: installed or not, its version against the tested ones, its flags
    and its login."""
    from wf.workers.supervise import tool_version

    users = sorted(ln.name for ln in project.config.lanes if ln.adapter == a.name)
    path = a.executable()
    if path is None:
        why = f"not installed (lanes {', '.join(users)} use it)" if users else "not installed"
        return [Finding("adapter", a.name, f"{why}; install: {a.install}", "problem" if users else "info")]
    answer = tool_version(a)
    out = _version_findings(project, a, answer)
    version = answer or "version unknown"
    missing = _missing_flags(a)
    limits = f"stall {a.default_stall:g}s, timeout {a.default_timeout:g}s"
    if missing:
        fix = f"update it: {a.install}@latest"
        why = f"{version} at {path} ({limits}); {'; '.join(missing)}; {fix}"
        out.append(Finding("adapter", a.name, why, "problem"))
    else:
        out.append(Finding("adapter", a.name, f"{version} at {path} ({limits})", "info"))
    return [*out, *_login_findings(project, a, users)]


def _version_findings(project: Project, a: Adapter, answer: str | None) -> list[Finding]:
    """A tool newer than the newest version wf was tested with (worth knowing); a claude
    too old for the cloud lane when it is on (a problem)."""
    from wf.adapters import versions

    out = []
    newer = versions.newer_than_tested(a.name, answer)
    if newer is not None:
        tested = versions.TESTED[a.name][1]
        why = (
            f"{newer} is newer than {tested}, the newest version wf was tested with: its flags "
            "and events may have moved (docs/lanes-and-workers.md, Versions: run the real-binary "
            "tests on it)"
        )
        out.append(Finding("adapter", a.name, why, "info"))
    if a.name == "claude" and project.config.cloud:
        too_old = versions.cloud_problem(answer)
        if too_old is not None:
            fix = f"update it: {a.install} (>= {versions.CLOUD_MIN_CLAUDE})"
            out.append(Finding("cloud", "claude", f"{too_old}; {fix}", "problem"))
    return out


def _missing_flags(a: Adapter) -> list[str]:
    """The flags wf passes that a subcommand's own --help does not list, one entry per
    subcommand that lacks some."""
    import subprocess

    missing = []
    for argv, flags in a.help_probes:
        try:
            p = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
            )
            listed = help_options(p.stdout + p.stderr)
        except (OSError, subprocess.TimeoutExpired):
            listed = set()
        lacks = [f for f in flags if f not in listed]
        if lacks:
            missing.append(f"`{' '.join(argv)}` lacks {' '.join(lacks)}")
    return missing


def _login_findings(project: Project, a: Adapter, users: list[str]) -> list[Finding]:
    """An installed tool's login: a problem for one a lane uses, else worth knowing."""
    from wf import adapters

    lanes = project.config.lanes
    model = next((adapters.lane_model_for(ln, a.name) for ln in lanes if ln.adapter == a.name), None)
    state, words = a.login(model)
    said = f" ({words})" if words else ""
    if state is False:
        level = "problem" if users else "info"
        return [Finding("login", a.name, f"not logged in{said}: {a.login_fix}", level)]
    if state is True:
        return [Finding("login", a.name, f"logged in{said}", "info")]
    if users:
        return [Finding("login", a.name, f"cannot tell whether it is logged in{said}", "info")]
    return []


def claude_settings_files(project: Project) -> list[Path]:
    """The settings files a claude worker in this project reads that wf can read too:
    the project's shared and local ones, and the user's (``$CLAUDE_CONFIG_DIR``)."""
    from wf.base.homes import claude_home

    config = claude_home()
    folder = project.root / ".claude"
    return [folder / "settings.json", folder / "settings.local.json", config / "settings.json"]


def prompt_findings(project: Project, used: bool) -> list[Finding]:
    """Settings that would stop a headless claude worker at a prompt nobody answers: a
    ``permissions.ask`` rule (claude asks even where the argv grants the call; in print
    mode the call is refused, or, without --permission-prompts none, it may wait). A
    problem when a lane runs claude, else worth knowing. What wf cannot read (managed
    settings, claude's own record of trusted folders) is not judged."""
    import json

    out = []
    for path in claude_settings_files(project):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        perms = data.get("permissions") if isinstance(data, dict) else None
        ask = perms.get("ask") if isinstance(perms, dict) else None
        if isinstance(ask, list) and ask:
            rules = ", ".join(str(r) for r in ask[:5]) + (f" and {len(ask) - 5} more" if len(ask) > 5 else "")
            out.append(
                Finding(
                    "grants",
                    str(path),
                    f"permissions.ask {rules}: a headless claude worker is never asked, so such a call is "
                    "refused (claude without --permission-prompts none may wait for an answer instead); "
                    "move the rules a worker needs to permissions.allow, or grant them to the lane",
                    "problem" if used else "info",
                )
            )
    return out
