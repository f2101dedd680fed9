"""Running headless units: start, watch, stop (their answer and its FALLBACK: ``answer``).

A unit's worker runs in a new session with stdout and stderr going to files in its run
folder (never pipes wf must drain: a busy wf would stall the worker, and file growth is
what stall detection watches), and its prompt on stdin from a file too: how far the
worker read it says whether it died before reading its prompt (``stdin_read``). The
supervisor polls: it reads new complete lines, notes the session id as early as it
shows, and stops the unit's whole process tree (SIGINT, SIGTERM, SIGKILL, listing the
tree again before each) when the log has not
grown for the stall window, when the timeout passes, or on Ctrl-C. It is a child
subreaper and gives each unit a token in its environment, so grandchildren that
detached are still found and ended when the unit ends. A unit that ends without an
answer (or with an empty one) gets a FALLBACK answer from the tail of its log; an answer
the worker wrote is never overwritten.

The supervisor wakes when a child exits (SIGCHLD), not only on its poll, and units that
must be stopped in one pass are stopped together, so a stall or a timeout takes effect
on time however many units reach it at once. Only the final status.json and the answer
are fsynced; the intermediate writes are atomic renames.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from types import FrameType
from typing import Any

from wf import adapters
from wf.adapters import Adapter, Parsed, Spec
from wf.adapters.base import limit_of
from wf.base import fsutil, pids
from wf.base.gitenv import without_location
from wf.workers import answer, procs, runs

POLL = 0.1


def _result_grace() -> float:
    """Seconds a worker may go on after its result event (WF_RESULT_GRACE, default 5)."""
    return float(os.environ.get("WF_RESULT_GRACE", "5"))


READ_CHUNK = 1 << 20
MAX_LINE = 64 << 20  # a claude result event carries the whole answer on one line

_versions: dict[str, str | None] = {}


_START: tuple[int, int | None] = (0, None)


def _my_start() -> int | None:
    """With the pid, names this supervisor for the readers (read once per process: a
    process forked from this one has another pid, and is another supervisor)."""
    global _START
    pid = os.getpid()
    if _START[0] != pid:
        _START = (pid, pids.start_ticks(pid))
    return _START[1]


def tool_version(adapter: Adapter) -> str | None:
    """``<tool> --version``, asked once per process."""
    if adapter.name == "cmd":
        return None
    if adapter.name not in _versions:
        try:
            p = subprocess.run(
                adapter.version_argv(), capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL
            )
            _versions[adapter.name] = (
                (p.stdout or p.stderr).strip().splitlines()[0] if p.returncode == 0 else None
            )
        except (OSError, subprocess.TimeoutExpired, IndexError):
            _versions[adapter.name] = None
    return _versions[adapter.name]


class Unit:
    """One unit: its spec, its process, what its stream said, its status.json."""

    def __init__(
        self,
        spec: Spec,
        adapter: Adapter,
        *,
        timeout: float | None,
        stall: float | None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.adapter = adapter
        self.timeout = timeout if timeout is not None else adapter.default_timeout
        self.stall = stall if stall is not None else adapter.default_stall
        self.folder = spec.folder
        self.token = uuid.uuid4().hex
        self.parsed = Parsed()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.last_growth = 0.0  # the last model event (or, for cmd, output)
        self._progress = 0
        self.finished_at: float | None = None
        # what the tool was retrying when wf stopped it (read before the stop: claude
        # answers a SIGINT with an "interrupted" user message, which reads as progress)
        self.retrying_at_stop: tuple[adapters.Failure, str] | None = None
        self.result_grace = _result_grace()
        self.state = "queued"
        self._offset = 0
        self._partial = b""
        self._size = -1
        self._files: list[Any] = []
        self._stdin: Any = None  # the prompt file the worker reads on stdin
        # what the caller adds to the final status before its one durable write (the
        # fan-out's contract check): status.json is written once at the end, not twice
        self.finalize: Callable[[Unit], None] | None = None
        self.session_id = adapter.first_session_id(spec)
        self.status: dict[str, Any] = {
            "run": spec.run,
            "unit": spec.unit,
            "adapter": adapter.name,
            "model": spec.model,
            "effort": spec.effort,
            "state": "queued",
            "exit_code": None,
            "started": None,
            "ended": None,
            "duration_s": None,
            "session_id": self.session_id,
            "resumed_from": None,
            "cwd": str(spec.cwd),
            "pid": None,
            "usage": None,
            "answer": None,
            "fallback": False,
            "error": None,
            "failure": None,  # an adapters.Failure value once the unit failed
            "reason": None,  # the tool's own words for it, one line
            "limit": None,  # a usage limit that rejected it: {window, resets_at, utilization}
            # a stalled or timed-out unit's tool was retrying since its last progress: the
            # class of what it retried (an adapters.Failure value), else None
            "while_retrying": None,
            "version": None,
            "timeout_s": self.timeout,
            "stall_s": self.stall,
            "supervisor": os.getpid(),
            "access": spec.access(),
            "supervisor_start": _my_start(),
            "token": self.token,
            **(meta or {}),
        }

    # ---------------------------------------------------------------- files
    def save(self, *, durable: bool = False) -> None:
        runs.write_status(self.folder, self.status, durable=durable)

    def queue(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        runs.write_new(self.folder / "prompt.txt", self.spec.prompt.encode("utf-8"))
        if self.session_id and self.adapter.name != "cmd":  # a cmd unit's id is wf's own (status.json)
            runs.write_new(self.folder / "session.txt", f"{self.session_id}\n".encode())
        self.save()

    # ---------------------------------------------------------------- lifecycle
    def start(self, base_env: dict[str, str] | None = None) -> None:
        """``base_env``: the environment its own is made from (wf's, without git's location
        variables; the supervisor makes it once for all its units)."""
        spec = self.spec
        spec = spec._replace(session_id=self.session_id)
        self.spec = spec
        argv = self.adapter.argv(spec)
        base = base_env if base_env is not None else without_location(os.environ)
        env = self.adapter.env(spec, base)  # a copy; its git works on its own tree
        env[procs.TOKEN_VAR] = self.token
        env[procs.DIR_VAR] = str(self.folder.resolve())  # whoever signals the tree marks the folder
        log = open(self.folder / "worker.log", "wb")  # noqa: SIM115 - closed in _close_files
        err = open(self.folder / "worker.err", "wb")  # noqa: SIM115
        # The prompt from a file (prompt.txt), not a pipe: the worker shares its offset, so
        # how much it read is known when it ends; a file never blocks the supervisor and
        # ends in EOF (Codex and opencode wait forever on an open stdin).
        data = self.adapter.stdin(spec)
        prompt = runs.stdin_file(self.folder, data)
        self._stdin = prompt
        self._files = [log, err, prompt]
        self.status["stdin_bytes"] = len(data)
        self.status["version"] = tool_version(self.adapter)
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=spec.cwd,
                stdin=prompt,
                stdout=log,
                stderr=err,
                start_new_session=True,
                env=env,
            )
        except OSError as e:
            self._close_files()
            reason = f"cannot start {argv[0]}: {e.strerror or e}"
            self.status.update(
                state="failed", error=reason, failure=adapters.Failure.tool.value, reason=reason
            )
            self.status["ended"] = runs.now_iso()
            self.state = "failed"
            self._salvage()
            self._final_save()
            return
        procs.own_child(self.proc.pid)
        self.started = self.last_growth = time.monotonic()
        self.state = "running"
        self.status.update(state="running", started=runs.now_iso(), pid=self.proc.pid, argv=argv)
        self.save()

    def _read_new(self) -> bool:
        path = self.folder / "worker.log"
        try:
            size = path.stat().st_size + (self.folder / "worker.err").stat().st_size
        except OSError:
            return False
        if size == self._size:
            return False
        self._size = size
        before = self.parsed.session_id
        try:
            with open(path, "rb") as f:
                f.seek(self._offset)
                # in bounded chunks: a worker may print 100 MB between two polls
                while chunk := f.read(READ_CHUNK):
                    self._offset += len(chunk)
                    self._feed_lines(chunk)
        except OSError:
            return True
        if self.parsed.finished and self.finished_at is None and self.adapter.done_at_result:
            self.finished_at = time.monotonic()
        if (
            self.parsed.session_id
            and self.parsed.session_id != before
            and self.parsed.session_id != self.session_id
        ):
            self.session_id = self.parsed.session_id
            runs.write_file(self.folder / "session.txt", f"{self.session_id}\n".encode(), durable=False)
            self.status["session_id"] = self.session_id
            self.save()
        return True

    def _feed_lines(self, chunk: bytes) -> None:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # the last line may still be being written
        if len(self._partial) > MAX_LINE:
            self._partial = b""  # no event is this long; never hold a line without end
        for raw in lines:
            if raw.lstrip().startswith(b"{"):
                event = adapters.parse_line(raw.decode("utf-8", "replace"))
                if event is not None:
                    self.adapter.feed(self.parsed, event)

    def poll(self, now: float) -> bool:
        """Check on the unit; True once it has ended (its status is final)."""
        if self.state != "running" or self.proc is None:
            return self.state != "queued"
        why = self.due(now)
        if why is None:
            return False
        self.settle(why)
        return True

    def due(self, now: float) -> str | None:
        """What must happen to a running unit now: None (nothing), "exited" (its worker
        ended), or the reason to stop it ("done", "stalled", "timeout")."""
        assert self.proc is not None
        grew = self._read_new()
        if (grew and self.adapter.progress_by_bytes) or self.parsed.progress != self._progress:
            self.last_growth = now  # retry notices make bytes, not progress
            self._progress = self.parsed.progress
        if self.proc.poll() is not None:
            return "exited"
        if self.finished_at is not None and now - self.finished_at >= self.result_grace:
            return "done"  # it printed its result; what follows is background noise
        if self.stall and now - self.last_growth >= self.stall:
            return "stalled"
        if self.timeout and now - self.started >= self.timeout:
            return "timeout"
        return None

    def settle(self, why: str, *, none_left: bool = False) -> None:
        """End the unit for ``why`` (from due()); its status is final afterwards.
        ``none_left``: no process carries its token any more (the caller looked)."""
        if why == "exited":
            self._finish(None, none_left=none_left)
        else:
            self.stop(why)

    def stop(self, why: str) -> None:
        if self.proc is not None and self.state == "running":
            self.retrying_at_stop = self.parsed.retrying()
            began = time.time()
            # its result event came before this stop: what it said then is its answer
            procs.kill_tree(self.proc.pid, self.token, mark=self.finished_at is None)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.status["stopped_between"] = [round(began, 3), round(time.time(), 3)]  # epoch seconds
        self._finish(why)

    def skip(self, why: str) -> None:
        """A queued unit that will not run (the run was interrupted)."""
        self.state = why
        self.status.update(state=why, ended=runs.now_iso(), error="not started")
        self.save(durable=True)

    def _stdin_read(self) -> int | None:
        """How many bytes of its prompt the worker (and its children) read from stdin."""
        try:
            return os.lseek(self._stdin.fileno(), 0, os.SEEK_CUR) if self._stdin else None
        except (OSError, ValueError):
            return None

    def _close_files(self) -> None:
        for f in self._files:
            try:
                f.close()
            except OSError:
                pass
        self._files = []

    def _finish(self, why: str | None, *, none_left: bool = False) -> None:
        proc = self.proc
        assert proc is not None
        # Whatever the worker left behind (a detached grandchild) ends with the unit.
        leftovers = [] if none_left else procs.kill_tree(None, self.token, grace=1.0, mark=False)
        code = proc.poll()
        if code is None:
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                procs.kill_tree(proc.pid, self.token, grace=0.5)
                code = proc.wait()
        self.status["stdin_read"] = self._stdin_read()
        self._close_files()
        self._size = -1
        self._read_new()
        if self._partial:
            event = adapters.parse_line(self._partial.decode("utf-8", "replace"))
            if event is not None:
                self.adapter.feed(self.parsed, event)
        p = self.parsed
        answered = answer.land(self.folder, self.adapter.name, self.parsed.answer, code, self.status)
        if why in ("stalled", "timeout", "interrupted", "killed"):
            state = why
        elif p.error:
            state = "failed"
        elif (self.adapter.done_at_result and p.finished) or (
            code == 0 and (answered or self.adapter.name == "cmd")
        ):
            state = "done"
        else:
            state = "failed"
        self.status["state"] = state
        if not answered:
            self._salvage()
        self.state = state
        ended = time.monotonic()
        failure, reason = self._failure(state, code)
        limit = limit_of(failure, p, reason)
        retrying = self.retrying_at_stop if state in ("stalled", "timeout") else None
        self.status.update(
            state=state,
            failure=failure.value if failure else None,
            reason=reason,
            limit=limit.as_dict() if limit else None,  # the plan's usage limit: window, reset
            while_retrying=retrying[0].value if retrying else None,
            exit_code=code,
            ended=runs.now_iso(),
            duration_s=round(ended - self.started, 3),
            session_id=self.session_id,
            model=p.model or self.status.get("model"),
            usage=p.usage,
            error=p.error or reason or (self._stderr_tail() if state == "failed" else None),
            leftovers_killed=len(leftovers),
        )
        if p.denied:  # calls the tool refused for want of a grant: the loop's handback names them
            self.status["denied"] = [d.as_json() for d in p.denied]
        self._record_cost()
        self._final_save()

    def _final_save(self) -> None:
        if self.finalize is not None:
            self.finalize(self)
        self.save(durable=True)

    def _failure(self, state: str, code: int | None) -> tuple[adapters.Failure | None, str | None]:
        """The failure class of an ended unit and the tool's own words (one line)."""
        F = adapters.Failure
        p = self.parsed
        if state == "done":
            return None, None
        if state == "timeout":
            said = f"still running after {self.timeout:g}s (timeout)"
            retrying = self.retrying_at_stop
            if retrying is not None:  # the cause survives: what it was retrying, and why
                said += f" while retrying ({retrying[0].value}): {retrying[1]}"
            return F.timeout, said
        if state == "stalled":
            retrying = self.retrying_at_stop
            if retrying is not None:
                return retrying  # it was retrying, e.g. offline, since its last progress
            what = "output" if self.adapter.progress_by_bytes else "model event"
            return F.stall, f"no {what} for {self.stall:g}s"
        if state != "failed":
            return None, None  # interrupted, killed: someone stopped it
        return self.adapter.classify(p, code, self._read("worker.log"), self._read("worker.err"))

    def _read(self, name: str, tail: int = 65536) -> str:
        """The last ``tail`` bytes of one of the worker's files."""
        try:
            return fsutil.tail(self.folder / name, tail).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _record_cost(self) -> None:
        """The unit's cost line from its transcript (the same function wf usage --log and
        the orchestration loop use), cross-checked with the cost its own events reported."""
        from wf.cost import costlog

        found = self.adapter.cost(self.session_id)
        if found is None:
            return
        cost, kind = found
        self.status["cost"] = costlog.line_for(
            cost,
            ts=str(self.status.get("ended")),
            project=str(self.status.get("project") or self.spec.cwd.name),
            task_id=self.spec.unit,
            agent=self.session_id,
            kind=kind,
            effort=self.spec.effort,
            done=self.state == "done",
            duration=self.status.get("duration_s"),
        )
        reported = (self.parsed.usage or {}).get("usd_rep")
        if isinstance(reported, (int, float)):
            same = abs(float(reported) - cost.usd_rep) <= max(1e-6, 0.01 * float(reported))
            self.status["cost_check"] = (
                "agrees"
                if same
                else (f"differs: the tool reported {reported:.4f}, the transcript gives {cost.usd_rep:.4f}")
            )

    def _stderr_tail(self) -> str | None:
        text = fsutil.tail_text(self.folder / "worker.err", 4096).strip()
        return text.splitlines()[-1][:300] if text else None

    def _salvage(self) -> None:
        code = self.proc.returncode if self.proc else None
        answer.salvage(self.folder, self.status, self.parsed.snippets, code)


def settle_all(ending: list[tuple[Unit, str]]) -> None:
    """Settle units together: one thread each when there are several, so none waits for
    another's tree to die or fsyncs. One look finds which exited units left processes;
    the others skip the tree scan (in every thread, it made them fight for the GIL)."""
    exited = [u.token for u, why in ending if why == "exited"]
    left = procs.with_tokens(exited) if exited else {}
    clear = {id(u) for u, why in ending if why == "exited" and not left[u.token]}
    if len(ending) == 1:
        u, why = ending[0]
        u.settle(why, none_left=id(u) in clear)
        return
    errors: list[BaseException] = []

    def one(u: Unit, why: str) -> None:
        try:
            u.settle(why, none_left=id(u) in clear)
        except BaseException as e:  # re-raised below, in the supervisor's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=pair) for pair in ending]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def note_strays(running: list[Unit], seen: set[int]) -> None:
    """Record in each running unit's status.json the processes this supervisor adopted
    since the last look (a descendant that detached and may have cleared its
    environment: no token finds it). Any of the units running then may own it; when the
    supervisor is gone, whichever command notices ends them (``procs.end_strays``)."""
    new = [pid for pid in procs.adopted() if pid not in seen]
    if not new:
        return
    seen.update(new)
    pairs = [[pid, procs.started(pid)] for pid in new]
    for u in running:
        u.status["strays"] = [*u.status.get("strays", []), *pairs]
        u.save()


def supervise(
    units: list[Unit],
    max_parallel: int,
    on_end: Callable[[Unit], None] | None = None,
    on_start: Callable[[Unit], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> bool:
    """Run units, at most ``max_parallel`` at once, until all have ended. Ctrl-C (or
    SIGTERM) stops every running unit and marks the rest; returns False then.
    ``on_tick`` is called after every pass (for a progress line)."""
    procs.become_subreaper()
    for u in units:
        u.queue()
    interrupted = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        interrupted.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    waker = procs.Waker()
    base_env = without_location(os.environ)  # once: each unit's env is a copy of it
    pending = list(units)
    running: list[Unit] = []
    strays: set[int] = set()
    try:
        while (pending or running) and not interrupted.is_set():
            while pending and len(running) < max(1, max_parallel):
                u = pending.pop(0)
                u.start(base_env)
                if u.state == "running":
                    running.append(u)
                    if on_start:
                        on_start(u)
                elif on_end:
                    on_end(u)
            note_strays(running, strays)  # before any unit ends: it may own them
            now = time.monotonic()
            ending = [(u, why) for u in running for why in [u.due(now)] if why is not None]
            if ending:
                settle_all(ending)
                for u, _why in ending:
                    running.remove(u)
                    if on_end:
                        on_end(u)
            procs.reap_orphans()
            if on_tick:
                on_tick()
            if running and not ending:
                waker.wait(POLL)
        if interrupted.is_set():
            if running:
                settle_all([(u, "interrupted") for u in running])
            for u in running:
                if on_end:
                    on_end(u)
            for u in pending:
                u.skip("interrupted")
            return False
        return True
    finally:
        waker.close()
        procs.kill_descendants()  # e.g. a grandchild that cleared its environment and detached
        for s, h in old.items():
            signal.signal(s, h)
