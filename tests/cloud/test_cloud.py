"""The cloud lane: wf cloud send / pull / ledger, wf orch pick|post cloud, the sidecar.

The real backend (wf.cloud.claude) runs against tests/fakes/cloud/claude, a fake that
replays the real binary's recorded messages (tests/cloud/test_cloud_fake.py checks it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git

ROOT = Path(__file__).resolve().parent.parent.parent
FAKES = ROOT / "tests" / "fakes" / "cloud"
GITHUB = "https://github.com/example/app.git"


def toml(budget: float = 5.0, reserve: float = 0.5, parallel: int = 2) -> str:
    cmd = json.dumps([sys.executable, "-m", "wf.scripted"])
    lanes = "".join(
        f'[lanes.{n}]\nmodel = "m{n}"\nadapter = "cmd"\ncmd = {cmd}\n' for n in ("sonnet", "opus")
    )
    return (
        f"cloud = true\ncloud_budget = {budget}\ncloud_reserve = {reserve}\n"
        f"cloud_max_parallel = {parallel}\n{lanes}"
    )


def task(tid: str, lane: str, *lines: str, extra: str = "") -> str:
    body = "".join(f"{x}\n" for x in lines)
    fields = f"Model: m{lane}\nDone: true\n" + (f"{extra}\n" if extra else "")
    return f"\n## {tid}: Task {tid}\n{fields}\n{body}"


class Cloud:
    def __init__(self, wf: WfRunner, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.wf = wf
        self.root = wf.root
        self.sessions = tmp / "cloud"
        monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("WF_FAKE_CLOUD", str(self.sessions))
        self.creds = Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".credentials.json"
        self.login()
        git(self.root, "remote", "add", "origin", GITHUB)

    def login(self) -> None:
        self.creds.parent.mkdir(parents=True, exist_ok=True)
        self.creds.write_text('{"claudeAiOauth": {"accessToken": "made-up"}}')

    def setup(self, tasks: str, **kw: float) -> None:
        (self.root / "wf.toml").write_text(toml(**kw))  # type: ignore[arg-type]
        (self.root / "TASKS.md").write_text("# Tasks\n" + tasks)
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", "setup")

    def env(self, **extra: str) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(ROOT), WF_RESULT_GRACE="0.5", **extra)

    def proc(self, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
        return wfproc.run(
            [sys.executable, "-m", "wf", *args], cwd=self.root, capture_output=True, text=True,
            env=self.env(**extra), timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def show(self, tid: str) -> dict[str, object]:
        return dict(json.loads(self.wf.ok("show", tid, "--json")))

    def status(self, tid: str) -> str:
        return str(self.show(tid)["status"])

    def record(self, tid: str) -> dict[str, object] | None:
        p = self.root / ".wf" / "cloud" / f"{tid}.json"
        return dict(json.loads(p.read_text())) if p.exists() else None

    def archived(self) -> dict[str, str]:
        return {e["id"]: f"lane={e['lane']}" for e in json.loads(self.wf.ok("log", "-n", "100", "--json"))}


@pytest.fixture
def c(wf: WfRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return Cloud(wf, tmp_path, monkeypatch)


# ------------------------------------------------------------------ send


def test_send_claims_records_and_local_lanes_never_pick_it(c: Cloud) -> None:
    c.setup(task("big", "opus", "cloud: write big.txt x"))
    out = c.wf.ok("cloud", "send")
    rec = c.record("big")
    assert rec is not None and rec["state"] == "running" and rec["lane"] == "opus"
    sid = str(rec["session"])
    assert sid.startswith("session_01") and f"to cloud session {sid}" in out
    assert c.status("big").startswith(f"in progress: cloud:{sid} since ")
    # the local lane of the task does not pick it, and cannot be made to
    assert c.wf.ok("orch", "pick", "opus").startswith("stop lane opus: no runner-ready task")
    r = c.wf("orch", "pick", "opus", "--id", "big")
    assert r.code == 1 and "not runner-ready" in r.err


def test_send_order_and_what_fits(c: Cloud) -> None:
    c.setup(
        task("sonnet-task", "sonnet", extra="Cloud: yes")  # not opus-class: never sent
        + task("refused", "opus", extra="Cloud: no\nPrio: 0")
        + task("low", "opus", extra="Prio: 3\nEffort: 3")
        + task("small", "opus", extra="Prio: 1\nEffort: 1")
        + task("large", "opus", extra="Prio: 1\nEffort: 3")
        + task("wanted", "opus", extra="Cloud: yes\nPrio: 3"),
        parallel=9,
    )
    sent = []
    for _ in range(5):
        out = c.wf.ok("cloud", "send", "--json")
        rec = json.loads(out)["record"]
        sent.append(rec["id"] if rec else json.loads(out)["stop"])
    assert sent[:4] == ["wanted", "large", "small", "low"]
    assert sent[4].startswith("none fit (")
    assert c.status("refused") == "pending" and c.status("sonnet-task") == "pending"
    # a configured model list replaces the opus-class rule
    c.wf.ok("config", "cloud_models", '["msonnet"]')
    assert json.loads(c.wf.ok("cloud", "send", "--json"))["record"]["id"] == "sonnet-task"


def test_send_refuses_without_a_github_remote_before_claiming(c: Cloud) -> None:
    c.setup(task("big", "opus"))
    git(c.root, "remote", "set-url", "origin", "/srv/git/app.git")
    r = c.wf("cloud", "send")
    assert r.code == 1 and "stop lane cloud: no GitHub remote" in r.out and "git remote add" in r.out
    assert c.status("big") == "pending" and not (c.root / ".wf" / "cloud").exists()  # nothing claimed


def test_the_backend_itself_refuses_without_a_github_remote(c: Cloud) -> None:
    from wf.cloud.backend import CloudRefused, Refusal
    from wf.cloud.claude import ClaudeBackend

    git(c.root, "remote", "remove", "origin")
    for call in (
        lambda: ClaudeBackend().create(c.root, "Do it", "t"),
        lambda: ClaudeBackend().state(c.root, "session_01x", c.root),
    ):
        with pytest.raises(CloudRefused) as e:
            call()
        assert e.value.kind is Refusal.NO_GITHUB_REMOTE
    assert not c.sessions.exists()  # claude was never run


def test_not_logged_in_releases_the_claim(c: Cloud) -> None:
    c.setup(task("big", "opus") + task("said", "opus", extra="Status: pending\nPrio: 3"))
    c.creds.unlink()
    before = (c.root / "TASKS.md").read_bytes()
    r = c.wf("cloud", "send")
    assert r.code == 1, r.out + r.err
    assert "not logged in: Cloud sessions need a claude.ai sign-in" in r.out
    assert c.status("big") == "pending" and c.record("big") is None
    r = c.wf("cloud", "send", "said")  # a Status line of its own comes back as it was
    assert r.code == 1 and c.record("said") is None
    assert (c.root / "TASKS.md").read_bytes() == before


def test_max_parallel_and_the_cloud_lane_off(c: Cloud) -> None:
    c.setup(task("a", "opus") + task("b", "opus"), parallel=1)
    c.wf.ok("cloud", "send")
    assert c.wf.ok("orch", "pick", "cloud") == "stop lane cloud: max parallel (1 of 1 running)\n"
    assert c.status("b") == "pending"
    c.wf.ok("config", "cloud", "false")
    r = c.wf("cloud", "send")
    assert r.code == 1 and "the cloud lane is off" in r.err
    assert "no lane 'cloud'" in c.wf("orch", "pick", "cloud").err


# ------------------------------------------------------------------ pull and post


def test_pull_then_post_done_merges_and_awaiting_goes_back_to_its_lane(c: Cloud) -> None:
    c.setup(
        task("fix", "opus", "cloud: write fix.txt fixed", "cloud: polls 1", extra="Cloud: yes")
        + task("ask", "opus", "cloud: result awaiting", "cloud: note Which API?", "script: write ask.txt x")
    )
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "send")
    r = c.wf("cloud", "pull", "--all")
    assert r.code == 4, r.out + r.err  # fix still runs
    lines = r.out.splitlines()
    assert lines[0].startswith("ask: awaiting (") and lines[0].endswith(", $0.09)")
    assert lines[1].startswith("fix: running (")
    r = c.wf("cloud", "pull", "fix")
    assert r.code == 0 and r.out.startswith("fix: done (")
    assert c.record("fix")["commit"]  # type: ignore[index]
    assert git(c.root, "branch", "--list", "cloud/fix").strip() == "cloud/fix"
    assert git(c.root, "branch", "--list", "claude/*").strip() == ""  # the teleported branch, tidied
    assert not list((c.root / ".worktrees").glob("_cloud-*"))  # the teleport trees are gone
    out = c.wf.ok("orch", "post", "cloud", "--no-pick")
    assert "ask: awaiting" in out and "fix: done as " in out
    assert "stop lane cloud: ask came back awaiting: Which API? (back to lane opus)" in out
    # done: merged from cloud/fix and archived; the branch is gone
    assert "lane=cloud" in c.archived()["fix"] and (c.root / "fix.txt").read_text() == "fixed\n"
    assert git(c.root, "branch", "--list", "cloud/fix").strip() == ""
    # awaiting: back to its local lane, never to the cloud again, with the note
    show = c.show("ask")
    assert show["status"] == "pending" and "\nCloud: no\n" in (c.root / "TASKS.md").read_text()
    assert c.wf.ok("cloud", "send").startswith("stop lane cloud: none fit (")  # never sent again
    notes = [str(n) for n in show["notes"]]  # type: ignore[attr-defined]
    assert any("Recovery: cloud attempt session_01" in n and "ended awaiting: Which API?" in n for n in notes)
    assert c.record("ask") is None and c.record("fix") is None
    assert c.wf.ok("orch", "pick", "opus").startswith("spawn: wf-worker model=mopus")
    log = (c.root / "out" / "wf-orch.log").read_text()
    assert "lane=cloud model=mopus id=fix" in log and "outcome=awaiting" in log
    spend = (c.root / "out" / "wf-cloud.log").read_text().splitlines()
    # the spend of each session, the running poll's local turn included for fix
    assert ["usd=0.085050" in spend[0], "usd=0.121100" in spend[1]] == [True, True], spend


def test_a_vanished_session_is_lost_and_goes_back(c: Cloud) -> None:
    c.setup(task("gone", "opus", "cloud: vanish"))
    c.wf.ok("cloud", "send")
    assert c.wf.ok("cloud", "pull", "gone").startswith("gone: lost (")
    out = c.wf.ok("orch", "post", "cloud", "--json")
    p = json.loads(out)[0]
    assert p["outcome"] == "lost" and p["stop_kind"] == "lost"
    assert c.status("gone") == "pending"


def test_handback_and_a_session_without_its_report_go_back_to_their_lane(c: Cloud) -> None:
    c.setup(
        task("hb", "opus", "cloud: write hb.txt half", "cloud: result handback", "cloud: note too big")
        + task("mute", "opus", "cloud: result none")
    )
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "send")
    out = c.wf.ok("cloud", "pull", "--all").splitlines()
    assert out[0].startswith("hb: handback (") and out[1].startswith("mute: lost ("), out
    posted = {p["task"]: p for p in json.loads(c.wf.ok("orch", "post", "cloud", "--json"))}
    assert (posted["hb"]["outcome"], posted["hb"]["stop_kind"]) == ("handback", "handback")
    assert (posted["mute"]["outcome"], posted["mute"]["stop_kind"]) == ("lost", "lost")
    text = (c.root / "TASKS.md").read_text()
    assert "ended handback: too big; its work is on branch cloud/hb" in text
    assert "ended lost: the session ended without the four report lines" in text
    assert c.status("hb") == "pending" and c.status("mute") == "pending"
    assert git(c.root, "show", "cloud/hb:hb.txt") == "half\n"  # the partial work is kept


def test_the_tools_words_reach_tasks_md_and_the_terminal_shown_never_run(c: Cloud) -> None:
    c.setup(task("ask", "opus", "cloud: result awaiting", "cloud: note Which \\e]0;pwned\\a\\e[2J API?"))
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "pull", "ask")
    out = c.wf.ok("orch", "post", "cloud", "--no-pick")
    text = (c.root / "TASKS.md").read_text()
    assert "\x1b" not in out and "\x1b" not in text
    assert "ended awaiting: Which ^[]0;pwned\\a^[[2J API?" in text, text


def test_post_of_a_running_session_is_refused(c: Cloud) -> None:
    c.setup(task("slow", "opus", "cloud: polls 5"))
    c.wf.ok("cloud", "send")
    r = c.wf("orch", "post", "cloud", "--id", "slow")
    assert r.code == 1 and "pull first" in r.err
    r = c.wf("orch", "post", "cloud", "--result", "done")
    assert r.code == 2


@pytest.mark.timeout(60)
def test_two_pulls_of_one_id_at_once_one_skips(c: Cloud) -> None:
    c.setup(task("race", "opus", "cloud: write r.txt x"))
    c.wf.ok("cloud", "send")
    env = c.env(WF_FAKE_CLOUD_DELAY="2")
    argv = [sys.executable, "-m", "wf", "cloud", "pull", "race"]
    procs = [
        subprocess.Popen(argv, cwd=c.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=50) for p in procs]
    texts = [o[0] for o in outs]
    assert sum("another pull holds it" in t and "skipped" in t for t in texts) == 1, outs
    assert sum(t.startswith("race: done (") for t in texts) == 1, outs
    assert len((c.root / "out" / "wf-cloud.log").read_text().splitlines()) == 1


# ------------------------------------------------------------------ the ledger


def test_ledger_stops_the_cloud_lane_while_local_lanes_go_on(c: Cloud) -> None:
    c.setup(task("one", "opus", "cloud: write one.txt x") + task("two", "opus") + task("local", "sonnet"),
            budget=0.15, reserve=0.07)  # fmt: skip
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "pull", "one")
    led = json.loads(c.wf.ok("cloud", "ledger", "--json"))
    assert led["spent"] == pytest.approx(0.08505) and led["left"] == pytest.approx(0.06495)
    assert led["stop"] == "$0.06 of $0.15 left, reserve $0.07"
    assert (
        c.wf.ok("orch", "pick", "cloud") == "stop lane cloud: ledger ($0.06 of $0.15 left, reserve $0.07)\n"
    )
    assert c.status("two") == "pending"
    assert c.wf.ok("orch", "pick", "sonnet").startswith("spawn: wf-worker model=msonnet")
    git(c.root, "remote", "remove", "origin")  # the budget is the first thing asked: no tool is
    assert c.wf.ok("orch", "pick", "cloud").startswith("stop lane cloud: ledger (")  # run or checked
    c.wf.ok("config", "cloud_budget", "0")
    assert "ledger (no cloud_budget in wf.toml)" in c.wf.ok("cloud", "send")


def test_the_ledger_stops_at_the_reserve_itself_and_counts_this_period_only(c: Cloud) -> None:
    c.setup(task("one", "opus"), budget=5, reserve=1)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (c.root / "out").mkdir(exist_ok=True)
    log = c.root / "out" / "wf-cloud.log"
    log.write_text(
        "ts=2020-01-31T23:59:59Z id=old session=s0 state=done usd=100.000000 dur_s=9\n"  # an earlier period
        f"ts={now} id=a session=s1 state=done usd=3.500000 dur_s=9\n"
        f"ts={now} id=b session=s2 state=lost usd=? dur_s=9\n"
    )
    led = json.loads(c.wf.ok("cloud", "ledger", "--json"))
    assert (led["spent"], led["left"], led["sessions"], led["unknown"]) == (3.5, 1.5, 2, 1)
    assert "1 session(s) of unknown cost" in led["stop"]  # counted as the whole budget, never $0
    log.write_text(log.read_text().replace("usd=?", "usd=0.000000"))  # a person wrote its cost
    led = json.loads(c.wf.ok("cloud", "ledger", "--json"))
    assert (led["spent"], led["left"], led["sessions"], led["unknown"], led["stop"]) == (3.5, 1.5, 2, 0, None)
    with open(log, "a") as f:
        f.write(f"ts={now} id=c session=s3 state=done usd=0.500000 dur_s=9\n")  # left = the reserve
    led = json.loads(c.wf.ok("cloud", "ledger", "--json"))
    assert led["left"] == 1.0 and led["stop"] == "$1.00 of $5.00 left, reserve $1.00", led
    assert c.wf.ok("cloud", "send") == "stop lane cloud: ledger ($1.00 of $5.00 left, reserve $1.00)\n"
    assert c.status("one") == "pending"


# ------------------------------------------------------------------ with a batch: the sidecar


WAIT = """import pathlib, sys, time
while not pathlib.Path(sys.argv[1]).exists():
    time.sleep(0.05)
"""


def wait_for(what: object, check: object, limit: float = 90) -> None:
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"waited {limit}s for {what}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_done_when_a_batch_with_two_local_lanes_and_the_cloud(c: Cloud, tmp_path: Path) -> None:
    """The done-when of the cloud lane, through the real wf batch alone (no wf cloud send):
    two local lanes and cloud = true. The batch's sidecar sends the two Cloud: yes tasks
    (up to max parallel), and its local lanes leave them to it; one comes back done
    (merged, lane=cloud), one comes back awaiting (back to its local lane, Cloud: no, with
    the Recovery note, and that lane does it in the same batch); a pull racing the
    batch's pull of the same id skips; the batch's next send meets the ledger's reserve
    and the cloud lane stops while the local lanes go on. Each pull, send and stop is a
    line of the summary; each send counts toward N. The fake's hold gate
    (WF_FAKE_CLOUD_HOLD) and the local tasks' Done commands (waiting for a file) order it
    without timing."""
    hold = tmp_path / "hold"
    hold.mkdir()
    go_local = tmp_path / "go-local"
    (tmp_path / "wait.py").write_text(WAIT)
    wait = f"Done: `{sys.executable} {tmp_path / 'wait.py'} {go_local}`"

    def local(tid: str, lane: str, extra: str = "") -> str:
        return f"\n## {tid}: Task {tid}\nModel: m{lane}\n{wait}\n{extra}\nscript: write {tid}.txt x\n"

    c.setup(
        task("c-done", "opus", "cloud: write c.txt from the cloud", extra="Cloud: yes")
        + task("c-ask", "opus", "cloud: result awaiting", "cloud: note Which API?", "cloud: polls 1",
               "script: write ask.txt x", extra="Cloud: yes")
        + local("l1", "sonnet")
        + local("l2", "opus", "Cloud: no")
        + task("spare", "opus", "script: write spare.txt x"),  # fits the cloud: the ledger keeps it local
        budget=0.15,
        reserve=0.07,
    )  # fmt: skip
    c.wf.ok("config", "cloud_pull_every", "0.3")  # a top-level key (appended, it would be the last lane's)
    git(c.root, "commit", "-qam", "pull often")
    r = c.proc("batch", "10", "--lanes", "sonnet,opus", WF_FAKE_CLOUD_HOLD=str(hold))
    assert r.returncode == 0, r.stdout + r.stderr
    # the batch sends both Cloud: yes tasks itself; its local lanes take their own
    wait_for("the batch's sends", lambda: c.record("c-done") is not None and c.record("c-ask") is not None)
    wait_for("the sessions", lambda: all((c.record(t) or {}).get("session") for t in ("c-done", "c-ask")))
    sid = {t: str((c.record(t) or {})["session"]) for t in ("c-done", "c-ask")}
    assert c.status("c-done") == f"in progress: cloud:{sid['c-done']}" or c.status("c-done").startswith(
        f"in progress: cloud:{sid['c-done']} "
    )
    # the sidecar pulls c-ask (still running: let through), then holds c-done's record lock ...
    wait_for("the pull of c-ask", (hold / f"{sid['c-ask']}.held").exists)
    (hold / f"{sid['c-ask']}.go").write_text("")
    wait_for("the pull of c-done", (hold / f"{sid['c-done']}.held").exists)
    # ... and a pull racing it skips, touching nothing
    racer = c.proc("cloud", "pull", "c-done")
    assert racer.stdout.startswith("c-done: another pull holds it (") and "skipped" in racer.stdout, racer
    assert (c.record("c-done") or {})["state"] == "running"
    (hold / f"{sid['c-done']}.go").write_text("")
    # c-done is merged; then c-ask comes back awaiting: back to its local lane with the note
    wait_for("the posts", lambda: c.record("c-done") is None and c.record("c-ask") is None)
    archived = c.archived()
    assert "lane=cloud" in archived["c-done"] and (c.root / "c.txt").read_text() == "from the cloud\n"
    text = (c.root / "TASKS.md").read_text()
    ask = text[text.index("## c-ask:") : text.index("## l1:")]
    assert "\nCloud: no\n" in ask and "Status:" not in ask, ask
    assert f"Recovery: cloud attempt {sid['c-ask']} ended awaiting: Which API?" in ask, ask
    # the ledger: the batch's send after c-done's spend met the reserve; the cloud lane stopped
    led = json.loads(c.wf.ok("cloud", "ledger", "--json"))
    assert led["left"] <= led["reserve"] and led["stop"], led
    summary_path = c.root / str(json.loads(c.proc("batch", "--status", "--json").stdout)["summary"])
    wait_for("the ledger's stop line", lambda: "stop lane cloud: ledger ($" in summary_path.read_text())
    assert c.status("spare") == "pending" and c.record("spare") is None
    st = json.loads(c.proc("batch", "--status", "--json").stdout)
    assert st["alive"], st  # the local lanes are still at work (waiting for go-local)
    go_local.write_text("")
    # the local lanes go on: their own tasks, the task the cloud gave back, the one it left
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline:
        st = json.loads(c.proc("batch", "--status", "--json").stdout)
        if not st.get("alive"):
            break
        time.sleep(0.3)
    else:
        raise AssertionError("the batch did not end")
    archived = c.archived()
    assert {k: v for k, v in archived.items() if k != "c-done"} == {
        "c-ask": "lane=opus", "l1": "lane=sonnet", "l2": "lane=opus", "spare": "lane=opus",
    }, archived  # fmt: skip
    assert all((c.root / f).exists() for f in ("ask.txt", "l1.txt", "l2.txt", "spare.txt"))
    summary = Path(st["summary"]).read_text()
    lines = summary.splitlines()
    sends = [ln for ln in lines if " cloud: sent " in ln]
    assert [ln.split(" cloud: sent ")[1].split()[0] for ln in sends] == ["c-done", "c-ask"], summary
    assert any(
        re.fullmatch(r"- \d\d:\d\d stop lane cloud: max parallel \(2 of 2 running\)", ln) for ln in lines
    )
    pulls = [ln for ln in lines if "cloud pull:" in ln]
    assert pulls and all(re.fullmatch(r"- \d\d:\d\d cloud pull: .*", ln) for ln in pulls), summary
    assert any("c-done: done (" in ln and "posted: c-done done" in ln for ln in pulls), summary
    assert any("c-ask: awaiting (" in ln and "posted: c-ask awaiting" in ln for ln in pulls), summary
    ledger = next(i for i, ln in enumerate(lines) if "stop lane cloud: ledger ($" in ln)
    assert ledger < next(i for i, ln in enumerate(lines) if "posted: c-ask awaiting" in ln), summary
    assert re.search(r"^- \d\d:\d\d cloud c-done done commit=[0-9a-f]{12} ", summary, re.M), summary
    assert "cloud: no session left" in summary, summary
    assert "done: 5, not done: 1" in summary, summary  # c-ask's awaiting post is a task line too
    starts = sorted((c.root / ".wf" / "batch").glob("*.starts"))[-1].read_text().split("\n")
    starts = [x.replace("sent ", "cloud ", 1) for x in starts if x.startswith(("local ", "sent "))]
    assert sorted(starts) == sorted(
        ["cloud c-done", "cloud c-ask", "local l1", "local l2", "local c-ask", "local spare"]
    ), starts  # each send counted toward N, as each local start
    assert not (c.root / ".wf" / "cloud" / "batch.open").exists()
    assert not list((c.root / ".wf" / "cloud").glob("*.json"))


# ------------------------------------------------------------------ the safety rules, one test each


def test_a_session_id_wf_does_not_accept_is_refused_and_released(
    c: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    c.setup(task("big", "opus"))
    monkeypatch.setenv("WF_FAKE_CLOUD_SID", "../../etc")
    r = c.wf("cloud", "send")
    assert r.code == 1 and "session id wf does not accept" in r.out
    assert c.status("big") == "pending" and c.record("big") is None


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("branch", "main", "its branch 'main' is not cloud/big"),
        ("session", "--help", "its session '--help' is not a session id"),
        ("id", "other", "its id 'other' is not its file's name"),
    ],
)
def test_a_record_wf_did_not_write_is_never_acted_on(c: Cloud, field: str, value: str, why: str) -> None:
    c.setup(task("big", "opus", "cloud: write big.txt x"))
    c.wf.ok("cloud", "send")
    main = git(c.root, "rev-parse", "main")
    f = c.root / ".wf" / "cloud" / "big.json"
    f.write_text(json.dumps({**json.loads(f.read_text()), field: value}))
    for args in (("cloud", "pull", "--all"), ("cloud", "pull", "big"), ("orch", "post", "cloud")):
        r = c.wf(*args)
        assert r.code == 1 and f"corrupt record ({why})" in r.err, (args, r.out, r.err)
    from wf.base import project as projectmod
    from wf.cloud import sidecar

    lines: list[str] = []
    assert sidecar(projectmod.load(c.root), threading.Event(), interval=0.05, on_line=lines.append) == 0
    assert len(lines) == 1 and f"corrupt record ({why})" in lines[0] and "the sidecar stops" in lines[0]
    assert git(c.root, "rev-parse", "main") == main
    assert not (c.creds.parent / "projects").exists()  # claude --teleport never ran
    assert f"cloud record cannot be trusted: {why}" in c.wf("doctor").out
    c.wf("doctor", "--fix")
    assert not f.exists()


@pytest.mark.timeout(60)
def test_two_posts_of_one_session_at_once_post_it_once(c: Cloud, tmp_path: Path) -> None:
    from wf.base.lock import project_lock

    c.setup(task("ask", "opus", "cloud: result awaiting", "cloud: note Which API?"))
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "pull", "ask")
    errs = [tmp_path / f"post{i}.err" for i in range(2)]
    handles = [open(e, "w") for e in errs]  # noqa: SIM115 (closed below)
    with project_lock(c.root / ".wf", 10):  # the first post waits here, the second for its record
        procs = [
            subprocess.Popen([sys.executable, "-m", "wf", "orch", "post", "cloud", "--no-pick"], cwd=c.root,
                             env=c.env(), stdout=subprocess.PIPE, stderr=h, text=True)
            for h in handles
        ]  # fmt: skip
        deadline = time.monotonic() + 30
        while not all("waiting for the " in e.read_text() for e in errs):
            assert time.monotonic() < deadline, [e.read_text() for e in errs]
            time.sleep(0.05)
    outs = [p.communicate(timeout=40)[0] for p in procs]
    for h in handles:
        h.close()
    assert sorted(p.returncode for p in procs) == [0, 1], outs
    assert sum("ask: awaiting" in o for o in outs) == 1, outs
    text = (c.root / "TASKS.md").read_text()
    assert text.count("Recovery: cloud attempt") == 1, text
    assert len((c.root / "out" / "wf-orch.log").read_text().splitlines()) == 1


HOOK = """#!/bin/sh
# post-checkout: when wf puts the teleport tree back on main, a person's commit lands on
# the session's branch (as if they had fetched it and worked on it meanwhile)
[ -f "{mark}" ] || exit 0
b=$(git for-each-ref --points-at "$1" --format='%(refname)' refs/heads/claude/)
[ -n "$b" ] || exit 0
rm -f "{mark}"
new=$(git commit-tree -p "$1" -m "a person's commit" "$1^{{tree}}")
git update-ref "$b" "$new"
echo "$b $new" > "{mark}.done"
"""


def test_the_teleported_branch_is_dropped_only_where_wf_left_it(c: Cloud, tmp_path: Path) -> None:
    c.setup(task("fix", "opus", "cloud: write fix.txt x"))
    c.wf.ok("cloud", "send")
    mark = tmp_path / "move-it"
    mark.write_text("")
    hooks = Path(git(c.root, "rev-parse", "--git-common-dir").strip())
    hooks = (hooks if hooks.is_absolute() else c.root / hooks) / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-checkout").write_text(HOOK.format(mark=mark))
    (hooks / "post-checkout").chmod(0o755)
    assert c.wf.ok("cloud", "pull", "fix").startswith("fix: done (")
    ref, new = (tmp_path / "move-it.done").read_text().split()
    # the person's commit is kept: the branch moved, so wf did not delete it
    assert git(c.root, "rev-parse", "--verify", "-q", ref).strip() == new
    assert git(c.root, "branch", "--list", "cloud/fix").strip() == "cloud/fix"


def test_a_branch_that_was_there_before_the_teleport_is_never_deleted(c: Cloud) -> None:
    c.setup(task("fix", "opus", "cloud: write fix.txt x", "cloud: branch claude/shared"))
    c.wf.ok("cloud", "send")
    sid = str((c.record("fix") or {})["session"])
    # a person fetched the session's branch to look at it: it is theirs, not the teleport's
    git(c.root, "fetch", "-q", str(c.sessions / sid / "work"), "claude/shared:claude/shared")
    theirs = git(c.root, "rev-parse", "claude/shared").strip()
    assert c.wf.ok("cloud", "pull", "fix").startswith("fix: done (")
    assert git(c.root, "rev-parse", "--verify", "-q", "claude/shared").strip() == theirs
    assert git(c.root, "rev-parse", "cloud/fix").strip() == theirs


def test_the_stop_file_stops_the_cloud_lane(c: Cloud) -> None:
    c.setup(task("big", "opus"))
    (c.root / "out").mkdir(exist_ok=True)
    (c.root / "out" / "wf-batch.stop").write_text("")
    assert c.wf.ok("orch", "pick", "cloud") == "stop lane cloud: stop file out/wf-batch.stop exists\n"
    assert c.status("big") == "pending" and c.record("big") is None and not c.sessions.exists()


def test_pull_teleports_in_its_own_tree_never_the_main_checkout(c: Cloud) -> None:
    c.setup(task("fix", "opus", "cloud: write fix.txt x"))
    c.wf.ok("cloud", "send")
    (c.root / "README.md").write_text("a person's edit\n")  # uncommitted, in the main checkout
    assert c.wf.ok("cloud", "pull", "fix").startswith("fix: done (")
    assert (c.root / "README.md").read_text() == "a person's edit\n"
    assert git(c.root, "branch", "--show-current").strip() == "main"


def test_an_ended_session_is_pulled_and_logged_once(c: Cloud) -> None:
    c.setup(task("fix", "opus", "cloud: write fix.txt x"))
    c.wf.ok("cloud", "send")
    c.wf.ok("cloud", "pull", "fix")
    again = c.wf.ok("cloud", "pull", "--all")
    assert again.startswith("fix: done (") and "post it: wf orch post cloud" in again
    assert len((c.root / "out" / "wf-cloud.log").read_text().splitlines()) == 1


@pytest.mark.timeout(60)
def test_two_sends_at_once_never_pass_max_parallel(c: Cloud, tmp_path: Path) -> None:
    from wf.base.lock import project_lock

    c.setup(task("a", "opus") + task("b", "opus"), parallel=1)
    errs = [tmp_path / f"send{i}.err" for i in range(2)]
    handles = [open(e, "w") for e in errs]  # noqa: SIM115 (closed below)
    with project_lock(c.root / ".wf", 10):  # both sends pass the early check, then wait here
        procs = [
            subprocess.Popen([sys.executable, "-m", "wf", "cloud", "send"], cwd=c.root, env=c.env(),
                             stdout=subprocess.PIPE, stderr=h, text=True)
            for h in handles
        ]  # fmt: skip
        deadline = time.monotonic() + 30
        while not all("waiting for the project lock" in e.read_text() for e in errs):
            assert time.monotonic() < deadline, [e.read_text() for e in errs]
            time.sleep(0.05)
    outs = sorted(p.communicate(timeout=40)[0] for p in procs)
    for h in handles:
        h.close()
    assert "to cloud session" in outs[0]
    assert outs[1] == "stop lane cloud: max parallel (1 of 1 running)\n", outs
    assert len(list((c.root / ".wf" / "cloud").glob("*.json"))) == 1


def test_the_sidecar_never_sends(c: Cloud) -> None:
    from wf.base import project as projectmod
    from wf.cloud import sidecar

    c.setup(task("first", "opus", "cloud: write f.txt x") + task("second", "opus"), parallel=1)
    c.wf.ok("cloud", "send", "first")
    lines: list[str] = []
    stop = threading.Event()
    stop.set()  # the batch has ended: pull until none is left
    pulls = sidecar(projectmod.load(c.root), stop, interval=0.1, on_line=lines.append)
    assert pulls == 1 and lines[-1] == "cloud: no session left", lines
    assert "first" in c.archived()
    assert c.status("second") == "pending" and c.record("second") is None


def test_no_lane_may_be_called_cloud(c: Cloud) -> None:
    (c.root / "wf.toml").write_text('[lanes.cloud]\nmodel = "opus"\n')
    r = c.wf("check")
    assert r.code == 1 and "'cloud' is the cloud lane's name" in r.err


@pytest.mark.timeout(60)
def test_the_task_is_claimed_while_its_session_is_created(c: Cloud) -> None:
    c.setup(task("big", "opus"))
    send = subprocess.Popen(
        [sys.executable, "-m", "wf", "cloud", "send"], cwd=c.root, env=c.env(WF_FAKE_CLOUD_DELAY="3"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while (c.record("big") or {}).get("state") != "sending":
        assert time.monotonic() < deadline and send.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)  # the claim follows the record, under the same lock
    assert c.status("big").startswith("in progress: cloud:sending since ")
    assert c.wf.ok("orch", "pick", "opus").startswith("stop lane opus: no runner-ready task")
    out, err = send.communicate(timeout=30)
    assert "to cloud session" in out, err


def test_after_the_batch_the_sidecar_ends_at_the_stop_file_or_its_time(c: Cloud) -> None:
    from wf.base import project as projectmod
    from wf.cloud import sidecar

    c.setup(task("slow", "opus", "cloud: polls 1000"))
    c.wf.ok("cloud", "send")
    proj = projectmod.load(c.root)
    stop = threading.Event()
    stop.set()
    lines: list[str] = []
    assert sidecar(proj, stop, interval=0.05, linger=0.3, on_line=lines.append) >= 1
    assert lines[-1].startswith("cloud: gave up after 0s; sessions left: slow"), lines
    assert all("slow: running (" in ln for ln in lines[:-1])
    (c.root / "out").mkdir(exist_ok=True)
    (c.root / "out" / "wf-batch.stop").write_text("")
    lines.clear()
    sidecar(proj, stop, interval=0.05, linger=60, on_line=lines.append)
    assert lines == ["cloud: the stop file is set; sessions left: slow"]
    r = c.wf("cloud", "pull", "--watch", "--interval", "1s", "--for", "5s")
    assert r.code == 4 and "stop file is set" in r.out


@pytest.mark.timeout(240)
def test_a_batch_on_a_cloud_project_pulls_its_sessions_into_the_summary(c: Cloud) -> None:
    """wf batch on a cloud = true project: while it lives it pulls every cloud_pull_every
    seconds and posts what ended (never sending); each pull is a summary line; after
    its loop it keeps pulling until no session is left."""
    c.setup(
        task("c-done", "opus", "cloud: write c.txt from the cloud", extra="Cloud: yes")
        + task("l1", "sonnet", "script: write l1.txt x")
    )
    c.wf.ok("config", "cloud_pull_every", "0.5")
    assert "to cloud session" in c.wf.ok("cloud", "send")
    r = c.proc("batch", "1", "--lanes", "sonnet")
    assert r.returncode == 0, r.stdout + r.stderr
    st = wait_batch_ended(c, tail=True)  # a session its loop did not see end: its tail pulls it
    summary = Path(st["summary"]).read_text()
    assert "c-done done" in summary and "cloud: no session left" in summary, summary
    archived = c.archived()
    assert "lane=cloud" in archived["c-done"] and "l1" in archived
    assert not (c.root / ".wf" / "cloud" / "c-done.json").exists()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("ts={now} id=x session=s9 state=done usd=nan dur_s=9", "line 2: usd=nan is not a cost"),
        ("ts={now} id=x session=s9 state=done usd=-40.0 dur_s=9", "line 2: usd=-40.0 is not a cost"),
        ("ts={now} id=x session=s9 state=do", "line 2: usd=(missing) is not a cost"),
        ("id=x session=s9 state=done usd=1.0", "line 2: no ts= stamp"),
        ("ts={now} id=x session=s9 state=done usd=inf dur_s=9", "line 2: usd=inf is not a cost"),
    ],
)
def test_a_ledger_line_that_cannot_be_read_stops_the_lane(c: Cloud, line: str, said: str) -> None:
    """One bad line never switches the budget off: it is named, the lane may not send
    (exit 1 from wf cloud ledger), and wf cloud send sends nothing."""
    c.setup(task("one", "opus"), budget=5, reserve=1)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (c.root / "out").mkdir(exist_ok=True)
    log = c.root / "out" / "wf-cloud.log"
    log.write_text(
        f"ts={now} id=a session=s1 state=done usd=1.000000 dur_s=9\n" + line.format(now=now) + "\n"
    )
    r = c.wf("cloud", "ledger")
    assert r.code == 1 and f"out/wf-cloud.log: {said}" in r.out, r.out
    assert "the cloud lane stops: out/wf-cloud.log cannot be trusted" in r.out
    assert c.wf.ok("cloud", "send").startswith("stop lane cloud: ledger (out/wf-cloud.log cannot be trusted")
    assert c.status("one") == "pending"


@pytest.mark.parametrize("kind", ["folder", "not-utf8"])
def test_a_ledger_file_that_cannot_be_read_stops_the_lane(c: Cloud, kind: str) -> None:
    c.setup(task("one", "opus"), budget=5, reserve=1)
    log = c.root / "out" / "wf-cloud.log"
    log.parent.mkdir(exist_ok=True)
    if kind == "folder":
        log.mkdir()
    else:
        log.write_bytes(b"ts=2026-01-01T00:00:00Z usd=1.0 \xff\n")
    r = c.wf("cloud", "ledger", "--json")
    assert r.code == 1, r.err
    led = json.loads(r.out)
    assert led["bad"] and "cannot be trusted" in led["stop"]


def batch_status(c: Cloud) -> dict[str, Any]:
    return dict(json.loads(c.proc("batch", "--status", "--json").stdout))


def wait_batch_ended(c: Cloud, tail: bool = False) -> dict[str, Any]:
    """The newest batch has ended (``tail``: and its cloud tail too, if it left one)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        st = batch_status(c)
        tail_alive = tail and (st.get("cloud_tail") or {}).get("alive")
        if st.get("job") is not None and not st.get("alive") and not tail_alive:
            return st
        time.sleep(0.5)
    raise AssertionError(f"the batch did not end: {batch_status(c)}")


@pytest.mark.timeout(300)
def test_the_cloud_tail_never_blocks_the_next_batch_and_has_its_own_limits(c: Cloud) -> None:
    """A session that outlives the batch's loop goes to the cloud tail: a res job of its own
    (title wf-batch-cloud, its own memory cap and wall time), shown by wf batch --status;
    the batch itself ends at once, so the next night's batch starts."""
    c.setup(
        task("slow", "opus", "cloud: polls 100000")
        + task("l1", "sonnet", "script: write l1.txt x")
        + task("l2", "sonnet", "script: write l2.txt x")
    )
    c.wf.ok("config", "cloud_pull_every", "0.3")
    assert "to cloud session" in c.wf.ok("cloud", "send", "slow")
    assert c.proc("batch", "1", "--lanes", "sonnet").returncode == 0
    st = wait_batch_ended(c)
    assert st["reason"] == "N reached", st
    tail = st["cloud_tail"]
    assert tail["alive"] and tail["batch"] == st["stamp"] and tail["sessions"] == ["slow"], tail
    [job] = [j for j in json.loads(c.proc("res", "ls", "--json").stdout) if j["id"] == tail["job"]]
    assert job["title"] == "wf-batch-cloud" and job["limits"]["mem"] == 2 << 30 and job["limits"]["for"], job
    assert job["id"] != st["job"]  # not the batch's own job: its own record and limits
    text = c.proc("batch", "--status").stdout
    assert f"cloud tail of batch {st['stamp']}: pulling (job {tail['job']}" in text, text
    summary = Path(st["summary"]).read_text()
    assert f"the cloud tail (job {tail['job']}, wf-batch-cloud under its own limits) pulls them" in summary
    # the next batch is not refused while the tail pulls
    second = c.proc("batch", "1", "--lanes", "sonnet")
    assert second.returncode == 0, second.stdout + second.stderr
    st2 = wait_batch_ended(c)
    assert st2["stamp"] != st["stamp"] and st2["reason"] == "N reached", st2
    assert "l1" in c.archived() and "l2" in c.archived()
    # one tail pulls at a time: the second batch's took over, the first's ended by itself
    tail2 = st2["cloud_tail"]
    assert tail2["batch"] == st2["stamp"] and tail2["job"] != tail["job"] and tail2["alive"], tail2
    first = Path(st["summary"])
    wait_for("the first tail's end", lambda: "- cloud tail: ended done at " in first.read_text())
    took = f"cloud: the cloud tail of batch {st2['stamp']} took over; sessions left: slow"
    assert took in first.read_text()
    assert c.proc("res", "stop", tail2["job"]).returncode == 0
    st2 = batch_status(c)
    assert st2["cloud_tail"]["state"] == "killed" and not st2["cloud_tail"]["alive"], st2
    assert "- cloud tail: ended killed at " in Path(st2["summary"]).read_text()
    assert f"cloud tail of batch {st2['stamp']}: ended killed at " in c.proc("batch", "--status").stdout


@pytest.mark.timeout(240)
def test_a_batch_that_ends_at_the_stop_file_leaves_no_cloud_tail(c: Cloud, tmp_path: Path) -> None:
    go = tmp_path / "go"
    (tmp_path / "wait.py").write_text(WAIT)
    c.setup(
        task("slow", "opus", "cloud: polls 100000")
        + f"\n## l1: Task l1\nModel: msonnet\nDone: `{sys.executable} {tmp_path / 'wait.py'} {go}`\n\n"
        "script: write l1.txt x\n"
    )
    c.wf.ok("config", "cloud_pull_every", "0.3")
    assert "to cloud session" in c.wf.ok("cloud", "send", "slow")
    assert c.proc("batch", "1", "--lanes", "sonnet").returncode == 0
    wait_for("l1 at work", lambda: c.status("l1").startswith("in progress"))
    assert c.proc("batch", "--stop").returncode == 0
    go.write_text("")
    st = wait_batch_ended(c)
    assert st["reason"] == "stop file" and st["cloud_tail"] is None, st
    assert "- cloud: the stop file is set; sessions left: slow" in Path(st["summary"]).read_text()
    assert not [j for j in json.loads(c.proc("res", "ls", "--json").stdout) if j["title"] == "wf-batch-cloud"]


@pytest.mark.parametrize(
    ("model", "extra", "cost"),
    [
        ("claude-sonnet-5-5", None, (1000 * 2 + 100 * 10) / 1e6),  # wf's table
        ("claude-zeta-9-9", {"claude-zeta-9-9": 0.42}, 0.42),  # the tool's own figure
        ("claude-zeta-9-9", None, None),  # nobody's: usd=?, never $0 charged to the budget
    ],
)
def test_a_cloud_sessions_unknown_cost_is_none_never_zero(
    model: str, extra: dict[str, float] | None, cost: float | None
) -> None:
    from wf.cloud.backend import SessionState, SessionStatus
    from wf.cloud.claude import ClaudeBackend

    line = {"type": "assistant", "timestamp": "2026-12-03T10:00:00Z", "requestId": "r1",
            "message": {"id": "m1", "model": model, "stop_reason": "end_turn", "content": [],
                        "usage": {"input_tokens": 1000, "output_tokens": 100}}}  # fmt: skip
    lines = [line] + (
        [{"type": "cost-state", "modelUsage": {model: {"costUSD": extra[model]}}}] if extra else []
    )
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "projects" / "p"
    folder.mkdir(parents=True)
    (folder / "s-1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = ClaudeBackend().cost(SessionStatus(SessionState.DONE, local_session="s-1"))
    assert got == (None if cost is None else pytest.approx(cost))
