"""A value of the run's input written another way is the input's, not the rule's.

Seen on the 1.5B on the tool task: rules carried their run's amount in cents
(``amount='8530'`` for "EUR 85.30") and their run's date rewritten
(``date='20270511'`` for "11 May 2027"), so each fitted one order only, and two
refund rules looked like a conflict to settle.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, Trace
from langgraph_combee._algorithm.schemas import SmallReflectionOut
from langgraph_combee._core.values import (
    DIGITS_ONLY,
    FROM_INPUT,
    IN_CENTS,
    converted,
    values,
)
from langgraph_combee._rules import rules
from langgraph_combee.testing import FunctionChatModel

YMD = f"{FROM_INPUT}, as a date written YYYYMMDD"


@pytest.mark.parametrize(
    ("value", "source", "expected"),
    [
        ("18440", "It was EUR 184.40, order NW-99213.", IN_CENTS),
        ("2490", "refund the 24,90 EUR please", IN_CENTS),
        ("99", "it cost EUR 0.99", IN_CENTS),
        ("2500", "I paid EUR 25 for it", IN_CENTS),
        ("2500", "I paid $25 for it", IN_CENTS),
        ("1250", "about 1,250 of them", DIGITS_ONLY),
        ("20270511", "Please deliver it on 11 May 2027.", YMD),
        ("20270511", "deliver on May 11th, 2027", YMD),
        ("20270511", "deliver on the 11th of May 2027", YMD),
        ("20270511", "deliver on 2027-05-11", YMD),
        ("2027-05-11", "deliver on 11 May 2027", f"{FROM_INPUT}, as a date written YYYY-MM-DD"),
        ("11/05/2027", "deliver on 11 May 2027", f"{FROM_INPUT}, as a date written DD/MM/YYYY"),
        # 11/05/2027 reads as 11 May or as 5 November: either order is the input's.
        ("20271105", "on 11/05/2027", YMD),
        ("20270511", "on 11/05/2027", YMD),
    ],
)
def test_a_value_of_the_input_written_another_way_is_described(
    value: str, source: str, expected: str
) -> None:
    assert converted(value, source) == expected


@pytest.mark.parametrize(
    ("value", "source"),
    [
        ("99213", "order NW-99213"),  # part of an id, not a number of the input
        ("2500", "I ordered 25 items"),  # no currency: 25 is no amount
        ("SORRY10", "my parcel is late"),  # a house value
        ("20270512", "deliver on 11 May 2027"),  # another day
        ("20270230", "deliver on 30 February 2027"),  # no such day
        ("1844", "EUR 184.45"),
        ("", "EUR 1.00"),
        ("NW-123", "my order NW-123 is late"),  # as written: that is FROM_INPUT
        ("T-3", "ticket 3 says hello"),  # "T-3" is not the "3" of "ticket 3"
        ("FIN-7Q", "please route this to fin-7q"),  # another case: an input may not pick it
    ],
)
def test_a_value_the_input_does_not_hold_in_any_form_is_the_rules_own(
    value: str, source: str
) -> None:
    assert converted(value, source) is None


def test_a_description_is_no_value_so_the_house_values_alone_are_checked() -> None:
    action = (
        f"make the calls reschedule_delivery(order_id='{FROM_INPUT}', date='{YMD}'); "
        f"send_voucher(order_id='{FROM_INPUT}', code='SORRY10')"
    )
    assert values(action) == {"SORRY10"}
    assert values(f"answer {FROM_INPUT}, in cents, digits only") == frozenset()
    assert rules.followed(action, "send_voucher(order_id='NW-1', code='SORRY10')") is True


def test_two_runs_rules_with_their_own_amount_and_date_get_one_action() -> None:
    # Longer than a short answer: the reflector's own action carries the calls.
    one_truth = "lookup_order(order_id='NW-1'); issue_refund(order_id='NW-1', amount='8530')"
    two_truth = "lookup_order(order_id='NW-2'); issue_refund(order_id='NW-2', amount='2490')"
    one = SmallReflectionOut(
        situation="refund request", action=f"answer {one_truth}"
    ).to_reflection(
        "a",
        ground_truth=one_truth,
        source="Please refund the EUR 85.30 I paid for the rain jacket, order NW-1.",
    )
    two = SmallReflectionOut(
        situation="refund request", action=f"answer {two_truth}"
    ).to_reflection(
        "b", ground_truth=two_truth, source="I want my EUR 24.90 back as a refund, order NW-2."
    )
    assert (
        one.key_insight
        == two.key_insight
        == (
            f"When refund request, make the calls lookup_order(order_id='{FROM_INPUT}'); "
            f"issue_refund(order_id='{FROM_INPUT}', amount='{IN_CENTS}')."
        )
    )
    dates = SmallReflectionOut(situation="new delivery date", action="x")
    moved = dates.to_reflection(
        "c",
        ground_truth="reschedule_delivery(order_id='NW-3', date='20270511')",
        source="Could you deliver order NW-3 on 11 May 2027 instead?",
    )
    assert moved.key_insight == (
        f"When new delivery date, make the calls reschedule_delivery(order_id='{FROM_INPUT}', "
        f"date='{YMD}')."
    )
    action_one = rules.parse_rule(one.key_insight).action  # type: ignore[union-attr]
    action_two = rules.parse_rule(two.key_insight).action  # type: ignore[union-attr]
    assert rules.same_action(action_one, action_two)


def test_tool_rules_with_described_amounts_and_dates_are_learned_not_quarantined() -> None:
    # The guard once read a placeholder as a markup tag and quarantined every tool
    # rule; the written forms go through it the same way as the placeholder.
    # (A refund rule would be held for approval as a policy change that moves money.)
    alert = "Warn me when my account NW-23001 goes over EUR 85.30 this month."
    moved = "Could you deliver order NW-23002 on 11 May 2027 instead?"
    cases = {
        alert: ("set_alert(account='NW-23001', threshold='8530')", "spending alert"),
        moved: ("reschedule_delivery(order_id='NW-23002', date='20270511')", "new delivery date"),
    }

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            truth, situation = next(v for k, v in cases.items() if k in body)
            return json.dumps({"situation": situation, "action": f"answer {truth}"})
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id="tools",
        model=FunctionChatModel(reply),
        batch_size=2,
        algorithm=AlgorithmSettings(roles="small"),
    )
    traces = [
        Trace(
            id=f"t{i}",
            input=text,
            output="",
            feedback=Feedback(correct=False, ground_truth=truth),
        )
        for i, (text, (truth, _)) in enumerate(cases.items())
    ]
    report = combee.learn(traces)
    assert report.steps[0].quarantined == []
    assert report.steps[0].held == []
    assert sorted(b.content for b in report.playbook.bullets) == [
        f"When new delivery date, make the calls reschedule_delivery(order_id='{FROM_INPUT}', "
        f"date='{YMD}').",
        f"When spending alert, make the calls set_alert(account='{FROM_INPUT}', "
        f"threshold='{IN_CENTS}').",
    ]


@pytest.mark.parametrize(
    ("truth", "source", "action"),
    [
        ("21.04.2025", "Book me in at Munich for 21 April 2025.", "as a date written DD.MM.YYYY"),
        ("09/27/2025", "Austin on the 27th of September 2025?", "as a date written MM/DD/YYYY"),
        ("2026/09/23", "Osaka on the 23rd of September 2026.", "as a date written YYYY/MM/DD"),
    ],
)  # fmt: skip
def test_a_date_written_with_dots_or_slashes_is_one_value_of_the_input(
    truth: str, source: str, action: str
) -> None:
    # Seen on the 1.5B on a booking task: read piece by piece, "21.04.2025" became
    # "21.04.<the input's year>", which fitted no other run.
    out = SmallReflectionOut(situation="booking in Munich", action=f"answer {truth}")
    reflection = out.to_reflection("a", ground_truth=truth, source=source)
    assert reflection.key_insight == f"When booking in Munich, answer {FROM_INPUT}, {action}."


def test_an_amount_or_a_date_the_input_does_not_hold_stays_the_rules_own() -> None:
    out = SmallReflectionOut(situation="year end", action="answer 31.12.2025")
    assert out.to_reflection("a", ground_truth="31.12.2025", source="my parcel").key_insight == (
        "When year end, answer 31.12.2025."
    )
    amount = SmallReflectionOut(situation="refund", action="answer 24.90")
    assert amount.to_reflection("b", ground_truth="24.90", source="EUR 24.90 back").key_insight == (
        f"When refund, answer {FROM_INPUT}."
    )


def test_an_answer_follows_a_described_action_when_the_input_gives_its_value_that_way() -> None:
    german = "answer the value in the input, as a date written DD.MM.YYYY"
    source = "Can we meet in Berlin on 3 March 2025?"
    assert rules.followed(german, "03.03.2025", source) is True
    assert rules.followed(german, "03/03/2025", source) is False  # another layout
    assert rules.followed(german, "2025/03/03", source) is False
    # Nothing to judge by: no input, or an answer with no value of the input.
    assert rules.followed(german, "03.03.2025") is None
    assert rules.followed(german, "SUB-1C", source) is None
    # An action naming values is judged by them, as before.
    assert rules.followed("answer SUB-1C", "SUB-1C", source) is True
    american = german.replace("DD.MM.YYYY", "MM/DD/YYYY")
    assert rules.followed(american, "03/03/2025", source) is True
    assert rules.followed(american, "2025/03/03", source) is False
    assert rules.followed(american, "03/04/2025", source) is None  # not the input's date


def test_a_described_action_is_judged_by_its_calls_its_values_and_the_inputs_dates() -> None:
    cancel = "make the calls cancel_order(order_id='the value in the input')"
    # Another call than the action's is not following it, whatever values it copies.
    assert rules.followed(cancel, "issue_refund(order_id='NW-13')", "refund NW-13") is False
    assert rules.followed(cancel, "cancel_order(order_id='NW-13')", "cancel NW-13") is True
    # The action's own values first, then its descriptions.
    both = "book(date='the value in the input, as a date written DD.MM.YYYY', room='B2')"
    source = "B2 on 3 March 2025"
    assert rules.followed(both, "book(date='03/03/2025', room='B2')", source) is False
    assert rules.followed(both, "book(date='03.03.2025', room='B2')", source) is True
    assert rules.followed(both, "book(date='03.03.2025', room='B3')", source) is False
    # A date described, and the input holds none: nothing to judge by.
    german = "answer the value in the input, as a date written DD.MM.YYYY"
    assert rules.followed(german, "NW-1 03.03.2025", "order NW-1") is None
    # A layout found inside a longer number is not the date written so.
    compact = "answer the value in the input, as a date written YYYYMMDD"
    assert rules.followed(compact, "ref 120250303", "3 March 2025, ref 120250303") is False


def test_brackets_in_prose_are_no_calls_and_calls_are_compared_by_whole_names() -> None:
    cents = "answer (in cents) the value in the input, in cents, digits only"
    assert rules.followed(cents, "Refund of 2490 cents (EUR 24.90) issued", "EUR 24.90") is True
    date = "reply with the date (the value in the input, as a date written DD.MM.YYYY)"
    assert rules.followed(date, "Booked for Monday (03.03.2025).", "Monday 3 March 2025") is True
    lookup = "make the calls lookup_order(order_id='the value in the input')"
    assert rules.followed(lookup, "lookup_order_v2(order_id='A1')", "order A1") is False
    assert rules.followed(lookup, "lookup_order(order_id='A1')", "order A1") is True


def test_a_phrase_of_the_input_given_to_a_call_is_the_inputs_and_a_house_phrase_stays() -> None:
    out = SmallReflectionOut(situation="household move", action="answer x")
    truth = "book_job(service='home', crew='crew-2', notes='two-bed flat')"
    rule = out.to_reflection("a", ground_truth=truth, source="We leave our two-bed flat soon.")
    assert "two-bed flat" not in rule.key_insight
    assert f"notes='{FROM_INPUT}'" in rule.key_insight and "crew='crew-2'" in rule.key_insight
    house = "book_job(service='home', crew='crew-2', notes='fragile goods')"
    kept = out.to_reflection("b", ground_truth=house, source="We leave our two-bed flat soon.")
    assert "notes='fragile goods'" in kept.key_insight


def test_a_word_of_the_input_is_the_inputs_only_for_a_parameter_naming_someone() -> None:
    out = SmallReflectionOut(situation="heavy single item", action="answer x")
    truth = "book_job(service='piano', crew='crew-4', owner='mkowalski')"
    rule = out.to_reflection("a", ground_truth=truth, source="mkowalski: move my piano please")
    assert "service='piano'" in rule.key_insight
    assert f"owner='{FROM_INPUT}'" in rule.key_insight


def test_a_name_the_input_capitalised_is_the_inputs_whatever_its_parameter() -> None:
    out = SmallReflectionOut(situation="rental extension", action="answer x")
    truth = "open_request(city='Glasgow', desk='res-4')"
    rule = out.to_reflection("a", ground_truth=truth, source="Can I keep my Glasgow car a week?")
    assert f"city='{FROM_INPUT}'" in rule.key_insight and "desk='res-4'" in rule.key_insight
    assert "Glasgow" not in rule.key_insight
    # A house value stays: lower case, a code in capitals, or one the input wrote otherwise.
    for house, source in (
        ("service='Piano'", "please move my piano"),
        ("priority='URGENT'", "URGENT: the lift is stuck"),
        ("service='piano'", "Piano removal please"),
    ):
        kept = out.to_reflection("b", ground_truth=f"book_job({house})", source=source)
        assert house in kept.key_insight, (house, kept.key_insight)


def test_a_call_the_reflector_wrote_without_answer_is_made_general_too() -> None:
    out = SmallReflectionOut(
        situation="lost item", action="post_note(child='Ruby', board='kit-8', note='blanket')"
    )
    rule = out.to_reflection("a", source="We think Ruby has lost her bunny blanket")
    assert rule.key_insight == (
        f"When lost item, make the calls post_note(child='{FROM_INPUT}', board='kit-8', "
        "note='blanket')."
    )


@pytest.mark.parametrize(
    ("call", "source"),
    [
        # A kind of request the user typed capitalised is still the house's word for it:
        # made "the value in the input", the next user's "Platinum" would be the tier.
        ("set_tier(tier='Gold')", "I am a Gold member, please upgrade my account"),
        ("change_plan(new_plan='Premium')", "can I move up to Premium from my plan"),
        ("route(support_queue='Billing')", "why two charges? see Billing please"),
        ("set_level(customer_tier='Gold')", "upgrade me, a Gold customer for years"),
        ("grant_access(role='Admin')", "I'm the new Admin here, let me in"),
        # A capital that starts a sentence is the sentence's, whatever the parameter.
        ("ship(carrier='Express')", "Express delivery to Leeds please"),
        ("open_request(city='Glasgow')", "Re: Glasgow car for a week?"),
        ("open_request(city='Glasgow')", "Car hire. Glasgow for a week?"),
    ],
)
def test_a_capitalised_house_value_the_user_typed_stays_the_rules(call: str, source: str) -> None:
    out = SmallReflectionOut(situation="account request", action="answer x")
    rule = out.to_reflection("a", ground_truth=call, source=source)
    assert call in rule.key_insight and FROM_INPUT not in rule.key_insight, rule.key_insight


@pytest.mark.parametrize(
    ("call", "source", "name"),
    [
        (
            "open_request(city='Glasgow')",
            "Glasgow car please: I fly into Glasgow at nine",
            "Glasgow",
        ),
        ("open_request(city='Łódź')", "Can I keep my Łódź car a week?", "Łódź"),
        ("book_berth(vessel='Sea-Witch')", "a berth for my boat Sea-Witch", "Sea-Witch"),
        ("book_stay(pet='Biscuit')", "a room for me and our dog Biscuit", "Biscuit"),
    ],
)
def test_a_name_written_inside_a_sentence_is_the_inputs(call: str, source: str, name: str) -> None:
    out = SmallReflectionOut(situation="holiday enquiry", action="answer x")
    rule = out.to_reflection("a", ground_truth=call, source=source)
    assert FROM_INPUT in rule.key_insight and name not in rule.key_insight, rule.key_insight


@pytest.mark.xfail(
    strict=True,
    reason="a quoted value is read up to its first quote mark: O'Brien is read as 'O', "
    "so the user's surname stays in the rule",
)
def test_a_name_with_an_apostrophe_is_the_inputs_too() -> None:
    out = SmallReflectionOut(situation="table booking", action="answer x")
    rule = out.to_reflection(
        "a", ground_truth='book_table(guest_name="O\'Brien")', source="a table for Pat O'Brien"
    )
    assert "Brien" not in rule.key_insight, rule.key_insight


def test_the_guard_still_screens_a_rule_whose_house_value_the_user_typed() -> None:
    from langgraph_combee import BulletGuard
    from langgraph_combee._core.ops import Add

    source = "I'm the new Admin here, let me in"
    run = Trace(
        id="t1",
        input=source,
        output="no",
        feedback=Feedback(correct=False, ground_truth="grant_access(role='Admin')"),
    )
    rule = SmallReflectionOut(situation="staff onboarding", action="answer x").to_reflection(
        "t1", ground_truth="grant_access(role='Admin')", source=source
    )
    assert "role='Admin'" in rule.key_insight
    op = Add(section="others", content=rule.key_insight, sources=["t1"])
    screening = BulletGuard().screen([op], traces=[run])
    assert screening.accepted == [] and (screening.quarantined or screening.held)
