"""The background learner: pulls batches from the durable queue and runs Combee steps.

It runs on a thread of its own with its own event loop, so it never shares the
agent's thread or loop. For each tenant with queued traces it holds the writer
lease, takes a batch (sized by the controller or fixed, with a minimum batch and
a maximum wait so low traffic still learns), runs one step, and acknowledges the
traces only once the step's candidate has been submitted. A failed step is
logged, counted and retried with exponential backoff; its traces go back to the
queue and nothing is written. ``stop()`` leaves unprocessed traces queued.

Faults (see docs/faults.md): a store that fails mid-pass fails only that pass
(counted in ``tick_errors``); traces whose release or acknowledgement could not
be written are retried on the next pass instead of waiting out their claim. A
spent ``LearnerBudget`` makes the learner wait: it claims nothing, its traces
stay queued, and a step the budget stopped midway is released without backoff.
Before writing, a step checks that it still holds the lease and that no other
writer moved HEAD or added a version since it began; otherwise it is discarded.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph_combee._core.types import StepReport, Trace
from langgraph_combee._errors import BudgetExceededError, ConfigurationError
from langgraph_combee._runtime.feedback_poll import FeedbackPoller
from langgraph_combee._runtime.takeover import keep_lease, recover
from langgraph_combee._storage.keys import NO_TENANT, ROOT
from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.registry import PromptRegistry

if TYPE_CHECKING:
    from langgraph_combee._combee import Combee

logger = logging.getLogger("langgraph_combee.learner")

MAX_REPORTS = 1000  # step reports kept in LearnerStats.reports (the most recent)


@dataclass(frozen=True)
class LearnerSettings:
    """How the background learner paces itself."""

    min_batch: int = 4
    max_wait_seconds: float = 30.0
    poll_seconds: float = 1.0
    lease_seconds: float = 30.0
    visibility_seconds: float = 600.0
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.min_batch < 1:
            raise ConfigurationError("min_batch", self.min_batch, "an int >= 1")
        for name in ("max_wait_seconds", "poll_seconds", "lease_seconds", "visibility_seconds"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(name, getattr(self, name), "a number > 0")
        if self.backoff_seconds < 0 or self.max_backoff_seconds < self.backoff_seconds:
            raise ConfigurationError(
                "backoff_seconds", self.backoff_seconds, ">= 0 and <= max_backoff_seconds"
            )


@dataclass
class LearnerStats:
    """What the learner has done so far."""

    steps: int = 0
    failed_steps: int = 0
    traces_learned: int = 0
    traces_dropped: int = 0
    versions: int = 0
    budget_waits: int = 0
    budget_stops: int = 0
    tick_errors: int = 0
    stale_steps: int = 0
    last_error: str | None = None
    reports: list[StepReport] = field(default_factory=list)


class _Fence:
    """A ``before_submit`` check: the lease is still ours and nobody wrote since ``mark``."""

    def __init__(self, registry: PromptRegistry, lease: Lease, stats: LearnerStats) -> None:
        self._registry = registry
        self._lease = lease
        self._stats = stats
        self._start: tuple[int, int] | None = None

    async def _position(self) -> tuple[int, int]:
        return (await self._registry.ahead()).version, await self._registry.alatest_version()

    async def mark(self) -> None:
        """Remember HEAD and the latest version as the step begins."""
        self._start = await self._position()

    async def __call__(self) -> bool:
        if not await self._lease.arenew():
            return False
        if self._start is not None and await self._position() != self._start:
            self._stats.stale_steps += 1
            logger.warning("another writer changed prompt %r during the step", self._registry)
            return False
        return True


class BackgroundLearner:
    """Learns from queued traces on a thread of its own until stopped."""

    def __init__(
        self,
        combee: Combee,
        settings: LearnerSettings,
        *,
        holder: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.combee = combee
        self.settings = settings
        self.holder = holder or f"learner-{uuid.uuid4().hex[:12]}"
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leases: dict[str | None, Lease] = {}
        self._waiting_since: dict[str | None, float] = {}
        self._retry_at: dict[str | None, float] = {}
        self._failures: dict[str | None, int] = {}
        # Per tenant, the lease tenure whose leftovers were settled (Lease.acquired_at).
        self._settled_tenure: dict[str | None, float | None] = {}
        # Claims the store refused to end (down for a while): retried each pass.
        self._unsettled: dict[str | None, dict[str, list[str]]] = {}
        self.stats = LearnerStats()
        self.step_done = threading.Condition()
        source = getattr(combee, "feedback_source", None)
        # Feedback from an outside source (e.g. LangSmith) for traces that wait for it.
        self.feedback_poller = None if source is None else FeedbackPoller(source, clock=clock)

    # ---- lifecycle --------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the learner thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the learner thread (no-op if it is already running)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._main, name="combee-learner", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop after the current step; unprocessed traces stay queued."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None
        for lease in self._leases.values():
            try:
                lease.release()
            except Exception:  # a dead store: the lease simply expires
                logger.warning("could not release the learner lease", exc_info=True)
        self._leases.clear()
        self._settled_tenure.clear()

    def wait_for_steps(self, count: int, timeout: float = 30.0) -> bool:
        """Block until ``count`` steps have completed (for tests and demos)."""
        deadline = time.monotonic() + timeout
        with self.step_done:
            while self.stats.steps < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.step_done.wait(remaining)
        return True

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._run())
        finally:
            loop.close()
            self._loop = None

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.tick()
            except Exception as exc:  # the loop itself must survive anything
                self.stats.tick_errors += 1
                self.stats.last_error = repr(exc)
                logger.exception("learner tick failed")
            await asyncio.to_thread(self._stop.wait, self.settings.poll_seconds)
        if self.feedback_poller is not None:
            self.feedback_poller.close()

    # ---- one pass over the tenants -----------------------------------------

    def tenants(self) -> list[str | None]:
        """Tenants with a queue in the store, plus the shared one."""
        found: set[str | None] = {None}
        prefix = (ROOT, self.combee.prompt_id)
        for namespace in self.combee.store.list_namespaces(
            prefix=prefix, max_depth=3, limit=10_000
        ):
            if len(namespace) >= 3:
                found.add(None if namespace[2] == NO_TENANT else namespace[2])
        return sorted(found, key=lambda t: (t is not None, t or ""))

    async def tick(self) -> int:
        """Flush captures, then learn one batch per ready tenant. Returns steps run."""
        if not self.combee._bind_platform_store():
            return 0  # store="platform" before any run showed the server's store: nothing yet
        await asyncio.to_thread(self.combee.server.flush)
        steps = 0
        for tenant in await asyncio.to_thread(self.tenants):
            if self._stop.is_set():
                break
            if await self._tick_tenant(tenant):
                steps += 1
        return steps

    def _lease(self, tenant: str | None) -> Lease:
        if tenant not in self._leases:
            self._leases[tenant] = Lease(
                self.combee.store,
                self.combee.prompt_id,
                tenant=tenant,
                holder=self.holder,
                ttl_seconds=self.settings.lease_seconds,
            )
        return self._leases[tenant]

    async def _tick_tenant(self, tenant: str | None) -> bool:
        now = self._clock()
        if now < self._retry_at.get(tenant, 0.0):
            return False
        lease = self._lease(tenant)
        if not await lease.aacquire():
            return False  # another learner holds this prompt
        if self._settled_tenure.get(tenant, -1.0) != lease.acquired_at:
            # A new tenure (someone may have held the lease since our last pass):
            # settle the claims a dead or displaced learner left.
            await recover(self.combee, tenant, holder=self.holder)
            self._settled_tenure[tenant] = lease.acquired_at
        await self._settle(tenant)
        combee = self.combee
        policy = combee.acceptance
        context = combee._writer.context(combee.registry(tenant))
        observe = getattr(policy, "observe", None)
        review = getattr(policy, "review", None)
        blocking = getattr(policy, "blocking", None)
        queue = combee.queue(tenant)
        if self.feedback_poller is not None:
            await self.feedback_poller.poll(tenant, queue)
        stats = await queue.abacklog()  # not astats(): that reads every done record
        ready = stats["pending"] - stats["waiting"]
        size = combee._engine(tenant).next_batch_size()
        if observe is not None and ready > 0:
            # A policy that watches live feedback sees every ready trace each pass.
            seen = await self._claim(tenant, ready)
            for trace in seen:
                observe(trace)
            await queue.arelease([t.id for t in seen])
        if review is not None:
            await review(context)
        if blocking is not None and blocking(combee.server, tenant):
            return False  # a trial is running: learning waits for its decision
        if ready <= 0:
            self._waiting_since.pop(tenant, None)
            return False
        since = self._waiting_since.setdefault(tenant, now)
        waited = now - since >= self.settings.max_wait_seconds
        if ready < size and not (waited and ready >= min(self.settings.min_batch, size)):
            return False
        budget = getattr(combee, "budget", None)
        if budget is not None and not budget.available():
            self.stats.budget_waits += 1
            return False  # the window is spent: the traces stay queued until it allows
        batch = await self._claim(tenant, size)
        if not batch:
            return False
        return await self._learn(tenant, batch)

    async def _settle(self, tenant: str | None) -> None:
        """Retry releases and acks that failed while the store was down."""
        pending = self._unsettled.get(tenant)
        if not pending:
            return
        queue = self.combee.queue(tenant)
        if pending.get("ack"):
            await queue.aack(pending["ack"])
            pending["ack"] = []
        if pending.get("release"):
            await queue.arelease(pending["release"])
            pending["release"] = []

    async def _end_claims(self, tenant: str | None, how: str, ids: list[str]) -> None:
        queue = self.combee.queue(tenant)
        try:
            await (queue.aack(ids) if how == "ack" else queue.arelease(ids))
        except Exception:
            logger.warning("cannot %s %d traces now; retrying next pass", how, len(ids))
            self._unsettled.setdefault(tenant, {}).setdefault(how, []).extend(ids)

    async def _claim(self, tenant: str | None, limit: int) -> list[Trace]:
        return await self.combee.queue(tenant).aclaim(
            limit,
            holder=self.holder,
            visibility_seconds=self.settings.visibility_seconds,
            ready_only=True,
        )

    async def _learn(self, tenant: str | None, batch: list[Trace]) -> bool:
        combee, queue = self.combee, self.combee.queue(tenant)
        keep, drop = self._filter(batch)
        if drop:
            await queue.aack([t.id for t in drop])
            self.stats.traces_dropped += len(drop)
        if not keep:
            return False
        fence = _Fence(combee.registry(tenant), self._lease(tenant), self.stats)
        try:
            await fence.mark()
            async with keep_lease(self._lease(tenant)):
                report = await combee.alearn_batch(keep, tenant=tenant, before_submit=fence)
        except BudgetExceededError as exc:
            # Not a failure of the step: the window is spent. No backoff; the
            # budget check before the next claim keeps the learner waiting.
            await self._end_claims(tenant, "release", [t.id for t in keep])
            self.stats.budget_stops += 1
            self.stats.last_error = repr(exc)
            logger.info("learning step stopped by the budget: %s", exc)
            return False
        except Exception as exc:
            await self._end_claims(tenant, "release", [t.id for t in keep])
            failures = self._failures.get(tenant, 0) + 1
            self._failures[tenant] = failures
            delay = min(
                self.settings.max_backoff_seconds,
                self.settings.backoff_seconds * 2 ** (failures - 1),
            )
            self._retry_at[tenant] = self._clock() + delay
            self.stats.failed_steps += 1
            self.stats.last_error = repr(exc)
            logger.warning(
                "learning step failed (%d in a row), retrying in %.1fs: %r", failures, delay, exc
            )
            return False
        await self._end_claims(tenant, "ack", [t.id for t in keep])
        self._failures.pop(tenant, None)
        self._waiting_since.pop(tenant, None)
        with self.step_done:
            self.stats.steps += 1
            self.stats.traces_learned += len(keep)
            self.stats.versions += report.version is not None
            self.stats.reports.append(report)
            # A learner runs for weeks: keep the recent reports, not all of them.
            del self.stats.reports[:-MAX_REPORTS]
            self.step_done.notify_all()
        return True

    def _filter(self, batch: list[Trace]) -> tuple[list[Trace], list[Trace]]:
        if self.combee.on_missing_feedback != "drop":
            return batch, []
        keep = [t for t in batch if t.feedback is not None and not t.feedback.is_empty()]
        return keep, [t for t in batch if t not in keep]

    def describe(self) -> dict[str, Any]:
        """A snapshot of the learner's counters."""
        poller = self.feedback_poller
        return {
            "running": self.running,
            "holder": self.holder,
            "steps": self.stats.steps,
            "failed_steps": self.stats.failed_steps,
            "traces_learned": self.stats.traces_learned,
            "traces_dropped": self.stats.traces_dropped,
            "versions": self.stats.versions,
            "budget_waits": self.stats.budget_waits,
            "budget_stops": self.stats.budget_stops,
            "budget": None if self.combee.budget is None else self.combee.budget.snapshot(),
            "tick_errors": self.stats.tick_errors,
            "stale_steps": self.stats.stale_steps,
            "last_error": self.stats.last_error,
            "feedback_received": poller.received if poller else 0,
            "feedback_errors": poller.errors if poller else 0,
        }
