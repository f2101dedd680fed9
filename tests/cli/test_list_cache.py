"""``wf list`` answered by the files' identities (``wf.tasks.listcache``): never stale.

A list answer is stored under TASKS.md's and the archive's identities (device, inode,
size, mtime, ctime) only when those files were last changed ``MARGIN_NS`` before wf
looked (racy git's rule); these tests wait that long once each, so the entry exists.
"""

from __future__ import annotations

import marshal
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import WfRunner
from wf.tasks.listcache import MARGIN_NS

FIXTURES = Path(__file__).parent.parent / "fixtures" / "golden"
OLD_ENOUGH = MARGIN_NS / 1e9 + 0.3


@pytest.fixture
def sample(wf: WfRunner) -> WfRunner:
    shutil.copy(FIXTURES / "TASKS.md", wf.root / "TASKS.md")
    shutil.copy(FIXTURES / "DONE.md", wf.root / "DONE.md")
    return wf


def stat_entries(wf: WfRunner) -> list[Path]:
    return sorted((wf.root / ".wf" / "cache").glob("list.*.stat"))


def fake_answer(entry: Path) -> None:
    """Put another answer in ``entry``: whoever serves it prints 'planted'."""
    material, (records, _total, warnings) = marshal.loads(entry.read_bytes())
    planted = [{**records[0], "id": "planted", "title": "planted"}]
    entry.write_bytes(marshal.dumps((material, (planted, 1, warnings))))


def test_a_same_size_edit_that_keeps_the_mtime_is_seen(sample: WfRunner) -> None:
    """A person's edit that keeps the size, and a tool that sets the mtime back: the ctime
    (which nobody can set back) still tells the answer is another."""
    time.sleep(OLD_ENOUGH)
    first = sample.ok("list", "--runner")
    assert "slice: parser  opus   p2  e8" in first
    assert len(stat_entries(sample)) == 1
    assert sample.ok("list", "--runner") == first
    path = sample.root / "TASKS.md"
    st = os.stat(path)
    text = path.read_bytes()
    path.write_bytes(text.replace(b"Effort: 8", b"Effort: 1"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    out = sample.ok("list", "--runner")
    assert "parser" in out and "e8" not in out and "slice: parser" not in out


def test_the_entry_is_served_and_is_the_only_thing_that_changed(sample: WfRunner) -> None:
    """The entry is what answers a list of old files (so the tests here test it)."""
    time.sleep(OLD_ENOUGH)
    sample.ok("list", "--runner")
    (entry,) = stat_entries(sample)
    fake_answer(entry)
    assert "planted" in sample.ok("list", "--runner")


def test_an_entry_written_just_after_a_change_is_not_trusted(sample: WfRunner) -> None:
    """An entry the file system stamped within the margin of the files' last change may
    have been written in the tick of a change it cannot see (same size, same times): it
    is not used, the answer comes from the files' bytes."""
    time.sleep(OLD_ENOUGH)
    first = sample.ok("list", "--runner")
    (entry,) = stat_entries(sample)
    fake_answer(entry)
    changed = os.stat(sample.root / "TASKS.md").st_ctime_ns
    os.utime(entry, ns=(changed + 1_000_000_000, changed + 1_000_000_000))
    assert sample.ok("list", "--runner") == first


def test_files_changed_a_moment_ago_are_keyed_by_their_bytes(sample: WfRunner) -> None:
    """No entry by identities for files changed within the margin before wf looked: a
    second write in the same tick of the file system's clock would keep them all."""
    first = sample.ok("list", "--runner")
    assert sample.ok("list", "--runner") == first
    assert stat_entries(sample) == []
    assert list((sample.root / ".wf" / "cache").glob("list.*.answer"))
