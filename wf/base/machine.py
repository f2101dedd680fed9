"""Which machine this is, for claims shared between machines: ``$WF_MACHINE``, else the
host's name (its first label), checked to be a plain name before it is written anywhere."""

from __future__ import annotations

import os
import re
import socket

from wf.base.errors import UsageError

MACHINE_VAR = "WF_MACHINE"
_NAME = re.compile(r"(?!-)[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?<![.])")


def this_machine() -> str:
    """This machine's name: ``$WF_MACHINE`` (refused unless a plain name), else the
    host's name up to its first dot, with anything but letters, digits, ``_`` and ``-``
    replaced."""
    given = os.environ.get(MACHINE_VAR)
    if given is not None:
        if not _NAME.fullmatch(given):
            raise UsageError(
                f"{MACHINE_VAR}={given!r}: a machine's name is letters, digits, '.', '_' and '-'"
            )
        return given
    host = socket.gethostname().split(".", 1)[0]
    name = re.sub(r"[^A-Za-z0-9_-]", "-", host).strip("-")[:64]
    return name or "localhost"
