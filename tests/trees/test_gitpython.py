"""GitPython inside gitops (issue 22): wf's environment is never changed, a GIT_DIR or a
GIT_OBJECT_DIRECTORY in it never reaches git or GitPython, only a commit id gets through
``rev``, and the git processes GitPython keeps are wf's own: closed at exit and at the end
of a session, never stopped by a forked child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import WfRunner, git
from tests.orch.test_orch import Orch, lanes_toml, task

ROOT = Path(__file__).resolve().parent.parent.parent
LOCATION = {"GIT_DIR": "", "GIT_WORK_TREE": "", "GIT_INDEX_FILE": "", "GIT_CONFIG_PARAMETERS": "'x.y=1'"}


def _py(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = dict(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_importing_gitops_leaves_the_environment_alone(tmp_path: Path) -> None:
    env = dict(os.environ, **{k: v or str(tmp_path / "elsewhere" / ".git") for k, v in LOCATION.items()})
    code = "import os\nbefore = dict(os.environ)\nimport wf.trees.gitops\nprint(dict(os.environ) == before)\n"
    r = _py(code, tmp_path, env)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stdout + r.stderr


def _repo(path: Path, env: dict[str, str]) -> None:
    path.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *argv], cwd=path, env=env, check=True, capture_output=True)


@pytest.mark.parametrize("var", ["GIT_DIR", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR"])
def test_a_location_variable_in_the_environment_never_reaches_git(tmp_path: Path, var: str) -> None:
    """A merge made with GIT_DIR, GIT_OBJECT_DIRECTORY or GIT_COMMON_DIR (which GitPython
    reads itself) set to another repository lands in the project, and the other repository
    is untouched."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATION}
    env.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid", GIT_COMMITTER_NAME="a")
    env.update(GIT_COMMITTER_EMAIL="a@e.invalid")
    other, proj = tmp_path / "other", tmp_path / "proj"
    _repo(other, env)
    _repo(proj, env)
    wf = [sys.executable, "-m", "wf"]
    env["PYTHONPATH"] = str(ROOT)
    for argv in (["init"], ["add", "A task", "--id", "t1", "--model", "sonnet", "--done", "true"]):
        subprocess.run([*wf, *argv], cwd=proj, env=env, check=True, capture_output=True)
    subprocess.run(["git", "add", "-A"], cwd=proj, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "wf"], cwd=proj, env=env, check=True)
    before = git(other, "for-each-ref")
    elsewhere = str(other / ".git" / "objects") if var == "GIT_OBJECT_DIRECTORY" else str(other / ".git")
    bad = dict(env, **{var: elsewhere})
    r = subprocess.run(
        [*wf, "wt", "add", "sonnet", "t1", "--json"], cwd=proj, env=bad, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    tree = Path(json.loads(r.stdout)["path"])
    (tree / "w.txt").write_text("work\n")
    subprocess.run(["git", "add", "w.txt"], cwd=tree, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "work"], cwd=tree, env=env, check=True)
    r = subprocess.run([*wf, "merge", "t1"], cwd=proj, env=bad, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (proj / "w.txt").read_text() == "work\n"
    assert git(proj, "log", "-1", "--format=%s", "main").strip() == "wf: archive t1"
    assert git(other, "for-each-ref") == before


@pytest.fixture
def o(wf: WfRunner) -> Orch:
    return Orch(wf)


def test_the_null_id_is_no_commit(o: Orch) -> None:
    """GitPython takes 000...0 for a commit without asking; wf asks the object store."""
    o.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    o.wf.ok("orch", "pick", "a")
    r = o.wf("orch", "post", "a", "--result", "done", "--commit", "0" * 40)
    assert r.code == 1 and f"no commit {'0' * 40}" in r.err, r.err


def test_rev_gives_only_commits_and_show_exact_bytes(tmp_path: Path) -> None:
    from wf.trees import gitops

    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid")
    env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@e.invalid")
    _repo(tmp_path / "r", env)
    r = tmp_path / "r"
    (r / "f.txt").write_bytes(b"caf\xe9\r\nno newline")
    subprocess.run(["git", "add", "f.txt"], cwd=r, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "f"], cwd=r, env=env, check=True)
    subprocess.run(["git", "tag", "-a", "v1", "-m", "v1"], cwd=r, env=env, check=True)
    head = git(r, "rev-parse", "HEAD").strip()
    assert gitops.rev(r, "v1") == head  # a tag is followed to its commit
    assert gitops.rev(r, "HEAD:f.txt") is None and gitops.resolve(r, "HEAD:f.txt") is not None
    assert gitops.rev(r, "HEAD^{tree}") is None and gitops.rev(r, "nope") is None
    assert gitops.rev(r, head[:7]) == head  # a short id: git's to resolve
    assert gitops.rev(r, "@") == head  # no GitPython grammar: git's to resolve
    shown = gitops.show(r, "main", "f.txt")
    assert shown is not None and shown.encode("utf-8", "surrogateescape") == b"caf\xe9\r\nno newline"
    assert gitops.subject(r, "main") == "f" and gitops.current_branch(r) == "main"


PROBE = """
import os, sys
from pathlib import Path
from wf.trees import gitops
def readers():
    me = str(os.getpid())
    kids = []
    for d in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            cmd = open(f"/proc/{d}/cmdline").read()
        except OSError:
            continue
        if stat[1] == me and "cat-file" in cmd:
            kids.append(int(d))
    return kids
with gitops.session():
    gitops.rev(Path("."), "main")
    gitops.show(Path("."), "main", "f.txt")
    opened = readers()
print(len(opened), len(readers()))
gitops.rev(Path("."), "main")
kept = readers()
pid = os.fork()
if pid == 0:  # a child reads through cat-file processes of its own, not its parent's pipes
    gitops.rev(Path("."), "main^{commit}")
    gitops.rev(Path("."), "main")
    own = readers()
    gitops.close_all()
    os._exit(0 if own else 3)
_, status = os.waitpid(pid, 0)
print(all(os.path.exists(f"/proc/{p}") for p in kept) and status == 0, len(kept))
"""


def test_git_processes_of_gitpython_are_closed_by_a_session_and_kept_from_a_fork(tmp_path: Path) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid")
    env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@e.invalid")
    r = tmp_path / "r"
    _repo(r, env)
    (r / "f.txt").write_text("x\n")
    subprocess.run(["git", "add", "f.txt"], cwd=r, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "f"], cwd=r, env=env, check=True)
    p = _py(PROBE, r, env)
    assert p.returncode == 0, p.stderr
    opened, left = p.stdout.split("\n")[0].split()
    assert int(opened) >= 1 and left == "0", p.stdout  # the session closed them
    alive, kept = p.stdout.split("\n")[1].split()
    assert alive == "True" and int(kept) >= 1, p.stdout  # the child did not stop its parent's


def test_a_ref_named_like_a_short_id_wins_as_in_git(tmp_path: Path) -> None:
    """git reads ``abc1234`` as a ref when one has that name (GitPython would take the
    object): such names are left to git."""
    from wf.trees import gitops

    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid")
    env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@e.invalid")
    r = tmp_path / "r"
    _repo(r, env)
    first = git(r, "rev-parse", "HEAD").strip()
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "two"], cwd=r, env=env, check=True)
    head = git(r, "rev-parse", "HEAD").strip()
    git(r, "branch", head[:7], first)
    assert gitops.rev(r, head[:7]) == git(r, "rev-parse", head[:7]).strip() == first


def test_git_never_runs_in_wfs_own_folder_when_the_checkout_went_away(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitPython runs git in the process's folder when the one it was given is gone; wf's
    ``git -C`` makes git fail instead of committing in the checkout wf stands in."""
    from wf.trees import gitops

    monkeypatch.chdir(repo)
    head = git(repo, "rev-parse", "HEAD")
    runner = gitops._gitpython()[1](str(tmp_path / "gone"))
    status, _out, _err = runner.execute(
        ["git", "commit", "-q", "--allow-empty", "-m", "stray"],
        with_extended_output=True,
        with_exceptions=False,
    )
    assert status != 0 and git(repo, "rev-parse", "HEAD") == head


CTRL_C = """
import sys
from pathlib import Path
from wf.trees import gitops
gitops._execute(Path(sys.argv[1]), ["version"], {}, None)  # GitPython loaded with the real git
import os
os.environ["PATH"] = sys.argv[2] + os.pathsep + os.environ["PATH"]
print("running", flush=True)
try:
    gitops._execute(Path(sys.argv[1]), ["commit"], {}, None)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_a_ctrl_c_at_the_terminal_does_not_reach_git(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to its whole foreground process group: git runs in a group
    of its own, so it finishes (wf stops after it)."""
    import signal
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "finished"
    (bin_dir / "git").write_text(f"#!/bin/sh\nsleep 1\necho done > '{marker}'\n")
    (bin_dir / "git").chmod(0o755)
    p = subprocess.Popen(
        [sys.executable, "-c", CTRL_C, str(tmp_path), str(bin_dir)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        start_new_session=True,  # the group a terminal would signal
    )
    assert p.stdout is not None and p.stdout.readline() == b"running\n"
    time.sleep(0.4)
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=30) == 130
    assert marker.exists(), "the Ctrl-C reached git"


def test_a_sha256_repository_is_read_by_git(tmp_path: Path) -> None:
    from wf.trees import gitops

    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid")
    env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@e.invalid")
    r = tmp_path / "r"
    r.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", "--object-format=sha256"], cwd=r, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "s"], cwd=r, env=env, check=True)
    head = git(r, "rev-parse", "HEAD").strip()
    assert len(head) == 64 and gitops.rev(r, "main") == head and gitops.subject(r, "main") == "s"


ADOPTED = (
    PROBE.split("with gitops.session():")[0]
    + """
from wf.workers import procs
procs.become_subreaper()
gitops.rev(Path("."), "main")
print(len(readers()), sorted(set(readers()) & set(procs.adopted())))
"""
)


def test_the_readers_gitpython_keeps_are_no_strays_of_a_supervisor(tmp_path: Path) -> None:
    """A supervisor (wf run, wf orch run) records the processes it adopted as strays of its
    units, and ends them: the cat-file a read left open is its own child, not one of them."""
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@e.invalid")
    env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@e.invalid")
    _repo(tmp_path / "r", env)
    p = _py(ADOPTED, tmp_path / "r", env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split(maxsplit=1)[0] != "0" and p.stdout.split(maxsplit=1)[1].strip() == "[]", p.stdout
