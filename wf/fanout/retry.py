"""Re-running what did not land: ``wf runs retry`` and ``wf run M --run R`` on a run
that exists.

Attempts of one unit form a family: the first attempt ``u1``, then ``u1-r1``, ``u1-r2``,
each recording ``retry_of`` (the first attempt) and ``retry`` (its count). Only a
family's latest attempt counts. A family is re-run when that attempt is not done, or is
done with a FALLBACK instead of an answer, or with an answer that breaks the return
contract (see ``ledger``), and the count stays within the cap.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from wf import adapters
from wf.base.errors import WfError
from wf.base.project import Project
from wf.fanout import ledger
from wf.fanout.manifest import saved_requests
from wf.fanout.units import UnitRequest
from wf.workers import runs

DEFAULT_MAX_RETRIES = 2
RESUME_PROMPT = "Continue where you stopped and finish the task. End with your final answer."


class Skip(NamedTuple):
    unit: str
    why: str
    done: bool = False  # it landed well: nothing for a person to do


def families(statuses: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for st in statuses:
        root = str(st.get("retry_of") or st.get("unit"))
        out.setdefault(root, []).append(st)
    for attempts in out.values():
        attempts.sort(key=lambda st: int(st.get("retry") or 0))
    return out


def landed_well(st: dict[str, Any]) -> bool:
    """Done with an answer of its own that keeps the contract (``st`` annotated by
    ``ledger.annotate``, or recorded when the unit ended)."""
    return st.get("state") == "done" and not st.get("fallback") and not ledger.invalid(st)


def _failed(st: dict[str, Any]) -> bool:
    """Ended without being done, or done with only a FALLBACK (``--failed``)."""
    return st.get("state") not in runs.LIVE and (st.get("state") != "done" or bool(st.get("fallback")))


def _free_id(project: Project, run: str, root: str, count: int) -> str:
    base = f"{root[:40]}-r{count}"
    uid, n = base, 1
    while runs.unit_dir(project, run, uid).exists():
        uid, n = f"{base}-{n}", n + 1
    return uid


def _from_status(project: Project, run: str, st: dict[str, Any]) -> UnitRequest:
    """The request that made a unit, read back from its folder."""
    folder = runs.unit_dir(project, run, str(st["unit"]))
    try:
        prompt = (folder / "prompt.txt").read_text("utf-8")
    except OSError:
        raise WfError(f"unit {st['unit']} has no prompt.txt to retry with") from None
    mode = st.get("mode") or ("clone" if st.get("clone") else "cwd")
    given = st.get("access")
    access: dict[str, Any] = given if isinstance(given, dict) else {}
    sections = ledger.required(st)  # None: the contract was off (or the unit predates it)
    return UnitRequest(
        id=str(st["unit"]),
        prompt=prompt,
        adapter=st.get("adapter"),
        # the model wf asked for (the one the tool reported, in a record older than that)
        model=st["model_asked"] if "model_asked" in st else st.get("model"),
        model_source=st.get("model_source"),
        effort=st.get("effort"),
        timeout=st.get("timeout_s"),
        stall=st.get("stall_s"),
        cwd=st.get("cwd") if mode == "cwd" else None,
        mode=mode,
        cmd=tuple(st.get("cmd") or ()),
        permission_mode=st.get("permission_mode") or access.get("permission_mode"),
        access={k: access[k] for k in adapters.ACCESS_KEYS if k in access},  # never wider on a retry
        contract=sections is not None,
        sections=sections or (),
    )


def next_attempt(
    project: Project,
    run: str,
    attempts: list[dict[str, Any]],
    base: UnitRequest | None,
    *,
    resume: bool,
    max_retries: int,
) -> UnitRequest | Skip:
    """The next attempt of a family (or why there is none)."""
    last = attempts[-1]
    root = str(attempts[0].get("retry_of") or attempts[0].get("unit"))
    if last.get("state") in runs.LIVE:
        return Skip(root, f"still running ({last['unit']})")
    if last.get("state") == runs.CORRUPT:
        # nothing it says (its request, its attempt count, whether it still runs) holds
        why = f"{last['unit']}'s status.json cannot be trusted ({last.get('error')}); {runs.CORRUPT_FIX}"
        return Skip(root, why)
    if landed_well(last):
        return Skip(root, f"done ({last['unit']})", done=True)
    count = int(last.get("retry") or 0) + 1
    if count > max_retries:
        return Skip(root, f"gave up: {count - 1} retries already (--max-retries {max_retries})")
    req = base or _from_status(project, run, last)
    req = req._replace(id=_free_id(project, run, root, count), retry_of=root, retry=count)
    if resume:
        if not last.get("session_id"):
            return Skip(root, f"{last['unit']} has no session to resume; use --fresh")
        req = req._replace(resume_from=str(last["unit"]), prompt=RESUME_PROMPT, session=None)
    else:
        req = req._replace(resume_from=None)
    return req


def plan_manifest(
    project: Project, run: str, reqs: list[UnitRequest], max_retries: int
) -> tuple[list[UnitRequest], list[Skip]]:
    """``wf run M --run R`` on a run that exists: what is done is skipped, what did not
    land is retried, what is new runs."""
    fams = families(ledger.annotate(project, run, runs.units(project, run)))
    todo: list[UnitRequest] = []
    skipped: list[Skip] = []
    for req in reqs:
        if req.id not in fams:
            todo.append(req)
            continue
        nxt = next_attempt(project, run, fams[req.id], req, resume=False, max_retries=max_retries)
        (skipped if isinstance(nxt, Skip) else todo).append(nxt)  # type: ignore[arg-type]
    return todo, skipped


def plan_retry(
    project: Project,
    run: str,
    units: list[str],
    *,
    failed: bool,
    missing: bool,
    resume: bool,
    max_retries: int,
    invalid: bool = False,
) -> tuple[list[UnitRequest], list[Skip]]:
    """``wf runs retry``: the units named (any attempt of them), else those that ended
    without being done or with a FALLBACK (``failed``), those of the run's manifest that
    never started (``missing``), and every unit the ledger names, the ones ``wf gather``
    lists (``invalid``: an answer that breaks the contract, or no result); no flag means
    all three."""
    statuses = ledger.annotate(project, run, runs.units(project, run))
    fams = families(statuses)
    root_of = {str(st["unit"]): str(st.get("retry_of") or st["unit"]) for st in statuses}
    saved = {r.id: r for r in saved_requests(project, run)}
    todo: list[UnitRequest] = []
    skipped: list[Skip] = []
    roots: list[str] = []
    fresh: list[UnitRequest] = []
    if units:
        for u in units:
            if u in root_of:
                roots.append(root_of[u])
            elif u in saved:
                fresh.append(saved[u])
            else:
                raise WfError(f"no unit {u} in run {run}")
    else:
        if not failed and not missing and not invalid:
            failed = missing = invalid = True
        # what ended without landing; a unit still running has not failed
        roots = [
            r
            for r, attempts in fams.items()
            if (failed and _failed(attempts[-1])) or (invalid and ledger.needs(attempts[-1]) is not None)
        ]
        if missing or invalid:
            fresh = [r for i, r in saved.items() if i not in fams]
    for root in dict.fromkeys(roots):
        nxt = next_attempt(project, run, fams[root], None, resume=resume, max_retries=max_retries)
        (skipped if isinstance(nxt, Skip) else todo).append(nxt)  # type: ignore[arg-type]
    return todo + fresh, skipped
