"""A prompt read from a file or stdin (``wf run --panel --prompt-file``, ``wf dispatch
RUN UNIT FILE``, a manifest's ``prompt_file``) must be UTF-8 text: anything else is a
clear error (exit 1) before any run folder is made, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.workers.test_workers import Workers, manifest

NOT_UTF8 = b"\xff\xfe a prompt in UTF-16"


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    (tmp_path / "bin.txt").write_bytes(NOT_UTF8)
    return Workers(wf.root, tmp_path)


def piped(w: Workers, *args: str) -> subprocess.CompletedProcess[bytes]:
    return wfproc.run([sys.executable, "-m", "wf", *args], cwd=w.root, env=w.env, input=NOT_UTF8,
                      capture_output=True, timeout=60)  # fmt: skip


def no_runs(w: Workers) -> bool:
    return w.run("runs").stdout.startswith("no runs yet")


def test_a_prompt_file_that_is_not_utf8_is_refused_before_any_run_is_made(w: Workers) -> None:
    binary = str(w.tmp / "bin.txt")
    for args in (
        ("run", "--panel", "cmd,cmd", "--prompt-file", binary, "--cmd", "true"),
        ("dispatch", "d1", "b", binary, "--adapter", "cmd", "--cmd", "true"),
    ):
        r = w.run(*args)
        assert r.returncode == 1 and r.stderr == f"wf: {binary} is not UTF-8 text (byte 0 is 0xff)\n", args
        assert no_runs(w)


def test_a_prompt_on_stdin_that_is_not_utf8_is_refused_before_any_run_is_made(w: Workers) -> None:
    for args in (
        ("run", "--panel", "cmd,cmd", "--prompt-file", "-", "--cmd", "true"),
        ("dispatch", "d1", "b", "-", "--adapter", "cmd", "--cmd", "true"),
    ):
        r = piped(w, *args)
        assert r.returncode == 1, args
        assert r.stderr == b"wf: the prompt on stdin is not UTF-8 text (byte 0 is 0xff)\n", args
        assert no_runs(w)


def test_a_manifest_prompt_file_that_is_not_utf8_is_refused(w: Workers, tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text("une question accentuée\n")
    units = [{"id": "g1", "prompt_file": str(good)}, {"id": "b1", "prompt_file": "bin.txt"}]
    m = manifest(tmp_path / "m.json", units, adapter="cmd", cmd=["true"])
    r = w.run("run", str(m))
    assert r.returncode == 1
    assert r.stderr == f"wf: unit b1: prompt_file {tmp_path / 'bin.txt'} is not UTF-8 text (byte 0 is 0xff)\n"
    assert no_runs(w)
    m = manifest(tmp_path / "m.json", units[:1], adapter="cmd", cmd=["true"])
    r = w.run("run", str(m), "--run", "ok")
    assert r.returncode == 0, r.stderr
    assert (w.unit("ok", "g1") / "prompt.txt").read_text().startswith("une question accentuée\n")
