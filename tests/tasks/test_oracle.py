"""An independent oracle for the TASKS.md engine.

``render(parse(b)) == b`` holds by construction (render joins the stored text), so it
cannot catch a parser that splits a file into the wrong tasks, or an edit that touches
the wrong line. Here files are *built* from a known list of tasks (so what they hold is
known without parsing them), and a reference edit written in a few lines of plain list
operations says what each edit must produce. wf's parser and editor are checked against
both, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from wf.tasks import edits, taskfile

# [a-z][a-z0-9-]{0,10}, without st.from_regex (which costs these tests half their time)
IDS = st.tuples(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-", max_size=10),
).map("".join)
KEYS = st.sampled_from(["Model", "Prio", "Effort", "Done", "Note", "Cloud", "Owner-Notes"])
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz é0123456789.,()`", min_size=1, max_size=20).map(
    lambda s: s.strip() or "x"
)
VALUES = {
    "Model": st.sampled_from(["haiku", "sonnet", "opus"]),
    "Prio": st.sampled_from(["0", "1", "2", "3"]),
    "Effort": st.sampled_from(["1", "2", "3.5"]),
    "Done": WORDS,
    "Note": WORDS,
    "Cloud": st.sampled_from(["yes", "no"]),
    "Owner-Notes": WORDS,
}


@dataclass
class Spec:
    id: str
    title: str
    fields: list[tuple[str, str]]
    body: list[str]  # body lines, without line ends


@st.composite
def specs(draw: st.DrawFn) -> tuple[list[str], list[Spec], str]:
    ids = draw(st.lists(IDS, min_size=0, max_size=6, unique=True))
    tasks = []
    for tid in ids:
        keys = draw(st.lists(KEYS, max_size=4, unique=True))
        fields = [(k, draw(VALUES[k])) for k in keys]
        body: list[str] = []
        for kind in draw(st.lists(st.sampled_from(["text", "blank", "fence", "h3"]), max_size=4)):
            if kind == "text":
                body.append(draw(WORDS))
            elif kind == "blank":
                body.append("")
            elif kind == "h3":
                body.append("### " + draw(WORDS))
            else:  # a fenced block that holds a level-2 heading: not a task
                body += ["```", "## not-a-task: inside a fence", "```"]
        tasks.append(Spec(tid, draw(WORDS), fields, body))
    preamble = ["# Tasks", "", draw(WORDS)]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return preamble, tasks, eol


def build(preamble: list[str], tasks: list[Spec], eol: str) -> tuple[str, dict[str, int]]:
    """The file's text, and the 0-based line of each task's heading, known by building."""
    lines = list(preamble)
    starts: dict[str, int] = {}
    for t in tasks:
        lines.append("")
        starts[t.id] = len(lines)
        lines.append(f"## {t.id}: {t.title}")
        lines += [f"{k}: {v}" for k, v in t.fields]
        if t.body:
            lines.append("")
            lines += t.body
    return "".join(line + eol for line in lines), starts


@settings(max_examples=150, deadline=None)
@given(specs())
def test_parse_finds_exactly_the_tasks_the_file_was_built_from(
    spec: tuple[list[str], list[Spec], str],
) -> None:
    preamble, tasks, eol = spec
    text, starts = build(preamble, tasks, eol)
    doc = taskfile.parse(text.encode("utf-8"))
    assert [e for e in doc.issues if e.level == "error"] == []
    assert [t.id for t in doc.tasks] == [t.id for t in tasks]
    for got, want in zip(doc.tasks, tasks, strict=True):
        assert got.start == starts[want.id]
        assert got.title == want.title
        assert list(got.pairs) == want.fields


@settings(max_examples=150, deadline=None)
@given(specs(), st.data())
def test_a_field_edit_changes_exactly_the_line_the_reference_says(
    spec: tuple[list[str], list[Spec], str], data: st.DataObject
) -> None:
    preamble, tasks, eol = spec
    if not tasks:
        return
    text, starts = build(preamble, tasks, eol)
    target = data.draw(st.sampled_from(tasks))
    key = data.draw(st.sampled_from(["Model", "Prio", "Done", "Cloud"]))
    value = data.draw(st.one_of(st.none(), VALUES[key]))
    # the reference: plain list operations on the lines, knowing where the fields are
    lines = text.split(eol)[:-1]
    first = starts[target.id] + 1
    at = [first + i for i, (k, _) in enumerate(target.fields) if k.lower() == key.lower()]
    if value is None:
        for i in reversed(at):
            del lines[i]
    elif at:
        lines[at[0]] = f"{target.fields[at[0] - first][0]}: {value}"
    else:
        lines.insert(first + len(target.fields), f"{key}: {value}")
    expected = "".join(line + eol for line in lines)
    doc = edits.set_field(taskfile.parse(text.encode("utf-8")), target.id, key, value)
    assert doc.text == expected
