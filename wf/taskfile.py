"""TASKS.md as exact lines: parse, render, and edits that splice only what changes.

The file is read as bytes, decoded as UTF-8 and split after every ``\\n`` (an ``\\r``
before it stays part of the line), so ``render(parse(b)) == b`` for every file that
decodes. Each task remembers its line span and its field lines; an edit copies the
line list, replaces, inserts or deletes just the lines it means, and the result is
parsed again before anything is written, so an edit can never leave a broken file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from wf.errors import ParseError, ParseIssue, UnknownTask, WfError

ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
ID_HELP = "ids are lowercase letters, digits and '-', start with a letter or digit, at most 48"
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,99}")
_FIELD_RE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*\r?\n?")
_FENCE_OPEN_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*?)\r?\n?")
_FENCE_CLOSE_RE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?\n?")
_INDENTED_H2_RE = re.compile(r" {1,3}##(?:[ \t]|\r?\n?$)")
_EFFORT_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)")

# Canonical spelling of the known keys; matching ignores case.
KEYS = {
    k.lower(): k
    for k in (
        "Model",
        "Lane",
        "Prio",
        "Effort",
        "Done",
        "After",
        "Sessions",
        "Cloud",
        "Parent",
        "Status",
        "Note",
    )
}
REPEATABLE = frozenset({"note"})
# The order wf writes fields in a task it creates.
FIELD_ORDER = ("model", "lane", "prio", "effort", "done", "after", "sessions", "cloud", "parent")
STATES = ("pending", "progress", "awaiting", "blocked", "wip")


def valid_id(value: str) -> bool:
    return ID_RE.fullmatch(value) is not None


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a valid id (or lane name), else raise a WfError."""
    if not valid_id(value):
        raise WfError(f"bad {what} {value!r}: {ID_HELP}")
    return value


def utc_stamp(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


class Field(NamedTuple):
    key: str  # as written in the file
    value: str
    at: int  # 0-based line index


class Status(NamedTuple):
    state: str  # one of STATES
    text: str  # the note, question, reason, or "<who> since <time>"
    who: str = ""
    since: str = ""

    def __str__(self) -> str:
        if self.state == "pending":
            return "pending"
        label = "in progress" if self.state == "progress" else self.state
        return f"{label}: {self.text}" if self.text else label


PENDING = Status("pending", "")


def parse_status(value: str) -> Status | None:
    """Parse a Status value; None when it is not one of the known forms."""
    v = value.strip()
    head, _, rest = v.partition(":")
    head = head.strip().lower()
    rest = rest.strip()
    if head == "pending" and not rest:
        return PENDING
    if head == "in progress":
        who, _, since = rest.partition(" since ")
        return Status("progress", rest, who.strip(), since.strip())
    if head in ("awaiting", "blocked", "wip"):
        return Status(head, rest)
    return None


class Task(NamedTuple):
    id: str
    title: str
    start: int  # 0-based line index of the heading
    end: int  # exclusive end of the task's lines
    fields: tuple[Field, ...]

    @property
    def line(self) -> int:
        return self.start + 1

    def get(self, key: str) -> str | None:
        key = key.lower()
        for f in self.fields:
            if f.key.lower() == key:
                return f.value
        return None

    def get_all(self, key: str) -> list[str]:
        key = key.lower()
        return [f.value for f in self.fields if f.key.lower() == key]

    @property
    def model(self) -> str | None:
        return self.get("model") or None

    @property
    def lane(self) -> str | None:
        return self.get("lane") or None

    @property
    def done(self) -> str | None:
        return self.get("done") or None

    @property
    def prio(self) -> int:
        v = self.get("prio")
        return int(v) if v is not None and v.strip() in ("0", "1", "2", "3") else 2

    @property
    def effort(self) -> float | None:
        v = self.get("effort")
        if v is None or not _EFFORT_RE.fullmatch(v.strip()):
            return None
        return float(v)

    @property
    def after(self) -> tuple[str, ...]:
        v = self.get("after")
        if not v:
            return ()
        return tuple(x.strip() for x in v.split(",") if x.strip())

    @property
    def sessions(self) -> str | None:
        v = self.get("sessions")
        return v.strip().lower() if v else None

    @property
    def cloud(self) -> bool:
        v = self.get("cloud")
        return v is not None and v.strip().lower() == "yes"

    @property
    def parent(self) -> str | None:
        v = self.get("parent")
        return v.strip() if v else None

    @property
    def status(self) -> Status:
        v = self.get("status")
        if v is None:
            return PENDING
        return parse_status(v) or Status("pending", "")

    @property
    def notes(self) -> list[str]:
        return self.get_all("note")


def split_lines(text: str) -> list[str]:
    """Split after every ``\\n``; the last line may lack one."""
    parts = text.split("\n")
    last = parts.pop()
    lines = [p + "\n" for p in parts]
    if last:
        lines.append(last)
    return lines


def eol_of(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith("\n"):
        return "\n"
    return ""


def content_of(line: str) -> str:
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


def check_field(key: str, value: str) -> str | None:
    """The error message for a known field's value, or None if it is fine."""
    v = value.strip()
    if not v:
        return f"{KEYS[key]} has no value"
    if key == "model" and not MODEL_RE.fullmatch(v):
        return f"bad Model {v!r}"
    if key == "lane" and not valid_id(v):
        return f"bad Lane {v!r}: lane names follow the id rules ({ID_HELP})"
    if key == "prio" and v not in ("0", "1", "2", "3"):
        return f"bad Prio {v!r}: expected 0, 1, 2 or 3 (0 is most urgent)"
    if key == "effort" and (not _EFFORT_RE.fullmatch(v) or float(v) <= 0):
        return f"bad Effort {v!r}: expected a positive number"
    if key == "after":
        for part in v.split(","):
            p = part.strip()
            if not valid_id(p):
                return f"bad After {v!r}: expected task ids separated by commas"
    if key == "sessions" and v.lower() not in ("owner", "solo"):
        return f"bad Sessions {v!r}: expected owner or solo"
    if key == "cloud" and v.lower() not in ("yes", "no"):
        return f"bad Cloud {v!r}: expected yes or no"
    if key == "parent" and not valid_id(v):
        return f"bad Parent {v!r}: {ID_HELP}"
    if key == "status" and parse_status(v) is None:
        return (
            f"unknown Status {v!r}: expected 'in progress: <who> since <time>', "
            "'awaiting: <question>', 'blocked: <why>' or 'wip: <note>' (no Status line = pending)"
        )
    return None


class TasksFile:
    """A parsed TASKS.md: its exact lines, its tasks, and what is wrong with it."""

    def __init__(self, path: str, lines: list[str], tasks: list[Task], issues: list[ParseIssue]):
        self.path = path
        self.lines = lines
        self.tasks = tasks
        self.issues = issues
        self._by_id = {t.id: t for t in tasks}

    @property
    def errors(self) -> list[ParseIssue]:
        return [i for i in self.issues if i.level == "error"]

    def render(self) -> bytes:
        return "".join(self.lines).encode("utf-8")

    def find(self, task_id: str) -> Task | None:
        return self._by_id.get(task_id)

    def task(self, task_id: str) -> Task:
        t = self._by_id.get(task_id)
        if t is None:
            raise UnknownTask(task_id, self.path)
        return t

    def ids(self) -> set[str]:
        return set(self._by_id)

    def text_of(self, task: Task) -> str:
        return "".join(self.lines[task.start : task.end])

    def newline(self) -> str:
        for line in self.lines:
            e = eol_of(line)
            if e:
                return e
        return "\n"


def decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ParseError(
            [ParseIssue(path, line, "error", f"not UTF-8 text (byte 0x{data[e.start]:02x})")]
        ) from None


def parse(data: bytes, path: str = "TASKS.md") -> TasksFile:
    """Parse TASKS.md bytes. Problems are collected in ``.issues``, never raised,
    except for a file that is not UTF-8 at all (ParseError)."""
    return parse_lines(split_lines(decode(data, path)), path)


def parse_lines(lines: list[str], path: str = "TASKS.md") -> TasksFile:
    issues: list[ParseIssue] = []
    tasks: list[Task] = []
    first_line: dict[str, int] = {}

    def issue(index: int, level: str, message: str) -> None:
        issues.append(ParseIssue(path, index + 1, level, message))

    fence_char = ""
    fence_len = 0
    fence_at = 0
    hidden_in_fence: list[int] = []
    # The task being read: heading index, id, title, fields; None between tasks.
    cur: tuple[int, str, str] | None = None
    fields: list[Field] = []
    in_fields = False

    def close(end: int) -> None:
        if cur is not None:
            tasks.append(Task(cur[1], cur[2], cur[0], end, tuple(fields)))

    for i, line in enumerate(lines):
        c0 = line[:1]
        if fence_char:
            if c0 in (" ", "`", "~"):
                m = _FENCE_CLOSE_RE.fullmatch(line)
                if m and m.group(1)[0] == fence_char and len(m.group(1)) >= fence_len:
                    fence_char = ""
                    continue
            if line.startswith("## "):
                hidden_in_fence.append(i)
            continue
        if in_fields:
            if c0.isalpha():
                m = _FIELD_RE.fullmatch(line)
                if m:
                    key, value = m.group(1), m.group(2) or ""
                    k = key.lower()
                    if k in KEYS:
                        problem = check_field(k, value)
                        if problem:
                            issue(i, "error", problem)
                        elif k not in REPEATABLE and any(f.key.lower() == k for f in fields):
                            issue(i, "error", f"{KEYS[k]} given twice in task {cur[1] if cur else ''}")
                    else:
                        issue(i, "warning", f"unknown field {key!r} (kept as it is)")
                    fields.append(Field(key, value.strip(), i))
                    continue
            in_fields = False
        if c0 == "#":
            if line.startswith("##") and not line.startswith("###"):
                rest = line[2:]
                if rest[:1] not in (" ", "\t") and content_of(rest) != "":
                    issue(i, "warning", "'##' without a space is not a heading; is it a task?")
                    continue
                close(i)
                cur = None
                fields = []
                head = content_of(rest).strip()
                task_id, colon, title = head.partition(":")
                task_id = task_id.strip()
                title = title.strip()
                if not colon or not title or not task_id:
                    issue(i, "error", "level-2 heading is not a task: expected '## <id>: <title>'")
                    continue
                if not valid_id(task_id):
                    issue(i, "error", f"bad task id {task_id!r}: {ID_HELP}")
                    continue
                if task_id in first_line:
                    issue(i, "error", f"duplicate id {task_id!r} (first at line {first_line[task_id]})")
                    continue
                first_line[task_id] = i + 1
                cur = (i, task_id, title)
                in_fields = True
            continue
        if c0 in (" ", "`", "~"):
            m = _FENCE_OPEN_RE.fullmatch(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence_char, fence_len, fence_at = m.group(1)[0], len(m.group(1)), i
                hidden_in_fence = []
                continue
            if c0 == " " and _INDENTED_H2_RE.match(line):
                close(i)
                cur = None
                fields = []
                issue(i, "error", "indented level-2 heading: a task heading starts at column 1")
    close(len(lines))
    if fence_char:
        if hidden_in_fence:
            issue(
                fence_at,
                "error",
                f"code fence is never closed, hiding {len(hidden_in_fence)} '## ' line(s) "
                f"from line {hidden_in_fence[0] + 1} on",
            )
        else:
            issue(fence_at, "warning", "code fence is never closed")
    issues.sort(key=lambda x: x.line)
    return TasksFile(path, lines, tasks, issues)


# ---------------------------------------------------------------- edits
#
# Each edit takes a parsed file and returns the new list of lines; nothing is
# written here. ``reparse`` checks the result before the caller writes it.


def _ensure_eol(lines: list[str], index: int, eol: str) -> None:
    if index >= 0 and not lines[index].endswith("\n"):
        lines[index] += eol


def _eol_near(doc: TasksFile, index: int) -> str:
    return eol_of(doc.lines[index]) or doc.newline()


def set_field(doc: TasksFile, task_id: str, key: str, value: str | None) -> list[str]:
    """Set (or with None, remove) a single-valued field of a task: one line changes."""
    t = doc.task(task_id)
    k = key.lower()
    lines = list(doc.lines)
    existing = [f for f in t.fields if f.key.lower() == k]
    eol = _eol_near(doc, t.start)
    if value is not None:
        value = _one_line(value, KEYS.get(k, key))
    if value is None or value == "":
        for f in reversed(existing):
            del lines[f.at]
        return lines
    if existing:
        f = existing[0]
        lines[f.at] = f"{f.key}: {value}{eol_of(lines[f.at]) or ''}"
        for extra in reversed(existing[1:]):
            del lines[extra.at]
        return lines
    at = (t.fields[-1].at if t.fields else t.start) + 1
    _ensure_eol(lines, at - 1, eol)
    lines.insert(at, f"{KEYS.get(k, key)}: {value}{eol}")
    return lines


def add_note(doc: TasksFile, task_id: str, text: str, now: datetime | None = None) -> list[str]:
    """Append a dated ``Note:`` line after the task's fields."""
    t = doc.task(task_id)
    lines = list(doc.lines)
    eol = _eol_near(doc, t.start)
    at = (t.fields[-1].at if t.fields else t.start) + 1
    _ensure_eol(lines, at - 1, eol)
    lines.insert(at, f"Note: {utc_stamp(now)[:10]} {_one_line(text, 'Note')}{eol}")
    return lines


def set_title(doc: TasksFile, task_id: str, title: str) -> list[str]:
    t = doc.task(task_id)
    lines = list(doc.lines)
    lines[t.start] = f"## {t.id}: {_one_line(title, 'title')}{eol_of(lines[t.start])}"
    return lines


def append_task(
    doc: TasksFile,
    task_id: str,
    title: str,
    fields: Iterable[tuple[str, str]],
    body: str | None = None,
) -> list[str]:
    """Add a task at the end of the file; nothing before it changes except a missing
    final newline, which is added (the new heading must start a line)."""
    check_id(task_id)
    lines = list(doc.lines)
    eol = doc.newline()
    if lines:
        _ensure_eol(lines, len(lines) - 1, eol)
        if content_of(lines[-1]).strip():
            lines.append(eol)
    lines.append(f"## {task_id}: {_one_line(title, 'title')}{eol}")
    for key, value in fields:
        lines.append(f"{KEYS.get(key.lower(), key)}: {_one_line(value, key)}{eol}")
    if body and body.strip():
        lines.append(eol)
        body_text = body.replace("\r\n", "\n").strip("\n")
        lines.extend(line + eol for line in body_text.split("\n"))
    return lines


def remove_task(doc: TasksFile, task_id: str) -> list[str]:
    t = doc.task(task_id)
    lines = list(doc.lines)
    del lines[t.start : t.end]
    return lines


def _one_line(value: str, what: str) -> str:
    v = value.strip()
    if "\n" in v or "\r" in v:
        raise WfError(f"{what} must be one line")
    return v


def reparse(doc: TasksFile, lines: list[str]) -> TasksFile:
    """Parse edited lines; refuse an edit that would add an error to the file."""
    new = parse_lines(lines, doc.path)
    if new.errors:
        raise WfError("refusing an edit that would break the file:\n" + "\n".join(map(str, new.errors)))
    return new


def dump_fields(values: dict[str, str | None]) -> list[tuple[str, str]]:
    """Known fields in wf's own order, skipping empty ones."""
    out = [(KEYS[k], v) for k in FIELD_ORDER if (v := values.get(k))]
    if values.get("status"):
        out.append(("Status", values["status"] or ""))
    return out


__all__ = [
    "ID_RE",
    "KEYS",
    "STATES",
    "Field",
    "ParseError",
    "Status",
    "Task",
    "TasksFile",
    "add_note",
    "append_task",
    "check_id",
    "parse",
    "parse_lines",
    "parse_status",
    "remove_task",
    "reparse",
    "set_field",
    "set_title",
    "split_lines",
    "utc_stamp",
    "valid_id",
]
