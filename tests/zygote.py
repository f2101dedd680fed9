"""A wf process factory for the tests: ``python -m wf`` without the interpreter start.

Most of the suite's CPU went to starting Python and importing click and wf again for
each of the ~1,000 wf commands the tests run to completion (about 90 of a command's
~150 ms). This server imports wf once; each request forks a fresh process that becomes
that command: its own pid, its own stdin/stdout/stderr (the client's pipe ends, passed
over the socket), the client's working directory, environment and arguments, and the
exit status the client reads back as ``subprocess.run`` would. The command then runs as
``python -m wf`` runs it (``runpy`` on wf's ``__main__``), and ends as an interpreter
ends: threads joined, ``atexit`` handlers run, streams flushed, or killed by a signal.

What a fork cannot give is left to a real exec: the client (tests/wfproc.py) starts a
real ``python -m wf`` whenever the environment changes what an interpreter does at
start (its locale, ``PYTHON*`` settings, a ``PYTHONPATH`` beyond this one's), and for
every wf process a test signals, detaches or watches while it runs.

What it cannot show, because it imported every wf module before any command runs: a
lazy import (inside a function) that fails, or an import that works only because another
module was imported first. tests/test_imports.py shows those, in fresh interpreters and
with real ``python -m wf`` processes (docs/testing.md). Its hash seed is one per test run
(tests/wfproc.py's ``HASHSEED``): printed at the end of the run, replayed with
``WF_TEST_HASHSEED``.

Protocol, one connection per command: the client sends a length-prefixed JSON request
``{"argv", "cwd", "env"}`` with three file descriptors (stdin, stdout, stderr) in the
same message; the server answers with the command's pid, then its wait status, each as
a line of text.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import struct
import sys
from typing import Any

# Python's own start-up choices, restored in each command (the server changes none of
# them, but a command must not inherit a handler the server might have set).
# The environment an interpreter reads as it starts: the client hands a command to this
# server only when these match the server's own.
START_KEYS = (
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONUNBUFFERED",
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "PYTHONDEVMODE",
    "PYTHONSAFEPATH",
    "PYTHONHOME",
    "PYTHONMALLOC",
    "PYTHONFAULTHANDLER",
    "PYTHONOPTIMIZE",
    "PYTHONNOUSERSITE",
    "PYTHONINSPECT",
    "PYTHONDONTWRITEBYTECODE",
)
# What the client chose for the server alone (the run's hash seed): a command that did not
# set it gets it as an exec draws its own seed, never in its environment.
_CHOSEN: set[str] = set()
_SIGNALS: dict[int, Any] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGPIPE: signal.SIG_IGN,
    signal.SIGXFSZ: signal.SIG_IGN,
}


def _recv_request(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    fds: list[int] = []
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        msg, anc, _flags, _addr = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(struct.unpack(f"{len(payload) // 4}i", payload[: len(payload) // 4 * 4]))
        if not msg:
            raise EOFError("the client went away")
        data += msg
    return json.loads(data[4:]), fds


def _take_over(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: the client's descriptors, cwd and environment, and the signal
    handlers a new interpreter starts with."""
    import time

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, _SIGNALS.get(sig, signal.SIG_DFL))
        except (OSError, ValueError):
            pass
    os.chdir(str(request["cwd"]))
    env = request["env"]
    assert isinstance(env, dict)
    # The client made sure the settings an interpreter reads at start are the ones this
    # server started with; what the server's start added to them (PEP 538's LC_CTYPE)
    # a new interpreter would add too.
    added = {k: os.environ[k] for k in START_KEYS if k in os.environ and k not in env and k not in _CHOSEN}
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(added)
    time.tzset()


def _new_streams() -> None:
    """The streams as a new interpreter makes them for fds 0-2: the server's own encoding
    and error handlers (same locale), buffering by what each fd is."""
    import io

    old = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    streams = []
    for fd, like in enumerate(old):
        assert isinstance(like, io.TextIOWrapper)
        if fd == 0:
            streams.append(
                io.TextIOWrapper(
                    io.BufferedReader(io.FileIO(0, "rb", closefd=False)),
                    like.encoding,
                    like.errors,
                    newline="\n",
                )
            )
            continue
        unbuffered = like.write_through
        raw: io.RawIOBase | io.BufferedWriter = io.FileIO(fd, "wb", closefd=False)
        if not unbuffered:
            raw = io.BufferedWriter(raw)
        streams.append(
            # unbuffered, Python too wraps the raw FileIO
            io.TextIOWrapper(
                raw,  # type: ignore[arg-type]
                like.encoding,
                like.errors,
                newline="\n",  # as CPython's own standard streams on POSIX
                line_buffering=not unbuffered and (os.isatty(fd) or fd == 2),
                write_through=unbuffered,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]


def _become(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: turn into ``python -m wf ARGV`` and never return."""
    import atexit
    import runpy
    import threading
    import traceback

    _take_over(request, fds)
    _new_streams()
    sys.path[0] = os.getcwd()
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = ["-m", *(str(a) for a in argv)]  # runpy puts wf/__main__.py first
    sys.orig_argv = [sys.executable, "-m", "wf", *sys.argv[1:]]
    code: object = 0
    try:
        runpy.run_module("wf", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        traceback.print_exc()
        code = "SIGINT"
    except BaseException:
        traceback.print_exc()
        code = 1
    status = 0
    if code == "SIGINT":
        status = -1
    elif code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)  # before the atexit handlers, as the interpreter does
        status = 1
    # The interpreter's own ending: non-daemon threads, atexit, the streams.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                status = 120
    if status == -1:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status)


def _handle(conn: socket.socket) -> None:
    """In a forked helper: fork the command, say its pid, wait, say its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request, fds = _recv_request(conn)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _become(request, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{status}\n".encode())
    conn.close()
    os._exit(0)


def serve(path: str, parent: int) -> None:
    if os.environ.pop("WF_ZYGOTE_SEED_CHOSEN", None) == "1":
        _CHOSEN.add("PYTHONHASHSEED")
    # Everything a command may import, imported once here.
    import pkgutil

    import wf

    for mod in pkgutil.walk_packages(wf.__path__, "wf."):
        if not mod.name.endswith("__main__"):
            __import__(mod.name)
    # What was imported is never freed: out of the collector's sight, each command's
    # collections skip it, and do not write to (so copy) the pages it shares with the server
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the helpers reap themselves
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    server.settimeout(1.0)
    print("ready", flush=True)
    while os.getppid() == parent:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            server.close()
            try:
                _handle(conn)
            finally:
                os._exit(1)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
