"""Three-way merges of the backlog by its structure: TASKS.md by task, the archive and
the cost log as unions.

TASKS.md is merged task by task, never line by line: a task added on either side is
kept (in its place among its neighbours), a task deleted on one side and left alone on
the other is deleted, and within a task the heading, each field and the body are merged
as three values (base, ours, theirs): a side that left one alone takes the other's.
Two exceptions to "both changed it differently: a conflict":

- the Status line is wf's own: the newer status wins (its ``since`` time, else the
  time of the side's change);
- Note lines are a set: notes added on either side are all kept.

Anything else both sides changed differently is a person's text, and is returned as a
:class:`Conflict` (both values), never written with conflict markers. The caller
decides per task with ``take`` (keep ``OURS`` or ``THEIRS`` whole).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from wf.base.errors import ParseError
from wf.tasks import archive as archivemod
from wf.tasks.fields import parse_status
from wf.tasks.taskfile import TasksFile, content_of, eol_of, parse_text, split_lines

_WF_KEYS = frozenset({"status", "note"})  # the field lines wf itself writes on a claimed task


class Side(enum.Enum):
    OURS = "ours"
    THEIRS = "theirs"


class ConflictKind(enum.Enum):
    TEXT = "text"  # both changed the same part of the text differently
    DELETED = "deleted"  # one side deleted the task, the other changed it


@dataclass(frozen=True)
class Conflict:
    task: str | None  # None: the text before the first task
    kind: ConflictKind
    part: str  # "title", a field's key, "body", "task" (a deletion), "preamble"
    ours: str | None  # None: absent on that side
    theirs: str | None

    def as_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "kind": self.kind.value,
            "part": self.part,
            "ours": self.ours,
            "theirs": self.theirs,
        }


@dataclass(frozen=True)
class Merged:
    text: str
    conflicts: tuple[Conflict, ...]
    added: tuple[str, ...]  # ids that came from theirs
    removed: tuple[str, ...]  # ids theirs deleted (or archived) that ours still had


class Block(NamedTuple):
    """One task's lines: its heading, its field lines, the rest (its body)."""

    heading: str
    fields: tuple[str, ...]
    body: tuple[str, ...]

    def lines(self) -> list[str]:
        return [self.heading, *self.fields, *self.body]

    def without_wf_lines(self) -> Block:
        return Block(self.heading, tuple(f for f in self.fields if _key(f) not in _WF_KEYS), self.body)

    def trimmed(self) -> Block:
        """Without the blank lines at its end (the space before the next task)."""
        return Block(self.heading, self.fields, _trim(self.body))


def _trim(body: tuple[str, ...]) -> tuple[str, ...]:
    n = len(body)
    while n and not content_of(body[n - 1]).strip():
        n -= 1
    return body[:n]


def _key(field_line: str) -> str:
    return field_line.partition(":")[0].strip().lower()


def _value(field_line: str) -> str:
    return content_of(field_line).partition(":")[2].strip()


class Doc(NamedTuple):
    preamble: tuple[str, ...]
    order: list[str]
    blocks: dict[str, Block]


def split_doc(text: str, path: str) -> Doc:
    """The preamble and each task's block; ParseError if the file's structure is broken."""
    doc: TasksFile = parse_text(text, path)
    broken = [i for i in doc.errors if i.task is None]
    if broken:
        raise ParseError(broken)
    lines = doc.lines
    first = doc.tasks[0].start if doc.tasks else len(lines)
    blocks: dict[str, Block] = {}
    for t in doc.tasks:
        nfields = len(t.pairs)
        blocks[t.id] = Block(
            lines[t.start],
            tuple(lines[t.start + 1 : t.start + 1 + nfields]),
            tuple(lines[t.start + 1 + nfields : t.end]),
        )
    return Doc(tuple(lines[:first]), [t.id for t in doc.tasks], blocks)


def _pick(base: object, ours: object, theirs: object) -> tuple[bool, object]:
    """(clean, value) of a three-way merge of one value."""
    if ours == theirs or theirs == base:
        return True, ours
    if ours == base:
        return True, theirs
    return False, ours


def _status_time(line: str | None, side_time: float) -> float:
    if line is not None:
        st = parse_status(_value(line))
        if st is not None and st.since:
            try:
                return datetime.strptime(st.since, "%Y-%m-%dT%H:%MZ").replace(tzinfo=UTC).timestamp()
            except ValueError:
                pass
    return side_time


class _Times(NamedTuple):
    ours: float
    theirs: float


def _merge_fields(
    tid: str, base: tuple[str, ...], ours: tuple[str, ...], theirs: tuple[str, ...], times: _Times
) -> tuple[list[str], list[Conflict]]:
    def keyed(lines: tuple[str, ...]) -> dict[str, str]:
        out: dict[str, str] = {}
        for ln in lines:
            k, n = _key(ln), 2
            name = k
            while name in out:
                name, n = f"{k}#{n}", n + 1
            if k != "note":
                out[name] = ln
        return out

    b, o, t = keyed(base), keyed(ours), keyed(theirs)
    conflicts: list[Conflict] = []
    values: dict[str, str | None] = {}
    for k in [*o, *(k for k in t if k not in o)]:
        clean, v = _pick(b.get(k), o.get(k), t.get(k))
        if not clean and k == "status":
            newer_theirs = _status_time(t.get(k), times.theirs) > _status_time(o.get(k), times.ours)
            clean, v = True, t.get(k) if newer_theirs else o.get(k)
        if not clean:
            conflicts.append(Conflict(tid, ConflictKind.TEXT, k, _opt(o.get(k)), _opt(t.get(k))))
        values[k] = v if isinstance(v, str) else None
    bn = [ln for ln in base if _key(ln) == "note"]
    on = [ln for ln in ours if _key(ln) == "note"]
    tn = [ln for ln in theirs if _key(ln) == "note"]
    clean, picked = _pick(bn, on, tn)  # one side left the notes alone: the other's, in its order
    notes = (
        list(picked)  # type: ignore[call-overload]
        if clean
        else [n for n in on if n in tn or n not in bn] + [n for n in tn if n not in on and n not in bn]
    )
    out: list[str] = []
    placed: set[str] = set()
    for k in o:  # ours' order first, then what theirs added, after its neighbour in theirs
        if values.get(k) is not None:
            out.append(values[k] or "")
            placed.add(k)
    prev: str | None = None
    for k in t:
        if k not in placed and values.get(k) is not None:
            at = out.index(values[prev] or "") + 1 if prev in placed else len(out)
            out.insert(at, values[k] or "")
            placed.add(k)
        if k in placed:
            prev = k
    return out + notes, conflicts


def _opt(line: str | None) -> str | None:
    return None if line is None else content_of(line)


def _merge_block(
    tid: str, base: Block | None, ours: Block, theirs: Block, times: _Times
) -> tuple[Block, list[Conflict]]:
    if ours == theirs or theirs == base:
        return ours, []
    if ours == base:
        return theirs, []
    b = base or Block("", (), ())
    conflicts: list[Conflict] = []
    clean, heading = _pick(b.heading, ours.heading, theirs.heading)
    if not clean:
        conflicts.append(
            Conflict(tid, ConflictKind.TEXT, "title", content_of(ours.heading), content_of(theirs.heading))
        )
    fields, more = _merge_fields(tid, b.fields, ours.fields, theirs.fields, times)
    conflicts += more
    clean, body = _pick(_trim(b.body), _trim(ours.body), _trim(theirs.body))
    assert isinstance(body, tuple)
    body = body + ours.body[len(_trim(ours.body)) :]  # the blank lines after it: ours'
    if not clean:
        conflicts.append(Conflict(tid, ConflictKind.TEXT, "body", "".join(ours.body), "".join(theirs.body)))
    assert isinstance(heading, str)
    return Block(heading, tuple(fields), body), conflicts


def _gone(
    tid: str, base: Block, kept: Block, side: Side, archived: bool
) -> tuple[Block | None, list[Conflict]]:
    """A task one side deleted: deleted too if the other left it alone (or only claimed
    it, and it is archived); else a conflict."""
    kept_t, base_t = kept.trimmed(), base.trimmed()
    if kept_t == base_t or (archived and kept_t.without_wf_lines() == base_t.without_wf_lines()):
        return None, []
    text = "".join(kept.lines())
    ours, theirs = (text, None) if side is Side.OURS else (None, text)
    return kept, [Conflict(tid, ConflictKind.DELETED, "task", ours, theirs)]


def merge_tasks(
    base: str,
    ours: str,
    theirs: str,
    *,
    times: tuple[float, float],
    archived: frozenset[str] = frozenset(),
    take: Mapping[str, Side] | None = None,
    path: str = "TASKS.md",
) -> Merged:
    """Merge three TASKS.md texts by task. ``times``: when ours and theirs were changed
    (for a status both changed without a ``since``); ``archived``: ids in the merged
    archive; ``take``: per task id, the side kept whole instead of merging."""
    take = take or {}
    tm = _Times(*times)
    b, o, t = split_doc(base, path), split_doc(ours, path), split_doc(theirs, path)
    if ours == base or theirs == base:  # one side left the file alone: the other's, as it is
        changed, other = (t, theirs) if ours == base else (o, ours)
        removed = tuple(i for i in o.order if i not in changed.blocks)
        return Merged(other, (), tuple(i for i in changed.order if i not in o.blocks), removed)
    conflicts: list[Conflict] = []
    result: dict[str, Block] = {}
    for tid in [*o.order, *(i for i in t.order if i not in o.blocks)]:
        bb, ob, tb = b.blocks.get(tid), o.blocks.get(tid), t.blocks.get(tid)
        if tid in take:
            chosen = ob if take[tid] is Side.OURS else tb
            if chosen is not None:
                result[tid] = chosen
            continue
        merged: Block | None
        found: list[Conflict] = []
        if ob is not None and tb is not None:
            merged, found = _merge_block(tid, bb, ob, tb, tm)
        elif ob is not None:
            merged, found = (ob, []) if bb is None else _gone(tid, bb, ob, Side.OURS, tid in archived)
        elif tb is not None:
            merged, found = (tb, []) if bb is None else _gone(tid, bb, tb, Side.THEIRS, tid in archived)
        else:
            merged = None
        conflicts += found
        if merged is not None:
            result[tid] = merged
    clean, preamble = _pick(b.preamble, o.preamble, t.preamble)
    if not clean:
        conflicts.append(
            Conflict(None, ConflictKind.TEXT, "preamble", "".join(o.preamble), "".join(t.preamble))
        )
    order = _order(o.order, t.order, result)
    assert isinstance(preamble, tuple)
    text = _render(list(preamble), [result[i] for i in order], ours or theirs)
    added = tuple(i for i in order if i not in o.blocks)
    removed = tuple(i for i in o.order if i not in result)
    return Merged(text, tuple(conflicts), added, removed)


def _order(ours: list[str], theirs: list[str], result: Mapping[str, Block]) -> list[str]:
    """Ours' order; a task only theirs has goes right after its neighbour in theirs."""
    out = [i for i in ours if i in result]
    prev: str | None = None
    for tid in theirs:
        if tid in result and tid not in out:
            out.insert(out.index(prev) + 1 if prev in out else 0, tid)
        if tid in out:
            prev = tid
    return out


def _render(preamble: list[str], blocks: list[Block], sample: str) -> str:
    lines = split_lines(sample)
    eol = next((eol_of(x) for x in lines if eol_of(x)), "\n")
    out = list(preamble)
    for n, block in enumerate(blocks):
        if out and not eol_of(out[-1]):
            out[-1] += eol
        if n and content_of(out[-1]).strip():  # a task that was last on its side: a blank line after it
            out.append(eol)
        out.extend(block.lines())
    return "".join(out)


def merge_archive(
    base: str | None, ours: str | None, theirs: str | None, path: str = "DONE.md"
) -> str | None:
    """The side that changed the archive since ``base``; if both did, ours with every
    line of theirs it lacks (by id) appended, each with the quoted lines kept under it.
    None when neither side has one."""
    if theirs == base:
        return ours
    if ours is None or ours == base:
        return theirs
    if theirs is None:
        return ours
    o = archivemod.parse(ours.encode("utf-8"), path)
    t = archivemod.parse(theirs.encode("utf-8"), path)
    have = o.ids()
    for entry in t.entries:
        if entry.id not in have:
            have.add(entry.id)
            kept = archivemod.kept_under(t, entry.id)
            o = archivemod.parse(archivemod.appended(o, entry.raw, kept), path)
    return o.text


def union_lines(first: bytes, second: bytes) -> bytes:
    """``first`` with each line of ``second`` it lacks appended, in order (a log's union)."""
    have = set(first.splitlines())
    out = first
    for line in second.splitlines():
        if line and line not in have:
            have.add(line)
            if out and not out.endswith(b"\n"):
                out += b"\n"
            out += line + b"\n"
    return out
