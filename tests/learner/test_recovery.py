"""The background learner keeps making progress: poison traces, repeated failures, slow steps.

* a trace that breaks every step it is in is found by splitting the failing batch
  and parked as a dead letter; the traces beside it are learned;
* a step that keeps failing for one reason backs off exponentially (capped, with
  jitter), visible in ``describe()``;
* a step that runs past the writer lease's TTL keeps the lease (a heartbeat on a
  thread of its own) and its result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from langgraph_combee import AlgorithmSettings, Combee, LearnerSettings, Trace
from langgraph_combee._core.text import message_text
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._learner.recovery import StepRecovery, same_fault
from langgraph_combee._storage.keys import LEASE_KEY, PromptSpace
from langgraph_combee._storage.lease import Lease
from langgraph_combee.testing import FunctionChatModel, fake_learner
from tests import postgres
from tests.helpers import FakeClock, background_learner, failing_traces, role_of

POISON = "t5"


def _text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(message_text(m.content) for m in messages)


def _learner(combee: Combee, clock: FakeClock, **kw: Any) -> BackgroundLearner:
    fields = {"min_batch": 1, "step_backoff_seconds": 1.0, "backoff_jitter": 0}
    return background_learner(combee._learner_parts, clock=clock, **{**fields, **kw})


def _learned_ids(combee: Combee) -> list[str]:
    return sorted(t for v in combee.history() for t in v.source_trace_ids)


class PoisonCurator:
    """A scripted learner whose curator call fails whenever a given trace is in the batch.

    ``fan_in=1`` gives one curator call per step, over every reflection of the
    batch: like a provider's content filter refusing any request that quotes the
    trace.
    """

    def __init__(self, poison: str) -> None:
        self.poison = poison
        self.good = fake_learner()
        self.curator_calls = 0
        self.blocked = 0

    def __call__(self, messages: list[BaseMessage]) -> str:
        if role_of(messages) == "curator":
            self.curator_calls += 1
            if f"ticket {self.poison[1:]} about" in _text(messages):
                self.blocked += 1
                raise ValueError("400: the request was blocked by the content filter")
        return str(self.good.invoke(messages).content)


def _queue(combee: Combee, traces: Sequence[Trace]) -> None:
    """Capture ``traces`` and write them to the queue."""
    for trace in traces:
        combee.capture(trace)
    combee.flush()


async def _tick(learner: BackgroundLearner, clock: FakeClock, times: int) -> None:
    """``times`` learner ticks, each followed by 100 s of learner time (past any backoff)."""
    for _ in range(times):
        await learner.tick()
        clock.now += 100


async def test_a_trace_that_breaks_every_step_is_parked_and_the_others_learned() -> None:
    llm = PoisonCurator(POISON)
    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(llm),
        batch_size=12,
        learner=LearnerSettings(max_attempts=1, backoff_seconds=0),
        algorithm=AlgorithmSettings(fan_in=1),
    )
    clock = FakeClock()
    learner = _learner(combee, clock)
    traces = failing_traces(12)
    _queue(combee, traces)

    for _ in range(40):
        await learner.tick()
        clock.now += 100  # past any backoff
        if not combee.queue().backlog()["pending"]:
            break

    good = sorted(t.id for t in traces if t.id != POISON)
    assert _learned_ids(combee) == good  # all 11, each once
    assert learner.stats.traces_learned == 11
    [letter] = combee.queue().dead_letters()
    assert letter.trace_id == POISON and combee.queue().status(POISON) == "dead"
    assert "content filter" in letter.reason
    # 12 (failed, retried whole once), 6 halves, 3, 2, then t5 alone: six failed
    # steps, each with the poison in it; four successful ones learn the other 11.
    assert learner.stats.failed_steps == 6 == letter.attempts == llm.blocked
    assert learner.stats.steps == 4 and learner.stats.traces_parked == 1
    assert learner.stats.split_batches == 4
    assert llm.curator_calls == 10
    described = learner.describe()
    assert described["traces_parked"] == 1 and described["bisecting"] == {}
    assert described["dead_letters"] == {"_": 1}

    # Retried from the dead letters (e.g. after a fix), it is learned like any trace.
    llm.poison = "none"
    assert combee.queue().retry_dead() == [POISON]
    assert await learner.tick() == 0  # alone, below the batch: waits max_wait_seconds
    clock.now += 31
    assert await learner.tick() == 1
    assert _learned_ids(combee) == sorted(t.id for t in traces)
    assert learner.describe()["dead_letters"] == {}


async def test_an_outage_parks_nothing_and_everything_is_learned_after_it() -> None:
    down = True
    good = fake_learner()

    def reply(messages: list[BaseMessage]) -> str:
        if down:
            raise ConnectionError("learner LLM unreachable")
        return str(good.invoke(messages).content)

    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(reply),
        batch_size=4,
        learner=LearnerSettings(max_attempts=1),
    )
    clock = FakeClock()
    learner = _learner(combee, clock, max_trace_attempts=3)
    _queue(combee, failing_traces(4))
    await _tick(learner, clock, 30)
    assert learner.stats.failed_steps >= 20
    assert combee.queue().dead_letters() == []  # never parked: nobody succeeded
    down = False
    await _tick(learner, clock, 10)
    assert _learned_ids(combee) == sorted(t.id for t in failing_traces(4))
    assert combee.queue().dead_letters() == []


async def test_a_lone_trace_that_always_fails_is_parked_after_max_attempts() -> None:
    llm = PoisonCurator(POISON)
    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(llm),
        batch_size=1,
        learner=LearnerSettings(max_attempts=1),
        algorithm=AlgorithmSettings(fan_in=1),
    )
    clock = FakeClock()
    learner = _learner(combee, clock, max_trace_attempts=3)
    _queue(combee, failing_traces(6)[5:])  # t5 alone: nothing to compare it with
    await _tick(learner, clock, 10)
    [letter] = combee.queue().dead_letters()
    assert letter.trace_id == POISON and letter.attempts == 3 == learner.stats.failed_steps
    learner.stop()
    assert learner.describe()["dead_letters"] == {"_": 1}  # still reported once stopped


def test_step_backoff_is_exponential_capped_and_jittered() -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    settings = LearnerSettings(step_backoff_seconds=1.0)
    learner = BackgroundLearner(
        combee._learner_parts, settings, max_backoff_seconds=8.0, backoff_jitter=0.5
    )
    for failures, delay in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0), (60, 8.0)]:
        for _ in range(20):
            assert delay <= learner.backoff(failures) <= min(8.0, delay * 1.5)
    # The jitter spreads learners that failed together.
    assert len({learner.backoff(2) for _ in range(20)}) > 1
    exact = BackgroundLearner(
        combee._learner_parts, settings, max_backoff_seconds=8.0, backoff_jitter=0
    )
    assert [exact.backoff(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 8.0, 8.0]


async def test_repeated_failures_for_one_reason_back_off_and_describe_says_so() -> None:
    fault = ["down"]

    def reply(messages: list[BaseMessage]) -> str:
        if fault[0] == "down":
            raise ConnectionError("learner LLM unreachable")
        return "no JSON here"  # another fault: every reply unusable

    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(reply),
        batch_size=2,
        learner=LearnerSettings(max_attempts=1),
    )
    clock = FakeClock()
    learner = _learner(combee, clock, max_backoff_seconds=8.0)
    _queue(combee, failing_traces(2))
    seen = []
    for _ in range(5):
        await learner.tick()
        backoff = learner.describe()["backoff"]["_"]
        seen.append((backoff["failures"], backoff["retry_in_seconds"]))
        assert await learner.tick() == 0  # still backing off: no new attempt
        clock.now += backoff["retry_in_seconds"]
    # Doubling from 1 s, capped at 8 s (the whole batch, its halves: one reason).
    assert seen == [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0)]
    assert learner.stats.failed_steps == 5
    reason = learner.describe()["backoff"]["_"]["reason"]
    assert "the learner LLM raised ConnectionError: learner LLM unreachable" in reason

    fault[0] = "garbage"  # a new reason starts over
    await learner.tick()
    backoff = learner.describe()["backoff"]["_"]
    assert (backoff["failures"], backoff["retry_in_seconds"]) == (1, 1.0)
    assert "no usable reflection" in backoff["reason"]
    assert learner.stats.failed_steps == 6


class BlockingLearner:
    """A learner model whose first curator call blocks (on the event loop) until released."""

    def __init__(self) -> None:
        self.good = fake_learner()
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: list[BaseMessage]) -> str:
        if role_of(messages) == "curator" and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30)
        return str(self.good.invoke(messages).content)


def _expires_at(store: InMemoryStore) -> float:
    item = store.get(PromptSpace("p").namespace("lease"), LEASE_KEY)
    return -1.0 if item is None else float(item.value["expires_at"])


def _wait_until(predicate: Any) -> bool:
    event = threading.Event()
    for _ in range(3000):
        if predicate():
            return True
        event.wait(0.005)
    return False


def _run_tick_in_thread(learner: BackgroundLearner) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(asyncio.run(learner.tick())))
    thread.start()
    return thread, result


def _four_queued_behind_a_blocking_learner() -> tuple[InMemoryStore, BlockingLearner, Combee]:
    """Four failing traces in the queue of a Combee whose learner model blocks."""
    store = InMemoryStore()
    llm = BlockingLearner()
    combee = Combee(prompt_id="p", model=FunctionChatModel(llm), store=store, batch_size=4)
    _queue(combee, failing_traces(4))
    return store, llm, combee


def test_a_step_past_the_lease_ttl_keeps_the_lease_and_its_result() -> None:
    store, llm, combee = _four_queued_behind_a_blocking_learner()
    wall = FakeClock()  # the lease's clock: moved by hand, far past the TTL
    settings = LearnerSettings(min_batch=1, lease_seconds=60.0)
    learner = BackgroundLearner(
        combee._learner_parts,
        settings,
        clock=FakeClock(),
        lease_clock=wall,
        heartbeat_seconds=0.01,
    )
    rival = Lease(store, "p", holder="rival", ttl_seconds=60.0, clock=wall)

    thread, result = _run_tick_in_thread(learner)
    assert llm.entered.wait(30)  # the step is running, its model call blocks the loop
    for _ in range(4):  # 200 s of lease time pass during one step
        wall.now += 50
        # Renewed at the new time (not merely unexpired): the next move stays in the TTL.
        assert _wait_until(lambda: _expires_at(store) >= wall.now + 60.0)
        assert not rival.acquire()
    llm.release.set()
    thread.join(30)
    assert result == [1]  # the step's result was kept
    assert combee.current().version == 1
    assert combee.queue().stats()["done"] == 4
    assert learner.stats.lease_renewals >= 4


def test_a_lease_gone_during_a_step_is_taken_back_and_the_result_kept() -> None:
    store, llm, combee = _four_queued_behind_a_blocking_learner()
    settings = LearnerSettings(min_batch=1, lease_seconds=60.0)
    learner = BackgroundLearner(
        combee._learner_parts, settings, clock=FakeClock(), heartbeat_seconds=3600
    )

    thread, result = _run_tick_in_thread(learner)
    assert llm.entered.wait(30)
    # The lease record vanishes (released by a stop() that timed out, a store
    # restore, ...) and nobody else takes it.
    assert Lease(store, "p", holder=learner.holder).release()
    llm.release.set()
    thread.join(30)
    assert result == [1]
    assert combee.current().version == 1 and combee.queue().stats()["done"] == 4


def test_a_step_whose_lease_another_learner_took_is_discarded_without_blame() -> None:
    store, llm, combee = _four_queued_behind_a_blocking_learner()
    wall = FakeClock()
    settings = LearnerSettings(min_batch=1, lease_seconds=60.0)
    learner = BackgroundLearner(
        combee._learner_parts,
        settings,
        clock=FakeClock(),
        lease_clock=wall,
        heartbeat_seconds=3600,
    )

    thread, result = _run_tick_in_thread(learner)
    assert llm.entered.wait(30)
    wall.now += 61  # no beat came (a beat every hour): the lease lapses
    assert Lease(store, "p", holder="rival", ttl_seconds=60.0, clock=wall).acquire()
    llm.release.set()
    thread.join(30)
    assert result == [0] and combee.history() == []
    assert combee.queue().pending_count() == 4  # released, no attempt counted
    claimed = combee.queue().claim(4, holder="x")
    assert combee.queue().fail([t.id for t in claimed], reason="probe") == {
        t.id: 1 for t in claimed
    }
    assert learner.describe()["traces_parked"] == 0


def test_step_recovery_plans_a_bisection_breadth_first() -> None:
    recovery = StepRecovery(delay=lambda n: float(n), max_trace_attempts=3)
    ids = ["a", "b", "c", "d"]
    assert recovery.judge(None, ids, {}, split=False, steps=0, others=0) == "retry"
    assert recovery.next_part(None, ready=4, steps=0) == (("a", "b", "c", "d"), True)
    assert recovery.judge(None, ids, {}, split=True, steps=0, others=0) == "split"
    first = recovery.next_part(None, ready=4, steps=0)
    assert first == (("a", "b"), True)
    recovery.put_back(None, first)  # e.g. the budget stopped it: tried first next time
    assert recovery.next_part(None, ready=4, steps=0) == first
    assert recovery.judge(None, ["a", "b"], {}, split=True, steps=0, others=2) == "split"
    assert [recovery.next_part(None, ready=4, steps=0) for _ in range(3)] == [
        (("c", "d"), True),
        (("a",), True),
        (("b",), True),
    ]
    # "a" fails alone before any success: a suspect, kept out of new batches.
    assert recovery.judge(None, ["a"], {"a": 3}, split=True, steps=0, others=3) == "suspect"
    assert recovery.suspects(None) == ["a"]
    assert recovery.next_part(None, ready=4, steps=0) is None
    # A success since: the suspect is tried alone again, and parked if it fails.
    assert recovery.next_part(None, ready=4, steps=1) == (("a",), True)
    assert recovery.judge(None, ["a"], {"a": 4}, split=True, steps=1, others=3) == "park"
    assert recovery.next_part(None, ready=3, steps=1) is None
    assert recovery.bisect == {}
    assert recovery.failed(None, "E: all 4 failed", 0.0) == (1, 1.0)
    assert recovery.failed(None, "E: all 2 failed", 0.0) == (2, 2.0)  # the same fault
    assert recovery.failed(None, "F: other", 0.0) == (1, 1.0)
    assert recovery.waiting(None, 0.5) and not recovery.waiting(None, 1.0)


async def test_the_heartbeat_renews_an_async_postgres_lease_from_its_thread(
    postgres_dsn: str,
) -> None:
    # The heartbeat's sync renewals go through the store's own loop (the test's),
    # which stays free while the step awaits a slow model call.
    async def slow(messages: list[BaseMessage]) -> str:
        await asyncio.sleep(0.3)
        return str(good.invoke(messages).content)

    good = fake_learner()
    async with postgres.aopen_store(postgres_dsn) as store:
        combee = Combee(
            prompt_id="heartbeat-pg", model=FunctionChatModel(slow), store=store, batch_size=2
        )
        for trace in failing_traces(2, prefix="pg"):
            combee.capture(trace)
        learner = BackgroundLearner(
            combee._learner_parts,
            LearnerSettings(min_batch=1),
            clock=FakeClock(),
            heartbeat_seconds=0.05,
        )
        assert await learner.tick() == 1
        assert learner.stats.lease_renewals >= 1 and learner.stats.lease_retakes == 0
        assert (await combee.acurrent()).version == 1


def test_reasons_differing_only_in_counts_and_request_ids_are_one_fault() -> None:
    def raised(detail: str) -> str:
        return f"LearningError: all 4 reflections failed: the learner LLM raised {detail}"

    first = raised("InternalServerError: retry (request ID req_8f3a2b in your message)")
    again = raised("InternalServerError: retry (request ID req_11c9de in your message)")
    assert same_fault(first, again)
    assert same_fault(
        raised("RateLimitError: try again in 6ms"), raised("RateLimitError: try again in 1.5s")
    )
    assert not same_fault(first, raised("AuthenticationError: invalid api key"))
