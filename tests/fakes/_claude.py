"""A fake `claude` (Claude Code 2.1.332) for wf's test suite: print mode only.

Behaviour contract: tests/fakes/README.md. Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    from typing import Any

from _fake_common import (  # noqa: E402
    _CLEANUP,
    as_path,
    emit,
    fail,
    first_line,
    folders,
    has_word,
    install_cleanup,
    log_argv,
    mark_running,
    now_iso,
    number_after,
    rand_id,
    spawn_grandchild,
    uuid4,
)

VERSION = "2.1.332"
# The real tool's recorded streams, replayed for the failure paths (see README.md).
RECORDED = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "fixtures", "real", f"claude-{VERSION}"
)
DEFAULT_MODEL = "claude-opus-4-6"
ALIASES = {
    "opus": "claude-opus-4-6",
    "sonnet": "claude-sonnet-4-6",
    "haiku": "claude-haiku-4-5-20251001",
    "opusplan": "claude-opus-4-6",
}
# USD per million tokens: input, 5m cache write, 1h cache write, cache read, output.
PRICES = [
    ("claude-opus-4-5", (5.0, 6.25, 10.0, 0.50, 25.0)),
    ("claude-opus-4-6", (5.0, 6.25, 10.0, 0.50, 25.0)),
    ("claude-opus-4-7", (5.0, 6.25, 10.0, 0.50, 25.0)),
    ("claude-opus-4-8", (5.0, 6.25, 10.0, 0.50, 25.0)),
    ("claude-opus-4", (15.0, 18.75, 30.0, 1.50, 75.0)),
    ("claude-sonnet-4", (3.0, 3.75, 6.0, 0.30, 15.0)),
    ("claude-3-7-sonnet", (3.0, 3.75, 6.0, 0.30, 15.0)),
    ("claude-haiku-4-5", (1.0, 1.25, 2.0, 0.10, 5.0)),
    ("claude-3-5-haiku", (0.80, 1.00, 1.60, 0.08, 4.0)),
]
TOOLS = [
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "ExitPlanMode",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
    "BashOutput",
    "KillShell",
    "SlashCommand",
]
EFFORTS = ["low", "medium", "high", "xhigh", "max"]
# 2.1.332 lists manual (its name of the default mode) and still takes default, unlisted
PERMISSION_MODES = ["acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan", "default"]
OUTPUT_FORMATS = ["text", "json", "stream-json"]

HELP = """\
Usage: claude [options] [command] [prompt]

Claude Code - starts an interactive session by default, use -p/--print for
non-interactive output (this fake supports only -p)

Arguments:
  prompt                            Your prompt

Options:
  -p, --print                       Print response and exit (useful for pipes).
  --output-format <format>          Output format (only works with --print): "text" (default),
                                    "json" (single result), or "stream-json" (realtime streaming)
                                    (choices: "text", "json", "stream-json")
  --verbose                         Override verbose mode setting from config
  --session-id <uuid>               Use a specific session ID for the conversation (must be a valid UUID)
  -r, --resume [value]              Resume a conversation by session ID
  --fork-session                    When resuming, create a new session ID instead of reusing the
                                    original (use with --resume or --continue)
  --model <model>                   Model for the current session. Provide an alias for the latest
                                    model (e.g. 'sonnet' or 'opus') or a model's full name
  --effort <level>                  Effort level (choices: "low", "medium", "high", "xhigh", "max")
  --permission-mode <mode>          Permission mode to use for the session (choices: "acceptEdits",
                                    "auto", "bypassPermissions", "manual", "dontAsk", "plan")
  --dangerously-skip-permissions    Bypass all permission checks
  --max-budget-usd <amount>         Maximum dollar amount to spend on API calls (only works with --print)
  --append-system-prompt <prompt>   Append a system prompt to the default system prompt
  --system-prompt <prompt>          System prompt to use for the session
  --allowedTools <tools>            Comma or space-separated list of tool names to allow
  --disallowedTools <tools>         Comma or space-separated list of tool names to deny
  --add-dir <directories>           Additional directories to allow tool access to
  --include-partial-messages        Include partial message chunks as they arrive (accepted, ignored)
  --strict-mcp-config               Only use MCP servers from --mcp-config, ignoring all other MCP
                                    configurations
  --mcp-config <configs...>         Load MCP servers from JSON files or strings
  -v, --version                     Output the version number
  -h, --help                        Display help for command
"""

# option name -> (dest, takes a value)
OPTIONS: dict[str, tuple[str, bool]] = {
    "-p": ("print", False),
    "--print": ("print", False),
    "--output-format": ("output_format", True),
    "--verbose": ("verbose", False),
    "--session-id": ("session_id", True),
    "-r": ("resume", True),
    "--resume": ("resume", True),
    "--fork-session": ("fork_session", False),
    "--model": ("model", True),
    "--effort": ("effort", True),
    "--permission-mode": ("permission_mode", True),
    "--dangerously-skip-permissions": ("skip_permissions", False),
    "--max-turns": ("max_turns", True),
    "--max-budget-usd": ("max_budget_usd", True),
    "--append-system-prompt": ("append_system_prompt", True),
    "--system-prompt": ("system_prompt", True),
    "--allowedTools": ("allowed_tools", True),
    "--allowed-tools": ("allowed_tools", True),
    "--disallowedTools": ("disallowed_tools", True),
    "--disallowed-tools": ("disallowed_tools", True),
    "--add-dir": ("add_dir", True),
    "--include-partial-messages": ("partial", False),
    "--strict-mcp-config": ("strict_mcp", False),
    "--mcp-config": ("mcp_config", True),
    "-v": ("version", False),
    "--version": ("version", False),
    "-h": ("help", False),
    "--help": ("help", False),
}

# ---------------------------------------------------------------- common helpers


def valid_uuid(text: str) -> bool:
    """Whether uuid.UUID() takes text: the usual 8-4-4-4-12 form checked here, any other left
    to uuid (it also takes braces, "urn:uuid:", no hyphens, ...)."""
    if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", text):
        return True
    import uuid  # here, not at the top: the fake's start is the suite's

    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- claude specifics


def parse_args(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional.extend(argv[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if name not in OPTIONS or (eq and not name.startswith("--")):
            fail(f"error: unknown option '{arg}'")
        dest, takes_value = OPTIONS[name]
        if not takes_value:
            if eq:
                fail(f"error: option '{name}' does not take a value")
            opts[dest] = True
            continue
        # Commander: a required option-argument takes the next word whatever it looks like;
        # --resume's is optional, so a following flag is not taken (and means "open the picker").
        if eq:
            value = inline
        elif i < len(argv) and (dest != "resume" or not argv[i].startswith("-")):
            value = argv[i]
            i += 1
        elif dest == "resume":
            fail("error: --resume without a session ID opens a picker; this fake needs an ID")
        else:
            fail(f"error: option '{name} <value>' argument missing")
        if dest in ("allowed_tools", "disallowed_tools", "add_dir"):
            opts.setdefault(dest, []).append(value)
        else:
            opts[dest] = value
    return opts, positional


def check_choice(opts: dict[str, Any], dest: str, flag: str, choices: list[str]) -> None:
    value = opts.get(dest)
    if value is not None and value not in choices:
        allowed = ", ".join(f'"{c}"' for c in choices)
        fail(f"error: option '{flag}' argument '{value}' is invalid. Allowed choices are {allowed}.")


def config_dir() -> str:
    raw = os.environ.get("CLAUDE_CONFIG_DIR", "").split(",")[0].strip()
    if raw:
        return as_path(raw)  # as Path(raw) printed it: no doubled or trailing slashes
    return os.path.join(os.path.expanduser("~"), ".claude")


def slug(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def git_branch(cwd: str) -> str:
    for folder in folders(cwd):
        dotgit = os.path.join(folder, ".git")
        try:
            if os.path.isfile(dotgit):
                text = read_text(dotgit).strip()
                if not text.startswith("gitdir:"):
                    return ""
                gitdir = text[len("gitdir:") :].strip()
                head = read_text(os.path.join(folder, gitdir, "HEAD")).strip()
            elif os.path.isdir(dotgit):
                head = read_text(os.path.join(dotgit, "HEAD")).strip()
            else:
                continue
        except OSError:
            return ""
        return head.removeprefix("ref: refs/heads/") if head.startswith("ref:") else "HEAD"
    return ""


def resolve_model(name: str | None) -> str:
    if not name:
        return DEFAULT_MODEL
    base = name.removesuffix("[1m]")
    return ALIASES.get(base, name)


def price(model: str) -> tuple[float, float, float, float, float]:
    base = re.sub(r"-\d{8}$", "", model.replace("[1m]", ""))
    best: tuple[float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0)
    best_len = -1
    for prefix, row in PRICES:
        if base.startswith(prefix) and len(prefix) > best_len:
            best, best_len = row, len(prefix)
    return best


class Session:
    """One run: writes the transcript and prints stream-json events."""

    def __init__(self, opts: dict[str, Any], prompt: str, session_id: str, path: str, stream: bool) -> None:
        self.opts = opts
        self.prompt = prompt
        self.session_id = session_id
        self.path = path
        self.stream = stream
        self.cwd = os.getcwd()
        self.branch = git_branch(self.cwd)
        self.model = resolve_model(opts.get("model"))
        self.mode = opts.get("permission_mode") or (
            "bypassPermissions" if opts.get("skip_permissions") else "default"
        )
        self.parent: str | None = None
        self.requests: list[dict[str, int]] = []
        self.started = time.monotonic()
        self.denials: list[dict[str, Any]] = []  # the result's permission_denials
        self.prior_context = 0
        if os.path.exists(path):
            for line in read_text(path).splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("uuid"):
                    self.parent = rec["uuid"]
                    self.prior_context += 40

    # transcript ------------------------------------------------------------
    def write(self, fields: dict[str, Any], tail: dict[str, Any] | None = None) -> str:
        line_uuid = uuid4()
        rec: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": self.branch,
        }
        rec.update(fields)
        rec["uuid"] = line_uuid
        rec["timestamp"] = now_iso()
        rec.update(tail or {})
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.parent = line_uuid
        return line_uuid

    def user_prompt(self) -> None:
        self.write(
            {"type": "user", "message": {"role": "user", "content": self.prompt}},
            {"thinkingMetadata": {"maxThinkingTokens": 31999}, "todos": [], "permissionMode": self.mode},
        )

    # events ----------------------------------------------------------------
    def init(self) -> None:
        if not self.stream:
            return
        emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": self.cwd,
                "session_id": self.session_id,
                "tools": TOOLS,
                "mcp_servers": [],
                "model": self.model,
                "permissionMode": self.mode,
                "slash_commands": ["compact", "context", "cost", "init", "review"],
                "apiKeySource": "none",
                "claude_code_version": VERSION,
                "output_style": "default",
                "agents": ["general-purpose"],
                "skills": [],
                "plugins": [],
                "uuid": uuid4(),
            }
        )

    def usage(self, req: dict[str, int], output: int) -> dict[str, Any]:
        return {
            "input_tokens": req["input"],
            "cache_creation_input_tokens": req["cw"],
            "cache_read_input_tokens": req["cr"],
            "cache_creation": {"ephemeral_5m_input_tokens": req["cw"], "ephemeral_1h_input_tokens": 0},
            "output_tokens": output,
            "service_tier": "standard",
        }

    def request(self, blocks: list[dict[str, Any]], final_output: int, stop_reason: str | None) -> None:
        """One API request: one transcript line and one event per content block, with the
        same message.id and requestId, growing output_tokens, stop_reason on the last only."""
        n = len(self.requests)
        req = {
            "input": 3 if n == 0 else 1,
            "cw": 1500 + len(self.prompt) if n == 0 else 120 + 30 * n,
            "cr": 11000 + self.prior_context + 1600 * n,
            "output": final_output,
            "final": 1 if stop_reason else 0,
        }
        self.requests.append(req)
        msg_id = "msg_01" + rand_id(22)
        request_id = "req_011C" + rand_id(20)
        for k, block in enumerate(blocks):
            last = k == len(blocks) - 1
            output = final_output if last else max(1, final_output * (k + 1) // (len(blocks) + 2))
            message = {
                "model": self.model,
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": stop_reason if last else None,
                "stop_sequence": None,
                "usage": self.usage(req, output),
            }
            line_uuid = self.write({"message": message, "requestId": request_id, "type": "assistant"})
            if self.stream:
                emit(
                    {
                        "type": "assistant",
                        "message": message,
                        "parent_tool_use_id": None,
                        "session_id": self.session_id,
                        "uuid": line_uuid,
                    }
                )
            time.sleep(0.01)

    def tool_round(self) -> None:
        tool_id = "toolu_01" + rand_id(22)
        self.request(
            [
                {
                    "type": "thinking",
                    "thinking": "Let me look at the working directory first.",
                    "signature": "fake",
                },
                {"type": "text", "text": "I'll check where I am."},
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": "pwd", "description": "Print working directory"},
                },
            ],
            48,
            "tool_use",
        )
        assistant_uuid = self.parent
        content = [{"tool_use_id": tool_id, "type": "tool_result", "content": self.cwd, "is_error": False}]
        result = {"stdout": self.cwd, "stderr": "", "interrupted": False, "isImage": False}
        line_uuid = self.write(
            {"type": "user", "message": {"role": "user", "content": content}},
            {"toolUseResult": result, "sourceToolAssistantUUID": assistant_uuid},
        )
        if self.stream:
            emit(
                {
                    "type": "user",
                    "message": {"role": "user", "content": content},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": line_uuid,
                    "tool_use_result": result,
                }
            )

    def granted(self, command: str) -> bool:
        """Whether the argv grants this Bash command, as 2.1.332 decides for one plain
        command: bypassPermissions, a bare `Bash`, or `Bash(PREFIX:*)` / `Bash(PREFIX *)`
        whose prefix starts it (acceptEdits grants no Bash that is not a file edit)."""
        if self.opts.get("permission_mode") == "bypassPermissions" or self.opts.get("skip_permissions"):
            return True
        for tool in re.split(r"[,\s]+(?![^()]*\))", " ".join(self.opts.get("allowed_tools") or [])):
            if tool == "Bash":
                return True
            m = re.fullmatch(r"Bash\((.+?)(?::\*| \*)?\)", tool)
            if m and (command == m.group(1) or command.startswith(m.group(1) + " ")):
                return True
        return False

    def bash_round(self, command: str) -> None:
        """A Bash call: run (pretended) when granted; else refused as 2.1.332 refuses it in
        print mode: a system/permission_denied event, an error tool_result, and the call
        in the result's permission_denials (the run goes on, exit 0)."""
        tool_id = "toolu_01" + rand_id(22)
        tool_input = {"command": command, "description": "Commit the work"}
        block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": tool_input}
        self.request([{"type": "text", "text": "Committing."}, block], 30, "tool_use")
        if self.granted(command):
            content = [{"tool_use_id": tool_id, "type": "tool_result", "content": "", "is_error": False}]
        else:
            said = "Claude requested permissions to use Bash, but you haven't granted it yet."
            if self.stream:
                emit({"type": "system", "subtype": "permission_denied", "tool_name": "Bash",
                      "tool_use_id": tool_id, "decision_reason_type": "rule", "message": said,
                      "uuid": uuid4(), "session_id": self.session_id})  # fmt: skip
            self.denials.append({"tool_name": "Bash", "tool_use_id": tool_id, "tool_input": tool_input})
            content = [{"tool_use_id": tool_id, "type": "tool_result", "content": said, "is_error": True}]
        line_uuid = self.write({"type": "user", "message": {"role": "user", "content": content}})
        if self.stream:
            emit({"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                  "session_id": self.session_id, "uuid": line_uuid})  # fmt: skip

    def answer_round(self, answer: str) -> None:
        self.request(
            [
                {"type": "thinking", "thinking": "I have what I need.", "signature": "fake"},
                {"type": "text", "text": answer},
            ],
            10 + (len(answer) + 3) // 4,  # ceil(len / 4), without importing math
            "end_turn",
        )

    def tick(self, i: int) -> None:
        if self.stream:
            emit(
                {
                    "type": "assistant",
                    "message": {
                        "model": self.model,
                        "id": "msg_01tick" + rand_id(18),
                        "type": "message",
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": f"still working ({i})", "signature": ""}
                        ],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 0, "output_tokens": 1},
                    },
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": uuid4(),
                }
            )

    def totals(self) -> tuple[dict[str, Any], dict[str, Any], float]:
        p_in, p_5m, _p_1h, p_read, p_out = price(self.model)
        tin = sum(r["input"] for r in self.requests)
        tout = sum(r["output"] for r in self.requests)
        tcw = sum(r["cw"] for r in self.requests)
        tcr = sum(r["cr"] for r in self.requests)
        cost = (tin * p_in + tout * p_out + tcw * p_5m + tcr * p_read) / 1e6
        usage = {
            "input_tokens": tin,
            "cache_creation_input_tokens": tcw,
            "cache_read_input_tokens": tcr,
            "output_tokens": tout,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": tcw},
        }
        model_usage = {
            self.model: {
                "inputTokens": tin,
                "outputTokens": tout,
                "cacheReadInputTokens": tcr,
                "cacheCreationInputTokens": tcw,
                "webSearchRequests": 0,
                "costUSD": cost,
                "contextWindow": 200000,
                "maxOutputTokens": 32000,
            }
        }
        return usage, model_usage, cost

    def result(self, answer: str | None, subtype: str = "success") -> dict[str, Any]:
        usage, model_usage, cost = self.totals()
        duration = int((time.monotonic() - self.started) * 1000)
        event: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "duration_ms": duration,
            "duration_api_ms": int(duration * 0.8),
            "num_turns": len(self.requests),
        }
        if answer is not None:
            event["result"] = answer
        event.update(
            {
                "session_id": self.session_id,
                "total_cost_usd": cost,
                "usage": usage,
                "modelUsage": model_usage,
                "permission_denials": list(self.denials),
                "uuid": uuid4(),
            }
        )
        if subtype != "success":
            event["errors"] = ["fake error during execution"]
        return event


def logged_out() -> bool:
    return os.environ.get("FAKE_LOGGED_OUT") == "1"


def auth_status() -> int:
    """`claude auth status`: JSON, exit 1 when not logged in (as 2.1.332)."""
    root = config_dir()
    out = {
        "loggedIn": not logged_out(),
        "authMethod": "none" if logged_out() else "claude.ai",
        "apiProvider": "firstParty",
        "analyticsDisabled": False,
        "projectsDirectory": root + "/projects",
        "configDirectory": root,
        "loginExpiresAt": None,
        "consoleProfileSignInOffered": True,
    }
    print(json.dumps(out, indent=2))
    return 1 if logged_out() else 0


# `APIERROR NAME`: the not-logged-in recording with another of 2.1.332's API errors
# (its assistant.error value and its words, as the binary has them).
API_ERRORS = {
    "billing_error": ("billing_error", "Credit balance is too low"),
    "plan_limit": ("rate_limit", "You've hit your session limit · resets 3pm (UTC)"),
    "rate_limit": (
        "rate_limit",
        "API Error: Request rejected (429) · this may be a temporary capacity issue.",
    ),
    "overloaded": ("overloaded", "API Error: Repeated 529 Overloaded errors · check status.claude.com"),
    "model_not_found": (
        "model_not_found",
        "There's an issue with the selected model ({model}). It may not exist or you may not have "
        "access to it. Run /model to pick a different model.",
    ),
    "invalid_api_key": ("authentication_failed", "Invalid API key · Fix external API key"),
}


def api_error_name(prompt: str) -> str | None:
    """`APIERROR NAME` in the prompt, else $FAKE_API_ERROR."""
    m = re.search(r"\bAPIERROR\s+(\w+)", prompt)
    name = m.group(1) if m else os.environ.get("FAKE_API_ERROR")
    return name if name in API_ERRORS else None


def replay(case: str, session_id: str, model: str | None = None, api_error: str | None = None) -> None:
    """Print a recorded stream of the real tool, with this run's session id and cwd (and,
    with api_error, another API error in the same shape)."""
    error, text = API_ERRORS[api_error] if api_error else (None, None)
    text = text.format(model=model or "claude-opus-5-5") if text else None
    for line in read_text(os.path.join(RECORDED, f"{case}.stdout")).splitlines():
        event = json.loads(line)
        if error and event.get("type") == "assistant":
            event["error"] = error
            event["message"]["content"][0]["text"] = text
        if error and event.get("type") == "result":
            event["result"] = text
        if event.get("session_id"):
            event["session_id"] = session_id
        if event.get("type") == "system" and event.get("subtype") == "init":
            event["cwd"] = os.getcwd()
            if model:
                event["model"] = model
        emit(event)


def main() -> int:
    log_argv()
    if sys.argv[1:3] == ["auth", "status"]:
        return auth_status()
    opts, positional = parse_args(sys.argv[1:])
    if opts.get("help"):
        sys.stdout.write(HELP)
        return 0
    if opts.get("version"):
        print(f"{VERSION} (Claude Code)")
        return 0
    check_choice(opts, "output_format", "--output-format <format>", OUTPUT_FORMATS)
    if opts.get("effort") and opts["effort"] not in EFFORTS:  # 2.1.332 warns and goes on
        sys.stderr.write(
            f"Warning: Unknown --effort value '{opts.pop('effort')}' — ignoring it and using the "
            f"default effort. Valid values: {', '.join(EFFORTS)}.\n"
        )
    check_choice(opts, "permission_mode", "--permission-mode <mode>", PERMISSION_MODES)
    for dest, flag in (("max_turns", "--max-turns"), ("max_budget_usd", "--max-budget-usd")):
        if dest in opts:
            try:
                float(opts[dest])
            except ValueError:
                fail(f"error: option '{flag}' argument '{opts[dest]}' is invalid.")
    if not opts.get("print"):
        fail("Error: this fake claude supports only print mode (-p/--print)")
    fmt = opts.get("output_format", "text")
    if fmt == "stream-json" and not opts.get("verbose"):
        fail("Error: When using --print, --output-format=stream-json requires --verbose")
    if "session_id" in opts and not valid_uuid(opts["session_id"]):
        fail("Error: Invalid session ID. Must be a valid UUID.")
    resume = opts.get("resume")
    fork = bool(opts.get("fork_session")) and resume is not None
    if resume is not None and "session_id" in opts and not fork:
        fail(
            "Error: --session-id can only be used with --continue or --resume "
            "if --fork-session is also specified."
        )
    mode = opts.get("permission_mode") or ""
    bypass = mode == "bypassPermissions" or opts.get("skip_permissions")
    if bypass and os.geteuid() == 0 and os.environ.get("IS_SANDBOX") != "1":
        fail("--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons")

    if positional:
        prompt = " ".join(positional)
    else:
        prompt = "" if sys.stdin is None or sys.stdin.closed else sys.stdin.read()
    if not prompt.strip():
        fail("Error: Input must be provided either through stdin or as a prompt argument when using --print")

    root = config_dir()
    project = os.path.join(root, "projects", slug(os.getcwd()))
    if resume is not None:
        old = os.path.join(project, f"{resume}.jsonl")
        if not os.path.exists(old):
            message = f"No conversation found with session ID: {resume}"
            if fmt == "stream-json":  # as 2.1.332: a result with errors[], and the words on stderr
                replay("unknown-session", resume)
            fail(message)
        session_id = (opts.get("session_id") or uuid4()) if fork else resume
    else:
        session_id = opts.get("session_id") or uuid4()
    path = os.path.join(project, f"{session_id}.jsonl")
    if resume is None and os.path.exists(path):
        fail(f"Error: Session ID {session_id} is already in use.")
    if fork and resume is not None:
        lines = read_text(os.path.join(project, f"{resume}.jsonl")).splitlines()
        with open(path, "w", encoding="utf-8") as f:
            for line in lines:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "sessionId" in rec:
                    rec["sessionId"] = session_id
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    install_cleanup()
    registry = os.path.join(root, "sessions", f"{os.getpid()}.json")
    os.makedirs(os.path.dirname(registry), exist_ok=True)
    record = {
        "pid": os.getpid(),
        "sessionId": session_id,
        "cwd": os.getcwd(),
        "startedAt": int(time.time() * 1000),
        "kind": "print",
        "entrypoint": "sdk-cli",
        "status": "busy",
    }
    with open(registry, "w", encoding="utf-8") as f:
        f.write(json.dumps(record))
    _CLEANUP.append(registry)
    mark_running()

    model = opts.get("model")
    if model and not (model.split("[")[0] in ALIASES or model.startswith("claude-")):
        # as 2.1.332 says of a model it does not know (and goes on)
        sys.stderr.write(f'[claude-code:unrecognized_model] {{"model":"{model}","query_source":"sdk"}}\n')
    if fmt == "stream-json" and (logged_out() or has_word(prompt, "NOLOGIN")):
        replay("nologin", session_id, opts.get("model"))
        return 1
    if fmt == "stream-json" and api_error_name(prompt):
        replay("nologin", session_id, opts.get("model"), api_error_name(prompt))
        return 1
    if fmt == "stream-json" and has_word(prompt, "OFFLINE"):
        replay("offline", session_id, opts.get("model"))
        return 1
    s = Session(opts, prompt, session_id, path, stream=fmt == "stream-json")
    s.init()
    s.user_prompt()
    if has_word(prompt, "FORK"):
        spawn_grandchild()
    if has_word(prompt, "HANG"):
        time.sleep(3600)
        return 0
    if has_word(prompt, "FOREVER"):
        i = 0
        while True:
            s.tick(i)
            i += 1
            time.sleep(0.05)
    if has_word(prompt, "RETRYING") and fmt == "stream-json":
        i = 0  # the API never answers: system/api_retry events forever, no model event
        while True:
            i += 1
            emit({"type": "system", "subtype": "api_retry", "attempt": i, "max_retries": 10,
                  "retry_delay_ms": 50, "error_status": None, "error": "unknown",
                  "session_id": session_id, "uuid": uuid4()})  # fmt: skip
            time.sleep(0.05)
    seconds = number_after(prompt, "SLEEP")
    if seconds:
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            s.tick(i)
            i += 1
            time.sleep(max(0.0, min(0.2, end - time.monotonic())))

    if has_word(prompt, "CRASH"):
        s.request([{"type": "thinking", "thinking": "Starting.", "signature": "fake"}], 4, None)
        fail("fake crash", 1)
    if has_word(prompt, "DENIED") or os.environ.get("FAKE_CLAUDE_BASH"):  # a call the argv may not grant
        s.bash_round(os.environ.get("FAKE_CLAUDE_BASH") or "git commit -qm work")
    if has_word(prompt, "ERROR"):
        s.request([{"type": "thinking", "thinking": "Starting.", "signature": "fake"}], 4, None)
        event = s.result(None, "error_during_execution")
        if fmt in ("stream-json", "json"):
            emit(event)
        else:
            sys.stderr.write("Error: fake error during execution\n")
        return 1
    s.tool_round()
    if has_word(prompt, "NOANSWER"):
        return 0

    answer = f"ok: {first_line(prompt)}"
    script = os.environ.get("FAKE_CLAUDE_SCRIPT")  # plays an agent: gets the prompt, prints the answer
    if script:
        import subprocess  # here, not at the top: the fake's start is the suite's

        answer = (
            subprocess.run([script], input=prompt, capture_output=True, text=True).stdout.strip() or answer
        )
    if resume is not None:
        answer = f"resumed {resume}: {answer}"
    s.answer_round(answer)
    event = s.result(answer)
    if fmt in ("stream-json", "json"):
        emit(event)
    else:
        print(answer, flush=True)
    linger = number_after(prompt, "LINGER")
    if linger:
        time.sleep(linger)
    return 0


if __name__ == "__main__":
    sys.exit(main())
