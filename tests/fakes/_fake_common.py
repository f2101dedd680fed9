"""What the fake CLIs (claude, codex, opencode) share: their FAKE_* hooks for the tests,
prompt words, and the way each prints an event or fails. Python 3.11 standard library
only, as the fakes."""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn


_CLEANUP: list[Path] = []


def _cleanup() -> None:
    while _CLEANUP:
        try:
            _CLEANUP.pop().unlink()
        except OSError:
            pass


def _on_signal(signum: int, _frame: object) -> None:
    _cleanup()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_cleanup() -> None:
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
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    mine = d / f"running-{os.getpid()}"
    mine.touch()
    _CLEANUP.append(mine)
    count = len(list(d.glob("running-*")))
    with open(d / "counts.txt", "a", encoding="utf-8") as f:
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
        Path(tmp).write_text(f"{child.pid}\n", encoding="utf-8")
        os.replace(tmp, pidfile)


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
