"""What a new user ran into in a first week: inputs that ended in a traceback, cost
reports that did not say what they filtered, and rough edges of wf.toml and the CLI.
Each ends with a clear message and exit 1 (an expected error) or 2 (a usage error)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import WfRunner

# ------------------------------------------------------------------ no traceback


def test_merge_from_the_worktrees_folder_itself(wf: WfRunner) -> None:
    (wf.root / ".worktrees").mkdir(exist_ok=True)
    r = wf("merge", cwd=wf.root / ".worktrees")
    assert r.code == 1, r.err
    assert "give an ID or a <lane>/<id> branch" in r.err


def _task(wf: WfRunner) -> None:
    wf.ok("add", "Task a", "--id", "a")


def test_edit_with_an_editor_that_does_not_exist(wf: WfRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    _task(wf)
    before = (wf.root / "TASKS.md").read_bytes()
    monkeypatch.setenv("EDITOR", str(wf.root / "no-such-editor"))
    r = wf("edit", "a")
    assert r.code == 1, r.err
    assert "cannot start the editor" in r.err and "from $EDITOR" in r.err
    monkeypatch.setenv("VISUAL", "'unbalanced")
    r = wf("edit", "a")
    assert r.code == 1 and "$VISUAL is not a command line" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_edit_with_an_editor_that_saves_latin1(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _task(wf)
    before = (wf.root / "TASKS.md").read_bytes()
    script = tmp_path / "latin1-editor.py"
    script.write_text("import sys\nopen(sys.argv[1], 'ab').write('caf\\u00e9\\n'.encode('latin-1'))\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    r = wf("edit", "a")
    assert r.code == 1, r.err
    assert "another encoding than UTF-8 (byte 0xe9" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before


def test_wf_toml_that_is_not_utf8(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_bytes(b'gate = "caf\xe9"\n')
    for args in (("list",), ("config",), ("config", "gate", "x")):
        r = wf(*args)
        assert r.code == 1, (args, r.err)
        assert "wf.toml: not UTF-8 (byte 0xe9 at offset 11)" in r.err, (args, r.err)


# ------------------------------------------------------------------ the usage report


def _cost_line(project: Path, ts: str, name: str = "app") -> None:
    log = project / "out" / "wf-cost.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(
            f"ts={ts} project={name} id=t agent=a kind=subagent lane=sonnet model=m effort=- done=1 "
            "turns=1 dur_s=1 in=1 out=1 est=0 cw5m=0 cw1h=0 cr=0 usd=1.0000 usd_rep=1.0000\n"
        )


@pytest.fixture
def logged(wf: WfRunner) -> WfRunner:
    from wf.cost import costlog

    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        _cost_line(wf.root, f"{day}T10:00:00Z")
    costlog.remember(wf.root)
    return wf


def test_report_since_takes_only_the_documented_forms(logged: WfRunner) -> None:
    for bad in ("last week", "2026-13-01", "2026-3-1", "-7d", "7"):
        r = logged("usage", "--report", "--since", bad)
        assert r.code == 2, (bad, r.err)
        assert "YYYY-MM-DD, today, yesterday, or Nd" in r.err
    rows = json.loads(logged.ok("usage", "--report", "--json", "--since", "2026-03-02"))
    assert rows[0]["n"] == 2
    for word in ("today", "yesterday", "3d"):  # relative to now: none of the 2026-03 lines
        assert logged.ok("usage", "--report", "--since", word).startswith("no cost lines since 20")


def test_since_dates() -> None:
    from wf.cost import costlog

    now = 1_780_000_000.0  # 2026-05-28T20:26:40Z
    assert costlog.since_date("today", now) == "2026-05-28"
    assert costlog.since_date("Yesterday", now) == "2026-05-27"
    assert costlog.since_date("7d", now) == "2026-05-21"
    assert costlog.since_date("2026-02-28", now) == "2026-02-28"
    with pytest.raises(ValueError):
        costlog.since_date("2026-02-30", now)


def test_an_empty_report_says_what_it_filtered(logged: WfRunner) -> None:
    out = logged.ok("usage", "--report", "--since", "2030-01-01")
    assert (
        out
        == "no cost lines since 2030-01-01 (the logs have 3, from 2026-03-01 to 2026-03-03; projects: app)\n"
    )
    out = logged.ok("usage", "--report", "--project", "nosuch")
    assert out.startswith("no cost lines for project nosuch (the logs have 3,")
    r = logged("usage", "--since", "2026-01-01", "--file", "x")
    assert r.code == 2 and "--since and --project go with --report" in r.err


def test_no_log_at_all_is_still_no_cost_lines_yet(wf: WfRunner) -> None:
    assert wf.ok("usage", "--report", "--since", "2030-01-01").startswith("no cost lines yet")


def test_a_session_whose_subagent_ran_on_another_model_is_reported_per_model(
    wf: WfRunner, sealed_env: Path
) -> None:
    from tests.cost.test_usage import asst, tokens, user, write

    sonnet, opus = "claude-sonnet-4-5-20250929", "claude-opus-4-6"
    proj = sealed_env / ".claude" / "projects" / "-work-app"
    write(
        proj / "s1.jsonl",
        user("go", ts="2026-03-01T10:00:00.000Z"),
        asst(tokens(1_000_000, 0), mid="m1", rid="r1", model=sonnet, ts="2026-03-01T10:00:01.000Z"),
    )
    write(
        proj / "s1" / "subagents" / "agent-x1.jsonl",
        # unfinished: 3000 visible characters estimate 1000 output tokens ($0.025 on opus)
        asst(
            tokens(1_000_000, 0),
            mid="m2",
            rid="r2",
            model=opus,
            ts="2026-03-01T10:00:02.000Z",
            side=True,
            stop=None,
            content=[{"type": "text", "text": "x" * 3000}],
        ),
    )
    one = json.loads(wf.ok("usage", "--session", "s1", "--json", "--log", "--id", "t", "--lane", "sonnet"))
    # $3 of sonnet input, $5 of opus input (per million tokens), and the estimate
    assert one["models"] == f"{opus}:5.0250,{sonnet}:3.0000"
    assert (one["usd"], one["usd_rep"]) == (8.025, 8.0)
    text = wf.ok("usage", "--session", "s1")
    assert f"by model: {opus} 1 turns usd ~5.0250, {sonnet} 1 turns usd ~3.0000" in text
    [row] = json.loads(wf.ok("usage", "--report", "--json"))
    assert row["total_usd"] == 8.025 and row["models"] == {opus: 5.025, sonnet: 3.0}
    assert f"$ by model: {opus} ~5.03, {sonnet} ~3.00" in wf.ok("usage", "--report")
    # a single-model transcript has no breakdown
    write(proj / "s2.jsonl", asst(tokens(10, 1), model=sonnet))
    assert "models" not in json.loads(wf.ok("usage", "--session", "s2", "--json"))


CORPUS = os.environ.get("WF_CORPUS")


@pytest.mark.skipif(not CORPUS, reason="WF_CORPUS is not set")
def test_corpus_session_per_model_matches_the_reference(
    wf: WfRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wf.cost import usage

    assert CORPUS is not None
    data = json.loads((Path(CORPUS) / "expected.json").read_text("utf-8"))
    session = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    refs = {Path(k).stem: v["totalCost"] for k, v in data["claude"].items() if session in k}
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(Path(CORPUS) / "claude"))
    c = usage.claude_cost(usage.session_files(session))
    by = {m: (turns, rep) for m, turns, _, rep in c.by_model}
    assert set(by) == {"claude-opus-4-6", "claude-haiku-4-5-20251001", "claude-sonnet-4-5-20250929"}
    # the sonnet subagent is the only sonnet in the session: its share is ccusage's figure for it
    assert abs(by["claude-sonnet-4-5-20250929"][1] - refs["agent-aac57f5"]) < 1e-6
    # the shares add up to ccusage's figures for the three files, and to wf's total
    assert abs(sum(rep for _, rep in by.values()) - sum(refs.values())) < 1e-6
    assert sum(t for t, _ in by.values()) == c.turns
    assert abs(sum(usd for _, _, usd, _ in c.by_model) - c.usd) < 1e-9
    logged = json.loads(wf.ok("usage", "--session", session, "--json"))
    assert logged["models"].startswith("claude-opus-4-6:")


# ------------------------------------------------------------------ wf.toml and wf config


def test_config_shows_a_table_as_toml_lines(wf: WfRunner) -> None:
    out = wf.ok("config", "lanes.sonnet")
    assert out.splitlines()[:3] == [
        'lanes.sonnet.model = "sonnet"',
        'lanes.sonnet.adapter = "claude"',
        "lanes.sonnet.max_parallel = 1",
    ]
    assert "# lanes.sonnet.effort: not set" in out and "{" not in out and "(" not in out
    assert json.loads(wf.ok("config", "lanes.sonnet", "--json"))["allowed_tools"][0] == "Bash"


def test_main_empty_and_unset_are_the_same(wf: WfRunner) -> None:
    toml = wf.root / "wf.toml"
    assert wf.ok("config", "main") == "# main: not set\n"
    toml.write_text('main = ""\n' + toml.read_text())
    assert wf.ok("config", "main") == "# main: not set\n"
    assert wf.ok("config", "main", "") == "# main: not set\n"
    assert not any(ln.startswith("main") for ln in toml.read_text().splitlines())
    r = wf("config", "main", "null")
    assert r.code == 1 and "TOML has no null: to remove main, run wf config --unset main" in r.err
    assert wf.ok("config", "main", "trunk") == 'main = "trunk"\n'
    assert wf.ok("config", "--unset", "main") == "main: back to its default\n"


def test_a_cmd_lane_can_be_set_before_its_cmd(wf: WfRunner) -> None:
    r = wf("config", "lanes.sonnet.adapter", "cmd")
    assert r.code == 0, r.err
    assert "the lane cannot run until it is set: wf config lanes.sonnet.cmd" in r.err
    assert "adapter cmd has no cmd yet" in wf("check").out
    r = wf("config", "lanes.sonnet.cmd", '["python3", "-c", "pass"]')
    assert r.code == 0 and r.err == ""


def test_a_lane_can_be_removed(wf: WfRunner) -> None:
    assert wf.ok("config", "--unset", "lanes.haiku") == "removed lanes.haiku\n"
    assert "[lanes.haiku]" not in (wf.root / "wf.toml").read_text()
    assert [r["lane"] for r in json.loads(wf.ok("lanes", "--json"))] == ["sonnet", "opus"]
    assert wf("config", "--unset", "lanes.haiku").code == 1
    wf.ok("config", "--unset", "lanes.opus")
    r = wf("config", "--unset", "lanes.sonnet")
    assert r.code == 1 and "the last lane" in r.err
    r = wf("config", "--unset")
    assert r.code == 2


def test_removing_a_default_lane_keeps_the_others(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text("# no lanes here: the defaults\n")
    wf.ok("config", "--unset", "lanes.opus")
    assert [r["lane"] for r in json.loads(wf.ok("lanes", "--json"))] == ["haiku", "sonnet"]
    assert (wf.root / "wf.toml").read_text().startswith("# no lanes here: the defaults\n")


def test_type_errors_read_as_english(wf: WfRunner) -> None:
    for key, value, want in (
        ("slice_above", "x", 'slice_above must be a number, not "x"'),
        ("lock_timeout", "true", "lock_timeout must be a number, not true"),  # TOML, not Python
        ("backup_days", "[1, 2]", "backup_days must be a number, not [1, 2]"),
        ("cloud", "3", "cloud must be true or false, not 3"),
        ("gate", "3", "gate must be a string, not 3"),
    ):
        r = wf("config", key, value)
        assert r.code == 1 and want in r.err, r.err


# ------------------------------------------------------------------ tasks and runs


def test_show_names_the_bad_field_and_its_line(wf: WfRunner) -> None:
    with open(wf.root / "TASKS.md", "a") as f:
        f.write("\n## z: Bad one\nModel: sonnet\nDone: true\nPrio: 9\n")
    line = (wf.root / "TASKS.md").read_text().splitlines().index("Prio: 9") + 1
    out = wf.ok("show", "z")
    assert f"TASKS.md:{line}: error: bad Prio '9'" in out
    assert json.loads(wf.ok("show", "z", "--json"))["errors"] == [
        f"TASKS.md:{line}: error: bad Prio '9': expected 0, 1, 2 or 3 (0 is most urgent)"
    ]


def test_duplicate_long_titles_get_ids_cut_at_a_word(wf: WfRunner) -> None:
    title = "Refactor the configuration loader to support multiple profiles and environments"
    assert wf.ok("add", title) == "refactor-the-configuration-loader\n"
    assert wf.ok("add", title) == "refactor-the-configuration-loader-2\n"
    from wf.tasks.ops import _fresh_id

    long_id = "a" * 20 + "-" + "b" * 27  # 48 characters: the suffix needs room, taken at a word
    assert _fresh_id(long_id, {long_id}) == "a" * 20 + "-2"


def test_bad_effort_is_a_usage_error_like_a_bad_prio(wf: WfRunner) -> None:
    for args in (("add", "x", "--effort", "abc"), ("add", "x", "--effort", "0"), ("add", "x", "-p", "9")):
        r = wf(*args)
        assert r.code == 2, (args, r.err)
    assert "expected a positive number, not 'abc'" in wf("add", "x", "--effort", "abc").err
    wf.ok("add", "Task a", "--id", "a", "--effort", "2.5")
    wf.ok("set", "a", "--effort", "")
    assert "Effort" not in wf.ok("show", "a")


def test_run_with_no_units_is_a_usage_error(wf: WfRunner, tmp_path: Path) -> None:
    m = tmp_path / "empty.json"
    m.write_text('{"units": []}')
    r = wf("run", str(m))
    assert r.code == 2 and "has no units" in r.err
    assert not (wf.root / ".wf" / "runs").exists()


def test_show_lists_only_its_own_errors(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").write_text("# T\n\n## a: A\nPrio: 9\n## b: B\nModel: sonnet\n")
    assert "bad Prio" not in wf.ok("show", "b")
    assert "TASKS.md:4: error: bad Prio '9'" in wf.ok("show", "a")


# ------------------------------------------------------------------ the promises of docs/tasks-format.md


def test_list_still_lists_a_file_with_a_byte_that_is_not_utf8(wf: WfRunner) -> None:
    wf.ok("add", "Task a", "--id", "a")
    wf.ok("add", "Task b", "--id", "b")
    path = wf.root / "TASKS.md"
    data = path.read_bytes().replace(b"## a: Task a\n", b"## a: Task a\ncaf\xe9 notes\n")
    path.write_bytes(data)
    line = data.split(b"\n").index(b"caf\xe9 notes") + 1
    r = wf("list")
    assert r.code == 0, r.err
    assert [row.split()[0] for row in r.out.splitlines()] == ["a", "b"]
    assert f"TASKS.md:{line}: error: not UTF-8 text (byte 0xe9)" in r.err
    assert [t["id"] for t in json.loads(wf.ok("list", "--json"))] == ["a", "b"]
    # reading past the byte never lets a write through: the file is refused as before
    r = wf("set", "b", "-p", "1")
    assert r.code == 1 and "not UTF-8" in r.err
    assert path.read_bytes() == data
    assert wf("check").code == 1


def test_list_prints_errors_across_files_on_stderr(wf: WfRunner) -> None:
    wf.ok("add", "Task a", "--id", "a")
    with open(wf.root / "DONE.md", "a") as f:
        f.write("- 2026-01-01T00:00Z a lane=sonnet model=sonnet commit=- -- Task a\n")
    with open(wf.root / "TASKS.md", "a") as f:
        f.write("\n## b: Task b\nAfter: nosuch\n")
    r = wf("list")
    assert r.code == 0 and [row.split()[0] for row in r.out.splitlines()] == ["a", "b"]
    assert "id 'a' is already in the archive (DONE.md:" in r.err
    assert "After names unknown id 'nosuch'" in r.err
    # an archive that is not UTF-8: listed all the same, its error named
    with open(wf.root / "DONE.md", "ab") as f:
        f.write(b"- caf\xe9\n")
    r = wf("list")
    assert r.code == 0 and len(r.out.splitlines()) == 2
    assert "DONE.md:" in r.err and "not UTF-8 text (byte 0xe9)" in r.err


def _script_editor(tmp_path: Path, name: str, code: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text("import sys\npath = sys.argv[1]\ntext = open(path, encoding='utf-8').read()\n" + code)
    return f"{sys.executable} {script}"


def test_a_refused_edit_keeps_its_draft_and_the_next_edit_reopens_it(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf.ok("add", "Task a", "--id", "a", "--model", "sonnet")
    path = wf.root / "TASKS.md"
    before = path.read_bytes()
    draft = wf.root / ".wf" / "edit" / "a.md"
    bad = "open(path, 'w').write(text + 'Prio: 9\\nmy precious words\\n')\n"
    monkeypatch.setenv("EDITOR", _script_editor(tmp_path, "bad", bad))
    r = wf("edit", "a")
    assert r.code == 1, r.err
    # the refusal names the draft's own line, not a line of TASKS.md
    assert ".wf/edit/a.md:3: error: bad Prio '9'" in r.err
    assert "TASKS.md:" not in r.err and "kept in .wf/edit/a.md (wf edit a reopens it)" in r.err
    assert path.read_bytes() == before
    kept = draft.read_text()
    assert kept.endswith("Prio: 9\nmy precious words\n")
    # an editor that only looks (saves nothing): the draft stays, the task too
    monkeypatch.setenv("EDITOR", _script_editor(tmp_path, "look", "assert 'precious' in text\n"))
    r = wf("edit", "a")
    assert r.code == 0 and "reopening your kept draft" in r.err and "your draft stays" in r.out
    assert draft.read_text() == kept and path.read_bytes() == before
    # saving the kept draft as it is applies it (here it is still refused, and still kept)
    monkeypatch.setenv("EDITOR", _script_editor(tmp_path, "same", "open(path, 'w').write(text)\n"))
    r = wf("edit", "a")
    assert r.code == 1 and "bad Prio '9'" in r.err and draft.read_text() == kept
    # the next edit starts from the kept draft, and a fixed draft replaces the task
    fix = "assert 'precious' in text\nopen(path, 'w').write(text.replace('Prio: 9', 'Prio: 1'))\n"
    monkeypatch.setenv("EDITOR", _script_editor(tmp_path, "fix", fix))
    assert wf.ok("edit", "a") == "a: edited\n"
    assert not draft.exists()
    assert "Prio: 1\nmy precious words\n" in path.read_text()


def test_an_edit_that_adds_a_heading_names_the_draft(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf.ok("add", "Task a", "--id", "a")
    before = (wf.root / "TASKS.md").read_bytes()
    code = "open(path, 'w').write(text + '## b: Sneaked in\\n')\n"
    monkeypatch.setenv("EDITOR", _script_editor(tmp_path, "two", code))
    r = wf("edit", "a")
    assert r.code == 1 and ".wf/edit/a.md must hold exactly the task" in r.err and "found a, b" in r.err
    assert (wf.root / "TASKS.md").read_bytes() == before
    assert "## b: Sneaked in" in (wf.root / ".wf" / "edit" / "a.md").read_text()


def test_wf_add_inside_a_clone_unit_writes_the_main_checkouts_tasks(wf: WfRunner) -> None:

    from tests.conftest import git

    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    add = f"{sys.executable} -m wf add 'Found by a unit' --id found"
    r = wf.proc("dispatch", "r1", "u1", "--clone", "--adapter", "cmd", "--cmd", add, "--prompt", "go")
    assert r.code == 0, r.err
    clone = wf.root / ".wf" / "runs" / "r1" / "u1" / "clone"
    assert (clone / ".git").is_dir()
    assert "## found: Found by a unit" in (wf.root / "TASKS.md").read_text()
    assert "found" not in (clone / "TASKS.md").read_text()
    # and every other command run there acts on the main checkout too
    out = wfproc.run(
        [sys.executable, "-m", "wf", "show", "found"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    assert "TASKS.md:" in out and "Found by a unit" in out


def test_for_reads_a_duration_the_same_way_in_orch_run_and_batch(wf: WfRunner) -> None:
    """One duration reader: `--for 1H` means an hour to `wf orch run` as it does to
    `wf batch` (it once was a usage error for one and an hour for the other)."""
    r = wf("orch", "run", "sonnet", "--for", "1H")
    assert r.code != 2 and "--for" not in r.err, r.err
    r = wf("orch", "run", "sonnet", "--for", "soon")
    assert r.code == 2 and "--for 'soon': expected a duration such as 90s, 20m or 6h" in r.err
