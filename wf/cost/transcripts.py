"""Transcripts read as streams: numbered lines, one JSON object a line, and a Claude
Code transcript's API requests (each counted once, from the largest of its lines), its
damaged lines, its first and last times, its subagents' output figures and the tool's
own cost figures. Pricing them is wf.cost.usage's part.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from wf.base.fsutil import tail

SKIP_MODELS = ("<synthetic>",)
_TS = re.compile(rb'"timestamp":\s*"([^"]+)"')


class Req:
    """One API request, from the largest of its lines."""

    __slots__ = (
        "agent",
        "blocks",
        "chars",
        "cr",
        "cw1",
        "cw5",
        "final",
        "inp",
        "model",
        "out",
        "side",
        "speed",
        "ts",
    )

    def __init__(self) -> None:
        self.inp = self.out = self.cw5 = self.cw1 = self.cr = 0
        self.model = ""
        self.final = False
        self.side = False
        self.speed = ""
        self.ts = ""
        self.agent = ""
        self.chars = 0
        self.blocks: set[int] = set()

    @property
    def total(self) -> int:
        return self.inp + self.out + self.cw5 + self.cw1 + self.cr


def int_of(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        yield from enumerate(f)


def json_object(raw: bytes) -> tuple[dict[str, Any] | None, bool]:
    """A transcript line as a JSON object, and whether it was damaged (blank lines are not)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None, bool(raw.strip())
    if not isinstance(obj, dict):
        return None, True
    return obj, False


def _visible(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text") or ""))
    if kind == "thinking":
        return len(str(block.get("thinking") or ""))
    if kind == "tool_use":
        tool_input = json.dumps(block.get("input"), separators=(",", ":"), ensure_ascii=False)
        return len(str(block.get("name") or "")) + len(tool_input)
    return 0


def _signature(block: dict[str, Any]) -> int:
    """Identity of a content block, to count a block repeated on several lines once."""
    kind = block.get("type")
    if kind == "text":
        return hash(("text", str(block.get("text"))))
    if kind == "thinking":
        return hash(("thinking", str(block.get("thinking")), str(block.get("signature"))))
    if kind == "tool_use" and block.get("id"):
        return hash(("tool_use", str(block["id"])))
    return hash(json.dumps(block, sort_keys=True, separators=(",", ":")))


class ClaudeFile(NamedTuple):
    reqs: list[Req]
    malformed: int
    first_ts: str
    last_ts: str
    agent_outputs: dict[str, int]  # from a parent's toolUseResult: agentId -> output_tokens
    # the tool's own $ per model for the whole session so far, from its last cost-state
    # line (Claude Code 2.1.332 writes one after each turn; resumed runs add to it)
    tool_costs: dict[str, float]


def _tool_costs(obj: dict[str, Any]) -> dict[str, float] | None:
    """The $ per model of a cost-state line, None when it has none to give."""
    usage = obj.get("modelUsage")
    if not isinstance(usage, dict):
        return None
    out: dict[str, float] = {}
    for model, u in usage.items():
        cost = u.get("costUSD") if isinstance(u, dict) else None
        if (
            isinstance(cost, (int, float))
            and not isinstance(cost, bool)
            and math.isfinite(cost)
            and cost >= 0
        ):
            out[str(model)] = float(cost)
    return out


def read_claude(path: Path) -> ClaudeFile:
    """The requests of one Claude Code transcript (each once), its damaged lines, its first
    and last times, its subagents' output figures and the tool's own cost figures."""
    reader = _ClaudeReader()
    for n, raw in numbered_lines(path):
        reader.line(n, raw)
    return reader.result(_last_timestamp(path))


def _worth_parsing(raw: bytes) -> bool:
    """Only assistant lines carry usage, only a tool result naming an agent matters, and
    the tool's own cost-state (tool results are the largest lines: most are never parsed)."""
    return (
        b'"assistant"' in raw or (b'"toolUseResult"' in raw and b'"agentId"' in raw) or b'"cost-state"' in raw
    )


def _cache_writes(usage: dict[str, Any]) -> tuple[int, int]:
    """A request's cache writes (5-minute, 1-hour): all 5-minute without the split block."""
    cc = usage.get("cache_creation")
    if isinstance(cc, dict):
        return int_of(cc.get("ephemeral_5m_input_tokens")), int_of(cc.get("ephemeral_1h_input_tokens"))
    return int_of(usage.get("cache_creation_input_tokens")), 0


class _ClaudeReader:
    """What read_claude gathers, one transcript line at a time."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str], Req] = {}
        self.by_msg: dict[str, list[tuple[str, str]]] = {}
        self.malformed = 0
        self.first_ts = self.last_ts = ""
        self.agent_outputs: dict[str, int] = {}
        self.tool_costs: dict[str, float] = {}

    def line(self, n: int, raw: bytes) -> None:
        if not _worth_parsing(raw):
            self._skim(raw)
            return
        obj, damaged = json_object(raw)
        self.malformed += damaged
        if obj is None:
            return
        ts = obj.get("timestamp")
        if isinstance(ts, str) and ts:
            self.first_ts = self.first_ts or ts
            self.last_ts = max(self.last_ts, ts)
        kind = obj.get("type")
        if kind == "cost-state":
            found = _tool_costs(obj)
            self.tool_costs = found if found is not None else self.tool_costs
        elif kind == "user":
            self._agent_output(obj)
        elif kind == "assistant" and not obj.get("isApiErrorMessage"):
            self._request(n, obj, ts)

    def _skim(self, raw: bytes) -> None:
        """A line that is not a request, read without parsing. Its time matters only for
        the duration: the first time is taken here, the last from the file's tail."""
        if not self.first_ts:
            m = _TS.search(raw)
            if m:
                self.first_ts = m.group(1).decode("utf-8", "replace")
        # every line Claude Code writes is an object starting with a key: anything else is
        # damaged (checked without copying the line, which can be megabytes)
        if not (raw.startswith(b'{"') and raw.endswith((b"}\n", b"}", b"}\r\n"))) and raw.strip():
            self.malformed += 1

    def _agent_output(self, obj: dict[str, Any]) -> None:
        """A parent's tool result naming a subagent: the output tokens of its last request."""
        tur = obj.get("toolUseResult")
        if isinstance(tur, dict) and tur.get("agentId") and isinstance(tur.get("usage"), dict):
            figure = tur["usage"].get("output_tokens")
            if isinstance(figure, int) and not isinstance(figure, bool) and figure >= 0:
                self.agent_outputs[str(tur["agentId"])] = figure

    def _request(self, n: int, obj: dict[str, Any], ts: Any) -> None:
        """An assistant line: its request, counted once whatever the lines repeating it,
        with the figures of its largest line and every content block once."""
        msg = obj.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("usage"), dict):
            return
        model = str(msg.get("model") or "")
        if model in SKIP_MODELS:
            return
        usage = msg["usage"]
        mid = str(msg.get("id") or "")
        key = (mid, str(obj.get("requestId") or "")) if mid else (f"line-{n}", "")
        req = self.by_key.get(key)
        if req is None:
            req = self.by_key[key] = Req()
            if mid:
                self.by_msg.setdefault(mid, []).append(key)
        cw5, cw1 = _cache_writes(usage)
        inp, out, cr = (
            int_of(usage.get("input_tokens")),
            int_of(usage.get("output_tokens")),
            int_of(usage.get("cache_read_input_tokens")),
        )
        if inp + out + cw5 + cw1 + cr >= req.total:
            req.inp, req.out, req.cw5, req.cw1, req.cr = inp, out, cw5, cw1, cr
            req.model = model or req.model
            req.speed = str(usage.get("speed") or "")
            req.side = bool(obj.get("isSidechain"))
            req.ts = str(ts or req.ts)
            req.agent = str(obj.get("agentId") or req.agent)
        if msg.get("stop_reason") is not None:
            req.final = True
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                sig = _signature(block)
                if sig not in req.blocks:
                    req.blocks.add(sig)
                    req.chars += _visible(block)

    def result(self, tail_ts: str) -> ClaudeFile:
        """What was read; ``tail_ts``: the last time in the file's tail."""
        # A message copied into a sidechain under another requestId counts once, as itself.
        for keys in self.by_msg.values():
            if len(keys) > 1 and any(not self.by_key[k].side for k in keys):
                for k in keys:
                    if self.by_key[k].side:
                        del self.by_key[k]
        last_ts = max(self.last_ts, tail_ts) if tail_ts else self.last_ts
        return ClaudeFile(
            list(self.by_key.values()),
            self.malformed,
            self.first_ts,
            last_ts,
            self.agent_outputs,
            self.tool_costs,
        )


def _last_timestamp(path: Path, window: int = 1 << 16) -> str:
    """The last ``timestamp`` in the file, from its tail (transcripts are written in order)."""
    try:
        chunk = tail(path, window)
    except OSError:
        return ""
    found = _TS.findall(chunk)
    return found[-1].decode("utf-8", "replace") if found else ""
