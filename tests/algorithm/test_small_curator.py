"""The small-model curator adopts every rule of its group but those it leaves out.

Asked to pick rules, the 1.5B's single naive curator call over 48 rules left 11
rules for 24 codes. It is now asked what to leave out, and only about the rules
that give another action for a situation another rule of the group speaks about
(asked about whole groups, it left out nothing in eight grid rows); a drop that would leave a
situation without a rule, or less than half of the rules shown, is not honoured.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import AlgorithmSettings, Combee
from langgraph_combee._algorithm.roles import SmallRoles
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Reflection
from langgraph_combee._llm import prompts
from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller
from langgraph_combee.testing import FunctionChatModel
from tests.helpers import hello_tickets

GROUP = [
    # Two rules for refunds, two for late parcels, one of its own: only the first
    # four speak about a situation another rule speaks about.
    ("R1", Reflection(trace_id="t1", key_insight="When refund, answer FIN-7Q.")),
    ("R2", Reflection(trace_id="t2", key_insight="When refund, answer PAY-2D.")),
    ("R3", Reflection(trace_id="t3", key_insight="When parcel late, answer LOG-5T.")),
    ("R4", Reflection(trace_id="t4", key_insight="When parcel late, answer LOG-8W.")),
    ("R5", Reflection(trace_id="t5", key_insight="When locked out, answer SEC-4X.")),
]
ALL = [r.key_insight for _, r in GROUP]


def _curate(
    reply: Callable[[list[BaseMessage]], str], group: list[tuple[str, Reflection]] = GROUP
) -> list[str]:
    caller = LLMCaller(FunctionChatModel(reply), CallSettings(max_attempts=1, backoff_initial=0))
    ops = asyncio.run(
        SmallRoles().curate(
            caller, "combee.propose", Playbook(), group, CallStats(), token_budget=None
        )
    )
    assert ops is not None
    return [op.content for op in ops if isinstance(op, Add)]


def _without(*gone: str) -> list[str]:
    return [rule for rule in ALL if rule not in gone]


def test_every_rule_is_adopted_but_the_ones_left_out() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": ["R4"]}))
    assert adopted == _without("When parcel late, answer LOG-8W.")


def test_the_curator_sees_only_the_rules_that_share_a_situation() -> None:
    bodies: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        bodies.append(str(messages[-1].content))
        return json.dumps({"drop": ["R5"]})  # not shown: not honoured

    assert _curate(reply) == ALL
    assert len(bodies) == 1
    assert "PAY-2D" in bodies[0] and "LOG-8W" in bodies[0]
    assert "SEC-4X" not in bodies[0]


def test_a_group_whose_rules_share_no_situation_makes_no_call() -> None:
    calls: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        calls.append(str(messages[-1].content))
        return json.dumps({"drop": ["R1"]})

    apart = [GROUP[0], GROUP[2], GROUP[4]]
    assert _curate(reply, group=apart) == [r.key_insight for _, r in apart]
    assert calls == []


def test_rules_with_one_action_for_one_situation_make_no_call() -> None:
    """Nothing to decide between them: the rules layer folds them into one rule."""
    calls: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        calls.append(str(messages[-1].content))
        return json.dumps({"drop": ["R2"]})

    alike = [
        ("R1", Reflection(trace_id="t1", key_insight="When refund, answer FIN-7Q.")),
        ("R2", Reflection(trace_id="t2", key_insight="When refund or money back, answer FIN-7Q.")),
        ("R3", Reflection(trace_id="t3", key_insight="When locked out, answer SEC-4X.")),
    ]
    assert _curate(reply, group=alike) == [r.key_insight for _, r in alike]
    assert calls == []
    # A third rule with another action for the situation makes it a conflict: all
    # three rules about it are shown.
    # R2, left out, keeps the part of its situation no rule of another action has.
    rival = ("R4", Reflection(trace_id="t4", key_insight="When refund, answer PAY-2D."))
    assert _curate(reply, group=[*alike, rival]) == [
        "When refund, answer FIN-7Q.",
        "When money back, answer FIN-7Q.",
        "When locked out, answer SEC-4X.",
        "When refund, answer PAY-2D.",
    ]
    assert len(calls) == 1
    assert "FIN-7Q" in calls[0] and "PAY-2D" in calls[0] and "money back" in calls[0]
    assert "SEC-4X" not in calls[0]


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 0, 2), (2, 0, 1), (0, 2, 1)])
def test_a_conflict_through_a_chain_of_situations_is_asked_in_any_order(
    order: tuple[int, int, int],
) -> None:
    """Review: grouped by their first rule, "refund" and "refund or late parcel"
    (one action) made a group without the LOG-8W rule for "late parcel", so the
    conflict was never asked about, in one order of the rules of three."""
    chain = [
        ("R1", Reflection(trace_id="t1", key_insight="When refund, answer FIN-7Q.")),
        (
            "R2",
            Reflection(trace_id="t2", key_insight="When refund or late parcel, answer FIN-7Q."),
        ),
        ("R3", Reflection(trace_id="t3", key_insight="When late parcel, answer LOG-8W.")),
    ]
    calls: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        calls.append(str(messages[-1].content))
        return json.dumps({"drop": []})

    _curate(reply, group=[chain[i] for i in order])
    assert len(calls) == 1
    assert all(code in calls[0] for code in ("FIN-7Q", "LOG-8W", "refund or late parcel"))


def test_a_long_chain_of_situations_is_shown_as_groups_around_one_rule() -> None:
    """Review: with a playbook's worth of rules, shared words chained 170 of 200
    rules into one group, one prompt of 170 rules for a small model."""
    from langgraph_combee._algorithm.roles import MAX_CHAIN, _same_situation

    # "a0 or a1", "a1 or a2", ...: each rule overlaps the next, the actions alternate.
    rules = [
        (f"R{i}", f"When topic{i} or topic{i + 1}, answer {'FIN' if i % 2 else 'PAY'}-{i}X.")
        for i in range(3 * MAX_CHAIN)
    ]
    groups = _same_situation(rules)
    assert groups
    assert max(len(g) for g in groups) <= MAX_CHAIN
    # A short chain is still one group.
    assert _same_situation(rules[:3]) == [["R0", "R1", "R2"]]


def test_a_rule_left_out_by_its_text_or_a_loose_label_is_left_out() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": [" [r2] ", "When parcel late, answer LOG-8W"]}))
    assert adopted == _without("When refund, answer PAY-2D.", "When parcel late, answer LOG-8W.")


@pytest.mark.parametrize(
    "drop",
    [
        "R2, R4",
        ["[R2] [R4]"],
        ["[R2] When refund, answer PAY-2D.", "R4: When parcel late, answer LOG-8W."],
        ['"When refund, answer PAY-2D."', "when parcel late, answer LOG-8W!"],
    ],
)
def test_drops_written_as_small_models_write_them_are_honoured(drop: object) -> None:
    # Several labels in one string, the line as the prompt shows it, the insight quoted.
    adopted = _curate(lambda _: json.dumps({"drop": drop}))
    assert adopted == _without("When refund, answer PAY-2D.", "When parcel late, answer LOG-8W.")


def test_a_label_inside_an_insight_is_not_a_drop() -> None:
    group = [
        ("R1", Reflection(trace_id="t1", key_insight="When error R2 shows, answer SEC-4X.")),
        ("R2", Reflection(trace_id="t2", key_insight="When error R2 shows, answer SEC-9D.")),
        *GROUP[2:],
    ]
    adopted = _curate(
        lambda _: json.dumps({"drop": ["When error R2 shows, answer SEC-4X."]}), group
    )
    assert "When error R2 shows, answer SEC-9D." in adopted
    assert "When error R2 shows, answer SEC-4X." not in adopted


def test_unknown_labels_in_drop_change_nothing() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": ["R9", "P1.2", "nothing"]}))
    assert adopted == ALL


@pytest.mark.parametrize("drop", [["R1", "R2"], ["R1", "R2", "R3", "R4"], ["R3", "R4"]])
def test_a_drop_of_every_rule_for_a_situation_is_not_honoured(drop: list[str]) -> None:
    assert _curate(lambda _: json.dumps({"drop": drop})) == ALL


def test_a_rule_is_left_out_only_while_a_rule_for_its_situation_stays() -> None:
    # Situations overlap in a chain: R1 (refund or late parcel) with R2, R3 and R4,
    # R4 (late parcel) with R1 only. Leaving out R1 and R4 would keep two rules of
    # the four, but none for late parcels: R4 stays.
    chain = [
        ("R1", Reflection(trace_id="t1", key_insight="When refund or parcel late, answer FIN-7Q.")),
        GROUP[1],
        ("R3", Reflection(trace_id="t3", key_insight="When refund, answer RET-3H.")),
        GROUP[3],
    ]
    adopted = _curate(lambda _: json.dumps({"drop": ["R1", "R4"]}), group=chain)
    assert adopted == [r.key_insight for _, r in chain[1:]]


def test_one_rule_of_each_situation_may_be_left_out() -> None:
    assert _curate(lambda _: json.dumps({"drop": ["R1", "R3"]})) == _without(
        "When refund, answer FIN-7Q.", "When parcel late, answer LOG-5T."
    )


def test_less_than_half_of_the_rules_shown_is_never_left() -> None:
    # Three rules for one case: leaving out two keeps one, but less than half.
    three = [
        *GROUP[:2],
        ("R6", Reflection(trace_id="t6", key_insight="When refund, answer RET-3H.")),
    ]
    assert len(_curate(lambda _: json.dumps({"drop": ["R1", "R2"]}), group=three)) == 3
    assert len(_curate(lambda _: json.dumps({"drop": ["R1"]}), group=three)) == 2


def test_copies_of_one_rule_go_with_it() -> None:
    # The copies are not shown (one line per rule); leaving the rule out leaves them out.
    copies = [
        *GROUP,
        ("R6", Reflection(trace_id="t6", key_insight=GROUP[0][1].key_insight)),
        ("R7", Reflection(trace_id="t7", key_insight=GROUP[0][1].key_insight)),
    ]
    bodies: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        bodies.append(str(messages[-1].content))
        return json.dumps({"drop": ["R1"]})

    assert _curate(reply, group=copies) == _without("When refund, answer FIN-7Q.")
    assert "[R6]" not in bodies[0] and "[R7]" not in bodies[0]


def test_a_group_of_one_distinct_rule_makes_no_call() -> None:
    # Leaving out its only rule could never be honoured; the copies are one rule.
    calls: list[str] = []

    def reply(text: str) -> str:
        calls.append(text)
        return json.dumps({"drop": ["R1"]})

    one = [("R1", GROUP[0][1]), ("R2", GROUP[0][1].model_copy(update={"trace_id": "other"}))]
    assert len(_curate(reply, group=one)) == 1
    assert calls == []


def test_an_unreadable_reply_adopts_the_whole_group() -> None:
    assert _curate(lambda _: "I think all of them are fine!") == ALL


def _two_rules_for_greeting_2(body: str) -> str:
    """The small reflector for ``hello_tickets``; tickets 2 and 3 both name greeting 2."""
    number = int(re.findall(r"ticket (\d+) says hello", body)[0])
    return json.dumps({"action": f"answer T-{number}", "situation": f"greeting {min(number, 2)}"})


def _learn(strategy: str, curator: Callable[[str], str]) -> tuple[list[str], list[str], Any]:
    """One small-profile step on four hello tickets; the system prompts seen, the rules."""
    seen: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        seen.append(system)
        if "You study one run" in system:
            return _two_rules_for_greeting_2(body)
        if "You are the curator" in system:
            return curator(body)
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id=f"curate-{strategy}",
        model=FunctionChatModel(reply),
        batch_size=4,
        strategy=strategy,
        # Batch 4: combee's two groups each hold every reflection.
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(hello_tickets(4))
    assert len(report.steps) == 1
    return seen, sorted(b.content for b in report.playbook.bullets), report


@pytest.mark.parametrize("strategy", ["naive", "sequential", "combee"])
def test_a_garbled_curator_never_fails_the_step_nor_loses_its_rules(strategy: str) -> None:
    seen, garbled, _ = _learn(strategy, lambda _: "<<garbled>>")
    # Sequential curates one run's rule at a time: a group of one rule makes no call.
    assert (prompts.SMALL_CURATOR_SYSTEM in seen) is (strategy != "sequential")
    _, kept_all, _ = _learn(strategy, lambda _: json.dumps({"drop": []}))
    assert garbled == kept_all
    assert "When greeting 0, answer T-0." in garbled


def test_the_prompt_asks_what_to_leave_out() -> None:
    messages = prompts.small_curator_messages(Playbook(), GROUP)
    assert '"drop"' in str(messages[0].content)
    assert "left out" in str(messages[1].content)


# ------------------------------------------- a step's rules settle alternative by alternative


def _add(content: str, *sources: str) -> Add:
    return Add(section="others", content=content, sources=list(sources))


def test_rules_that_share_one_alternative_lose_only_that_one() -> None:
    from langgraph_combee._rules import rules

    settled, found = rules.settle_batch(
        [
            _add("When promo code expiration or promo or code, answer MKT-4V.", "a"),
            _add("When two-factor authentication or code or rejected, answer SEC-9D.", "b"),
            _add("When refund, answer FIN-7Q.", "c"),
        ]
    )
    assert [op.content for op in settled if isinstance(op, Add)] == [
        "When promo code expiration or promo, answer MKT-4V.",
        "When two-factor authentication or rejected, answer SEC-9D.",
        "When refund, answer FIN-7Q.",
    ]
    assert [c.reason for c in found] == ["ambiguous situation"] * 2
    assert all("'code' of When" in c.describe() for c in found)


def test_the_action_more_runs_back_keeps_the_shared_alternative() -> None:
    from langgraph_combee._rules import rules

    settled, found = rules.settle_batch(
        [
            _add("When promo or code, answer MKT-4V.", "a", "b"),
            _add("When two-factor login or code, answer SEC-9D.", "c"),
            _add("When code, answer PAY-2D.", "d"),
        ]
    )
    assert [op.content for op in settled if isinstance(op, Add)] == [
        "When promo or code, answer MKT-4V.",
        "When two-factor login, answer SEC-9D.",
    ]
    assert sorted(c.reason for c in found) == ["outvoted in this step"] * 2
    # The PAY-2D rule had nothing else: it is dropped whole, and said so.
    assert any(c.dropped == "When code, answer PAY-2D." for c in found)


def test_a_rule_left_with_only_generic_alternatives_is_dropped() -> None:
    from langgraph_combee._rules import rules

    # "any question" fits every input: "When any question, answer MKT-4V." would route
    # every ticket to MKT-4V.
    settled, found = rules.settle_batch(
        [
            _add("When code or any question, answer MKT-4V.", "a"),
            _add("When code, answer SEC-9D.", "b"),
        ]
    )
    assert settled == []
    assert {c.dropped for c in found} == {
        "When code or any question, answer MKT-4V.",
        "When code, answer SEC-9D.",
    }


def test_a_live_rule_corrected_down_to_generic_words_gives_way_to_the_correction() -> None:
    from langgraph_combee._core.playbook import Playbook
    from langgraph_combee._rules import rules

    # A live rule corrected down to "any question" gives way to the correction whole.
    playbook = (
        Playbook()
        .apply([_add("When code or any question, answer MKT-4V.", "a")], version=1)
        .playbook
    )
    reconciled, _ = rules.reconcile(playbook, [_add("When code, answer SEC-9D.", "b")])
    assert [op.type for op in reconciled] == ["UPDATE"]
    assert reconciled[0].content == "When code, answer SEC-9D."


@pytest.mark.parametrize("strategy", ["naive", "combee"])
def test_the_rules_a_curator_left_out_are_in_the_step_report(strategy: str) -> None:
    # Nothing is lost silently: a rule the model's curator left out is named.
    _, contents, report = _learn(
        strategy, lambda _: json.dumps({"drop": ["When greeting 2, answer T-2."]})
    )
    assert "When greeting 2, answer T-2." not in contents
    assert report.steps[0].left_out == ["When greeting 2, answer T-2."]


def test_nothing_is_listed_as_left_out_when_every_rule_is_adopted() -> None:
    _, _, report = _learn("combee", lambda _: json.dumps({"drop": []}))
    assert report.steps[0].left_out == []


def test_a_rule_only_one_of_its_two_curators_left_out_goes_on_and_is_not_listed() -> None:
    curator_calls: list[str] = []

    def curator(body: str) -> str:
        curator_calls.append(body)
        first = len(curator_calls) == 1
        return json.dumps({"drop": ["When greeting 2, answer T-2."] if first else []})

    _, contents, report = _learn("combee", curator)
    assert len(curator_calls) == 2  # two groups, each reflection in both
    assert report.steps[0].left_out == []
    # It goes on to be settled with its rival (T-3, the same situation, one run each):
    # a tie keeps neither, and the report says so.
    assert "When greeting 2, answer T-2." not in contents
    assert any("dropped 'When greeting 2, answer T-2.'" in c for c in report.steps[0].conflicts)


def test_a_large_batch_reads_each_situation_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: grouping 200 proposals compared every pair of rules, and each comparison
    read both situations' words again (~4 s for 200 rules of real playbooks)."""
    from langgraph_combee._algorithm import roles
    from langgraph_combee._rules import rules

    calls: list[str] = []
    real = rules.situation_words

    def counted(situation: str) -> frozenset[str]:
        calls.append(situation)
        return real(situation)

    monkeypatch.setattr(rules, "situation_words", counted)
    batch = [
        (f"R{i}", f"When zq{i}alpha or zq{i}beta parcel, answer C{i % 7}-1X.") for i in range(200)
    ]
    roles._same_situation(batch)
    assert len(calls) == len(set(calls)) <= 400


def test_a_rule_left_out_keeps_the_words_no_rival_shares() -> None:
    # Measured on the tool task with the 1.5B: a rule left out of a conflict over
    # "order" took "courier" and "rude" with it, words no other rule had.
    group = [
        (
            "R1",
            Reflection(trace_id="t1", key_insight="When order or courier or rude, answer LOG-8W."),
        ),
        ("R2", Reflection(trace_id="t2", key_insight="When order or late, answer SORRY10.")),
        ("R3", Reflection(trace_id="t3", key_insight="When order, answer REP-2.")),
    ]
    adopted = _curate(lambda _: json.dumps({"drop": ["R1"]}), group=group)
    assert adopted == [
        "When courier or rude, answer LOG-8W.",
        "When order or late, answer SORRY10.",
        "When order, answer REP-2.",
    ]
    # A rule with nothing but the shared situation goes.
    adopted = _curate(lambda _: json.dumps({"drop": ["R3"]}), group=group)
    assert adopted == [
        "When order or courier or rude, answer LOG-8W.",
        "When order or late, answer SORRY10.",
    ]


def test_two_rivals_both_left_out_keep_nothing_they_share_and_generic_words_go() -> None:
    # Review: narrowing against the staying rules only kept "customs hold" for both
    # rivals the curator left out (a conflict no model saw); and a rule left out for a
    # situation fitting any input kept exactly its generic part.
    group = [
        ("R1", Reflection(trace_id="t1", key_insight="When customs hold or refund, answer A-1.")),
        ("R2", Reflection(trace_id="t2", key_insight="When customs hold or refund, answer B-2.")),
        ("R3", Reflection(trace_id="t3", key_insight="When refund, answer C-3.")),
        ("R4", Reflection(trace_id="t4", key_insight="When refund or kettle, answer C-3.")),
    ]
    adopted = _curate(lambda _: json.dumps({"drop": ["R1", "R2"]}), group=group)
    assert adopted == ["When refund, answer C-3.", "When refund or kettle, answer C-3."]
    generic = [
        ("R1", Reflection(trace_id="t1", key_insight="When any question or order, answer LOG-8W.")),
        ("R2", Reflection(trace_id="t2", key_insight="When order, answer REP-2.")),
    ]
    assert _curate(lambda _: json.dumps({"drop": ["R1"]}), group=generic) == [
        "When order, answer REP-2."
    ]


def test_a_narrowed_rule_is_not_listed_as_left_out() -> None:
    from types import SimpleNamespace

    from langgraph_combee._algorithm.stages import proposing
    from langgraph_combee._core.types import StepReport

    labelled = [
        proposing.LabelledReflection("R1", Reflection(trace_id="t1", key_insight=i))
        for i in ("When order or courier, answer LOG-8W.", "When order, answer REP-2.")
    ]
    ops = [
        Add(section="others", content="When courier, answer LOG-8W.", sources=["t1"]),
        Add(section="others", content="When order, answer REP-2.", sources=["t2"]),
    ]
    report = StepReport(step=1, strategy="combee", batch_size=2)
    ctx: Any = SimpleNamespace(roles=SmallRoles())
    proposing.note_left_out(ctx, labelled, ops, report)
    assert report.left_out == []
    proposing.note_left_out(ctx, labelled, ops[1:], report)
    assert report.left_out == ["When order or courier, answer LOG-8W."]
