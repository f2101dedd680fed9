"""What every adapter shares: the unit spec, the parsed stream, the failure taxonomy and
the Adapter interface one module per tool implements (claude.py, codex.py, opencode.py,
cmd.py). Adding a tool means adding one module and listing it in ``__init__``."""

from __future__ import annotations

import enum
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from wf.adapters import limits
from wf.adapters.limits import Limit
from wf.base.config import PERMISSION_MODES

# Variables that make a nested Claude Code think it runs inside another one, or that
# disable the transcripts resuming and cost accounting need.
_STRIP_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SKIP_PROMPT_HISTORY",
)

# What a tool says in place of a model when no model answered.
PLACEHOLDER_MODELS = frozenset({"<synthetic>", "synthetic", "unknown", "default", "none", "null", ""})
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
# The login probe's answer, per program and the variables that say where its login lives.
_LOGIN_CACHE: dict[tuple[str, ...], tuple[bool | None, str]] = {}
_LOGIN_VARS = ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
DEFAULT_TIMEOUT = 7200.0  # no unit runs unbounded: two hours unless the lane or unit says
# the option tokens an installed program's --help lists, per (path, mtime): asked once
_OPTIONS_CACHE: dict[tuple[str, int], frozenset[str]] = {}


class Failure(str, enum.Enum):  # noqa: UP042 - the interface the orchestration loop uses
    """Why a unit failed. auth to tool, usage_limit and overloaded are the
    infrastructure's fault (the task itself was never really tried: release it or run it
    again); task, stall and timeout are the work's."""

    auth = "auth"  # not logged in, bad key
    quota = "quota"  # credit, billing, out of extra usage
    rate_limit = "rate_limit"
    network = "network"
    model = "model"  # refused or unknown model
    tool = "tool"  # could not start, crashed before its first event
    task = "task"  # the agent ran and failed
    stall = "stall"  # no model event for the stall window
    timeout = "timeout"
    usage_limit = "usage_limit"  # the plan's window is used up until a reset: park, then go on
    overloaded = "overloaded"  # the API is overloaded (529): a short backoff, then a retry
    denied = "denied"  # the tool refused a call the worker's grants lack (Parsed.denied says which)

    @property
    def infrastructure(self) -> bool:
        return self in _INFRASTRUCTURE


_INFRASTRUCTURE = frozenset(
    {
        Failure.auth,
        Failure.quota,
        Failure.rate_limit,
        Failure.network,
        Failure.model,
        Failure.tool,
        Failure.usage_limit,
        Failure.overloaded,
    }
)


@dataclass(frozen=True)
class Problem:
    """Something that keeps a lane's workers from running, found before they start."""

    failure: Failure
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.failure.value}: {self.message} ({self.fix})"


@dataclass(frozen=True)
class Denial:
    """A tool call the tool itself refused because the worker's grants lack it (claude's
    ``permission_denials``): which tool, and what it was asked to do (the command, the
    path, the URL)."""

    tool: str
    what: str

    def text(self) -> str:
        return f"{self.tool} `{self.what}`" if self.what else self.tool

    def as_json(self) -> dict[str, str]:
        return {"tool": self.tool, "what": self.what}

    @classmethod
    def from_json(cls, raw: Any) -> Denial | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str):
            return None
        return cls(raw["tool"], str(raw.get("what") or ""))


def denied_words(tool: str, denials: list[Denial] | tuple[Denial, ...]) -> str:
    """``claude denied Bash `git add x`, Bash `git commit ...``` (three at most, then a count)."""
    more = f" and {len(denials) - 3} more" if len(denials) > 3 else ""
    return f"{tool} denied {', '.join(d.text() for d in denials[:3])}{more}"


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
    sandbox: str = "workspace-write"  # codex -s
    network: bool = False  # codex sandbox network access; claude WebFetch/WebSearch
    isolate_mcp: bool = False  # no MCP servers from the user's config
    extra_args: tuple[str, ...] = ()  # appended to the tool's options, before the prompt

    def access(self) -> dict[str, Any]:
        """The tool access the unit got, as recorded in status.json."""
        return {
            "permission_mode": self.permission_mode,
            "allowed_tools": list(self.allowed_tools),
            "sandbox": self.sandbox,
            "network": self.network,
            "isolate_mcp": self.isolate_mcp,
            "extra_args": list(self.extra_args),
        }


class Parsed:
    """What an event stream said so far (fed one line at a time)."""

    def __init__(self) -> None:
        self.answer: str | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None  # the tool's own words for a final failure
        self.failure: Failure | None = None  # its class, when the stream says it
        self.finished = False  # a final result/turn-completed event was seen
        self.snippets: list[str] = []  # readable text, for a fallback answer
        self.events = 0  # JSON events read
        self.progress = 0  # model events (text, tool use, turn): what stall detection watches
        self.transient: str | None = None  # the last retry notice (neither failure nor progress)
        self.transient_failure: Failure | None = None
        self._transient_at = -1  # the progress count when it came
        self.step: list[str] = []  # opencode: the text parts of the current step
        self.limit: Limit | None = None  # the plan's usage limit that rejected the run
        self.denied: list[Denial] = []  # tool calls the tool refused (no grant), in order
        self.calls: dict[str, Any] = {}  # claude: tool_use inputs by id (to name a refused call)

    def deny(self, denial: Denial) -> None:
        if denial not in self.denied:
            self.denied.append(denial)

    def note(self, text: str) -> None:
        text = text.strip()
        if text:
            self.snippets.append(text)
            del self.snippets[:-20]

    def retry(self, words: Any, failure: Failure) -> None:
        """A retry notice: neither a failure nor progress."""
        self.transient = one_line(words)
        self.transient_failure = failure
        self._transient_at = self.progress

    def retrying(self) -> tuple[Failure, str] | None:
        """What the tool was retrying when nothing has progressed since its last notice."""
        if self.transient and self.transient_failure is not None and self._transient_at == self.progress:
            return self.transient_failure, self.transient
        return None

    def set_model(self, model: Any) -> None:
        self.model = a_model(model) or self.model

    def fail(self, failure: Failure, reason: Any) -> None:
        self.failure = failure
        self.error = one_line(reason) or failure.value

    def limited(self, limit: Limit) -> None:
        """The plan's usage limit rejected the run (a structured event said so)."""
        self.limit = limit
        self.failure = Failure.usage_limit
        self.error = self.error or "usage limit"


def a_model(model: Any) -> str | None:
    """The model named, or None when it is a placeholder (``<synthetic>``) or no string."""
    return model if isinstance(model, str) and model.strip() not in PLACEHOLDER_MODELS else None


def one_line(text: Any, width: int = 300) -> str | None:
    """The tool's words as one line (ANSI colours and extra blanks gone)."""
    if text is None:
        return None
    flat = " ".join(re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", str(text)).split())
    return (flat[: width - 3] + "...") if len(flat) > width else (flat or None)


# Words the tools use, in the order they are tried: first match wins.
_WORDS: tuple[tuple[Failure, re.Pattern[str]], ...] = tuple(
    (f, re.compile(p, re.IGNORECASE))
    for f, p in (
        (Failure.auth, r"not logged in|/login|log ?in again|invalid api key|invalid x-api-key|"
         r"unauthori[sz]ed|authentication|\b401\b|token (?:expired|has expired|was rejected)|"
         r"refresh token|credential expired|api key login|missing api key|no api key"),
        (Failure.usage_limit, r"hit your (?:[\w-]+ )?limit|usage limit reached|usage_limit_reached|"
         r"(?:5-hour|session|weekly|opus) limit (?:reached|·)"),
        (Failure.quota, r"credit balance|billing|insufficient_quota|quota|usage limit|"
         r"out of (?:extra )?usage|plan limit|purchase more credits|upgrade to|spend limit|"
         r"account is on hold"),
        (Failure.overloaded, r"overloaded|\b529\b"),
        (Failure.rate_limit, r"rate.?limit|too many requests|\b429\b"),
        (Failure.model, r"model .*(?:not found|does not exist|not supported|not available|unknown)|"
         r"(?:unknown|invalid|unsupported|unrecognized) model|issue with the selected model|"
         r"model_not_found|ProviderModelNotFound"),
        (Failure.network, r"can't reach|cannot reach|cannot connect|unable to connect|"
         r"connection (?:failed|refused|reset|error)|"
         r"connection_failed|network|dns|enotfound|econnrefused|econnreset|etimedout|"
         r"stream disconnected|error sending request|failed to lookup address|name does not resolve|"
         r"timed out|socket hang up|fetch failed|\b50[234]\b|server_error"),
    )
)  # fmt: skip


def limit_of(failure: Failure | None, parsed: Parsed, words: str | None) -> Limit | None:
    """The usage limit of a unit that failed ``failure``: what the tool's event said,
    else what its words say (the window and reset they name; an empty Limit if none)."""
    if failure is not Failure.usage_limit:
        return None
    return parsed.limit or limits.from_words(words) or limits.from_words(parsed.error) or Limit()


def status_failure(status: Any) -> Failure | None:
    """The class of an HTTP status a tool reports as a number: a 5xx is the service's or
    the network's (529, overloaded, is left to the words: a busy service, not a broken one)."""
    if isinstance(status, int) and not isinstance(status, bool) and 500 <= status < 600 and status != 529:
        return Failure.network
    return None


def classify_words(text: str | None) -> Failure | None:
    """The failure class a tool's message names, if it names one."""
    if not text:
        return None
    for failure, pattern in _WORDS:
        if pattern.search(text):
            return failure
    return None


def import_failure(stdout: str, stderr: str) -> str | None:
    """A program whose own imports failed: a Python traceback ending in ImportError or
    ModuleNotFoundError on stderr and nothing on stdout. Its last line, or None."""
    if stdout.strip():
        return None
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines or not any(ln.startswith("Traceback ") for ln in lines):
        return None
    last = lines[-1].strip()
    return last if re.match(r"(?:\w+\.)*(?:ModuleNotFoundError|ImportError)\b", last) else None


class Adapter:
    name = "cmd"
    binary = ""
    default_stall = 600.0
    default_timeout = DEFAULT_TIMEOUT
    efforts: tuple[str, ...] = ()  # the effort values the tool takes; empty: none
    progress_by_bytes = False  # True: any output counts as progress (no event stream)
    # True: its final result event means done, whatever its exit; what it prints after
    # (background tasks it waits on) is noise, and it is stopped WF_RESULT_GRACE seconds later
    done_at_result = False
    # True: a run the plan's usage limit rejected goes on in its own session after the
    # wait (verified with the real tool); False: it runs again fresh
    resumes_after_limit = False
    # (help argv, the option tokens wf passes that it must list)
    help_probes: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    login_argv: tuple[str, ...] = ()
    login_fix = ""
    install = ""  # how to install or update it
    grant_field = "allowed_tools"  # the lane key (lanes.<name>.<key>) that widens what it may do

    def cost(self, session_id: str | None) -> tuple[Any, str] | None:
        """The unit's cost from where this tool keeps its sessions: (wf.cost.usage.Cost, kind),
        or None when nothing is found."""
        return None

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

    def options(self) -> frozenset[str]:
        """The option tokens the installed program's own ``--help`` lists (empty when it is
        not installed or says nothing): how wf passes a flag only where it exists. Asked
        once per program file, with no traffic but the program's own start."""
        path = self.executable()
        if path is None:
            return frozenset()
        try:
            key = (path, os.stat(path).st_mtime_ns)
        except OSError:
            return frozenset()
        if key not in _OPTIONS_CACHE:
            env = {**os.environ, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
            try:
                p = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30,
                                   stdin=subprocess.DEVNULL, env=env)  # fmt: skip
                _OPTIONS_CACHE[key] = frozenset(help_options(p.stdout + p.stderr))
            except (OSError, subprocess.TimeoutExpired):
                _OPTIONS_CACHE[key] = frozenset()
        return _OPTIONS_CACHE[key]

    def version_argv(self) -> list[str]:
        return [self.binary, "--version"]

    def executable(self) -> str | None:
        return shutil.which(self.binary) if self.binary else None

    # ------------------------------------------------------------ vocabulary
    def model_problem(self, model: str | None) -> str | None:
        """Why this model cannot be asked of this tool, or None."""
        if model is not None and model.strip() in PLACEHOLDER_MODELS:
            return f"{model!r} is a placeholder, not a model"
        return None

    def effort_problem(self, effort: str | None) -> str | None:
        if effort is None:
            return None
        if not self.efforts:
            return f"{self.name} takes no effort setting"
        if effort not in self.efforts:
            return f"effort {effort!r} is not one of {self.name}'s: {', '.join(self.efforts)}"
        return None

    def access_problems(self, spec: Spec) -> list[str]:
        """Tool-access settings this tool cannot honour."""
        out = []
        if spec.sandbox not in SANDBOXES:
            out.append(f"sandbox {spec.sandbox!r} is not one of {', '.join(SANDBOXES)}")
        if spec.permission_mode not in PERMISSION_MODES:
            out.append(
                f"permission_mode {spec.permission_mode!r} is not one of {', '.join(PERMISSION_MODES)}"
            )
        return out

    # ------------------------------------------------------------ login
    def logged_in(self, code: int, out: str, err: str) -> bool | None:
        """Read the login probe's answer: True, False, or None when it cannot tell."""
        return None

    def login(self, model: str | None) -> tuple[bool | None, str]:
        """Whether the tool is logged in (True, False, None: cannot tell) and its words.
        The probe is cheap and offline, and asked once per process."""
        if not self.login_argv:
            return None, ""
        where = (self.executable() or "", *(os.environ.get(v, "") for v in _LOGIN_VARS))
        key = (*self.login_argv, *where)
        if key not in _LOGIN_CACHE:
            try:
                p = subprocess.run(
                    list(self.login_argv),
                    capture_output=True,
                    text=True,
                    timeout=20,
                    stdin=subprocess.DEVNULL,
                )
                state = self.logged_in(p.returncode, p.stdout, p.stderr)
                _LOGIN_CACHE[key] = (state, last_line(p.stderr) or "")
            except (OSError, subprocess.TimeoutExpired) as e:
                _LOGIN_CACHE[key] = (None, f"{' '.join(self.login_argv)}: {e}")
        return _LOGIN_CACHE[key]

    # ------------------------------------------------------------ failures
    def classify(
        self, parsed: Parsed, code: int | None, stdout: str, stderr: str
    ) -> tuple[Failure, str | None]:
        """Why a unit that ended `failed` failed, and the tool's own words."""
        words = parsed.error or last_line(stderr)
        if parsed.denied and parsed.failure in (None, Failure.task):
            # the work failed with calls refused: the missing grant, not the task, is the cause
            return Failure.denied, words
        if parsed.failure is not None:
            return parsed.failure, words
        if code in (126, 127):
            return Failure.tool, words or f"exit {code}: the program could not run"
        broken = import_failure(stdout, stderr)
        if broken:
            return Failure.tool, broken
        named = classify_words(parsed.error)
        if named is not None:
            return named, words
        if parsed.progress == 0 and not parsed.finished:
            return classify_words(words) or Failure.tool, words or f"exit {code} before its first event"
        return Failure.task, words


def help_options(text: str) -> set[str]:
    """The option tokens a --help text lists (``--allowedTools``, ``-m``), exactly."""
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def last_line(text: str) -> str | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return one_line(lines[-1]) if lines else None


def parse_line(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
