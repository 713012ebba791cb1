"""The background learner: batches from the queue, leases, failures, durability, tenants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore

from langgraph_combee import CaptureSettings, Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.testing import FunctionChatModel, fake_learner
from tests.helpers import background_learner, failing_traces


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _learner(combee: Combee, clock: FakeClock | None = None, **kw: object) -> BackgroundLearner:
    # No jitter: these tests move the clock by the exact backoff.
    fields: dict[str, Any] = {"min_batch": 2, "max_wait_seconds": 10.0, "backoff_jitter": 0}
    return background_learner(combee._learner_parts, clock=clock or FakeClock(), **{**fields, **kw})


def _capture_all(combee: Combee, traces: list[Trace]) -> None:
    for trace in traces:
        combee.capture(trace)
    combee.flush()


async def test_full_batch_is_learned_and_served_at_once() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=4)
    _capture_all(combee, failing_traces(6))
    learner = _learner(combee)
    assert await learner.tick() == 1
    assert combee.current().version == 1
    assert combee._agent.server.head(None).version == 1  # published to the cache
    assert len(combee.current().playbook.bullets) == 4
    # Two traces remain: below the batch, waiting for max_wait.
    assert await learner.tick() == 0
    assert combee.queue().pending_count() == 2
    assert learner.stats.traces_learned == 4


async def test_low_traffic_learns_after_max_wait_with_min_batch() -> None:
    clock = FakeClock()
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=10)
    learner = _learner(combee, clock, min_batch=3)
    _capture_all(combee, failing_traces(2))
    assert await learner.tick() == 0
    clock.now += 11
    assert await learner.tick() == 0  # waited long enough, but fewer than min_batch
    _capture_all(combee, failing_traces(3, prefix="more"))
    assert await learner.tick() == 1
    assert learner.stats.reports[0].batch_size == 5


async def test_traces_fewer_than_min_batch_are_learned_after_four_waits() -> None:
    # The last runs of a burst: nothing more may come, and nothing is left behind.
    clock = FakeClock()
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=10)
    learner = _learner(combee, clock, min_batch=3)
    _capture_all(combee, failing_traces(2))
    assert await learner.tick() == 0
    clock.now += 39
    assert await learner.tick() == 0  # 3.9 waits of 10 s
    clock.now += 2
    assert await learner.tick() == 1
    assert learner.stats.reports[0].batch_size == 2
    assert combee.queue().pending_count() == 0


async def test_failing_step_writes_nothing_releases_traces_and_backs_off() -> None:
    clock = FakeClock()

    def down(messages: object) -> str:
        raise ConnectionError("learner LLM unreachable")

    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(down),
        batch_size=4,
        learner=LearnerSettings(max_attempts=1, backoff_seconds=0),
    )
    learner = _learner(combee, clock, step_backoff_seconds=5.0)
    _capture_all(combee, failing_traces(4))
    assert await learner.tick() == 0
    assert learner.stats.failed_steps == 1
    error = learner.stats.last_error or ""
    assert "the learner LLM raised ConnectionError: learner LLM unreachable" in error
    assert combee.history() == []
    assert combee.queue().pending_count() == 4  # released, not lost
    assert await learner.tick() == 0  # backing off: no new attempt
    assert learner.stats.failed_steps == 1
    clock.now += 5.1
    await learner.tick()
    assert learner.stats.failed_steps == 2


async def test_only_the_lease_holder_learns() -> None:
    store_combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2)
    other = Combee(prompt_id="p", model=fake_learner(), batch_size=2, store=store_combee.store)
    first, second = _learner(store_combee), _learner(other)
    _capture_all(store_combee, failing_traces(4))
    assert await first.tick() == 1
    assert await second.tick() == 0
    assert await first.tick() == 1
    first.stop()  # releases the lease
    _capture_all(store_combee, failing_traces(2, prefix="late"))
    assert await second.tick() == 1


async def test_traces_wait_for_feedback_then_learn_or_drop() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        capture=CaptureSettings(feedback_wait_seconds=3600),
    )
    learner = _learner(combee)
    unlabelled = [Trace(id=f"r{i}", input=f"order {i} problem", output="X") for i in range(2)]
    _capture_all(combee, unlabelled)
    assert await learner.tick() == 0  # both are waiting for feedback
    assert combee.feedback("r0", correct=False, ground_truth="Y0")
    assert combee.feedback("r1", correct=False, ground_truth="Y1")
    assert not combee.feedback("nope", correct=True)
    assert combee._agent.server.stats.feedback_unknown == 1
    assert await learner.tick() == 1
    assert len(combee.current().playbook.bullets) == 2


async def test_feedback_reaches_a_trace_still_in_memory() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=1)
    combee._agent.server.flush_seconds = 3600  # keep it buffered
    combee.capture(Trace(id="run-1", input="q", output="a"))
    assert combee.feedback("run-1", correct=False, ground_truth="b")
    combee.flush()
    [trace] = combee.queue().claim(1, holder="t")
    assert trace.feedback == Feedback(correct=False, ground_truth="b", source="user")


def test_feedback_needs_a_signal() -> None:
    combee = Combee(prompt_id="p")
    with pytest.raises(ValueError, match="at least one of"):
        combee.feedback("x")


async def test_missing_feedback_drop_policy() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        learner=LearnerSettings(on_missing_feedback="drop"),
    )
    learner = _learner(combee)
    _capture_all(combee, [Trace(id="a", input="x"), *failing_traces(1)])
    assert await learner.tick() == 1
    assert learner.stats.traces_dropped == 1
    assert learner.stats.reports[0].trace_ids == ["t0"]


async def test_evaluator_scores_at_capture_time() -> None:
    def grade(trace: Trace) -> Feedback | None:
        return Feedback(correct=trace.output == "OK", ground_truth="OK")

    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=1, evaluator=grade)
    _capture_all(combee, [Trace(id="z", input="routing question", output="NO")])
    [trace] = combee.queue().claim(1, holder="t")
    assert trace.feedback is not None and trace.feedback.correct is False


def test_a_raising_evaluator_never_breaks_capture() -> None:
    def boom(trace: Trace) -> Feedback | None:
        raise RuntimeError("bug in user code")

    combee = Combee(prompt_id="p", evaluator=boom)
    combee.capture(Trace(id="z"))
    assert combee.flush() == 1


def test_capture_buffer_is_bounded_and_counts_drops() -> None:
    combee = Combee(prompt_id="p", capture=CaptureSettings(capture_limit=3))
    combee._agent.server.flush_seconds = 3600
    combee._agent.server._ensure_worker = lambda: None  # type: ignore[method-assign]
    for i in range(5):
        combee.capture(Trace(id=f"x{i}"))
    assert combee._agent.server.buffered() == 3
    assert combee._agent.server.stats.dropped == 2
    combee.flush()
    ids = [t.id for t in combee.queue().claim(10, holder="t")]
    assert ids == ["x2", "x3", "x4"]  # drop_oldest kept the newest


async def test_tenants_learn_their_own_playbooks() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2)
    a = [t.model_copy(update={"tenant": "acme"}) for t in failing_traces(2, prefix="acme")]
    b = [t.model_copy(update={"tenant": "globex"}) for t in failing_traces(2, prefix="globex")]
    _capture_all(combee, a + b)
    learner = _learner(combee)
    assert sorted(map(str, learner.tenants())) == ["None", "acme", "globex"]
    assert await learner.tick() == 2
    acme = combee.current(tenant="acme").playbook.render()
    globex = combee.current(tenant="globex").playbook.render()
    assert "acme" in acme and "globex" not in acme
    assert "globex" in globex and "acme" not in globex
    assert combee.current().version == 0


def test_sqlite_queue_survives_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "combee.db")
    with SqliteStore.from_conn_string(path) as store:
        store.setup()
        first = Combee(prompt_id="p", store=store)
        for trace in failing_traces(4):
            first.capture(trace)
        first.stop()  # flushes the buffer; no learner ever ran
    with SqliteStore.from_conn_string(path) as store:
        second = Combee(
            prompt_id="p",
            model=fake_learner(),
            store=store,
            batch_size=4,
            learner=LearnerSettings(poll_seconds=0.05),
        )
        with second.running():
            assert second.learner.wait_for_steps(1, timeout=20)
        assert second.current().version == 1
        assert len(second.current().playbook.bullets) == 4
        assert second.queue().pending_count() == 0


def test_running_context_learns_in_the_background_and_stop_keeps_the_rest() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=3,
        learner=LearnerSettings(poll_seconds=0.02),
    )
    with combee.running():
        for trace in failing_traces(3):
            combee.capture(trace)
        assert combee.learner.wait_for_steps(1, timeout=20)
    assert not combee.learner.running
    assert combee.current().version == 1
    combee.capture(failing_traces(1, prefix="after")[0])
    combee.stop()
    assert combee.queue().pending_count() == 1


async def test_astart_and_astop_do_not_block_the_callers_loop() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        learner=LearnerSettings(poll_seconds=0.02),
    )
    await combee.astart()
    for trace in failing_traces(2):
        combee.capture(trace)
    import asyncio

    for _ in range(500):
        if combee.learner.stats.steps:
            break
        await asyncio.sleep(0.01)
    await combee.astop()
    assert combee.learner.stats.steps == 1


def test_start_without_a_model_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="learner model"):
        Combee(prompt_id="p").start()


def test_the_default_in_memory_store_is_safe_across_threads() -> None:
    import threading

    from langgraph.store.memory import InMemoryStore

    from langgraph_combee._storage.locked import LockedStore

    shared = InMemoryStore()
    first, second = Combee(prompt_id="p", store=shared), Combee(prompt_id="p", store=shared)
    assert isinstance(first.store, LockedStore) and first.store.inner is shared
    assert first.store._lock is second.store._lock  # one lock per underlying store
    errors: list[BaseException] = []

    def writer(combee: Combee, prefix: str) -> None:
        try:
            for i in range(300):
                combee.queue().put(Trace(id=f"{prefix}{i}"))
        except BaseException as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(100):
                first.queue().stats()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(first, "a")),
        threading.Thread(target=writer, args=(second, "b")),
        threading.Thread(target=reader),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert first.queue().pending_count() == 600


def test_stop_timing_out_mid_step_keeps_the_lease_and_the_step_still_writes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # stop(timeout) released the learner lease while the step
    # still ran, so another learner could take the same turn beside it.
    import threading
    import time

    from langgraph.store.memory import InMemoryStore

    inner, entered = fake_learner(), threading.Event()

    def slow(messages: list[Any]) -> Any:
        entered.set()
        time.sleep(1.5)
        return inner.invoke(messages)

    store = InMemoryStore()
    combee = Combee(
        prompt_id="p",
        store=store,
        model=FunctionChatModel(slow),
        batch_size=1,
        learner=LearnerSettings(min_batch=1, poll_seconds=0.1, max_wait_seconds=0.1),
    )
    combee.capture(Trace(input="q", output="a", feedback=Feedback(correct=False, ground_truth="b")))
    combee.flush()
    combee.start()
    assert entered.wait(10)
    learner = combee._learner
    assert learner is not None
    leases = dict(learner._leases)
    with caplog.at_level("WARNING"):
        combee.stop(timeout=0.2)
    assert "still running after stop(timeout=0.2)" in caplog.text
    assert leases and learner._leases == leases  # kept: they expire on their own
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and combee.current().version == 0:
        time.sleep(0.1)
    assert combee.current().version == 1  # the step's work is not lost


def test_start_after_a_stop_that_timed_out_never_runs_two_learner_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # stop(timeout) forgot the thread still in its step, and
    # start() then ran a second one beside it on the same learner.
    import asyncio
    import threading
    import time

    from langgraph.store.memory import InMemoryStore

    async def slow_tick(self: BackgroundLearner) -> int:
        await asyncio.sleep(0.6)
        return 0

    monkeypatch.setattr(BackgroundLearner, "tick", slow_tick)
    combee = Combee(prompt_id="p", store=InMemoryStore(), model=fake_learner())
    combee.start()
    time.sleep(0.1)
    combee.stop(timeout=0.05)
    combee.start()
    time.sleep(0.3)
    alive = [t for t in threading.enumerate() if t.name == "combee-learner"]
    combee.close(timeout=5)
    assert len(alive) == 1


def test_stop_and_start_from_the_learners_own_step_keep_one_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # stop() from a hook on the learner's thread, then start(),
    # ran two threads; start() from the step left running tried to join itself;
    # start() waited forever on a hung step.
    import asyncio
    import threading
    import time
    import types

    from langgraph_combee._learner import learner as learner_module

    def threads() -> int:
        return sum(t.name == "combee-learner" for t in threading.enumerate())

    parts = types.SimpleNamespace(feedback_source=None)
    calls = {"n": 0}

    async def stop_in_hook(self: BackgroundLearner) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            self.stop()
            await asyncio.sleep(0.3)
        return 0

    monkeypatch.setattr(BackgroundLearner, "tick", stop_in_hook)
    first = BackgroundLearner(parts, LearnerSettings(poll_seconds=0.01))
    first.start()
    time.sleep(0.1)
    first.start()  # waits for the step the hook stopped
    time.sleep(0.3)
    assert threads() == 1
    first.stop(timeout=2)

    box: dict[str, object] = {}

    async def restart_inside(self: BackgroundLearner) -> int:
        await asyncio.sleep(0.2)
        if "done" not in box:
            box["done"] = True
            try:
                self.start()
            except Exception as exc:
                box["error"] = exc
        return 0

    monkeypatch.setattr(BackgroundLearner, "tick", restart_inside)
    second = BackgroundLearner(parts, LearnerSettings(poll_seconds=0.01))
    second.start()
    time.sleep(0.05)
    second.stop(timeout=0.01)
    time.sleep(0.4)
    assert "error" not in box and second.running and threads() == 1
    second.stop(timeout=2)

    hang = threading.Event()

    async def hung(self: BackgroundLearner) -> int:
        await asyncio.to_thread(hang.wait)
        return 0

    monkeypatch.setattr(BackgroundLearner, "tick", hung)
    monkeypatch.setattr(learner_module, "LINGER_WAIT_SECONDS", 0.2)
    third = BackgroundLearner(parts, LearnerSettings(poll_seconds=0.01))
    third.start()
    time.sleep(0.05)
    third.stop(timeout=0.05)
    with pytest.raises(RuntimeError, match="has not ended after 0.2 s"):
        third.start()
    hang.set()
    time.sleep(0.2)
    third.start()
    assert third.running
    third.stop(timeout=2)
