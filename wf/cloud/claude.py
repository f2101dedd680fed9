"""The real cloud backend: Claude Code's ``--cloud`` and ``--teleport``.

What Claude Code 2.1.332 does (recorded offline in ``tests/fixtures/real/claude-2.1.332/
cloud/``, the rest read from the binary's strings):

- ``claude --cloud "<task>"`` needs a terminal (without one: "Error: --cloud requires an
  interactive terminal."; with ``-p``: "Error: --cloud cannot be combined with --print.").
  Under a pty it prints ``Created cloud session: <title>``, ``View: <url>`` and ``Resume
  with: claude --teleport <id>``, then exits 0; not logged in it prints "Error: Cloud
  sessions need a claude.ai sign-in. ..." and exits 1. It does not refuse a repository
  without a GitHub remote (it uploads a bundle instead), but such a session's work can
  never be teleported back into this checkout: wf refuses it first, saying so.
- ``claude -p --teleport <id> --output-format stream-json --verbose "<prompt>"`` brings
  the session into the current checkout (its branch checked out, its conversation
  resumed locally) and answers the prompt; a dirty tree is refused before anything else
  ("You have uncommitted changes. Commit or stash them before using --teleport."), and
  a checkout of another repository is refused ("Run claude --teleport <id> from a
  checkout of <repo>."). Failures are a ``result`` event with ``is_error`` and
  ``errors[]``, exit 1.

wf runs create in the main checkout (under a pty) and teleports in a clean tree of its
own, ``.worktrees/_cloud``, detached at main, so neither a person's edits nor a lane's
tree is ever touched.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from wf.cloud.backend import (
    CloudRefused,
    Refusal,
    Session,
    SessionState,
    SessionStatus,
    is_github,
    plain,
    refused,
    valid_session,
)
from wf.trees import gitops

CREATE_TIMEOUT = 180.0  # seconds: uploading a repository can take a while
STATE_TIMEOUT = 900.0
_RESULT_LINE = re.compile(r"^[\s>*_`#-]*result[*_`\s]*:[ \t]*(.*)$", re.I | re.M)
_STRIP = ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_CODE_ENTRYPOINT")

# What claude asks on a terminal before it does anything (first run, a new folder):
# a create that meets one of these is ended at once instead of waiting for its timeout.
QUESTIONS = (
    "Is this a project you created or one you trust",
    "Choose the text style",
    "Select login method",
)

STATUS_PROMPT = (
    "This is wf reading the state of the cloud session you just resumed. Do not change any "
    "file and do not run any command. Answer with exactly the four report lines of the "
    "session's last message (result, commit, followups, note), as they were written. If the "
    "session is still working, answer the one line 'result: running'. If it ended without "
    "the four lines, answer 'result: lost' and a 'note:' line saying why."
)


def _program() -> str:
    found = shutil.which("claude")
    if found is None:
        raise CloudRefused(
            Refusal.NO_PROGRAM, "no claude on PATH", "install Claude Code: npm i -g @anthropic-ai/claude-code"
        )
    return found


_VERSION_PASSED: set[tuple[str, int]] = set()  # (program, its mtime): checked once per process


def check_version(program: str) -> None:
    """Refuse (TOO_OLD) a claude whose ``--version`` says it is older than the oldest the
    cloud lane works with. An answer with no version in it (the probe killed, say, by a
    batch ending around it) refuses nothing here: ``wf doctor`` reports it."""
    from wf.adapters.versions import CLOUD_MIN_CLAUDE, cloud_problem, parse

    try:
        key = (program, os.stat(program).st_mtime_ns)
    except OSError:
        key = (program, 0)
    if key in _VERSION_PASSED:
        return
    try:
        p = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL, env=_env())  # fmt: skip
        answer = (p.stdout or p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return
    if parse(answer) is None:
        return
    why = cloud_problem(answer)
    if why is not None:
        raise CloudRefused(
            Refusal.TOO_OLD,
            why,
            f"update it: npm install -g @anthropic-ai/claude-code (>= {CLOUD_MIN_CLAUDE})",
        )
    _VERSION_PASSED.add(key)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    env.setdefault("TERM", "xterm-256color")
    return env


def github_remote(repo: Path) -> str:
    """The repository's GitHub remote URL; CloudRefused (before anything runs) without one."""
    remotes = gitops.out(repo, "remote", "-v").split("\n")
    for line in remotes:
        parts = line.split()
        if len(parts) >= 2 and is_github(parts[1]):
            return parts[1]
    raise CloudRefused(
        Refusal.NO_GITHUB_REMOTE,
        f"{repo} has no GitHub remote",
        "a cloud session clones the repository from GitHub and its work comes back as a branch "
        "there: git remote add origin git@github.com:OWNER/REPO.git && git push -u origin HEAD",
    )


def run_pty(argv: list[str], cwd: Path, timeout: float, until: str | None = None) -> tuple[int | None, str]:
    """Run ``argv`` on a pseudo-terminal of its own (a new session); (exit, output).
    With ``until``, the program is ended once that text appeared and it went quiet for a
    second (``claude --cloud`` may stay to attach); exit None if it had to be ended."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=_env(), stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
    except OSError as e:
        os.close(master)
        os.close(slave)
        raise CloudRefused(Refusal.NO_PROGRAM, f"{argv[0]}: {e.strerror or e}") from None
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's other side closed
                    chunk = b""
                if chunk:
                    out += chunk
                    quiet_since = time.monotonic()
                    continue
                if proc.poll() is not None:
                    break
            if proc.poll() is not None:
                break
            text = plain(out.decode("utf-8", "replace"))
            seen = until is not None and until in text
            if seen and time.monotonic() - quiet_since > 1.0:
                break
            if time.monotonic() - quiet_since > 1.0 and any(q in " ".join(text.split()) for q in QUESTIONS):
                break  # it waits for a person's answer: nobody here will give one
    finally:
        if proc.poll() is None:
            _end(proc)
        os.close(master)
    code = proc.wait()
    return (code if code >= 0 else None), out.decode("utf-8", "replace")


def _end(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


def parse_create(text: str) -> Session:
    """The session ``claude --cloud`` created, from its output; CloudRefused otherwise."""
    lines = [ln.strip() for ln in plain(text).split("\n")]
    title = sid = url = None
    for ln in lines:
        if ln.startswith("Created cloud session:"):
            title = ln.partition(":")[2].strip()
        elif ln.startswith("Session ID:"):
            sid = ln.partition(":")[2].strip() or sid
        elif ln.startswith("View:"):
            url = ln.partition(":")[2].strip() or None
        elif ln.startswith("Resume with: claude --"):
            sid = sid or (ln.split()[-1] if len(ln.split()) >= 5 else None)
    if title is not None and sid:
        return Session(sid, url, title)
    errors = [i for i, ln in enumerate(lines) if ln.startswith("Error:")]
    if errors:
        return _raise(" ".join(ln for ln in lines[errors[-1] :] if ln))
    text = " ".join(ln for ln in lines if ln)
    for q in QUESTIONS:
        if q in " ".join(text.split()):
            raise CloudRefused(
                Refusal.NEEDS_SETUP,
                f"claude asked {q!r} before creating a session",
                "run claude once in this repository, answer it, and sign in",
            )
    return _raise(text[-300:] or "claude --cloud printed nothing")


def _raise(words: str) -> Session:
    raise refused(words)


def parse_stream(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the last ``result`` event, the first session id) of a stream-json output."""
    result = None
    session = None
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict):
            continue
        if session is None and isinstance(ev.get("session_id"), str):
            session = ev["session_id"]
        if ev.get("type") == "result":
            result = ev
    return result, session


def status_from(result: dict[str, Any], local_session: str | None) -> SessionStatus:
    """A session's state from the teleport's result event (CloudRefused on a refusal that
    is not the session's doing)."""
    from wf.orch.report import read_report

    if result.get("is_error"):
        errors = result.get("errors") or []
        words = str(errors[0]) if errors else str(result.get("result") or "teleport failed")
        err = refused(words)
        if err.kind is Refusal.NOT_FOUND:
            return SessionStatus(SessionState.LOST, err.words, None, local_session)
        raise err
    answer = str(result.get("result") or "")
    first = ""
    for m in _RESULT_LINE.finditer(answer):
        first = (re.findall(r"[a-z]+", m.group(1).lower()) or [""])[0]
    if first == "running":
        return SessionStatus(SessionState.RUNNING, "", None, local_session)
    rep = read_report(answer)
    if rep is None:
        why = "ended without the four report lines" if first != "lost" else "ended without a report"
        note = " ".join(ln for ln in answer.splitlines() if ln.lower().startswith("note:"))[5:].strip()
        return SessionStatus(SessionState.LOST, note or why, None, local_session)
    state = {
        "done": SessionState.DONE,
        "awaiting": SessionState.AWAITING,
    }.get(rep.result, SessionState.HANDBACK)  # handback, wip, sliced: back to a person's lane
    return SessionStatus(state, rep.note, rep.commit, local_session)


class ClaudeBackend:
    name = "claude"

    def check(self, repo: Path) -> None:
        check_version(_program())
        github_remote(repo)

    def create(self, repo: Path, prompt: str, title: str) -> Session:
        github_remote(repo)
        argv = [_program(), f"--cloud={prompt}", f"--name={title}"]
        code, out = run_pty(argv, repo, CREATE_TIMEOUT, until="Resume with:")
        session = parse_create(out)  # raises with the tool's words if none was created
        del code
        return session

    def __init__(self) -> None:
        self._before: dict[str, set[str]] = {}  # session -> the branches before its teleport

    def state(self, repo: Path, session: str, workdir: Path) -> SessionStatus:
        if not valid_session(session):
            raise CloudRefused(Refusal.OTHER, f"{session!r} is not a session id wf accepts")
        github_remote(repo)
        heads = gitops.out(repo, "for-each-ref", "--format=%(refname)", "refs/heads/")
        self._before[session] = set(heads.split())
        argv = [
            _program(),
            "-p",
            f"--teleport={session}",
            "--output-format",
            "stream-json",
            "--verbose",
            STATUS_PROMPT,
        ]
        try:
            p = subprocess.run(
                argv,
                cwd=workdir,
                env=_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=STATE_TIMEOUT,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            why = f"claude --teleport {session} gave no answer in {STATE_TIMEOUT:g}s"
            raise CloudRefused(Refusal.OTHER, why) from None
        except OSError as e:
            raise CloudRefused(Refusal.NO_PROGRAM, f"{argv[0]}: {e.strerror or e}") from None
        result, local = parse_stream(p.stdout)
        if result is None:
            raise refused((p.stderr or p.stdout or f"claude exited {p.returncode}").strip()[-500:])
        return status_from(result, local)

    def pull(self, repo: Path, session: str, workdir: Path, branch: str) -> str | None:
        """After ``state``: the teleport checked the session's branch out in ``workdir``;
        ``branch`` is pointed at it and ``workdir`` goes back to main, detached. The branch
        the teleport made is then deleted, only if it did not exist before the teleport (a
        person's branch, main, is never touched) and still points at what was pulled."""
        before = self._before.pop(session, None)
        tip = gitops.rev(workdir, "HEAD")
        teleported = gitops.current_branch(workdir)
        main = gitops.rev(repo, "HEAD")
        if main is None:
            return None
        own = False
        try:
            own = tip is not None and not gitops.is_ancestor(repo, tip, main)
            if own and tip is not None:
                gitops.run(repo, "branch", "--force", "--no-track", branch, tip)
        finally:
            gitops.detach(workdir, main)
        made = before is not None and bool(teleported) and f"refs/heads/{teleported}" not in before
        if tip is not None and made and teleported != branch:
            # the teleport's own branch, whose commit main or cloud/<id> now holds: dropped
            # only if it still points exactly there (compare-and-swap), so nothing is lost
            gitops.run(repo, "update-ref", "-d", f"refs/heads/{teleported}", tip, ok=(0, 1, 128))
        return tip if own else None

    def cost(self, status: SessionStatus) -> float | None:
        from wf import adapters
        from wf.cost import usage

        found = adapters.session_cost("claude", status.local_session)
        if found is None or found[0].source is usage.CostSource.unpriced:
            return None  # an unknown cost is usd=? in the ledger, never $0
        return round(found[0].usd, 6)
