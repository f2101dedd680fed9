"""Panels (issue 23, item 3): ``wf run --panel claude,codex PROMPT`` (or manifest units
sharing a ``panel`` key) asks one question of several tools; ``wf gather RUN --compare``
lines their answers up section by section, marks each agree, differ or missing, and says
so in ``--json``. The real claude and codex play a panel against the scripted model API
(skipped without WF_REAL_TOOLS); ``cmd`` units play the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.model_api import ModelApi, Request, Step, Text
from tests.workers.test_workers import Workers, manifest

QUESTION = "Is the parser safe on empty input?"

# The answer program of the cmd units: its unit (the folder wf gives it, a retry's
# suffix cut) picks its answer from $ANSWERS; an answer of null fails, a unit named in
# $FAIL_ONCE fails its first attempt only, one in $FAIL_AFTER writes its answer (to
# $WF_OUTPUT_FILE) and then fails.
ANSWER_PY = """
import json, os, re, sys
unit = re.sub(r"-r[0-9]+$", "", os.path.basename(os.environ["WF_RUN_DIR"]))
marker = os.path.join(os.environ["MARKS"], unit)
if unit in os.environ.get("FAIL_ONCE", "").split(",") and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit("first attempt fails")
answer = json.loads(os.environ["ANSWERS"])[unit]
if answer is None:
    sys.exit("no answer")
if unit in os.environ.get("FAIL_AFTER", "").split(","):
    open(os.environ["WF_OUTPUT_FILE"], "w").write(answer)
    sys.exit("failed after its answer")
print(answer)
"""


def result(
    conclusion: str, files: str, open_items: str = "none", verification: str = "Read the code."
) -> str:
    return (
        f"I looked at it.\n\n# result\nConclusion: {conclusion}\nFiles: {files}\n"
        f"Open items: {open_items}\nVerification: {verification}\n"
    )


SAFE = result("No issues found; the parser is safe.", "src/parse.py, src/lex.py")
UNSAFE = result("Unsafe: the parser fails on empty input.", "- `./src/parse.py`")


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    workers = Workers(wf.root, tmp_path)
    (tmp_path / "answer.py").write_text(ANSWER_PY)
    (tmp_path / "marks").mkdir()
    workers.env["MARKS"] = str(tmp_path / "marks")
    return workers


def answer_cmd(tmp_path: Path) -> str:
    return f"{sys.executable} {tmp_path / 'answer.py'}"


def run_cmd_panel(
    w: Workers, tmp_path: Path, run: str, answers: dict[str, str | None], **env: str
) -> subprocess.CompletedProcess[str]:
    """wf run --panel cmd,cmd: units cmd and cmd-2 answer as ``answers`` says."""
    return w.run("run", "--panel", "cmd,cmd", QUESTION, "--cmd", answer_cmd(tmp_path), "--run", run,
                 timeout=60, ANSWERS=json.dumps(answers), **env)  # fmt: skip


def compare(w: Workers, run: str, *more: str) -> tuple[int, dict[str, Any]]:
    r = w.run("gather", run, "--compare", "--json", "--quiet", "0", *more)
    assert r.stderr == "", r.stderr
    return r.returncode, json.loads(r.stdout)


def sections(panel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["section"]: s for s in panel["sections"]}


# ------------------------------------------------------------------ wf run --panel


def test_a_panel_asks_every_tool_the_same_question_and_groups_its_units(w: Workers, tmp_path: Path) -> None:
    r = run_cmd_panel(w, tmp_path, "p1", {"cmd": SAFE, "cmd-2": UNSAFE})
    assert r.returncode == 0, r.stdout + r.stderr
    for unit in ("cmd", "cmd-2"):
        st = w.status("p1", unit)
        assert (st["panel"], st["adapter"], st["state"]) == ("panel", "cmd", "done"), st
        assert (w.unit("p1", unit) / "prompt.txt").read_text().startswith(QUESTION)
    assert (w.unit("p1", "cmd") / "prompt.txt").read_text() == (
        w.unit("p1", "cmd-2") / "prompt.txt"
    ).read_text()
    saved = json.loads((w.root / ".wf" / "runs" / "p1" / "manifest.json").read_text())
    assert [(u["id"], u["panel"]) for u in saved] == [("cmd", "panel"), ("cmd-2", "panel")]


def test_a_panel_of_tools_names_units_by_tool_and_gives_each_its_model(w: Workers) -> None:
    """The fake claude and codex: a repeated tool gets -2; tool:model asks for that model."""
    r = w.run("run", "--panel", "claude:haiku,codex,claude", "--prompt", QUESTION, "--run", "p2")
    assert r.returncode == 0, r.stdout + r.stderr
    units = sorted(p.name for p in (w.root / ".wf" / "runs" / "p2").iterdir() if p.is_dir())
    assert units == ["claude", "claude-2", "codex"]
    assert [w.status("p2", u)["adapter"] for u in units] == ["claude", "claude", "codex"]
    assert "haiku" in w.status("p2", "claude")["model"]
    assert "haiku" not in w.status("p2", "claude-2")["model"]
    assert {w.status("p2", u)["panel"] for u in units} == {"panel"}


def test_a_panel_prompt_comes_from_a_file_or_stdin_once(w: Workers, tmp_path: Path) -> None:
    (tmp_path / "q.md").write_text(QUESTION + "\n")
    answers = json.dumps({"cmd": SAFE, "cmd-2": SAFE})
    r = w.run("run", "--panel", "cmd,cmd", "--prompt-file", str(tmp_path / "q.md"), "--cmd", answer_cmd(tmp_path),
              "--run", "p3", ANSWERS=answers)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (w.unit("p3", "cmd-2") / "prompt.txt").read_text().startswith(QUESTION + "\n")
    argv = [sys.executable, "-m", "wf", "run", "--panel", "cmd,cmd", "--prompt-file", "-", "--cmd", "true"]
    piped = wfproc.run([*argv, "--run", "p3s", "--json"], cwd=w.root, env=w.env, input=QUESTION,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert [u["unit"] for u in json.loads(piped.stdout)["units"]] == ["cmd", "cmd-2"]
    assert (w.unit("p3s", "cmd") / "prompt.txt").read_text().startswith(QUESTION)
    both = w.run("run", "--panel", "cmd,cmd", QUESTION, "--prompt", QUESTION, "--cmd", "true")
    assert (
        both.returncode == 2 and "give exactly one of --prompt TEXT, --prompt-file F, a PROMPT" in both.stderr
    )
    empty = w.run("run", "--panel", "cmd,cmd", "--prompt", "  ", "--cmd", "true")
    assert empty.returncode == 2 and "--panel: the prompt is empty" in empty.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--panel", "claude,gemini", QUESTION],
            "unknown tool 'gemini' (in 'claude,gemini'); give tools of claude",
        ),
        (["--panel", "auto,claude", QUESTION], "unknown tool 'auto'"),
        (["--panel", "claude", QUESTION], "a panel needs two tools or more"),
        (["--panel", "claude:,codex", QUESTION], "'claude:' names no model after the colon"),
        (
            ["--panel", "claude,codex", QUESTION, "--clone", "--cwd", "."],
            "--cwd and --clone exclude each other",
        ),
        (["--panel", "claude,codex"], "give exactly one of --prompt TEXT"),
        (["--prompt", QUESTION], "--prompt: only with --panel"),
        (["m.json", "--clone"], "--clone: only with --panel"),
        ([], "Missing argument 'MANIFEST' (or --panel TOOLS with a PROMPT)"),
        (["--templates", "--panel", "claude,codex"], "--templates and --panel exclude each other"),
    ],
)
def test_a_bad_panel_command_line_is_a_usage_error(w: Workers, args: list[str], words: str) -> None:
    r = w.run("run", *args, "--run", "bad")
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr
    assert not (w.root / ".wf" / "runs" / "bad").exists()


def test_a_panel_tool_that_is_not_installed_runs_nothing(w: Workers) -> None:
    r = w.run("run", "--panel", "claude,opencode", QUESTION, "--run", "p4", PATH="/usr/bin:/bin")
    assert r.returncode == 1 and "claude is not installed" in r.stderr, r.stderr
    assert not (w.root / ".wf" / "runs" / "p4").exists() or not any(
        (w.root / ".wf" / "runs" / "p4").iterdir()
    )


def test_a_manifest_with_units_that_are_not_a_panel_is_unchanged(w: Workers, tmp_path: Path) -> None:
    m = manifest(tmp_path / "m.json", [{"id": "a", "prompt": "x", "cmd": ["echo", "A"]}], adapter="cmd")
    r = w.run("run", str(m), "--run", "plain")
    assert r.returncode == 0, r.stderr
    assert "panel" not in w.status("plain", "a")
    g = w.run("gather", "plain", "--compare", "--quiet", "0")
    assert g.returncode == 1 and "run plain has no panel to compare" in g.stderr
    u = w.run("gather", "plain", "a", "--compare")
    assert u.returncode == 2 and "--compare compares whole panels: name no UNITs" in u.stderr


# ------------------------------------------------------------------ the manifest form


def test_manifest_units_sharing_a_panel_key_are_compared_together(w: Workers, tmp_path: Path) -> None:
    """Two panels and a unit of none in one manifest; cmd units with different commands."""
    say = "import sys; print(sys.argv[1])"
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "safe", "panel": "q1", "cmd": [sys.executable, "-c", say, SAFE]},
            {"id": "unsafe", "panel": "q1", "cmd": [sys.executable, "-c", say, UNSAFE]},
            {"id": "one", "panel": "q2", "cmd": [sys.executable, "-c", say, SAFE]},
            {"id": "two", "panel": "q2", "cmd": [sys.executable, "-c", say, SAFE.replace("src/parse.py", "./src/parse.py")]},
            {"id": "alone", "prompt": "something else", "cmd": ["echo", "A"]},
        ],
        adapter="cmd",
        prompt=QUESTION,
    )  # fmt: skip
    assert w.run("run", str(m), "--run", "mq").returncode == 0
    assert w.status("mq", "safe")["panel"] == "q1" and "panel" not in w.status("mq", "alone")
    code, data = compare(w, "mq")
    assert code == 4 and data["agree"] is False
    q1, q2 = data["panels"]
    assert (q1["panel"], q1["units"], q1["agree"]) == ("q1", ["safe", "unsafe"], False)
    assert (q2["panel"], q2["units"], q2["agree"]) == ("q2", ["one", "two"], True)
    assert all(s["mark"] == "agree" for s in q2["sections"])


@pytest.mark.parametrize(
    ("units", "words"),
    [
        ([{"id": "a", "panel": "q1"}], "panel q1 has one unit (a); a panel needs two or more"),
        (
            [{"id": "a", "panel": "q1"}, {"id": "b", "panel": "q1", "prompt": "another question"}],
            "panel q1: b asked another question than a; every unit of a panel gets the same prompt",
        ),
        ([{"id": "a", "panel": "../q1"}, {"id": "b", "panel": "../q1"}], "unit a: bad panel id '../q1'"),
        ([{"id": "a", "panel": ""}, {"id": "b", "panel": ""}], "unit a: panel must be a non-empty string"),
    ],
)
def test_a_bad_panel_in_a_manifest_is_refused_before_anything_runs(
    w: Workers, tmp_path: Path, units: list[dict[str, Any]], words: str
) -> None:
    m = manifest(
        tmp_path / "m.json", [{"cmd": ["echo", "A"], **u} for u in units], adapter="cmd", prompt=QUESTION
    )
    r = w.run("run", str(m), "--run", "bad")
    assert r.returncode == 1 and words in r.stderr, r.stderr
    assert not (w.root / ".wf" / "runs" / "bad").exists() or not any(
        (w.root / ".wf" / "runs" / "bad").iterdir()
    )


# ------------------------------------------------------------------ wf gather --compare


def test_compare_shows_an_injected_disagreement(w: Workers, tmp_path: Path) -> None:
    """One names a file the other does not; their conclusions are opposite; the rest agree."""
    assert run_cmd_panel(w, tmp_path, "d1", {"cmd": SAFE, "cmd-2": UNSAFE}).returncode == 0
    r = w.run("gather", "d1", "--compare", "--quiet", "0")
    assert r.returncode == 4, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("panel panel of run d1"))) :]
    assert table[0] == "panel panel of run d1: cmd (done), cmd-2 (done)"
    assert table[1].split() == ["SECTION", "MARK", "CMD", "CMD-2"]
    assert table[2].split()[:2] == ["Conclusion", "differ"]
    assert (
        "No issues found; the parser is ..." in table[2] and "Unsafe: the parser fails on emp..." in table[2]
    )
    assert table[3].strip() == "opposite verdicts: cmd yes, cmd-2 no"
    assert table[4].split() == ["Files", "differ", "src/lex.py,", "src/parse.py", "src/parse.py"]
    assert table[5].strip() == "only cmd: src/lex.py"
    assert table[6].split() == ["Open", "items", "agree", "none", "none"]
    assert table[7].split()[:2] == ["Verification", "agree"]
    assert table[8] == (
        "panel panel: 2 of 4 sections differ or are missing (Conclusion, Files); read them: wf runs output d1 UNIT"
    )
    code, data = compare(w, "d1")
    assert code == 4 and (data["run"], data["code"], data["agree"]) == ("d1", 4, False)
    [panel] = data["panels"]
    assert (panel["panel"], panel["units"], panel["agree"]) == ("panel", ["cmd", "cmd-2"], False)
    rows = sections(panel)
    assert list(rows) == ["Conclusion", "Files", "Open items", "Verification"]
    assert (rows["Conclusion"]["mark"], rows["Conclusion"]["why"]) == ("differ", "opposite verdicts")
    assert rows["Conclusion"]["verdicts"] == {"cmd": "yes", "cmd-2": "no"}
    assert rows["Conclusion"]["answers"] == {
        "cmd": "No issues found; the parser is safe.",
        "cmd-2": "Unsafe: the parser fails on empty input.",
    }
    assert (rows["Files"]["mark"], rows["Files"]["why"]) == ("differ", "different files")
    assert rows["Files"]["only_in"] == {"cmd": ["src/lex.py"]}
    assert rows["Files"]["files"] == {"cmd": ["src/lex.py", "src/parse.py"], "cmd-2": ["src/parse.py"]}
    assert [(rows[s]["mark"], rows[s]["why"]) for s in ("Open items", "Verification")] == [
        ("agree", "same text")
    ] * 2


def test_the_same_verdict_in_other_words_is_no_agree(w: Workers, tmp_path: Path) -> None:
    """Files in other notations agree; texts that only sound alike differ (``different
    text``: a person reads them), their stances shown; the same text agrees."""
    one = result("No issues: the parser is safe.", "- `./src/parse.py:12`\n- src/lex.py", "None.",
                 "Ran pytest: 12 passed")  # fmt: skip
    two = result("Yes, it is safe; empty input returns an empty tree.", "I read src/lex.py and src/parse.py:40", "n/a",
                 "pytest tests/ -q: all pass")  # fmt: skip
    assert run_cmd_panel(w, tmp_path, "a1", {"cmd": one, "cmd-2": two}).returncode == 0
    code, data = compare(w, "a1")
    assert code == 4 and data["agree"] is False, data
    rows = sections(data["panels"][0])
    assert [(s, r["mark"], r["why"]) for s, r in rows.items()] == [
        ("Conclusion", "differ", "different text"),
        ("Files", "agree", "same files"),
        ("Open items", "agree", "same text"),
        ("Verification", "differ", "different text"),
    ]
    assert rows["Conclusion"]["verdicts"] == {"cmd": "yes", "cmd-2": "yes"}
    assert (
        run_cmd_panel(w, tmp_path, "a2", {"cmd": one, "cmd-2": one.replace("safe.", "SAFE")}).returncode == 0
    )
    text = w.run("gather", "a2", "--compare", "--quiet", "0")
    assert text.returncode == 0 and text.stdout.splitlines()[-1] == "panel panel: all 4 sections agree"


def say(answer: str) -> list[str]:
    return [sys.executable, "-c", "import sys; print(sys.argv[1])", answer]


# a yes and a no the word heuristic once read as two yeses (or a no as a yes)
OPPOSITES = [
    ("The parser is safe on empty input.", "The parser isn't safe on empty input."),
    ("It is safe.", "It is never safe."),
    ("The cache is thread-safe.", "The cache is not thread-safe."),
    ("Safe? Yes.", "Safe? No."),
    ("It does not fail on empty input.", "It fails on empty input."),
]


def test_opposite_answers_in_negated_words_differ_and_never_agree(w: Workers, tmp_path: Path) -> None:
    units = [
        {"id": f"{side}{n}", "panel": f"q{n}", "cmd": say(result(text, "none"))}
        for n, pair in enumerate(OPPOSITES)
        for side, text in zip("yn", pair, strict=True)
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", prompt=QUESTION)
    assert w.run("run", str(m), "--run", "o1").returncode == 0
    code, data = compare(w, "o1")
    assert code == 4 and data["agree"] is False
    for n, panel in enumerate(data["panels"]):
        row = sections(panel)["Conclusion"]
        assert (panel["panel"], row["mark"], row["why"]) == (f"q{n}", "differ", "opposite verdicts"), row
        assert row["verdicts"] == {f"y{n}": "yes", f"n{n}": "no"}, row
    text = w.run("gather", "o1", "--compare", "--quiet", "0")
    assert text.returncode == 4 and "opposite verdicts: y0 yes, n0 no" in text.stdout


def test_verdict_lines_that_match_agree_and_one_of_its_own_is_a_row(w: Workers, tmp_path: Path) -> None:
    """A ``Verdict:`` line in a section: the same stated verdict agrees, whatever the
    words around it; a ``Verdict:`` line of its own is a row after the contract's."""
    one = result("Verdict: pass\nIt looks fine.", "none") + "Verdict: yes\n"
    two = result("Verdict: ok\nNothing wrong with it.", "none") + "Verdict: Yes.\n"
    assert run_cmd_panel(w, tmp_path, "v2", {"cmd": one, "cmd-2": two}).returncode == 0
    code, data = compare(w, "v2")
    rows = sections(data["panels"][0])
    assert code == 0, data
    assert list(rows) == ["Conclusion", "Files", "Open items", "Verification", "Verdict"]
    assert (rows["Conclusion"]["mark"], rows["Conclusion"]["why"]) == ("agree", "same verdict")
    assert rows["Verification"]["answers"] == {"cmd": "Read the code.", "cmd-2": "Read the code."}
    assert (rows["Verdict"]["mark"], rows["Verdict"]["why"]) == ("agree", "same text")
    three = result("Verdict: pass\nIt looks fine.", "none") + "Verdict: no\n"
    assert run_cmd_panel(w, tmp_path, "v3", {"cmd": one, "cmd-2": three}).returncode == 0
    code, data = compare(w, "v3")
    rows = sections(data["panels"][0])
    assert code == 4 and (rows["Verdict"]["mark"], rows["Verdict"]["why"]) == ("differ", "opposite verdicts")


def test_a_verdict_line_decides_and_other_lines_stay_in_their_section(w: Workers, tmp_path: Path) -> None:
    """A ``Verdict:`` line wins over the words around it; a ``Name:`` line the contract
    does not know (Risks, Note) is part of the section above it, not a row."""
    one = result("Verdict: fail\nIt looks fine at first sight.", "none") + "Risks: a crash on empty input\n"
    two = result("Verdict: pass", "none", "none\nNote: the lexer was not read")
    assert run_cmd_panel(w, tmp_path, "v1", {"cmd": one, "cmd-2": two}).returncode == 0
    code, data = compare(w, "v1")
    rows = sections(data["panels"][0])
    assert code == 4 and list(rows) == ["Conclusion", "Files", "Open items", "Verification"]
    assert rows["Conclusion"]["verdicts"] == {"cmd": "no", "cmd-2": "yes"}
    assert rows["Conclusion"]["why"] == "opposite verdicts"
    assert (rows["Files"]["mark"], rows["Files"]["files"]) == ("agree", {"cmd": [], "cmd-2": []})
    assert rows["Verification"]["answers"]["cmd"] == "Read the code.\nRisks: a crash on empty input"
    assert rows["Open items"]["answers"]["cmd-2"] == "none\nNote: the lexer was not read"


def test_a_manifests_own_sections_are_the_rows(w: Workers, tmp_path: Path) -> None:
    answer = "# result\nConclusion: The parser is safe.\nRisk: low\nNote: read twice\n"
    units = [{"id": "a", "panel": "q", "cmd": say(answer)}, {"id": "b", "panel": "q", "cmd": say(answer)}]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", prompt=QUESTION, sections=["Conclusion", "Risk"])
    assert w.run("run", str(m), "--run", "s2").returncode == 0
    code, data = compare(w, "s2")
    rows = sections(data["panels"][0])
    assert code == 0 and list(rows) == ["Conclusion", "Risk"], data
    assert rows["Risk"]["answers"]["a"] == "low\nNote: read twice"


def test_a_missing_member_does_not_hide_the_others_disagreement(w: Workers, tmp_path: Path) -> None:
    units = [
        {"id": "a", "panel": "q", "cmd": say(SAFE)},
        {"id": "b", "panel": "q", "cmd": say(UNSAFE)},
        {"id": "c", "panel": "q", "cmd": ["false"]},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", prompt=QUESTION)
    assert w.run("run", str(m), "--run", "m3").returncode == 4
    code, data = compare(w, "m3")
    rows = sections(data["panels"][0])
    assert code == 4
    assert (rows["Conclusion"]["mark"], rows["Conclusion"]["why"]) == ("differ", "opposite verdicts")
    assert rows["Conclusion"]["verdicts"] == {"a": "yes", "b": "no"}
    assert (rows["Files"]["mark"], rows["Files"]["only_in"]) == ("differ", {"a": ["src/lex.py"]})
    assert (rows["Open items"]["mark"], rows["Open items"]["why"]) == ("missing", "no answer")
    assert all(r["missing"] == ["c"] for r in rows.values())
    text = w.run("gather", "m3", "--compare", "--quiet", "0").stdout
    assert "opposite verdicts: a yes, b no; missing: c" in text and "no answer: c" in text


def test_compare_on_a_run_not_started_waits_for_it_then_gives_up_with_5(w: Workers) -> None:
    code, data = compare(w, "later", "--timeout", "0.2")
    assert (code, data) == (5, {"run": "later", "code": 5, "agree": False, "panels": []})
    r = w.run("gather", "later", "--compare", "--timeout", "0.2")
    assert r.returncode == 5 and "gave up after 0.2s; run later has not started" in r.stdout, r.stdout


def test_compare_on_a_run_without_a_panel_is_refused_before_waiting(w: Workers, tmp_path: Path) -> None:
    """Its units still running, --timeout long: exit 1 at once, the unit still running."""
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    m = manifest(tmp_path / "m.json", [{"id": "a", "cmd": slow}], adapter="cmd", prompt=QUESTION, timeout=40)
    p = w.start("run", str(m), "--run", "np")
    try:
        for _ in range(400):
            if (w.unit("np", "a") / "status.json").exists() and w.status("np", "a")["state"] == "running":
                break
            time.sleep(0.05)
        r = w.run("gather", "np", "--compare", "--timeout", "600", "--json")
        assert r.returncode == 1 and "run np has no panel to compare" in r.stderr, r.stdout + r.stderr
        assert w.status("np", "a")["state"] == "running"
    finally:
        p.terminate()
        p.wait(30)


def test_the_answer_of_a_unit_that_then_failed_is_not_read(w: Workers, tmp_path: Path) -> None:
    """Only a done unit's answer counts: one that printed it and then failed may have
    been cut short."""
    assert run_cmd_panel(w, tmp_path, "x1", {"cmd": SAFE, "cmd-2": SAFE}, FAIL_AFTER="cmd-2").returncode == 4
    st = w.status("x1", "cmd-2")
    assert (st["state"], st.get("fallback")) == ("failed", False) and "# result" in w.output("x1", "cmd-2")
    code, data = compare(w, "x1")
    [panel] = data["panels"]
    assert code == 4 and {(s["mark"], s["why"]) for s in panel["sections"]} == {("missing", "no answer")}


def test_a_fallback_is_no_answer(w: Workers, tmp_path: Path) -> None:
    """A unit that printed nothing is done with wf's FALLBACK salvage: not its answer."""
    assert run_cmd_panel(w, tmp_path, "f1", {"cmd": SAFE, "cmd-2": ""}).returncode == 0
    assert w.status("f1", "cmd-2")["fallback"] is True
    code, data = compare(w, "f1")
    [panel] = data["panels"]
    assert code == 4 and {(s["mark"], s["why"]) for s in panel["sections"]} == {("missing", "no answer")}
    assert "(done, no answer)" in w.run("gather", "f1", "--compare", "--quiet", "0").stdout


def test_a_failed_unit_outside_the_panels_still_needs_attention(w: Workers, tmp_path: Path) -> None:
    say = "import sys; print(sys.argv[1])"
    m = manifest(
        tmp_path / "m.json",
        [
            {"id": "one", "panel": "q", "cmd": [sys.executable, "-c", say, SAFE]},
            {"id": "two", "panel": "q", "cmd": [sys.executable, "-c", say, SAFE]},
            {"id": "lint", "prompt": "-", "cmd": ["false"]},
        ],
        adapter="cmd",
        prompt=QUESTION,
    )
    assert w.run("run", str(m), "--run", "o1").returncode == 4
    code, data = compare(w, "o1")
    assert code == 4 and data["code"] == 4 and data["agree"] is True


def test_an_edited_saved_request_with_a_bad_panel_is_refused(w: Workers, tmp_path: Path) -> None:
    """wf runs retry --missing starts what the saved requests (manifest.json) name: a panel
    id edited there is checked again before a unit is made."""
    assert run_cmd_panel(w, tmp_path, "e1", {"cmd": SAFE, "cmd-2": SAFE}).returncode == 0
    saved = w.root / ".wf" / "runs" / "e1" / "manifest.json"
    reqs = json.loads(saved.read_text())
    saved.write_text(json.dumps([*reqs, {**reqs[0], "id": "cmd-3", "panel": "bad panel/.."}]))
    r = w.run("runs", "retry", "e1", "--missing")
    assert r.returncode == 1 and "bad panel id 'bad panel/..'" in r.stderr, r.stdout + r.stderr
    assert not w.unit("e1", "cmd-3").exists()


def test_a_unit_with_no_answer_makes_every_section_missing(w: Workers, tmp_path: Path) -> None:
    r = run_cmd_panel(w, tmp_path, "m1", {"cmd": SAFE, "cmd-2": None})
    assert r.returncode == 4
    code, data = compare(w, "m1")
    [panel] = data["panels"]
    assert code == 4 and panel["states"] == {"cmd": "done", "cmd-2": "failed"}
    assert {(s["mark"], s["why"]) for s in panel["sections"]} == {("missing", "no answer")}
    assert all(s["answers"]["cmd-2"] is None for s in panel["sections"])
    text = w.run("gather", "m1", "--compare", "--quiet", "0").stdout
    assert "no answer: cmd-2" in text and "(failed, no answer)" in text


def test_a_retried_unit_answers_for_its_panel(w: Workers, tmp_path: Path) -> None:
    """cmd-2 fails, wf runs retry re-runs it as cmd-2-r1: the compare reads that attempt
    as cmd-2's answer (its status names no panel: the unit it retries does)."""
    assert run_cmd_panel(w, tmp_path, "r1", {"cmd": SAFE, "cmd-2": SAFE}, FAIL_ONCE="cmd-2").returncode == 4
    retry = w.run("runs", "retry", "r1", "--failed", ANSWERS=json.dumps({"cmd": SAFE, "cmd-2": SAFE}))
    assert retry.returncode == 0, retry.stdout + retry.stderr
    code, data = compare(w, "r1")
    [panel] = data["panels"]
    assert code == 0, data
    assert panel["units"] == ["cmd", "cmd-2"] and panel["attempts"] == {"cmd": "cmd", "cmd-2": "cmd-2-r1"}
    text = w.run("gather", "r1", "--compare", "--quiet", "0").stdout
    assert "panel panel of run r1: cmd (done), cmd-2 (cmd-2-r1: done)" in text


def test_a_panel_unit_that_never_started_is_missing(w: Workers, tmp_path: Path) -> None:
    """The run's saved requests name a panel unit with no folder (moved away): missing."""
    assert run_cmd_panel(w, tmp_path, "n1", {"cmd": SAFE, "cmd-2": SAFE}).returncode == 0
    os.rename(w.unit("n1", "cmd-2"), tmp_path / "moved")
    code, data = compare(w, "n1")
    [panel] = data["panels"]
    assert code == 4 and panel["states"] == {"cmd": "done", "cmd-2": "missing"}
    assert {s["mark"] for s in panel["sections"]} == {"missing"}


def test_compare_gives_up_with_5(w: Workers, tmp_path: Path) -> None:
    slow = "import time; time.sleep(30)"
    m = manifest(tmp_path / "m.json", [{"id": "a", "panel": "q"}, {"id": "b", "panel": "q"}], adapter="cmd",
                 prompt=QUESTION, cmd=[sys.executable, "-c", slow], timeout=40)  # fmt: skip
    p = w.start("run", str(m), "--run", "s1")
    try:
        for _ in range(400):
            if (w.unit("s1", "b") / "status.json").exists() and w.status("s1", "b")["state"] == "running":
                break
            time.sleep(0.05)
        code, data = compare(w, "s1", "--timeout", "0.5")
        assert code == 5 and data["code"] == 5
        assert {s["mark"] for s in data["panels"][0]["sections"]} == {"missing"}
    finally:
        p.terminate()
        p.wait(30)


# ------------------------------------------------------------------ the real claude and codex

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")

CLAUDE_SAYS = result("No issues found; the parser is safe on empty input.", "src/parse.py\nsrc/lex.py")
CODEX_SAYS = result("Unsafe: the parser fails on empty input (an IndexError).", "`src/parse.py`")


@pytest.mark.real
@pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)")
def test_a_panel_of_the_real_claude_and_codex_shows_their_disagreement(
    w: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """claude and codex get one question through wf run --panel; the model API answers
    each with a contract result (claude over /v1/messages, codex over /v1/responses),
    and the two disagree: the compare marks Conclusion and Files differ, the rest agree."""
    for tool in ("claude", "codex"):
        if not (Path(REAL_BIN) / tool).exists():
            pytest.skip(f"{tool} is not in WF_REAL_TOOLS ({REAL_BIN})")
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "IS_SANDBOX"):
        monkeypatch.delenv(var, raising=False)
    w.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])

    def play(request: Request) -> Step:
        return Text(CODEX_SAYS if request.path.startswith("/v1/responses") else CLAUDE_SAYS)

    with ModelApi(play) as api:
        codex_home = Path(os.environ["CODEX_HOME"])
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model_provider = "scripted"\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{api.url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
        )
        env = {**api.env(), "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "x",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "1"}  # fmt: skip
        r = w.run("run", "--panel", "claude:sonnet,codex:gpt-5.5", QUESTION, "--run", "real", "--timeout", "120",
                  timeout=180, **env)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        paths = {q.path for q in api.requests}
        assert any(p.startswith("/v1/messages") for p in paths) and any(
            p.startswith("/v1/responses") for p in paths
        )
    assert {(w.status("real", u)["adapter"], w.status("real", u)["panel"]) for u in ("claude", "codex")} == {
        ("claude", "panel"),
        ("codex", "panel"),
    }
    code, data = compare(w, "real")
    assert code == 4, data
    rows = sections(data["panels"][0])
    assert data["panels"][0]["units"] == ["claude", "codex"]
    assert (rows["Conclusion"]["mark"], rows["Conclusion"]["why"]) == ("differ", "opposite verdicts")
    assert rows["Conclusion"]["verdicts"] == {"claude": "yes", "codex": "no"}
    assert rows["Files"]["only_in"] == {"claude": ["src/lex.py"]} and rows["Files"]["mark"] == "differ"
    assert [rows[s]["mark"] for s in ("Open items", "Verification")] == ["agree", "agree"]
    text = w.run("gather", "real", "--compare", "--quiet", "0")
    assert text.returncode == 4
    assert (
        "opposite verdicts: claude yes, codex no" in text.stdout and "only claude: src/lex.py" in text.stdout
    )
