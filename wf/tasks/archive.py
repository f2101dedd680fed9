"""The archive (DONE.md): one line per done task, oldest first.

A line reads ``- <UTC time> <id> lane=<lane> model=<model> commit=<sha> -- <title>``
(``parent=<id>`` may follow the commit). People may keep other text in the file
(a heading, notes); lines that are not archive lines are kept and ignored, and a
line that starts like one but does not parse is reported by ``wf check``.

A task that ``wf merge`` archived while its text had errors (a person's typo) keeps that
text under its line, each line quoted (``  > ``), so nothing a person typed is lost.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple

from wf.base.errors import ParseIssue
from wf.base.text import fields
from wf.tasks.taskfile import content_of, decode, eol_of, split_lines, utc_stamp

HEADER = "# Done\n\nOne line per finished task, oldest first; written by `wf done` and `wf merge`.\n\n"
_LINE_RE = re.compile(
    r"- (?P<ts>\d{4}-\d\d-\d\dT[0-9:]+Z) (?P<id>[a-z0-9][a-z0-9-]{0,47})"
    r"(?P<kv>(?: [a-z_]+=\S*)*) -- (?P<title>.*)"
)


class Entry(NamedTuple):
    ts: str
    id: str
    lane: str
    model: str
    commit: str
    parent: str
    title: str
    line: int
    raw: str

    def as_dict(self) -> dict[str, object]:
        return {
            "ts": self.ts,
            "id": self.id,
            "lane": self.lane,
            "model": self.model,
            "commit": self.commit,
            "parent": self.parent or None,
            "title": self.title,
        }


class Archive(NamedTuple):
    path: str
    entries: list[Entry]
    issues: list[ParseIssue]
    text: str

    def ids(self) -> set[str]:
        return {e.id for e in self.entries}

    def find(self, task_id: str) -> Entry | None:
        for e in self.entries:
            if e.id == task_id:
                return e
        return None


def parse(data: bytes | None, path: str = "DONE.md") -> Archive:
    if data is None:
        return Archive(path, [], [], "")
    text = decode(data, path)
    entries: list[Entry] = []
    issues: list[ParseIssue] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(split_lines(text)):
        if not line.startswith("- "):
            continue
        c = content_of(line).rstrip()
        m = _LINE_RE.fullmatch(c)
        if m is None:
            if re.match(r"- \d{4}-\d\d-\d\dT", c):
                issues.append(ParseIssue(path, i + 1, "warning", "archive line does not parse"))
            continue
        kv = fields(m.group("kv"))
        e = Entry(
            m.group("ts"),
            m.group("id"),
            kv.get("lane", "-"),
            kv.get("model", "-"),
            kv.get("commit", "-"),
            kv.get("parent", ""),
            m.group("title"),
            i + 1,
            c,
        )
        if e.id in seen:
            issues.append(
                ParseIssue(path, i + 1, "warning", f"id {e.id!r} archived twice (first at line {seen[e.id]})")
            )
        else:
            seen[e.id] = i + 1
        entries.append(e)
    return Archive(path, entries, issues, text)


def format_line(
    task_id: str,
    title: str,
    *,
    lane: str | None,
    model: str | None,
    commit: str | None,
    parent: str | None = None,
    now: datetime | None = None,
) -> str:
    parts = [
        f"- {utc_stamp(now)} {task_id}",
        f"lane={lane or '-'}",
        f"model={model or '-'}",
        f"commit={commit or '-'}",
    ]
    if parent:
        parts.append(f"parent={parent}")
    return " ".join(parts) + f" -- {title}"


KEPT_PREFIX = "  > "


def kept_text(task_text: str, problems: list[str]) -> list[str]:
    """The quoted block kept under an archive line: why, then the task's text as it was."""
    head = f"archived by wf merge with errors in its text ({'; '.join(problems)}); the text as it was:"
    body = [ln.rstrip("\r\n") for ln in split_lines(task_text.rstrip("\r\n") + "\n")]
    return [(KEPT_PREFIX + ln).rstrip() for ln in (head, *body)]


def kept_under(archive: Archive, task_id: str) -> list[str]:
    """The quoted lines right under ``task_id``'s archive line (none: [])."""
    entry = archive.find(task_id)
    if entry is None:
        return []
    out = []
    for ln in split_lines(archive.text)[entry.line :]:
        c = content_of(ln)
        if not c.startswith(KEPT_PREFIX.rstrip()):
            break
        out.append(c)
    return out


def appended(archive: Archive, line: str, kept: list[str] | tuple[str, ...] = ()) -> bytes:
    """The archive's bytes with one more line at the end (and the quoted lines kept
    under it, if any); the rest untouched."""
    text = archive.text or HEADER
    lines = split_lines(text)
    eol = next((eol_of(x) for x in lines if eol_of(x)), "\n")
    if lines and not lines[-1].endswith("\n"):
        text += eol
    return (text + "".join(x + eol for x in (line, *kept))).encode("utf-8")
