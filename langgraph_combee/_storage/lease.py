"""A time-limited writer lease for one prompt, with an epoch that fences writes.

Exactly one learner should write versions of a prompt at a time: ``BaseStore``
has no compare-and-swap, so two writers could pick the same version number.
The learner takes this lease before writing, renews it while working, and
releases it when it stops; a crashed holder's lease expires after its TTL.

Every tenure has an *epoch*, one more than the tenure before. Writes of
versions and HEAD go through ``fenced(store, lease)``, which refuses to write
(``LeaseLostError``) unless the lease still names this holder at this epoch, so
a holder that was paused past its expiry and resumes cannot write after its
successor did.

How strong that is depends on the store:

* a LangGraph ``PostgresStore``: taking the lease is one atomic conditional
  upsert and each fenced write is one transaction that locks the lease row at
  our epoch (``pglease``): exact, whatever the timing;
* any other store (in memory, SQLite, ``AsyncPostgresStore``): *best effort*.
  ``acquire`` writes the lease and reads it back to confirm the holder, and a
  fenced write reads the lease just before it writes; two processes that write
  within the same instant can both succeed. Keep TTLs well above the time a
  write takes and renew well before expiry. Within one process,
  ``VersionWriter`` serialises writers with a lock whatever the store.

All holders must share one clock (the default, ``time.time``, is wall-clock time).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, PutOp, Result

from langgraph_combee._errors import ConfigurationError, LeaseHeldError, LeaseLostError
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow, run_async, run_sync
from langgraph_combee._storage.keys import HANDOVER_KEY, LEASE_KEY, PromptSpace
from langgraph_combee._storage.locked import unwrap
from langgraph_combee._storage.pglease import LeaseLost, PostgresLeaseTable, postgres_store


class Lease:
    """The writer lease of one prompt (per tenant).

    Every method has an async twin prefixed with ``a`` (``aacquire``, ...).

    Example::

        lease = Lease(store, "support-agent", holder="learner-1", ttl_seconds=60)
        if lease.acquire():
            ...  # write versions, calling lease.renew() at least every 60 s
            lease.release()

    Args:
        store: The LangGraph store holding the lease record.
        prompt_id: The prompt's id: a non-empty string without ``.``.
        tenant: The tenant, or None for the single default tenant.
        holder: Who takes the lease: a name unique among competing writers
            (e.g. host and process id).
        ttl_seconds: How long the lease lasts after each acquire or renew.
        clock: Returns the current time in seconds; shared by all holders.
            Injectable so tests can move time without sleeping.

    Raises:
        ConfigurationError: When an argument is invalid.
    """

    def __init__(
        self,
        store: BaseStore,
        prompt_id: str,
        *,
        tenant: str | None = None,
        holder: str,
        ttl_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigurationError("store", store, "a langgraph.store.base.BaseStore")
        if not isinstance(holder, str) or not holder.strip():
            raise ConfigurationError("holder", holder, "a non-empty string")
        if (
            isinstance(ttl_seconds, bool)
            or not isinstance(ttl_seconds, (int, float))
            or not math.isfinite(ttl_seconds)
            or ttl_seconds <= 0
        ):
            raise ConfigurationError("ttl_seconds", ttl_seconds, "a finite number > 0")
        if not callable(clock):
            raise ConfigurationError("clock", clock, "a callable returning seconds")
        self._store = store
        self._space = PromptSpace(prompt_id, tenant)
        self._namespace = self._space.namespace("lease")
        self._owner = holder
        self._ttl = float(ttl_seconds)
        self._clock = clock
        self._acquired_at: float | None = None
        self._epoch: int | None = None
        pg = postgres_store(store)
        self._table = None if pg is None else PostgresLeaseTable(pg)
        self._name = ".".join(self._namespace)
        with _siblings_guard:
            _siblings.setdefault(unwrap(store), weakref.WeakSet()).add(self)

    @property
    def epoch(self) -> int | None:
        """The epoch of the tenure confirmed by the last successful acquire or renew.

        One more than the tenure before it; None before the first success.
        """
        return self._epoch

    @property
    def atomic(self) -> bool:
        """Whether taking the lease and fenced writes are atomic (a ``PostgresStore``)."""
        return self._table is not None

    @property
    def acquired_at(self) -> float | None:
        """When the tenure confirmed by the last successful acquire or renew began.

        Renewals keep it; it changes when the lease is taken afresh, which tells
        a holder that someone else may have held the lease in between. None
        before the first success.
        """
        return self._acquired_at

    @property
    def owner(self) -> str:
        """The name this object acquires the lease under (its ``holder`` argument)."""
        return self._owner

    @property
    def ttl_seconds(self) -> float:
        """How long the lease lasts after each acquire or renew."""
        return self._ttl

    def __repr__(self) -> str:
        return (
            f"Lease(prompt_id={self._space.prompt_id!r}, tenant={self._space.tenant!r}, "
            f"holder={self._owner!r}, ttl_seconds={self._ttl})"
        )

    def acquire(self) -> bool:
        """Take the lease when it is free, expired or already ours, and return True if held.

        Writes ``{holder, expires_at}`` with ``expires_at = now + ttl_seconds``,
        then reads the record back and returns whether it names us (best effort,
        see the module docstring).
        """
        if self._table is not None:
            return self._take_atomic(renew=False)
        return run_sync(self._store, self._take_flow(renew=False))

    async def aacquire(self) -> bool:
        """Async twin of ``acquire``."""
        if self._table is not None:
            return await asyncio.to_thread(self._take_atomic, renew=False)
        return await run_async(self._store, self._take_flow(renew=False))

    def renew(self) -> bool:
        """Extend the lease we hold by ``ttl_seconds`` from now; False when it is not ours.

        A lease of ours that expired is renewed too, as long as nobody took it since.
        """
        if self._table is not None:
            return self._take_atomic(renew=True)
        return run_sync(self._store, self._take_flow(renew=True))

    async def arenew(self) -> bool:
        """Async twin of ``renew``."""
        if self._table is not None:
            return await asyncio.to_thread(self._take_atomic, renew=True)
        return await run_async(self._store, self._take_flow(renew=True))

    def release(self) -> bool:
        """Give the lease up if it is ours; return whether a lease of ours was removed."""
        if self._table is not None:
            return self._table.release(self._name, self._owner)
        return run_sync(self._store, self._release_flow())

    async def arelease(self) -> bool:
        """Async twin of ``release``."""
        if self._table is not None:
            return await asyncio.to_thread(self._table.release, self._name, self._owner)
        return await run_async(self._store, self._release_flow())

    def holder(self) -> str | None:
        """Return who holds the lease now, or None when it is free or expired."""
        if self._table is not None:
            return self._holder_atomic()
        return run_sync(self._store, self._holder_flow())

    async def aholder(self) -> str | None:
        """Async twin of ``holder``."""
        if self._table is not None:
            return await asyncio.to_thread(self._holder_atomic)
        return await run_async(self._store, self._holder_flow())

    def is_held(self) -> bool:
        """Return True when this object's holder holds the lease now (and it has not expired)."""
        return self.holder() == self._owner

    async def ais_held(self) -> bool:
        """Async twin of ``is_held``."""
        return (await self.aholder()) == self._owner

    def request_handover(self) -> None:
        """Ask the holder to give the lease up at its next pass (``handover_wanted``).

        A learner holds the lease for as long as it runs, renewing it on every
        pass; a short writer of another process (``combee approve``) asks for it
        instead of waiting for an expiry that never comes. The request lapses
        after ``ttl_seconds`` + 1 s, so a requester that died holds nobody back.
        """
        run_sync(self._store, self._request_flow())

    async def arequest_handover(self) -> None:
        """Async twin of ``request_handover``."""
        await run_async(self._store, self._request_flow())

    def withdraw_handover(self) -> None:
        """Remove our hand-over request, if it is still there."""
        run_sync(self._store, self._withdraw_flow())

    async def awithdraw_handover(self) -> None:
        """Async twin of ``withdraw_handover``."""
        await run_async(self._store, self._withdraw_flow())

    def handover_wanted(self) -> bool:
        """Whether another holder asked for the lease (``request_handover``) and still waits."""
        return run_sync(self._store, self._wanted_flow())

    async def ahandover_wanted(self) -> bool:
        """Async twin of ``handover_wanted``."""
        return await run_async(self._store, self._wanted_flow())

    def require(self) -> None:
        """Make sure we hold the lease: acquire (or renew) it, or raise.

        Raises:
            LeaseHeldError: When another holder's lease has not expired.
        """
        if not self.acquire():
            self._refuse()

    async def arequire(self) -> None:
        """Async twin of ``require``."""
        if not await self.aacquire():
            await asyncio.to_thread(self._refuse)

    def _check_epoch(self) -> None:
        """Raise ``LeaseLostError`` unless the lease record names us at our epoch (best effort)."""
        if self._table is not None:
            record = self._table.read(self._name)
            holder, epoch = (None, None) if record is None else record[:2]
        else:
            value = run_sync(self._store, self._read_flow())
            holder = None if value is None else value.get("holder")
            epoch = None if value is None else value.get("epoch", 0)
        if self._epoch is None or holder != self._owner or epoch != self._epoch:
            raise LeaseLostError(self._space.prompt_id, self._owner, self._epoch)

    def _write_fenced(self, store: BaseStore, ops: list[Op]) -> list[Result]:
        # Run write ops on ``store`` only while the lease holds our epoch (see ``fenced``).
        if self._table is not None and self._epoch is not None:
            try:
                return self._table.write(
                    ops, name=self._name, holder=self._owner, epoch=self._epoch
                )
            except LeaseLost:
                raise LeaseLostError(self._space.prompt_id, self._owner, self._epoch) from None
        self._check_epoch()
        return store.batch(ops)

    # ---- the atomic path (PostgresStore) -------------------------------

    def _take_atomic(self, *, renew: bool) -> bool:
        assert self._table is not None
        taken = self._table.take(
            self._name, self._owner, now=self._clock(), ttl=self._ttl, renew=renew
        )
        if taken is None:
            return False
        epoch, acquired_at = taken
        self._epoch, self._acquired_at = epoch, acquired_at
        return True

    def _holder_atomic(self) -> str | None:
        assert self._table is not None
        record = self._table.read(self._name)
        if record is None or not record[0] or record[2] <= self._clock():
            return None
        return record[0]

    def _refuse(self) -> None:
        if self._table is not None:
            record = self._table.read(self._name)
            holder, expires_at = ("<unknown>", 0.0) if record is None else (record[0], record[2])
        else:
            value = run_sync(self._store, self._read_flow())
            holder = "<unknown>" if value is None else str(value["holder"])
            expires_at = 0.0 if value is None else float(value["expires_at"])
        raise LeaseHeldError(self._space.prompt_id, holder, expires_at)

    # ---- flows shared by the sync and async methods --------------------

    def _read_flow(self) -> Flow[dict[str, Any] | None]:
        item = yield from io.get(self._namespace, LEASE_KEY)
        return None if item is None else dict(item.value)

    def _live(self, record: dict[str, Any] | None, now: float) -> bool:
        return record is not None and float(record["expires_at"]) > now

    def _take_flow(self, *, renew: bool) -> Flow[bool]:
        now = self._clock()
        record = yield from self._read_flow()
        ours = record is not None and record["holder"] == self._owner
        if renew and not ours:
            return False
        if not ours and self._live(record, now):
            return False
        acquired_at = record.get("acquired_at", now) if ours and record is not None else now
        # The epoch goes up whenever the holder changes; a released lease keeps its
        # record (with no holder) so the count never starts again.
        previous = 0 if record is None else int(record.get("epoch", 0))
        epoch = previous if ours else previous + 1
        yield from io.put(
            self._namespace,
            LEASE_KEY,
            {
                "holder": self._owner,
                "expires_at": now + self._ttl,
                "acquired_at": acquired_at,
                "epoch": epoch,
            },
        )
        # No compare-and-swap: read back to see whose write landed last.
        confirmed = yield from self._read_flow()
        if confirmed is None or confirmed["holder"] != self._owner:
            return False
        self._acquired_at = float(confirmed.get("acquired_at", now))
        self._epoch = int(confirmed.get("epoch", epoch))
        return True

    def _release_flow(self) -> Flow[bool]:
        record = yield from self._read_flow()
        if record is None or record["holder"] != self._owner:
            return False
        yield from io.put(
            self._namespace,
            LEASE_KEY,
            {"holder": "", "expires_at": 0.0, "acquired_at": 0.0, "epoch": record.get("epoch", 0)},
        )
        return True

    def _request_flow(self) -> Flow[None]:
        until = self._clock() + self._ttl + 1.0
        yield from io.put(self._namespace, HANDOVER_KEY, {"holder": self._owner, "until": until})

    def _withdraw_flow(self) -> Flow[None]:
        item = yield from io.get(self._namespace, HANDOVER_KEY)
        if item is not None and item.value.get("holder") == self._owner:
            yield from io.delete(self._namespace, HANDOVER_KEY)

    def _wanted_flow(self) -> Flow[bool]:
        item = yield from io.get(self._namespace, HANDOVER_KEY)
        if item is None or item.value.get("holder") == self._owner:
            return False
        return float(item.value.get("until", 0.0)) > self._clock()

    def _holder_flow(self) -> Flow[str | None]:
        record = yield from self._read_flow()
        if record is None or not record["holder"] or not self._live(record, self._clock()):
            return None
        return str(record["holder"])


_siblings: weakref.WeakKeyDictionary[BaseStore, weakref.WeakSet[Lease]] = (
    weakref.WeakKeyDictionary()
)
_siblings_guard = threading.Lock()


def in_process(store: BaseStore, prompt_id: str, tenant: str | None, owner: str) -> Lease | None:
    """A ``Lease`` object of this process for the same prompt, tenant and store held by ``owner``.

    A writer of this process uses the lease its background learner holds (the
    process's writer lock already keeps the two apart) instead of waiting for it.
    """
    name = ".".join(PromptSpace(prompt_id, tenant).namespace("lease"))
    with _siblings_guard:
        leases = list(_siblings.get(unwrap(store), ()))
    return next((x for x in leases if x._name == name and x._owner == owner), None)


def fenced(store: BaseStore, lease: Lease) -> BaseStore:
    """``store``, with every write refused unless ``lease`` still holds its epoch.

    Writes raise ``LeaseLostError`` (and write nothing) once the lease has
    passed to another holder; reads pass through. Acquire the lease first.
    """
    return FencedStore(store, lease)


class FencedStore(BaseStore):
    """A store whose write batches run only while a lease holds its epoch (``fenced``)."""

    def __init__(self, inner: BaseStore, lease: Lease) -> None:
        self.inner = inner
        self._lease = lease

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads pass through; a batch that writes is fenced by the lease."""
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            return self._lease._write_fenced(self.inner, ops)
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` on a worker thread: the inner store's sync path works for every backend.

        A cancelled caller still waits for the thread: cancelling does not stop
        a write in progress, and the writer session (its lock and lease) must not
        end before it, or the next writer would build on the HEAD it replaces.
        """
        call = asyncio.ensure_future(asyncio.to_thread(self.batch, list(ops)))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            while not call.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([call])
            if not call.cancelled():
                call.exception()  # the caller was cancelled: its write's error is not news
            raise

    def __repr__(self) -> str:
        return f"FencedStore({self.inner!r}, {self._lease!r})"
