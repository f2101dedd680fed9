"""Editing wf.toml (``wf config KEY VALUE``, ``--unset``): one key at a time, keeping the
file's comments and layout, the result validated by :func:`wf.base.config.from_dict`
before it is written. The one module that imports tomlkit (on first use)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from wf.base.config import (
    _TOP_KEYS,
    FANOUT_KEYS,
    LANE_KEYS,
    Config,
    _not_utf8,
    from_dict,
    read,
)
from wf.base.errors import ConfigError, WfError
from wf.base.ids import valid_id


def check_key(dotted: str) -> None:
    """Refuse a key wf does not know (a typo would be written and then ignored)."""
    parts = dotted.split(".")
    if len(parts) == 1 and parts[0] in _TOP_KEYS - {"lanes", "fanout"}:
        return
    if len(parts) == 2 and parts[0] == "fanout" and parts[1] in FANOUT_KEYS:
        return
    if len(parts) == 3 and parts[0] == "lanes" and valid_id(parts[1]) and parts[2] in LANE_KEYS:
        return
    raise WfError(
        f"unknown setting {dotted!r}: expected one of {', '.join(sorted(_TOP_KEYS - {'lanes', 'fanout'}))}, "
        f"fanout.{{{','.join(FANOUT_KEYS)}}} or lanes.<name>.{{{','.join(LANE_KEYS)}}}"
    )


def _editable(path: Path) -> str:
    """wf.toml's text for tomlkit to edit (the project's load, before any edit, has
    refused a file that is no file, too large, not UTF-8 or not TOML)."""
    data = read(path) or b""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(path.name, _not_utf8(e)) from None


def set_value(path: Path, dotted: str, raw: str) -> Config:
    """Set one key (``lanes.sonnet.max_parallel``) in wf.toml, keeping comments and
    layout; the value is parsed as TOML if it can be (``2``, ``true``), else a string.
    The result is validated before it is written."""
    import tomlkit

    from wf.base.fsutil import atomic_write

    parts = dotted.split(".")
    if not all(parts):
        raise WfError(f"bad key {dotted!r}")
    doc = tomlkit.parse(_editable(path))
    if raw.strip().lower() in ("null", "none", "nil"):
        raise WfError(f"TOML has no {raw.strip()}: to remove {dotted}, run wf config --unset {dotted}")
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    table: Any = doc
    for part in parts[:-1]:
        if part not in table:
            table[part] = tomlkit.table()
        table = table[part]
        if not isinstance(table, dict):
            raise WfError(f"{dotted}: {part} is not a table")
    table[parts[-1]] = value
    text = tomlkit.dumps(doc)
    config = from_dict(tomllib.loads(text), path.name)
    atomic_write(path, text.encode("utf-8"))
    return config


def unset_value(path: Path, dotted: str) -> Config:
    """Remove one key (``gate``, ``lanes.sonnet.effort``) or a whole lane (``lanes.x``)
    from wf.toml, keeping comments and layout. With no [lanes] table in the file, the
    default lanes are written out first, so removing one keeps the others."""
    import tomlkit

    from wf.base.fsutil import atomic_write

    parts = dotted.split(".")
    lane_table = len(parts) == 2 and parts[0] == "lanes" and valid_id(parts[1])
    if not lane_table:
        check_key(dotted)
    doc = tomlkit.parse(_editable(path))
    if parts[0] == "lanes" and "lanes" not in doc:
        lanes = tomlkit.table(is_super_table=True)
        for ln in Config().lanes:
            lanes[ln.name] = {"model": ln.model, "adapter": ln.adapter, "max_parallel": ln.max_parallel}
        doc["lanes"] = lanes
    table: Any = doc
    for part in parts[:-1]:
        table = table.get(part) if isinstance(table, dict) else None
    if not isinstance(table, dict) or parts[-1] not in table:
        what = f"no lane {parts[1]!r}" if lane_table else f"{dotted} is not set"
        raise WfError(f"{what} in {path.name} (wf config lists the settings)")
    if lane_table and len(table) == 1:
        raise WfError(f"lanes.{parts[1]} is the last lane; a project needs one (add another first)")
    del table[parts[-1]]
    text = tomlkit.dumps(doc)
    config = from_dict(tomllib.loads(text), path.name)
    atomic_write(path, text.encode("utf-8"))
    return config
