"""Any program: argv without a shell, the prompt on stdin, its stdout the answer.

It has no sandbox, network, permission or MCP switch: a unit that asks for other than
the default access (sandbox workspace-write, network off, permission_mode acceptEdits) is refused rather
than run wider than it says.

No event stream: any output on stdout or stderr counts as progress. A program that
cannot start (missing, exit 126 or 127) or whose own imports fail (a Python traceback
ending in ImportError/ModuleNotFoundError on stderr, nothing on stdout) is a ``tool``
failure; any other failure is the ``task``'s.
"""

from __future__ import annotations

import uuid

from wf.adapters.base import Adapter, Failure, Parsed, Spec, import_failure, last_line
from wf.base.errors import WfError


class Command(Adapter):
    name = "cmd"
    progress_by_bytes = True

    def first_session_id(self, spec: Spec) -> str | None:
        return spec.session_id or str(uuid.uuid4())

    def argv(self, spec: Spec) -> list[str]:
        if not spec.cmd:
            raise WfError(
                f"unit {spec.unit}: the cmd adapter needs a command (cmd in the manifest, or --cmd)"
            )
        return [*spec.cmd, *spec.extra_args]

    def env(self, spec: Spec, base: dict[str, str]) -> dict[str, str]:
        env = super().env(spec, base)
        env["WF_RUN_DIR"] = str(spec.folder)
        env["WF_PROMPT_FILE"] = str(spec.folder / "prompt.txt")
        env["WF_OUTPUT_FILE"] = str(spec.folder / "answer.out")
        env["WF_SESSION_ID"] = spec.session_id or ""
        if spec.resume:
            env["WF_RESUME"] = "1"
        return env

    def executable(self) -> str | None:
        return None

    def effort_problem(self, effort: str | None) -> str | None:
        return None  # passed to nobody; a cmd lane may carry one for its own use

    def access_problems(self, spec: Spec) -> list[str]:
        out = super().access_problems(spec)
        narrowed = {
            "sandbox": spec.sandbox != "workspace-write",
            "network": spec.network,
            "permission_mode": spec.permission_mode != "acceptEdits",
            "isolate_mcp": spec.isolate_mcp,
        }
        given = [k for k, v in narrowed.items() if v]
        if given:
            out.append(
                f"the cmd adapter runs its program as it is, with no sandbox, network or permission"
                f" switch: {', '.join(given)} would not be enforced (drop it, or use a tool that has one)"
            )
        return out

    def classify(
        self, parsed: Parsed, code: int | None, stdout: str, stderr: str
    ) -> tuple[Failure, str | None]:
        if code in (126, 127):
            return Failure.tool, last_line(stderr) or f"exit {code}: the program could not run"
        broken = import_failure(stdout, stderr)
        if broken:
            return Failure.tool, broken
        return Failure.task, last_line(stderr) or (f"exit {code}" if code is not None else None)
