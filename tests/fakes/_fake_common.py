"""What the fake CLIs (claude, codex, opencode) share: their FAKE_* hooks for the tests,
prompt words, the way each prints an event or fails, and random ids (also the cloud
claude's). Python 3.11 standard library only, as the fakes."""

from __future__ import annotations

import json
import os
import re
import sys
import time

# The suite starts the fakes hundreds of times: they import little more than json (and re)
# at the top. Not pathlib (~10 ms with urllib.parse and ipaddress: os.path does the work),
# uuid (~6 ms with platform: uuid4 below), datetime (~3 ms: time.strftime), random, string or
# secrets (rand_id, os.urandom); what only some paths need (signal, subprocess, sqlite3) is
# imported where it is used.
TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn


_CLEANUP: list[str] = []  # files removed at exit


def _cleanup() -> None:
    while _CLEANUP:
        try:
            os.unlink(_CLEANUP.pop())
        except OSError:
            pass


def _on_signal(signum: int, _frame: object) -> None:
    import signal  # here, not at the top: the fake's start is the suite's

    _cleanup()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_cleanup() -> None:
    import atexit
    import signal  # here, not at the top: the fake's start is the suite's

    atexit.register(_cleanup)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def log_argv() -> None:
    path = os.environ.get("FAKE_ARGV_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(sys.argv) + "\n")


def mark_running() -> None:
    folder = os.environ.get("FAKE_CONCURRENCY_DIR")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    mine = os.path.join(folder, f"running-{os.getpid()}")
    touch(mine)
    _CLEANUP.append(mine)
    count = sum(name.startswith("running-") for name in os.listdir(folder))
    with open(os.path.join(folder, "counts.txt"), "a", encoding="utf-8") as f:
        f.write(f"{count}\n")


def spawn_grandchild() -> None:
    import subprocess  # here, not at the top: the fake's start is the suite's

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)", "fake-grandchild"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    pidfile = os.environ.get("FAKE_GRANDCHILD_PIDFILE")
    if pidfile:
        tmp = f"{pidfile}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{child.pid}\n")
        os.replace(tmp, pidfile)


def folders(path: str) -> list[str]:
    """An absolute path and the folders above it: [Path(path), *Path(path).parents], as str."""
    out = [path]
    while (up := os.path.dirname(out[-1])) != out[-1]:
        out.append(up)
    return out


def touch(path: str) -> None:
    """As pathlib's Path.touch(): the file's times set to now, or the file created empty."""
    try:
        os.utime(path)
    except OSError:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))


def uuid4() -> str:
    """str(uuid.uuid4()) without importing uuid: 16 random bytes, version 4, RFC 4122 variant."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40
    b[8] = b[8] & 0x3F | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"  # string.ascii_letters + digits


def rand_id(n: int) -> str:
    """n characters of ALNUM, each equally likely, without importing random (~4 ms)."""
    out: list[str] = []
    while len(out) < n:  # a byte below 248 (4 * 62) picks a character, a higher one is dropped
        out += [ALNUM[b % 62] for b in os.urandom(n) if b < 248]
    return "".join(out[:n])


def now_iso() -> str:
    """UTC, to the millisecond: 2026-01-01T12:00:00.123Z (datetime's isoformat, without datetime)."""
    seconds, ms = divmod(time.time_ns() // 1_000_000, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def has_word(prompt: str, word: str) -> bool:
    return re.search(rf"\b{word}\b", prompt) is not None


def number_after(prompt: str, word: str) -> float | None:
    m = re.search(rf"\b{word}\s+(\d+(?:\.\d+)?)", prompt)
    return float(m.group(1)) if m else None


def first_line(prompt: str) -> str:
    for line in prompt.splitlines():
        if line.strip():
            return line.strip()
    return ""


def emit(obj: dict[str, Any]) -> None:
    try:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass


def fail(message: str, code: int = 1) -> NoReturn:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    sys.exit(code)


def as_path(raw: str) -> str:
    """str(pathlib.PurePosixPath(raw)) without importing pathlib: doubled and trailing
    slashes and "." parts go, a leading "//" stays (POSIX leaves it to the system)."""
    lead = "//" if raw.startswith("//") and not raw.startswith("///") else "/" if raw.startswith("/") else ""
    parts = [p for p in raw.split("/") if p and p != "."]
    return lead + "/".join(parts) if parts or lead else "."
