"""Hostile inputs to the TASKS.md engine: wf.toml paths and numbers, symlinks, lone CRs,
very long lines, and a person's typo in one task while wf writes others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from wf.tasks import taskfile

# ------------------------------------------------------------------ wf.toml paths


def _set_toml(root: Path, line: str) -> None:
    """Put ``key = value`` first in wf.toml, in place of the key's own line."""
    path = root / "wf.toml"
    key = line.split("=")[0].strip()
    kept = [x for x in path.read_text().splitlines(keepends=True) if x.split("=")[0].strip() != key]
    path.write_text(line + "\n" + "".join(kept))


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('tasks = ".git/config"', "tasks = '.git/config' is inside .git/"),
        ('archive = ".git/config"', "archive = '.git/config' is inside .git/"),
        ('tasks = "wf.toml"', "tasks = 'wf.toml' is the same file as wf.toml"),
        ('tasks = "DONE.md"', "archive = 'DONE.md' is the same file as tasks (DONE.md)"),
        ('tasks = "."', "tasks = '.' is a folder"),
        ('tasks = "sub"', "tasks = 'sub' is a folder"),
        ('tasks = ".wf/TASKS.md"', "tasks = '.wf/TASKS.md' is inside .wf/"),
        ('tasks = "docs/TASKS.md"', "tasks = 'docs/TASKS.md' leads outside the work tree"),
        ('tasks = "out.md"', "tasks = 'out.md' leads outside the work tree"),
        ('tasks = "git-link.md"', "tasks = 'git-link.md' is inside .git/"),
        ('tasks = "sub/.git/config"', "tasks = 'sub/.git/config' is inside sub/.git/"),
        ('tasks = ".worktrees/a/TASKS.md"', "tasks = '.worktrees/a/TASKS.md' is inside .worktrees/"),
        ('tasks = ".git"', "tasks = '.git' is a folder"),
        ('archive = "wf.toml"', "archive = 'wf.toml' is the same file as wf.toml"),
        ('archive = "."', "archive = '.' is a folder"),
        ('archive = "TASKS.md"', "archive = 'TASKS.md' is the same file as tasks (TASKS.md)"),
        ('archive = "git-link.md"', "archive = 'git-link.md' is inside .git/"),
        ('tasks = "fifo"', "tasks = 'fifo' is not a regular file"),
        ('tasks = "/etc/passwd"', "tasks must be a relative path inside the repository, not '/etc/passwd'"),
        ('archive = "/tmp/DONE.md"', "archive must be a relative path inside the repository"),
        ('tasks = "../TASKS.md"', "tasks must be a relative path inside the repository, not '../TASKS.md'"),
        ('tasks = "sub/../../x.md"', "tasks must be a relative path inside the repository"),
        ('archive = "a\\\\b.md"', "archive must be a relative path inside the repository"),
        ('tasks = ""', "tasks must be a relative path inside the repository, not ''"),
        ("tasks = 1", "tasks must be a string, not 1"),
    ],
)
def test_tasks_and_archive_paths_are_checked(wf: WfRunner, tmp_path: Path, line: str, says: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (wf.root / "docs").symlink_to(outside)
    (wf.root / "sub").mkdir()
    (wf.root / "out.md").symlink_to(outside / "TASKS.md")
    (wf.root / "git-link.md").symlink_to(Path(".git") / "config")
    os.mkfifo(wf.root / "fifo")
    _set_toml(wf.root, line)
    config_before = (wf.root / ".git" / "config").read_bytes()
    toml_before = (wf.root / "wf.toml").read_bytes()
    for args in (("add", "x", "--body", '[core]\n\tfsmonitor = "touch /tmp/pwned"'), ("list",), ("check",)):
        r = wf(*args)
        assert r.code == 1, (args, r.err)
        assert f"wf: wf.toml: {says}" in r.err
        assert "Traceback" not in r.err
    assert (wf.root / ".git" / "config").read_bytes() == config_before
    assert (wf.root / "wf.toml").read_bytes() == toml_before
    assert list(outside.iterdir()) == []


def test_a_symlinked_tasks_file_is_written_through(wf: WfRunner) -> None:
    real = wf.root / "notes" / "TASKS.md"
    real.parent.mkdir()
    (wf.root / "TASKS.md").rename(real)
    (wf.root / "TASKS.md").symlink_to(Path("notes") / "TASKS.md")
    wf.ok("add", "Through the link")
    wf.ok("note", "through-the-link", "still linked")
    link = wf.root / "TASKS.md"
    assert link.is_symlink() and os.readlink(link) == "notes/TASKS.md"
    assert "## through-the-link: Through the link" in real.read_text()
    assert "still linked" in real.read_text()
    assert [p.name for p in real.parent.iterdir()] == ["TASKS.md"]  # no temp file left


def test_symlinked_tracked_files_are_merged_and_archived_through_their_links(wf: WfRunner) -> None:
    """TASKS.md and DONE.md are links (tracked by git as links) to files in notes/: wf
    done and wf merge write and commit the targets; the links stay links, nothing is
    left uncommitted."""
    notes = wf.root / "notes"
    notes.mkdir()
    (wf.root / "TASKS.md").rename(notes / "TASKS.md")
    (wf.root / "TASKS.md").symlink_to(Path("notes") / "TASKS.md")
    (notes / "DONE.md").write_text("# Done\n")
    (wf.root / "DONE.md").symlink_to(Path("notes") / "DONE.md")
    for tid in ("a", "b", "c"):
        wf.ok("add", f"Task {tid}", "--id", tid, "--model", "sonnet", "--done", "true")
    _commit_all(wf.root, "linked backlog")
    wf.ok("done", "c")
    _commit_all(wf.root, "c done")
    rec = json.loads(wf.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "work.txt").write_text("done\n")
    _commit_all(wt, "work on a")
    wf.ok("merge", "a")
    for name in ("TASKS.md", "DONE.md"):
        assert os.readlink(wf.root / name) == f"notes/{name}"
    assert git(wf.root, "status", "--porcelain") == ""
    assert git(wf.root, "ls-files", "-s", "TASKS.md", "DONE.md").split()[0::4] == ["120000", "120000"]
    committed = git(wf.root, "show", "main:notes/TASKS.md")
    assert "## a: " not in committed and "## b: " in committed
    assert " a lane=sonnet" in git(wf.root, "show", "main:notes/DONE.md")
    assert " c " in (notes / "DONE.md").read_text()


# ------------------------------------------------------------------ wf.toml numbers and main


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("lock_timeout = nan", "lock_timeout must be a number from 0 to"),
        ("lock_timeout = inf", "lock_timeout must be a number from 0 to"),
        ("lock_timeout = -1", "lock_timeout must be a number from 0 to"),
        ("slice_above = nan", "slice_above must be a number from 0 to"),
        ("slice_above = -inf", "slice_above must be a number from 0 to"),
        ("lock_timeout = true", "lock_timeout must be a number, not true"),
        ('lock_timeout = "5"', 'lock_timeout must be a number, not "5"'),
        ("backup_days = -0.5", "backup_days must be a number from 0 to"),
        ("cloud_budget = nan", "cloud_budget must be a number from 0 to"),
        ("cloud_budget = inf", "cloud_budget must be a number from 0 to"),
        ("cloud_reserve = -1", "cloud_reserve must be a number from 0 to"),
        ("cloud_reserve = false", "cloud_reserve must be a number, not false"),
        ("cloud_max_parallel = true", "cloud_max_parallel must be a whole number from 1 to 64, not true"),
        ("cloud_pull_every = nan", "cloud_pull_every must be a number from 0 to"),
        ('main = "HEAD~1"', "main must be a branch name (like main), not 'HEAD~1'"),
        ('main = "main^"', "main must be a branch name"),
        ('main = "@{u}"', "main must be a branch name"),
        ('main = "-x"', "main must be a branch name"),
        ('main = "a..b"', "main must be a branch name"),
    ],
)
def test_numbers_and_main_are_validated(wf: WfRunner, line: str, says: str) -> None:
    _set_toml(wf.root, line)
    r = wf("list")
    assert r.code == 1 and f"wf.toml: {says}" in r.err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-3", "true", '"60"'])
@pytest.mark.parametrize("key", ["stall", "timeout"])
def test_lane_stall_and_timeout_are_validated(wf: WfRunner, key: str, value: str) -> None:
    toml = wf.root / "wf.toml"
    toml.write_text(toml.read_text() + f'\n[lanes.x]\nmodel = "haiku"\n{key} = {value}\n')
    r = wf("list")
    assert r.code == 1 and f"lanes.x.{key} must be a number of seconds above 0" in r.err, r.err
    assert "Traceback" not in r.err


def test_a_branch_main_is_accepted(wf: WfRunner) -> None:
    _set_toml(wf.root, 'main = "release/2.0"')
    assert json.loads(wf.ok("config", "main", "--json")) == "release/2.0"


def test_env_lock_timeout_nan_falls_back_to_the_setting(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wf.base import project

    monkeypatch.setenv("WF_LOCK_TIMEOUT", "nan")
    assert project.load(wf.root).lock_timeout == 10.0


# ------------------------------------------------------------------ line endings


def test_a_cr_only_file_is_reported_not_silently_empty(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    data = b"# Tasks\r\r## a: First\rModel: haiku\rDone: true\r\r## b: Second\r"
    path.write_bytes(data)
    r = wf("check")
    assert r.code == 1
    assert "TASKS.md:1: error: lone CR (\\r) line breaks hide 2 heading(s) from '## a: First' on" in r.out
    r = wf("list")
    assert "lone CR" in r.err
    assert wf("add", "x").code == 1
    assert path.read_bytes() == data


@pytest.mark.parametrize("body", ["one\rtwo", "fine\n\r## evil: Injected\nModel: haiku", "x\r"])
def test_a_body_with_a_bare_cr_is_refused(wf: WfRunner, body: str) -> None:
    before = (wf.root / "TASKS.md").read_bytes()
    r = wf("add", "Task", "--body", body)
    assert r.code == 1 and "carriage return" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_a_crlf_body_is_written_with_the_files_endings(wf: WfRunner) -> None:
    wf.ok("add", "Task", "--body", "one\r\ntwo\r\n")
    text = (wf.root / "TASKS.md").read_bytes()
    assert b"\none\ntwo\n" in text and b"\r" not in text


def test_a_field_with_a_bare_cr_is_refused(wf: WfRunner) -> None:
    wf.ok("add", "Task")
    for args in (
        ("note", "task", "a\rb"),
        ("set", "task", "--done", "x\ry"),
        ("status", "task", "blocked", "a\rb"),
    ):
        r = wf(*args)
        assert r.code != 0, args
    assert b"\r" not in (wf.root / "TASKS.md").read_bytes()


@pytest.mark.parametrize("brk", ["\r", "\v", "\f", "\x1c", "\x85", "\u2028", "\u2029"])
def test_no_field_or_title_wf_writes_holds_a_line_break(wf: WfRunner, brk: str) -> None:
    """A character an editor or str.splitlines may take for a line break never lands in
    a field or title (it would turn the rest into a line of its own: a field, a heading)."""
    wf.ok("add", "Task", "--model", "haiku")
    before = (wf.root / "TASKS.md").read_bytes()
    evil = f"x{brk}## evil: Injected"
    for args in (
        ("add", evil),
        ("add", "T", "--done", evil),
        ("add", "T", "--model", f"hai{brk}ku"),
        ("note", "task", evil),
        ("set", "task", "--done", evil),
        ("set", "task", "--title", evil),
        ("status", "task", "blocked", evil),
        ("status", "task", "progress", f"me{brk}Done: x", "--force"),
    ):
        r = wf(*args)
        assert r.code == 1, (args, r.err)
        assert "Traceback" not in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029"])
def test_a_body_with_a_unicode_line_separator_is_refused(wf: WfRunner, brk: str) -> None:
    before = (wf.root / "TASKS.md").read_bytes()
    r = wf("add", "Task", "--body", f"fine{brk}## evil: Injected")
    assert r.code == 1 and "line separator" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_wf_edit_refuses_a_lone_cr(wf: WfRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wf.ok("add", "Task", "--id", "t")
    before = (wf.root / "TASKS.md").read_bytes()
    editor = tmp_path / "ed.sh"
    editor.write_text('#!/bin/sh\nprintf "## t: T\\nbody\\r## evil: Injected\\n" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    r = wf("edit", "t")
    assert r.code == 1 and "lone CR" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_text_that_is_not_utf8_is_refused_not_a_crash(wf: WfRunner) -> None:
    """Arguments that are not UTF-8 (bytes a shell passes as they are): a clear refusal,
    exit 1, never a traceback, the file untouched."""
    wf.ok("add", "Task", "--id", "t")
    before = (wf.root / "TASKS.md").read_bytes()
    cases: list[list[bytes]] = [
        [b"note", b"t", b"caf\xe9"],
        [b"add", b"T\xff"],
        [b"add", b"T", b"--body", b"\xc3"],
        [b"add", b"T", b"--done", b"\x85"],
        [b"status", b"t", b"blocked", b"\xfe"],
        [b"show", b"\xff"],
    ]
    for args in cases:
        p = subprocess.run(
            [os.fsencode(sys.executable), b"-m", b"wf", *args],
            cwd=wf.root, capture_output=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent.parent)),
        )  # fmt: skip
        assert p.returncode == 1, (args, p.stderr)
        assert b"Traceback" not in p.stderr and b"internal error" not in p.stderr, p.stderr
    assert (wf.root / "TASKS.md").read_bytes() == before


# ------------------------------------------------------------------ long lines


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "line",
    [
        "Note: a" + " " * 200_000 + "b",
        "Note: " + " " * 200_000,
        "Done: x" + " \t" * 100_000 + "\r",
        "Status: blocked:" + " " * 200_000 + "x",
        "After: a," + " " * 200_000 + ",",
        "K" * 200_000 + ": v",
        "K" * 200_000,
        "After: " + "a," * 100_000,
        "Effort: " + "1" * 200_000 + "x",
        "Effort: " + "1." * 100_000,
        "Model: " + "a" * 200_000,
        "Prio: " + "1" * 200_000,
        "Lane: " + "a-" * 100_000,
        "Parent: " + "a" * 200_000,
        "Sessions: " + "owner " * 33_000,
        "Status: in progress" + " \t" * 100_000,
        "body " * 40_000,
        "## a" + " " * 200_000 + "x",
        "```" + " " * 200_000 + "x\n```" + " " * 200_000,
        "~~~x\n" + "~" * 100_000 + " " * 100_000,
        "   ##" + " " * 200_000,
    ],
)
def test_a_200000_character_field_line_parses_in_linear_time(wf: WfRunner, line: str) -> None:
    """Completes well inside the test's timeout (a backtracking regex took minutes)."""
    path = wf.root / "TASKS.md"
    path.write_text(f"# Tasks\n\n## a: A\nModel: haiku\n{line}\n\n## b: B\nModel: haiku\nDone: t\n")
    for _ in range(3):
        (wf.root / ".wf" / "cache").mkdir(exist_ok=True)
        for f in (wf.root / ".wf" / "cache").iterdir():
            f.unlink()
        assert wf("list").code == 0
    doc = taskfile.parse(path.read_bytes())
    assert [t.id for t in doc.tasks] == ["a", "b"]


@pytest.mark.timeout(60)
def test_a_note_of_200000_spaces_through_the_cli(wf: WfRunner) -> None:
    wf.ok("add", "Task", "--model", "haiku", "--done", "true")
    wf.ok("note", "task", "x" + " " * 200_000 + "y")
    (wf.root / ".wf" / "cache").mkdir(exist_ok=True)
    for f in (wf.root / ".wf" / "cache").iterdir():
        f.unlink()
    assert json.loads(wf.ok("list", "--runner", "--json"))[0]["id"] == "task"
    assert wf("check").code == 0


# ------------------------------------------------------------------ tolerant writes


def _commit_all(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


@pytest.fixture
def typo(wf: WfRunner) -> WfRunner:
    """Task a is fine; a person typed 'Prio: three' in task b (line 9)."""
    (wf.root / "TASKS.md").write_text(
        "# Tasks\n\n## a: Task a\nModel: sonnet\nDone: true\n\n## b: Task b\nModel: sonnet\nPrio: three\nDone: true\n"
    )
    _commit_all(wf.root, "tasks")
    return wf


def test_a_typo_in_one_task_does_not_stop_writes_to_another(typo: WfRunner) -> None:
    wf = typo
    r = wf("check")
    assert r.code == 1 and "TASKS.md:9: error: bad Prio 'three'" in r.out
    wf.ok("status", "a", "progress", "worker")
    wf.ok("note", "a", "going well")
    wf.ok("status", "a", "pending")
    wf.ok("set", "a", "-p", "1")
    wf.ok("add", "Another")
    # touching b is refused, naming b's line
    for args in (
        ("note", "b", "x"),
        ("status", "b", "progress", "me"),
        ("done", "b"),
        ("set", "b", "-p", "1"),
    ):
        r = wf(*args)
        lines = (wf.root / "TASKS.md").read_text().splitlines()
        at = lines.index("Prio: three") + 1
        assert r.code == 1 and f"TASKS.md:{at}: error: bad Prio 'three'" in r.err, args
    # b is not runner-ready, a is
    ready = [t["id"] for t in json.loads(wf.ok("list", "--runner", "--json"))]
    assert ready == ["a", "another"] or ready == ["a"] or "b" not in ready
    assert "b" not in ready and "a" in ready
    wf.ok("done", "a")
    assert "Prio: three" in (wf.root / "TASKS.md").read_text()
    assert " a lane=sonnet" in (wf.root / "DONE.md").read_text()


def test_wf_edit_can_fix_the_task_with_the_typo(typo: WfRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR", "sed -i s/three/1/")
    assert typo.ok("edit", "b").strip() == "b: edited"
    assert typo("check").code == 0
    assert "Prio: 1" in (typo.root / "TASKS.md").read_text()


def test_a_typo_in_one_task_does_not_stop_the_merge_of_another(typo: WfRunner) -> None:
    wf = typo
    rec = json.loads(wf.ok("wt", "add", "sonnet", "a", "--json"))
    wt = Path(rec["path"])
    (wt / "work.txt").write_text("done\n")
    _commit_all(wt, "work on a")
    r = wf("merge", "a")
    assert r.code == 0, r.err
    assert " a lane=sonnet" in (wf.root / "DONE.md").read_text()
    assert "## a: " not in (wf.root / "TASKS.md").read_text()
    assert "Prio: three" in (wf.root / "TASKS.md").read_text()
    assert git(wf.root, "status", "--porcelain") == ""


def test_an_unknown_after_id_names_the_after_line(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a: A\nModel: haiku\nDone: t\nAfter: ghost\n")
    r = wf("check")
    assert "TASKS.md:6: error: After names unknown id 'ghost'" in r.out


def test_a_lane_naming_a_missing_lane_is_not_runner_ready(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a: A\nModel: haiku\nLane: ghost\nDone: t\n")
    assert json.loads(wf.ok("list", "--runner", "--json")) == []
    shown = json.loads(wf.ok("show", "a", "--json"))
    assert shown["ready"] is False and any("ghost" in b for b in shown["blockers"])
    r = wf("check")
    assert r.code == 1 and "TASKS.md:5: error: no lane 'ghost'" in r.out


def test_the_list_cache_answer_changes_with_wf_toml(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a: A\nModel: haiku\nLane: fast\nDone: t\n")
    assert json.loads(wf.ok("list", "--runner", "--json")) == []
    assert json.loads(wf.ok("list", "--runner", "--json")) == []  # now cached
    toml = wf.root / "wf.toml"
    toml.write_text(toml.read_text() + '\n[lanes.fast]\nmodel = "haiku"\n')
    assert [t["id"] for t in json.loads(wf.ok("list", "--runner", "--json"))] == ["a"]


# ------------------------------------------------------------------ terminal safety

EVIL = "Evil\x1b[2K\x08\x08rewritten\x9b31m\u202etext\x07"


def test_task_text_is_shown_safely_and_carried_exactly_in_json(wf: WfRunner) -> None:
    task_id = wf.ok("add", EVIL, "--id", "evil", "--body", "body \x1b]0;title\x07 end").strip()
    assert task_id == "evil"
    wf.ok("note", "evil", "note \x1b[31mred")
    for args in (("list",), ("show", "evil"), ("ctx", "evil"), ("status", "evil", "blocked", "why\x1b[1m")):
        out = wf.ok(*args)
        assert "\x1b" not in out and "\r" not in out and "\x9b" not in out and "\u202e" not in out, args
        assert "\x07" not in out
    out = wf.ok("list")
    assert "Evil^[[2K^H^Hrewritten\\x9b31m\\u202etext^G" in out
    assert "body ^[]0;title^G end" in wf.ok("show", "evil")
    assert json.loads(wf.ok("list", "--json"))[0]["title"] == EVIL
    assert json.loads(wf.ok("show", "evil", "--json"))["notes"][0].endswith("note \x1b[31mred")
    out = wf.ok("done", "evil")
    assert "\x1b" not in out and "^[" in out
    assert "\x1b" not in wf.ok("log")
    r = wf("note", "evil", "x")  # an error message naming the id is safe too
    assert r.code == 1


def test_list_columns_stay_aligned_around_control_characters(wf: WfRunner) -> None:
    wf.ok("add", "Plain", "--id", "plain")
    wf.ok("add", "Other", "--id", "other")
    wf.ok("status", "plain", "progress", "w\x1b[1mho", "--force")
    wf.ok("status", "other", "progress", "me", "--force")
    rows = wf.ok("list").splitlines()
    assert "\x1b" not in "".join(rows)
    assert rows[0].index("Plain") == rows[1].index("Other"), rows


def test_an_error_quoting_a_hostile_value_is_safe(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## a: A\nStatus: \x1b[2Jgone\n")
    for args in (("check",), ("list",), ("note", "a", "x")):
        r = wf(*args)
        said = r.out + r.err
        assert "\x1b" not in said and ("^[[2Jgone" in said or "\\x1b[2Jgone" in said), args


def test_runs_status_and_output_are_safe(wf: WfRunner) -> None:
    unit = wf.root / ".wf" / "runs" / "r1" / "u1"
    unit.mkdir(parents=True)
    (unit / "status.json").write_text(
        json.dumps({"run": "r1", "unit": "u1", "state": "done", "adapter": "cmd", "exit_code": 0})
    )
    (unit / "output.txt").write_bytes(b"answer \x1b[2J\x1b[H\x00\xff\xfe\r\nline two\n")
    out = wf.ok("runs", "status", "r1")
    assert "\x1b" not in out and "\x00" not in out and "answer ^[[2J^[[H^@" in out
    out = wf.ok("runs", "output", "r1", "u1")
    assert "\x1b" not in out and "\x00" not in out and "\r" not in out
    assert out.startswith("answer ^[[2J^[[H^@\ufffd\ufffd\nline two\n")


def _run_units(wf: WfRunner, tmp_path: Path) -> None:
    """A real `wf run` of two units whose answers and logs hold escape sequences."""
    script = tmp_path / "evil.py"
    script.write_text(
        "import sys\n"
        "sys.stdout.write('answer \\x1b[2J\\x1b[H wiped \\x9b31m \\u202e rtl \\x07 bell\\n')\n"
        "sys.stderr.write('err \\x1b]0;title\\x07\\n')\n"
    )
    fail = tmp_path / "fail.py"
    fail.write_text("import sys\nsys.stderr.write('broke \\x1b[2J\\x1b]0;t\\x07\\n')\nsys.exit(3)\n")
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "defaults": {"adapter": "cmd"},
                "units": [
                    {"id": "u1", "prompt": "p", "cmd": [sys.executable, str(script)]},
                    {"id": "u2", "prompt": "p", "cmd": [sys.executable, str(fail)]},
                ],
            }
        )
    )
    r = wf.proc("run", str(manifest), "--run", "r1")
    assert r.code == 4, r.out + r.err
    assert "\x1b" not in r.out + r.err and "\x07" not in r.out + r.err


UNSAFE = ("\x1b", "\x07", "\x9b", "\u202e", "\x00")


@pytest.mark.slow
def test_every_runs_view_is_safe_and_json_carries_the_text(wf: WfRunner, tmp_path: Path) -> None:
    _run_units(wf, tmp_path)
    for args in (
        ("runs",),
        ("runs", "status", "r1"),
        ("runs", "output", "r1", "u1"),
        ("runs", "output", "r1", "u1", "--log"),
        ("runs", "output", "r1", "u2", "--log"),
        ("monitor", "r1", "--timeout", "5"),
        ("gather", "r1", "--timeout", "5"),
    ):
        r = wf.proc(*args)
        said = r.out + r.err
        assert not [c for c in UNSAFE if c in said], (args, said)
        if args[0] != "runs" or args[1:2] == ("status",) or args[3:] == ("u1",):
            assert "^[" in said, (args, said)
    for args in (("gather", "r1", "--json"), ("monitor", "r1", "--json"), ("runs", "status", "r1", "--json")):
        r = wf.proc(*args)
        assert not [c for c in UNSAFE if c in r.out], (args, r.out)
        json.loads(r.out)
    doc = json.loads(wf.proc("gather", "r1", "--json").out)
    u1 = next(u for u in doc["units"] if u["unit"] == "u1")
    assert u1["output"] == "answer \x1b[2J\x1b[H wiped \x9b31m \u202e rtl \x07 bell\n"


def test_the_usage_report_is_safe(wf: WfRunner) -> None:
    from wf.cost import costlog

    costlog.remember(wf.root)
    (wf.root / "out").mkdir(exist_ok=True)
    (wf.root / "out" / "wf-cost.log").write_text(
        "ts=2026-12-01T00:00:00Z project=repo lane=ev\x1b[2Jil model=m\x9b31m\u202e effort=- id=a "
        "done=1 turns=3 dur_s=5 usd=0.5 usd_rep=0.9 check=disagree\n"
    )
    for by in ("lane", "model"):
        r = wf.proc("usage", "--report", "--by", by)
        said = r.out + r.err
        assert r.code == 0, said
        assert not [c for c in UNSAFE if c in said], said
        assert "^[[2J" in said or "\\x9b31m" in said, said
    out = wf.proc("usage", "--report", "--json").out
    assert not [c for c in UNSAFE if c in out]
    assert json.loads(out)[0]["lane"] == "ev\x1b[2Jil"


def test_json_output_escapes_c1_and_bidi_controls_but_keeps_the_text(wf: WfRunner) -> None:
    title = "a\x9b31m\u202e\x7fb é"
    wf.ok("add", title, "--id", "t")
    out = wf.ok("list", "--json")
    assert "\x9b" not in out and "\u202e" not in out and "\x7f" not in out and "é" in out
    assert json.loads(out)[0]["title"] == title
