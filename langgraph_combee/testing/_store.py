"""A store double that fails on demand, for testing behaviour while the store is down."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore

from langgraph_combee._storage.locked import thread_safe

__all__ = ["FlakyStore"]


class FlakyStore(BaseStore):
    """Wraps a LangGraph store and raises on every operation while it is "down".

    Use it to check that an app keeps working through a store outage: the agent
    keeps serving its cached prompt, captured traces wait in memory, and the
    learner resumes when the store is back.

    Example:
        ```python
        from langgraph_combee.testing import FlakyStore

        store = FlakyStore()  # an InMemoryStore inside
        store.put(("docs",), "a", {"text": "hi"})
        with store.outage():
            try:
                store.get(("docs",), "a")
            except ConnectionError:
                pass  # the store is down
        assert store.get(("docs",), "a").value == {"text": "hi"}
        assert store.failures == 1
        ```

    Args:
        inner: The store doing the real work; default a new ``InMemoryStore``.
            It is made thread-safe when it is not (as ``Combee`` does).
        error: The exception raised while down: an instance, or a callable
            returning one (e.g. ``lambda: sqlite3.OperationalError("locked")``).
            Default ``ConnectionError("store unavailable (FlakyStore)")``.

    Attributes:
        failures: How many operation batches were refused so far.
        calls: How many operation batches were attempted so far.
    """

    def __init__(
        self,
        inner: BaseStore | None = None,
        *,
        error: BaseException | Callable[[], BaseException] | None = None,
    ) -> None:
        if inner is not None and not isinstance(inner, BaseStore):
            msg = f"inner={inner!r} is not allowed: a langgraph BaseStore or None"
            raise TypeError(msg)
        self.inner = thread_safe(inner if inner is not None else InMemoryStore())
        self._error = error
        self._down = threading.Event()
        self._lock = threading.Lock()
        self._fail_next = 0
        self.failures = 0
        self.calls = 0

    def __repr__(self) -> str:
        return f"FlakyStore({self.inner!r}, down={self.is_down})"

    @property
    def is_down(self) -> bool:
        """True while operations fail."""
        return self._down.is_set()

    def go_down(self) -> None:
        """Make every operation fail from now on, until ``come_back()``."""
        self._down.set()

    def come_back(self) -> None:
        """End the outage (and any ``fail_next`` still pending)."""
        with self._lock:
            self._fail_next = 0
        self._down.clear()

    def fail_next(self, count: int) -> None:
        """Make only the next ``count`` operation batches fail."""
        with self._lock:
            self._fail_next = count

    @contextlib.contextmanager
    def outage(self) -> Iterator[FlakyStore]:
        """``with store.outage(): ...``: the store is down inside the block."""
        self.go_down()
        try:
            yield self
        finally:
            self.come_back()

    def _check(self) -> None:
        with self._lock:
            self.calls += 1
            failing = self._down.is_set() or self._fail_next > 0
            if self._fail_next > 0:
                self._fail_next -= 1
            if not failing:
                return
            self.failures += 1
        error = self._error
        if error is None:
            raise ConnectionError("store unavailable (FlakyStore)")
        raise error if isinstance(error, BaseException) else error()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the inner store, or raise while down."""
        self._check()
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async ``batch``."""
        self._check()
        return await self.inner.abatch(ops)
