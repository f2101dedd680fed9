"""What a clone unit changed in its clone: ``wf runs diff``.

The clone is read as ``wf apply`` reads it (``apply.sealed_git``): only a ``clone`` folder
of the same run, through a git that never reads the clone's own config (the unit wrote
it), so nothing the unit planted there runs. Shown: the unit's commits since the commit
it started from, its untracked files, then the diff from that commit to its files as
they are (untracked ones included)."""

from __future__ import annotations

from wf.base.errors import WfError
from wf.base.project import Project
from wf.workers import runs


def diff(project: Project, run: str, unit: str) -> str:
    from wf.fanout import apply
    from wf.trees import gitops

    folder = runs.unit_dir(project, run, unit)
    st = runs.read_status(folder)
    if st is None:
        raise WfError(f"no unit {unit} in run {run}")
    if not st.get("clone"):
        raise WfError(
            f"unit {unit} ran in mode {st.get('mode') or 'cwd'}, not clone; its files are in {st.get('cwd')}"
        )
    clone, base = apply.clone_and_base(project, run, unit, st)
    head = gitops.rev(clone, "HEAD") or base
    with apply.sealed_git(clone, folder, base) as git:
        try:
            git("read-tree", head)
            untracked = git("ls-files", "-z", "--others", "--exclude-standard")
            git("add", "--all", "--", ".")
            tree = git("write-tree").strip()
        except gitops.GitError as e:
            raise WfError(f"unit {unit}: its clone's files cannot be read as a tree: {e.reason}") from None
        text = git("diff", "--stat", "--patch", "--no-ext-diff", "--no-textconv", base, tree)
        commits = git("log", "--oneline", "--no-decorate", f"{base}..{head}")
    parts = []
    if commits.strip():
        parts.append("commits:\n" + commits.rstrip())
    if untracked.strip():
        parts.append("untracked:\n" + "\n".join(f"  {p}" for p in untracked.split("\0") if p))
    parts.append(text.rstrip() or "(no changes)")
    return "\n\n".join(parts) + "\n"
