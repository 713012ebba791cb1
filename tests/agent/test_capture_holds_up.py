"""Capture holds up against hostile input, through the public API: each test pins one defect.

A test that could hang on a regression runs the call on a thread and joins it
with a timeout, asserting that it finished (``finishes``). Nothing asserts on
elapsed time.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from langgraph_combee import CaptureSettings, Combee, Feedback, Trace
from langgraph_combee.errors import CombeeClosedError
from langgraph_combee.testing import FunctionChatModel, fake_learner
from tests.agent.test_faults import JOIN, GatedStore, _kind, finishes
from tests.helpers import failing_traces


def _agent(combee: Combee, *, lean: bool = False) -> Any:
    return create_agent(
        FunctionChatModel(lambda messages: "ok"), middleware=[combee.middleware(lean=lean)]
    )


def _ask(agent: Any, text: str, run_id: Any) -> Any:
    return agent.invoke({"messages": [HumanMessage(text)]}, {"run_id": run_id})


# ---------------------------------------------------------------- text no store can hold


def _unstorable_text_does_not_block_the_buffer(conn: str, bad: str) -> None:
    with Combee.from_conn_string(
        conn, prompt_id="p", capture=CaptureSettings(flush_seconds=3600)
    ) as combee:
        agent = _agent(combee)
        odd, good = uuid.uuid4(), uuid.uuid4()
        finishes(lambda: _ask(agent, f"before {bad} after", odd))
        finishes(lambda: _ask(agent, "a plain question", good))
        assert finishes(combee.flush) == 2
        serving = combee.describe()["serving"]
        assert (serving["buffered"], serving["store_failing"]) == (0, False)
        assert serving["unserializable"] == 1
        traces = {t.id: t for t in combee.queue().claim(5, holder="t")}
        assert traces[str(odd)].input == "before \ufffd after"
        assert str(good) in traces


def test_a_lone_surrogate_in_a_message_does_not_block_the_buffer(tmp_path: Path) -> None:
    # A lone UTF-16 surrogate (half an emoji, as a JSON client can send it) cannot
    # be encoded as UTF-8: every write of its chunk failed, so no trace reached the
    # queue again and the healthy store was reported failing.
    _unstorable_text_does_not_block_the_buffer(str(tmp_path / "c.sqlite"), "\ud83d")


def test_a_nul_in_a_message_does_not_block_the_buffer_on_postgres(postgres_dsn: str) -> None:
    # PostgreSQL text refuses NUL: the same block, on the production store.
    _unstorable_text_does_not_block_the_buffer(postgres_dsn, "\x00")


def test_feedback_for_a_run_id_no_store_can_hold_is_unknown_not_a_store_fault(
    tmp_path: Path,
) -> None:
    # Such an id made the queue's write fail: feedback() took it for a store fault,
    # deferred it, reported the healthy store failing and retried it forever, in
    # front of every other deferred feedback.
    with Combee.from_conn_string(str(tmp_path / "c.sqlite"), prompt_id="p") as combee:
        combee.capture(Trace(id="r1", input="q"))
        assert combee.flush() == 1
        assert finishes(lambda: combee.feedback("\ud83d", correct=True)) is False
        serving = combee.describe()["serving"]
        assert (serving["store_failing"], serving["deferred_feedback"]) == (False, 0)
        assert combee.feedback("r1", correct=True) is True
        assert combee.describe()["serving"]["deferred_feedback"] == 0
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None and trace.feedback.correct is True


# ---------------------------------------------------------------- the evaluator


@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
@pytest.mark.parametrize("garbage", [{"score": 1.0}, "good", 1.0])
def test_an_evaluator_returning_garbage_loses_no_run(lean: bool, garbage: Any) -> None:
    # The evaluator's value went into the trace unvalidated: building the trace
    # then failed, the run was lost (capture_errors) and feedback() for it was False.
    combee = Combee(
        prompt_id="p", evaluator=lambda trace: garbage, capture=CaptureSettings(flush_seconds=3600)
    )
    try:
        run_id = uuid.uuid4()
        finishes(lambda: _ask(_agent(combee, lean=lean), "hello", run_id))
        assert finishes(lambda: combee.feedback(run_id, correct=True)) is True
        assert finishes(combee.flush) == 1
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None and trace.feedback.correct is True
        serving = combee.describe()["serving"]
        assert (serving["evaluator_errors"], serving["capture_errors"]) == (1, 0)
    finally:
        combee._agent.server.close(flush=False)


def test_feedback_never_waits_for_a_hanging_evaluator() -> None:
    # feedback() built a deferred trace itself (running the evaluator) or waited
    # for the build in progress: with an evaluator stuck on a slow grader, every
    # feedback() call for a buffered run hung the app's request.
    release = threading.Event()
    entered = threading.Event()

    def evaluator(trace: Trace) -> Feedback:
        entered.set()
        release.wait()
        return Feedback(score=0.5)

    combee = Combee(prompt_id="p", evaluator=evaluator, capture=CaptureSettings(flush_seconds=3600))
    try:
        agent = _agent(combee)
        first, second = uuid.uuid4(), uuid.uuid4()
        finishes(lambda: _ask(agent, "one", first))
        finishes(lambda: _ask(agent, "two", second))
        flushing = threading.Thread(target=combee.flush, daemon=True)
        flushing.start()
        assert entered.wait(JOIN)  # the flush is building the first trace, stuck
        assert finishes(lambda: combee.feedback(first, correct=True)) is True
        assert finishes(lambda: combee.feedback(second, correct=False)) is True
        release.set()
        flushing.join(JOIN)
        assert not flushing.is_alive()
        traces = {t.id: t for t in combee.queue().claim(5, holder="t")}
        got = [traces[str(r)].feedback for r in (first, second)]
        assert [(f.score, f.correct) for f in got if f is not None] == [(0.5, True), (0.5, False)]
    finally:
        release.set()
        combee._agent.server.close(flush=False)


# ---------------------------------------------------------------- write-through, async


@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
def test_write_through_in_async_runs_on_an_async_store_writes_through(
    tmp_path: Path, lean: bool
) -> None:
    # The async hooks wrote the store from the event loop's thread, which an
    # AsyncSqliteStore (like AsyncPostgresStore) refuses: every run fell back to
    # the buffer and the healthy store was reported failing.
    import asyncio

    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async def main() -> tuple[dict[str, Any], str | None]:
        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "a.sqlite")) as store:
            await store.setup()
            combee = Combee(
                prompt_id="p", store=store, capture=CaptureSettings(durability="write_through")
            )
            try:
                run_id = uuid.uuid4()
                agent = _agent(combee, lean=lean)
                await agent.ainvoke({"messages": [HumanMessage("hello")]}, {"run_id": run_id})
                return combee.describe()["serving"], await combee.queue().astatus(str(run_id))
            finally:
                await asyncio.to_thread(combee._agent.server.close, flush=False)

    serving, status = finishes(lambda: asyncio.run(main()))
    assert status == "pending"
    assert (serving["written_through"], serving["write_through_fallbacks"]) == (1, 0)
    assert serving["store_failing"] is False


# ---------------------------------------------------------------- scope


class _Hostile:
    """A tenant value whose comparison and repr raise."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing me")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        raise RuntimeError("no printing me")


@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
def test_a_scope_returning_a_hostile_object_is_counted_and_not_captured(lean: bool) -> None:
    # The scope's value was compared with "" before its type was checked: the
    # object's __eq__ raised past the scope guard, the run lost its pin, and it
    # was captured into the shared playbook, uncounted.
    combee = Combee(
        prompt_id="p", scope=lambda config: _Hostile(), capture=CaptureSettings(flush_seconds=3600)
    )
    try:
        answer = finishes(lambda: _ask(_agent(combee, lean=lean), "hello", uuid.uuid4()))
        assert answer["messages"][-1].text == "ok"
        assert finishes(combee.flush) == 0
        serving = combee.describe()["serving"]
        assert serving["bad_tenants"] >= 1
        assert serving["captured"] == 0
    finally:
        combee._agent.server.close(flush=False)


# ---------------------------------------------------------------- close() with runs in flight


def test_a_run_finishing_after_close_is_counted_not_retried_forever(tmp_path: Path) -> None:
    # A run in flight when close() closed the store restarted the serving thread,
    # which then retried its write against the closed store on every flush, for
    # good (flush_errors growing, a warning each time), reporting it "buffered".
    combee = Combee.from_conn_string(str(tmp_path / "c.sqlite"), prompt_id="p")
    entered, release = threading.Event(), threading.Event()

    def slow(messages: Any) -> str:
        entered.set()
        release.wait()
        return "ok"

    agent = create_agent(FunctionChatModel(slow), middleware=[combee.middleware()])
    run_id = uuid.uuid4()
    running = threading.Thread(target=lambda: _ask(agent, "hello", run_id), daemon=True)
    running.start()
    assert entered.wait(JOIN)
    finishes(combee.close)
    release.set()
    running.join(JOIN)
    assert not running.is_alive()
    # Feedback for it has nowhere to go either: refused, not reported kept.
    with pytest.raises(CombeeClosedError, match=r"feedback\(\) cannot run after close"):
        combee.feedback(run_id, correct=True)
    serving = combee.describe()["serving"]
    assert (serving["dropped"], serving["buffered"], serving["flush_errors"]) == (1, 0, 0)


@pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])
def test_runs_on_a_closed_combee_are_served_the_cached_version_not_captured(
    tmp_path: Path, lean: bool
) -> None:
    # A closed Combee must not break the agent it serves. Its store can no longer
    # be read, so a run is served what the serving cache held at close(): the
    # learned version here, and version 0 (the app's own prompt alone) for a
    # Combee that cached nothing. Neither run is captured: counted in dropped.
    conn = str(tmp_path / "c.sqlite")
    prompts: list[str] = []

    def reply(messages: Any) -> str:
        prompts.append(messages[0].text)
        return "ok"

    def agent_of(combee: Combee) -> Any:
        return create_agent(
            FunctionChatModel(reply),
            system_prompt="BASE",
            middleware=[combee.middleware(lean=lean)],
        )

    learned = Combee.from_conn_string(conn, prompt_id="p", model=fake_learner())
    learned.learn(failing_traces(2))  # v1, published to this Combee's serving cache
    agent = agent_of(learned)
    finishes(lambda: _ask(agent, "before close", uuid.uuid4()))
    learned.close()
    finishes(lambda: _ask(agent, "after close", uuid.uuid4()))
    assert prompts[0].startswith("BASE\n") and prompts[1] == prompts[0]
    assert learned.describe()["serving"]["dropped"] == 1

    cold = Combee.from_conn_string(conn, prompt_id="p")
    cold.close()  # before any run read HEAD
    finishes(lambda: _ask(agent_of(cold), "after close", uuid.uuid4()))
    assert prompts[2] == "BASE"
    assert cold.describe()["serving"]["dropped"] == 1


# ---------------------------------------------------------------- feedback after a write


class _Countdown(GatedStore):
    """A ``GatedStore`` whose ``queue_index`` batches fail once ``allowed`` more have run."""

    allowed: int | None = None

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(_kind(op) == "queue_index" for op in ops) and self.allowed is not None:
            if self.allowed == 0:
                raise ConnectionError("store unavailable (_Countdown)")
            self.allowed -= 1
        return super().batch(ops)


def test_feedback_for_a_written_trace_awaiting_late_delivery_reaches_the_queue() -> None:
    # A trace written while feedback was given stays in the buffer until that late
    # feedback is delivered. Feedback given in that state was merged into the
    # in-memory copy only (returning True) and never reached the queue.
    store = _Countdown()
    combee = Combee(prompt_id="p", store=store, capture=CaptureSettings(flush_seconds=3600))
    try:
        combee.capture(Trace(id="r1", input="q"))
        store.gate("queue")  # the entry write pauses
        flushing = threading.Thread(target=combee.flush, daemon=True)
        flushing.start()
        assert store.entered.wait(JOIN)
        assert combee.feedback("r1", correct=False) is True  # late: during the write
        store.allowed = 1  # the write's index put succeeds, the delivery then fails
        store.release.set()
        flushing.join(JOIN)
        assert not flushing.is_alive()
        assert combee.feedback("r1", ground_truth="FIN") is True  # written, late pending
        store.allowed = None
        combee.flush()
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None
        assert (trace.feedback.correct, trace.feedback.ground_truth) == (False, "FIN")
    finally:
        store.release.set()
        combee._agent.server.close(flush=False)
