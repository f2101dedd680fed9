"""A plan's usage limit parks the lane; an overloaded API gets a backoff and a retry.

The real claude (subscription mode: ``CLAUDE_CODE_OAUTH_TOKEN``) runs the lane's worker
under ``wf orch run`` against the scripted model API of tests/model_api.py, which
answers its first request with the usage-limit 429 a subscription gets. Marked ``real``:
skipped without WF_REAL_TOOLS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.model_api import (
    OVERLOADED,
    SERVER_ERROR,
    Fault,
    ModelApi,
    Reply,
    Request,
    Step,
    Text,
    ToolUse,
    usage_headers,
    usage_limit,
)

REAL_BIN = os.environ.get("WF_REAL_TOOLS", "")
ROOT = Path(__file__).resolve().parent.parent.parent
needs_real = pytest.mark.skipif(not REAL_BIN, reason="WF_REAL_TOOLS is not set (.ci/run sets it)")
REPORT = "RESULT: done\nCOMMIT: -\nFOLLOWUPS: -\nNOTE: wrote {tid}.txt"


def setup(wf: WfRunner, toml: str, *tids: str) -> None:
    tasks = "".join(f"\n## {t}: Task {t}\nModel: sonnet\nLane: {t[0]}\nDone: test -f {t}.txt\n" for t in tids)
    (wf.root / "wf.toml").write_text(toml)
    (wf.root / "TASKS.md").write_text("# Tasks\n" + tasks)
    git(wf.root, "add", "-A")
    git(wf.root, "commit", "-qm", "setup")


def claude_lane(name: str = "c") -> str:
    return f'[lanes.{name}]\nmodel = "sonnet"\nadapter = "claude"\n'


class Worker:
    """The model's side of a lane worker: the first request of a run in ``faults`` gets
    that fault (``only``: only a run of that task); otherwise a Bash call that writes and
    commits ``<task>.txt``, then the four report lines (``slow``: the report of that task
    comes that many seconds late)."""

    def __init__(
        self, faults: list[Step], *, only: str | None = None, slow: dict[str, float] | None = None
    ) -> None:
        self.faults = faults
        self.only = only
        self.slow = slow or {}
        self.seen: list[Request] = []

    def __call__(self, request: Request) -> Step:
        self.seen.append(request)
        said = " ".join(str(b.get("text")) for b in request.blocks("text"))
        tid = next((t for t in ("c1", "d1", "d2", "c2") if f"Task: {t} " in said), "?")
        if tid == "?":
            return Text(f"unknown task in: {said[:3000]}")
        first = request.step == 0 and not request.blocks("tool_use")
        if first and self.faults and self.only in (None, tid):
            return self.faults.pop(0)
        if request.step == 0:
            cmd = f"echo hi > {tid}.txt && git add {tid}.txt && git commit -qm {tid}"
            return ToolUse("Bash", {"command": cmd, "description": "write and commit"})
        time.sleep(self.slow.get(tid, 0))
        return Text(REPORT.format(tid=tid))


def real_env(api: ModelApi) -> dict[str, str]:
    """wf with the real tools first on PATH, claude in subscription mode against the
    scripted API, and nothing leaving this machine."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), REAL_BIN, os.environ["PATH"]]),
        "PYTHONPATH": str(ROOT),
        "WF_RESULT_GRACE": "0.5",
        "WF_PARK_MIN_S": "1",  # the margin after a reset: a second, not a minute
        "ANTHROPIC_BASE_URL": api.url,
        "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-scripted",  # a subscription
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        **api.env(),
    }
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(var, None)
    return env


def wf_real(
    wf: WfRunner, api: ModelApi, *args: str, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", *args], cwd=wf.root, capture_output=True, text=True,
        env=real_env(api), timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def orch_run(
    wf: WfRunner, api: ModelApi, *args: str, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    return wf_real(wf, api, "orch", "run", *args, timeout=timeout)


def wait_for(what: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def units(wf: WfRunner) -> list[dict[str, Any]]:
    """Every unit the loop ran, oldest first."""
    found = [json.loads(p.read_text()) for p in (wf.root / ".wf").glob("runs/*/*/status.json")]
    return sorted(found, key=lambda s: str(s.get("started")))


def outcomes(wf: WfRunner) -> list[tuple[str, str]]:
    """(task, outcome) of every post in the orch log."""
    log = wf.root / "out" / "wf-orch.log"
    if not log.exists():
        return []
    rows = [dict(p.split("=", 1) for p in ln.split() if "=" in p) for ln in log.read_text().splitlines()]
    return [(r["id"], r["outcome"]) for r in rows]


def show(wf: WfRunner, tid: str) -> dict[str, Any]:
    out = json.loads(wf.ok("show", tid, "--json"))
    assert isinstance(out, dict)
    return out


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_five_hour_limit_parks_the_lane_then_the_same_run_finishes_the_task(wf: WfRunner) -> None:
    setup(wf, claude_lane(), "c1")
    reset = int(time.time()) + 10
    worker = Worker([usage_limit(reset, window="five_hour")])
    record = wf.root / ".wf" / "orch" / "c.json"
    with ModelApi(worker) as api:
        loop = subprocess.Popen(
            [sys.executable, "-m", "wf", "orch", "run", "c"], cwd=wf.root, env=real_env(api), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(lambda: record.exists() and "parked_until" in record.read_text() and
                     json.loads(record.read_text())["parked_until"] is not None)  # fmt: skip
            said = {
                "lanes": wf.ok("lanes"),
                "orch status": wf.ok("orch", "status"),
                "lanes --json": json.loads(wf.ok("lanes", "--json"))[0]["parked"],
            }
            out, _ = loop.communicate(timeout=150)
        finally:
            loop.kill()
    assert api.outside == []
    assert loop.returncode == 0, out
    clock = time.strftime("%H:%M", time.localtime(reset + 1))
    for where, text in said.items():
        assert f"parked until {clock} (five_hour)" in text, (where, text)
    assert f"park lane c: parked until {clock} (five_hour)" in out, out
    ran = units(wf)
    assert [u["failure"] for u in ran] == ["usage_limit", None], ran
    limit = ran[0]["limit"]
    assert (limit["window"], limit["resets_at"]) == ("five_hour", reset), limit
    # the utilization comes from claude's rate_limit_event, which the real claude, on a
    # loaded machine, does not always stream before its error: when it is known, it is 1
    assert limit["utilization"] in (1, None), limit
    assert ran[1]["started"] >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(reset)), "ran before the reset"
    assert ran[1]["session_id"] == ran[0]["session_id"]  # the same session, resumed
    assert len(api.requests) == 3  # the rejected one, then the Bash call and the report
    assert show(wf, "c1")["archived"] is True
    assert outcomes(wf) == [("c1", "done")]  # one post: no handback, no crash, no release
    assert "handback" not in (wf.root / "DONE.md").read_text()
    assert json.loads(record.read_text()) if record.exists() else True


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_parked_claude_lane_lets_another_tools_lane_work(wf: WfRunner) -> None:
    """While the claude lane waits out its limit, a lane on another tool finishes its task."""
    cmd = json.dumps([sys.executable, "-m", "wf.scripted"])
    toml = claude_lane() + f'[lanes.s]\nmodel = "ms"\nadapter = "cmd"\ncmd = {cmd}\n'
    setup(wf, toml, "c1")
    with open(wf.root / "TASKS.md", "a") as f:
        f.write("\n## s1: Task s1\nModel: ms\nDone: true\n\nscript: write s1.txt hello\nscript: linger 5\n")
    git(wf.root, "commit", "-qam", "s1")
    reset = int(time.time()) + 12  # the s worker stays 5 s after its report: it ends while c waits
    with ModelApi(Worker([usage_limit(reset)])) as api:
        r = orch_run(wf, api, "c", "s")
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    parked = next(i for i, ln in enumerate(lines) if "park lane c: parked until" in ln)
    s_done = next(i for i, ln in enumerate(lines) if "s: s1: done" in ln)
    c_again = next(i for i, ln in enumerate(lines) if "start c1" in ln and "again after five_hour" in ln)
    assert parked < s_done < c_again, r.stdout
    assert sorted(outcomes(wf)) == [("c1", "done"), ("s1", "done")]


@pytest.mark.real
@needs_real
@pytest.mark.timeout(240)
def test_a_limit_that_resets_after_for_releases_the_task_as_it_was(wf: WfRunner) -> None:
    setup(wf, claude_lane(), "c1")
    before = (wf.root / "TASKS.md").read_bytes()
    with ModelApi(Worker([usage_limit(int(time.time()) + 3600, window="seven_day")])) as api:
        r = orch_run(wf, api, "c", "--for", "5m")
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "stop lane c: claude usage_limit: it would wait until" in r.stdout
        and "(seven_day), past --for" in r.stdout
    )
    assert (wf.root / "TASKS.md").read_bytes() == before  # released as it was: no handback, no charge
    assert len(units(wf)) == 1 and len(api.requests) == 1
    assert not (wf.root / ".wf" / "orch" / "c.json").exists()


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_an_overloaded_api_gets_a_backoff_and_a_retry_not_a_failure(wf: WfRunner) -> None:
    """claude retries a 529 once (CLAUDE_CODE_MAX_RETRIES=1) and fails overloaded; the
    loop backs off and runs the task again, which then finishes."""
    setup(wf, claude_lane(), "c1")
    with ModelApi(Worker([OVERLOADED, OVERLOADED])) as api:
        r = orch_run(wf, api, "c")
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert "c: claude overloaded (" in r.stdout and "backoff 1 of 3" in r.stdout, r.stdout
    assert "parked" not in r.stdout
    assert [u["failure"] for u in units(wf)] == ["overloaded", None]
    assert outcomes(wf) == [("c1", "done")]


@pytest.mark.real
@needs_real
@pytest.mark.timeout(240)
def test_an_api_that_stays_overloaded_stops_the_lane_as_its_tools_failure(wf: WfRunner) -> None:
    setup(wf, claude_lane(), "c1")
    before = (wf.root / "TASKS.md").read_bytes()
    with ModelApi([OVERLOADED]) as api:
        r = orch_run(wf, api, "c")
    assert api.outside == []
    assert r.returncode == 1, r.stdout + r.stderr
    assert [u["failure"] for u in units(wf)] == ["overloaded"] * 4
    assert "stop lane c: claude could not run (overloaded)" in r.stdout
    assert (wf.root / "TASKS.md").read_bytes() == before


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_batch_summary_says_the_lane_was_parked(wf: WfRunner) -> None:
    setup(wf, claude_lane(), "c1")
    reset = int(time.time()) + 8
    with ModelApi(Worker([usage_limit(reset)])) as api:
        r = wf_real(wf, api, "batch", "1", "--lanes", "c")
        assert r.returncode == 0, r.stdout + r.stderr
        st: dict[str, Any] = {}

        def ended() -> bool:
            st.update(json.loads(wf_real(wf, api, "batch", "--status", "--json").stdout))
            return st["job"] is not None and not st["alive"]

        wait_for(ended, timeout=180)
    assert api.outside == []
    lines = Path(st["summary"]).read_text().splitlines()
    clock = time.strftime("%H:%M", time.localtime(reset + 1))
    assert any(f" park lane c: parked until {clock} (five_hour): c1 stays claimed" in x for x in lines), lines
    assert [x.split()[2:5] for x in lines if " commit=" in x] == [["c", "c1", "done"]], lines
    assert "done: 1, not done: 0" in lines


# ------------------------------------------------------------------ the limit a unit records


@pytest.mark.real
@needs_real
@pytest.mark.timeout(120)
@pytest.mark.parametrize("status", ["allowed_warning", "rejected", "warned-then-500"])
def test_dispatch_records_a_rejection_and_never_a_warning(wf: WfRunner, status: str) -> None:
    """A subscription's rejected seven_day window is a usage_limit with its window, reset
    and utilization in status.json; allowed_warning (past a threshold) is a normal answer,
    and a run that met a warning and then a 500 failed for the 500, not for a limit."""
    reset = int(time.time()) + 3600
    warn = usage_headers("allowed_warning", reset, used=0.92, threshold=0.9)
    choices: dict[str, list[Step]] = {
        "rejected": [usage_limit(reset, window="seven_day")],
        "allowed_warning": [Reply((Text("fine"),), headers=warn)],
        "warned-then-500": [Reply((ToolUse("Bash", {"command": "echo hi"}),), headers=warn), SERVER_ERROR],
    }
    steps = choices[status]
    with ModelApi(steps) as api:
        r = wf_real(
            wf, api, "dispatch", "r1", "u1", "--adapter", "claude", "--model", "sonnet", "--prompt", "hi"
        )
    assert api.outside == []
    st = json.loads((wf.root / ".wf" / "runs" / "r1" / "u1" / "status.json").read_text())
    if status == "allowed_warning":
        assert (r.returncode, st["state"], st["failure"], st["limit"]) == (0, "done", None, None), r.stdout
    elif status == "warned-then-500":
        assert len(api.requests) == 3  # the answer, then the 500 and its one retry
        assert (r.returncode, st["failure"], st["limit"]) == (4, "network", None), r.stdout
    else:
        assert r.returncode == 4, r.stdout + r.stderr
        assert r.stdout.startswith("u1: failed usage_limit: You've hit your weekly")
        assert st["limit"] == {"window": "seven_day", "resets_at": reset, "utilization": 1}


@pytest.mark.real
@needs_real
@pytest.mark.timeout(120)
def test_codex_usage_limit_reset_is_read_from_its_try_again_at(wf: WfRunner, tmp_path: Path) -> None:
    """codex says only "... try again at 9:46 AM.": the reset is that minute, today or tomorrow."""
    Path(os.environ["CODEX_HOME"]).mkdir(parents=True, exist_ok=True)
    reset = int(time.time()) + 3 * 3600
    fault = Fault(429, "usage_limit_reached", "limit", extra={"plan_type": "plus", "resets_at": reset})
    with ModelApi([fault]) as api:
        provider = (
            f'model_providers.scripted={{name="scripted", base_url="{api.url}/v1", env_key="OPENAI_API_KEY", '
            'wire_api="responses", request_max_retries=0, stream_max_retries=0}'
        )
        unit = {"id": "x", "adapter": "codex", "model": "gpt-5.5", "prompt": "hi",
                "extra_args": ["-c", 'model_provider="scripted"', "-c", provider, "-c", "check_for_update_on_startup=false",
                               "-c", "analytics.enabled=false", "-c", "feedback.enabled=false"]}  # fmt: skip
        manifest = tmp_path / "m.json"
        manifest.write_text(json.dumps({"units": [unit]}))
        env = {**real_env(api), "OPENAI_API_KEY": "x"}
        r = wfproc.run([sys.executable, "-m", "wf", "run", str(manifest), "--run", "cx"], cwd=wf.root, env=env,
                       capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)  # fmt: skip
    # codex always tries these (tests/README-model-api.md); the proxy refused each: nothing left
    assert set(api.outside) <= {
        "github.com:443",
        "api.github.com:443",
        "chatgpt.com:443",
        "ab.chatgpt.com:443",
    }
    assert r.returncode == 4, r.stdout + r.stderr
    st = json.loads((wf.root / ".wf" / "runs" / "cx" / "x" / "status.json").read_text())
    assert st["failure"] == "usage_limit" and "try again at" in st["reason"], st
    assert reset - 60 < st["limit"]["resets_at"] <= reset, (st["limit"], reset)


# ------------------------------------------------------------------ the words forms (fallback)

NOW = 1_790_000_000.0  # 2026-09-21T14:13:20Z


@pytest.mark.parametrize(
    ("words", "window", "hour_minute_tz"),
    [
        ("You've hit your session limit · resets 12:50am (America/Los_Angeles)", "five_hour",
         (0, 50, "America/Los_Angeles")),
        ("5-hour limit reached · resets 3pm", "five_hour", (15, 0, None)),
        ("You've hit your 5-hour limit · resets 9:54am (UTC)", "five_hour", (9, 54, "UTC")),
        ("You've hit your weekly limit · resets Sep 28 at 3am", "seven_day", (3, 0, None)),
        ("You’ve hit your usage limit. Upgrade to Pro, or try again at 3:28 PM.", None, (15, 28, None)),
    ],
)  # fmt: skip
def test_the_words_forms_give_the_window_and_the_next_reset(
    words: str, window: str | None, hour_minute_tz: tuple[int, int, str | None]
) -> None:
    import datetime as dt
    from zoneinfo import ZoneInfo

    from wf.adapters.base import Failure, classify_words
    from wf.adapters.limits import from_words

    assert classify_words(words) is Failure.usage_limit
    limit = from_words(words, now=NOW)
    assert limit is not None and limit.window == window and limit.resets_at is not None
    hour, minute, tz = hour_minute_tz
    when = dt.datetime.fromtimestamp(limit.resets_at, ZoneInfo(tz) if tz else None)
    assert (when.hour, when.minute) == (hour, minute)
    assert NOW < limit.resets_at <= NOW + 8 * 86400


def test_the_older_epoch_form_and_a_limit_without_a_reset() -> None:
    from wf.adapters.limits import Limit, from_words

    assert from_words("Claude AI usage limit reached|1790003600", now=NOW) == Limit(None, 1790003600.0)
    assert from_words("You've hit your weekly limit", now=NOW) == Limit("seven_day", None)
    assert from_words("Credit balance is too low", now=NOW) is None


@pytest.mark.real
@needs_real
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_limit_is_the_accounts_so_the_tools_other_lane_waits_too(wf: WfRunner) -> None:
    """Lane c meets the limit; lane d's running worker finishes (its report comes late,
    after c parked), but d's next task waits for the reset instead of meeting it too."""
    setup(wf, claude_lane("c") + claude_lane("d"), "c1", "d1", "d2")
    reset = int(time.time()) + 14
    with ModelApi(Worker([usage_limit(reset)], only="c1", slow={"d1": 5})) as api:
        r = orch_run(wf, api, "c", "d")
    assert api.outside == []
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()

    def at(words: str) -> int:
        return next(i for i, ln in enumerate(lines) if words in ln)

    assert at("park lane c: parked until") < at("d: d1: done") < at("park lane d: parked until"), r.stdout
    assert "claude's usage limit" in lines[at("park lane d:")]
    assert at("park lane d:") < at("start d2"), r.stdout
    d2 = next(u for u in units(wf) if u["task"] == "d2")
    assert d2["started"] >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(reset)), "d2 ran before the reset"
    assert sorted(outcomes(wf)) == [("c1", "done"), ("d1", "done"), ("d2", "done")]
    assert len(units(wf)) == 4


@pytest.mark.real
@needs_real
@pytest.mark.timeout(240)
def test_ctrl_c_while_parked_leaves_the_claim_for_the_next_run(wf: WfRunner) -> None:
    import signal

    setup(wf, claude_lane(), "c1")
    record = wf.root / ".wf" / "orch" / "c.json"
    with ModelApi(Worker([usage_limit(int(time.time()) + 3600)])) as api:
        loop = subprocess.Popen(
            [sys.executable, "-m", "wf", "orch", "run", "c"], cwd=wf.root, env=real_env(api), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(
                lambda: record.exists() and json.loads(record.read_text()).get("parked_until") is not None
            )
            loop.send_signal(signal.SIGINT)
            out, _ = loop.communicate(timeout=60)
        finally:
            loop.kill()
    assert loop.returncode == 130, out
    assert "c: c1 was parked; its record stays for a later recovery" in out
    rec = json.loads(record.read_text())
    assert (rec["id"], rec["parked_until"], rec["pid"]) == ("c1", None, None)  # no loop waits for it now
    assert "parked" not in wf.ok("lanes")
    assert show(wf, "c1")["status"].startswith("in progress")
    assert outcomes(wf) == []  # nothing charged


def test_how_long_a_lane_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    from wf.adapters import Failure
    from wf.adapters.limits import Limit
    from wf.orch import park

    monkeypatch.delenv("WF_PARK_MIN_S", raising=False)
    limit = Failure.usage_limit
    assert park.until(limit, Limit("five_hour", NOW + 600), 0, NOW) == NOW + 660  # the reset plus a minute
    assert park.until(limit, Limit("five_hour", NOW - 5), 0, NOW) == NOW + 60  # a reset gone by
    assert park.until(limit, Limit("five_hour", NOW - 5), 2, NOW) == NOW + 240  # ... backs off
    assert park.until(limit, Limit("seven_day", NOW + 5 * 86400), 0, NOW) == NOW + 86400  # at most 24 h
    assert [park.until(limit, Limit(), n, NOW) - NOW for n in range(7)] == [
        60,
        120,
        240,
        480,
        960,
        1800,
        1800,
    ]
    assert [park.until(Failure.overloaded, None, n, NOW) - NOW for n in range(3)] == [15, 30, 60]
    monkeypatch.setenv("WF_PARK_MIN_S", "2")
    assert park.until(limit, Limit("five_hour", NOW + 10), 0, NOW) == NOW + 12


def test_a_limit_said_only_in_words_still_gives_its_reset(wf: WfRunner, tmp_path: Path) -> None:
    """An older claude's message without a rate_limit_event (the fake's recorded shape with
    "You've hit your session limit · resets 3pm (UTC)"): the window and reset come from the words."""
    import datetime as dt

    from tests.workers.test_workers import Workers

    w = Workers(wf.root, tmp_path)
    r = w.run(
        "dispatch", "r1", "u1", "--adapter", "claude", "--model", "sonnet", "--prompt", "APIERROR plan_limit"
    )
    assert r.returncode == 4, r.stdout + r.stderr
    st = w.status("r1", "u1")
    assert st["failure"] == "usage_limit" and st["limit"]["window"] == "five_hour"
    when = dt.datetime.fromtimestamp(st["limit"]["resets_at"], dt.UTC)
    assert (when.hour, when.minute) == (15, 0) and 0 < st["limit"]["resets_at"] - time.time() <= 86400
