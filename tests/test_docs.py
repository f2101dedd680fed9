"""The docs name what the code has: docs/architecture.md lists exactly the floors of
tests/test_layout.py, in their order, and its pictures draw exactly those parts."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layout import FLOORS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _architecture() -> str:
    return (DOCS / "architecture.md").read_text("utf-8")


def _block(text: str, opening: str) -> str:
    return text.split(opening, 1)[1].split("\n```\n", 1)[0]


def test_architecture_lists_exactly_the_floors_in_order() -> None:
    text = _architecture()
    floors = text.split("<!-- floors -->\n", 1)[1].split("<!-- /floors -->", 1)[0]
    named = [re.match(r"\d+\. `([^`]+)`", line) for line in floors.splitlines() if line]
    assert all(named), floors
    assert tuple(m.group(1) for m in named if m) == FLOORS


def test_architecture_pictures_draw_exactly_the_floors() -> None:
    text = _architecture()
    mermaid = _block(text, "```mermaid\ngraph BT\n")
    nodes = set(re.findall(r"[\w]+", mermaid.replace("-.->", " ").replace("-->", " ")))
    assert nodes == set(FLOORS)
    picture = _block(text, "```text\n")
    rows = {line.split()[0] for line in picture.splitlines()}
    named = set(re.findall(r"[\w]+", picture)) - {"up", "nothing"}
    assert rows == set(FLOORS) and named == set(FLOORS)
