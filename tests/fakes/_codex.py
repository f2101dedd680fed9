"""A fake `codex` (codex-cli 0.171.0) for wf's test suite: `codex exec` only.

Behaviour contract: tests/fakes/README.md. Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn

from _fake_common import (  # noqa: E402
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
    spawn_grandchild,
    touch,
)

VERSION = "0.171.0"
DEFAULT_MODEL = "gpt-5.3-codex"
SANDBOXES = ["read-only", "workspace-write", "danger-full-access"]
COLORS = ["always", "never", "auto"]
CONTEXT_WINDOW = 258400

TOP_HELP = """\
Codex CLI

If no subcommand is specified, options will be forwarded to the interactive CLI
(this fake supports only `exec`).

Usage: codex [OPTIONS] [PROMPT]
       codex [OPTIONS] <COMMAND> [ARGS]

Commands:
  exec        Run Codex non-interactively [aliases: e]
  help        Print this message or the help of the given subcommand(s)

Options:
  -c, --config <key=value>  Override a configuration value that would otherwise be loaded from
                            `~/.codex/config.toml`. Use a dotted path to override nested values.
                            The value is parsed as TOML, else used as a literal string
  -h, --help                Print help (see more with '--help')
  -V, --version             Print version
"""

EXEC_HELP = """\
Run Codex non-interactively

Usage: codex exec [OPTIONS] [PROMPT] [COMMAND]

Commands:
  resume  Resume a previous session by id or pick the most recent with --last
  help    Print this message or the help of the given subcommand(s)

Arguments:
  [PROMPT]  Initial instructions for the agent. If not provided as an argument (or if `-` is used),
            instructions are read from stdin

Options:
  -c, --config <key=value>                      Override a configuration value (repeatable), e.g.
                                                -c model_reasoning_effort="high"
  -m, --model <MODEL>                           Model the agent should use
  -s, --sandbox <SANDBOX_MODE>                  Select the sandbox policy to use when executing
                                                model-generated shell commands [possible values:
                                                read-only, workspace-write, danger-full-access]
      --dangerously-bypass-approvals-and-sandbox
                                                Skip all confirmation prompts and execute commands
                                                without sandboxing
  -C, --cd <DIR>                                Tell the agent to use the specified directory as
                                                its working root
      --skip-git-repo-check                     Allow running Codex outside a Git repository
      --color <COLOR>                           Specifies color settings for use in the output
                                                [default: auto] [possible values: always, never, auto]
      --ignore-user-config                      Do not load `$CODEX_HOME/config.toml`; auth still
                                                uses `CODEX_HOME`
      --json                                    Print events to stdout as JSONL
  -o, --output-last-message <FILE>              Specifies file where the last message from the
                                                agent should be written
  -h, --help                                    Print help (see more with '--help')
  -V, --version                                 Print version
"""

RESUME_HELP = """\
Resume a previous session by id or pick the most recent with --last

Usage: codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]

Arguments:
  [SESSION_ID]  Conversation/session id (UUID). When provided, resumes this session
  [PROMPT]      Prompt to send after resuming the session. If `-` is used, read from stdin

Options:
      --last                          Resume the most recent recorded session
  -c, --config <key=value>            Override a configuration value (repeatable)
  -m, --model <MODEL>                 Model the agent should use
      --skip-git-repo-check           Allow running Codex outside a Git repository
      --ignore-user-config            Do not load `$CODEX_HOME/config.toml`
      --json                          Print events to stdout as JSONL
  -o, --output-last-message <FILE>    Specifies file where the last message from the agent should
                                      be written
  -h, --help                          Print help
"""

# option -> (dest, takes a value); the `resume` subcommand accepts a subset.
EXEC_OPTIONS: dict[str, tuple[str, bool]] = {
    "-c": ("config", True),
    "--config": ("config", True),
    "-m": ("model", True),
    "--model": ("model", True),
    "-s": ("sandbox", True),
    "--sandbox": ("sandbox", True),
    "--dangerously-bypass-approvals-and-sandbox": ("bypass", False),
    "-C": ("cd", True),
    "--cd": ("cd", True),
    "--skip-git-repo-check": ("skip_git", False),
    "--ignore-user-config": ("ignore_user_config", False),
    "--color": ("color", True),
    "--json": ("json", False),
    "--experimental-json": ("json", False),
    "-o": ("output", True),
    "--output-last-message": ("output", True),
    "-h": ("help", False),
    "--help": ("help", False),
    "-V": ("version", False),
    "--version": ("version", False),
}
RESUME_ONLY = {"--last": ("last", False)}
NOT_AFTER_RESUME = {"-s", "--sandbox", "-C", "--cd", "--color", "--dangerously-bypass-approvals-and-sandbox"}
VALUE_NAMES = {
    "config": "--config <key=value>",
    "model": "--model <MODEL>",
    "sandbox": "--sandbox <SANDBOX_MODE>",
    "cd": "--cd <DIR>",
    "color": "--color <COLOR>",
    "output": "--output-last-message <FILE>",
}

# ---------------------------------------------------------------- common helpers


# ---------------------------------------------------------------- codex specifics


def usage_error(message: str, usage: str) -> NoReturn:
    fail(f"error: {message}\n\nUsage: {usage}\n\nFor more information, try '--help'.", 2)


def uuid7() -> str:
    ms = int(time.time() * 1000)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"  # as str(uuid.UUID(int=value)), without importing uuid
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_args(argv: list[str]) -> tuple[dict[str, Any], list[str], bool]:
    """Returns (options, positionals after `exec` [and `resume`], resume?)."""
    opts: dict[str, Any] = {"config": []}
    i = 0
    # global part: `codex [-c k=v]... [--version|--help] exec ...`
    while i < len(argv):
        arg = argv[i]
        if arg in ("-V", "--version"):
            print(f"codex-cli {VERSION}")
            sys.exit(0)
        if arg in ("-h", "--help"):
            sys.stdout.write(TOP_HELP)
            sys.exit(0)
        if arg in ("-c", "--config") or arg.startswith("--config="):
            if "=" in arg and arg.startswith("--config="):
                opts["config"].append(arg.partition("=")[2])
                i += 1
            elif i + 1 < len(argv):
                opts["config"].append(argv[i + 1])
                i += 2
            else:
                usage_error(
                    "a value is required for '--config <key=value>' but none was supplied",
                    "codex [OPTIONS] [PROMPT]",
                )
            continue
        break
    if i >= len(argv):
        fail("error: this fake codex supports only `codex exec`", 2)
    if argv[i] not in ("exec", "e"):
        if argv[i].startswith("-"):
            usage_error(f"unexpected argument '{argv[i]}' found", "codex [OPTIONS] [PROMPT]")
        fail(f"error: this fake codex supports only `codex exec` (got '{argv[i]}')", 2)
    i += 1
    positional: list[str] = []
    resume = False
    usage = "codex exec [OPTIONS] [PROMPT]"
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional.extend(argv[i:])
            break
        if arg == "resume" and not resume and not positional:
            resume = True
            usage = "codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]"
            continue
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        table = {**EXEC_OPTIONS, **RESUME_ONLY} if resume else EXEC_OPTIONS
        if not name.startswith("--"):
            eq, inline, name = "", "", arg
            if len(arg) > 2 and arg[:2] in table and table[arg[:2]][1]:
                name, eq, inline = arg[:2], "=", arg[2:]
        if name not in table or (resume and name in NOT_AFTER_RESUME):
            usage_error(
                f"unexpected argument '{arg}' found\n\n  tip: to pass '{arg}' as a value, use '-- {arg}'",
                usage,
            )
        dest, takes_value = table[name]
        if dest == "help":
            sys.stdout.write(RESUME_HELP if resume else EXEC_HELP)
            sys.exit(0)
        if dest == "version":
            print(f"codex-cli {VERSION}")
            sys.exit(0)
        if not takes_value:
            if eq:
                usage_error(f"unexpected value '{inline}' for '{name}' found; no more were expected", usage)
            opts[dest] = True
            continue
        if eq:
            value = inline
        elif i < len(argv) and (argv[i] == "-" or not argv[i].startswith("-")):
            value = argv[i]
            i += 1
        else:
            usage_error(f"a value is required for '{VALUE_NAMES[dest]}' but none was supplied", usage)
        if dest == "config":
            opts["config"].append(value)
        else:
            opts[dest] = value
    for dest, choices in (("sandbox", SANDBOXES), ("color", COLORS)):
        if dest in opts and opts[dest] not in choices:
            usage_error(
                f"invalid value '{opts[dest]}' for '{VALUE_NAMES[dest]}'\n"
                f"  [possible values: {', '.join(choices)}]",
                usage,
            )
    limit = 2 if resume else 1
    if len(positional) > limit:
        usage_error(f"unexpected argument '{positional[limit]}' found", usage)
    return opts, positional, resume


def parse_config(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            fail(f"Error: Invalid override (missing '='): {item}", 2)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value
    return out


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def in_git_repo(cwd: str) -> bool:
    return any(os.path.exists(os.path.join(d, ".git")) for d in folders(cwd))


class Thread:
    """One `codex exec` turn: writes the rollout and prints --json events."""

    def __init__(self, opts: dict[str, Any], config: dict[str, str], prompt: str) -> None:
        self.opts = opts
        self.prompt = prompt
        self.json = bool(opts.get("json"))
        self.cwd = os.getcwd()
        self.model = opts.get("model") or config.get("model") or DEFAULT_MODEL
        self.effort = config.get("model_reasoning_effort", "medium")
        self.approval = config.get("approval_policy", "never")
        self.sandbox = opts.get("sandbox") or config.get("sandbox_mode") or "read-only"
        if opts.get("bypass"):
            self.sandbox, self.approval = "danger-full-access", "never"
        self.turn_id = uuid7()
        self.items = 0
        self.total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning": 0}
        self.thread_id = ""
        self.path = ""

    # rollout ---------------------------------------------------------------
    def open_fresh(self) -> None:
        self.thread_id = uuid7()
        now = time.localtime()
        folder = os.path.join(codex_home(), "sessions", time.strftime("%Y/%m/%d", now))
        os.makedirs(folder, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", now)
        self.path = os.path.join(folder, f"rollout-{stamp}-{self.thread_id}.jsonl")
        self.record(
            "session_meta",
            {
                "id": self.thread_id,
                "timestamp": now_iso(),
                "cwd": self.cwd,
                "originator": "codex_exec",
                "cli_version": VERSION,
                "source": "exec",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex, a coding agent (fake)."},
            },
        )

    def open_resume(self, thread_id: str) -> None:
        from pathlib import Path  # here, not at the top: the fake's start is the suite's

        found = sorted(Path(codex_home(), "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
        if not found:
            fail(  # as 0.171.0
                f"Error: thread/resume: thread/resume failed: no rollout found for thread id {thread_id} "
                "(code -32600)",
                1,
            )
        self.thread_id = thread_id
        self.path = str(found[-1])
        with open(self.path, encoding="utf-8") as f:
            text = f.read()
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            payload = rec.get("payload") if isinstance(rec, dict) else None
            if isinstance(payload, dict) and payload.get("type") == "token_count" and payload.get("info"):
                t = payload["info"]["total_token_usage"]
                self.total = {
                    "input_tokens": t["input_tokens"],
                    "cached_input_tokens": t["cached_input_tokens"],
                    "output_tokens": t["output_tokens"],
                    "reasoning": t.get("reasoning_output_tokens", 0),
                }

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        self.ordinal = getattr(self, "ordinal", 0) + 1  # 0.171 numbers its rollout lines
        line = {"timestamp": now_iso(), "ordinal": self.ordinal, "type": kind, "payload": payload}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, separators=(",", ":")))
            f.write("\n")

    def event_msg(self, payload: dict[str, Any]) -> None:
        self.record("event_msg", payload)

    def turn_context(self) -> None:
        self.record(
            "turn_context",
            {
                "turn_id": self.turn_id,
                "cwd": self.cwd,
                "approval_policy": self.approval,
                "sandbox_policy": {
                    "type": self.sandbox,
                    "writable_roots": [self.cwd] if self.sandbox == "workspace-write" else [],
                    "network_access": False,
                    "exclude_tmpdir_env_var": False,
                    "exclude_slash_tmp": False,
                },
                "model": self.model,
                "personality": "pragmatic",
                "collaboration_mode": {
                    "mode": "default",
                    "settings": {"model": self.model, "reasoning_effort": self.effort},
                },
                "effort": self.effort,
                "summary": "auto",
                "truncation_policy": {"mode": "tokens", "limit": 10000},
            },
        )

    def token_count(self, last: dict[str, int] | None) -> None:
        info = None
        if last is not None:
            total = {
                "input_tokens": self.total["input_tokens"],
                "cached_input_tokens": self.total["cached_input_tokens"],
                "output_tokens": self.total["output_tokens"],
                "reasoning_output_tokens": self.total["reasoning"],
                "total_tokens": self.total["input_tokens"] + self.total["output_tokens"],
            }
            info = {
                "total_token_usage": total,
                "last_token_usage": {
                    "input_tokens": last["input_tokens"],
                    "cached_input_tokens": last["cached_input_tokens"],
                    "output_tokens": last["output_tokens"],
                    "reasoning_output_tokens": last["reasoning"],
                    "total_tokens": last["input_tokens"] + last["output_tokens"],
                },
                "model_context_window": CONTEXT_WINDOW,
            }
        self.event_msg(
            {
                "type": "token_count",
                "info": info,
                "rate_limits": {
                    "limit_id": "codex",
                    "limit_name": None,
                    "primary": {"used_percent": 2.0, "window_minutes": 300, "resets_at": 1771864834},
                    "secondary": {"used_percent": 1.0, "window_minutes": 10080, "resets_at": 1772355702},
                    "credits": {"has_credits": False, "unlimited": False, "balance": None},
                    "plan_type": None,
                },
            }
        )

    def add_request(self, n: int, output: int) -> dict[str, int]:
        base = 9000 + len(self.prompt) + self.total["input_tokens"] // 10
        last = {
            "input_tokens": base + 400 * n,
            "cached_input_tokens": (3456 if n == 0 and not self.total["input_tokens"] else base - base % 128),
            "output_tokens": output,
            "reasoning": output // 2,
        }
        for key in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning"):
            self.total[key] += last[key]
        return last

    def start_turn(self) -> None:
        self.record(
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "<permissions instructions>(fake)"}],
            },
        )
        env_ctx = (
            f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <shell>bash</shell>\n</environment_context>"
        )
        self.record(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env_ctx}]},
        )
        self.event_msg(
            {
                "type": "task_started",
                "turn_id": self.turn_id,
                "model_context_window": CONTEXT_WINDOW,
                "collaboration_mode_kind": "default",
            }
        )
        self.record(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": self.prompt}]},
        )
        self.event_msg(
            {
                "type": "user_message",
                "message": self.prompt,
                "images": [],
                "local_images": [],
                "text_elements": [],
            }
        )
        self.record(  # 0.171: the state the model is told about (abridged)
            "world_state",
            {"full": True, "state": {"collaboration_mode": {"mode": "default", "model": self.model}}},
        )
        self.turn_context()
        self.event_msg(
            {
                "type": "thread_settings_applied",
                "thread_id": self.thread_id,
                "thread_settings": {
                    "model": self.model,
                    "model_provider_id": "openai",
                    "approval_policy": self.approval,
                },
            }
        )
        self.token_count(None)

    # events ----------------------------------------------------------------
    def item(self, kind: str, item: dict[str, Any], item_id: str | None = None) -> str:
        if item_id is None:
            item_id = f"item_{self.items}"
            self.items += 1
        if self.json:
            emit({"type": kind, "item": {"id": item_id, **item}})
        elif kind == "item.completed":
            text = item.get("text") or item.get("command") or item.get("type")
            sys.stderr.write(f"[{time.strftime('%Y-%m-%dT%H:%M:%S')}] {item['type']}: {text}\n")
            sys.stderr.flush()
        return item_id

    def reasoning(self, text: str) -> None:
        self.event_msg({"type": "agent_reasoning", "text": text})
        self.record(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": text}],
                "content": None,
                "encrypted_content": "gAAAAfake",
            },
        )
        self.item("item.completed", {"type": "reasoning", "text": text})

    def command_round(self) -> None:
        self.reasoning("**Inspecting the workspace**")
        call_id = "call_" + os.urandom(12).hex()
        args = json.dumps({"cmd": "pwd", "workdir": self.cwd})
        self.record(
            "response_item",
            {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": call_id},
        )
        command = "/bin/bash -lc pwd"
        started = {"type": "command_execution", "command": command, "aggregated_output": ""}
        item_id = self.item("item.started", {**started, "exit_code": None, "status": "in_progress"})
        time.sleep(0.01)
        last = self.add_request(0, 120)
        self.token_count(last)
        self.record(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": f"Exit code: 0\nOutput:\n{self.cwd}\n",
            },
        )
        done = {**started, "aggregated_output": self.cwd + "\n", "exit_code": 0, "status": "completed"}
        self.item("item.completed", done, item_id)
        self.turn_context()
        self.token_count(last)

    def answer(self, text: str | None) -> None:
        self.reasoning("**Answering**")
        if text is not None:
            self.event_msg({"type": "agent_message", "message": text})
            self.record(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                    "phase": "final_answer",
                },
            )
            self.item("item.completed", {"type": "agent_message", "text": text})
        last = self.add_request(1, 40 + len(text or "") // 4)
        self.token_count(last)
        self.event_msg({"type": "task_complete", "turn_id": self.turn_id, "last_agent_message": text})
        usage = {
            "input_tokens": self.total["input_tokens"],
            "cached_input_tokens": self.total["cached_input_tokens"],
            "output_tokens": self.total["output_tokens"],
        }
        if self.json:
            emit({"type": "turn.completed", "usage": usage})
        output = self.opts.get("output")
        if text is not None and output:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        if text is not None and not self.json:
            print(text, flush=True)

    def failed(self, message: str, error_event: bool) -> None:
        self.event_msg({"type": "error", "message": message})
        if self.json:
            if error_event:
                emit({"type": "error", "message": message})
            emit({"type": "turn.failed", "error": {"message": message}})
        else:
            sys.stderr.write(f"ERROR: {message}\n")

    def tick(self, i: int) -> None:
        self.item("item.completed", {"type": "reasoning", "text": f"**Still working ({i})**"})


# What 0.171.0 prints offline (recorded): reconnects, a transport fallback warning, then
# "waiting for network" forever.
RECONNECT = "Reconnecting... {n}/5 (stream disconnected before completion: failed to lookup address information: Name does not resolve)"
FALLBACK = "Falling back from WebSockets to HTTPS transport. stream disconnected before completion: failed to lookup address information: Name does not resolve"
WAITING = "Reconnecting... waiting for network (Connection failed: error sending request)"


def logged_out() -> bool:
    return os.environ.get("FAKE_LOGGED_OUT") == "1"


def reconnects(t: Thread) -> None:
    for n in range(2, 6):
        emit({"type": "error", "message": RECONNECT.format(n=n)})
    t.item("item.completed", {"type": "error", "message": FALLBACK})


def main() -> int:
    log_argv()
    if sys.argv[1:3] == ["login", "status"]:
        sys.stderr.write("Not logged in\n" if logged_out() else "Logged in using an API key - sk-fake***\n")
        return 1 if logged_out() else 0
    opts, positional, resume = parse_args(sys.argv[1:])
    config = parse_config(opts["config"])
    thread_id = None
    if resume:
        if opts.get("last"):
            fail("Error: this fake codex does not support `resume --last`", 1)
        if not positional:
            fail("Error: `codex exec resume` needs a SESSION_ID in this fake", 1)
        thread_id = positional.pop(0)
    if opts.get("output"):
        opts["output"] = os.path.abspath(opts["output"])  # codex resolves -o against its own cwd, not -C
    if "cd" in opts:
        try:
            os.chdir(opts["cd"])
        except OSError as e:
            fail(f"Error: failed to change directory to {opts['cd']}: {e.strerror}", 1)
    if not opts.get("skip_git") and not in_git_repo(os.getcwd()):
        fail("Not inside a trusted directory and --skip-git-repo-check was not specified.", 1)
    if positional and positional[0] != "-":
        prompt = positional[0]
    elif sys.stdin is None or (not positional and sys.stdin.isatty()):
        fail("Error: No prompt provided. Either specify one as an argument or pipe the prompt into stdin.", 1)
    else:
        prompt = sys.stdin.read()
    if not prompt.strip():
        fail("Error: No prompt provided via stdin.", 1)

    t = Thread(opts, config, prompt)
    if thread_id is not None:
        t.open_resume(thread_id)
    else:
        t.open_fresh()
    install_cleanup()
    mark_running()
    if not t.json:
        sys.stderr.write(
            f"OpenAI Codex v{VERSION} (research preview)\n--------\nworkdir: {t.cwd}\nmodel: {t.model}\n"
            f"provider: openai\napproval: {t.approval}\nsandbox: {t.sandbox}\n"
            f"reasoning effort: {t.effort}\nsession id: {t.thread_id}\n--------\nuser\n{prompt}\n"
        )
        sys.stderr.flush()
    if opts.get("output"):
        touch(opts["output"])  # 0.171 creates the -o file, empty, when the run starts
    if t.json:
        emit({"type": "thread.started", "thread_id": t.thread_id})
        emit({"type": "turn.started"})
    t.start_turn()
    if t.json and (logged_out() or has_word(prompt, "OFFLINE")):
        reconnects(t)  # not logged in, 0.171 still tries, and offline it retries forever
        while True:
            emit({"type": "error", "message": WAITING})
            time.sleep(0.05)
    if t.json and has_word(prompt, "RECONNECT"):
        reconnects(t)  # transient: the turn goes on
    if has_word(prompt, "FORK"):
        spawn_grandchild()
    if has_word(prompt, "HANG"):
        time.sleep(3600)
        return 0
    if has_word(prompt, "FOREVER"):
        i = 0
        while True:
            t.tick(i)
            i += 1
            time.sleep(0.05)
    seconds = number_after(prompt, "SLEEP")
    if seconds:
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            t.tick(i)
            i += 1
            time.sleep(max(0.0, min(0.2, end - time.monotonic())))
    if has_word(prompt, "CRASH"):
        t.reasoning("**Starting**")
        t.failed("fake crash", error_event=False)
        fail("fake crash", 1)
    if has_word(prompt, "ERROR"):
        t.reasoning("**Starting**")
        t.failed("fake error: stream disconnected before completion", error_event=True)
        return 1
    t.command_round()
    if has_word(prompt, "NOANSWER"):
        t.answer(None)
        return 0
    text = f"ok: {first_line(prompt)}"
    if thread_id is not None:
        text = f"resumed {thread_id}: {text}"
    t.answer(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
