"""Orchestration records that cannot be trusted (a hold on a handed-back task, a gate
result) are reported, never read as "none", and moved aside by ``wf doctor --fix``."""

from __future__ import annotations

import pytest

from tests.conftest import WfRunner, git
from tests.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def test_a_corrupt_hold_record_is_reported_and_moved_aside(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    held = o.root / ".wf" / "orch" / "held" / "a1.json"
    held.parent.mkdir(parents=True)
    held.write_text('{"id": "a1", "digest": 5}')
    r = o.wf("orch", "pick", "a")
    assert r.code == 1 and "corrupt record" in r.err and "a1.json" in r.err
    assert o.status("a1") == "pending"  # nothing was claimed
    out = o.wf("doctor").out
    assert "held: a1: hold record (the loop may pick the task again) cannot be trusted" in out
    assert "[fixed]" not in out and held.exists()
    out = o.wf("doctor", "--fix").out
    assert "held: a1:" in out and "moved to a1.json.corrupt-" in out and "[fixed]" in out
    assert not held.exists() and list(held.parent.glob("a1.json.corrupt-*"))
    assert "Task: a1" in o.wf.ok("orch", "pick", "a")


def test_a_corrupt_gate_result_is_reported_never_read_as_green(o: Orch) -> None:
    o.setup(lanes_toml("a", gate="true"), task("a1", "a", "write a1.txt x"))
    sha = git(o.root, "rev-parse", "main").strip()
    gate_dir = o.root / ".wf" / "gate"
    gate_dir.mkdir(parents=True)
    (gate_dir / f"{sha}.log").write_text("")
    (gate_dir / f"{sha}.json").write_text("{not json")
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", rep.commit, "--no-pick")
    assert r.code == 1 and "corrupt record" in r.err and "wf doctor --fix" in r.err
    out = o.wf("doctor").out
    assert f"gate: {sha}: gate result (no fix task will come of it) cannot be trusted: not JSON" in out
    out = o.wf("doctor", "--fix").out
    assert f"gate: {sha}:" in out and "[fixed]" in out
    assert not (gate_dir / f"{sha}.json").exists() and not (gate_dir / f"{sha}.log").exists()
    assert len(list(gate_dir.glob(f"{sha}.*.corrupt-*"))) == 2
    out = o.wf.ok("orch", "post", "a", "--result", "done", "--commit", rep.commit, "--no-pick")
    assert out.startswith("a1: done as ")
