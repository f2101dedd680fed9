"""Machines racing for one task: R rounds of M clones, each with its own HOME and state
folders, claiming task r<i> at once with ``wf status r<i> progress WHO`` (each a real
``python -m wf`` process) against a bare repository served by git daemon on loopback
(or file://). Counts the rounds with exactly one winner, with none, with two or more
(double claims), refs that do not name the winner, and losers that wrote their claim.

    .venv/bin/python bench/bench_claims.py --rounds 200 [--machines 3] [--remote daemon|file]

The long version of tests/trees/test_claims_race.py; the figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.trees.test_claims_race import execd, race


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--machines", type=int, default=3)
    ap.add_argument("--remote", choices=["daemon", "file"], default="daemon")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wf-bench-claims-") as tmp:
        began = time.monotonic()
        fig = race(Path(tmp), args.rounds, execd, count=args.machines, daemon=args.remote == "daemon")
        took = time.monotonic() - began
    head = ["remote", "machines", "rounds", "one winner", "no winner", "double claims", "ref wrong"]
    print("| " + " | ".join([*head, "loser wrote", "s/round"]) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cells = [args.remote, args.machines, fig.rounds, fig.one_winner, fig.no_winner, fig.double]
    cells += [fig.wrong_ref, fig.loser_wrote, f"{took / max(fig.rounds, 1):.2f}"]
    print("| " + " | ".join(str(c) for c in cells) + " |")
    print("wins: " + ", ".join(f"{k} {v}" for k, v in sorted(fig.wins.items())))
    for e in fig.errors[:20]:
        print("error:", e)
    return 0 if fig.double == 0 and not fig.errors and fig.one_winner == fig.rounds else 1


if __name__ == "__main__":
    raise SystemExit(main())
