"""Changes to the backlog: add, set, status (claims), notes, done.

Every change runs in ``transact``: take the project lock, read TASKS.md and the
archive fresh and settled (no editor half-way through a save, see ``settle``), refuse a
file with structural errors (and a change that touches a task with errors of its own),
compute the new lines, parse them again, write the archive (if it changes) and then
TASKS.md atomically. Each file is replaced only if it still holds the settled bytes: an
editor that saved in between makes wf start over from the person's file.
"""

from __future__ import annotations

import enum
import os
import re
import time
import unicodedata
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from wf.base import settle
from wf.base.errors import ClaimError, ParseError, TaskHasErrors, WfError
from wf.base.lock import project_lock
from wf.base.project import Project
from wf.tasks import archive as archivemod
from wf.tasks import backlog as backlogmod
from wf.tasks import edits, holds, parsecache, taskfile
from wf.tasks.backlog import Backlog
from wf.tasks.taskfile import STATES, TasksFile, check_id, parse_status, utc_stamp

MAX_RETRIES = 50


class Change(NamedTuple):
    tasks: TasksFile | None = None  # the edited TASKS.md (already checked by the edit)
    archive: bytes | None = None  # the new archive bytes


class FastWrite(NamedTuple):
    """A change made without loading the whole backlog (``transact``'s ``fast``)."""

    data: bytes  # TASKS.md's new bytes (the archive does not change)
    store: Callable[[], None]  # stores their parse in the cache, once written


def _touched(old: TasksFile, new: TasksFile | None) -> set[str]:
    """The ids of the tasks an edit added, removed or changed (the blank lines an added
    task puts after the one before it do not change that one)."""
    if new is None:
        return set()
    before = {t.id: old.text_of(t).rstrip() for t in old.tasks}
    after = {t.id: new.text_of(t).rstrip() for t in new.tasks}
    return {i for i in before.keys() | after.keys() if before.get(i) != after.get(i)}


def transact(
    project: Project,
    fn: Callable[[Backlog], Change],
    *,
    on_wait: Callable[[str], None] | None = None,
    finishing: str | None = None,
    fixing: str | None = None,
    fast: Callable[[bytes, bytes | None], FastWrite | None] | None = None,
) -> Backlog | None:
    """Apply ``fn`` to a fresh, settled backlog under the project lock; return the new
    backlog.

    ``fast``, given the settled bytes of TASKS.md and the archive, may make the change
    itself (returning the new bytes; None: it declines, and ``fn`` runs as always): it
    must decline whatever ``fn`` would refuse or do otherwise. Nothing is returned then.

    Structural errors of the file stop every write; errors inside one task stop only a
    change that touches that task. ``finishing`` names a task whose archiving was
    interrupted (it is in both files): that one disagreement is not an error for this
    change, which completes it. ``fixing`` names a task a person rewrites whole (``wf
    edit``): its errors do not stop the change that fixes them (the new text is parsed
    and must have none).
    """
    timeout = project.lock_timeout
    wf_dir = project.wf_dir
    tasks_name, archive_name = project.config.tasks, project.config.archive
    with project_lock(wf_dir, timeout, on_wait), parsecache.gc_paused():
        start = time.monotonic()
        for _ in range(MAX_RETRIES):
            left = max(0.0, timeout - (time.monotonic() - start))
            data, tasks_stamp = settle.settled_read(
                project.tasks_path, tasks_name, settle.load_seen(wf_dir, tasks_name), left
            )
            old_archive, archive_stamp = settle.settled_read(
                project.archive_path, archive_name, settle.load_seen(wf_dir, archive_name), left, b"- "
            )
            quick = fast(data, old_archive) if fast is not None and data is not None else None
            if quick is not None:
                stamp = settle.replace_checked(project.tasks_path, quick.data, data, left)
                settle.save_seen(wf_dir, {tasks_name: stamp or tasks_stamp, archive_name: archive_stamp})
                if stamp is None:
                    continue
                quick.store()
                return None
            bl = backlogmod.from_bytes(project, data, old_archive)
            structural, by_task = bl.write_errors(finishing)
            if structural:
                raise ParseError(structural)
            change = fn(bl)
            new_doc = change.tasks
            if by_task.keys() - {fixing}:  # comparing every task's text costs ~10 ms at 10,000 tasks
                for task_id in sorted(_touched(bl.doc, new_doc)):
                    if by_task.get(task_id) and task_id != fixing:
                        raise TaskHasErrors(task_id, by_task[task_id])
            archive = bl.archive
            if change.archive is not None:
                stamp = settle.replace_checked(project.archive_path, change.archive, old_archive, left, b"- ")
                if stamp is None:
                    continue
                archive_stamp = stamp
                archive = archivemod.parse(change.archive, archive_name)
            if new_doc is not None:
                new_data = new_doc.render()
                stamp = settle.replace_checked(project.tasks_path, new_data, bl.data, left)
                settle.save_seen(wf_dir, {tasks_name: stamp or tasks_stamp, archive_name: archive_stamp})
                if stamp is None:
                    continue
                parsecache.store(backlogmod.cache_dir(project), new_doc, new_data)
                return backlogmod.Backlog(project, new_doc, archive, new_data, change.archive)
            settle.save_seen(wf_dir, {tasks_name: tasks_stamp, archive_name: archive_stamp})
            return backlogmod.Backlog(project, bl.doc, archive, bl.data, change.archive or old_archive)
        raise WfError(f"{tasks_name} kept changing while wf tried to write it; try again")


# ------------------------------------------------------------------ add / set


def slugify(title: str, limit: int = 40) -> str:
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    if len(slug) > limit:
        slug = _cut(slug, limit)
        # a title cut short does not end on a little word ("...-loader-to")
        while slug.count("-") and slug.rsplit("-", 1)[1] in _SMALL_WORDS:
            slug = slug.rsplit("-", 1)[0]
    return slug.strip("-") or "task"


_SMALL_WORDS = {"a", "an", "the", "to", "of", "and", "or", "for", "in", "on", "at", "by", "with", "from"}


def _cut(slug: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary when there is one."""
    if len(slug) <= limit:
        return slug
    cut = slug[:limit]
    return (cut.rsplit("-", 1)[0] if "-" in cut and slug[limit] != "-" else cut).strip("-")


def _fresh_id(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"-{n}"
        cand = _cut(base, 48 - len(suffix)) + suffix
        if cand not in taken:
            return cand
        n += 1


def _field_values(
    *,
    model: str | None = None,
    lane: str | None = None,
    prio: int | None = None,
    effort: str | float | None = None,
    done: str | None = None,
    after: str | list[str] | tuple[str, ...] | None = None,
    sessions: str | None = None,
    cloud: str | None = None,
    parent: str | None = None,
    status: str | None = None,
) -> dict[str, str | None]:
    """Validated field values; '' means remove (for set), None means leave alone."""
    values: dict[str, str | None] = {}
    if prio is not None:
        if prio not in (0, 1, 2, 3):
            raise WfError(f"bad prio {prio}: expected 0, 1, 2 or 3 (0 is most urgent)")
        values["prio"] = str(prio)
    if isinstance(after, (list, tuple)):
        after = ", ".join(a.strip() for a in after if a.strip())
    if isinstance(effort, float):
        effort = f"{effort:g}"
    raw = {
        "model": model,
        "lane": lane,
        "effort": effort,
        "done": done,
        "after": after,
        "sessions": sessions,
        "cloud": cloud,
        "parent": parent,
        "status": status,
    }
    for key, value in raw.items():
        if value is None:
            continue
        v = value.strip()
        if v:
            if key == "after":
                v = ", ".join(p.strip() for p in v.split(","))
            if key == "status":
                st = parse_status(v)
                if st is None:
                    problem = taskfile.check_field("status", v)
                    raise WfError(problem or f"bad status {v!r}")
                v = "" if st.state == "pending" else str(st)
            else:
                problem = taskfile.check_field(key, v)
                if problem:
                    raise WfError(problem)
        values[key] = v
    return values


def _check_refs(bl: Backlog, values: dict[str, str | None], self_id: str) -> None:
    known = bl.doc.ids() | bl.archive.ids()
    for a in (values.get("after") or "").split(","):
        a = a.strip()
        if a and a == self_id:
            raise WfError(f"a task cannot be After itself ({a})")
        if a and a not in known:
            raise WfError(f"After names unknown id {a!r}")
    parent = values.get("parent")
    if parent and parent == self_id:
        raise WfError("a task cannot be its own Parent")
    if parent and parent not in known:
        raise WfError(f"Parent names unknown id {parent!r}")
    lane = values.get("lane")
    if lane and bl.config.lane(lane) is None:
        names = ", ".join(ln.name for ln in bl.config.lanes)
        raise WfError(f"no lane {lane!r} (lanes: {names}; add one in wf.toml)")


def add_task(
    project: Project,
    title: str,
    *,
    task_id: str | None = None,
    body: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    **fields: object,
) -> str:
    """Add a task at the end of TASKS.md; return its id (drawn under the lock)."""
    title = title.strip()
    if not title or "\n" in title:
        raise WfError("a task needs a one-line title")
    if task_id is not None:
        check_id(task_id, "task id")
    values = _field_values(**fields)  # type: ignore[arg-type]
    drawn: list[str] = []

    def change(bl: Backlog) -> Change:
        taken = bl.doc.ids() | bl.archive.ids()
        if task_id is not None:
            if task_id in taken:
                where = "the archive" if task_id in bl.archive.ids() else bl.doc.path
                raise WfError(f"id {task_id!r} is already used in {where}; ids are never reused")
            new_id = task_id
        else:
            new_id = _fresh_id(slugify(title), taken)
        _check_refs(bl, values, new_id)
        drawn[:] = [new_id]
        return Change(tasks=edits.append_task(bl.doc, new_id, title, taskfile.dump_fields(values), body))

    transact(project, change, on_wait=on_wait)
    return drawn[0]


def set_fields(
    project: Project,
    task_id: str,
    *,
    title: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    **fields: object,
) -> list[str]:
    """Change fields of a task ('' removes one); return the keys that changed."""
    values = _field_values(**fields)  # type: ignore[arg-type]
    if title is not None and not title.strip():
        raise WfError("a title cannot be empty")
    if not values and title is None:
        raise WfError("nothing to set: give at least one field option (see wf set --help)")
    changed: list[str] = []

    def change(bl: Backlog) -> Change:
        doc = bl.doc
        doc.task(task_id)
        _check_refs(bl, values, task_id)
        changed.clear()
        if title is not None and title.strip() != doc.task(task_id).title:
            doc = edits.set_title(doc, task_id, title)
            changed.append("title")
        for key, value in values.items():
            current = doc.task(task_id).get(key)
            if (current or "") == (value or ""):
                continue
            doc = edits.set_field(doc, task_id, key, value)
            changed.append(key)
        return Change(tasks=doc if changed else None)

    transact(project, change, on_wait=on_wait)
    return changed


# ------------------------------------------------------------------ status / claim


def set_status(
    project: Project,
    task_id: str,
    state: str,
    note: str | None = None,
    *,
    force: bool = False,
    now: datetime | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> taskfile.Status:
    """Set a task's status. ``progress`` is a claim: under the lock it re-checks that
    the task is runner-ready and unclaimed, and fails naming the holder otherwise."""
    if state == "in-progress":
        state = "progress"
    if state not in STATES:
        raise WfError(f"unknown state {state!r}: expected one of {', '.join(STATES)}")
    note = (note or "").strip()
    if "\n" in note:
        raise WfError("the note must be one line")
    if state == "progress" and not note:
        raise WfError("a claim needs WHO: wf status ID progress WHO")
    if state in ("awaiting", "blocked", "wip") and not note:
        raise WfError(f"{state} needs a note: wf status ID {state} 'why'")
    if state == "pending":
        value = ""
    elif state == "progress":
        value = f"in progress: {note} since {utc_stamp(now)}"
    else:
        value = f"{state}: {note}"
    result: list[taskfile.Status] = []

    def change(bl: Backlog) -> Change:
        task = bl.doc.task(task_id)
        errors = bl.task_errors(task_id)
        if errors:
            raise TaskHasErrors(task_id, errors)
        if state == "progress" and not force:
            current = task.status
            if current.state == "progress":
                raise ClaimError(task_id, f"already claimed by {current.text}", current.who)
            why = bl.blockers(task)
            if why:
                raise ClaimError(task_id, "not runner-ready: " + "; ".join(why))
        doc = edits.set_field(bl.doc, task_id, "status", value or None)
        result[:] = [parse_status(value) if value else taskfile.PENDING]  # type: ignore[list-item]
        if state == "pending":  # back to the queue: a handback hold is released too (under the lock)
            holds.release(project.wf_dir, task_id)
        return Change(tasks=doc)

    def fast(data: bytes, archive_data: bytes | None) -> FastWrite | None:
        quick = _fast_claim(project, task_id, value, data, archive_data)
        if quick is not None:
            result[:] = [parse_status(value)]  # type: ignore[list-item]
        return quick

    transact(project, change, on_wait=on_wait, fast=fast if state == "progress" and not force else None)
    return result[0]


def _fast_claim(
    project: Project, task_id: str, value: str, data: bytes, archive_data: bytes | None
) -> FastWrite | None:
    """The claim of a runner-ready task without loading the whole backlog: the cached
    parse's index, the task's own chunk, the archive. Declines (None) unless the claim
    surely succeeds as the full path would make it. What the full path refuses on, and
    what stands for it here:

    - an error anywhere in TASKS.md (structural ones stop every write, the task's own stop
      its claim): the fast path takes a file with no error at all (the archive's parse
      reports warnings only);
    - the task's errors that ``Backlog.check`` finds across files: archived already (not
      taken here), an After id unknown, itself or in a cycle (here every After id must
      be archived, by ``blockers``, and none may be in TASKS.md: no edge of a cycle leaves
      the task), a Parent unknown (taken only if known; itself: an open child of itself);
    - not runner-ready: ``Backlog.blockers`` itself, with the open children from the index;
    - the edit's own refusals (``edits.set_field``, on the file's text with this task
      alone: it splices the same lines, the other tasks only move; it looks the task up
      by id, so an index that names another row declines too).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cache = backlogmod.cache_dir(project)
    index = parsecache.open_index(cache, project.config.tasks, data)
    row = None if index is None else index.ids.get(task_id)
    if index is None or row is None or any(i.level == "error" for i in index.issues):
        return None
    try:
        task = index.task(row)
    except (ValueError, TypeError, IndexError, EOFError):
        return None
    archive = archivemod.parse(archive_data, project.config.archive)
    archived = archive.ids()
    if task_id in archived or ("after" in task.kv and any(a in index.ids for a in task.after)):
        return None
    parent = task.parent if "parent" in task.kv else None
    if parent is not None and parent not in index.ids and parent not in archived:
        return None
    doc = TasksFile(project.config.tasks, text, [task], index.issues)
    if Backlog(project, doc, archive, data, archive_data, children=index.children).blockers(task):
        return None
    try:
        new_doc = edits.set_field(doc, task_id, "status", value)
    except WfError:
        return None
    new, new_data = new_doc.tasks[0], new_doc.render()
    return FastWrite(new_data, lambda: index.store_edit(cache, task, new, new_doc, new_data))


def add_note(
    project: Project, task_id: str, text: str, *, on_wait: Callable[[str], None] | None = None
) -> None:
    if not text.strip():
        raise WfError("a note cannot be empty")

    def change(bl: Backlog) -> Change:
        return Change(tasks=edits.add_note(bl.doc, task_id, text))

    transact(project, change, on_wait=on_wait)


# ------------------------------------------------------------------ done


def done_task(
    project: Project,
    task_id: str,
    *,
    commit: str | None = None,
    lane: str | None = None,
    now: datetime | None = None,
    on_wait: Callable[[str], None] | None = None,
    merged: bool = False,
) -> str:
    """Archive a task: append its line to the archive, then remove it from TASKS.md.
    A task already archived (an earlier ``done`` was interrupted) is just removed.

    ``merged``: the task's commits are on main already (``wf merge``), so errors in its
    text (a person's typo) do not stop the archiving; that text is kept, quoted, under
    its archive line instead of being lost with the task."""
    if commit is not None and not re.fullmatch(r"[0-9a-f]{4,64}", commit):
        raise WfError(f"bad commit {commit!r}: expected a hexadecimal sha")
    line: list[str] = []

    def change(bl: Backlog) -> Change:
        entry = bl.archive.find(task_id)
        if entry is not None and bl.doc.find(task_id) is None:
            line[:] = [entry.raw]  # done already: say so, change nothing
            return Change()
        task = bl.doc.task(task_id)
        if entry is not None:
            line[:] = [entry.raw]
            return Change(tasks=edits.remove_task(bl.doc, task_id))
        text = archivemod.format_line(
            task_id,
            task.title,
            lane=lane or bl.lane_of(task),
            model=task.model,
            commit=commit,
            parent=task.parent,
            now=now,
        )
        line[:] = [text]
        problems = [f"{i.path}:{i.line}: {i.message}" for i in bl.task_errors(task_id)] if merged else []
        kept = archivemod.kept_text(bl.doc.text_of(task), problems) if problems else []
        return Change(
            tasks=edits.remove_task(bl.doc, task_id),
            archive=archivemod.appended(bl.archive, text, kept),
        )

    # a merged task's own errors do not stop its archiving (its text is kept above)
    transact(project, change, on_wait=on_wait, finishing=task_id, fixing=task_id if merged else None)
    return line[0]


# ------------------------------------------------------------------ edit


class Edited(enum.Enum):
    EDITED = "edited"  # the draft replaced the task
    UNCHANGED = "unchanged"  # nothing to do; the draft is gone
    KEPT = "kept"  # a kept draft was reopened and not saved: it stays, the task too


def edit_task(
    project: Project,
    task_id: str,
    run_editor: Callable[[Path], None],
    *,
    on_reopen: Callable[[Path], None] | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Edited:
    """Let a person edit one task in their editor without racing wf's own writes: the
    task's text goes to a draft in .wf/edit/, the editor runs (no lock held), and the
    result replaces the task under the lock only if nobody changed that task meanwhile.
    The id stays; the draft must parse. A refused draft is kept, and the next edit of the
    task reopens it (``on_reopen`` is told) instead of starting from the task again; a
    reopened draft the editor does not save stays as it is."""
    check_id(task_id, "task id")
    bl = backlogmod.load(project)
    before = bl.doc.text_of(bl.doc.task(task_id))
    folder = project.wf_dir / "edit"
    folder.mkdir(parents=True, exist_ok=True)
    draft = folder / f"{task_id}.md"
    try:
        kept: bytes | None = draft.read_bytes()
    except FileNotFoundError:
        kept = None
    reopened = kept is not None and kept != before.encode("utf-8")
    if reopened:
        if on_reopen is not None:
            on_reopen(draft)
    else:
        draft.write_bytes(before.encode("utf-8"))
    # an old mtime, so that any save by the editor, even of the same bytes, shows
    past = time.time() - 10
    os.utime(draft, (past, past))
    opened = draft.stat().st_mtime_ns
    run_editor(draft)
    raw = draft.read_bytes()
    if reopened and raw == kept and draft.stat().st_mtime_ns == opened:
        return Edited.KEPT
    after = raw.decode("utf-8", errors="strict")
    if after == before:
        draft.unlink()
        return Edited.UNCHANGED
    shown = draft.relative_to(project.root) if draft.is_relative_to(project.root) else draft
    kept_note = f"your version is kept in {shown} (wf edit {task_id} reopens it)"
    local = taskfile.parse_text(after, str(shown))
    if local.errors:
        lines = "\n".join(str(i) for i in local.errors[:20])
        raise WfError(f"refusing an edit that would break the file:\n{lines}\n{kept_note}")
    found = [t.id for t in local.tasks]
    if found != [task_id] or local.tasks[0].start != 0:
        raise WfError(
            f"refusing the edit: {shown} must hold exactly the task, from its heading "
            f"'## {task_id}: ...' on the first line (found {', '.join(found) or 'no task heading'}; "
            f"inside a task's text, use '###' for sub-headings); {kept_note}"
        )

    def change(fresh: Backlog) -> Change:
        task = fresh.doc.find(task_id)
        if task is None or fresh.doc.text_of(task) != before:
            raise WfError(f"{task_id} changed while you edited it (wf show it, then edit again)")
        index = fresh.doc.tasks.index(task)
        return Change(tasks=edits.replace_region(fresh.doc, index, index + 1, after, [task_id]))

    try:
        transact(project, change, on_wait=on_wait, fixing=task_id)
    except WfError as e:
        raise WfError(f"{e}\n{kept_note}") from None
    draft.unlink()
    return Edited.EDITED
