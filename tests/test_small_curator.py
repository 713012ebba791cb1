"""The small-model curator adopts every rule of its group but those it leaves out.

Asked to pick rules, the 1.5B's single naive curator call over 48 rules left 11
rules for 24 codes. It is now asked what to leave out, and a drop that would
leave less than half of the group is not honoured.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import AlgorithmSettings, Combee, Trace
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Reflection
from langgraph_combee._learning import prompts
from langgraph_combee._learning.calls import CallSettings, CallStats, LLMCaller
from langgraph_combee._learning.roles import SmallRoles
from langgraph_combee.testing import FunctionChatModel
from tests.helpers import hello_rule, hello_tickets

GROUP = [
    ("R1", Reflection(trace_id="t1", key_insight="When refund, answer FIN-7Q.")),
    ("R2", Reflection(trace_id="t2", key_insight="When locked out, answer SEC-4X.")),
    ("R3", Reflection(trace_id="t3", key_insight="When parcel late, answer LOG-5T.")),
    ("R4", Reflection(trace_id="t4", key_insight="When question, answer FIN-7Q.")),
]


def _curate(reply: Callable[[list[BaseMessage]], str], group=GROUP) -> list[str]:
    caller = LLMCaller(FunctionChatModel(reply), CallSettings(max_attempts=1, backoff_initial=0))
    ops = asyncio.run(
        SmallRoles().curate(
            caller, "combee.propose", Playbook(), group, CallStats(), token_budget=None
        )
    )
    assert ops is not None
    return [op.content for op in ops if isinstance(op, Add)]


def test_every_rule_is_adopted_but_the_ones_left_out() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": ["R4"]}))
    assert adopted == [content for label, r in GROUP[:3] for content in [r.key_insight]]


def test_a_rule_left_out_by_its_text_or_a_loose_label_is_left_out() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": [" [r2] ", "When question, answer FIN-7Q"]}))
    assert adopted == ["When refund, answer FIN-7Q.", "When parcel late, answer LOG-5T."]


@pytest.mark.parametrize(
    "drop",
    [
        "R3, R4",
        ["[R3] [R4]"],
        ["[R3] When parcel late, answer LOG-5T.", "R4: When question, answer FIN-7Q."],
        ['"When parcel late, answer LOG-5T."', "when question, answer FIN-7Q!"],
    ],
)
def test_drops_written_as_small_models_write_them_are_honoured(drop: object) -> None:
    # Several labels in one string, the line as the prompt shows it, the insight quoted.
    adopted = _curate(lambda _: json.dumps({"drop": drop}))
    assert adopted == ["When refund, answer FIN-7Q.", "When locked out, answer SEC-4X."]


def test_a_label_inside_an_insight_is_not_a_drop() -> None:
    group = [
        ("R1", Reflection(trace_id="t1", key_insight="When error R2 shows, answer SEC-4X.")),
        *GROUP[1:],
    ]
    adopted = _curate(
        lambda _: json.dumps({"drop": ["When error R2 shows, answer SEC-4X."]}), group
    )
    assert "When locked out, answer SEC-4X." in adopted
    assert "When error R2 shows, answer SEC-4X." not in adopted


def test_unknown_labels_in_drop_change_nothing() -> None:
    adopted = _curate(lambda _: json.dumps({"drop": ["R9", "P1.2", "nothing"]}))
    assert len(adopted) == 4


@pytest.mark.parametrize("drop", [["R1", "R2", "R3"], ["R1", "R2", "R3", "R4"]])
def test_a_drop_of_most_of_the_group_is_not_honoured(drop: list[str]) -> None:
    assert len(_curate(lambda _: json.dumps({"drop": drop}))) == 4


def test_half_of_the_group_may_be_left_out() -> None:
    assert len(_curate(lambda _: json.dumps({"drop": ["R1", "R2"]}))) == 2


def test_copies_of_one_rule_count_once_towards_half() -> None:
    # Six labels but three distinct rules: dropping the two copies of one keeps two of three.
    copies = [
        *GROUP[:3],
        ("R5", Reflection(trace_id="t5", key_insight=GROUP[0][1].key_insight)),
        ("R6", Reflection(trace_id="t6", key_insight=GROUP[0][1].key_insight)),
    ]
    adopted = _curate(lambda _: json.dumps({"drop": ["R1", "R5", "R6"]}), group=copies)
    assert adopted == ["When locked out, answer SEC-4X.", "When parcel late, answer LOG-5T."]
    # A copy left out alone leaves the rule in (a model drops a repeat of another label).
    adopted = _curate(lambda _: json.dumps({"drop": ["R1", "R2"]}), group=copies)
    assert sorted(adopted) == ["When parcel late, answer LOG-5T.", "When refund, answer FIN-7Q."]
    # Leaving out two of the three distinct rules is more than half: nothing is left out.
    adopted = _curate(lambda _: json.dumps({"drop": ["R1", "R5", "R6", "R2"]}), group=copies)
    assert len(adopted) == 3


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
    assert len(_curate(lambda _: "I think all of them are fine!")) == 4


@pytest.mark.parametrize("strategy", ["naive", "sequential", "combee"])
def test_a_garbled_curator_never_fails_the_step_nor_loses_its_rules(strategy: str) -> None:
    seen: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        seen.append(system)
        if "You study one run" in system:
            return hello_rule(body)
        return "<<garbled>>"

    combee = Combee(
        prompt_id="garbled",
        model=FunctionChatModel(reply),
        batch_size=4,
        strategy=strategy,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(hello_tickets(4))
    # Sequential curates one run's rule at a time: a group of one rule makes no call.
    assert (prompts.SMALL_CURATOR_SYSTEM in seen) is (strategy != "sequential")
    assert len(report.steps) == 1
    contents = sorted(b.content for b in report.playbook.bullets)
    assert contents == [f"When greeting {i}, answer T-{i}." for i in range(4)]


def test_the_prompt_asks_what_to_leave_out() -> None:
    messages = prompts.small_curator_messages(Playbook(), GROUP)
    assert '"drop"' in str(messages[0].content)
    assert "left out" in str(messages[1].content)


# ------------------------------------------- a step's rules settle alternative by alternative


def _add(content: str, *sources: str) -> Add:
    return Add(section="others", content=content, sources=list(sources))


def test_rules_that_share_one_alternative_lose_only_that_one() -> None:
    from langgraph_combee._learning import rules

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
    from langgraph_combee._learning import rules

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
    from langgraph_combee._learning import rules

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


def test_no_narrowing_leaves_a_rule_only_alternatives_of_generic_words() -> None:
    from langgraph_combee._core.playbook import Playbook
    from langgraph_combee._core.types import Feedback, Trace
    from langgraph_combee._learning import rules

    def ticket(trace_id: str, text: str, truth: str) -> Trace:
        return Trace(
            id=trace_id,
            input=text,
            output="NONE",
            feedback=Feedback(correct=False, ground_truth=truth),
        )

    tickets = [
        ticket("a", "promo code", "MKT-4V"),
        ticket("b", "login code", "SEC-9D"),
        ticket("c", "card code", "PAY-2D"),
    ]
    # "code" marks tickets of three codes: sharpening takes it, and "any question" is no case.
    sharpened, _ = rules.sharpen([_add("When code or any question, answer MKT-4V.", "a")], tickets)
    assert sharpened == []
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
    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            return hello_rule(body)
        if "You are the curator" in system:
            return json.dumps({"drop": ["When greeting 2, answer T-2."]})
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id="left-out",
        model=FunctionChatModel(reply),
        batch_size=4,
        strategy=strategy,
        # One group of every reflection: combee's level 1 is then one curator too.
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(hello_tickets(4))
    contents = sorted(b.content for b in report.playbook.bullets)
    assert "When greeting 2, answer T-2." not in contents
    assert report.steps[0].left_out == ["When greeting 2, answer T-2."]


def test_nothing_is_listed_as_left_out_when_every_rule_is_adopted() -> None:
    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            return hello_rule(body)
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id="kept",
        model=FunctionChatModel(reply),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    assert combee.learn(hello_tickets(4)).steps[0].left_out == []


def test_a_rule_only_one_of_its_two_curators_left_out_is_kept_and_not_listed() -> None:
    curator_calls: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            return hello_rule(body)
        if "You are the curator" in system:
            curator_calls.append(body)
            first = len(curator_calls) == 1
            return json.dumps({"drop": ["When greeting 2, answer T-2."] if first else []})
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id="one-of-two",
        model=FunctionChatModel(reply),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(hello_tickets(4))
    assert len(curator_calls) == 2  # two groups, each reflection in both
    assert "When greeting 2, answer T-2." in [b.content for b in report.playbook.bullets]
    assert report.steps[0].left_out == []
