"""A unit's answer in its run folder: ``output.txt``, written durably, never overwritten.

Where it comes from (``status["answer"]``): a file the worker wrote itself (codex ``-o``,
a command's ``answer.out``), its standard output (a command), the result event the
supervisor parsed, or, when it gave none, a FALLBACK made from what it printed last.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wf.base import fsutil
from wf.workers import runs

FALLBACK_LINES = 40


def land(folder: Path, adapter: str, parsed: str | None, code: int | None, status: dict[str, Any]) -> bool:
    """Put the answer in output.txt, durably; True if the unit gave one. An empty
    answer is no answer (the unit gets a FALLBACK)."""
    out = folder / "output.txt"
    if _has_text(out):  # the worker wrote it (codex -o)
        _sync_file(out)
        status["answer"] = "output_file"
        return True
    if adapter == "cmd":
        written = folder / "answer.out"
        if _has_text(written):
            _sync_file(written)
            os.replace(written, out)
            status["answer"] = "output_file"
            return True
        log = folder / "worker.log"
        if code == 0 and _has_text(log):
            _link_or_copy(log, out)  # the answer is the stream: never a second copy in memory
            status["answer"] = "stdout"
            return True
        return False
    if parsed is not None and parsed.strip():
        # the final status.json, written durably next, syncs the folder for both
        runs.write_file(out, parsed.encode("utf-8"), durable=True, dir_sync=False)
        status["answer"] = "result"
        return True
    return False


def _has_text(path: Path) -> bool:
    """A file with something in it other than white space (read from its start only)."""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(65536):
                if chunk.strip():
                    return True
    except OSError:
        pass
    return False


def _sync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_or_copy(src: Path, dest: Path) -> None:
    """``dest`` becomes the same bytes as ``src`` without reading them into memory: a
    hard link where the file system allows one, else a streamed copy; its data synced
    (the folder is synced by the final status.json)."""
    import shutil

    tmp = dest.with_name(f".{dest.name}.link")
    try:
        tmp.unlink(missing_ok=True)
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    _sync_file(tmp)
    os.replace(tmp, dest)


def salvage(folder: Path, status: dict[str, Any], snippets: list[str], code: int | None) -> None:
    """A FALLBACK answer from what the worker showed last (its text messages, else the
    tail of its log), marked as such in ``status``; an answer already there is kept."""
    out = folder / "output.txt"
    if _has_text(out):
        return
    lines: list[str] = snippets[-10:]
    if not lines:
        for name in ("worker.log", "worker.err"):
            lines += fsutil.tail_text(folder / name, 64 * 1024).splitlines()[-FALLBACK_LINES:]
    how = f"state {status.get('state')}" + (f", exit {code}" if code is not None else "")
    header = f"FALLBACK: unit {status.get('unit')} ended without an answer ({how})."
    header += " The last things it printed:"
    text = header + "\n\n" + "\n".join(lines[-FALLBACK_LINES:]) + "\n"
    runs.write_file(out, text.encode("utf-8"), durable=True, dir_sync=False)  # status.json follows
    status["answer"] = "fallback"
    status["fallback"] = True
