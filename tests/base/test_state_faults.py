"""Every state file wf keeps is read through one typed reader (wf.base.records): a record that
cannot be trusted is named with what is wrong and what ``wf doctor --fix`` does, never
read as "none" and never a traceback (issue 26)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.orch.test_orch import Orch, lanes_toml, task


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def _picked(o: Orch) -> Path:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert o.wf.ok("orch", "pick", "a").startswith("spawn:")
    return o.root / ".wf" / "orch" / "a.json"


def test_ctx_never_prints_a_worktree_outside_wfs_trees(o: Orch) -> None:
    rec = _picked(o)
    assert f"Worktree: {o.root / '.worktrees'}" in o.wf.ok("ctx", "a1")
    data = json.loads(rec.read_text())
    rec.write_text(json.dumps({**data, "worktree": "/etc"}))
    r = o.wf("ctx", "a1")
    assert r.code == 1 and "/etc" not in r.out
    assert str(rec) in r.err and "not one of wf's trees" in r.err and "wf doctor --fix" in r.err
    assert "not one of wf's trees" in o.wf.ok("orch", "status")
    # a relative escape is the same fault
    rec.write_text(json.dumps({**data, "worktree": str(o.root / ".worktrees" / ".." / "..")}))
    assert o.wf("ctx", "a1").code == 1
    out = o.wf("doctor", "--fix").out
    assert "orch: a: record cannot be trusted" in out and not rec.exists()


def test_lanes_shows_a_wrong_typed_lane_record_as_corrupt(o: Orch) -> None:
    rec = _picked(o)
    data = json.loads(rec.read_text())
    for bad in (
        {"id": 7},
        {"pid": "x"},
        {"crashes": -1},
        {"started_at": float("inf")},
        {"started_at": 1e308},
    ):
        # 1e999 is a number literal that JSON reads as inf (no Infinity constant to refuse)
        rec.write_text(json.dumps({**data, **bad}).replace("1e+308", "1e999"))
        r = o.wf("lanes")
        assert r.code == 0, r.err
        assert "corrupt" in r.out and str(rec) in r.out and "wf doctor --fix" in r.out
        row = json.loads(o.wf.ok("lanes", "--json"))[0]
        assert row["active"] is None and str(rec) in row["corrupt"]
        shown = json.loads(o.wf.ok("show", "a1", "--json"))
        assert shown["hold"]["kind"] == "corrupt"


def test_a_record_nan_is_corrupt(wf: WfRunner) -> None:
    from wf.base import records
    from wf.tasks.holds import LaneRecord

    path = wf.root / "x.json"
    path.write_text('{"id": "a", "lane": "a", "model": "m", "worktree": null, "branch": "b", "base": null,'
                    ' "started": "", "state": "ready", "started_at": NaN}')  # fmt: skip
    try:
        records.load(LaneRecord, path)
    except records.CorruptRecord as e:
        assert "NaN" in e.why
    else:
        raise AssertionError("NaN read as a number")


# ------------------------------------------------------------------ the fault table

STAMP = "2026-01-01T00:00:00Z"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # the cloud ledger reads this month only
LANE = {
    "id": "a1", "lane": "a", "model": "ma", "worktree": None, "branch": "a/a1", "base": None,
    "started": STAMP, "state": "ready",
}  # fmt: skip
JOB = {
    "id": "20260101-000000-1", "title": "t", "argv": ["true"], "cwd": "/", "backend": "watchdog",
    "limits": {}, "start": STAMP, "state": "done", "end": STAMP, "dur_s": 1.0, "exit": 0,
}  # fmt: skip


class StateFile:
    """One state file wf keeps: where it lives, a valid content, its content with a field
    of the wrong type, the commands that read it, and whether an empty file is a true
    'nothing yet' (a log) rather than a fault."""

    def __init__(
        self, name: str, rel: str, valid: bytes, wrong: bytes, commands: list[list[str]], *, log: bool = False
    ) -> None:
        self.name, self.rel, self.valid, self.wrong, self.commands, self.log = (
            name,
            rel,
            valid,
            wrong,
            commands,
            log,
        )


def _j(d: object) -> bytes:
    return json.dumps(d).encode() + b"\n"


def _line(d: object) -> bytes:
    return json.dumps(d).encode() + b"\n"


COST = b"ts=2026-01-01T00:00:00Z project=p id=a1 agent=x kind=claude lane=a model=m done=1 turns=1 dur_s=5 usd=0.5\n"
STATE_FILES = [
    StateFile("lane record", ".wf/orch/a.json", _j(LANE), _j({**LANE, "pid": "x"}),
              [["lanes"], ["show", "a1"], ["ctx", "a1"], ["orch", "status"], ["doctor"]]),
    StateFile("lane record's worktree", ".wf/orch/a.json", _j(LANE), _j({**LANE, "worktree": "/etc"}),
              [["ctx", "a1"], ["lanes"]]),
    StateFile("hold record", ".wf/orch/held/a2.json", _j({"id": "a2", "digest": "d", "since": STAMP, "why": "w"}),
              _j({"id": "a2", "digest": 5, "since": STAMP, "why": "w"}), [["show", "a2"], ["doctor"]]),
    StateFile("gate result", ".wf/gate/" + "0" * 40 + ".json", _j({"sha": "0" * 40, "ok": True}),
              _j({"sha": "0" * 40, "ok": "yes"}), [["orch", "status"], ["doctor"]]),
    StateFile("cloud record", ".wf/cloud/a1.json",
              _j({"id": "a1", "lane": "a", "model": "ma", "branch": "cloud/a1", "base": None, "started": STAMP,
                  "started_at": 1.0, "state": "ended"}),
              _j({"id": "a1", "lane": "a", "model": "ma", "branch": "cloud/a1", "base": None, "started": STAMP,
                  "started_at": "x", "state": "ended"}), [["lanes"], ["cloud", "ledger"], ["doctor"]]),
    StateFile("cloud log", "out/wf-cloud.log", f"ts={NOW} id=a1 session=s state=ended usd=0.5 dur_s=1\n".encode(),
              f"ts={NOW} id=a1 session=s state=ended usd=nan dur_s=1\n".encode(), [["cloud", "ledger"], ["doctor"]],
              log=True),
    StateFile("batch record", ".wf/batch/20260101T000000Z.json",
              _j({"stamp": "20260101T000000Z", "started": STAMP, "summary": "s", "log": "l", "plan": {},
                  "state": "ended"}),
              _j({"stamp": "20260101T000000Z", "started": STAMP, "summary": "s", "log": "l", "plan": {},
                  "state": "ended", "pid": "x"}), [["batch", "--status"], ["batch", "1", "--dry-run"], ["doctor"]]),
    StateFile("res job record", "$STATE/wf/res/jobs/20260101-000000-1.json", _j(JOB), _j({**JOB, "dur_s": "x"}),
              [["res", "ls"], ["doctor"]]),
    StateFile("res history", "$STATE/wf/res/hist.jsonl", _line(JOB), _line({**JOB, "exit": "x"}),
              [["res", "hist"], ["doctor"]], log=True),
    StateFile("res reservations", "$STATE/wf/res/reservations.json",
              _j({"j": {"mem": 1, "pid": 1, "pid_start": 1.0}}), _j({"j": {"mem": "1G", "pid": 1, "pid_start": 1.0}}),
              [["res", "run", "--mem", "64M", "--no-wait", "--", "true"], ["doctor"]]),
    StateFile("seen", ".wf/seen.json", _j({"TASKS.md": [1, 2, 3, 4]}), _j({"TASKS.md": ["x", 2, 3, 4]}),
              [["add", "New task"], ["doctor"]]),
    StateFile("projects list", "$STATE/wf/projects", b"$ROOT\n", b"relative/path\n",
              [["usage", "--report"], ["doctor"]], log=True),
    StateFile("cost log", "out/wf-cost.log", COST, COST.replace(b"usd=0.5", b"usd=nan").replace(b"dur_s=5", b"dur_s=inf"),
              [["usage", "--report"], ["doctor"]], log=True),
]  # fmt: skip

# what no reader can tell from a true state: a projects list cut inside its last path
# lists a project that is gone (skipped, as one a person deleted)
BLIND = {("projects list", "truncated")}
CORRUPTIONS = ["empty", "truncated", "garbage", "wrong types", "non-UTF-8", "a folder", "a FIFO"]
TABLE = Path(__file__).resolve().parent.parent.parent / "docs" / "state-faults.md"


def _apply(path: Path, how: str, sf: StateFile, root: Path) -> None:
    import os
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    valid = sf.valid.replace(b"$ROOT", str(root).encode())
    if how == "a folder":
        path.mkdir()
    elif how == "a FIFO":
        os.mkfifo(path)
    else:
        data = {
            "empty": b"",
            "truncated": valid[: len(valid) // 2],
            "garbage": b"}{ this is not what wf writes ][\n",
            "wrong types": sf.wrong,
            "non-UTF-8": valid[:1] + b"\xff\xfe" + valid[1:],
        }[how]
        path.write_bytes(data)


def _clean(line: str, root: Path, state: Path) -> str:
    import re

    line = line.replace(str(state), "$XDG_STATE_HOME").replace(str(root), "<project>")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", line)[:150]


def _said(text: str, root: Path, state: Path, last: bool) -> str:
    lines = [x for x in text.splitlines() if sf_words(x)]
    return _clean((lines[-1] if last else lines[0]) if lines else "", root, state)


def sf_words(line: str) -> bool:
    """A line that says something about state (not an adapter or login line of doctor)."""
    return bool(line.strip()) and not line.startswith(("adapter:", "login:"))


@pytest.mark.timeout(600)
def test_fault_table(wf: WfRunner, sealed_env: Path) -> None:
    """Every state file, every corruption, every command that reads it: no traceback
    (exit 3, "internal error"), and never a silent "none": the command names the file,
    or the file was a log that is truly empty. The table in docs/state-faults.md is
    this test's output (WRITE_FAULT_TABLE=1 writes it)."""
    import os

    from tests.conftest import git

    root = wf.root
    state = Path(os.environ["XDG_STATE_HOME"])
    (root / "wf.toml").write_text("cloud = true\ncloud_budget = 5.0\n" + lanes_toml("a"))
    # a1 picked (its lane record is read), a2 free (its hold record is read)
    (root / "TASKS.md").write_text(
        "# Tasks\n"
        + task("a1", "a", "x", extra="Status: in progress: worker since 2026-01-01")
        + task("a2", "a", "x")
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "setup")
    (state / "wf").mkdir(parents=True, exist_ok=True)
    (state / "wf" / "projects").write_text(f"{root}\n")
    rows = ["| state file | corruption | command | exit | what it says |", "|---|---|---|---|---|"]
    failures = []
    for sf in STATE_FILES:
        path = Path(sf.rel.replace("$STATE", str(state))) if sf.rel.startswith("$") else root / sf.rel
        for how in CORRUPTIONS:
            for cmd in sf.commands:
                _apply(path, how, sf, root)
                r = wf(*cmd)
                text = r.err + r.out
                last = cmd[0] == "doctor"  # its summary line
                said = _said(r.err, root, state, last) or _said(r.out, root, state, last)
                if path.name in text:
                    said = _clean(next(x for x in text.splitlines() if path.name in x), root, state)
                shown = f"wf {' '.join(cmd)}"
                rows.append(f"| {sf.name} (`{sf.rel.replace('$STATE', '$XDG_STATE_HOME')}`) | {how} | `{shown}` "
                            f"| {r.code} | {said.replace('|', '/')} |")  # fmt: skip
                if r.code == 3 or "internal error" in text or "Traceback" in text:
                    failures.append(f"{sf.name} / {how} / {shown}: traceback ({r.code}) {text[-300:]}")
                elif (
                    path.name not in text and not (sf.log and how == "empty") and (sf.name, how) not in BLIND
                ):
                    failures.append(f"{sf.name} / {how} / {shown}: silent ({r.code}) {said}")
            _apply(path, "empty", sf, root)
            path.unlink()
            (state / "wf" / "projects").write_text(f"{root}\n")
    text = "\n".join(rows) + "\n"
    if os.environ.get("WRITE_FAULT_TABLE"):
        TABLE.parent.mkdir(exist_ok=True)
        head = TABLE.read_text().split("<!-- table -->")[0] if TABLE.exists() else "# State faults\n\n"
        TABLE.write_text(head + "<!-- table -->\n" + text)
    assert failures == [], "\n".join(failures)
    assert TABLE.read_text().split("<!-- table -->\n", 1)[1] == text, "run with WRITE_FAULT_TABLE=1"


# ------------------------------------------------------------------ the reproductions of issue 26


def test_a_bad_projects_list_never_stops_a_post_midway(o: Orch, sealed_env: Path) -> None:
    """A NUL or a non-UTF-8 byte in the state folder's projects list made costlog.append
    raise after the cost line: the post died between its writes (a traceback, no orch log
    line). Now the list is only an index: the post goes through whole, and the report
    names the list."""
    import os

    from tests.cost.test_usage import claude_root, write_session
    from tests.orch.test_post_atomic import AGENT, _cost_lines, _picked

    commit = _picked(o, "write a1.txt x", "nomerge")
    assert commit
    write_session(claude_root())
    projects = Path(os.environ["XDG_STATE_HOME"]) / "wf" / "projects"
    projects.parent.mkdir(parents=True, exist_ok=True)
    projects.write_bytes(b"/some/project\x00\xff\n")
    r = o.wf("orch", "post", "a", "--result", "handback", "--note", "why", "--agent", AGENT, "--no-pick")
    assert r.code == 0, r.err
    assert len(_cost_lines(o)) == 1 and [e["outcome"] for e in o.orch_log()] == ["handback"]
    assert not (o.root / ".wf" / "orch" / "a.json").exists()
    rep = o.wf("usage", "--report")
    assert rep.code == 1 and str(projects) in rep.err and "wf doctor --fix" in rep.err
    assert "Traceback" not in rep.err
    projects.write_bytes(f"{o.root}\n/some/project\x00\n".encode())  # UTF-8, but a NUL
    rep = o.wf("usage", "--report")
    assert rep.code == 1 and str(projects) in rep.err and "a NUL byte on line 2" in rep.err


def test_a_cost_that_is_not_a_number_is_unknown_in_the_report(wf: WfRunner, sealed_env: Path) -> None:
    """usd=nan and dur_s=inf made wf usage --report print "nan" dollars and an "inf"
    duration; now the total is unknown, and the file and the line count are named."""
    import os

    log = wf.root / "out" / "wf-cost.log"
    log.parent.mkdir()
    good = COST.decode()
    log.write_text(good + good.replace("usd=0.5", "usd=nan").replace("dur_s=5", "dur_s=inf") + "cut short\n")
    state = Path(os.environ["XDG_STATE_HOME"]) / "wf"
    state.mkdir(parents=True)
    (state / "projects").write_text(f"{wf.root}\n")
    r = wf("usage", "--report")
    assert r.code == 0
    assert "nan" not in r.out and "inf" not in r.out and "unknown" in r.out
    assert f"{log}: 1 line(s) whose usd= is not a finite number" in r.err
    assert f"{log}: 1 unreadable line(s) skipped" in r.err
    row = json.loads(wf.ok("usage", "--report", "--json"))[0]
    assert row["total_usd"] is None and row["unknown_usd"] == 1 and row["median_dur_s"] == 5


def _res_job(home: Path, **over: object) -> None:
    jobs = home / "wf" / "res" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{JOB['id']}.json").write_text(json.dumps({**JOB, **over}))


def test_res_never_reads_a_broken_record_as_no_jobs(wf: WfRunner, sealed_env: Path) -> None:
    """A corrupt job record read as "no running jobs", corrupt history as "no jobs yet",
    a corrupt reservations ledger as no reservation (memory promised twice), a history
    line without an exit code printed exit=None."""
    import os

    state = Path(os.environ["XDG_STATE_HOME"])
    res = state / "wf" / "res"
    _res_job(state, state="running", pid="x")
    r = wf("res", "ls")
    assert r.code == 1 and "no running jobs" not in r.out and f"{JOB['id']}.json" in r.err
    (res / "jobs" / f"{JOB['id']}.json").unlink()
    (res / "hist.jsonl").write_bytes(json.dumps({**JOB, "exit": None}).encode() + b"\n")
    out = wf.ok("res", "hist")
    assert "exit=-" in out and "None" not in out
    (res / "hist.jsonl").write_bytes(json.dumps({**JOB, "exit": "x"}).encode() + b"\n")
    r = wf("res", "hist")
    assert r.code == 1 and "line 1 is not a job of wf's" in r.err and "exit=x" not in r.out
    (res / "hist.jsonl").write_bytes(json.dumps(JOB).encode() + b"\n\xff\n")
    r = wf("res", "hist")
    assert r.code == 1 and "no jobs yet" not in r.out and "hist.jsonl" in r.err and "not UTF-8" in r.err
    (res / "hist.jsonl").unlink()
    live = {"mem": 1 << 40, "pid": os.getpid(), "pid_start": 0.0}
    for bad in (b"{", json.dumps({"j": {**live, "mem": "1T"}}).encode(), b"[]"):
        (res / "reservations.json").write_bytes(bad)
        r = wf("res", "run", "--mem", "64M", "--no-wait", "--", "true")
        assert r.code == 1 and "reservations.json" in r.err and "wf doctor --fix" in r.err, r.err
    (res / "reservations.json").unlink()
    (res / "reservations.json").mkdir()  # a folder was a traceback
    r = wf("res", "run", "--mem", "64M", "--no-wait", "--", "true")
    assert r.code == 1 and "it is a folder" in r.err
    out = wf("doctor", "--fix").out
    assert "reservations.json" in out and "[fixed]" in out
    assert wf("res", "run", "--mem", "64M", "--no-wait", "--", "true").code == 0
    # a ledger that breaks while a job runs: the job's end is still its own (exit 7), and
    # the ledger is left for wf doctor, never read as none
    ledger = res / "reservations.json"
    r = wf("res", "run", "--mem", "64M", "--no-wait", "--", "sh", "-c", f"echo '{{' > '{ledger}'; exit 7")
    assert r.code == 7, r.err
    assert ledger.read_text() == "{\n"


def test_batch_status_names_a_broken_record_never_an_older_batch(wf: WfRunner) -> None:
    """A corrupt newest batch record made wf batch --status say "no batch has run here"
    or show an older batch as the newest."""
    folder = wf.root / ".wf" / "batch"
    folder.mkdir(parents=True)
    old = {
        "stamp": "20260101T000000Z",
        "started": STAMP,
        "summary": "s",
        "log": "l",
        "plan": {},
        "state": "ended",
    }  # fmt: skip (no job id: a batch that ended before its job began is still a batch)
    (folder / "20260101T000000Z.json").write_text(json.dumps(old))
    assert "20260101T000000Z" in wf.ok("batch", "--status")
    (folder / "20260102T000000Z.json").write_text('{"stamp": "20260102T000000Z", "sta')
    r = wf("batch", "--status")
    assert r.code == 1 and "20260102T000000Z.json" in r.err and "wf doctor --fix" in r.err
    assert "20260101T000000Z" not in r.out and "no batch has run here" not in r.out
    assert "[fixed]" in wf("doctor", "--fix").out
    assert "20260101T000000Z" in wf.ok("batch", "--status")


def test_a_broken_seen_record_stops_writes_instead_of_the_lost_tasks_guard(wf: WfRunner) -> None:
    """.wf/seen.json read as "never seen" switched the lost-tasks guard off unseen."""
    wf.ok("add", "First task")
    seen = wf.root / ".wf" / "seen.json"
    assert seen.exists()
    seen.write_text('{"TASKS.md": [1, 2')
    r = wf("add", "Second task")
    assert r.code == 1 and str(seen) in r.err and "wf doctor --fix" in r.err
    assert "Second task" not in (wf.root / "TASKS.md").read_text()
    assert "[fixed]" in wf("doctor", "--fix").out
    wf.ok("add", "Second task")
