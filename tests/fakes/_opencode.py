"""A fake `opencode` (1.18.33) for wf's test suite: `opencode run` only.

Behaviour contract: tests/fakes/README.md. Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

from _fake_common import (  # noqa: E402
    emit,
    fail,
    first_line,
    has_word,
    install_cleanup,
    log_argv,
    mark_running,
    number_after,
    rand_id,
    spawn_grandchild,
)

VERSION = "1.18.33"
DEFAULT_MODEL = "opencode/big-pickle"  # 1.18.33 with no provider configured: a hosted free model
# The tables of opencode.db that wf reads, as 1.18.33 creates them (recorded).
SCHEMA = [
    "CREATE TABLE `project` ( `id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text, `icon_url` text, `icon_url_override` text, `icon_color` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `time_initialized` integer, `sandboxes` text NOT NULL, `commands` text )",
    "CREATE TABLE `session` ( `id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text, `parent_id` text, `slug` text NOT NULL, `directory` text NOT NULL, `path` text, `title` text NOT NULL, `version` text NOT NULL, `share_url` text, `summary_additions` integer, `summary_deletions` integer, `summary_files` integer, `summary_diffs` text, `metadata` text, `cost` real DEFAULT 0 NOT NULL, `tokens_input` integer DEFAULT 0 NOT NULL, `tokens_output` integer DEFAULT 0 NOT NULL, `tokens_reasoning` integer DEFAULT 0 NOT NULL, `tokens_cache_read` integer DEFAULT 0 NOT NULL, `tokens_cache_write` integer DEFAULT 0 NOT NULL, `revert` text, `permission` text, `agent` text, `model` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `time_compacting` integer, `time_archived` integer, CONSTRAINT `fk_session_project_id_project_id_fk` FOREIGN KEY (`project_id`) REFERENCES `project`(`id`) ON DELETE CASCADE )",
    "CREATE TABLE `message` ( `id` text PRIMARY KEY, `session_id` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL, CONSTRAINT `fk_message_session_id_session_id_fk` FOREIGN KEY (`session_id`) REFERENCES `session`(`id`) ON DELETE CASCADE )",
    "CREATE TABLE `part` ( `id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL, CONSTRAINT `fk_part_message_id_message_id_fk` FOREIGN KEY (`message_id`) REFERENCES `message`(`id`) ON DELETE CASCADE )",
]
FORMATS = ["default", "json"]

TOP_HELP = """\
opencode <command> [options]

Commands:
  opencode run [message..]  run opencode with a message (the only command this fake supports)

Options:
  -h, --help     show help
  -v, --version  show version number
"""

RUN_HELP = """\
opencode run [message..]

run opencode with a message

Positionals:
  message  message to send                                   [array] [default: []]

Options:
  -h, --help      show help                                              [boolean]
  -v, --version   show version number                                    [boolean]
  -m, --model     model to use in the format of provider/model            [string]
      --agent     agent to use                                            [string]
  -s, --session   session id to continue                                  [string]
      --fork      fork the session given with --session into a new one   [boolean]
      --format    format: default (formatted) or json (raw JSON events)
                                  [string] [choices: "default", "json"] [default: "default"]
      --auto      automatically approve permission requests               [boolean]
      --dir       directory to run in                                     [string]
      --title     title for the session                                   [string]
      --variant   model variant (provider-specific reasoning effort, e.g., high, max, minimal)
                                                                          [string]
      --print-logs  print logs to stderr                                  [boolean]
      --log-level   log level         [string] [choices: "DEBUG", "INFO", "WARN", "ERROR"]
"""

# option -> (dest, takes a value)
RUN_OPTIONS: dict[str, tuple[str, bool]] = {
    "-m": ("model", True),
    "--model": ("model", True),
    "--agent": ("agent", True),
    "-s": ("session", True),
    "--session": ("session", True),
    "--fork": ("fork", False),
    "--format": ("format", True),
    "--auto": ("auto", False),
    "--dir": ("dir", True),
    "--title": ("title", True),
    "--variant": ("variant", True),
    "--print-logs": ("print_logs", False),
    "--log-level": ("log_level", True),
    "-h": ("help", False),
    "--help": ("help", False),
    "-v": ("version", False),
    "--version": ("version", False),
}

# ---------------------------------------------------------------- common helpers


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


# ---------------------------------------------------------------- opencode specifics


def ident(prefix: str) -> str:
    """opencode ids: prefix, 12 hex digits of time, 14 base62 characters."""
    counter = int.from_bytes(os.urandom(2), "big") & 0xFFF  # 0 to 0xfff, each equally likely
    stamp = f"{int(time.time() * 1000) * 0x1000 + counter:012x}"[-12:]
    return prefix + stamp + rand_id(14)


def parse_args(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {}
    if not argv:
        sys.stderr.write(TOP_HELP)
        sys.exit(1)
    if argv[0] in ("-v", "--version"):
        print(VERSION)
        sys.exit(0)
    if argv[0] in ("-h", "--help"):
        sys.stderr.write(TOP_HELP)  # yargs, as 1.18.33: help goes to stderr
        sys.exit(0)
    if argv[0] != "run":
        fail(f"{TOP_HELP}\nError: this fake opencode supports only `opencode run` (got '{argv[0]}')", 1)
    positional: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional.extend(argv[i:])
            break
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if name not in RUN_OPTIONS:
            fail(f"{RUN_HELP}\nUnknown argument: {arg.lstrip('-').partition('=')[0]}", 1)
        dest, takes_value = RUN_OPTIONS[name]
        if dest == "help":
            sys.stderr.write(RUN_HELP)
            sys.exit(0)
        if dest == "version":
            print(VERSION)
            sys.exit(0)
        if not takes_value:
            opts[dest] = inline.lower() not in ("false", "0") if eq else True
            continue
        if eq:
            value = inline
        elif i < len(argv) and not argv[i].startswith("-"):
            value = argv[i]
            i += 1
        else:
            fail(f"{RUN_HELP}\nNot enough arguments following: {name.lstrip('-')}", 1)
        opts[dest] = value
    fmt = opts.get("format", "default")
    if fmt not in FORMATS:
        fail(
            f'{RUN_HELP}\nInvalid values:\n  Argument: format, Given: "{fmt}", Choices: "default", "json"', 1
        )
    return opts, positional


def db_path() -> str:
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "opencode", "opencode.db")


def store() -> sqlite3.Connection:
    import sqlite3  # here, not at the top: the fake's start is the suite's

    path = db_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    con = sqlite3.connect(path, timeout=10)
    for ddl in SCHEMA:
        con.execute(ddl.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
    return con


def session_exists(session_id: str) -> bool:
    if not os.path.exists(db_path()):
        return False
    with store() as con:
        found = con.execute("SELECT 1 FROM session WHERE id = ?", (session_id,)).fetchone()
    con.close()
    return found is not None


class Run:
    """One `opencode run`: prints --format json events (or plain text)."""

    def __init__(self, opts: dict[str, Any], prompt: str, session_id: str) -> None:
        self.json = opts.get("format") == "json"
        self.prompt = prompt
        self.session_id = session_id
        self.model = opts.get("model") or DEFAULT_MODEL
        self.message_id = ident("msg_")
        self.steps = 0
        self.fresh = not opts.get("session") or bool(opts.get("fork"))

    def save(self, tokens: dict[str, Any] | None = None, cost: float = 0.0) -> None:
        """The session row and one assistant message per finished step, as 1.18.33 stores them."""
        now = int(time.time() * 1000)
        provider, _, model_id = self.model.partition("/")
        with store() as con:
            con.execute(
                "INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                "VALUES ('global', ?, 'git', ?, ?, '[]')",
                (os.getcwd(), now, now),
            )
            con.execute(
                "INSERT OR IGNORE INTO session (id, project_id, slug, directory, title, version, model, "
                "time_created, time_updated) VALUES (?, 'global', 'fake-session', ?, 'New session', ?, ?, ?, ?)",
                (self.session_id, os.getcwd(), VERSION,
                 json.dumps({"id": model_id, "providerID": provider, "variant": "default"}), now, now),
            )  # fmt: skip
            if tokens is not None:
                data = {"role": "assistant", "cost": cost, "tokens": tokens, "modelID": model_id,
                        "providerID": provider, "time": {"created": now - 50, "completed": now}}  # fmt: skip
                con.execute(
                    "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                    (self.message_id, self.session_id, now, now, json.dumps(data)),
                )
                con.execute(
                    "UPDATE session SET cost = cost + ?, tokens_input = tokens_input + ?, "
                    "tokens_output = tokens_output + ?, time_updated = ? WHERE id = ?",
                    (cost, tokens["input"], tokens["output"], now, self.session_id),
                )
        con.close()

    def event(self, kind: str, body: dict[str, Any]) -> None:
        if self.json:
            emit({"type": kind, "timestamp": int(time.time() * 1000), "sessionID": self.session_id, **body})

    def part(self, kind: str, part: dict[str, Any]) -> None:
        full = {"id": ident("prt_"), "sessionID": self.session_id, "messageID": self.message_id, **part}
        self.event(kind, {"part": full})

    def step_start(self) -> None:
        self.message_id = ident("msg_")
        self.part("step_start", {"type": "step-start", "snapshot": os.urandom(20).hex()})

    def step_finish(self, reason: str, output: int) -> None:
        n = self.steps
        self.steps += 1
        tin = 12 + len(self.prompt) // 4 if n == 0 else 40
        cache = {"read": 0 if n == 0 else 11000 + 300 * n, "write": 11000 if n == 0 else 300}
        tokens = {"input": tin, "output": output, "reasoning": output // 3, "cache": cache}
        cost = (tin * 3 + output * 15 + cache["read"] * 0.3 + cache["write"] * 3.75) / 1e6
        self.save(tokens, cost)
        self.part(
            "step_finish",
            {
                "type": "step-finish",
                "reason": reason,
                "snapshot": os.urandom(20).hex(),
                "cost": cost,
                "tokens": tokens,
            },
        )

    def tool(self, command: str, output: str) -> None:
        now = int(time.time() * 1000)
        if not self.json:
            print(f"|  Bash     {command}", flush=True)
        self.part(
            "tool_use",
            {
                "type": "tool",
                "callID": "toolu_" + os.urandom(12).hex(),
                "tool": "bash",
                "state": {
                    "status": "completed",
                    "input": {"command": command, "description": "Run a command"},
                    "output": output,
                    "title": command,
                    "metadata": {"output": output, "exit": 0, "description": "Run a command"},
                    "time": {"start": now - 5, "end": now},
                },
            },
        )

    def text(self, text: str) -> None:
        now = int(time.time() * 1000)
        if not self.json:
            print(text, flush=True)
        self.part("text", {"type": "text", "text": text, "time": {"start": now - 20, "end": now}})

    def error(self, name: str, message: str) -> None:
        if self.json:
            self.event("error", {"error": {"name": name, "data": {"message": message}}})
        else:
            sys.stderr.write(f"Error: {message}\n")
            sys.stderr.flush()

    def tick(self, i: int) -> None:
        self.tool(f"sleep 0 # still working ({i})", "")


def main() -> int:
    log_argv()
    opts, words = parse_args(sys.argv[1:])
    if "dir" in opts:
        try:
            os.chdir(opts["dir"])
        except OSError as e:
            fail(f"Error: failed to change directory to {opts['dir']}: {e.strerror}", 1)
    stdin = ""
    if sys.stdin is not None and not sys.stdin.isatty():
        stdin = sys.stdin.read()
    message = " ".join(words)
    prompt = f"{message}\n{stdin}" if message and stdin else message or stdin
    if not prompt.strip():
        fail("Error: You must provide a message or a command", 1)
    previous = opts.get("session")
    if opts.get("fork") and not previous:
        fail("Error: --fork requires --session", 1)
    if previous is not None and not session_exists(previous):
        fail("\x1b[91m\x1b[1mError: \x1b[0mSession not found", 1)  # as 1.18.33
    session_id = ident("ses_") if previous is None or opts.get("fork") else previous

    install_cleanup()
    mark_running()
    r = Run(opts, prompt, session_id)
    r.save()
    model = opts.get("model")
    if model is not None and "/" not in model:  # 1.18.33: an opaque server error, exit 1
        if opts.get("print_logs"):
            sys.stderr.write(
                f'timestamp={now_iso()} level=ERROR message=failed error="ProviderModelNotFoundError: '
                f'Model not found: {model}/."\n'
            )
        r.event("error", {"error": {"name": "UnknownError", "data": {
            "message": "Unexpected server error. Check server logs for details.", "ref": "err_fake0001"}}})  # fmt: skip
        return 1
    r.step_start()
    if has_word(prompt, "FORK"):
        spawn_grandchild()
    if has_word(prompt, "HANG"):
        time.sleep(3600)
        return 0
    if has_word(prompt, "FOREVER"):
        i = 0
        while True:
            r.tick(i)
            i += 1
            time.sleep(0.05)
    seconds = number_after(prompt, "SLEEP")
    if seconds:
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            r.tick(i)
            i += 1
            time.sleep(max(0.0, min(0.2, end - time.monotonic())))
    if has_word(prompt, "CRASH"):
        r.tool("pwd", os.getcwd() + "\n")
        r.error("UnknownError", "fake crash")
        fail("fake crash", 1)
    if has_word(prompt, "ERROR"):
        r.error("APIError", "fake error: provider returned 500")
        return 1
    r.tool("pwd", os.getcwd() + "\n")
    r.step_finish("tool-calls", 60)
    r.step_start()
    if has_word(prompt, "NOANSWER"):
        r.step_finish("stop", 5)
        return 0
    answer = f"ok: {first_line(prompt)}"
    if previous is not None:
        answer = f"resumed {previous}: {answer}"
    r.text(answer)
    r.step_finish("stop", 10 + len(answer) // 4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
