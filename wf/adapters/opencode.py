"""opencode: ``opencode run --format json``.

Verified against 1.18.33 (tests/fixtures/real/opencode-1.18.33). Events are
``{type, timestamp, sessionID, part|error}``; an ``error`` event carries
``{name, data{message}}`` and the run exits 1. An unknown ``--session`` prints ``Error:
Session not found`` on stderr (exit 1, no event). A model that is not ``provider/model``
fails with an opaque server error, and with no model and no provider configured opencode
quietly uses a hosted free model: wf requires ``provider/model``. Effort maps to
``--variant``. Sessions and their cost live in SQLite (``opencode.db``; see wf.cost.usage).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.adapters import limits
from wf.adapters.base import Adapter, Failure, Parsed, Spec, classify_words, one_line, status_failure
from wf.base.errors import WfError

if TYPE_CHECKING:
    from wf.cost.usage import Cost

MODEL_RE = re.compile(r"[a-z0-9][a-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:/@-]*")
# opencode's error names (1.18) and what they mean
_ERRORS = {
    "ProviderAuthError": Failure.auth,
    "ProviderModelNotFoundError": Failure.model,
    "ModelNotFoundError": Failure.model,
    "ProviderInitError": Failure.model,
    "APIError": None,  # its statusCode, else the words
    "UnknownError": None,
    "HttpClientError": Failure.network,  # a fetch that failed: "Transport error", "non 2xx status"
}
# An ERROR line of its log (--print-logs) and the first error it names in its error= or
# cause= field: 'error="ProviderModelNotFoundError: Model not found: x/y."',
# 'cause="Cause([Fail(HttpClientError: Transport error (GET https://models...'
_ERROR_LINE = re.compile(r"\blevel=ERROR\b.*")
_NAMED = re.compile(r'\b(?:error(?:\.error)?|cause)="(?:Cause\(\[Fail\()?(\w+Error): ([^"\n]*)')
# The variables opencode reads for a provider's key.
PROVIDER_ENV = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
}
LOCAL_PROVIDERS = ("ollama", "lmstudio", "llama.cpp")


def _unified_limit(headers: Any) -> limits.Limit | None:
    """An Anthropic provider's usage limit in the failed response's headers
    (``anthropic-ratelimit-unified-status: rejected``, its reset and window)."""
    if not isinstance(headers, dict):
        return None
    h = {str(k).lower(): str(v) for k, v in headers.items()}
    pre = "anthropic-ratelimit-unified-"
    if h.get(pre + "status") != "rejected":
        return None
    reset = h.get(pre + "reset", "")
    return limits.Limit(h.get(pre + "representative-claim"), float(reset) if reset.isdigit() else None)


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "opencode"


def store_path() -> Path:
    """opencode's SQLite store: ``$XDG_DATA_HOME/opencode/opencode.db`` (1.18)."""
    return data_home() / "opencode.db"


def store_cost(session_id: str, db: Path | None = None) -> Cost:
    """Usage of one opencode session from its SQLite store: each assistant message's
    tokens and the cost opencode computed for it (read-only; the store may be in use)."""
    from wf.cost.usage import Cost, int_of, safe_name

    db = (db or store_path()).resolve()
    if not db.is_file():
        raise WfError(f"no opencode store at {db}")
    session_id = safe_name(session_id, "session id")
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5) as con:
            rows = con.execute(
                "SELECT data FROM message WHERE session_id = ? ORDER BY time_created", (session_id,)
            ).fetchall()
            found = con.execute("SELECT 1 FROM session WHERE id = ?", (session_id,)).fetchone()
        con.close()
    except sqlite3.Error as e:
        raise WfError(f"cannot read opencode store {db}: {e}") from None
    if not found:
        raise WfError(f"no opencode session {session_id} in {db}")
    models: list[str] = []
    turns = inp = out = cr = cw = malformed = 0
    usd = 0.0
    first = last = 0
    for (raw,) in rows:
        try:
            msg = json.loads(raw)
        except ValueError:
            malformed += 1
            continue
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        turns += 1
        tokens = msg.get("tokens") or {}
        cache = tokens.get("cache") or {}
        inp += int_of(tokens.get("input"))
        out += int_of(tokens.get("output")) + int_of(tokens.get("reasoning"))
        cr += int_of(cache.get("read"))
        cw += int_of(cache.get("write"))
        cost = msg.get("cost")
        usd += float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else 0.0
        model = "/".join(str(msg[k]) for k in ("providerID", "modelID") if msg.get(k))
        if model and model not in models:
            models.append(model)
        times = msg.get("time") or {}
        first = first or int_of(times.get("created"))
        last = max(last, int_of(times.get("completed")), int_of(times.get("created")))
    dur = round((last - first) / 1000, 3) if first and last else None
    # the dollars are opencode's own figure; a cost of 0 for tokens is one it did not know
    # (a model missing from its catalogue, a custom provider): unpriced, never a silent $0
    unpriced = tuple(models or ["(no model)"]) if usd == 0 and inp + out + cr + cw > 0 else ()
    return Cost(
        ",".join(models), turns, inp, out, 0, cw, 0, cr, usd, usd, dur, unpriced, malformed, 1, "opencode",
        tool_figure=True,
    )  # fmt: skip


def first_logged_error(stderr: str) -> tuple[Failure, str | None] | None:
    """The class of the first error opencode logged that names one, and its words. The
    first, not the last: offline, its first error is the failed fetch of the model list
    (HttpClientError), and what follows (ProviderModelNotFoundError, an UnknownError on
    stdout) only comes of it."""
    for line in _ERROR_LINE.findall(stderr):
        found = _NAMED.search(line)
        if found is None:
            continue
        name, words = found.groups()
        words = words.split("\\n")[0].strip()  # a cause carries its stack after a \n
        failure = _ERRORS.get(name) or classify_words(f"{name} {words}")
        if failure is not None:
            return failure, one_line(f"{name}: {words}")
    return None


class Opencode(Adapter):
    name = "opencode"
    binary = "opencode"
    efforts = ("minimal", "low", "medium", "high", "xhigh", "max")  # --variant, provider-specific
    help_probes = (
        (
            ("opencode", "run", "--help"),
            (
                "--format",
                "--session",
                "--dir",
                "--model",
                "--auto",
                "--variant",
                "--print-logs",
                "--log-level",
            ),
        ),
    )
    login_fix = "run `opencode auth login` for the model's provider (or set its API key variable)"
    install = "npm install -g opencode-ai"

    def cost(self, session_id: str | None) -> tuple[Any, str] | None:
        if not session_id:
            return None
        try:
            return store_cost(session_id), "opencode"
        except (WfError, OSError):
            return None

    def argv(self, spec: Spec) -> list[str]:
        argv = ["opencode", "run", "--format", "json", "--auto", "--dir", str(spec.cwd)]
        argv += ["--print-logs", "--log-level", "ERROR"]  # the real error is only in its log
        if spec.model:
            argv += ["-m", spec.model]
        if spec.effort:
            argv += ["--variant", spec.effort]
        if spec.resume:
            if not spec.session_id:
                raise WfError("resuming an opencode unit needs its session id")
            argv += ["--session", spec.session_id]
        argv += spec.extra_args
        return argv

    def feed(self, parsed: Parsed, event: dict[str, Any]) -> None:
        parsed.events += 1
        if event.get("sessionID"):
            parsed.session_id = str(event["sessionID"])
        kind = event.get("type")
        part = event.get("part") or {}
        if kind == "step_start":
            parsed.progress += 1
            parsed.step = []
        elif kind == "text" and isinstance(part.get("text"), str):
            parsed.progress += 1
            parsed.step.append(part["text"])
            parsed.answer = "".join(parsed.step)
            parsed.note(part["text"])
        elif kind == "tool_use":
            parsed.progress += 1
        elif kind == "step_finish":
            parsed.progress += 1
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
            name = str(err.get("name") or "")
            data = err.get("data") or {}
            words = str(data.get("message") or name or "error")
            failure = (
                _ERRORS.get(name)
                or status_failure(data.get("statusCode"))  # an APIError's HTTP status: 5xx, the service's
                or classify_words(f"{name} {words}")
                or Failure.task
            )
            if data.get("statusCode") == 529:
                failure = Failure.overloaded
            limit = _unified_limit(data.get("responseHeaders"))
            parsed.fail(Failure.usage_limit if limit else failure,
                        words if name in ("", "UnknownError") else f"{name}: {words}")  # fmt: skip
            if limit or failure is Failure.usage_limit:
                parsed.limit = limit or limits.from_words(words) or limits.Limit()

    def classify(
        self, parsed: Parsed, code: int | None, stdout: str, stderr: str
    ) -> tuple[Failure, str | None]:
        if parsed.failure in (None, Failure.task):
            logged = first_logged_error(stderr)
            if logged is not None:
                return logged
        return super().classify(parsed, code, stdout, stderr)  # "Error: Session not found": tool

    def access_problems(self, spec: Spec) -> list[str]:
        out = super().access_problems(spec)
        if spec.sandbox != "workspace-write" or spec.network or spec.isolate_mcp:
            out.append("opencode has no sandbox, network or MCP switch: those settings are not enforced")
        return out

    def model_problem(self, model: str | None) -> str | None:
        why = super().model_problem(model)
        if why:
            return why
        if model is None:
            return "opencode needs a provider/model (without one it quietly uses a hosted default)"
        if not MODEL_RE.fullmatch(model):
            return f"{model!r} is not provider/model (e.g. anthropic/claude-sonnet-4-5)"
        return None

    def login(self, model: str | None) -> tuple[bool | None, str]:
        """A key for the model's provider: in opencode's auth.json or its variable."""
        provider = (model or "").split("/", 1)[0]
        if not provider:
            return None, "no provider"
        if provider in LOCAL_PROVIDERS:
            return True, f"{provider} runs locally"
        if any(os.environ.get(v) for v in PROVIDER_ENV.get(provider, ())):
            return True, f"{provider} key in the environment"
        try:
            stored = json.loads((data_home() / "auth.json").read_text("utf-8"))
        except (OSError, ValueError):
            stored = {}
        if isinstance(stored, dict) and provider in stored:
            return True, f"{provider} in {data_home() / 'auth.json'}"
        return False, one_line(f"no credentials for {provider} (opencode auth list)") or ""
