"""Panels side by side (``wf gather RUN --compare``): the answers of the units that were
asked one question, lined up section by section, each section marked ``agree``,
``differ`` or ``missing``.

A panel is the units sharing a ``panel`` in status.json (``wf run --panel``, or manifest
units with a ``panel`` key); a retry's attempt belongs to the panel of the unit it
retries, and only the latest attempt of each is read. Each answer (output.txt) is split
with :func:`wf.fanout.contract.parse` into the contract's sections plus any other
``Name:`` line of its ``# result`` block.

How sections are judged (a heuristic for free text: a person or the orchestrator reads
every row that differs):

- ``missing``: a unit has no answer (not done, a FALLBACK, empty) or not that section.
- Files: the sets of paths named (bullets, backticks, ``./``, commas, ``:LINE`` cut).
  Equal sets agree; otherwise they differ and ``only_in`` says which unit named which
  file that not every unit named.
- Any other section: the same text once normalised (case, spacing, markdown, a final
  dot; ``none``/``n/a``/``-`` are all ``none``) agrees. Otherwise its verdict is read
  (:func:`verdict`): all ``yes`` or all ``no`` agree, a ``yes`` against a ``no`` is
  an opposite conclusion, anything else (a verdict unclear) differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from wf.base.errors import WfError
from wf.fanout.contract import SECTIONS, parse
from wf.fanout.watch import ATTENTION, GAVE_UP, OK
from wf.workers import runs

if TYPE_CHECKING:
    from wf.base.project import Project

FILES = "Files"
NONE_WORDS = frozenset({"", "none", "n/a", "na", "-", "nothing", "no files", "none."})


class Mark(Enum):
    AGREE = "agree"
    DIFFER = "differ"
    MISSING = "missing"


class Why(Enum):
    """Why a section got its mark (what an orchestrator may branch on)."""

    SAME_TEXT = "same text"
    SAME_FILES = "same files"
    SAME_VERDICT = "same verdict"
    OPPOSITE = "opposite verdicts"
    OTHER_FILES = "different files"
    OTHER_TEXT = "different text"
    NO_ANSWER = "no answer"  # a unit has no answer at all
    NOT_GIVEN = "section not given"  # a unit answered without this section


class Verdict(Enum):
    YES = "yes"  # safe, passes, no issues, correct
    NO = "no"  # unsafe, fails, a bug, incorrect
    UNCLEAR = "unclear"  # neither, or both


@dataclass(frozen=True)
class Member:
    """One unit of a panel: its name (the first attempt's unit id), the attempt read,
    and its answer (None: it has none)."""

    name: str
    unit: str
    adapter: str | None
    state: str  # its status.json state; "missing" when it never started
    answer: str | None


@dataclass(frozen=True)
class Row:
    section: str
    mark: Mark
    why: Why
    answers: dict[str, str | None]  # by member; None: not given
    only_in: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Files: not named by every unit
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Files: the paths each named
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # other sections


@dataclass(frozen=True)
class Panel:
    name: str
    members: tuple[Member, ...]
    rows: tuple[Row, ...]

    @property
    def agree(self) -> bool:
        return all(r.mark is Mark.AGREE for r in self.rows)


class NoPanel(WfError):
    def __init__(self, run: str) -> None:
        super().__init__(
            f"run {run} has no panel to compare (make one with wf run --panel claude,codex PROMPT,"
            ' or give manifest units a "panel" key)'
        )
        self.run = run


# ------------------------------------------------------------------ reading answers

_BULLET = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_TICKED = re.compile(r"`([^`\n]+)`")
_PATHLIKE = re.compile(r"^(?:[\w.~@+-]*/[\w./~@+-]*|[\w~@+-][\w.~@+-]*\.[A-Za-z0-9]{1,8})$")
_LINE_SUFFIX = re.compile(r"(?::\d+)+(?:-\d+)?$|#L\d+(?:-L?\d+)?$")
_NOT_PATHS = frozenset({"e.g", "i.e", "etc", "vs"})


def _path(token: str) -> str | None:
    t = token.strip().strip("\"'()[]<>*").rstrip(":;.,")
    t = _LINE_SUFFIX.sub("", t)
    while t.startswith("./"):
        t = t[2:]
    t = t.rstrip("/") or t
    if not t or t.lower() in NONE_WORDS or t.lower() in _NOT_PATHS or "://" in t:
        return None
    return t


def files_named(text: str) -> frozenset[str]:
    """The paths a Files section names: one an item (a line, or a comma-separated part),
    in backticks or not, with bullets, ``./`` and ``:LINE`` cut. In an item of words the
    path-like ones count (``src/a.py``, ``setup.cfg``); a lone word (``Makefile``) too."""
    found: set[str] = set()
    for item in re.split(r"[\n,;]", text):
        item = _BULLET.sub("", item.strip())
        if item.strip().rstrip(".").lower() in NONE_WORDS:
            continue
        ticked = _TICKED.findall(item)
        words = item.split()
        paths = [_path(w) for w in (ticked or words)]
        if not ticked and len(words) > 1:  # prose: only its path-like words
            paths = [p for p in paths if p is not None and _PATHLIKE.match(p)]
        found.update(p for p in paths if p is not None)
    return frozenset(found)


def normal(text: str) -> str:
    """Text as compared: case, spacing, markdown emphasis and a final dot left out;
    every way of saying nothing is ``none``."""
    flat = " ".join(text.replace("`", "").replace("*", "").split()).lower().rstrip(".")
    return "none" if flat in NONE_WORDS else flat


_VERDICT_LINE = re.compile(r"^\s*verdict\s*:\s*\**\s*([A-Za-z-]+)", re.IGNORECASE | re.MULTILINE)
VERDICT_WORDS = {
    Verdict.YES: frozenset(
        {"yes", "safe", "pass", "passes", "passed", "ok", "correct", "true", "sound", "lgtm"}
    ),
    Verdict.NO: frozenset({"no", "unsafe", "fail", "fails", "failed", "incorrect", "false", "broken", "bug"}),
}
# phrases read first and taken out, so that the words inside them do not count again
_PHRASES = (
    (
        Verdict.NO,
        re.compile(r"\b(?:is )?not (?:safe|correct|sound|ok|fine)\b|\bdo(?:es)? ?n[o']t (?:work|pass)\b"),
    ),
    (
        Verdict.YES,
        re.compile(
            r"\bno (?:known )?(?:issues?|problems?|bugs?|errors?|vulnerabilit(?:y|ies)|findings?)\b"
            r"|\bnothing (?:wrong|found)\b|\bfound nothing\b"
        ),
    ),
)
_WORDS = (
    (
        Verdict.NO,
        re.compile(
            r"^no\b|\b(?:unsafe|incorrect|wrong|fail(?:s|ed|ing|ures?)?|bugs?|broken"
            r"|vulnerable|vulnerabilit(?:y|ies)|issues?|problems?|crash(?:es|ed)?)\b"
        ),
    ),
    (Verdict.YES, re.compile(r"^yes\b|\b(?:safe|correct|sound|pass(?:es|ed|ing)?|works|fine|ok|okay)\b")),
)


def verdict(text: str) -> Verdict:
    """What a free-text answer concludes, as simply as can be explained: a ``Verdict:``
    line's first word when it is one of VERDICT_WORDS; else the phrases (``no issues``
    says yes, ``not safe`` says no) and then the words (``safe``, ``passes``, a leading
    ``yes`` against ``unsafe``, ``fails``, ``bug``, ``issues``, a leading ``no``)
    found: one side only gives that verdict, both or neither is UNCLEAR."""
    line = _VERDICT_LINE.search(text)
    if line:
        word = line.group(1).lower()
        for v, words in VERDICT_WORDS.items():
            if word in words:
                return v
    rest = " ".join(text.lower().replace("*", "").split())
    seen: set[Verdict] = set()
    for v, pattern in (*_PHRASES, *_WORDS):
        if pattern.search(rest):
            seen.add(v)
            rest = pattern.sub(" ", rest)
    return seen.pop() if len(seen) == 1 else Verdict.UNCLEAR


def _result_block(text: str) -> list[str] | None:
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lstrip().startswith("#") and lines[i].strip().lstrip("#").strip().lower() == "result":
            return lines[i + 1 :]
    return None


_OTHER_SECTION = re.compile(r"^([A-Z][A-Za-z]*(?: [A-Za-z]+){0,2}):(?:\s|$)")


def sections_of(answers: list[str]) -> tuple[str, ...]:
    """The contract's sections, then any other ``Name:`` line (one to three words, at
    the start of a line) of an answer's ``# result`` block, in the order first seen."""
    known = {s.lower() for s in SECTIONS}
    extra: list[str] = []
    for text in answers:
        for line in _result_block(text) or []:
            m = _OTHER_SECTION.match(line)
            if m and m.group(1).lower() not in known:
                known.add(m.group(1).lower())
                extra.append(m.group(1))
    return (*SECTIONS, *extra)


# ------------------------------------------------------------------ judging


def _row(section: str, answers: dict[str, str | None], no_answer: bool) -> Row:
    given = {u: a for u, a in answers.items() if a is not None}
    if section == FILES:
        files = {u: tuple(sorted(files_named(a))) for u, a in given.items()}
        if len(given) < len(answers):
            return Row(section, Mark.MISSING, _missing(no_answer), answers, files=files)
        common = set.intersection(*(set(f) for f in files.values())) if files else set()
        only = {u: tuple(f for f in fs if f not in common) for u, fs in files.items()}
        if not any(only.values()):
            return Row(section, Mark.AGREE, Why.SAME_FILES, answers, files=files)
        return Row(section, Mark.DIFFER, Why.OTHER_FILES, answers, only_in=only, files=files)
    verdicts = {u: verdict(a) for u, a in given.items()}
    if len(given) < len(answers):
        return Row(section, Mark.MISSING, _missing(no_answer), answers, verdicts=verdicts)
    if len({normal(a) for a in given.values()}) == 1:
        return Row(section, Mark.AGREE, Why.SAME_TEXT, answers, verdicts=verdicts)
    said = set(verdicts.values())
    if said == {Verdict.YES} or said == {Verdict.NO}:
        return Row(section, Mark.AGREE, Why.SAME_VERDICT, answers, verdicts=verdicts)
    if {Verdict.YES, Verdict.NO} <= said:
        return Row(section, Mark.DIFFER, Why.OPPOSITE, answers, verdicts=verdicts)
    return Row(section, Mark.DIFFER, Why.OTHER_TEXT, answers, verdicts=verdicts)


def _missing(no_answer: bool) -> Why:
    return Why.NO_ANSWER if no_answer else Why.NOT_GIVEN


def compare_panel(name: str, members: list[Member]) -> Panel:
    """A panel's rows, one per section any of its answers gives (the contract's always)."""
    names = sections_of([m.answer for m in members if m.answer])
    parsed = {m.name: parse(m.answer, names) if m.answer else None for m in members}
    no_answer = any(p is None for p in parsed.values())
    rows = [
        _row(s, {u: (p.section(s) if p is not None else None) for u, p in parsed.items()}, no_answer)
        for s in names
    ]
    return Panel(name, tuple(members), tuple(rows))


# ------------------------------------------------------------------ a run's panels


def _answer(project: Project, run: str, st: dict[str, Any]) -> str | None:
    if st.get("state") != "done" or st.get("fallback"):
        return None
    text = runs.read_output(runs.unit_dir(project, run, str(st["unit"])))
    return text if text.strip() else None


def members_of(project: Project, run: str, current: list[dict[str, Any]]) -> dict[str, list[Member]]:
    """The panels of ``run`` and their members: the latest attempt of each unit in
    ``current`` (what gather read), and any unit of a panel the run asked for that has
    not started (state ``missing``)."""
    from wf.fanout.manifest import saved_requests

    everything = runs.units(project, run)
    panel_of = {str(st.get("unit")): st["panel"] for st in everything if isinstance(st.get("panel"), str)}
    panels: dict[str, dict[str, Member]] = {}
    for r in saved_requests(project, run):
        if r.panel:
            panels.setdefault(r.panel, {})[r.id] = Member(r.id, r.id, r.adapter, "missing", None)
            panel_of.setdefault(r.id, r.panel)
    for st in current:
        unit = str(st.get("unit"))
        root = str(st.get("retry_of") or unit)
        panel = panel_of.get(unit) or panel_of.get(root)
        if panel is None:
            continue
        adapter = st.get("adapter")
        member = Member(root, unit, str(adapter) if adapter else None, str(st.get("state")), None)
        panels.setdefault(panel, {})[root] = _with_answer(member, _answer(project, run, st))
    return {name: list(found.values()) for name, found in panels.items()}


def _with_answer(m: Member, answer: str | None) -> Member:
    return Member(m.name, m.unit, m.adapter, m.state, answer)


def compare_run(project: Project, run: str, current: list[dict[str, Any]]) -> list[Panel]:
    """Every panel of ``run`` compared; NoPanel when it has none."""
    found = members_of(project, run, current)
    if not found:
        raise NoPanel(run)
    return [compare_panel(name, members) for name, members in found.items()]


def exit_code(gather_code: int, panels: list[Panel]) -> int:
    """5 when gather gave up; else 0 when every unit is done and every section of every
    panel agrees; else 4 (a section differs or is missing: read it)."""
    if gather_code == GAVE_UP:
        return GAVE_UP
    return OK if gather_code == OK and all(p.agree for p in panels) else ATTENTION


# ------------------------------------------------------------------ what is printed


def panel_json(p: Panel) -> dict[str, Any]:
    rows = []
    for r in p.rows:
        row: dict[str, Any] = {
            "section": r.section,
            "mark": r.mark.value,
            "why": r.why.value,
            "answers": r.answers,
            "only_in": {u: list(fs) for u, fs in r.only_in.items() if fs},
        }
        if r.section == FILES:
            row["files"] = {u: list(fs) for u, fs in r.files.items()}
        else:
            row["verdicts"] = {u: v.value for u, v in r.verdicts.items()}
        rows.append(row)
    return {
        "panel": p.name,
        "units": [m.name for m in p.members],
        "attempts": {m.name: m.unit for m in p.members},
        "states": {m.name: m.state for m in p.members},
        "agree": p.agree,
        "sections": rows,
    }


def run_json(run: str, code: int, panels: list[Panel]) -> dict[str, Any]:
    """What ``wf gather RUN --compare --json`` prints."""
    return {
        "run": run,
        "code": code,
        "agree": all(p.agree for p in panels),
        "panels": [panel_json(p) for p in panels],
    }


def _cell(row: Row, member: Member, width: int) -> str:
    text = row.answers.get(member.name)
    if text is None:
        return f"({member.state}, no answer)" if member.answer is None else "-"
    if row.section == FILES:
        text = ", ".join(row.files.get(member.name, ())) or "none"
    return runs.preview(text, width)


def _detail(row: Row) -> str | None:
    if row.mark is Mark.MISSING:
        return f"{row.why.value}: {', '.join(u for u, a in row.answers.items() if a is None)}"
    if row.why is Why.OTHER_FILES:
        return "; ".join(f"only {u}: {', '.join(fs)}" for u, fs in row.only_in.items() if fs)
    if row.mark is Mark.DIFFER:
        return f"{row.why.value}: " + ", ".join(f"{u} {v.value}" for u, v in row.verdicts.items())
    return None


def table(run: str, p: Panel, width: int = 34) -> list[str]:
    """A panel as a person reads it: a header, one line per section (its mark and each
    unit's answer, shortened), under a row that differs or is missing why, then a total."""
    members = ", ".join(
        f"{m.name} ({m.state if m.unit == m.name else f'{m.unit}: {m.state}'})" for m in p.members
    )
    cells = [[_cell(r, m, width) for m in p.members] for r in p.rows]
    heads = [m.name.upper() for m in p.members]
    widths = [max(len(x) for x in (h, *(c[i] for c in cells))) for i, h in enumerate(heads)]
    first = max(len("SECTION"), *(len(r.section) for r in p.rows))

    def line(a: str, b: str, cols: list[str]) -> str:
        return "  ".join(
            [a.ljust(first), b.ljust(7), *(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
        ).rstrip()

    out = [f"panel {p.name} of run {run}: {members}", line("SECTION", "MARK", heads)]
    for r, c in zip(p.rows, cells, strict=True):
        out.append(line(r.section, r.mark.value, c))
        detail = _detail(r)
        if detail:
            out.append(" " * (first + 2) + detail)
    bad = [r for r in p.rows if r.mark is not Mark.AGREE]
    out.append(
        f"panel {p.name}: all {len(p.rows)} sections agree"
        if not bad
        else f"panel {p.name}: {len(bad)} of {len(p.rows)} sections differ or are missing "
        f"({', '.join(r.section for r in bad)}); read them: wf runs output {run} UNIT"
    )
    return out
