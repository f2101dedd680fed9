"""The cloud lane plugs into orch's pick through ``wf.orch.pick.CloudPlug`` (orch never
imports wf.cloud): every command that picks hands it in, and a pick on a ``cloud = true``
project without it is a bug said at once, never local lanes racing the cloud lane."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cloud.test_cloud import Cloud, c, task
from tests.cloud.test_cloud_batch import open_mark
from wf.base import project as projectmod
from wf.orch import report
from wf.orch.pick import pick

__all__ = ["c"]  # the fixture


def test_a_pick_on_a_cloud_project_without_the_cloud_lane_is_a_bug_and_claims_nothing(c: Cloud) -> None:
    c.setup(task("big", "opus", extra="Cloud: yes"))
    before = (c.root / "TASKS.md").read_bytes()
    with pytest.raises(RuntimeError, match="needs the cloud lane"):
        pick(projectmod.load(c.root), "opus")
    assert (c.root / "TASKS.md").read_bytes() == before
    assert not (c.root / ".wf" / "orch" / "opus.json").exists()


def test_the_next_pick_of_a_post_leaves_cloud_yes_tasks_to_the_batchs_cloud_lane(c: Cloud) -> None:
    """``wf orch post`` picks the lane's next task with the cloud lane plugged in too."""
    c.setup(task("small", "opus", "script: write small.txt x") + task("big", "opus", extra="Cloud: yes"))
    open_mark(c)
    prompt = c.wf.ok("orch", "pick", "opus")
    assert "Task: small" in prompt
    worker = subprocess.run(
        [sys.executable, "-m", "wf.scripted"], input=prompt, capture_output=True, text=True, env=c.env(),
        cwd=c.root, timeout=120,
    )  # fmt: skip
    rep = report.read_report(worker.stdout)
    assert rep is not None and rep.result == "done", worker.stdout + worker.stderr
    out = c.wf.ok("orch", "post", "opus", "--result", "done", "--commit", str(rep.commit))
    assert "stop lane opus: no runner-ready task (pending 1, 1 left to the cloud lane)" in out, out
    assert c.status("big") == "pending"
