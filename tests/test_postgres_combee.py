"""``Combee`` on a real PostgreSQL server: PostgresStore and AsyncPostgresStore.

The storage classes themselves run the shared conformance suite
(``test_storage_conformance``, ``test_storage_async``); these tests drive the
whole object: capture, the background learner, restarts and ``alearn``. They
need ``COMBEE_TEST_POSTGRES_DSN`` (see ``tests/postgres.py``).
"""

from __future__ import annotations

import asyncio

from langgraph_combee import Combee, Trace
from langgraph_combee._runtime.learner import BackgroundLearner, LearnerSettings
from langgraph_combee.testing import fake_learner
from tests import postgres
from tests.helpers import failing_traces

PROMPT = "pg-agent"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _learner(combee: Combee) -> BackgroundLearner:
    settings = LearnerSettings(min_batch=2, max_wait_seconds=10.0)
    return BackgroundLearner(combee, settings, clock=FakeClock())


def _capture_all(combee: Combee, traces: list[Trace]) -> None:
    for trace in traces:
        combee.capture(trace)
    combee.server.flush()


async def test_background_learner_learns_captured_traces(postgres_dsn: str) -> None:
    with postgres.open_store(postgres_dsn) as store:
        combee = Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4)
        _capture_all(combee, failing_traces(6))
        learner = _learner(combee)
        assert await learner.tick() == 1
        head = await combee.acurrent()
        assert head.version == 1 and len(head.playbook.bullets) == 4
        assert combee.server.head(None).version == 1
        assert await learner.tick() == 0  # two traces left: below the batch
        assert await combee.queue().astats() == {
            "pending": 2,
            "claimed": 0,
            "done": 4,
            "waiting": 0,
        }
        learner.stop()
        assert learner.stats.traces_learned == 4


def test_versions_and_queue_survive_a_new_combee_on_the_same_database(
    postgres_dsn: str,
) -> None:
    with postgres.open_store(postgres_dsn) as store:
        first = Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4)
        report = first.learn(failing_traces(4))
        assert report.version.version == 1
        for trace in failing_traces(4, prefix="late"):
            first.capture(trace)
        first.stop()  # flushes the capture buffer; no learner ran on these
        learned = first.current()
    with postgres.open_store(postgres_dsn) as store:
        second = Combee(
            prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4, poll_seconds=0.05
        )
        assert second.current() == learned
        assert second.queue().pending_count() == 4
        with second.running():  # the learner's own thread and event loop
            assert second.learner.wait_for_steps(1, timeout=30)
        assert [v.version for v in second.history()] == [1, 2]
        assert second.current().version == 2
        assert "late" in second.current().playbook.render()
        assert second.queue().pending_count() == 0
    with postgres.open_store(postgres_dsn) as store:
        third = Combee(prompt_id=PROMPT, store=store)
        assert third.current().version == 2
        assert third.rollback(1).playbook == learned.playbook


async def test_async_postgres_store_under_alearn(postgres_dsn: str) -> None:
    async with postgres.aopen_store(postgres_dsn) as store:
        combee = Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=3)
        report = await combee.alearn(failing_traces(6))
        assert [step.version for step in report.steps] == [1, 2]
        assert report.version.version == 2
        assert len(report.version.playbook.bullets) == 6
        assert [v.version for v in await combee.registry().ahistory()] == [1, 2]
    async with postgres.aopen_store(postgres_dsn) as store:
        again = Combee(prompt_id=PROMPT, store=store)
        assert await again.acurrent() == report.version


async def test_async_postgres_store_with_the_learner_on_the_same_loop(postgres_dsn: str) -> None:
    async with postgres.aopen_store(postgres_dsn) as store:
        combee = Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4)
        for trace in failing_traces(4):
            combee.capture(trace)
        learner = _learner(combee)
        # tick() flushes the capture buffer on a worker thread: the store's sync
        # API hands those writes to this (running) loop.
        assert await learner.tick() == 1
        assert (await combee.acurrent()).version == 1
        assert await combee.queue().apending_count() == 0


async def test_async_postgres_store_with_the_learner_thread(postgres_dsn: str) -> None:
    async with postgres.aopen_store(postgres_dsn) as store:
        combee = Combee(
            prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4, poll_seconds=0.02
        )
        await combee.astart()  # the learner runs on a thread and event loop of its own
        try:
            for trace in failing_traces(4):
                combee.capture(trace)
            for _ in range(1000):
                if combee.learner.stats.steps or combee.learner.stats.last_error:
                    break
                await asyncio.sleep(0.01)
        finally:
            await combee.astop()
        assert combee.learner.stats.steps == 1, combee.learner.stats.last_error
        assert (await combee.acurrent()).version == 1
