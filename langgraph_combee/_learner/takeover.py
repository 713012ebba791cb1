"""Handing the writer lease from one learner to another without losing or repeating a trace.

Two helpers of the background learner:

* ``keep_lease``: while a step runs, renew the lease every third of its TTL, so
  a step longer than the TTL (LLM calls take minutes) does not let a second
  learner take the prompt and then see its own work thrown away.
* ``recover``: run once by a learner that has just taken the lease. Claims held
  by anyone else belong to a learner that died or lost the lease (only the
  holder claims). For each such trace it looks in the versions written since
  the claim: a trace already written into a version is acknowledged (a version
  the dead learner left undecided is decided now by the acceptance policy);
  the rest go back to the queue at once instead of waiting out their claim's
  visibility timeout. So a learner killed at any point loses no trace and
  learns none twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from langgraph_combee._core.types import PromptVersion
from langgraph_combee._learner.parts import LearnerParts
from langgraph_combee._storage.lease import Lease

logger = logging.getLogger("langgraph_combee.learner")

# How far before a claim a version written for it may carry a timestamp: the
# claiming and the writing processes' clocks may disagree by this much.
CLOCK_SKEW_SECONDS = 60.0


@dataclass(frozen=True)
class Recovery:
    """What ``recover`` did with the claims it found."""

    acked: tuple[str, ...] = ()
    released: tuple[str, ...] = ()
    decided: tuple[int, ...] = ()


@contextlib.asynccontextmanager
async def keep_lease(lease: Lease) -> AsyncIterator[None]:
    """Renew ``lease`` every third of its TTL until the block ends.

    A failed renewal is logged and retried on the next beat; a lease taken by
    someone else stops the beats (the step's ``before_submit`` check then
    discards its result).
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(lease.ttl_seconds / 3)
            try:
                if not await lease.arenew():
                    logger.warning("lost the writer lease during a step: %r", lease)
                    return
            except Exception:
                logger.warning("could not renew the writer lease; retrying", exc_info=True)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _written_since(
    parts: LearnerParts, tenant: str | None, since: float
) -> list[PromptVersion]:
    """Versions created after ``since`` (unix time, less the clock skew), newest first."""
    registry = parts.registry(tenant)
    found = []
    number = await registry.alatest_version()
    while number > 0:
        version = await registry.aget(number)
        if version.created_at.timestamp() < since - CLOCK_SKEW_SECONDS:
            break
        found.append(version)
        number -= 1
    return found


async def recover(parts: LearnerParts, tenant: str | None, *, holder: str) -> Recovery:
    """Settle the claims other learners left in ``tenant``'s queue (see the module docstring).

    Args:
        parts: The queue, registry and writer of the prompt.
        tenant: Which tenant.
        holder: The new lease holder; its own claims are left alone.
    """
    # A writer session first: it repairs a HEAD left behind by a writer that died
    # between accepting a version and moving HEAD.
    registry = parts.registry(tenant)
    async with parts.writer.session(registry):
        pass
    queue = parts.queue(tenant)
    orphans = [c for c in await queue.aclaims() if c.holder != holder]
    if not orphans:
        return Recovery()
    since = min(c.claimed_at for c in orphans)
    ids = {c.trace_id for c in orphans}
    written: dict[str, PromptVersion] = {}
    for version in await _written_since(parts, tenant, since):
        for trace_id in ids.intersection(version.source_trace_ids):
            written.setdefault(trace_id, version)
    decided = []
    for version in {v.version: v for v in written.values()}.values():
        if version.status == "candidate":
            # Through the writer: HEAD may have moved since the dead learner wrote it.
            # A policy that keeps it pending (manual approval) keeps it pending.
            await parts.writer.decide(registry, version, await registry.aget(version.parent or 0))
            decided.append(version.version)
    acked = sorted(written)
    released = sorted(ids - written.keys())
    if acked:
        await queue.aack(acked)
    if released:
        await queue.arelease(released)
    logger.info(
        "took over prompt %r (tenant %r): %d orphaned claims, %d already learned, "
        "%d back in the queue, versions decided: %s",
        parts.prompt_id,
        tenant,
        len(orphans),
        len(acked),
        len(released),
        decided,
    )
    return Recovery(acked=tuple(acked), released=tuple(released), decided=tuple(decided))
