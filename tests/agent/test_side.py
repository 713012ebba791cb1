"""The agent side as the root wires it: the canary router and the learner's callbacks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langgraph_combee import CanaryGate, Combee, Trace
from langgraph_combee._agent.routing import CanaryRouter, bucket
from langgraph_combee._agent.side import AgentSide, agent_side_of
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.types import PromptVersion
from tests.agent.test_middleware import accept_rules


def version(number: int, tenant: str | None = None) -> PromptVersion:
    return PromptVersion(prompt_id="router", version=number, tenant=tenant)


class Cache:
    """A stand-in for the serving cache: HEAD and canary per tenant, reads counted."""

    def __init__(self) -> None:
        self.heads = {None: version(1)}
        self.canaries: dict[str | None, PromptVersion | None] = {}
        self.canary_reads = 0

    def head(self, tenant: str | None) -> PromptVersion:
        return self.heads[tenant]

    def canary(self, tenant: str | None) -> PromptVersion | None:
        self.canary_reads += 1
        return self.canaries.get(tenant)


@pytest.fixture
def combee() -> Iterator[Combee]:
    instance = Combee(prompt_id="router")
    yield instance
    instance._agent.server.close(flush=False)


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan"), "0.1", True])
def test_the_router_refuses_a_fraction_outside_0_to_1(bad: object) -> None:
    cache = Cache()
    with pytest.raises(ConfigurationError, match="canary_fraction"):
        CanaryRouter(head=cache.head, canary=cache.canary, fraction=bad)  # type: ignore[arg-type]


def test_without_trials_the_router_serves_head_and_never_reads_the_canary() -> None:
    cache = Cache()
    cache.canaries[None] = version(2)
    router = CanaryRouter(head=cache.head, canary=cache.canary)
    assert {router.route(None, f"run-{i}").version for i in range(50)} == {1}
    assert cache.canary_reads == 0


def test_the_router_splits_runs_stably_by_run_key() -> None:
    cache = Cache()
    router = CanaryRouter(head=cache.head, canary=cache.canary, fraction=0.3)
    keys = [f"run-{i}" for i in range(400)]
    assert {router.route(None, k).version for k in keys} == {1}  # no canary yet
    cache.canaries[None] = version(2)
    served = {k: router.route(None, k).version for k in keys}
    assert served == {k: router.route(None, k).version for k in keys}  # stable per run
    assert all((served[k] == 2) == (bucket(k) < 0.3) for k in keys)
    assert 80 < sum(v == 2 for v in served.values()) < 160
    assert router.route(None, None).version == 1  # a run without a key stays on HEAD


def test_the_root_builds_the_router_from_the_policy() -> None:
    gate = Combee(prompt_id="router", acceptance=CanaryGate(fraction=0.25))
    plain = Combee(prompt_id="router")
    try:
        assert gate._agent.router.fraction == 0.25
        assert plain._agent.router.fraction == 0.0
    finally:
        gate._agent.server.close(flush=False)
        plain._agent.server.close(flush=False)


def test_the_callbacks_for_the_learner_reach_the_agent_cache(combee: Combee) -> None:
    side = combee._agent
    accepted = accept_rules(combee, "Rule one.")
    newer = accepted.model_copy(update={"version": accepted.version + 1})
    side.publish(None, newer)
    assert combee._agent.server.head(None) is newer
    side.set_canary(None, accepted)
    assert combee._agent.server.canary(None) is accepted
    side.set_canary(None, None)
    assert combee._agent.server.canary(None) is None
    combee._agent.capture_later("t1", lambda: Trace(id="t1", input="q"))
    assert combee._agent.server.buffered() == 1
    side.flush()
    assert combee._agent.server.buffered() == 0
    assert [t.id for t in combee.queue().claim(10, holder="test")] == ["t1"]


def test_the_app_hooks_take_a_combee_or_its_agent_side(combee: Combee) -> None:
    assert isinstance(combee._agent, AgentSide)
    assert agent_side_of(combee) is agent_side_of(combee._agent) is combee._agent
    for bad in ("not a combee", None, object()):
        with pytest.raises(ConfigurationError, match="combee"):
            agent_side_of(bad)
