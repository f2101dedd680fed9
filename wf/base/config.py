"""wf.toml: the project's settings.

Reading uses the standard library's ``tomllib`` (fast to import, on every command's
path); editing goes through ``tomlkit`` (imported only then) so that a person's
comments and layout survive. No wf.toml at all is a valid setup with the defaults.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from wf.base.errors import ConfigError, WfError
from wf.base.ids import ID_HELP, MODEL_RE, valid_id

# The tools wf can drive, one module each in wf/adapters. Named here, not imported from
# the registry: config is ground that every command loads (tests/test_layout.py checks
# that the two lists agree).
ADAPTERS = ("claude", "codex", "opencode", "cmd")
ISOLATIONS = ("worktree", "clone")
CLOUD_PERIODS = ("day", "week", "month")
CLOUD_LANE = "cloud"  # the virtual lane of cloud sessions: no [lanes.cloud] table
# claude --permission-mode values: 2.1.332's --help lists acceptEdits, auto,
# bypassPermissions, manual, dontAsk and plan; ``manual`` is its name for what older
# versions (and 2.1.332 still, unlisted) call ``default``. The adapters check the same list.
PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan", "default")


class Lane(NamedTuple):
    name: str
    model: str
    adapter: str = "claude"
    max_parallel: int = 1
    effort: str | None = None
    cmd: tuple[str, ...] = ()  # the program of a lane whose adapter is cmd
    permission_mode: str = "acceptEdits"  # claude --permission-mode for headless workers
    allowed_tools: tuple[str, ...] = (
        "Bash",
        "Read",
        "Edit",
        "Write",
        "Glob",
        "Grep",
    )  # claude --allowedTools
    models: tuple[tuple[str, str], ...] = ()  # per adapter: models = {claude = "sonnet", codex = "gpt-5.5"}
    stall: float | None = None  # seconds without a model event (default: the adapter's)
    timeout: float | None = None  # seconds a worker may run (default: the adapter's)
    sandbox: str = "workspace-write"  # codex -s: read-only, workspace-write, danger-full-access
    network: bool = False  # codex sandbox network access; claude WebFetch/WebSearch
    isolate_mcp: bool = False  # no MCP servers from the user's own config
    extra_args: tuple[str, ...] = ()  # more options for the tool, as an argv list
    machine: str | None = None  # the one machine that runs this lane (None: every machine)

    def as_dict(self) -> dict[str, object]:
        return self._asdict()


class ConfigWarning(NamedTuple):
    """Something in wf.toml wf reads past (an unknown key, a lane that cannot run yet)."""

    where: str  # the file, as a person names it
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


class Config(NamedTuple):
    main: str | None = None
    tasks: str = "TASKS.md"
    archive: str = "DONE.md"
    slice_above: float = 4
    isolation: str = "worktree"
    gate: str | None = None
    cloud: bool = False
    cloud_budget: float = 0.0  # USD per cloud_period; 0: no budget set, so nothing is sent
    cloud_reserve: float = 0.0  # USD of the budget the cloud lane never spends
    cloud_period: str = "month"  # day, week or month (UTC)
    cloud_max_parallel: int = 1  # cloud sessions running at once
    cloud_models: tuple[str, ...] = ()  # models the cloud lane takes; () = opus-class only
    cloud_pull_every: float = 600.0  # seconds between a batch's pulls of its cloud sessions
    budget: float = 0.0  # USD a batch (and the pilot) may spend; 0: no budget
    weekly_reserve: float = 0.0  # share of the plan's weekly window no batch task uses; 0: none
    lock_timeout: float = 10.0
    backup_days: float = 14.0
    shared: str | None = None  # the git remote the machines share claims and TASKS.md through
    claim_refs: str = "refs/wf/claims"  # where claim refs live on it (refs/heads/wf-claims: a strict host)
    claim_stale: float = 6 * 3600.0  # seconds a claim's machine may be silent before it may be stolen
    notify: tuple[str, ...] = ()  # a program run on the events a person cares about (an argv)
    lanes: tuple[Lane, ...] = (Lane("haiku", "haiku"), Lane("sonnet", "sonnet"), Lane("opus", "opus"))
    # [fanout]: the model per adapter of a unit that names none; the expensive models
    # (None: wf's own list) only an explicit model, never a default, may choose
    fanout_models: tuple[tuple[str, str], ...] = ()
    fanout_expensive: tuple[str, ...] | None = None
    warnings: tuple[ConfigWarning, ...] = ()

    def lane(self, name: str) -> Lane | None:
        for lane in self.lanes:
            if lane.name == name:
                return lane
        return None

    def lane_for_model(self, model: str) -> Lane | None:
        for lane in self.lanes:
            if lane.model == model:
                return lane
        return self.lane(model)


DEFAULT_TOML = """\
# wf settings. Every key is optional; the values below are the defaults.
# Edit by hand or with `wf config KEY VALUE` (which keeps these comments).

# main = "main"          # the main branch (default: the main checkout's current branch)
tasks = "TASKS.md"        # the backlog
archive = "DONE.md"       # done tasks, one line each
slice_above = 4           # a task with a larger Effort is sliced before it is implemented
isolation = "worktree"    # "worktree" (.worktrees/<lane>) or "clone" (throwaway clone)
gate = ""                 # command run after each merge, e.g. "pytest -q" (no shell)
cloud = false             # use the cloud lane (Claude Code cloud sessions; see wf's docs/cloud.md)
# cloud_budget = 0        # USD per cloud_period for cloud sessions; 0 sends nothing
# cloud_reserve = 0       # USD of that budget the cloud lane leaves unspent
# cloud_period = "month"  # day, week or month (UTC)
# cloud_max_parallel = 1  # cloud sessions running at once
# cloud_models = []       # models sent to the cloud; empty = opus-class models only
# cloud_pull_every = 600  # seconds between a batch's pulls of its cloud sessions
# budget = 5.0            # USD a batch or the pilot may spend (like --budget); unset: none
# weekly_reserve = 0.2    # share of the plan's weekly usage window kept for the day
lock_timeout = 10         # seconds to wait for the project lock before giving up
backup_days = 14          # wf merge, doctor --fix and wt prune delete older backup refs main holds
# shared = "origin"       # the git remote machines share claims and TASKS.md through (docs: several machines)
# claim_refs = "refs/wf/claims"  # where claim refs live there; "refs/heads/wf-claims" for a strict host
# claim_stale = "6h"      # a claim whose machine has been silent this long may be stolen
# notify = ["notify-send", "wf"]  # run (no shell) with each event as JSON on stdin: a task
#                         # needs a person, a lane parked or stopped, a batch ended

# One lane per model by default; a lane runs at most max_parallel workers.
[lanes.haiku]
model = "haiku"
adapter = "claude"        # claude, codex, opencode or cmd
max_parallel = 1

[lanes.sonnet]
model = "sonnet"
adapter = "claude"
max_parallel = 1

[lanes.opus]
model = "opus"
adapter = "claude"
max_parallel = 1
"""

_TOP_KEYS = {
    "main",
    "tasks",
    "archive",
    "slice_above",
    "isolation",
    "gate",
    "cloud",
    "cloud_budget",
    "cloud_reserve",
    "cloud_period",
    "cloud_max_parallel",
    "cloud_models",
    "cloud_pull_every",
    "lock_timeout",
    "backup_days",
    "budget",
    "weekly_reserve",
    "shared",
    "claim_refs",
    "claim_stale",
    "notify",
    "lanes",
    "fanout",
}
FANOUT_KEYS = ("models", "expensive")


MAX_BYTES = 1 << 20  # a settings file larger than this is not a settings file
_BOM = b"\xef\xbb\xbf"


def read(path: Path) -> bytes | None:
    """wf.toml's bytes (None: no file), read so that no file can hang or flood wf: a
    regular file only (a FIFO is opened without waiting for a writer, then refused, as
    are folders and devices such as a link to /dev/zero), at most ``MAX_BYTES``."""
    import os
    import stat

    name = path.name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(name, f"cannot be read: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device"
            raise ConfigError(name, f"is {kind}, not a file: wf reads its settings from a regular file")
        chunks = []
        left = MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise ConfigError(name, f"cannot be read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        raise ConfigError(name, f"is larger than {MAX_BYTES // 1024} KiB: not a settings file")
    return data


def parse(data: bytes, name: str) -> dict[str, Any]:
    """The TOML document in ``data``, every fault a ConfigError that names it."""
    if data.startswith(_BOM):
        raise ConfigError(name, "starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without a BOM")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(name, _not_utf8(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(name, f"not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(name, "nested too deeply (arrays or tables inside one another)") from None


def load(path: Path) -> Config:
    data = read(path)
    if data is None:
        return Config()
    return from_dict(parse(data, path.name), path.name)


def _not_utf8(e: UnicodeDecodeError) -> str:
    return f"not UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start}); TOML files are UTF-8"


def shown(value: object) -> str:
    """A value as TOML writes it (true, "x", [1, 2]), for messages about wf.toml."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {shown(v)}" for k, v in value.items()) + "}"
    return str(value)


def _typed(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {str: "a string", bool: "true or false", dict: "a table", int: "a whole number"}
        what = names.get(kind, "a number") if isinstance(kind, type) else "a number"
        raise ConfigError(where, f"{key} must be {what}, not {shown(value)}")
    return value


def _rel_path(value: str, key: str, where: str) -> str:
    p = PurePosixPath(value)
    controls = any(ord(c) < 32 or ord(c) == 127 for c in value)
    if not value or controls or p.is_absolute() or ".." in p.parts or "\\" in value:
        raise ConfigError(where, f"{key} must be a relative path inside the repository, not {value!r}")
    return value


# A branch name, as git check-ref-format allows it, minus what could be read as a
# revision expression (HEAD~1, main^, @{u}, a:b) or an option (-x).
_BRANCH_RE = re.compile(r"(?!-)(?!.*(?:\.\.|@\{|//|/\.|\.lock(?:/|$)))[A-Za-z0-9._/@+-]{1,200}(?<![./])")


def check_branch(value: str, where: str = "wf.toml", key: str = "main") -> str:
    if not _BRANCH_RE.fullmatch(value) or value in ("HEAD", "@") or value.startswith("."):
        raise ConfigError(where, f"{key} must be a branch name (like main), not {value!r}")
    return value


# The largest value each number may take: past these a setting is a typo (a timeout of
# 1e300 s, 100,000,000 workers), refused by name instead of acted on.
DAY = 86_400.0
LIMITS: dict[str, float] = {
    "slice_above": 1_000,
    "lock_timeout": DAY,
    "backup_days": 36_500,
    "cloud_budget": 1_000_000,
    "cloud_reserve": 1_000_000,
    "budget": 1_000_000,
    "weekly_reserve": 1,
    "claim_stale": 365 * DAY,
    "cloud_max_parallel": 64,
    "cloud_pull_every": DAY,
    "max_parallel": 64,
    "stall": 7 * DAY,
    "timeout": 7 * DAY,
}


# the keys whose range is narrower than 0..limit: what their message says instead
RANGE_WORDS = {
    "budget": f"dollars above 0 and at most {LIMITS['budget']:g} (leave it out for no budget)",
    "weekly_reserve": "a share of the week, from 0 to below 1 (0.2: 20%)",
}


def _number(data: dict[str, Any], key: str, where: str) -> float:
    """A finite number from 0 to the key's limit (nan, inf, negatives and absurd values
    are refused)."""
    v = float(_typed(data, key, (int, float), where))
    hi = LIMITS[key]
    if not math.isfinite(v) or not 0 <= v <= hi:
        words = RANGE_WORDS.get(key, f"a number from 0 to {hi:g}")
        raise ConfigError(where, f"{key} must be {words}, not {shown(data[key])}")
    return v


def _whole(value: object, key: str, where: str, shown_key: str | None = None) -> int:
    """A whole number from 1 to the key's limit."""
    hi = int(LIMITS[key])
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= hi:
        what = shown_key or key
        raise ConfigError(where, f"{what} must be a whole number from 1 to {hi}, not {shown(value)}")
    return value


def from_dict(data: dict[str, Any], where: str = "wf.toml") -> Config:
    warnings = [ConfigWarning(where, f"unknown key {k!r} (ignored)") for k in data if k not in _TOP_KEYS]
    kw: dict[str, Any] = {}
    if "main" in data:
        main = _typed(data, "main", str, where)
        kw["main"] = check_branch(main, where) if main else None
    for key in ("tasks", "archive"):
        if key in data:
            kw[key] = _rel_path(_typed(data, key, str, where), key, where)
    if "slice_above" in data:
        kw["slice_above"] = _number(data, "slice_above", where)
    if "lock_timeout" in data:
        kw["lock_timeout"] = _number(data, "lock_timeout", where)
    if "backup_days" in data:
        kw["backup_days"] = _number(data, "backup_days", where)
    if "isolation" in data:
        v = _typed(data, "isolation", str, where)
        if v not in ISOLATIONS:
            raise ConfigError(where, f"isolation must be one of {', '.join(ISOLATIONS)}, not {v!r}")
        kw["isolation"] = v
    if "gate" in data:
        kw["gate"] = _typed(data, "gate", str, where).strip() or None
    if "cloud" in data:
        kw["cloud"] = _typed(data, "cloud", bool, where)
    for key in ("cloud_budget", "cloud_reserve"):
        if key in data:
            kw[key] = _number(data, key, where)
    if "cloud_period" in data:
        v = _typed(data, "cloud_period", str, where)
        if v not in CLOUD_PERIODS:
            raise ConfigError(where, f"cloud_period must be one of {', '.join(CLOUD_PERIODS)}, not {v!r}")
        kw["cloud_period"] = v
    if "cloud_max_parallel" in data:
        kw["cloud_max_parallel"] = _whole(data["cloud_max_parallel"], "cloud_max_parallel", where)
    if "cloud_pull_every" in data:
        every = _number(data, "cloud_pull_every", where)
        if every <= 0:
            raise ConfigError(where, "cloud_pull_every must be a number of seconds > 0")
        kw["cloud_pull_every"] = every
    if "cloud_models" in data:
        models = _typed(data, "cloud_models", list, where)
        if not all(isinstance(m, str) and MODEL_RE.fullmatch(m) for m in models):
            raise ConfigError(where, "cloud_models must be a list of model names")
        kw["cloud_models"] = tuple(models)
    if "fanout" in data:
        kw.update(_fanout(_typed(data, "fanout", dict, where), where, warnings))
    if "budget" in data:
        kw["budget"] = _number(data, "budget", where)
        if kw["budget"] <= 0:
            raise ConfigError(where, f"budget must be {RANGE_WORDS['budget']}, not {shown(data['budget'])}")
    if "weekly_reserve" in data:
        kw["weekly_reserve"] = _number(data, "weekly_reserve", where)
        if kw["weekly_reserve"] >= 1:
            raise ConfigError(
                where,
                f"weekly_reserve must be {RANGE_WORDS['weekly_reserve']}, "
                f"not {shown(data['weekly_reserve'])}",
            )
    kw.update(_shared(data, where))
    if "notify" in data:
        kw["notify"] = _argv(data["notify"], "notify", where)
    if "lanes" in data:
        kw["lanes"] = _lanes(_typed(data, "lanes", dict, where), where, warnings)
    kw["warnings"] = tuple(warnings)
    return Config(**kw)


REMOTE_RE = re.compile(r"(?!-)[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?<![.])")
MACHINE_RE = REMOTE_RE  # a machine's name: a host name's letters, never a path or an option
CLAIM_REFS = ("refs/wf/claims", "refs/heads/wf-claims")


def _shared(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The shared remote's settings: a remote's name (never a URL or an option), where
    claim refs live (one of CLAIM_REFS), and how long a claim's machine may be silent."""
    kw: dict[str, Any] = {}
    if "shared" in data:
        name = _typed(data, "shared", str, where)
        if name and not REMOTE_RE.fullmatch(name):
            raise ConfigError(where, f"shared must name a git remote (like origin), not {shown(name)}")
        kw["shared"] = name or None
    if "claim_refs" in data:
        refs = _typed(data, "claim_refs", str, where).rstrip("/")
        if refs not in CLAIM_REFS:
            raise ConfigError(where, f"claim_refs must be one of {', '.join(CLAIM_REFS)}, not {shown(refs)}")
        kw["claim_refs"] = refs
    if "claim_stale" in data:
        value = data["claim_stale"]
        if isinstance(value, str):
            from wf.base.quantity import parse_duration

            try:
                kw["claim_stale"] = parse_duration(value, "claim_stale")
            except WfError as e:
                raise ConfigError(where, str(e)) from None
        else:
            kw["claim_stale"] = _number(data, "claim_stale", where)
        if kw["claim_stale"] <= 0:
            raise ConfigError(where, 'claim_stale must be a time above 0 (like "6h")')
    return kw


def _fanout(table: dict[str, Any], where: str, warnings: list[ConfigWarning]) -> dict[str, Any]:
    """[fanout]: ``models = {claude = "sonnet"}``, ``expensive = ["opus", ...]``."""
    warnings += [
        ConfigWarning(where, f"unknown key 'fanout.{k}' (ignored)") for k in table if k not in FANOUT_KEYS
    ]
    kw: dict[str, Any] = {}
    models = table.get("models", {})
    if not isinstance(models, dict) or not all(
        k in ADAPTERS and isinstance(v, str) and MODEL_RE.fullmatch(v) for k, v in models.items()
    ):
        raise ConfigError(where, 'fanout.models must map adapters to model names, e.g. {claude = "sonnet"}')
    kw["fanout_models"] = tuple(sorted(models.items()))
    if "expensive" in table:
        names = table["expensive"]
        if not isinstance(names, list) or not all(isinstance(m, str) and m.strip() for m in names):
            raise ConfigError(where, "fanout.expensive must be a list of model names (or parts of names)")
        kw["fanout_expensive"] = tuple(m.strip() for m in names)
    return kw


def _argv(value: object, key: str, where: str) -> tuple[str, ...]:
    """A program and its arguments, run without a shell: a non-empty list of strings, the
    program's name not empty, no NUL byte anywhere."""
    argv = tuple(value) if isinstance(value, list) else ()
    strings = tuple(a for a in argv if isinstance(a, str) and "\0" not in a)
    if not strings or len(strings) != len(argv) or not strings[0]:
        raise ConfigError(
            where,
            f"{key} must be a non-empty list of strings (a program and its arguments, run without a shell), "
            f'e.g. {key} = ["notify-send", "wf"], not {shown(value)}',
        )
    return strings


def _lanes(table: dict[str, Any], where: str, warnings: list[ConfigWarning]) -> tuple[Lane, ...]:
    lanes = []
    for name, spec in table.items():
        w = f"[lanes.{name}]"
        if not valid_id(name):
            raise ConfigError(where, f"bad lane name {name!r}: {ID_HELP}")
        if name == CLOUD_LANE:
            raise ConfigError(where, "'cloud' is the cloud lane's name (cloud = true), not a table of lanes")
        if re.search(r"-\d+$", name):
            raise ConfigError(
                where, f"bad lane name {name!r}: '-<number>' is how a lane's extra trees are named"
            )
        if not isinstance(spec, dict):
            raise ConfigError(where, f"lanes.{name} must be a table")
        for k in spec:
            if k not in LANE_KEYS:
                warnings.append(ConfigWarning(where, f"{w}: unknown key {k!r} (ignored)"))
        model = spec.get("model", name)
        if not isinstance(model, str) or not MODEL_RE.fullmatch(model):
            raise ConfigError(where, f"lanes.{name}.model must be a model name, not {model!r}")
        adapter = spec.get("adapter", "claude")
        if adapter not in ADAPTERS:
            raise ConfigError(
                where, f"lanes.{name}.adapter must be one of {', '.join(ADAPTERS)}, not {adapter!r}"
            )
        mp = _whole(spec.get("max_parallel", 1), "max_parallel", where, f"lanes.{name}.max_parallel")
        effort = spec.get("effort")
        if effort is not None and not isinstance(effort, str):
            raise ConfigError(where, f"lanes.{name}.effort must be a string")
        cmd = spec.get("cmd", [])
        if not isinstance(cmd, list) or not all(isinstance(c, str) for c in cmd):
            raise ConfigError(
                where, f"lanes.{name}.cmd must be a list of strings (an argv, run without a shell)"
            )
        if adapter == "cmd" and not cmd:
            warnings.append(
                ConfigWarning(
                    where,
                    f"{w}: adapter cmd has no cmd yet, so the lane cannot run until it is set: "
                    f'wf config lanes.{name}.cmd \'["program", "arg"]\'',
                )
            )
        mode = spec.get("permission_mode", "acceptEdits")
        if mode not in PERMISSION_MODES:
            raise ConfigError(
                where,
                f"lanes.{name}.permission_mode {mode!r} is not a claude permission mode "
                f"({', '.join(PERMISSION_MODES)})",
            )
        tools = spec.get("allowed_tools", list(Lane._field_defaults["allowed_tools"]))
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise ConfigError(where, f"lanes.{name}.allowed_tools must be a list of tool names")
        machine = spec.get("machine")
        if machine is not None and (not isinstance(machine, str) or not MACHINE_RE.fullmatch(machine)):
            raise ConfigError(
                where, f"lanes.{name}.machine must be a machine's name (letters, digits, . _ -)"
            )
        access = _access(spec, name, where)
        lanes.append(
            Lane(name, model, adapter, mp, effort, tuple(cmd), mode, tuple(tools), **access, machine=machine)
        )
    return tuple(lanes)


LANE_KEYS = (
    "model",
    "adapter",
    "max_parallel",
    "effort",
    "cmd",
    "permission_mode",
    "allowed_tools",
    "models",
    "stall",
    "timeout",
    "sandbox",
    "network",
    "isolate_mcp",
    "extra_args",
    "machine",
)
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")


def _access(spec: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    """A lane's per-adapter models, limits and tool access (checked against each
    adapter's vocabulary by wf check and wf doctor, not here)."""
    kw: dict[str, Any] = {}
    models = spec.get("models", {})
    if not isinstance(models, dict) or not all(
        k in ADAPTERS and isinstance(v, str) and MODEL_RE.fullmatch(v) for k, v in models.items()
    ):
        raise ConfigError(
            where, f'lanes.{name}.models must map adapters to model names, e.g. {{codex = "gpt-5.5"}}'
        )
    kw["models"] = tuple(sorted(models.items()))
    for key in ("stall", "timeout"):
        v = spec.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= LIMITS[key]:
                raise ConfigError(
                    where, f"lanes.{name}.{key} must be a number of seconds above 0, at most {LIMITS[key]:g}"
                )
            kw[key] = float(v)
    sandbox = spec.get("sandbox", "workspace-write")
    if sandbox not in SANDBOXES:
        raise ConfigError(where, f"lanes.{name}.sandbox must be one of {', '.join(SANDBOXES)}")
    kw["sandbox"] = sandbox
    for key in ("network", "isolate_mcp"):
        v = spec.get(key, False)
        if not isinstance(v, bool):
            raise ConfigError(where, f"lanes.{name}.{key} must be true or false")
        kw[key] = v
    extra = spec.get("extra_args", [])
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise ConfigError(where, f"lanes.{name}.extra_args must be a list of strings (an argv)")
    kw["extra_args"] = tuple(extra)
    return kw
