"""A time-limited writer lease for one prompt, kept in the store.

Exactly one learner should write versions of a prompt at a time: ``BaseStore``
has no compare-and-swap, so two writers could pick the same version number.
The learner takes this lease before writing, renews it while working, and
releases it when it stops; a crashed holder's lease expires after its TTL.

Limitation: without compare-and-swap, acquiring is *best effort*. ``acquire``
writes the lease and reads it back to confirm the holder, which catches most
races, but two processes that write within the same instant can both read back
their own record before the later write lands. Keep TTLs well above the time a
write takes, renew well before expiry, and make learner writes idempotent
enough to survive a rare overlap. All holders must share one clock (the
default, ``time.time``, is wall-clock time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from langgraph.store.base import BaseStore

from langgraph_combee._errors import ConfigurationError, LeaseHeldError
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow, run_async, run_sync
from langgraph_combee._storage.keys import LEASE_KEY, PromptSpace


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
        return run_sync(self._store, self._take_flow(renew=False))

    async def aacquire(self) -> bool:
        """Async twin of ``acquire``."""
        return await run_async(self._store, self._take_flow(renew=False))

    def renew(self) -> bool:
        """Extend the lease we hold by ``ttl_seconds`` from now; False when it is not ours.

        A lease of ours that expired is renewed too, as long as nobody took it since.
        """
        return run_sync(self._store, self._take_flow(renew=True))

    async def arenew(self) -> bool:
        """Async twin of ``renew``."""
        return await run_async(self._store, self._take_flow(renew=True))

    def release(self) -> bool:
        """Give the lease up if it is ours; return whether a lease of ours was removed."""
        return run_sync(self._store, self._release_flow())

    async def arelease(self) -> bool:
        """Async twin of ``release``."""
        return await run_async(self._store, self._release_flow())

    def holder(self) -> str | None:
        """Return who holds the lease now, or None when it is free or expired."""
        return run_sync(self._store, self._holder_flow())

    async def aholder(self) -> str | None:
        """Async twin of ``holder``."""
        return await run_async(self._store, self._holder_flow())

    def is_held(self) -> bool:
        """Return True when this object's holder holds the lease now (and it has not expired)."""
        return self.holder() == self._owner

    async def ais_held(self) -> bool:
        """Async twin of ``is_held``."""
        return (await self.aholder()) == self._owner

    def require(self) -> None:
        """Make sure we hold the lease: acquire (or renew) it, or raise.

        Raises:
            LeaseHeldError: When another holder's lease has not expired.
        """
        run_sync(self._store, self._require_flow())

    async def arequire(self) -> None:
        """Async twin of ``require``."""
        await run_async(self._store, self._require_flow())

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
        yield from io.put(
            self._namespace,
            LEASE_KEY,
            {"holder": self._owner, "expires_at": now + self._ttl, "acquired_at": acquired_at},
        )
        # No compare-and-swap: read back to see whose write landed last.
        confirmed = yield from self._read_flow()
        if confirmed is None or confirmed["holder"] != self._owner:
            return False
        self._acquired_at = float(confirmed.get("acquired_at", now))
        return True

    def _release_flow(self) -> Flow[bool]:
        record = yield from self._read_flow()
        if record is None or record["holder"] != self._owner:
            return False
        yield from io.delete(self._namespace, LEASE_KEY)
        return True

    def _holder_flow(self) -> Flow[str | None]:
        record = yield from self._read_flow()
        if record is None or not self._live(record, self._clock()):
            return None
        return str(record["holder"])

    def _require_flow(self) -> Flow[None]:
        if (yield from self._take_flow(renew=False)):
            return
        record = yield from self._read_flow()
        holder = "<unknown>" if record is None else str(record["holder"])
        expires_at = 0.0 if record is None else float(record["expires_at"])
        raise LeaseHeldError(self._space.prompt_id, holder, expires_at)
