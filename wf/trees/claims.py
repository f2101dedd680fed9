"""Claims across machines: a claim is a ref on the shared remote, made by compare-and-swap.

A claim of task ``t1`` is a commit without a parent (who, machine, lane, time; an empty
tree) pushed to ``<claim_refs>/t1`` with ``--force-with-lease=<ref>:`` (the ref must not
exist yet): of machines claiming one task at once exactly one push succeeds. A release,
a renewal and a steal are leases on the sha last seen. The project lock and the TASKS.md
status line stay what they were; the ref is what makes a claim exclusive across machines.

A lane with ``machine = "<this machine>"`` is local-only: no other machine runs its tasks,
so they are claimed without a ref (and can be claimed offline). Any other claim needs the
remote: offline it is refused with nothing written.

What this machine last saw of the remote's claims is kept in ``.wf/claims-seen.json`` (read
by ``wf list`` and ``wf lanes`` without the network); :func:`refresh` renews it.
"""

from __future__ import annotations

import enum
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from wf.base.errors import ClaimError, WfError
from wf.base.fsutil import atomic_write_text
from wf.base.ids import check_id
from wf.base.machine import this_machine
from wf.base.project import Project
from wf.tasks.fields import Status
from wf.trees import gitops, remote
from wf.trees.remote import PushOutcome, RemoteError, Update

if TYPE_CHECKING:
    from wf.tasks.backlog import Backlog

SEEN = "refs/wf/seen-claims"  # where a fetch keeps the remote's claims, in this checkout
CACHE = "claims-seen.json"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_KEYS = ("task", "who", "machine", "lane", "time")


@dataclass(frozen=True)
class Claim:
    task: str
    who: str
    machine: str
    lane: str | None
    time: float  # when it was made (seconds since the epoch), the machine's last sign of it
    sha: str = ""

    def line(self) -> str:
        return f"{self.task}: {self.who} on {self.machine} since {_stamp(self.time)}"


class IssueKind(enum.Enum):
    STALE = "stale"  # its machine has been silent longer than claim_stale: it may be stolen
    NO_TASK = "no task"  # a ref whose task TASKS.md does not have open
    NO_REF = "no ref"  # a task in progress, in a shared lane, that no ref claims
    UNREACHABLE = "unreachable"  # the remote could not be asked


@dataclass(frozen=True)
class ClaimIssue:
    kind: IssueKind
    task: str
    claim: Claim | None
    text: str


class OfflineClaim(WfError):
    """A claim of shared work while the remote cannot be reached: nothing was written."""

    def __init__(self, what: str, err: RemoteError) -> None:
        self.what = what
        self.fault = err.fault
        super().__init__(
            f"cannot claim {what}: {err}; nothing was written "
            f"(shared work needs the remote; a lane with machine = {this_machine()!r} runs offline)"
        )


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def shared(project: Project) -> str:
    name = project.config.shared
    if not name:
        raise WfError('no shared remote: set shared = "origin" in wf.toml (docs/machines.md)')
    return name


def ref_of(project: Project, task_id: str) -> str:
    return remote.check_ref(f"{project.config.claim_refs}/{check_id(task_id, 'task id')}")


def local_only(project: Project, lane: str | None) -> bool:
    """Whether ``lane`` runs on this machine alone (its tasks need no ref)."""
    ln = project.config.lane(lane) if lane else None
    return ln is not None and ln.machine is not None and ln.machine == this_machine()


def _commit(project: Project, task_id: str, who: str, lane: str | None, now: float) -> str:
    if "\n" in who or "\r" in who:
        raise WfError("WHO must be one line")
    me = this_machine()
    message = (
        f"wf claim {task_id}\n\ntask: {task_id}\nwho: {who}\nmachine: {me}\nlane: {lane or '-'}\n"
        f"time: {now:.3f}\nnonce: {os.getpid()}-{uuid.uuid4().hex[:12]}\n"
    )
    date = f"{int(now)} +0000"
    env = {
        "GIT_AUTHOR_NAME": "wf",
        "GIT_AUTHOR_EMAIL": f"wf@{me}.invalid",
        "GIT_COMMITTER_NAME": "wf",
        "GIT_COMMITTER_EMAIL": f"wf@{me}.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    tree = gitops.run(project.root, "hash-object", "-t", "tree", "-w", "--stdin", stdin="").out.strip()
    return gitops.env_run(project.root, env, "commit-tree", tree, "-m", message).out.strip()


def parse(message: str, sha: str = "") -> Claim | None:
    """A claim commit's message read back (None: not a claim wf made)."""
    fields: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in _KEYS:
            fields[key] = value
    if set(fields) != set(_KEYS):
        return None
    try:
        when = float(fields["time"])
    except ValueError:
        return None
    lane = fields["lane"] if fields["lane"] != "-" else None
    return Claim(fields["task"], fields["who"], fields["machine"], lane, when, sha)


def _read_local(project: Project, ref: str) -> Claim | None:
    r = gitops.run(project.root, "for-each-ref", "--format=%(objectname)%00%(contents)", ref, ok=(0,))
    sha, _, body = r.out.partition("\0")
    return parse(body, sha.strip()) if sha.strip() else None


def refresh(project: Project) -> dict[str, Claim]:
    """Every claim on the remote now (task id -> claim), fetched into this checkout and
    kept in the cache that ``wf list`` reads; RemoteError when it cannot be reached."""
    name = shared(project)
    prefix = project.config.claim_refs
    remote.fetch(project.root, name, "--prune", f"+{prefix}/*:{SEEN}/*")
    r = gitops.run(project.root, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(contents)%00", SEEN)
    found: dict[str, Claim] = {}
    parts = r.out.split("\0")
    for i in range(0, len(parts) - 2, 3):
        ref, sha, body = parts[i].strip(), parts[i + 1], parts[i + 2]
        claim = parse(body, sha)
        task = ref.rsplit("/", 1)[-1]
        if claim is None:  # a ref wf did not make: still a claim, of an unknown machine
            claim = Claim(task, "?", "?", None, 0.0, sha)
        found[task] = claim
    _store(project, found)
    return found


def seen(project: Project) -> dict[str, Claim]:
    """What this machine last saw of the remote's claims (no network)."""
    try:
        data = json.loads((project.wf_dir / CACHE).read_text("utf-8"))
        return {k: Claim(**v) for k, v in data["claims"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _store(project: Project, claims: dict[str, Claim]) -> None:
    project.wf_dir.mkdir(exist_ok=True)
    data = {"claims": {k: asdict(c) for k, c in sorted(claims.items())}}
    atomic_write_text(project.wf_dir / CACHE, json.dumps(data, indent=1) + "\n")


def with_machines(project: Project, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``wf list``'s records, each with the machine that holds its claim (as last seen)."""
    claims = seen(project)
    return [{**r, "machine": claims[r["id"]].machine if r["id"] in claims else None} for r in records]


def with_lane_claims(bl: Backlog, records: list[dict[str, Any]]) -> None:
    """``wf lanes``'s records, each given its lane's machine and its tasks' claims
    (task -> machine, as last seen; a task's lane is the one TASKS.md gives here, else the
    claim's)."""
    lane_of: dict[str, list[tuple[str, str]]] = {}
    for c in seen(bl.project).values():
        task = bl.doc.find(c.task)
        lane = bl.lane_of(task) if task is not None else c.lane
        lane_of.setdefault(lane or "", []).append((c.task, c.machine))
    for r in records:
        ln = bl.config.lane(r["lane"])
        r["machine"] = ln.machine if ln else None
        r["claims"] = dict(lane_of.get(r["lane"], []))


def _note(project: Project, task_id: str, claim: Claim | None) -> None:
    claims = seen(project)
    if claim is None:
        claims.pop(task_id, None)
    else:
        claims[task_id] = claim
    _store(project, claims)


def holder(project: Project, task_id: str) -> Claim | None:
    """The claim the remote holds on ``task_id`` now (None: unclaimed)."""
    name, ref = shared(project), ref_of(project, task_id)
    sha = remote.ls_remote(project.root, name, ref.rsplit("/", 1)[0]).get(ref)
    if sha is None:
        return None
    local = f"{SEEN}/{task_id}"
    try:
        remote.fetch(project.root, name, f"+{ref}:{local}")
    except RemoteError:
        if remote.ls_remote(project.root, name, ref.rsplit("/", 1)[0]).get(ref) is None:
            return None  # released between the two looks
        raise
    claim = _read_local(project, local) or Claim(task_id, "?", "?", None, 0.0, sha)
    _note(project, task_id, claim)
    return claim


def take(project: Project, task_id: str, who: str, lane: str | None) -> tuple[Claim, bool]:
    """Claim ``task_id`` on the remote: (the claim, whether this call made it). A claim
    this machine already holds is kept (the project lock decides between its own
    processes); another machine's is a ClaimError naming it; offline an OfflineClaim."""
    name, ref = shared(project), ref_of(project, task_id)
    refused = 0
    for _ in range(5):
        now = time.time()
        try:
            sha = _commit(project, task_id, who, lane, now)
            [pushed] = remote.push(project.root, name, [Update(sha, ref, "")])
            if pushed.outcome is PushOutcome.OK:
                claim = Claim(task_id, who, this_machine(), lane, now, sha)
                _note(project, task_id, claim)
                return claim, True
            held = holder(project, task_id)
        except RemoteError as e:
            raise OfflineClaim(task_id, e) from None
        if held is None:
            if pushed.outcome is PushOutcome.REFUSED and refused:
                raise WfError(
                    f"cannot claim {task_id}: {name} refused {ref} ({pushed.detail}); "
                    f'a host that takes only branches needs claim_refs = "refs/heads/wf-claims"'
                )
            # released between the push and the look, or refused while another machine's
            # push held the ref's lock there (a race lost that left no claim): try again
            refused += pushed.outcome is PushOutcome.REFUSED
            continue
        if held.machine == this_machine():
            return held, False
        raise ClaimError(task_id, f"already claimed on machine {held.machine} ({held.line()})", held.who)
    raise ClaimError(task_id, "its claim ref kept changing; try again")


def release(project: Project, task_id: str, *, mine_only: bool = True) -> Claim | None:
    """Delete the task's claim ref, a lease on the sha seen (``mine_only``: only if this
    machine holds it). The claim released, or None if there was none to release."""
    name, ref = shared(project), ref_of(project, task_id)
    held = holder(project, task_id)
    if held is None:
        _note(project, task_id, None)
        return None
    if mine_only and held.machine != this_machine():
        raise ClaimError(
            task_id, f"the claim is held on machine {held.machine}, not this one ({held.line()})"
        )
    [pushed] = remote.push(project.root, name, [Update(None, ref, held.sha)])
    if pushed.outcome is not PushOutcome.OK:
        raise ClaimError(
            task_id, f"its claim changed since it was read ({pushed.outcome.value}); nothing released"
        )
    _note(project, task_id, None)
    return held


def steal(project: Project, task_id: str, who: str, *, now: float | None = None) -> Claim:
    """Take over a stale claim (its machine silent longer than claim_stale), a lease on
    the sha seen: if the ref moved meanwhile, nothing is taken."""
    name, ref = shared(project), ref_of(project, task_id)
    now = time.time() if now is None else now
    everything = refresh(project)
    held = everything.get(task_id)
    if held is None:
        raise ClaimError(task_id, "no machine claims it; claim it: wf status ID progress WHO")
    if held.machine == this_machine():
        raise ClaimError(task_id, "this machine holds it already")
    silent = now - last_sign(everything, held.machine)
    if silent <= project.config.claim_stale:
        raise ClaimError(
            task_id,
            f"machine {held.machine} was heard from {int(silent)} s ago, less than claim_stale "
            f"({int(project.config.claim_stale)} s); it is not stale",
            held.who,
        )
    sha = _commit(project, task_id, who, held.lane, time.time())
    [pushed] = remote.push(project.root, name, [Update(sha, ref, held.sha)])
    if pushed.outcome is not PushOutcome.OK:
        raise ClaimError(
            task_id, f"its claim changed since it was read ({pushed.outcome.value}); nothing taken"
        )
    claim = Claim(task_id, who, this_machine(), held.lane, time.time(), sha)
    _note(project, task_id, claim)
    return claim


def renew(project: Project) -> list[Claim]:
    """This machine's claims made anew with the time now (each a lease on the sha seen):
    a sign of life, so a long task is not taken for a silent machine's."""
    name, me = shared(project), this_machine()
    out = []
    for task_id, held in sorted(refresh(project).items()):
        if held.machine != me:
            continue
        now = time.time()
        sha = _commit(project, task_id, held.who, held.lane, now)
        [pushed] = remote.push(project.root, name, [Update(sha, ref_of(project, task_id), held.sha)])
        if pushed.outcome is PushOutcome.OK:
            claim = Claim(task_id, held.who, me, held.lane, now, sha)
            _note(project, task_id, claim)
            out.append(claim)
    return out


def last_sign(claims: dict[str, Claim], machine: str) -> float:
    """A machine's last sign of life: the time of its newest claim."""
    return max((c.time for c in claims.values() if c.machine == machine), default=0.0)


def audit(project: Project, *, now: float | None = None) -> list[ClaimIssue]:
    """What ``wf check`` says of the claims: stale ones (may be stolen), refs without an
    open task, tasks in progress in a shared lane without a ref; offline, that alone."""
    from wf.tasks import backlog as backlogmod

    now = time.time() if now is None else now
    try:
        everything = refresh(project)
    except RemoteError as e:
        return [ClaimIssue(IssueKind.UNREACHABLE, "", None, f"claims not checked: {e}")]
    bl = backlogmod.load(project)
    out: list[ClaimIssue] = []
    for task_id, c in sorted(everything.items()):
        silent = now - last_sign(everything, c.machine)
        if c.machine != this_machine() and silent > project.config.claim_stale:
            out.append(
                ClaimIssue(
                    IssueKind.STALE, task_id, c,
                    f"claim {c.line()}: machine {c.machine} silent for {int(silent)} s; "
                    f"take it over: wf claims steal {task_id} WHO",
                )
            )  # fmt: skip
        task = bl.doc.find(task_id)
        if task is None or (c.machine == this_machine() and task.status.state != "progress"):
            where = "which is not an open task here" if task is None else "which TASKS.md does not claim"
            out.append(
                ClaimIssue(
                    IssueKind.NO_TASK, task_id, c,
                    f"claim ref of {task_id} ({c.machine}), {where}: wf claims release {task_id}",
                )
            )  # fmt: skip
    for task in bl.doc.tasks:
        if (
            task.status.state == "progress"
            and task.id not in everything
            and not local_only(project, bl.lane_of(task))
        ):
            out.append(
                ClaimIssue(
                    IssueKind.NO_REF, task.id, None,
                    f"{task.id} is in progress ({task.status.text}) but no machine holds its claim ref",
                )
            )  # fmt: skip
    return out


class Settled(enum.Enum):
    RELEASED = "released"  # this machine's ref was deleted
    KEPT = "kept"  # the task is still in progress, or another machine holds the ref
    NONE = "none"  # there was no ref
    OFFLINE = "offline"  # the remote could not be reached: the ref stays (wf check lists it)


def settle(project: Project, task_id: str) -> Settled:
    """After a status change: release this machine's ref of a task no longer in progress
    (done, archived, back to pending, awaiting, blocked). Offline the ref stays."""
    from wf.tasks import backlog as backlogmod

    bl = backlogmod.load(project)
    task = bl.doc.find(task_id)
    if task is not None and task.status.state == "progress":
        return Settled.KEPT
    if task is not None and local_only(project, bl.lane_of(task)):
        return Settled.NONE  # this machine's lane alone: its claims have no ref
    try:
        return Settled.RELEASED if release(project, task_id) is not None else Settled.NONE
    except ClaimError:
        return Settled.KEPT
    except RemoteError:
        return Settled.OFFLINE


def set_status(
    project: Project,
    task_id: str,
    state: str,
    note: str | None,
    *,
    force: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[Status, Claim | None, Settled | None]:
    """``wf status`` with a shared remote: a claim (progress) takes the ref first (a lost
    race or an offline remote writes nothing), and the TASKS.md line after; if that line
    cannot be written, a ref this call made is released. Any other state releases this
    machine's ref. (The status, the claim taken, what became of the ref.)"""
    from wf.tasks import backlog as backlogmod
    from wf.tasks import ops

    if state not in ("progress", "in-progress"):
        st = ops.set_status(project, task_id, state, note, force=force, on_wait=on_wait)
        return st, None, settle(project, task_id)
    bl = backlogmod.load(project)
    lane = bl.lane_of(bl.doc.task(task_id))
    if local_only(project, lane) or not (note or "").strip():
        return ops.set_status(project, task_id, state, note, force=force, on_wait=on_wait), None, None
    claim, made = take(project, task_id, (note or "").strip(), lane)
    try:
        st = ops.set_status(project, task_id, state, note, force=force, on_wait=on_wait)
    except BaseException:
        if made:
            try:
                release(project, task_id)
            except WfError:
                pass  # the ref stays this machine's: wf check lists it, a re-claim here reuses it
        raise
    return st, claim, None


def for_pick(project: Project, lane: str) -> set[str]:
    """Before a pick of a shared lane: the tasks other machines hold (skip them).
    Offline: an OfflineClaim, nothing written."""
    if local_only(project, lane):
        return set()
    try:
        everything = refresh(project)
    except RemoteError as e:
        raise OfflineClaim(f"a task of lane {lane}", e) from None
    return {t for t, c in everything.items() if c.machine != this_machine()}


def take_for_pick(project: Project, task_id: str, who: str, lane: str) -> bool:
    """A pick's claim of ``task_id``: True if this machine holds it now (or the lane is
    local-only), False if another machine won it."""
    if local_only(project, lane):
        return True
    try:
        take(project, task_id, who, lane)
    except OfflineClaim:
        raise
    except ClaimError:
        return False
    return True
