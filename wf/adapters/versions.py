"""The versions of the agent CLIs wf is tested against, in one place.

``TESTED`` is what ``scripts/record-real-tools`` installs from npm (and records into
``tests/fixtures/real/<tool>-<version>/``) and what the tests marked ``real`` run; on
2026-12-03 each was also the newest on npm (``npm view <package> version``). ``wf doctor``
says when an installed tool is newer than its tested version (its flags and events may
have moved), and the cloud lane refuses a claude older than ``CLOUD_MIN_CLAUDE``.

Standard library only, and no wf import: the recording script loads this file by path.
"""

from __future__ import annotations

import re

# tool -> (npm package, the newest version tested)
TESTED: dict[str, tuple[str, str]] = {
    "claude": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}

# The oldest claude the cloud lane works with: 2.1.197's headless `claude -p --teleport`
# prints nothing (no result event, so wf cannot read a session's state nor pull its work);
# 2.1.332 is the oldest verified to answer (tests/fixtures/real/claude-2.1.332/cloud/).
CLOUD_MIN_CLAUDE = "2.1.332"

_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)\.(\d+)")


def parse(text: str | None) -> tuple[int, int, int] | None:
    """The first X.Y.Z in a ``--version`` answer ("2.1.332 (Claude Code)", "codex-cli
    0.171.0", "1.18.33"), or None."""
    found = _VERSION.search(text or "")
    if found is None:
        return None
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


def said(version: tuple[int, int, int]) -> str:
    return ".".join(str(x) for x in version)


def newer_than_tested(tool: str, answer: str | None) -> str | None:
    """The installed version when it is newer than the one wf was tested with, else None."""
    found = parse(answer)
    tested = TESTED.get(tool)
    if found is None or tested is None:
        return None
    return said(found) if found > (parse(tested[1]) or (0, 0, 0)) else None


def cloud_problem(answer: str | None) -> str | None:
    """Why this ``claude --version`` answer cannot run the cloud lane, or None."""
    found = parse(answer)
    if found is None:
        return (
            f"claude --version gave no version ({answer!r})" if answer else "claude --version gave no answer"
        )
    if found < (parse(CLOUD_MIN_CLAUDE) or (0, 0, 0)):
        return (
            f"claude {said(found)} is older than {CLOUD_MIN_CLAUDE}, the oldest the cloud lane works "
            "with (2.1.197's headless --teleport prints nothing)"
        )
    return None
