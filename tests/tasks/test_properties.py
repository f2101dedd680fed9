"""Property tests for the TASKS.md engine (wf/tasks/taskfile.py).

The contract (shared/spec/tasks-format.md): wf never loses, reorders or reformats a
byte it did not mean to change, and it never hides a task it cannot read.

1. Generated valid files round-trip byte for byte and parse to exactly the tasks,
   titles and fields they were generated from, with no errors.
2. Arbitrary text (and arbitrary bytes that decode) round-trips too, and the parse
   keeps its structural invariants.
3. Each edit (set_field, add_note, set_title, append_task, remove_task) changes
   exactly the lines it means to, keeps line endings, and reparses cleanly; the
   parse wf.tasks.edits splices from the edited region (what wf writes and caches) equals
   a full parse of the result.
4. Random sequences of edits keep the file error free and every surviving task's
   title, fields and body as a model of the edits predicts.

The helpers below compute expectations on their own (line endings, spans, body
lines) instead of reusing the engine's helpers, so the engine can actually fail them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests import lines_api
from wf.base.errors import ParseError, WfError
from wf.tasks import edits, taskfile
from wf.tasks.taskfile import Task, TasksFile

# ---------------------------------------------------------------- spec constants

KNOWN = ("Model", "Lane", "Prio", "Effort", "Done", "After", "Sessions", "Cloud", "Parent", "Status", "Note")
KNOWN_LOWER = frozenset(k.lower() for k in KNOWN)
SINGLE = tuple(k for k in KNOWN if k != "Note")  # the single-valued keys
SPEC_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
SPEC_FIELD_RE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*")  # a field line's content
NOW = datetime(2026, 11, 29, 7, 40, tzinfo=UTC)
NOTE_DATE = "2026-11-29"

FAST = settings(max_examples=150, deadline=None)  # cheap: parsing only
EDITS = settings(max_examples=60, deadline=None)  # an edit, a reparse and the incremental check
MEDIUM = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------- line helpers (independent of the engine)


def eol(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith("\n"):
        return "\n"
    return ""


def content(line: str) -> str:
    return line[: len(line) - len(eol(line))]


def body_of(doc: TasksFile, t: Task) -> list[str]:
    """The task's body: its lines after the heading and the fields."""
    first = (t.fields[-1].at if t.fields else t.start) + 1
    return doc.lines[first : t.end]


def fields_of(t: Task) -> list[tuple[str, str]]:
    return [(f.key.lower(), f.value) for f in t.fields]


@dataclass(frozen=True)
class Snap:
    title: str
    fields: tuple[tuple[str, str], ...]
    body: tuple[str, ...]


def snap(doc: TasksFile, t: Task) -> Snap:
    return Snap(t.title, tuple(fields_of(t)), tuple(body_of(doc, t)))


def assert_eol_fits(line: str, old_lines: list[str], what: str) -> None:
    """An inserted line ends like the file does: a uniform LF or CRLF file stays uniform."""
    e = eol(line)
    assert e in ("\n", "\r\n"), f"{what}: inserted line {line!r} has no line ending"
    seen = {eol(x) for x in old_lines} - {""}
    if seen:
        assert e in seen, f"{what}: inserted {e!r} into a file whose lines end only in {sorted(seen)}"


def assert_fixed_last_line(old: str, new: str, old_lines: list[str], what: str) -> None:
    """``new`` is ``old`` unchanged, or, when ``old`` was the file's unterminated last line,
    ``old`` with a line ending added."""
    if old.endswith("\n"):
        assert new == old, f"{what}: line {old!r} became {new!r}"
        return
    added = new[len(old) :]
    assert new.startswith(old) and added in ("\n", "\r\n"), f"{what}: last line {old!r} became {new!r}"
    if old.endswith("\r"):  # its trailing CR becomes the CR of a CRLF, never a CR inside the line
        assert added == "\n", f"{what}: last line {old!r} ending in a CR became {new!r}"
        return
    seen = {eol(x) for x in old_lines} - {""}
    if seen:
        assert added in seen, f"{what}: added {added!r} to a file whose lines end only in {sorted(seen)}"


def assert_others_unchanged(old: TasksFile, new: TasksFile, skip: set[str]) -> None:
    for t in old.tasks:
        if t.id in skip:
            continue
        nt = new.find(t.id)
        assert nt is not None, f"task {t.id!r} vanished"
        assert snap(new, nt) == snap(old, t), f"task {t.id!r} changed"


def parse_view(doc: TasksFile) -> tuple[object, ...]:
    """Everything a caller can read from a parse, for comparing two parses."""
    tasks = [
        (
            t.id,
            t.title,
            t.start,
            t.end,
            doc.text_of(t),
            [(f.key, f.value, f.at) for f in t.fields],
            {k: t.get(k) for k in sorted(KNOWN_LOWER)},
        )
        for t in doc.tasks
    ]
    return (doc.render(), tasks, [(i.line, i.level, i.message) for i in doc.issues])


def assert_incremental(result: TasksFile, lines: list[str]) -> None:
    """wf.tasks.edits returns the edited file with a parse it spliced together from the edited
    region (that is what wf writes and caches); it must be the text the line-level edit
    gives, and the same parse a full parse of that text gives."""
    assert result.render() == "".join(lines).encode("utf-8"), (
        "wf.tasks.edits and wf.tasks.taskfile edits differ"
    )
    full = taskfile.parse(result.render())
    assert parse_view(result) == parse_view(full), "the incremental parse differs from a full parse"


# ---------------------------------------------------------------- strategies

# Characters for free text: any code point but surrogates, "\n" and "\r" (a lone CR is
# a line break to editors, so wf reports it: tests/orch/test_hostile.py), with the characters
# that matter to the parser made common.
TEXT_CHARS = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"),
    st.sampled_from(list("#`~: \t-*>é中😀\u00a0\u2028\x85\ufeff")),
)
# What wf writes into one field line may hold no character an editor or Python takes as a
# line break (wf refuses them: tests/tasks/test_writes.py).
ONE_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
BODY_BREAKS = "\r\x85\u2028\u2029"
EDIT_CHARS = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters=ONE_LINE_BREAKS),
    st.sampled_from(list("#`~: \t-é中😀")),
)
any_line_text = st.text(TEXT_CHARS, max_size=20)
clean_text = st.text(TEXT_CHARS, min_size=1, max_size=20).map(str.strip).filter(bool)
edit_text = st.text(EDIT_CHARS, min_size=1, max_size=20).map(str.strip).filter(bool)


def word(first: str, rest: str, max_rest: int) -> st.SearchStrategy[str]:
    """The words of the regex ``[first][rest]{0,max_rest}``, drawn without st.from_regex
    (which took a quarter of these tests' time)."""
    return st.tuples(st.sampled_from(first), st.text(st.sampled_from(rest), max_size=max_rest)).map("".join)


LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
ALNUM = LOWER_ALNUM + LOWER_ALNUM[:26].upper()
ids = word(LOWER_ALNUM, LOWER_ALNUM + "-", 15)  # [a-z0-9][a-z0-9-]{0,15}
hspace = st.text(st.sampled_from(" \t"), max_size=3)
hspace1 = st.text(st.sampled_from(" \t"), min_size=1, max_size=3)


@functools.cache  # one strategy per key: hypothesis validates each new one anew at every draw
def value_strategy(key: str, text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Valid values for a key (spec table), one line, without surrounding whitespace."""
    k = key.lower()
    if k == "model":
        return st.sampled_from(["haiku", "sonnet", "opus", "gpt-5.1-codex", "org/m:v1[x]@2"]) | word(
            ALNUM, ALNUM + "._:/@-", 12
        )
    if k in ("lane", "parent"):
        return ids
    if k == "prio":
        return st.sampled_from(["0", "1", "2", "3"])
    if k == "effort":
        return st.sampled_from(["1", "2", "4", "0.5", ".5", "12.", "3.25"])
    if k == "after":
        return st.tuples(st.lists(ids, min_size=1, max_size=3), st.sampled_from([",", ", ", " , "])).map(
            lambda p: p[1].join(p[0])
        )
    if k == "sessions":
        return st.sampled_from(["owner", "solo", "Owner", "SOLO"])
    if k == "cloud":
        return st.sampled_from(["yes", "no", "Yes", "NO"])
    if k == "status":
        return st.one_of(
            st.sampled_from(
                [
                    "in progress: worker since 2026-11-29T07:40Z",
                    "in progress: cloud:s1 since 2026-01-02T03:04Z",
                ]
            ),
            st.tuples(st.sampled_from(["awaiting", "blocked", "wip"]), text).map(lambda p: f"{p[0]}: {p[1]}"),
        )
    if k in ("done", "note"):
        return text
    return text | st.just("")  # an unknown key may be empty


@functools.cache
def key_spelling(key: str) -> st.SearchStrategy[str]:
    return st.sampled_from([key, key.lower(), key.upper()])


unknown_keys = word(ALNUM[36:] + ALNUM[:26], ALNUM + "_-", 8).filter(  # [A-Za-z][A-Za-z0-9_-]{0,8}
    lambda k: k.lower() not in KNOWN_LOWER
)


def closes_fence(line: str, ch: str, n: int) -> bool:
    """Conservatively: could this line close a fence of ``n`` times ``ch``?"""
    return re.fullmatch(rf" {{0,3}}{re.escape(ch)}{{{n},}}[ \t\r]*", line) is not None


SAFE_FIRST = st.characters(exclude_categories=["Cs"], exclude_characters="\n\r #`~\t")


@st.composite
def fence_block(draw: st.DrawFn) -> list[str]:
    ch = draw(st.sampled_from("`~"))
    n = draw(st.integers(3, 5))
    info = draw(st.text(TEXT_CHARS, max_size=8)).lstrip(ch)
    if ch == "`":
        info = info.replace("`", "")
    opener = " " * draw(st.integers(0, 3)) + ch * n + info
    other = "~" if ch == "`" else "`"
    hostile = st.sampled_from(
        [
            "## a: b",
            "## fake-task: hidden in a fence",
            "##",
            "## ",
            "## Notes",
            " ## indented",
            "##x",
            "Model: sonnet",
            other * 3,
            ch * (n - 1),
            ch * n + "info",
            "    " + ch * n,
            "\t" + ch * n,
            "",
        ]
    )
    inner = draw(st.lists(hostile | any_line_text, max_size=5))
    inner = [x for x in inner if not closes_fence(x, ch, n)]
    closer = " " * draw(st.integers(0, 3)) + ch * (n + draw(st.integers(0, 2))) + draw(hspace)
    return [opener, *inner, closer]


text_line = st.tuples(SAFE_FIRST, any_line_text).map("".join)
block = st.one_of(
    st.sampled_from(["", " ", "\t", "  \t "]).map(lambda s: [s]),
    st.lists(text_line, min_size=1, max_size=3),
    st.tuples(st.sampled_from(["# ", "### ", "#### ", "###", "###### "]), any_line_text).map(
        lambda p: ["".join(p)]
    ),
    st.lists(
        st.tuples(st.sampled_from(["- ", "* ", "+ ", "1. ", "  - ", "   * "]), any_line_text).map("".join),
        min_size=1,
        max_size=3,
    ),
    st.tuples(st.sampled_from([" ", "  ", "   "]), SAFE_FIRST, any_line_text).map(lambda p: ["".join(p)]),
    st.tuples(st.sampled_from(["    ", "\t", "     "]), any_line_text | st.just("## code: not a task")).map(
        lambda p: ["".join(p)]
    ),
    st.tuples(st.sampled_from((*KNOWN, "Foo")), st.sampled_from([": ", ":"]), any_line_text).map(
        lambda p: ["".join(p)]
    ),
    st.tuples(text_line, st.sampled_from(["---", "===", "- - -"])).map(list),
    fence_block(),
)
blocks = st.lists(block, max_size=4).map(lambda bs: [line for b in bs for line in b])


@dataclass
class GenField:
    key: str  # as written
    value: str
    text: str  # the line's content


@dataclass
class GenTask:
    id: str
    title: str
    heading: str
    fields: list[GenField]
    body: list[str]


@dataclass
class GenFile:
    preamble: list[str]
    tasks: list[GenTask]
    lines: list[str]
    data: bytes

    def starts(self) -> list[int]:
        out = []
        at = len(self.preamble)
        for t in self.tasks:
            out.append(at)
            at += 1 + len(t.fields) + len(t.body)
        return out


@st.composite
def gen_fields(draw: st.DrawFn) -> list[GenField]:
    keys: list[str] = draw(st.lists(st.sampled_from(SINGLE), unique=True, max_size=6))
    keys += ["Note"] * draw(st.integers(0, 2))
    keys += draw(st.lists(unknown_keys, max_size=2))
    out = []
    for key in draw(st.permutations(keys)):
        written = draw(key_spelling(key)) if key in KNOWN else key
        value = draw(value_strategy(key, clean_text))
        line = written + ":" + (draw(hspace1) + value if value else "") + draw(hspace)
        out.append(GenField(written, value, line))
    return out


@st.composite
def gen_task(draw: st.DrawFn, task_id: str) -> GenTask:
    title = draw(clean_text)
    heading = (
        "##"
        + draw(st.sampled_from([" ", "  "]))
        + task_id
        + draw(st.sampled_from(["", " "]))
        + ":"
        + draw(st.sampled_from([" ", "  ", "\t", ""]))
        + title
        + draw(hspace)
    )
    fields = draw(gen_fields())
    body = draw(blocks)
    if body and body[0][:1].isalpha():
        body.insert(0, "")  # a body that could read as a field starts after a blank line
    return GenTask(task_id, title, heading, fields, body)


@st.composite
def valid_files(draw: st.DrawFn, min_tasks: int = 0, max_tasks: int = 5) -> GenFile:
    preamble = draw(st.one_of(st.just(["# Tasks", ""]), blocks))
    task_ids = draw(st.lists(ids, unique=True, min_size=min_tasks, max_size=max_tasks))
    tasks = [draw(gen_task(i)) for i in task_ids]
    contents = list(preamble)
    for t in tasks:
        contents += [t.heading, *(f.text for f in t.fields), *t.body]
    mode = draw(st.sampled_from(["lf", "crlf", "mixed"]))
    if mode == "mixed":
        eols = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(contents), max_size=len(contents)))
    else:
        eols = ["\n" if mode == "lf" else "\r\n"] * len(contents)
    lines = [c + e for c, e in zip(contents, eols, strict=True)]
    if lines and contents[-1] and not draw(st.booleans()):
        lines[-1] = contents[-1]  # no final newline
    if lines and draw(st.integers(0, 7)) == 0:
        lines[0] = "\ufeff" + lines[0]  # a byte order mark, as some Windows editors write
    return GenFile(preamble, tasks, lines, "".join(lines).encode("utf-8"))


FRAGMENTS = [
    "## ",
    "##",
    "##\t",
    "###",
    "# ",
    "```",
    "~~~",
    "````",
    " ",
    "   ## ",
    "    ",
    "\t",
    "Model: ",
    "Prio: 1",
    "prio:",
    "Note: x",
    "Status: awaiting: q",
    "Status: done",
    "Foo-bar: ",
    "Sessions: owner",
    "cloud: yes",
    "Effort: 2",
    "a: b",
    "a-1: T",
    "- ",
    ":",
    "\r",
    "é",
    "中文",
    "😀",
    "\ufeff",
    "\u2028",
    "\x85",
]
messy_line = st.tuples(
    st.lists(st.sampled_from(FRAGMENTS) | st.text(TEXT_CHARS, max_size=5), max_size=4).map("".join),
    st.sampled_from(["\n", "\r\n", "\n", "\r", ""]),
).map("".join)
# Messy files that still have task headings: for the edit checks, which need an
# error-free file with tasks.
messy_task = st.tuples(
    ids, edit_text, st.sampled_from(["\n", "\r\n", ""]), st.lists(messy_line, max_size=4).map("".join)
).map(lambda p: f"## {p[0]}: {p[1]}{p[2] or chr(10)}{p[3]}")
messy_tasks_text = st.tuples(
    st.lists(messy_line, max_size=3).map("".join), st.lists(messy_task, min_size=1, max_size=4).map("".join)
).map(lambda p: p[0] + ("\n" if p[0] and not p[0].endswith("\n") else "") + p[1])
messy_text = st.one_of(
    st.lists(messy_line, max_size=12).map("".join),
    st.text(st.one_of(TEXT_CHARS, st.just("\n")), max_size=80),
)


# ---------------------------------------------------------------- 1. valid files round-trip


@pytest.mark.slow
@FAST
@given(gen=valid_files())
def test_valid_file_round_trips_and_parses_as_generated(gen: GenFile) -> None:
    doc = taskfile.parse(gen.data)
    assert doc.render() == gen.data, "render(parse(b)) != b"
    assert doc.lines == gen.lines, "the file was not split into the generated lines"
    assert doc.errors == [], f"a valid file has errors: {doc.errors}"

    starts = gen.starts()
    ends = [*starts[1:], len(gen.lines)] if starts else []
    assert [(t.id, t.title, t.start, t.end) for t in doc.tasks] == [
        (g.id, g.title, s, e) for g, s, e in zip(gen.tasks, starts, ends, strict=True)
    ], "tasks (id, title, span) differ from the generated ones"

    unknown_lines = []
    for g, t, s in zip(gen.tasks, doc.tasks, starts, strict=True):
        expected = [(f.key, f.value, s + 1 + i) for i, f in enumerate(g.fields)]
        assert [(f.key, f.value, f.at) for f in t.fields] == expected, f"fields of {g.id!r}"
        assert body_of(doc, t) == gen.lines[s + 1 + len(g.fields) : s + 1 + len(g.fields) + len(g.body)]
        unknown_lines += [s + 2 + i for i, f in enumerate(g.fields) if f.key.lower() not in KNOWN_LOWER]
        # typed accessors agree with the raw values
        values = {f.key.lower(): f.value for f in g.fields}
        if "prio" in values:
            assert t.prio == int(values["prio"])
        if "after" in values:
            assert t.after == tuple(x.strip() for x in values["after"].split(","))
        if "cloud" in values:
            assert t.cloud == (values["cloud"].lower() == "yes")
        assert t.notes == [f.value for f in g.fields if f.key.lower() == "note"]
        if "status" in values:
            assert t.status.state != "pending", f"Status {values['status']!r} read as pending"
    warnings = sorted(i.line for i in doc.issues if i.level == "warning")
    assert warnings == unknown_lines, "warnings other than one per unknown field"


# ---------------------------------------------------------------- 2. arbitrary text round-trips


def assert_structure(doc: TasksFile, text: str) -> None:
    lines = doc.lines
    assert "".join(lines) == text
    assert all(line and "\n" not in line[:-1] for line in lines), "a line is empty or holds a newline"
    assert all(line.endswith("\n") for line in lines[:-1]), "only the last line may lack a newline"
    prev_end = 0
    for t in doc.tasks:
        assert prev_end <= t.start < t.end <= len(lines), f"bad span for {t.id!r}"
        prev_end = t.end
        assert SPEC_ID_RE.fullmatch(t.id), f"task id {t.id!r} breaks the id rules"
        assert lines[t.start].startswith("##") and not lines[t.start].startswith("###")
        assert t.title and t.title == t.title.strip()
        assert [f.at for f in t.fields] == list(range(t.start + 1, t.start + 1 + len(t.fields)))
        assert all(f.at < t.end for f in t.fields)
    assert len({t.id for t in doc.tasks}) == len(doc.tasks), "duplicate ids parsed as tasks"
    assert [i.line for i in doc.issues] == sorted(i.line for i in doc.issues)
    assert all(1 <= i.line <= max(1, len(lines)) for i in doc.issues), "issue outside the file"
    assert all(i.level in ("error", "warning") for i in doc.issues)


@FAST
@given(text=messy_text | messy_tasks_text)
def test_arbitrary_text_round_trips(text: str) -> None:
    data = text.encode("utf-8")
    doc = taskfile.parse(data)
    assert doc.render() == data, "render(parse(b)) != b"
    assert_structure(doc, text)
    again = taskfile.parse(doc.render())
    assert [(t.id, t.start, t.end, t.fields) for t in again.tasks] == [
        (t.id, t.start, t.end, t.fields) for t in doc.tasks
    ]


def assert_fields_on_their_lines(doc: TasksFile) -> None:
    for t in doc.tasks:
        for f in t.fields:
            m = SPEC_FIELD_RE.fullmatch(content(doc.lines[f.at]))
            assert m is not None and m.group(1) == f.key, (
                f"field {f.key}: {f.value!r} of {t.id!r} says it is line {f.at + 1}, "
                f"which is {doc.lines[f.at]!r}"
            )
            assert (m.group(2) or "").strip() == f.value.strip()
        after = (t.fields[-1].at if t.fields else t.start) + 1
        if after < t.end:
            assert not SPEC_FIELD_RE.fullmatch(content(doc.lines[after])), (
                f"line {after + 1} {doc.lines[after]!r} reads as a field but is not one of {t.id!r}'s"
            )


@FAST
@given(text=messy_tasks_text)
def test_fields_are_the_key_value_lines_under_the_heading(text: str) -> None:
    doc = taskfile.parse(text.encode("utf-8"))
    assert_fields_on_their_lines(doc)


@FAST
@given(data=st.binary(max_size=200) | messy_text.map(lambda s: s.encode("utf-8") + b"\xff"))
def test_arbitrary_bytes_round_trip_or_raise_parse_error(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ParseError):
            taskfile.parse(data)
        return
    doc = taskfile.parse(data)
    assert doc.render() == data
    assert_structure(doc, text)


@MEDIUM
@given(prefix=messy_text, task_id=ids, title=edit_text)
def test_task_heading_is_never_silently_lost(prefix: str, task_id: str, title: str) -> None:
    """A '## <id>: <title>' line at column 1 is a task, or the file has an error."""
    if prefix and not prefix.endswith("\n"):
        prefix += "\n"
    data = (prefix + f"## {task_id}: {title}\n").encode("utf-8")
    doc = taskfile.parse(data)
    at = len(doc.lines) - 1
    assert any(t.start == at for t in doc.tasks) or doc.errors, f"task heading hidden silently in {data!r}"


# ---------------------------------------------------------------- 3. one edit changes exactly its lines


def check_set_existing(doc: TasksFile, task_id: str, key: str, value: str) -> TasksFile:
    t = doc.task(task_id)
    idx = next(i for i, f in enumerate(t.fields) if f.key.lower() == key.lower())
    at = t.fields[idx].at
    old = list(doc.lines)
    lines = lines_api.set_field(doc, task_id, key, value)
    assert doc.lines == old, "set_field mutated the parsed document"
    assert len(lines) == len(old), "set_field on an existing field added or removed lines"
    changed = [i for i, (a, b) in enumerate(zip(old, lines, strict=True)) if a != b]
    assert changed in ([], [at]), f"set_field changed lines {changed}, expected only {at}"
    assert eol(lines[at]) == eol(old[at]), f"line ending {eol(old[at])!r} became {eol(lines[at])!r}"
    new = lines_api.reparse(doc, lines)
    assert_incremental(edits.set_field(doc, task_id, key, value), lines)
    nt = new.task(task_id)
    expected = fields_of(t)
    expected[idx] = (key.lower(), value.strip())
    assert snap(new, nt) == Snap(t.title, tuple(expected), tuple(body_of(doc, t)))
    assert_others_unchanged(doc, new, {task_id})
    return new


def check_remove_field(doc: TasksFile, task_id: str, key: str) -> TasksFile:
    t = doc.task(task_id)
    idx = next(i for i, f in enumerate(t.fields) if f.key.lower() == key.lower())
    at = t.fields[idx].at
    old = list(doc.lines)
    lines = lines_api.set_field(doc, task_id, key, None)
    assert doc.lines == old, "set_field mutated the parsed document"
    assert lines == old[:at] + old[at + 1 :], f"removing {key} did not delete exactly line {at}"
    new = lines_api.reparse(doc, lines)
    assert_incremental(edits.set_field(doc, task_id, key, None), lines)
    expected = fields_of(t)
    del expected[idx]
    assert snap(new, new.task(task_id)) == Snap(t.title, tuple(expected), tuple(body_of(doc, t)))
    assert_others_unchanged(doc, new, {task_id})
    return new


def check_insert_field(
    doc: TasksFile, task_id: str, lines: list[str], old: list[str], key: str, value: str
) -> TasksFile:
    """``lines`` is ``old`` with one field line inserted right after the task's last field."""
    t = doc.task(task_id)
    assert doc.lines == old, "the edit mutated the parsed document"
    at = (t.fields[-1].at if t.fields else t.start) + 1
    assert len(lines) == len(old) + 1, "expected exactly one inserted line"
    assert lines[: at - 1] == old[: at - 1], "lines before the insertion changed"
    assert_fixed_last_line(old[at - 1], lines[at - 1], old, "line before the insertion")
    assert lines[at + 1 :] == old[at:], "lines after the insertion changed or moved"
    if at == len(old) and not old[-1].endswith("\n"):
        # inserted after an unterminated last line: the file still has no final newline
        assert not lines[at].endswith("\n"), "a missing final newline must stay missing"
    else:
        assert_eol_fits(lines[at], old, "inserted field")
    new = lines_api.reparse(doc, lines)
    nt = new.task(task_id)
    expected = (*fields_of(t), (key, value))
    assert snap(new, nt) == Snap(t.title, expected, tuple(body_of(doc, t))), "fields or body differ"
    assert nt.fields[-1].at == at
    assert_others_unchanged(doc, new, {task_id})
    return new


def check_set_new(doc: TasksFile, task_id: str, key: str, value: str) -> TasksFile:
    old = list(doc.lines)
    lines = lines_api.set_field(doc, task_id, key, value)
    assert_incremental(edits.set_field(doc, task_id, key, value), lines)
    return check_insert_field(doc, task_id, lines, old, key.lower(), value.strip())


def check_add_note(doc: TasksFile, task_id: str, text: str) -> TasksFile:
    old = list(doc.lines)
    lines = lines_api.add_note(doc, task_id, text, now=NOW)
    assert_incremental(edits.add_note(doc, task_id, text, NOW), lines)
    return check_insert_field(doc, task_id, lines, old, "note", f"{NOTE_DATE} {text.strip()}")


def check_set_title(doc: TasksFile, task_id: str, title: str) -> TasksFile:
    t = doc.task(task_id)
    old = list(doc.lines)
    lines = lines_api.set_title(doc, task_id, title)
    assert doc.lines == old, "set_title mutated the parsed document"
    assert len(lines) == len(old)
    changed = [i for i, (a, b) in enumerate(zip(old, lines, strict=True)) if a != b]
    assert changed in ([], [t.start]), f"set_title changed lines {changed}, expected only {t.start}"
    assert eol(lines[t.start]) == eol(old[t.start]), "set_title changed the heading's line ending"
    new = lines_api.reparse(doc, lines)
    assert_incremental(edits.set_title(doc, task_id, title), lines)
    nt = new.task(task_id)
    assert (nt.start, nt.end) == (t.start, t.end)
    assert snap(new, nt) == Snap(title.strip(), tuple(fields_of(t)), tuple(body_of(doc, t)))
    assert_others_unchanged(doc, new, {task_id})
    return new


def check_append(
    doc: TasksFile, task_id: str, title: str, fields: list[tuple[str, str]], body: list[str], sep: str
) -> TasksFile:
    old = list(doc.lines)
    lines = lines_api.append_task(doc, task_id, title, fields, sep.join(body) if body else None)
    assert doc.lines == old, "append_task mutated the parsed document"
    n = len(old)
    assert len(lines) > n
    assert lines[: max(n - 1, 0)] == old[: max(n - 1, 0)], "append_task changed an earlier line"
    if old:
        assert_fixed_last_line(old[-1], lines[n - 1], old, "append_task")
    tail = lines[n:]
    for line in tail:
        assert_eol_fits(line, old, "append_task")
    if old and content(old[-1]).strip():
        assert content(tail[0]) == "", "no blank line between the last line and the new task"
        tail = tail[1:]
    trimmed = list(body)
    while trimmed and trimmed[0] == "":
        trimmed.pop(0)
    while trimmed and trimmed[-1] == "":
        trimmed.pop()
    body_lines = ["", *trimmed] if "".join(body).strip() else []
    expected_tail = [f"## {task_id}: {title.strip()}", *(f"{k}: {v.strip()}" for k, v in fields), *body_lines]
    assert [content(x) for x in tail] == expected_tail, "the appended lines are not the new task"
    new = lines_api.reparse(doc, lines)
    assert_incremental(
        edits.append_task(doc, task_id, title, fields, sep.join(body) if body else None), lines
    )
    assert [t.id for t in new.tasks] == [*(t.id for t in doc.tasks), task_id], (
        "append_task did not add one task"
    )
    nt = new.task(task_id)
    assert nt.end == len(lines)
    assert snap(new, nt) == Snap(
        title.strip(),
        tuple((k.lower(), v.strip()) for k, v in fields),
        tuple(lines[len(lines) - len(body_lines) :]) if body_lines else (),
    )
    last = doc.tasks[-1].id if doc.tasks else None
    assert_others_unchanged(doc, new, {last} if last else set())
    if last:
        t, lt = doc.task(last), new.task(last)
        assert (snap(new, lt).title, snap(new, lt).fields) == (t.title, tuple(fields_of(t)))
    return new


def check_remove_task(doc: TasksFile, task_id: str) -> TasksFile:
    t = doc.task(task_id)
    old = list(doc.lines)
    lines = lines_api.remove_task(doc, task_id)
    assert doc.lines == old, "remove_task mutated the parsed document"
    expected = old[: t.start] + old[t.end :]
    if t.start == 0 and old[0].startswith("\ufeff"):
        # the byte order mark belongs to the file: it stays first
        expected = ["\ufeff" + expected[0], *expected[1:]] if expected else ["\ufeff"]
    assert lines == expected, "remove_task did not delete exactly [start, end)"
    new = lines_api.reparse(doc, lines)
    assert_incremental(edits.remove_task(doc, task_id), lines)
    assert [x.id for x in new.tasks] == [x.id for x in doc.tasks if x.id != task_id]
    assert_others_unchanged(doc, new, {task_id})
    return new


@functools.cache
def padded(s: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(hspace, s, hspace).map("".join)


def draw_task(data: st.DataObject, doc: TasksFile) -> Task:
    return data.draw(st.sampled_from(doc.tasks), label="task")


def draw_present(data: st.DataObject, t: Task) -> str | None:
    """One of the task's single-valued fields, as written, or None if it has none."""
    present = [f.key for f in t.fields if f.key.lower() in {k.lower() for k in SINGLE}]
    return data.draw(st.sampled_from(present), label="present key") if present else None


# One generated file takes each edit in turn (each on the file as generated, on a task
# drawn for it): generating the file is most of the cost, and a test per edit paid it once
# per edit. Each edit still sees as many files as it did alone.
@settings(EDITS, max_examples=75)
@given(gen=valid_files(min_tasks=1), data=st.data())
def test_each_edit_changes_exactly_its_lines(gen: GenFile, data: st.DataObject) -> None:
    doc = taskfile.parse(gen.data)
    t = draw_task(data, doc)
    present = draw_present(data, t)
    if present is not None:  # set_field on an existing field changes that one line
        key = data.draw(key_spelling(present), label="key")
        value = data.draw(padded(value_strategy(key, edit_text)), label="value")
        check_set_existing(doc, t.id, key, value)
    t = draw_task(data, doc)
    present = draw_present(data, t)
    if present is not None:  # set_field(None) deletes that one line
        check_remove_field(doc, t.id, present)
    t = draw_task(data, doc)
    absent = [k for k in SINGLE if t.get(k) is None]
    if absent:  # a new field is one line inserted after the fields
        key = data.draw(st.sampled_from(absent).flatmap(key_spelling), label="new key")
        value = data.draw(padded(value_strategy(key, edit_text)), label="new value")
        check_set_new(doc, t.id, key, value)
    check_add_note(doc, draw_task(data, doc).id, data.draw(padded(edit_text), label="note"))
    check_set_title(doc, draw_task(data, doc).id, data.draw(padded(edit_text), label="title"))
    check_remove_task(doc, draw_task(data, doc).id)


append_fields = st.lists(st.sampled_from(SINGLE), unique=True, max_size=5).flatmap(
    lambda keys: st.tuples(*(st.tuples(st.just(k), padded(value_strategy(k, edit_text))) for k in keys)).map(
        list
    )
)
append_body = blocks.map(lambda lines: ["".join(c for c in x if c not in BODY_BREAKS) for x in lines])


@EDITS
@given(
    gen=valid_files(),
    data=st.data(),
    title=padded(edit_text),
    fields=append_fields,
    body=append_body,
    sep=st.sampled_from(["\n", "\r\n"]),
)
def test_append_task_only_appends(
    gen: GenFile,
    data: st.DataObject,
    title: str,
    fields: list[tuple[str, str]],
    body: list[str],
    sep: str,
) -> None:
    doc = taskfile.parse(gen.data)
    task_id = data.draw(ids.filter(lambda i: i not in doc.ids()), label="id")
    check_append(doc, task_id, title, fields, body, sep)


@settings(MEDIUM, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(text=messy_tasks_text, data=st.data())
def test_edits_on_arbitrary_error_free_files(text: str, data: st.DataObject) -> None:
    """The same edit checks on messy files that happen to parse without errors."""
    doc = taskfile.parse(text.encode("utf-8"))
    assume(doc.tasks and not doc.errors)
    t = draw_task(data, doc)
    op = data.draw(st.sampled_from(["set", "remove-field", "note", "title", "append", "remove"]), label="op")
    if op == "set":
        key = data.draw(st.sampled_from(SINGLE), label="key")
        value = data.draw(value_strategy(key, edit_text), label="value")
        if t.get(key) is None:
            check_set_new(doc, t.id, key, value)
        else:
            check_set_existing(doc, t.id, key, value)
    elif op == "remove-field":
        present = [f.key for f in t.fields if f.key.lower() in {k.lower() for k in SINGLE}]
        assume(present)
        check_remove_field(doc, t.id, data.draw(st.sampled_from(present), label="key"))
    elif op == "note":
        check_add_note(doc, t.id, data.draw(edit_text, label="text"))
    elif op == "title":
        check_set_title(doc, t.id, data.draw(edit_text, label="title"))
    elif op == "append":
        task_id = data.draw(ids.filter(lambda i: i not in doc.ids()), label="id")
        fields = data.draw(append_fields, label="fields")
        # On a file ending in an unclosed fence the new heading would be hidden: refused.
        # So is one whose last line, once the append ends it, means something else (a
        # lone CR ending "##" becomes a CRLF: a heading that is not a task).
        try:
            check_append(doc, task_id, data.draw(edit_text, label="title"), fields, [], "\n")
        except WfError as e:
            ended = taskfile.parse(text.encode("utf-8") + b"\n")
            assert "code fence is never closed" in str(e) or ended.errors, str(e)
    else:
        check_remove_task(doc, t.id)


BAD_VALUES = {
    "Prio": ["4", "-1", "high", "1.5"],
    "Effort": ["0", "-2", "big", "1e3"],
    "Model": ["two words", "-lead", "a" * 101],
    "Lane": ["Fast", "a_b", "-x"],
    "After": ["A", "a b", "a,,b", "a;b"],
    "Sessions": ["team", "yes"],
    "Cloud": ["maybe", "1"],
    "Parent": ["Up", "a b"],
    "Status": ["done", "in review: x", "pending: later"],
}


@MEDIUM
@given(gen=valid_files(min_tasks=1), data=st.data())
def test_bad_edits_are_refused(gen: GenFile, data: st.DataObject) -> None:
    doc = taskfile.parse(gen.data)
    old = list(doc.lines)
    t = draw_task(data, doc)
    key = data.draw(st.sampled_from(sorted(BAD_VALUES)), label="key")
    bad = data.draw(st.sampled_from(BAD_VALUES[key]), label="bad")
    with pytest.raises(WfError):
        lines_api.reparse(doc, lines_api.set_field(doc, t.id, key, bad))
    two_lines = data.draw(st.tuples(edit_text, st.sampled_from(["\n", "\r\n", "\r"]), edit_text).map("".join))
    with pytest.raises(WfError):
        lines_api.set_field(doc, t.id, "Done", two_lines)
    with pytest.raises(WfError):
        lines_api.add_note(doc, t.id, two_lines, now=NOW)
    with pytest.raises(WfError):
        lines_api.set_title(doc, t.id, two_lines)
    with pytest.raises(WfError):
        lines_api.reparse(doc, lines_api.set_title(doc, t.id, data.draw(hspace, label="blank title")))
    with pytest.raises(WfError):
        lines_api.reparse(doc, lines_api.append_task(doc, t.id, "again", []))  # duplicate id
    assert doc.lines == old, "a refused edit changed the parsed document"


# ---------------------------------------------------------------- 4. sequences of edits


class EditSequence(RuleBasedStateMachine):
    """Random edits on a generated file, checked one by one and against a model of
    every task's title, fields and body."""

    def __init__(self) -> None:
        super().__init__()
        self.doc = taskfile.parse(b"")
        self.model: dict[str, Snap] = {}
        self.order: list[str] = []
        self.used: set[str] = set()

    @initialize(gen=valid_files(max_tasks=4))
    def load(self, gen: GenFile) -> None:
        self.doc = taskfile.parse(gen.data)
        assert self.doc.errors == []
        self.order = [t.id for t in self.doc.tasks]
        self.model = {t.id: snap(self.doc, t) for t in self.doc.tasks}
        self.used = set(self.order)

    def _pick(self, data: st.DataObject) -> Task:
        return draw_task(data, self.doc)

    def _apply(self, new: TasksFile, task_id: str) -> None:
        self.doc = new
        self.model[task_id] = snap(new, new.task(task_id))

    def _expect(
        self, task_id: str, title: str | None = None, fields: tuple[tuple[str, str], ...] | None = None
    ) -> Snap:
        old = self.model[task_id]
        return Snap(old.title if title is None else title, old.fields if fields is None else fields, old.body)

    @precondition(lambda self: bool(self.doc.tasks))
    @rule(data=st.data())
    def set_field(self, data: st.DataObject) -> None:
        t = self._pick(data)
        key = data.draw(st.sampled_from(SINGLE).flatmap(key_spelling), label="key")
        value = data.draw(padded(value_strategy(key, edit_text)), label="value")
        fields = list(self.model[t.id].fields)
        existing = [i for i, (k, _) in enumerate(fields) if k == key.lower()]
        if existing:
            new = check_set_existing(self.doc, t.id, key, value)
            fields[existing[0]] = (key.lower(), value.strip())
        else:
            new = check_set_new(self.doc, t.id, key, value)
            fields.append((key.lower(), value.strip()))
        expected = self._expect(t.id, fields=tuple(fields))
        self._apply(new, t.id)
        assert self.model[t.id] == expected

    @precondition(lambda self: any(f.key.lower() != "note" for t in self.doc.tasks for f in t.fields))
    @rule(data=st.data())
    def remove_field(self, data: st.DataObject) -> None:
        t = self._pick(data)
        present = [f.key for f in t.fields if f.key.lower() in {k.lower() for k in SINGLE}]
        if not present:
            return
        key = data.draw(st.sampled_from(present), label="key")
        fields = [kv for kv in self.model[t.id].fields if kv[0] != key.lower()]
        expected = self._expect(t.id, fields=tuple(fields))
        self._apply(check_remove_field(self.doc, t.id, key), t.id)
        assert self.model[t.id] == expected

    @precondition(lambda self: bool(self.doc.tasks))
    @rule(data=st.data(), text=padded(edit_text))
    def add_note(self, data: st.DataObject, text: str) -> None:
        t = self._pick(data)
        fields = (*self.model[t.id].fields, ("note", f"{NOTE_DATE} {text.strip()}"))
        expected = self._expect(t.id, fields=fields)
        self._apply(check_add_note(self.doc, t.id, text), t.id)
        assert self.model[t.id] == expected

    @precondition(lambda self: bool(self.doc.tasks))
    @rule(data=st.data(), title=padded(edit_text))
    def set_title(self, data: st.DataObject, title: str) -> None:
        t = self._pick(data)
        expected = self._expect(t.id, title=title.strip())
        self._apply(check_set_title(self.doc, t.id, title), t.id)
        assert self.model[t.id] == expected

    @rule(data=st.data(), title=padded(edit_text), fields=append_fields, body=append_body)
    def append_task(
        self, data: st.DataObject, title: str, fields: list[tuple[str, str]], body: list[str]
    ) -> None:
        task_id = data.draw(ids.filter(lambda i: i not in self.used), label="id")
        last = self.order[-1] if self.order else None
        new = check_append(self.doc, task_id, title, fields, body, "\n")
        if last:
            # check_append proved the old lines kept (a final newline and a blank
            # separator may follow); the previous last task's body now includes them.
            old_body = self.model[last].body
            new_body = tuple(body_of(new, new.task(last)))
            assert new_body[: max(0, len(old_body) - 1)] == old_body[: max(0, len(old_body) - 1)]
            assert all(content(x) == "" for x in new_body[len(old_body) :])
            self.model[last] = snap(new, new.task(last))
        self.used.add(task_id)
        self.order.append(task_id)
        self._apply(new, task_id)

    @precondition(lambda self: bool(self.doc.tasks))
    @rule(data=st.data())
    def remove_task(self, data: st.DataObject) -> None:
        t = self._pick(data)
        self.doc = check_remove_task(self.doc, t.id)
        self.order.remove(t.id)
        del self.model[t.id]

    @invariant()
    def matches_model(self) -> None:
        doc = taskfile.parse(self.doc.render())
        assert doc.errors == [], f"the edited file has errors: {doc.errors}"
        assert [t.id for t in doc.tasks] == self.order, "tasks lost, added or reordered"
        for t in doc.tasks:
            assert snap(doc, t) == self.model[t.id], f"task {t.id!r} drifted from the model"


EditSequence.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
TestEditSequence = EditSequence.TestCase


# ---------------------------------------------------------------- regressions
#
# Engine bugs these properties found (fixed in 22e26b4); each test names the promise.


def test_regression_bom_does_not_hide_first_task() -> None:
    """A UTF-8 byte order mark (Windows editors write one) before a first-line task."""
    data = "\ufeff## fetch-retry: Retry failed fetches\nModel: sonnet\n".encode()
    doc = taskfile.parse(data)
    assert doc.render() == data
    assert doc.find("fetch-retry") is not None or doc.errors, (
        "BUG: a task heading after a BOM vanishes without any error (spec: wf never hides a task "
        f"it cannot read); tasks={doc.tasks} issues={doc.issues}"
    )


@MEDIUM
@example(prefix="```\n", sep="\t", task_id="a", title="b")
@given(
    prefix=st.lists(messy_line, max_size=6).map("".join),
    sep=st.sampled_from([" ", "\t"]),
    task_id=ids,
    title=edit_text,
)
def test_regression_tab_heading_in_unclosed_fence_is_an_error(
    prefix: str, sep: str, task_id: str, title: str
) -> None:
    """Outside a fence '##<TAB>id: title' is a task; inside an unclosed fence it must be
    reported as hidden (an error), like a '## ' line is."""
    if prefix and not prefix.endswith("\n"):
        prefix += "\n"
    data = (prefix + f"##{sep}{task_id}: {title}\n").encode()
    doc = taskfile.parse(data)
    at = len(doc.lines) - 1
    assert any(t.start == at for t in doc.tasks) or doc.errors, (
        f"BUG: heading line {at + 1} of {data!r} is hidden by an unclosed fence, but the parser "
        f"counts only '## ' lines as hidden, so it reports just {doc.issues}"
    )


@MEDIUM
@example(body="## sneaky: Not checked against ids or the archive")
@given(body=st.lists(messy_line, max_size=5).map("".join))
def test_regression_append_task_body_adds_no_tasks(body: str) -> None:
    """append_task adds one task or is refused; its body must not mint more tasks."""
    doc = taskfile.parse(b"# Tasks\n\n## a: First\nModel: haiku\n")
    try:
        new = lines_api.reparse(doc, lines_api.append_task(doc, "b", "Second", [("Model", "sonnet")], body))
    except WfError:
        return
    assert [t.id for t in new.tasks] == ["a", "b"], (
        f"BUG: append_task with body {body!r} produced tasks {[t.id for t in new.tasks]}; "
        "a '## <id>: <title>' line in the body becomes a task that skipped the id checks"
    )


def test_casefolded_key_is_not_a_field() -> None:
    """Python's re.IGNORECASE folds U+017F LATIN SMALL LETTER LONG S into 's' (and U+212A
    KELVIN SIGN into 'k'); keys are ASCII, so 'ſessions: owner' is not a field line: it
    starts the body, and the 'Prio: 1' after it is body text too. Field lines must stay
    on their own lines, and removing Prio must change nothing."""
    data = "## a: Title\nModel: haiku\n\u017fessions: owner\nPrio: 1\n".encode()
    doc = taskfile.parse(data)
    assert_fields_on_their_lines(doc)
    assert [k for k, _ in doc.task("a").pairs] == ["Model"]
    lines = lines_api.set_field(doc, "a", "prio", None)
    assert "".join(lines).encode() == data


@MEDIUM
@example(body="## a: a body line that repeats an earlier id")
@given(body=st.lists(messy_line, max_size=5).map("".join))
def test_regression_incremental_append_parse_is_a_full_parse(body: str) -> None:
    """wf.tasks.edits.append_task (what 'wf add' uses) parses only the last task's region plus
    the new text; a '## <id>: ...' body line repeating an earlier id was not seen as a
    duplicate: it returned (and wf wrote and cached) a parse with two tasks 'a' and no
    error, while a full parse of the same bytes had a duplicate-id error."""
    doc = taskfile.parse(b"# Tasks\n\n## a: First\nModel: haiku\n\n## z: Last\n")
    try:
        result = edits.append_task(doc, "b", "Second", [("Model", "sonnet")], body)
    except WfError:
        return
    full = taskfile.parse(result.render())
    assert parse_view(result) == parse_view(full), (
        f"BUG: after appending with body {body!r} wf.tasks.edits reports tasks {[t.id for t in result.tasks]} "
        f"and issues {result.issues}, a full parse of the same bytes {[t.id for t in full.tasks]} "
        f"and {full.issues}"
    )


@MEDIUM
@example(key="Model", value="sonnet", space="\u00a0")
@given(
    key=st.sampled_from(["Model", "Lane", "Parent", "Done"]),
    value=st.sampled_from(["sonnet", "fast", "x-1"]),
    space=st.sampled_from(["\u00a0", "\u3000", "\u2009", "\x0c"]),
)
def test_regression_field_values_are_stripped(key: str, value: str, space: str) -> None:
    """check_field strips a value before validating it (str.strip: any Unicode
    whitespace); the fast-path parser kept the raw value, so 'Model: sonnet<NBSP>'
    passed the check and then named model 'sonnet\xa0' (no lane runs it)."""
    doc = taskfile.parse(f"## a: Title\n{key}: {value}{space}\n".encode())
    assert doc.errors == []
    assert doc.tasks[0].get(key) == value, (
        f"BUG: {key}: {value}{space!r} passes the check as {value!r} but reads as {doc.tasks[0].get(key)!r}"
    )


def test_regression_append_after_a_last_line_that_ending_it_would_change_is_refused() -> None:
    """Found by test_edits_on_arbitrary_error_free_files: a file whose last line is "##"
    and a lone CR. Appending must end that line, and the CR then reads as half a CRLF:
    the line becomes a level-2 heading that is not a task. wf refuses the edit, naming
    the line (wf add then writes nothing: the refusal comes before the write)."""
    doc = taskfile.parse(b"## a: x\n##\r")
    assert doc.errors == []
    with pytest.raises(WfError, match=re.escape("TASKS.md:2: error: level-2 heading is not a task")):
        edits.append_task(doc, "b", "New", [], None)


# ---------------------------------------------------------------- engine bugs these properties found (fixed; the tests keep them so)


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_regression_set_title_drops_byte_order_mark(eol: str) -> None:
    """Since 22e26b4 a BOM before the first line belongs to that line, not to its
    content; set_title rewrites the whole heading line and loses it, a byte the edit
    did not mean to change (the file stops being marked UTF-8 for editors that need it)."""
    data = f"\ufeff## a: Title{eol}Model: haiku{eol}".encode()
    doc = taskfile.parse(data)
    lines = lines_api.set_title(doc, "a", "New title")
    assert "".join(lines) == f"\ufeff## a: New title{eol}Model: haiku{eol}", (
        f"BUG: set_title on the first line dropped the byte order mark: {lines!r}"
    )
