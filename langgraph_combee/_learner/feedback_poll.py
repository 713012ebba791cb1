"""Reading feedback from an outside source for traces that wait for it.

``LearnerSettings(feedback_source=...)`` gives the background learner an object that
reads feedback by run id (``langgraph_combee.langsmith.LangSmithFeedback``
reads LangSmith's). On each pass, once it holds the writer lease and before it
looks for a batch, the learner asks the source about the tenant's traces that
are waiting for feedback (``TraceQueue.waiting_ids``): at most every
``interval_seconds``, at most ``max_runs`` of them, ``batch_size`` run ids per
request. Feedback found is merged into the queued traces (``set_feedback``),
which makes them ready at once instead of at the end of their wait.

Error policy: the source is an outside service. A request that raises is
logged and counted (``FeedbackPoller.errors``), and the pass goes on to learn
what is ready; it never fails a step or stops the learner, and the agent never
waits on it. A request still running after ``timeout_seconds`` is left to
finish on its thread and its answer is merged on a later pass; no other request
for that tenant starts meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from langgraph_combee._core.types import Feedback
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._settings import FeedbackSource

if TYPE_CHECKING:
    from langgraph_combee._storage.queue import TraceQueue

logger = logging.getLogger("langgraph_combee.feedback")


def validate_pacing(
    *, interval_seconds: float, batch_size: int, max_runs: int, timeout_seconds: float
) -> None:
    """Raise ``ConfigurationError`` for pacing values a ``FeedbackSource`` may not have."""
    for name, value in (
        ("interval_seconds", interval_seconds),
        ("timeout_seconds", timeout_seconds),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ConfigurationError(name, value, "a finite number of seconds > 0")
    for name, count in (("batch_size", batch_size), ("max_runs", max_runs)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigurationError(name, count, "an int >= 1")


class FeedbackPoller:
    """Merges a ``FeedbackSource``'s feedback into queued traces, per tenant.

    Args:
        source: Where feedback is read.
        clock: Seconds, for the polling interval (the learner's clock).
    """

    def __init__(self, source: FeedbackSource, *, clock: Callable[[], float]) -> None:
        self.source = source
        self._clock = clock
        self._next_at: dict[str | None, float] = {}
        self._inflight: dict[str | None, asyncio.Future[Mapping[str, Feedback]]] = {}
        self.requests = 0
        self.received = 0
        self.errors = 0
        self.last_error: str | None = None

    async def poll(self, tenant: str | None, queue: TraceQueue) -> int:
        """One polling pass for ``tenant``; returns how many traces got feedback. Never raises."""
        try:
            return await self._poll(tenant, queue)
        except Exception as exc:  # a broken source or store must not stop learning
            self._failed(exc, "feedback polling failed")
            return 0

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for requests still running (tests, shutdown); their answers merge next pass."""
        pending = [f for f in self._inflight.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def close(self) -> None:
        """Forget requests still running (their threads finish on their own)."""
        for future in self._inflight.values():
            future.cancel()
        self._inflight.clear()

    async def _poll(self, tenant: str | None, queue: TraceQueue) -> int:
        delivered = 0
        earlier = self._inflight.pop(tenant, None)
        if earlier is not None:
            if not earlier.done():
                self._inflight[tenant] = earlier
                return 0
            delivered += await self._merge(queue, earlier) or 0
        now = self._clock()
        if now < self._next_at.get(tenant, -math.inf):
            return delivered
        self._next_at[tenant] = now + self.source.interval_seconds
        ids = await queue.awaiting_ids(self.source.max_runs)
        size = self.source.batch_size
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            self.requests += 1
            future = asyncio.ensure_future(asyncio.to_thread(self.source.fetch, chunk))
            done, _ = await asyncio.wait({future}, timeout=self.source.timeout_seconds)
            if not done:
                self._inflight[tenant] = future
                logger.warning(
                    "feedback source still busy after %.1fs; its answer merges on a later pass",
                    self.source.timeout_seconds,
                )
                break
            merged = await self._merge(queue, future)
            if merged is None:
                break  # the source is failing: try again next interval
            delivered += merged
        return delivered

    async def _merge(
        self, queue: TraceQueue, future: asyncio.Future[Mapping[str, Feedback]]
    ) -> int | None:
        try:
            found = future.result()
        except Exception as exc:
            self._failed(exc, "feedback source request failed")
            return None
        merged = 0
        for run_id, feedback in found.items():
            if isinstance(feedback, Feedback) and not feedback.is_empty():
                merged += await queue.aset_feedback(str(run_id), feedback)
        self.received += merged
        return merged

    def _failed(self, exc: BaseException, what: str) -> None:
        self.errors += 1
        self.last_error = repr(exc)
        logger.warning("%s (%d so far): %r", what, self.errors, exc)
