"""A fake `claude` (Claude Code 2.1.332) for wf's cloud tests: `--cloud` and `--teleport`.

What it says is what the real binary said, recorded offline in
tests/fixtures/real/claude-2.1.332/cloud/ (tests/cloud/test_cloud_fake.py compares them).
Where no recording exists (a logged-in create or teleport), it follows the shapes read
from the binary: "Created cloud session: <title>", "View: <url>", "Resume with: claude
--teleport <id>"; a teleport checks the session's branch out and answers in stream-json.

The "cloud" is a folder, $WF_FAKE_CLOUD: one <session>.json per session and a clone of
the repository it worked in. A session does what `cloud:` lines in its description say:
  cloud: write PATH TEXT   write TEXT (\\n for new lines) to PATH and commit it
  cloud: result R          done (default), awaiting, handback, or none (no report lines)
  cloud: note TEXT         the report's note (\\e: an escape character)
  cloud: polls N           the first N teleports find it still running
  cloud: tokens N          output tokens of its one request (its cost; default 2000)
  cloud: vanish            the session is gone when teleported (invented words)
  cloud: branch NAME       the session's branch (default: claude/<its title>-<random>)
Logged in: $CLAUDE_CONFIG_DIR/.credentials.json exists. Offline: WF_FAKE_CLOUD_OFFLINE=1.
WF_FAKE_CLOUD_DELAY=S: a create or a teleport takes S seconds (a slow network), for race tests.
WF_FAKE_CLOUD_SID=ID: the id the next created session gets (to test what wf accepts).
WF_FAKE_CLOUD_HOLD=DIR: a teleport of session S writes DIR/S.held and waits for DIR/S.go
(at most 120 s): a test holds a pull where it wants it, for race tests without timing.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

TYPE_CHECKING = False  # typing costs a start ~5 ms
if TYPE_CHECKING:
    from typing import Any, NoReturn

from _fake_common import rand_id, uuid4  # noqa: E402  (../_fake_common.py: the launcher's path)

VERSION = "2.1.332"
SIGN_IN = (
    "Cloud sessions need a claude.ai sign-in. Run `claude auth login` (or /login in a local "
    "session), then try again."
)
OFFLINE = "getaddrinfo EAI_AGAIN api.anthropic.com"
NEEDS_TTY = (
    "Error: --cloud requires an interactive terminal.\n"
    "Non-interactive runs (piped stdout, --init-only, --sdk-url) run locally and would silently "
    "ignore --cloud. Drop --cloud, or run in an interactive terminal.\n"
)
WITH_PRINT = (
    "Error: --cloud cannot be combined with --print.\n"
    "Starting a new cloud session with --cloud is interactive only: drop --print, or drop --cloud "
    'to run locally. To message an existing cloud session instead, pass its ID: `claude -p "message" '
    "--cloud <session-id>` (find IDs at claude.ai/code).\n"
)
DIRTY = "You have uncommitted changes. Commit or stash them before using --teleport."
NOT_FOUND = "Session not found"  # invented: the real words were never recorded
SID_RE = re.compile(r"^(session_|cse_)[A-Za-z0-9]+$|^https://claude\.ai/code/")
MODEL = "claude-opus-4-6"


def config_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")


def logged_in() -> bool:
    return os.path.isfile(os.path.join(config_dir(), ".credentials.json"))


def cloud_dir() -> str:
    d = os.environ["WF_FAKE_CLOUD"]
    os.makedirs(d, exist_ok=True)
    return d


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def write_text(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def git(cwd: str, *args: str, check: bool = True) -> str:
    import subprocess  # here, not at the top: the fake's start is the suite's

    p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"fake claude: git {' '.join(args)} failed: {p.stderr.strip()}")
    return p.stdout


def die(text: str, code: int = 1, err: bool = True) -> NoReturn:
    (sys.stderr if err else sys.stdout).write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    sys.exit(code)


def parse(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"print": False, "format": "text", "positional": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-p", "--print"):
            opts["print"] = True
        elif a == "--verbose":
            pass
        elif a in ("--version", "-v"):
            opts["version"] = True
        elif a.startswith(("--cloud=", "--teleport=", "--name=", "--output-format=")):
            k, _, v = a[2:].partition("=")
            opts[{"output-format": "format"}.get(k, k)] = v
        elif a in ("--cloud", "--teleport", "--output-format", "-n", "--name"):
            nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
            key = {"--output-format": "format", "-n": "name", "--name": "name"}.get(a, a[2:])
            opts[key] = nxt if nxt is not None else ""
            i += 1 if nxt is not None else 0
        else:
            opts["positional"].append(a)
        i += 1
    return opts


def result_event(
    session: str, *, error: str | None = None, text: str = "", cost: float = 0.0
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "result",
        "subtype": "error_during_execution" if error else "success",
        "duration_ms": 0 if error else 1200,
        "duration_api_ms": 0 if error else 1100,
        "is_error": bool(error),
        "num_turns": 0 if error else 1,
        "stop_reason": None if error else "end_turn",
        "session_id": session,
        "total_cost_usd": cost,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "modelUsage": {},
        "permission_denials": [],
        "uuid": uuid4(),
    }
    if error:
        ev["errors"] = [error]
        ev["result_index"] = 0
    else:
        ev["result"] = text
    return ev


def teleport_fail(words: str) -> NoReturn:
    print(json.dumps(result_event(uuid4(), error=words)), flush=True)
    die(words)


# ------------------------------------------------------------------ create


def create(description: str, name: str | None) -> NoReturn:
    if not os.isatty(sys.stdout.fileno()):
        die(NEEDS_TTY)
    if not logged_in():
        die(f"Error: {SIGN_IN}", err=False)
    if os.environ.get("WF_FAKE_CLOUD_OFFLINE"):
        die(f"Error: Cloud session create failed: {OFFLINE}", err=False)
    time.sleep(float(os.environ.get("WF_FAKE_CLOUD_DELAY") or 0))
    cwd = os.getcwd()
    sid = os.environ.get("WF_FAKE_CLOUD_SID") or "session_01" + rand_id(24)  # a test may force odd ids
    home = os.path.join(cloud_dir(), re.sub(r"[^A-Za-z0-9_-]", "_", sid))
    work = os.path.join(home, "work")
    git(os.path.dirname(cwd), "clone", "--quiet", cwd, work)
    branch = (
        "claude/"
        + re.sub(r"[^a-z0-9]+", "-", (name or description)[:30].lower()).strip("-")
        + "-"
        + rand_id(5).lower()
    )
    for line in description.splitlines():
        m = re.match(r"^\s*cloud:\s*branch\s+(\S+)\s*$", line)
        branch = m.group(1) if m else branch
    git(work, "switch", "--quiet", "-c", branch)
    script = {"result": "done", "note": "", "polls": 0, "tokens": 2000, "vanish": False}
    commit = "-"
    for line in description.splitlines():
        m = re.match(r"^\s*cloud:\s*(\w+)\s*(.*)$", line)
        if not m:
            continue
        verb, arg = m.group(1), m.group(2).strip()
        if verb == "write":
            path, _, text = arg.partition(" ")
            target = os.path.join(work, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            write_text(target, text.replace("\\n", "\n") + "\n")
            git(work, "add", "--", path)
            git(work, "commit", "--quiet", "-m", f"cloud: {path}")
            commit = git(work, "rev-parse", "HEAD").strip()
        elif verb in ("polls", "tokens"):
            script[verb] = int(arg)
        elif verb == "vanish":
            script["vanish"] = True
        elif verb in ("result", "note"):
            script[verb] = arg.replace("\\e", "\x1b")  # \e: an escape, as a hostile answer has
    remote = git(cwd, "remote", "get-url", "origin", check=False).strip()
    title = name or description.strip().splitlines()[0][:60]
    state = {"id": sid, "title": title, "remote": remote, "branch": branch, "commit": commit,
             "created": time.time(), "description": description, **script}  # fmt: skip
    write_text(f"{home}.json", json.dumps(state, indent=1))
    url = f"https://claude.ai/code/{sid}?from=cli&m=0"
    sys.stdout.write(
        f"Created cloud session: {title}\r\nView: {url}\r\nResume with: claude --teleport {sid}\r\n"
    )
    sys.stdout.flush()
    sys.exit(0)


# ------------------------------------------------------------------ teleport


def hold(sid: str) -> None:
    raw = os.environ.get("WF_FAKE_CLOUD_HOLD")
    if not raw:
        return
    write_text(os.path.join(raw, f"{sid}.held"), str(os.getpid()))
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(raw, f"{sid}.go")) and time.monotonic() < deadline:
        time.sleep(0.05)


def teleport(sid: str, prompt: str) -> NoReturn:
    time.sleep(float(os.environ.get("WF_FAKE_CLOUD_DELAY") or 0))
    hold(sid)
    cwd = os.getcwd()
    if (
        os.path.exists(os.path.join(cwd, ".git"))
        and git(cwd, "status", "--porcelain", "--untracked-files=no").strip()
    ):
        teleport_fail(DIRTY)  # recorded: checked before the login
    if not logged_in():
        teleport_fail(SIGN_IN)
    if os.environ.get("WF_FAKE_CLOUD_OFFLINE"):
        teleport_fail(OFFLINE)
    path = os.path.join(cloud_dir(), f"{sid}.json")
    if not os.path.isfile(path):
        teleport_fail(NOT_FOUND)
    s = json.loads(read_text(path))
    if s["vanish"]:
        teleport_fail(NOT_FOUND)
    here = git(cwd, "remote", "get-url", "origin", check=False).strip()
    if here != s["remote"]:
        repo = re.sub(r"^.*github\.com[:/]|\.git$", "", s["remote"])
        teleport_fail(f"Run claude --teleport {sid} from a checkout of {repo}.")
    local = uuid4()
    if s["polls"] > 0:
        s["polls"] -= 1
        write_text(path, json.dumps(s, indent=1))
        answer, tokens = "result: running", 40
    else:
        work = os.path.join(cloud_dir(), sid, "work")
        git(cwd, "fetch", "--quiet", work, f"{s['branch']}:{s['branch']}")
        git(cwd, "switch", "--quiet", s["branch"])
        if s["result"] == "none":
            answer = "result: lost\nnote: the session ended without the four report lines"
        else:
            answer = (
                f"result: {s['result']}\ncommit: {s['commit']}\nfollowups: -\n"
                f"note: {s['note'] or 'finished in the cloud'}"
            )
        tokens = int(s["tokens"])
    cost = transcript(cwd, local, answer, tokens)
    emit({"type": "system", "subtype": "init", "cwd": cwd, "session_id": local, "model": MODEL,
          "permissionMode": "default", "claude_code_version": VERSION})  # fmt: skip
    emit(
        {
            "type": "assistant",
            "session_id": local,
            "message": {"model": MODEL, "role": "assistant", "content": [{"type": "text", "text": answer}]},
        }
    )
    emit(result_event(local, text=answer, cost=cost))
    sys.exit(0)


def emit(ev: dict[str, Any]) -> None:
    print(json.dumps(ev), flush=True)


def transcript(cwd: str, session: str, answer: str, tokens: int) -> float:
    """The teleported conversation, where the real tool keeps transcripts; its cost at
    opus 4.6 prices (5 in, 6.25 cache write, 0.50 cache read, 25 out per million)."""
    folder = os.path.join(config_dir(), "projects", re.sub(r"[^A-Za-z0-9]", "-", cwd))
    os.makedirs(folder, exist_ok=True)
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 4000, "cache_read_input_tokens": 20000,
             "cache_creation": {"ephemeral_5m_input_tokens": 4000, "ephemeral_1h_input_tokens": 0},
             "output_tokens": tokens, "service_tier": "standard"}  # fmt: skip
    line = {"type": "assistant", "sessionId": session, "cwd": cwd, "uuid": uuid4(),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), "requestId": "req_011C" + rand_id(20),
            "message": {"model": MODEL, "id": "msg_01" + rand_id(22), "type": "message", "role": "assistant",
                        "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn", "usage": usage}}  # fmt: skip
    with open(os.path.join(folder, f"{session}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")
    return round((10 * 5 + 4000 * 6.25 + 20000 * 0.5 + tokens * 25) / 1e6, 6)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:2] == ["auth", "status"]:
        print(
            json.dumps(
                {"loggedIn": logged_in(), "authMethod": "claude.ai" if logged_in() else "none"}, indent=2
            )
        )
        sys.exit(0 if logged_in() else 1)
    o = parse(argv)
    if o.get("version"):
        print(f"{VERSION} (Claude Code)")
        sys.exit(0)
    prompt = " ".join(o["positional"])
    if "cloud" in o:
        value = o["cloud"]
        if o["print"]:
            if not SID_RE.match(value or ""):
                die(WITH_PRINT)
            if o["format"] == "stream-json":
                die("Error: --cloud <session_id> does not support --output-format stream-json")
            if not prompt.strip():
                die("Error: non-interactive --cloud <session_id> requires a prompt (positional or stdin).")
            why = SIGN_IN if not logged_in() else OFFLINE if os.environ.get("WF_FAKE_CLOUD_OFFLINE") else None
            if why is not None:
                if o["format"] == "json":
                    print(json.dumps({"ok": False, "session_id": value, "error": why}, separators=(",", ":")))
                die(f"Error: failed to send message to cloud session {value}: {why}")
            print(json.dumps({"ok": True, "session_id": value, "url": f"https://claude.ai/code/{value}"}))
            sys.exit(0)
        if not value:
            die("Error: --cloud requires a description.")
        create(value, o.get("name"))
    if "teleport" in o:
        if not o["print"]:
            die(
                f"Error: {SIGN_IN}" if not logged_in() else "fake claude: interactive --teleport is not faked"
            )
        teleport(o["teleport"], prompt)
    die("fake claude: only --cloud and --teleport are faked here (tests/fakes/claude does print mode)")


if __name__ == "__main__":
    main()
