"""Combee's level 2 by reference, and the small-model profile's reflector and curators."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, Trace
from langgraph_combee._algorithm import aggregate
from langgraph_combee._algorithm.schemas import (
    AggregateOut,
    SmallCuratorOut,
    SmallReflectionOut,
)
from langgraph_combee._core.ops import Add, Remove
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._llm import prompts
from langgraph_combee._llm.parsing import parse_reply
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, fake_learner
from tests.helpers import hello_tickets


def _proposals() -> list[list[Add | Remove]]:
    return [
        [
            Add(section="others", content="Refunds go to FIN-7Q.", sources=["t1"]),
            Add(section="others", content="Locked accounts go to SEC-4X.", sources=["t2"]),
        ],
        [
            Add(section="others", content="Refund requests: FIN-7Q.", sources=["t3"]),
            Remove(id="str-00001", reason="wrong", sources=["t4"]),
        ],
    ]


def _reply(data: object) -> AggregateOut:
    return AggregateOut.model_validate(data)


def test_every_proposal_stands_unless_dropped_or_replaced() -> None:
    proposed = aggregate.label_proposals(_proposals())
    assert list(proposed) == ["P1.1", "P1.2", "P2.1", "P2.2"]
    ops = aggregate.resolve(
        _reply({"drop": ["P2.2"], "operations": []}),
        proposed,
        labels={},
        default_sources=["t1", "t2", "t3", "t4"],
    )
    assert ops == [proposed["P1.1"], proposed["P1.2"], proposed["P2.1"]]


def test_a_merged_op_replaces_its_proposals_and_inherits_their_sources() -> None:
    proposed = aggregate.label_proposals(_proposals())
    reply = _reply(
        {
            "drop": [],
            "operations": [
                {
                    "type": "ADD",
                    "section": "others",
                    "content": "Refunds and refund requests go to FIN-7Q.",
                    "replaces": ["[P1.1]", "p2.1", "P9.9"],
                }
            ],
        }
    )
    ops = aggregate.resolve(reply, proposed, labels={}, default_sources=["t1", "t2", "t3", "t4"])
    assert [op.content for op in ops if isinstance(op, Add)] == [
        "Locked accounts go to SEC-4X.",
        "Refunds and refund requests go to FIN-7Q.",
    ]
    assert ops[-1].sources == ["t1", "t3"]
    assert isinstance(ops[1], Remove)


def test_invented_labels_drop_nothing_and_cited_reflections_win() -> None:
    proposed = aggregate.label_proposals(_proposals())
    reply = _reply(
        {
            "drop": ["P7.1", "R1"],
            "operations": [
                {"type": "ADD", "content": "New rule.", "sources": ["R2"], "replaces": ["P1.2"]}
            ],
        }
    )
    ops = aggregate.resolve(reply, proposed, labels={"R2": "t9"}, default_sources=["t1"])
    assert len(ops) == 4
    assert ops[-1].sources == ["t9"]


def test_the_aggregator_reply_parses_leniently() -> None:
    parsed = parse_reply('```json\n{"drop": "P1.2", "operations": []}\n```', AggregateOut)
    assert isinstance(parsed, AggregateOut) and parsed.drop == ["P1.2"]


def test_a_combee_step_sends_the_aggregator_labels_and_applies_its_decisions() -> None:
    seen: list[str] = []
    learner = fake_learner()

    def reply(messages: list) -> str:
        text = str(messages[0].content)
        if "You are the aggregator" in text:
            seen.append(str(messages[1].content))
            # Drop the first proposal's first op, whatever it is.
            return json.dumps({"drop": ["P1.1"], "operations": []})
        return str(learner.invoke(messages).content)

    traces = [
        Trace(
            input=f"ticket number {i} about topic {i}",
            output="GENERAL",
            feedback=Feedback(correct=False, ground_truth=f"T-{i}"),
        )
        for i in range(9)
    ]
    combee = Combee(prompt_id="agg", model=FunctionChatModel(reply), batch_size=9)
    report = combee.learn(traces)
    assert seen and "[P1.1]" in seen[0] and "[P3.1]" in seen[0]
    # Each rule reached two proposals (p = 2): dropping one copy of one rule loses nothing.
    assert len(report.playbook.bullets) == 9


def test_the_small_reflector_asks_for_situation_and_action_only() -> None:
    trace = Trace(
        input="My parcel is late",
        output="GENERAL",
        feedback=Feedback(correct=False, ground_truth="LOG-5T"),
    )
    messages = prompts.small_reflector_messages(trace)
    assert '"situation"' in str(messages[0].content) and '"action"' in str(messages[0].content)
    assert "Current playbook" not in str(messages[1].content)
    out = SmallReflectionOut(situation=" late parcels :", action="route to LOG-5T.")
    assert out.to_reflection("t1").key_insight == "When late parcels, route to LOG-5T."
    assert SmallReflectionOut(situation="late parcels").to_reflection("t1").is_empty()
    # No action written, or one that leaves the expected answer out ("copy the
    # expected value", as the 1.5B wrote): the rule states the answer.
    copied = SmallReflectionOut(situation="late parcels", action="copy the expected value")
    assert copied.to_reflection("t1", ground_truth="LOG-5T").key_insight == (
        "When late parcels, answer LOG-5T."
    )
    bare = SmallReflectionOut(situation="late parcels").to_reflection("t1", ground_truth="LOG-5T")
    assert bare.key_insight == "When late parcels, answer LOG-5T."
    # Quotes around a whole part go; a leading "when" and commas inside the situation
    # (the first comma ends it) are rewritten.
    wrapped = SmallReflectionOut(
        situation="when 'late', lost parcels", action="<\u201cLOG-5T\u201d>"
    )
    assert wrapped.to_reflection("t1").key_insight == "When 'late'; lost parcels, LOG-5T."
    # The answer in another case than the ground truth's (the 1.5B wrote "answer Slow"
    # for "SLOW"): the rule states it as the operator writes it; other actions stay.
    cased = SmallReflectionOut(situation="slow laptop", action="answer 'Slow'.")
    assert cased.to_reflection("t1", ground_truth="SLOW").key_insight == (
        "When slow laptop, answer SLOW."
    )
    # A longer code holding the answer is another code.
    other = SmallReflectionOut(situation="slow laptop", action="answer HW-70")
    assert other.to_reflection("t1", ground_truth="HW-7").correct_approach == "answer HW-7"
    locked = SmallReflectionOut(situation="locked out", action="answer BLOCKED")
    assert locked.to_reflection("t1", ground_truth="LOCKED").correct_approach == "answer LOCKED"
    longer = SmallReflectionOut(situation="slow laptop", action="say it is slow")
    assert longer.to_reflection("t1", ground_truth="SLOW").key_insight == (
        "When slow laptop, say it is slow."
    )


def test_combee_learns_with_the_small_profile() -> None:
    combee = Combee(
        prompt_id="small",
        model=fake_learner(),
        batch_size=6,
        algorithm=AlgorithmSettings(roles="small"),
    )
    assert combee.describe_roles()["profile"] == "small"
    report = combee.learn(hello_tickets(6))
    rules = [b.content for b in report.playbook.bullets]
    assert "When inputs like 'ticket 3 says hello', answer T-3." in rules
    assert report.steps[0].roles["profile"] == "small"


def test_a_bad_roles_setting_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="roles"):
        AlgorithmSettings(roles="verbose")


def test_a_curator_may_adopt_by_label_by_insight_text_or_with_its_own_rule() -> None:
    from langgraph_combee._algorithm.roles import adopt
    from langgraph_combee._core.types import Reflection

    by_label = {
        "R1": Reflection(trace_id="t1", key_insight="Return labels: RET-3H"),
        "R2": Reflection(trace_id="t2", key_insight="Locked out: SEC-4X"),
        "R3": Reflection(trace_id="t3", key_insight=""),
    }
    ops = adopt(
        ["[r1]", "locked out: sec-4x.", "R3", "R9", "x", "Refunds go to FIN-7Q", "R1"],
        by_label,
        section="others",
    )
    assert [(op.content, op.sources) for op in ops if isinstance(op, Add)] == [
        ("Return labels: RET-3H", ["t1"]),
        ("Locked out: SEC-4X", ["t2"]),
        ("Refunds go to FIN-7Q", ["t1", "t2", "t3"]),
    ]


# ---------------------------------------------------------------- small-model curators


def _small_learner(add: list[str], drop: list[str], seen: list[str]) -> FunctionChatModel:
    """Reflects with the small profile, adopts every reflection plus ``add``, drops ``drop``."""

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        seen.append(system)
        if "You study one run" in system:
            number = re.findall(r"ticket (\d+) says hello", body)[0]
            return json.dumps(
                {"action": f"<\u201cT-{number}\u201d>", "situation": f"greeting ticket {number}"}
            )
        if "You are the curator" in system:
            labels = sorted(set(re.findall(r"\[(R\d+)\]", body)))
            return json.dumps({"add": [*labels, *add], "operations": []})
        return json.dumps({"drop": drop})

    return FunctionChatModel(reply)


def test_small_curators_answer_with_labels_only() -> None:
    assert SmallCuratorOut.model_validate({"drop": "R1"}).drop == ["R1"]
    assert set(SmallCuratorOut.model_json_schema()["properties"]) == {"drop"}


def test_small_levels_1_and_2_are_skipped_and_recorded_when_no_rules_overlap() -> None:
    seen: list[str] = []
    # A small model's habits: quotes around the answer, a playbook line copied into "add".
    copied = "[str-00001] helpful=0 harmful=0 :: greeting ticket 0: T-0"
    combee = Combee(
        prompt_id="small",
        model=_small_learner([copied], ["P2.1"], seen),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(hello_tickets(4))
    # Four distinct situations: no curator nor aggregator has anything to decide.
    assert prompts.SMALL_CURATOR_SYSTEM not in seen
    assert prompts.SMALL_AGGREGATOR_SYSTEM not in seen
    assert report.steps[0].aggregation == "nothing to merge"
    assert prompts.CURATOR_SYSTEM not in seen
    # Each reflection reaches two groups; the copies fold into one bullet each. The
    # copied line is no label and no insight, so it is ignored.
    contents = sorted(b.content for b in report.playbook.bullets)
    assert contents == [f"When greeting ticket {i}, T-{i}." for i in range(4)]


def test_the_small_curator_prompt_shows_plain_rules_only() -> None:
    from langgraph_combee._core.types import Reflection

    playbook = Playbook().apply([Add(section="others", content="Refunds: FIN-7Q")]).playbook
    reflection = Reflection(trace_id="t1", key_insight="Locked out: SEC-4X")
    curator = str(prompts.small_curator_messages(playbook, [("R1", reflection)])[1].content)
    assert "[R1] Locked out: SEC-4X" in curator and "- Refunds: FIN-7Q" in curator
    assert "helpful=" not in curator and "root_cause" not in curator


def test_the_transcript_is_left_out_when_it_repeats_input_and_answer() -> None:
    plain = Trace(
        input="My parcel is late",
        output="GENERAL",
        messages=[
            {"role": "human", "content": "My parcel is late"},
            {"role": "ai", "content": "GENERAL"},
        ],
        feedback=Feedback(correct=False, ground_truth="LOG-5T"),
    )
    assert "Run transcript" not in str(prompts.reflector_messages(plain, Playbook())[1].content)
    with_tools = Trace.model_validate(
        {
            **plain.model_dump(),
            "tool_calls": [{"name": "track", "args": {"id": "1"}, "result": "lost"}],
        }
    )
    assert "Run transcript" in str(prompts.reflector_messages(with_tools, Playbook())[1].content)


def test_the_small_reflector_skips_runs_scored_correct() -> None:
    seen: list[str] = []
    traces = [
        Trace(
            input=f"ticket {i} says hello",
            output=f"T-{i}" if i % 2 else "GENERAL",
            feedback=Feedback(correct=bool(i % 2), ground_truth=f"T-{i}"),
        )
        for i in range(4)
    ]
    combee = Combee(
        prompt_id="skip",
        model=_small_learner([], [], seen),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(traces)
    assert report.steps[0].calls["reflect"] == 2
    assert sorted(b.content for b in report.playbook.bullets) == [
        "When greeting ticket 0, T-0.",
        "When greeting ticket 2, T-2.",
    ]
    # All correct: nothing to reflect on, no call, and the step still succeeds.
    calls = len(seen)
    right = [t for t in traces if t.feedback and t.feedback.correct]
    assert combee.learn(right).steps[0].calls.get("reflect", 0) == 0
    assert len(seen) == calls


@pytest.mark.parametrize("action", ["answer {", "{", "answer ``", "reply: [", "answer -"])
def test_an_action_with_no_word_gives_no_rule(action: str) -> None:
    # The hotel tool trial (frontdesk-tools-trial-c) learned "When shower or hot water,
    # answer {." from a reply cut at its first bracket.
    out = SmallReflectionOut(situation="shower or hot water", action=action)
    assert out.to_reflection("t1").is_empty()
    kept = SmallReflectionOut(situation="shower or hot water", action="answer ENG-7")
    assert kept.to_reflection("t1").key_insight == "When shower or hot water, answer ENG-7."


def test_the_small_aggregator_is_asked_only_about_proposals_with_different_actions() -> None:
    import asyncio

    from langgraph_combee._algorithm.roles import SmallRoles
    from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller

    bodies: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        bodies.append(str(messages[-1].content))
        return json.dumps({"drop": ["P2.1"]})

    def run(proposals: list[list[Add]]) -> tuple[str, list[str]]:
        caller = LLMCaller(
            FunctionChatModel(reply), CallSettings(max_attempts=1, backoff_initial=0)
        )
        result = asyncio.run(
            SmallRoles().aggregate(
                caller, Playbook(), proposals, [], CallStats(), token_budget=None
            )
        )
        return result.mode, [op.content for op in result.ops if isinstance(op, Add)]

    def add(content: str, source: str) -> Add:
        return Add(section="others", content=content, sources=[source])

    alike = [
        [add("When refund, answer FIN-7Q.", "t1")],
        [add("When refund or money back, answer FIN-7Q.", "t2")],
    ]
    # One action for the situation: the rules layer folds them, no call is made.
    assert run(alike) == (
        "nothing to merge",
        ["When refund, answer FIN-7Q.", "When refund or money back, answer FIN-7Q."],
    )
    assert bodies == []
    rival = [*alike, [add("When refund, answer PAY-2D.", "t3")]]
    mode, kept = run(rival)
    assert mode == "merged"
    assert len(bodies) == 1 and "PAY-2D" in bodies[0] and "money back" in bodies[0]
    # P2.1 left out keeps what no rule of another action names ("money back").
    assert kept == [
        "When refund, answer FIN-7Q.",
        "When money back, answer FIN-7Q.",
        "When refund, answer PAY-2D.",
    ]


def test_a_reviewers_note_names_no_value_of_its_own_run_in_the_rule() -> None:
    note = "When renewing, repeat the card number (AL-77102) so they know which account."
    out = SmallReflectionOut(situation="loan renewal", action="renew")
    said = "Please renew my books, card AL-77102."
    rewritten = "repeat the card number (AL-77102) so they know which account"
    for instruction in (rewritten, None):
        rule = out.to_reflection("t1", source=said, note=note, instruction=instruction)
        assert "AL-77102" not in rule.key_insight and "the value in the input" in rule.key_insight
    # A value the request does not hold is the house's and stays.
    house = "Lost items: open with 'Please fill in form LD-7.'"
    rule = out.to_reflection("t1", source="I lost a book", note=house)
    assert "LD-7" in rule.key_insight
