"""Budgets: the learner's calls and tokens per hour, and the playbook's token budget.

Time is an injected clock shared by the budget and the learner; no test waits.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_combee import AlgorithmSettings, Combee, LearnerBudget, LearnerSettings
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.errors import BudgetExceededError, ConfigurationError, LearningError
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import StepReport
from tests.helpers import FakeClock, background_learner, failing_traces


def _learner(combee: Combee, clock: FakeClock, **kw: Any) -> BackgroundLearner:
    return background_learner(combee._learner_parts, clock=clock, **{"min_batch": 1, **kw})


# ---------------------------------------------------------------- the meter


def test_budget_window_slides_and_says_when_it_resumes() -> None:
    clock = FakeClock()
    budget = LearnerBudget(calls_per_hour=2, tokens_per_hour=100, clock=clock)
    budget.acquire_call()
    clock.now += 600
    budget.acquire_call()
    with pytest.raises(BudgetExceededError, match="call budget spent: 2 of 2") as caught:
        budget.acquire_call()
    assert (caught.value.what, caught.value.used, caught.value.limit) == ("call", 2, 2)
    assert isinstance(caught.value, LearningError)
    assert budget.seconds_until_available() == 3000.0  # the first call ages out at t+3600
    clock.now += 3000
    assert budget.available()
    budget.acquire_call()
    budget.charge_tokens(60)
    budget.charge_tokens(50)
    assert budget.snapshot() == {
        "calls": 2,
        "calls_per_hour": 2,
        "tokens": 110,
        "tokens_per_hour": 100,
        "window_seconds": 3600.0,
        "exhausted": True,
        "resumes_in_seconds": 3600.0,  # calls free up in 600 s, tokens only in 3600 s
        "refused_calls": 1,
    }
    clock.now += 600
    with pytest.raises(BudgetExceededError, match="token budget spent: 110 of 100"):
        budget.acquire_call()  # the calls have room; the tokens do not
    assert budget.seconds_until_available() == 3000.0  # when the first 60 tokens age out


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"calls_per_hour": 0}, "calls_per_hour=0"),
        ({"tokens_per_hour": 2.5}, "tokens_per_hour=2.5"),
        ({"calls_per_hour": True}, "calls_per_hour=True"),
        ({"window_seconds": 0}, "window_seconds=0"),
        ({"clock": 3}, "clock=3"),
    ],
)
def test_budget_arguments_are_validated(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        LearnerBudget(**kwargs)


def test_combee_rejects_a_budget_that_is_not_one() -> None:
    with pytest.raises(ConfigurationError, match="budget=100"):
        Combee(prompt_id="p", learner=LearnerSettings(budget=100))  # type: ignore[arg-type]


# ---------------------------------------------------------------- offline learn()


def test_offline_learn_raises_when_the_budget_runs_out_and_keeps_earlier_steps() -> None:
    budget = LearnerBudget(calls_per_hour=4, clock=FakeClock())
    combee = Combee(
        prompt_id="p", model=fake_learner(), batch_size=1, learner=LearnerSettings(budget=budget)
    )
    done: list[StepReport] = []
    # Each one-trace step makes two calls (reflect + curate): two steps fit.
    with pytest.raises(BudgetExceededError, match="call budget spent: 4 of 4"):
        combee.learn(failing_traces(3), on_step=done.append)
    assert [s.version for s in done] == [1, 2]
    assert combee.current().version == 2  # what was learned before the cap stays
    assert budget.snapshot()["calls"] == 4


def test_a_token_cap_stops_offline_learning_too() -> None:
    budget = LearnerBudget(tokens_per_hour=1, clock=FakeClock())
    combee = Combee(
        prompt_id="p", model=fake_learner(), batch_size=1, learner=LearnerSettings(budget=budget)
    )
    with pytest.raises(BudgetExceededError, match="token budget"):
        combee.learn(failing_traces(2))
    # The reflect call overshot the cap (a reply's tokens are known only after it);
    # the curator call was refused, so the step was abandoned and wrote nothing.
    assert combee.history() == []
    assert budget.snapshot()["calls"] == 1
    assert budget.snapshot()["refused_calls"] == 1


# ---------------------------------------------------------------- the background learner


async def test_the_background_learner_waits_for_the_window_then_resumes() -> None:
    clock = FakeClock()
    budget = LearnerBudget(calls_per_hour=2, clock=clock)
    combee = Combee(
        prompt_id="p", model=fake_learner(), batch_size=1, learner=LearnerSettings(budget=budget)
    )
    learner = _learner(combee, clock)
    for trace in failing_traces(3):
        combee.queue().put(trace)

    assert await learner.tick() == 1  # two calls: the window is spent
    for _ in range(5):  # many passes while spent: no step, no failure, no backoff
        assert await learner.tick() == 0
    assert combee.queue().stats()["claimed"] == 0
    assert combee.queue().pending_count() == 2  # the traces wait in the queue
    described = learner.describe()
    assert described["budget_waits"] == 5
    assert described["failed_steps"] == 0
    assert described["budget"]["exhausted"] is True
    assert described["budget"]["resumes_in_seconds"] == 3600.0

    clock.now += 3600
    assert await learner.tick() == 1
    assert combee.current().version == 2
    assert learner.describe()["budget"]["calls"] == 2


async def test_a_step_the_budget_stops_midway_is_released_without_backoff() -> None:
    clock = FakeClock()
    # A four-trace Combee step makes 4 reflect + 2 propose + 1 aggregate calls.
    budget = LearnerBudget(calls_per_hour=5, clock=clock)
    combee = Combee(
        prompt_id="p", model=fake_learner(), batch_size=4, learner=LearnerSettings(budget=budget)
    )
    learner = _learner(combee, clock)
    for trace in failing_traces(4):
        combee.queue().put(trace)

    assert await learner.tick() == 0
    assert learner.stats.budget_stops == 1
    assert learner.stats.failed_steps == 0  # a spent budget is not a failing learner
    assert combee.history() == []  # nothing partial written
    assert combee.queue().pending_count() == 4
    assert await learner.tick() == 0
    assert learner.stats.budget_waits == 1

    clock.now += 3600
    budget.calls_per_hour = 20
    assert await learner.tick() == 1  # no backoff to wait out
    assert sorted(combee.current().source_trace_ids) == ["t0", "t1", "t2", "t3"]


# ---------------------------------------------------------------- the playbook's token budget


async def test_the_playbook_token_budget_is_enforced_and_reported_in_the_background() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=6,
        algorithm=AlgorithmSettings(token_budget=80),
    )
    learner = _learner(combee, FakeClock())
    for trace in failing_traces(6):
        combee.queue().put(trace)
    assert await learner.tick() == 1
    report = learner.stats.reports[0]
    version = combee.current()
    assert report.ops["add"] == 6
    assert report.evicted > 0
    assert len(version.playbook.bullets) == 6 - report.evicted
    assert version.playbook.token_count() <= 80
    assert version.ops_summary["evicted"] == report.evicted  # recorded on the version too
