"""The backlog as a whole: TASKS.md, the archive, the lanes and the holds, read together.

One function decides runner-readiness (``blockers``), and every command that needs it
(``wf list``, ``wf show``, ``wf lanes``, ``wf check``, claims, ``wf orch pick``, batch
planning, the pilot, the cloud lane) calls it. Beyond TASKS.md it reads the handback
records (``wf.tasks.holds``): a task the loop handed back is not ready until a person changes
it or runs ``wf status ID pending``.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import TYPE_CHECKING

from wf.base.config import Config
from wf.base.errors import IssueKind, ParseError, ParseIssue, WfError
from wf.base.project import Project
from wf.base.records import CorruptRecord
from wf.tasks import holds as holdsmod
from wf.tasks.holds import Hold, HoldKind

if TYPE_CHECKING:  # imported where used: a ``wf list`` answered from its cache parses nothing
    from wf.tasks import archive as archivemod
    from wf.tasks.taskfile import Task, TasksFile


class Backlog:
    """TASKS.md (``doc``, parsed from the exact bytes ``data``), the archive and the
    project's settings."""

    def __init__(
        self,
        project: Project,
        doc: TasksFile,
        archive: archivemod.Archive,
        data: bytes,
        archive_data: bytes | None = None,
        held: holdsmod.HeldRecords | None = None,
        children: dict[str, list[str]] | None = None,
    ) -> None:
        self.project = project
        self._held = held  # the handback records: read on first need, once
        self._lane_recs: dict[str, holdsmod.LaneRecord | CorruptRecord | None] = {}
        self.doc = doc
        self.archive = archive
        self.data = data
        self.archive_data = archive_data  # the archive's exact bytes (None: no file)
        self._archived = archive.ids()
        # each parent's open children; given when ``doc`` holds only some of the tasks
        self._children: dict[str, list[str]] | None = children
        self._checked: dict[str | None, list[ParseIssue]] = {}  # check(finishing), by finishing
        self._error_lines = sorted(i.line for i in doc.issues if i.level == "error")
        cfg = project.config
        self._lane_names = {ln.name for ln in cfg.lanes}
        self._model_lane: dict[str, str] = {}
        for ln in reversed(cfg.lanes):
            self._model_lane[ln.model] = ln.name
        for ln in cfg.lanes:
            self._model_lane.setdefault(ln.name, ln.name)

    @property
    def config(self) -> Config:
        return self.project.config

    # ------------------------------------------------------------ lanes
    def lane_of(self, task: Task) -> str | None:
        """The task's lane name: its Lane field, else the lane of its Model."""
        kv = task.kv
        lane = kv.get("lane")
        if lane:
            return lane
        model = kv.get("model")
        return self._model_lane.get(model) if model else None

    # ------------------------------------------------------------ readiness
    def open_children(self) -> dict[str, list[str]]:
        if self._children is None:
            from wf.tasks import taskfile

            self._children = taskfile.open_children(self.doc.tasks)
        return self._children

    @property
    def held(self) -> holdsmod.HeldRecords:
        if self._held is None:
            self._held = holdsmod.load_held(self.project.wf_dir)
        return self._held

    def handback(self, task: Task) -> Hold | None:
        """The hold of a handback record on the task; None without a record, or when a
        person changed the task's text since the loop left it. A record that cannot be
        trusted holds the task (never read as "no hold")."""
        held = self.held
        if held.empty:
            return None
        bad = held.corrupt.get(task.id)
        if bad is not None:
            return Hold(
                HoldKind.CORRUPT,
                f"its handback record cannot be trusted ({bad.path}: {bad.why})",
                "wf doctor --fix moves the record aside",
            )
        rec = held.records.get(task.id)
        if rec is None or rec.digest != holdsmod.task_digest(self.doc.text[task.span[0] : task.span[1]]):
            return None
        return Hold(
            HoldKind.HANDBACK,
            "handed back by its worker (its last Note says why), waiting for a person",
            f"change the task (wf edit {task.id}, wf set, an editor) or wf status {task.id} pending",
            rec.since or None,
        )

    def lane_record(self, lane: str) -> holdsmod.LaneRecord | CorruptRecord | None:
        """The lane's record, read once per command: None if it has none, the fault if it
        cannot be trusted (each reader decides how to show it; none reads it as "none")."""
        if lane not in self._lane_recs:
            try:
                self._lane_recs[lane] = holdsmod.lane_record(self.project.wf_dir, lane)
            except CorruptRecord as e:
                self._lane_recs[lane] = e
        return self._lane_recs[lane]

    def hold(self, task: Task) -> Hold | None:
        """What holds the task for a person or for whoever picked it, and what releases it."""
        if "status" not in task.kv:
            return self.handback(task)
        st = task.status
        tid = task.id
        if st.state == "pending":
            return self.handback(task)
        if st.state == "awaiting":
            return Hold(HoldKind.AWAITING, st.text, f"answer it in the task, then wf status {tid} pending")
        if st.state == "wip":
            return Hold(
                HoldKind.WIP, st.text, f"wf status {tid} pending (the next pick goes on from its kept branch)"
            )
        if st.state == "blocked":
            return Hold(HoldKind.BLOCKED, st.text, f"fix what it names, then wf status {tid} pending")
        lane = self.lane_of(task)
        rec = self.lane_record(lane) if lane else None
        if isinstance(rec, CorruptRecord):
            return Hold(
                HoldKind.CORRUPT,
                f"its lane record cannot be trusted ({rec.path}: {rec.why})",
                "wf doctor --fix moves the record aside",
            )
        if rec is not None and rec.id == tid:
            who = f"wf orch run pid {rec.owner}" if rec.owner else "an interactive orchestrator"
            return Hold(
                HoldKind.PICKED,
                f"picked by {who} in lane {lane}",
                f"wf orch post {lane} --result R (its report)",
                rec.started or None,
            )
        return Hold(
            HoldKind.CLAIMED,
            f"claimed by {st.who or '?'}",
            f"wf done {tid}, or wf status {tid} pending",
            st.since or None,
        )

    def blockers(self, task: Task, *, handback: bool = True) -> list[str]:
        """Why the task is not runner-ready; an empty list means it is. ``handback=False``
        leaves a handback hold out (a person named the task: ``wf orch pick --id``)."""
        why: list[str] = []
        kv = task.kv
        if "status" in kv:
            st = task.status
            if st.state != "pending":
                why.append(f"status is {st}")
        model = kv.get("model")
        if not model:
            why.append("no Model")
        if not kv.get("done"):
            why.append("no Done")
        lane = self.lane_of(task)
        if model or kv.get("lane"):
            if lane is None:
                why.append(f"no lane for model {model} (wf lanes)")
            elif lane not in self._lane_names:
                why.append(f"lane {lane} does not exist (wf lanes)")
        if "after" in kv:
            waiting = [a for a in task.after if a not in self._archived]
            if waiting:
                why.append(f"after {', '.join(waiting)} (not done)")
        if "sessions" in kv and task.sessions == "owner":
            why.append("Sessions: owner (a person works it)")
        kids = self.open_children().get(task.id)
        if kids:
            why.append(f"open slices: {', '.join(kids)}")
        if self._error_lines:
            at = bisect.bisect_right(self._error_lines, task.start)
            if at < len(self._error_lines) and self._error_lines[at] <= task.end:
                why.append("has errors (wf check)")
        if handback:
            held = self.handback(task)
            if held is not None:
                if held.kind is HoldKind.CORRUPT:
                    why.append(held.why)
                else:
                    why.append(
                        f"handed back, waiting for a person (change it, or wf status {task.id} pending)"
                    )
        return why

    def is_slice_job(self, task: Task) -> bool:
        """A ready task too big to implement at once, never sliced before."""
        effort = task.effort
        if effort is None or effort <= self.config.slice_above:
            return False
        return not any(e.parent == task.id for e in self.archive.entries)

    def runner_ready(self, lane: str | None = None) -> list[Task]:
        """Runner-ready tasks in lane order (wf.toml), then Prio, then file order."""
        order = {ln.name: i for i, ln in enumerate(self.config.lanes)}
        ready = []
        for pos, t in enumerate(self.doc.tasks):
            kv = t.kv
            if "status" in kv and t.status.state != "pending":
                continue  # the common reason, checked before the full rule
            t_lane = self.lane_of(t)
            if lane is not None and t_lane != lane:
                continue
            if not self.blockers(t):
                ready.append((order.get(t_lane or "", len(order)), t.prio, pos, t))
        ready.sort(key=lambda x: x[:3])
        return [x[3] for x in ready]

    # ------------------------------------------------------------ check
    def check(self, finishing: str | None = None) -> list[ParseIssue]:
        """Every problem of the backlog: TASKS.md's own, and those across files. Each
        problem inside one task carries that task's id and names its own line.
        ``finishing`` names a task whose archiving was interrupted (it is in both files):
        that one disagreement is not reported. Worked out once per backlog (a write checks
        the file, then the change asks for one task's errors): the files do not change."""
        found = self._checked.get(finishing)
        if found is None:
            found = self._checked[finishing] = self._check(finishing)
        return list(found)

    def _check(self, finishing: str | None) -> list[ParseIssue]:
        issues = list(self.doc.issues) + list(self.archive.issues)
        path = self.doc.path
        ids = self.doc.ids()
        archived = {e.id: e for e in self.archive.entries}
        for t in self.doc.tasks:
            if t.id in archived and t.id != finishing:
                issues.append(
                    ParseIssue(
                        path,
                        t.line,
                        "error",
                        f"id {t.id!r} is already in the archive ({self.archive.path}:"
                        f"{archived[t.id].line}); finish with 'wf done {t.id}' or choose a new id",
                        t.id,
                    )
                )
            kv = t.kv
            for a in dict.fromkeys(t.after) if "after" in kv else ():  # a repeated id: said once
                if a == t.id:
                    issues.append(
                        ParseIssue(path, _line_of(t, "after"), "error", f"task {t.id} is After itself", t.id)
                    )
                elif a not in ids and a not in archived:
                    issues.append(
                        ParseIssue(path, _line_of(t, "after"), "error", f"After names unknown id {a!r}", t.id)
                    )
            p = t.parent if "parent" in kv else None
            if p is not None and p not in ids and p not in archived:
                issues.append(
                    ParseIssue(path, _line_of(t, "parent"), "error", f"Parent names unknown id {p!r}", t.id)
                )
            elif p == t.id:
                issues.append(
                    ParseIssue(path, _line_of(t, "parent"), "error", f"task {t.id} is its own Parent", t.id)
                )
            named = kv.get("lane")
            if named and named not in self._lane_names:
                issues.append(
                    ParseIssue(
                        path,
                        _line_of(t, "lane"),
                        "error",
                        f"no lane {named!r} in wf.toml; not runner-ready (wf lanes)",
                        t.id,
                    )
                )
            elif kv.get("model") and self.lane_of(t) not in self._lane_names:
                issues.append(
                    ParseIssue(
                        path,
                        t.line,
                        "warning",
                        f"no lane runs model {t.model!r}; not runner-ready (wf lanes)",
                    )
                )
        issues.extend(self._cycles())
        for w in self.config.warnings:
            issues.append(ParseIssue(w.where, 0, "warning", w.text))
        issues.sort(key=lambda i: (i.path != path, i.line))
        return issues

    def structural_errors(self) -> list[ParseIssue]:
        """Errors that stop every write: the file cannot be split into tasks safely."""
        return [i for i in self.check() if i.level == "error" and i.task is None]

    def task_errors(self, task_id: str) -> list[ParseIssue]:
        """Errors confined to one task: they stop only writes that touch it."""
        return [i for i in self.check() if i.level == "error" and i.task == task_id]

    def write_errors(
        self, finishing: str | None = None
    ) -> tuple[list[ParseIssue], dict[str, list[ParseIssue]]]:
        """(structural errors, errors by task) in one pass, for a write."""
        structural: list[ParseIssue] = []
        by_task: dict[str, list[ParseIssue]] = {}
        for i in self.check(finishing):
            if i.level != "error":
                continue
            if i.task is None:
                structural.append(i)
            else:
                by_task.setdefault(i.task, []).append(i)
        return structural, by_task

    def _cycles(self) -> list[ParseIssue]:
        ids = self.doc.ids()
        # each edge once: an id repeated in After is one dependency, and one cycle
        graph = {
            t.id: [a for a in dict.fromkeys(t.after) if a in ids] for t in self.doc.tasks if "after" in t.kv
        }
        state: dict[str, int] = {}
        found: list[ParseIssue] = []
        for root in graph:
            if state.get(root):
                continue
            stack = [(root, iter(graph[root]))]
            path = [root]
            state[root] = 1
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[node] = 2
                    stack.pop()
                    path.pop()
                elif state.get(nxt) == 1:
                    cycle = [*path[path.index(nxt) :], nxt]
                    task = self.doc.task(nxt)
                    found.append(
                        ParseIssue(
                            self.doc.path,
                            _line_of(task, "after"),
                            "error",
                            f"After cycle: {' -> '.join(cycle)}",
                            task.id,
                        )
                    )
                elif not state.get(nxt):
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, iter(graph.get(nxt, ()))))
        return found

    def errors(self) -> list[ParseIssue]:
        return [i for i in self.check() if i.level == "error"]


def _line_of(task: Task, key: str) -> int:
    """The 1-based line of the task's first ``key`` field (its heading if it has none)."""
    for f in task.fields:
        if f.key.lower() == key:
            return f.at + 1
    return task.line


def read_settled(project: Project) -> tuple[bytes | None, bytes | None]:
    """TASKS.md's and the archive's bytes (None: no file) for a reader, settled as a write
    reads them: ``settle.read_backlog``."""
    from wf.base import settle

    return settle.read_backlog(project)


def load(project: Project) -> Backlog:
    """The backlog. A TASKS.md that a program is saving is read once the save is done
    (``read_settled``); one that is not UTF-8 is read again a few times first (a save may
    be cut in a character); if it stays so, the ParseError names its line and byte offset."""
    from wf.base import settle

    data, archive_data = read_settled(project)
    if data is not None and not data.isascii():
        data = settle.reread_until_text(project.tasks_path, project.config.tasks, data, project.lock_timeout)
    return from_bytes(project, data, archive_data)


def from_bytes(project: Project, data: bytes | None, archive_data: bytes | None) -> Backlog:
    from wf.tasks import archive as archivemod

    if data is None:
        raise WfError(f"no {project.config.tasks} in {project.root}; run 'wf init'")
    try:
        doc = parse_cached(project, data)
    except ParseError as e:
        from wf.base import settle

        for issue in e.issues:
            if issue.kind is IssueKind.NOT_UTF8:
                settle.note_unreadable(project.wf_dir, project.config.tasks, str(issue))
        raise
    archive = archivemod.parse(archive_data, project.config.archive)
    return Backlog(project, doc, archive, data, archive_data)


def load_readable(project: Project, data: bytes | None, archive_data: bytes | None) -> Backlog:
    """The backlog for reading only (``wf list``), from the files' bytes (``read_settled``):
    a TASKS.md or archive that is not UTF-8 is read with each bad byte shown as U+FFFD and
    its error added, so every task that can be read is still listed. Never write from it:
    its text is not the file's."""
    from wf.tasks import archive as archivemod
    from wf.tasks import taskfile

    try:
        return from_bytes(project, data, archive_data)
    except ParseError:
        if data is None:
            raise
    cfg = project.config
    found: list[ParseIssue] = []

    def lossy(raw: bytes, name: str) -> str:
        try:
            return taskfile.decode(raw, name)
        except ParseError as e:
            found.extend(e.issues)
            return raw.decode("utf-8", errors="replace")

    doc = taskfile.parse_text(lossy(data, cfg.tasks), cfg.tasks)
    doc.issues[:0] = found
    found.clear()
    text = None if archive_data is None else lossy(archive_data, cfg.archive)
    archive = archivemod.parse(None if text is None else text.encode("utf-8"), cfg.archive)
    archive.issues[:0] = found
    return Backlog(project, doc, archive, data)


def cache_dir(project: Project) -> Path:
    return project.wf_dir / "cache"


def parse_cached(project: Project, data: bytes) -> TasksFile:
    """Parse TASKS.md bytes, through the parse cache when the project has a .wf folder."""
    from wf.tasks import parsecache, taskfile

    name = project.config.tasks
    text = taskfile.decode(data, name)
    if not project.wf_dir.is_dir():
        return taskfile.parse_text(text, name)
    doc = parsecache.load(cache_dir(project), name, data, text)
    if doc is None:
        with parsecache.gc_paused():
            doc = taskfile.parse_text(text, name)
            parsecache.store(cache_dir(project), doc, data)
    return doc
