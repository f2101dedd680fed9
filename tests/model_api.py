"""A scripted model API on 127.0.0.1, so that the real claude, codex and opencode run
whole sessions offline: the script says what the "model" answers, the binaries do the
rest for real (permission checks, tool runs, streams, transcripts, retries, errors).

It speaks the Anthropic Messages API (``POST /v1/messages``, claude and opencode) and
the OpenAI Responses API (``POST /v1/responses``, codex), both streamed as SSE.
/work/shared/spec/scripted-model-api.md (and tests/README-model-api.md) say what each
tool sends and does with the answers.

Use::

    with ModelApi([Text("hello")]) as api:        # or a function of the request
        run claude with ANTHROPIC_BASE_URL=api.url and the variables of api.env()
    api.requests                                   # each model request, its JSON body

``api.env()`` makes the server every proxy (and npm's registry): it refuses any other
host and notes it in ``api.outside``, so that a tool's own calls home stay on 127.0.0.1.

A script is a list of steps, played one per model request in order (the last one is
repeated when requests outrun it), or a function from the request to a step. A step is
a ``Reply`` (text and tool calls, or just ``Text(...)``/``ToolUse(...)``), a ``Fault``
(an HTTP status with an error body and headers) or a ``Cut`` (a stream that stops).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

MODEL = "claude-sonnet-4-6"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call: an Anthropic ``tool_use`` block (``Bash`` with ``{"command": ...}``),
    or for codex a ``function_call`` item (its shell tool's name and arguments)."""

    name: str
    input: Mapping[str, Any]
    id: str = "toolu_01"


Block = Text | ToolUse


@dataclass(frozen=True)
class Reply:
    blocks: tuple[Block, ...]
    input_tokens: int = 100
    output_tokens: int = 20
    headers: Mapping[str, str] = field(default_factory=dict)  # e.g. usage_headers(...)
    # cache writes (5-minute and 1-hour) and cache reads the usage reports (Messages API)
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    speed: str | None = None  # "fast": the usage says the request ran in fast mode

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


@dataclass(frozen=True)
class Fault:
    """An HTTP error: ``status`` with the tool's error body and extra headers."""

    status: int
    kind: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)  # more fields of the error object


@dataclass(frozen=True)
class Cut:
    """A stream that starts (status 200, the first event) and then stops mid-way: the
    connection closes with no further event (asked without streaming: with no answer)."""


Step = Reply | Text | ToolUse | Fault | Cut


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any  # the parsed JSON body, None when there was none

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools offered (Anthropic ``name``; OpenAI ``name`` or ``type``)."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [str(t.get("name") or t.get("type")) for t in tools or [] if isinstance(t, dict)]

    def blocks(self, kind: str) -> list[dict[str, Any]]:
        """Content blocks (Messages API) or input items (Responses API) of this type."""
        if not isinstance(self.body, dict):
            return []
        found: list[dict[str, Any]] = []
        for item in self.body.get("messages") or self.body.get("input") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == kind:
                found.append(item)
            content = item.get("content")
            if isinstance(content, list):
                found += [b for b in content if isinstance(b, dict) and b.get("type") == kind]
        return found

    @property
    def step(self) -> int:
        """How many tool results the conversation holds: the step a script is at."""
        return len(self.blocks("tool_result")) + len(self.blocks("function_call_output"))

    def says(self, words: str) -> bool:
        """Whether a text block of the conversation holds these words (a subagent's
        conversation starts from the prompt its parent gave it)."""
        return any(words in str(b.get("text")) for b in self.blocks("text") + self.blocks("input_text"))

    @property
    def is_subagent(self) -> bool:
        """A claude subagent's request, as 2.1.332 tells them apart: a subagent's tools
        lack ``ListAgents`` (its list still holds ``Agent``: subagents may nest). ``says``
        with the words of the subagent's prompt is the surer test."""
        names = self.tool_names
        return bool(names) and "ListAgents" not in names


Script = Sequence[Step] | Callable[[Request], Step]


def usage_headers(
    status: str,
    reset: int,
    *,
    window: str = "five_hour",
    used: float = 1.0,
    other: float = 0.5,
    threshold: float | None = None,
) -> dict[str, str]:
    """Anthropic's unified rate-limit headers for a subscription: ``status`` (allowed,
    allowed_warning, rejected) claimed by ``window`` (five_hour or seven_day), that window
    ``used`` until ``reset`` (past a warning ``threshold``), the other at ``other``."""
    h = "anthropic-ratelimit-unified-"
    headers = {f"{h}status": status, f"{h}reset": str(reset), f"{h}representative-claim": window}
    for name, short in (("five_hour", "5h"), ("seven_day", "7d")):
        hit = name == window
        headers[f"{h}{short}-status"] = status if hit else "allowed"
        headers[f"{h}{short}-utilization"] = str(used if hit else other)
        headers[f"{h}{short}-reset"] = str(reset if hit else reset + 3 * 86400)
        if hit and threshold is not None:
            headers[f"{h}{short}-surpassed-threshold"] = str(threshold)
    return headers


def usage_limit(reset: int, *, window: str = "five_hour", other: float = 0.5) -> Fault:
    """A plan's usage limit as Anthropic's API says it to a subscription: 429 with the
    unified headers, ``window`` used up until ``reset`` (claude in OAuth mode turns them
    into a rate_limit_event)."""
    message = "This request would exceed your account's rate limit. Please try again later."
    return Fault(
        429, "rate_limit_error", message, usage_headers("rejected", reset, window=window, other=other)
    )


OVERLOADED = Fault(529, "overloaded_error", "Overloaded")
SERVER_ERROR = Fault(500, "api_error", "Internal server error")
BAD_KEY = Fault(401, "authentication_error", "invalid x-api-key")
NO_CREDIT = Fault(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.")
RATE_LIMITED = Fault(429, "rate_limit_error", "Number of requests has exceeded your rate limit.")


def _reply(step: Step) -> Reply | Fault | Cut:
    if isinstance(step, Text | ToolUse):
        return Reply((step,))
    return step


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _content(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}


def anthropic_message(reply: Reply, model: str, *, streamed: bool = False, n: int = 1) -> dict[str, Any]:
    """The Messages API answer to the ``n``th request (its id: one per request, as the
    tools count a request by it): whole, or (``streamed``) as ``message_start`` carries it."""
    return {
        "id": f"msg_scripted_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [] if streamed else [_content(b) for b in reply.blocks],
        "stop_reason": None if streamed else reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": 1 if streamed else reply.output_tokens,
            "cache_creation_input_tokens": reply.cache_write_5m + reply.cache_write_1h,
            "cache_read_input_tokens": reply.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": reply.cache_write_5m,
                "ephemeral_1h_input_tokens": reply.cache_write_1h,
            },
            **({"speed": reply.speed} if reply.speed else {}),
        },
    }


def anthropic_events(reply: Reply, model: str, n: int = 1) -> Iterator[bytes]:
    """The Messages API stream of one reply (to the ``n``th request)."""
    message = anthropic_message(reply, model, streamed=True, n=n)
    yield _sse("message_start", {"type": "message_start", "message": message})
    for i, block in enumerate(reply.blocks):
        start = (
            {**_content(block), "text": ""} if isinstance(block, Text) else {**_content(block), "input": {}}
        )
        if isinstance(block, Text):
            delta: dict[str, Any] = {"type": "text_delta", "text": block.text}
        else:
            delta = {"type": "input_json_delta", "partial_json": json.dumps(dict(block.input))}
        yield _sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def responses_events(reply: Reply, model: str, n: int = 1) -> Iterator[bytes]:
    """The Responses API stream of one reply (codex): one output item per block."""

    def ev(data: dict[str, Any]) -> bytes:
        return _sse(str(data["type"]), data)

    response: dict[str, Any] = {"id": "resp_scripted", "object": "response", "model": model, "output": []}
    yield ev({"type": "response.created", "response": {**response, "status": "in_progress"}})
    items: list[dict[str, Any]] = []
    for i, block in enumerate(reply.blocks):
        if isinstance(block, Text):
            item: dict[str, Any] = {
                "type": "message",
                "id": f"msg_{i}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
            }
            yield ev({"type": "response.output_item.added", "output_index": i,
                      "item": {**item, "status": "in_progress", "content": []}})  # fmt: skip
            yield ev({"type": "response.output_text.delta", "item_id": item["id"], "output_index": i,
                      "content_index": 0, "delta": block.text})  # fmt: skip
        else:
            item = {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": block.id,
                "name": block.name,
                "arguments": json.dumps(block.input),
                "status": "completed",
            }
            yield ev({"type": "response.output_item.added", "output_index": i, "item": item})
        yield ev({"type": "response.output_item.done", "output_index": i, "item": item})
        items.append(item)
    usage = {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    done = {**response, "status": "completed", "output": items, "usage": usage}
    yield ev({"type": "response.completed", "response": done})


class ModelApi:
    """The server: ``url`` (no ``/v1``), ``requests`` (the model requests so far, in order),
    ``other`` (every other request to it), ``outside`` (where a tool tried to go through
    the proxy of ``env()``). Stops when the ``with`` block ends."""

    def __init__(self, script: Script, model: str = MODEL) -> None:
        self.script = script
        self.model = model
        self.requests: list[Request] = []
        self.other: list[Request] = []
        self.outside: list[str] = []  # hosts a tool tried to reach through the proxy (refused)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """Variables that keep a tool on this machine: every proxy is this server (which
        refuses and notes anywhere else), and npm's registry too."""
        env = {var: self.url for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
        env |= {var.lower(): url for var, url in env.items()}
        env |= {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        env |= {"NPM_CONFIG_REGISTRY": f"{self.url}/npm/", "npm_config_registry": f"{self.url}/npm/"}
        return env

    def __enter__(self) -> ModelApi:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def next_step(self, request: Request) -> tuple[Reply | Fault | Cut, int]:
        """The step for a request, and its number (from 1)."""
        with self._lock:
            self.requests.append(request)
            n = len(self.requests)
        if callable(self.script):
            return _reply(self.script(request)), n
        return _reply(self.script[min(n, len(self.script)) - 1]), n


def _handler(api: ModelApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30  # seconds a connection may sit idle: no handler thread waits for ever

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the log is api.requests

        def _request(self) -> Request:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            return Request(self.command, self.path, dict(self.headers.items()), body)

        def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_CONNECT(self) -> None:
            """The tools' HTTPS_PROXY is this server: a connection anywhere else is
            refused here, and its host noted."""
            with api._lock:
                api.outside.append(self.path)
            self.close_connection = True
            self._send(403, b"")

        def _outside(self) -> bool:
            if self.path.startswith("/"):
                return False
            with api._lock:  # a proxied plain-HTTP request (an absolute URL)
                api.outside.append(urlsplit(self.path).netloc)
            self.close_connection = True
            self._send(403, b"")
            return True

        def do_HEAD(self) -> None:
            if not self._outside():
                self._send(200, b"")

        def do_GET(self) -> None:
            if self._outside():
                return
            with api._lock:
                api.other.append(self._request())
            self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"Not found"}}')

        def do_POST(self) -> None:
            request = self._request()
            if self._outside():
                return
            path = urlsplit(self.path).path
            if path.endswith("/messages/count_tokens"):
                with api._lock:
                    api.other.append(request)
                self._send(200, b'{"input_tokens": 10}')
                return
            if not path.endswith(("/messages", "/responses")):
                with api._lock:
                    api.other.append(request)
                self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"Not found"}}')
                return
            step, n = api.next_step(request)
            body = request.body if isinstance(request.body, dict) else {}
            model = str(body.get("model") or api.model)
            if isinstance(step, Fault):
                error = {"type": "error", "error": {"type": step.kind, "message": step.message, **step.extra}}
                self._send(
                    step.status, json.dumps(error).encode(), {"request-id": "req_scripted", **step.headers}
                )
            elif path.endswith("/messages") and not body.get("stream"):
                if isinstance(step, Cut):  # no answer at all: the connection just closes
                    self.close_connection = True
                    return
                self._send(200, json.dumps(anthropic_message(step, model, n=n)).encode(), step.headers)
            else:
                self._stream(path, step, model, n)

        def _stream(self, path: str, step: Reply | Cut, model: str, n: int) -> None:
            self.send_response(200)
            for k, v in (step.headers if isinstance(step, Reply) else {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            events = anthropic_events if path.endswith("/messages") else responses_events
            for chunk in events(Reply((Text("cut"),)) if isinstance(step, Cut) else step, model, n):
                self.wfile.write(chunk)
                self.wfile.flush()
                if isinstance(step, Cut):
                    return  # only the first event, then the connection closes

    return Handler
