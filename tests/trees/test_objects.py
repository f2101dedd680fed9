"""The archive commit's blobs and tree written in-process (``wf/trees/objects.py``, issue
22): the very tree git's own index makes, objects git reads back, git left to write them
where a setting says how it writes objects; and both backup refs of a merge in one
all-or-nothing transaction that never overwrites a backup."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git
from wf.trees import gitops, objects


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    with gitops.session():
        yield


def _repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "r"
    for path, text in {
        "a/x": "x\n",  # a folder "a" sorts as "a/": after "a-b" and "a.b", before "a0"
        "a-b": "1\n",
        "a.b": "2\n",
        "a0": "3\n",
        "docs/TASKS.md": "# Tasks\n",
        "docs/deep/keep.txt": "k\n",
        "run.sh": "#!/bin/sh\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "run.sh").chmod(0o755)
    os.symlink("a0", root / "link")
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "files")
    return root, git(root, "rev-parse", "HEAD").strip()


def _by_git(root: Path, head: str, files: dict[str, str]) -> str:
    """The tree git's own index makes of ``head`` with ``files`` set (as 100644 files)."""
    env = dict(os.environ, GIT_INDEX_FILE=str(root / ".git" / "test-index"))

    def run(*args: str, stdin: str | None = None) -> str:
        p = subprocess.run(["git", *args], cwd=root, env=env, input=stdin, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    run("read-tree", head)
    for path, text in files.items():
        blob = run("hash-object", "-w", "--stdin", stdin=text)
        run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    return run("write-tree")


FILES = {
    "a.c": "new, before the folder a\n",  # new names in the root, between others
    "DONE.md": "# Done\n",
    "docs/TASKS.md": "# Tasks\n\nchanged\n",  # in a folder
    "new/deep/f.md": "folders that are not there yet\n",
    "run.sh": "now a plain file\n",  # 100755 -> 100644, as update-index --cacheinfo sets it
    "link": "a file now\n",  # a symbolic link -> a file
}


def test_the_tree_written_in_process_is_the_one_gits_index_makes(tmp_path: Path) -> None:
    root, head = _repo(tmp_path)
    mine = gitops.tree_in_process(root, head, {p: t.encode() for p, t in FILES.items()})
    assert mine is not None
    listed = git(root, "ls-tree", "-r", mine)  # git reads the objects written here
    assert "100644 blob" in listed and "docs/deep/keep.txt" in listed and "a/x" in listed
    assert git(root, "cat-file", "-p", f"{mine}:new/deep/f.md") == FILES["new/deep/f.md"]
    r = subprocess.run(["git", "fsck", "--strict", "--unreachable"], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0 and "error" not in r.stderr.lower(), r.stderr
    assert mine == _by_git(root, head, FILES)


def test_the_objects_are_written_without_a_git_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitPython's object database runs ``git hash-object`` for an object stored without
    its id: write_loose hands gitdb the compressed object and its id (3 git processes
    fewer per merge); git reads them back."""
    root, head = _repo(tmp_path)
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    mine = gitops.tree_in_process(root, head, {p: t.encode() for p, t in FILES.items()})
    monkeypatch.delenv("GIT_TRACE")
    assert mine == _by_git(root, head, FILES)
    assert "hash-object" not in (trace.read_text() if trace.exists() else "")
    assert git(root, "cat-file", "-p", f"{mine}:DONE.md") == FILES["DONE.md"]


def test_an_object_already_there_is_freshened_not_written_again(tmp_path: Path) -> None:
    root, _head = _repo(tmp_path)
    store = root / ".git" / "objects"
    sha = objects.write_loose(store, "blob", b"hello\n", _gitdb(store))
    assert (
        sha
        == subprocess.run(
            ["git", "hash-object", "--stdin"], cwd=root, input="hello\n", capture_output=True, text=True
        ).stdout.strip()
    )
    path = store / sha[:2] / sha[2:]
    assert path.stat().st_mode & 0o777 == 0o444 & ~_umask()
    os.utime(path, (1_000_000, 1_000_000))
    data = path.read_bytes()
    assert objects.write_loose(store, "blob", b"hello\n", _gitdb(store)) == sha
    assert path.stat().st_mtime > 1_000_000 and path.read_bytes() == data
    assert not list(store.glob("*/tmp_obj_*"))


def _gitdb(store: Path) -> Any:
    """GitPython's object database on ``store``, as gitops hands it to write_loose."""
    from gitdb import LooseObjectDB  # type: ignore[import-untyped]

    return LooseObjectDB(str(store))


def _raw(store: Path, sha: str) -> bytes:
    """An object's data, read by git."""
    kind = subprocess.run(
        ["git", "cat-file", "-t", sha], cwd=store.parent.parent, capture_output=True, text=True
    )
    return subprocess.run(
        ["git", "cat-file", kind.stdout.strip(), sha],
        cwd=store.parent.parent,
        capture_output=True,
        check=True,
    ).stdout


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("setting", ["core.sharedRepository=group", "core.fsyncObjectFiles=true"])
def test_a_setting_of_how_git_writes_objects_leaves_them_to_git(tmp_path: Path, setting: str) -> None:
    root, head = _repo(tmp_path)
    git(root, "config", *setting.split("="))
    assert gitops.tree_in_process(root, head, {"DONE.md": b"x\n"}) is None
    commit = gitops.commit_files(root, "main", {"DONE.md": "x\n"}, "m\n")  # git's index builds it
    assert git(root, "show", f"{commit}:DONE.md") == "x\n"


def test_git_dash_c_in_the_environment_leaves_the_objects_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, head = _repo(tmp_path)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "0")
    assert gitops.tree_in_process(root, head, {"DONE.md": b"x\n"}) is None


def test_a_path_through_a_file_is_left_to_git(tmp_path: Path) -> None:
    root, head = _repo(tmp_path)
    with pytest.raises(objects.Unfit):
        objects.tree_with(lambda sha: b"", lambda kind, data: "0" * 40, None, {"..": b""})
    assert gitops.tree_in_process(root, head, {"a0/below": b"x\n"}) is None  # a0 is a file
    store = root / ".git" / "objects"
    with pytest.raises(objects.Unfit):  # said so, not a blob read as a tree
        objects.tree_with(
            lambda sha: _raw(store, sha),
            lambda kind, data: objects.write_loose(store, kind, data, _gitdb(store)),
            git(root, "rev-parse", f"{head}^{{tree}}").strip(),
            {"a0/below": b"x\n"},
        )
    assert gitops.tree_in_process(root, head, {"a": b"x\n"}) is None  # a is a folder


def test_the_archive_commit_moves_only_its_branch_and_stages_only_its_files(tmp_path: Path) -> None:
    root, head = _repo(tmp_path)
    (root / "a0").write_text("a person's change\n")
    commit = gitops.commit_files(root, "main", {"DONE.md": "d\n", "docs/TASKS.md": "t\n"}, "m\n")
    assert git(root, "rev-parse", "main").strip() == commit
    assert git(root, "rev-parse", f"{commit}^").strip() == head
    assert git(root, "diff", "--name-only", head, commit).split() == ["DONE.md", "docs/TASKS.md"]
    assert git(root, "diff", "--cached", "--name-only") == ""  # the index took the new blobs
    assert (root / "a0").read_text() == "a person's change\n"


# ------------------------------------------------------------------ backup refs


def test_a_backup_of_the_same_second_for_another_commit_gets_a_new_name(tmp_path: Path) -> None:
    root, head = _repo(tmp_path)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "2")
    tip = git(root, "rev-parse", "HEAD").strip()
    git(root, "update-ref", "refs/wf/backup/b/S", head)
    refs = gitops.backup_refs(root, [("b", tip), ("main", tip)], "S")
    assert refs == ["refs/wf/backup/b/S-2", "refs/wf/backup/main/S"]
    assert git(root, "rev-parse", "refs/wf/backup/b/S").strip() == head  # never overwritten
    assert git(root, "rev-parse", "refs/wf/backup/b/S-2", "refs/wf/backup/main/S").split() == [tip, tip]
    assert gitops.backup_refs(root, [("b", tip)], "S") == ["refs/wf/backup/b/S-2"]  # held already


def test_backups_are_one_transaction_that_never_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backup ref made by another process after wf looked: the transaction fails as a
    whole (neither ref written) and the other one's backup keeps its commit."""
    root, head = _repo(tmp_path)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "2")
    tip = git(root, "rev-parse", "HEAD").strip()
    git(root, "update-ref", "refs/wf/backup/main/S", head)
    real = gitops.rev
    monkeypatch.setattr(gitops, "rev", lambda cwd, r: None if r.startswith("refs/wf/") else real(cwd, r))
    with pytest.raises(gitops.GitError):
        gitops.backup_refs(root, [("b", tip), ("main", tip)], "S")
    assert git(root, "rev-parse", "refs/wf/backup/main/S").strip() == head
    assert git(root, "for-each-ref", "refs/wf/backup/b") == ""


def test_the_archive_commit_never_moves_a_branch_that_moved_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compare and swap: main moved by someone else while the commit was made stays where
    they put it (the commit fails, nothing staged)."""
    root, head = _repo(tmp_path)
    real = gitops.commit_tree

    def theirs_first(cwd: Path, tree: str, parents: list[str], message: str) -> str:
        git(
            root,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        )
        return real(cwd, tree, parents, message)

    monkeypatch.setattr(gitops, "commit_tree", theirs_first)
    with pytest.raises(gitops.GitError):
        gitops.commit_files(root, "main", {"DONE.md": "d\n"}, "m\n")
    assert git(root, "log", "-1", "--format=%s", "main").strip() == "x"
    assert git(root, "rev-parse", "main^").strip() == head
    assert git(root, "diff", "--cached", "--name-only") == ""
