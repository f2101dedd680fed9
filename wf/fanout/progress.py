"""A live status line on a terminal: one line, rewritten in place, cut to the terminal's
width. Nothing at all when the stream is not a terminal or ``TERM=dumb``, so logs and
pipes get only the ordinary lines."""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO


class ProgressLine:
    """``update(text)`` shows ``text`` (at most every ``every`` seconds unless forced);
    ``clear()`` removes it, before other output is printed."""

    def __init__(self, stream: TextIO | None = None, every: float = 0.5) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.every = every
        self.shown = False
        self._last = 0.0
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty and os.environ.get("TERM", "") not in ("dumb", "")

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return columns if columns > 0 else shutil.get_terminal_size().columns

    def update(self, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self.shown and now - self._last < self.every:
            return
        self._last = now
        width = max(10, self._width() - 1)
        flat = "".join(c if c.isprintable() else " " for c in text)
        if len(flat) > width:
            flat = flat[: width - 3] + "..."
        self.stream.write("\r" + flat + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.enabled and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
