"""The sync entry points run on one long-lived event loop per process (``engine_loop``)."""

from __future__ import annotations

import contextvars

import pytest

from langgraph_combee import Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._learner.engine_loop import EngineLoop
from langgraph_combee.errors import EngineLoopError, LearningError
from langgraph_combee.testing import ScriptedChatModel, fake_learner
from tests.openai_server import FakeOpenAI, openai_server

__all__ = ["openai_server"]

openai_chat = pytest.importorskip("langchain_openai")


def _wrong(i: int) -> Trace:
    return Trace(
        input=f"I want a refund for order {i}",
        output="BILLING",
        feedback=Feedback(correct=False, ground_truth="FIN-REFUNDS"),
    )


def test_three_combees_sharing_one_chat_openai_each_learn_in_turn(openai_server: str) -> None:
    # One attempt per call: a pooled connection left on a closed loop would fail the
    # call ("Event loop is closed") instead of being hidden by a retry.
    model = openai_chat.ChatOpenAI(
        base_url=openai_server, api_key="test", model="gpt-4o-mini", max_retries=0
    )
    versions = []
    for i in range(3):
        combee = Combee(
            prompt_id=f"shared-{i}", model=model, learner=LearnerSettings(max_attempts=1)
        )
        report = combee.learn([_wrong(i), _wrong(i + 10)])
        assert not any(step.failed_calls for step in report.steps)
        versions.append(report.version.version)
    assert versions == [1, 1, 1]
    assert FakeOpenAI.requests >= 6


def test_a_failed_learner_llm_is_named_in_the_error() -> None:
    model = ScriptedChatModel(replies=[RuntimeError("Event loop is closed")] * 4)
    combee = Combee(prompt_id="named", model=model, learner=LearnerSettings(max_attempts=1))
    with pytest.raises(LearningError) as caught:
        combee.learn([_wrong(1)])
    message = str(caught.value)
    assert "RuntimeError: Event loop is closed" in message
    assert "unavailable" not in message


def test_learn_sees_the_callers_context_variables() -> None:
    seen: list[str] = []
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("caller")
    combee = Combee(prompt_id="ctx", model=fake_learner())
    combee.learn([_wrong(1)], on_step=lambda _: seen.append(marker.get()))
    assert seen == ["caller"]


def test_learn_from_a_step_callback_raises_instead_of_waiting_for_itself() -> None:
    combee = Combee(prompt_id="inner", model=fake_learner())
    errors: list[BaseException] = []

    def again(_: object) -> None:
        try:
            combee.learn([_wrong(2)])
        except EngineLoopError as exc:
            errors.append(exc)

    combee.learn([_wrong(1)], on_step=again)
    assert len(errors) == 1
    assert "await combee.alearn()" in str(errors[0])


def test_a_stopped_loop_starts_again_on_next_use() -> None:
    loop = EngineLoop()

    async def answer() -> int:
        return 42

    assert loop.run(answer(), "learn") == 42
    loop.stop()
    assert loop.run(answer(), "learn") == 42
    loop.stop()
