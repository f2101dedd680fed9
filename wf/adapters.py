"""Worker adapters: how to start Claude Code, Codex, opencode or any command headless,
and how to read what they print.

Each adapter knows the argv of a fresh and of a resumed run, where the prompt goes, how
the model and effort are passed, and how to read the final answer, the session id, the
model, the usage and an error from its event stream. The command lines are the real
ones (see the adapters spec); prompts never go through a shell.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from wf.errors import WfError

# Variables that make a nested Claude Code think it runs inside another one, or that
# disable the transcripts resuming and cost accounting need.
_STRIP_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SKIP_PROMPT_HISTORY",
)


class Spec(NamedTuple):
    """One unit as the adapter needs it."""

    run: str
    unit: str
    folder: Path  # the unit's run folder
    cwd: Path
    prompt: str
    model: str | None = None
    effort: str | None = None
    session_id: str | None = None  # pre-assigned (fresh) or to resume
    resume: bool = False
    cmd: tuple[str, ...] = ()
    permission_mode: str = "acceptEdits"
    allowed_tools: tuple[str, ...] = ()  # claude: tools allowed without asking (Bash for wf and git)


class Parsed:
    """What an event stream said so far (fed one line at a time)."""

    def __init__(self) -> None:
        self.answer: str | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None
        self.finished = False  # a final result/turn-completed event was seen
        self.snippets: list[str] = []  # readable text, for a fallback answer

    def note(self, text: str) -> None:
        text = text.strip()
        if text:
            self.snippets.append(text)
            del self.snippets[:-20]


class Adapter:
    name = "cmd"
    binary = ""
    default_stall = 600.0
    help_flags: tuple[str, ...] = ()

    def argv(self, spec: Spec) -> list[str]:
        raise NotImplementedError

    def stdin(self, spec: Spec) -> bytes:
        return spec.prompt.encode("utf-8")

    def env(self, spec: Spec, base: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if k not in _STRIP_ENV}
        return env

    def first_session_id(self, spec: Spec) -> str | None:
        """A session id known before the worker starts (pre-assigned or resumed)."""
        return spec.session_id

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        """Read one JSON event."""

    def version_argv(self) -> list[str]:
        return [self.binary, "--version"]

    def help_argv(self) -> list[str]:
        """Where the flags wf uses are listed (a subcommand's help for codex, opencode)."""
        return [self.binary, "--help"]

    def executable(self) -> str | None:
        return shutil.which(self.binary) if self.binary else None


class Claude(Adapter):
    name = "claude"
    binary = "claude"
    default_stall = (
        720.0  # one Bash call can be silent for 10 min; claude waits up to 10 min after its result
    )
    help_flags = (
        "--output-format",
        "stream-json",
        "--session-id",
        "--resume",
        "--permission-mode",
        "--model",
    )

    def first_session_id(self, spec: Spec) -> str | None:
        return spec.session_id or str(uuid.uuid4())

    def argv(self, spec: Spec) -> list[str]:
        argv = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
        if spec.resume:
            if not spec.session_id:
                raise WfError("resuming a claude unit needs its session id")
            argv += ["--resume", spec.session_id]
        else:
            argv += ["--session-id", spec.session_id or str(uuid.uuid4())]
        if spec.model:
            argv.append(f"--model={spec.model}")
        if spec.effort:
            argv.append(f"--effort={spec.effort}")
        argv.append(f"--permission-mode={spec.permission_mode}")
        if spec.allowed_tools:
            argv.append(f"--allowedTools={','.join(spec.allowed_tools)}")  # '=': the flag is variadic
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if event.get("session_id"):
            parsed.session_id = str(event["session_id"])
        if kind == "system" and event.get("subtype") == "init":
            parsed.model = event.get("model") or parsed.model
        elif kind == "assistant":
            msg = event.get("message") or {}
            parsed.model = msg.get("model") or parsed.model
            for block in msg.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "text":
                    parsed.note(str(block.get("text") or ""))
        elif kind == "result":
            parsed.finished = True
            text = event.get("result")
            if event.get("is_error"):
                parsed.error = f"{event.get('subtype', 'error')}: {text or ''}".strip(": ")
            elif isinstance(text, str):
                parsed.answer = text
                parsed.error = None
            usage = event.get("usage") or {}
            parsed.usage = {
                "in": usage.get("input_tokens"),
                "out": usage.get("output_tokens"),
                "cw": usage.get("cache_creation_input_tokens"),
                "cr": usage.get("cache_read_input_tokens"),
                "usd_rep": event.get("total_cost_usd"),
                "turns": event.get("num_turns"),
                "duration_ms": event.get("duration_ms"),
                "models": sorted((event.get("modelUsage") or {}).keys()),
            }


class Codex(Adapter):
    name = "codex"
    binary = "codex"
    help_flags = ("--json", "--output-last-message", "--sandbox", "--cd", "--skip-git-repo-check")

    def help_argv(self) -> list[str]:
        return ["codex", "exec", "--help"]

    def argv(self, spec: Spec) -> list[str]:
        argv = ["codex", "exec", "--json", "-o", str(spec.folder / "output.txt"), "--color", "never"]
        argv += ["--skip-git-repo-check", "-s", "workspace-write", "-C", str(spec.cwd)]
        if spec.model:
            argv += ["-m", spec.model]
        if spec.effort:
            argv += ["-c", f'model_reasoning_effort="{spec.effort}"']
        argv += ["-c", 'approval_policy="never"']
        if spec.resume:
            if not spec.session_id:
                raise WfError("resuming a codex unit needs its thread id")
            argv += ["resume", spec.session_id]
        argv.append("-")
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started" and event.get("thread_id"):
            parsed.session_id = str(event["thread_id"])
        elif kind in ("item.completed", "item.updated"):
            item = event.get("item") or {}
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                parsed.answer = item["text"]
                parsed.note(item["text"])
            elif item.get("type") == "command_execution":
                parsed.note(f"$ {item.get('command', '')}")
        elif kind == "turn.completed":
            parsed.finished = True
            usage = event.get("usage") or {}
            parsed.usage = {
                "in": usage.get("input_tokens"),
                "cached": usage.get("cached_input_tokens"),
                "out": usage.get("output_tokens"),
            }
        elif kind == "turn.failed":
            parsed.error = str((event.get("error") or {}).get("message") or "turn failed")
        elif kind == "error":
            parsed.error = str(event.get("message") or "error")


class Opencode(Adapter):
    name = "opencode"
    binary = "opencode"
    help_flags = ("--format", "--session", "--dir", "--model", "--auto")

    def help_argv(self) -> list[str]:
        return ["opencode", "run", "--help"]

    def argv(self, spec: Spec) -> list[str]:
        argv = ["opencode", "run", "--format", "json", "--auto", "--dir", str(spec.cwd)]
        if spec.model:
            argv += ["-m", spec.model]
        if spec.resume:
            if not spec.session_id:
                raise WfError("resuming an opencode unit needs its session id")
            argv += ["--session", spec.session_id]
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        if event.get("sessionID"):
            parsed.session_id = str(event["sessionID"])
        kind = event.get("type")
        part = event.get("part") or {}
        if kind == "step_start":
            parsed.__dict__["_step"] = []
        elif kind == "text" and isinstance(part.get("text"), str):
            step: list[str] = parsed.__dict__.setdefault("_step", [])
            step.append(part["text"])
            parsed.answer = "".join(step)
            parsed.note(part["text"])
        elif kind == "step_finish":
            parsed.finished = True
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            usage = parsed.usage or {"in": 0, "out": 0, "reasoning": 0, "cr": 0, "cw": 0, "usd_rep": 0.0}
            usage["in"] += int(tokens.get("input") or 0)
            usage["out"] += int(tokens.get("output") or 0)
            usage["reasoning"] += int(tokens.get("reasoning") or 0)
            usage["cr"] += int(cache.get("read") or 0)
            usage["cw"] += int(cache.get("write") or 0)
            usage["usd_rep"] += float(part.get("cost") or 0.0)
            parsed.usage = usage
        elif kind == "error":
            err = event.get("error") or {}
            parsed.error = str((err.get("data") or {}).get("message") or err.get("name") or "error")


class Command(Adapter):
    """Any program: argv without a shell, the prompt on stdin, its stdout the answer."""

    name = "cmd"

    def first_session_id(self, spec: Spec) -> str | None:
        return spec.session_id or str(uuid.uuid4())

    def argv(self, spec: Spec) -> list[str]:
        if not spec.cmd:
            raise WfError(
                f"unit {spec.unit}: the cmd adapter needs a command (cmd in the manifest, or --cmd)"
            )
        return list(spec.cmd)

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


ADAPTERS: dict[str, Adapter] = {a.name: a for a in (Claude(), Codex(), Opencode(), Command())}


def get(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise WfError(f"unknown adapter {name!r}: expected one of {', '.join(ADAPTERS)}") from None


def choose(unit: str | None, lane: str | None, default: str = "claude") -> Adapter:
    """Per unit, else per lane, else $WF_ADAPTER, else the default."""
    return get(unit or lane or os.environ.get("WF_ADAPTER") or default)


def split_cmd(line: str) -> tuple[str, ...]:
    """A command line split the way a shell splits words (no shell runs it)."""
    try:
        parts = tuple(shlex.split(line))
    except ValueError as e:
        raise WfError(f"bad --cmd {line!r}: {e}") from None
    if not parts:
        raise WfError("--cmd is empty")
    return parts


def parse_line(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
