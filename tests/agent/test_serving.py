"""The serving thread ends with what it serves: a dropped Combee, a store whose loop closed.

Both used to leave a ``combee-serving`` thread behind for the life of the
process. In one test process the threads of earlier tests' Combees on async
stores (their event loops long closed) logged "cannot refresh HEAD ...: Event
loop is closed" every ``refresh_seconds`` into every later test's log.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_combee import CaptureSettings, Combee, Feedback, ServingSettings, Trace
from langgraph_combee._agent.graph import wrap_model
from langgraph_combee.testing import ScriptedChatModel

JOIN = 10.0  # far longer than a few worker passes at 0.05 s; a hang fails, it never waits


def _ended(thread: threading.Thread) -> bool:
    """Whether ``thread`` ends within ``JOIN`` seconds, collecting garbage meanwhile."""
    for _ in range(200):
        gc.collect()  # a dropped Combee sits in reference cycles
        thread.join(JOIN / 200)
        if not thread.is_alive():
            return True
    return False


def test_a_store_whose_event_loop_closed_stops_the_serving_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async def main() -> Combee:
        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "a.sqlite")) as store:
            await store.setup()
            combee = Combee(
                prompt_id="p",
                store=store,
                serving=ServingSettings(refresh_seconds=0.05),
                capture=CaptureSettings(flush_seconds=0.05),
            )
            await wrap_model(combee, ScriptedChatModel(["a"])).ainvoke("q")
            return combee

    caplog.set_level(logging.WARNING, logger="langgraph_combee.serving")
    combee = asyncio.run(main())  # the Combee outlives the loop its store ran on
    server = combee._agent.server
    thread = server._thread
    assert thread is not None
    assert _ended(thread), "the serving thread kept trying a store that cannot answer"
    assert server.retired
    gone = [r for r in caplog.records if "event loop is closed" in r.getMessage()]
    assert len(gone) == 1, [r.getMessage() for r in caplog.records]

    # Serving goes on from the cache; a capture is dropped (counted), no thread restarts.
    model = ScriptedChatModel(["b"])
    assert wrap_model(combee, model).invoke("q").text == "b"
    combee.capture(Trace(id="late", input="q", output="b"))
    assert server.stats.dropped == 1
    assert server._thread is None or not server._thread.is_alive()


def test_a_dropped_combee_writes_its_traces_then_stops_its_serving_thread() -> None:
    store = InMemoryStore()
    combee = Combee(prompt_id="p", store=store, capture=CaptureSettings(flush_seconds=0.05))
    combee.capture(
        Trace(id="t1", input="hi", output="ok", feedback=Feedback(correct=False, ground_truth="x"))
    )
    thread = combee._agent.server._thread
    assert thread is not None and thread.is_alive()
    del combee  # never closed
    assert _ended(thread), "a Combee nobody holds kept its serving thread"
    assert Combee(prompt_id="p", store=store).queue().pending_count() == 1
