"""Properties of the by-task three-way merge (wf/tasks/merge3.py) that wf sync relies on:
a side that changed nothing takes the other's bytes; edits of different tasks on two
sides all survive, in either order of merging, with no conflict and no markers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wf.tasks.merge3 import merge_tasks, split_doc

TIMES = (1000.0, 2000.0)


def backlog(n: int) -> str:
    return "# Tasks\n\n" + "".join(
        f"## t{i}: Task {i}\nModel: sonnet\nDone: true\n\nBody {i}.\n\n" for i in range(n)
    )


def change(text: str, i: int, how: int, side: str) -> str:
    block = f"## t{i}: Task {i}\nModel: sonnet\nDone: true\n\nBody {i}.\n"
    new = [
        f"## t{i}: Task {i} ({side})\nModel: sonnet\nDone: true\n\nBody {i}.\n",
        f"## t{i}: Task {i}\nModel: sonnet\nDone: true\nStatus: in progress: {side} since 2026-01-01T10:00Z\n\nBody {i}.\n",
        f"## t{i}: Task {i}\nModel: sonnet\nDone: true\n\nBody {i}, rewritten on {side}.\n",
        f"## t{i}: Task {i}\nModel: sonnet\nPrio: 0\nDone: true\nNote: from {side}\n\nBody {i}.\n",
    ][how]
    return text.replace(block, new)


edits = st.dictionaries(st.integers(0, 7), st.integers(0, 3), max_size=8)


@settings(max_examples=200, deadline=None)
@given(edits, st.sampled_from([True, False]))
def test_edits_of_different_tasks_on_two_sides_all_survive(chosen: dict[int, int], split: bool) -> None:
    base = backlog(8)
    ours, theirs = base, base
    for n, (i, how) in enumerate(sorted(chosen.items())):
        if (n % 2 == 0) == split:
            ours = change(ours, i, how, "ours")
        else:
            theirs = change(theirs, i, how, "theirs")
    ours += "## o1: Added here\nModel: haiku\nDone: true\n"
    m = merge_tasks(base, ours, theirs, times=TIMES)
    assert m.conflicts == ()
    flipped = merge_tasks(base, theirs, ours, times=TIMES[::-1])
    assert flipped.conflicts == ()
    merged, other = split_doc(m.text, "TASKS.md"), split_doc(flipped.text, "TASKS.md")
    assert set(merged.blocks) == set(other.blocks) == {f"t{i}" for i in range(8)} | {"o1"}
    for tid, block in merged.blocks.items():
        assert block.trimmed() == other.blocks[tid].trimmed(), tid
    for side in (ours, theirs):
        for tid, block in split_doc(side, "TASKS.md").blocks.items():
            base_block = split_doc(base, "TASKS.md").blocks.get(tid)
            if block != base_block:  # what a side changed is in the merge, as it wrote it
                assert merged.blocks[tid].trimmed() == block.trimmed(), tid
    assert "<<<<<<<" not in m.text and ">>>>>>>" not in m.text


@settings(max_examples=100, deadline=None)
@given(edits)
def test_a_side_that_changed_nothing_takes_the_others_bytes(chosen: dict[int, int]) -> None:
    base = backlog(8)
    other = base
    for i, how in chosen.items():
        other = change(other, i, how, "x")
    assert merge_tasks(base, base, other, times=TIMES).text == other
    assert merge_tasks(base, other, base, times=TIMES).text == other
    assert merge_tasks(base, other, other, times=TIMES).text == other
