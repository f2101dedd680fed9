"""Kills of ``wf merge`` on two machines racing through one shared remote (a bare
repository served by git daemon on loopback): each machine merges its task branches,
every first run is killed (``kill -9`` of its process group, git included) at a random
moment and run again until it finishes. Counts what the shared main lost.

    .venv/bin/python bench/bench_xmerge_kills.py --rounds 10 --per-machine 3 [--seed N]

The long version of tests/trees/test_cross_merge_kills.py; the figures go in
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.trees.test_cross_merge_kills import kill_rounds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-machine", type=int, default=3)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wf-xmerge-kills-") as tmp:
        figures = kill_rounds(Path(tmp), args.rounds, args.per_machine, args.seed)
    print(f"seed {args.seed}, {args.rounds} rounds of 2 machines x {args.per_machine} merges")
    for f in dataclasses.fields(figures):
        if f.name != "notes":
            print(f"  {f.name:15} {getattr(figures, f.name)}")
    for note in figures.notes:
        print(f"  note: {note}")
    print(f"lost: {figures.lost()}")
    return 1 if figures.lost() else 0


if __name__ == "__main__":
    sys.exit(main())
