"""The everyday commands, end to end through the CLI entry point, against real files.

Golden outputs live in tests/golden/; set WF_UPDATE_GOLDEN=1 to rewrite them after an
intended change (and read the diff)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner

FIXTURES = Path(__file__).parent.parent / "fixtures" / "golden"
GOLDEN = Path(__file__).parent.parent / "golden"
UPDATE = bool(os.environ.get("WF_UPDATE_GOLDEN"))  # read before the sealed env clears WF_*


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, "utf-8")
    assert path.exists(), f"no golden file {path}; run with WF_UPDATE_GOLDEN=1"
    assert text == path.read_text("utf-8")


@pytest.fixture
def sample(wf: WfRunner) -> WfRunner:
    shutil.copy(FIXTURES / "TASKS.md", wf.root / "TASKS.md")
    shutil.copy(FIXTURES / "DONE.md", wf.root / "DONE.md")
    return wf


# ---------------------------------------------------------------- golden outputs


def test_list_golden(sample: WfRunner) -> None:
    golden("list.out", sample.ok("list"))
    golden("list-runner.out", sample.ok("list", "--runner"))


def test_show_golden(sample: WfRunner) -> None:
    golden("show-fetch-retry.out", sample.ok("show", "fetch-retry"))
    golden("show-release.out", sample.ok("show", "release"))
    golden("show-setup.out", sample.ok("show", "setup"))


def test_lanes_golden(sample: WfRunner) -> None:
    golden("lanes.out", sample.ok("lanes"))


def test_check_golden(sample: WfRunner) -> None:
    golden("check.out", sample.ok("check"))


def test_check_broken_golden(sample: WfRunner) -> None:
    shutil.copy(FIXTURES / "BROKEN.md", sample.root / "TASKS.md")
    r = sample("check")
    assert r.code == 1
    golden("check-broken.out", r.out)


# ---------------------------------------------------------------- behaviour


def test_runner_order_and_slice(sample: WfRunner) -> None:
    rows = json.loads(sample.ok("list", "--runner", "--json"))
    assert [r["id"] for r in rows] == ["http-client", "parser"]
    assert [r["slice"] for r in rows] == [False, True]
    out = sample.ok("list", "--runner")
    assert out.splitlines()[1].startswith("slice: parser")


def test_runner_list_is_capped(wf: WfRunner) -> None:
    lines = ["# Tasks\n"]
    for i in range(30):
        lines.append(f"\n## t{i}: Task {i}\nModel: haiku\nDone: true\n")
    (wf.root / "TASKS.md").write_text("".join(lines))
    out = wf.ok("list", "--runner").splitlines()
    assert len(out) == 21
    assert out[-1] == "... 10 more (--limit 0 shows all)"
    assert len(wf.ok("list", "--runner", "--limit", "0").splitlines()) == 30


def test_show_says_which_condition_fails(sample: WfRunner) -> None:
    rec = json.loads(sample.ok("show", "fetch-retry", "--json"))
    assert rec["ready"] is False
    assert rec["blockers"] == ["after http-client (not done)"]
    rec = json.loads(sample.ok("show", "bench", "--json"))
    assert rec["blockers"] == ["no Model"]
    rec = json.loads(sample.ok("show", "release", "--json"))
    assert rec["blockers"] == ["Sessions: owner (a person works it)"]


def test_after_becomes_ready_when_archived(sample: WfRunner) -> None:
    sample.ok("done", "http-client", "--commit", "abcdef1")
    rows = json.loads(sample.ok("list", "--runner", "--json"))
    assert [r["id"] for r in rows] == ["fetch-retry", "parser"]
    log = sample.ok("log", "-n", "1")
    assert " http-client lane=haiku model=haiku commit=abcdef1 -- Shared HTTP client with timeouts" in log


def test_add_prints_id_and_appends_only(wf: WfRunner) -> None:
    before = (wf.root / "TASKS.md").read_bytes()
    out = wf.ok("add", "Retry failed fetches!", "--model", "sonnet", "-p", "1", "--done", "pytest -k retry")
    assert out == "retry-failed-fetches\n"
    after = (wf.root / "TASKS.md").read_bytes()
    assert after.startswith(before)
    assert after[len(before) :] == (
        b"\n## retry-failed-fetches: Retry failed fetches!\nModel: sonnet\nPrio: 1\nDone: pytest -k retry\n"
    )
    # the same title again draws a fresh id
    assert wf.ok("add", "Retry failed fetches!") == "retry-failed-fetches-2\n"


def test_add_with_body_from_stdin(wf: WfRunner) -> None:
    r = wf.proc("add", "With body", "--id", "with-body", "--body", "-", input="line one\n\n- item\n")
    assert r.code == 0, r.err
    text = (wf.root / "TASKS.md").read_text()
    assert text.endswith("## with-body: With body\n\nline one\n\n- item\n")


def test_ids_are_never_reused(sample: WfRunner) -> None:
    r = sample("add", "Again", "--id", "setup")
    assert r.code == 1
    assert "already used in the archive" in r.err
    assert sample.ok("add", "Setup") == "setup-2\n"


def test_set_changes_one_line(sample: WfRunner) -> None:
    path = sample.root / "TASKS.md"
    before = path.read_text().splitlines(keepends=True)
    sample.ok("set", "fetch-retry", "-p", "0")
    after = path.read_text().splitlines(keepends=True)
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(diff) == 1 and after[diff[0]] == "Prio: 0\n"
    # adding a field inserts exactly one line; '' removes it again
    sample.ok("set", "http-client", "--effort", "3")
    assert len(path.read_text().splitlines()) == len(before) + 1
    sample.ok("set", "http-client", "--effort", "")
    assert path.read_text().splitlines(keepends=True) == after


def test_claim_has_one_winner_and_names_holder(sample: WfRunner) -> None:
    assert sample.ok("status", "http-client", "progress", "alice").startswith(
        "http-client: in progress: alice"
    )
    r = sample("status", "http-client", "progress", "bob")
    assert r.code == 1
    assert "already claimed by alice since" in r.err
    r = sample("status", "fetch-retry", "progress", "bob")
    assert r.code == 1 and "not runner-ready: after http-client" in r.err
    assert sample("status", "fetch-retry", "progress", "bob", "--force").code == 0
    sample.ok("status", "http-client", "pending")
    assert "Status" not in sample.ok("show", "http-client")


def test_status_needs_notes_and_known_states(sample: WfRunner) -> None:
    r = sample("status", "parser", "awaiting")
    assert r.code == 2 and "awaiting needs a NOTE" in r.err
    r = sample("status", "parser", "sleeping", "x")
    assert r.code == 2 and "'sleeping' is not one of" in r.err
    r = sample("status", "parser", "progress")
    assert r.code == 2 and "progress needs WHO" in r.err
    sample.ok("status", "parser", "blocked", "needs the API key")
    assert json.loads(sample.ok("show", "parser", "--json"))["status"] == "blocked: needs the API key"


def test_ctx_has_what_a_worker_needs(sample: WfRunner) -> None:
    sample.ok("done", "http-client")
    c = json.loads(sample.ok("ctx", "fetch-retry", "--json"))
    assert c["done"] == "`pytest tests/test_fetch.py -k retry` passes"
    assert c["branch"] == "sonnet/fetch-retry"
    assert c["main_tree"] == str(sample.root.resolve())
    assert len(c["after"]) == 1 and " http-client " in c["after"][0]
    assert "Retry 3 times with backoff." in c["text"]


def test_works_from_a_linked_worktree(sample: WfRunner) -> None:
    from tests.conftest import git

    wt = sample.root / ".worktrees" / "sonnet"
    git(sample.root, "worktree", "add", "-q", "--detach", str(wt))
    assert sample.ok("add", "From the worktree", cwd=wt) == "from-the-worktree\n"
    assert "from-the-worktree" in (sample.root / "TASKS.md").read_text()
    c = json.loads(sample.ok("ctx", "fetch-retry", "--json", cwd=wt))
    assert c["worktree"] == str(wt.resolve())


def test_config_edit_keeps_comments(wf: WfRunner) -> None:
    wf.ok("config", "lanes.sonnet.max_parallel", "2")
    text = (wf.root / "wf.toml").read_text()
    assert "# One lane per model by default" in text
    assert json.loads(wf.ok("config", "lanes.sonnet.max_parallel", "--json")) == 2
    r = wf("config", "isolation", "bogus")
    assert r.code == 1 and "isolation must be one of" in r.err
    assert "max_parallel = 2" in (wf.root / "wf.toml").read_text()


def test_no_wf_toml_means_defaults(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "TASKS.md").write_text("## a: A\nModel: opus\nDone: true\n")
    runner = WfRunner(repo, capsys)
    assert [r["lane"] for r in json.loads(runner.ok("lanes", "--json"))] == ["haiku", "sonnet", "opus"]
    assert runner.ok("list", "--runner").startswith("a  opus")


def test_init_is_idempotent(wf: WfRunner) -> None:
    out = wf.ok("init")
    assert "kept    wf.toml" in out and "kept    TASKS.md" in out
    assert (wf.root / ".gitignore").read_text().count(".worktrees/") == 1


# ---------------------------------------------------------------- bad input


BAD_CASES = {
    "malformed heading": ("## Just a heading\n", "level-2 heading is not a task"),
    "bad id": ("## Foo_Bar: x\nModel: haiku\nDone: t\n", "bad task id 'Foo_Bar'"),
    "duplicate id": ("## a: A\n\n## a: B\n", "duplicate id 'a' (first at line 1)"),
    "unclosed fence": ("```\n## a: A\n", "code fence is never closed"),
    "lone CR": ("# Tasks\r\r## a: A\rModel: haiku\r", "lone CR (\\r) line breaks hide"),
}

# An error inside one task: (file, message, the line it names). Only writes to that
# task are refused; the rest of the file stays writable.
TASK_CASES = {
    "unknown after": ("## a: A\nModel: haiku\nAfter: zzz\n", "After names unknown id 'zzz'", 3),
    "after cycle": ("## a: A\nAfter: b\n\n## b: B\nAfter: a\n", "After cycle: a -> b -> a", 2),
    "bad prio": ("## a: A\nPrio: 9\n", "bad Prio '9'", 2),
    "bad effort": ("## a: A\nEffort: lots\n", "bad Effort 'lots'", 2),
    "unknown status": ("## a: A\nStatus: sleeping\n", "unknown Status 'sleeping'", 2),
    "missing lane": ("## a: A\nModel: haiku\nLane: nowhere\nDone: t\n", "no lane 'nowhere'", 3),
    "lone CR in a note": ("## a: A\nNote: x\ry\n", "lone CR", 2),
}

WRITES_TO_A = (
    ("set", "a", "-p", "1"),
    ("status", "a", "blocked", "x"),
    ("note", "a", "hello"),
    ("done", "a"),
)


def test_an_id_repeated_in_after_is_reported_once(wf: WfRunner) -> None:
    """One message per wrong id, and one per cycle, however often After repeats it: a
    line of 100,000 repeats printed 200,000 errors."""
    (wf.root / "TASKS.md").write_text(
        "## a: A\nModel: haiku\nAfter: a, a, b, zz, zz, b\n\n## b: B\nModel: haiku\nAfter: a\nDone: t\n"
    )
    r = wf("check")
    assert r.code == 1
    errors = [line for line in r.out.splitlines() if ": error: " in line]
    assert errors == [
        "TASKS.md:3: error: task a is After itself",
        "TASKS.md:3: error: After names unknown id 'zz'",
        "TASKS.md:3: error: After cycle: a -> a",
        "TASKS.md:3: error: After cycle: a -> b -> a",
    ], r.out


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_structural_errors_refuse_every_write(wf: WfRunner, name: str) -> None:
    text, message = BAD_CASES[name]
    path = wf.root / "TASKS.md"
    path.write_bytes(text.encode())
    r = wf("check")
    assert r.code == 1 and message in r.out
    for args in (("add", "New task"), *WRITES_TO_A):
        r = wf(*args)
        assert r.code == 1, args
        assert "Traceback" not in r.err
        assert path.read_bytes() == text.encode()


@pytest.mark.parametrize("name", sorted(TASK_CASES))
def test_task_errors_refuse_only_writes_to_that_task(wf: WfRunner, name: str) -> None:
    text, message, line = TASK_CASES[name]
    path = wf.root / "TASKS.md"
    path.write_bytes(text.encode())
    r = wf("check")
    assert r.code == 1 and f"TASKS.md:{line}: error: {message}" in r.out
    for args in WRITES_TO_A:
        r = wf(*args)
        assert r.code == 1, args
        assert f"TASKS.md:{line}: error: {message}" in r.err and "refusing" in r.err
        assert "Traceback" not in r.err
        assert path.read_bytes() == text.encode()
    assert wf.ok("add", "New task").strip() == "new-task"
    assert path.read_bytes().startswith(text.encode())
    shown = json.loads(wf.ok("show", "a", "--json"))
    assert shown["ready"] is False


def test_not_utf8_is_a_clear_error(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    path.write_bytes(b"# Tasks\n\n## a: caf\xe9\n")
    r = wf.proc("check")
    assert r.code == 1
    assert "TASKS.md:3: error: not UTF-8 text (byte 0xe9)" in r.err
    assert "Traceback" not in r.err
    r = wf.proc("list")  # still lists what it can read, the error on stderr
    assert r.code == 0 and r.out.split()[0] == "a"
    assert "TASKS.md:3: error: not UTF-8 text (byte 0xe9)" in r.err
    assert wf("add", "x").code == 1
    assert path.read_bytes() == b"# Tasks\n\n## a: caf\xe9\n"


def test_list_on_broken_file_lists_what_it_can(sample: WfRunner) -> None:
    shutil.copy(FIXTURES / "BROKEN.md", sample.root / "TASKS.md")
    r = sample("list")
    assert r.code == 0
    ids = [line.split()[0] for line in r.out.splitlines()]
    assert ids == ["good", "dup", "prio", "orphan", "a", "b"]
    assert "TASKS.md:7: error: level-2 heading is not a task" in r.err
    assert "TASKS.md:14: error: duplicate id 'dup' (first at line 10)" in r.err


def test_unsafe_ids_and_lanes_are_rejected(wf: WfRunner) -> None:
    for bad in ("../x", "-x", "a..b", "x.lock", "A", "a/b", "a" * 49):
        r = wf("add", "T", "--id", bad)
        assert r.code == 1 and "bad task id" in r.err, bad
        r = wf("add", "T", "--lane", bad)
        assert r.code == 1 and "bad Lane" in r.err, bad
    (wf.root / "wf.toml").write_text('[lanes."../evil"]\nmodel = "x"\n')
    r = wf("lanes")
    assert r.code == 1 and "bad lane name '../evil'" in r.err
    (wf.root / "wf.toml").write_text('tasks = "../outside.md"\n')
    r = wf("list")
    assert r.code == 1 and "relative path inside the repository" in r.err


def test_usage_errors_exit_2(wf: WfRunner) -> None:
    assert wf("list", "--bogus").code == 2
    assert wf("add").code == 2
    assert wf("set", "x", "-p", "7").code == 2


def test_unknown_task(wf: WfRunner) -> None:
    r = wf("show", "nope")
    assert r.code == 1 and "no task 'nope'" in r.err


def test_outside_a_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner = WfRunner(tmp_path, capsys)
    r = runner("list")
    assert r.code == 1 and "not inside a wf project" in r.err


def test_help_teaches(wf: WfRunner) -> None:
    out = wf.ok("--help")
    assert "Runner-ready = pending" in out
    assert "wf status ID progress WHO" in wf.ok("status", "--help")


def test_cached_list_follows_every_change(sample: WfRunner) -> None:
    first = sample.ok("list", "--runner")
    assert sample.ok("list", "--runner") == first  # served from .wf/cache
    assert list((sample.root / ".wf" / "cache").glob("list.*.answer"))
    path = sample.root / "TASKS.md"
    path.write_text(path.read_text().replace("Model: opus", "Model: opus\nStatus: blocked: by hand"))
    assert "parser" not in sample.ok("list", "--runner")
    (sample.root / "wf.toml").write_text('[lanes.haiku]\nmodel = "haiku"\n')
    assert [r["id"] for r in json.loads(sample.ok("list", "--runner", "--json"))] == ["http-client"]


def _editor(tmp_path: Path, code: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text("import sys\npath = sys.argv[1]\ntext = open(path).read()\n" + code)
    return f"{sys.executable} {script}"


def test_edit_replaces_only_the_task(
    sample: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sample.root / "TASKS.md"
    before = path.read_text()
    monkeypatch.setenv(
        "EDITOR", _editor(tmp_path, "open(path, 'w').write(text.replace('backoff', 'jitter'))")
    )
    assert sample.ok("edit", "fetch-retry") == "fetch-retry: edited\n"
    assert path.read_text() == before.replace("Retry 3 times with backoff.", "Retry 3 times with jitter.")
    monkeypatch.setenv("EDITOR", _editor(tmp_path, "pass"))
    assert sample.ok("edit", "fetch-retry") == "fetch-retry: unchanged\n"


def test_edit_refuses_what_would_break_the_file(
    sample: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sample.root / "TASKS.md"
    before = path.read_text()
    for bad in (
        "text + '\\n```\\nopen fence\\n'",
        "text + '\\n## sneaky: Another task\\n'",
        "text.replace('fetch-retry:', 'other-id:')",
    ):
        monkeypatch.setenv("EDITOR", _editor(tmp_path, f"open(path, 'w').write({bad})"))
        r = sample("edit", "fetch-retry")
        assert r.code == 1 and "refusing an edit" in r.err, (bad, r.err)
        assert path.read_text() == before


def test_edit_keeps_the_draft_when_the_task_changed_meanwhile(
    sample: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (
        "import subprocess\n"
        f"subprocess.run([{sys.executable!r}, '-m', 'wf', '-C', {str(sample.root)!r}, 'set', 'fetch-retry', '-p', '0'], check=True)\n"
        "open(path, 'w').write(text + 'my words\\n')\n"
    )
    monkeypatch.setenv("EDITOR", _editor(tmp_path, code))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent.parent))
    r = sample("edit", "fetch-retry")
    assert r.code == 1 and "changed while you edited it" in r.err
    draft = sample.root / ".wf" / "edit" / "fetch-retry.md"
    assert draft.read_text().endswith("my words\n")
    assert "Prio: 0" in (sample.root / "TASKS.md").read_text()


def test_first_hour_answers(sample: WfRunner, tmp_path: Path) -> None:
    r = sample("config", "lanes.haiku.modle", "sonnet")
    assert r.code == 1 and "unknown setting 'lanes.haiku.modle'" in r.err
    assert "modle" not in (sample.root / "wf.toml").read_text()
    assert sample.ok("config", "gate", "pytest -q") == 'gate = "pytest -q"\n'
    line = sample.ok("done", "http-client")
    assert sample.ok("done", "http-client") == line  # done already: the same line, exit 0
    r = sample("list", "--lane", "nope")
    assert r.code == 1 and "no lane 'nope'" in r.err
    r = sample.__class__(tmp_path / "missing", sample.capsys)("list")
    assert r.code == 1 and "no such directory" in r.err
    r = sample("add", "Odd model", "--model", "gpt9")
    assert r.code == 0 and "no lane runs model 'gpt9'" in r.err
    (tmp_path / "notes.txt").write_text("just some notes\n")
    r = sample("usage", "--file", str(tmp_path / "notes.txt"))
    assert r.code == 1 and "not a transcript?" in r.err


def test_add_refuses_a_body_that_opens_a_fence_it_never_closes(sample: WfRunner) -> None:
    """Every task added after such a body would be hidden inside the fence."""
    path = sample.root / "TASKS.md"
    sample.ok("list")  # a warm parse cache must not change the verdict
    before = path.read_bytes()
    r = sample("add", "Fenced", "--body", "```\nsome code")
    assert r.code == 1 and "opens a code fence it never closes" in r.err, r.err
    assert path.read_bytes() == before
    assert sample("add", "Fenced", "--body", "```\nsome code\n```").code == 0
