"""The text form of a rule and the agent's dense form of rules that answer a value."""

from __future__ import annotations

import pytest

from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.rule_text import compact, parse_rule


@pytest.mark.parametrize(
    ("rule", "dense"),
    [
        ("When password reset or locked out, answer SEC-4X.", "password reset, locked out: SEC-4X"),
        ("When refund; money back, answer 'FIN-7Q'.", "refund, money back: FIN-7Q"),
        ("When overdue fines, answer coral.", "overdue fines: coral"),
        ("if parcel late, ANSWER LOG-5T", "parcel late: LOG-5T"),
    ],
)
def test_a_rule_that_answers_a_value_reads_densely(rule: str, dense: str) -> None:
    assert compact(rule) == dense


@pytest.mark.parametrize(
    "rule",
    [
        "When booking a flight, pass the date as YYYYMMDD.",  # not an answer
        "When a refund is asked, call lookup_order first.",
        "Always answer in English.",  # not a rule
        "When time: late, answer LOG-5T.",  # a colon would blur where the answer starts
        f"When long, answer {'x' * 80}.",  # a sentence, not a value
        "When two lines, answer A\nB.",
        "When refunds, answer .",
    ],
)
def test_any_other_rule_keeps_its_words(rule: str) -> None:
    assert compact(rule) is None


def test_the_agent_reads_dense_lines_and_a_reviewer_the_rule_as_learned() -> None:
    pb = (
        Playbook()
        .apply(
            [
                Add(section="others", content="When refund or money back, answer FIN-7Q."),
                Add(section="others", content="When a refund is asked, call lookup_order first."),
            ],
            version=1,
        )
        .playbook
    )
    agent = pb.render()
    assert "- refund, money back: FIN-7Q" in agent
    assert "- When a refund is asked, call lookup_order first." in agent
    reviewer = pb.render(ids=True)
    assert f"- [{pb.bullets[0].id}] When refund or money back, answer FIN-7Q." in reviewer
    # The learner still reads and writes the "When" form.
    assert parse_rule(pb.bullets[0].content) is not None
