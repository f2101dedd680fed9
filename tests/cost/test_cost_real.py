"""What a worker run by the real claude costs, against the scripted model API of
tests/model_api.py, which chooses the token counts: wf's price table against claude's
own ``total_cost_usd`` (the prices of wf/data/prices.toml's claude rows are measured
here anew), and the dollar figure on every line of wf that shows one. Run when
WF_REAL_TOOLS names the folder holding the pinned binaries; every tool's proxy is the
server, which refuses anywhere but itself, so nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WfRunner
from tests.model_api import ModelApi, Reply, Request, Step, Text, ToolUse
from tests.workers.test_workers import Workers
from wf import adapters
from wf.adapters import Spec
from wf.cost import prices

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)"),
]
TIMEOUT = 90  # seconds any one run of claude may take (it takes one or two)
KINDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
# what claude 2.1.332 resolves its aliases to (its --model), the models wf must price
ALIASES = {
    "haiku": "claude-haiku-5-5",
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "fable": "claude-fable-5-2",
}


def binary() -> str:
    path = Path(REAL_BIN) / "claude"
    if not path.exists():
        pytest.skip(f"claude is not in WF_REAL_TOOLS ({REAL_BIN})")
    return str(path)


@pytest.fixture(autouse=True)
def _fresh_prices() -> None:
    """This process's price table is the package's (a test's HOME has no prices.toml)."""
    prices.table.cache_clear()
    prices.lookup.cache_clear()


@dataclass(frozen=True)
class Charged:
    model: str  # the model claude asked the API for
    usd: float  # its result's total_cost_usd
    basis: str  # its modelUsage's costBasis: "list" (its own price) or "unknown" (a guess)


def charged(work: Path, model: str, reply: Reply) -> Charged:
    """What the real claude charges for one request whose usage the API reports as ``reply``'s."""
    spec = Spec(run="r1", unit="u1", folder=work.parent, cwd=work, prompt="Say ok.", model=model,
                session_id=str(uuid.uuid4()))  # fmt: skip
    adapter = adapters.get("claude")
    argv = adapter.argv(spec)
    argv[0] = binary()
    drop = ("ANTHROPIC_", "OPENAI_", "CODEX_API", "IS_SANDBOX")
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    with ModelApi([reply]) as api:
        env = {**adapter.env(spec, base), "TERM": "dumb", "NO_COLOR": "1", **api.env(),
               "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "x", "CLAUDE_CODE_MAX_RETRIES": "1",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
        p = subprocess.run(argv, cwd=work, input=adapter.stdin(spec), env=env, capture_output=True,
                           timeout=TIMEOUT)  # fmt: skip
        assert api.outside == []
        [request] = api.requests
    assert p.returncode == 0, p.stderr.decode()
    events = [json.loads(line) for line in p.stdout.decode().splitlines() if line.startswith("{")]
    [result] = [e for e in events if e.get("type") == "result"]
    [(used, figures)] = result["modelUsage"].items()
    assert used == request.body["model"]
    return Charged(str(request.body["model"]), float(result["total_cost_usd"]), str(figures["costBasis"]))


def one(kind: str, n: int) -> Reply:
    """A reply whose usage is ``n`` tokens of one kind only."""
    names = {"input": "input_tokens", "output": "output_tokens", "cache_write_5m": "cache_write_5m",
             "cache_write_1h": "cache_write_1h", "cache_read": "cache_read"}  # fmt: skip
    counts: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, names[kind]: n}
    return Reply((Text("ok"),), **counts)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_prices_of_the_models_claude_resolves_to_are_its_own(work: Path, alias: str) -> None:
    """Each price of the row is total_cost_usd for 1,000 tokens of one kind x 1,000 (how
    wf/data/prices.toml's claude-*-5-5 rows were found); the long-context tier and fast
    mode as claude charges them for a request above and at the tier's edge."""
    measured = {}
    model = ""
    for kind in KINDS:
        c = charged(work, alias, one(kind, 1000))
        assert c.basis == "list", f"claude does not know its own price for {c.model}"
        model = c.model
        measured[kind] = round(c.usd * 1000, 9)
    assert model == ALIASES[alias]
    row = prices.lookup(model)
    assert row is not None, f"{model} (claude's {alias}) is not in wf/data/prices.toml: add {measured}"
    assert {k: getattr(row, k) for k in KINDS} == measured
    edge = row.long_above or 100_000
    for reply, fast in (
        (Reply((Text("ok"),), input_tokens=edge, output_tokens=10), False),  # at the tier's edge
        (Reply((Text("ok"),), input_tokens=edge - 5000, output_tokens=10, cache_read=5001), False),  # past it
        (Reply((Text("ok"),), input_tokens=1000, output_tokens=1000, speed="fast"), True),
    ):
        c = charged(work, alias, reply)
        wf_usd = row.usd(reply.input_tokens, reply.output_tokens, 0, 0, reply.cache_read, fast=fast)
        assert c.usd == pytest.approx(wf_usd, rel=1e-9, abs=1e-12), (reply, row)


@pytest.mark.slow
def test_every_claude_row_is_what_the_real_claude_charges(work: Path) -> None:
    """One request of every kind of token to each claude model of the table: wf's price
    of it is claude's own total_cost_usd (for the model claude really asked for: it maps
    some retired names to current ones)."""
    reply = Reply((Text("ok"),), input_tokens=1000, output_tokens=2000, cache_write_5m=3000,
                  cache_write_1h=4000, cache_read=5000)  # fmt: skip
    checked = set()
    for row in prices.table():
        if not row.model.startswith("claude-"):
            continue
        c = charged(work, row.model, reply)
        price = prices.lookup(c.model)
        assert price is not None, f"claude asked for {c.model} (given {row.model}): wf has no price"
        assert c.usd == pytest.approx(price.usd(1000, 2000, 3000, 4000, 5000), rel=1e-9), row.model
        checked.add(c.model)
    assert set(ALIASES.values()) <= checked


# ------------------------------------------------------------------ wf's lines, one unit


def script(main: Reply, sub: Reply | None = None) -> Any:
    """The main session answers with ``main``'s usage; with ``sub``, it first starts a
    haiku subagent that answers with ``sub``'s (2.1.332's Agent tool runs it in the
    background, and its end wakes the main session)."""

    def play(request: Request) -> Step:
        if sub is not None and not request.says("Do the task."):
            return sub
        if sub is not None and request.step == 0:
            agent = ToolUse("Agent", {"description": "look", "prompt": "Say sub.",
                                      "subagent_type": "general-purpose", "model": "haiku"})  # fmt: skip
            return replace(main, blocks=(agent,))  # the same usage as every main request
        return main

    return play


def dispatch(wf: WfRunner, tmp_path: Path, api: ModelApi, model: str) -> tuple[Workers, str]:
    w = Workers(wf.root, tmp_path)
    w.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]])
    w.env |= {**api.env(), "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "x",
              "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "1"}  # fmt: skip
    r = w.run("dispatch", "r1", "u1", "--adapter", "claude", "--model", model, "--prompt", "Do the task.",
              "--timeout", "120", timeout=150)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert api.outside == []
    return w, r.stdout


DOLLARS = re.compile(r"~?\$(\d+\.\d+)([*?]?)")


def figures(text: str) -> list[tuple[float, str]]:
    """Every dollar figure of wf's output, and its mark."""
    return [(float(m.group(1)), m.group(2)) for m in DOLLARS.finditer(text)]


MAIN = Reply((Text("main done"),), input_tokens=1200, output_tokens=300, cache_write_5m=2000, cache_read=5000)
SUB = Reply((Text("sub done"),), input_tokens=800, output_tokens=100, cache_read=3000)


def test_a_unit_of_the_real_claude_shows_its_cost_on_every_line(wf: WfRunner, tmp_path: Path) -> None:
    """sonnet (claude-sonnet-5-5) with a haiku subagent: the dispatch line, wf runs status,
    wf usage --session and --agent show the table's price of the tokens the API reported,
    which is what claude itself reported (the cost check agrees); no figure is $0."""
    with ModelApi(script(MAIN, SUB)) as api:
        w, out = dispatch(wf, tmp_path, api, "sonnet")
    st = w.status("r1", "u1")
    sonnet, haiku = prices.lookup("claude-sonnet-5-5"), prices.lookup("claude-haiku-5-5")
    assert sonnet is not None and haiku is not None
    mains = [q for q in api.requests if q.says("Do the task.")]
    subs = [q for q in api.requests if not q.says("Do the task.")]
    want_sub = len(subs) * haiku.usd(800, 100, 0, 0, 3000)
    want = len(mains) * sonnet.usd(1200, 300, 2000, 0, 5000) + want_sub
    cost = st["cost"]
    assert (cost["cost_source"], cost["usd"], st["cost_check"]) == ("table", round(want, 4), "agrees")
    assert "unpriced" not in cost and cost["model"] == "claude-sonnet-5-5"
    assert figures(out) == [(round(want, 4), "")], out
    status = w.run("runs", "status", "r1").stdout
    assert figures(status) == [(round(want, 4), ""), (round(want, 4), "")], status  # the unit, the run
    session = w.run("usage", "--session", str(st["session_id"]))
    assert session.returncode == 0 and session.stderr == "", session.stderr
    assert f"usd {want:.4f}\n" in session.stdout and "claude-haiku-5-5" in session.stdout
    [agent] = Path(os.environ["CLAUDE_CONFIG_DIR"]).glob(
        f"projects/*/{st['session_id']}/subagents/agent-*.jsonl"
    )
    sub = w.run("usage", "--agent", agent.stem, "--json")
    assert sub.returncode == 0 and sub.stderr == "", sub.stderr
    rec = json.loads(sub.stdout)
    assert (rec["model"], rec["usd"], rec["cost_source"]) == ("claude-haiku-5-5", round(want_sub, 4), "table")
    assert want_sub > 0


def test_a_model_wf_cannot_price_shows_the_tools_own_figure_marked(wf: WfRunner, tmp_path: Path) -> None:
    """A model missing from wf's table (and from claude's: it guesses, costBasis unknown):
    the cost is the tool's own figure from its transcript's cost-state, marked '*' with a
    legend on every line, cost_source "tool" in --json; never a bare $0.0000."""
    with ModelApi(script(MAIN)) as api:
        w, out = dispatch(wf, tmp_path, api, "claude-zeta-9-9")
    st = w.status("r1", "u1")
    [result] = [json.loads(x) for x in (w.unit("r1", "u1") / "worker.log").read_text().splitlines()
                if '"type":"result"' in x]  # fmt: skip
    tool = float(result["total_cost_usd"])
    assert tool > 0
    cost = st["cost"]
    assert (cost["cost_source"], cost["usd"], st["cost_check"]) == ("tool", round(tool, 4), "agrees")
    assert "unpriced" not in cost
    assert figures(out) == [(round(tool, 4), "*")], out
    assert "* the tool's own figure" in out
    status = w.run("runs", "status", "r1").stdout
    assert figures(status) == [(round(tool, 4), "*")] * 2 and "* the tool's own figure" in status
    session = w.run("usage", "--session", str(st["session_id"]))
    assert f"usd {tool:.4f}*\n" in session.stdout and "* the tool's own figure" in session.stdout
    assert "claude-zeta-9-9 not in wf's price table" in session.stderr
    rec = json.loads(w.run("usage", "--session", str(st["session_id"]), "--json").stdout)
    assert (rec["cost_source"], rec["usd"]) == ("tool", round(tool, 4))
