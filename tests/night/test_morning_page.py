"""The morning page: one self-contained HTML file per batch next to its markdown summary,
made from the same typed rows; through a real detached batch with the scripted worker."""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import git
from tests.night.test_batch import Batch, b  # noqa: F401 - the fixture
from tests.orch.test_orch import lanes_toml, task

FAILS = '`python3 -c "raise SystemExit(1)"`'
EVIL = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>?"
VOID = {"meta", "br", "hr", "img", "input", "link"}


class Strict(HTMLParser):
    """Every element closed in order (void ones excepted); no script, no outside resource."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.seen: list[str] = []
        self.text: list[str] = []
        self.section: str | None = None
        self.sections: dict[str, list[str]] = {}
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag not in ("script", "iframe", "object", "embed", "img", "link"), tag
        self.attrs += attrs
        self.seen.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert tag not in VOID, f"</{tag}>"
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.stack and self.stack[-1] == "h2":
            self.section = data
            self.sections[data] = []
        elif self.section is not None:
            self.sections[self.section].append(data)


def parse(page: str) -> Strict:
    p = Strict()
    p.feed(page)
    p.close()
    assert p.stack == [], f"unclosed: {p.stack}"
    return p


def cost_writer(root: Path) -> str:
    """A Done check that writes a cost line for its task, as post's cost record would."""
    prog = root.parent / "cost.py"
    prog.write_text(
        "import sys\n"
        f"with open({str(root / 'out' / 'wf-cost.log')!r}, 'a') as f:\n"
        "    f.write(f'ts=2026-12-01T00:00:00Z id={sys.argv[1]} usd={sys.argv[2]}\\n')\n"
    )
    return str(prog)


@pytest.mark.timeout(180)
def test_the_page_of_a_batch_parses_and_holds_every_task_of_its_summary(b: Batch) -> None:
    cost = cost_writer(b.root)
    b.setup(
        lanes_toml("a", "c"),
        task("a1", "a", "write a1.txt x", done=f"`{sys.executable} {cost} a1 0.40`", extra="Prio: 1")
        + task("h1", "a", "write h1.txt x", done=FAILS, extra="Prio: 2")
        + task("q1", "a", "awaiting Blue or green?", extra="Prio: 3")
        + task("c1", "c", "write c1.txt x", done=f"`{sys.executable} {cost} c1 0.10`"),
    )
    tasks = b.root / "TASKS.md"
    tasks.write_text(tasks.read_text().replace("## a1: Task a1", f"## a1: {EVIL} & co"))
    git(b.root, "commit", "-qam", "a title a person wrote")
    assert b.batch("4").returncode == 0
    st = b.wait_ended()
    opened = b.batch("--status", "--open")
    assert opened.returncode == 0, opened.stderr
    path = Path(opened.stdout.strip())
    assert str(path) == st["page"] == str(b.root / "out" / f"wf-batch-{st['stamp']}.html")
    assert path.with_suffix(".md") == Path(st["summary"])  # next to the summary
    page = path.read_text("utf-8")
    p = parse(page)
    # every task of the summary, from its typed rows
    rows = [
        json.loads(x)
        for x in (b.root / ".wf" / "batch" / f"{st['stamp']}.tasks.jsonl").read_text().splitlines()
    ]
    summary_ids = [x.split()[3] for x in b.summary(st) if " commit=" in x]
    assert sorted(r["id"] for r in rows) == sorted(summary_ids) == ["a1", "c1", "h1", "q1"]
    every = " ".join(p.sections["Every task"])
    assert all(tid in every for tid in summary_ids)
    # merged, with the commit; what waits for whom and why
    merged = " ".join(p.sections["Merged"])
    done = {r["id"]: r["commit"] for r in rows if r["outcome"] == "done"}
    assert set(done) == {"a1", "c1"} and all(done[t] in merged and t in merged for t in done)
    assert "h1" not in merged and "q1" not in merged
    assert all(git(b.root, "cat-file", "-t", sha).strip() == "commit" for sha in done.values())
    waiting = " ".join(p.sections["Waiting"])
    assert "q1" in waiting and "Blue or green?" in waiting and "h1" in waiting and "handback" in waiting
    assert "a1" not in waiting
    # cost per task and per lane as bars; no forecast yet; no usage window met
    per_task = " ".join(p.sections["Cost per task"])
    assert "$0.40" in per_task and "$0.10" in per_task
    assert "$0.40" in " ".join(p.sections["Cost per lane"])
    bars = [v for k, v in p.attrs if k == "style" and v and v.startswith("width:")]
    assert "width:100.0%" in bars and "width:25.0%" in bars
    assert " ".join(p.sections["Forecast against actual"]).strip() == "no forecast"
    assert "unknown" in " ".join(p.sections["Usage windows"])
    # a phone, nothing from elsewhere
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert all("http" not in (v or "") for _, v in p.attrs) and "url(" not in page and "@import" not in page


@pytest.mark.timeout(180)
def test_a_title_is_escaped_never_markup(b: Batch) -> None:
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", extra="Prio: 1")
        + task("q1", "a", f"awaiting {IMG}", extra="Prio: 2"),
    )
    tasks = b.root / "TASKS.md"
    tasks.write_text(tasks.read_text().replace("## a1: Task a1", f"## a1: {EVIL}"))
    git(b.root, "commit", "-qam", "a title a person wrote")
    assert b.batch("2").returncode == 0
    st = b.wait_ended()
    page = Path(st["page"]).read_text("utf-8")
    assert EVIL not in page and IMG not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    p = parse(page)  # no <script> or <img> element: Strict refuses one
    assert EVIL in "".join(p.text)  # shown as the words it is
    assert IMG in " ".join(p.sections["Waiting"])  # a worker's question, as words


@pytest.mark.timeout(180)
def test_forecast_rows_show_beside_the_actual_and_open_writes_the_page_afresh(b: Batch) -> None:
    """A row that carries a forecast (the forecast's field) is shown against its actual;
    --open writes the page from the rows as they are now."""
    cost = cost_writer(b.root)
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x", done=f"`{sys.executable} {cost} a1 0.50`"))
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    rows_file = b.root / ".wf" / "batch" / f"{st['stamp']}.tasks.jsonl"
    row = json.loads(rows_file.read_text())
    rows_file.write_text(json.dumps({**row, "forecast": 0.25}) + "\n")
    opened = b.batch("--status", "--open")
    assert opened.returncode == 0, opened.stderr
    p = parse(Path(opened.stdout.strip()).read_text("utf-8"))
    assert [x.strip() for x in p.sections["Forecast against actual"] if x.strip()] == [
        "task",
        "forecast",
        "actual",
        "a1",
        "Task a1",
        "$0.25",
        "$0.50",
    ]


def test_open_without_a_batch_and_open_without_status(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    r = b.batch("--status", "--open")
    assert r.returncode == 1 and "no batch has run here" in r.stderr and "Traceback" not in r.stderr
    r = b.batch("--open")
    assert r.returncode == 2 and "give N, or --status, or --stop" in r.stderr
    r = b.batch("1", "--open")
    assert r.returncode == 2 and "--open goes with --status alone" in r.stderr
    assert not (b.root / "out").exists()  # no batch started
    r = b.batch("--status", "--open", "--json")
    assert r.returncode == 2 and "--open goes with --status alone" in r.stderr


@pytest.mark.timeout(180)
def test_the_page_is_written_while_the_batch_runs(b: Batch) -> None:
    """The page follows the summary line by line, not only at the footer."""
    b.setup(
        lanes_toml("a"),
        task("a1", "a", "write a1.txt x", extra="Prio: 1") + task("a2", "a", "hang", extra="Prio: 2"),
    )
    assert b.batch("2").returncode == 0
    st = b.status()
    page = Path(st["page"])
    b.wait_for(lambda: page.exists() and "a1" in " ".join(parse(page.read_text("utf-8")).sections["Merged"]))
    assert b.status()["alive"] is True  # a2 still hangs: no footer yet
    p = parse(page.read_text("utf-8"))
    assert "running" in "".join(p.text) and "ended:" not in "".join(p.text)


@pytest.mark.timeout(180)
def test_a_page_that_cannot_be_written_costs_the_summary_nothing(b: Batch) -> None:
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    page = Path(st["page"])
    page.unlink()
    page.mkdir()  # where the page goes, a folder: it cannot be written
    before = b.summary(st)
    r = b.batch("--status", "--open")
    assert r.returncode == 1 and "the morning page of batch" in r.stderr and "Traceback" not in r.stderr
    after = b.summary(st)
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1 and after[-1].startswith(
        "- note: the morning page cannot be written: "
    )


@pytest.mark.timeout(180)
def test_an_unknown_cost_is_never_shown_as_a_complete_sum_and_the_marks_stay(b: Batch) -> None:
    """a2 left no cost line, c1's cost leaves out an unpriced model: the total and lane a's
    bar say `+ ?`, c1 keeps the summary's `?` mark, and the legend says what the marks mean."""
    prog = b.root.parent / "cost.py"
    prog.write_text(
        "import sys\n"
        f"with open({str(b.root / 'out' / 'wf-cost.log')!r}, 'a') as f:\n"
        "    f.write(f'ts=2026-12-01T00:00:00Z id={sys.argv[1]} usd={sys.argv[2]} ' + ' '.join(sys.argv[3:]) + '\\n')\n"
    )
    b.setup(
        lanes_toml("a", "c"),
        task("a1", "a", "write a1.txt x", done=f"`{sys.executable} {prog} a1 0.40`", extra="Prio: 1")
        + task("a2", "a", "write a2.txt x", extra="Prio: 2")
        + task("c1", "c", "write c1.txt x", done=f"`{sys.executable} {prog} c1 0.10 unpriced=mc cost_source=unpriced`"),
    )  # fmt: skip
    assert b.batch("3").returncode == 0
    st = b.wait_ended()
    summary = "\n".join(b.summary(st))
    assert " a2 done commit=" in summary and "$?" in summary and "$0.10?" in summary  # the summary's marks
    page = Path(st["page"]).read_text("utf-8")
    p = parse(page)
    assert "total $0.50? + ?" in " ".join(p.text), " ".join(p.text)[:400]
    lanes = [x.strip() for x in p.sections["Cost per lane"] if x.strip()]
    assert lanes[:4] == ["cost", "a", "$0.40 + ?", "c"] and lanes[4] == "$0.10?", lanes
    assert any(x.startswith("? leaves out unpriced model(s)") for x in lanes), lanes
    tasks = [x.strip() for x in p.sections["Cost per task"] if x.strip()]
    assert "$?" in tasks and "$0.10?" in tasks and "$0.40" in tasks, tasks


@pytest.mark.timeout(180)
def test_done_gate_red_is_done_on_the_page_and_in_wf_top(b: Batch) -> None:
    """A task merged while the gate was red (outcome done-gate-red) archived: the page
    and wf top count it done (Outcome.done), as the summary's footer does."""
    b.setup(lanes_toml("a"), task("a1", "a", "write a1.txt x"))
    assert b.batch("1").returncode == 0
    st = b.wait_ended()
    rows_file = b.root / ".wf" / "batch" / f"{st['stamp']}.tasks.jsonl"
    row = json.loads(rows_file.read_text())
    rows_file.write_text(json.dumps({**row, "outcome": "done-gate-red"}) + "\n")  # as that post leaves it
    opened = b.batch("--status", "--open")
    assert opened.returncode == 0, opened.stderr
    p = parse(Path(opened.stdout.strip()).read_text("utf-8"))
    assert "1 of 1 task(s) done" in " ".join(p.text)
    assert "a1" in " ".join(p.sections["Merged"])
    top = b.wf.ok("top", "--json")
    assert json.loads(top)["batch"]["done"] == 1
