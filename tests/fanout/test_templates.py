"""Prompt templates (issue 23, item 4): ``wf run --templates`` lists the packaged ones, a
manifest unit renders one with ``template`` and ``vars`` (a var may be another unit's
answer), and every rendered prompt ends with the return contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner, git
from tests.workers.test_workers import Workers, manifest
from wf.fanout.contract import instructions

NAMES = ["research", "code", "review", "verify", "fix"]
PLACEHOLDERS = {
    "research": ["question"],
    "code": ["task"],
    "review": ["target"],
    "verify": ["task", "result"],
    "fix": ["task", "failure"],
}
ECHO = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"]  # answers its prompt


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    return Workers(wf.root, tmp_path)


def test_templates_are_listed_with_their_placeholders(w: Workers) -> None:
    r = w.run("run", "--templates")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()
    assert [row.split()[0] for row in rows[:5]] == NAMES
    assert "{task}, {result}" in rows[3] and "another unit's answer" in rows[3]
    data = json.loads(w.run("run", "--templates", "--json").stdout)
    assert [d["name"] for d in data] == NAMES
    assert {d["name"]: d["placeholders"] for d in data} == PLACEHOLDERS
    assert all(d["summary"] and "\n" not in d["summary"] for d in data)


@pytest.mark.parametrize("name", NAMES)
def test_each_template_ends_with_the_contract(w: Workers, name: str) -> None:
    r = w.run("run", "--templates", name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(instructions())
    assert not r.stdout.startswith("<!--")  # the summary line is not part of the prompt
    for p in PLACEHOLDERS[name]:
        assert "{" + p + "}" in r.stdout
    data = json.loads(w.run("run", "--templates", name, "--json").stdout)
    assert data["text"] == r.stdout and data["placeholders"] == PLACEHOLDERS[name]


def test_an_unknown_template_and_a_missing_manifest_are_usage_errors(w: Workers) -> None:
    r = w.run("run", "--templates", "nope")
    assert r.returncode == 2 and "no template 'nope'" in r.stderr and "research, code" in r.stderr
    r = w.run("run")
    assert r.returncode == 2 and "Missing argument 'MANIFEST'" in r.stderr


def test_a_manifest_unit_renders_its_template(w: Workers, tmp_path: Path) -> None:
    units: list[dict[str, Any]] = [
        {"id": "q1", "template": "research", "vars": {"question": "Where is {x} parsed?"}},
        {"id": "c1", "template": "code", "vars": {"task": "Add --verbose"}, "mode": "clone"},
    ]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", cmd=ECHO)
    r = w.run("run", str(m), "--run", "r1")
    assert r.returncode == 0, r.stderr
    research = (w.unit("r1", "q1") / "prompt.txt").read_text()
    assert "Where is {x} parsed?" in research and "{question}" not in research  # a value is not re-read
    assert research.endswith(instructions())
    assert w.output("r1", "q1") == research.rstrip("\n")  # what the tool was given
    code = (w.unit("r1", "c1") / "prompt.txt").read_text()
    assert "Add --verbose" in code and code.endswith(instructions())
    assert w.status("r1", "c1")["mode"] == "clone"


def test_verify_and_fix_read_another_units_answer(w: Workers, tmp_path: Path) -> None:
    say = [sys.executable, "-c", "print('The answer is 42; tests pass.')"]
    m1 = manifest(tmp_path / "m1.json", [{"id": "u1", "prompt": "work", "cmd": say}], adapter="cmd")
    assert w.run("run", str(m1), "--run", "r1").returncode == 0
    verify = {"id": "v1", "template": "verify", "vars": {"task": "Find {result}", "result": {"unit": "u1"}}}
    m2 = manifest(tmp_path / "m2.json", [verify], adapter="cmd", cmd=ECHO)
    r = w.run("run", str(m2), "--run", "r1")
    assert r.returncode == 0, r.stderr
    prompt = (w.unit("r1", "v1") / "prompt.txt").read_text()
    assert "<result>\nThe answer is 42; tests pass.\n</result>" in prompt
    assert "Find {result}" in prompt and prompt.endswith(instructions())  # a value is never re-read
    fix = {"id": "f1", "template": "fix", "vars": {"task": "Find the answer", "failure": {"unit": "v1"}}}
    m3 = manifest(tmp_path / "m3.json", [fix], adapter="cmd", cmd=ECHO)
    assert w.run("run", str(m3), "--run", "r1").returncode == 0
    assert "The answer is 42" in (w.unit("r1", "f1") / "prompt.txt").read_text()


BAD: list[tuple[dict[str, Any], str]] = [
    ({"template": "reserch", "vars": {"question": "q"}}, "no template 'reserch'"),
    ({"template": "verify", "vars": {"task": "t"}}, "template verify needs vars result"),
    (
        {"template": "review", "vars": {"target": "x", "focus": "y"}},
        "template review has no placeholder focus",
    ),
    ({"prompt": "p", "vars": {"target": "x"}}, "vars are for a template"),
    (
        {"template": "review", "prompt": "p", "vars": {"target": "x"}},
        "give one of prompt, prompt_file and template",
    ),
    ({"template": "review", "vars": {"target": 3}}, 'var target must be text or {"unit": "ID"}'),
    ({"template": "review", "vars": ["target"]}, "vars must be a table"),
    ({"template": ["review"]}, "template must be a name"),
]


@pytest.mark.parametrize(("entry", "error"), BAD, ids=[e for _, e in BAD])
def test_a_template_unit_that_does_not_fit_is_refused(
    w: Workers, tmp_path: Path, entry: dict[str, Any], error: str
) -> None:
    m = manifest(tmp_path / "m.json", [{"id": "t1", **entry}], adapter="cmd", cmd=ECHO)
    r = w.run("run", str(m), "--run", "r1")
    assert r.returncode == 1, r.stdout
    assert error in r.stderr and "unit t1" in r.stderr and "Traceback" not in r.stderr
    assert not w.unit("r1", "t1").exists()


def test_an_answer_var_needs_a_done_unit_of_the_run_with_an_answer(w: Workers, tmp_path: Path) -> None:
    ran = [
        {"id": "ok", "prompt": "x", "cmd": [sys.executable, "-c", "print('fine')"]},
        {"id": "bad", "prompt": "x", "cmd": [sys.executable, "-c", "print('half'); raise SystemExit(3)"]},
        {"id": "mute", "prompt": "x", "cmd": ["true"]},  # done, but only wf's FALLBACK salvage
        {"id": "late", "prompt": "x", "cmd": [sys.executable, "-c", "print('an answer')"]},
    ]
    w.run("run", str(manifest(tmp_path / "m1.json", ran, adapter="cmd")), "--run", "r1")
    # a tool that wrote its answer, then ran out of time: an answer, but not a done unit's
    status = w.unit("r1", "late") / "status.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "state": "timeout"}))
    cases = [
        ("bad", "unit bad of run r1 ended failed, not done with an answer"),
        ("mute", "unit mute of run r1 ended only a FALLBACK, not done with an answer"),
        ("late", "unit late of run r1 ended timeout, not done with an answer"),
        ("ghost", "no unit ghost in run r1"),
        ("../ok", "bad unit id '../ok'"),
        ("v2", "unit v2 is in the same manifest, so it has no answer yet"),
    ]
    for n, (ref, error) in enumerate(cases):
        units: list[dict[str, Any]] = [
            {"id": "v2", "prompt": "x", "cmd": ECHO},
            {"id": f"check{n}", "template": "verify", "vars": {"task": "t", "result": {"unit": ref}}},
        ]
        m = manifest(tmp_path / f"m{n}.json", units, adapter="cmd", cmd=ECHO)
        r = w.run("run", str(m), "--run", "r1")
        assert r.returncode == 1 and error in r.stderr and "Traceback" not in r.stderr, (ref, r.stderr)
        assert not w.unit("r1", f"check{n}").exists() and not w.unit("r1", "v2").exists()
    units = [{"id": "v3", "template": "verify", "vars": {"task": "t", "result": {"unit": "ok"}}}]
    assert (
        w.run(
            "run", str(manifest(tmp_path / "m9.json", units, adapter="cmd", cmd=ECHO)), "--run", "r1"
        ).returncode
        == 0
    )
