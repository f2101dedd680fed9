"""Benchmark `wf usage --file F --json` as whole processes against ccusage 20.0.24.

Files (Claude Code session transcripts):

- the largest corpus transcript (2.7 MB, 2,385 lines, 217 API requests);
- a generated one of about 50 MB (`--target-mb`): whole copies of that transcript, one
  after the other. Every copy after the first gets fresh message ids, request ids, uuids
  and tool-use ids (the same old id maps to the same new id within a copy, so a request's
  1-7 lines stay duplicates and tool results still match their calls) and its
  timestamps shifted past the previous copy's. Line shapes and line sizes stay the same;
  the session id stays the file's own.

Each file is laid out as `TMP/claude/projects/<slug>/<session>.jsonl`. In the same run,
each timed repetition runs, as separate processes and in an order that rotates between
repetitions:

- `.venv/bin/wf usage --file F --json` (the real console script, cwd outside a project);
- `node node_modules/ccusage/src/cli.js claude session --json --offline --mode calculate`
  with `CLAUDE_CONFIG_DIR=TMP/claude` (what `npx ccusage@20.0.24` runs: a node launcher
  that spawns ccusage's native binary);
- that native binary directly, same arguments (ccusage without node's startup).

ccusage is installed with `npm install ccusage@20.0.24` into the temp folder (or into
`--npm-dir`, reused when it already holds 20.0.24); without npm/node, or if the install
fails, ccusage is skipped with a message and wf is still timed.

Wall time is measured around each process; peak memory is the `ru_maxrss` that `wait4`
returns for it (the largest resident set of the process and of the children it waited
for, so the node launcher's figure covers the native binary too). The tables report medians.
Both tools' totals (input, output, cache creation, cache read tokens, cost) are compared
once per file; wf's `usd_rep` (reported output only) is the figure comparable with
ccusage's `totalCost` (wf rounds it to 4 decimals). With `--profile`, or when wf is slower
than ccusage on some file, `python -m cProfile -m wf usage --file F --json` runs on the
largest file and the top functions are printed.

    .venv/bin/python bench/bench_usage.py                  # full run
    .venv/bin/python bench/bench_usage.py --quick          # smoke run
    .venv/bin/python bench/bench_usage.py --profile --npm-dir /tmp/ccusage-20.0.24
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from _common import PYTHON, WF, BenchError, describe_sources, export_rev, run, sources_digest

CORPUS = Path(os.environ.get("WF_CORPUS", "/work/shared/corpus"))
SOURCE = CORPUS / "claude/projects/-home-USER-projects-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
SLUG = "-home-USER-projects-spotter"
CCUSAGE_VERSION = "20.0.24"
CCUSAGE_ARGS = ["claude", "session", "--json", "--offline", "--mode", "calculate"]
MAX_RATIO = 1.0  # goal: wf no slower than ccusage
FLAT_GROWTH = 0.10  # memory "flat": the peak grows by at most 10% from the smallest file to the largest

# ---------------------------------------------------------------- the generated transcript

_UUID = re.compile(rb"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_PREFIXED = re.compile(rb"\b(msg_|req_|toolu_)([A-Za-z0-9]+)")
_TIMESTAMP = re.compile(rb'"timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z"')
_ALNUM = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _digest(copy: int, old: bytes, n: int) -> bytes:
    return hashlib.blake2b(b"%d:" % copy + old, digest_size=max(n, 16)).digest()


Sub = Callable[[re.Match[bytes]], bytes]


def _copy_ids(copy: int, keep: bytes, cache: dict[bytes, bytes]) -> tuple[Sub, Sub]:
    """Substitution callbacks giving each id a new one of the same shape, the same for
    every occurrence within copy ``copy``; ``keep`` (the session id) is left alone."""

    def uuid(m: re.Match[bytes]) -> bytes:
        old = m.group(0)
        if old == keep:
            return old
        new = cache.get(old)
        if new is None:
            h = _digest(copy, old, 16).hex().encode()
            new = cache[old] = b"-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:32]))
        return new

    def prefixed(m: re.Match[bytes]) -> bytes:
        old = m.group(0)
        new = cache.get(old)
        if new is None:
            tail = m.group(2)
            d = _digest(copy, old, len(tail))
            new = cache[old] = m.group(1) + bytes(_ALNUM[b % 62] for b in d[: len(tail)])
        return new

    return uuid, prefixed


def _span(lines: list[bytes]) -> timedelta:
    stamps = [datetime.fromisoformat(m.decode()) for line in lines for m in _TIMESTAMP.findall(line)]
    if not stamps:
        return timedelta(0)
    return max(stamps) - min(stamps)


def generate(source: Path, dest: Path, target_bytes: int) -> int:
    """Write whole copies of ``source`` to ``dest`` until it holds ``target_bytes``;
    return the number of copies."""
    lines = source.read_bytes().splitlines(keepends=True)
    size = sum(map(len, lines))
    copies = max(1, math.ceil(target_bytes / size))
    session = source.stem.encode()
    # each copy starts a minute after the previous one ends
    step = timedelta(seconds=math.ceil(_span(lines).total_seconds() / 60.0 + 1) * 60)
    with open(dest, "wb") as f:
        f.writelines(lines)
        for k in range(1, copies):
            uuid, prefixed = _copy_ids(k, session, {})
            shift = step * k

            def stamp(m: re.Match[bytes], shift: timedelta = shift) -> bytes:
                t = datetime.fromisoformat(m.group(1).decode()) + shift
                return b'"timestamp":"%sZ"' % t.isoformat(timespec="milliseconds").encode()

            for line in lines:
                f.write(_TIMESTAMP.sub(stamp, _PREFIXED.sub(prefixed, _UUID.sub(uuid, line))))
    return copies


def lay_out(tmp: Path, name: str, source: Path, target_bytes: int = 0) -> tuple[Path, Path, int]:
    """A CLAUDE_CONFIG_DIR holding one session transcript, ``source`` itself or (with
    ``target_bytes``) generated from it; returns (config dir, file, copies of source)."""
    config = tmp / name / "claude"
    folder = config / "projects" / SLUG
    folder.mkdir(parents=True)
    dest = folder / source.name
    if target_bytes:
        return config, dest, generate(source, dest, target_bytes)
    shutil.copyfile(source, dest)
    return config, dest, 1


# ---------------------------------------------------------------- running


@dataclass
class Proc:
    ms: float
    peak_kb: int
    stdout: bytes


def measure(argv: Sequence[str], cwd: Path, env: dict[str, str], out: Path) -> Proc:
    """Run one whole process; its wall time (ms), peak RSS (KiB, from wait4) and stdout."""
    with open(out, "wb") as so, open(out.with_suffix(".err"), "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)
        ms = (time.perf_counter() - t0) * 1000.0
    p.returncode = rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        err = out.with_suffix(".err").read_bytes().decode("utf-8", "replace")[-2000:]
        raise BenchError(f"{' '.join(argv)} exited {rc}:\n{err}")
    return Proc(ms, ru.ru_maxrss, out.read_bytes())


@dataclass
class Ccusage:
    launcher: list[str]  # node + cli.js
    native: list[str] | None  # the platform binary, if found
    where: Path


def install_ccusage(folder: Path) -> tuple[Ccusage | None, str]:
    """ccusage 20.0.24 from npm into ``folder`` (reused if already there); or None and why."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node or npm not found on PATH"
    pkg = folder / "node_modules" / "ccusage" / "package.json"
    try:
        have = json.loads(pkg.read_text("utf-8")).get("version")
    except (OSError, ValueError):
        have = None
    if have != CCUSAGE_VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", f"ccusage@{CCUSAGE_VERSION}"],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            return None, f"npm install ccusage@{CCUSAGE_VERSION} failed:\n{p.stderr[-1500:]}"
        try:
            have = json.loads(pkg.read_text("utf-8")).get("version")
        except (OSError, ValueError):
            have = None
        if have != CCUSAGE_VERSION:
            return None, f"npm installed ccusage {have}, not {CCUSAGE_VERSION}"
    bin_link = folder / "node_modules" / ".bin" / "ccusage"
    if not bin_link.exists():
        return None, f"{bin_link} is missing"
    cli_js = bin_link.resolve()
    # The launcher makes the native binary executable on its first run; this is that run.
    p = subprocess.run([node, str(cli_js), "--version"], cwd=folder, capture_output=True, text=True)
    if p.returncode != 0 or CCUSAGE_VERSION not in p.stdout:
        return None, f"`ccusage --version` gave {p.returncode}: {p.stdout.strip()} {p.stderr[-500:]}"
    natives = sorted((folder / "node_modules" / "@ccusage").glob("ccusage-*/bin/ccusage*"))
    native = next((str(x) for x in natives if os.access(x, os.X_OK)), None)
    return Ccusage([node, str(cli_js)], [native] if native else None, folder), ""


# ---------------------------------------------------------------- totals


@dataclass
class Totals:
    inp: int
    out: int
    cache_create: int
    cache_read: int
    cost: float
    turns: int | None = None

    def as_tuple(self) -> tuple[int, int, int, int, float]:
        return (self.inp, self.out, self.cache_create, self.cache_read, self.cost)


def wf_totals(stdout: bytes) -> Totals:
    d = json.loads(stdout)
    return Totals(d["in"], d["out"], d["cw5m"] + d["cw1h"], d["cr"], d["usd_rep"], d["turns"])


def ccusage_totals(stdout: bytes) -> Totals:
    t = json.loads(stdout)["totals"]
    return Totals(
        t["inputTokens"], t["outputTokens"], t["cacheCreationTokens"], t["cacheReadTokens"], t["totalCost"]
    )


FIELDS = ("input", "output", "cache creation", "cache read", "cost")


def agreement(wf_t: Totals, cc_t: Totals) -> tuple[bool, str]:
    diffs = []
    for name, a, b in zip(FIELDS, wf_t.as_tuple(), cc_t.as_tuple(), strict=True):
        # wf prints usd_rep rounded to 4 decimals
        same = abs(a - b) <= 5e-5 + 1e-9 * abs(b) if name == "cost" else a == b
        if not same:
            diffs.append(f"{name} wf={a} ccusage={b}")
    shown = (
        f"in {wf_t.inp:,}, out {wf_t.out:,}, cache creation {wf_t.cache_create:,}, "
        f"cache read {wf_t.cache_read:,}, cost ${wf_t.cost:.4f} (ccusage ${cc_t.cost:.6f})"
    )
    return not diffs, shown if not diffs else "; ".join(diffs)


# ---------------------------------------------------------------- the benchmark


@dataclass
class Tool:
    name: str
    argv: list[str]
    env: dict[str, str]
    ms: list[float] = field(default_factory=list)
    peak_kb: list[int] = field(default_factory=list)
    last: bytes = b""


@dataclass
class FileRow:
    label: str
    path: Path
    size: int
    tools: dict[str, Tool]

    def med(self, tool: str) -> float | None:
        t = self.tools.get(tool)
        return statistics.median(t.ms) if t and t.ms else None

    def peak_mb(self, tool: str) -> float | None:
        t = self.tools.get(tool)
        return statistics.median(t.peak_kb) * 1024 / 1e6 if t and t.peak_kb else None


def bench_file(row: FileRow, cwd: Path, reps: int, warmup: int) -> None:
    tools = list(row.tools.values())
    for i in range(warmup + reps):
        # rotate the order so no tool always runs first (or right after another)
        k = i % len(tools)
        for t in tools[k:] + tools[:k]:
            p = measure(t.argv, cwd, t.env, cwd / f"out-{t.name.replace(' ', '_')}.json")
            t.last = p.stdout
            if i >= warmup:
                t.ms.append(p.ms)
                t.peak_kb.append(p.peak_kb)


PROFILE_TOP = 18


def profile_wf(path: Path, cwd: Path, env: dict[str, str], prof: Path) -> str:
    run(
        [str(PYTHON), "-m", "cProfile", "-o", str(prof), "-m", "wf", "usage", "--file", str(path), "--json"],
        cwd,
        env=env,
    )
    out = io.StringIO()
    stats = pstats.Stats(str(prof), stream=out)
    stats.sort_stats("tottime").print_stats(PROFILE_TOP)
    stats.sort_stats("cumulative").print_stats(PROFILE_TOP)
    return out.getvalue()


# ---------------------------------------------------------------- report


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def table(rows: list[FileRow]) -> list[str]:
    out = [
        "| file | size MB | wf ms | ccusage ms | ratio | wf peak MB | ccusage peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        w, c = r.med("wf"), r.med("ccusage")
        ratio = f"{w / c:.2f}x" if w is not None and c else "-"
        out.append(
            f"| {r.label} | {r.size / 1e6:.1f} | {fmt(w)} | {fmt(c)} | {ratio} | "
            f"{fmt(r.peak_mb('wf'))} | {fmt(r.peak_mb('ccusage'))} |"
        )
    return out


def native_table(rows: list[FileRow]) -> list[str]:
    out = [
        "| file | ccusage native ms | ratio wf / native | ccusage native peak MB |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        w, n = r.med("wf"), r.med("ccusage native")
        ratio = f"{w / n:.2f}x" if w is not None and n else "-"
        out.append(f"| {r.label} | {fmt(n)} | {ratio} | {fmt(r.peak_mb('ccusage native'))} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few repetitions, for a smoke run")
    ap.add_argument("--reps", type=int, help="timed repetitions per file (default 15, --quick 3)")
    ap.add_argument("--target-mb", type=float, default=50.0, help="size of the generated file (default 50)")
    ap.add_argument(
        "--source", type=Path, default=SOURCE, help="the corpus transcript (default: the largest)"
    )
    ap.add_argument(
        "--npm-dir", type=Path, help="install ccusage here, or reuse it from here (default: the temp folder)"
    )
    ap.add_argument("--no-ccusage", action="store_true", help="time wf alone")
    ap.add_argument("--profile", action="store_true", help="cProfile wf on the largest file even if it wins")
    ap.add_argument(
        "--as-is-env",
        action="store_true",
        help="keep the inherited environment (by default PYTHONDONTWRITEBYTECODE is dropped and "
        "PYTHONPYCACHEPREFIX points into the temp folder, so wf runs from cached bytecode as an "
        "installed wf would)",
    )
    ap.add_argument(
        "--rev",
        metavar="REV",
        help="benchmark the wf package as committed at git revision REV (exported with git "
        "archive and put first on PYTHONPATH) instead of the working tree",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a goal is not met or the tools disagree")
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 15)
    warmup = 1 if args.quick else 2
    for exe in (PYTHON, WF):
        if not exe.exists():
            print(f"bench: {exe} not found; create the venv first", file=sys.stderr)
            return 2
    if not args.source.is_file():
        print(f"bench: no corpus transcript {args.source} (set WF_CORPUS or --source)", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="wf-bench-usage-"))
    env = dict(os.environ)
    if not args.as_is_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        if args.rev:
            sha = export_rev(args.rev, tmp / "src")
            env["PYTHONPATH"] = os.pathsep.join(x for x in (str(tmp / "src"), env.get("PYTHONPATH")) if x)
            print(f"# code: wf as committed at {sha} (git archive)")
        pkg = Path(
            run(
                [str(PYTHON), "-c", "import os, wf; print(os.path.dirname(wf.__file__))"], tmp, env=env
            ).stdout.strip()
        )
        digest = sources_digest(pkg)
        print(f"# wf package: {describe_sources(pkg)}")
        print(
            f"# machine: nproc {os.cpu_count()}, Python {platform.python_version()} ({PYTHON}), "
            f"{platform.system()} {platform.release()} {platform.machine()}"
        )
        node = shutil.which("node")
        if node:
            print(f"# node: {run([node, '--version'], tmp).stdout.strip()} ({node})")
        print(f"# reps: {reps} timed (+{warmup} warm-up) per file, order rotated each repetition")
        print(
            "# env: "
            + (
                "inherited"
                if args.as_is_env
                else f"PYTHONDONTWRITEBYTECODE dropped, PYTHONPYCACHEPREFIX={tmp / 'pycache'}"
            ),
            flush=True,
        )

        cc: Ccusage | None = None
        if args.no_ccusage:
            print("# ccusage: skipped (--no-ccusage)")
        else:
            cc, why = install_ccusage(args.npm_dir or tmp / "npm")
            if cc is None:
                print(f"# ccusage: SKIPPED: {why}")
            else:
                print(f"# ccusage {CCUSAGE_VERSION}: launcher {' '.join(cc.launcher)}")
                print(f"#   native binary: {cc.native[0] if cc.native else '(not found)'}", flush=True)

        t0 = time.perf_counter()
        small_cfg, small, _ = lay_out(tmp, "small", args.source)
        big_cfg, big, copies = lay_out(tmp, "big", args.source, int(args.target_mb * 1e6))
        with open(big, "rb") as f:
            lines = sum(1 for _ in f)
        print(
            f"# generated {big} ({big.stat().st_size / 1e6:.1f} MB, {lines:,} lines, {copies} copies "
            f"of {args.source.name}) in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )

        rows: list[FileRow] = []
        for label, cfg, path in (
            (f"corpus {args.source.stem[:8]}", small_cfg, small),
            (f"generated ({copies} copies)", big_cfg, big),
        ):
            tool_env = {**env, "CLAUDE_CONFIG_DIR": str(cfg)}
            tools = {"wf": Tool("wf", [str(WF), "usage", "--file", str(path), "--json"], tool_env)}
            if cc is not None:
                tools["ccusage"] = Tool("ccusage", [*cc.launcher, *CCUSAGE_ARGS], tool_env)
                if cc.native:
                    tools["ccusage native"] = Tool("ccusage native", [*cc.native, *CCUSAGE_ARGS], tool_env)
            row = FileRow(label, path, path.stat().st_size, tools)
            t0 = time.perf_counter()
            bench_file(row, tmp, reps, warmup)
            print(f"# {label}: measured in {time.perf_counter() - t0:.1f} s", flush=True)
            rows.append(row)

        print()
        print("\n".join(table(rows)))
        if cc is not None and cc.native:
            print()
            print("\n".join(native_table(rows)))
        print()

        ok = True
        wf_small = wf_totals(rows[0].tools["wf"].last)
        wf_big = wf_totals(rows[-1].tools["wf"].last)
        scaled = [x * copies for x in wf_small.as_tuple()[:4]]
        if list(wf_big.as_tuple()[:4]) == scaled and wf_big.turns == (wf_small.turns or 0) * copies:
            print(f"- generated file: wf counts exactly {copies}x the corpus file's requests and tokens")
        else:
            print(
                f"- generated file: wf's totals are NOT {copies}x the corpus file's: {wf_big} vs {wf_small}"
            )
            ok = False
        for r in rows:
            if "ccusage" not in r.tools:
                continue
            same, detail = agreement(wf_totals(r.tools["wf"].last), ccusage_totals(r.tools["ccusage"].last))
            if "ccusage native" in r.tools:
                native_same = ccusage_totals(r.tools["ccusage native"].last) == ccusage_totals(
                    r.tools["ccusage"].last
                )
                same &= native_same
                if not native_same:
                    detail += "; ccusage's launcher and native binary disagree"
            ok &= same
            print(f"- {r.label}: wf and ccusage {'agree' if same else 'DISAGREE'}: {detail}")

        goals_met = True
        if cc is not None:
            for r in rows:
                w, c = r.med("wf"), r.med("ccusage")
                assert w is not None and c is not None
                met = w / c <= MAX_RATIO
                goals_met &= met
                print(
                    f"- {r.label}: wf no slower than ccusage: {w / c:.2f}x ({w:.1f} ms vs {c:.1f} ms): "
                    f"**{'MET' if met else 'NOT MET'}**"
                )
        else:
            print("- speed goal not checked: ccusage was skipped")
        p_small, p_big = rows[0].peak_mb("wf"), rows[-1].peak_mb("wf")
        assert p_small is not None and p_big is not None
        growth = p_big / p_small - 1.0
        flat = growth <= FLAT_GROWTH
        goals_met &= flat
        print(
            f"- wf memory flat ({rows[0].size / 1e6:.1f} MB -> {rows[-1].size / 1e6:.1f} MB file, peak may "
            f"grow at most {FLAT_GROWTH:.0%}): {p_small:.1f} -> {p_big:.1f} MB ({growth:+.1%}): "
            f"**{'MET' if flat else 'NOT MET'}**"
        )
        for name in ("ccusage", "ccusage native"):
            c_small, c_big = rows[0].peak_mb(name), rows[-1].peak_mb(name)
            if c_small is not None and c_big is not None:
                print(f"- {name} peak: {c_small:.1f} -> {c_big:.1f} MB ({c_big / c_small - 1.0:+.1%})")

        slower = cc is not None and any((r.med("wf") or 0) > (r.med("ccusage") or math.inf) for r in rows)
        if args.profile or slower:
            print()
            print(f"## cProfile of `wf usage --file F --json` on {rows[-1].label} (imports included)")
            print()
            print(profile_wf(rows[-1].path, tmp, rows[-1].tools["wf"].env, tmp / "wf-usage.prof"))
        if sources_digest(pkg) != digest:
            print(f"\n# WARNING: {pkg} changed during the run; the numbers mix two versions of wf")
        if args.keep:
            print(f"\n# kept {tmp}")
        return 1 if args.strict and not (ok and goals_met) else 0
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
