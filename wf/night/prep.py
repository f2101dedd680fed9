"""Prep batches (``wf batch K --prep``): make pending tasks runner-ready, never implement.

Targets: up to K pending tasks without Done (or without Model), not ``Sessions: owner``,
with no Status and no open slices; those that would be pickable once prepared first,
then Prio, then file order. Headless workers (at most 3 tasks each; the lane's adapter
and model) get the packaged prep prompt and change the tasks with ``wf set``/``wf add``/
``wf status``. Afterwards wf writes one summary line per target and commits only the
lines of TASKS.md that prep changed (a person's own uncommitted edits stay uncommitted).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base.errors import WfError
from wf.base.project import Project

PER_WORKER = 3
PREP_PROMPT = "prep-prompt.md"
# what a prep worker may do without asking (claude --allowedTools): read the code, and run
# wf (show, set, add, status); nothing that edits code or commits
PREP_TOOLS = ("Bash(wf:*)", "Read", "Grep", "Glob")


@dataclass(frozen=True)
class Target:
    id: str
    lane: str
    missing: tuple[str, ...]  # "Done", "Model"
    waits: tuple[str, ...]  # After ids not archived yet: not pickable even once prepared

    @property
    def pickable(self) -> bool:
        return not self.waits

    def describe(self) -> str:
        return f"{self.id} ({', '.join(self.missing)}" + (
            f"; after {', '.join(self.waits)})" if self.waits else ")"
        )


def targets(project: Project, k: int, lanes: list[str] | None = None) -> list[Target]:
    from wf.tasks import backlog

    bl = backlog.load(project)
    names = lanes or [ln.name for ln in project.config.lanes]
    if not names:
        return []
    archived = bl.archive.ids()
    children = bl.open_children()
    found: list[tuple[int, int, int, Target]] = []
    for order, t in enumerate(bl.doc.tasks):
        if t.get("status") is not None or t.sessions == "owner" or children.get(t.id):
            continue
        missing = tuple(name for name, value in (("Done", t.done), ("Model", t.model)) if not value)
        if not missing:
            continue
        lane = bl.lane_of(t) or names[0]  # no Model yet: the first lane prepares it
        if lane not in names:
            continue
        waits = tuple(a for a in t.after if a not in archived)
        found.append((1 if waits else 0, t.prio, order, Target(t.id, lane, missing, waits)))
    found.sort(key=lambda x: x[:3])
    return [x[3] for x in found[:k]]


def prompt_for(project: Project, ids: list[str]) -> str:
    from importlib import resources

    template = resources.files("wf").joinpath("data", PREP_PROMPT).read_text("utf-8")
    return template.format(root=project.root, ids=", ".join(ids))


def manifest(project: Project, chosen: list[Target], path: Path) -> None:
    """The ``wf run`` manifest: per lane, one unit per at most 3 targets."""
    units: list[dict[str, Any]] = []
    for n, (lane, ids) in enumerate(workers(chosen), 1):
        cfg = project.config.lane(lane)
        if cfg is None:
            raise WfError(f"no lane {lane!r} (wf lanes)")
        unit: dict[str, Any] = {
            "id": f"prep-{lane}-{n}",
            "prompt": prompt_for(project, ids),
            "adapter": cfg.adapter,
            "model": cfg.model,
            "cwd": str(project.root),
            "permission_mode": cfg.permission_mode,
            "allowed_tools": list(PREP_TOOLS),
        }
        if cfg.cmd:
            unit["cmd"] = list(cfg.cmd)
        units.append(unit)
    store.write_json(path, {"defaults": {"max_parallel": 3}, "units": units})


def workers(chosen: list[Target]) -> list[tuple[str, list[str]]]:
    """(lane, ids) per worker: per lane, at most 3 targets each."""
    by_lane: dict[str, list[str]] = {}
    for t in chosen:
        by_lane.setdefault(t.lane, []).append(t.id)
    return [
        (lane, ids[i : i + PER_WORKER])
        for lane, ids in by_lane.items()
        for i in range(0, len(ids), PER_WORKER)
    ]


def argv(project: Project, manifest_path: str, run_id: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "wf", "-C", str(project.root), "run", manifest_path, "--run", run_id)


def refusals(project: Project, run_id: str, chosen: list[Target]) -> dict[str, str]:
    """Per target, the calls its prep worker's tool refused for want of a grant, in words
    (``claude denied Bash `wf set ...```); targets whose worker had none are left out."""
    from wf.adapters.base import Denial, denied_words
    from wf.workers import runs

    out: dict[str, str] = {}
    for n, (lane, ids) in enumerate(workers(chosen), 1):
        try:
            st = runs.read_status(runs.unit_dir(project, run_id, f"prep-{lane}-{n}"))
        except runs.CorruptStatus:
            continue
        if st is None:
            continue
        refused = [d for d in map(Denial.from_json, st.get("denied") or []) if d is not None]
        if refused:
            out.update(dict.fromkeys(ids, denied_words(str(st.get("adapter") or "its tool"), refused)))
    return out


def outcome_lines(project: Project, chosen: list[Target], refused: dict[str, str] | None = None) -> list[str]:
    """``<id> -> Done: ...``, ``<id> -> awaiting <question id>`` or ``<id> -> unchanged``
    (with the calls its worker's tool refused, if any)."""
    from wf.tasks import backlog

    refused = refused or {}
    bl = backlog.load(project)
    lines = []
    for target in chosen:
        t = bl.doc.find(target.id)
        if t is None:
            lines.append(f"{target.id} -> gone from TASKS.md")
            continue
        question = t.status.waits_for
        if question is not None:
            lines.append(f"{target.id} -> awaiting {question}")
        elif t.done and t.model:
            lines.append(f"{target.id} -> Done: {t.done}")
        else:
            why = f"; {refused[target.id]}" if target.id in refused else ""
            lines.append(f"{target.id} -> unchanged (still without {', '.join(target.missing)}{why})")
    return lines


def commit_changes(project: Project, before: bytes, stamp: str) -> str:
    """Commit only the lines prep changed in TASKS.md: HEAD's version plus the change from
    ``before`` (the file when prep began) to now, merged three-way. Says what it did."""
    from wf.trees import gitops

    if not project.is_git:
        return "not a git repository: nothing committed"
    rel = project.tasks_in_git
    path = project.root / rel
    after = path.read_bytes()
    if after == before:
        return "TASKS.md unchanged: nothing committed"
    head = gitops.show(project.root, "HEAD", rel)
    if head is None:
        return f"{rel} is not in HEAD: nothing committed"
    if head.encode() == before:
        text = after.decode("utf-8")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            files = {}
            for name, data in (("head", head.encode()), ("before", before), ("after", after)):
                files[name] = Path(tmp) / name
                files[name].write_bytes(data)
            p = subprocess.run(
                ["git", "merge-file", "-p", str(files["head"]), str(files["before"]), str(files["after"])],
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
        if p.returncode != 0:
            return "prep's lines overlap uncommitted edits of TASKS.md: left uncommitted"
        text = p.stdout.decode("utf-8")
    branch = gitops.current_branch(project.root)
    if branch is None:
        return "detached HEAD: nothing committed"
    sha = gitops.commit_files(project.root, branch, {rel: text}, f"wf: prep batch {stamp}\n")
    return f"committed prep's lines of {rel} as {sha[:12]}"
