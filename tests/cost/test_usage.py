"""`wf usage`: one request counted once, output estimates, prices, Codex rollouts, the
cost log and the report; every rule of the contract (shared/spec/usage.md) on small
synthetic transcripts, and, when WF_CORPUS names the shared corpus, the reference
figures ccusage gave for real transcripts.

Tests whose name ends in ``_bug`` show a defect in wf/cost/usage.py or wf/cost/costlog.py (their
assertion message says which); they fail until it is fixed."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner
from wf.base import homes
from wf.cost import costlog, prices, usage

# Read before the sealed env (tests/conftest.py) deletes WF_* from os.environ.
CORPUS = os.environ.get("WF_CORPUS")

SONNET = "claude-sonnet-4-5-20250929"
# USD per million tokens: in, out, 5m write, 1h write, cache read
SONNET_P = (3.0, 15.0, 3.75, 6.0, 0.30)
OPUS_P = (5.0, 25.0, 6.25, 10.0, 0.50)
LOG_KEYS = [
    "ts", "project", "id", "agent", "kind", "lane", "model", "effort", "done", "turns", "dur_s",
    "in", "out", "est", "cw5m", "cw1h", "cr", "usd", "usd_rep",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_prices() -> Iterator[None]:
    """The price table and lookups are cached per process; a test's own prices.toml
    must not leak into another test."""
    prices.table.cache_clear()
    prices.lookup.cache_clear()
    yield
    prices.table.cache_clear()
    prices.lookup.cache_clear()


# ---------------------------------------------------------------- building transcripts


def tokens(
    inp: int | None = 0,
    out: int | None = 0,
    *,
    cr: int | None = 0,
    cw: int | None = 0,
    c5: int | None = None,
    c1: int | None = None,
    speed: str | None = None,
) -> dict[str, Any]:
    """A message.usage object; with c5 or c1 it carries a cache_creation block."""
    u: dict[str, Any] = {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_creation_input_tokens": cw,
        "cache_read_input_tokens": cr,
    }
    if c5 is not None or c1 is not None:
        u["cache_creation_input_tokens"] = (c5 or 0) + (c1 or 0)
        u["cache_creation"] = {"ephemeral_5m_input_tokens": c5, "ephemeral_1h_input_tokens": c1}
    if speed is not None:
        u["speed"] = speed
    return u


def asst(
    u: dict[str, Any] | None,
    *,
    mid: str | None = "msg_1",
    rid: str | None = "req_1",
    model: str | None = SONNET,
    content: list[dict[str, Any]] | None = None,
    stop: str | None = "end_turn",
    side: bool = False,
    ts: str = "2026-03-01T10:00:00.000Z",
    **extra: Any,
) -> dict[str, Any]:
    """An assistant line shaped like Claude Code's (2.1.x)."""
    msg: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": content if content is not None else [{"type": "text", "text": "ok"}],
        "stop_reason": stop,
        "stop_sequence": None,
    }
    if mid is not None:
        msg["id"] = mid
    if model is not None:
        msg["model"] = model
    if u is not None:
        msg["usage"] = u
    line: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": side,
        "userType": "external",
        "cwd": "/work/app",
        "sessionId": "sess-1",
        "version": "2.1.39",
        "type": "assistant",
        "message": msg,
        "uuid": f"uuid-{mid}-{rid}-{ts}",
        "timestamp": ts,
    }
    if rid is not None:
        line["requestId"] = rid
    line.update(extra)
    return line


def user(text: str = "go", *, ts: str = "2026-03-01T09:59:59.000Z", **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "user",
        "isSidechain": False,
        "sessionId": "sess-1",
        "message": {"role": "user", "content": text},
        "uuid": f"u-{ts}",
        "timestamp": ts,
    }
    line.update(extra)
    return line


def write(path: Path, *lines: dict[str, Any] | str | bytes) -> Path:
    """A JSON-lines file: dicts are dumped, str and bytes written as they are."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for line in lines:
            if isinstance(line, dict):
                f.write(json.dumps(line).encode() + b"\n")
            elif isinstance(line, str):
                f.write(line.encode() + b"\n")
            else:
                f.write(line + b"\n")
    return path


def cost_of(path: Path) -> usage.Cost:
    return usage.claude_cost([path])


def usd(
    p: tuple[float, float, float, float, float],
    *,
    inp: int = 0,
    out: int = 0,
    c5: int = 0,
    c1: int = 0,
    cr: int = 0,
    mult: float = 1.0,
) -> float:
    """The contract's formula: mult × (in·P_in + out·P_out + c5·P_5m + c1·P_1h + cr·P_read) / 1e6."""
    return mult * (inp * p[0] + out * p[1] + c5 * p[2] + c1 * p[3] + cr * p[4]) / 1e6


def money(x: float) -> Any:
    return pytest.approx(x, rel=1e-12, abs=1e-15)


# ---------------------------------------------------------------- one request, counted once


def test_duplicate_lines_keep_the_largest_not_the_first(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(3, 1, cr=5000, cw=200), stop=None),  # the streaming placeholder
        asst(tokens(3, 412, cr=5000, cw=200), stop="tool_use"),  # the largest
        asst(tokens(3, 90, cr=5000, cw=200), stop=None),
    )
    c = cost_of(f)
    assert c.turns == 1, "three lines of one request are one turn"
    assert c.out == 412, f"the line with the largest total must be kept (got out={c.out}; the first has 1)"
    assert (c.inp, c.cw5m, c.cw1h, c.cr, c.est) == (3, 200, 0, 5000, 0)
    assert c.usd_rep == money(usd(SONNET_P, inp=3, out=412, c5=200, cr=5000))
    assert c.usd == c.usd_rep


def test_largest_line_may_come_first(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(3, 412, cr=5000), stop="end_turn"),
        asst(tokens(3, 1, cr=5000), stop=None),
    )
    c = cost_of(f)
    assert (c.turns, c.inp, c.out, c.cr, c.est) == (1, 3, 412, 5000, 0)


def test_line_without_request_id_keys_on_message_id_alone(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(7, 2, cr=100), rid=None, stop=None),
        asst(tokens(7, 60, cr=100), rid=None),
        asst(tokens(1, 10), mid="msg_2", rid=None),
    )
    c = cost_of(f)
    assert c.turns == 2, "(message.id, '') is one key: two lines of msg_1 are one request"
    assert (c.inp, c.out, c.cr) == (8, 70, 100)


def test_line_without_message_id_is_its_own_request(tmp_path: Path) -> None:
    line = asst(tokens(5, 20, cr=1000), mid=None)
    f = write(tmp_path / "t.jsonl", line, line, asst(tokens(5, 20, cr=1000), mid=None, rid=None))
    c = cost_of(f)
    assert c.turns == 3, "a line without message.id is never merged with another"
    assert (c.inp, c.out, c.cr) == (15, 60, 3000)
    assert c.usd_rep == money(usd(SONNET_P, inp=15, out=60, cr=3000))


def test_sidechain_replay_under_another_request_id_counts_once(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(4, 30, cr=900), mid="msg_a", rid="req_a"),
        # the same message copied into a sidechain under another requestId, even larger
        asst(tokens(4, 31, cr=900), mid="msg_a", rid="req_b", side=True),
        asst(tokens(4, 31, cr=900), mid="msg_a", rid=None, side=True),
        asst(tokens(1, 5), mid="msg_b", rid="req_c"),
    )
    c = cost_of(f)
    assert c.turns == 2, f"the sidechain copies of msg_a must not count (turns={c.turns})"
    assert (c.inp, c.out, c.cr) == (5, 35, 900), "the non-sidechain copy of msg_a is the one kept"


def test_subagent_file_all_sidechain_counts_every_request(tmp_path: Path) -> None:
    f = write(
        tmp_path / "agent-x.jsonl",
        asst(tokens(2, 10), mid="m1", rid="r1", side=True),
        asst(tokens(2, 10), mid="m1", rid="r1", side=True),
        asst(tokens(3, 20), mid="m2", rid="r2", side=True),
    )
    c = cost_of(f)
    assert (c.turns, c.inp, c.out) == (2, 5, 30)


def test_skipped_line_types_and_models(tmp_path: Path) -> None:
    big = tokens(10_000, 10_000, cr=10_000, cw=10_000)
    nested = {"type": "assistant", "message": {"id": "msg_p", "model": SONNET, "usage": big}}
    f = write(
        tmp_path / "t.jsonl",
        user("hello"),
        {"type": "user", "message": {"role": "user", "content": "x", "usage": big}},
        {"type": "progress", "data": {"type": "agent_progress", "message": nested}, "timestamp": "t"},
        {"type": "agent_progress", "data": {"message": nested}},
        {"type": "system", "subtype": "compact_boundary", "content": "assistant", "usage": big},
        {"type": "summary", "summary": "the assistant did things", "leafUuid": "x"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        {"type": "something-new", "message": {"id": "msg_n", "model": SONNET, "usage": big}},
        asst(big, mid="msg_syn", model="<synthetic>"),
        asst(big, mid="msg_err", isApiErrorMessage=True),
        asst(None, mid="msg_nousage"),
        asst(tokens(2, 9, cr=50), mid="msg_real"),
    )
    c = cost_of(f)
    assert c.turns == 1, f"only the one real assistant request counts (turns={c.turns})"
    assert (c.inp, c.out, c.cw5m, c.cw1h, c.cr, c.est) == (2, 9, 0, 0, 50, 0)
    assert c.malformed == 0, "skipped lines of other types are not malformed"
    assert c.unpriced == ()
    assert c.model == SONNET


def test_missing_or_null_numbers_count_as_zero(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst({"output_tokens": 7}, mid="m1"),
        asst(
            {
                "input_tokens": None,
                "output_tokens": None,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": 40,
                "cache_creation": {"ephemeral_5m_input_tokens": None, "ephemeral_1h_input_tokens": 30},
                "speed": None,
            },
            mid="m2",
        ),
        asst({}, mid="m3"),
    )
    c = cost_of(f)
    assert (c.turns, c.inp, c.out, c.cw5m, c.cw1h, c.cr, c.est) == (3, 0, 7, 0, 30, 40, 0)
    assert c.usd_rep == money(usd(SONNET_P, out=7, c1=30, cr=40))


# ---------------------------------------------------------------- prices


def test_one_hour_and_five_minute_cache_writes_priced_apart(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", asst(tokens(0, 0, c5=1000, c1=2000), mid="m1"))
    c = cost_of(f)
    assert (c.cw5m, c.cw1h) == (1000, 2000)
    assert c.usd_rep == money((1000 * 3.75 + 2000 * 6.0) / 1e6)


def test_no_cache_creation_block_means_all_five_minute(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", asst(tokens(0, 0, cw=3000), mid="m1"))
    c = cost_of(f)
    assert (c.cw5m, c.cw1h) == (3000, 0)
    assert c.usd_rep == money(3000 * 3.75 / 1e6)


@pytest.mark.parametrize(
    ("model", "mult"),
    [
        ("claude-opus-4-6", 6.0),
        ("claude-opus-4-7", 6.0),
        ("claude-opus-4-8", 2.0),
        ("claude-opus-4-5-20251101", 1.0),
    ],
)
def test_fast_mode_multiplier(tmp_path: Path, model: str, mult: float) -> None:
    fast = tokens(1000, 100, cr=10_000, c5=200, c1=50, speed="fast")
    std = tokens(1000, 100, cr=10_000, c5=200, c1=50, speed="standard")
    ts = "2026-08-01T00:00:00Z"
    c = cost_of(write(tmp_path / "f.jsonl", asst(fast, model=model, ts=ts)))
    s = cost_of(write(tmp_path / "s.jsonl", asst(std, model=model, ts=ts)))
    base = usd(OPUS_P, inp=1000, out=100, c5=200, c1=50, cr=10_000)
    assert s.usd_rep == money(base)
    assert c.usd_rep == money(mult * base), f"fast mode on {model} is ×{mult}"
    assert c.usd == c.usd_rep


def test_fast_mode_does_not_apply_to_sonnet(tmp_path: Path) -> None:
    c = cost_of(write(tmp_path / "t.jsonl", asst(tokens(1000, 100, speed="fast"))))
    assert c.usd_rep == money(usd(SONNET_P, inp=1000, out=100))


# The contract's table: in, 5m write, 1h write, cache read, out
SPEC_TABLE = {
    "claude-opus-4-5": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4-6": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4-7": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4-8": (5, 6.25, 10, 0.50, 25),
    "claude-opus-4": (15, 18.75, 30, 1.50, 75),
    "claude-opus-4-1": (15, 18.75, 30, 1.50, 75),
    "claude-sonnet-4": (3, 3.75, 6, 0.30, 15),
    "claude-sonnet-4-5": (3, 3.75, 6, 0.30, 15),
    "claude-sonnet-4-6": (3, 3.75, 6, 0.30, 15),
    "claude-3-7-sonnet": (3, 3.75, 6, 0.30, 15),
    "claude-haiku-4-5": (1, 1.25, 2, 0.10, 5),
    "claude-3-5-haiku": (0.80, 1.00, 1.60, 0.08, 4),
}
OPENAI_TABLE = {
    "gpt-5": (1.25, 0.125, 10),
    "gpt-5-codex": (1.25, 0.125, 10),
    "gpt-5.1": (1.25, 0.125, 10),
    "gpt-5.1-codex": (1.25, 0.125, 10),
    "gpt-5.1-codex-max": (1.25, 0.125, 10),
    "gpt-5-mini": (0.25, 0.025, 2),
    "gpt-5.1-codex-mini": (0.25, 0.025, 2),
    "gpt-5.2": (1.75, 0.175, 14),
    "gpt-5.2-codex": (1.75, 0.175, 14),
    "gpt-5.3-codex": (1.75, 0.175, 14),
}


@pytest.mark.parametrize("model", sorted(SPEC_TABLE))
def test_anthropic_price_table(model: str) -> None:
    p = prices.lookup(model, "2026-12-31")
    assert p is not None, f"{model} has no price"
    assert (p.input, p.cache_write_5m, p.cache_write_1h, p.cache_read, p.output) == SPEC_TABLE[model]


@pytest.mark.parametrize("model", sorted(OPENAI_TABLE))
def test_openai_price_table(model: str) -> None:
    p = prices.lookup(model, "2026-12-31")
    assert p is not None, f"{model} has no price"
    assert (p.input, p.cache_read, p.output) == OPENAI_TABLE[model]


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),
        ("claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),  # longest prefix, not claude-opus-4
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("gpt-5.1-codex-mini", "gpt-5.1-codex-mini"),  # longest prefix, not gpt-5.1
        ("gpt-5.1-codex-max", "gpt-5.1-codex-max"),
        ("gpt-5-codex", "gpt-5-codex"),
        ("gpt-5.2-codex", "gpt-5.2-codex"),
        ("gpt-5-2025-08-07", "gpt-5"),  # OpenAI's dated variant
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),  # Vertex's
    ],
)
def test_lookup_strips_date_and_1m_then_the_exact_model(name: str, row: str) -> None:
    p = prices.lookup(name, "2026-06-01")
    assert p is not None and p.model == row


@pytest.mark.parametrize(
    "name", ["mystery-model", "gpt-4o", "sonnet", "", "gpt-5.5", "claude-opus-4-9", "gpt-5.2-pro"]
)
def test_lookup_unknown_model(name: str) -> None:
    """A model no row names exactly has no price, even where a row is its prefix (gpt-5.5
    was priced as gpt-5, claude-opus-4-9 as claude-opus-4)."""
    assert prices.lookup(name) is None


def test_unknown_model_priced_zero_and_named(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(100, 100, cr=100), mid="m1", model="mystery-model-9"),
        asst(tokens(1, 2), mid="m2"),
    )
    c = cost_of(f)
    assert c.unpriced == ("mystery-model-9",)
    assert (c.turns, c.inp, c.out, c.cr) == (2, 101, 102, 100), "tokens of an unknown model still count"
    assert c.usd_rep == money(usd(SONNET_P, inp=1, out=2)), "an unknown model is priced 0"
    rec = costlog.line_for(c, ts="2026-03-01T00:00:00Z", project="app")
    assert costlog.format_line(rec).endswith(" unpriced=mystery-model-9 cost_source=unpriced")


def test_request_without_model_is_not_priced_silently(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", asst(tokens(1_000_000, 0), model=None))
    c = cost_of(f)
    assert c.inp == 1_000_000
    assert c.usd_rep == 0.0
    assert c.unpriced, (
        "BUG wf/cost/usage.py _claude_cost: a request without message.model is priced $0 with no "
        "unpriced= entry (the contract: an unknown model is priced 0 and logged, never silently)"
    )


def test_user_prices_file_adds_and_overrides_rows(tmp_path: Path, sealed_env: Path) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "wf" / "prices.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "[[price]]\n"
        'model = "acme-coder"\n'
        "input = 2\noutput = 8\ncache_read = 0.2\ncache_write_5m = 2.5\ncache_write_1h = 4\n"
        "\n[[price]]\n"  # same model and since as the package's row: replaces it
        'model = "claude-sonnet-4-5"\nsince = "2025-09-29"\n'
        "input = 30\noutput = 150\ncache_read = 3\ncache_write_5m = 37.5\ncache_write_1h = 60\n"
        "\n[[price]]\n"  # a new price from a date on
        'model = "claude-haiku-4-5"\nsince = "2026-06-01"\ninput = 9\noutput = 45\n'
    )
    assert prices.user_file() == path
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(1000, 100, cr=1000, c5=100, c1=10), mid="m1", model="acme-coder-20260101"),
        asst(tokens(1000, 100), mid="m2", model=SONNET),
    )
    c = cost_of(f)
    assert c.unpriced == ()
    acme = (1000 * 2 + 100 * 8 + 100 * 2.5 + 10 * 4 + 1000 * 0.2) / 1e6
    sonnet = (1000 * 30 + 100 * 150) / 1e6
    assert c.usd_rep == money(acme + sonnet)
    old = prices.lookup("claude-haiku-4-5-20251001", "2026-05-31")
    new = prices.lookup("claude-haiku-4-5-20251001", "2026-06-01")
    assert old is not None and (old.input, old.output) == (1, 5), "before its date the package's row holds"
    assert new is not None and (new.input, new.output) == (9, 45)


def test_request_priced_by_the_row_of_its_date(tmp_path: Path, sealed_env: Path) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "wf" / "prices.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[[price]]\nmodel = "claude-haiku-4-5"\nsince = "2026-06-01"\ninput = 9\noutput = 45\n')
    model = "claude-haiku-4-5-20251001"
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(1000, 0), mid="m1", model=model, ts="2026-05-01T00:00:00Z"),
        asst(tokens(1000, 0), mid="m2", model=model, ts="2026-07-01T00:00:00Z"),
    )
    assert cost_of(f).usd_rep == money((1000 * 1 + 1000 * 9) / 1e6)


# ---------------------------------------------------------------- output estimates


def test_estimate_for_a_request_that_is_not_final(tmp_path: Path) -> None:
    tool_input = {"command": "ls -la", "description": "List files"}
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "t" * 50, "signature": "s" * 400},
        {"type": "text", "text": "x" * 100},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": tool_input},
    ]
    visible = 50 + 100 + len("Bash") + len(json.dumps(tool_input, separators=(",", ":")))
    assert visible == 201
    f = write(tmp_path / "t.jsonl", asst(tokens(3, 2, cr=1000), content=content, stop=None))
    c = cost_of(f)
    estimated = math.ceil(visible / 3.0)  # 67
    assert c.out == 2, "the reported figure is kept as reported"
    assert c.est == estimated - 2
    assert c.usd_rep == money(usd(SONNET_P, inp=3, out=2, cr=1000))
    assert c.usd == money(usd(SONNET_P, inp=3, out=estimated, cr=1000))


def test_estimate_gathers_blocks_from_the_lines_of_one_request(tmp_path: Path) -> None:
    # Claude Code writes one content block per line, repeating the usage
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(3, 1), content=[{"type": "thinking", "thinking": "a" * 31}], stop=None),
        asst(tokens(3, 1), content=[{"type": "text", "text": "b" * 20}], stop=None),
        asst(tokens(3, 1), content=[{"type": "tool_use", "id": "t", "name": "Read", "input": {}}], stop=None),
    )
    c = cost_of(f)
    assert c.turns == 1
    assert c.est == math.ceil((31 + 20 + 4 + 2) / 3.0) - 1  # 19 - 1


def test_estimate_never_below_reported(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl", asst(tokens(3, 500), content=[{"type": "text", "text": "x" * 30}], stop=None)
    )
    c = cost_of(f)
    assert (c.out, c.est) == (500, 0)
    assert c.usd == c.usd_rep


def test_final_request_is_not_estimated(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(3, 1), content=[{"type": "text", "text": "x" * 3000}], stop=None),
        asst(tokens(3, 1), content=[{"type": "text", "text": "x" * 3000}], stop="end_turn"),
    )
    c = cost_of(f)
    assert (c.turns, c.out, c.est) == (1, 1, 0), "a request with any line's stop_reason set is final"


# ---------------------------------------------------------------- subagents and sessions

T0 = "2026-03-01T10:00:00.000Z"


def claude_root() -> Path:
    return Path(os.environ["CLAUDE_CONFIG_DIR"])


def write_session(root: Path, *, agent_usage: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """A session sess-1 whose main thread ran subagent a1b2c3; the parent's toolUseResult
    says the agent's last request put out 777 tokens."""
    proj = root / "projects" / "-work-app"
    tool_result = {
        "status": "completed",
        "agentId": "a1b2c3",
        "content": [{"type": "text", "text": "done"}],
        "totalTokens": 9000,
        "usage": agent_usage if agent_usage is not None else {"input_tokens": 1, "output_tokens": 777},
    }
    main = write(
        proj / "sess-1.jsonl",
        user("do it", ts="2026-03-01T10:00:00.000Z"),
        asst(
            tokens(10, 100, cr=2000),
            mid="m_main1",
            rid="r_main1",
            stop="tool_use",
            ts="2026-03-01T10:00:01.000Z",
            content=[{"type": "tool_use", "id": "tu1", "name": "Task", "input": {"prompt": "p"}}],
        ),
        user(
            "",
            ts="2026-03-01T10:05:00.000Z",
            toolUseResult=tool_result,
            message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1"}]},
        ),
        asst(tokens(5, 20, cr=3000), mid="m_main2", rid="r_main2", ts="2026-03-01T10:05:10.000Z"),
    )
    agent = write(
        proj / "sess-1" / "subagents" / "agent-a1b2c3.jsonl",
        user("the task", ts="2026-03-01T10:00:02.000Z", isSidechain=True, agentId="a1b2c3"),
        asst(
            tokens(3, 2, cw=4000),
            mid="m_s1",
            rid="r_s1",
            stop=None,
            side=True,
            agentId="a1b2c3",
            ts="2026-03-01T10:00:03.000Z",
            content=[{"type": "text", "text": "x" * 30}],
        ),
        asst(
            tokens(1, 3, cr=4000),
            mid="m_s2",
            rid="r_s2",
            stop=None,
            side=True,
            agentId="a1b2c3",
            ts="2026-03-01T10:04:59.000Z",
            content=[{"type": "text", "text": "y" * 300}],
        ),
    )
    return main, agent


# agent: request 1 estimated from 30 chars (10, reported 2); request 2, the last, exact 777
AGENT_EST = (10 - 2) + (777 - 3)


def test_last_subagent_request_takes_the_parents_figure(sealed_env: Path) -> None:
    _, agent = write_session(claude_root())
    assert usage.agent_file("a1b2c3") == (agent, agent.parent.parent.with_suffix(".jsonl"))
    c, kind = usage.for_agent("a1b2c3")
    assert kind == "subagent"
    assert (c.turns, c.inp, c.out, c.cw5m, c.cr) == (2, 4, 5, 4000, 4000)
    assert c.est == AGENT_EST
    assert c.usd == money(usd(SONNET_P, inp=4, out=10 + 777, c5=4000, cr=4000))
    assert c.usd_rep == money(usd(SONNET_P, inp=4, out=5, c5=4000, cr=4000))
    assert c.dur_s == 297.0, "from the agent's first line to its last"


def test_subagent_file_through_for_file_finds_its_parent(sealed_env: Path) -> None:
    _, agent = write_session(claude_root())
    c, kind = usage.for_file(agent)
    assert (kind, c.est) == ("subagent", AGENT_EST)


def test_subagent_without_parent_estimates_from_characters(sealed_env: Path) -> None:
    _, agent = write_session(claude_root())
    lone = claude_root() / "projects" / "-other" / "sess-9" / "subagents" / "agent-zz9.jsonl"
    lone.parent.mkdir(parents=True)
    lone.write_bytes(agent.read_bytes())
    c, _ = usage.for_agent("agent-zz9")
    assert c.est == (10 - 2) + (100 - 3)


def test_parent_figure_missing_falls_back_to_characters(sealed_env: Path) -> None:
    write_session(claude_root(), agent_usage={"input_tokens": 1})
    c, _ = usage.for_agent("a1b2c3")
    assert c.est == (10 - 2) + (100 - 3), (
        "BUG wf/cost/usage.py read_claude: a parent toolUseResult.usage without output_tokens is "
        "recorded as an exact figure of 0, so the agent's last request gets no estimate "
        f"(est={c.est}); the contract takes the parent's figure only 'when it is there'"
    )


def test_session_sums_transcript_and_subagents(sealed_env: Path) -> None:
    main, agent = write_session(claude_root())
    assert usage.session_files("sess-1") == [main, agent]
    c = usage.claude_cost(usage.session_files("sess-1"))
    assert (c.files, c.turns, c.inp, c.out, c.cw5m, c.cr) == (2, 4, 19, 125, 4000, 9000)
    assert c.est == AGENT_EST
    assert c.dur_s == 310.0


def test_claude_roots_are_comma_separated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty, real = tmp_path / "empty", tmp_path / "real"
    empty.mkdir()
    write_session(real)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", f"{empty},{real}")
    assert homes.claude_roots() == [empty, real]
    assert usage.for_agent("a1b2c3")[0].est == AGENT_EST


def test_cli_agent_and_session(wf: WfRunner) -> None:
    write_session(claude_root())
    a = json.loads(wf.ok("usage", "--agent", "a1b2c3", "--json"))
    assert (a["kind"], a["agent"], a["turns"], a["out"], a["est"]) == ("subagent", "a1b2c3", 2, 5, AGENT_EST)
    s = json.loads(wf.ok("usage", "--session", "sess-1", "--json"))
    assert (s["kind"], s["files"], s["turns"], s["in"], s["out"], s["est"], s["cr"]) == (
        "session", 2, 4, 19, 125, AGENT_EST, 9000,
    )  # fmt: skip
    text = wf.ok("usage", "--agent", "a1b2c3")
    assert f"out ~{5 + AGENT_EST} (5 reported)" in text
    assert "usd ~" in text and "reported output only" in text


def test_cli_not_found_and_bad_ids(wf: WfRunner) -> None:
    r = wf("usage", "--agent", "nope")
    assert r.code == 1 and "no transcript for agent nope" in r.err
    r = wf("usage", "--session", "../etc")
    assert r.code == 1 and "bad session id" in r.err
    r = wf("usage", "--thread", "th*")
    assert r.code == 1 and "bad thread id" in r.err
    r = wf("usage")
    assert r.code == 2
    r = wf("usage", "--agent", "x", "--session", "y")
    assert r.code == 2


# ---------------------------------------------------------------- Codex rollouts


def tok(inp: int, cached: int, out: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": reasoning,
        "total_tokens": inp + out,
    }


def token_count(total: dict[str, int] | None, last: dict[str, int] | None, ts: str) -> dict[str, Any]:
    info = None
    if total is not None or last is not None:
        info = {"total_token_usage": total, "model_context_window": 258400}
        if last is not None:
            info["last_token_usage"] = last
    return {"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": info}}


def turn_context(model: str, ts: str) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "type": "turn_context",
        "payload": {"cwd": "/w", "model": model, "effort": "high"},
    }


def rollout(path: Path, *extra: dict[str, Any] | str | bytes) -> Path:
    t1, t2, t3 = tok(1000, 200, 50, 10), tok(3000, 1200, 150, 30), tok(3500, 1200, 170, 30)
    return write(
        path,
        {"timestamp": "2026-03-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": "th-1"}},
        turn_context("gpt-5.1-codex", "2026-03-01T10:00:01.000Z"),
        token_count(None, None, "2026-03-01T10:00:02.000Z"),  # info null: skipped
        token_count(t1, t1, "2026-03-01T10:00:03.000Z"),
        token_count(t1, t1, "2026-03-01T10:00:03.000Z"),  # written twice: skipped
        {"timestamp": "2026-03-01T10:00:04.000Z", "type": "response_item", "payload": {"type": "reasoning"}},
        token_count(t2, tok(2000, 1000, 100, 20), "2026-03-01T10:00:05.000Z"),
        token_count(t2, tok(2000, 1000, 100, 20), "2026-03-01T10:00:05.000Z"),
        turn_context("gpt-5.3-codex", "2026-03-01T10:01:00.000Z"),  # the last one names the model
        token_count(t3, tok(500, 0, 20), "2026-03-01T10:01:40.000Z"),
        *extra,
    )


def test_codex_rollout(tmp_path: Path) -> None:
    c = usage.codex_cost(rollout(tmp_path / "rollout-x.jsonl"))
    assert c.kind == "codex"
    assert c.model == "gpt-5.3-codex"
    assert c.turns == 3, "info null and repeated totals are skipped"
    # input 3500 of which 1200 cached; 'in' is the uncached part, 'cr' the cached
    assert (c.inp, c.cr, c.out, c.est, c.cw5m, c.cw1h) == (2300, 1200, 170, 0, 0, 0)
    assert c.usd == c.usd_rep == money((2300 * 1.75 + 1200 * 0.175 + 170 * 14) / 1e6)
    assert c.dur_s == 100.0
    assert (c.unpriced, c.malformed) == ((), 0)


def test_codex_increment_from_totals_when_last_usage_is_missing(tmp_path: Path) -> None:
    f = write(
        tmp_path / "rollout-y.jsonl",
        turn_context("gpt-5", "2026-03-01T10:00:00Z"),
        token_count(tok(100, 0, 10), None, "2026-03-01T10:00:01Z"),
        token_count(tok(300, 50, 30), None, "2026-03-01T10:00:02Z"),
    )
    c = usage.codex_cost(f)
    assert c.turns == 2
    assert (c.inp + c.cr, c.cr, c.out) == (300, 50, 30), (
        "BUG wf/cost/usage.py codex_cost: without last_token_usage the first token_count adds 0 "
        f"(the difference from no previous total) instead of its total: got input "
        f"{c.inp + c.cr}, cached {c.cr}, output {c.out}"
    )


def test_codex_unknown_model_is_named(tmp_path: Path) -> None:
    f = write(
        tmp_path / "rollout-z.jsonl",
        turn_context("o9-preview", "2026-03-01T10:00:00Z"),
        token_count(tok(100, 0, 10), tok(100, 0, 10), "2026-03-01T10:00:01Z"),
    )
    c = usage.codex_cost(f)
    assert (c.unpriced, c.usd, c.inp, c.out) == (("o9-preview",), 0.0, 100, 10)


def test_codex_malformed_and_truncated_lines(tmp_path: Path) -> None:
    f = rollout(
        tmp_path / "rollout-x.jsonl",
        "not json",
        "[1, 2]",
        b"\xff\xfe garbage",
        '{"timestamp": "2026-03-01T10:02:00Z", "type": "event_msg", "payload": {"type": "token_co',
    )
    c = usage.codex_cost(f)
    assert c.malformed == 4
    assert (c.turns, c.inp, c.cr, c.out) == (3, 2300, 1200, 170)


def test_cli_thread_finds_the_rollout(wf: WfRunner) -> None:
    thread = "019c8a70-dda7-7f33-98ea-f30553347322"
    day = Path(os.environ["CODEX_HOME"]) / "sessions" / "2026" / "03" / "01"
    rollout(day / f"rollout-2026-03-01T10-00-00-{thread}.jsonl")
    assert usage.thread_file(thread).parent == day
    r = json.loads(wf.ok("usage", "--thread", thread, "--json"))
    assert (r["kind"], r["agent"], r["model"], r["turns"], r["in"], r["cr"], r["out"]) == (
        "codex", thread, "gpt-5.3-codex", 3, 2300, 1200, 170,
    )  # fmt: skip
    assert r["usd"] == round((2300 * 1.75 + 1200 * 0.175 + 170 * 14) / 1e6, 4)


# ---------------------------------------------------------------- robustness


def test_malformed_truncated_huge_and_odd_lines(tmp_path: Path) -> None:
    huge_text = "z" * 5_000_000
    good = asst(tokens(3, 40, cr=100), mid="m_ok", stop="end_turn")
    truncated = json.dumps(asst(tokens(9, 9), mid="m_cut"))[:150]
    assert "assistant" in truncated
    f = write(
        tmp_path / "t.jsonl",
        "not json at all",
        "{broken",
        "",
        "   ",
        {"type": "assistant"},  # no message
        {"type": "assistant", "message": "a string"},
        {"type": "assistant", "message": {"id": "m_x", "usage": "lots"}},
        {
            "type": "assistant",
            "message": {"id": "m_y", "usage": {"input_tokens": "12", "output_tokens": True}},
        },
        {"type": 7, "message": {}},
        good,
        asst(tokens(2, 5), mid="m_huge", stop=None, content=[{"type": "text", "text": huge_text}]),
        truncated,  # a last line cut short
    )
    c = cost_of(f)
    assert c.malformed == 3, "not json, {broken and the truncated line"
    assert c.turns == 3, "good, huge and the one with non-numeric usage"
    assert (c.inp, c.out, c.cr) == (5, 45, 100)
    assert c.est == math.ceil(5_000_000 / 3.0) - 5


def test_file_without_trailing_newline_and_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps(asst(tokens(3, 4))))
    assert cost_of(f).turns == 1
    e = tmp_path / "e.jsonl"
    e.write_text("")
    c = cost_of(e)
    assert (c.turns, c.usd, c.malformed, c.dur_s, c.model) == (0, 0.0, 0, None, "")


def test_brace_delimited_garbage_is_counted_as_malformed(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", "{this is not json}", asst(tokens(1, 1)))
    c = cost_of(f)
    assert c.turns == 1
    assert c.malformed == 1, (
        "BUG wf/cost/usage.py read_claude: a malformed line that starts with '{' and ends with '}' "
        "and does not mention assistant/toolUseResult is never parsed, so it is not counted"
    )


ODD_LINES: dict[str, list[bytes]] = {
    "invalid-utf8-timestamp": [
        b'{"type":"system","timestamp":"2026-03-01T10:00:00\xff"}',
        json.dumps(asst(tokens(1, 1))).encode(),
    ],
    "naive-and-aware-timestamps": [
        json.dumps(user(ts="2026-03-01T09:00:00")).encode(),
        json.dumps(asst(tokens(1, 1), ts="2026-03-01T10:00:00Z")).encode(),
    ],
    "content-not-a-list": [
        json.dumps(asst(tokens(1, 1), content=5)).encode(),  # type: ignore[arg-type]
    ],
}


@pytest.mark.parametrize("case", sorted(ODD_LINES))
def test_odd_lines_never_crash(tmp_path: Path, case: str) -> None:
    f = write(tmp_path / "t.jsonl", *ODD_LINES[case])
    try:
        c = cost_of(f)
    except Exception as e:
        pytest.fail(f"BUG wf/cost/usage.py: claude_cost crashed on {case}: {type(e).__name__}: {e}")
    assert c.turns == 1


def test_cli_reports_malformed_lines_on_stderr(wf: WfRunner, tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", "garbage", asst(tokens(1, 1)))
    r = wf("usage", "--file", str(f))
    assert r.code == 0
    assert "wf: 1 malformed line(s) skipped" in r.err


# ---------------------------------------------------------------- the log line and --json


def worker_transcript(path: Path, model: str = SONNET) -> Path:
    """Two requests over 142 s: a final one (seen twice) and a non-final one."""
    return write(
        path,
        user("go", ts="2026-03-01T10:00:00.000Z"),
        asst(
            tokens(3, 1, cw=1000, cr=5000),
            mid="m1",
            rid="r1",
            stop=None,
            model=model,
            ts="2026-03-01T10:00:05Z",
        ),
        asst(tokens(3, 40, cw=1000, cr=5000), mid="m1", rid="r1", model=model, ts="2026-03-01T10:00:06Z"),
        asst(
            tokens(2, 2, c5=0, c1=500, cr=6000),
            mid="m2",
            rid="r2",
            stop=None,
            model=model,
            ts="2026-03-01T10:02:22Z",
            content=[{"type": "text", "text": "q" * 30}],
        ),
    )


# in 5, out 42 reported, est 8, cw5m 1000, cw1h 500, cr 11000
WORKER_REP = usd(SONNET_P, inp=5, out=42, c5=1000, c1=500, cr=11000)
WORKER_USD = usd(SONNET_P, inp=5, out=50, c5=1000, c1=500, cr=11000)


def parse(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split(" "))


def test_log_line_keys_and_values(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    args = [
        "usage",
        "--file",
        str(f),
        "--log",
        "--id",
        "T",
        "--lane",
        "sonnet",
        "--effort",
        "2",
        "--done",
        "1",
    ]
    wf.ok(*args)
    log = wf.root / "out" / "wf-cost.log"
    lines = log.read_text().splitlines()
    assert len(lines) == 1
    keys = [part.split("=", 1)[0] for part in lines[0].split(" ")]
    assert keys == [*LOG_KEYS, "cost_source"], "the documented order, no unpriced key when all is priced"
    rec = parse(lines[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rec["ts"])
    assert rec == {
        "ts": rec["ts"],
        "project": wf.root.name,
        "id": "T",
        "agent": "worker-7",
        "kind": "session",
        "lane": "sonnet",
        "model": SONNET,
        "effort": "2",
        "done": "1",
        "turns": "2",
        "dur_s": "142",
        "in": "5",
        "out": "42",
        "est": "8",
        "cw5m": "1000",
        "cw1h": "500",
        "cr": "11000",
        "usd": str(round(WORKER_USD, 4)),
        "usd_rep": str(round(WORKER_REP, 4)),
        "cost_source": "table",
    }
    wf.ok("usage", "--file", str(f), "--log", "--done", "0", "--duration", "99.6")
    second = parse(log.read_text().splitlines()[1])
    assert (second["id"], second["lane"], second["effort"], second["done"], second["dur_s"]) == (
        "-", "-", "-", "0", "100",
    )  # fmt: skip


def test_json_has_the_log_keys(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    out = wf.ok(
        "usage", "--file", str(f), "--json", "--id", "T", "--lane", "sonnet", "--effort", "2", "--done", "1"
    )
    assert len(out.strip().splitlines()) == 1, "one JSON object on one line"
    obj = json.loads(out)
    assert list(obj)[: len(LOG_KEYS)] == LOG_KEYS
    assert {k: obj[k] for k in LOG_KEYS[2:]} == {
        "id": "T", "agent": "worker-7", "kind": "session", "lane": "sonnet", "model": SONNET,
        "effort": "2", "done": 1, "turns": 2, "dur_s": 142, "in": 5, "out": 42, "est": 8,
        "cw5m": 1000, "cw1h": 500, "cr": 11000,
        "usd": round(WORKER_USD, 4), "usd_rep": round(WORKER_REP, 4),
    }  # fmt: skip
    assert obj["cost_source"] == "table"
    assert (obj["malformed"], obj["files"]) == (0, 1)
    assert not (wf.root / "out" / "wf-cost.log").exists(), "no --log, no line"


def test_cli_text_output(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    assert wf.ok("usage", "--file", str(f)).splitlines() == [
        f"session worker-7  model {SONNET}  turns 2  dur 142s",
        "in 5  out ~50 (42 reported)  cache writes 5m 1000 1h 500  cache reads 11000",
        f"usd ~{WORKER_USD:.4f} (reported output only: {WORKER_REP:.4f})",
        "~ includes estimated output (a lower bound where thinking is hidden)",
    ]


def test_unknown_model_in_log_and_warning(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-8.jsonl", model="mystery-model-9")
    r = wf("usage", "--file", str(f), "--log")
    assert r.code == 0
    assert "unpriced model mystery-model-9: counted as $0" in r.err
    line = (wf.root / "out" / "wf-cost.log").read_text().splitlines()[0]
    keys = [part.split("=", 1)[0] for part in line.split(" ")]
    assert keys == [*LOG_KEYS, "unpriced", "cost_source"]
    rec = parse(line)
    assert (rec["unpriced"], rec["usd"], rec["usd_rep"], rec["model"]) == (
        "mystery-model-9",
        "0.0",
        "0.0",
        "mystery-model-9",
    )


def test_log_remembers_the_project_once(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    wf.ok("usage", "--file", str(f), "--log")
    wf.ok("usage", "--file", str(f), "--log")
    registry = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "projects"
    entries = [p for p in registry.read_text().splitlines() if p.strip()]
    assert len(entries) == 1
    assert Path(entries[0]).resolve() == wf.root.resolve()
    assert costlog.known_projects() == entries


def test_log_values_are_escaped() -> None:
    c = usage.Cost("m", 1, 1, 1, 0, 0, 0, 0, 0.0, 0.0, None, (), 0, 1, "claude")
    rec = costlog.line_for(c, ts="2026-03-01T00:00:00Z", project="my app", task_id="a=b c", lane="")
    line = costlog.format_line(rec)
    assert " project=my_app id=a_b_c agent=- kind=claude lane=- " in line
    assert costlog.parse_line(line) == {k: str(v) for k, v in parse(line).items()}


# ---------------------------------------------------------------- the report


def log_line(ts: str, project: str, lane: str, model: str, effort: str, done: int, turns: int, dur: int,
             est: int, usd_: float, unpriced: str = "") -> str:  # fmt: skip
    line = (
        f"ts={ts} project={project} id=t agent=a kind=subagent lane={lane} model={model} effort={effort} "
        f"done={done} turns={turns} dur_s={dur} in=1 out=1 est={est} cw5m=0 cw1h=0 cr=0 "
        f"usd={usd_:.4f} usd_rep={usd_:.4f}"
    )
    return line + (f" unpriced={unpriced}" if unpriced else "")


@pytest.fixture
def two_logs(tmp_path: Path, sealed_env: Path) -> tuple[Path, Path]:
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    son, opus = "claude-sonnet-4-5", "claude-opus-4-6"
    write(
        alpha / "out" / "wf-cost.log",
        log_line("2026-03-01T10:00:00Z", "alpha", "sonnet", son, "2", 1, 10, 100, 0, 1.0),
        log_line("2026-03-02T10:00:00Z", "alpha", "sonnet", son, "2", 0, 20, 300, 0, 2.0),
        log_line("2026-03-03T10:00:00Z", "alpha", "sonnet", son, "2", 1, 30, 200, 0, 6.0),
        log_line("2026-03-04T10:00:00Z", "alpha", "opus", opus, "3", 1, 5, 50, 100, 3.0),
    )
    write(
        beta / "out" / "wf-cost.log",
        log_line("2026-04-01T10:00:00Z", "beta", "opus", opus, "3", 0, 7, 70, 0, 5.0),
        "this is not a cost line",
        log_line("2026-04-02T10:00:00Z", "beta", "haiku", "mystery", "1", 1, 1, 1, 0, 0.0, "mystery"),
    )
    costlog.remember(alpha)
    costlog.remember(beta)
    costlog.remember(alpha)
    assert costlog.known_projects() == [str(alpha), str(beta)]
    return alpha, beta


HAIKU_ROW = {
    "lane": "haiku", "model": "mystery", "effort": "1", "n": 1, "done": 1, "median_usd": 0.0,
    "total_usd": 0.0, "usd_per_done": 0.0, "median_turns": 1.0, "median_dur_s": 1.0,
    "estimated": False, "unpriced": ["mystery"], "cost_source": "unpriced",
}  # fmt: skip
OPUS_ROW = {
    "lane": "opus", "model": "claude-opus-4-6", "effort": "3", "n": 2, "done": 1, "median_usd": 4.0,
    "total_usd": 8.0, "usd_per_done": 8.0, "median_turns": 6.0, "median_dur_s": 60.0,
    "estimated": True, "unpriced": [], "cost_source": "table",
}  # fmt: skip
SONNET_ROW = {
    "lane": "sonnet", "model": "claude-sonnet-4-5", "effort": "2", "n": 3, "done": 2, "median_usd": 2.0,
    "total_usd": 9.0, "usd_per_done": 4.5, "median_turns": 20.0, "median_dur_s": 200.0,
    "estimated": False, "unpriced": [], "cost_source": "table",
}  # fmt: skip


def test_report_json_groups_by_lane_model_effort(wf: WfRunner, two_logs: tuple[Path, Path]) -> None:
    r = wf("usage", "--report", "--json")
    assert r.code == 0
    assert json.loads(r.out) == [HAIKU_ROW, OPUS_ROW, SONNET_ROW]
    assert "1 unreadable line(s)" in r.err


def test_report_since_and_project(wf: WfRunner, two_logs: tuple[Path, Path]) -> None:
    since = json.loads(wf.ok("usage", "--report", "--json", "--since", "2026-04-01"))
    assert [(g["lane"], g["n"], g["total_usd"], g["estimated"]) for g in since] == [
        ("haiku", 1, 0.0, False),
        ("opus", 1, 5.0, False),
    ]
    alpha = json.loads(wf.ok("usage", "--report", "--json", "--project", "alpha"))
    assert [(g["lane"], g["n"], g["total_usd"], g["estimated"]) for g in alpha] == [
        ("opus", 1, 3.0, True),
        ("sonnet", 3, 9.0, False),
    ]
    by_path = json.loads(wf.ok("usage", "--report", "--json", "--project", str(two_logs[1])))
    assert [g["n"] for g in by_path] == [1, 1]


def test_report_text_marks_estimates(wf: WfRunner, two_logs: tuple[Path, Path]) -> None:
    lines = wf.ok("usage", "--report").splitlines()
    assert lines[0].split() == [
        "lane",
        "model",
        "effort",
        "n",
        "done",
        "median",
        "$",
        "total",
        "$",
        "$/done",
        "turns",
        "dur",
    ]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:4]}
    assert rows["opus"] == ["opus", "claude-opus-4-6", "3", "2", "1", "~4.00", "~8.00", "~8.00", "6", "60s"]
    assert rows["sonnet"] == [
        "sonnet",
        "claude-sonnet-4-5",
        "2",
        "3",
        "2",
        "2.00",
        "9.00",
        "4.50",
        "20",
        "200s",
    ]
    assert rows["haiku"] == ["haiku", "mystery", "1", "1", "1", "0.00?", "0.00?", "0.00?", "1", "1s"]
    assert lines[4].startswith("~ includes estimated output")
    assert lines[5].startswith("? leaves out unpriced model(s), counted as $0")
    assert lines[6] == "unpriced (counted as $0): mystery"


def test_report_without_lines(wf: WfRunner) -> None:
    assert json.loads(wf.ok("usage", "--report", "--json")) == []


def test_report_without_lines_says_so(wf: WfRunner) -> None:
    out = wf.ok("usage", "--report")
    assert out == "no cost lines yet (wf usage --log, wf orch post --agent)\n", (
        "BUG wf/cost/costlog.py report_text: with no rows it still returns the table header, so the "
        f"CLI's 'no cost lines yet' fallback (report_text(rows) or [...]) never shows; got {out!r}"
    )


def test_report_after_cli_logs(wf: WfRunner, tmp_path: Path) -> None:
    f = worker_transcript(tmp_path / "w" / "worker-7.jsonl")
    wf.ok("usage", "--file", str(f), "--log", "--lane", "sonnet", "--effort", "2", "--done", "1")
    wf.ok("usage", "--file", str(f), "--log", "--lane", "sonnet", "--effort", "2", "--done", "0")
    [row] = json.loads(wf.ok("usage", "--report", "--json"))
    each = round(WORKER_USD, 4)
    assert row == {
        "lane": "sonnet", "model": SONNET, "effort": "2", "n": 2, "done": 1, "median_usd": each,
        "total_usd": round(2 * each, 4), "usd_per_done": round(2 * each, 4), "median_turns": 2.0,
        "median_dur_s": 142.0, "estimated": True, "unpriced": [], "cost_source": "table",
    }  # fmt: skip


@pytest.mark.parametrize("by", ["lane", "model", "run"])
def test_report_of_sessions_on_several_models_works_by_every_grouping(
    wf: WfRunner, tmp_path: Path, sealed_env: Path, by: str
) -> None:
    """A run whose sessions used several models (a subagent on haiku): every grouping prints
    its $ by model under the row's own key, never a crash on a field it does not have."""
    proj = tmp_path / "gamma"
    son, hai = "claude-sonnet-4-5", "claude-haiku-4-5"
    base = log_line("2026-05-01T10:00:00Z", "gamma", "sonnet", son, "2", 1, 10, 100, 0, 3.0)
    write(proj / "out" / "wf-cost.log", f"{base} run=r1 unit=u1 models={son}:2.5000,{hai}:0.5000")
    costlog.remember(proj)
    r = wf("usage", "--report", "--by", by)
    assert r.code == 0, r.err
    key = {"lane": "sonnet claude-sonnet-4-5 2", "model": son, "run": "r1"}[by]
    assert f"{key}: $ by model: {son} 2.50, {hai} 0.50" in r.out.splitlines(), r.out
    [row] = json.loads(wf.ok("usage", "--report", "--by", by, "--json"))
    assert row["models"] == {son: 2.5, hai: 0.5}


# ---------------------------------------------------------------- the corpus


def _corpus_cases() -> list[Any]:
    expected = Path(CORPUS or "/nonexistent") / "expected.json"
    if not CORPUS or not expected.is_file():
        return [
            pytest.param("", "", {}, marks=pytest.mark.skip(reason="WF_CORPUS is not set"), id="no-corpus")
        ]
    data = json.loads(expected.read_text("utf-8"))
    return [
        pytest.param(kind, rel, ref, id=Path(rel).name)
        for kind in ("claude", "codex")
        for rel, ref in sorted(data[kind].items())
    ]


@pytest.mark.parametrize(("kind", "rel", "ref"), _corpus_cases())
def test_corpus_matches_reference(kind: str, rel: str, ref: dict[str, Any]) -> None:
    assert CORPUS is not None
    path = Path(CORPUS) / rel
    c = usage.claude_cost([path]) if kind == "claude" else usage.codex_cost(path)
    got = {"in": c.inp, "out": c.out, "cw": c.cw5m + c.cw1h, "cr": c.cr}
    want = {"in": ref["inputTokens"], "out": ref["outputTokens"], "cw": ref["cacheCreationTokens"], "cr": ref["cacheReadTokens"]}  # fmt: skip
    assert got == want
    assert c.usd_rep == pytest.approx(ref["totalCost" if kind == "claude" else "costUSD"], abs=1e-6)
    assert (c.malformed, c.unpriced) == (0, ())
    assert c.est >= 0 and c.usd >= c.usd_rep


@pytest.mark.skipif(not CORPUS, reason="WF_CORPUS is not set")
def test_corpus_through_the_cli(wf: WfRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    assert CORPUS is not None
    data = json.loads((Path(CORPUS) / "expected.json").read_text("utf-8"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(Path(CORPUS) / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(Path(CORPUS) / "codex"))
    session = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    refs = [v for k, v in data["claude"].items() if session in k]
    assert len(refs) == 3
    s = json.loads(wf.ok("usage", "--session", session, "--json"))
    assert (s["files"], s["in"], s["out"], s["cw5m"] + s["cw1h"], s["cr"]) == (
        3,
        sum(r["inputTokens"] for r in refs),
        sum(r["outputTokens"] for r in refs),
        sum(r["cacheCreationTokens"] for r in refs),
        sum(r["cacheReadTokens"] for r in refs),
    )
    assert s["usd_rep"] == round(sum(r["totalCost"] for r in refs), 4)
    [ref] = [v for k, v in data["claude"].items() if k.endswith("agent-afc096d.jsonl")]
    a = json.loads(wf.ok("usage", "--agent", "afc096d", "--json"))
    assert (a["kind"], a["in"], a["out"], a["cr"]) == ("subagent", ref["inputTokens"], ref["outputTokens"], ref["cacheReadTokens"])  # fmt: skip
    thread = "019c8a70-dda7-7f33-98ea-f30553347322"
    [cref] = [v for k, v in data["codex"].items() if thread in k]
    t = json.loads(wf.ok("usage", "--thread", thread, "--json"))
    assert (t["kind"], t["in"], t["out"], t["cr"]) == ("codex", cref["inputTokens"], cref["outputTokens"], cref["cacheReadTokens"])  # fmt: skip
    assert t["usd_rep"] == round(cref["costUSD"], 4)


# ------------------------------------------------- models the table lacks: never a silent $0


def cost_state(model_usd: dict[str, float], ts: str = "2026-12-03T10:00:01.000Z") -> dict[str, Any]:
    """A cost-state line as Claude Code 2.1.332 writes after each turn: its own $ per model
    for the whole session so far."""
    return {
        "type": "cost-state",
        "sessionId": "sess-1",
        "totalCostUSD": sum(model_usd.values()),
        "modelUsage": {m: {"inputTokens": 1, "outputTokens": 1, "costUSD": v} for m, v in model_usd.items()},
        "hasUnknownModelCost": False,
    }


def test_the_current_claude_models_are_priced(tmp_path: Path) -> None:
    """What claude 2.1.332 resolves haiku, sonnet and opus to (tests/cost/test_cost_real.py
    measures these prices with the real binary); haiku-5-5 costs 5 times past 100,000
    prompt tokens, all of the request."""
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(1000, 100, cr=1000, c5=100, c1=10), mid="m1", model="claude-sonnet-5-5"),
        asst(tokens(1000, 100), mid="m2", model="claude-opus-5-5"),
        asst(tokens(100_000, 100), mid="m3", model="claude-haiku-5-5"),  # at the edge
        asst(tokens(90_000, 100, cr=10_001), mid="m4", model="claude-haiku-5-5"),  # past it
    )
    c = cost_of(f)
    sonnet = (1000 * 2 + 100 * 10 + 1000 * 0.1 + 100 * 2.5 + 10 * 4) / 1e6
    opus = (1000 * 4 + 100 * 20) / 1e6
    haiku = (100_000 * 0.1 + 100 * 0.5) / 1e6 + 5 * (90_000 * 0.1 + 100 * 0.5 + 10_001 * 0.01) / 1e6
    assert (c.unpriced, c.source) == ((), usage.CostSource.table)
    assert c.usd_rep == money(sonnet + opus + haiku)


def test_a_prefix_is_never_silent(wf: WfRunner, tmp_path: Path) -> None:
    """gpt-5.5 is not gpt-5: unpriced, the warning names the row it was not priced by,
    and the figure is marked."""
    f = write(
        tmp_path / "rollout-p.jsonl",
        turn_context("gpt-5.5", "2026-12-01T10:00:00Z"),
        token_count(tok(1000, 0, 10), tok(1000, 0, 10), "2026-12-01T10:00:01Z"),
    )
    r = wf("usage", "--file", str(f), "--log")
    assert r.code == 0
    assert "unpriced model gpt-5.5 (not priced as gpt-5: " in r.err
    assert "usd 0.0000?" in r.out.splitlines() and "? leaves out unpriced model(s)" in r.out
    [line] = (wf.root / "out" / "wf-cost.log").read_text().splitlines()
    assert " unpriced=gpt-5.5 cost_source=unpriced" in line


def test_a_model_the_table_lacks_takes_the_tools_own_figure(wf: WfRunner, tmp_path: Path) -> None:
    """The last cost-state line's $ for a model the table lacks is used, marked '*'; a
    priced model keeps the table's price whatever the tool says."""
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(1000, 100), mid="m1", model="claude-zeta-9-9"),
        cost_state({"claude-zeta-9-9": 0.01}),
        asst(tokens(1000, 100), mid="m2", model="claude-zeta-9-9"),
        asst(tokens(1000, 100), mid="m3", model=SONNET),
        cost_state({"claude-zeta-9-9": 0.03, SONNET: 99.0}),  # the session so far: the last counts
    )
    sonnet = (1000 * 3 + 100 * 15) / 1e6
    c = cost_of(f)
    assert (c.unpriced, c.tool_priced, c.source) == ((), ("claude-zeta-9-9",), usage.CostSource.tool)
    assert c.usd_rep == c.usd == money(0.03 + sonnet)
    r = wf("usage", "--file", str(f), "--json")
    assert json.loads(r.out)["cost_source"] == "tool"
    assert "claude-zeta-9-9 not in wf's price table: their cost is the tool's own figure" in r.err
    out = wf.ok("usage", "--file", str(f))
    assert f"usd {0.03 + sonnet:.4f}*" in out.splitlines()
    assert f"by model: claude-zeta-9-9 2 turns usd 0.0300*, {SONNET} 1 turns usd {sonnet:.4f}" in out
    assert "* the tool's own figure" in out


def test_a_subagent_alone_has_no_tool_figure(tmp_path: Path) -> None:
    """A subagent's transcript has no cost-state, and its parent's covers the whole
    session: the unknown model stays unpriced, never priced by someone else's figure."""
    root = tmp_path / "claude"
    sub = write(
        root / "projects" / "p" / "s1" / "subagents" / "agent-a1.jsonl",
        asst(tokens(1000, 100), mid="m1", model="claude-zeta-9-9", side=True),
    )
    write(root / "projects" / "p" / "s1.jsonl", cost_state({"claude-zeta-9-9": 0.5}))
    c, _ = usage.for_file(sub)
    assert (c.unpriced, c.source, c.usd) == (("claude-zeta-9-9",), usage.CostSource.unpriced, 0.0)


def test_opencode_cost_is_its_own_and_zero_for_tokens_is_unpriced(tmp_path: Path) -> None:
    import sqlite3

    from wf.adapters.opencode import store_cost

    db = tmp_path / "opencode.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE session (id TEXT)")
        con.execute("CREATE TABLE message (session_id TEXT, time_created INT, data TEXT)")
        for sid, cost in (("s1", 0.25), ("s2", 0)):
            con.execute("INSERT INTO session VALUES (?)", (sid,))
            msg = {"role": "assistant", "providerID": "p", "modelID": "m", "cost": cost,
                   "tokens": {"input": 10, "output": 5}}  # fmt: skip
            con.execute("INSERT INTO message VALUES (?, 1, ?)", (sid, json.dumps(msg)))
    con.close()
    own, unknown = store_cost("s1", db), store_cost("s2", db)
    assert (own.usd, own.source, own.unpriced) == (0.25, usage.CostSource.tool, ())
    assert (unknown.usd, unknown.source, unknown.unpriced) == (0.0, usage.CostSource.unpriced, ("p/m",))


@pytest.mark.parametrize("figure", [-1.0, "0.5", True, None, 1e999, 0.0])
def test_a_tool_figure_that_is_not_a_cost_is_not_used(tmp_path: Path, figure: Any) -> None:
    """A cost-state whose $ is negative, text, a bool, missing or infinite is no figure,
    nor is $0 for tokens (a price the tool did not know):
    the model stays unpriced (an earlier good figure is not kept either: the last line
    is the session's state)."""
    line = cost_state({"claude-zeta-9-9": 0.0})
    line["modelUsage"]["claude-zeta-9-9"]["costUSD"] = figure
    f = write(
        tmp_path / "t.jsonl",
        asst(tokens(1000, 100), mid="m1", model="claude-zeta-9-9"),
        cost_state({"claude-zeta-9-9": 0.25}),
        line,
    )
    c = cost_of(f)
    assert (c.unpriced, c.usd, c.source) == (("claude-zeta-9-9",), 0.0, usage.CostSource.unpriced)
