"""Text from files and workers, made safe for a terminal before it is printed.

A task title, a note, a unit's answer or a worker's log can hold control characters:
an escape sequence that erases and rewrites a row of ``wf list``, a carriage return
that overwrites a line, a bidirectional override that shows text in another order.
``safe`` shows each of them visibly (``^[`` for ESC, ``^M`` for CR, ``\\x9b``, ``\\u202e``)
and leaves everything else, tabs and newlines included, as it is. ``--json`` output
carries the exact text instead (JSON escapes control characters itself).
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional controls.
_UNSAFE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _show(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        return "^" + chr(c + 0x40)
    if c == 0x7F:
        return "^?"
    if c <= 0x9F:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}"


def safe(text: str) -> str:
    """``text`` with every control character shown visibly, never interpreted."""
    return _UNSAFE_RE.sub(_show, text)


def safe_line(text: str) -> str:
    """One line: a newline inside is shown as ``^J`` too."""
    return safe(text).replace("\n", "^J")


def table(rows: list[list[str]]) -> list[str]:
    """Aligned columns; every cell made safe for a terminal first (so widths are right)."""
    if not rows:
        return []
    rows = [[safe_line(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        out.append("  ".join(cells).rstrip())
    return out


def json_safe(document: str) -> str:
    """A JSON document with every control character left in it (DEL, C1, bidirectional;
    json.dumps escapes C0 itself) written as a ``\\uXXXX`` escape: the same data once
    parsed. Such characters can only be inside strings, where the escape is valid."""
    return _UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def fields(line: str) -> dict[str, str]:
    """The ``key=value`` words of one of wf's log lines (orch log, cost ledger, archive);
    a word without ``=`` is not a field. A later key wins."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)
