"""The files of wf's archive commit, and how to tell one: TASKS.md minus the task, the
archive plus its line, and the ``Wf-Archive`` trailer naming the task it archives (used
by ``merge`` for a merge on one machine and by ``xmerge`` to redo one on another
machine's main)."""

from __future__ import annotations

from pathlib import Path

from wf.base.project import Project
from wf.trees import gitops

ARCHIVE_TRAILER = "Wf-Archive"  # in wf's own archive commit: the id of the task it archives


def archived_by(root: Path, commit: str) -> str | None:
    """The task id ``commit`` archives, when it is wf's own archive commit (its trailer
    says so, whatever its subject), else None."""
    fmt = f"--format=%(trailers:key={ARCHIVE_TRAILER},valueonly)"
    return gitops.out(root, "log", "-1", fmt, commit).strip() or None


def bookkeeping_files(project: Project, at: str, task_id: str, line: str, kept: list[str]) -> dict[str, str]:
    """TASKS.md and the archive as they are in commit ``at``, minus ``task_id`` and plus
    its archive ``line`` (with the quoted lines ``kept`` under it): only the files that
    change."""
    from wf.tasks import archive as archivemod
    from wf.tasks import edits, taskfile

    root = project.root
    tasks_at = gitops.show(root, at, project.tasks_in_git)
    archive_at = gitops.show(root, at, project.archive_in_git)
    files: dict[str, str] = {}
    if tasks_at is not None:
        doc = taskfile.parse_text(tasks_at, project.tasks_in_git)
        if doc.find(task_id) is not None:
            files[project.tasks_in_git] = edits.remove_task(doc, task_id).text
    arch = archivemod.parse(archive_at.encode() if archive_at is not None else None, project.archive_in_git)
    if arch.find(task_id) is None:
        files[project.archive_in_git] = archivemod.appended(arch, line, kept).decode("utf-8")
    return files
