"""The agent CLIs' versions (issue 21, items 6e and 7): the tested versions kept in one
place (wf/adapters/versions.py), ``wf doctor`` saying when an installed tool is newer,
and the cloud lane's minimum claude, checked by ``wf doctor`` and at ``wf cloud send``.

A version other than the pinned one cannot be installed here, so a small wrapper in
front of the fakes answers ``--version`` with it (the fakes replay the pinned tools)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cloud.test_cloud import FAKES as CLOUD_FAKES
from tests.cloud.test_cloud import Cloud, task
from tests.conftest import WfRunner
from tests.workers.test_workers import FAKES
from wf.adapters import versions
from wf.workers import supervise

FIXTURES = Path(__file__).parent.parent / "fixtures" / "real"


def answering(tmp: Path, tool: str, version: str, fakes: Path) -> Path:
    """A folder whose ``tool`` says ``version`` to --version and is the fake otherwise."""
    folder = tmp / f"{tool}-{'.'.join(map(str, versions.parse(version) or ()))}"
    folder.mkdir()
    script = folder / tool
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{version}"; exit 0; fi\nexec {fakes / tool} "$@"\n'
    )
    script.chmod(0o755)
    return folder


@pytest.fixture(autouse=True)
def fresh_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervise, "_versions", {})  # asked once per process: ask again here


def test_every_tested_version_has_its_recordings() -> None:
    """TESTED is the one list: the recordings (and so the fakes) are of these versions."""
    for tool, (package, version) in versions.TESTED.items():
        manifest = FIXTURES / f"{tool}-{version}" / "manifest.json"
        assert manifest.is_file(), f"{tool} {version}: run scripts/record-real-tools"
        assert f'"version": "{version}"' in manifest.read_text() and package.startswith(("@", "opencode"))


def test_doctor_says_when_a_tool_is_newer_than_the_newest_tested(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newer = answering(tmp_path, "claude", "2.1.400 (Claude Code)", FAKES)
    monkeypatch.setenv("PATH", os.pathsep.join([str(newer), str(FAKES), os.environ["PATH"]]))
    out = wf("doctor").out
    assert (
        "adapter: claude: 2.1.400 is newer than 2.1.332, the newest version wf was tested with: "
        "its flags and events may have moved" in out
    ), out
    assert "adapter: claude: 2.1.400 (Claude Code) at " in out
    assert out.count("is newer than") == 1  # the fake codex and opencode are the tested versions


def test_doctor_says_nothing_of_the_tested_versions(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = answering(tmp_path, "codex", "codex-cli 0.170.9", FAKES)
    monkeypatch.setenv("PATH", os.pathsep.join([str(older), str(FAKES), os.environ["PATH"]]))
    out = wf("doctor").out
    assert "adapter: codex: codex-cli 0.170.9 at " in out and "is newer than" not in out, out


@pytest.mark.parametrize(("answer", "cloud", "flagged"), [
    ("2.1.197 (Claude Code)", True, True),
    ("2.1.197 (Claude Code)", False, False),
    ("2.1.332 (Claude Code)", True, False),
])  # fmt: skip
def test_doctor_checks_the_claude_of_the_cloud_lane(
    wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, cloud: bool, flagged: bool
) -> None:
    folder = answering(tmp_path, "claude", answer, FAKES)
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), str(FAKES), os.environ["PATH"]]))
    (wf.root / "wf.toml").write_text(f"cloud = {'true' if cloud else 'false'}\n")
    r = wf("doctor")
    said = (
        "cloud: claude: claude 2.1.197 is older than 2.1.332, the oldest the cloud lane works with "
        "(2.1.197's headless --teleport prints nothing); update it: npm install -g @anthropic-ai/claude-code"
    )
    assert (said in r.out) is flagged, r.out
    assert ("cloud: claude:" in r.out) is flagged


def test_cloud_send_refuses_a_claude_too_old_before_claiming(
    c: Cloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c.setup(task("big", "opus"))
    old = answering(tmp_path, "claude", "2.1.197 (Claude Code)", CLOUD_FAKES)
    monkeypatch.setenv("PATH", f"{old}{os.pathsep}{os.environ['PATH']}")
    r = c.wf("cloud", "send")
    assert r.code == 1, r.out + r.err
    assert (
        "stop lane cloud: claude is too old for the cloud lane: claude 2.1.197 is older than 2.1.332" in r.out
    )
    assert c.status("big") == "pending" and not (c.root / ".wf" / "cloud").exists()  # nothing claimed
    assert not c.sessions.exists()  # no session was created
    monkeypatch.setenv("PATH", os.environ["PATH"].replace(f"{old}{os.pathsep}", "", 1))
    assert "to cloud session" in c.wf.ok("cloud", "send")  # the pinned 2.1.332 (the fake) sends


@pytest.fixture
def c(wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return Cloud(wf, tmp_path, monkeypatch)


def test_manual_the_2_1_332_name_of_the_default_mode_is_taken(wf: WfRunner, tmp_path: Path) -> None:
    """wf.toml and a manifest may say `manual` (2.1.332's --help lists it where older
    versions said `default`); it reaches claude's argv as given. (tests/adapters/test_real_failures.py
    runs the real 2.1.332 with it.)"""
    from tests.workers.test_workers import Workers

    (wf.root / "wf.toml").write_text('[lanes.s]\nmodel = "sonnet"\npermission_mode = "manual"\n')
    r = wf("check")
    assert "permission_mode" not in r.out + r.err, r.out
    (wf.root / "wf.toml").write_text('[lanes.s]\nmodel = "sonnet"\npermission_mode = "ask"\n')
    r = wf("check")
    assert r.code == 1 and "lanes.s.permission_mode 'ask' is not a claude permission mode" in r.out + r.err
    (wf.root / "wf.toml").unlink()
    w = Workers(wf.root, tmp_path)
    manifest = tmp_path / "units.json"
    manifest.write_text('{"units": [{"id": "m1", "adapter": "claude", "model": "sonnet", "prompt": "hello", '
                        '"permission_mode": "manual"}]}')  # fmt: skip
    p = w.run("run", str(manifest), "--run", "r1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert any("--permission-mode=manual" in argv for argv in w.argv_calls())


def test_an_unreadable_claude_version_sends_and_doctor_says_so(
    wf: WfRunner, c: Cloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --version with no version in it (a probe killed by a batch ending around it)
    refuses nothing at send; wf doctor reports it while the cloud lane is on."""
    c.setup(task("big", "opus"))
    mute = answering(tmp_path, "claude", "", CLOUD_FAKES)
    monkeypatch.setenv("PATH", f"{mute}{os.pathsep}{os.environ['PATH']}")
    assert "to cloud session" in c.wf.ok("cloud", "send")
    assert "cloud: claude: claude --version gave no answer; update it" in wf("doctor").out
