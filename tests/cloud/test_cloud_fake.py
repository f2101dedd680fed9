"""The cloud fake against the real claude's recordings, and wf's parsers on them.

tests/fixtures/real/claude-2.1.332/cloud/ holds what the real Claude Code 2.1.332 said
(offline, not logged in or with a made-up login; recorded by record.py there). The fake
must say the same for the same argv; the real backend's parsers must read the real
outputs as the refusals they are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git
from wf.cloud import claude as real
from wf.cloud.backend import CloudRefused, Refusal, SessionState, plain

ROOT = Path(__file__).resolve().parent.parent.parent
FAKE = ROOT / "tests" / "fakes" / "cloud" / "claude"
REC = ROOT / "tests" / "fixtures" / "real" / "claude-2.1.332" / "cloud"


def rec(name: str) -> dict[str, Any]:
    return dict(json.loads((REC / f"{name}.json").read_text()))


def words(text: str) -> str:
    return " ".join(plain(text).split())


def make_repo(tmp: Path, kind: str) -> Path:
    repo = tmp / "app"
    repo.mkdir()
    if kind == "not-git":
        return repo
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "initial")
    if kind in ("github", "dirty"):
        git(repo, "remote", "add", "origin", "https://github.com/example/app.git")
    if kind == "dirty":
        (repo / "README.md").write_text("changed\n")
    return repo


def seed(r: dict[str, Any]) -> None:
    creds = Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".credentials.json"
    if r["seed"] == "fake-login":
        creds.parent.mkdir(parents=True, exist_ok=True)
        creds.write_text("{}")


PRINT_CASES = [
    "create-nopty",
    "create-print",
    "create-print-stream-json",
    "send-print-json",
    "send-print-json-offline",
    "send-print-stream-json",
    "send-print-no-prompt",
    "teleport-print-dirty",
    "teleport-print-stream-json",
    "teleport-print-no-remote",
    "teleport-print-not-git",
    "teleport-print-offline",
    "teleport-print-not-git",
    "version",
]


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]


@pytest.mark.parametrize("name", PRINT_CASES)
def test_fake_says_what_the_real_one_said(name: str, tmp_path: Path) -> None:
    r = rec(name)
    assert r["version"] == "2.1.332" and r["pty"] is False
    repo = make_repo(tmp_path, r["repo"])
    seed(r)
    env = dict(os.environ, WF_FAKE_CLOUD=str(tmp_path / "cloud"))
    if r["seed"] == "fake-login":
        env["WF_FAKE_CLOUD_OFFLINE"] = "1"  # the recording had no network
    p = subprocess.run(
        [str(FAKE), *r["argv"][1:]], cwd=repo, env=env, input="", capture_output=True, text=True, timeout=30
    )
    assert p.returncode == r["exit"]
    assert p.stderr == r["stderr"]
    if r["stdout"].startswith('{"type"'):
        want, got = _events(r["stdout"]), _events(p.stdout)
        keys = ("type", "subtype", "is_error", "num_turns", "total_cost_usd", "errors")
        assert [{k: e.get(k) for k in keys} for e in got] == [{k: e.get(k) for k in keys} for e in want]
    else:
        assert p.stdout == r["stdout"]


PTY_CASES = [
    "create-pty-github-onboarded",
    "create-pty-no-remote-onboarded",
    "create-pty-not-git-onboarded",
    "create-pty-github-offline",
    "create-pty-no-remote-offline",
    "create-pty-not-git-offline",
    "create-pty-dirty-offline",
]


def _error_part(text: str) -> str:
    w = words(text)
    return w[w.index("Error:") :] if "Error:" in w else w


@pytest.mark.parametrize("name", PTY_CASES)
def test_fake_under_a_pty_says_what_the_real_one_said(name: str, tmp_path: Path) -> None:
    r = rec(name)
    assert r["pty"] is True
    repo = make_repo(tmp_path, r["repo"])
    seed(r)
    os.environ["WF_FAKE_CLOUD"] = str(tmp_path / "cloud")
    if r["seed"] == "fake-login":
        os.environ["WF_FAKE_CLOUD_OFFLINE"] = "1"
    code, out = real.run_pty([str(FAKE), *r["argv"][1:]], repo, 30)
    assert code == r["exit"] == 1
    assert _error_part(out) == _error_part(r["stdout"])


# ------------------------------------------------------------------ wf's parsers on the real outputs


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("create-pty-github", Refusal.OFFLINE),  # a first run, offline
        ("create-pty-github-untrusted", Refusal.NEEDS_SETUP),  # it waits to be trusted
        ("create-pty-github-onboarded", Refusal.NOT_LOGGED_IN),
        ("create-pty-not-git-onboarded", Refusal.NOT_LOGGED_IN),
        ("create-pty-github-offline", Refusal.OFFLINE),
        ("create-nopty", Refusal.NEEDS_TERMINAL),
        ("create-print", Refusal.OTHER),
    ],
)
def test_create_refusals_read_from_the_real_output(name: str, kind: Refusal) -> None:
    r = rec(name)
    with pytest.raises(CloudRefused) as e:
        real.parse_create(r["stdout"] + r["stderr"])
    assert e.value.kind is kind
    assert "Error" not in e.value.words[:6]


def test_create_success_in_the_shape_the_binary_prints() -> None:
    # the lines of 2.1.332's interactive create (process.stdout.write in the binary)
    out = (
        "\x1b[2mCreated cloud session: Fix the flaky test\r\n"
        "View: https://claude.ai/code/session_01Ab?from=cli&m=0\r\n"
        "Resume with: claude --teleport session_01Ab\r\n"
    )
    s = real.parse_create(out)
    assert (s.id, s.title, s.url) == (
        "session_01Ab",
        "Fix the flaky test",
        "https://claude.ai/code/session_01Ab?from=cli&m=0",
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("teleport-print-dirty", Refusal.DIRTY_TREE),
        ("teleport-print-stream-json", Refusal.NOT_LOGGED_IN),
        ("teleport-print-offline", Refusal.OFFLINE),
    ],
)
def test_teleport_refusals_read_from_the_real_output(name: str, kind: Refusal) -> None:
    result, session = real.parse_stream(rec(name)["stdout"])
    assert result is not None and session is not None
    with pytest.raises(CloudRefused) as e:
        real.status_from(result, session)
    assert e.value.kind is kind


def test_state_from_answers() -> None:
    ok = {
        "type": "result",
        "is_error": False,
        "result": "result: done\ncommit: abc1234\nfollowups: -\nnote: ok",
    }
    assert real.status_from(ok, "s").state is SessionState.DONE
    assert real.status_from({**ok, "result": "**result:** running"}, "s").state is SessionState.RUNNING
    lost = real.status_from({**ok, "result": "I could not tell."}, "s")
    assert lost.state is SessionState.LOST and "four report lines" in lost.note
    gone = {
        "type": "result",
        "is_error": True,
        "subtype": "error_during_execution",
        "errors": ["Session not found"],
    }
    assert real.status_from(gone, "s").state is SessionState.LOST
    wip = real.status_from({**ok, "result": "result: wip\ncommit: -\nfollowups: -\nnote: half"}, "s")
    assert wip.state is SessionState.HANDBACK and wip.note == "half"


def test_the_github_remote_rule() -> None:
    from wf.cloud.backend import is_github

    for url in (
        "https://github.com/o/r.git",
        "git@github.com:o/r.git",
        "ssh://git@github.com/o/r",
        "https://github.com/o/r",
    ):
        assert is_github(url), url
    for url in (
        "https://gitlab.com/o/r.git",
        "/srv/git/r.git",
        "https://github.com.evil.io/o/r",
        "https://github.com/o",
    ):
        assert not is_github(url), url


# recordings the fake is not compared with, and why: wf never runs these (an interactive
# --teleport, auth status), or a first run offline (the parser test reads one)
NOT_REPLAYED = {
    "auth-status": "wf does not run claude auth status for the cloud lane",
    "create-pty-github": "a fresh config: the first-run check finds no network (-onboarded and -offline are replayed)",
    "create-pty-github-untrusted": "the trust question: the parser and question tests read it",
    "create-pty-no-remote": "a fresh config: the first-run check finds no network (-onboarded and -offline are replayed)",
    "create-pty-not-git": "a fresh config: the first-run check finds no network (-onboarded and -offline are replayed)",
    "create-pty-dirty": "a fresh config: the first-run check finds no network (-onboarded and -offline are replayed)",
    "teleport-pty-github": "wf teleports with -p only",
    "teleport-pty-github-onboarded": "wf teleports with -p only",
    "teleport-pty-github-offline": "wf teleports with -p only",
    "teleport-pty-dirty": "wf teleports with -p only",
    "teleport-pty-dirty-onboarded": "wf teleports with -p only",
    "teleport-pty-no-remote": "wf teleports with -p only",
}


def test_every_recording_is_replayed_or_says_why_not() -> None:
    names = {f.stem for f in REC.glob("*.json")}
    assert names - set(PRINT_CASES) - set(PTY_CASES) - set(NOT_REPLAYED) == set()
    assert set(NOT_REPLAYED) <= names and not set(NOT_REPLAYED) & (set(PRINT_CASES) | set(PTY_CASES))


def test_recordings_are_offline_and_sealed() -> None:
    for f in REC.glob("*.json"):
        r = json.loads(f.read_text())
        assert r["network"].startswith("none") and r["env"]["HOME"].startswith("<tmp>"), f.name
        assert re.search(r"/root|/home/", r["stdout"] + r["stderr"]) is None, f.name


@pytest.mark.timeout(30)
def test_a_create_that_waits_for_a_question_is_ended(tmp_path: Path) -> None:
    """The real claude waits forever at 'do you trust this folder' (recorded: killed after
    25 s); wf ends it once the question is on the screen and all went quiet."""
    screen = tmp_path / "screen.txt"
    screen.write_text(rec("create-pty-github-untrusted")["stdout"])
    prog = f"import sys, time; sys.stdout.write(open({str(screen)!r}).read()); sys.stdout.flush(); time.sleep(60)"
    start = __import__("time").monotonic()
    code, out = real.run_pty([sys.executable, "-c", prog], tmp_path, 25, until="Resume with:")
    assert code is None and __import__("time").monotonic() - start < 10
    with pytest.raises(CloudRefused) as e:
        real.parse_create(out)
    assert e.value.kind is Refusal.NEEDS_SETUP
