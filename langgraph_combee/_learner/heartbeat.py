"""Keeping the writer lease for as long as a learning step runs, and checking it before writing.

A step on a slow model can run for many minutes, far past the lease's TTL. The
``LeaseHeartbeat`` renews the lease every ``interval`` (a third of the TTL by
default) on a thread of its own, so the beats go on whatever the learner's event
loop is doing: a chat model that blocks the loop, or a worker pool saturated by
sync model calls (the default executor ``asyncio.to_thread`` shares), cannot
starve them. It uses only the lease's public ``renew`` and ``acquire``.

A renewal that finds the lease gone or lapsed and free takes it back
(``acquire``): nobody else wanted it, so the step's work must not be lost. A
lease another holder took stops the beats; the step's check before writing then
discards its result. A store error is counted and retried on the next beat.

``WriteFence`` is the step's check before it writes (``before_submit``): the
lease is still ours, or free and taken back, and no other writer came in
between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol

from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.registry import PromptRegistry

logger = logging.getLogger("langgraph_combee.learner")


class LeaseHeartbeat:
    """Renews ``lease`` on a background thread while the ``with`` (or ``async with``) block runs.

    Example::

        async with LeaseHeartbeat(lease):
            await run_a_long_step()

    Args:
        lease: The lease to keep; its holder must hold it when the block begins.
        interval: Seconds between beats; None: a third of the lease's TTL.

    Attributes:
        renewals: Beats that renewed the lease.
        retakes: Beats that found the lease free (lapsed or gone) and took it back.
        errors: Beats the store failed.
        lost: True once another holder took the lease (the beats then stop).
    """

    def __init__(self, lease: Lease, *, interval: float | None = None) -> None:
        self.lease = lease
        self.interval = lease.ttl_seconds / 3 if interval is None else float(interval)
        self.renewals = 0
        self.retakes = 0
        self.errors = 0
        self.lost = False
        self.beat = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat_once(self) -> bool:
        """One renewal; False when another holder has the lease."""
        if self.lease.renew():
            self.renewals += 1
            return True
        if self.lease.acquire():
            self.retakes += 1
            logger.warning(
                "the writer lease had lapsed during a step; took it back: %r", self.lease
            )
            return True
        self.lost = True
        logger.warning("lost the writer lease to another holder during a step: %r", self.lease)
        return False

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                going = self._beat_once()
            except Exception:
                self.errors += 1
                logger.warning("could not renew the writer lease; retrying", exc_info=True)
                going = True
            with self.beat:
                self.beat.notify_all()
            if not going:
                return

    def start(self) -> None:
        """Start beating (no-op when already started)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="combee-lease", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait for a beat in progress to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def __enter__(self) -> LeaseHeartbeat:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LeaseHeartbeat:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # No join on the event loop: a beat in a store call ends on its own, and a
        # late beat only renews a lease that is still ours.
        self._stop.set()
        self._thread = None


class _Counts(Protocol):
    stale_steps: int


class WriteFence:
    """A ``before_submit`` check: the lease is still ours (a HEAD moved since ``mark`` counts).

    A lease that lapsed, or whose record is gone, is taken back when nobody else
    holds it: the step's work is kept as long as no other writer came in between
    (HEAD and the latest version as at ``mark``, the batch's claims still ours).
    """

    def __init__(
        self,
        registry: PromptRegistry,
        lease: Lease,
        stats: _Counts,
        *,
        claims_ours: Callable[[], Awaitable[bool]],
    ) -> None:
        self._registry = registry
        self._lease = lease
        self._stats = stats
        self._claims_ours = claims_ours
        self._start: tuple[int, int] | None = None
        self._tenure: float | None = None
        self.called = False
        self.discarded: str | None = None

    async def _position(self) -> tuple[int, int]:
        return (await self._registry.ahead()).version, await self._registry.alatest_version()

    async def mark(self) -> None:
        """Remember HEAD, the latest version and the lease's tenure as the step begins."""
        self._start = await self._position()
        self._tenure = self._lease.acquired_at

    async def __call__(self) -> bool:
        self.called = True
        if not await self._lease.arenew() and not await self._lease.aacquire():
            self.discarded = "another learner holds the writer lease"
            return False
        if self._start is not None and await self._position() != self._start:
            # Not a reason to throw the step away: its candidate is rebased onto
            # the new HEAD when it is written (``VersionWriter.submit``).
            self._stats.stale_steps += 1
            logger.info(
                "another writer changed prompt %r during the step; its candidate is rebased",
                self._registry,
            )
        if self._lease.acquired_at != self._tenure and not await self._claims_ours():
            # The lease lapsed and was held by someone else meanwhile, who may
            # have taken this batch's traces back.
            self.discarded = "the batch's claims were taken over during the step"
            return False
        return True
