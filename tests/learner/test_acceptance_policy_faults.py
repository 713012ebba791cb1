"""User-written acceptance policies that misbehave: the learner and the writer hold up."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, LearnerSettings
from langgraph_combee._core.ops import Add
from langgraph_combee._core.types import Decision, Feedback, PromptVersion, Trace
from langgraph_combee._learner.acceptance import AcceptancePolicy, CanaryGate, PolicyContext
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._learner.takeover import recover
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces


def _combee(policy: Any, **kwargs: Any) -> Combee:
    return Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=policy, **kwargs)


def _learner(combee: Combee, holder: str | None = None) -> BackgroundLearner:
    return BackgroundLearner(
        combee._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.001), holder=holder
    )


class _Accepting(AcceptancePolicy):
    name = "accepting"

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        return Decision(accepted=True, policy=self.name, reason="ok")


class _Raising(AcceptancePolicy):
    name = "raising"

    def __init__(self) -> None:
        self.calls = 0

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        self.calls += 1
        raise RuntimeError("the policy's own bug")


class _Garbage(AcceptancePolicy):
    name = "garbage"

    async def decide(  # type: ignore[override]
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> object:
        return "yes"


class _SyncDecide(AcceptancePolicy):
    name = "sync"

    def decide(  # type: ignore[override]
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        return Decision(accepted=True, policy=self.name, reason="decided without awaiting")


async def test_a_policy_that_raises_leaves_its_candidate_pending_and_the_traces_learned() -> None:
    policy = _Raising()
    combee = _combee(policy)
    learner = _learner(combee)
    for trace in failing_traces(2):
        combee.capture(trace)
    assert await learner.tick() == 1
    assert [v.status for v in combee.history()] == ["candidate"]
    assert combee.queue().pending_count() == 0  # learned once, not again and again
    for _ in range(3):
        await learner.tick()
    assert policy.calls == 1 and len(combee.history()) == 1
    assert combee.approve(1).status == "accepted"  # a person decides it instead


def test_a_policy_answering_neither_a_decision_nor_none_leaves_its_candidate_pending() -> None:
    combee = _combee(_Garbage())
    report = combee.learn(failing_traces(2))
    assert report.steps[0].accepted is None
    assert combee.get(1).status == "candidate"


def test_a_subclass_whose_decide_is_not_async_still_decides() -> None:
    combee = _combee(_SyncDecide())
    assert combee.learn(failing_traces(2)).steps[0].accepted is True
    assert combee.current().version == 1


async def test_takeover_settles_the_rest_when_the_policy_raises_on_a_dead_learners_candidate() -> (
    None
):
    store = InMemoryStore()
    dead = _combee(_Accepting(), store=store)
    # A learner died between writing its candidate and deciding it: its claims remain.
    queue = dead.queue()
    for trace in failing_traces(2):
        dead.capture(trace)
    dead.flush()
    claimed = await queue.aclaim(2, holder="dead-learner", visibility_seconds=600)
    registry = dead.registry()
    head = registry.head()
    op = Add(section="general", content="Check the ticket's product before routing.")
    registry.add_candidate(
        PromptVersion(
            prompt_id="p",
            playbook=head.playbook.apply([op]).playbook,
            parent=head.version,
            ops=[op],
            source_trace_ids=[t.id for t in claimed],
        )
    )
    heir = _combee(_Raising(), store=store)
    recovery = await recover(heir._learner_parts, None, holder="heir")
    assert recovery.acked == tuple(sorted(t.id for t in claimed))
    assert heir.get(1).status == "candidate"  # left for a person, not a failing takeover


class _AsyncBlocking(_Accepting):
    async def blocking(self, tenant: str | None) -> bool:  # type: ignore[override]
        return False


class _AsyncObserve(_Accepting):
    async def observe(self, trace: Trace) -> None:  # type: ignore[override]
        return None


class _SyncReview(_Accepting):
    def review(self, context: PolicyContext) -> None:  # type: ignore[override]
        return None


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        (_AsyncBlocking(), r"acceptance.blocking=.*a plain def \(not async\)"),
        (_AsyncObserve(), r"acceptance.observe=.*a plain def \(not async\)"),
        (_SyncReview(), r"acceptance.review=.*an async def"),
    ],
)
def test_a_hook_written_async_where_it_is_called_plainly_is_refused_naming_it(
    policy: AcceptancePolicy, match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        _combee(policy)


class _BrokenFor(_Accepting):
    """Hooks that raise for one tenant only."""

    def __init__(self, tenant: str | None) -> None:
        self.tenant = tenant
        self.observed: list[str] = []

    def observe(self, trace: Trace) -> None:
        if trace.tenant == self.tenant:
            raise RuntimeError("observe failed")
        self.observed.append(trace.id)

    async def review(self, context: PolicyContext) -> None:
        if context.tenant == self.tenant:
            raise RuntimeError("review failed")

    def blocking(self, tenant: str | None) -> bool:
        if tenant == self.tenant:
            raise RuntimeError("blocking failed")
        return False


async def test_hooks_raising_for_one_tenant_hold_only_that_tenant_and_release_its_claims() -> None:
    combee = _combee(_BrokenFor(None))
    learner = _learner(combee)
    for trace in failing_traces(2):
        combee.capture(trace)
    for trace in failing_traces(2, prefix="acme"):
        combee.capture(trace.model_copy(update={"tenant": "acme"}))
    assert await learner.tick() == 1  # acme learned; the shared tenant waits
    assert combee.current(tenant="acme").version == 1
    assert combee.current().version == 0
    # The shared tenant's traces were observed (claimed), then released: not stuck.
    assert combee.queue().pending_count() == 2 and not combee.queue().claims()
    assert learner.stats.policy_errors >= 3
    assert learner.describe()["policy_errors"] == learner.stats.policy_errors


async def test_a_canary_gate_shared_by_two_prompts_is_refused() -> None:
    gate = CanaryGate(fraction=0.5, min_runs=3)
    first = Combee(prompt_id="a", model=fake_learner(), batch_size=2, acceptance=gate)
    await first.alearn(failing_traces(2))
    assert first.registry().canary() is not None and gate.blocking(None)
    # A second prompt's review would end the first one's trial in the gate's eyes
    # (its registry has no canary), letting the first learn on during its trial.
    with pytest.raises(ConfigurationError, match=r"acceptance=CanaryGate.*prompt 'a'"):
        Combee(prompt_id="b", model=fake_learner(), batch_size=2, acceptance=gate)
    again = Combee(prompt_id="a", model=fake_learner(), batch_size=2, acceptance=gate)
    assert again._acceptance is gate  # the same prompt (a replica) may share it


def _scored(version: int, n: int, correct: bool, tag: str) -> list[Trace]:
    return [
        Trace(
            id=f"{tag}-{i}", input="x", prompt_version=version, feedback=Feedback(correct=correct)
        )
        for i in range(n)
    ]


def _fail_once(monkeypatch: pytest.MonkeyPatch, combee: Combee, method: str) -> list[int]:
    """Make the writer's ``method`` raise a store error once (a blip at the worst moment)."""
    writer, real, calls = combee._writer, getattr(combee._writer, method), []

    async def flaky(*args: Any, **kwargs: Any) -> PromptVersion:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the store blinked")
        result: PromptVersion = await real(*args, **kwargs)
        return result

    monkeypatch.setattr(writer, method, flaky)
    return calls


async def test_a_canary_verdict_whose_write_fails_is_decided_again_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = CanaryGate(fraction=0.5, min_runs=2)
    combee = _combee(gate)
    await combee.alearn(failing_traces(2))
    learner = _learner(combee)
    calls = _fail_once(monkeypatch, combee, "accept")
    for trace in _scored(1, 2, True, "cand") + _scored(0, 2, True, "head"):
        combee.capture(trace)
    await learner.tick()
    assert calls and combee.get(1).status == "candidate"
    # The trial still stands in the registry (so learning still waits) ...
    assert combee.registry().canary() is not None and gate.blocking(None)
    await learner.tick()
    # ... and the next pass decides it.
    assert combee.get(1).status == "accepted" and combee.current().version == 1
    assert combee.registry().canary() is None


async def test_a_regression_rollback_whose_write_fails_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = CanaryGate(fraction=0.5, min_runs=2)
    combee = _combee(gate)
    await combee.alearn(failing_traces(2))
    learner = _learner(combee)
    for trace in _scored(1, 2, True, "cand") + _scored(0, 2, True, "head"):
        combee.capture(trace)
    await learner.tick()
    assert combee.current().version == 1
    calls = _fail_once(monkeypatch, combee, "rollback")
    for trace in _scored(1, 2, False, "live"):
        combee.capture(trace)
    await learner.tick()
    assert calls and combee.current().version == 1  # the rollback's write failed
    await learner.tick()
    current = combee.current()
    assert current.decision is not None and current.decision.policy == "rollback"
    assert current.playbook.bullets == []  # v0's playbook back in force


@pytest.mark.parametrize("verdict", ["approve", "reject"])
async def test_an_operator_deciding_the_canary_stops_this_process_serving_it(verdict: str) -> None:
    combee = _combee(CanaryGate(fraction=0.5, min_runs=20))
    await combee.alearn(failing_traces(2))
    assert {combee._agent.select_version(None, f"run-{i}").version for i in range(100)} == {0, 1}
    decided = await (combee.aapprove(1) if verdict == "approve" else combee.areject(1))
    served = [combee._agent.select_version(None, f"run-{i}") for i in range(100)]
    # Every run gets the version in force, not the decided candidate as it was.
    assert {(v.version, v.status) for v in served} == {(combee.current().version, "accepted")}
    assert decided.status != "candidate" and combee.registry().canary() is None


class _DuckCanary:
    """A policy not derived from the base class that means to run trials."""

    name = "duck_canary"
    canary_fraction = 0.3

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        await context.set_canary(candidate)
        return None


def test_a_canary_fraction_on_a_policy_not_derived_from_the_base_class_is_refused() -> None:
    # Wrapped, its share of runs would silently be the base class's 0.
    with pytest.raises(ConfigurationError, match=r"acceptance=.*_DuckCanary.*canary_fraction"):
        _combee(_DuckCanary())


class _ChokesOn(_Accepting):
    """Observes every trace but one, on which it raises."""

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.observed: list[str] = []

    def observe(self, trace: Trace) -> None:
        if trace.id == self.bad:
            raise ValueError(f"cannot score {trace.id}")
        self.observed.append(trace.id)


async def test_a_trace_observe_fails_on_costs_only_itself() -> None:
    policy = _ChokesOn("t0")
    combee = _combee(policy)
    learner = _learner(combee)
    for trace in failing_traces(3):
        combee.capture(trace)
    await learner.tick()
    assert sorted(policy.observed) == ["t1", "t2"]
    assert learner.stats.policy_errors == 1


async def test_the_canary_share_is_the_one_validated_at_construction() -> None:
    # The agent side's router is built with the fraction once (_agent/routing.py).
    gate = CanaryGate(fraction=0.2, min_runs=20)
    combee = _combee(gate)
    await combee.alearn(failing_traces(2))
    gate.canary_fraction = 2.0  # never validated: every run would get the candidate
    served = [combee._agent.select_version(None, f"run-{i}").version for i in range(200)]
    assert 0 < served.count(1) < 100
