"""The edits of wf.tasks.edits as line lists, the form the engine tests compare: each returns
the new list of lines of the file (the edits themselves return a parsed file)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from wf.base.errors import WfError
from wf.tasks import edits
from wf.tasks.taskfile import TasksFile, parse_lines


def set_field(doc: TasksFile, task_id: str, key: str, value: str | None) -> list[str]:
    return edits.set_field(doc, task_id, key, value).lines


def add_note(doc: TasksFile, task_id: str, text: str, now: datetime | None = None) -> list[str]:
    return edits.add_note(doc, task_id, text, now).lines


def set_title(doc: TasksFile, task_id: str, title: str) -> list[str]:
    return edits.set_title(doc, task_id, title).lines


def append_task(
    doc: TasksFile, task_id: str, title: str, fields: Iterable[tuple[str, str]], body: str | None = None
) -> list[str]:
    return edits.append_task(doc, task_id, title, fields, body).lines


def remove_task(doc: TasksFile, task_id: str) -> list[str]:
    return edits.remove_task(doc, task_id).lines


def reparse(doc: TasksFile, lines: list[str]) -> TasksFile:
    """Parse edited lines the way a reader will; an edit must leave no error."""
    new = parse_lines(lines, doc.path)
    if new.errors:
        raise WfError("refusing an edit that would break the file:\n" + "\n".join(map(str, new.errors)))
    return new
