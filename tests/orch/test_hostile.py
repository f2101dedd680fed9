"""Unlucky timing with real processes: editors that save in place or by rename while
wf writes. Nothing acknowledged may be lost, and the file never shrinks below what the
person saved."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests import wfproc
from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task
from tests.trees.test_git import FAKE_GIT, GIT_WRITES, KILL_STEPS
from wf.tasks import taskfile

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _wf(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return wfproc.run(
        [sys.executable, "-m", "wf", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(**env),
    )


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


# ------------------------------------------------------------------ one in-place save


@pytest.mark.timeout(60)
def test_add_during_an_in_place_save_keeps_the_save_and_the_task(wf: WfRunner) -> None:
    """The issue's reproduction: an editor truncates TASKS.md, then writes it 0.5 s later."""
    path = wf.root / "TASKS.md"
    for i in range(3):
        wf.ok("add", f"Existing {i}")
    before = path.read_bytes()
    editor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; d=open('TASKS.md','rb').read(); f=open('TASKS.md','wb'); "
            "print('truncated', flush=True); time.sleep(0.5); f.write(d+b'human line\\n'); f.close()",
        ],
        cwd=wf.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert editor.stdout is not None and editor.stdout.readline().strip() == "truncated"
    r = _wf(wf.root, "add", "Agent task")
    editor.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    text = path.read_bytes()
    assert text.startswith(before + b"human line\n")
    assert b"## agent-task: Agent task" in text
    assert [t.id for t in taskfile.parse(text).tasks] == [
        "existing-0",
        "existing-1",
        "existing-2",
        "agent-task",
    ]


@pytest.mark.timeout(60)
def test_a_file_held_open_for_writing_is_waited_for_then_refused(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Existing")
    before = path.read_bytes()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; f=open('TASKS.md','ab'); print('open', flush=True); sys.stdin.read()",
        ],
        cwd=wf.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="0.5")
        assert r.returncode == 1
        assert "another program has it open for writing" in r.stderr and "wf wrote nothing" in r.stderr
        assert path.read_bytes() == before
    finally:
        holder.communicate(input="", timeout=10)
    assert _wf(wf.root, "add", "Agent task").returncode == 0


@pytest.mark.timeout(60)
def test_an_empty_file_that_held_tasks_is_never_taken_as_the_truth(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Existing")
    path.write_bytes(b"")  # a save that truncated and never wrote (or has not yet)
    r = _wf(wf.root, "add", "Agent task", WF_LOCK_TIMEOUT="0.5")
    assert r.returncode == 1
    assert "it is empty, but held 1 task(s)" in r.stderr
    assert path.read_bytes() == b""
    path.write_bytes(b"# Tasks\n")  # the person says what the file holds
    assert _wf(wf.root, "add", "Agent task").returncode == 0
    assert [t.id for t in taskfile.parse(path.read_bytes()).tasks] == ["agent-task"]


@pytest.mark.timeout(60)
def test_a_save_in_two_writes_that_lost_tasks_for_a_moment_is_waited_for(wf: WfRunner) -> None:
    """A program that saves in two writes (truncate and write the first part, close,
    then append the rest): between them the file has fewer tasks, and nobody holds it
    open. wf waits for such a file to be still before taking it."""
    path = wf.root / "TASKS.md"
    for i in range(3):
        wf.ok("add", f"Task {i}", "--id", f"t{i}")
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; d=open('TASKS.md','rb').read(); cut=d.index(b'## t2:'); "
            "f=open('TASKS.md','wb'); f.write(d[:cut]); f.close(); print('half', flush=True); "
            "time.sleep(0.2); f=open('TASKS.md','ab'); f.write(d[cut:]+b'human line\\n'); f.close()",
        ],
        cwd=wf.root,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "half"
    wf.ok("add", "Agent task")
    writer.wait(timeout=30)
    doc = taskfile.parse(path.read_bytes())
    assert [t.id for t in doc.tasks] == ["t0", "t1", "t2", "agent-task"]
    assert "human line\n" in doc.text_of(doc.task("t2"))


def test_a_person_deleting_a_task_is_kept_after_a_pause(wf: WfRunner) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "One")
    wf.ok("add", "Two")
    text = path.read_text()
    path.write_text(text[: text.index("## two:")])
    wf.ok("add", "Three")
    assert [t.id for t in taskfile.parse(path.read_bytes()).tasks] == ["one", "three"]


# ------------------------------------------------------------------ storms

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wf.cli import main
    root, n, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.001)
    for k in range(count):
        if main(["-C", root, "add", f"Writer {n} task {k}"]) == 0:
            print(f"ACK Writer {n} task {k}", flush=True)
    """
)

# An editor saving every 50 ms. Each save reads the file, checks that its own previous
# save is still there (the file never shrinks below what the person saved), and adds one
# line. In place: truncate, pause, write, through one descriptor. By rename: a temporary
# file swapped in atomically; a careful editor (like one that warns "file changed on
# disk") notices a save that slipped in between its read and its rename and redoes its
# edit on top of it, so that every loss the test sees is wf's.
EDITOR = textwrap.dedent(
    """
    import ctypes, os, sys, time
    from pathlib import Path
    root, mode, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    path = root / "TASKS.md"
    tmp = root / ".TASKS.md.editor"
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    saves, problems = 0, []
    while not stop.exists():
        time.sleep(0.05)
        line = f"human {saves}\\n".encode()
        if mode == "inplace":
            with open(path, "r+b") as f:
                base = f.read()
                if saves and f"human {saves - 1}\\n".encode() not in base:
                    problems.append(f"save {saves - 1} lost")
                f.seek(0)
                f.truncate()
                f.flush()
                time.sleep(0.003)
                f.write(base + line)
        else:
            base = path.read_bytes()
            if saves and f"human {saves - 1}\\n".encode() not in base:
                problems.append(f"save {saves - 1} lost")
            at_path, content = base, base + line
            for _ in range(100):
                tmp.write_bytes(content)
                assert renameat2(-100, bytes(tmp), -100, bytes(path), 2) == 0
                replaced = tmp.read_bytes()
                tmp.unlink()
                if replaced == at_path:
                    break
                # someone saved in between: redo the edit on their file
                at_path, content = content, replaced + line
        saves += 1
    print("SAVES", saves, *problems, flush=True)
    """
)


def _storm(wf: WfRunner, tmp_path: Path, mode: str, writers: int = 16, count: int = 2) -> None:
    path = wf.root / "TASKS.md"
    wf.ok("add", "Before the storm")
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
            env=_env(WF_LOCK_TIMEOUT="30"),
        )
        for n in range(writers)
    ]
    time.sleep(0.3)
    go.touch()
    acked: list[str] = []
    errors: list[str] = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=100)
            acked += [line[4:] for line in out.splitlines() if line.startswith("ACK ")]
            if err.strip():
                errors.append(err)
    finally:
        stop.touch()
        editor_out, _ = editor.communicate(timeout=30)
    words = editor_out.split()
    assert words[:1] == ["SAVES"] and int(words[1]) > 0, editor_out
    if mode == "inplace":
        # An editor saving in place waits on wf's lease: it never even sees a version
        # without its last save. A save by rename that slips in between wf's check and
        # its exchange is swapped back at once, but for those microseconds (longer on a
        # starved CPU) the editor may see wf's version; in the end nothing is lost.
        assert words[2:] == [], f"the person's saves were lost: {editor_out}"
    data = path.read_bytes()
    doc = taskfile.parse(data)
    assert doc.errors == []
    titles = [t.title for t in doc.tasks]
    assert "Before the storm" in titles
    missing = [a for a in acked if titles.count(a) != 1]
    assert missing == [], f"acknowledged adds lost or doubled: {missing}"
    assert len(acked) == writers * count, errors
    lost = [k for k in range(int(words[1])) if f"human {k}\n".encode() not in data]
    assert lost == [], f"the person's saves were lost: {lost}"


@pytest.mark.timeout(150)
def test_storm_of_adds_with_an_editor_saving_in_place(wf: WfRunner, tmp_path: Path) -> None:
    _storm(wf, tmp_path, "inplace")


@pytest.mark.timeout(150)
@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "renameat2"), reason="needs renameat2 (Linux)")
def test_storm_of_adds_with_an_editor_saving_by_rename(wf: WfRunner, tmp_path: Path) -> None:
    _storm(wf, tmp_path, "rename")


# ------------------------------------------------------------------ kill -9 inside wf orch post

# The fake git of tests/trees/test_git.py, plus one step: hang right after the post's merge
# deleted the task's branch (the merge's last git write; the post's checks, log line and
# lane record are still to come).
POST_KILL_STEPS = [*KILL_STEPS, "deleted"]
POST_FAKE_GIT = FAKE_GIT.replace(
    "esac",
    '  deleted:branch\\ -d*) {git} "$@" && hang; exit $? ;;\nesac',
)


def kill_post_at(o: Orch, tmp_path: Path, step: str) -> list[str]:
    """Pick a1 and let its worker commit without merging; run `wf orch post` (which then
    merges) with a git that hangs at ``step`` (a FAKE_GIT step name), and kill -9 the post
    and the hung git there. Returns the post's argv, to run it again."""
    import shutil

    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", "nomerge"))
    rep = o.work(o.wf.ok("orch", "pick", "a"))
    assert rep is not None and rep.commit
    bin_dir = tmp_path / "fakegit"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(POST_FAKE_GIT.format(git=shutil.which("git")))
    (bin_dir / "git").chmod(0o755)
    marker = tmp_path / "hung"
    env = dict(
        o.env,
        PATH=f"{bin_dir}{os.pathsep}{o.env['PATH']}",
        WF_FAKE_GIT_STEP=step,
        WF_FAKE_GIT_MARKER=str(marker),
        **(GIT_WRITES if step == "tmpindex" else {}),  # only git's own objects make a temporary index
    )
    args = ["orch", "post", "a", "--result", "done", "--commit", str(rep.commit), "--no-pick"]
    p = subprocess.Popen(
        [sys.executable, "-m", "wf", *args],
        cwd=o.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text().strip():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    os.kill(int(marker.read_text()), signal.SIGKILL)  # the hung git
    return args


@pytest.mark.parametrize("step", POST_KILL_STEPS)
@pytest.mark.timeout(150)
def test_kill_orch_post_at_each_step_of_its_merge_then_post_again(o: Orch, step: str, tmp_path: Path) -> None:
    """kill -9 of `wf orch post` at each git step of the merge it makes (the worker did
    not merge): the next post finishes it as done, archived once, logged once; the index
    agrees with main and no temporary index file is left."""
    args = kill_post_at(o, tmp_path, step)
    assert o.orch_log() == []  # killed before its log line
    r = o.proc(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("a1: done as "), r.stdout
    assert o.archived() == ["a1"]
    assert [e["outcome"] for e in o.orch_log()] == ["done"]
    assert git(o.root, "status", "--porcelain") == ""
    assert git(o.root, "diff", "--cached", "--name-only") == ""
    assert git(o.root, "log", "--merges", "--format=%s", "main").count("a1: Task a1") == 1
    assert "## a1: " not in (o.root / "TASKS.md").read_text()
    assert list((o.root / ".git").glob("wf-index.*")) == []
    assert not (o.root / ".wf" / "orch" / "a.json").exists()
    # and a third post says it was posted, without logging again
    r = o.proc(*args)
    assert len(o.orch_log()) == 1


# ------------------------------------------------------------------ settled reads, rule by rule
#
# The lease and the open-for-writing probe catch an editor in the act; these rules catch
# what slips past them: a save that opened, wrote and closed entirely during wf's read, a
# rename during it, a save that ended a moment ago. They are checked here one at a time,
# with the save made at an exact point of wf's read (in this process: the interleaving a
# second process would need luck to hit).


def _save_during_read(monkeypatch: pytest.MonkeyPatch, save: object) -> None:
    from wf.base import settle

    real = settle._read_fd
    done: list[bool] = []

    def read(fd: int, *size: int) -> bytes:
        data = real(fd, *size)
        if not done:
            done.append(True)
            save()  # type: ignore[operator]
        return data

    monkeypatch.setattr(settle, "_read_fd", read)


def _old(path: Path) -> None:
    """Make the file look long settled (so only the rule under test can object)."""
    t = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(t, t))


def test_a_save_that_opens_writes_and_closes_during_the_read_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wf.base import settle

    path = tmp_path / "TASKS.md"
    path.write_bytes(b"# Tasks\n\n## a: A\n")
    _old(path)

    def save() -> None:
        with open(path, "ab") as f:
            f.write(b"human line\n")
        _old(path)

    _save_during_read(monkeypatch, save)
    why, _data, _stamp = settle._unsettled_why(path, None, b"## ")
    assert why is settle.Wait.CHANGED_DURING_READ
    assert settle._unsettled_why(path, None, b"## ")[0] is None  # and once it is still: taken


def test_a_save_renamed_in_during_the_read_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wf.base import settle

    path = tmp_path / "TASKS.md"
    path.write_bytes(b"# Tasks\n\n## a: A\n")
    _old(path)

    def save() -> None:
        new = tmp_path / ".TASKS.md.swp"
        new.write_bytes(b"# Tasks\n\n## a: A\nhuman line\n")
        _old(new)
        os.replace(new, path)

    _save_during_read(monkeypatch, save)
    why, _data, _stamp = settle._unsettled_why(path, None, b"## ")
    assert why is settle.Wait.REPLACED_DURING_READ
    assert settle.settled_read(path, "TASKS.md", None, 1.0)[0] == b"# Tasks\n\n## a: A\nhuman line\n"


def test_a_file_saved_a_moment_ago_is_waited_for(tmp_path: Path) -> None:
    """A save that just ended (its mtime younger than 20 ms; here: made to look so for
    the next half second) is not taken until it has been still a moment."""
    from wf.base import settle

    path = tmp_path / "TASKS.md"
    path.write_bytes(b"# Tasks\n\n## a: A\n")
    soon = time.time_ns() + 5 * 10**8
    os.utime(path, ns=(soon, soon))
    with pytest.raises(settle.Unsettled, match="it changed a moment ago"):
        settle.settled_read(path, "TASKS.md", None, 0.0)
    assert settle.settled_read(path, "TASKS.md", None, 30.0)[0] == b"# Tasks\n\n## a: A\n"


def test_a_file_with_an_mtime_far_in_the_future_is_still_written(wf: WfRunner) -> None:
    """A TASKS.md copied from a machine whose clock runs ahead (or touched with a future
    date) is not 'being saved' for hours: wf writes it."""
    path = wf.root / "TASKS.md"
    wf.ok("add", "One")
    later = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(later, later))
    r = _wf(wf.root, "add", "Two", WF_LOCK_TIMEOUT="1")
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    path.write_text(text[: text.index("## two:")])  # a person deletes a task, clock still ahead
    os.utime(path, ns=(later, later))
    r = _wf(wf.root, "add", "Three", WF_LOCK_TIMEOUT="1")
    assert r.returncode == 0, r.stderr
    assert [t.id for t in taskfile.parse(path.read_bytes()).tasks] == ["one", "three"]


def test_an_archive_gone_missing_mid_save_is_not_started_afresh(wf: WfRunner) -> None:
    """An editor that saves by deleting the file and writing a new one: between the two,
    DONE.md is missing. wf done then must not start a new archive of one line (the
    person's save would land over it, or it over theirs)."""
    wf.ok("add", "One", "--model", "haiku", "--done", "true")
    wf.ok("add", "Two", "--model", "haiku", "--done", "true")
    wf.ok("done", "one")
    archive = wf.root / "DONE.md"
    saved = archive.read_bytes()
    archive.unlink()
    r = _wf(wf.root, "done", "two", WF_LOCK_TIMEOUT="0.3")
    assert r.returncode == 1
    assert "DONE.md is being saved by another program (it is missing, but held" in r.stderr
    assert not archive.exists()
    archive.write_bytes(saved)  # the save lands
    assert _wf(wf.root, "done", "two").returncode == 0
    assert [e["id"] for e in json.loads(_wf(wf.root, "log", "--json").stdout)] == ["one", "two"]


# ------------------------------------------------------------------ checked replace, rule by rule


def _tasks(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "TASKS.md"
    data = b"# Tasks\n\n## a: A\n"
    path.write_bytes(data)
    return path, data


def test_replace_refuses_a_file_open_for_writing(tmp_path: Path) -> None:
    from wf.base import settle

    path, data = _tasks(tmp_path)
    with open(path, "ab"):  # an editor has it open to write
        assert settle.replace_checked(path, b"wf's version\n", data, 0.2) is None
    assert path.read_bytes() == data


def test_replace_refuses_a_file_replaced_after_its_check_where_rename_cannot_exchange(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an atomic exchange (other systems): a save renamed in after wf opened the
    file it checked is seen by its inode, and nothing is replaced."""
    from wf.base import settle

    path, data = _tasks(tmp_path)
    monkeypatch.setattr(settle, "_exchange", lambda a, b: False)
    real = settle._take_lease

    def lease_then_save(fd: int) -> bool | None:
        taken = real(fd)
        new = tmp_path / ".swp"
        new.write_bytes(b"# Tasks\n\n## a: A\nhuman line\n")
        os.replace(new, path)
        return taken

    monkeypatch.setattr(settle, "_take_lease", lease_then_save)
    assert settle.replace_checked(path, b"wf's version\n", data, 0.2) is None
    assert path.read_bytes() == b"# Tasks\n\n## a: A\nhuman line\n"


def test_a_save_renamed_in_just_before_the_exchange_stays_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save renamed in between wf's last check and its exchange: wf swaps it straight
    back, so the person's file itself (its inode) is in place again, and starts over."""
    from wf.base import settle

    path, data = _tasks(tmp_path)
    real = settle._exchange
    person: list[int] = []

    def save_then_exchange(a: Path, b: Path) -> bool:
        if not person:
            new = tmp_path / ".swp"
            new.write_bytes(b"# Tasks\n\n## a: A\nhuman line\n")
            person.append(os.stat(new).st_ino)
            os.replace(new, path)
        return bool(real(a, b))

    monkeypatch.setattr(settle, "_exchange", save_then_exchange)
    assert settle.replace_checked(path, b"wf's version\n", data, 0.2) is None
    assert path.read_bytes() == b"# Tasks\n\n## a: A\nhuman line\n"
    assert os.stat(path).st_ino == person[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TASKS.md"]


def test_a_write_into_the_replaced_file_is_put_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that had TASKS.md open writes into it just after wf's rename: the write
    would land in the replaced file; wf puts it back and starts over."""
    from wf.base import settle

    path, data = _tasks(tmp_path)

    def write_into_old(fd: int, timeout: float) -> None:
        with open(f"/proc/self/fd/{fd}", "ab") as f:
            f.write(b"human line\n")

    monkeypatch.setattr(settle, "_wait_no_writer", write_into_old)
    assert settle.replace_checked(path, b"wf's version\n", data, 0.2) is None
    assert path.read_bytes() == data + b"human line\n"


def test_wf_waits_for_a_writer_of_the_replaced_file_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor opened the old file to write it just as wf renamed; it writes a moment
    later. wf waits for it to close the file before it looks, so the write is put back
    rather than lost in the replaced file."""
    import threading

    from wf.base import settle

    path, data = _tasks(tmp_path)
    real = settle._drop_lease
    writers: list[threading.Thread] = []

    def drop_then_editor_opens(fd: int) -> None:
        real(fd)  # wf's rename is done and its lease on the old file let go
        if not writers:
            f = open(f"/proc/self/fd/{fd}", "ab")  # noqa: SIM115 - closed by the thread

            def later() -> None:
                time.sleep(0.3)
                f.write(b"human line\n")
                f.close()

            writers.append(threading.Thread(target=later))
            writers[0].start()

    monkeypatch.setattr(settle, "_drop_lease", drop_then_editor_opens)
    assert settle.replace_checked(path, b"wf's version\n", data, 10.0) is None
    writers[0].join()
    assert path.read_bytes() == data + b"human line\n"


def test_a_file_created_while_wf_writes_a_new_one_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wf creates a file that did not exist (a first archive line) only if nobody created
    it meanwhile: a person's file is never replaced by wf's new one."""
    from wf.base import settle

    path = tmp_path / "DONE.md"
    real_open = os.open
    created: list[bool] = []

    def open_then_person_creates(p: Any, flags: int, *args: Any, **kw: Any) -> int:
        try:
            return real_open(p, flags, *args, **kw)
        except FileNotFoundError:
            if Path(p) == path and not created:
                created.append(True)
                path.write_bytes(b"# Done\n\n- the person's line\n")
            raise

    with monkeypatch.context() as m:  # undo only this patch, never the sealed environment
        m.setattr(os, "open", open_then_person_creates)
        assert settle.replace_checked(path, b"# Done\n\n- wf's line\n", None, 0.2, b"- ") is None
    assert path.read_bytes() == b"# Done\n\n- the person's line\n"


def test_the_proc_scan_sees_a_writer(tmp_path: Path) -> None:
    """Where leases are not allowed wf scans /proc: a descriptor open for writing is a
    writer, one open for reading is not."""
    from wf.base import settle

    path, _data = _tasks(tmp_path)
    st = os.stat(path)
    with open(path, "rb"):
        assert settle._proc_writers(st.st_dev, st.st_ino) is False
    with open(path, "ab"):
        assert settle._proc_writers(st.st_dev, st.st_ino) is True
    with open(path, "r+b"):
        assert settle._proc_writers(st.st_dev, st.st_ino) is True


def test_an_editor_opening_the_file_during_the_rename_keeps_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor opens TASKS.md to save in place while wf holds its lease, between wf's
    check and its rename: its open waits on the lease, wf sees it waiting and swaps the
    file back before letting it go on, so the editor writes into TASKS.md itself (the
    same file, not one wf replaced and copies back)."""
    from wf.base import settle

    path, data = _tasks(tmp_path)
    ino = os.stat(path).st_ino
    real = settle._exchange
    editors: list[subprocess.Popen[bytes]] = []

    def editor_opens_then_exchange(a: Path, b: Path) -> bool:
        if not editors:
            editors.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        f"f = open({str(path)!r}, 'ab'); f.write(b'human line\\n'); f.close()",
                    ]
                )
            )
            deadline = time.monotonic() + 20
            while not any(settle._lease_broken(int(fd)) for fd in _fds_on(ino)):
                assert time.monotonic() < deadline, "the editor's open never waited on the lease"
                time.sleep(0.01)
        return bool(real(a, b))

    monkeypatch.setattr(settle, "_exchange", editor_opens_then_exchange)
    if not settle._leases_usable():
        pytest.skip("no leases here")
    assert settle.replace_checked(path, b"wf's version\n", data, 10.0) is None
    assert editors[0].wait(timeout=30) == 0
    assert path.read_bytes() == data + b"human line\n"
    assert os.stat(path).st_ino == ino


def _fds_on(ino: int) -> list[str]:
    """This process's descriptors open on the file ``ino``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.stat(f"/proc/self/fd/{fd}").st_ino == ino:
                out.append(fd)
        except OSError:
            pass
    return out
