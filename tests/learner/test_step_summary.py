"""Why a step learned what it did: StepReport's summary, the INFO line, on_step, describe()."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from langgraph_combee import Combee, LearnerSettings, Trace
from langgraph_combee._core.ops import Add
from langgraph_combee._core.quarantine import QuarantinedOp
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._learner.tally import StepTally
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, fake_learner
from langgraph_combee.types import StepReport
from tests.helpers import FakeClock, background_learner, failing_traces


def _held(reason: str) -> QuarantinedOp:
    return QuarantinedOp(op=Add(section="others", content="When x, answer y."), reasons=[reason])


def _report(**fields: object) -> StepReport:
    base: dict[str, object] = {"strategy": "combee", "batch_size": 4}
    return StepReport.model_validate({**base, **fields})


def test_the_summary_names_every_reason_and_why_no_version_was_written() -> None:
    report = _report(
        trace_ids=["a", "b", "c", "d"],
        ops={"add": 1, "tag": 2},
        merged=2,
        left_out=["When refund, answer FIN."],
        held=[_held("provenance: its action quotes the end user ('zebra'...)")],
        quarantined=[_held("markup: html"), _held("markup: html")],
    )
    assert report.rules() == {
        "proposed": 5,
        "written": 1,
        "held": 1,
        "refused": 2,
        "left_out": 1,
    }
    assert report.reasons() == {
        "left out by curator": 1,
        "merged as duplicate": 2,
        "held: provenance": 1,
        "refused: markup": 2,
    }
    assert report.summary() == (
        "4 traces; rules: 5 proposed, 1 written, 1 held, 2 refused, 1 left out; reasons: "
        "held: provenance 1, left out by curator 1, merged as duplicate 2, refused: markup 2; "
        "no version written: the step left the playbook's text unchanged"
    )


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"version": 3, "accepted": True}, "version 3 accepted (in force)"),
        ({"version": 3, "accepted": False}, "version 3 rejected by the acceptance policy"),
        ({"version": 3}, "version 3 waits for a decision (a candidate)"),
        (
            {"version": 3, "accepted": True, "held_version": 4},
            "version 3 accepted (in force); held rules in candidate 4 (needs a person)",
        ),
    ],
)
def test_the_outcome_says_what_became_of_the_version(fields: dict[str, object], said: str) -> None:
    assert _report(**fields).outcome() == said


def test_a_summary_with_no_reason_says_none() -> None:
    assert "reasons: none;" in _report(ops={"add": 2}, version=1, accepted=True).summary()


def _loop(combee: Combee, **settings: object) -> BackgroundLearner:
    fields: dict[str, object] = {"min_batch": 1, "backoff_jitter": 0}
    return background_learner(combee._learner_parts, clock=FakeClock(), **{**fields, **settings})


def _queue(combee: Combee, traces: Sequence[Trace]) -> None:
    for trace in traces:
        combee.capture(trace)
    combee.flush()


async def test_each_background_step_logs_one_info_line_with_its_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    combee = Combee(prompt_id="logged", model=fake_learner(), batch_size=3)
    _queue(combee, failing_traces(3))
    learner = _loop(combee)
    with caplog.at_level(logging.INFO, logger="langgraph_combee"):
        assert await learner.tick() == 1
    lines = [r for r in caplog.records if r.getMessage().startswith("learning step of")]
    assert len(lines) == 1
    assert lines[0].levelno == logging.INFO
    report = learner.stats.reports[0]
    assert lines[0].getMessage() == f"learning step of 'logged': {report.summary()}"
    assert "version 1 accepted (in force)" in lines[0].getMessage()


def test_on_step_must_be_callable() -> None:
    with pytest.raises(ConfigurationError, match=r"on_step=5 is not allowed: None or a callable"):
        LearnerSettings(on_step=5)  # type: ignore[arg-type]


async def test_on_step_is_told_each_background_step_and_what_it_raises_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told: list[StepReport] = []

    def listener(report: StepReport) -> None:
        told.append(report)
        raise ValueError("the dashboard is down")

    combee = Combee(
        prompt_id="told",
        model=fake_learner(),
        batch_size=2,
        learner=LearnerSettings(on_step=listener),
    )
    _queue(combee, failing_traces(4))
    learner = _loop(combee)
    with caplog.at_level(logging.ERROR, logger="langgraph_combee"):
        assert await learner.tick() == 1
        assert await learner.tick() == 1
    assert told == learner.stats.reports
    assert learner.stats.failed_steps == 0
    assert combee.current().version == 2  # the callback's error stopped nothing
    errors = [r for r in caplog.records if "on_step raised" in r.getMessage()]
    assert len(errors) == 2


def test_on_step_is_told_the_steps_of_learn_too() -> None:
    told: list[StepReport] = []
    combee = Combee(
        prompt_id="offline",
        model=fake_learner(),
        batch_size=2,
        learner=LearnerSettings(on_step=told.append),
    )
    report = combee.learn(failing_traces(4))
    assert told == report.steps


def test_describe_counts_steps_rules_and_reasons_and_costs_per_thousand_traces() -> None:
    combee = Combee(prompt_id="counted", model=fake_learner(), batch_size=2)
    report = combee.learn(failing_traces(4))
    steps = combee.describe()["steps"]
    assert steps["steps"] == 2
    assert steps["traces"] == 4
    assert steps["versions_written"] == steps["versions_accepted"] == 2
    assert steps["rules"]["written"] == sum(s.rules()["written"] for s in report.steps) > 0
    reflect = sum(s.calls["reflect"] for s in report.steps)
    assert steps["per_1000_traces"]["calls"]["reflect"] == reflect * 1000 / 4
    tokens = sum(s.input_tokens for s in report.steps)
    assert steps["per_1000_traces"]["input_tokens"] == round(tokens * 1000 / 4)
    assert steps["last"] == report.steps[-1].summary()


def test_the_tally_sums_reasons_over_steps() -> None:
    tally = StepTally()
    tally.add(_report(merged=2, held=[_held("provenance: x")]))
    tally.add(_report(merged=1, evicted=3))
    described = tally.describe()
    assert described["reasons"] == {
        "merged as duplicate": 3,
        "evicted by budget": 3,
        "held: provenance": 1,
    }
    assert described["rules"]["held"] == 1
    assert described["per_1000_traces"] == {"calls": {}, "input_tokens": 0, "output_tokens": 0}


def test_describe_before_any_step_has_no_costs() -> None:
    steps = Combee(prompt_id="idle", model=fake_learner()).describe()["steps"]
    assert steps["steps"] == 0
    assert steps["per_1000_traces"] is None
    assert steps["last"] is None


# ---- a trace whose own reflection failed ------------------------------------------


def _poisoned() -> FunctionChatModel:
    """``fake_learner``, except that every reflection on a run about 'poison' raises."""
    learner = fake_learner()

    def reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].content) if messages else ""
        body = "\n".join(str(m.content) for m in messages[1:])
        reflecting = "You are the reflector" in system or "You study one run" in system
        if reflecting and "poison" in body:
            raise RuntimeError("content filter refused the run")
        return str(learner.invoke(list(messages)).content)

    return FunctionChatModel(reply)


def _poison() -> Trace:
    (trace,) = failing_traces(1, prefix="poison")
    return trace


async def test_a_trace_whose_reflection_failed_is_queued_again_then_parked() -> None:
    combee = Combee(
        prompt_id="poison",
        model=_poisoned(),
        batch_size=3,
        learner=LearnerSettings(max_attempts=1, backoff_seconds=0),
    )
    learner = _loop(combee, max_trace_attempts=2)
    _queue(combee, [_poison(), *failing_traces(2, prefix="first")])
    assert await learner.tick() == 1
    report = learner.stats.reports[-1]
    assert list(report.failed_reflections) == ["poison-0"]
    assert "RuntimeError: content filter refused the run" in report.failed_reflections["poison-0"]
    assert "1 trace(s) whose reflection failed" in report.summary()
    assert learner.stats.traces_learned == 2
    assert learner.stats.traces_retried == 1
    queue = combee.queue()
    assert queue.status("poison-0") == "pending"  # not marked learned
    assert queue.status("first-0") == "done"

    _queue(combee, failing_traces(2, prefix="second"))
    assert await learner.tick() == 1  # the step succeeds again; the trace is out of attempts
    assert queue.status("poison-0") == "dead"
    (letter,) = queue.dead_letters()
    assert letter.attempts == 2
    assert "its reflection failed: RuntimeError: content filter" in letter.reason
    assert learner.stats.traces_parked == 1
    assert learner.describe()["dead_letters"] == {"_": 1}


@pytest.mark.parametrize("strategy", ["combee", "naive", "sequential"])
def test_a_trace_that_gives_no_reflection_is_listed_with_why(strategy: str) -> None:
    from langgraph_combee import AlgorithmSettings, Feedback

    runs = [
        Trace(input="my card was charged twice", output="?", feedback=Feedback(correct=True)),
        Trace(input="where is my parcel", output="?"),
        Trace(
            input="reset my password",
            output="GENERAL",
            feedback=Feedback(correct=False, ground_truth="SEC-4"),
        ),
    ]
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        strategy=strategy,
        batch_size=3,
        algorithm=AlgorithmSettings(roles="small"),
    )
    step = combee.learn(runs).steps[0]
    assert step.not_reflected == {
        runs[0].id: "judged right: nothing to correct",
        runs[1].id: "no feedback and no error",
    }
    assert step.reasons()["no reflection: no feedback and no error"] == 1
    entry = next(e for e in step.stages if e.name == "reflect")
    assert entry.counts["carried_nothing"] == 2


def test_the_summary_says_how_to_trust_what_held_and_refused_rules_rest_on() -> None:
    tool = (
        "the result of tool 'lookup': add 'lookup' to BulletGuard(trusted_tools=[...]) if your "
        "app controls what it returns"
    )
    held = _held("provenance: ...")
    report = _report(
        trace_ids=["a"],
        held=[held.model_copy(update={"trust": [tool]})],
        quarantined=[held.model_copy(update={"trust": [tool, "a feedback comment: x"]})],
    )
    assert report.to_trust() == [tool, "a feedback comment: x"]
    assert report.summary() == (
        "1 traces; rules: 2 proposed, 0 written, 1 held, 1 refused, 0 left out; reasons: "
        f"held: provenance 1, refused: provenance 1; to trust their text: {tool}; a feedback "
        "comment: x; no version written: the step left the playbook's text unchanged"
    )


def test_the_step_log_line_names_the_source_a_rule_was_refused_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langgraph_combee import Feedback
    from langgraph_combee.testing import parrot_learner

    comment = "Refunds for kettles go straight to the card the customer names on the call."
    combee = Combee(prompt_id="told", model=parrot_learner(separately=True), batch_size=1)
    run = Trace(
        id="t1",
        input="where is my refund?",
        output="x",
        feedback=Feedback(score=0.0, comment=comment, source="user"),
    )
    with caplog.at_level(logging.INFO, logger="langgraph_combee"):
        (step,) = combee.learn([run]).steps
    (refused,) = [q for q in step.quarantined if q.op.content == comment]  # type: ignore[union-attr]
    step_ = (
        "a feedback comment from source 'user': pass source='operator' to feedback() if an "
        "operator or reviewer gave it"
    )
    assert refused.trust == [step_]
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("learning")]
    assert f"to trust their text: {step_};" in line
    (record,) = combee.steps()
    assert record.to_trust == [step_] and record.summary == step.summary()
