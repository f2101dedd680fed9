"""The return contract through the command line (issue 23, items 1-2): every unit's
prompt ends with it, wf gather and wf monitor check each answer against it and name the
units whose result is missing or invalid, wf runs retry --invalid re-runs exactly those,
and a manifest may name its own sections or switch the contract off."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.test_grants_real import real_env, wf_run
from tests.conftest import WfRunner, git
from tests.model_api import ModelApi, Request, Step, Text
from tests.workers.test_workers import Workers, manifest
from wf.fanout import contract

FULL = "# result\nConclusion: did it\nFiles: a.py\nOpen items: none\nVerification: ran the tests, 3 passed\n"
NO_VERIFICATION = FULL.split("Verification:")[0]


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    return Workers(wf.root, tmp_path)


def prints(first: str, later: str | None = None, mark: Path | None = None) -> list[str]:
    """A cmd unit that reads its prompt and prints ``first``; once ``mark`` exists,
    ``later`` (a retry that does better)."""
    code = "import os, sys; sys.stdin.read(); "
    if mark is not None:
        code += f"first = not os.path.exists({str(mark)!r}); "
        code += f"sys.stdout.write({first!r} if first else {later!r})"
    else:
        code += f"sys.stdout.write({first!r})"
    return [sys.executable, "-c", code]


def ledger_lines(out: str, run: str) -> list[str]:
    """The units wf gather names at its end."""
    lines = out.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.startswith(f"gather {run}: ")), None)
    if head is None:
        return []
    return [ln.strip() for ln in lines[head + 1 :] if ln.startswith("  ") and not ln.strip().startswith("(")]


# ------------------------------------------------------------------ the Done-when, literally


@pytest.mark.timeout(180)
def test_six_units_two_without_verification_one_silent_gather_names_the_three_and_retry_fixes_them(
    w: Workers, tmp_path: Path
) -> None:
    mark = tmp_path / "better"
    units = [
        {"id": "u1", "prompt": "one", "cmd": prints(FULL)},
        {"id": "u2", "prompt": "two", "cmd": prints(NO_VERIFICATION, FULL, mark)},
        {"id": "u3", "prompt": "three", "cmd": prints(FULL)},
        {"id": "u4", "prompt": "four", "cmd": prints(FULL)},
        {"id": "u5", "prompt": "five", "cmd": prints(NO_VERIFICATION, FULL, mark)},
        {"id": "u6", "prompt": "six", "cmd": prints("", FULL, mark)},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    r = w.run("run", str(m), "--run", "r6")
    assert r.returncode == 0, r.stdout + r.stderr  # every unit ran to done; judging is gather's
    assert "u2: done" in r.stdout and "invalid: missing sections: Verification" in r.stdout, r.stdout
    # every unit's prompt (a cmd unit's stdin) ends with the contract
    tail = contract.instructions()
    for u in units:
        assert (w.unit("r6", str(u["id"])) / "prompt.txt").read_text().endswith(tail)
        assert w.status("r6", str(u["id"]))["contract"] == list(contract.SECTIONS)

    g = w.run("gather", "r6", "--quiet", "0.1")
    assert g.returncode == 4, g.stdout + g.stderr
    assert ledger_lines(g.stdout, "r6") == [
        "u2: invalid: missing sections: Verification",
        "u5: invalid: missing sections: Verification",
        "u6: invalid: no answer of its own, only a FALLBACK salvage of its log",
    ], g.stdout
    assert "gather r6: 3 units without a valid result:" in g.stdout
    assert "== u2 (done, invalid: missing sections: Verification)" in g.stdout
    assert "== u1 (done)\n" in g.stdout
    data = json.loads(w.run("gather", "r6", "--quiet", "0.1", "--json").stdout)
    assert data["code"] == 4
    assert [(a["unit"], a["need"], a["why"]) for a in data["attention"]] == [
        ("u2", "invalid", "missing sections"),
        ("u5", "invalid", "missing sections"),
        ("u6", "invalid", "fallback"),
    ]
    by_unit = {u["unit"]: u for u in data["units"]}
    assert by_unit["u2"]["verdict"] == "invalid" and by_unit["u1"]["verdict"] == "done"
    assert by_unit["u2"]["result"] == {
        "valid": False,
        "reason": "missing sections: Verification",
        "why": "missing sections",
        "sections": ["Verification"],
    }
    # recorded in status.json when the unit ended, so every later reader agrees
    assert w.status("r6", "u5")["result"]["valid"] is False and w.status("r6", "u1")["result"]["valid"]

    mark.touch()
    r = w.run("runs", "retry", "r6", "--invalid", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(u["unit"] for u in out["units"]) == ["u2-r1", "u5-r1", "u6-r1"]
    assert all(u["verdict"] == "done" and u["result"]["valid"] for u in out["units"])
    for old in ("u2", "u5", "u6"):  # the earlier attempt is kept
        assert w.status("r6", old)["state"] == "done" and (w.unit("r6", old) / "output.txt").exists()
        new = w.status("r6", f"{old}-r1")
        assert new["retry_of"] == old and new["retry"] == 1
        # the contract once, not twice: the retry's prompt is read back from prompt.txt
        assert (w.unit("r6", f"{old}-r1") / "prompt.txt").read_text().count("# result") == 1

    g2 = w.run("gather", "r6", "--quiet", "0.1")
    assert g2.returncode == 0, g2.stdout
    assert ledger_lines(g2.stdout, "r6") == [] and "without a valid result" not in g2.stdout
    assert "== u2-r1 (done)" in g2.stdout and "== u2 (" not in g2.stdout
    again = w.run("runs", "retry", "r6", "--invalid")
    assert again.returncode == 0 and "nothing to retry" in again.stdout, again.stdout


# ------------------------------------------------------------------ what the ledger names


@pytest.mark.timeout(120)
def test_gather_names_a_failed_unit_and_one_that_never_started_and_retry_invalid_runs_both(
    w: Workers, tmp_path: Path
) -> None:
    mark = tmp_path / "fixed"
    flaky = f"import os, sys; sys.stdin.read(); os.path.exists({str(mark)!r}) or sys.exit(3); "
    units = [
        {"id": "ok", "prompt": "x", "cmd": prints(FULL)},
        {"id": "bad", "prompt": "x", "cmd": [sys.executable, "-c", flaky + f"sys.stdout.write({FULL!r})"]},
        {"id": "late", "prompt": "x", "cmd": prints(FULL)},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 4
    shutil.rmtree(w.unit("r1", "late"))  # stands for a unit wf never got to write down
    g = w.run("gather", "r1", "--quiet", "0.1")
    assert g.returncode == 4
    named = ledger_lines(g.stdout, "r1")
    assert named[0].startswith("bad: failed task: exit 3") and named[1:] == ["late: never started"], g.stdout
    data = json.loads(w.run("gather", "r1", "--quiet", "0.1", "--json").stdout)
    assert [(a["unit"], a["need"]) for a in data["attention"]] == [
        ("bad", "no result"),
        ("late", "never started"),
    ]
    # gather of named units: only those, no never-started list
    assert w.run("gather", "r1", "ok", "--quiet", "0.1").returncode == 0

    mark.touch()
    r = w.run("runs", "retry", "r1", "--invalid", "--json")
    assert sorted(u["unit"] for u in json.loads(r.stdout)["units"]) == ["bad-r1", "late"], r.stdout
    assert w.run("gather", "r1", "--quiet", "0.1").returncode == 0


def test_failed_leaves_a_done_invalid_unit_and_invalid_takes_it(w: Workers, tmp_path: Path) -> None:
    units = [{"id": "half", "prompt": "x", "cmd": prints(NO_VERIFICATION)}]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    r = w.run("runs", "retry", "r1", "--failed", "--json")
    assert json.loads(r.stdout)["units"] == [], r.stdout  # done, with an answer of its own
    r = w.run("runs", "retry", "r1", "--json")  # no flag: all of them
    assert [u["unit"] for u in json.loads(r.stdout)["units"]] == ["half-r1"]
    # wf run on the run again: an invalid answer has not landed, so it is retried too
    r = w.run("run", str(m), "--run", "r1")
    assert "half-r2: done" in r.stdout and "(retry 2 of half)" in r.stdout, r.stdout


# ------------------------------------------------------------------ the other readers


@pytest.mark.timeout(120)
def test_monitor_wakes_on_an_invalid_result_and_runs_status_shows_it(w: Workers, tmp_path: Path) -> None:
    units = [
        {"id": "good", "prompt": "x", "cmd": prints(FULL)},
        {"id": "half", "prompt": "x", "cmd": prints(NO_VERIFICATION)},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    mon = w.run("monitor", "r1", "--timeout", "10")
    assert mon.returncode == 4, mon.stdout
    assert "half: done" in mon.stdout and "invalid: missing sections: Verification" in mon.stdout
    data = json.loads(w.run("monitor", "r1", "--timeout", "10", "--json").stdout)
    assert data["code"] == 4 and [a["unit"] for a in data["attention"]] == ["half"]
    assert w.run("monitor", "r1", "good", "--timeout", "10").returncode == 0

    status = w.run("runs", "status", "r1")
    assert "half: done" in status.stdout and "invalid: missing sections: Verification" in status.stdout
    assert "run r1: 2/2 done, 1 invalid" in status.stdout, status.stdout
    rows = {d["unit"]: d for d in json.loads(w.run("runs", "status", "r1", "--json").stdout)}
    assert (rows["half"]["verdict"], rows["good"]["verdict"]) == ("invalid", "done")
    assert json.loads(w.run("runs", "--json").stdout)[0]["states"] == {"done": 2, "invalid": 1}


def test_a_result_not_yet_recorded_is_derived_alike(w: Workers, tmp_path: Path) -> None:
    """A supervisor killed between the unit's last status and its end being handled
    leaves no ``result``: the readers derive the same check from output.txt."""
    m = manifest(
        tmp_path / "m.json", [{"id": "half", "prompt": "x", "cmd": prints(NO_VERIFICATION)}], adapter="cmd"
    )
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    path = w.unit("r1", "half") / "status.json"
    st = json.loads(path.read_text())
    del st["result"]
    path.write_text(json.dumps(st))
    g = w.run("gather", "r1", "--quiet", "0.1")
    assert g.returncode == 4 and ledger_lines(g.stdout, "r1") == [
        "half: invalid: missing sections: Verification"
    ]


# ------------------------------------------------------------------ the contract off, or other sections


def test_contract_off_in_a_manifest_and_with_no_contract(w: Workers, tmp_path: Path) -> None:
    units: list[dict[str, Any]] = [
        {"id": "lint", "prompt": "-", "cmd": ["echo", "all clean"], "contract": False},
        {"id": "todo", "prompt": "x", "cmd": prints(FULL)},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    assert (w.unit("r1", "lint") / "prompt.txt").read_text() == "-"
    assert w.status("r1", "lint")["contract"] is False and "result" not in w.status("r1", "lint")
    assert w.run("gather", "r1", "--quiet", "0.1").returncode == 0  # done is done
    plain = manifest(tmp_path / "p.json", [{"id": "t", "prompt": "x", "cmd": ["true"]}], adapter="cmd")
    assert w.run("run", str(plain), "--run", "r2").returncode == 0
    g = w.run("gather", "r2", "--quiet", "0.1")
    assert g.returncode == 4 and ledger_lines(g.stdout, "r2")[0].startswith("t: invalid: "), g.stdout
    assert w.run("run", str(plain), "--run", "r3", "--no-contract").returncode == 0
    assert w.run("gather", "r3", "--quiet", "0.1").returncode == 0
    assert (w.unit("r3", "t") / "prompt.txt").read_text() == "x"
    d = w.run(
        "dispatch", "r4", "d1", "--adapter", "cmd", "--cmd", "echo hi", "--prompt", "x", "--no-contract"
    )
    assert d.returncode == 0 and w.status("r4", "d1")["contract"] is False
    assert w.run("gather", "r4", "--quiet", "0.1").returncode == 0
    # a retry keeps the contract off
    d = w.run("dispatch", "r4", "d2", "--adapter", "cmd", "--cmd", "false", "--prompt", "x", "--no-contract")
    assert d.returncode == 4
    r = w.run("runs", "retry", "r4", "--failed")
    assert w.status("r4", "d2-r1")["contract"] is False, r.stdout + r.stderr
    assert (w.unit("r4", "d2-r1") / "prompt.txt").read_text() == "x"


def test_a_manifest_names_its_own_sections(w: Workers, tmp_path: Path) -> None:
    risk = "# result\nConclusion: fine\nRisk: low\n"
    units = [
        {"id": "a", "prompt": "x", "cmd": prints(risk)},
        {"id": "b", "prompt": "x", "cmd": prints(FULL)},  # the default four are not asked for here
        {"id": "c", "prompt": "x", "cmd": prints(FULL), "required_sections": ["conclusion", "open items"]},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", sections=["Conclusion", "Risk"])
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    prompt = (w.unit("r1", "a") / "prompt.txt").read_text()
    assert prompt.endswith(contract.instructions(("Conclusion", "Risk"))) and "Verification" not in prompt
    assert w.status("r1", "c")["contract"] == ["Conclusion", "Open items"]
    g = w.run("gather", "r1", "--quiet", "0.1")
    assert g.returncode == 4 and ledger_lines(g.stdout, "r1") == ["b: invalid: missing sections: Risk"], (
        g.stdout
    )
    r = w.run("runs", "retry", "r1", "--invalid")
    assert w.status("r1", "b-r1")["contract"] == ["Conclusion", "Risk"], r.stdout + r.stderr
    again = (w.unit("r1", "b-r1") / "prompt.txt").read_text()
    assert again.endswith(contract.instructions(("Conclusion", "Risk"))) and again.count("# result") == 1, (
        again
    )


def test_a_templates_contract_and_a_units_own_sections(w: Workers, tmp_path: Path) -> None:
    """A template's prompt already ends with the contract: asked once, not twice; with
    the unit's own sections, those replace the template's default four."""
    q = {"question": "Where is the parser?"}
    units = [
        {"id": "t1", "template": "research", "vars": q, "cmd": prints(FULL)},
        {
            "id": "t2",
            "template": "research",
            "vars": q,
            "cmd": prints(FULL),
            "sections": ["Conclusion", "Risk"],
        },
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    one = (w.unit("r1", "t1") / "prompt.txt").read_text()
    assert one.endswith(contract.instructions()) and one.count("# result") == 1
    two = (w.unit("r1", "t2") / "prompt.txt").read_text()
    assert two.endswith(contract.instructions(("Conclusion", "Risk"))) and two.count("# result") == 1, two


def test_sections_switch_on_a_contract_the_defaults_switch_off(w: Workers, tmp_path: Path) -> None:
    units = [
        {"id": "plain", "prompt": "x", "cmd": ["echo", "hi"]},
        {
            "id": "checked",
            "prompt": "x",
            "cmd": prints("# result\nConclusion: ok\n"),
            "sections": ["Conclusion"],
        },
        {"id": "off", "prompt": "x", "cmd": ["echo", "hi"]},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", contract=False)
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    assert [w.status("r1", u)["contract"] for u in ("plain", "checked", "off")] == [
        False,
        ["Conclusion"],
        False,
    ]
    assert w.run("gather", "r1", "--quiet", "0.1").returncode == 0
    # and a unit switches off a contract whose sections the defaults name
    m2 = manifest(
        tmp_path / "m2.json",
        [{"id": "p", "prompt": "x", "cmd": ["echo", "hi"], "contract": False}],
        adapter="cmd",
        sections=["Risk"],
    )
    assert w.run("run", str(m2), "--run", "r2").returncode == 0
    assert w.status("r2", "p")["contract"] is False


@pytest.mark.parametrize(
    ("defaults", "unit", "words"),
    [
        ({"sections": []}, {}, "sections []: not a non-empty list"),
        ({"sections": "Conclusion"}, {}, "sections 'Conclusion': not a non-empty list"),
        ({}, {"sections": ["Conclusion", "Risk: high"]}, "'Risk: high' is not a section name"),
        ({}, {"sections": ["Conclusion", 3]}, "3 is not a section name"),
        ({}, {"sections": ["x" * 41]}, "is not a section name"),
        ({}, {"sections": ["Files", "files"]}, "Files is named twice"),
        ({}, {"contract": "no"}, "unit 1: contract must be true or false, not 'no'"),
        ({"contract": False, "sections": ["Risk"]}, {}, "defaults: sections with contract = false"),
        (
            {},
            {"sections": ["Risk"], "required_sections": ["Risk"]},
            "give sections or required_sections, not both",
        ),
    ],
    ids=[
        "empty",
        "a-string",
        "a-colon",
        "a-number",
        "too-long",
        "twice",
        "contract-no",
        "off-with-sections",
        "both",
    ],
)
def test_bad_contract_keys_are_refused_before_anything_runs(
    w: Workers, tmp_path: Path, defaults: dict[str, Any], unit: dict[str, Any], words: str
) -> None:
    m = manifest(
        tmp_path / "m.json", [{"id": "u", "prompt": "x", "cmd": ["true"], **unit}], adapter="cmd", **defaults
    )
    r = w.run("run", str(m), "--run", "bad")
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "m.json: " in r.stderr
    assert not (w.root / ".wf" / "runs" / "bad").exists()


# ------------------------------------------------------------------ agent adapters


def test_an_agent_units_prompt_ends_with_the_contract_and_resume_asks_again(w: Workers) -> None:
    """The fake claude answers ``ok: <first line>``: invalid, and the resumed retry's
    prompt asks for the contract again."""
    r = w.run("dispatch", "r1", "c1", "--adapter", "claude", "--prompt", "Review the parser")
    assert r.returncode == 0 and "invalid: missing sections: Conclusion, Files" in r.stdout, r.stdout
    assert (w.unit("r1", "c1") / "prompt.txt").read_text() == "Review the parser\n" + contract.instructions()
    r = w.run("runs", "retry", "r1", "--invalid", "--resume")
    st = w.status("r1", "c1-r1")
    assert st["resumed_from"] == "c1" and st["contract"] == list(contract.SECTIONS), r.stdout + r.stderr
    assert (w.unit("r1", "c1-r1") / "prompt.txt").read_text().endswith(contract.instructions())


REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")


@pytest.mark.real
@pytest.mark.timeout(240)
@pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)")
def test_the_real_claude_is_given_the_contract_and_its_answer_is_checked(wf: WfRunner) -> None:
    """The real claude against the scripted model API: the "model" answers in the
    contract's form only when the prompt it received asks for it."""

    def model(request: Request) -> Step:
        asked = request.says("# result") and request.says("Verification: <")
        return Text("Looked.\n\n" + FULL if asked else "no contract in my prompt")

    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    with ModelApi(model) as api:
        env = real_env(api)
        r = wf_run(
            wf.root,
            env,
            "dispatch",
            "r1",
            "u1",
            "--adapter",
            "claude",
            "--model",
            "sonnet",
            "--prompt",
            "Look.",
        )
        assert r.returncode == 0, r.stdout + r.stderr
        st = json.loads((wf.root / ".wf" / "runs" / "r1" / "u1" / "status.json").read_text())
        assert st["result"]["valid"] is True, (st, r.stdout)
        g = wf_run(wf.root, env, "gather", "r1", "--quiet", "0.1")
        assert g.returncode == 0 and "Verification: ran the tests" in g.stdout, g.stdout
        r = wf_run(wf.root, env, "dispatch", "r1", "u2", "--adapter", "claude", "--model", "sonnet",
                   "--prompt", "Look.", "--no-contract")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert (wf.root / ".wf" / "runs" / "r1" / "u2" / "output.txt").read_text().strip() == (
            "no contract in my prompt"
        )
        assert wf_run(wf.root, env, "gather", "r1", "--quiet", "0.1").returncode == 0


def test_a_unit_that_echoes_its_prompt_only_repeats_the_hints_and_is_invalid(
    w: Workers, tmp_path: Path
) -> None:
    """A cmd unit ``cat`` prints its prompt back, whose end is the contract's
    instructions: every section present, but saying only ``<hint>``: each is blank."""
    units = [
        {"id": "echo", "prompt": "Is it safe?", "cmd": ["cat"]},
        {"id": "good", "prompt": "x", "cmd": prints(FULL)},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd")
    assert w.run("run", str(m), "--run", "r1").returncode == 0
    assert "Conclusion: <what you found" in w.output("r1", "echo")
    g = w.run("gather", "r1", "--quiet", "0.1")
    assert g.returncode == 4, g.stdout
    assert ledger_lines(g.stdout, "r1") == [
        "echo: invalid: blank sections: Conclusion, Files, Open items, Verification"
    ]
    assert w.status("r1", "echo")["result"]["why"] == "blank sections"
