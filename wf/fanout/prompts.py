"""Prompt templates for the common kinds of unit: ``wf run --templates`` and a manifest
unit's ``template`` and ``vars``.

Each template is a packaged file ``wf/fanout/templates/NAME.md``: a first line
``<!-- one line that says what it is for -->``, then the prompt, whose ``{name}``
placeholders a unit fills from its ``vars``. A rendered template always ends with the
return contract (:func:`wf.fanout.contract.instructions`), added here, so no template can
drift from it. A var's value is text, or ``{"unit": "ID"}``: the answer (output.txt) of
that unit of the same run, which must have ended done (a verify unit reads the answer it
checks this way).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout.contract import instructions
from wf.workers import runs

NAMES = ("research", "code", "review", "verify", "fix")
_PLACEHOLDER = re.compile(r"\{([a-z][a-z_]*)\}")
_SUMMARY = re.compile(r"<!--\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Template:
    """One packaged template: its name, what it is for, and its prompt."""

    name: str
    summary: str
    body: str

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The names its prompt asks for, in the order they first come."""
        return tuple(dict.fromkeys(_PLACEHOLDER.findall(self.body)))

    def text(self) -> str:
        """The prompt as a unit gets it, placeholders unfilled, contract at the end."""
        return self.body.rstrip("\n") + "\n" + instructions()

    def render(self, values: Mapping[str, str]) -> str:
        """The prompt with ``values`` in its placeholders (each one filled once: text in a
        value is never read as a placeholder), ending with the contract."""
        missing = [p for p in self.placeholders if p not in values]
        if missing:
            raise TemplateError(f"template {self.name} needs vars {', '.join(missing)}")
        unknown = sorted(set(values) - set(self.placeholders))
        if unknown:
            raise TemplateError(
                f"template {self.name} has no placeholder {', '.join(unknown)}"
                f" (its placeholders: {', '.join(self.placeholders)})"
            )
        filled = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.body)
        return filled.rstrip("\n") + "\n" + instructions()

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "summary": self.summary, "placeholders": list(self.placeholders)}


class TemplateError(WfError):
    """A template asked for that does not exist, or its vars do not fit it."""


def get(name: str) -> Template:
    if name not in NAMES:
        raise TemplateError(f"no template {name!r}; the templates: {', '.join(NAMES)} (wf run --templates)")
    raw = resources.files("wf.fanout").joinpath("templates", f"{name}.md").read_text("utf-8")
    first, _, body = raw.partition("\n")
    m = _SUMMARY.fullmatch(first.strip())
    if m is None:  # a packaged file wf ships: a broken one is a bug, not bad input
        raise AssertionError(f"template {name}: its first line must be <!-- summary -->")
    return Template(name, m.group(1), body.lstrip("\n"))


def all_templates() -> list[Template]:
    return [get(n) for n in NAMES]


def for_unit(uid: str, name: Any, given: Any, answer: Callable[[str], str]) -> str:
    """A manifest unit's prompt from its ``template`` and ``vars``; ``answer(unit)`` reads
    the answer of a unit of the same run for a var given as ``{"unit": "ID"}``."""
    if not isinstance(name, str):
        raise TemplateError(f"unit {uid}: template must be a name ({', '.join(NAMES)})")
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise TemplateError(f"unit {uid}: vars must be a table of placeholder = text")
    try:
        template = get(name)
        values: dict[str, str] = {}
        for key, value in given.items():
            if isinstance(value, str):
                values[key] = value
            elif isinstance(value, dict) and set(value) == {"unit"} and isinstance(value["unit"], str):
                values[key] = answer(value["unit"])
            else:
                raise TemplateError(f'var {key} must be text or {{"unit": "ID"}} (that unit\'s answer)')
        return template.render(values)
    except TemplateError as e:
        raise TemplateError(f"unit {uid}: {e}") from None


def answer_of(project: Project, run: str, unit: str, same_manifest: set[str]) -> str:
    """The answer of ``unit`` of ``run``, to fill a var: the unit must have ended done with
    an answer of its own (not wf's salvage of its log), and must not be one the same
    manifest is about to run."""
    if unit in same_manifest:
        raise TemplateError(
            f"unit {unit} is in the same manifest, so it has no answer yet: run it first, then"
            " the units that read its answer (another manifest, the same --run)"
        )
    folder = runs.unit_dir(project, run, unit)  # the id is checked here
    st = runs.read_status(folder)
    if st is None:
        raise TemplateError(f"no unit {unit} in run {run} to read the answer of")
    if st.get("state") != "done" or st.get("fallback"):
        what = "only a FALLBACK" if st.get("state") == "done" else st.get("state")
        raise TemplateError(f"unit {unit} of run {run} ended {what}, not done with an answer")
    try:
        text = (folder / "output.txt").read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TemplateError(f"unit {unit} of run {run}: cannot read its answer: {e}") from None
    return text.strip("\n")
