"""``run(...)``: ``subprocess.run`` for ``python -m wf``, a real process that skips the
interpreter start (see tests/zygote.py for how, and why).

Call it as ``subprocess.run``: ``run([sys.executable, "-m", "wf", *args], cwd=...,
env=..., input=..., timeout=..., capture_output=True, text=True)``. Anything it cannot
give exactly as an exec would (another program, other keyword arguments, an environment
whose interpreter settings differ from the server's) goes to ``subprocess.run`` itself,
as does everything when the run was started with ``WF_TEST_EXEC=1``.

The server's hash seed is drawn once per test run (``HASHSEED``, printed at the end of
the run) unless the environment sets ``PYTHONHASHSEED``; ``WF_TEST_HASHSEED=N`` replays a
run's seed. A command that sets no ``PYTHONHASHSEED`` is forked with it, as an exec would
draw one of its own; it never appears in the command's environment. See docs/testing.md.
"""

from __future__ import annotations

import array
import atexit
import errno
import json
import os
import random
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.zygote import START_KEYS

ROOT = Path(__file__).resolve().parent.parent
# Read once, as the suite starts: each test's sealed environment drops every WF_ variable.
EXEC = os.environ.get("WF_TEST_EXEC") == "1"
HASHSEED = os.environ.get("WF_TEST_HASHSEED") or str(random.SystemRandom().randrange(1, 2**32))
os.environ["WF_TEST_HASHSEED"] = HASHSEED  # the xdist workers, started after this, share it
SEED_CHOSEN = "WF_ZYGOTE_SEED_CHOSEN"  # tells the server its PYTHONHASHSEED is the run's, not the caller's
_KWARGS = {
    "cwd",
    "env",
    "input",
    "timeout",
    "capture_output",
    "text",
    "check",
    "encoding",
    "errors",
    "stdin",
    "stdout",
    "stderr",
}


@dataclass
class _Server:
    owner: int
    proc: subprocess.Popen[bytes]
    folder: str
    env: dict[str, str]
    path_entries: frozenset[str]
    seed_chosen: bool  # its PYTHONHASHSEED is HASHSEED, not one the caller's environment set

    def stop(self) -> None:
        if self.owner == os.getpid():
            self.proc.kill()
            self.proc.wait()
            shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None
started = 0  # commands run through the server (the tests of this module read it)


_starting = threading.Lock()


def _zygote() -> _Server:
    with _starting:  # one server per process, however many threads ask at once
        return _start()


def _start() -> _Server:
    global _server
    if _server is not None and _server.owner == os.getpid() and _server.proc.poll() is None:
        return _server
    folder = tempfile.mkdtemp(prefix="wf-zygote-")
    env = dict(os.environ)
    chosen = "PYTHONHASHSEED" not in env
    if chosen:
        env.update({"PYTHONHASHSEED": HASHSEED, SEED_CHOSEN: "1"})
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "zygote.py"), os.path.join(folder, "socket"), str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        cwd=folder,  # not the checkout: a command that failed to chdir must not write there
        env=env,
    )
    assert proc.stdout is not None
    if proc.stdout.readline() != b"ready\n":
        raise RuntimeError("the wf process server did not start")
    entries = frozenset(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p) | {str(ROOT)}
    env.pop(SEED_CHOSEN, None)
    _server = _Server(os.getpid(), proc, folder, env, entries, chosen)
    atexit.register(_server.stop)
    return _server


def _forkable(argv: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    if EXEC or set(kwargs) - _KWARGS:
        return False
    if [str(a) for a in argv[:3]] != [sys.executable, "-m", "wf"]:
        return False
    if kwargs.get("stdin", subprocess.DEVNULL) != subprocess.DEVNULL or (
        kwargs.get("stdin") == subprocess.DEVNULL and kwargs.get("input") is not None
    ):
        return False
    piped = kwargs.get("stdout") == subprocess.PIPE and kwargs.get("stderr") == subprocess.PIPE
    return (
        kwargs.get("capture_output", False) is True and "stdout" not in kwargs and "stderr" not in kwargs
    ) or (piped and not kwargs.get("capture_output"))


def _fits(server: _Server, env: Mapping[str, str]) -> bool:
    """Would a new interpreter start in ``env`` as the server did?"""
    for k in START_KEYS:
        if k == "PYTHONHASHSEED" and k not in env and server.seed_chosen:
            continue  # an exec would draw a seed of its own: the server's was drawn for this run
        if env.get(k) != server.env.get(k):
            return False
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return all(p in server.path_entries or Path(p).resolve() == ROOT for p in extra)


class _Deadline(Exception):
    pass


def _decode(data: bytes, encoding: str, errors: str) -> str:
    """As subprocess's text mode: decoded, with universal newlines."""
    return data.decode(encoding, errors).replace("\r\n", "\n").replace("\r", "\n")


def run(argv: Sequence[Any], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    global started
    if not _forkable(argv, kwargs):
        return subprocess.run(argv, **kwargs)
    given: Mapping[str, str] | None = kwargs.get("env")
    env = {str(k): str(v) for k, v in (os.environ if given is None else given).items()}
    server = _zygote()
    if not _fits(server, env):
        return subprocess.run(argv, **kwargs)
    text = bool(kwargs.get("text") or kwargs.get("encoding") or kwargs.get("errors"))
    encoding = kwargs.get("encoding") or "utf-8"
    errors = kwargs.get("errors") or "strict"
    data = kwargs.get("input")
    if isinstance(data, str):
        data = data.encode(encoding, errors)
    cwd = os.fsdecode(os.path.abspath(kwargs["cwd"])) if kwargs.get("cwd") is not None else os.getcwd()
    if not os.path.isdir(cwd):  # subprocess.run's own error, raised here as there
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
    args = [os.fsdecode(a) if isinstance(a, bytes | os.PathLike) else str(a) for a in argv[3:]]
    request = json.dumps({"argv": args, "cwd": cwd, "env": env}).encode()
    started += 1

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if data is not None:
        in_r, in_w = os.pipe()
    else:
        in_r, in_w = os.open(os.devnull, os.O_RDONLY), -1
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.path.join(server.folder, "socket"))
        conn.sendmsg(
            [struct.pack("!I", len(request)) + request],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [in_r, out_w, err_w]))],
        )
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)  # the command has them now
    timeout: float | None = kwargs.get("timeout")
    talk = _Talk(conn, out_r, err_r, in_w, data or b"")

    def outputs() -> tuple[Any, Any]:
        """stdout and stderr so far, as subprocess gives them."""
        out, err = b"".join(talk.chunks[out_r]), b"".join(talk.chunks[err_r])
        return (_decode(out, encoding, errors), _decode(err, encoding, errors)) if text else (out, err)

    try:
        talk.run(None if timeout is None else time.monotonic() + timeout)
    except _Deadline:
        raise subprocess.TimeoutExpired(list(argv), timeout or 0, *outputs()) from None
    lines = talk.answer.split(b"\n")
    if len(lines) < 3:
        raise RuntimeError(f"the wf process server dropped {argv[3:]!r}")
    result = subprocess.CompletedProcess(list(argv), os.waitstatus_to_exitcode(int(lines[1])), *outputs())
    if kwargs.get("check"):
        result.check_returncode()
    return result


class _Talk:
    """One command's exchange with the server: its stdin written, its stdout and stderr
    read, its pid then its wait status (``answer``) received, all until each is closed."""

    def __init__(self, conn: socket.socket, out_r: int, err_r: int, in_w: int, data: bytes) -> None:
        self.conn, self.in_w = conn, in_w
        self.chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        self.answer = b""
        self.pending = memoryview(data)
        self.still_open = {out_r, err_r} | ({in_w} if in_w >= 0 else set())

    def run(self, deadline: float | None) -> None:
        try:
            self._pump(deadline)
        except BaseException:
            # As subprocess.run, whatever ended the wait (the timeout, a Ctrl-C): kill the
            # command, even one whose pid has not arrived yet, and wait for it.
            self._kill()
            raise
        self.conn.close()

    def _pump(self, deadline: float | None) -> None:
        with selectors.DefaultSelector() as sel:
            for fd in self.chunks:
                sel.register(fd, selectors.EVENT_READ)
            sel.register(self.conn, selectors.EVENT_READ)
            if self.in_w >= 0:
                sel.register(self.in_w, selectors.EVENT_WRITE)
            while sel.get_map():
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    raise _Deadline
                for key, _ in sel.select(wait):
                    if key.fileobj is self.conn:  # the command's pid, then its wait status
                        got = self.conn.recv(4096)
                        self.answer += got
                        if not got:
                            sel.unregister(self.conn)
                    elif key.fd == self.in_w:
                        try:
                            n = os.write(self.in_w, self.pending[:65536])
                        except BrokenPipeError:
                            n = len(self.pending)
                        self.pending = self.pending[n:]
                        if not self.pending:
                            self._done(sel, self.in_w)
                            self.in_w = -1
                    else:
                        got = os.read(key.fd, 65536)
                        if got:
                            self.chunks[key.fd].append(got)
                        else:
                            self._done(sel, key.fd)

    def _done(self, sel: selectors.BaseSelector, fd: int) -> None:
        sel.unregister(fd)
        os.close(fd)
        self.still_open.discard(fd)

    def _kill(self) -> None:
        conn = self.conn
        try:
            conn.settimeout(30)
            while b"\n" not in self.answer and (got := conn.recv(4096)):
                self.answer += got
            if b"\n" in self.answer:
                try:
                    os.kill(int(self.answer.split(b"\n", 1)[0]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
                while self.answer.count(b"\n") < 2 and (got := conn.recv(4096)):
                    self.answer += got
        except OSError:
            pass
        for fd in self.still_open:
            os.close(fd)
        conn.close()
