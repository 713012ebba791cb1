"""``Combee`` on a real PostgreSQL server: PostgresStore and AsyncPostgresStore.

The storage classes themselves run the shared conformance suite
(``tests/storage/test_conformance.py``, ``tests/storage/test_async.py``); these tests drive the
whole object: capture, the background learner, restarts and ``alearn``; and two
writer processes at once (``tests/pg_writer.py``): four concurrent ``learn()``
calls keep every step, and a lease holder paused (SIGSTOP) past its expiry
cannot write after its successor. They need ``COMBEE_TEST_POSTGRES_DSN`` (see
``tests/postgres.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langgraph_combee import Combee, LearnerSettings, Trace
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.testing import fake_learner
from tests import postgres
from tests.helpers import assert_every_step_in_head, failing_traces

PROMPT = "pg-agent"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _learner(combee: Combee) -> BackgroundLearner:
    settings = LearnerSettings(min_batch=2, max_wait_seconds=10.0)
    return BackgroundLearner(combee._learner_parts, settings, clock=FakeClock())


def _capture_all(combee: Combee, traces: list[Trace]) -> None:
    for trace in traces:
        combee.capture(trace)
    combee.flush()


async def test_background_learner_learns_captured_traces(postgres_dsn: str) -> None:
    with postgres.open_store(postgres_dsn) as store:
        combee = Combee(prompt_id=PROMPT, model=fake_learner(), store=store, batch_size=4)
        _capture_all(combee, failing_traces(6))
        learner = _learner(combee)
        assert await learner.tick() == 1
        head = await combee.acurrent()
        assert head.version == 1 and len(head.playbook.bullets) == 4
        assert combee._agent.server.head(None).version == 1
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
            prompt_id=PROMPT,
            model=fake_learner(),
            store=store,
            batch_size=4,
            learner=LearnerSettings(poll_seconds=0.05),
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
        assert third.rollback(1).playbook.bullets == learned.playbook.bullets


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
            prompt_id=PROMPT,
            model=fake_learner(),
            store=store,
            batch_size=4,
            learner=LearnerSettings(poll_seconds=0.02),
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


# ---- two writer processes on one database ------------------------------------


def _writer(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pg_writer", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    return line


def test_two_processes_learning_twice_at_once_keep_every_step(
    postgres_dsn: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    procs = [_writer("learn", postgres_dsn, tag, str(go)) for tag in ("a", "b")]
    go.touch()  # both start their two learn() calls together
    try:
        assert [_line(p) for p in procs] == ["done", "done"]
    finally:
        for proc in procs:
            proc.wait(timeout=60)
    with Combee.from_conn_string(postgres_dsn, prompt_id="pg-writers") as combee:
        history = combee.history()
        assert_every_step_in_head(history, combee.current())
        learned = {t for v in history for t in v.source_trace_ids}
        assert {t[:3] for t in learned} == {"aw0", "aw1", "bw0", "bw1"}


def test_a_writer_paused_past_its_lease_cannot_write_after_its_successor(
    postgres_dsn: str,
) -> None:
    first = _writer("hold", postgres_dsn, "first", "1.0")
    try:
        assert _line(first) == "held 1"
        os.kill(first.pid, signal.SIGSTOP)  # a long GC pause, a frozen VM
        time.sleep(1.5)  # past the first holder's TTL (no assertion on time)
        second = _writer("hold", postgres_dsn, "second", "30")
        assert _line(second) == "held 2"
        assert second.stdin is not None
        second.stdin.write("\n")
        second.stdin.flush()
        assert _line(second) == "wrote"
        os.kill(first.pid, signal.SIGCONT)
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.flush()
        answer = _line(first)
        assert answer.startswith("refused ") and "epoch 1" in answer
    finally:
        os.kill(first.pid, signal.SIGCONT)
        first.wait(timeout=30)
        second.wait(timeout=30)
    with Combee.from_conn_string(postgres_dsn, prompt_id="pg-writers") as combee:
        assert [v.version for v in combee.history()] == [1]
        head = combee.current()
        assert head.version == 1
        assert [b.content for b in head.playbook.bullets] == ["Rule written by second."]


async def test_approve_on_an_async_store_of_the_running_loop_is_a_clear_error(
    postgres_dsn: str,
) -> None:
    from langgraph_combee import ManualApproval
    from langgraph_combee.errors import EngineLoopError

    async with postgres.aopen_store(postgres_dsn) as store:
        combee = Combee(
            prompt_id=PROMPT, model=fake_learner(), store=store, acceptance=ManualApproval()
        )
        try:
            await combee.alearn(failing_traces(2))
            with pytest.raises(EngineLoopError, match="asyncio.to_thread"):
                combee.approve(1)
            approved = await asyncio.to_thread(combee.approve, 1)
            assert approved.status == "accepted"
        finally:
            await combee.aclose()
