"""Claude Code: ``claude -p --output-format stream-json --verbose``.

Verified against 2.1.332 (recordings in tests/fixtures/real/claude-2.1.332). Not logged
in, it prints ``system/init``, an ``assistant`` message with model ``<synthetic>`` and a
top-level ``"error": "authentication_failed"``, then a ``result`` with ``subtype:
"success"``, ``is_error: true`` and ``result: "Not logged in · Please run /login"``;
exit 1. ``system/api_retry`` events are retries: neither failure nor progress.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

from wf.adapters import limits
from wf.adapters.base import Adapter, Denial, Failure, Parsed, Spec, classify_words, one_line
from wf.base.errors import WfError

# assistant.error values (the whole enum of 2.1.332) and what they mean; None: read the words
_API_ERRORS: dict[str, Failure | None] = {
    "authentication_failed": Failure.auth,
    "oauth_org_not_allowed": Failure.auth,
    "verification_required": Failure.auth,
    "cloud_credential_error": Failure.auth,
    "account_on_hold": Failure.quota,
    "billing_error": Failure.quota,
    "rate_limit": Failure.rate_limit,  # also plan limits ("You've hit your limit"): the words decide
    "overloaded": Failure.overloaded,
    "model_not_found": Failure.model,
    "server_error": Failure.network,
    "invalid_request": None,  # "Invalid API key ...", "Prompt is too long", ...
    "unknown": None,
    "max_output_tokens": Failure.task,
}
_ALIASES = ("opus", "sonnet", "haiku", "opusplan", "best", "fable")
MODEL_RE = re.compile(
    rf"(?:{'|'.join(_ALIASES)})(?:\[1m\])?"
    r"|claude-[a-z0-9][a-z0-9.-]*(?:\[1m\])?"
    r"|(?:[a-z]{2,4}\.)?anthropic\.claude-[a-z0-9.:-]+"  # Bedrock
    r"|claude-[a-z0-9.-]+@[0-9]+"  # Vertex
)
WEB_TOOLS = ("WebFetch", "WebSearch")
PROMPTS_FLAG = "--permission-prompts"  # 2.1.259 and later: passed where --help lists it
# the input field that says what a refused call wanted, per tool (else the input as JSON)
_WHAT = {"Bash": "command", "Read": "file_path", "Edit": "file_path", "Write": "file_path",
         "NotebookEdit": "notebook_path", "WebFetch": "url", "WebSearch": "query",
         "Glob": "pattern", "Grep": "pattern"}  # fmt: skip


def denial(tool: Any, tool_input: Any) -> Denial:
    """One refused call as wf records it: the tool and what it wanted, on one line."""
    name = str(tool or "?")
    given = tool_input if isinstance(tool_input, dict) else {}
    field = _WHAT.get(name)
    what = given.get(field) if field else None
    if not isinstance(what, str):
        what = json.dumps(given, sort_keys=True) if given else ""
    return Denial(name, one_line(what, 200) or "")


def api_failure(error: str, words: str) -> Failure:
    """The class of an API error claude shows as a message: its error value, refined by
    its words where the value is vague (invalid_request, unknown) or covers two classes
    (rate_limit is also a plan's usage limit or its extra usage: usage_limit, quota)."""
    named = _API_ERRORS.get(error)
    said = classify_words(words)
    if named is Failure.rate_limit and said in (Failure.quota, Failure.usage_limit):
        return said
    if named is None or named is Failure.task:
        return said or named or Failure.task
    return named


class Claude(Adapter):
    name = "claude"
    binary = "claude"
    # one Bash call can be silent for 10 min; claude waits up to 10 min after its result
    default_stall = 720.0
    done_at_result = True
    resumes_after_limit = True  # its transcript holds the prompt: --resume goes on from there
    efforts = ("low", "medium", "high", "xhigh", "max")
    help_probes = (
        (
            ("claude", "--help"),
            (  # the option tokens exactly as wf passes them
                "-p",
                "--output-format",
                "--verbose",
                "--session-id",
                "--resume",
                "--model",
                "--effort",
                "--permission-mode",
                "--allowedTools",
                "--disallowedTools",
                "--strict-mcp-config",
            ),
        ),
    )
    login_argv = ("claude", "auth", "status")
    login_fix = "run `claude` once and /login (or `claude setup-token`; or set ANTHROPIC_API_KEY)"
    install = "npm install -g @anthropic-ai/claude-code"

    def cost(self, session_id: str | None) -> tuple[Any, str] | None:
        from wf.cost import usage

        if not session_id:
            return None
        try:
            return usage.claude_cost(usage.session_files(session_id)), "session"
        except (WfError, OSError):
            return None

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
        # read-only (a reviewing fan-out unit): plan mode, where claude refuses every edit and
        # every Bash command that is not read-only, whatever --allowedTools grants
        mode = "plan" if spec.sandbox == "read-only" else spec.permission_mode
        argv.append(f"--permission-mode={mode}")
        if PROMPTS_FLAG in self.options():
            # nobody answers a prompt: anything that would ask is a recorded denial, never a wait
            argv.append(f"{PROMPTS_FLAG}=none")
        tools = list(spec.allowed_tools)
        if spec.network:
            tools += [t for t in WEB_TOOLS if t not in tools]
        if tools:
            argv.append(f"--allowedTools={','.join(tools)}")  # '=': the flag is variadic
        if not spec.network:
            argv.append(f"--disallowedTools={','.join(WEB_TOOLS)}")
        if spec.isolate_mcp:
            argv.append("--strict-mcp-config")  # and no --mcp-config: no MCP server at all
        argv += spec.extra_args
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        kind = event.get("type")
        parsed.events += 1
        if event.get("session_id"):
            parsed.session_id = str(event["session_id"])
        if kind == "system":
            if event.get("subtype") == "init":
                parsed.set_model(event.get("model"))
            elif event.get("subtype") == "api_retry":
                overloaded = event.get("error_status") == 529
                parsed.retry(
                    f"API retry {event.get('attempt')}/{event.get('max_retries')}: "
                    f"{event.get('error') or ''} {event.get('error_status') or ''}",
                    Failure.overloaded
                    if overloaded
                    else _API_ERRORS.get(str(event.get("error"))) or Failure.network,
                )
            elif event.get("subtype") == "permission_denied":
                # the refusal as it happens (the result lists it again): kept for a run that never ends
                call = parsed.calls.get(str(event.get("tool_use_id")))
                parsed.deny(denial(event.get("tool_name"), call))
        elif kind == "rate_limit_event":  # allowed, allowed_warning: a report; rejected: the limit
            limit = limits.claude_event(event.get("rate_limit_info"))
            if limit is not None:
                parsed.limited(limit)
        elif kind == "assistant":
            msg = event.get("message") or {}
            if event.get("error"):  # an API error shown as a message (model <synthetic>)
                texts = [b.get("text") for b in msg.get("content") or [] if isinstance(b, dict)]
                words = " ".join(str(t) for t in texts if t) or str(event["error"])
                parsed.fail(self._api_failure(parsed, event, words), words)
                return
            parsed.progress += 1
            parsed.set_model(msg.get("model"))
            for block in msg.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "text":
                    parsed.note(str(block.get("text") or ""))
                elif isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id"):
                    parsed.calls[str(block["id"])] = block.get("input")
        elif kind == "user":
            parsed.progress += 1  # a tool result
        elif kind == "result":
            parsed.finished = True
            text = event.get("result")
            refused = event.get("permission_denials")
            if isinstance(refused, list):  # the whole session's refusals, each with its input
                for d in refused:
                    if isinstance(d, dict):
                        parsed.deny(denial(d.get("tool_name"), d.get("tool_input")))
            if event.get("is_error"):
                self._result_error(parsed, event)
            elif isinstance(text, str):
                parsed.progress += 1
                parsed.answer = text
                parsed.error = None
                parsed.failure = None
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

    @staticmethod
    def _api_failure(parsed: Parsed, event: dict[str, Any], words: str) -> Failure:
        """An API error message's class: the plan's usage limit when a rejected
        rate_limit_event came (or the message carries one), overloaded for a 529."""
        params = event.get("api_error_params") or {}
        limit = parsed.limit or limits.claude_event(params.get("rate_limit_info"))
        if limit is not None or event.get("api_error") == "usage_limit_reached":
            parsed.limit = limit or limits.from_words(words) or limits.Limit()
            return Failure.usage_limit
        if event.get("api_error_status") == 529:
            return Failure.overloaded
        return api_failure(str(event["error"]), words)

    @staticmethod
    def _result_error(parsed: Parsed, event: dict[str, Any]) -> None:
        """The failure text is ``result`` when subtype is success, ``errors[]`` otherwise."""
        errors = [str(e) for e in event.get("errors") or [] if e]
        text = event.get("result") if event.get("subtype") == "success" else None
        words = one_line(text) or one_line("; ".join(errors)) or one_line(event.get("subtype")) or "error"
        api = str(event.get("api_error") or "")
        if api == "connection_failed":
            parsed.fail(Failure.network, words)
        elif parsed.failure is not None and parsed.failure is not Failure.task:
            parsed.error = words  # the assistant event already said which class
        elif event.get("terminal_reason") == "api_error" or api:
            parsed.fail(classify_words(words) or Failure.task, words)
        elif event.get("num_turns") == 0 and any("No conversation found" in e for e in errors):
            parsed.fail(Failure.tool, words)  # --resume of a session this tool does not have
        else:
            parsed.fail(Failure.task, words)

    def access_problems(self, spec: Spec) -> list[str]:
        out = super().access_problems(spec)
        if (
            spec.permission_mode == "bypassPermissions"
            and os.geteuid() == 0
            and os.environ.get("IS_SANDBOX") != "1"
        ):
            out.append("claude refuses bypassPermissions as root unless IS_SANDBOX=1")
        if spec.sandbox == "read-only" and spec.permission_mode in ("bypassPermissions", "auto", "dontAsk"):
            out.append(
                f"read-only runs claude in plan mode: permission_mode {spec.permission_mode} contradicts it"
            )
        return out

    # ------------------------------------------------------------ vocabulary and login
    def model_problem(self, model: str | None) -> str | None:
        why = super().model_problem(model)
        if why or model is None:
            return why
        if not MODEL_RE.fullmatch(model):
            return (
                f"{model!r} is not a claude model (an alias: {', '.join(_ALIASES[:3])}, or a claude-... id)"
            )
        return None

    def logged_in(self, code: int, out: str, err: str) -> bool | None:
        try:
            data = json.loads(out)
        except ValueError:
            return None
        if isinstance(data, dict) and isinstance(data.get("loggedIn"), bool):
            return bool(data["loggedIn"])
        return None
