"""Serialised access to a store that is not thread-safe.

LangGraph's ``InMemoryStore`` keeps plain dicts and is not safe to use from
several threads at once; Combee touches its store from the agent's thread, the
serving thread and the learner thread ("dictionary changed size during
iteration"). ``thread_safe(store)`` wraps such a store so every batch of
operations runs under one lock per underlying store object.

``writer_lock`` is the other lock kept here: one per prompt and tenant of a
store, held by whoever writes versions in this process (``VersionWriter``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Iterable

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore

_locks: weakref.WeakKeyDictionary[BaseStore, threading.RLock] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def _lock_for(store: BaseStore) -> threading.RLock:
    with _guard:
        lock = _locks.get(store)
        if lock is None:
            lock = threading.RLock()
            _locks[store] = lock
        return lock


class LockedStore(BaseStore):
    """A ``BaseStore`` that runs every batch of its inner store under a lock."""

    def __init__(self, inner: BaseStore) -> None:
        self.inner = inner
        self._lock = _lock_for(inner)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on the inner store, one batch at a time."""
        with self._lock:
            return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on a worker thread, so the event loop never waits on the lock."""
        return await asyncio.to_thread(self.batch, list(ops))

    def __repr__(self) -> str:
        return f"LockedStore({self.inner!r})"


def thread_safe(store: BaseStore) -> BaseStore:
    """Wrap stores known not to be thread-safe (``InMemoryStore``); return others as they are."""
    if isinstance(store, InMemoryStore):
        return LockedStore(store)
    return store


def unwrap(store: BaseStore) -> BaseStore:
    """The store under our wrappers (``LockedStore``, ``FencedStore``)."""
    while isinstance(getattr(store, "inner", None), BaseStore):
        store = store.inner  # type: ignore[attr-defined]
    return store


_writers: weakref.WeakKeyDictionary[BaseStore, dict[tuple[str, str | None], threading.Lock]] = (
    weakref.WeakKeyDictionary()
)


def writer_lock(store: BaseStore, prompt_id: str, tenant: str | None) -> threading.Lock:
    """The one lock of this process for writers of a prompt and tenant in ``store``.

    Every ``Combee`` (and thread, and event loop) of the process that writes
    versions of the same prompt in the same underlying store gets the same lock.
    """
    with _guard:
        locks = _writers.setdefault(unwrap(store), {})
        return locks.setdefault((prompt_id, tenant), threading.Lock())


@contextlib.asynccontextmanager
async def hold(lock: threading.Lock, *, poll_seconds: float = 0.005) -> AsyncIterator[None]:
    """Hold a thread lock from async code without blocking the event loop.

    Polls instead of waiting on a worker thread, so a cancelled waiter never
    leaves a thread behind that takes the lock later and never gives it back.
    """
    while not lock.acquire(blocking=False):  # noqa: ASYNC110 - a thread lock has no awaitable
        await asyncio.sleep(poll_seconds)
    try:
        yield
    finally:
        lock.release()
