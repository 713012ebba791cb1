"""A learning step is one tuple of named stages: its order, its report entries, its ablations."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from langgraph_combee import Combee, Feedback, Trace
from langgraph_combee._algorithm.stages import (
    NO_CORRECTIONS,
    NO_MERGE,
    REBASE_STAGES,
    STEP_STAGES,
    Counts,
    Stage,
    StepState,
    names,
    rebasing,
    replacing,
    without,
)
from langgraph_combee._algorithm.strategies import (
    CombeeStrategy,
    NaiveStrategy,
    SequentialStrategy,
    StepContext,
    Strategy,
)
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._learner.versions import ApplyPipeline
from langgraph_combee._llm.calls import CallSettings, LLMCaller
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import StepReport
from tests.helpers import failing_traces

ORDER = (
    "reflect",
    "tag",
    "shuffle",
    "propose",
    "aggregate",
    "left_out",
    "conventions",
    "formats",
    "remember",
    "served",
    "reconcile",
    "collect",
    "kinds",
    "confirmed",
    "fit",
    "screen",
    "examples",
    "apply",
    "support",
    "clean",
    "dedup",
    "promote",
    "budget",
)


def _context(stages: tuple[Stage, ...] = STEP_STAGES, **kw: object) -> StepContext:
    return StepContext(
        caller=LLMCaller(fake_learner(), CallSettings()),
        guard=None,
        stages=stages,
        **kw,  # type: ignore[arg-type]
    )


def _step(strategy: Strategy, ctx: StepContext, n: int = 9) -> StepReport:
    result = asyncio.run(strategy.step(ctx, Playbook(), failing_traces(n), version=1))
    return result.report


def test_the_step_is_one_tuple_in_this_order() -> None:
    assert names(STEP_STAGES) == ORDER
    # learn(), the background learner and rebasing all start from it.
    combee = Combee(prompt_id="p", model=fake_learner())
    assert combee._engine(None).context.stages is STEP_STAGES
    assert combee._stepper.writer.pipeline.stages is STEP_STAGES
    assert StepContext().stages is STEP_STAGES and ApplyPipeline().stages is STEP_STAGES


@pytest.mark.parametrize("strategy", [CombeeStrategy(), NaiveStrategy()])
def test_each_stage_run_adds_its_entry_to_the_report(strategy: Strategy) -> None:
    report = _step(strategy, _context())
    assert [e.name for e in report.stages] == list(ORDER)
    entries = {e.name: e for e in report.stages}
    assert all(e.runs == 1 and e.seconds >= 0 for e in report.stages)
    assert entries["reflect"].counts == {"reflections": 9, "carried_nothing": 0}
    assert entries["shuffle"].counts == {"groups": len(report.group_sizes)}
    assert entries["apply"].counts["add"] == report.ops["add"] == 9
    # Stored and read back as JSON, like the rest of the report.
    again = StepReport.model_validate_json(report.model_dump_json())
    assert again.stages == report.stages


def test_a_report_without_stage_entries_still_reads() -> None:
    assert StepReport.model_validate({"strategy": "combee", "batch_size": 1}).stages == []


def test_run_by_run_each_stage_keeps_one_entry_with_its_runs() -> None:
    report = _step(SequentialStrategy(), _context(), n=4)
    assert [e.name for e in report.stages] == list(ORDER)
    assert {e.runs for e in report.stages} == {4}
    entries = {e.name: e for e in report.stages}
    assert entries["propose"].counts["calls"] == 4 == report.calls["curate"]


def test_the_merge_ablation_passes_union_in_the_place_of_aggregate() -> None:
    assert names(NO_MERGE) == tuple("union" if n == "aggregate" else n for n in ORDER)
    report = _step(CombeeStrategy(), _context(NO_MERGE))
    assert "aggregate" not in [e.name for e in report.stages]
    assert report.aggregation == "union" and "aggregate" not in report.calls
    # Each of the 9 reflections reached two curators: the union keeps both copies.
    assert {e.name: e for e in report.stages}["union"].counts["ops"] == 18


def test_the_corrections_ablation_leaves_out_the_correcting_stages() -> None:
    left_out = {"served", "reconcile", "clean"}
    assert set(ORDER) - set(names(NO_CORRECTIONS)) == left_out
    assert names(NO_CORRECTIONS)[ORDER.index("collect") - 2] == "adds_only"
    report = _step(NaiveStrategy(), _context(NO_CORRECTIONS))
    assert [e.name for e in report.stages] == list(names(NO_CORRECTIONS))


def test_a_stage_left_out_does_not_run() -> None:
    tight = {"token_budget": 50}
    evicted = _step(NaiveStrategy(), _context(**tight), n=12)
    kept = _step(NaiveStrategy(), _context(without(STEP_STAGES, "budget"), **tight), n=12)
    assert evicted.evicted > 0
    assert kept.evicted == 0 and "budget" not in [e.name for e in kept.stages]


def test_unknown_or_repeated_stage_names_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'corect'"):
        without(STEP_STAGES, "corect")
    with pytest.raises(ConfigurationError, match="'agregate'"):
        replacing(STEP_STAGES, "agregate", STEP_STAGES[0])
    with pytest.raises(ConfigurationError, match="repeat"):
        StepContext(stages=(*STEP_STAGES, STEP_STAGES[0]))
    with pytest.raises(ConfigurationError, match="a tuple of Stage"):
        StepContext(stages=list(STEP_STAGES))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'clean up'"):
        Stage(name="clean up", run=STEP_STAGES[0].run)


def test_rebasing_runs_the_rebase_part_of_the_same_tuple() -> None:
    assert names(REBASE_STAGES) == names(rebasing(STEP_STAGES))
    assert names(REBASE_STAGES) == (
        "stale",
        "screen",
        "apply",
        "support",
        "dedup",
        "promote",
        "budget",
    )
    seen: list[str] = []

    async def spy(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
        seen.append(state.report.strategy)
        return state, {}

    stages = replacing(STEP_STAGES, "promote", Stage(name="promote", run=spy, rebase=True))
    onto = Playbook().apply([Add(section="others", content="Greet by name.")], version=1).playbook
    ops = [Add(section="others", content="Greet by name!")]

    def reapply(pipeline: ApplyPipeline) -> list[str]:
        new = asyncio.run(pipeline.reapply(ops, onto, version=2, learned=onto))
        return [b.content for b in new.bullets]

    assert reapply(ApplyPipeline(stages=stages)) == ["Greet by name."]
    assert seen == ["rebase"]
    # Without the step's dedup stage, rebasing does not de-duplicate either.
    assert reapply(ApplyPipeline(stages=without(stages, "dedup"))) == [
        "Greet by name.",
        "Greet by name!",
    ]


def test_a_replaced_context_keeps_its_stages() -> None:
    ctx = _context(NO_MERGE)
    assert dataclasses.replace(ctx, dedup=False).stages is NO_MERGE


def _one_role(system_start: str, reply: str, asked: list[str] | None = None) -> LLMCaller:
    """A learner that answers only the role whose system prompt starts so; "{}" otherwise.

    Each prompt body it is sent goes into ``asked``.
    """
    from langchain_core.messages import BaseMessage

    from langgraph_combee._algorithm.engine import call_settings
    from langgraph_combee._settings import LearnerSettings
    from langgraph_combee.testing import FunctionChatModel

    def answer(messages: list[BaseMessage]) -> str:
        if asked is not None:
            asked.append(messages[-1].text)
        return reply if messages and messages[0].text.startswith(system_start) else "{}"

    return LLMCaller(FunctionChatModel(answer), call_settings(LearnerSettings()))


def _labelled(i: int, text: str, truth: str) -> Trace:

    return Trace(
        id=f"t{i}",
        input=text,
        output="?",
        feedback=Feedback(correct=False, ground_truth=truth, source="operator"),
    )


def _state(traces: list[Trace], ops: list[Add]) -> StepState:
    return StepState(
        playbook=Playbook(),
        version=1,
        report=StepReport(strategy="combee", batch_size=len(traces)),
        batch=traces,
        ops=ops,
    )


def test_kinds_names_a_rule_from_all_its_runs_and_keeps_it_on_a_bad_reply() -> None:
    from langgraph_combee._algorithm.stages import correcting

    lamps = [_labelled(1, "The lamp on Elm Road flickers", "SR-305"),
             _labelled(2, "Street light out by the school", "SR-305"),
             _labelled(3, "Pothole on the junction", "SR-214")]  # fmt: skip
    ops = [
        Add(section="others", content="When lamp or flickers or light, answer SR-305.",
            sources=["t1", "t2"]),
        Add(section="others", content="When pothole, answer SR-214.", sources=["t3"]),
    ]  # fmt: skip
    named = _one_role("You say what several", '{"kind": "a broken street light"}')
    state, counts = asyncio.run(correcting.kinds(StepContext(caller=named), _state(lamps, ops)))
    # The kind leads; the reflectors' words stay as its cases.
    assert [op.content for op in state.ops] == [
        "When a broken street light or lamp or flickers or light, answer SR-305.",
        "When pothole, answer SR-214.",  # one run: the reflector's words stay
    ]
    assert counts == {"named": 1, "kept": 0}
    for bad in ('{"kind": "SR-305 requests"}', '{"kind": "lamp 12"}', '{"kind": ""}', "nonsense"):
        ctx = StepContext(caller=_one_role("You say what several", bad))
        state, counts = asyncio.run(correcting.kinds(ctx, _state(lamps, ops)))
        assert state.ops[0].content == ops[0].content and counts == {"named": 0, "kept": 1}


def _right(i: int, text: str, truth: str, source: str = "operator") -> Trace:
    return Trace(
        id=f"t{i}",
        input=text,
        output=truth,
        feedback=Feedback(correct=True, ground_truth=truth, source=source),
    )


def test_confirmed_writes_the_rule_for_a_label_the_agent_already_gets_right() -> None:
    from langgraph_combee._algorithm.stages import correcting
    from langgraph_combee._rules.rules import Seen

    runs = [_right(1, "I want a refund for the broken box", "refund"),
            _right(2, "Please refund last week's order", "refund"),
            _right(3, "Pause my deliveries for a month", "pause"),
            _labelled(4, "Cancel it all", "cancel")]  # fmt: skip
    asked: list[str] = []
    named = _one_role("You say what several", '{"kind": "money back on an order"}', asked)
    state, counts = asyncio.run(correcting.confirmed(StepContext(caller=named), _state(runs, [])))
    # Two right runs share "refund": one call, shown both. "pause" has one input, and the
    # wrong run's label is the reflectors' to learn.
    assert [(op.content, op.sources) for op in state.ops] == [
        ("When money back on an order, answer refund.", ["t1", "t2"])
    ]
    assert counts == {"rules": 1, "unnamed": 0} and len(asked) == 1
    assert "broken box" in asked[0] and "last week" in asked[0]
    # An earlier step's input with the same label makes the pair.
    earlier = Seen(id="t0", words=frozenset(), truth="pause", text="Hold my boxes for 3 weeks")
    paused = dataclasses.replace(_state(runs[2:3], []), earlier=[earlier])
    rest = _one_role("You say what several", '{"kind": "a break in deliveries"}')
    state, _ = asyncio.run(correcting.confirmed(StepContext(caller=rest), paused))
    assert [op.content for op in state.ops] == ["When a break in deliveries, answer pause."]


def test_confirmed_leaves_answered_labels_untrusted_ones_and_bad_kinds() -> None:
    from langgraph_combee._algorithm.stages import correcting
    from langgraph_combee._core.playbook import Bullet
    from langgraph_combee._guard.guard import BulletGuard

    runs = [_right(1, "I want a refund", "refund"), _right(2, "Refund me please", "refund")]
    named = _one_role("You say what several", '{"kind": "money back on an order"}')
    # A rule in force, or one the step adds, already answers it.
    known = Playbook(bullets=[Bullet(id="b1", section="others",
                                     content="When money back, answer refund.")])  # fmt: skip
    state = dataclasses.replace(_state(runs, []), playbook=known)
    assert asyncio.run(correcting.confirmed(StepContext(caller=named), state))[0].ops == []
    step_rule = Add(section="others", content="When refund, answer refund.", sources=["t1"])
    state, _ = asyncio.run(
        correcting.confirmed(StepContext(caller=named), _state(runs, [step_rule]))
    )
    assert state.ops == [step_rule]
    # A ground truth the guard does not trust (a long one from an end user) is no label.
    long = "refund the whole order and add a voucher for the trouble"
    users = [_right(1, "I want my money", long, "user"), _right(2, "Money back", long, "user")]
    guarded = StepContext(caller=named, guard=BulletGuard())
    assert asyncio.run(correcting.confirmed(guarded, _state(users, [])))[0].ops == []
    # A kind that names the answer, holds a digit or covers every request writes nothing.
    for bad in ('{"kind": "refund requests"}', '{"kind": "any message"}', "nonsense"):
        ctx = StepContext(caller=_one_role("You say what several", bad))
        state, counts = asyncio.run(correcting.confirmed(ctx, _state(runs, [])))
        assert state.ops == [] and counts == {"rules": 0, "unnamed": 1}


def test_formats_replaces_each_runs_own_answer_by_the_format_they_share() -> None:
    from langgraph_combee._algorithm.stages import correcting

    calls = [
        ("Maria here, call 0612-345-678 at 10am", "CB;Maria;0612345678;AM"),
        ("Ring Peter on (020) 555 0199 after 2 pm", "CB;Peter;0205550199;PM"),
        ("Tom, 07700 900123, 9:30 in the morning", "CB;Tom;07700900123;AM"),
    ]
    traces = [_labelled(i, text, truth) for i, (text, truth) in enumerate(calls)]
    traces.append(_labelled(9, "A refund please", "refund"))
    ops = [
        Add(section="others", content=f"When callback request, answer {truth}.", sources=[f"t{i}"])
        for i, (_, truth) in enumerate(calls)
    ]
    ops.append(Add(section="others", content="When refund, answer refund.", sources=["t9"]))
    good = '{"format": "CB;<first name>;<phone, digits only>;<AM or PM>"}'
    ctx = StepContext(caller=_one_role("You find the format", good))
    state, counts = asyncio.run(correcting.formats_stage(ctx, _state(traces, ops)))
    assert [op.content for op in state.ops] == [
        "When callback request, answer in the format CB;[first name];[phone, digits only];"
        "[AM or PM].",
        "When refund, answer refund.",
    ]
    assert state.ops[0].sources == ["t0", "t1", "t2"]
    assert counts == {"formats": 1, "rules": 3}
    # A format whose fixed parts do not write every answer, or that names one run's
    # value, changes nothing.
    for bad in ('{"format": "CB;<name>;<phone>"}', '{"format": "CB;Maria;<phone>;<AM or PM>"}'):
        ctx = StepContext(caller=_one_role("You find the format", bad))
        state, counts = asyncio.run(correcting.formats_stage(ctx, _state(traces, ops)))
        assert [op.content for op in state.ops] == [op.content for op in ops]
        assert counts == {"formats": 0, "rules": 0}


def test_formats_never_asks_about_answers_runs_share() -> None:
    from langgraph_combee._algorithm.stages import correcting

    asked: list[str] = []
    traces = [_labelled(1, "My Lamp Light is out", "Lamp Light"),
              _labelled(2, "lamp light flickers", "Lamp Light"),
              _labelled(3, "Road Hole by the school", "Road Hole")]  # fmt: skip
    ops = [
        Add(section="others", content=f"When x, answer {t.feedback.ground_truth}.", sources=[t.id])
        for t in traces
        if t.feedback is not None
    ]
    caller = _one_role("You find the format", '{"format": "Lamp <b>"}', asked)
    state, counts = asyncio.run(
        correcting.formats_stage(StepContext(caller=caller), _state(traces, ops))
    )
    # "Lamp Light" is two runs' answer (a label), "Road Hole" one run's with no other alike.
    assert counts == {"formats": 0, "rules": 0} and asked == []
    assert [op.content for op in state.ops] == [op.content for op in ops]


def test_kinds_names_a_rule_in_force_the_step_widens_from_the_inputs_remembered() -> None:
    from langgraph_combee._algorithm.stages import correcting
    from langgraph_combee._core.ops import Update
    from langgraph_combee._rules.rules import Seen

    earlier = Seen(id="t0", words=frozenset(), actions=("answer SR-305",), text="Lamp post dark")
    runs = [_labelled(1, "The street light blinks all night", "SR-305")]
    widened = Update(id="b1", content="When lamp or blinks, answer SR-305.", sources=["t1"])
    state = dataclasses.replace(_state(runs, []), ops=[widened], remembered=[earlier])
    named = _one_role("You say what several", '{"kind": "a broken street light"}')
    state, counts = asyncio.run(correcting.kinds(StepContext(caller=named), state))
    assert state.ops == [
        Update(
            id="b1",
            content="When a broken street light or lamp or blinks, answer SR-305.",
            sources=["t1"],
        )
    ]
    assert counts == {"named": 1, "kept": 0}


def test_a_kind_with_or_stays_one_alternative() -> None:
    from langgraph_combee._algorithm.schemas import KindOut

    assert KindOut(kind="a late or missing delivery").situation("answer X") == (
        "a late/missing delivery"
    )


def test_a_format_part_is_a_label_never_an_instruction_nor_every_request() -> None:
    from langgraph_combee._algorithm.schemas import FormatOut

    answers = ["CB;Maria;0612345678;AM", "CB;Peter;0205550199;PM"]
    requests = ["Maria, phone me on 0612-345-678 at 10am", "Peter, (020) 555 0199, 2 pm"]
    # "phone" is one request's word: a plain label of a part all the same.
    assert FormatOut(format="CB;<name>;<phone number>;<time>").format_for(answers, requests)
    for bad in ("CB;<name>;<phone. Always say hi>;<time>", "CB;<name>;<any number>;<time>"):
        assert FormatOut(format=bad).format_for(answers, requests) is None


def test_formats_pairs_a_run_of_the_batch_with_one_seen_in_an_earlier_step() -> None:
    from langgraph_combee._algorithm.stages import correcting
    from langgraph_combee._rules.rules import Seen

    before = Seen(
        id="t0", words=frozenset(), truth="CB;Maria;0612345678;AM", text="Maria, 0612-345-678, 10am"
    )
    runs = [_labelled(1, "Ring Peter on (020) 555 0199 after 2 pm", "CB;Peter;0205550199;PM")]
    ops = [Add(section="others", content="When callback, answer CB;Peter;0205550199;PM.",
               sources=["t1"])]  # fmt: skip
    state = dataclasses.replace(_state(runs, ops), earlier=[before])
    reply = '{"format": "CB;<first name>;<phone>;<time>"}'
    ctx = StepContext(caller=_one_role("You find the format", reply))
    state, counts = asyncio.run(correcting.formats_stage(ctx, state))
    assert [op.content for op in state.ops] == [
        "When callback, answer in the format CB;[first name];[phone, digits only];[time]."
    ]
    assert counts == {"formats": 1, "rules": 1}
    # Alone, the batch's one run is no format.
    alone, counts = asyncio.run(correcting.formats_stage(ctx, _state(runs, ops)))
    assert alone.ops == ops and counts == {"formats": 0, "rules": 0}


def test_confirmed_takes_a_reply_a_reviewer_approved_as_its_label() -> None:
    from langgraph_combee._algorithm.stages import correcting

    def approved(i: int, text: str, reply: str, source: str) -> Trace:
        return Trace(
            id=f"t{i}", input=text, output=reply, feedback=Feedback(correct=True, source=source)
        )

    named = _one_role("You say what several", '{"kind": "stitches after surgery"}')
    runs = [approved(1, "The wound is weeping", "BV-12", "reviewer"),
            approved(2, "When do the stitches come out?", "BV-12", "reviewer")]  # fmt: skip
    state, _ = asyncio.run(correcting.confirmed(StepContext(caller=named), _state(runs, [])))
    assert [(op.content, op.sources) for op in state.ops] == [
        ("When stitches after surgery, answer BV-12.", ["t1", "t2"])
    ]
    # An end user's or an evaluator's thumbs-up vouches for no reply.
    for source in ("user", "evaluator"):
        runs = [approved(1, "The wound is weeping", "BV-12", source),
                approved(2, "When do the stitches come out?", "BV-12", source)]  # fmt: skip
        state, _ = asyncio.run(correcting.confirmed(StepContext(caller=named), _state(runs, [])))
        assert state.ops == []


def test_formats_falls_back_to_the_fixed_text_the_answers_share_around_a_request_value() -> None:
    from langgraph_combee._algorithm.stages import correcting

    refs = [
        ("Vacancy email: payroll administrator, our ref 4471.", "JR-4471"),
        ("New role: warehouse supervisor, reference number 0932.", "JR-0932"),
        ("Ref: 7718. Two drivers wanted.", "JR-7718"),
    ]
    traces = [_labelled(i, text, truth) for i, (text, truth) in enumerate(refs)]
    ops = [
        Add(section="others", content=f"When vacancy email, answer {truth}.", sources=[f"t{i}"])
        for i, (_, truth) in enumerate(refs)
    ]
    # The learner's own format does not write the answers ("XXXX" is no placeholder).
    ctx = StepContext(caller=_one_role("You find the format", '{"format": "JR-XXXX"}'))
    state, counts = asyncio.run(correcting.formats_stage(ctx, _state(traces, ops)))
    assert [op.content for op in state.ops] == [
        "When vacancy email, answer in the format JR-[number from the message, digits only]."
    ]
    assert counts == {"formats": 1, "rules": 3}


def test_formats_learns_no_format_from_one_customers_name_the_answers_share() -> None:
    from langgraph_combee._algorithm.stages import correcting

    # Two runs of one customer: every answer names her, so her name is "fixed text".
    refs = [
        ("Maria Lopez here, our ref 4471, any news?", "Order for Maria Lopez: ref 4471"),
        ("Maria Lopez again: reference 0932 please.", "Order for Maria Lopez: ref 0932"),
    ]
    traces = [_labelled(i, text, truth) for i, (text, truth) in enumerate(refs)]
    ops = [
        Add(section="others", content=f"When order query, answer {truth}.", sources=[f"t{i}"])
        for i, (_, truth) in enumerate(refs)
    ]
    ctx = StepContext(caller=_one_role("You find the format", '{"format": "none"}'))
    state, counts = asyncio.run(correcting.formats_stage(ctx, _state(traces, ops)))
    assert counts == {"formats": 0, "rules": 0}
    assert state.ops == ops


@pytest.mark.xfail(
    strict=True,
    reason="earlier steps' answers are remembered without the guard's trust: an answer only "
    "an untrusted source gave pairs with one trusted answer to make a format",
)
def test_formats_pairs_no_trusted_answer_with_an_untrusted_earlier_one() -> None:
    from langgraph_combee import BulletGuard
    from langgraph_combee._algorithm.stages import correcting

    guard = BulletGuard(untrusted_truth_sources=["user"])
    ctx = StepContext(caller=_one_role("You find the format", '{"format": "none"}'), guard=guard)
    told = Trace(
        id="u1",
        input="Vacancy email: cook, our ref 9999.",
        output="?",
        feedback=Feedback(correct=False, ground_truth="JR-9999", source="user"),
    )
    asyncio.run(correcting.remember(ctx, _state([told], [])))
    trusted = _labelled(1, "New role: warehouse supervisor, reference number 0932.", "JR-0932")
    op = Add(section="others", content="When vacancy email, answer JR-0932.", sources=["t1"])
    state = dataclasses.replace(_state([trusted], [op]), earlier=ctx.memory.items())
    _, counts = asyncio.run(correcting.formats_stage(ctx, state))
    assert counts == {"formats": 0, "rules": 0}
