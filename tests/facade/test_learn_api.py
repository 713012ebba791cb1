"""The offline learning API: construction, reports, versions, and failure handling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from langgraph_combee import (
    AlgorithmSettings,
    CaptureSettings,
    Combee,
    Feedback,
    LearnerSettings,
    Trace,
)
from langgraph_combee.errors import ConfigurationError, EngineLoopError, LearningError
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel, fake_learner
from langgraph_combee.types import LearnReport, PromptVersion
from tests.helpers import failing_traces, role_of


def test_current_is_version_zero_before_learning() -> None:
    combee = Combee(prompt_id="support")
    current = combee.current()
    assert isinstance(current, PromptVersion)
    assert current.version == 0
    assert current.playbook.bullets == []
    assert current.render() == ""


def test_trace_is_constructible_by_hand() -> None:
    trace = Trace(input="q", output="a", feedback=Feedback(correct=False, ground_truth="b"))
    assert trace.id and trace.has_ground_truth()
    with pytest.raises(ValueError, match="non-empty"):
        Trace(id="  ")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: Feedback(score=float("nan")), r"score\n  Input should be a finite number"),
        (lambda: Feedback(score=float("inf")), r"score\n  Input should be a finite number"),
        (lambda: Trace(latency_seconds=float("nan")), r"latency_seconds\n  .* a finite number"),
        (lambda: Trace(latency_seconds=-5), r"latency_seconds\n  .* greater than or equal to 0"),
    ],
)
def test_trace_and_feedback_numbers_are_finite(make: Callable[[], object], named: str) -> None:
    # Feedback(score=nan) and Trace(latency_seconds=-5) were taken,
    # while feedback(run, score=nan) was refused.
    with pytest.raises(ValidationError, match=named):
        make()


def test_a_trace_refuses_a_field_it_does_not_have_naming_it() -> None:
    # A misspelled "feedbak" was ignored, and the trace learned from
    # as one without feedback.
    with pytest.raises(ValidationError, match=r"'feedbak' \(did you mean 'feedback'\?\)"):
        Trace(input="x", output="y", feedbak={"correct": False})  # type: ignore[call-arg]
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(ConfigurationError, match=r"(?s)traces\[0\]=.*unknown Trace field"):
        combee.learn([{"input": "x", "output": "y", "feedbak": {"correct": False}}])
    assert combee.history() == []


@pytest.mark.parametrize("strategy", ["fast", ["combee"], 5])
def test_a_bad_strategy_fails_at_construction_without_a_model_too(strategy: object) -> None:
    # Only a Combee with a learner model checked it; a serve-only
    # replica given the learner's arguments took strategy="fast".
    with pytest.raises(ConfigurationError, match=r"strategy=.* one of \['combee', 'naive'"):
        Combee(prompt_id="p", strategy=strategy)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prompt_id": ""}, "prompt_id=''"),
        ({"prompt_id": "p", "strategy": "fast"}, "strategy='fast'"),
        ({"prompt_id": "p", "batch_size": 0}, "batch_size=0"),
        ({"prompt_id": "p", "batch_size": "big"}, "batch_size='big'"),
        ({"prompt_id": "p", "learner": LearnerSettings}, "learner=<class"),
        ({"prompt_id": "p", "algorithm": CaptureSettings()}, "algorithm=CaptureSettings"),
        ({"prompt_id": "p", "store": {}}, "store={}"),
        ({"prompt_id": "p", "acceptance": "yes"}, "acceptance='yes'"),
        ({"prompt_id": "p", "model": 42}, "model=42"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs: dict[str, object], match: str) -> None:
    kwargs.setdefault("model", ScriptedChatModel(replies=[]))
    with pytest.raises(ConfigurationError, match=match):
        Combee(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: LearnerSettings(max_concurrency=0), "max_concurrency=0"),
        (lambda: AlgorithmSettings(copies=0), "copies=0"),
        (lambda: AlgorithmSettings(token_budget=3), "token_budget=3"),
    ],
)
def test_bad_settings_fail_at_construction(make: Callable[[], object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        make()


def test_learning_without_a_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="learner model"):
        Combee(prompt_id="p").learn(failing_traces(2))


def test_bad_traces_name_their_index() -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(ConfigurationError, match=r"traces\[1\]"):
        combee.learn([Trace(input="a"), 42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"traces\[0\]"):
        combee.learn([{"input": "a", "tool_calls": "nope"}])
    with pytest.raises(ConfigurationError, match="epochs=0"):
        combee.learn([], epochs=0)


def test_traces_may_be_dicts() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2)
    report = combee.learn(
        [{"input": "a b c", "output": "x", "feedback": {"correct": False, "ground_truth": "y"}}]
    )
    assert isinstance(report, LearnReport)
    assert len(report.playbook.bullets) == 1


def test_each_step_writes_an_accepted_version_and_history_keeps_all() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=4)
    report = combee.learn(failing_traces(12))
    assert [s.version for s in report.steps] == [1, 2, 3]
    assert all(s.accepted for s in report.steps)
    assert combee.current().version == 3 == report.version.version
    history = combee.history()
    assert [v.version for v in history] == [1, 2, 3]
    assert history[1].parent == 1
    assert history[2].source_trace_ids == ["t8", "t9", "t10", "t11"]
    assert history[2].ops_summary["add"] == 4


def test_a_step_that_learns_nothing_writes_no_version() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=4)
    right = [
        Trace(input="q", output="A", feedback=Feedback(correct=True, ground_truth="A"))
        for _ in range(4)
    ]
    report = combee.learn(right)
    assert report.steps[0].version is None
    assert combee.current().version == 0


def test_learner_that_always_raises_fails_the_step_and_writes_nothing() -> None:
    model = FunctionChatModel(lambda messages: (_ for _ in ()).throw(RuntimeError("LLM down")))
    combee = Combee(
        prompt_id="p",
        model=model,
        batch_size=4,
        learner=LearnerSettings(max_attempts=2, backoff_seconds=0),
    )
    with pytest.raises(LearningError, match="all 4 reflections failed"):
        combee.learn(failing_traces(4))
    assert model.calls == 8  # 4 reflections x 2 attempts
    assert combee.history() == []


def test_garbage_reply_gets_one_repair_then_costs_only_that_reflection() -> None:
    learner = fake_learner()
    state = {"garbled": 0}

    def reply(messages: list) -> str:  # type: ignore[type-arg]
        text = str(messages[1].content) if len(messages) > 1 else ""
        if role_of(messages) == "reflector" and "ticket 0 " in text:
            state["garbled"] += 1
            return "I refuse to produce JSON."
        out = learner.invoke(messages)
        return str(out.content)

    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), batch_size=4)
    report = combee.learn(failing_traces(4))
    step = report.steps[0]
    assert state["garbled"] == 2  # the first answer and the one repair attempt
    assert step.unparsed == {"reflect": 1}
    assert step.calls["reflect"] == 5
    assert len(report.playbook.bullets) == 3


def test_repair_retry_recovers_a_fixable_reply() -> None:
    learner = fake_learner()
    seen_repair: list[bool] = []

    def reply(messages: list) -> str:  # type: ignore[type-arg]
        if role_of(messages) == "reflector" and isinstance(messages[-1].content, str):
            if "could not be used" in messages[-1].content:
                seen_repair.append(True)
                return str(learner.invoke(messages[:2]).content)
            if "ticket 1 " in str(messages[1].content):
                return "no json here"
        return str(learner.invoke(messages).content)

    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), batch_size=2)
    report = combee.learn(failing_traces(2))
    assert seen_repair == [True]
    assert report.steps[0].unparsed == {}
    assert len(report.playbook.bullets) == 2


def test_truncated_curator_json_is_still_used() -> None:
    replies = [
        '{"key_insight": "Refunds go to FIN-7.", "bullet_tags": []}',
        AIMessage(
            content='```json\n{"operations": [{"type": "ADD", "section": "others", '
            '"content": "Refunds go to FIN-7.", "sources": ["R1"]}, {"type": "ADD", "cont'
        ),
    ]
    combee = Combee(prompt_id="p", model=ScriptedChatModel(replies=replies), batch_size=1)
    report = combee.learn(failing_traces(1))
    assert [b.content for b in report.playbook.bullets] == ["Refunds go to FIN-7."]
    assert report.playbook.bullets[0].provenance == ["t0"]


async def test_per_call_timeout_counts_as_a_failure() -> None:
    async def slow(messages: list) -> str:  # type: ignore[type-arg]
        await asyncio.sleep(5)
        return "{}"

    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(slow),
        batch_size=2,
        learner=LearnerSettings(timeout_seconds=0.01, max_attempts=1),
    )
    with pytest.raises(LearningError):
        await combee.alearn(failing_traces(2))


async def test_sync_learn_inside_a_running_loop_raises_instead_of_deadlocking() -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(EngineLoopError, match="await combee.alearn"):
        combee.learn(failing_traces(1))


def test_auto_batch_size_profiles_then_settles() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size="auto")
    report = combee.learn(failing_traces(100))
    sizes = [s.batch_size for s in report.steps]
    assert sizes[:4] == [4, 8, 16, 32]
    assert sum(sizes) == 100
    engine = combee._engine(None)
    assert engine.controller.chosen is not None
    assert all(s == engine.controller.chosen for s in sizes[4:-1])


def test_rollback_restores_an_old_playbook_as_a_new_version() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2)
    combee.learn(failing_traces(4))
    assert len(combee.current().playbook.bullets) == 4
    restored = combee.rollback(1, reason="too eager")
    assert restored.version == 3
    assert combee.current().version == 3
    assert combee.current().playbook.bullets == combee.get(1).playbook.bullets
    assert [v.version for v in combee.history()] == [1, 2, 3]
