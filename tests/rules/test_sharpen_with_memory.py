"""Attacks on sharpening with the input memory: served rules narrowed, counts, races, edge cases."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, Trace
from langgraph_combee._algorithm.stages import NO_CORRECTIONS, STEP_STAGES, Stage
from langgraph_combee._algorithm.strategies import StepContext, finish
from langgraph_combee._core.ops import Add, DeltaOp, Update
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import StepReport
from langgraph_combee._learner.versions import ApplyPipeline
from langgraph_combee._llm.calls import CallSettings, LLMCaller
from langgraph_combee._rules import rules
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, fake_learner

LOG = "answer LOG-5T"
FIN = "answer FIN-7Q"


def _ticket(tid: str, text: str, truth: str | None = None) -> Trace:
    feedback = Feedback(correct=False, ground_truth=truth) if truth else Feedback(correct=False)
    return Trace(id=tid, input=text, output="GENERAL", feedback=feedback)


def _playbook(*rules_: str, sources: Sequence[str] = (), helpful: int = 0) -> Playbook:
    ops = [Add(section="others", content=r, sources=list(sources)) for r in rules_]
    pb = Playbook().apply(ops, version=1).playbook
    return pb.replace_bullets([b.model_copy(update={"helpful": helpful}) for b in pb.bullets])


def _blender_memory() -> list[rules.Seen]:
    """Two refund tickets and one parcel ticket, all naming a blender."""
    return rules.seen_inputs(
        [
            _ticket("a", "The blender needs a refund.", "FIN-7Q"),
            _ticket("b", "Refund my blender.", "FIN-7Q"),
            _ticket("c", "The parcel tracking with my blender is stuck.", "LOG-5T"),
        ]
    )


def _context(memory: rules.InputMemory, *, stages: tuple[Stage, ...] = STEP_STAGES) -> StepContext:
    # No guard and no dedup: finish then makes no model call, and what it applies is
    # exactly what the rules layer decided.
    caller = LLMCaller(FunctionChatModel(lambda _: "{}"), CallSettings())
    return StepContext(caller=caller, guard=None, dedup=False, memory=memory, stages=stages)


def _finish(
    ctx: StepContext, playbook: Playbook, ops: Sequence[DeltaOp], traces: Sequence[Trace]
) -> tuple[Playbook, StepReport]:
    report = StepReport(strategy="test", batch_size=len(traces))
    new, _ = asyncio.run(finish(ctx, playbook, ops, version=2, report=report, traces=traces))
    return new, report


def _contents(playbook: Playbook) -> list[str]:
    return sorted(b.content for b in playbook.bullets)


# ---------------------------------------------------------------- one bullet, two UPDATEs


def test_a_rule_narrowed_and_widened_in_one_step_keeps_both_changes() -> None:
    # The memory shows "blender" is shared with refund tickets; the step's new parcel
    # rule widens the same bullet. Reconcile's UPDATE was built on the text before the
    # narrowing and came last, so "blender" came back while the report counted it gone.
    pb = _playbook("When parcel tracking or blender, answer LOG-5T.", "When refund, answer FIN-7Q.")
    memory = rules.InputMemory()
    memory._keep(_blender_memory())
    batch = [_ticket("d", "Where is my shipment? I need a delivery date.", "LOG-5T")]
    ops = [Add(section="others", content="When delivery date, answer LOG-5T.", sources=["d"])]
    new, report = _finish(_context(memory), pb, ops, batch)
    assert _contents(new) == [
        "When parcel tracking or delivery date, answer LOG-5T.",
        "When refund, answer FIN-7Q.",
    ]
    assert report.vague_alternatives == 1


def test_a_narrowed_rule_corrected_in_the_same_step_is_corrected_from_its_narrowed_text() -> None:
    # A correction (another action for one alternative) of a bullet the memory narrows:
    # the correction removes its alternative from what is left, nothing is revived.
    pb = _playbook("When parcel tracking or blender or late delivery, answer LOG-5T.")
    memory = rules.InputMemory()
    memory._keep(_blender_memory())
    batch = [_ticket("e", "My delivery is late and I want a refund", "FIN-7Q")]
    ops = [Add(section="others", content="When late delivery, answer FIN-7Q.", sources=["e"])]
    new, _ = _finish(_context(memory), pb, ops, batch)
    assert _contents(new) == [
        "When late delivery, answer FIN-7Q.",
        "When parcel tracking, answer LOG-5T.",
    ]


# ---------------------------------------------------------------- noise and counts


def test_one_contrary_input_does_not_narrow_a_served_rule_whose_own_inputs_are_forgotten() -> None:
    # After a restart (or once its traces left the memory) a rule learned from many
    # runs has no input in memory backing it; one later ticket naming "cancel" for a
    # refund is noise, not evidence that "cancel" misleads (in a new batch the rule's
    # own input would make it a tie).
    pb = _playbook("When cancel or close account, answer ACC-1A.", sources=["gone1", "gone2"])
    memory = rules.seen_inputs(
        [
            _ticket("x", "Please cancel the refund, I found the parcel.", "FIN-7Q"),
            _ticket("y", "Where is my parcel?", "LOG-5T"),
        ]
    )
    assert rules.sharpen_playbook(pb, memory) == ([], 0)
    # Two such inputs are evidence.
    more = [*memory, *rules.seen_inputs([_ticket("z", "cancel my refund", "FIN-7Q")])]
    ops, dropped = rules.sharpen_playbook(pb, more)
    assert [op.content for op in ops if isinstance(op, Update)] == [
        "When close account, answer ACC-1A."
    ]
    assert dropped == 1


def test_a_right_rule_outlasts_a_word_one_other_input_shares_in_a_large_memory() -> None:
    pb = _playbook("When refund or money back, answer FIN-7Q.", sources=["r0"])
    traces = [_ticket(f"r{i}", f"refund for order {i} please", "FIN-7Q") for i in range(40)]
    traces += [_ticket(f"l{i}", f"parcel {i} is late", "LOG-5T") for i in range(400)]
    traces.append(_ticket("odd", "no refund needed, where is my parcel", "LOG-5T"))
    memory = rules.InputMemory(limit=512)
    memory.remember(traces)
    assert rules.sharpen_playbook(pb, memory.items()) == ([], 0)


def test_the_count_is_of_alternatives_a_served_rule_loses() -> None:
    pb = _playbook("When parcel tracking or blender or refund blender, answer LOG-5T.")
    ops, dropped = rules.sharpen_playbook(pb, _blender_memory())
    assert [op.content for op in ops if isinstance(op, Update)] == [
        "When parcel tracking, answer LOG-5T."
    ]
    assert dropped == 2
    memory = rules.InputMemory()
    memory._keep(_blender_memory())
    _, report = _finish(_context(memory), pb, [], [])
    assert report.vague_alternatives == 2


# ---------------------------------------------------------------- the memory itself


def test_the_memory_limit_is_checked_like_every_setting() -> None:
    for bad in (-1, True, 2.5, "8"):
        with pytest.raises(ConfigurationError, match="limit"):
            rules.InputMemory(limit=bad)  # type: ignore[arg-type]


def test_a_memory_of_limit_zero_keeps_nothing_and_narrows_nothing() -> None:
    memory = rules.InputMemory(limit=0)
    memory.remember([_ticket(str(i), f"blender {i}", "FIN-7Q") for i in range(5)])
    assert len(memory) == 0
    pb = _playbook("When parcel tracking or blender, answer LOG-5T.")
    new, report = _finish(_context(memory), pb, [], [])
    assert _contents(new) == _contents(pb) and report.vague_alternatives == 0


def test_traces_without_input_identical_inputs_and_no_ground_truth_change_nothing() -> None:
    pb = _playbook("When parcel tracking or blender, answer LOG-5T.")
    empty = rules.seen_inputs([_ticket("e1", "   ", "FIN-7Q"), _ticket("e2", "", "FIN-7Q")])
    assert empty == []
    # Identical inputs with one truth: nothing needed another action.
    same = rules.seen_inputs([_ticket(f"s{i}", "blender parcel", "LOG-5T") for i in range(9)])
    assert rules.sharpen_playbook(pb, same) == ([], 0)
    # No ground truth and no rule from them: nothing is known of what they needed.
    blind = rules.seen_inputs([_ticket(f"b{i}", "my blender broke", None) for i in range(9)])
    assert rules.sharpen_playbook(pb, blind) == ([], 0)


def test_rules_not_in_when_form_are_never_touched() -> None:
    pb = _playbook(
        "Always route blender tickets to LOG-5T or FIN-7Q depending on the refund.",
        "Answer in one line; never guess.",
    )
    assert rules.sharpen_playbook(pb, _blender_memory()) == ([], 0)
    ops = [Add(section="others", content="Blender tickets: LOG-5T.", sources=["c"])]
    assert rules.sharpen(ops, [], _blender_memory()) == (ops, 0)


def test_a_situation_of_stop_words_and_one_content_word_is_about_that_word() -> None:
    assert rules.situation_words("how to cancel") == frozenset({"cancel"})
    assert rules.situation_words("what can I do about my refund") == frozenset({"refund"})
    memory = rules.seen_inputs(
        [
            _ticket("c1", "How do I cancel my plan?", "ACC-1A"),
            _ticket("c2", "Can you cancel it for me", "ACC-1A"),
            _ticket("r1", "How do I get my money back?", "FIN-7Q"),
        ]
    )
    pb = _playbook("When how to cancel or how do I, answer ACC-1A.", sources=["c1"])
    # "how do I" has no content word: no input can judge it, it stays; "cancel" tells ACC apart.
    assert rules.sharpen_playbook(pb, memory) == ([], 0)


def test_narrowing_never_leaves_an_empty_or_malformed_rule() -> None:
    memory = [
        *_blender_memory(),
        *rules.seen_inputs(
            [
                _ticket("o1", "order 12 blender refund", "FIN-7Q"),
                _ticket("o2", "order 13 parcel blender", "FIN-7Q"),
            ]
        ),
    ]
    situations = [
        "blender or parcel",
        "blender; refund blender; order",
        "parcel tracking or blender or the blender or order 12",
        "order or blender",
        "blender or blenders",
    ]
    for situation in situations:
        pb = _playbook(f"When {situation}, answer LOG-5T.")
        ops, dropped = rules.sharpen_playbook(pb, memory)
        for op in ops:
            assert isinstance(op, Update)
            rule = rules.parse_rule(op.content)
            assert rule is not None and rule.action == LOG
            kept = rules.alternatives(rule.situation)
            assert kept and all(a.strip() for a in kept)
            assert set(kept) < set(rules.alternatives(situation))
            assert dropped == len(rules.alternatives(situation)) - len(kept)


# ---------------------------------------------------------------- guard, pending, registry


def test_a_pending_bullet_is_not_narrowed_until_it_is_served() -> None:
    pb = _playbook("When parcel tracking or blender, answer LOG-5T.")
    pending = pb.replace_bullets([b.model_copy(update={"pending": True}) for b in pb.bullets])
    assert rules.sharpen_playbook(pending, _blender_memory()) == ([], 0)


def test_a_narrowing_of_a_bullet_an_operator_rewrote_since_is_dropped_on_rebase() -> None:
    base = _playbook("When parcel tracking or blender, answer LOG-5T.")
    bid = base.bullets[0].id
    ops, _ = rules.sharpen_playbook(base, _blender_memory())
    learned = base.apply(ops, version=2).playbook
    # The operator rewrote the rule meanwhile; their text wins over the narrowing.
    edited = base.apply(
        [Update(id=bid, content="When parcel or shipment, answer LOG-5T.")], version=2
    ).playbook
    rebased = asyncio.run(
        ApplyPipeline(guard=None).reapply(ops, edited, version=3, learned=learned, base=base)
    )
    assert _contents(rebased) == ["When parcel or shipment, answer LOG-5T."]
    # A rolled-back bullet (gone from HEAD) makes the UPDATE an unknown id: skipped.
    gone = Playbook()
    rebased = asyncio.run(
        ApplyPipeline(guard=None).reapply(ops, gone, version=3, learned=learned, base=base)
    )
    assert rebased.bullets == []


# ---------------------------------------------------------------- the learner end to end


def _router(
    *, extra: str = " or blender"
) -> FunctionChatModel:  # the 1.5B's habit: parcel reflections name the item too
    topics = {"parcel": "LOG-5T", "refund": "FIN-7Q"}

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            head = body.split("ground_truth")[0].lower()
            topic = next(t for t in topics if t in head)
            more = extra if topic == "parcel" else ""
            return json.dumps({"situation": f"{topic} question{more}", "action": topics[topic]})
        if "You are the curator" in system:
            return json.dumps({"add": sorted(set(re.findall(r"\[(R\d+)\]", body)))})
        return json.dumps({"drop": []})

    return FunctionChatModel(reply)


_STREAM = [
    ("t0", "My parcel with the blender is late", "LOG-5T"),
    ("t1", "Refund for the blender please", "FIN-7Q"),
    ("t2", "The blender broke, I want a refund", "FIN-7Q"),
    ("t3", "The parcel with my blender never came", "LOG-5T"),
    ("t4", "A refund for the blender, it is broken", "FIN-7Q"),
    ("t5", "My blender refund has not arrived", "FIN-7Q"),
]


@pytest.mark.parametrize("strategy", ["sequential", "naive", "combee"])
def test_six_steps_settle_after_a_narrowing_is_widened_back(strategy: str) -> None:
    combee = Combee(
        prompt_id=f"settle-{strategy}",
        model=_router(),
        strategy=strategy,
        batch_size=1,
        algorithm=AlgorithmSettings(roles="small"),
    )
    seen: list[list[str]] = []
    for tid, text, truth in _STREAM:
        seen.append(_contents(combee.learn([_ticket(tid, text, truth)]).playbook))
    parcel = [next(c for c in s if "LOG-5T" in c) for s in seen]
    # t2 narrows (blender: 1 parcel, 2 refund tickets); t3's rule names it again and
    # ties (2 each way) so it widens back; t4 narrows again; t5 adds only evidence.
    assert parcel == [
        "When parcel question or blender, LOG-5T.",
        "When parcel question or blender, LOG-5T.",
        "When parcel question, LOG-5T.",
        "When parcel question or blender, LOG-5T.",
        "When parcel question, LOG-5T.",
        "When parcel question, LOG-5T.",
    ]
    # Once the evidence leans one way, a parcel ticket naming the blender again does
    # not widen the rule back: the new rule's "blender" is sharpened on the same memory.
    # "late", now in two parcel tickets and no refund ticket, joins as a telling word.
    after = combee.learn([_ticket("t6", "The parcel and blender are late", "LOG-5T")])
    assert next(c for c in _contents(after.playbook) if "LOG-5T" in c) == (
        "When parcel question or late, LOG-5T."
    )
    assert after.steps[0].vague_alternatives == 1
    assert after.steps[0].telling_words == 1


def test_with_corrections_off_served_rules_are_not_narrowed_but_inputs_are_remembered() -> None:
    pb = _playbook("When parcel tracking or blender, answer LOG-5T.")
    memory = rules.InputMemory()
    memory._keep(_blender_memory())
    batch = [_ticket("d", "Refund the blender", "FIN-7Q")]
    new, report = _finish(_context(memory, stages=NO_CORRECTIONS), pb, [], batch)
    assert _contents(new) == _contents(pb) and report.vague_alternatives == 0
    assert [item.id for item in memory.items()] == ["a", "b", "c", "d"]


def test_each_tenant_learns_on_its_own_memory() -> None:
    combee = Combee(
        prompt_id="tenants",
        model=_router(),
        batch_size=1,
        algorithm=AlgorithmSettings(roles="small"),
    )
    a, b = combee._engine("a"), combee._engine("b")
    assert a.context.memory is not b.context.memory
    assert combee._engine(None).context.memory not in (a.context.memory, b.context.memory)
    combee.learn([_ticket("t1", "Refund for the blender please", "FIN-7Q")], tenant="a")
    assert [i.id for i in a.context.memory.items()] == ["t1"] and len(b.context.memory) == 0


def test_two_threads_learning_on_one_combee_keep_every_input() -> None:
    combee = Combee(
        prompt_id="threads",
        model=_router(),
        batch_size=1,
        algorithm=AlgorithmSettings(roles="small"),
    )
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(prefix: str, topic: str, truth: str) -> None:
        try:
            start.wait()
            for i in range(4):
                combee.learn([_ticket(f"{prefix}{i}", f"{topic} ticket {i}", truth)])
        except BaseException as error:  # the assertion below names it
            errors.append(error)

    threads = [
        threading.Thread(target=run, args=("p", "parcel", "LOG-5T")),
        threading.Thread(target=run, args=("r", "refund", "FIN-7Q")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    memory = combee._engine(None).context.memory
    assert sorted(i.id for i in memory.items()) == sorted(
        [f"p{i}" for i in range(4)] + [f"r{i}" for i in range(4)]
    )


def test_the_full_profile_with_free_text_rules_learns_without_sharpening() -> None:
    combee = Combee(
        prompt_id="full",
        model=fake_learner(),
        batch_size=2,
        algorithm=AlgorithmSettings(roles="full"),
    )
    traces = [_ticket(f"f{i}", f"Question {i} about the blender", "FIN-7Q") for i in range(6)]
    report = combee.learn(traces)
    assert report.playbook.bullets
    assert all(step.vague_alternatives == 0 for step in report.steps)
    assert len(combee._engine(None).context.memory) == 6


def test_a_step_context_made_by_replace_keeps_its_memory() -> None:
    # The benchmarks pass their ablations' stages with dataclasses.replace: the memory is
    # the same object, not a fresh one.
    ctx = _context(rules.InputMemory())
    assert dataclasses.replace(ctx, stages=NO_CORRECTIONS).memory is ctx.memory
