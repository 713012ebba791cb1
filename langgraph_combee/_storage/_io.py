"""Store I/O written once for sync and async callers.

Storage logic is written as generator *flows* that yield requests (get, put,
delete, search) and receive the store's answers. Two small drivers run a flow:
``run_sync`` against ``store.get/put/delete/search`` and ``run_async`` against
their ``a``-prefixed twins. So every sync method and its async twin share one
implementation and differ only in the store call::

    def head(self) -> PromptVersion:
        return run_sync(self._store, self._head_flow())

    async def ahead(self) -> PromptVersion:
        return await run_async(self._store, self._head_flow())

Only the public ``BaseStore`` API is used, so any backend (in memory, SQLite,
PostgreSQL) works.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchItem
from langgraph.store.base.batch import AsyncBatchedBaseStore

from langgraph_combee._storage.locked import unwrap

T = TypeVar("T")

# Items fetched per ``search`` call when reading a whole namespace. ``BaseStore.search``
# defaults to 10, so every full read pages explicitly. Read at call time, so tests
# can lower it to exercise paging with few items.
PAGE_SIZE = 100


@dataclass(frozen=True)
class GetRequest:
    """Read one item."""

    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True)
class PutRequest:
    """Write (create or replace) one item."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any]


@dataclass(frozen=True)
class DeleteRequest:
    """Delete one item (a no-op when it does not exist)."""

    namespace: tuple[str, ...]
    key: str


@dataclass(frozen=True)
class SearchRequest:
    """Read one page of a namespace, optionally filtered on value fields."""

    namespace: tuple[str, ...]
    filter: Mapping[str, Any] | None
    limit: int
    offset: int


@dataclass(frozen=True)
class BatchRequest:
    """Several gets, puts and deletes in one ``store.batch`` call.

    One call is one transaction (one commit) on SQLite and one round trip on
    PostgreSQL, instead of one per item. Keep reads and writes in separate
    batches: backends order them differently within one.
    """

    requests: tuple[GetRequest | PutRequest | DeleteRequest, ...]


Request = GetRequest | PutRequest | DeleteRequest | SearchRequest | BatchRequest

Flow = Generator[Request, object, T]
"""A storage procedure: yields requests, receives their results, returns a ``T``."""


def get(namespace: tuple[str, ...], key: str) -> Flow[Item | None]:
    """Read one item; None when it does not exist."""
    result = yield GetRequest(namespace, key)
    return cast("Item | None", result)


def put(namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> Flow[None]:
    """Write one item, replacing any previous value."""
    yield PutRequest(namespace, key, value)


def delete(namespace: tuple[str, ...], key: str) -> Flow[None]:
    """Delete one item."""
    yield DeleteRequest(namespace, key)


def batch(requests: Sequence[GetRequest | PutRequest | DeleteRequest]) -> Flow[list[object]]:
    """Run several requests in one store call; returns their results in order (None for writes)."""
    if not requests:
        return []
    result = yield BatchRequest(tuple(requests))
    return cast("list[object]", result)


def _ops(request: BatchRequest) -> list[Op]:
    ops: list[Op] = []
    for item in request.requests:
        if isinstance(item, GetRequest):
            ops.append(GetOp(item.namespace, item.key))
        elif isinstance(item, PutRequest):
            ops.append(PutOp(item.namespace, item.key, dict(item.value), index=False))
        else:
            ops.append(PutOp(item.namespace, item.key, None))
    return ops


def search_all(
    namespace: tuple[str, ...], *, filter: Mapping[str, Any] | None = None
) -> Flow[list[Item]]:
    """Read every item of a namespace (and its filter matches), paging through ``search``.

    Items are returned sorted by key: the backends order search results
    differently (insertion order in memory, last update in SQLite and
    PostgreSQL), so callers must not rely on the store's order. An item seen on
    two pages (a concurrent writer moved it) is returned once; an item moved past
    the pages already read may be missed by this read and is seen by the next one.

    Args:
        namespace: The exact namespace to read.
        filter: Equality filter on top-level value fields, passed to ``search``.

    Returns:
        The items, sorted by key.
    """
    page_size = PAGE_SIZE
    found: dict[str, Item] = {}
    offset = 0
    repeated = False
    while True:
        page = cast("list[SearchItem]", (yield SearchRequest(namespace, filter, page_size, offset)))
        # ``search`` matches a prefix; keep only this exact namespace.
        items = [item for item in page if tuple(item.namespace) == namespace]
        repeated = repeated or any(item.key in found for item in items)
        found.update((item.key, item) for item in items)
        if len(page) < page_size:
            break
        offset += len(page)
    if repeated:
        # A key on two pages means the order shifted between them, so another key
        # may have been skipped. A concurrent write does that, and so do ties:
        # PostgreSQL orders by ``updated_at``, equal for all the records written in
        # one transaction (AsyncPostgresStore batches concurrent requests into
        # one), and pages with different LIMIT/OFFSET may order ties differently.
        # Read again in one page, without an offset, large enough for everything.
        limit = offset + page_size
        while True:
            limit *= 2
            page = cast("list[SearchItem]", (yield SearchRequest(namespace, filter, limit, 0)))
            if len(page) < limit:
                break
        found = {item.key: item for item in page if tuple(item.namespace) == namespace}
    return [found[key] for key in sorted(found)]


def _execute(store: BaseStore, request: Request) -> object:
    if isinstance(request, BatchRequest):
        return store.batch(_ops(request))
    if isinstance(request, GetRequest):
        return store.get(request.namespace, request.key)
    if isinstance(request, PutRequest):
        store.put(request.namespace, request.key, request.value, index=False)
        return None
    if isinstance(request, DeleteRequest):
        store.delete(request.namespace, request.key)
        return None
    return store.search(
        request.namespace,
        filter=dict(request.filter) if request.filter is not None else None,
        limit=request.limit,
        offset=request.offset,
    )


async def _aexecute(store: BaseStore, request: Request) -> object:
    if isinstance(request, BatchRequest):
        return await store.abatch(_ops(request))
    if isinstance(request, GetRequest):
        return await store.aget(request.namespace, request.key)
    if isinstance(request, PutRequest):
        await store.aput(request.namespace, request.key, request.value, index=False)
        return None
    if isinstance(request, DeleteRequest):
        await store.adelete(request.namespace, request.key)
        return None
    return await store.asearch(
        request.namespace,
        filter=dict(request.filter) if request.filter is not None else None,
        limit=request.limit,
        offset=request.offset,
    )


def _foreign_loop(store: BaseStore) -> asyncio.AbstractEventLoop | None:
    """The loop an async-native store is bound to, when it is not the running loop."""
    # AsyncPostgresStore and AsyncSqliteStore (AsyncBatchedBaseStore) keep their
    # connection and request queue on the loop they were created on; awaiting
    # them from another loop (the background learner's) fails with "attached to a
    # different loop". Such requests are run on the store's own loop instead.
    if not isinstance(store, AsyncBatchedBaseStore):
        return None
    home = store._loop
    return None if home is asyncio.get_running_loop() else home


def loop_closed(store: BaseStore) -> bool:
    """Whether ``store`` is an async-native store whose event loop has closed.

    Such a store (``AsyncPostgresStore``, ``AsyncSqliteStore``) can never answer
    again: its sync calls and its async calls from other loops are all handed to
    that loop, and fail with "Event loop is closed".
    """
    inner = unwrap(store)
    return isinstance(inner, AsyncBatchedBaseStore) and inner._loop.is_closed()


async def _aexecute_on(
    loop: asyncio.AbstractEventLoop, store: BaseStore, request: Request
) -> object:
    future = asyncio.run_coroutine_threadsafe(_aexecute(store, request), loop)
    return await asyncio.wrap_future(future)


def run_sync(store: BaseStore, flow: Flow[T]) -> T:
    """Run a flow to completion with the store's synchronous methods."""
    try:
        request = next(flow)
        while True:
            request = flow.send(_execute(store, request))
    except StopIteration as stop:
        return cast("T", stop.value)
    finally:
        flow.close()


async def run_async(store: BaseStore, flow: Flow[T]) -> T:
    """Run a flow to completion with the store's asynchronous methods.

    A store that only implements the sync API runs each request on a worker
    thread, so the event loop is never blocked. An async-native store bound to
    another event loop (``AsyncPostgresStore`` created on the app's loop, used
    from the background learner's) runs each request on its own loop.
    """
    # Some stores (langgraph's SqliteStore) implement only the sync API and raise
    # NotImplementedError from their async methods: fall back to a worker thread.
    sync_only = False
    home = _foreign_loop(store)
    try:
        request = next(flow)
        while True:
            if home is not None:
                result = await _aexecute_on(home, store, request)
            elif sync_only:
                result = await asyncio.to_thread(_execute, store, request)
            else:
                try:
                    result = await _aexecute(store, request)
                except NotImplementedError:
                    sync_only = True
                    result = await asyncio.to_thread(_execute, store, request)
            request = flow.send(result)
    except StopIteration as stop:
        return cast("T", stop.value)
    finally:
        flow.close()
