"""Seeded characterisation of the three strategies: which calls, how many, which groups."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from langgraph_combee import AlgorithmSettings, Combee, LearnerSettings
from langgraph_combee._algorithm.strategies import CombeeStrategy, StepContext
from langgraph_combee._llm.calls import CallSettings, LLMCaller
from langgraph_combee.testing import LatencyChatModel, fake_learner
from tests.helpers import RunNames, failing_traces, labels_in, role_of


def _combee(strategy: str, model: object, **kw: object) -> Combee:
    return Combee(prompt_id="p", model=model, strategy=strategy, **kw)  # type: ignore[arg-type]


def test_combee_scan_n40_p2_gives_six_groups_each_reflection_twice() -> None:
    model = fake_learner()
    combee = _combee(
        "combee", model, batch_size=40, algorithm=AlgorithmSettings(seed=7, token_budget=None)
    )
    report = combee.learn(failing_traces(40))
    step = report.steps[0]
    assert step.batch_size == 40
    assert sorted(step.group_sizes) == [13, 13, 13, 13, 14, 14]
    assert step.calls == {"aggregate": 1, "propose": 6, "reflect": 40}

    roles = Counter(role_of(p) for p in model.prompts)
    assert roles == {"reflector": 40, "curator": 6, "aggregator": 1}
    seen = Counter(
        label for p in model.prompts if role_of(p) == "curator" for label in labels_in(p)
    )
    assert len(seen) == 40 and set(seen.values()) == {2}
    # Every failure's rule survived the two-level merge.
    assert len(report.playbook.bullets) == 40
    assert report.version.version == 1


def test_shuffle_is_seeded() -> None:
    def groups(seed: int) -> list[list[str]]:
        model = fake_learner()
        _combee("combee", model, batch_size=16, algorithm=AlgorithmSettings(seed=seed)).learn(
            failing_traces(16)
        )
        return [labels_in(p) for p in model.prompts if role_of(p) == "curator"]

    assert groups(1) == groups(1)
    assert groups(1) != groups(2)


def test_combee_small_batch_falls_back_to_one_curator_call() -> None:
    model = fake_learner()
    report = _combee("combee", model, batch_size=3).learn(failing_traces(3))
    assert report.steps[0].calls == {"curate": 1, "reflect": 3}
    assert report.steps[0].group_sizes == [3]
    assert len(report.playbook.bullets) == 3


def test_sequential_makes_one_curator_call_per_trace() -> None:
    model = fake_learner()
    report = _combee("sequential", model, batch_size=5).learn(failing_traces(5))
    assert report.steps[0].calls == {"curate": 5, "reflect": 5}
    assert report.steps[0].group_sizes == [1, 1, 1, 1, 1]
    # Each reflection saw the playbook as the previous trace left it.
    sizes = [len(labels_in(p)) for p in model.prompts if role_of(p) == "curator"]
    assert sizes == [1, 1, 1, 1, 1]
    assert len(report.playbook.bullets) == 5


def test_naive_makes_one_curator_call_for_the_batch() -> None:
    model = fake_learner()
    report = _combee("naive", model, batch_size=12).learn(failing_traces(12))
    assert report.steps[0].calls == {"curate": 1, "reflect": 12}
    assert report.steps[0].group_sizes == [12]
    curator = [p for p in model.prompts if role_of(p) == "curator"]
    assert len(curator) == 1 and len(labels_in(curator[0])) == 12


def test_every_call_runs_under_its_run_name() -> None:
    tracer = RunNames()
    combee = _combee(
        "combee", fake_learner(), batch_size=9, learner=LearnerSettings(callbacks=[tracer])
    )
    combee.learn(failing_traces(9))
    stages = Counter(n for n in tracer.names if n.startswith("combee."))
    assert stages == {
        "combee.learn_step": 1,
        "combee.reflect": 9,
        "combee.propose": 3,
        "combee.aggregate": 1,
    }
    # One trace per step: every call is a child of the step's root run.
    [root] = tracer.roots
    assert root.name == "combee.learn_step"
    calls = [r for r in tracer.runs if r.name.startswith("combee.") and r is not root]
    assert all(r.parent_run_id == root.id for r in calls)
    tracer2 = RunNames()
    _combee(
        "naive", fake_learner(), batch_size=2, learner=LearnerSettings(callbacks=[tracer2])
    ).learn(failing_traces(2))
    assert Counter(n for n in tracer2.names if n.startswith("combee.")) == {
        "combee.learn_step": 1,
        "combee.reflect": 2,
        "combee.curate": 1,
    }


def test_provenance_maps_back_to_trace_ids() -> None:
    report = _combee("combee", fake_learner(), batch_size=16).learn(failing_traces(16))
    for bullet in report.playbook.bullets:
        number = bullet.content.split("ticket ")[1].split(" ")[0]
        assert bullet.provenance == [f"t{number}"]


def test_batches_and_epochs_produce_one_step_per_batch() -> None:
    combee = _combee("combee", fake_learner(), batch_size=10)
    report = combee.learn(failing_traces(25), epochs=2)
    assert [s.batch_size for s in report.steps] == [10, 10, 5, 10, 10, 5]
    # The second epoch learns nothing new: the rules are already in the playbook.
    assert [s.version for s in report.steps][:3] == [1, 2, 3]
    assert len(report.playbook.bullets) == 25
    assert report.totals()["calls"]["reflect"] == 50


async def test_concurrency_limit_is_respected() -> None:
    model = LatencyChatModel(fake_learner(), base_seconds=0.01)
    combee = _combee("combee", model, batch_size=30, learner=LearnerSettings(max_concurrency=4))
    await combee.alearn(failing_traces(30))
    assert model.max_concurrency == 4
    assert model.calls == 30 + 5 + 1


async def test_unlimited_parallel_map_reaches_batch_size() -> None:
    model = LatencyChatModel(fake_learner(), base_seconds=0.01)
    await _combee(
        "combee", model, batch_size=20, learner=LearnerSettings(max_concurrency=64)
    ).alearn(failing_traces(20))
    assert model.max_concurrency == 20


def test_fan_in_and_copies_are_parameters() -> None:
    strategy = CombeeStrategy(copies=3, fan_in=2)
    assert strategy.group_count(40) == 2
    assert CombeeStrategy().group_count(3) == 1
    assert CombeeStrategy().group_count(17) == 4
    model = fake_learner()
    report = _combee(
        "combee", model, batch_size=10, algorithm=AlgorithmSettings(copies=3, fan_in=2)
    ).learn(failing_traces(10))
    assert report.steps[0].group_sizes == [15, 15]


async def test_step_context_is_store_free() -> None:
    ctx = StepContext(caller=LLMCaller(fake_learner(), CallSettings()))
    from langgraph_combee.types import Playbook

    result = await CombeeStrategy().step(ctx, Playbook(), failing_traces(4), version=1)
    assert result.report.calls == {"reflect": 4, "propose": 2, "aggregate": 1}
    assert len(result.playbook.bullets) == 4


@pytest.mark.parametrize("strategy", ["combee", "naive", "sequential"])
def test_all_strategies_report_tokens_and_ops(strategy: str) -> None:
    report = _combee(strategy, fake_learner(), batch_size=8).learn(failing_traces(8))
    step = report.steps[0]
    assert step.input_tokens > 0 and step.output_tokens > 0
    assert step.ops["add"] == 8
    assert step.seconds > 0


@pytest.mark.parametrize(("n", "copies", "groups"), [(8, 2, 2), (9, 2, 3), (40, 2, 6), (10, 3, 3)])
def test_copies_of_a_reflection_go_to_different_groups(n: int, copies: int, groups: int) -> None:
    for _, dealt in _deals(n, copies, groups, seeds=20):
        for group in dealt:
            assert len({id(item) for item in group}) == len(group)


@pytest.mark.parametrize(
    ("n", "copies", "groups"), [(48, 2, 6), (16, 2, 4), (36, 3, 6), (25, 2, 5)]
)
def test_copies_of_a_reflection_meet_different_neighbours(n: int, copies: int, groups: int) -> None:
    """The augmented shuffle: no two groups hold the same reflections.

    Dealing each item's copies one after another sent them to the same pair
    of groups whenever ``copies`` divided ``groups`` (6 groups of 48: three
    pairs of identical groups, each level-1 call made twice).
    """
    import random

    from langgraph_combee._algorithm.stages import LabelledReflection
    from langgraph_combee._algorithm.strategies import shuffle_groups
    from langgraph_combee._core.types import Reflection

    items = [LabelledReflection(f"R{i}", Reflection(trace_id=f"t{i}")) for i in range(n)]
    for seed in range(20):
        dealt = shuffle_groups(items, copies=copies, groups=groups, rng=random.Random(seed))
        sets = [frozenset(item.label for item in group) for group in dealt]
        assert all(len(s) == len(g) for s, g in zip(sets, dealt, strict=True))
        assert len(set(sets)) == len(sets), f"seed {seed}: two groups hold the same reflections"
        for item in items:
            holding = [s for s in sets if item.label in s]
            assert len(holding) == copies
            # Its copies are dealt among other reflections in each group.
            assert len(frozenset.intersection(*holding)) < min(len(s) for s in holding)


@pytest.mark.parametrize(("n", "copies", "groups"), [(2, 4, 5), (4, 5, 6), (5, 6, 7)])
def test_too_few_items_to_separate_copy_by_copy_are_still_dealt_apart(
    n: int, copies: int, groups: int
) -> None:
    """Where no chain moves a copy out of a group holding it, the copies are dealt in turn."""
    for seed, dealt in _deals(n, copies, groups, seeds=30):
        for group in dealt:
            assert len({item.label for item in group}) == len(group), f"seed {seed}"


def test_a_large_batch_is_dealt_in_near_linear_steps() -> None:
    """Each chain is searched only until it ends: the deal stays near linear in the batch."""
    import random

    from langgraph_combee._algorithm import strategies
    from langgraph_combee._algorithm.stages import LabelledReflection
    from langgraph_combee._algorithm.strategies import shuffle_groups
    from langgraph_combee._core.types import Reflection
    from tests.work import LinesRun

    def deal(n: int) -> tuple[int, list[list[LabelledReflection]]]:
        items = [LabelledReflection(f"R{i}", Reflection(trace_id=f"t{i}")) for i in range(n)]
        with LinesRun(strategies) as run:
            dealt = shuffle_groups(items, copies=4, groups=54, rng=random.Random(0))
        return run.lines, dealt

    # Steps counted, not time: four times the batch takes about four times the lines run
    # (a chain searched past its end grows with the square of the batch).
    small, _ = deal(750)
    large, dealt = deal(3000)
    assert large <= 6 * small, (small, large)
    assert all(len({item.label for item in group}) == len(group) for group in dealt)


def _deals(
    n: int, copies: int, groups: int, *, seeds: int
) -> Iterator[tuple[int, list[list[Any]]]]:
    """``shuffle_groups`` of n reflections for each seed, its sizes checked."""
    import random

    from langgraph_combee._algorithm.stages import LabelledReflection
    from langgraph_combee._algorithm.strategies import shuffle_groups
    from langgraph_combee._core.types import Reflection

    items = [LabelledReflection(f"R{i}", Reflection(trace_id=f"t{i}")) for i in range(n)]
    for seed in range(seeds):
        dealt = shuffle_groups(items, copies=copies, groups=groups, rng=random.Random(seed))
        assert sum(len(g) for g in dealt) == n * copies
        assert max(len(g) for g in dealt) - min(len(g) for g in dealt) <= 1
        yield seed, dealt
