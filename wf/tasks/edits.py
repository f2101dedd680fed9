"""Edits of TASKS.md that touch only what they mean, checked before anything is written.

Every edit rewrites the text of one region (one task, or the preamble) and parses just
that region again. This is exact: a level-2 heading that wf recognises is never inside
a code fence, so each task's region parses the same alone as within the file, and an
edit never writes a fence or a heading outside its own lines (field values and titles
are single lines; a new task goes at the very end). Tasks after the region keep their
parse, moved by the lines and characters the edit added or removed. An edit whose
region has errors afterwards is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from wf.base.errors import IssueKind, ParseIssue, WfError
from wf.tasks.taskfile import (
    KEYS,
    Task,
    TasksFile,
    check_id,
    eol_of,
    parse_text,
    split_lines,
    utc_stamp,
)

# What an editor, a terminal or Python's str.splitlines may take for a line break: wf
# never writes one inside a field or title (it would become a line of its own).
_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
# In a body, LF and CRLF are the line breaks; these would become extra ones.
_BODY_BREAKS = frozenset("\r\x85\u2028\u2029")


def _utf8(value: str, what: str) -> None:
    """Text from the command line that is not UTF-8 (Python keeps its bytes as lone
    surrogates) cannot be written to a UTF-8 file."""
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise WfError(f"{what} is not valid UTF-8 text")


def _one_line(value: str, what: str) -> str:
    v = value.strip()
    _utf8(v, what)
    if any(c in _BREAKS for c in v):
        raise WfError(f"{what} must be one line (no line breaks, CR, or Unicode line separators)")
    return v


def _count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def replace_region(
    doc: TasksFile, first: int, last: int, new_text: str, expect: list[str], *, tolerate: str | None = None
) -> TasksFile:
    """Replace the text of ``doc.tasks[first:last]`` (with ``first == last == 0`` and no
    tasks: the whole file) by ``new_text``, which must parse without errors into exactly
    the tasks ``expect`` (so a body can never slip in a task heading of its own).
    ``tolerate`` names a task whose own errors are kept, not refused (a task the edit
    does not change, re-read only because a new one follows it)."""
    tasks = doc.tasks
    if first < last:
        lstart, lend = tasks[first].start, tasks[last - 1].end
        cstart, cend = tasks[first].span[0], tasks[last - 1].span[1]
    else:
        if tasks:
            raise ValueError("an empty region only when the file has no tasks")
        lstart, lend, cstart, cend = 0, _count_lines(doc.text), 0, len(doc.text)
    if new_text and not new_text.endswith("\n") and cend < len(doc.text):
        new_text += doc.newline()  # the next task's heading must still start a line
    if cstart == 0 and doc.text.startswith("\ufeff"):
        return _replace_at_bom(doc, last, new_text, expect)
    local = parse_text(new_text, doc.path)
    errors = [e for e in local.errors if tolerate is None or e.task != tolerate]
    if errors:
        raise _refuse(errors, lstart)
    if cend < len(doc.text) and any(i.kind is IssueKind.UNCLOSED_FENCE for i in local.issues):
        raise WfError(
            "refusing an edit that opens a code fence it never closes (it would hide the tasks after it)"
        )
    found = [t.id for t in local.tasks]
    if found != expect:
        extra = [t for t in local.tasks if t.id not in expect]
        where = f" (line {extra[0].start + lstart + 1}: '## {extra[0].id}: ...')" if extra else ""
        raise WfError(
            f"refusing an edit that would add or lose a task heading{where}; "
            "inside a task's text, use '###' for sub-headings"
        )
    if first < last and local.tasks and local.tasks[0].start != 0:
        raise WfError("internal: an edited task no longer starts with its heading")
    dl = _count_lines(new_text) - (lend - lstart)
    dc = len(new_text) - (cend - cstart)
    mid = [
        Task(
            t.id,
            t.title,
            t.start + lstart,
            t.end + lstart,
            t.raw_pairs,
            t.kv,
            (t.span[0] + cstart, t.span[1] + cstart),
        )
        for t in local.tasks
    ]
    after = tasks[last:]
    if dl or dc:
        after = [
            Task(t.id, t.title, t.start + dl, t.end + dl, t.raw_pairs, t.kv, (t.span[0] + dc, t.span[1] + dc))
            for t in after
        ]
    issues = [i for i in doc.issues if i.line <= lstart]
    issues += [i.moved(lstart) for i in local.issues]
    issues += [i.moved(dl) for i in doc.issues if i.line > lend]
    text = doc.text[:cstart] + new_text + doc.text[cend:]
    return TasksFile(doc.path, text, [*tasks[:first], *mid, *after], issues)


def _refuse(errors: list[ParseIssue], offset: int = 0) -> WfError:
    moved = [i.moved(offset) for i in errors]
    return WfError("refusing an edit that would break the file:\n" + "\n".join(map(str, moved)))


def _replace_at_bom(doc: TasksFile, last: int, new_text: str, expect: list[str]) -> TasksFile:
    """A region at the start of a file with a byte order mark: the mark stays first in
    the file (it belongs to the file, not to a task), and the file is parsed whole."""
    if not new_text.startswith("\ufeff"):
        new_text = "\ufeff" + new_text
    full = parse_text(new_text + doc.text[doc.tasks[last - 1].span[1] if last else len(doc.text) :], doc.path)
    if full.errors:
        raise _refuse(full.errors)
    if [t.id for t in full.tasks] != [*expect, *(t.id for t in doc.tasks[last:])]:
        raise WfError("refusing an edit that would add or lose a task heading")
    return full


def _task_region(doc: TasksFile, task_id: str) -> tuple[int, Task, list[str]]:
    task = doc.task(task_id)
    index = doc.tasks.index(task)
    return index, task, split_lines(doc.text_of(task))


def _replace_task(doc: TasksFile, index: int, lines: list[str]) -> TasksFile:
    return replace_region(doc, index, index + 1, "".join(lines), [doc.tasks[index].id])


def _eol(doc: TasksFile, lines: list[str]) -> str:
    return eol_of(lines[0]) or doc.newline()


def _insert(lines: list[str], at: int, text: str, eol: str) -> None:
    """Insert one line; after a last line without a newline, the new line becomes the
    last line, still without one (a file's missing final newline stays missing)."""
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += _ending(lines[at - 1], eol)
        lines.insert(at, text)
        return
    lines.insert(at, text + eol)


def _ending(last: str, eol: str) -> str:
    """What ends a last line that had no newline: a lone CR it ends with (content while
    it was last) becomes the CR of a CRLF rather than a CR inside the line."""
    return "\n" if last.endswith("\r") else eol


def set_field(doc: TasksFile, task_id: str, key: str, value: str | None) -> TasksFile:
    """Set (or with None or '', remove) a single-valued field: one line changes."""
    index, task, lines = _task_region(doc, task_id)
    k = key.lower()
    pairs = task.pairs
    positions = [1 + i for i, (fk, _) in enumerate(pairs) if fk.lower() == k]
    if value is not None:
        value = _one_line(value, KEYS.get(k, key))
    if not value:
        for at in reversed(positions):
            del lines[at]
        return _replace_task(doc, index, lines)
    if positions:
        at = positions[0]
        written = pairs[at - 1][0]
        lines[at] = f"{written}: {value}{eol_of(lines[at])}"
        for extra in reversed(positions[1:]):
            del lines[extra]
        return _replace_task(doc, index, lines)
    _insert(lines, 1 + len(pairs), f"{KEYS.get(k, key)}: {value}", _eol(doc, lines))
    return _replace_task(doc, index, lines)


def add_note(doc: TasksFile, task_id: str, text: str, now: datetime | None = None) -> TasksFile:
    """Insert a dated ``Note:`` line after the task's fields."""
    index, task, lines = _task_region(doc, task_id)
    _insert(
        lines, 1 + len(task.pairs), f"Note: {utc_stamp(now)[:10]} {_one_line(text, 'Note')}", _eol(doc, lines)
    )
    return _replace_task(doc, index, lines)


def set_title(doc: TasksFile, task_id: str, title: str) -> TasksFile:
    index, task, lines = _task_region(doc, task_id)
    lines[0] = f"## {task.id}: {_one_line(title, 'title')}{eol_of(lines[0])}"
    return _replace_task(doc, index, lines)


def remove_task(doc: TasksFile, task_id: str) -> TasksFile:
    index, _, _ = _task_region(doc, task_id)
    return replace_region(doc, index, index + 1, "", [])


def _new_task_text(
    doc: TasksFile,
    before: str,
    task_id: str,
    title: str,
    fields: Iterable[tuple[str, str]],
    body: str | None,
) -> str:
    """What to add after ``before`` (the file's end): a final newline if it lacks one, a
    blank line, the heading, the fields and the body."""
    eol = doc.newline()
    out = []
    if before:
        if not before.endswith("\n"):
            out.append(_ending(before, eol))
        body_end = before[:-1] if before.endswith("\n") else before
        if body_end[body_end.rfind("\n") + 1 :].strip():
            out.append(eol)  # a blank line before the new heading
    out.append(f"## {task_id}: {_one_line(title, 'title')}{eol}")
    for key, value in fields:
        out.append(f"{KEYS.get(key.lower(), key)}: {_one_line(value, key)}{eol}")
    if body and body.strip():
        out.append(eol)
        body_text = body.replace("\r\n", "\n").strip("\n")
        _utf8(body_text, "the body")
        if any(c in _BODY_BREAKS for c in body_text):
            raise WfError(
                "the body holds a carriage return (\\r) that is not part of a CRLF line break, "
                "or a Unicode line separator; wf writes LF or CRLF line breaks only"
            )
        out.extend(line + eol for line in body_text.split("\n"))
    return "".join(out)


def append_task(
    doc: TasksFile,
    task_id: str,
    title: str,
    fields: Iterable[tuple[str, str]],
    body: str | None = None,
) -> TasksFile:
    """Add a task at the end of the file. Nothing before it changes, except that a
    missing final newline is added (the heading must start a line)."""
    check_id(task_id)
    if doc.find(task_id) is not None:
        raise WfError(f"id {task_id!r} is already used")
    if body and any(i.kind is IssueKind.UNCLOSED_FENCE for i in parse_text(body).issues):
        raise WfError("the body opens a code fence it never closes (every task after it would be hidden)")
    if doc.tasks:
        index = len(doc.tasks) - 1
        region = doc.text_of(doc.tasks[index])
        new = region + _new_task_text(doc, doc.text, task_id, title, fields, body)
        last = doc.tasks[index].id
        return replace_region(doc, index, index + 1, new, [last, task_id], tolerate=last)
    new = doc.text + _new_task_text(doc, doc.text, task_id, title, fields, body)
    return replace_region(doc, 0, 0, new, [task_id])
