"""wf apply RUN UNIT (issue 23, item 5): a clone unit's changes (its commits, edits and
new files since the commit it started from) land in the main checkout unstaged, never
committed; anything that does not apply changes nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.workers.test_workers import Workers

# what the clone unit does: edits a tracked file and commits it, then edits another,
# adds a text and a binary file and deletes a tracked one, all left uncommitted
CHANGES = """
import pathlib, subprocess
p = pathlib.Path
p("a.txt").write_text("one\\nTWO\\nthree\\n")
subprocess.run(["git", "commit", "-qam", "unit: two in capitals"], check=True)
p("b.txt").write_text("b1\\nb2\\nb3\\nb4\\nb5\\nb6\\nb7\\nadded by the unit\\n")
p("new.txt").write_text("new file\\n")
p("blob.bin").write_bytes(bytes(range(256)) * 4)
p("gone.txt").unlink()
print("changed")
"""


@pytest.fixture
def w(wf: WfRunner, tmp_path: Path) -> Workers:
    root = wf.root
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    (root / "b.txt").write_text("".join(f"b{i}\n" for i in range(1, 8)))
    (root / "gone.txt").write_text("to be deleted\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "wf init")
    return Workers(root, tmp_path)


def clone_unit(w: Workers, unit: str, code: str, run: str = "r1") -> dict[str, object]:
    script = w.tmp / f"{unit}.py"
    script.write_text(code)
    r = w.run(
        "dispatch",
        run,
        unit,
        "--clone",
        "--adapter",
        "cmd",
        "--cmd",
        f"{sys.executable} {script}",
        "--prompt",
        "x",
    )
    assert r.returncode == 0, r.stderr
    return w.status(run, unit)


def tree_state(root: Path) -> tuple[str, str, str, str]:
    """HEAD, the index, the status, the working files' diff: all that apply may change."""
    return (
        git(root, "rev-parse", "HEAD"),
        git(root, "ls-files", "--stage"),
        git(root, "status", "--porcelain", "--untracked-files=all"),
        git(root, "diff"),
    )


def test_apply_leaves_the_units_changes_unstaged_and_commits_nothing(w: Workers) -> None:
    st = clone_unit(w, "u1", CHANGES)
    clone = Path(str(st["clone"]))
    head, index = git(w.root, "rev-parse", "HEAD"), git(w.root, "ls-files", "--stage")
    clone_before = (git(clone, "status", "--porcelain"), git(clone, "ls-files", "--stage"))

    r = w.run("apply", "r1", "u1", "--check")
    assert r.returncode == 0, r.stderr
    assert "applies cleanly: 5 file(s)" in r.stdout
    assert git(w.root, "status", "--porcelain") == "" and not (w.root / "new.txt").exists()

    r = w.run("apply", "r1", "u1")
    assert r.returncode == 0, r.stderr
    assert "applied (unstaged, not committed)" in r.stdout
    assert (w.root / "a.txt").read_text() == "one\nTWO\nthree\n"  # the unit's commit
    assert (w.root / "b.txt").read_text().endswith("b7\nadded by the unit\n")  # its edit
    assert (w.root / "new.txt").read_text() == "new file\n"  # its untracked files
    assert (w.root / "blob.bin").read_bytes() == bytes(range(256)) * 4
    assert not (w.root / "gone.txt").exists()
    # nothing committed, nothing staged: the index is as it was
    assert git(w.root, "rev-parse", "HEAD") == head
    assert git(w.root, "ls-files", "--stage") == index
    assert git(w.root, "diff", "--cached") == ""
    status = git(w.root, "status", "--porcelain").splitlines()
    assert sorted(status) == sorted([" M a.txt", " M b.txt", " D gone.txt", "?? blob.bin", "?? new.txt"])
    # the clone is read, never changed (its index included)
    assert (git(clone, "status", "--porcelain"), git(clone, "ls-files", "--stage")) == clone_before
    assert (w.unit("r1", "u1") / "changes.patch").is_file()


def test_apply_json_and_a_unit_with_no_changes(w: Workers) -> None:
    clone_unit(w, "u1", CHANGES)
    r = w.run("apply", "r1", "u1", "--check", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["applies"] and not data["applied"] and data["check"]
    assert data["files"] == ["a.txt", "b.txt", "blob.bin", "gone.txt", "new.txt"]
    assert data["base"] == w.status("r1", "u1")["base"] and data["code"] == 0

    clone_unit(w, "idle", "print('nothing to do')")
    r = w.run("apply", "r1", "idle", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["files"] == [] and not data["applied"]
    assert git(w.root, "status", "--porcelain") == ""


def test_a_conflict_changes_nothing_and_names_the_file(w: Workers) -> None:
    clone_unit(w, "u1", CHANGES)
    (w.root / "a.txt").write_text("one\ndeux\nthree\n")  # the same line, committed meanwhile
    git(w.root, "commit", "-qam", "two in french")
    before = tree_state(w.root)

    for args in (("--check",), ()):
        r = w.run("apply", "r1", "u1", *args)
        assert r.returncode == 4, r.stderr
        assert "does not apply" in r.stderr and "a.txt" in r.stderr
        assert "b.txt" not in r.stderr.split("does not apply")[1].split(";")[0]  # only the file that fails
        assert tree_state(w.root) == before
        assert not (w.root / "new.txt").exists()

    data = json.loads(w.run("apply", "r1", "u1", "--json").stdout)
    assert data["refusal"] == "does not apply" and data["blocked"] == ["a.txt"] and data["code"] == 4


def test_uncommitted_changes_to_a_file_of_the_patch_are_never_touched(w: Workers) -> None:
    clone_unit(w, "u1", CHANGES)
    # a change git apply would merge around (the unit added at the end): refused all the same
    (w.root / "b.txt").write_text("mine\n" + (w.root / "b.txt").read_text())
    before = tree_state(w.root)
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 4
    assert "uncommitted changes to b.txt" in r.stderr
    assert tree_state(w.root) == before
    assert (w.root / "a.txt").read_text() == "one\ntwo\nthree\n"


def test_what_apply_refuses_with_exit_1(w: Workers) -> None:
    r = w.run("dispatch", "r1", "s1", "--adapter", "cmd", "--cmd", "true", "--prompt", "x")
    assert r.returncode == 0, r.stderr
    r = w.run("apply", "r1", "s1")
    assert r.returncode == 1 and "ran in mode scratch, not clone" in r.stderr
    r = w.run("apply", "r1", "nope")
    assert r.returncode == 1 and "no unit nope in run r1" in r.stderr
    for run, unit in (("r1", ".."), ("r1", "../r1"), ("..", "u1"), ("r1", "u1/../s1")):
        r = w.run("apply", run, unit)
        assert r.returncode == 1 and "bad" in r.stderr and "Traceback" not in r.stderr, (run, unit)


def _tamper(w: Workers, unit: str, **fields: object) -> None:
    path = w.unit("r1", unit) / "status.json"
    st = json.loads(path.read_text())
    st.update(fields)
    path.write_text(json.dumps(st))


def test_a_running_unit_is_never_applied(w: Workers) -> None:
    clone_unit(w, "u1", CHANGES)
    # its supervisor is this test (alive): the unit still runs
    _tamper(w, "u1", state="running", supervisor=os.getpid(), supervisor_start=None, pid=None)
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "still running" in r.stderr
    # ended by its record, but its process is still alive
    _tamper(w, "u1", state="done", pid=os.getpid())
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "still running" in r.stderr
    assert git(w.root, "status", "--porcelain") == ""


def test_a_record_pointing_elsewhere_is_refused(w: Workers, tmp_path: Path) -> None:
    st = clone_unit(w, "u1", CHANGES)
    other = tmp_path / "elsewhere" / "clone"
    git(tmp_path, "clone", "-q", str(st["clone"]), str(other))
    _tamper(w, "u1", clone=str(other))
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "is not a clone folder of run r1" in r.stderr

    # a commit id only: a name such as HEAD would move with the clone (and drop its commits)
    for base in ("HEAD", "0" * 40):
        _tamper(w, "u1", clone=st["clone"], base=base)
        r = w.run("apply", "r1", "u1")
        assert r.returncode == 1 and "is not a commit of its clone" in r.stderr, base

    outside = tmp_path / "written"
    _tamper(w, "u1", clone=st["clone"], base=f"--output={outside}")
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "is not a commit of its clone" in r.stderr
    assert not outside.exists()
    assert git(w.root, "status", "--porcelain") == ""


# a unit that commits a tree git itself would never make: a file at ../escaped
ESCAPE = """
import subprocess
def git(*args, data=None):
    return subprocess.run(["git", *args], input=data, capture_output=True, text=True, check=True).stdout.strip()
blob = git("hash-object", "-w", "--stdin", data="escaped\\n")
sub = git("mktree", data=f"100644 blob {blob}\\tescaped\\n")
top = git("mktree", data=git("ls-tree", "HEAD") + f"\\n040000 tree {sub}\\t..\\n")
commit = git("commit-tree", top, "-p", "HEAD", "-m", "escape")
git("update-ref", "HEAD", commit)  # git would not check it out
print("done")
"""


def test_a_path_outside_the_checkout_is_refused(w: Workers) -> None:
    clone_unit(w, "u1", ESCAPE)
    before = tree_state(w.root)
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "its clone's files cannot be read as a tree: error: invalid path '../escaped'" in r.stderr
    assert not (w.root.parent / "escaped").exists()
    assert tree_state(w.root) == before


def test_git_apply_never_writes_through_a_symlink(w: Workers, tmp_path: Path) -> None:
    clone_unit(w, "u1", "import os; os.mkdir('lib'); open('lib/f.txt', 'w').write('x\\n')")
    target = tmp_path / "target"
    target.mkdir()
    (w.root / "lib").symlink_to(target)  # the main checkout's own (untracked) link out of it
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 4, r.stdout
    assert list(target.iterdir()) == []


def test_a_unit_whose_clone_is_gone_is_refused(w: Workers) -> None:
    import shutil

    st = clone_unit(w, "u1", CHANGES)
    shutil.rmtree(Path(str(st["clone"])) / ".git")
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 1 and "its clone" in r.stderr and "is gone" in r.stderr
    assert git(w.root, "status", "--porcelain") == ""


# a unit that plants code in its clone's git config: an fsmonitor hook git would run on
# any command that looks at the index and a clean filter for every file (``marks``), or a
# work tree elsewhere (``elsewhere``); then changes a file. wf must read the clone with
# none of it.
def planted(marks: Path | None = None, elsewhere: Path | None = None) -> str:
    code = "import pathlib, subprocess\ndef cfg(k, v): subprocess.run(['git', 'config', k, v], check=True)\n"
    if marks:
        code += f"""
cfg("core.fsmonitor", "touch {marks}/fsmonitor; false")
pathlib.Path(".gitattributes").write_text("* filter=x\\n")
cfg("filter.x.clean", "sh -c 'touch {marks}/filter; cat'")
cfg("filter.x.required", "true")
"""
    if elsewhere:
        code += f"cfg('core.worktree', '{elsewhere}')\n"
    return code + 'pathlib.Path("a.txt").write_text("one\\nplanted\\nthree\\n")\nprint("planted")\n'


@pytest.fixture
def plants(tmp_path: Path) -> tuple[Path, Path]:
    marks, elsewhere = tmp_path / "marks", tmp_path / "elsewhere"
    marks.mkdir()
    elsewhere.mkdir()
    (elsewhere / "stolen.txt").write_text("a file outside the clone\n")
    return marks, elsewhere


def test_apply_never_runs_code_the_unit_planted_in_its_clones_config(
    w: Workers, plants: tuple[Path, Path]
) -> None:
    marks, elsewhere = plants
    clone_unit(w, "u1", planted(marks=marks))
    clone_unit(w, "u2", planted(elsewhere=elsewhere))
    r = w.run("apply", "r1", "u1", "--check")
    assert r.returncode == 0, r.stderr
    assert (
        "applies cleanly: 2 file(s)" in r.stdout and "  .gitattributes" in r.stdout and "  a.txt" in r.stdout
    )
    assert sorted(p.name for p in marks.iterdir()) == []
    r = w.run("apply", "r1", "u2", "--check")
    assert r.returncode == 0, r.stderr
    assert "applies cleanly: 1 file(s)" in r.stdout and "  a.txt" in r.stdout and "stolen" not in r.stdout
    # nor the user's own config: the unit's .gitattributes must not pick a filter of it
    user = w.tmp / "user.gitconfig"
    user.write_text(f'[filter "x"]\n\tclean = "sh -c \'touch {marks}/user; cat\'"\n')
    r = w.run("apply", "r1", "u1", "--check", GIT_CONFIG_GLOBAL=str(user))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
    r = w.run("apply", "r1", "u1")
    assert r.returncode == 0, r.stderr
    assert (w.root / "a.txt").read_text() == "one\nplanted\nthree\n"
    assert sorted(p.name for p in marks.iterdir()) == []


def test_runs_diff_never_runs_code_the_unit_planted_in_its_clones_config(
    w: Workers, plants: tuple[Path, Path]
) -> None:
    marks, elsewhere = plants
    clone_unit(w, "u1", planted(marks=marks))
    clone_unit(w, "u2", planted(elsewhere=elsewhere))
    r = w.run("runs", "diff", "r1", "u1")
    assert r.returncode == 0, r.stderr
    assert "+planted" in r.stdout and "untracked:\n  .gitattributes" in r.stdout
    assert sorted(p.name for p in marks.iterdir()) == []
    r = w.run("runs", "diff", "r1", "u2")
    assert r.returncode == 0, r.stderr
    assert "+planted" in r.stdout and "stolen" not in r.stdout


def test_runs_diff_refuses_a_record_pointing_elsewhere(w: Workers, tmp_path: Path) -> None:
    st = clone_unit(w, "u1", CHANGES)
    other = tmp_path / "elsewhere" / "clone"
    git(tmp_path, "clone", "-q", str(st["clone"]), str(other))
    _tamper(w, "u1", clone=str(other))
    r = w.run("runs", "diff", "r1", "u1")
    assert r.returncode == 1 and "is not a clone folder of run r1" in r.stderr, r.stderr
    _tamper(w, "u1", clone=st["clone"], base="--output=/tmp/x")
    r = w.run("runs", "diff", "r1", "u1")
    assert r.returncode == 1 and "is not a commit of its clone" in r.stderr, r.stderr


LINKS = """
import os
os.symlink("/etc/passwd", "passwd")
os.symlink("../../outside.txt", "up.txt")
os.makedirs("d", exist_ok=True)
os.symlink("../a.txt", "d/in.txt")  # inside the checkout: no warning
print("linked")
"""


def test_apply_warns_of_symlinks_that_point_outside_the_checkout(w: Workers) -> None:
    clone_unit(w, "u1", LINKS)
    r = w.run("apply", "r1", "u1", "--check")
    assert r.returncode == 0, r.stderr
    assert "warning: symlink passwd points outside the checkout: /etc/passwd" in r.stdout
    assert "warning: symlink up.txt points outside the checkout: ../../outside.txt" in r.stdout
    assert "d/in.txt" in r.stdout and "symlink d/in.txt" not in r.stdout
    j = json.loads(w.run("apply", "r1", "u1", "--json").stdout)
    assert j["applied"] and j["symlinks_outside"] == [
        {"path": "passwd", "target": "/etc/passwd"},
        {"path": "up.txt", "target": "../../outside.txt"},
    ]
    assert os.readlink(w.root / "passwd") == "/etc/passwd"


def test_files_the_clone_ignores_in_its_info_exclude_stay_out(w: Workers) -> None:
    code = """
import pathlib
pathlib.Path(".git/info").mkdir(exist_ok=True)
pathlib.Path(".git/info/exclude").write_text("scratch.log\\n")
pathlib.Path("scratch.log").write_text("a log\\n")
pathlib.Path("keep.txt").write_text("kept\\n")
print("done")
"""
    clone_unit(w, "u1", code)
    j = json.loads(w.run("apply", "r1", "u1", "--check", "--json").stdout)
    assert j["files"] == ["keep.txt"] and j["applies"]
    assert w.run("runs", "diff", "r1", "u1").stdout.startswith("untracked:\n  keep.txt\n\n")
