"""``PlatformStore``: the store a LangGraph server injects, bound on first sight.

``langgraph dev`` and the LangGraph Platform hand every run the deployment's
store (``runtime.store``), but only inside the server: a graph module is imported
before any run, and may be imported a second time by the routes file. So
``Combee(store="platform")`` holds this stand-in, which binds to the server's
store the first time it is used inside a run or the server's lifespan (where
``langgraph.config.get_store()`` answers), or when ``bind()`` is called.

The server's store lives on the server's event loop (an ``AsyncBatchedBaseStore``
whose request queue belongs to that loop), and the dev server's store is an
``InMemoryStore`` that only that loop touches. Combee reads and writes from
other threads and from the learner's own loop, so every request is handed to
the server's loop: awaited there from another loop, waited for from a plain
thread. A synchronous call on the server's loop itself is refused by the inner
store with its own message (it would block the server), as it would be without
Combee. Once the server's loop has stopped (interpreter exit), requests run on
the inner store directly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.base.batch import AsyncBatchedBaseStore

from langgraph_combee._errors import StoreError

__all__ = ["PlatformStore", "remember_server_store"]

# How long a synchronous request waits for the server's loop. Far above any
# store call; it only bounds a wait on a loop that stopped between two checks.
_SYNC_TIMEOUT_SECONDS = 120.0


# The server's store, once a run or the routes' lifespan has shown it. A server
# process has one store, but loads a graph file once per graph that names it:
# every copy's hand-built Combee(store="platform") binds to it through here,
# not only the copy whose graph happened to run.
_server_store: BaseStore | None = None


def remember_server_store(store: BaseStore) -> None:
    """Record the store of this server process, for every ``PlatformStore`` to bind to."""
    global _server_store
    if _server_store is None and isinstance(store, BaseStore):
        _server_store = store


def _context_store() -> BaseStore | None:
    """The store of the LangGraph run (or server lifespan) in context, if any."""
    from langgraph.config import get_store

    try:
        store = get_store()
    except (RuntimeError, KeyError, AttributeError):  # outside a run: no config
        return None
    return store if isinstance(store, BaseStore) else None


class PlatformStore(BaseStore):
    """A ``BaseStore`` that forwards to the LangGraph server's store once bound.

    Made by ``Combee(store="platform")``; users rarely build one. Binding
    happens at most once: later ``bind()`` calls with another store are ignored
    (the dev server hands each thread its own wrapper of one store).
    """

    def __init__(self) -> None:
        self._inner: BaseStore | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PlatformStore(bound={self._inner is not None})"

    @property
    def bound(self) -> bool:
        """True once the server's store is known."""
        return self._inner is not None

    @property
    def inner(self) -> BaseStore | None:
        """The server's store, or None before binding."""
        return self._inner

    def bind(self, store: BaseStore | None = None) -> bool:
        """Bind to ``store`` (default: the run's in context, else the server's); True when bound.

        Without ``store``, the store of the LangGraph run (or lifespan) in
        context is used and remembered for the process; outside one, the store
        an earlier run or the routes' lifespan showed.

        Raises:
            StoreError: ``store`` is not a ``BaseStore`` or is this object.
        """
        if self._inner is not None:
            return True
        if store is None:
            store = _context_store()
            if store is None:
                store = _server_store
                if store is None:
                    return False
            else:
                remember_server_store(store)
        if not isinstance(store, BaseStore) or store is self:
            raise StoreError(
                "platform",
                "not bound",
                message=f"PlatformStore.bind() needs the server's BaseStore, got {store!r}",
            )
        with self._lock:
            if self._inner is None:
                self._inner = store
        return True

    def _target(self) -> BaseStore:
        if self._inner is None and not self.bind():
            raise StoreError(
                "platform",
                "not bound",
                message=(
                    "Combee(store='platform') is not bound to the LangGraph server's store "
                    "yet: it binds on the first run, in the lifespan of the routes of "
                    "langgraph_combee.platform, or with combee.store.bind(store). Outside "
                    "a LangGraph server, pass a store of your own (Combee(store=...))."
                ),
            )
        assert self._inner is not None
        return self._inner

    @staticmethod
    def _home(store: BaseStore) -> asyncio.AbstractEventLoop | None:
        """The live loop an async-native store belongs to (None: any thread may call it)."""
        if not isinstance(store, AsyncBatchedBaseStore):
            return None
        loop = store._loop
        if loop.is_closed() or not loop.is_running():
            return None
        return loop

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the server's store, on the server's loop when it has one."""
        inner = self._target()
        home = self._home(inner)
        ops = list(ops)
        if home is None or _running_loop() is home:
            return inner.batch(ops)
        future = asyncio.run_coroutine_threadsafe(inner.abatch(ops), home)
        return future.result(_SYNC_TIMEOUT_SECONDS)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async ``batch``: awaited on the server's loop, whichever loop calls it."""
        inner = self._target()
        home = self._home(inner)
        ops = list(ops)
        if home is None or _running_loop() is home:
            return await inner.abatch(ops)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(inner.abatch(ops), home))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
