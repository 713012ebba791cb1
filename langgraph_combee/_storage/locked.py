"""Serialised access to a store that is not thread-safe.

LangGraph's ``InMemoryStore`` keeps plain dicts and is not safe to use from
several threads at once; Combee touches its store from the agent's thread, the
serving thread and the learner thread ("dictionary changed size during
iteration"). ``thread_safe(store)`` wraps such a store so every batch of
operations runs under one lock per underlying store object.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable

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
