"""Running headless units: start, watch, stop, salvage.

A unit's worker runs in a new session with stdout and stderr going to files in its run
folder (never pipes wf must drain: a busy wf would stall the worker, and file growth is
what stall detection watches). The supervisor polls: it reads new complete lines,
notes the session id as early as it shows, and stops the unit's whole process tree
(SIGINT, SIGTERM, SIGKILL, listing the tree again before each) when the log has not
grown for the stall window, when the timeout passes, or on Ctrl-C. It is a child
subreaper and gives each unit a token in its environment, so grandchildren that
detached are still found and ended when the unit ends. A unit that ends without an
answer gets a FALLBACK answer from the tail of its log; an answer the worker wrote is
never overwritten.
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

from wf import adapters, procs, runs
from wf.adapters import Adapter, Parsed, Spec
from wf.fsutil import atomic_write_text

POLL = 0.1
RESULT_GRACE = float(os.environ.get("WF_RESULT_GRACE", "5"))
FALLBACK_LINES = 40

_versions: dict[str, str | None] = {}


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
        self.state = "queued"
        self._offset = 0
        self._partial = b""
        self._size = -1
        self._files: list[Any] = []
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
            "version": None,
            "timeout_s": self.timeout,
            "stall_s": self.stall,
            "supervisor": os.getpid(),
            "access": spec.access(),
            **(meta or {}),
        }

    # ---------------------------------------------------------------- files
    def save(self) -> None:
        runs.write_status(self.folder, self.status)

    def queue(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / "prompt.txt", self.spec.prompt)
        if self.session_id:
            atomic_write_text(self.folder / "session.txt", self.session_id + "\n")
        self.save()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        spec = self.spec
        spec = spec._replace(session_id=self.session_id)
        self.spec = spec
        argv = self.adapter.argv(spec)
        env = self.adapter.env(spec, dict(os.environ))
        env[procs.TOKEN_VAR] = self.token
        log = open(self.folder / "worker.log", "wb")  # noqa: SIM115 - closed in _close_files
        err = open(self.folder / "worker.err", "wb")  # noqa: SIM115
        self._files = [log, err]
        self.status["version"] = tool_version(self.adapter)
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=spec.cwd,
                stdin=subprocess.PIPE,
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
            self.save()
            return
        procs.own_child(self.proc.pid)
        threading.Thread(
            target=self._feed_stdin, args=(self.proc, self.adapter.stdin(spec)), daemon=True
        ).start()
        self.started = self.last_growth = time.monotonic()
        self.state = "running"
        self.status.update(state="running", started=runs.now_iso(), pid=self.proc.pid, argv=argv)
        self.save()

    @staticmethod
    def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
        """Write the prompt and close stdin (Codex and opencode wait forever on an open
        stdin); in a thread, so a worker that reads slowly never blocks the supervisor."""
        try:
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read_new(self) -> bool:
        path = self.folder / "worker.log"
        try:
            size = path.stat().st_size + (self.folder / "worker.err").stat().st_size
        except OSError:
            return False
        if size == self._size:
            return False
        self._size = size
        try:
            with open(path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return True
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # the last line may still be being written
        before = self.parsed.session_id
        for raw in lines:
            event = adapters.parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                self.adapter.feed(self.parsed, event)
        if self.parsed.finished and self.finished_at is None and self.adapter.name == "claude":
            self.finished_at = time.monotonic()
        if (
            self.parsed.session_id
            and self.parsed.session_id != before
            and self.parsed.session_id != self.session_id
        ):
            self.session_id = self.parsed.session_id
            atomic_write_text(self.folder / "session.txt", self.session_id + "\n")
            self.status["session_id"] = self.session_id
            self.save()
        return True

    def poll(self, now: float) -> bool:
        """Check on the unit; True once it has ended (its status is final)."""
        if self.state != "running" or self.proc is None:
            return self.state != "queued"
        grew = self._read_new()
        if (grew and self.adapter.progress_by_bytes) or self.parsed.progress != self._progress:
            self.last_growth = now  # retry notices make bytes, not progress
            self._progress = self.parsed.progress
        code = self.proc.poll()
        if code is not None:
            self._finish(None)
            return True
        if self.finished_at is not None and now - self.finished_at >= RESULT_GRACE:
            self.stop("done")  # claude printed its result; what follows is background noise
            return True
        if self.stall and now - self.last_growth >= self.stall:
            self.stop("stalled")
            return True
        if self.timeout and now - self.started >= self.timeout:
            self.stop("timeout")
            return True
        return False

    def stop(self, why: str) -> None:
        if self.proc is not None and self.state == "running":
            procs.kill_tree(self.proc.pid, self.token)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._finish(why)

    def skip(self, why: str) -> None:
        """A queued unit that will not run (the run was interrupted)."""
        self.state = why
        self.status.update(state=why, ended=runs.now_iso(), error="not started")
        self.save()

    def _close_files(self) -> None:
        for f in self._files:
            try:
                f.close()
            except OSError:
                pass
        self._files = []

    def _finish(self, why: str | None) -> None:
        proc = self.proc
        assert proc is not None
        # Whatever the worker left behind (a detached grandchild) ends with the unit.
        leftovers = procs.kill_tree(None, self.token, grace=1.0)
        code = proc.poll()
        if code is None:
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                procs.kill_tree(proc.pid, self.token, grace=0.5)
                code = proc.wait()
        self._close_files()
        self._size = -1
        self._read_new()
        if self._partial:
            event = adapters.parse_line(self._partial.decode("utf-8", "replace"))
            if event is not None:
                self.adapter.feed(self.parsed, event)
        p = self.parsed
        answered = self._land_answer(code)
        if why in ("stalled", "timeout", "interrupted", "killed"):
            state = why
        elif p.error:
            state = "failed"
        elif (self.adapter.name == "claude" and p.finished) or (
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
        self.status.update(
            state=state,
            failure=failure.value if failure else None,
            reason=reason,
            exit_code=code,
            ended=runs.now_iso(),
            duration_s=round(ended - self.started, 3),
            session_id=self.session_id,
            model=p.model or self.status.get("model"),
            usage=p.usage,
            error=p.error or reason or (self._stderr_tail() if state == "failed" else None),
            leftovers_killed=len(leftovers),
        )
        self._record_cost()
        self.save()

    def _failure(self, state: str, code: int | None) -> tuple[adapters.Failure | None, str | None]:
        """The failure class of an ended unit and the tool's own words (one line)."""
        F = adapters.Failure
        p = self.parsed
        if state == "done":
            return None, None
        if state == "timeout":
            return F.timeout, f"still running after {self.timeout:g}s (timeout)"
        if state == "stalled":
            retrying = p.retrying()
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
            with open(self.folder / name, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _record_cost(self) -> None:
        """The unit's cost line from its transcript (the same function wf usage --log and
        the orchestration loop use), cross-checked with the cost its own events reported."""
        from wf import costlog

        found = self.adapter.cost(self.session_id)
        if found is None:
            return
        cost, kind = found
        self.status["cost"] = costlog.line_for(
            cost,
            ts=str(self.status.get("ended")),
            project=self.spec.cwd.name,
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
        try:
            text = (self.folder / "worker.err").read_text("utf-8", errors="replace").strip()
        except OSError:
            return None
        return text.splitlines()[-1][:300] if text else None

    def _land_answer(self, code: int | None) -> bool:
        """Put the answer in output.txt; True if the unit gave one."""
        out = self.folder / "output.txt"
        if out.exists() and out.stat().st_size > 0:  # the worker wrote it (codex -o)
            self.status["answer"] = "output_file"
            return True
        if self.adapter.name == "cmd":
            written = self.folder / "answer.out"
            if written.exists() and written.stat().st_size > 0:
                os.replace(written, out)
                self.status["answer"] = "output_file"
                return True
            if code == 0:
                atomic_write_text(out, (self.folder / "worker.log").read_text("utf-8", errors="replace"))
                self.status["answer"] = "stdout"
                return True
            return False
        if self.parsed.answer is not None:
            atomic_write_text(out, self.parsed.answer)
            self.status["answer"] = "result"
            return True
        return False

    def _salvage(self) -> None:
        """A FALLBACK answer from what the worker showed last; marked as such."""
        out = self.folder / "output.txt"
        if out.exists() and out.stat().st_size > 0:
            return
        lines: list[str] = []
        if self.parsed.snippets:
            lines = self.parsed.snippets[-10:]
        else:
            for name in ("worker.log", "worker.err"):
                try:
                    text = (self.folder / name).read_text("utf-8", errors="replace")
                except OSError:
                    continue
                lines += text.splitlines()[-FALLBACK_LINES:]
        code = self.proc.returncode if self.proc else None
        header = (
            f"FALLBACK: unit {self.spec.unit} ended without an answer "
            f"(state {self.status.get('state')}, exit {code}). The last things it printed:"
        )
        atomic_write_text(out, header + "\n\n" + "\n".join(lines[-FALLBACK_LINES:]) + "\n")
        self.status["answer"] = "fallback"
        self.status["fallback"] = True


def supervise(
    units: list[Unit],
    max_parallel: int,
    on_end: Callable[[Unit], None] | None = None,
    on_start: Callable[[Unit], None] | None = None,
) -> bool:
    """Run units, at most ``max_parallel`` at once, until all have ended. Ctrl-C (or
    SIGTERM) stops every running unit and marks the rest; returns False then."""
    procs.become_subreaper()
    for u in units:
        u.queue()
    interrupted = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        interrupted.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    pending = list(units)
    running: list[Unit] = []
    try:
        while (pending or running) and not interrupted.is_set():
            while pending and len(running) < max(1, max_parallel):
                u = pending.pop(0)
                u.start()
                if u.state == "running":
                    running.append(u)
                    if on_start:
                        on_start(u)
                elif on_end:
                    on_end(u)
            now = time.monotonic()
            for u in list(running):
                if u.poll(now):
                    running.remove(u)
                    if on_end:
                        on_end(u)
            procs.reap_orphans()
            if running:
                time.sleep(POLL)
        if interrupted.is_set():
            for u in running:
                u.stop("interrupted")
                if on_end:
                    on_end(u)
            for u in pending:
                u.skip("interrupted")
            return False
        return True
    finally:
        procs.kill_descendants()  # e.g. a grandchild that cleared its environment and detached
        for s, h in old.items():
            signal.signal(s, h)
