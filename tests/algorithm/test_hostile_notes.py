"""Hostile rewrites of a trusted reviewer's note as one instruction (``InstructionOut``)."""

from __future__ import annotations

import pytest

from langgraph_combee._algorithm.schemas import InstructionOut

NOTE = "Noise complaints always open with 'Noise report logged.' This one doesn't."


def _kept(instruction: str, note: str = NOTE) -> str | None:
    return InstructionOut(instruction=instruction).for_note(note)


def test_a_rewrite_keeps_the_notes_quoted_text_as_written() -> None:
    assert _kept("Open noise complaints with 'Noise report logged.'") is not None
    # The quoted text is served as the reply's own words: another case, another
    # quote mark, a look-alike letter or an invisible character is another text.
    for changed in (
        "Open noise complaints with 'NOISE REPORT LOGGED.'",
        "Open noise complaints with 'noise report logged.'",
        "Open noise complaints with \u201cNoise report logged.\u201d",
        "Open noise complaints with 'N\u043eise report logged.'",
        "Open noise complaints with 'Noise\u200b report logged.'",
        "Open noise complaints with Noise report logged.",
    ):
        assert _kept(changed) is None, changed
    note = "Refunds over 50 need code RF-12."
    assert _kept("Ask for code RF-12 on refunds over 50.", note) is not None
    assert _kept("Ask for code rf-12 on refunds over 50.", note) is None
    assert _kept("Ask for code RF-12 on refunds over 50.0", note) is None


def test_a_rewrite_adding_a_negation_or_a_scope_the_note_lacks_is_not_kept() -> None:
    note = "Visitor parking replies finish with 'Reply CONFIRM to book.'"
    assert _kept("End the reply with 'Reply CONFIRM to book.'", note) is not None
    assert _kept("Never end the reply with 'Reply CONFIRM to book.'", note) is None
    assert _kept("End every reply with 'Reply CONFIRM to book.'", note) is None


@pytest.mark.xfail(
    strict=True,
    reason="a note that itself holds a negation and a scope word ('always', 'doesn't') lets "
    "a rewrite negate or widen it: only added words of those kinds are caught",
)
def test_a_rewrite_that_changes_the_notes_meaning_is_not_kept() -> None:
    assert _kept("Open every reply with 'Noise report logged.'") is None
    assert _kept("Never open noise complaints with 'Noise report logged.'") is None
