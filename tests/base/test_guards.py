"""Guards that only a commit id gets through: a value that git would resolve (HEAD, a
branch) or that would split or forge a line of the archive is refused, nothing written."""

from __future__ import annotations

import pytest

from tests.conftest import WfRunner
from tests.orch.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


@pytest.mark.parametrize(
    "bad", ["x\ny", "abc -- Injected title", "HEAD", "main", "abc1234 ", "ABC\u00e91234"]
)
def test_done_commit_takes_only_a_commit_id(wf: WfRunner, bad: str) -> None:
    wf.ok("add", "A task", "--id", "alpha", "--model", "sonnet", "--done", "true")
    tasks = (wf.root / "TASKS.md").read_bytes()
    r = wf("done", "alpha", "--commit", bad)
    assert r.code == 1 and "bad commit" in r.err, r.err
    assert (wf.root / "TASKS.md").read_bytes() == tasks
    assert not (wf.root / "DONE.md").exists() or "alpha" not in (wf.root / "DONE.md").read_text()


@pytest.mark.parametrize("bad", ["HEAD", "main", "a/a1", "HEAD~0"])
def test_orch_post_commit_takes_only_a_commit_id(o: Orch, bad: str) -> None:
    """git would resolve each of these; the post refuses them before it changes anything."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    before = ((o.root / "TASKS.md").read_bytes(), (o.root / ".wf" / "orch" / "a.json").read_bytes())
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", bad)
    assert r.code == 1 and f"no commit {bad}" in r.err, r.err
    after = ((o.root / "TASKS.md").read_bytes(), (o.root / ".wf" / "orch" / "a.json").read_bytes())
    assert before == after
