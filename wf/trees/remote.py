"""The shared remote: what machines that share one backlog exchange through git alone.

Every write is a compare-and-swap: :func:`push` sends each ref with
``--force-with-lease=<ref>:<expected>`` (``expected`` empty: the ref must not exist yet),
never ``--force`` or ``--mirror``, and says per ref what happened as a
:class:`PushOutcome` read from git's ``--porcelain`` lines (a documented, stable
format), never from its messages. A remote that cannot be reached is a
:class:`RemoteError` with ``fault`` :attr:`RemoteFault.UNREACHABLE`: nothing was written.
Git runs through :mod:`wf.trees.gitops` (no prompts, no ambient git variables).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from wf.base.errors import WfError
from wf.trees import gitops

_REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-")


class RemoteFault(enum.Enum):
    UNREACHABLE = "unreachable"  # no answer: offline, the host down, the path gone
    NO_REMOTE = "no remote"  # wf.toml names a remote this checkout does not have


class RemoteError(WfError):
    def __init__(self, fault: RemoteFault, remote: str, detail: str) -> None:
        self.fault = fault
        self.remote = remote
        self.detail = detail
        super().__init__(f"shared remote {remote!r} {fault.value}: {detail}")


class PushOutcome(enum.Enum):
    OK = "ok"  # written (created, moved or deleted)
    SAME = "same"  # it already had that value
    STALE = "stale"  # the lease was lost: the ref is not what we last saw (another machine won)
    REFUSED = "refused"  # the host refused it (a hook, a namespace it does not take)


@dataclass(frozen=True)
class Update:
    """One ref to write on the remote: ``src`` a local commit (None: delete the ref),
    ``ref`` the remote's full ref name, ``expect`` the sha it must have now ("": it
    must not exist)."""

    src: str | None
    ref: str
    expect: str


@dataclass(frozen=True)
class Pushed:
    ref: str
    outcome: PushOutcome
    detail: str  # git's summary of that ref, for people; nothing branches on it


def check_ref(ref: str) -> str:
    """A full ref name wf writes on a remote: ``refs/...``, plain characters only, no
    ``..``, no leading ``-``."""
    if (
        not ref.startswith("refs/")
        or not set(ref) <= _REF_CHARS
        or ".." in ref
        or "//" in ref
        or ref.endswith(("/", ".", ".lock"))
    ):
        raise WfError(f"bad ref name {ref!r}")
    return ref


def has_remote(cwd: Path, remote: str) -> bool:
    return gitops.run(cwd, "remote", ok=(0,)).out.split().count(remote) > 0


def _network(cwd: Path, remote: str, *args: str) -> gitops.Result:
    """A git command that talks to ``remote``; RemoteError if it cannot be reached."""
    if not has_remote(cwd, remote):
        raise RemoteError(RemoteFault.NO_REMOTE, remote, "git remote add it, or change shared in wf.toml")
    r = gitops.run(cwd, *args, ok=(0, 1, 2, 128))
    if r.status == 128 or (r.status != 0 and not r.out.strip()):
        tail = " ".join(r.err.strip().splitlines()[-2:]) or f"git exited {r.status}"
        raise RemoteError(RemoteFault.UNREACHABLE, remote, tail)
    return r


def ls_remote(cwd: Path, remote: str, prefix: str) -> dict[str, str]:
    """The remote's refs under ``prefix`` (``refs/wf/claims``): full name -> sha."""
    r = _network(cwd, remote, "ls-remote", "--refs", remote, f"{check_ref(prefix.rstrip('/'))}/*")
    out: dict[str, str] = {}
    for line in r.out.splitlines():
        sha, _, name = line.partition("\t")
        if name:
            out[name] = sha
    return out


def fetch(cwd: Path, remote: str, *refspecs: str) -> None:
    """Fetch ``refspecs`` (``+refs/heads/main:refs/remotes/origin/main``) from ``remote``."""
    r = _network(cwd, remote, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, *refspecs)
    if r.status != 0:
        raise RemoteError(RemoteFault.UNREACHABLE, remote, r.err.strip() or f"git fetch exited {r.status}")


def push(cwd: Path, remote: str, updates: list[Update]) -> list[Pushed]:
    """Write ``updates`` on ``remote``, each only if it still has its expected value;
    what happened to each (in their order)."""
    if not updates:
        return []
    args = ["push", "--porcelain", "--no-verify"]
    specs = []
    for u in updates:
        check_ref(u.ref)
        if u.src is not None and not all(c in "0123456789abcdef" for c in u.src):
            raise WfError(f"push of {u.ref}: {u.src!r} is not a commit id")
        args.append(f"--force-with-lease={u.ref}:{u.expect}")
        specs.append(f"{u.src}:{u.ref}" if u.src is not None else f":{u.ref}")
    r = _network(cwd, remote, *args, remote, *specs)
    return _porcelain(r.out, [u.ref for u in updates], remote, r.err)


# receive-pack's reasons (its ``ng <ref> <reason>`` protocol line) for a ref another push
# moved after this push's lease was checked: the race was lost on the host, not refused
_LOST_ON_HOST = ("(failed to update ref)", "(failed to lock)")


def _porcelain(text: str, refs: list[str], remote: str, err: str) -> list[Pushed]:
    """git push --porcelain: ``<flag>\\t<from>:<to>\\t<summary>`` per ref; the flag says
    what happened (``=`` up to date, ``!`` rejected, others written)."""
    seen: dict[str, Pushed] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or len(parts[0]) != 1:
            continue
        flag, spec, summary = parts[0], parts[1], parts[2]
        ref = spec.rsplit(":", 1)[-1]
        if flag == "=":
            outcome = PushOutcome.SAME
        elif flag == "!":
            outcome = PushOutcome.STALE
            if summary.startswith("[remote rejected]") and not summary.endswith(_LOST_ON_HOST):
                outcome = PushOutcome.REFUSED
        else:
            outcome = PushOutcome.OK
        seen[ref] = Pushed(ref, outcome, summary)
    missing = [ref for ref in refs if ref not in seen]
    if missing:
        tail = " ".join(err.strip().splitlines()[-2:]) or "no answer for " + ", ".join(missing)
        raise RemoteError(RemoteFault.UNREACHABLE, remote, tail)
    return [seen[ref] for ref in refs]
