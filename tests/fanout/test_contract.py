"""The return contract's reader and check (wf/fanout/contract.py)."""

from __future__ import annotations

from wf.fanout import contract
from wf.fanout.contract import Invalid

GOOD = """I looked at the parser.

# result
Conclusion: the parser is fine.
Files: wf/tasks/parse.py
Open items: none
Verification: ran pytest tests/tasks, 40 passed
"""


def test_a_full_answer_keeps_the_contract() -> None:
    v = contract.check(GOOD)
    assert v.ok and v.why is None
    r = contract.parse(GOOD)
    assert r.heading and r.section("open items") == "none"
    assert r.sections["Files"] == "wf/tasks/parse.py"


def test_each_way_of_breaking_it_has_its_reason() -> None:
    assert contract.check(None).why is Invalid.NO_ANSWER
    assert contract.check(GOOD, fallback=True).why is Invalid.FALLBACK
    assert contract.check("  \n").why is Invalid.EMPTY
    no_verif = GOOD.replace("Verification: ran pytest tests/tasks, 40 passed\n", "")
    v = contract.check(no_verif)
    assert (v.why, v.sections) == (Invalid.MISSING, ("Verification",))
    assert v.reason() == "missing sections: Verification"
    blank = GOOD.replace("Conclusion: the parser is fine.", "Conclusion:")
    assert contract.check(blank).why is Invalid.BLANK


def test_markdown_dressing_and_multiline_sections() -> None:
    text = "# Result\n**Conclusion:** two lines\nof text\n- **Files**: a.py\n  b.py\nOpen Items: none\nVerification: tests\nNote: kept inside\n"
    r = contract.parse(text)
    assert r.sections["Conclusion"] == "two lines\nof text"
    assert r.sections["Files"] == "a.py\n  b.py"
    assert r.sections["Verification"] == "tests\nNote: kept inside"
    assert contract.check(text).ok


def test_only_the_last_result_block_counts_and_required_sections_are_the_manifests() -> None:
    text = "# result\nConclusion: draft\n\n# result\nConclusion: final\nRisk: low\n"
    assert contract.parse(text).sections == {"Conclusion": "final\nRisk: low"}  # Risk: not a known section
    assert contract.check(text, ("Conclusion", "Risk")).ok
    assert contract.check(text).why is Invalid.MISSING


def test_the_instructions_name_every_required_section() -> None:
    text = contract.instructions(("Conclusion", "Risk"))
    assert "# result" in text and "Conclusion:" in text and "Risk:" in text
    assert "Verification" not in text


def test_a_section_that_only_repeats_its_hint_is_blank() -> None:
    echoed = contract.instructions()
    v = contract.check(echoed)
    assert (v.why, v.sections) == (Invalid.BLANK, contract.SECTIONS)
    assert contract.check(GOOD.replace("none", "<none yet> but see a.py")).ok
