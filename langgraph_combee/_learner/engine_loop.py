"""One long-lived event loop per process for the synchronous entry points (``learn()``).

A chat model's async client outlives the event loop it first ran on: LangChain's
``ChatOpenAI`` keeps one pooled ``httpx.AsyncClient`` per process and server,
whose connections belong to the loop that opened them. ``asyncio.run`` for each
sync ``learn()`` closes that loop afterwards, and a later ``learn()`` (of any
``Combee`` sharing the model) that reuses a pooled connection fails with
``RuntimeError: Event loop is closed``. So every sync entry point runs its
coroutine on one loop that lives as long as the process, on a daemon thread of
its own, and the connections stay usable.

The caller blocks until the coroutine ends, which sees the caller's context
variables (LangSmith's tracing context, for one); Ctrl-C cancels it. A sync call
from the loop's own thread (a callback of a step calling ``learn()``) raises
``EngineLoopError`` instead of waiting for itself forever. A forked child
starts a loop of its own on first use.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from langgraph_combee._errors import EngineLoopError

R = TypeVar("R")

_STOP_SECONDS = 5.0  # how long an exiting interpreter waits for the loop to stop


class EngineLoop:
    """An event loop on a daemon thread, started on first use and kept for the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            thread, loop = self._thread, self._loop
            alive = thread is not None and thread.is_alive() and self._pid == os.getpid()
            if loop is not None and alive:
                return loop
            loop = asyncio.new_event_loop()
            started = threading.Event()
            thread = threading.Thread(
                target=_serve, args=(loop, started), name="combee-engine-loop", daemon=True
            )
            thread.start()
            started.wait()
            self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return loop

    def on_loop_thread(self) -> bool:
        """Whether the calling thread is the loop's own."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, R], what: str) -> R:
        """Run ``coro`` on the loop and return its result, blocking the caller.

        Raises:
            EngineLoopError: Called from the loop's own thread (it would wait for itself).
        """
        if self.on_loop_thread():
            coro.close()
            raise EngineLoopError(
                f"Combee.{what}() was called from the learner's own event loop (a callback "
                f"of a learning step); use 'await combee.a{what}()' there"
            )
        loop = self._running()
        # call_soon_threadsafe copies this thread's context: the task runs in it.
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C (or any error waiting): the coroutine stops too
            raise

    def stop(self, timeout: float = _STOP_SECONDS) -> None:
        """Stop the loop and its thread (the next ``run`` starts a new one)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)


def _serve(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(started.set)
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


ENGINE_LOOP = EngineLoop()
"""The process's loop for the synchronous entry points."""

atexit.register(ENGINE_LOOP.stop)
