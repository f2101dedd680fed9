"""Panels side by side (``wf gather RUN --compare``): the answers of the units that were
asked one question, lined up section by section, each section marked ``agree``,
``differ`` or ``missing``.

A panel is the units sharing a ``panel`` in status.json (``wf run --panel``, or manifest
units with a ``panel`` key); a retry's attempt belongs to the panel of the unit it
retries, and only the latest attempt of each is read. Each answer (output.txt) is split
with :func:`wf.fanout.contract.parse` into the sections its units were asked for (the
contract's, or a manifest's own), plus a ``Verdict:`` line of its own; any other
``Name:`` line stays part of the section above it.

How a row is marked (a person or the orchestrator reads every row that is not
``agree``; ``agree`` is never a guess):

- the answers given are compared with each other; the units that gave none are named
  in ``missing``. The row is ``missing`` when fewer than two gave it, or when those
  that did agree; it ``differ``s when they already differ.
- Files: the sets of paths named (bullets, backticks, ``./``, commas, ``:LINE`` cut).
  Equal sets agree; otherwise they differ and ``only_in`` says which unit named which
  file that not every unit named.
- Any other section agrees only on the same text once normalised (case, spacing,
  markdown, a final dot; ``none``/``n/a``/``-`` are all ``none``), or when every answer
  states the same ``Verdict:`` (:func:`stated`). Otherwise it differs: ``opposite
  verdicts`` when one answer's stance is yes and another's no (:func:`stance`, a word
  heuristic with negations), else ``different text``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from wf.base.errors import WfError
from wf.fanout import ledger
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


class Stance(Enum):
    """What an answer concludes (not the contract's Verdict, nor the ledger's verdict)."""

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
    required: tuple[str, ...] | None = None  # the sections it was asked for; None: contract off


@dataclass(frozen=True)
class Row:
    section: str
    mark: Mark
    why: Why
    answers: dict[str, str | None]  # by member; None: not given
    only_in: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Files: not named by every unit
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Files: the paths each named
    stances: dict[str, Stance] = field(default_factory=dict)  # other sections
    missing: tuple[str, ...] = ()  # the units that gave no text for it


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


VERDICT = "Verdict"  # a ``Verdict:`` line of its own in the result block: a row of its own
_VERDICT_LINE = re.compile(r"^\s*verdict\s*:\s*\**\s*([A-Za-z-]+)", re.IGNORECASE | re.MULTILINE)
VERDICT_WORDS = {
    Stance.YES: frozenset(
        {"yes", "safe", "pass", "passes", "passed", "ok", "correct", "true", "sound", "lgtm"}
    ),
    Stance.NO: frozenset({"no", "unsafe", "fail", "fails", "failed", "incorrect", "false", "broken", "bug"}),
}
# the heuristic's words: each says yes or no, and the opposite when a negation comes
# shortly before it in its clause (``isn't safe``, ``never safe``, ``not thread-safe``,
# ``does not fail``, ``no issues``)
# fmt: off
STANCE_WORDS = {
    Stance.YES: frozenset({"safe", "correct", "sound", "pass", "passes", "passed", "passing", "works",
                           "working", "fine", "ok", "okay", "lgtm"}),
    Stance.NO: frozenset({"unsafe", "incorrect", "wrong", "fail", "fails", "failed", "failing", "failure",
                          "failures", "bug", "bugs", "broken", "vulnerable", "vulnerability",
                          "vulnerabilities", "issue", "issues", "problem", "problems", "crash", "crashes",
                          "crashed", "error", "errors"}),
}
# fmt: on
NEGATIONS = frozenset({"not", "never", "cannot", "without", "no", "nothing", "neither", "nor"})
NEGATION_REACH = 3  # words before a stance word that a negation may stand in
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_CLAUSE = re.compile(r"[,;:]|\bbut\b")
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_OPPOSITE = {Stance.YES: Stance.NO, Stance.NO: Stance.YES}


def stated(section: str, text: str) -> Stance | None:
    """The stance an answer states outright: the first word of the ``Verdict`` row, or of
    a ``Verdict:`` line in a section, when it is one of VERDICT_WORDS; else None."""
    if section == VERDICT:
        first = text.split(None, 1)[0].strip("*.,;:!`").lower() if text.strip() else ""
    else:
        line = _VERDICT_LINE.search(text)
        first = line.group(1).lower() if line else ""
    return next((s for s, words in VERDICT_WORDS.items() if first in words), None)


def _negated(tokens: list[str], i: int) -> bool:
    return any(t in NEGATIONS or t.endswith("n't") for t in tokens[max(0, i - NEGATION_REACH) : i])


def guessed(text: str) -> Stance:
    """What free text seems to conclude, a word heuristic (it may only ever mark a row
    ``opposite verdicts``, never make one agree): each clause's stance words
    (STANCE_WORDS), turned round by a negation up to NEGATION_REACH words before them,
    and a clause of only ``yes`` or ``no``; a question (``Safe? No.``) says nothing.
    All one way: that stance; both or neither: UNCLEAR."""
    seen: set[Stance] = set()
    flat = text.lower().replace("\u2019", "'").replace("*", "").replace("`", "")
    for sentence in _SENTENCE.findall(flat):
        if sentence.rstrip().endswith("?"):
            continue
        for clause in _CLAUSE.split(sentence):
            tokens = _TOKEN.findall(clause)
            if tokens in (["yes"], ["no"]):
                seen.add(Stance.YES if tokens == ["yes"] else Stance.NO)
                continue
            for i, t in enumerate(tokens):
                for s, words in STANCE_WORDS.items():
                    if t in words:
                        seen.add(_OPPOSITE[s] if _negated(tokens, i) else s)
    return seen.pop() if len(seen) == 1 else Stance.UNCLEAR


def stance(section: str, text: str) -> Stance:
    """An answer's stance in a section: the one it states, else the one guessed."""
    return stated(section, text) or guessed(text)


def panel_sections(members: list[Member]) -> tuple[str, ...]:
    """The rows of a panel: the sections its units were asked for (the contract's, or a
    manifest's own ``sections``; the contract's when every unit's contract is off), then
    ``Verdict`` when an answer gives that line of its own. Any other ``Name:`` line stays
    part of the section above it, as :func:`wf.fanout.contract.parse` reads it."""
    asked = [s for m in members for s in (m.required or ())]
    names = tuple(dict.fromkeys(asked)) or SECTIONS
    if VERDICT not in names and any(
        m.answer and parse(m.answer, (*names, VERDICT)).section(VERDICT) is not None for m in members
    ):
        names = (*names, VERDICT)
    return names


# ------------------------------------------------------------------ judging


def _row(section: str, answers: dict[str, str | None], silent: frozenset[str]) -> Row:
    """One section's row. The answers given are compared with each other; the units that
    gave none are named (``missing``), and the row is ``missing`` unless what was given
    already differs (fewer than two answers: ``missing``)."""
    given = {u: a for u, a in answers.items() if a is not None}
    missing = tuple(u for u, a in answers.items() if a is None)
    gone = Why.NO_ANSWER if any(u in silent for u in missing) else Why.NOT_GIVEN
    files: dict[str, tuple[str, ...]] = {}
    stances: dict[str, Stance] = {}
    only: dict[str, tuple[str, ...]] = {}
    if section == FILES:
        files = {u: tuple(sorted(files_named(a))) for u, a in given.items()}
        common = set.intersection(*(set(f) for f in files.values())) if files else set()
        only = {u: tuple(f for f in fs if f not in common) for u, fs in files.items()}
        mark, why = (Mark.DIFFER, Why.OTHER_FILES) if any(only.values()) else (Mark.AGREE, Why.SAME_FILES)
    else:
        stances = {u: stance(section, a) for u, a in given.items()}
        mark, why = _judge(section, given, stances)
    if len(given) < 2 or (missing and mark is Mark.AGREE):
        mark, why = Mark.MISSING, gone
    if why is not Why.OTHER_FILES:
        only = {}
    return Row(section, mark, why, answers, only, files, stances, missing)


def _judge(section: str, given: dict[str, str], stances: dict[str, Stance]) -> tuple[Mark, Why]:
    """Agree only on the same text or the same stated verdict; words may only say
    that two answers are opposite."""
    if len({normal(a) for a in given.values()}) == 1:
        return Mark.AGREE, Why.SAME_TEXT
    said = [stated(section, a) for a in given.values()]
    if None not in said and len(set(said)) == 1:
        return Mark.AGREE, Why.SAME_VERDICT
    if {Stance.YES, Stance.NO} <= set(stances.values()):
        return Mark.DIFFER, Why.OPPOSITE
    return Mark.DIFFER, Why.OTHER_TEXT


def compare_panel(name: str, members: list[Member]) -> Panel:
    """A panel's rows, one per section its units were asked for (and ``Verdict``)."""
    names = panel_sections(members)
    known = tuple(dict.fromkeys((*names, VERDICT)))
    parsed = {m.name: parse(m.answer, known) if m.answer else None for m in members}
    silent = frozenset(u for u, p in parsed.items() if p is None)
    rows = [
        _row(s, {u: (p.section(s) if p is not None else None) for u, p in parsed.items()}, silent)
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
        panels.setdefault(panel, {})[root] = Member(
            root,
            unit,
            str(adapter) if adapter else None,
            str(st.get("state")),
            _answer(project, run, st),
            ledger.required(st),
        )
    return {name: list(found.values()) for name, found in panels.items()}


def has_panel(project: Project, run: str) -> bool:
    """Whether ``run`` asked for a panel (its saved requests, or a unit's status, name
    one): what ``wf gather --compare`` checks before it waits."""
    from wf.fanout.manifest import saved_requests

    return any(r.panel for r in saved_requests(project, run)) or any(
        isinstance(st.get("panel"), str) for st in runs.units(project, run)
    )


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
            row["verdicts"] = {u: v.value for u, v in r.stances.items()}
        row["missing"] = list(r.missing)
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
        "agree": bool(panels) and all(p.agree for p in panels),  # none: the run never started
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
        return f"{row.why.value}: {', '.join(row.missing)}"
    if row.mark is Mark.AGREE:
        return None
    if row.why is Why.OTHER_FILES:
        said = "; ".join(f"only {u}: {', '.join(fs)}" for u, fs in row.only_in.items() if fs)
    else:
        said = f"{row.why.value}: " + ", ".join(f"{u} {v.value}" for u, v in row.stances.items())
    return f"{said}; missing: {', '.join(row.missing)}" if row.missing else said


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
