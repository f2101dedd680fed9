"""What a clone unit changed in its clone: ``wf runs diff``."""

from __future__ import annotations

from pathlib import Path

from wf.base.errors import WfError
from wf.base.project import Project
from wf.workers import runs


def diff(project: Project, run: str, unit: str) -> str:
    folder = runs.unit_dir(project, run, unit)
    st = runs.read_status(folder)
    if st is None:
        raise WfError(f"no unit {unit} in run {run}")
    if not st.get("clone"):
        raise WfError(
            f"unit {unit} ran in mode {st.get('mode') or 'cwd'}, not clone; its files are in {st.get('cwd')}"
        )
    from wf.trees import gitops

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
