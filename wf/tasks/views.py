"""What the read-only commands report: rows and records, as text or JSON-ready dicts.

Text output is short and exact (an orchestrating agent reads it); every function here
returns data or strings and never prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wf.base.errors import ParseIssue, UnknownTask
from wf.base.records import CorruptRecord
from wf.base.text import safe_line, table

if TYPE_CHECKING:  # kept out of the import path of a cached `wf list`
    from wf.tasks.backlog import Backlog
    from wf.tasks.taskfile import Task

RUNNER_LIMIT = 20


def state_of(bl: Backlog, task: Task, blockers: list[str]) -> str:
    """ready, handback (pending, but handed back: a person must change it), or the
    task's Status state."""
    st = task.status.state
    if st == "pending":
        if not blockers:
            return "ready"
        if bl.handback(task) is not None:
            return "handback"
    return st


def task_record(bl: Backlog, task: Task, blockers: list[str] | None = None) -> dict[str, Any]:
    why = bl.blockers(task) if blockers is None else blockers
    st = task.status
    hold = bl.hold(task)
    return {
        "id": task.id,
        "title": task.title,
        "lane": bl.lane_of(task),
        "model": task.model,
        "prio": task.prio,
        "effort": task.effort,
        "done": task.done,
        "after": list(task.after),
        "sessions": task.sessions,
        "cloud": task.cloud,
        "parent": task.parent,
        "status": str(st),
        "state": state_of(bl, task, why),
        "who": st.who or None,
        "notes": task.notes,
        "ready": not why,
        "slice": not why and bl.is_slice_job(task),
        "blockers": why,
        "hold": hold.as_dict() if hold is not None else None,
        "line": task.line,
    }


def _fmt_effort(e: float | None) -> str:
    return "-" if e is None else f"e{e:g}"


def list_rows(
    bl: Backlog,
    *,
    runner: bool = False,
    lane: str | None = None,
    status: str | None = None,
    limit: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """The records to show (at most ``limit``, 0 = all) and how many there are in all."""
    if runner:
        tasks = bl.runner_ready(lane)
        shown = tasks if limit <= 0 else tasks[:limit]
        return [task_record(bl, t, []) for t in shown], len(tasks)
    records = []
    for t in bl.doc.tasks:
        rec = task_record(bl, t)
        if lane is not None and rec["lane"] != lane:
            continue
        if (
            status is not None
            and rec["state"] != status
            and not (status == "pending" and rec["state"] in ("ready", "handback"))
        ):
            continue
        records.append(rec)
    return (records if limit <= 0 else records[:limit]), len(records)


def list_text(records: list[dict[str, Any]], total: int, *, runner: bool) -> list[str]:
    rows = []
    for r in records:
        if runner:
            rid = ("slice: " if r["slice"] else "") + r["id"]
            rows.append([rid, r["lane"] or "-", f"p{r['prio']}", _fmt_effort(r["effort"]), r["title"]])
        else:
            state = r["state"] if r["state"] != "progress" else f"progress:{r['who'] or '?'}"
            if r.get("machine"):  # a shared remote: the machine that holds the claim
                state += f"@{r['machine']}"
            rows.append([r["id"], r["lane"] or "-", f"p{r['prio']}", state, r["title"]])
    lines = table(rows)
    if total > len(records):
        lines.append(f"... {total - len(records)} more (--limit 0 shows all)")
    return lines


def issue_lines(issues: list[ParseIssue], limit: int = 50) -> list[str]:
    lines = [safe_line(str(i)) for i in issues[:limit]]
    if len(issues) > limit:
        lines.append(f"... {len(issues) - limit} more (wf check)")
    return lines


def check_summary(bl: Backlog, issues: list[ParseIssue]) -> dict[str, Any]:
    errors = sum(1 for i in issues if i.level == "error")
    return {
        "tasks": len(bl.doc.tasks),
        "ready": len(bl.runner_ready()),
        "archived": len(bl.archive.entries),
        "errors": errors,
        "warnings": len(issues) - errors,
        "issues": [i.as_dict() for i in issues],
    }


def lanes(bl: Backlog, virtual: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """A row per lane of wf.toml, then the ``virtual`` rows given (the cloud lane's, made
    by ``wf.cloud.lane.lane_row``), then one per lane that tasks name but wf.toml lacks."""
    counts = {
        ln.name: {
            "ready": 0,
            "progress": 0,
            "awaiting": 0,
            "handback": 0,
            "blocked": 0,
            "wip": 0,
            "pending": 0,
        }
        for ln in bl.config.lanes
    }
    unknown: dict[str, int] = {}
    for t in bl.doc.tasks:
        name = bl.lane_of(t)
        if name not in counts:
            key = name or "(none)"
            unknown[key] = unknown.get(key, 0) + 1
            continue
        counts[name][state_of(bl, t, bl.blockers(t))] += 1
    out: list[dict[str, Any]] = []
    for ln in bl.config.lanes:
        rec = bl.lane_record(ln.name)
        bad = rec if isinstance(rec, CorruptRecord) else None
        active = None if rec is None or isinstance(rec, CorruptRecord) else rec.id
        out.append(
            {
                "lane": ln.name,
                "model": ln.model,
                "adapter": ln.adapter,
                "max_parallel": ln.max_parallel,
                **counts[ln.name],
                "active": active,
                "parked": rec.parked() if rec is not None and not isinstance(rec, CorruptRecord) else None,
                **({"corrupt": str(bad)} if bad else {}),
            }
        )
    out.extend(virtual)
    for name, n in unknown.items():
        out.append(
            {
                "lane": name,
                "model": None,
                "adapter": None,
                "max_parallel": 0,
                **{k: 0 for k in ("ready", "progress", "awaiting", "handback", "blocked", "wip", "pending")},
                "active": None,
                "tasks": n,
                "missing": True,
            }
        )
    return out


def lanes_text(records: list[dict[str, Any]]) -> list[str]:
    rows = [["lane", "model", "adapter", "ready", "progress", "awaiting", "handback", "blocked", "active"]]
    notes = []
    for r in records:
        if r.get("missing"):
            if r["lane"] == "(none)":
                notes.append(f"{r['tasks']} task(s) without Model or Lane")
            else:
                notes.append(f"{r['tasks']} task(s) in lane {r['lane']}, which does not exist")
            continue
        rows.append(
            [
                r["lane"],
                r["model"],
                f"{r['adapter']}x{r['max_parallel']}" if r["max_parallel"] > 1 else r["adapter"],
                str(r["ready"]),
                str(r["progress"]),
                str(r["awaiting"]),
                str(r["handback"]),
                str(r["blocked"]),
                "corrupt"
                if r.get("corrupt")
                else (r["active"] or "-") + (f", {r['parked']}" if r.get("parked") else ""),
            ]
        )
        if r.get("corrupt"):
            notes.append(r["corrupt"])
        if "claims" in r:  # a shared remote: the lane's machine, and who holds its claims
            rows[-1] += [
                r["machine"] or "*",
                ", ".join(f"{t}@{m}" for t, m in sorted(r["claims"].items())) or "-",
            ]
    if any("claims" in r for r in records):
        rows[0] += ["machine", "claims"]
    return table(rows) + notes


def show(bl: Backlog, task_id: str) -> dict[str, Any]:
    task = bl.doc.find(task_id)
    if task is None:
        entry = bl.archive.find(task_id)
        if entry is None:
            raise UnknownTask(task_id, f"{bl.doc.path} or {bl.archive.path}")
        return {"id": task_id, "archived": True, **entry.as_dict(), "line": entry.line}
    rec = task_record(bl, task)
    rec["archived"] = False
    rec["text"] = bl.doc.text_of(task)
    rec["path"] = bl.doc.path
    rec["errors"] = [str(i) for i in bl.doc.issues if i.level == "error" and task.start < i.line <= task.end]
    return rec


def show_text(rec: dict[str, Any]) -> list[str]:
    if rec["archived"]:
        return [
            f"{rec['id']}: {rec['title']}",
            f"archived {rec['ts']}  lane={rec['lane']} model={rec['model']} commit={rec['commit']}",
        ]
    lines = [f"{rec['path']}:{rec['line']}  lane={rec['lane'] or '-'}  state={rec['state']}"]
    if rec["ready"]:
        lines.append("runner-ready: yes" + (" (slice job: Effort above slice_above)" if rec["slice"] else ""))
    else:
        lines.append("runner-ready: no")
        lines.extend(f"  - {why}" for why in rec["blockers"])
        lines.extend(f"      {e}" for e in rec.get("errors", ()))
    hold = rec.get("hold")
    if hold:
        since = f" since {hold['since']}" if hold["since"] else ""
        lines.append(f"held ({hold['kind']}{since}): {hold['why']}")
        lines.append(f"  release: {hold['release']}")
    lines.append("")
    lines.extend(x.removesuffix("\r") for x in rec["text"].rstrip("\r\n").split("\n"))
    return lines  # made safe for the terminal where they are printed


def ctx(bl: Backlog, task_id: str, cwd: Path) -> dict[str, Any]:
    task = bl.doc.task(task_id)
    lane = bl.lane_of(task)
    root = bl.project.root
    rec = bl.lane_record(lane) if lane else None
    if isinstance(rec, CorruptRecord):
        raise rec  # its worktree cannot be trusted: a worker must not be sent anywhere by it
    worktree = None
    if rec is not None and rec.id == task_id:
        worktree = rec.worktree
    else:
        wt_dir = bl.project.worktrees_dir.resolve()
        here = cwd.resolve()
        if here == wt_dir or wt_dir in here.parents:
            rel = here.relative_to(wt_dir).parts
            worktree = str(wt_dir / rel[0]) if rel else None
    after = []
    for a in task.after:
        e = bl.archive.find(a)
        after.append(e.raw if e else f"{a} (not done yet)")
    return {
        "id": task.id,
        "title": task.title,
        "lane": lane,
        "model": task.model,
        "effort": task.effort,
        "done": task.done,
        "after": after,
        "main_tree": str(root),
        "tasks_file": str(bl.project.tasks_path),
        "archive_file": str(bl.project.archive_path),
        "worktree": worktree,
        "branch": f"{lane}/{task.id}" if lane else None,
        "slice": bl.is_slice_job(task) and not bl.blockers(task),
        "text": bl.doc.text_of(task),
    }


def ctx_text(c: dict[str, Any]) -> list[str]:
    lines = [
        f"Task: {c['id']}  Lane: {c['lane'] or '-'}  Model: {c['model'] or '-'}",
        f"Main tree: {c['main_tree']}",
        f"Worktree: {c['worktree'] or '-'}  Branch: {c['branch'] or '-'}",
        f"Tasks: {c['tasks_file']}  Archive: {c['archive_file']}",
        f"Done when: {c['done'] or '(no Done line: ask for one)'}",
    ]
    if c["after"]:
        lines.append("After (done before this one):")
        lines.extend(f"  {a}" for a in c["after"])
    if c["slice"]:
        lines.append(
            "This is a slice job: split it into tasks with 'Parent: " + c["id"] + "', do not implement it."
        )
    lines.append("")
    lines.extend(x.removesuffix("\r") for x in c["text"].rstrip("\r\n").split("\n"))
    return lines  # made safe for the terminal where they are printed
