"""The forecast of a night (issue 25, item 1): ``wf batch N --dry-run``, ``wf orch run
--dry-run`` print what the tasks they would run will likely cost and take, from the
project's cost log (per lane, model and effort, then model and effort, then model), and
name the tasks without history; a replayed history checks the goal (a night's forecast
within 30% of what it then costs)."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from tests.conftest import WfRunner
from tests.night.test_batch import Batch, b  # noqa: F401  (the fixture)
from tests.orch.test_orch import lanes_toml, task
from wf.cost import costlog
from wf.cost import forecast as fc


def cost_line(tid: str, lane: str, model: str, effort: str, usd: float, dur: float = 60) -> str:
    """A cost log line as wf writes it (``costlog.format_line``)."""
    rec = {
        "ts": "2026-12-01T01:00:00Z", "project": "p", "id": tid, "agent": f"ag-{tid}", "kind": "main",
        "lane": lane, "model": model, "effort": effort, "done": 1, "turns": 5, "dur_s": round(dur),
        "in": 1, "out": 1, "est": 0, "cw5m": 0, "cw1h": 0, "cr": 0, "usd": usd, "usd_rep": usd,
        "cost_source": "table",
    }  # fmt: skip
    return costlog.format_line(rec)


def write_history(root: Path, lines: list[str]) -> None:
    (root / "out").mkdir(exist_ok=True)
    with open(root / "out" / "wf-cost.log", "a") as f:
        f.write("".join(x + "\n" for x in lines))


HISTORY = [
    cost_line("h1", "a", "ma", "1", 1.0, 60),
    cost_line("h2", "a", "ma", "1", 2.0, 120),
    cost_line("h3", "a", "ma", "1", 3.0, 180),
    cost_line("h4", "a", "ma", "2", 5.0, 600),
    cost_line("h5", "x", "ma", "3", 9.0, 900),  # another lane: only a fallback for effort 3
]


def three_tasks(b: Batch) -> None:
    b.setup(
        lanes_toml("a", "b"),
        task("a1", "a", "write a1.txt x", extra="Effort: 1")
        + task("a2", "a", "write a2.txt x", extra="Effort: 2\nPrio: 2")
        + task("b1", "b", "write b1.txt x", extra="Effort: 1"),
    )
    write_history(b.root, HISTORY)


def test_batch_dry_run_forecasts_each_task_and_the_total_and_names_the_unknown(b: Batch) -> None:
    three_tasks(b)
    r = b.batch("3", "--dry-run")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "forecast (from 5 task(s) of out/wf-cost.log):" in out
    assert (
        "  a1 (a, ma, effort 1): $2.00 (high $3.00), 2m00s (high 3m00s), from 3 task(s) by lane+model+effort"
        in out
    )
    assert (
        "  a2 (a, ma, effort 2): $5.00 (high $5.00), 10m00s (high 10m00s), from 1 task(s) by lane+model+effort"
        in out
    )
    assert any(x.startswith("  b1 (b, mb, effort 1): no history") for x in out)
    assert "  total: $7.00 (high $8.00), 12m00s of work (high 13m00s), for 2 task(s) with history" in out
    assert "  no history: b1 (not in the total)" in out
    assert "usage windows: unknown (no rate_limit_event in the workers' streams)" in out
    # nothing started, nothing written
    assert not (b.root / ".wf" / "batch").exists() or not list((b.root / ".wf" / "batch").glob("*.json"))

    js = json.loads(b.batch("3", "--dry-run", "--json").stdout)
    fore = js["forecast"]["forecast"]
    assert [(t["id"], t["basis"], t["usd"], t["usd_high"]) for t in fore["tasks"]] == [
        ("a1", "lane+model+effort", 2.0, 3.0),
        ("b1", "all history", None, None),  # the lanes in turn: a, b, then a again
        ("a2", "lane+model+effort", 5.0, 5.0),
    ]
    assert fore["total"] == {"usd": 7.0, "usd_high": 8.0, "dur_s": 720.0, "dur_high_s": 780.0}
    assert fore["no_history"] == ["b1"]


def test_forecast_falls_back_from_lane_to_model_and_effort_to_model(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", extra="Effort: 3")  # only lane x has effort 3
        + task("a2", "a", "write a2.txt x", extra="Effort: 4"),  # no effort 4 anywhere: model ma
    )
    write_history(b.root, HISTORY)
    js = json.loads(b.batch("2", "--dry-run", "--json").stdout)["forecast"]["forecast"]
    assert [(t["id"], t["basis"], t["usd"], t["usd_high"]) for t in js["tasks"]] == [
        ("a1", "model+effort", 9.0, 9.0),
        ("a2", "model", 3.0, 9.0),  # every task of model ma: 1, 2, 3, 5, 9
    ]


def test_a_logged_model_id_matches_the_short_name_a_task_gives(wf: WfRunner) -> None:
    """The cost log keeps the transcript's model (claude-sonnet-4-5); TASKS.md says sonnet."""
    (wf.root / "wf.toml").write_text('[lanes.sonnet]\nmodel = "sonnet"\n')
    (wf.root / "TASKS.md").write_text("# Tasks\n\n## s1: One\nModel: sonnet\nDone: true\nEffort: 1\n")
    write_history(wf.root, [cost_line("h1", "sonnet", "claude-sonnet-4-5-20250929", "1", 0.5)])
    js = json.loads(wf.ok("orch", "run", "sonnet", "--dry-run", "--json"))
    assert [(t["id"], t["basis"], t["usd"]) for t in js["forecast"]["tasks"]] == [
        ("s1", "lane+model+effort", 0.5)
    ]
    text = wf.ok("orch", "run", "sonnet", "--dry-run")
    assert "  s1 (sonnet, sonnet, effort 1): $0.50 (high $0.50)" in text
    assert not (wf.root / ".wf" / "orch" / "sonnet.json").exists()  # nothing was picked


def test_a_task_cost_is_the_sum_of_its_lines_and_an_unknown_cost_is_left_out(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text(lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a", extra="Effort: 1"))
    write_history(
        wf.root,
        [
            cost_line("h1", "a", "ma", "1", 1.0),
            cost_line("h1", "a", "ma", "1", 1.0),  # its recovery: the task cost $2
            cost_line("h2", "a", "ma", "1", 4.0),
            cost_line("h3", "a", "ma", "1", 0).replace("usd=0 ", "usd=nan "),  # unknown: never $0
        ],
    )
    js = json.loads(wf.ok("orch", "run", "a", "--dry-run", "--json"))
    [t] = js["forecast"]["tasks"]
    assert (t["history"], t["usd"], t["usd_high"]) == (2, 3.0, 4.0)


# ------------------------------------------------------------------ the goal, on a replayed history


def _night(rng: random.Random, n: int, night: int) -> list[tuple[str, str, str, float]]:
    """A synthetic but realistic night: tasks on three lanes, each lane's cost per effort
    a log-normal spread (sigma 0.35) around its own level."""
    level = {("haiku", "1"): 0.15, ("sonnet", "1"): 0.6, ("sonnet", "2"): 1.4, ("opus", "3"): 4.0}
    keys = list(level)
    out = []
    for i in range(n):
        lane, effort = keys[rng.randrange(len(keys))]
        out.append((f"n{night}t{i}", lane, effort, level[(lane, effort)] * rng.lognormvariate(0, 0.35)))
    return out


def replay(nights: int = 30, per_night: int = 8, seed: int = 25) -> list[float]:
    """For each night K+1 after the first 5: the forecast from nights 1..K (the sum of its
    tasks' medians) against what night K+1 cost; the relative errors."""
    rng = random.Random(seed)
    all_nights = [_night(rng, per_night, k) for k in range(nights)]
    errors = []
    for k in range(5, nights):
        hist = fc.samples(
            {"id": t, "lane": lane, "model": lane, "effort": e, "usd": f"{usd:.4f}", "dur_s": "60"}
            for night in all_nights[:k]
            for t, lane, e, usd in night
        )
        wants = [fc.Want(t, lane, lane, e) for t, lane, e, _ in all_nights[k]]
        forecast = fc.forecast(wants, hist).usd
        actual = sum(usd for *_, usd in all_nights[k])
        errors.append(abs(forecast - actual) / actual)
    return errors


def test_replayed_history_forecasts_a_night_within_30_percent() -> None:
    """The figures in docs/cost.md: on 100 replayed nights of 8 tasks (4 seeds x 25), 88
    forecasts were within 30% of the night's actual cost (the goal), median error 12.6%;
    the worst night was off by 50%. One median for every task (no lane, model or effort)
    gets 35 of 100 nights within 30%, a forecast by lane that ignores effort 82: this test
    goes red for both."""
    errors = [e for seed in range(1, 5) for e in replay(per_night=8, seed=seed)]
    within = sum(1 for e in errors if e <= 0.30)
    assert within >= 85, sorted(errors)
    assert statistics.median(errors) < 0.15


def test_orch_run_json_without_dry_run_is_a_usage_error(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text(lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a"))
    r = wf("orch", "run", "a", "--json")
    assert r.code == 2 and "--json goes with --dry-run" in r.err
    assert not (wf.root / ".wf" / "orch" / "a.json").exists()  # nothing ran


def test_a_cost_log_that_cannot_be_read_is_said_and_refuses_only_a_budget(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text(lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a", extra="Effort: 1"))
    (wf.root / "out" / "wf-cost.log").mkdir(parents=True)  # a folder, not a log
    r = wf("batch", "1", "--dry-run")
    assert r.code == 0, r.err
    assert "  the history is left out: " in r.out and "wf-cost.log" in r.out
    assert "a1 (a, ma, effort 1): no history" in r.out
    r = wf("batch", "1", "--dry-run", "--budget", "5")
    assert r.code == 1 and "wf-cost.log" in r.err and "Traceback" not in r.err
