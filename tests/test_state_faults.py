"""Every state file wf keeps is read through one typed reader (wf.records): a record that
cannot be trusted is named with what is wrong and what ``wf doctor --fix`` does, never
read as "none" and never a traceback (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def _picked(o: Orch) -> Path:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert o.wf.ok("orch", "pick", "a").startswith("spawn:")
    return o.root / ".wf" / "orch" / "a.json"


def test_ctx_never_prints_a_worktree_outside_wfs_trees(o: Orch) -> None:
    rec = _picked(o)
    assert f"Worktree: {o.root / '.worktrees'}" in o.wf.ok("ctx", "a1")
    data = json.loads(rec.read_text())
    rec.write_text(json.dumps({**data, "worktree": "/etc"}))
    r = o.wf("ctx", "a1")
    assert r.code == 1 and "/etc" not in r.out
    assert str(rec) in r.err and "not one of wf's trees" in r.err and "wf doctor --fix" in r.err
    assert "not one of wf's trees" in o.wf.ok("orch", "status")
    # a relative escape is the same fault
    rec.write_text(json.dumps({**data, "worktree": str(o.root / ".worktrees" / ".." / "..")}))
    assert o.wf("ctx", "a1").code == 1
    out = o.wf("doctor", "--fix").out
    assert "orch: a: record cannot be trusted" in out and not rec.exists()


def test_lanes_shows_a_wrong_typed_lane_record_as_corrupt(o: Orch) -> None:
    rec = _picked(o)
    data = json.loads(rec.read_text())
    for bad in ({"id": 7}, {"pid": "x"}, {"crashes": -1}, {"started_at": float("inf")}):
        rec.write_text(json.dumps({**data, **bad}))
        r = o.wf("lanes")
        assert r.code == 0, r.err
        assert "corrupt" in r.out and str(rec) in r.out and "wf doctor --fix" in r.out
        row = json.loads(o.wf.ok("lanes", "--json"))[0]
        assert row["active"] is None and str(rec) in row["corrupt"]
        shown = json.loads(o.wf.ok("show", "a1", "--json"))
        assert shown["hold"]["kind"] == "corrupt"


def test_a_record_nan_is_corrupt(wf: WfRunner) -> None:
    from wf import records
    from wf.holds import LaneRecord

    path = wf.root / "x.json"
    path.write_text('{"id": "a", "lane": "a", "model": "m", "worktree": null, "branch": "b", "base": null,'
                    ' "started": "", "state": "ready", "started_at": NaN}')  # fmt: skip
    try:
        records.load(LaneRecord, path)
    except records.CorruptRecord as e:
        assert "NaN" in e.why
    else:
        raise AssertionError("NaN read as a number")
