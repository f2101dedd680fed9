"""tests/wfproc.py: a forked ``python -m wf`` must be indistinguishable from an exec'd one
for everything the tests read: exit status, both streams, stdin, cwd, environment,
arguments that are not UTF-8, a signal, a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import wfproc
from tests.conftest import git

WF = [sys.executable, "-m", "wf"]


def both(
    *args: str, **kwargs: object
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    before = wfproc.started
    forked = wfproc.run([*WF, *args], capture_output=True, text=True, timeout=60, **kwargs)
    assert wfproc.started == before + 1, "the command did not go through the server"
    execd = subprocess.run([*WF, *args], capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]
    return forked, execd


def same(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    forked, execd = both(*args, **kwargs)
    assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr)
    return forked


@pytest.fixture
def project(repo: Path) -> Path:
    subprocess.run([*WF, "init"], cwd=repo, check=True, capture_output=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wf init")
    return repo


def test_exit_codes_and_both_streams_match_an_exec(project: Path) -> None:
    assert same("--version").returncode == 0
    assert same("no-such-command").returncode == 2
    assert same("show", "nosuch", cwd=project).returncode == 1
    r = same("list", "--json", cwd=project)
    assert r.returncode == 0 and r.stdout.startswith("[")


def test_stdin_cwd_and_environment_reach_the_command(project: Path) -> None:
    r = wfproc.run([*WF, "add", "From stdin", "--id", "s1", "--lane", "sonnet", "--body", "-"], cwd=project,
                   input="Body read from stdin.\n", capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Body read from stdin." in same("show", "s1", cwd=project).stdout
    sub = project / "sub"
    sub.mkdir()
    assert same("list", cwd=sub).returncode == 0  # found from a subfolder, as with an exec
    r = same("edit", "s1", cwd=project, env=dict(os.environ, EDITOR="/no/such-editor", VISUAL=""))
    assert r.returncode != 0 and "/no/such-editor" in r.stderr


def test_arguments_that_are_not_utf8_arrive_as_an_exec_gets_them(project: Path) -> None:
    bad = os.fsdecode(b"caf\xe9")
    r = same("show", bad, cwd=project)
    assert r.returncode != 0


def test_each_command_is_its_own_process_and_a_timeout_kills_it(project: Path, tmp_path: Path) -> None:
    pids = []
    for _ in range(2):
        r = wfproc.run(
            [*WF, "res", "run", "--", "sh", "-c", "echo $PPID"], capture_output=True, text=True, cwd=project
        )
        assert r.returncode == 0, r.stderr
        pids.append(int(r.stdout.split()[-1]))
    assert len(set(pids)) == 2 and os.getpid() not in pids
    flag = tmp_path / "started"
    with pytest.raises(subprocess.TimeoutExpired):
        wfproc.run(
            [*WF, "res", "run", "--", "sh", "-c", f"echo $PPID > {flag}; exec sleep 60"],
            capture_output=True,
            text=True,
            cwd=project,
            timeout=3,
        )
    wf_pid = int(flag.read_text())
    assert not Path(f"/proc/{wf_pid}").exists() or "Z" in Path(f"/proc/{wf_pid}/stat").read_text().split()[2]


def test_an_interpreter_setting_that_differs_goes_to_a_real_exec(project: Path) -> None:
    before = wfproc.started
    r = wfproc.run(
        [*WF, "--version"], capture_output=True, text=True, env=dict(os.environ, PYTHONIOENCODING="latin-1")
    )
    assert r.returncode == 0 and wfproc.started == before
    r = wfproc.run([*WF, "--version"], capture_output=True, text=True, env=dict(os.environ, WF_TEST_EXEC="1"))
    assert r.returncode == 0 and wfproc.started == before + 1  # the command's env is not the switch


def test_a_forked_command_names_itself_in_its_records_not_the_server(project: Path) -> None:
    """What wf computes of its own process (here a unit's supervisor pid and start time,
    which readers use to tell a live supervisor from a reused pid) is the command's, not
    the server's it was forked from."""
    cmd = "sh -c 'awk \"{print \\$22}\" /proc/$PPID/stat'"  # the start time of its parent, wf
    r = wfproc.run(
        [*WF, "dispatch", "zr", "u1", "--adapter", "cmd", "--cmd", cmd, "--prompt", "x"],
        capture_output=True, text=True, cwd=project, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    unit = project / ".wf" / "runs" / "zr" / "u1"
    st = json.loads((unit / "status.json").read_text())
    assert st["supervisor"] != wfproc._zygote().proc.pid
    assert st["supervisor_start"] == int((unit / "output.txt").read_text().split()[-1])


def test_git_location_variables_are_dropped_as_an_exec_drops_them(project: Path) -> None:
    """A GIT_DIR in wf's environment (a hook's or alias's) must not point wf's git at another
    repository: wf drops it from each git child's environment, forked or exec'd alike."""
    r = same("wt", "list", cwd=project, env=dict(os.environ, GIT_DIR="/nonexistent/.git"))
    assert r.returncode == 0, r.stderr


def test_stdin_bytes_bytes_arguments_and_a_missing_cwd_as_subprocess(project: Path, tmp_path: Path) -> None:
    # stdin as CPython gives it, without newline translation: wf sees the lone CR and refuses
    r = same(
        "add", "T", "--id", "x1", "--lane", "sonnet", "--body", "-", cwd=project, input="one\r\ntwo\rthree\n"
    )
    assert r.returncode == 1 and "carriage return" in r.stderr
    assert wfproc.run([*WF, b"--version"], capture_output=True).returncode == 0
    for runner in (wfproc.run, subprocess.run):
        with pytest.raises(FileNotFoundError):
            runner([*WF, "--version"], cwd=tmp_path / "nowhere", capture_output=True)


def test_the_server_has_the_runs_hash_seed_and_no_command_sees_it(project: Path) -> None:
    """One hash seed per run, drawn at random and printed (a failure replays with
    WF_TEST_HASHSEED): the server starts with it, a command that sets no PYTHONHASHSEED is
    still forked (an exec would draw its own), and the seed is not in its environment."""
    server = wfproc._zygote().proc.pid
    environ = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    assert f"PYTHONHASHSEED={wfproc.HASHSEED}".encode() in environ
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    before = wfproc.started
    r = wfproc.run(
        [*WF, "res", "run", "--", "sh", "-c", "echo seed=${PYTHONHASHSEED-unset}"],
        capture_output=True, text=True, cwd=project, env=env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert wfproc.started == before + 1 and "seed=unset" in r.stdout


def _wfproc_in_a_new_interpreter(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("WF_TEST_")}
    r = subprocess.run(
        [sys.executable, "-c", f"import os, sys\nfrom tests import wfproc\n{code}"],
        cwd=wfproc.ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_runs_hash_seed_is_drawn_anew_and_replayed_with_WF_TEST_HASHSEED() -> None:
    drawn = {_wfproc_in_a_new_interpreter("print(wfproc.HASHSEED)") for _ in range(2)}
    assert len(drawn) == 2 and all(0 < int(s) < 2**32 for s in drawn)
    assert _wfproc_in_a_new_interpreter("print(wfproc.HASHSEED)", WF_TEST_HASHSEED="4242") == "4242"


def test_WF_TEST_EXEC_holds_for_the_whole_run_though_each_test_drops_WF_variables() -> None:
    """The switch is read as the suite starts: a test's sealed environment (no WF_*
    variable) must not turn a run asked to exec every command back to forking."""
    code = (
        "os.environ.pop('WF_TEST_EXEC')\n"
        "print(wfproc._forkable([sys.executable, '-m', 'wf', 'list'], {'capture_output': True}))"
    )
    assert _wfproc_in_a_new_interpreter(code, WF_TEST_EXEC="1") == "False"
    assert _wfproc_in_a_new_interpreter(code.replace("os.environ.pop('WF_TEST_EXEC')\n", "")) == "True"
