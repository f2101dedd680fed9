"""A person's TASKS.md that is half-saved or not UTF-8 during a run: wf reads it again a
few times, then reports it as the file's problem (its line and byte offset), never as
the problem of the task whose worker met it; once the file is fixed, that task is as it
was (not handed back, not held, not blocked)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task

BAD = b"caf\xe9 (a save in Latin-1)\n"


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def _spoil(path: Path) -> tuple[bytes, int]:
    """A person's save in another encoding: the file's bytes before, and the bad byte's offset."""
    good = path.read_bytes()
    path.write_bytes(good + BAD)
    return good, len(good) + BAD.index(b"\xe9")


def _held(o: Orch) -> list[str]:
    return sorted(p.name for p in (o.root / ".wf" / "orch").glob("held/*"))


def test_a_worker_that_met_an_unreadable_tasks_md_does_not_hand_its_task_back(o: Orch) -> None:
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x") + task("a2", "a", "write a2.txt y"))
    before_pick = (o.root / "TASKS.md").read_bytes()
    prompt = o.wf.ok("orch", "pick", "a")
    claimed, offset = _spoil(o.root / "TASKS.md")
    rep = o.work(prompt)  # its `wf ctx` meets the file: the worker gives up
    assert rep is not None and rep.result == "handback", rep
    record = (o.root / ".wf" / "orch" / "a.json").read_bytes()
    args = ("orch", "post", "a", "--result", rep.result, "--note", rep.note, "--no-pick")
    r = o.wf(*args)
    assert r.code == 1 and "Traceback" not in r.err, r.err
    assert f"error: not UTF-8 text (byte 0xe9) at byte offset {offset}" in r.err, r.err
    assert r.err.startswith("TASKS.md:"), r.err
    assert (o.root / ".wf" / "orch" / "a.json").read_bytes() == record  # nothing was changed
    assert o.orch_log() == []
    (o.root / "TASKS.md").write_bytes(claimed)  # the person fixes the file
    out = o.wf.ok(*args)
    assert out.startswith("a1: redo"), out
    assert "TASKS.md could not be read during its run" in out, out
    assert (o.root / "TASKS.md").read_bytes() == before_pick  # as it was: no claim, no note
    assert _held(o) == [] and o.status("a1") == "pending"
    assert [e["outcome"] for e in o.orch_log()] == ["redo"]
    assert "Task: a1" in o.wf.ok("orch", "pick", "a")  # and it is picked again


def test_a_handback_while_tasks_md_was_fine_is_still_a_handback(o: Orch) -> None:
    """The file's trouble counts only when wf met it during this worker's run."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    good, _ = _spoil(o.root / "TASKS.md")
    assert o.wf("show", "a1").code == 1  # wf meets it unreadable: noted
    (o.root / "TASKS.md").write_bytes(good)
    time.sleep(0.01)
    o.wf.ok("orch", "pick", "a")
    out = o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "too big", "--no-pick")
    assert out.startswith("a1: handback"), out
    assert _held(o) == ["a1.json"]


def test_a_model_raised_after_the_file_was_fixed_is_still_raised(o: Orch) -> None:
    """A worker that raised its task's model wrote TASKS.md, so the file was readable for
    it: its report stands (the next pick uses the new model)."""
    o.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    claimed, _ = _spoil(o.root / "TASKS.md")
    assert o.wf("show", "a1").code == 1
    (o.root / "TASKS.md").write_bytes(claimed)
    o.wf.ok("set", "a1", "--model", "mb")
    out = o.wf.ok("orch", "post", "a", "--result", "handback", "--note", "model raised to mb", "--no-pick")
    assert out.startswith("a1: model-raised"), out


SPOIL_ONCE = """
import pathlib, sys
main, mark = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
if not mark.exists():
    mark.write_text("spoiled")
    main.write_bytes(main.read_bytes() + {bad!r})
"""


@pytest.mark.timeout(240)
def test_the_loop_stops_naming_tasks_md_and_the_task_survives(o: Orch, tmp_path: Path) -> None:
    """A person's Latin-1 save lands while a1's worker runs (its Done command makes it):
    the worker's merge fails and it gives up; the loop stops the lane naming TASKS.md
    and the byte, without handing a1 back, and without falling over while another lane
    is stopped. Once the file is fixed, the next run releases a1 as it was and works it
    again at once."""
    spoil = tmp_path / "spoil.py"
    spoil.write_text(SPOIL_ONCE.format(bad=BAD))
    done = f"`{sys.executable} {spoil} {o.root / 'TASKS.md'} {tmp_path / 'spoiled'}`"
    o.setup(lanes_toml("a", "b"), task("a1", "a", "write a1.txt x", done=done))
    r = o.proc("orch", "run", "a", "b")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "error(s)" not in r.stderr, r.stderr  # no lane fell over
    assert "stop lane a: TASKS.md cannot be read (TASKS.md:" in r.stdout, r.stdout
    assert "not UTF-8 text (byte 0xe9) at byte offset" in r.stdout
    assert "a1 keeps its claim and its report" in r.stdout
    assert (o.root / ".wf" / "orch" / "a.json").exists()
    spoiled = (o.root / "TASKS.md").read_bytes()
    assert spoiled.endswith(BAD)
    (o.root / "TASKS.md").write_bytes(spoiled[: -len(BAD)])  # the person fixes it
    assert o.status("a1").startswith("in progress")
    r = o.proc("orch", "run", "a")
    assert "a1: redo" in r.stdout and "was not handed back" in r.stdout, r.stdout
    assert "the lane picks again" in r.stdout and "a: start a1 " in r.stdout
    assert _held(o) == []
    assert r.returncode == 0, r.stdout + r.stderr
    assert [e["id"] for e in json.loads(o.wf.ok("log", "--json"))] == ["a1"]
    assert (o.root / "a1.txt").exists() and git(o.root, "status", "--porcelain") == ""


WRITER = """
import sys, time
path, half, first, rest = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4])
with open(path, "wb") as f:  # an editor saving in place, in two writes
    f.write(first)
    f.flush()
    open(half, "w").close()
    time.sleep(1.5)
    f.write(rest)
"""
SAVED = "# Tasks\n\n## a1: Café au lait\nModel: ma\nDone: true\n".encode()
CUTS = {
    "in a character": SAVED.index("é".encode()) + 1,  # between the two bytes of 'é'
    "before the task": SAVED.index(b"## a1"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["show", "ctx"])
@pytest.mark.parametrize("cut", list(CUTS))
def test_a_workers_read_waits_for_a_save_cut_half_way(
    o: Orch, tmp_path: Path, command: str, cut: str
) -> None:
    """An editor saving in place, half-way through (its first write done, the file open):
    the worker's own `wf show` / `wf ctx` reads the file once the save is done, never the
    half (not "not UTF-8", not "no task a1")."""
    o.setup(lanes_toml("a"), task("a1", "a"))
    half = tmp_path / "half"
    at = CUTS[cut]
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(o.root / "TASKS.md"),
            str(half),
            SAVED[:at].hex(),
            SAVED[at:].hex(),
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not half.exists():
            assert time.monotonic() < deadline and writer.poll() is None
            time.sleep(0.01)
        r = o.proc(command, "a1", "--json")
    finally:
        writer.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["title"] == "Café au lait"
