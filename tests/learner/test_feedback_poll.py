"""Feedback from an outside source for waiting traces: pacing, slow sources, validation."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from langgraph_combee import CaptureSettings, Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import fake_learner


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedSource:
    """A feedback source that answers from a dict; it can be made to hang."""

    interval_seconds = 10.0
    batch_size = 2
    max_runs = 3

    def __init__(self, answers: Mapping[str, Feedback], *, hang: bool = False) -> None:
        self.answers = dict(answers)
        # A hanging source is given up on at once; the others are always waited for.
        self.timeout_seconds = 0.01 if hang else 60.0
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        if not hang:
            self.release.set()

    def fetch(self, run_ids: Sequence[str]) -> Mapping[str, Feedback]:
        self.calls.append(list(run_ids))
        self.release.wait(30)
        return {r: self.answers[r] for r in run_ids if r in self.answers}


def _setup(source: ScriptedSource, n: int) -> tuple[Combee, BackgroundLearner, Clock]:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        capture=CaptureSettings(feedback_wait_seconds=3600),
        learner=LearnerSettings(feedback_source=source),
    )
    for i in range(n):
        combee.capture(Trace(id=f"r{i}", input=f"ticket {i}", output="WRONG"))
    clock = Clock()
    learner = BackgroundLearner(combee._learner_parts, LearnerSettings(min_batch=2), clock=clock)
    return combee, learner, clock


def _wrong(i: int) -> Feedback:
    return Feedback(correct=False, ground_truth=f"CODE-{i}")


async def test_polls_at_most_max_runs_in_batches_once_per_interval() -> None:
    source = ScriptedSource({"r0": _wrong(0)})
    combee, learner, clock = _setup(source, 5)
    assert await learner.tick() == 0
    assert source.calls == [["r0", "r1"], ["r2"]]  # max_runs=3, batch_size=2, oldest first
    assert combee.queue().waiting_ids() == ["r1", "r2", "r3", "r4"]
    await learner.tick()
    assert len(source.calls) == 2  # the interval has not passed
    clock.now += 10
    await learner.tick()
    assert source.calls[2:] == [["r1", "r2"], ["r3"]]


async def test_a_hanging_source_never_holds_up_learning() -> None:
    source = ScriptedSource({"r0": _wrong(0), "r1": _wrong(1)}, hang=True)
    combee, learner, clock = _setup(source, 2)
    for i in (7, 8):
        combee.capture(Trace(id=f"ready{i}", input=f"x {i}", output="WRONG", feedback=_wrong(i)))
    assert await learner.tick() == 1  # the ready pair is learned while the source hangs
    clock.now += 10
    assert await learner.tick() == 0
    assert source.calls == [["r0", "r1"]]  # no second request while one is running
    source.release.set()
    poller = learner.feedback_poller
    assert poller is not None
    await poller.drain()
    assert await learner.tick() == 1  # the late answer is merged, then learned
    assert (poller.received, poller.errors) == (2, 0)


async def test_a_source_returning_garbage_is_counted_not_raised() -> None:
    class Broken(ScriptedSource):
        def fetch(self, run_ids: Sequence[str]) -> Mapping[str, Feedback]:
            return None  # type: ignore[return-value]

    combee, learner, _ = _setup(Broken({}), 2)
    assert await learner.tick() == 0
    poller = learner.feedback_poller
    assert poller is not None and poller.errors == 1
    assert combee.queue().waiting_ids() == ["r0", "r1"]


def test_feedback_source_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="feedback_source"):
        Combee(prompt_id="p", learner=LearnerSettings(feedback_source=object()))  # type: ignore[arg-type]


def test_langsmith_feedback_validates_its_arguments() -> None:
    from langgraph_combee.langsmith import LangSmithFeedback

    class Client:
        def list_feedback(self, **options: object) -> list[object]:
            return []

    client = Client()  # only list_feedback is needed: no network at all
    with pytest.raises(ConfigurationError, match="batch_size"):
        LangSmithFeedback(client, batch_size=101)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="interval_seconds"):
        LangSmithFeedback(client, interval_seconds=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="keys"):
        LangSmithFeedback(client, keys=[""])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="client"):
        LangSmithFeedback(object())  # type: ignore[arg-type]
    source = LangSmithFeedback(client, keys="correctness")  # type: ignore[arg-type]
    assert source.keys == ("correctness",) and source.fetch(["r1"]) == {}


def test_waiting_ids_skips_ready_and_claimed_traces() -> None:
    combee = Combee(prompt_id="p", capture=CaptureSettings(feedback_wait_seconds=3600))
    for i in range(3):
        combee.capture(Trace(id=f"w{i}", input="x", output="y"))
    combee.capture(Trace(id="scored", input="x", output="y", feedback=_wrong(0)))
    combee.flush()
    queue = combee.queue()
    assert queue.waiting_ids() == ["w0", "w1", "w2"]
    assert queue.waiting_ids(limit=1) == ["w0"]
    queue.claim(1, holder="h")  # claims w0 (ready_only=False)
    assert queue.waiting_ids() == ["w1", "w2"]
    with pytest.raises(ConfigurationError):
        queue.waiting_ids(limit=-1)
