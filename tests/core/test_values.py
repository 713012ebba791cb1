"""Words in capitals for emphasis, and apostrophes inside words, are not values.

A larger model (or the full profile) writes rules such as "ALWAYS answer FIN-7Q"
or "you MUST call lookup_order FIRST". Read as values, "ALWAYS" and "MUST" had to
appear in an answer for it to follow the rule, so no served run ever credited or
discredited such a rule, and "ALWAYS answer FIN-7Q" and "answer FIN-7Q" were two
actions (a false conflict). "The customer's order, don't ..." opened a quoted
value at the first apostrophe and closed it at the second.
"""

from __future__ import annotations

import pytest

from langgraph_combee import Feedback, Trace
from langgraph_combee._core.dedup import deduplicate
from langgraph_combee._core.values import asked_and_refused, values
from langgraph_combee._rules import rules
from langgraph_combee.types import Add, Bullet, Playbook


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ALWAYS answer FIN-7Q.", {"FIN-7Q"}),
        ("You MUST call lookup_order FIRST, then open_case(queue='LOG-8W').", {"LOG-8W"}),
        ("IMPORTANT: answer PAY-2D ONLY.", {"PAY-2D"}),
        ("NOTE - route to SEC-4X, NOT to GENERAL.", {"SEC-4X", "GENERAL"}),
        # An answer may be a word in capitals: these stay values.
        ("answer YES", {"YES"}),
        ("When the operating theatre is asked for, answer OR.", {"OR"}),
        ("When the disk is nearly full, answer WARNING.", {"WARNING"}),
        ("answer CRITICAL, not WARNING", {"CRITICAL", "WARNING"}),
        ("WARNING: never answer INFO for a full disk", {"INFO"}),
        ("answer NONE when nothing applies", {"NONE"}),
        ("route to GENERAL", {"GENERAL"}),
        # Quoted, an emphasis word is a value.
        ("answer 'ALWAYS'", {"ALWAYS"}),
        # An apostrophe inside a word opens no quoted value.
        ("When the customer's parcel is late, don't answer FIN-7Q.", {"FIN-7Q"}),
        ("When it's the courier's fault, answer 'LOG-8W'.", {"LOG-8W"}),
        ("answer 'O'Brien desk'", {"O'Brien desk"}),
        ("Quand l'état de la commande est inconnu, répondre 'LOG-8W'.", {"LOG-8W"}),
        # Review: where the word is what the action gives, it is a value.
        ("schedule_pickup(queue='LOG-8W', slot=BEFORE)", {"LOG-8W", "BEFORE"}),
        ("set_reminder(case='CASE-1', repeat=ALWAYS)", {"CASE-1", "ALWAYS"}),
        ("When asked how often, answer NEVER.", {"NEVER"}),
        ("answer SEC-4X BEFORE PAY-2D", {"SEC-4X", "PAY-2D"}),
        ("When the disk is nearly full, answer WARNING!", {"WARNING"}),
        ("classify as CRITICAL: page the on-call engineer.", {"CRITICAL"}),
        ("answer WARNING \u2014 page the on-call engineer.", {"WARNING"}),
        # ... and emphasis in other dress is not.
        ("**IMPORTANT**: answer FIN-7Q", {"FIN-7Q"}),
        ("You CANNOT skip it: answer FIN-7Q", {"FIN-7Q"}),
        ("answer FIN-7Q and NOTHING else", {"FIN-7Q"}),
        ("answer FIN-7Q ONLY.", {"FIN-7Q"}),
        ("call lookup_order FIRST.", set()),
    ],
)
def test_values(text: str, expected: set[str]) -> None:
    assert values(text) == expected


def test_a_negation_in_capitals_still_refuses() -> None:
    assert asked_and_refused("answer FIN-7Q, NOT PAY-2D") == ({"FIN-7Q"}, {"PAY-2D"})
    assert asked_and_refused("NEVER answer FIN-7Q") == (frozenset(), {"FIN-7Q"})
    assert asked_and_refused("You CANNOT answer FIN-7Q") == (frozenset(), {"FIN-7Q"})
    assert asked_and_refused("ALWAYS answer FIN-7Q") == ({"FIN-7Q"}, frozenset())


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("ALWAYS answer FIN-7Q", "answer FIN-7Q"),
        ("you MUST answer FIN-7Q", "answer FIN-7Q"),
        ("answer FIN-7Q ONLY", "answer FIN-7Q"),
    ],
)
def test_emphasis_does_not_make_another_action(a: str, b: str) -> None:
    assert rules.same_action(a, b)
    # One action for one situation: no conflict to settle, one rule.
    ops = [
        Add(section="others", content=f"When refund, {a}.", sources=["t1"]),
        Add(section="others", content=f"When refund, {b}.", sources=["t2"]),
    ]
    settled, found = rules.settle_batch(ops)
    assert found == []
    assert len([op for op in rules.fold_actions(settled) if isinstance(op, Add)]) == 1


def test_an_emphasised_rule_is_weighed_by_the_runs_it_was_served() -> None:
    rule = "When a refund is asked for, ALWAYS answer FIN-7Q."
    playbook = Playbook().apply([Add(section="others", content=rule)], version=1).playbook
    (bullet,) = playbook.bullets

    def served(answer: str, correct: bool) -> Trace:
        feedback = Feedback(correct=correct, ground_truth="FIN-7Q" if correct else "PAY-2D")
        return Trace(input="I want a refund", output=answer, feedback=feedback, prompt_version=1)

    tags, _ = rules.served_evidence(playbook, [served("FIN-7Q", True), served("FIN-7Q", False)])
    assert [(t.id, t.helpful, t.harmful) for t in tags] == [(bullet.id, 1, 1)]
    assert rules.followed("ALWAYS answer FIN-7Q", "FIN-7Q") is True


def test_lexical_dedup_folds_an_emphasised_copy() -> None:
    plain = "When a customer asks for a refund of a damaged or late order, answer FIN-7Q."
    loud = "When a customer asks for a refund of a damaged or late order, ALWAYS answer FIN-7Q."
    playbook = Playbook(
        bullets=[
            Bullet(id=f"b{i}", section="others", content=c, created_version=i)
            for i, c in enumerate((plain, loud))
        ]
    )
    assert [(m.kept_id, m.dropped_id) for m in deduplicate(playbook).merges] == [("b0", "b1")]


def test_emphasis_is_part_of_an_actions_shape_not_a_slot() -> None:
    from langgraph_combee._core.values import slots

    assert slots("ALWAYS answer PAY-2D") == ("always answer {}", ("pay-2d",))
    assert slots("ALWAYS answer PAY-2D")[0] == slots("ALWAYS answer SEC-9D")[0]  # type: ignore[index]
    assert slots("answer 'Yes'") == ("answer {}", ("yes",))
    assert slots("ALWAYS be polite") is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "schedule_pickup(queue='LOG-8W', slot=BEFORE)",
            "schedule_pickup(queue='LOG-8W', slot=AFTER)",
        ),
        ("answer NEVER", "answer SOMETIMES"),
        (
            "answer WARNING \u2014 page the on-call engineer",
            "answer CRITICAL \u2014 page the on-call engineer",
        ),
    ],
)
def test_a_value_in_capitals_still_tells_actions_apart(a: str, b: str) -> None:
    assert not rules.same_action(a, b)
    assert rules.followed(a, b) is False


def test_an_answer_giving_a_refused_value_did_not_follow_the_rule() -> None:
    # Review: followed() read every value as asked for, so "NEVER answer FIN-7Q" was
    # followed by FIN-7Q, and a run that disobeyed it credited or blamed it.
    assert rules.followed("NEVER answer FIN-7Q", "FIN-7Q") is False
    assert rules.followed("never answer FIN-7Q", "PAY-2D") is None  # asks for nothing
    assert rules.followed("answer PAY-2D, NOT FIN-7Q", "PAY-2D") is True
    assert rules.followed("answer PAY-2D, NOT FIN-7Q", "PAY-2D or FIN-7Q") is False
    assert rules.followed("answer PAY-2D, not LOG", "PAY-2D, see LOG-8W") is True
    rule = "When a refund is asked for, NEVER answer FIN-7Q."
    playbook = Playbook().apply([Add(section="others", content=rule)], version=1).playbook

    def served(answer: str, correct: bool) -> Trace:
        feedback = Feedback(correct=correct, ground_truth="PAY-2D")
        return Trace(input="I want a refund", output=answer, feedback=feedback, prompt_version=1)

    runs = [served("FIN-7Q", True), served("FIN-7Q", False), served("PAY-2D", True)]
    assert rules.served_evidence(playbook, runs)[0] == []


def test_semantic_dedup_keeps_labels_in_capitals_apart() -> None:
    class Same:
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    playbook = Playbook(
        bullets=[
            Bullet(id=f"b{i}", section="others", content=c, created_version=i)
            for i, c in enumerate(
                (
                    "When asked how often they smoke at parties, answer NEVER.",
                    "When asked how often they smoke at parties, answer SOMETIMES.",
                )
            )
        ]
    )
    assert deduplicate(playbook, embedder=Same()).merges == ()
