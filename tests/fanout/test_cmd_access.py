"""A ``cmd`` unit runs its program as it is: it has no sandbox, network, permission or
MCP switch, so a unit that asks for other than the default access is refused (exit 1,
nothing run, no unit recorded) rather than run wider than its record says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.workers.test_workers import Workers, manifest

WRITES = ["sh", "-c", "cat >/dev/null; touch WROTE; echo wrote"]


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "wf init")
    return Workers(wf.root, tmp_path)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--sandbox", "read-only", "--no-network"), "sandbox"),
        (("--sandbox", "danger-full-access"), "sandbox"),
        (("--network",), "network"),
        (("--permission-mode", "plan"), "permission_mode"),
    ],
)
def test_a_cmd_unit_refuses_access_settings_it_cannot_enforce(
    w: Workers, flags: tuple[str, ...], named: str
) -> None:
    r = w.run("dispatch", "d1", "ro1", "--adapter", "cmd", "--cmd", "sh -c 'cat >/dev/null; touch WROTE'",
              "--no-contract", "--cwd", str(w.root), *flags, "--prompt", "x")  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert f"unit ro1: the cmd adapter runs its program as it is, with no sandbox, network or permission switch: {named} would not be enforced" in r.stderr  # fmt: skip
    assert not (w.root / "WROTE").exists()
    assert w.run("runs").stdout.startswith("no runs yet")


def test_a_cmd_unit_with_the_default_access_runs(w: Workers, tmp_path: Path) -> None:
    r = w.run("dispatch", "d1", "ok1", "--adapter", "cmd", "--cmd", "sh -c 'cat >/dev/null; touch WROTE'",
              "--no-contract", "--cwd", str(w.root), "--sandbox", "workspace-write", "--no-network",
              "--permission-mode", "acceptEdits", "--prompt", "x")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (w.root / "WROTE").exists()
    m = manifest(tmp_path / "m.json", [{"id": "m1", "prompt": "x", "sandbox": "read-only"}], adapter="cmd",
                 cmd=WRITES)  # fmt: skip
    r = w.run("run", str(m), "--run", "m")
    assert r.returncode == 1 and "unit m1: the cmd adapter" in r.stderr and "sandbox would not be" in r.stderr
    m = manifest(
        tmp_path / "m.json", [{"id": "m1", "prompt": "x", "isolate_mcp": True}], adapter="cmd", cmd=WRITES
    )
    r = w.run("run", str(m), "--run", "m")
    assert r.returncode == 1 and "isolate_mcp would not be enforced" in r.stderr
    m = manifest(tmp_path / "m.json", [{"id": "m1", "prompt": "x"}], adapter="cmd", cmd=WRITES)
    r = w.run("run", str(m), "--run", "m")
    assert r.returncode == 0, r.stderr
