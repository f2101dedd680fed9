"""A person's editor that saves often, and saves in pieces, while wf writes and reads.

wf defers to a person's save for a bounded time, then writes safely: every write lands,
and no save of the person's is lost. Reads (``wf ctx``, ``wf show``, ``wf list``, the
loop's own) wait out a save as writes do, so half a save never reads as "no task"."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from tests.orch.test_hostile import EDITOR, WRITER, _env, _wf
from tests.orch.test_orch import Orch, lanes_toml, task
from wf.base import settle
from wf.tasks import taskfile

# ------------------------------------------------------------------ writers make progress


def _delete_tasks_by_hand(wf: WfRunner, keep: int, total: int) -> None:
    """wf wrote ``total`` tasks (``.wf/seen.json`` remembers them); the person deletes all
    but ``keep`` in their editor."""
    for i in range(total):
        wf.ok("add", f"Task {i}", "--id", f"t{i}")
    path = wf.root / "TASKS.md"
    text = path.read_text()
    path.write_text(text[: text.index(f"## t{keep}:")])


def _busy_storm(wf: WfRunner, tmp_path: Path, mode: str, writers: int, count: int) -> dict[str, int]:
    """``writers`` processes each run ``count`` adds while the EDITOR saves every 50 ms;
    the figures: writes tried and landed, the person's saves and those lost."""
    path = wf.root / "TASKS.md"
    go, stop = tmp_path / "go", tmp_path / "stop"
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(wf.root), mode, str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(wf.root), str(n), str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(WF_LOCK_TIMEOUT="10"),  # the default: a write that gives up does so within it
        )
        for n in range(writers)
    ]
    time.sleep(0.3)  # the editor saves a few times first: the file changed a moment ago
    go.touch()
    acked: list[str] = []
    errors: list[str] = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=100)
            acked += [line[4:] for line in out.splitlines() if line.startswith("ACK ")]
            errors += [x for x in err.splitlines() if "waiting for the project lock" not in x]
    finally:
        stop.touch()
        editor_out, _ = editor.communicate(timeout=30)
    words = editor_out.split()
    assert words[:1] == ["SAVES"], editor_out
    saves = int(words[1])
    data = path.read_bytes()
    doc = taskfile.parse(data)
    assert doc.errors == []
    titles = [t.title for t in doc.tasks]
    figures = {
        "tried": writers * count,
        "landed": sum(1 for a in acked if titles.count(a) == 1),
        "acked": len(acked),
        "saves": saves,
        "lost_saves": sum(1 for k in range(saves) if f"human {k}\n".encode() not in data),
        "seen_missing": words[2:].count("lost"),
    }
    print(f"busy editor ({mode}): {figures}", errors[:3])
    assert figures["acked"] == figures["landed"] == figures["tried"], (figures, errors[:3])
    assert figures["lost_saves"] == 0, figures
    if mode == "inplace":
        assert figures["seen_missing"] == 0, editor_out
    assert saves > 0
    return figures


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode", ["inplace", "rename"])
def test_writes_land_while_an_editor_saves_every_50ms_after_tasks_were_deleted(
    wf: WfRunner, tmp_path: Path, mode: str
) -> None:
    """The issue's reproduction: after a person deleted tasks (wf remembers more), an
    editor saving every 50 ms made every write give up ("it lost tasks a moment ago",
    288 of 288). Now wf defers to the saves for a bounded time, then writes on the
    person's newest file: every write lands, every save survives."""
    _delete_tasks_by_hand(wf, keep=2, total=5)
    _busy_storm(wf, tmp_path, mode, writers=3, count=3)
    ids = [t.id for t in taskfile.parse((wf.root / "TASKS.md").read_bytes()).tasks]
    assert ids[:2] == ["t0", "t1"] and not {"t2", "t3", "t4"} & set(ids)  # the deletion stands


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_writes_land_while_an_editor_saves_every_50ms(wf: WfRunner, tmp_path: Path) -> None:
    """Without a deletion, the bounded deferral changes nothing about what survives."""
    wf.ok("add", "Before the storm")
    _busy_storm(wf, tmp_path, "inplace", writers=3, count=3)


EMPTYING = """
import sys, time
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
while not stop.exists():
    path.write_bytes(b"")  # an editor that saves an empty buffer, again and again
    time.sleep(0.05)
"""


@pytest.mark.timeout(60)
def test_an_empty_file_saved_again_and_again_is_still_never_taken(wf: WfRunner, tmp_path: Path) -> None:
    """The bound is for a person's finished saves: an empty file that held tasks is never
    the backlog, however long and often it is saved so."""
    wf.ok("add", "Existing")
    stop = tmp_path / "stop"
    saver = subprocess.Popen([sys.executable, "-c", EMPTYING, str(wf.root / "TASKS.md"), str(stop)])
    try:
        for _ in range(600):  # the editor has saved its first empty buffer (not a race with it)
            if (wf.root / "TASKS.md").read_bytes() == b"":
                break
            time.sleep(0.01)
        r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="3")  # three deferrals long
    finally:
        stop.touch()
        saver.wait(timeout=30)
    assert r.returncode == 1, r.stdout
    assert "wf wrote nothing" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (wf.root / "TASKS.md").read_bytes() == b""


FLICKER = """
import os, sys, time
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
while not stop.exists():
    with open(path, "r+b") as f:  # the first of two writes: t1 and what follows left out
        whole = f.read()
        cut = whole.index(b"## t1:")
        f.seek(0)
        f.truncate()
        f.write(whole[:cut])
    time.sleep(0.3)
    if path.read_bytes() != whole[:cut]:
        print("HALF-TAKEN", flush=True)  # someone wrote on the half file
    with open(path, "ab") as f:
        f.write(whole[cut:])
    for _ in range(25):  # then saved again and again, faster than wf's 20 ms
        os.utime(path)
        time.sleep(0.002)
"""


@pytest.mark.timeout(60)
def test_a_file_whose_tasks_come_and_go_is_not_taken_half_way(wf: WfRunner, tmp_path: Path) -> None:
    """The bound holds only for saves that agree: a program that keeps saving the file in
    two writes (its tasks now there, now not) is waited for to the end; wf never takes
    the half of it, and refuses rather than write on it."""
    wf.ok("add", "Zero", "--id", "t0")
    wf.ok("add", "One", "--id", "t1")
    stop = tmp_path / "stop"
    saver = subprocess.Popen(
        [sys.executable, "-c", FLICKER, str(wf.root / "TASKS.md"), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="3")
    finally:
        stop.touch()
        out, _ = saver.communicate(timeout=30)
    assert "HALF-TAKEN" not in out
    if r.returncode == 0:  # a starved saver left the whole file still for 20 ms: taken then
        ids = [t.id for t in taskfile.parse((wf.root / "TASKS.md").read_bytes()).tasks]
        assert ids == ["t0", "t1", "agent-task"], ids
    else:
        assert r.returncode == 1 and "wf wrote nothing" in r.stderr, r.stderr


# ------------------------------------------------------------------ reads settle like writes

# A program that saves in two writes, closing the file between them (nobody holds it
# open for writing while it is half-saved): the first write leaves out the tasks from
# CUT on, the second, GAP seconds later, appends them.
PIECES = """
import sys, time
from pathlib import Path
path, cut_at, half, gap = Path(sys.argv[1]), sys.argv[2].encode(), Path(sys.argv[3]), float(sys.argv[4])
with open(path, "r+b") as f:
    base = f.read()
    cut = base.index(cut_at)
    f.seek(0)
    f.truncate()
    f.write(base[:cut])
half.touch()
time.sleep(gap)
with open(path, "ab") as f:
    f.write(base[cut:])
"""


def _read_during_a_save_in_pieces(o: Orch, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    half = tmp_path / "half"
    saver = subprocess.Popen(
        [sys.executable, "-c", PIECES, str(o.root / "TASKS.md"), "## a1:", str(half), "0.4"],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not half.exists():
            assert time.monotonic() < deadline and saver.poll() in (None, 0)
            time.sleep(0.005)
        r = o.proc(*args)
    finally:
        saver.wait(timeout=30)
    return r


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["ctx", "show", "list", "list-cached"])
def test_a_read_waits_out_a_save_in_two_writes(o: Orch, tmp_path: Path, command: str) -> None:
    """The issue's reproduction: half-way through a person's save (the file closed, a1
    not yet written back) a worker's `wf ctx` said "no task a1", and its task was handed
    back. `wf ctx`, `wf show` and `wf list` (its cache too: an answer computed, or
    stored, for the whole file) read the file once the save is done, as a write does."""
    o.setup(lanes_toml("a"), task("a0", "a") + task("a1", "a"))
    o.wf.ok("note", "a0", "wf wrote the file: it remembers two tasks")
    if command == "list-cached":
        assert "a1" in o.wf.ok("list")
    args = {"ctx": ("ctx", "a1", "--json"), "show": ("show", "a1", "--json")}.get(command, ("list", "--json"))
    r = _read_during_a_save_in_pieces(o, tmp_path, *args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    if command in ("ctx", "show"):
        assert out["title"] == "Task a1"
    else:
        assert [t["id"] for t in out] == ["a0", "a1"]
    assert "Task a1" in o.wf.ok("show", "a1")  # and the save itself is whole
    if command.startswith("list"):
        # the person now deletes a1 for real: the file holds what the half-save held,
        # and no answer stored for the whole file is given for it
        text = (o.root / "TASKS.md").read_bytes()
        (o.root / "TASKS.md").write_bytes(text[: text.index(b"## a1:")])
        assert [t["id"] for t in json.loads(o.wf.ok("list", "--json"))] == ["a0"]


SAVING_IN_PIECES = """
import sys, time
from pathlib import Path
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
saves, longest = 0, 0.0
while not stop.exists():
    with open(path, "r+b") as f:  # in two writes, closing between them
        base = f.read()
        cut = base.find(b"\\n## ")
        if cut < 0:
            break  # every task is done
        f.seek(0)
        f.truncate()
        f.write(base[:cut])
    half = time.monotonic()
    time.sleep(0.3)
    with open(path, "ab") as f:
        longest = max(longest, time.monotonic() - half)  # how long the file was half-saved
        f.write(base[cut:])
    saves += 1
    time.sleep(0.15)
print("SAVES", saves, longest, flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_loop_and_its_workers_wait_out_saves_in_pieces(o: Orch, tmp_path: Path) -> None:
    """A person's editor saves TASKS.md in two writes, again and again, while `wf orch
    run` works: each worker's `wf ctx` and the loop's own reads (pick, post) wait for
    the whole file, so no task is handed back ("no task") and every one is done."""
    o.setup(lanes_toml("a"), "".join(task(f"a{i}", "a", f"write a{i}.txt x") for i in range(3)))
    o.wf.ok("note", "a0", "wf wrote the file: it remembers three tasks")
    stop = tmp_path / "stop"
    saver = subprocess.Popen(
        [sys.executable, "-c", SAVING_IN_PIECES, str(o.root / "TASKS.md"), str(stop)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        r = o.proc("orch", "run", "a")
    finally:
        stop.touch()
        out, _ = saver.communicate(timeout=30)
    saves, longest = int(out.split()[1]), float(out.split()[2])
    assert saves > 0, out
    outcomes = [e["outcome"] for e in o.orch_log()]
    if outcomes != ["done"] * 3 and longest >= settle.DEFER:
        # a starved CPU (a load of 10 on 2 cores): the half file stayed still for a second,
        # which the rule takes for the person's (a deletion); the test cannot judge that run
        pytest.skip(f"the saver was starved: its file stayed half-saved for {longest:.1f}s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert outcomes == ["done"] * 3, r.stdout
    assert sorted(o.archived()) == ["a0", "a1", "a2"]
    assert not list((o.root / ".wf" / "orch").glob("held/*"))
