"""The shared remote's primitives (wf/trees/remote.py) against a real bare repository
served by git daemon on loopback: every write a compare-and-swap, a lost lease said per
ref, an unreachable remote a typed fault with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.machines import Machine, Shared
from wf.base.errors import WfError
from wf.trees import remote
from wf.trees.remote import PushOutcome, RemoteError, RemoteFault, Update

TASKS = "# Tasks\n\n## t1: One\nModel: sonnet\nDone: true\n"
REF = "refs/wf/claims/t1"


def claim_commit(m: Machine, text: str) -> str:
    tree = m.git("write-tree").strip()
    return m.git("commit-tree", tree, "-m", text).strip()


def test_of_two_creations_of_one_ref_exactly_one_wins(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        b = shared.machine("b")
        ca, cb = claim_commit(a, "claim by a"), claim_commit(b, "claim by b")
        [won] = remote.push(a.root, "origin", [Update(ca, REF, "")])
        [lost] = remote.push(b.root, "origin", [Update(cb, REF, "")])
        assert (won.outcome, lost.outcome) == (PushOutcome.OK, PushOutcome.STALE)
        assert shared.refs()[REF] == ca
        assert remote.ls_remote(b.root, "origin", "refs/wf/claims") == {REF: ca}
        # release is a lease on the sha last seen: b's stale view cannot delete a's claim
        [stale] = remote.push(b.root, "origin", [Update(None, REF, cb)])
        assert stale.outcome is PushOutcome.STALE and shared.refs()[REF] == ca
        [gone] = remote.push(b.root, "origin", [Update(None, REF, ca)])
        assert gone.outcome is PushOutcome.OK and REF not in shared.refs()


def test_an_unreachable_remote_is_a_typed_fault_and_writes_nothing(tmp_path: Path) -> None:
    with Shared(tmp_path, daemon=True) as shared:
        a = shared.seed("a", TASKS)
        ca = claim_commit(a, "claim by a")
        shared.stop()
        with pytest.raises(RemoteError) as e:
            remote.push(a.root, "origin", [Update(ca, REF, "")])
        assert e.value.fault is RemoteFault.UNREACHABLE
        with pytest.raises(RemoteError) as e2:
            remote.ls_remote(a.root, "origin", "refs/wf/claims")
        assert e2.value.fault is RemoteFault.UNREACHABLE
        with pytest.raises(RemoteError) as e3:
            remote.fetch(a.root, "nowhere", "refs/heads/main")
        assert e3.value.fault is RemoteFault.NO_REMOTE
    assert REF not in shared.refs()


@pytest.mark.parametrize(
    "ref", ["refs/wf/claims/../x", "heads/x", "refs/x/-y;", "refs/wf/claims/t1.lock", "--mirror"]
)
def test_refs_and_shas_are_checked_before_git_sees_them(tmp_path: Path, ref: str) -> None:
    with Shared(tmp_path) as shared:
        a = shared.seed("a", TASKS)
        with pytest.raises(WfError, match="bad ref name"):
            remote.push(a.root, "origin", [Update("0" * 40, ref, "")])
        with pytest.raises(WfError, match="not a commit id"):
            remote.push(a.root, "origin", [Update("--force", REF, "")])
