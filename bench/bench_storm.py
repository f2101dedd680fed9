"""Storms on one TASKS.md: W real `wf add` processes against an editor saving every 50 ms,
in place (truncate, pause, write) or by rename, repeated R times. Counts what was lost:
acknowledged adds missing from the final file, and saves of the person that a later save
of theirs no longer found (the file shrank below what they saved).

    .venv/bin/python bench/bench_storm.py --rounds 15 [--rev REV] [--mode inplace|rename|both]
    .venv/bin/python bench/bench_storm.py --deleted 3 ...   # after a person deleted 3 tasks

The long version of tests/orch/test_hostile.py's storms; the figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import PYTHON, ROOT, export_rev, run

from tests.orch.test_hostile import EDITOR, WRITER


def storm(
    pythonpath: str, mode: str, writers: int, count: int, deleted: int = 0, lock_timeout: float = 30
) -> dict[str, int | float]:
    with tempfile.TemporaryDirectory(prefix="wf-storm-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        env = dict(os.environ, PYTHONPATH=pythonpath, WF_LOCK_TIMEOUT=f"{lock_timeout:g}")
        run(["git", "init", "-q", "-b", "main"], root)
        run([str(PYTHON), "-m", "wf", "init"], root, env=env)
        run([str(PYTHON), "-m", "wf", "add", "Before the storm"], root, env=env)
        for k in range(deleted):  # wf writes them (.wf/seen.json counts them), the person deletes them
            run([str(PYTHON), "-m", "wf", "add", f"Deleted {k}", "--id", f"deleted-{k}"], root, env=env)
        if deleted:
            text = (root / "TASKS.md").read_text()
            (root / "TASKS.md").write_text(text[: text.index("## deleted-0:")])
        go, stop = Path(tmp) / "go", Path(tmp) / "stop"
        editor = subprocess.Popen(
            [str(PYTHON), "-c", EDITOR, str(root), mode, str(stop)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp,  # not this checkout: `python -c` imports wf from its folder first, not --rev's
        )
        procs = [
            subprocess.Popen(
                [str(PYTHON), "-c", WRITER, str(root), str(n), str(count), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=tmp,
            )
            for n in range(writers)
        ]
        time.sleep(0.3)
        t0 = time.perf_counter()
        go.touch()
        acked: list[str] = []
        refused = 0
        for p in procs:
            out, err = p.communicate(timeout=300)
            acked += [line[4:] for line in out.splitlines() if line.startswith("ACK ")]
            refused += sum(1 for x in err.splitlines() if x.startswith("wf: ") and "waiting for" not in x)
            if p.returncode != 0:
                refused += 1000  # a writer died: shows up loudly
                print(err[-2000:], file=sys.stderr)
        seconds = time.perf_counter() - t0
        stop.touch()
        editor_out, _ = editor.communicate(timeout=60)
        text = (root / "TASKS.md").read_text("utf-8", errors="replace")
        words = editor_out.split()
        saves = int(words[1]) if len(words) > 1 else 0
        return {
            "acked": len(acked),
            "lost_adds": sum(1 for a in acked if f": {a}\n" not in text),
            "saves": saves,
            "seen_missing": words[2:].count("lost"),  # a save not in the file at the next save
            "lost_saves": sum(1 for k in range(saves) if f"human {k}\n" not in text),  # not in the end
            "refused": refused,
            "seconds": seconds,
        }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--count", type=int, default=3, help="adds per writer")
    ap.add_argument("--mode", choices=["inplace", "rename", "both"], default="both")
    ap.add_argument("--rev", help="measure wf as of this git revision (default: the working tree)")
    ap.add_argument("--deleted", type=int, default=0, help="tasks wf wrote that the person deletes first")
    ap.add_argument("--lock-timeout", type=float, default=30, help="WF_LOCK_TIMEOUT of the writers")
    args = ap.parse_args()
    pythonpath = str(ROOT)
    label = "working tree"
    if args.rev:
        dest = Path(tempfile.mkdtemp(prefix="wf-rev-"))
        label = export_rev(args.rev, dest / "src")[:12]
        pythonpath = f"{dest / 'src'}{os.pathsep}{ROOT}"
    modes = ["inplace", "rename"] if args.mode == "both" else [args.mode]
    print(
        f"wf at {label}; {args.writers} writers x {args.count} adds; {args.rounds} rounds per mode; "
        f"{args.deleted} task(s) deleted first; lock_timeout {args.lock_timeout:g}"
    )
    print("mode      rounds  losing  acked  lost-adds  saves  seen-missing  lost-saves  refused  median-s")
    for mode in modes:
        results = [
            storm(pythonpath, mode, args.writers, args.count, args.deleted, args.lock_timeout)
            for _ in range(args.rounds)
        ]
        losing = sum(1 for r in results if r["lost_adds"] or r["lost_saves"] or r["seen_missing"])
        med = sorted(r["seconds"] for r in results)[len(results) // 2]
        keys = ("acked", "lost_adds", "saves", "seen_missing", "lost_saves", "refused")
        tot = {k: sum(r[k] for r in results) for k in keys}
        print(
            f"{mode:8}  {args.rounds:6}  {losing:6}  {tot['acked']:5}  {tot['lost_adds']:9}  "
            f"{tot['saves']:5}  {tot['seen_missing']:12}  {tot['lost_saves']:10}  "
            f"{tot['refused']:7}  {med:8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
