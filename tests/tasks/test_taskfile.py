"""The TASKS.md engine on small exact inputs: what parses, what is an error, and that
edits splice only the lines they mean."""

from __future__ import annotations

import pytest

from tests import lines_api
from wf.base.errors import ParseError, WfError
from wf.tasks import archive, taskfile


def parse(text: str) -> taskfile.TasksFile:
    return taskfile.parse(text.encode("utf-8"))


def messages(doc: taskfile.TasksFile) -> list[str]:
    return [f"{i.line}:{i.level}:{i.message}" for i in doc.issues]


def test_fields_then_body() -> None:
    doc = parse("pre\n\n## a: Title here  \nmodel: haiku\nPRIO: 1\nDone: x: y\n\nNote: body, not a field\n")
    t = doc.task("a")
    assert t.title == "Title here"
    assert (t.model, t.prio, t.done) == ("haiku", 1, "x: y")
    assert t.notes == []
    assert (t.start, t.end) == (2, 8)


def test_code_fences_hide_headings() -> None:
    text = (
        "## a: A\n\n```md\n## b: not a task\n```\n~~~~\n## c: nor this\n~~~\n## d: nor this\n~~~~\n## e: E\n"
    )
    doc = parse(text)
    assert [t.id for t in doc.tasks] == ["a", "e"]
    assert doc.issues == []


def test_unclosed_fence_hiding_a_heading_is_an_error() -> None:
    doc = parse("## a: A\n```\n## b: hidden\n")
    assert messages(doc) == ["2:error:code fence is never closed, hiding 1 '## ' line(s) from line 3 on"]


def test_setext_and_deeper_headings_are_body() -> None:
    doc = parse("## a: A\n\nTitle\n---\n### sub: heading\n#### deeper\n")
    assert [t.id for t in doc.tasks] == ["a"]
    assert doc.issues == []


def test_heading_errors() -> None:
    doc = parse("## a: A\n  ## b: indented\n##c: no space\n## : no id\n## x y: spaced id\n")
    assert messages(doc) == [
        "2:error:indented level-2 heading: a task heading starts at column 1",
        "3:warning:'##' without a space is not a heading; is it a task?",
        "4:error:level-2 heading is not a task: expected '## <id>: <title>'",
        "5:error:bad task id 'x y': ids are lowercase letters, digits and '-', start with a letter or digit, at most 48",
    ]


def test_field_errors_and_warnings() -> None:
    doc = parse("## a: A\nModel: haiku\nmodel: sonnet\nCloud: maybe\nColour: blue\nSessions: owner\n")
    assert messages(doc) == [
        "3:error:Model given twice in task a",
        "4:error:bad Cloud 'maybe': expected yes or no",
        "5:warning:unknown field 'Colour' (kept as it is)",
    ]


@pytest.mark.parametrize(
    "value,state,who",
    [
        ("in progress: worker since 2026-11-29T07:40Z", "progress", "worker"),
        ("In Progress: cloud:abc", "progress", "cloud:abc"),
        ("awaiting: which API?", "awaiting", ""),
        ("blocked: needs key", "blocked", ""),
        ("wip: half done", "wip", ""),
    ],
)
def test_statuses(value: str, state: str, who: str) -> None:
    st = parse(f"## a: A\nStatus: {value}\n").task("a").status
    assert (st.state, st.who) == (state, who)


def test_crlf_edit_keeps_crlf_and_one_line_changes() -> None:
    text = "# T\r\n\r\n## a: A\r\nModel: haiku\r\nPrio: 2\r\n\r\nbody\r\n"
    doc = parse(text)
    lines = lines_api.set_field(doc, "a", "prio", "0")
    assert lines == ["# T\r\n", "\r\n", "## a: A\r\n", "Model: haiku\r\n", "Prio: 0\r\n", "\r\n", "body\r\n"]
    lines = lines_api.set_field(doc, "a", "done", "make test")
    assert lines[5] == "Done: make test\r\n" and len(lines) == len(doc.lines) + 1


def test_edit_keeps_key_spelling_and_missing_final_newline() -> None:
    doc = parse("## a: A\nMODEL: haiku")
    assert lines_api.set_field(doc, "a", "model", "opus") == ["## a: A\n", "MODEL: opus"]
    doc = parse("## a: A")
    assert lines_api.set_field(doc, "a", "status", "blocked: x") == ["## a: A\n", "Status: blocked: x"]


def test_append_to_file_without_final_newline() -> None:
    doc = parse("# T\n\n## a: A\nbody")
    lines = lines_api.append_task(doc, "b", "B", [("Model", "haiku")])
    assert "".join(lines) == "# T\n\n## a: A\nbody\n\n## b: B\nModel: haiku\n"


def test_remove_task_removes_exactly_its_lines() -> None:
    doc = parse("pre\n\n## a: A\nx\n\n## b: B\ny\n\n## c: C\n")
    assert "".join(lines_api.remove_task(doc, "b")) == "pre\n\n## a: A\nx\n\n## c: C\n"


def test_unicode_tabs_and_trailing_spaces_survive() -> None:
    text = "# Tâches ✓\n\n## a: Café\tau lait  \nModel:\thaiku \n\n\tindented body ✓  \n"
    doc = parse(text)
    assert doc.render() == text.encode("utf-8")
    assert doc.task("a").title == "Café\tau lait"
    assert doc.task("a").model == "haiku"
    out = "".join(lines_api.set_field(doc, "a", "prio", "1"))
    assert out == "# Tâches ✓\n\n## a: Café\tau lait  \nModel:\thaiku \nPrio: 1\n\n\tindented body ✓  \n"


def test_not_utf8() -> None:
    with pytest.raises(ParseError) as info:
        taskfile.parse(b"ok\n\xff\n")
    assert str(info.value) == "TASKS.md:2: error: not UTF-8 text (byte 0xff) at byte offset 3"


def test_reparse_refuses_a_body_that_would_create_a_heading() -> None:
    doc = parse("## a: A\n")
    with pytest.raises(WfError, match="refusing an edit that would break the file"):
        lines_api.append_task(doc, "b", "B", [], body="text\n## Oops\n")
    with pytest.raises(WfError, match=r"add or lose a task heading \(line 6: '## c: ...'\)"):
        lines_api.append_task(doc, "b", "B", [], body="text\n## c: a body line\n")


def test_multiline_values_are_refused() -> None:
    doc = parse("## a: A\n")
    with pytest.raises(WfError, match="must be one line"):
        lines_api.set_field(doc, "a", "done", "x\ny")


def test_archive_lines_round_trip() -> None:
    line = archive.format_line(
        "a", "Title -- with dashes", lane="sonnet", model="sonnet", commit="abc1234", parent="p"
    )
    arch = archive.parse(archive.appended(archive.parse(None), line))
    (e,) = arch.entries
    assert (e.id, e.lane, e.model, e.commit, e.parent, e.title) == (
        "a",
        "sonnet",
        "sonnet",
        "abc1234",
        "p",
        "Title -- with dashes",
    )


def test_a_lone_carriage_return_at_the_end_is_content() -> None:
    doc = parse("## a: A\nprio:\r")  # not 'prio:' + CRLF: a key followed by a CR is body text
    assert doc.task("a").pairs == ()
    doc = parse("## a: A\r\nPrio: 1\r\n")
    assert doc.task("a").prio == 1
