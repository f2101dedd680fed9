"""The one root error of wf and its kinds.

Every error a user can cause is a ``WfError``: the CLI prints its message on stderr
and exits 1, never with a traceback. Subclasses build their own message and keep
their data, so callers (and tests) can look at what went wrong, not just read it.
"""

from __future__ import annotations

import enum


class WfError(Exception):
    """An expected failure: bad input, a refused operation, a busy resource."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(WfError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2


class IssueKind(enum.Enum):
    """What kind of problem a ParseIssue is, for the code that acts on one (its message is
    only for people)."""

    OTHER = "other"
    UNCLOSED_FENCE = "unclosed-fence"  # a code fence never closed: it hides what follows
    NOT_UTF8 = "not-utf8"  # the file is not UTF-8 text (a save in another encoding, or cut short)


class ParseIssue:
    """One problem found in a file: where, how bad, what."""

    __slots__ = ("kind", "level", "line", "message", "path", "task")

    def __init__(
        self,
        path: str,
        line: int,
        level: str,
        message: str,
        task: str | None = None,
        kind: IssueKind = IssueKind.OTHER,
    ) -> None:
        self.path = path
        self.line = line
        self.level = level  # "error" or "warning"
        self.message = message
        # The task the problem is confined to (a bad field value, an unknown After id):
        # it stops only writes that touch that task. None: the file's structure itself.
        self.task = task
        self.kind = kind

    def moved(self, delta: int) -> ParseIssue:
        return ParseIssue(self.path, self.line + delta, self.level, self.message, self.task, self.kind)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.level}: {self.message}"

    def __repr__(self) -> str:
        return f"ParseIssue({str(self)!r})"

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "level": self.level, "message": self.message}


class ParseError(WfError):
    """A file has errors, so wf refuses to act on (or write) it."""

    def __init__(self, issues: list[ParseIssue]) -> None:
        self.issues = [i for i in issues if i.level == "error"]
        lines = [str(i) for i in self.issues[:20]]
        if len(self.issues) > 20:
            lines.append(f"... and {len(self.issues) - 20} more errors (wf check)")
        super().__init__("\n".join(lines))


class TaskHasErrors(WfError):
    """A write would touch a task whose own lines have errors: refused, naming them.
    Writes to other tasks go on (an error inside one task never stops the others)."""

    def __init__(self, task_id: str, issues: list[ParseIssue]) -> None:
        self.task_id = task_id
        self.issues = issues
        lines = "\n".join(str(i) for i in issues[:20])
        super().__init__(f"refusing to change task {task_id} until its errors are fixed (wf check):\n{lines}")


class UnknownTask(WfError):
    def __init__(self, task_id: str, where: str = "TASKS.md") -> None:
        self.task_id = task_id
        super().__init__(f"no task {task_id!r} in {where}")


class ClaimError(WfError):
    """A claim lost: the task is held by someone else or is not runner-ready."""

    def __init__(self, task_id: str, why: str, holder: str | None = None) -> None:
        self.task_id = task_id
        self.holder = holder
        super().__init__(f"cannot claim {task_id}: {why}")


class LockTimeout(WfError):
    def __init__(self, path: str, waited: float, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(
            f"gave up after {waited:g}s waiting for the project lock {path}, held by {holder}; "
            "if that process is stuck, stop it (a dead holder releases the lock by itself)"
        )


class ConfigError(WfError):
    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class NotAProject(WfError):
    def __init__(self, start: str) -> None:
        super().__init__(
            f"not inside a wf project (no .git, wf.toml or TASKS.md above {start}); run 'wf init'"
        )
