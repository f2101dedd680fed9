"""A scripted worker: behaves like an agent through the worker contract, with no model.

It is what ``wf demo`` and the tests run through the ``cmd`` adapter
(``python -m wf.scripted``): it reads the prompt on stdin, runs ``wf ctx`` for its task,
follows the ``script:`` lines of the task's text, commits on its branch, runs
``wf merge``, adds follow-ups with ``wf add`` and prints the four report lines.

Script lines (in the task's body):

| line | what the worker does |
|---|---|
| ``script: write PATH TEXT`` | writes TEXT (``\\n`` for new lines) to PATH in its worktree |
| ``script: followup TITLE`` | adds a follow-up task in the same lane |
| ``script: slice ID=TITLE|ID=TITLE`` | on a slice job, adds these slices |
| ``script: awaiting QUESTION`` | reports awaiting |
| ``script: hang`` | commits its files, then hangs (until killed); not on a recovery |
| ``script: crash`` | exits without a report |
| ``script: raise MODEL`` | raises its task's Model and hands it back |
| ``script: wip NOTE`` | commits its files and reports wip |
| ``script: noreport`` | ends normally without the four lines |
| ``script: nomerge`` | reports done without merging |

Before merging it runs the task's Done command (the text between backticks) in its
worktree; if that fails it hands the task back.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _wf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``wf ARGS`` in ``cwd``, as an agent runs it, through wf's command line but in this
    process: the same parsing, output and exit code, without a Python start for each of
    the worker's two or three calls (in ``wf demo``, a third of the scripted worker's time)."""
    import contextlib
    import io

    from wf.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    stdin = sys.stdin
    os.chdir(cwd)
    try:
        sys.stdin = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        sys.stdin = stdin
        os.chdir(here)
    return subprocess.CompletedProcess(["wf", *args], code, out.getvalue(), err.getvalue())


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.setdefault("GIT_AUTHOR_NAME", "wf scripted worker")
    env.setdefault("GIT_AUTHOR_EMAIL", "worker@wf.invalid")
    env.setdefault("GIT_COMMITTER_NAME", "wf scripted worker")
    env.setdefault("GIT_COMMITTER_EMAIL", "worker@wf.invalid")
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL
    )


LINGER = 0.0  # seconds to stay after the report (a claude waiting for background tasks)


def report(result: str, commit: str = "-", followups: str = "-", note: str = "") -> int:
    print(f"result: {result}\ncommit: {commit}\nfollowups: {followups}\nnote: {note}", flush=True)
    if LINGER:
        time.sleep(LINGER)
    return 0


def parse_prompt(prompt: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in prompt.splitlines():
        m = re.match(r"Task: (\S+)\s+Lane: (\S+)\s+Model: (\S+)", line)
        if m:
            info.update(id=m.group(1), lane=m.group(2), model=m.group(3))
        m = re.match(r"Main tree: (.+?)\s+Worktree: (.+?)\s+Branch: (\S+)", line)
        if m:
            info.update(main=m.group(1), worktree=m.group(2), branch=m.group(3))
        if line.startswith("Recovery:"):
            info["recovery"] = line.partition(":")[2].strip()
        if line.startswith("Slice job:"):
            info["slice"] = "1"
    return info


def directives(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        if line.startswith("script:"):
            verb, _, rest = line[len("script:") :].strip().partition(" ")
            out.append((verb, rest.strip()))
    return out


def main() -> int:
    prompt = sys.stdin.read()
    info = parse_prompt(prompt)
    if "id" not in info or "worktree" not in info:
        print("the prompt has no Task and Worktree lines", file=sys.stderr)
        return 2
    tid, tree = info["id"], Path(info["worktree"])
    ctx = _wf("ctx", tid, "--json", cwd=tree)
    if ctx.returncode != 0:
        return report("handback", note=f"wf ctx failed: {ctx.stderr.strip()}")
    c: dict[str, Any] = json.loads(ctx.stdout)
    steps = directives(c["text"])
    verbs = {v for v, _ in steps}
    global LINGER
    LINGER = next((float(rest or 1) for verb, rest in steps if verb == "linger"), 0.0)
    if "crash" in verbs:
        print("scripted crash", file=sys.stderr)
        return 3
    if info.get("slice"):
        return _slice(steps, info, tree)
    stopped = _stop_before_work(steps, info, tree)
    if stopped is not None:
        return stopped
    refused = _write_files(steps, tree)
    if refused is not None:
        return refused
    head = _commit(tid, c["title"], tree)
    if "hang" in verbs and not info.get("recovery"):
        time.sleep(3600)
    for verb, rest in steps:
        if verb == "wip":
            return report("wip", commit=head, note=rest or "half way")
    if "nomerge" in verbs:
        return report("done", commit=head, note="done (not merged)")
    return _check_and_merge(steps, info, c.get("done") or "", tree, head)


def _slice(steps: list[tuple[str, str]], info: dict[str, str], tree: Path) -> int:
    """A slice job: add the slices its ``slice`` lines name, as tasks under this one."""
    ids = []
    for verb, rest in steps:
        if verb != "slice":
            continue
        for part in rest.split("|"):
            sid, _, title = (x.strip() for x in part.partition("="))
            body = f"script: write {sid}.txt {title}"
            r = _wf(
                "add", title, "--id", sid, "--parent", info["id"], "--model", info["model"],
                "--effort", "1", "--done", "true", "--body", body, cwd=tree,
            )  # fmt: skip
            if r.returncode != 0:
                return report("handback", note=f"wf add failed: {r.stderr.strip()}")
            ids.append(r.stdout.strip())
    if not ids:
        return report("handback", note="a slice job with no slice line in its script")
    return report("sliced", followups=",".join(ids), note=f"split into {len(ids)} tasks")


def _stop_before_work(steps: list[tuple[str, str]], info: dict[str, str], tree: Path) -> int | None:
    """The first script line that ends the job before any work: a question, a stronger
    model, or no report; None to go on."""
    for verb, rest in steps:
        if verb == "awaiting":
            return report("awaiting", note=rest or "a question for the owner")
        if verb == "raise" and rest != info["model"]:
            r = _wf("set", info["id"], "--model", rest, cwd=tree)
            if r.returncode == 0:
                return report("handback", note=f"needs a stronger model: raised to {rest}")
        if verb == "noreport":
            print("all finished, but I forgot the report lines")
            return 0
    return None


def _write_files(steps: list[tuple[str, str]], tree: Path) -> int | None:
    """Write the files of the ``write`` lines in the worktree; a handback for a path
    outside it (None: all written)."""
    for verb, rest in steps:
        if verb == "write":
            path, _, text = rest.partition(" ")
            target = (tree / path).resolve()
            if tree.resolve() not in target.parents:
                return report("handback", note=f"refusing to write outside the worktree: {path}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.replace("\\n", "\n") + "\n")
    return None


def _commit(tid: str, title: str, tree: Path) -> str:
    """Commit what changed in the worktree (if anything); the commit at its HEAD."""
    _git("add", "-A", cwd=tree)
    if _git("diff", "--cached", "--quiet", cwd=tree).returncode != 0:
        _git("commit", "-q", "-m", f"{tid}: {title}", cwd=tree)
    return _git("rev-parse", "HEAD", cwd=tree).stdout.strip()


def _check_and_merge(
    steps: list[tuple[str, str]], info: dict[str, str], done: str, tree: Path, head: str
) -> int:
    """Run the Done command, merge with ``wf merge``, add the follow-ups: done, or a
    handback when the check or the merge fails."""
    m = re.search(r"`([^`]+)`", done)
    if m:
        check = subprocess.run(shlex.split(m.group(1)), cwd=tree, capture_output=True, text=True)
        if check.returncode != 0:
            return report("handback", commit=head, note=f"Done check failed: {m.group(1)}")
    merged = _wf("merge", cwd=tree)
    if merged.returncode != 0:
        return report(
            "handback", commit=head, note=f"wf merge failed: {merged.stderr.strip().splitlines()[0]}"
        )
    followups = [_followup(rest, info, tree) for verb, rest in steps if verb == "followup"]
    added = ",".join(f for f in followups if f is not None) or "-"
    return report("done", commit=head, followups=added, note=f"{info['id']} done and merged")


def _followup(title: str, info: dict[str, str], tree: Path) -> str | None:
    """Add a follow-up task in the same lane; its id, or None when wf add refused it."""
    name = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "followup"
    body = f"script: write notes/{name}.md {title}"
    r = _wf(
        "add",
        title,
        "--model",
        info["model"],
        "--lane",
        info["lane"],
        "--done",
        "true",
        "--body",
        body,
        cwd=tree,
    )
    return r.stdout.strip() if r.returncode == 0 else None


if __name__ == "__main__":
    sys.exit(main())
