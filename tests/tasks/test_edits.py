"""Edits reparse only the region they touch; that must equal parsing the whole new file."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wf.tasks import edits, taskfile
from wf.tasks.taskfile import TasksFile

KEYS = ["Model", "Prio", "Effort", "Done", "After", "Status", "Note", "Colour"]
VALUES = {
    "Model": ["haiku", "opus"],
    "Prio": ["0", "3"],
    "Effort": ["2", "7.5"],
    "Done": ["`pytest -q` passes", "true"],
    "After": ["t0", "t0, t1"],
    "Status": ["awaiting: which?", "blocked: key", "in progress: w since 2026-01-01T00:00Z"],
    "Note": ["2026-01-01 hello", "ünïcode ✓"],
    "Colour": ["blue"],
}
BODIES = ["", "text\n", "- item\n\n```\n## fenced: heading\n```\n", "### sub\n~~~\n~~~\n", "tail  \t\n"]


@st.composite
def files(draw: st.DrawFn) -> str:
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    n = draw(st.integers(0, 5))
    parts = [draw(st.sampled_from(["", "# Tasks\n\n", "# T\n##not a heading\n\n"]))]
    for i in range(n):
        parts.append(f"## t{i}: Title {i}{draw(st.sampled_from(['', '  ']))}\n")
        for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
            if key == "After" and i == 0:
                continue
            parts.append(f"{key}: {draw(st.sampled_from(VALUES[key]))}\n")
        body = draw(st.sampled_from(BODIES))
        if body:
            parts.append("\n" + body)
        if i < n - 1:
            parts.append("\n")
    text = "".join(parts).replace("\n", eol)
    if draw(st.booleans()) and text.endswith(eol):
        text = text[: -len(eol)]
    return text


def same(a: TasksFile, b: TasksFile) -> None:
    assert a.text == b.text
    assert [tuple(t) for t in a.tasks] == [tuple(t) for t in b.tasks]
    assert [str(i) for i in a.issues] == [str(i) for i in b.issues]


@settings(max_examples=300, deadline=None)
@given(files(), st.data())
def test_region_edits_equal_a_full_parse(text: str, data: st.DataObject) -> None:
    doc = taskfile.parse_text(text)
    assert doc.errors == []
    if doc.tasks:
        task = data.draw(st.sampled_from(doc.tasks))
        op = data.draw(st.sampled_from(["set", "remove-field", "note", "title", "remove"]))
        if op == "set":
            key = data.draw(st.sampled_from(["model", "prio", "effort", "done", "status", "lane"]))
            value = {
                "model": "sonnet",
                "prio": "1",
                "effort": "3",
                "done": "make",
                "status": "wip: x",
                "lane": "opus",
            }[key]
            new = edits.set_field(doc, task.id, key, value)
        elif op == "remove-field":
            new = edits.set_field(doc, task.id, data.draw(st.sampled_from(KEYS)), None)
        elif op == "note":
            new = edits.add_note(doc, task.id, "a note")
        elif op == "title":
            new = edits.set_title(doc, task.id, "A new title ✓")
        else:
            new = edits.remove_task(doc, task.id)
        same(new, taskfile.parse_text(new.text))
    new = edits.append_task(doc, "zz", "Appended", [("Model", "haiku"), ("Done", "true")], body="x\n\n- y")
    same(new, taskfile.parse_text(new.text))
    assert new.text.startswith(text)
