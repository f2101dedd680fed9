"""What a worker really spent, read from its own transcript.

Claude Code transcripts repeat each API request on 2 to 10 lines with growing usage;
subagent transcripts usually stop at the streaming placeholder, so their output is
missing; Codex rollouts write each token count twice. Either kind is read as a stream
(memory stays flat however large the file; a Claude transcript by wf.cost.transcripts),
each request counted once; this module estimates output the transcript never got, and
prices every request. Malformed, truncated or
unknown lines are counted and reported, never fatal.
"""

from __future__ import annotations

import glob
import math
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from wf.base.errors import WfError
from wf.base.homes import claude_roots, codex_home
from wf.base.stamps import seconds_between
from wf.cost import prices
from wf.cost.transcripts import Req, json_object, numbered_lines, read_claude
from wf.cost.transcripts import int_of as int_of  # the adapters read their figures with it


class CostSource(StrEnum):
    """Where a cost's dollars come from; what a person reads marks all but ``table``."""

    table = "table"  # every request priced by wf's price table
    tool = "tool"  # some by the tool's own figure (a model the table lacks; opencode's own cost)
    unpriced = "unpriced"  # some requests have no price at all: counted as $0, the figure is low


class Cost(NamedTuple):
    """A worker's usage: the fields of a cost log line."""

    model: str
    turns: int
    inp: int
    out: int  # as reported
    est: int  # estimated output minus reported
    cw5m: int
    cw1h: int
    cr: int
    usd: float  # with estimated output
    usd_rep: float  # with reported output only
    dur_s: float | None
    unpriced: tuple[str, ...]
    malformed: int
    files: int
    kind: str  # claude, codex
    # per model, when requests ran on more than one (a session and its subagents):
    # (model, turns, usd, usd_rep), largest cost first
    by_model: tuple[tuple[str, int, float, float], ...] = ()
    # models the table lacks whose cost is the tool's own figure (claude's cost-state)
    tool_priced: tuple[str, ...] = ()
    # the tool's own figure is all of it (opencode computes each message's cost itself)
    tool_figure: bool = False

    @property
    def source(self) -> CostSource:
        if self.unpriced:
            return CostSource.unpriced
        if self.tool_priced or self.tool_figure:
            return CostSource.tool
        return CostSource.table

    def as_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if len(self.by_model) > 1:
            extra["models"] = [
                {"model": m, "turns": t, "usd": round(u, 6), "usd_rep": round(r, 6)}
                for m, t, u, r in self.by_model
            ]
        return {
            "kind": self.kind,
            "model": self.model,
            "turns": self.turns,
            "dur_s": self.dur_s,
            "in": self.inp,
            "out": self.out,
            "est": self.est,
            "cw5m": self.cw5m,
            "cw1h": self.cw1h,
            "cr": self.cr,
            "usd": round(self.usd, 6),
            "usd_rep": round(self.usd_rep, 6),
            "unpriced": list(self.unpriced),
            "cost_source": self.source.value,
            "tool_priced": list(self.tool_priced),
            "malformed": self.malformed,
            "files": self.files,
            **extra,
        }


def _dur(first: str, last: str) -> float | None:
    gap = seconds_between(first, last)
    return None if gap is None else round(gap, 1)


def _claude_cost(
    reqs: list[Req], exact_last_out: int | None, per_model: dict[str, list[float]] | None = None
) -> tuple[dict[str, float], str, set[str]]:
    """Totals of one file's requests; ``per_model`` (model -> [turns, usd, usd_rep]) is
    added to in passing."""
    totals = {
        "turns": 0,
        "in": 0,
        "out": 0,
        "est": 0,
        "cw5m": 0,
        "cw1h": 0,
        "cr": 0,
        "usd": 0.0,
        "usd_rep": 0.0,
    }
    unpriced: set[str] = set()
    models: dict[str, int] = {}
    last = max(range(len(reqs)), key=lambda i: reqs[i].ts) if reqs else -1
    for i, r in enumerate(reqs):
        out = r.out
        if not r.final:
            if i == last and exact_last_out is not None:
                out = max(out, exact_last_out)
            else:
                out = max(out, math.ceil(r.chars / 3.0))
        price = prices.lookup(r.model, r.ts[:10] or "9999-12-31") if r.model else None
        if price is None:
            unpriced.add(r.model or "(no model)")
            usd = usd_rep = 0.0
        else:
            fast = r.speed == "fast"
            usd_rep = price.usd(r.inp, r.out, r.cw5, r.cw1, r.cr, fast=fast)
            usd = price.usd(r.inp, out, r.cw5, r.cw1, r.cr, fast=fast)
        totals["turns"] += 1
        totals["in"] += r.inp
        totals["out"] += r.out
        totals["est"] += out - r.out
        totals["cw5m"] += r.cw5
        totals["cw1h"] += r.cw1
        totals["cr"] += r.cr
        totals["usd"] += usd
        totals["usd_rep"] += usd_rep
        models[r.model] = models.get(r.model, 0) + r.total
        if per_model is not None:
            acc = per_model.setdefault(r.model or "(no model)", [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += usd
            acc[2] += usd_rep
    model = max(models, key=lambda m: models[m]) if models else ""
    return totals, model, unpriced


def claude_cost(files: list[Path], parent_outputs: dict[str, int] | None = None) -> Cost:
    """Usage of Claude transcripts taken together (a session and its subagents)."""
    agg: dict[str, float] = {
        "turns": 0, "in": 0, "out": 0, "est": 0, "cw5m": 0, "cw1h": 0, "cr": 0, "usd": 0.0, "usd_rep": 0.0,
    }  # fmt: skip
    unpriced: set[str] = set()
    malformed = 0
    first = last = ""
    weights: dict[str, int] = {}
    outputs = dict(parent_outputs or {})
    per_model: dict[str, list[float]] = {}
    read = [(p, read_claude(p)) for p in files]
    tool_costs: dict[str, float] = {}
    for _, cf in read:
        outputs.update(cf.agent_outputs)
        tool_costs.update(cf.tool_costs)
    for p, cf in read:
        agent = p.stem.removeprefix("agent-") if p.stem.startswith("agent-") else None
        totals, main_model, unp = _claude_cost(cf.reqs, outputs.get(agent) if agent else None, per_model)
        for k in agg:
            agg[k] += totals[k]
        unpriced |= unp
        malformed += cf.malformed
        if cf.first_ts:
            first = min(first, cf.first_ts) if first else cf.first_ts
            last = max(last, cf.last_ts)
        if main_model:
            weights[main_model] = weights.get(main_model, 0) + int(totals["turns"])
    model = max(weights, key=lambda m: weights[m]) if weights else ""
    cost = Cost(
        model, int(agg["turns"]), int(agg["in"]), int(agg["out"]), int(agg["est"]), int(agg["cw5m"]),
        int(agg["cw1h"]), int(agg["cr"]), float(agg["usd"]), float(agg["usd_rep"]),
        _dur(first, last) if first else None, tuple(sorted(unpriced)), malformed, len(files), "claude",
        _by_model(per_model),
    )  # fmt: skip
    return with_tool_figures(cost, tool_costs)


def with_tool_figures(cost: Cost, figures: dict[str, float]) -> Cost:
    """``cost`` with each model wf's table lacks priced by the tool's own figure for it
    (the whole session's, as the tool reported it), where there is one. Only a session's
    own figures fit: a subagent's transcript alone has none (its parent's cover more)."""
    found = {m: figures[m] for m in cost.unpriced if figures.get(m, 0) > 0}  # $0 for tokens: no price
    if not found:
        return cost
    per_model: dict[str, list[float]] = {m: [float(t), u, r] for m, t, u, r in cost.by_model}
    for m, usd in found.items():
        per_model.setdefault(m, [0.0, 0.0, 0.0])[1:] = [usd, usd]
    add = sum(found.values())
    return cost._replace(
        usd=cost.usd + add,
        usd_rep=cost.usd_rep + add,
        unpriced=tuple(m for m in cost.unpriced if m not in found),
        tool_priced=tuple(sorted(set(cost.tool_priced) | set(found))),
        by_model=_by_model(per_model),
    )


def _by_model(per_model: dict[str, list[float]]) -> tuple[tuple[str, int, float, float], ...]:
    rows = [(m, int(v[0]), v[1], v[2]) for m, v in per_model.items()]
    return tuple(sorted(rows, key=lambda x: (-x[2], x[0])))


def codex_cost(path: Path) -> Cost:
    """Usage of one Codex rollout: token_count events, each counted once."""
    model = ""
    prev: Any = None
    inp = cached = out = turns = 0
    malformed = 0
    first = last = ""
    for _, raw in numbered_lines(path):
        obj, damaged = json_object(raw)
        malformed += damaged
        if obj is None:
            continue
        ts = obj.get("timestamp")
        if isinstance(ts, str) and ts:
            first = first or ts
            last = max(last, ts)
        payload = obj.get("payload")
        if not isinstance(payload, dict):
            continue
        if obj.get("type") == "turn_context" and payload.get("model"):
            model = str(payload["model"])
        if obj.get("type") != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        if not isinstance(info, dict):
            continue
        total = info.get("total_token_usage")
        if total is not None and total == prev:
            continue  # each count is written twice
        lu = info.get("last_token_usage")
        if isinstance(lu, dict):
            d_in, d_cached, d_out = (
                int_of(lu.get("input_tokens")),
                int_of(lu.get("cached_input_tokens")),
                int_of(lu.get("output_tokens")),
            )
        elif isinstance(total, dict):
            before = prev if isinstance(prev, dict) else {}
            d_in = int_of(total.get("input_tokens")) - int_of(before.get("input_tokens"))
            d_cached = int_of(total.get("cached_input_tokens")) - int_of(before.get("cached_input_tokens"))
            d_out = int_of(total.get("output_tokens")) - int_of(before.get("output_tokens"))
        else:
            d_in = d_cached = d_out = 0
        prev = total
        inp += d_in
        cached += d_cached
        out += d_out
        turns += 1
    price = prices.lookup(model, first[:10] or "9999-12-31") if model else None
    unpriced: tuple[str, ...] = ()
    if price is None:
        usd = 0.0
        unpriced = (model or "unknown",)
    else:
        usd = price.usd(inp - cached, out, 0, 0, cached)
    return Cost(
        model, turns, inp - cached, out, 0, 0, 0, cached, usd, usd,
        _dur(first, last) if first else None, unpriced, malformed, 1, "codex",
    )  # fmt: skip


# ---------------------------------------------------------------- finding transcripts


def safe_name(value: str, what: str) -> str:
    if not value or any(c in value for c in "/\\*?[]") or value.startswith("."):
        raise WfError(f"bad {what} {value!r}")
    return value


def session_files(session: str) -> list[Path]:
    """A ``claude -p`` session's transcript and its subagents' transcripts."""
    session = safe_name(session, "session id")
    for root in claude_roots():
        for main in glob.glob(str(root / "projects" / "*" / f"{glob.escape(session)}.jsonl")):
            p = Path(main)
            subs = sorted(Path(p.parent / session / "subagents").glob("*.jsonl"))
            return [p, *subs]
    raise WfError(f"no transcript for session {session} under {', '.join(map(str, claude_roots()))}")


def agent_file(agent: str) -> tuple[Path, Path | None]:
    """A subagent's transcript, and its parent session's transcript if it is there."""
    agent = safe_name(agent.removeprefix("agent-"), "agent id")
    for root in claude_roots():
        pattern = str(root / "projects" / "*" / "*" / "subagents" / f"agent-{glob.escape(agent)}.jsonl")
        for found in glob.glob(pattern):
            p = Path(found)
            parent = p.parent.parent.with_suffix(".jsonl")
            return p, parent if parent.is_file() else None
    raise WfError(f"no transcript for agent {agent} under {', '.join(map(str, claude_roots()))}")


def thread_file(thread: str) -> Path:
    thread = safe_name(thread, "thread id")
    found = glob.glob(
        str(codex_home() / "sessions" / "*" / "*" / "*" / f"rollout-*-{glob.escape(thread)}.jsonl")
    )
    if not found:
        raise WfError(f"no Codex rollout for thread {thread} under {codex_home() / 'sessions'}")
    return Path(sorted(found)[-1])


def is_codex_file(path: Path) -> bool:
    if path.name.startswith("rollout-"):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"session_meta"' in head or b'"turn_context"' in head


def for_agent(agent: str) -> tuple[Cost, str]:
    path, parent = agent_file(agent)
    outputs = read_claude(parent).agent_outputs if parent else {}
    return claude_cost([path], outputs), "subagent"


def for_file(path: Path) -> tuple[Cost, str]:
    if not path.is_file():
        raise WfError(f"no file {path}")
    if is_codex_file(path):
        return codex_cost(path), "codex"
    parent = None
    if path.parent.name == "subagents":
        cand = path.parent.parent.with_suffix(".jsonl")
        parent = cand if cand.is_file() else None
    outputs = read_claude(parent).agent_outputs if parent else {}
    kind = "subagent" if path.parent.name == "subagents" else "session"
    return claude_cost([path], outputs), kind
