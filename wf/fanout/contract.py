"""The return contract: the form every unit's answer takes, and the check of an answer
against it.

A unit's prompt ends with :func:`instructions`; its answer (``output.txt``) is then::

    # result
    Conclusion: ...
    Files: ...
    Open items: ...
    Verification: ...

A section starts at a line ``Name:`` (any case, optional ``**`` or ``-`` around the
name) and runs to the next section's line; its text is what follows the colon and the
lines below it. :func:`parse` reads an answer into a :class:`Result`; :func:`check`
says whether it keeps the contract, and if not, why, as a :class:`Verdict` (a reason
kind, never words to match).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from wf.base.errors import WfError

SECTIONS: tuple[str, ...] = ("Conclusion", "Files", "Open items", "Verification")
HEADING = "# result"
# an answer whose sections say only this has said nothing in them
EMPTY_WORDS = frozenset({"", "-", "...", "tbd", "todo"})
# a section that says only a hint of instructions(), ``<what you found ...>``: an echo
PLACEHOLDER = re.compile(r"<[^<>]*>")

_SECTION_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?(?:\*\*)?\s*([A-Za-z][A-Za-z ]{0,40}?)\s*(?:\*\*)?\s*:(?:\*\*)?\s*(.*)$"
)


class Invalid(Enum):
    """Why an answer does not keep the contract."""

    NO_ANSWER = "no answer"  # the unit wrote nothing
    FALLBACK = "fallback"  # only wf's salvage of its log, not an answer it gave
    EMPTY = "empty"  # an answer with no words
    MISSING = "missing sections"  # a required section is absent
    BLANK = "blank sections"  # a required section is there but says nothing


@dataclass(frozen=True)
class Result:
    """An answer read against the contract: its sections (canonical name -> text, in the
    order they came), whether it had the ``# result`` heading, and the text before the
    first section."""

    sections: dict[str, str]
    heading: bool
    preamble: str = ""

    def section(self, name: str) -> str | None:
        return self.sections.get(canonical(name))


@dataclass(frozen=True)
class Verdict:
    """Whether an answer keeps the contract; when not, the kind of failure and the
    sections concerned (missing or blank ones)."""

    ok: bool
    why: Invalid | None = None
    sections: tuple[str, ...] = field(default_factory=tuple)

    def reason(self) -> str:
        """The words a person reads: ``missing sections: Verification``."""
        if self.why is None:
            return "keeps the contract"
        if self.sections:
            return f"{self.why.value}: {', '.join(self.sections)}"
        return self.why.value


def canonical(name: str) -> str:
    """A section's name as the contract spells it (``open items`` -> ``Open items``);
    a name the contract does not know keeps its own words, first letter upper."""
    flat = " ".join(name.split()).strip()
    for known in SECTIONS:
        if known.lower() == flat.lower():
            return known
    return flat[:1].upper() + flat[1:]


def instructions(required: tuple[str, ...] = SECTIONS) -> str:
    """The text every unit's prompt ends with."""
    lines = [
        "",
        "When you are done, end your final answer with your result in exactly this form",
        "(every section present; write `none` where a section has nothing to say):",
        "",
        HEADING,
    ]
    hints = {
        "Conclusion": "what you found or did, in a few sentences",
        "Files": "the files you read for this or changed, one path each, or none",
        "Open items": "what is left undone or uncertain, or none",
        "Verification": "how you checked it (commands run and what they printed), or why you could not",
    }
    lines += [f"{name}: <{hints.get(name, 'your answer')}>" for name in required]
    return "\n".join(lines) + "\n"


def with_contract(prompt: str, required: tuple[str, ...] = SECTIONS) -> str:
    """``prompt`` ending with the contract's instructions; a prompt that already ends
    with them (a retry reads its prompt back from prompt.txt, a template adds them) is
    kept as it is, and one ending with the default sections' gets ``required``'s instead."""
    tail = instructions(required)
    if prompt.endswith(tail):
        return prompt
    default = instructions()
    if prompt.endswith(default):  # a template's prompt ends with the default sections
        prompt = prompt[: -len(default)]
    return prompt.rstrip("\n") + "\n" + tail


_NAME = re.compile(r"[A-Za-z][A-Za-z ]{0,39}")
NAMES_EXPECTED = "a non-empty list of section names (letters and spaces, up to 40 characters each)"


class BadSections(WfError):
    """A manifest's ``sections`` that the contract cannot hold: what was given, and why."""

    def __init__(self, given: object, problem: str) -> None:
        self.given = given
        self.problem = problem
        super().__init__(f"sections {given!r}: {problem}; expected {NAMES_EXPECTED}")


def required_sections(value: object) -> tuple[str, ...]:
    """A manifest's ``sections`` read as the contract's names (``open items`` ->
    ``Open items``), or :class:`BadSections`."""
    if not isinstance(value, list | tuple) or not value:
        raise BadSections(value, "not a non-empty list")
    names: list[str] = []
    for v in value:
        if not isinstance(v, str) or not _NAME.fullmatch(" ".join(v.split())):
            raise BadSections(value, f"{v!r} is not a section name")
        name = canonical(v)
        if name in names:
            raise BadSections(value, f"{name} is named twice")
        names.append(name)
    return tuple(names)


def result_block(text: str) -> list[str] | None:
    """The lines after an answer's last ``# result`` heading (any number of ``#``, any
    case); None when it has none."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lstrip().startswith("#") and lines[i].strip().lstrip("#").strip().lower() == "result":
            return lines[i + 1 :]
    return None


def blank(text: str) -> bool:
    """Whether a section's text says nothing: empty, a filler word (EMPTY_WORDS), or only
    a ``<hint>`` as :func:`instructions` writes it (an answer that echoes its prompt)."""
    flat = text.strip()
    return flat.lower() in EMPTY_WORDS or PLACEHOLDER.fullmatch(flat) is not None


def parse(text: str, known: tuple[str, ...] = SECTIONS) -> Result:
    """Read an answer into its sections. Only names in ``known`` start a section (so a
    line like ``Note: ...`` inside a section stays part of it). When the answer holds a
    ``# result`` heading, only what follows the last one is read."""
    names = {k.lower() for k in known}
    block = result_block(text)
    heading = block is not None
    lines = block if block is not None else text.splitlines()
    sections: dict[str, list[str]] = {}
    preamble: list[str] = []
    current: list[str] | None = None
    for line in lines:
        m = _SECTION_LINE.match(line)
        if m and " ".join(m.group(1).split()).lower() in names:
            current = sections.setdefault(canonical(m.group(1)), [])
            current.append(m.group(2))
        elif current is not None:
            current.append(line)
        else:
            preamble.append(line)
    return Result(
        {k: "\n".join(v).strip() for k, v in sections.items()},
        heading,
        "\n".join(preamble).strip(),
    )


def check(text: str | None, required: tuple[str, ...] = SECTIONS, *, fallback: bool = False) -> Verdict:
    """Whether ``text`` (a unit's answer; None: it wrote none) keeps the contract with
    ``required`` sections. A FALLBACK salvage is never a valid answer."""
    if text is None:
        return Verdict(False, Invalid.NO_ANSWER)
    if fallback:
        return Verdict(False, Invalid.FALLBACK)
    if not text.strip():
        return Verdict(False, Invalid.EMPTY)
    wanted = tuple(canonical(r) for r in required)
    result = parse(text, tuple(dict.fromkeys((*SECTIONS, *wanted))))
    missing = tuple(r for r in wanted if r not in result.sections)
    if missing:
        return Verdict(False, Invalid.MISSING, missing)
    empty = tuple(r for r in wanted if blank(result.sections[r]))
    if empty:
        return Verdict(False, Invalid.BLANK, empty)
    return Verdict(True)
