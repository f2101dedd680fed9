"""What the benchmark scripts share: where the venv is, running a command, timing a
whole process, and pinning the wf sources a run measured."""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = VENV_BIN / "python"
WF = VENV_BIN / "wf"


class BenchError(Exception):
    pass


def run(
    argv: Sequence[str], cwd: Path, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        p = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True)
    except OSError as e:
        raise BenchError(f"{' '.join(argv)}: {e}") from None
    if check and p.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p


def timed(argv: Sequence[str], cwd: Path) -> float:
    """Wall time of one whole process, in milliseconds."""
    t0 = time.perf_counter()
    p = subprocess.run(list(argv), cwd=cwd, capture_output=True)
    ms = (time.perf_counter() - t0) * 1000.0
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace")[-2000:]
        raise BenchError(f"{' '.join(argv)} exited {p.returncode}:\n{err}")
    return ms


def wf(*args: str) -> list[str]:
    return [str(WF), *args]


def export_rev(rev: str, dest: Path) -> str:
    """Export the ``wf`` package as of git revision ``rev`` into ``dest`` (read-only on
    the repository: ``git archive``); return the full commit id."""
    sha = run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], ROOT).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", sha, "wf"], cwd=ROOT, capture_output=True)
    tar = subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, capture_output=True)
    if archive.returncode != 0 or tar.returncode != 0:
        raise BenchError(
            f"cannot export wf at {sha}: {(archive.stderr + tar.stderr).decode(errors='replace')}"
        )
    return sha


def wf_package(cwd: Path) -> Path:
    """The folder of the ``wf`` package the benchmarked processes import."""
    code = "import os, wf; print(os.path.dirname(os.path.abspath(wf.__file__)))"
    return Path(run([str(PYTHON), "-c", code], cwd).stdout.strip())


def sources_digest(pkg: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def describe_sources(pkg: Path) -> str:
    """The package a run measured: its digest, and the git commit and changes it has."""
    what = f"{pkg} (sources sha256 {sources_digest(pkg)}"
    head = run(["git", "rev-parse", "--short", "HEAD"], pkg, check=False)
    if head.returncode == 0:
        status = run(["git", "status", "--porcelain", "--", "."], pkg, check=False).stdout
        changed = [line[3:] for line in status.splitlines() if line.strip()]
        what += f", git HEAD {head.stdout.strip()}, " + (
            "uncommitted changes: " + " ".join(changed) if changed else "no uncommitted changes"
        )
    return what + ")"
