"""A learner taking over the writer lease settles what a dead learner left (in one process).

The dead learner is simulated by claiming a batch under its name and stopping at
one of the points a SIGKILL could hit: before writing, after writing a
candidate, after accepting it. ``tests/learner/test_replicas.py`` does the same with
real processes and SIGKILL.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter
from typing import Any

import pytest
from langgraph.store.base import PutOp, Result
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, LearnerSettings, ManualApproval
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._learner.takeover import keep_lease, recover
from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee.errors import LeaseHeldError
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import PromptVersion
from tests.helpers import failing_traces

PROMPT = "takeover"


def _combee(store: InMemoryStore) -> Combee:
    return Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4)


async def _dead_learner(store: InMemoryStore, stop_at: str) -> list[str]:
    """Claim 4 traces as 'dead', learn, and stop at ``stop_at``; return the claimed ids."""
    dead = _combee(store)
    for trace in failing_traces(8):
        dead.capture(trace)
    dead.flush()
    batch = await dead.queue().aclaim(4, holder="dead", visibility_seconds=600)
    ids = [t.id for t in batch]
    if stop_at == "claimed":
        return ids
    if stop_at == "candidate":
        result = await dead._engine(None).step(dead.current().playbook, batch, version=1)
        await dead.registry().aadd_candidate(
            PromptVersion(prompt_id=PROMPT, playbook=result.playbook, source_trace_ids=ids)
        )
        return ids
    await dead._stepper.step(batch)  # written and accepted, never acked
    return ids


@pytest.mark.parametrize("stop_at", ["claimed", "candidate", "accepted"])
async def test_every_trace_is_learned_once_whatever_the_point_of_death(stop_at: str) -> None:
    store = InMemoryStore()
    ids = await _dead_learner(store, stop_at)
    survivor = _combee(store)
    learner = BackgroundLearner(
        survivor._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.01)
    )
    while await learner.tick():
        pass
    await asyncio.sleep(0.02)  # past max_wait: the last partial batch goes too
    while await learner.tick():
        pass
    history = survivor.history()
    assert {v.status for v in history} == {"accepted"}
    learned = Counter(t for v in history for t in v.source_trace_ids)
    assert learned == Counter(t.id for t in failing_traces(8))
    assert survivor.queue().stats() == {"pending": 0, "claimed": 0, "done": 8, "waiting": 0}
    assert set(ids) <= set(learned)
    learner.stop()


async def test_recover_leaves_its_own_claims_and_reports() -> None:
    store = InMemoryStore()
    ids = await _dead_learner(store, "candidate")
    combee = _combee(store)
    mine = await combee.queue().aclaim(2, holder="me")
    report = await recover(combee._learner_parts, None, holder="me")
    assert report.acked == tuple(sorted(ids)) and report.released == ()
    assert report.decided == (1,)
    assert combee.current().version == 1
    assert {c.trace_id for c in await combee.queue().aclaims()} == {t.id for t in mine}
    assert await recover(combee._learner_parts, None, holder="me") == type(report)()


async def test_keep_lease_renews_during_a_long_step() -> None:
    now = [1000.0]
    store = InMemoryStore()
    lease = Lease(store, PROMPT, holder="me", ttl_seconds=0.03, clock=lambda: now[0])
    other = Lease(store, PROMPT, holder="other", ttl_seconds=0.03, clock=lambda: now[0])
    assert await lease.aacquire()
    async with keep_lease(lease):
        for _ in range(5):
            now[0] += 0.02  # the fake clock moves on; the beats renew from "now"
            await asyncio.sleep(0.03)
            assert not await other.aacquire()
    now[0] += 0.05
    assert await other.aacquire()


async def test_a_lapse_the_holder_never_saw_still_settles_leftovers() -> None:
    store = InMemoryStore()
    survivor = _combee(store)
    learner = BackgroundLearner(
        survivor._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.01)
    )
    assert await learner.tick() == 0  # takes the lease; nothing queued yet
    # Its lease lapses between two passes and another learner claims a batch and dies.
    assert Lease(store, PROMPT, holder=learner.holder).release()
    await asyncio.sleep(0.01)
    ids = await _dead_learner(store, "claimed")
    while await learner.tick():
        pass
    await asyncio.sleep(0.02)
    while await learner.tick():
        pass
    learned = Counter(t for v in survivor.history() for t in v.source_trace_ids)
    assert set(ids) <= set(learned) and set(learned.values()) == {1}
    assert survivor.queue().stats()["done"] == 8
    learner.stop()


class _DiesBeforeHead(InMemoryStore):
    """A store without transactions whose writer process dies just before moving HEAD."""

    def __init__(self) -> None:
        super().__init__()
        self.dying = False

    def batch(self, ops: Any) -> list[Result]:
        results: list[Result] = []
        for op in ops:  # one by one, as a store without transactions writes them
            if self.dying and isinstance(op, PutOp) and op.key == "head":
                raise RuntimeError("killed")
            results.extend(super().batch([op]))
        return results

    async def abatch(self, ops: Any) -> list[Result]:
        return self.batch(ops)


def _accepted_but_not_head(store: _DiesBeforeHead) -> PromptVersion:
    dead = _combee(store)
    dead.learn(failing_traces(4))
    store.dying = True
    with pytest.raises(RuntimeError, match="killed"):
        dead.learn(failing_traces(4, prefix="late"))
    store.dying = False
    orphan = dead.get(2)
    assert orphan.status == "accepted" and orphan.parent == 1
    assert dead.registry().head().version == 1  # the rules of v2 are out of force
    return orphan


async def test_a_new_learner_repairs_head_left_behind_by_a_dead_writer() -> None:
    store = _DiesBeforeHead()
    orphan = await asyncio.to_thread(_accepted_but_not_head, store)
    survivor = _combee(store)
    survivor.capture(failing_traces(1, prefix="next")[0])
    survivor.flush()
    learner = BackgroundLearner(
        survivor._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.01)
    )
    await learner.tick()  # taking the lease settles what the dead writer left
    head = survivor.current()
    chain, number = [], head.version
    while number:
        chain.append(number)
        number = survivor.get(number).parent or 0
    assert orphan.version in chain
    assert {b.content for b in orphan.playbook.bullets} <= {
        b.content for b in head.playbook.bullets
    }


def test_the_next_learn_repairs_head_before_it_writes() -> None:
    store = _DiesBeforeHead()
    orphan = _accepted_but_not_head(store)
    survivor = _combee(store)
    report = survivor.learn(failing_traces(4, prefix="next"))
    head = report.version
    assert head.version == 3 and head.parent == orphan.version
    assert {b.content for b in orphan.playbook.bullets} <= {
        b.content for b in head.playbook.bullets
    }


def test_learn_while_another_process_holds_the_lease_is_a_clear_error() -> None:
    store = InMemoryStore()
    # A lease record of a learner in another process (no Lease object of ours holds it).
    assert Lease(store, PROMPT, holder="learner-elsewhere", ttl_seconds=600).acquire()
    gc.collect()
    combee = Combee(
        prompt_id=PROMPT,
        model=fake_learner(),
        store=store,
        batch_size=4,
        learner=LearnerSettings(lease_seconds=0.1),
    )
    with pytest.raises(LeaseHeldError, match="learner-elsewhere"):
        combee.learn(failing_traces(4))
    assert combee.history() == []


def test_head_repair_finds_a_rebased_version_numbered_below_head() -> None:
    # v1 and v2 learned from v0; v2 approved. Approving v1 rebases it onto v2 and
    # accepts it: an accepted version numbered below the HEAD it extends. A writer
    # that died before moving HEAD to it left its rules out of force; repair must
    # not look only at the numbers above HEAD.
    store = _DiesBeforeHead()
    combee = Combee(
        prompt_id=PROMPT,
        model=fake_learner(),
        store=store,
        batch_size=2,
        acceptance=ManualApproval(),
    )
    combee.learn(failing_traces(4))
    combee.approve(2)
    store.dying = True
    with pytest.raises(RuntimeError, match="killed"):
        combee.approve(1)
    store.dying = False
    orphan = combee.get(1)
    assert (orphan.status, orphan.parent) == ("accepted", 2)

    combee.learn(failing_traces(2, prefix="next"))  # the next writer session

    assert combee.current().version == orphan.version
    assert combee.get(3).parent == orphan.version  # the new candidate builds on it


async def test_claims_that_lapsed_while_the_learner_was_dead_are_settled_not_relearned() -> None:
    # The dead learner claimed an hour ago, its claims (600 s) lapsed long since:
    # a learner restarted after a long outage must still find what it wrote.
    store = InMemoryStore()
    dead = _combee(store)
    for trace in failing_traces(8):
        dead.capture(trace)
    dead.flush()
    past = TraceQueue(store, PROMPT, clock=lambda: time.time() - 3600)
    batch = await past.aclaim(4, holder="dead", visibility_seconds=600)
    result = await dead._engine(None).step(dead.current().playbook, batch, version=1)
    await dead.registry().aadd_candidate(  # written, never decided nor acked
        PromptVersion(
            prompt_id=PROMPT, playbook=result.playbook, source_trace_ids=[t.id for t in batch]
        )
    )
    survivor = _combee(store)
    learner = BackgroundLearner(
        survivor._learner_parts,
        survivor._learning.replace(min_batch=1, max_wait_seconds=0.01),
    )
    while await learner.tick():
        pass
    await asyncio.sleep(0.02)  # past max_wait: the last partial batch goes too
    while await learner.tick():
        pass
    history = survivor.history()
    assert {v.status for v in history} == {"accepted"}
    learned = Counter(t for v in history for t in v.source_trace_ids)
    assert learned == Counter(t.id for t in failing_traces(8))  # each trace once
    learner.stop()
