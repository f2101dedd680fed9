"""Ids, lane names, model names and time stamps: the ground every part checks its
names with (no wf imports above ``errors``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from wf.base.errors import WfError

ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
ID_HELP = "ids are lowercase letters, digits and '-', start with a letter or digit, at most 48"
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,99}")


def valid_id(value: str) -> bool:
    return ID_RE.fullmatch(value) is not None


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a valid id (or lane name), else raise a WfError."""
    if not valid_id(value):
        raise WfError(f"bad {what} {value!r}: {ID_HELP}")
    return value


def utc_stamp(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
