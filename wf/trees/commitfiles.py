"""wf's own commits of a few files (the archive commit, a night's prep): made beside
whatever the checkout holds, never through its working tree or its staged changes."""

from __future__ import annotations

import os
from pathlib import Path

from wf.base.errors import WfError
from wf.trees import gitfiles, gitops, objects


def commit_files(cwd: Path, branch: str, files: dict[str, str], message: str) -> str:
    """Commit new contents of ``files`` on top of ``branch`` without touching the
    working tree or other staged changes: blobs and a tree are written in-process (else
    built by git in a temporary index), the branch moves by compare-and-swap, and the
    real index takes just these paths' new blobs. Returns the new commit."""
    head = gitops.rev(cwd, branch)
    if head is None:
        raise WfError(f"no branch {branch}")
    data = {p: text.encode() for p, text in files.items()}
    tree = gitops.tree_in_process(cwd, head, data)
    blobs = {p: objects.blob_id(d) for p, d in data.items()}
    if tree is None:
        blobs = {
            p: gitops.run(cwd, "hash-object", "-w", "--stdin", stdin=text).out.strip()
            for p, text in files.items()
        }
    entries = [a for p, blob in blobs.items() for a in ("--cacheinfo", f"100644,{blob},{p}")]
    if tree is None:
        tree = _tree_in_index(cwd, head, entries)
    commit = gitops.commit_tree(cwd, tree, [head], message)
    gitops.update_ref(cwd, f"refs/heads/{branch}", commit, head, reason=message.splitlines()[0])
    gitops.run(cwd, "update-index", "--add", *entries)
    return commit


def _tree_in_index(cwd: Path, head: str, entries: list[str]) -> str:
    """The tree of ``head`` with ``entries`` (``--cacheinfo`` pairs), built by git in a
    temporary index."""
    tmp_index = {
        "GIT_INDEX_FILE": str(
            gitops.git_dir(cwd) / f"{gitfiles.TMP_INDEX}{gitfiles.tmp_index_id(os.getpid())}"
        )
    }
    try:
        gitops.env_run(cwd, tmp_index, "read-tree", head)
        gitops.env_run(cwd, tmp_index, "update-index", "--add", *entries)
        return gitops.env_run(cwd, tmp_index, "write-tree").out.strip()
    finally:
        Path(tmp_index["GIT_INDEX_FILE"]).unlink(missing_ok=True)
