"""TASKS.md as exact lines: parse, render, and edits that splice only what changes.

The file is read as bytes, decoded as UTF-8 and split after every ``\\n`` (an ``\\r``
before it stays part of the line), so ``render(parse(b)) == b`` for every file that
decodes. Each task remembers its line span and its field lines; an edit copies the
line list, replaces, inserts or deletes just the lines it means, and the result is
parsed again before anything is written, so an edit can never leave a broken file.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from typing import NamedTuple

from wf.base.errors import IssueKind, ParseError, ParseIssue, UnknownTask
from wf.base.ids import ID_HELP, ID_RE, MODEL_RE, check_id, utc_stamp, valid_id
from wf.tasks.fields import (
    EFFORT_RE,
    FIELD_ORDER,
    KEYS,
    PENDING,
    REPEATABLE,
    STATES,
    Status,
    check_field,
    dump_fields,
    parse_status,
)

_FENCE_OPEN_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*?)\r?\n?")
_FENCE_CLOSE_RE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?\n?")
_INDENTED_H2_RE = re.compile(r" {1,3}##(?:[ \t]|\r?\n?$)")


class Field(NamedTuple):
    key: str  # as written in the file
    value: str
    at: int  # 0-based line index


class Task(NamedTuple):
    id: str
    title: str
    start: int  # 0-based line index of the heading
    end: int  # exclusive end of the task's lines
    raw_pairs: tuple[tuple[str, str], ...] | str  # the field lines, or their compact form
    kv: dict[str, str]  # lowercased key -> value (the first, for a repeated key)
    span: tuple[int, int]  # character offsets of the task's text

    @property
    def line(self) -> int:
        return self.start + 1

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """(key as written, value) of each field line, in order."""
        raw = self.raw_pairs
        if isinstance(raw, str):  # "Key:value" lines, as the parse cache stores them
            return tuple((k, v) for k, _, v in (p.partition(":") for p in raw.split("\n"))) if raw else ()
        return raw

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(Field(k, v, self.start + 1 + i) for i, (k, v) in enumerate(self.pairs))

    def get(self, key: str) -> str | None:
        return self.kv.get(key.lower())

    def get_all(self, key: str) -> list[str]:
        key = key.lower()
        return [v for k, v in self.pairs if k.lower() == key]

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
        if v is None or not EFFORT_RE.fullmatch(v.strip()):
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


def open_children(tasks: list[Task]) -> dict[str, list[str]]:
    """Each Parent id named in TASKS.md, and the ids of the tasks that name it, in order
    (the backlog's open slices; the parse cache's index keeps them too)."""
    children: dict[str, list[str]] = {}
    for t in tasks:
        if "parent" in t.kv and t.parent:
            children.setdefault(t.parent, []).append(t.id)
    return children


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


class TasksFile:
    """A parsed TASKS.md: its exact text, its tasks, and what is wrong with it."""

    def __init__(self, path: str, text: str, tasks: list[Task], issues: list[ParseIssue]):
        self.path = path
        self.text = text
        self.tasks = tasks
        self.issues = issues
        self._by_id = {t.id: t for t in tasks}
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        """The file's lines, each with its own ending (split on first use)."""
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    @property
    def errors(self) -> list[ParseIssue]:
        return [i for i in self.issues if i.level == "error"]

    def render(self) -> bytes:
        return self.text.encode("utf-8")

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
        return self.text[task.span[0] : task.span[1]]

    def newline(self) -> str:
        i = self.text.find("\n")
        if i < 0:
            return "\n"
        return "\r\n" if i > 0 and self.text[i - 1] == "\r" else "\n"


def decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        why = f"not UTF-8 text (byte 0x{data[e.start]:02x}) at byte offset {e.start}"
        raise ParseError([ParseIssue(path, line, "error", why, kind=IssueKind.NOT_UTF8)]) from None


def parse(data: bytes, path: str = "TASKS.md") -> TasksFile:
    """Parse TASKS.md bytes. Problems are collected in ``.issues``, never raised,
    except for a file that is not UTF-8 at all (ParseError)."""
    return parse_text(decode(data, path), path)


def parse_lines(lines: list[str], path: str = "TASKS.md") -> TasksFile:
    return parse_text("".join(lines), path)


# Lines that can matter outside a task's fields: fences and level-2 headings. Everything
# else is body text, so the parser jumps from one candidate line to the next in C.
_CANDIDATE_RE = re.compile(r"^\ufeff? {0,3}(?:`{3,}|~{3,}|##(?!#))", re.M)
# A line ends with \n or \r\n; a lone \r at the very end of the file is content. Every
# quantifier that could give back what it took is possessive: each line is scanned once,
# whatever it holds (a value of 200,000 spaces costs what its length costs, no more).
_FIELD_BLOCK_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9_-]*+:(?:[ \t][^\n]*+)?(?:\r?\n|\Z))*+")
_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LONE_CR_RE = re.compile(r"\r(?!\n)")
_ID = r"[a-z0-9][a-z0-9-]{0,47}"
_VALID_VALUE = {
    "model": MODEL_RE.pattern,
    "lane": _ID,
    "prio": "[0-3]",
    "effort": r"[1-9]\d*+(?:\.\d++)?",
    "done": r"\S[^\n]*+",
    "after": rf"{_ID}(?:[ \t]*+,[ \t]*+{_ID})*+",
    "sessions": "(?i:owner|solo)",
    "cloud": "(?i:yes|no)",
    "parent": _ID,
    "status": r"(?i:(?:in progress|awaiting|blocked|wip)(?:[ \t]*+:[^\n]*+)?|pending)",
    "note": r"\S[^\n]*+",
}


def field_pairs(block: str) -> tuple[tuple[str, str], ...]:
    """(key, value) of each line of a field block: the value is what follows the first
    colon, stripped of whitespace as ``str.strip()`` does (a CR before the LF included)."""
    out = []
    for line in block.split("\n"):
        if line:
            key, _, rest = line.partition(":")
            out.append((key, rest.strip()))
    return tuple(out)


@functools.cache
def _fast_regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compiled on first parse only (a tenth of wf's start-up otherwise): a block of
    field lines that are all known and valid, and a task heading followed by one."""
    valid = (
        "(?:(?:"
        + "|".join(f"(?i:{k}):[ \\t]++(?>{v})" for k, v in _VALID_VALUE.items())
        + r")[ \t]*+(?:\r?\n|\Z))*+"
    )
    task = (
        r"##[ \t]+([a-z0-9][a-z0-9-]{0,47})[ \t]*:([^\n]*)(?:\n|\Z)"
        + f"({valid})"
        + r"(?![A-Za-z][A-Za-z0-9_-]*+:(?:[ \t]|\r?\n|\Z))"
    )
    # ASCII: with Unicode case folding, (?i:s) would also match U+017F (long s).
    return re.compile(valid, re.ASCII), re.compile(task, re.ASCII)


def parse_text(text: str, path: str = "TASKS.md") -> TasksFile:
    st = _ParseState(path)
    valid_block_re, task_re = _fast_regexes()
    line_no = 0  # 0-based line index of the candidate
    last = 0  # its character offset
    for m in _CANDIDATE_RE.finditer(text):
        s = m.start()
        line_no += text.count("\n", last, s)
        last = s
        # A byte order mark before the first line belongs to the line, not its content.
        p = s + 1 if s == 0 and text.startswith("\ufeff") else s
        nl = text.find("\n", s)
        line_end = len(text) if nl < 0 else nl + 1
        line = text[p:line_end]
        c0 = line[0]
        if st.fence_char:
            st.fenced(line, line_no)
        elif c0 == "#" and (tm := task_re.match(text, p)) is not None and st.well_formed(tm, line_no, s):
            pass  # the common case in one regex: a well-formed heading and valid known fields
        elif c0 == "#" or (c0 == " " and line.lstrip(" ").startswith("##")):
            st.heading(text, line, line_no, s, line_end, valid_block_re)
        else:
            st.maybe_fence(line, line_no)
    total = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    st.close(total, len(text))
    if st.fence_char:
        st.unclosed_fence()
    if "\r" in text:
        _lone_crs(text, st.tasks, st.issue)
    st.issues.sort(key=lambda x: x.line)
    return TasksFile(path, text, st.tasks, st.issues)


class _ParseState:
    """What parse_text has found so far: the tasks and issues, the task being read, and
    the code fence it is in. Each method reads one kind of candidate line."""

    __slots__ = (
        "cur",
        "fence_at",
        "fence_char",
        "fence_len",
        "first_line",
        "hid",
        "hidden_heads",
        "hidden_in_fence",
        "issues",
        "path",
        "tasks",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self.issues: list[ParseIssue] = []
        self.tasks: list[Task] = []
        self.first_line: dict[str, int] = {}
        self.fence_char = ""
        self.fence_len = 0
        self.fence_at = 0
        self.hidden_in_fence: list[int] = []
        # Closed fences that hid '## ' lines: (opened at, closed at, the hidden lines). Legit
        # in an example, suspect when the file then ends inside a fence (see unclosed_fence).
        self.hid: list[tuple[int, int, list[str]]] = []
        self.hidden_heads: list[str] = []
        # The task being read: (heading line, id, title, pairs, kv, char start) or None.
        self.cur: tuple[int, str, str, tuple[tuple[str, str], ...], dict[str, str], int] | None = None

    def issue(
        self, index: int, level: str, message: str, task: str | None = None, kind: IssueKind = IssueKind.OTHER
    ) -> None:
        self.issues.append(ParseIssue(self.path, index + 1, level, message, task, kind))

    def close(self, end_line: int, end_char: int) -> None:
        """The task being read ends before this line."""
        cur = self.cur
        if cur is not None:
            self.tasks.append(Task(cur[1], cur[2], cur[0], end_line, cur[3], cur[4], (cur[5], end_char)))

    def fenced(self, line: str, line_no: int) -> None:
        """A line inside a code fence: the fence's end, or a '## ' line it hides."""
        m = _FENCE_CLOSE_RE.fullmatch(line)
        if m and m.group(1)[0] == self.fence_char and len(m.group(1)) >= self.fence_len:
            self.fence_char = ""
            if self.hidden_heads:
                self.hid.append((self.fence_at, line_no, self.hidden_heads))
        elif line.startswith(("## ", "##\t")):
            self.hidden_in_fence.append(line_no)
            self.hidden_heads.append(line)

    def maybe_fence(self, line: str, line_no: int) -> None:
        """A line that may open a code fence."""
        m = _FENCE_OPEN_RE.fullmatch(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            self.fence_char, self.fence_len, self.fence_at = m.group(1)[0], len(m.group(1)), line_no
            self.hidden_in_fence = []
            self.hidden_heads = []

    def well_formed(self, tm: re.Match[str], line_no: int, s: int) -> bool:
        """A heading the fast regex matched, with its valid fields: a task, unless its
        title is empty or its id taken (then False: the slow path says what is wrong)."""
        task_id = tm.group(1)
        title = tm.group(2).strip()
        if not title or task_id in self.first_line:
            return False
        self.close(line_no, s)
        self.start(line_no, s, task_id, title, tm.group(3), None)
        return True

    def heading(
        self, text: str, line: str, line_no: int, s: int, line_end: int, valid_block_re: re.Pattern[str]
    ) -> None:
        """A level-2 heading (or what looks like one) the fast path did not take: a task,
        or an issue saying what is wrong with it."""
        if line[0] == " ":
            if _INDENTED_H2_RE.match(line):
                self.close(line_no, s)
                self.cur = None
                self.issue(line_no, "error", "indented level-2 heading: a task heading starts at column 1")
            return
        rest = line[2:]
        if rest[:1] not in (" ", "\t") and content_of(rest) != "":
            self.issue(line_no, "warning", "'##' without a space is not a heading; is it a task?")
            return
        self.close(line_no, s)
        self.cur = None
        head = content_of(rest).strip()
        task_id, colon, title = head.partition(":")
        task_id = task_id.strip()
        title = title.strip()
        if not colon or not title or not task_id:
            self.issue(line_no, "error", "level-2 heading is not a task: expected '## <id>: <title>'")
        elif not valid_id(task_id):
            self.issue(line_no, "error", f"bad task id {task_id!r}: {ID_HELP}")
        elif task_id in self.first_line:
            first = self.first_line[task_id]
            self.issue(line_no, "error", f"duplicate id {task_id!r} (first at line {first})")
        else:
            fm = _FIELD_BLOCK_RE.match(text, line_end)
            self.start(line_no, s, task_id, title, fm.group(0) if fm else "", valid_block_re)

    def start(
        self, line_no: int, s: int, task_id: str, title: str, block: str, valid_re: re.Pattern[str] | None
    ) -> None:
        """Start reading task ``task_id`` with its field lines ``block``; unless the fast
        regex already found them valid (``valid_re`` None), they are checked against
        ``valid_re``, and what is wrong is said field by field."""
        self.first_line[task_id] = line_no + 1
        pairs = field_pairs(block) if block else ()
        keys = [k.lower() for k, _ in pairs]
        kv = dict(zip(keys, (v for _, v in pairs), strict=True))
        if len(kv) != len(keys) or (valid_re is not None and not valid_re.fullmatch(block)):
            _check_fields(pairs, task_id, line_no + 1, self.issue)
            kv = dict(zip(keys[::-1], (v for _, v in reversed(pairs)), strict=True))
        self.cur = (line_no, task_id, title, pairs, kv, s)

    def unclosed_fence(self) -> None:
        """The file ends inside a code fence: an error if it hides '## ' lines, or if an
        earlier pair of fences did (one fence too many or too few), else a warning."""
        if self.hidden_in_fence:
            self.issue(
                self.fence_at,
                "error",
                f"code fence is never closed, hiding {len(self.hidden_in_fence)} '## ' line(s) "
                f"from line {self.hidden_in_fence[0] + 1} on",
                kind=IssueKind.UNCLOSED_FENCE,
            )
        elif self.hid:
            # The fences pair up otherwise than the writer meant (one inserted or deleted
            # fence): an earlier pair hides task headings, and the last fence is left open.
            opened, closed, heads = self.hid[0]
            ids = [h[3:].partition(":")[0].strip() for h in heads[:5]]
            more = f" and {len(heads) - 5} more" if len(heads) > 5 else ""
            self.issue(
                opened,
                "error",
                f"code fences are out of step: the fence here closes at line {closed + 1} and hides "
                f"{len(heads)} '## ' line(s) ({', '.join(ids)}{more}), and the fence at line "
                f"{self.fence_at + 1} is never closed; is a fence missing or one too many?",
                kind=IssueKind.UNCLOSED_FENCE,
            )
        else:
            self.issue(self.fence_at, "warning", "code fence is never closed", kind=IssueKind.UNCLOSED_FENCE)


_HIDDEN_RE = re.compile(r"\ufeff? {0,3}(?:##[ \t]|`{3}|~{3})")


def _lone_crs(text: str, tasks: list[Task], issue: Callable[..., None]) -> None:
    """A CR not followed by LF is a line break to many editors. wf reads LF and CRLF
    only, so such a line is reported, never silently read as one line: an error that
    stops every write if it hides a heading or a fence (a CR-only file's tasks), else
    an error of the task it is in (a warning in the preamble)."""
    starts = [t.start for t in tasks]
    line_no, last, seen = 0, 0, -1
    for m in _LONE_CR_RE.finditer(text):
        if m.start() == len(text) - 1:
            break  # a file cut after the CR of a CRLF: that CR is content
        line_no += text.count("\n", last, m.start())
        last = m.start()
        if line_no == seen:
            continue
        seen = line_no
        nl = text.find("\n", m.start())
        begin = text.rfind("\n", 0, m.start()) + 1
        parts = text[begin : len(text) if nl < 0 else nl].split("\r")[1:]
        hidden = [p for p in parts if _HIDDEN_RE.match(p)]
        if hidden:
            heads = [p.strip() for p in hidden if "#" in p[:5]]
            what = f"{len(heads)} heading(s) from {heads[0][:60]!r} on" if heads else "a code fence"
            issue(
                line_no,
                "error",
                f"lone CR (\\r) line breaks hide {what}: wf reads LF or CRLF line endings only; "
                "convert the file's line endings",
            )
            continue
        at = bisect.bisect_right(starts, line_no) - 1
        if at >= 0 and tasks[at].start <= line_no < tasks[at].end:
            issue(line_no, "error", "lone CR (\\r) inside the line: use LF or CRLF line breaks", tasks[at].id)
        else:
            issue(line_no, "warning", "lone CR (\\r) inside the line: use LF or CRLF line breaks")


def _check_fields(
    pairs: tuple[tuple[str, str], ...],
    task_id: str,
    first: int,
    issue: Callable[..., None],
) -> None:
    """The slow path: say what is wrong with each field line of a task."""
    seen: set[str] = set()
    for i, (key, value) in enumerate(pairs):
        at = first + i
        k = key.lower()
        if k in KEYS:
            problem = check_field(k, value)
            if problem:
                issue(at, "error", problem, task_id)
            elif k not in REPEATABLE and k in seen:
                issue(at, "error", f"{KEYS[k]} given twice in task {task_id}", task_id)
            seen.add(k)
        else:
            issue(at, "warning", f"unknown field {key!r} (kept as it is)")


__all__ = [
    "FIELD_ORDER",
    "ID_RE",
    "KEYS",
    "PENDING",
    "REPEATABLE",
    "STATES",
    "Field",
    "ParseError",
    "Status",
    "Task",
    "TasksFile",
    "check_field",
    "check_id",
    "dump_fields",
    "parse",
    "parse_lines",
    "parse_status",
    "split_lines",
    "utc_stamp",
    "valid_id",
]
