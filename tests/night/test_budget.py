"""A night's budget (issue 25, item 2): ``--budget`` (or wf.toml's ``budget``) on ``wf
batch``, ``wf pilot`` and ``wf orch run``: no task starts when what the run spent plus
its forecast would pass it, and the stop is a typed reason (``Stop.BUDGET``) that the
summary and the stop line show; ``weekly_reserve`` keeps a share of the plan's weekly
window. Workers are the scripted worker in ``cmd`` lanes; a task's Done command writes
its cost line, as a post of a real worker would."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.night.test_batch import Batch, b  # noqa: F401  (the fixture)
from tests.night.test_forecast import cost_line, write_history
from tests.orch.test_orch import Orch, lanes_toml, task
from wf.cost import costlog

HIST = [cost_line(f"h{i}", "a", "ma", "1", usd) for i, usd in enumerate((1.5, 2.0, 2.5), 1)]  # median $2


def costs(root: Path, tid: str, usd: float) -> str:
    """A Done command that writes the task's cost line once (its check may run twice)."""
    line = cost_line(tid, "a", "ma", "1", usd)
    log = root / "out" / "wf-cost.log"
    code = (
        f"p={str(log)!r}; t=open(p).read(); {f'id={tid} '!r} in t or open(p, 'a').write({line + chr(10)!r})"
    )
    return f"`{sys.executable} -c {json.dumps(code)}`"


def ready(o: Orch, n: int = 3, *, toml: str = "", usd: float = 2.5) -> None:
    o.setup(
        lanes_toml("a") + toml,
        "".join(
            task(f"a{i}", "a", f"write a{i}.txt x", done=costs(o.root, f"a{i}", usd), extra="Effort: 1")
            for i in range(1, n + 1)
        ),
    )
    write_history(o.root, HIST)


# ------------------------------------------------------------------ the done-when test


@pytest.mark.timeout(180)
def test_a_batch_under_a_budget_below_the_second_task_runs_one_and_says_why(b: Batch) -> None:
    ready(b)
    dry = b.batch("3", "--dry-run", "--budget", "3.00").stdout
    assert "budget: $3.00: 1 of 3 task(s) fit (a1)" in dry
    assert "--budget 3.0" in dry  # its loop keeps it
    r = b.batch("3", "--budget", "3.00")
    assert r.returncode == 0, r.stderr
    st = b.wait_ended()
    assert b.archived() == ["a1"]
    assert b.status("a2") == "pending" and b.status("a3") == "pending"  # a2 never claimed
    assert st["reason"] == "budget" and st["exit"] == 0  # a normal stop
    lines = b.summary(st)
    assert "- forecast: $6.00 (high $7.50) for 3 task(s) with history" in lines
    assert "- budget: $3.00" in lines
    [row] = [x for x in lines if " commit=" in x]
    assert row.split()[2:5] == ["a", "a1", "done"] and row.split()[6] == "$2.50"
    assert row.endswith(" (forecast $2.00)")
    assert any(
        x.endswith("stop lane a: budget $3.00: spent $2.50, next task a2 forecast $2.00") for x in lines
    )
    assert "forecast vs actual: forecast $2.00, actual $2.50 (+25%) for 1 task(s)" in lines
    assert lines[-1].startswith("ended: budget at ")
    events = [
        json.loads(x)
        for x in (b.root / ".wf" / "batch" / f"{st['stamp']}.events.jsonl").read_text().splitlines()
    ]
    assert [(e["lane"], e["stop"], e["task"]) for e in events] == [("a", "BUDGET", None)]


def test_the_loop_counts_a_running_task_at_its_forecast_never_zero(wf: WfRunner) -> None:
    """A task that left no cost line (a tool whose cost wf cannot read) counts its figure."""
    o = Orch(wf)
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", extra="Effort: 1")
        + task("a2", "a", "write a2.txt x", extra="Effort: 1"),
    )
    write_history(o.root, HIST)
    r = o.proc("orch", "run", "a", "--budget", "3.99")
    assert r.returncode == 0, r.stderr
    assert "stop lane a: budget $3.99: spent $2.00, next task a2 forecast $2.00" in r.stdout
    assert o.archived() == ["a1"]


def test_a_budget_below_the_first_task_starts_nothing(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 1)
    r = o.proc("orch", "run", "a", "--budget", "1.99")
    assert r.returncode == 0, r.stderr
    assert "stop lane a: budget $1.99: spent $0.00, next task a1 forecast $2.00" in r.stdout
    assert o.status("a1") == "pending" and o.archived() == []
    assert not (o.root / ".worktrees" / "a").exists()  # refused before the claim and the tree


def test_a_task_without_history_counts_the_high_figure_of_all_history(wf: WfRunner) -> None:
    o = Orch(wf)
    o.setup(lanes_toml("a", "z"), task("z1", "z", "write z1.txt x", extra="Effort: 1"))
    write_history(o.root, HIST)  # model ma only: z1 (model mz) has none of its own
    r = o.proc("orch", "run", "z", "--budget", "2.49")
    assert "stop lane z: budget $2.49: spent $0.00, next task z1 no history, counted at the high figure " \
        "of all history $2.50" in r.stdout  # fmt: skip
    assert o.status("z1") == "pending"
    r = o.proc("orch", "run", "z", "--budget", "2.50")
    assert r.returncode == 0 and o.archived() == ["z1"]


def test_with_no_history_at_all_a_budget_starts_nothing(wf: WfRunner) -> None:
    o = Orch(wf)
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    r = o.proc("orch", "run", "a", "--budget", "100")
    assert r.returncode == 0, r.stderr
    assert "next task a1 has no forecast (no cost history at all)" in r.stdout
    assert o.status("a1") == "pending"
    assert o.proc("orch", "run", "a").returncode == 0 and o.archived() == ["a1"]  # without a budget it runs


def test_wf_toml_budget_is_the_default_and_the_flag_wins(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 2, toml="")
    (o.root / "wf.toml").write_text("budget = 1.0\n" + lanes_toml("a"))
    dry = o.proc("batch", "2", "--dry-run")
    assert "budget: $1.00: 0 of 2 task(s) fit (none)" in dry.stdout and "--budget 1.0" in dry.stdout
    assert (
        "budget: $9.00: 2 of 2 task(s) fit (a1, a2)"
        in o.proc("batch", "2", "--dry-run", "--budget", "9").stdout
    )
    r = o.proc("orch", "run", "a")
    assert "stop lane a: budget $1.00: spent $0.00, next task a1 forecast $2.00" in r.stdout


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        (
            "budget = -5\n",
            "budget must be dollars above 0 and at most 1e+06 (leave it out for no budget), not -5",
        ),
        (
            "budget = 0\n",
            "budget must be dollars above 0 and at most 1e+06 (leave it out for no budget), not 0",
        ),
        ('budget = "5"\n', "budget"),
        (
            "weekly_reserve = 1\n",
            "weekly_reserve must be a share of the week, from 0 to below 1 (0.2: 20%), not 1",
        ),
        (
            "weekly_reserve = 1.5\n",
            "weekly_reserve must be a share of the week, from 0 to below 1 (0.2: 20%), not 1.5",
        ),
        (
            "weekly_reserve = -0.1\n",
            "weekly_reserve must be a share of the week, from 0 to below 1 (0.2: 20%), not -0.1",
        ),
    ],
)
def test_a_bad_budget_in_wf_toml_is_a_clear_error(wf: WfRunner, toml: str, words: str) -> None:
    (wf.root / "wf.toml").write_text(toml + lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a"))
    r = wf("batch", "1", "--dry-run")
    assert r.code == 1 and words in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "nan", "inf", "1e9"])
def test_a_bad_budget_flag_is_a_usage_error(wf: WfRunner, bad: str) -> None:
    (wf.root / "wf.toml").write_text(lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a"))
    for argv in (("batch", "1", "--dry-run"), ("orch", "run", "a", "--dry-run"), ("pilot",)):
        r = wf(*argv, "--budget", bad)
        assert r.code == 2 and "--budget" in r.err and "expected dollars" in r.err, (argv, r.err)


def test_budget_is_refused_with_agent_and_prep(wf: WfRunner) -> None:
    (wf.root / "wf.toml").write_text(lanes_toml("a"))
    (wf.root / "TASKS.md").write_text("# Tasks\n" + task("a1", "a"))
    r = wf("batch", "1", "--agent", "--budget", "5", "--dry-run")
    assert r.code == 2 and "--budget is kept by wf's own loop" in r.err


# ------------------------------------------------------------------ usage windows and the weekly reserve


def stream(root: Path, week: float, *, resets: float | None = None, age_s: float = 0) -> None:
    """A worker's stream with a rate_limit_event (as claude prints it on a subscription),
    written ``age_s`` ago; ``resets``: the seven_day window's resetsAt (epoch seconds)."""
    folder = root / ".wf" / "runs" / "orch-1" / "a-x-1"
    folder.mkdir(parents=True)
    seven: dict[str, float] = {"utilization": week} | ({"resetsAt": resets} if resets else {})
    info = {
        "status": "allowed",
        "rateLimitType": "five_hour",
        "utilization": 0.3,
        "unifiedWindows": {"five_hour": {"utilization": 0.3}, "seven_day": seven},
    }
    log = folder / "worker.log"
    log.write_text(
        json.dumps({"type": "system", "subtype": "init"}) + "\n"
        + json.dumps({"type": "rate_limit_event", "rate_limit_info": info}) + "\n"
    )  # fmt: skip
    if age_s:
        when = time.time() - age_s
        os.utime(log, (when, when))


def test_usage_windows_are_shown_and_the_weekly_reserve_starts_nothing_past_it(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 1)
    (o.root / "wf.toml").write_text("weekly_reserve = 0.2\n" + lanes_toml("a"))
    stream(o.root, 0.85)
    dry = o.proc("batch", "1", "--dry-run").stdout
    assert "usage windows: five_hour 30%, seven_day 85% (the newest rate_limit_event, " in dry
    assert "weekly reserve: 20% of seven_day: reached: no task starts" in dry
    js = json.loads(o.proc("orch", "run", "a", "--dry-run", "--json").stdout)
    assert js["usage_windows"] == {"five_hour": 0.3, "seven_day": 0.85} and js["weekly_reserve"] == 0.2
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stderr
    assert "stop lane a: weekly reserve 20%: seven_day is 85% used; a1 not started" in r.stdout
    assert o.status("a1") == "pending"


def test_a_weekly_window_within_the_reserve_lets_tasks_start(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 1)
    (o.root / "wf.toml").write_text("weekly_reserve = 0.2\n" + lanes_toml("a"))
    stream(o.root, 0.75)
    assert "weekly reserve: 20% of seven_day: kept" in o.proc("batch", "1", "--dry-run").stdout
    assert o.proc("orch", "run", "a").returncode == 0 and o.archived() == ["a1"]


# ------------------------------------------------------------------ the pilot


@pytest.mark.timeout(240)
def test_the_pilot_ends_when_a_batch_stopped_for_its_budget(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 3)
    r = o.proc("pilot", "--batch", "3", "--budget", "3.00", "--poll", "0.2", "--no-prep", timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stop lane a: budget $3.00: spent $2.50, next task a2 forecast $2.00" in r.stdout
    assert "pilot ended: budget" in r.stdout
    assert o.archived() == ["a1"]


@pytest.mark.timeout(240)
def test_the_pilot_starts_no_batch_once_its_budget_is_spent(wf: WfRunner) -> None:
    """a1 fits $2.00 (its forecast) but costs $2.50: the next batch would start with less
    than nothing; the pilot ends instead."""
    o = Orch(wf)
    ready(o, 2)
    r = o.proc("pilot", "--batch", "1", "--budget", "2.00", "--poll", "0.2", "--no-prep", timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "budget $2.00: nothing left to start a batch with" in r.stdout
    assert "pilot ended: budget" in r.stdout
    assert o.archived() == ["a1"] and o.status("a2") == "pending"


@pytest.mark.timeout(240)
def test_a_pilot_whose_batch_left_an_unknown_cost_starts_no_more(wf: WfRunner) -> None:
    """A cost line whose usd= is not a number: what is left of the budget is not known,
    and an unknown cost is never $0."""
    o = Orch(wf)
    ready(o, 2, usd=float("nan"))
    r = o.proc("pilot", "--batch", "1", "--budget", "50", "--poll", "0.2", "--no-prep", timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "budget $50.00: nothing left to start a batch with" in r.stdout
    assert o.archived() == ["a1"] and o.status("a2") == "pending"


def test_dry_run_says_which_tasks_fit_a_lane_stopping_alone(wf: WfRunner) -> None:
    """A task past the budget stops its own lane (a cheaper task after it waits too); a
    task on another lane still fits."""
    o = Orch(wf)
    o.setup(
        lanes_toml("a", "c"),
        task("a1", "a", extra="Effort: 1") + task("a2", "a", extra="Effort: 1") + task("a3", "a", extra="Effort: 9")
        + task("c1", "c", extra="Effort: 1") + task("c2", "c", extra="Effort: 1"),
    )  # fmt: skip
    write_history(o.root, [*HIST, cost_line("hc", "c", "mc", "1", 0.5), cost_line("h9", "a", "ma", "9", 0.1)])
    out = o.proc("batch", "5", "--dry-run", "--budget", "3.10").stdout
    assert "budget: $3.10: 3 of 5 task(s) fit (a1, c1, c2)" in out  # a2 would pass it: lane a stops


# ------------------------------------------------------------------ an unpriced cost is unknown (review 1.3)


def unpriced_line(tid: str, lane: str = "a", model: str = "ma") -> str:
    """A cost line whose model wf could not price: usd=0 counts it as $0, which is not a cost."""
    rec = {
        "ts": "2026-12-01T01:00:00Z", "project": "p", "id": tid, "agent": f"ag-{tid}", "kind": "main",
        "lane": lane, "model": model, "effort": "1", "done": 1, "turns": 5, "dur_s": 60,
        "usd": 0.0, "usd_rep": 0.0, "unpriced": model, "cost_source": "unpriced",
    }  # fmt: skip
    return costlog.format_line(rec)


def test_an_unpriced_cost_in_history_is_no_forecast_of_zero(wf: WfRunner) -> None:
    o = Orch(wf)
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", extra="Effort: 1"))
    write_history(o.root, [unpriced_line("old-3")])
    out = o.proc("batch", "1", "--dry-run", "--budget", "0.00001").stdout
    assert "no history: a1 (not in the total)" in out, out
    assert "budget: $0.00: 0 of 1 task(s) fit (none)" in out, out
    r = o.proc("orch", "run", "a", "--budget", "4")
    assert "next task a1 has no forecast (no cost history at all)" in r.stdout, r.stdout
    assert o.status("a1") == "pending"


def test_an_unpriced_cost_line_old_style_without_cost_source_is_unknown_too(wf: WfRunner) -> None:
    o = Orch(wf)
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", extra="Effort: 1"))
    write_history(o.root, [unpriced_line("old-3").replace(" cost_source=unpriced", "")])
    r = o.proc("orch", "run", "a", "--budget", "4")
    assert "next task a1 has no forecast (no cost history at all)" in r.stdout, r.stdout


def test_a_task_that_spent_an_unpriced_cost_stops_the_budget(wf: WfRunner) -> None:
    """a1's cost line is unpriced: what the run spent is not known, so a2 never starts."""
    o = Orch(wf)
    line = unpriced_line("a1")
    log = o.root / "out" / "wf-cost.log"
    code = f"p={str(log)!r}; t=open(p).read(); 'id=a1 ' in t or open(p, 'a').write({line + chr(10)!r})"
    done = f"`{sys.executable} -c {json.dumps(code)}`"
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", done=done, extra="Effort: 1")
        + task("a2", "a", "write a2.txt x", extra="Effort: 1"),
    )
    write_history(o.root, HIST)
    r = o.proc("orch", "run", "a", "--budget", "50")
    assert r.returncode == 0, r.stderr
    assert o.archived() == ["a1"] and o.status("a2") == "pending", r.stdout
    assert (
        "stop lane a: budget $50.00: spent unknown (a task's cost line has no price), a2 not started"
        in r.stdout
    )


# ------------------------------------------------------------------ an old rate_limit_event (review 1.4)


@pytest.mark.parametrize("resets", [True, False])
def test_a_weekly_window_that_has_reset_since_its_event_keeps_no_reserve(wf: WfRunner, resets: bool) -> None:
    """A 12-day-old stream at 95% of the week: its resetsAt is past (or, without one, the
    event is older than a week): the window is over, tasks start, and the age is shown."""
    o = Orch(wf)
    ready(o, 1)
    (o.root / "wf.toml").write_text("weekly_reserve = 0.2\n" + lanes_toml("a"))
    twelve_days = 12 * 86400
    stream(o.root, 0.95, resets=time.time() - 5 * 86400 if resets else None, age_s=twelve_days)
    dry = o.proc("batch", "1", "--dry-run").stdout
    assert "usage windows: unknown (the newest rate_limit_event, .wf/runs/orch-1/a-x-1/worker.log, 288h00m old)" \
        "; reset since: five_hour, seven_day" in dry, dry  # fmt: skip
    assert "weekly reserve: 20% of seven_day: unknown" in dry and "reached" not in dry
    js = json.loads(o.proc("orch", "run", "a", "--dry-run", "--json").stdout)
    assert js["usage_windows"] == {} and twelve_days <= js["usage_windows_age_s"] < twelve_days + 600
    r = o.proc("orch", "run", "a")
    assert r.returncode == 0, r.stderr
    assert o.archived() == ["a1"], r.stdout


def test_a_weekly_window_not_reset_yet_still_keeps_its_reserve_and_shows_its_age(wf: WfRunner) -> None:
    """Two days old, its resetsAt still ahead: the reserve holds."""
    o = Orch(wf)
    ready(o, 1)
    (o.root / "wf.toml").write_text("weekly_reserve = 0.2\n" + lanes_toml("a"))
    stream(o.root, 0.95, resets=time.time() + 86400, age_s=2 * 86400)
    dry = o.proc("batch", "1", "--dry-run").stdout
    assert "five_hour 30%" not in dry and "seven_day 95% (the newest rate_limit_event, " in dry, dry
    assert "48h00m old); reset since: five_hour" in dry
    assert "weekly reserve: 20% of seven_day: reached: no task starts" in dry
    r = o.proc("orch", "run", "a")
    assert "weekly reserve 20%: seven_day is 95% used; a1 not started" in r.stdout


# ------------------------------------------------------------------ a tiny budget, and one that is not kept (2.4, 1.9)


def test_a_tiny_budget_reaches_the_loop_exactly_and_it_accepts_it(wf: WfRunner) -> None:
    o = Orch(wf)
    ready(o, 1)
    dry = o.proc("batch", "3", "--dry-run", "--budget", "0.00001").stdout
    [line] = [x for x in dry.splitlines() if x.startswith("argv: ")]
    argv = line.split()
    given = argv[argv.index("--budget") + 1]
    assert float(given) == 0.00001, line
    r = o.proc("orch", "run", "a", "--dry-run", "--budget", given)
    assert r.returncode == 0, r.stderr
    assert "budget: $0.00: 0 of 1 task(s) fit (none)" in r.stdout


@pytest.mark.timeout(120)
def test_a_wf_toml_budget_is_said_not_kept_by_an_agent_batch(b: Batch, tmp_path: Path) -> None:
    b.setup("budget = 5\n" + lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claude").symlink_to(shutil.which("false") or "/bin/false")
    env = dict(b.env, PATH=f"{bindir}:{os.environ['PATH']}")
    dry = b.batch("1", "--agent", "--for", "10m", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "budget: not kept (--agent runs no wf loop)" in dry.stdout and "--budget" not in dry.stdout
    assert b.batch("1", "--agent", "--for", "10m", env=env).returncode == 0
    st = b.wait_ended()
    assert "- budget: not kept (--agent runs no wf loop)" in b.summary(st)


def test_a_wf_toml_budget_is_said_not_kept_by_a_prep_batch(wf: WfRunner) -> None:
    o = Orch(wf)
    o.setup("budget = 5\n" + lanes_toml("a"), "\n## p1: a task without its Done\n\nLane: a\n")
    dry = o.proc("batch", "1", "--prep", "--dry-run")
    assert "budget: not kept (--prep runs no wf loop)" in dry.stdout, dry.stdout + dry.stderr


@pytest.mark.timeout(240)
def test_a_pilot_whose_batch_left_an_unpriced_cost_starts_no_more(wf: WfRunner) -> None:
    """The pilot's purse: a cost line with unpriced= is not $0, so nothing is known to be left."""
    o = Orch(wf)
    line = unpriced_line("a1")
    log = o.root / "out" / "wf-cost.log"
    code = f"p={str(log)!r}; t=open(p).read(); 'id=a1 ' in t or open(p, 'a').write({line + chr(10)!r})"
    done = f"`{sys.executable} -c {json.dumps(code)}`"
    o.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", done=done, extra="Effort: 1")
        + task("a2", "a", "write a2.txt x", extra="Effort: 1"),
    )
    write_history(o.root, HIST)
    r = o.proc("pilot", "--batch", "1", "--budget", "50", "--poll", "0.2", "--no-prep", timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "budget $50.00: nothing left to start a batch with" in r.stdout, r.stdout
    assert o.archived() == ["a1"] and o.status("a2") == "pending"
