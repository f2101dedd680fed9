"""What a batch is before and while it runs: its plan (lanes, limits and where each
came from, the command) and its record ``.wf/batch/<stamp>.json``."""

from __future__ import annotations

import enum
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wf.base import records as store
from wf.base.errors import UsageError, WfError
from wf.base.project import Project
from wf.base.quantity import fmt_duration, fmt_size, parse_duration, parse_size
from wf.night import res, resbackend
from wf.night.resbackend import Limits
from wf.night.resjobs import ROUND
from wf.workers import procs

TITLE = "wf-batch"
PREP_TITLE = "wf-batch-prep"
DEFAULT_MEM = 4 << 30
DEFAULT_FOR = 6 * 3600.0
AGENT_MODEL = "sonnet"  # the orchestrator's model when --model is not given
# the orchestrator's own grants: wf, its subagents (Agent; 2.1.332's init still calls the
# tool Task), reading. Its wf-worker subagents run under the same grants, so the lanes'
# allowed_tools are added (agent_tools): without them a worker's git commit is refused
AGENT_TOOLS = "Bash(wf:*),Agent,Task,Read,Grep,Glob"
BG_WAIT_VAR = "CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS"
BATCH_PROMPT = "batch-prompt.md"
TAIL = 600.0  # the wall limit is --for x 1.5 + this: running workers finish their task
FLOOR_MEM = 2 << 30  # what history may suggest at the least: a real worker needs more
FLOOR_FOR = 3600.0
HISTORY = 10  # the newest batches of this project (and title) a suggestion reads
# the cloud tail: after its loop, a batch leaves the cloud sessions still running to a job of
# their own (its own record and limits), so that it ends and the next batch may start
TAIL_TITLE = "wf-batch-cloud"
TAIL_MEM = 2 << 30
TAIL_LINGER = 24 * 3600.0  # it pulls until no session is left, the stop file, or this


class End(enum.StrEnum):
    """Why a batch ended (the summary's footer)."""

    N_REACHED = "N reached"
    ALL_STOPPED = "all lanes stopped"
    FOR = "--for"
    STOP_FILE = "stop file"
    OOM = "oom"
    TIMEOUT = "timeout"
    KILLED = "killed"
    LOST = "lost"
    FAILED = "failed to start"
    PREP_DONE = "prep done"
    AGENT_FAILED = "orchestrator failed"  # an --agent batch whose claude ended in an error
    BUDGET = "budget"  # its loop started no task past --budget (a stop event says so)
    RESERVE = "weekly reserve"  # its loop kept the plan's weekly reserve


def agent_tools(project: Project, lanes: list[str]) -> str:
    """The ``--allowedTools`` of an ``--agent`` batch's claude: its own grants, then every
    grant of the batch's lanes (wf.toml ``lanes.<name>.allowed_tools``), which its wf-worker
    subagents need (they run under the session's grants: claude has no grants per subagent)."""
    tools = AGENT_TOOLS.split(",")
    for name in lanes:
        cfg = project.config.lane(name)
        tools += [t for t in (cfg.allowed_tools if cfg else ()) if t not in tools]
    return ",".join(tools)


def prompts_none() -> tuple[str, ...]:
    """``--permission-prompts none`` where the installed claude's --help lists it."""
    from wf import adapters
    from wf.adapters.claude import PROMPTS_FLAG

    return (f"{PROMPTS_FLAG}=none",) if PROMPTS_FLAG in adapters.get("claude").options() else ()


def stop_file(project: Project) -> Path:
    from wf.orch import state

    return state.stop_file(project)


def folder(project: Project) -> Path:
    return project.wf_dir / "batch"


# ------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Plan:
    n: int
    lanes: tuple[str, ...]
    for_s: float  # nothing new starts after it
    limits: Limits  # the res job's: memory, and the wall backstop
    sources: dict[str, str]  # "mem", "for" -> where the value came from
    argv: tuple[str, ...]
    env: dict[str, str]  # what wf sets for the job, beyond its own environment
    backend: str
    skipped: dict[str, str]
    root: str
    kind: str = "loop"  # loop (wf orch run) | agent (claude -p with the batch prompt)
    model: str | None = None  # the orchestrator's, for an agent batch
    stdin: str | None = None  # the packaged prompt the job gets on stdin
    title: str = TITLE  # of the res job (its history suggests the limits)
    notes: tuple[str, ...] = ()  # more for --dry-run (a prep batch's targets and workers)
    budget: float | None = None  # --budget (or wf.toml's budget): its loop keeps it
    forecast: dict[str, Any] | None = None  # the outlook it started with (wf.night.batchcost)
    forecast_lines: tuple[str, ...] = ()  # the same, in words, for --dry-run
    budget_note: str | None = None  # wf.toml's budget that this kind of batch does not keep

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["limits"] = self.limits.as_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(
            **{
                **d,
                "lanes": tuple(d["lanes"]),
                "argv": tuple(d["argv"]),
                "notes": tuple(d.get("notes") or ()),
                "forecast_lines": tuple(d.get("forecast_lines") or ()),
                "limits": Limits.from_dict(d["limits"]),
            }
        )


def ready_lanes(project: Project) -> list[str]:
    """Lanes (in wf.toml's order) a batch may take: see ``lane_work``."""
    return lane_work(project).ready


@dataclass(frozen=True)
class LaneWork:
    """Which lanes a batch may take now (``ready``, in wf.toml's order), and which have
    runner-ready work it must not take yet, with why (``waiting``: lane -> a clause
    after "lane <name>")."""

    ready: list[str]
    waiting: dict[str, str]


def lane_work(project: Project) -> LaneWork:
    """A lane is ready with runner-ready work, or with a record that a run which died left
    behind (a killed batch: the loop recovers its task in place). A lane whose record
    someone still holds (an interactive orchestrator's pick, until it posts; a live ``wf
    orch run``, worker or pick) is not: a batch's loop would stop it at once. Nor is a lane
    whose next task is ``Sessions: solo`` while another lane is held, or any lane while a
    held lane works a solo task (the pick's own rule): the work there waits."""
    from wf.orch import pick, state
    from wf.tasks import backlog

    bl = backlog.load(project)
    recs: dict[str, state.LaneRecord | None] = {}
    held: dict[str, str] = {}
    for ln in project.config.lanes:
        try:
            rec = state.load(project, ln.name)
        except WfError:
            rec = None  # a corrupt record: wf doctor's, not a batch's
        recs[ln.name] = rec
        if rec is None:
            continue
        if rec.owner is None and rec.pid is None:
            held[ln.name] = f"{rec.id} was picked by an interactive orchestrator (wf orch post {ln.name} ...)"
        elif holder := pick.live_holder(rec):
            held[ln.name] = f"{rec.id} is held by {holder}"
    solo = next((name for name in held if (r := recs[name]) is not None and r.solo), None)
    ready: list[str] = []
    waiting: dict[str, str] = {}
    for ln in project.config.lanes:
        rec = recs[ln.name]
        tasks = bl.runner_ready(ln.name)
        if ln.name in held:
            if tasks:
                waiting[ln.name] = f"is held: {held[ln.name]}"
            continue
        if rec is not None and rec.owner is not None:  # held by nobody (above): orphaned
            ready.append(ln.name)
            continue
        if not tasks:
            continue
        if solo is not None:
            waiting[ln.name] = f"waits for lane {solo}, whose solo task runs alone: {held[solo]}"
        elif tasks[0].sessions == "solo" and held:
            other = next(iter(held))
            waiting[ln.name] = (
                f"waits: its solo task {tasks[0].id} runs alone, and lane {other} is held: {held[other]}"
            )
        else:
            ready.append(ln.name)
    return LaneWork(ready, waiting)


def plan(
    project: Project,
    n: int,
    *,
    lanes: list[str] | None = None,
    for_: str | None = None,
    mem: str | None = None,
    agent: bool = False,
    model: str | None = None,
    prep: bool = False,
    budget: float | None = None,
) -> Plan:
    """What ``wf batch N`` (or ``wf batch K --prep``) would run, and where each limit
    came from, with the forecast of the tasks a loop batch would run (and ``budget``,
    else wf.toml's, which its loop keeps). A prep plan with no target has no lanes."""
    from wf.tasks.taskfile import check_id

    if n < 1:
        raise UsageError("N: expected a number of tasks, 1 or more")
    if prep and (agent or model):
        raise UsageError("--prep runs the lanes' own workers: it takes no --agent or --model")
    if lanes:
        names = [check_id(x, "lane") for x in lanes]
        for name in names:
            if project.config.lane(name) is None:
                raise WfError(f"no lane {name!r} (wf lanes)")
    else:
        names = [] if prep else ready_lanes(project)
    notes: tuple[str, ...] = ()
    if prep:
        names, notes = _prep_targets(project, n, names)
    title = PREP_TITLE if prep else TITLE
    sugg = suggest(project, title, n, len(names))
    sources: dict[str, str] = {}
    if mem:
        mem_b, sources["mem"] = parse_size(mem, "--mem"), "--mem"
    else:
        mem_b, sources["mem"] = sugg.mem, sugg.mem_source
    if for_:
        for_s, sources["for"] = parse_duration(for_, "--for"), "--for"
    else:
        for_s, sources["for"] = sugg.for_s, sugg.for_source
    wall = round(for_s * 1.5 + TAIL)
    sources["wall"] = f"--for x 1.5 + {fmt_duration(TAIL)}: running workers finish their task"
    env = {res.TOKEN_VAR: "<per job>", res.JOB_VAR: "<job id>"}
    stdin = None
    if model is not None and not agent:
        raise UsageError("--model is the orchestrator's model: it needs --agent")
    kind = "agent" if agent else "prep" if prep else "loop"
    if agent:
        model = model or AGENT_MODEL
        env[BG_WAIT_VAR] = str(round(for_s * 1000))
        stdin = BATCH_PROMPT
    extra = _outlook(project, kind, names, n, budget)
    argv = _command(project, kind, names, n, for_s, model)
    if extra.get("budget") is not None:
        argv = (*argv, "--budget", repr(extra["budget"]))  # exact: 0.00001 is not 0.0000
    limits = Limits(mem=mem_b, cpus=None, for_s=float(wall))
    backend = resbackend.plan(list(argv), limits, "<job>")
    return Plan(
        n,
        tuple(names),
        for_s,
        limits,
        sources,
        argv,
        env,
        backend.backend.value,
        backend.skipped,
        str(project.root),
        kind,
        model,
        stdin,
        title,
        notes,
        **extra,
    )


def _prep_targets(project: Project, n: int, names: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """A prep batch's lanes (those of its targets) and the --dry-run lines naming them."""
    from wf.night import prep as prepmod

    chosen = prepmod.targets(project, n, names or None)
    names = [ln.name for ln in project.config.lanes if any(t.lane == ln.name for t in chosen)]
    notes = (
        "targets: " + ", ".join(t.describe() for t in chosen),
        f"workers: {len(prepmod.workers(chosen))} ("
        + "; ".join(f"lane {lane}: {', '.join(ids)}" for lane, ids in prepmod.workers(chosen))
        + ")",
    )
    return names, notes


def _outlook(project: Project, kind: str, names: list[str], n: int, budget: float | None) -> dict[str, Any]:
    """A loop batch's budget (``budget``, else wf.toml's) and forecast, as Plan fields;
    none for the others (a budget given to them is a usage error: only wf's loop keeps it)."""
    if kind != "loop":
        if budget is not None:
            raise UsageError("--budget is kept by wf's own loop: it takes no --agent or --prep")
        if not project.config.budget:
            return {}
        note = f"budget: not kept (--{kind} runs no wf loop)"
        return {"budget_note": note, "forecast_lines": (note,)}
    from wf.night import batchcost

    budget = budget or project.config.budget or None
    seen = batchcost.outlook(project, names, n, budget)
    return {"budget": budget, "forecast": seen.as_dict(), "forecast_lines": tuple(seen.lines())}


def _command(
    project: Project, kind: str, names: list[str], n: int, for_s: float, model: str | None
) -> tuple[str, ...]:
    """What a batch's job runs: ``wf orch run`` on its lanes (a loop batch), claude as the
    orchestrator with the batch prompt on stdin (agent), or the prep workers (prep)."""
    if kind == "agent":
        claude = shutil.which("claude") or "claude"
        return (
            claude, "-p", "--model", model or AGENT_MODEL, "--output-format", "text",
            "--permission-mode", "acceptEdits", f"--allowedTools={agent_tools(project, names)}",
            *prompts_none(),
        )  # fmt: skip
    if kind == "prep":
        from wf.night import prep as prepmod

        return prepmod.argv(project, str(folder(project) / "<stamp>.prep.json"), "prep-<run>")
    return (
        sys.executable, "-m", "wf", "-C", str(project.root), "orch", "run", *names,
        "--max-tasks", str(n), "--for", f"{round(for_s)}s",
    )  # fmt: skip


# ------------------------------------------------------------------ limits from this project's batches


COUNTS = frozenset(
    {End.N_REACHED, End.ALL_STOPPED, End.FOR, End.STOP_FILE, End.PREP_DONE, End.BUDGET, End.RESERVE}
)


@dataclass(frozen=True)
class Past:
    """One ended batch of this project whose figures say what a task needs."""

    stamp: str
    tasks: int  # posted (a prep batch: its targets)
    lanes: int
    peak_rss: int
    dur_s: float

    @property
    def mem_per_task(self) -> float:
        return self.peak_rss / max(1, min(self.tasks, self.lanes))  # its tasks ran one per lane at once

    @property
    def for_per_task(self) -> float:
        return self.dur_s / self.tasks


@dataclass(frozen=True)
class Suggestion:
    mem: int
    mem_source: str
    for_s: float
    for_source: str
    based_on: tuple[str, ...] = ()  # the stamps of the batches it read


def history(project: Project, title: str) -> list[Past]:
    """This project's own ended batches of ``title``, newest first (at most HISTORY), that
    ran normally (an oom, a timeout, a kill or a lost batch says nothing of what a task
    needs) and posted a task, with a peak and a duration known."""
    out: list[Past] = []
    for rec in reversed(records(project)):
        if rec.state != "ended" or rec.plan.get("title", TITLE) != title or rec.reason not in COUNTS:
            continue
        if not rec.tasks or not rec.peak_rss or not rec.dur_s:
            continue
        ran_on = rec.plan.get("lanes")
        lanes = max(1, len(ran_on) if isinstance(ran_on, list) else 0)
        out.append(Past(rec.stamp, rec.tasks, lanes, rec.peak_rss, rec.dur_s))
        if len(out) >= HISTORY:
            break
    return out


def suggest(project: Project, title: str, n: int, lanes: int) -> Suggestion:
    """The limits for a batch of ``n`` tasks on ``lanes`` lanes: memory 1.25 x the largest
    peak per task of this project's past batches x the tasks it runs at once (one per
    lane, at most n), rounded up to 256M; time 1.5 x the longest time per task x n; never
    below FLOOR_MEM and FLOOR_FOR. With no past batch, DEFAULT_MEM and DEFAULT_FOR."""
    past = history(project, title)
    if not past:
        none = "default, no batch of this project to learn from"
        return Suggestion(DEFAULT_MEM, none, DEFAULT_FOR, none)
    from math import ceil

    at_once = max(1, min(n, lanes))
    per_mem = max(x.mem_per_task for x in past)
    per_for = max(x.for_per_task for x in past)
    mem = ceil(per_mem * 1.25 * at_once / ROUND) * ROUND
    for_s = float(ceil(per_for * 1.5 * n))
    of = f"from {len(past)} batch(es) of this project"
    mem_how = f"1.25 x {fmt_size(round(per_mem))} per task x {at_once} at once, {of}"
    for_how = f"1.5 x {fmt_duration(per_for)} per task x {n} task(s), {of}"
    if mem < FLOOR_MEM:
        mem_src = f"floor {fmt_size(FLOOR_MEM)}; history gives {fmt_size(mem)}: {mem_how}"
        mem = FLOOR_MEM
    else:
        mem_src = f"history: {mem_how}"
    if for_s < FLOOR_FOR:
        for_src = f"floor {fmt_duration(FLOOR_FOR)}; history gives {fmt_duration(for_s)}: {for_how}"
        for_s = FLOOR_FOR
    else:
        for_src = f"history: {for_how}"
    return Suggestion(mem, mem_src, for_s, for_src, tuple(x.stamp for x in past))


def prompt_text(p: Plan, summary: str) -> str:
    """The packaged batch prompt, filled in for this batch."""
    from importlib import resources

    template = resources.files("wf").joinpath("data", BATCH_PROMPT).read_text("utf-8")
    lanes = ", ".join(p.lanes)
    return template.format(root=p.root, n=p.n, lanes=lanes, for_human=fmt_duration(p.for_s), summary=summary)


def dry_run_lines(p: Plan) -> list[str]:
    skipped = "; ".join(f"{k} skipped: {v}" for k, v in p.skipped.items())
    prompt = []
    if p.stdin:
        prompt = [f"stdin: the packaged prompt wf/data/{p.stdin}, filled in:"]
        prompt += [f"  | {x}" for x in prompt_text(p, "out/wf-batch-<UTC stamp>.md").splitlines()]
    return [
        "batch (dry run): nothing started, nothing claimed, no file written",
        f"lanes: {', '.join(p.lanes) or '-'}" + ("" if p.lanes else " (no lane has runner-ready work)"),
        f"tasks: at most {p.n}",
        *p.notes,
        f"backend: {p.backend}" + (f" ({skipped})" if skipped else ""),
        f"argv: {' '.join(p.argv)}",
        "env: " + " ".join(f"{k}={v}" for k, v in p.env.items()),
        f"memory: {fmt_size(p.limits.mem)} ({p.sources['mem']})",
        f"for: {fmt_duration(p.for_s)}, nothing new starts after it ({p.sources['for']})",
        f"wall limit: {fmt_duration(p.limits.for_s)} ({p.sources['wall']})",
        "summary: out/wf-batch-<UTC stamp>.md; stop file: out/wf-batch.stop",
        *p.forecast_lines,
        *prompt,
    ]


# ------------------------------------------------------------------ the record


@dataclass(frozen=True)
class Record:
    stamp: str
    started: str
    summary: str  # relative to the project root
    log: str
    plan: dict[str, Any]
    pid: int = 0  # the batch job (also the res supervisor)
    pid_start: float | None = None
    job: str | None = None
    state: str = "running"  # running | ended
    ended: str | None = None
    job_state: str | None = None
    exit: int | None = None
    reason: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    known_ids: tuple[str, ...] = ()
    # what the next batches learn their limits from (set when it ends)
    tasks: int | None = None  # tasks posted (a prep batch: its targets)
    peak_rss: int | None = None  # its res job's peak, bytes; None: not known
    dur_s: float | None = None
    tail_job: str | None = None  # the res job of its cloud tail, if it left one

    @property
    def alive(self) -> bool:
        return self.state == "running" and procs.alive_as(self.pid, self.pid_start)

    def problem(self, path: Path) -> str | None:
        if self.state not in ("running", "ended"):
            return f"field 'state' has a bad value {self.state!r}"
        for name in ("pid", "tasks", "peak_rss", "dur_s", "pid_start"):
            v = getattr(self, name)
            if v is not None and v < 0:
                return f"field {name!r} is negative"
        return None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["known_ids"] = list(self.known_ids)
        return d


def save(project: Project, rec: Record) -> None:
    store.write_json(folder(project) / f"{rec.stamp}.json", rec.as_dict())


def record_files(project: Project) -> list[Path]:
    d = folder(project)
    if not d.is_dir():
        return []
    return sorted(f for f in d.glob("*.json") if not f.name.endswith((".plan.json", ".prep.json")))


def records(project: Project) -> list[Record]:
    """Every batch record, oldest first; CorruptRecord for one that cannot be trusted
    (never skipped: an older batch would be shown as the newest, or none at all)."""
    out = []
    for f in record_files(project):
        rec = store.load(Record, f)
        if rec is not None:
            out.append(rec)
    return out


def newest(project: Project) -> Record | None:
    recs = records(project)
    return recs[-1] if recs else None
