"""Codex: ``codex exec --json``.

Verified against 0.171.0 (tests/fixtures/real/codex-0.171.0). A top-level ``error``
event is often transient: ``Reconnecting... 2/5 (...)`` and ``Reconnecting... waiting
for network (...)`` come and the turn goes on (codex's own exec processor treats them
as non-fatal), so they are neither failure nor progress; offline it retries forever.
An item of type ``error`` is a warning. Only ``turn.failed``, a non-transient ``error``,
or an exit without ``turn.completed`` is a failure. Not logged in, ``codex exec`` still
tries (and retries); ``codex login status`` says ``Not logged in`` and exits 1.
"""

from __future__ import annotations

import re
from typing import Any

from wf.adapters import limits
from wf.adapters.base import Adapter, Failure, Parsed, Spec, classify_words, one_line, status_failure
from wf.base.errors import WfError

_TRANSIENT = re.compile(r"^\s*(?:Reconnecting\b|Retrying\b|Re-connecting\b)", re.IGNORECASE)
MODEL_RE = re.compile(
    r"gpt-[a-z0-9][a-z0-9.-]*|o[1-9](?:-[a-z0-9.-]+)?|codex-[a-z0-9.-]+|gpt-oss-[a-z0-9.-]+"
)


# The HTTP status codex names in its own error words (0.171.0): "unexpected status 503
# Service Unavailable: ...", and for a 500 a fixed sentence without the number.
_STATUS = re.compile(r"\bunexpected status (\d{3})\b")
_HTTP_500 = "currently experiencing high demand"


def transient(message: str) -> bool:
    return bool(_TRANSIENT.match(message))


def failure_of(message: str) -> Failure | None:
    """The class of one of codex's error messages: the HTTP status it names decides (a 5xx
    is the service's, never the task's), else the words."""
    found = _STATUS.search(message)
    status = int(found.group(1)) if found else 500 if _HTTP_500 in message else None
    return status_failure(status) or classify_words(message)


class Codex(Adapter):
    name = "codex"
    binary = "codex"
    efforts = ("none", "minimal", "low", "medium", "high", "xhigh")
    # the option tokens exactly as wf passes them (-s and -C go before `resume`)
    _RUN_FLAGS = ("--json", "-o", "--skip-git-repo-check", "-m", "-c")
    help_probes = (
        (("codex", "exec", "--help"), (*_RUN_FLAGS, "--color", "-s", "-C", "--ignore-user-config")),
        (("codex", "exec", "resume", "--help"), _RUN_FLAGS),
    )
    login_argv = ("codex", "login", "status")
    login_fix = "run `codex login` (or `codex login --with-api-key` with OPENAI_API_KEY on stdin)"
    install = "npm install -g @openai/codex"
    grant_field = "sandbox"

    def cost(self, session_id: str | None) -> tuple[Any, str] | None:
        from wf.cost import usage

        if not session_id:
            return None
        try:
            return usage.codex_cost(usage.thread_file(session_id)), "codex"
        except (WfError, OSError):
            return None

    def argv(self, spec: Spec) -> list[str]:
        argv = ["codex", "exec", "--json", "-o", str(spec.folder / "output.txt"), "--color", "never"]
        argv += ["--skip-git-repo-check", "-s", spec.sandbox, "-C", str(spec.cwd)]
        if spec.model:
            argv += ["-m", spec.model]
        if spec.effort:
            argv += ["-c", f'model_reasoning_effort="{spec.effort}"']
        argv += ["-c", 'approval_policy="never"']
        if spec.network and spec.sandbox == "workspace-write":
            argv += ["-c", "sandbox_workspace_write.network_access=true"]
        if spec.isolate_mcp:
            argv.append("--ignore-user-config")  # no MCP servers from config.toml; auth stays
        argv += spec.extra_args
        if spec.resume:
            if not spec.session_id:
                raise WfError("resuming a codex unit needs its thread id")
            argv += ["resume", spec.session_id]
        argv.append("-")
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        kind = event.get("type")
        parsed.events += 1
        if kind == "thread.started" and event.get("thread_id"):
            parsed.session_id = str(event["thread_id"])
        elif kind in ("item.started", "item.completed", "item.updated"):
            item = event.get("item") or {}
            if item.get("type") == "error":
                return  # a warning (e.g. falling back from WebSockets to HTTPS)
            parsed.progress += 1
            if (
                kind != "item.started"
                and item.get("type") == "agent_message"
                and isinstance(item.get("text"), str)
            ):
                parsed.answer = item["text"]
                parsed.note(item["text"])
            elif item.get("type") == "command_execution" and kind == "item.completed":
                parsed.note(f"$ {item.get('command', '')}")
        elif kind == "turn.completed":
            parsed.progress += 1
            parsed.finished = True
            usage = event.get("usage") or {}
            parsed.usage = {
                "in": usage.get("input_tokens"),
                "cached": usage.get("cached_input_tokens"),
                "out": usage.get("output_tokens"),
            }
        elif kind == "turn.failed":
            error = event.get("error") or {}
            message = str(error.get("message") or "turn failed")
            self._fail(parsed, message, error)
        elif kind == "error":
            message = str(event.get("message") or "error")
            if transient(message):
                parsed.retry(message, failure_of(message) or Failure.network)
            else:
                self._fail(parsed, message, event)

    @staticmethod
    def _fail(parsed: Parsed, message: str, fields: dict[str, Any]) -> None:
        """A final error; a usage limit keeps its reset (``resets_at`` / ``resets_in_seconds``
        where the event carries them, else the "try again at 3:28 PM" of its words)."""
        limit = limits.codex_fields(fields) or limits.codex_fields(fields.get("codex_error_info"))
        failure = Failure.usage_limit if limit else failure_of(message) or Failure.task
        parsed.fail(failure, message)
        if failure is Failure.usage_limit:
            parsed.limit = limit or limits.from_words(message) or limits.Limit()

    def classify(
        self, parsed: Parsed, code: int | None, stdout: str, stderr: str
    ) -> tuple[Failure, str | None]:
        if parsed.failure is None and parsed.events == 0:
            # e.g. "Error: thread/resume: thread/resume failed: no rollout found for thread id ..."
            err = [
                ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("WARNING: proceeding")
            ]
            words = next((one_line(ln) for ln in err if ln.lower().startswith(("error", "fatal"))), None)
            words = words or (one_line(err[-1]) if err else None)
            return classify_words(words) or Failure.tool, words or f"exit {code} before its first event"
        return super().classify(parsed, code, stdout, stderr)

    def model_problem(self, model: str | None) -> str | None:
        why = super().model_problem(model)
        if why or model is None:
            return why
        if not MODEL_RE.fullmatch(model):
            return f"{model!r} is not a codex (OpenAI) model name such as gpt-5.5 or gpt-5.3-codex"
        return None

    def logged_in(self, code: int, out: str, err: str) -> bool | None:
        text = out + err
        if "Not logged in" in text:
            return False
        if code == 0 and re.search(r"Logged in", text):
            return True
        return None
