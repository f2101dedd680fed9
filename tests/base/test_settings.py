"""wf.toml and the folders around it, as a person (or an accident) leaves them: every
fault is named, with exit 1; none hangs, floods or crashes wf."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git


def _toml(wf: WfRunner, data: bytes) -> None:
    path = wf.root / "wf.toml"
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\xef\xbb\xbftasks = 'TASKS.md'\n", "byte-order mark (BOM)"),
        (b'tasks = "TA\\u0000SKS.md"\n', "must be a relative path"),
        (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
        (b"lock_timeout = 1e300\n", "lock_timeout must be a number from 0 to 86400"),
        (b"backup_days = nan\n", "backup_days must be a number from 0"),
        (
            b"[lanes.a]\nmax_parallel = 100000000\n",
            "lanes.a.max_parallel must be a whole number from 1 to 64",
        ),
        (b"[lanes.a]\nstall = 1e300\n", "lanes.a.stall must be a number of seconds above 0"),
        (b"cloud_max_parallel = 1000\n", "cloud_max_parallel must be a whole number from 1 to 64"),
        (b"x = 1\n" + b"# padding\n" * 120_000, "larger than 1024 KiB"),
    ],
)
def test_a_bad_wf_toml_is_named(wf: WfRunner, data: bytes, said: str) -> None:
    _toml(wf, data)
    r = wf("list")
    assert r.code == 1 and said in r.err and "wf.toml" in r.err, r.err
    assert "internal error" not in r.err


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_wf_toml_that_is_no_file_is_refused_without_waiting(wf: WfRunner, kind: str) -> None:
    """A FIFO would hang every command (nobody writes to it); /dev/zero would never end."""
    path = wf.root / "wf.toml"
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    r = wf.proc("list")  # a real process: a hang would end in the runner's timeout
    assert r.code == 1 and "wf.toml: is a" in r.err and "not a file" in r.err, r.err


def test_wf_config_refuses_a_negative_value_by_name(wf: WfRunner) -> None:
    r = wf("config", "lock_timeout", "-1")
    assert r.code == 1 and "lock_timeout must be a number from 0 to 86400, not -1" in r.err, r.err
    assert "lock_timeout = 10" in (wf.root / "wf.toml").read_text()  # nothing written


def test_wf_config_edits_no_file_it_would_refuse_to_read(wf: WfRunner) -> None:
    _toml(wf, b"\xef\xbb\xbfgate = ''\n")
    r = wf("config", "gate", "pytest -q")
    assert r.code == 1 and "BOM" in r.err
    assert (wf.root / "wf.toml").read_bytes().startswith(b"\xef\xbb\xbf")


def test_a_tasks_file_that_links_to_itself_is_named(wf: WfRunner) -> None:
    (wf.root / "TASKS.md").unlink()
    (wf.root / "TASKS.md").symlink_to("TASKS.md")
    r = wf("list")
    assert r.code == 1 and "cannot be resolved" in r.err and "internal error" not in r.err, r.err


def test_check_names_a_main_branch_that_does_not_exist(wf: WfRunner) -> None:
    wf.ok("config", "main", "nosuch")
    r = wf("check")
    assert r.code == 1 and "main = 'nosuch' names no branch" in r.out, r.out
    wf.ok("config", "main", "main")
    assert "names no branch" not in wf.ok("check")


def test_init_refuses_a_bare_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    before = sorted(p.name for p in bare.iterdir())
    r = WfRunner(bare, capsys)("init")
    assert r.code == 1 and "bare repository" in r.err and "git clone" in r.err, r.err
    assert sorted(p.name for p in bare.iterdir()) == before  # nothing written among git's files
    r = WfRunner(bare / "refs", capsys)("init")  # from a folder inside it too
    assert r.code == 1 and "bare repository" in r.err


def test_help_lists_every_exit_code() -> None:
    out = subprocess.run([sys.executable, "-m", "wf", "--help"], capture_output=True, text=True).stdout
    for code in ("0 ok", "1 error", "2 usage", "3 bug", "4 a person", "5 gave up", "130 interrupted"):
        assert code in " ".join(out.split()), code


def _fenced_backlog(inserted: bool) -> str:
    text = "# Tasks\n\n## a: first\nModel: sonnet\nDone: `true`\n\n"
    if inserted:
        text += "```\npasted, never closed\n\n"
    for i in range(12):
        text += f"## t{i}: task {i}\nModel: sonnet\nDone: `true`\n\n"
    return text + "## z: last\nModel: sonnet\nDone: `true`\n\nAn example:\n```\n## not: a task\n```\n"


def test_check_fails_when_one_inserted_fence_hides_tasks(wf: WfRunner) -> None:
    """One fence typed into a task pairs with the opening of a later example block: the
    tasks between vanish, and the example's closing fence is left open. wf check names
    the fence's line and the hidden tasks, and exits 1."""
    (wf.root / "TASKS.md").write_text(_fenced_backlog(inserted=False))
    assert "14 tasks" in wf.ok("check")  # an example block with a heading inside is fine
    (wf.root / "TASKS.md").write_text(_fenced_backlog(inserted=True))
    r = wf("check")
    assert r.code == 1, r.out
    assert "TASKS.md:7: error: code fences are out of step" in r.out
    assert "hides 13 '## ' line(s) (t0, t1, t2, t3, t4 and 8 more)" in r.out


def test_an_unwritable_state_folder_is_said_once_and_the_cost_line_kept(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME is a file (no state folder can be made): wf usage --log still writes the
    project's cost line, and says once why wf usage --report will not find the project."""
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(
        '{"type":"assistant","timestamp":"2026-01-01T00:00:00Z","message":{"id":"m1","model":"claude-sonnet-4-6",'
        '"usage":{"input_tokens":10,"output_tokens":5}}}\n'
    )
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(transcript))  # a file: nothing can be made below it
    r = wf("usage", "--log", "--file", str(transcript))
    assert r.code == 0, r.err
    assert r.err.count("wf's state folder") == 1 and "cannot be made" in r.err, r.err
    assert "wf usage --report across projects misses it" in r.err
    assert (wf.root / "out" / "wf-cost.log").read_text().count("\n") == 1


def test_the_crash_log_goes_to_the_projects_own_folder_without_a_state_folder(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug (exit 3) keeps its traceback in the project's .wf/ when no state folder can
    be made, not in a shared temp folder."""
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {"HOME": str(home)}
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from wf.cli.base import _crash_log; print(_crash_log(RuntimeError('x')))"],
        cwd=wf.root, capture_output=True, text=True, env={**{k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}, **env},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).parent == wf.root / ".wf", r.stdout


def test_orch_run_says_once_that_the_state_folder_cannot_be_written(wf: WfRunner, tmp_path: Path) -> None:
    from tests.orch.test_orch import Orch, lanes_toml, task

    o = Orch(wf)
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {**{k: v for k, v in o.env.items() if k != "XDG_STATE_HOME"}, "HOME": str(home)}
    r = subprocess.run(
        [sys.executable, "-m", "wf", "orch", "run", "a"], cwd=o.root, env=env, capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("wf's state folder") == 1 and "cost lines still go to out/wf-cost.log" in r.stdout
    assert o.archived() == ["a1"]  # the night goes on without it
