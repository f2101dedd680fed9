"""Notifications: ``notify = ["program", "arg"]`` in wf.toml runs on the events a person
cares about, with the event as one JSON object on its stdin.

The events (``Kind``): ``needs_person`` (a task was handed back, awaits an answer, is
wip, its post-check is red, it crashed twice), ``lane_parked`` (a lane waits out a usage
limit), ``lane_stopped`` (a lane's tool could not run, wf could not get past an error, or
a usage limit resets only after --for), ``batch_ended``. A notice is made from typed
records (``wf.orch.events.StopEvent`` and its ``Stop`` kind, a batch's end), never from
the words a person reads.

A notifier never slows or stops the night: it runs without a shell, in a session of its
own, and nothing on the night's path waits for it. A thread per notifier hands it the
event, reaps it, and ends its process group after ``TIMEOUT`` seconds; whatever it does
(exits non-zero, cannot be started, hangs) is one line in the log given (the loop's
output and ``out/wf-orch-run.log``, a batch's log) and is never raised. When the process
that started it ends (``close``), a notifier still running gets a short grace, then is
ended: no notifier outlives wf unsupervised.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from wf.base.project import Project
from wf.orch.events import EventKind, StopEvent, stopped
from wf.orch.state import Stop, StopReason
from wf.workers import procs

TIMEOUT = 10.0  # seconds a notifier may run (WF_NOTIFY_TIMEOUT: another figure, above 0)
GRACE = 2.0  # seconds a notifier still running gets when the process that started it ends


class Kind(enum.StrEnum):
    """What happened (the event's ``event`` field)."""

    NEEDS_PERSON = "needs_person"
    BATCH_ENDED = "batch_ended"
    LANE_PARKED = "lane_parked"
    LANE_STOPPED = "lane_stopped"


@dataclass(frozen=True)
class Notice:
    """One event as the notifier reads it (JSON on its stdin)."""

    event: Kind
    project: str  # the project's folder
    reason: str  # in a person's words (made from the typed record)
    at: str = ""  # UTC, ISO 8601
    lane: str | None = None
    task: str | None = None
    run: str | None = None  # the loop's run id
    stop: str | None = None  # a stop: the ``Stop`` member's name
    until: float | None = None  # a park: when the wait ends (epoch seconds)
    why: str | None = None  # a park: the limit's window
    batch: str | None = None  # a batch's stamp, and why it ended (``End``'s value)
    end: str | None = None
    summary: str | None = None  # a batch's summary and morning page
    page: str | None = None
    done: int | None = None  # a batch: tasks done, and tasks posted
    posted: int | None = None

    def as_json(self) -> bytes:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        data["event"] = self.event.value
        return json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"


def kind_of(ev: StopEvent) -> Kind | None:
    """What a loop's stop event is to a person, or None (out of work, time up, ...)."""
    if ev.kind is EventKind.PARK:
        return Kind.LANE_PARKED
    reason = ev.reason
    if reason is None:
        return None
    if reason.person:
        return Kind.NEEDS_PERSON
    if reason.error or reason is Stop.LIMIT:
        return Kind.LANE_STOPPED
    return None


def from_event(project: Project, ev: StopEvent) -> Notice | None:
    """The notice of a loop's stop event, None for one nobody is told about."""
    kind = kind_of(ev)
    if kind is None:
        return None
    return Notice(
        kind, str(project.root), ev.text, ev.ts, ev.lane, ev.task, ev.run, ev.stop, ev.until, ev.why
    )


def tell_posted(
    project: Project, lane: str, task: str, stop: StopReason | None, log: Callable[[str], None]
) -> None:
    """``wf orch post`` (an interactive or ``--agent`` orchestrator's post): the stop its
    post ended with, told as a loop tells it; the command waits at most GRACE for it."""
    if stop is None or not project.config.notify:
        return
    notice = from_event(project, stopped("wf orch post", lane, stop, task))
    if notice is not None:
        notifier = Notifier(project, log)
        notifier.send(notice)
        notifier.close()


class _Sent:
    """One notifier started: its process, and whether ``close`` ended it."""

    def __init__(self, proc: subprocess.Popen[bytes], notice: Notice) -> None:
        self.proc = proc
        self.notice = notice
        self.closed = False
        self.thread: threading.Thread | None = None


class Notifier:
    """Starts the project's notifier (wf.toml ``notify``) for each notice, never waiting on it."""

    def __init__(self, project: Project, log: Callable[[str], None]) -> None:
        self.argv = project.config.notify
        self.cwd = project.root
        self.log = log
        self.sent: list[_Sent] = []

    def send(self, notice: Notice) -> None:
        """Start the notifier on ``notice`` and return at once; a failure is logged, not raised."""
        if not self.argv:
            return
        self.sent = [s for s in self.sent if s.thread is not None and s.thread.is_alive()]
        try:
            proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,  # its complaints go where wf's own go (a batch: its log)
                cwd=self.cwd,
                start_new_session=True,  # its own process group: ended whole, never by a Ctrl-C meant for wf
                close_fds=True,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            self._say(notice, f"cannot be started: {getattr(e, 'strerror', None) or e}")
            return
        procs.own_child(proc.pid)  # reaped by its thread, not swept as a stray
        sent = _Sent(proc, notice)
        sent.thread = threading.Thread(target=self._watch, args=(sent,), daemon=True, name="wf-notify")
        sent.thread.start()
        self.sent.append(sent)

    def _watch(self, sent: _Sent) -> None:
        """Hand the notifier its event, wait at most TIMEOUT, end it past that; log how it failed."""
        proc = sent.proc
        limit = timeout()
        try:
            proc.communicate(sent.notice.as_json(), timeout=limit)
        except subprocess.TimeoutExpired:
            _end(proc)
            if not sent.closed:
                self._say(sent.notice, f"still ran after {limit:g}s: ended")
            return
        except (OSError, ValueError):  # its stdin, closed under it by close()
            return
        if proc.returncode != 0 and not sent.closed:
            self._say(sent.notice, f"exited {proc.returncode}")

    def close(self, grace: float = GRACE) -> None:
        """The process that started the notifiers ends: those still running get ``grace``
        seconds, then are ended (logged)."""
        deadline = time.monotonic() + grace
        for s in self.sent:
            if s.thread is not None:
                s.thread.join(max(0.0, deadline - time.monotonic()))
        for s in self.sent:
            if s.proc.poll() is None:
                s.closed = True
                _end(s.proc)
                self._say(s.notice, f"still running when wf ended ({grace:g}s later): ended")
            if s.thread is not None:
                s.thread.join(1.0)
        self.sent = []

    def _say(self, notice: Notice, what: str) -> None:
        try:
            self.log(f"notify: {self.argv[0]} for {notice.event.value}: {what}")
        except OSError:  # a log that cannot be written must not stop the night either
            pass


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End the notifier's whole process group (a shell's children too) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        pass


def timeout() -> float:
    """Seconds a notifier may run: TIMEOUT, or WF_NOTIFY_TIMEOUT when it is a number above 0."""
    try:
        given = float(os.environ.get("WF_NOTIFY_TIMEOUT", ""))
    except ValueError:
        return TIMEOUT
    return given if 0 < given <= TIMEOUT * 60 else TIMEOUT
