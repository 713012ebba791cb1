"""The learner side works with the parts the root gives it, never with ``Combee`` itself."""

from __future__ import annotations

import dataclasses
import gc

import grimp
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, LearnerSettings, Trace
from langgraph_combee._core.ops import Add
from langgraph_combee._core.quarantine import QuarantinedOp
from langgraph_combee._core.types import Decision, StepReport
from langgraph_combee._learner.acceptance import AcceptAll, CanaryGate
from langgraph_combee._learner.learner import BackgroundLearner, _log_screened
from langgraph_combee._learner.step import BeforeSubmit
from langgraph_combee._learner.versions import VersionWriter
from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.registry import PromptRegistry
from langgraph_combee.errors import LeaseHeldError
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import PromptVersion
from tests.helpers import failing_traces


@pytest.mark.parametrize("other", ["langgraph_combee._combee", "langgraph_combee._agent"])
def test_the_learner_side_imports_neither_the_facade_nor_the_agent_side(other: str) -> None:
    graph = grimp.build_graph("langgraph_combee", cache_dir=None)
    chain = graph.find_shortest_chain(
        importer="langgraph_combee._learner", imported=other, as_packages=True
    )
    assert chain is None, " -> ".join(chain or ())


def _candidate(registry: PromptRegistry, text: str) -> PromptVersion:
    head = registry.head()
    op = Add(section="general", content=text)
    return registry.add_candidate(
        PromptVersion(
            prompt_id="p",
            tenant=registry.tenant,
            playbook=head.playbook.apply([op]).playbook,
            parent=head.version,
            ops=[op],
        )
    )


async def test_the_writer_publishes_each_version_it_puts_in_force_through_its_callback() -> None:
    store = InMemoryStore()
    told: list[tuple[str | None, int]] = []
    writer = VersionWriter(
        prompt_id="p",
        acceptance=AcceptAll(),
        store=store,
        holder="h",
        on_published=lambda tenant, version: told.append((tenant, version.version)),
    )
    registry = PromptRegistry(store, "p", tenant="acme")
    one = _candidate(registry, "Greet the customer by name.")
    decision = Decision(accepted=True, policy="manual", reason="ok")
    await writer.accept(registry, one.version, decision)
    await writer.rollback(registry, 0, reason="back")
    assert told == [("acme", 1), ("acme", 2)]


async def test_a_failing_on_published_leaves_the_accepted_version_in_force() -> None:
    store = InMemoryStore()

    def broken(tenant: str | None, version: PromptVersion) -> None:
        raise RuntimeError("the agent side is gone")

    writer = VersionWriter(
        prompt_id="p", acceptance=AcceptAll(), store=store, holder="h", on_published=broken
    )
    registry = PromptRegistry(store, "p")
    one = _candidate(registry, "Greet the customer by name.")
    final = await writer.decide(registry, one, registry.head())
    assert final.status == "accepted"
    assert registry.head().version == one.version


async def test_the_background_learner_runs_the_step_function_it_is_given() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        learner=LearnerSettings(min_batch=2),
    )
    calls: list[tuple[list[str], str | None]] = []

    async def step(
        batch: list[Trace], *, tenant: str | None = None, before_submit: BeforeSubmit | None = None
    ) -> StepReport:
        assert before_submit is not None and await before_submit()  # the lease check
        calls.append(([t.id for t in batch], tenant))
        return StepReport(strategy="fake", batch_size=len(batch))

    parts = dataclasses.replace(combee._learner_parts, step=step)
    learner = BackgroundLearner(parts, LearnerSettings(min_batch=2))
    for trace in failing_traces(2):
        combee.capture(trace)
    assert await learner.tick() == 1
    assert calls == [(["t0", "t1"], None)]
    assert combee.queue().pending_count() == 0  # acknowledged after the step
    assert combee.history() == []  # the fake wrote nothing


async def test_a_trial_started_by_another_process_holds_this_learner_back() -> None:
    # The canary gate decides whether learning waits from the registry's canary
    # (read in review), not from the agent side's cache, which a learner that
    # never served a run has not loaded: it would learn during the trial.
    store = InMemoryStore()
    first = Combee(prompt_id="p", model=fake_learner(), store=store, acceptance=CanaryGate())
    await first.alearn(failing_traces(2))
    assert first.registry().canary() is not None
    other = Combee(
        prompt_id="p", model=fake_learner(), store=store, batch_size=2, acceptance=CanaryGate()
    )
    learner = BackgroundLearner(
        other._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.001)
    )
    for trace in failing_traces(2, prefix="late"):
        other.capture(trace)
    await learner.tick()
    assert learner.stats.steps == 0
    assert other.queue().pending_count() == 2


async def test_a_writer_without_the_lease_does_not_start_a_trial_over_the_holders_head() -> None:
    store = InMemoryStore()
    registry = PromptRegistry(store, "p")
    candidate = _candidate(registry, "Greet the customer by name.")
    # Held by a learner of another process: no Lease object of this one holds it.
    assert Lease(store, "p", holder="the-learner", ttl_seconds=600).acquire()
    gc.collect()
    intruder = VersionWriter(
        prompt_id="p", acceptance=CanaryGate(), store=store, holder="h", lease_seconds=0.05
    )
    with pytest.raises(LeaseHeldError, match="the-learner"):
        await intruder.set_canary(registry, candidate)
    assert registry.canary() is None  # the canary record is the lease holder's to write


def test_a_step_whose_rules_the_guard_refused_or_held_says_so_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = QuarantinedOp(op=Add(section="others", content="When x, y."), reasons=["markup: tag"])
    with caplog.at_level("WARNING", logger="langgraph_combee"):
        _log_screened(StepReport(strategy="combee", batch_size=1))
        assert caplog.records == []
        _log_screened(StepReport(strategy="combee", batch_size=1, quarantined=[refused]))
        _log_screened(StepReport(strategy="combee", batch_size=1, held=[refused, refused]))
    messages = [r.getMessage() for r in caplog.records]
    assert "refused 1 of the step's rules" in messages[0] and "markup: tag" in messages[0]
    assert "held for a person 2" in messages[1]
