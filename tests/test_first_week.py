"""What a new user ran into in a first week: inputs that ended in a traceback, cost
reports that did not say what they filtered, and rough edges of wf.toml and the CLI.
Each ends with a clear message and exit 1 (an expected error) or 2 (a usage error)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
