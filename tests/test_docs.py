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


def _part_graph() -> dict[str, set[str]]:
    """Which parts each part imports (lazy imports included), from tests/test_layout.py."""
    from tests.test_layout import GRAPH, _part

    parts: dict[str, set[str]] = {p: set() for p in FLOORS}
    for module, targets in GRAPH.items():
        if module == "wf":
            continue
        parts[_part(module)].update(_part(t) for t in targets if _part(t) != _part(module))
    return parts


def _drawn(parts: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The arrows of the picture: each import that no path of other imports implies."""

    def reaches(a: str, b: str, skip: tuple[str, str]) -> bool:
        seen, todo = set(), [a]
        while todo:
            x = todo.pop()
            for y in parts[x]:
                if (x, y) != skip and y not in seen:
                    if y == b:
                        return True
                    seen.add(y)
                    todo.append(y)
        return False

    floor = {p: i for i, p in enumerate(FLOORS)}
    arrows = [
        (a, b) for a in FLOORS for b in sorted(parts[a], key=floor.__getitem__) if not reaches(a, b, (a, b))
    ]
    return sorted(arrows, key=lambda ab: (floor[ab[0]], floor[ab[1]]))


def _generated() -> tuple[str, str]:
    parts = _part_graph()
    floor = {p: i for i, p in enumerate(FLOORS)}
    mermaid = "".join(f"  {a} --> {b}\n" for a, b in _drawn(parts))
    width = max(map(len, FLOORS)) + 2
    text = "".join(
        f"{p:<{width}}-> {' '.join(sorted(parts[p], key=floor.__getitem__)) or '(nothing)'}\n"
        for p in reversed(FLOORS)
    )
    return mermaid, text


def test_architecture_pictures_are_the_real_imports() -> None:
    """Both pictures are made from the source's imports; WRITE_ARCH=1 writes them anew."""
    import os

    mermaid, text = _generated()
    page = _architecture()
    old_mermaid = _block(page, "```mermaid\ngraph BT\n") + "\n"
    old_text = _block(page, "```text\n") + "\n"
    if os.environ.get("WRITE_ARCH"):
        page = page.replace(old_mermaid, mermaid, 1).replace(old_text, text, 1)
        (DOCS / "architecture.md").write_text(page, "utf-8")
        return
    assert (old_mermaid, old_text) == (mermaid, text), "run WRITE_ARCH=1 pytest tests/test_docs.py"


def test_architecture_names_every_module() -> None:
    text = _architecture()
    table = text.split("## The modules", 1)[1].split("\n## ", 1)[0]
    wf = DOCS.parent / "wf"
    missing = [
        str(p.relative_to(wf))
        for p in sorted(wf.glob("*/*.py"))
        if p.name != "__init__.py" and f"`{p.name}`" not in table
    ]
    assert missing == []
