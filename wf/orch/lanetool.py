"""A lane's tool for ``wf orch run``: which adapter and model its worker gets (the
lane's own, or the tool ``--adapter`` names), the worker's spec and unit, and what is
checked before anything is claimed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from wf import adapters
from wf.adapters import Spec
from wf.base.errors import WfError
from wf.base.project import Project
from wf.orch.pick import worker_instructions
from wf.orch.state import LaneRecord
from wf.workers.supervise import Unit


class LaneTools:
    """The lanes' tools of one run (``override``: the tool of ``--adapter``, or None)."""

    def __init__(self, project: Project, override: str | None, timeout: float | None) -> None:
        self.project = project
        self.override = override
        self.timeout = timeout  # --timeout: before each lane's own

    def adapter_for(self, lane: str) -> adapters.Adapter:
        cfg = self.project.config.lane(lane)
        return adapters.choose(self.override or (cfg.adapter if cfg else None), None)

    def model_for(self, lane: str, task_model: str | None) -> str | None:
        """The model the lane's worker gets: the task's own on the lane's own tool; with
        --adapter naming another tool, the lane's model for that tool (None: it has none)."""
        cfg = self.project.config.lane(lane)
        adapter = self.adapter_for(lane).name
        if cfg is None or self.override is None or self.override == cfg.adapter:
            return task_model or (cfg.model if cfg else None)
        return adapters.lane_model_for(cfg, adapter)

    def spec(self, lane: str, rec: LaneRecord, prompt: str, run: str) -> Spec:
        """What the worker of ``rec``'s task runs with (its unit and folder come at launch)."""
        cfg = self.project.config.lane(lane)
        adapter = self.adapter_for(lane)
        return Spec(
            run=run,
            unit="",
            folder=Path(),
            cwd=Path(str(rec.worktree)),
            prompt=worker_instructions(rec.slice) + "\n" + prompt,
            model=self.model_for(lane, rec.model),
            effort=cfg.effort if cfg else None,
            cmd=cfg.cmd if cfg and adapter.name == "cmd" else (),
            **(adapters.lane_access(cfg) if cfg else {}),
        )

    def unit(self, lane: str, rec: LaneRecord, spec: Spec) -> Unit:
        """The unit that runs ``spec`` under the lane's limits (--timeout first)."""
        cfg = self.project.config.lane(lane)
        timeout = self.timeout or (cfg.timeout if cfg else None)
        stall = cfg.stall if cfg else None
        return Unit(
            spec, self.adapter_for(lane), timeout=timeout, stall=stall, meta={"task": rec.id, "lane": lane}
        )

    def check(self, lanes: list[str], emit: Callable[[str], None]) -> None:
        """What can be checked cheaply before anything is claimed: every lane's program
        resolves, its tool is logged in (the tool's own offline probe), and its model and
        effort fit the tool. A problem is an error naming the lane, with nothing claimed."""
        from wf.trees import worktrees

        worktrees.preflight(self.project)  # main a branch, a git identity: before any claim
        from wf.cost import costlog

        state = costlog.state_problem()  # said once, at the start: the night goes on without it
        if state is not None:
            emit(f"note: {state}; cost lines still go to out/wf-cost.log")
        main = worktrees.main_branch(self.project)
        for lane in lanes:
            try:
                worktrees.lane_clash(lane, main)
            except WfError as e:
                raise worktrees.CannotClaim(e) from None
        problems = []
        for lane in lanes:
            cfg = self.project.config.lane(lane)
            if cfg is None:
                raise WfError(f"no lane {lane!r} (wf lanes)")
            adapter = self.adapter_for(lane)
            model = self.model_for(lane, None)
            if model is None:
                problems.append(
                    f"lane {lane}: no model for {adapter.name} (give the lane "
                    f'models = {{{adapter.name} = "..."}} in wf.toml, or drop --adapter)'
                )
                continue
            cmd = tuple(cfg.cmd)
            if adapter.name == "cmd" and cmd and os.sep in cmd[0] and not os.path.isabs(cmd[0]):
                cmd = (str(self.project.root / cmd[0]), *cmd[1:])
            for problem in adapters.preflight(adapter.name, model, cfg.effort, cmd=cmd):
                problems.append(f"lane {lane}: {problem.message} ({problem.failure.value}); {problem.fix}")
        if problems:
            raise WfError("nothing was claimed:\n" + "\n".join(problems))
