"""The background learner: pulls batches from the durable queue and runs Combee steps.

It runs on a thread of its own with its own event loop, so it never shares the
agent's thread or loop. For each tenant with queued traces it holds the writer
lease, takes a batch (sized by the controller or fixed, with a minimum batch and
a maximum wait so low traffic still learns), runs one step, and acknowledges the
traces only once the step's candidate has been submitted. ``stop()`` leaves
unprocessed traces queued.

A failed step writes nothing; its traces go back to the queue with one attempt
more on each (``TraceQueue.fail``), and the tenant backs off: exponentially
while it keeps failing for the same reason (``backoff_seconds`` doubling up to
``max_backoff_seconds``, plus up to ``backoff_jitter`` of random jitter), from the
start again for a new reason (``describe()["backoff"]``). A batch that fails is
retried once whole (most failures are transient), then split in halves, tried
breadth-first, to find the trace that makes it fail (``bisect``). A trace that
fails alone is parked as a dead letter (``TraceQueue.park``) once another step
has succeeded since the bisection began (so the learner works and the trace is
the cause), or once it has failed ``max_trace_attempts`` times with no other
trace of its tenant waiting. A long outage therefore parks nothing while other
traces wait; the good traces of a failing batch are learned in the halves that
succeed.

While a step runs a ``LeaseHeartbeat`` renews the writer lease on a thread of
its own (see ``heartbeat``), so a step longer than the lease's TTL keeps it even
when the learner's event loop or its worker threads are busy.

Faults (see docs/faults.md): a store that fails mid-pass fails only that pass
(counted in ``tick_errors``); traces whose release or acknowledgement could not
be written are retried on the next pass instead of waiting out their claim. A
spent ``LearnerBudget`` makes the learner wait: it claims nothing, its traces
stay queued, and a step the budget stopped midway is released without backoff.
Before writing, a step checks that it still holds the lease (or takes it back if
nobody else took it meanwhile) and that no other writer moved HEAD or added a
version since it began; otherwise it is discarded, without counting an attempt
against its traces.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tenacity import RetryCallState, Retrying, wait_exponential, wait_random

from langgraph_combee._core.types import StepReport, Trace
from langgraph_combee._errors import BudgetExceededError, ConfigurationError
from langgraph_combee._runtime.acceptance import PolicyContext
from langgraph_combee._runtime.feedback_poll import FeedbackPoller
from langgraph_combee._runtime.heartbeat import LeaseHeartbeat
from langgraph_combee._runtime.takeover import recover
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
    backoff_jitter: float = 0.1
    max_trace_attempts: int = 8
    heartbeat_seconds: float | None = None

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
        if not 0 <= self.backoff_jitter <= 1:
            raise ConfigurationError("backoff_jitter", self.backoff_jitter, "a number in [0, 1]")
        if self.max_trace_attempts < 1:
            raise ConfigurationError("max_trace_attempts", self.max_trace_attempts, "an int >= 1")
        if self.heartbeat_seconds is not None and not self.heartbeat_seconds > 0:
            raise ConfigurationError(
                "heartbeat_seconds", self.heartbeat_seconds, "None or a number > 0"
            )

    def backoff(self, failures: int) -> float:
        """The delay after ``failures`` failed steps in a row for one reason (with jitter)."""
        base = self.backoff_seconds
        wait = wait_exponential(multiplier=base, max=self.max_backoff_seconds) + wait_random(
            0, base * self.backoff_jitter * 2 ** min(failures - 1, 30)
        )
        state = RetryCallState(Retrying(), None, (), {})
        state.attempt_number = failures
        return min(self.max_backoff_seconds, wait(state))


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
    traces_parked: int = 0
    split_batches: int = 0
    lease_renewals: int = 0
    lease_retakes: int = 0
    last_error: str | None = None
    reports: list[StepReport] = field(default_factory=list)


@dataclass
class _Backoff:
    """A tenant's failed steps in a row for one reason, and when it may try again."""

    failures: int
    reason: str
    retry_at: float


@dataclass
class _Bisection:
    """A failing batch being split to find the trace that makes it fail.

    ``plan`` holds the sub-batches still to try (trace ids, and whether a failure
    splits it further), breadth-first; ``steps_at_start`` is the learner's step
    count when the bisection began: a success since shows that the learner works.
    ``suspects`` failed alone before any such success: they wait, out of new
    batches, until a success (or an empty queue) says whether to park them.
    """

    plan: deque[tuple[tuple[str, ...], bool]]
    steps_at_start: int
    suspects: list[str] = field(default_factory=list)


def _reason(exc: BaseException) -> str:
    """A failure's reason: its type and first line."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


def _same_fault(a: str, b: str) -> bool:
    # Counts in a message ("all 4 reflections failed") change with the batch size.
    return re.sub(r"\d+", "#", a) == re.sub(r"\d+", "#", b)


class _Fence:
    """A ``before_submit`` check: the lease is still ours and nobody wrote since ``mark``.

    A lease that lapsed, or whose record is gone, is taken back when nobody else
    holds it: the step's work is kept as long as no other writer came in between
    (HEAD and the latest version as at ``mark``, the batch's claims still ours).
    """

    def __init__(
        self,
        registry: PromptRegistry,
        lease: Lease,
        stats: LearnerStats,
        *,
        claims_ours: Callable[[], Any],
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
            self._stats.stale_steps += 1
            self.discarded = "another writer changed the prompt during the step"
            logger.warning("another writer changed prompt %r during the step", self._registry)
            return False
        if self._lease.acquired_at != self._tenure and not await self._claims_ours():
            # The lease lapsed and was held by someone else meanwhile, who may
            # have taken this batch's traces back.
            self.discarded = "the batch's claims were taken over during the step"
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
        lease_clock: Callable[[], float] = time.time,
    ) -> None:
        self.combee = combee
        self.settings = settings
        self.holder = holder or f"learner-{uuid.uuid4().hex[:12]}"
        self._clock = clock
        self._lease_clock = lease_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leases: dict[str | None, Lease] = {}
        self._waiting_since: dict[str | None, float] = {}
        self._backoff: dict[str | None, _Backoff] = {}
        self._bisect: dict[str | None, _Bisection] = {}
        # Ready traces of the tenant, other than the batch, as of the last pass.
        self._ready: dict[str | None, int] = {}
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
                clock=self._lease_clock,
            )
        return self._leases[tenant]

    async def _tick_tenant(self, tenant: str | None) -> bool:
        now = self._clock()
        backoff = self._backoff.get(tenant)
        if backoff is not None and now < backoff.retry_at:
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
        context = PolicyContext(registry=combee.registry(tenant), server=combee.server)
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
        bisection = self._bisect.get(tenant)
        suspects: list[str] = []
        if bisection is not None:
            suspects = bisection.suspects
            if (
                not bisection.plan
                and suspects
                and (self.stats.steps > bisection.steps_at_start or ready <= len(suspects))
            ):
                # The learner works (or nothing else waits): try each suspect alone again.
                bisection.plan.extend(((t,), True) for t in suspects)
                suspects.clear()
            while bisection.plan:
                # A failing batch is being split: its parts go before any new batch.
                ids, split = bisection.plan.popleft()
                part = await self._claim(tenant, len(ids), trace_ids=ids)
                if part:
                    # Suspects count as others here: they may be as innocent as this one.
                    self._ready[tenant] = ready - len(part)
                    return await self._learn(tenant, part, split=split)
            if not suspects:
                self._bisect.pop(tenant, None)
        total, ready = ready, ready - len(suspects)
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
        batch = await self._claim(tenant, size, exclude=suspects)
        if not batch:
            return False
        self._ready[tenant] = total - len(batch)
        return await self._learn(tenant, batch, split=False)

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

    async def _claim(
        self,
        tenant: str | None,
        limit: int,
        *,
        trace_ids: tuple[str, ...] | None = None,
        exclude: list[str] | None = None,
    ) -> list[Trace]:
        return await self.combee.queue(tenant).aclaim(
            limit,
            holder=self.holder,
            visibility_seconds=self.settings.visibility_seconds,
            # The parts of a split batch were ready when the batch was claimed.
            ready_only=trace_ids is None,
            trace_ids=trace_ids,
            exclude=exclude or None,
        )

    async def _learn(self, tenant: str | None, batch: list[Trace], *, split: bool) -> bool:
        combee, queue = self.combee, self.combee.queue(tenant)
        keep, drop = self._filter(batch)
        if drop:
            await queue.aack([t.id for t in drop])
            self.stats.traces_dropped += len(drop)
        if not keep:
            return False
        ids = [t.id for t in keep]
        lease = self._lease(tenant)
        fence = _Fence(
            combee.registry(tenant), lease, self.stats, claims_ours=lambda: self._holds(tenant, ids)
        )
        beat = LeaseHeartbeat(lease, interval=self.settings.heartbeat_seconds)
        try:
            await fence.mark()
            async with beat:
                report = await combee.alearn_batch(keep, tenant=tenant, before_submit=fence)
        except BudgetExceededError as exc:
            # Not a failure of the step: the window is spent. No backoff; the
            # budget check before the next claim keeps the learner waiting.
            await self._end_claims(tenant, "release", ids)
            self.stats.budget_stops += 1
            self.stats.last_error = repr(exc)
            logger.info("learning step stopped by the budget: %s", exc)
            return False
        except Exception as exc:
            await self._failed(tenant, keep, exc, split=split, blamed=not fence.called)
            return False
        finally:
            self.stats.lease_renewals += beat.renewals
            self.stats.lease_retakes += beat.retakes
        await self._end_claims(tenant, "ack", ids)
        self._backoff.pop(tenant, None)
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

    async def _holds(self, tenant: str | None, ids: list[str]) -> bool:
        """Whether every trace of ``ids`` is still claimed by this learner."""
        mine = {
            c.trace_id for c in await self.combee.queue(tenant).aclaims() if c.holder == self.holder
        }
        return mine.issuperset(ids)

    async def _failed(
        self, tenant: str | None, batch: list[Trace], exc: Exception, *, split: bool, blamed: bool
    ) -> None:
        """Release a failed step's traces, back off, and split or park when they are to blame.

        ``blamed``: the step itself failed (not the lease check or the write after
        it), so its traces count an attempt and may be the cause.
        """
        ids = [t.id for t in batch]
        reason = _reason(exc)
        self.stats.failed_steps += 1
        self.stats.last_error = repr(exc)
        previous = self._backoff.get(tenant)
        same = previous is not None and _same_fault(previous.reason, reason)
        failures = previous.failures + 1 if previous is not None and same else 1
        delay = self.settings.backoff(failures)
        self._backoff[tenant] = _Backoff(failures, reason, self._clock() + delay)
        logger.warning(
            "learning step on %d trace(s) failed (%d in a row for this reason), "
            "retrying in %.1fs: %r",
            len(ids),
            failures,
            delay,
            exc,
        )
        if not blamed:
            await self._end_claims(tenant, "release", ids)
            return
        queue = self.combee.queue(tenant)
        try:
            attempts = await queue.afail(ids, reason=reason)
        except Exception:
            logger.warning("cannot count the failed attempt of %d traces now", len(ids))
            await self._end_claims(tenant, "release", ids)
            return
        bisection = self._bisect.setdefault(
            tenant, _Bisection(plan=deque(), steps_at_start=self.stats.steps)
        )
        if len(ids) > 1:
            if split:
                half = len(ids) // 2
                bisection.plan.extend([(tuple(ids[:half]), True), (tuple(ids[half:]), True)])
                self.stats.split_batches += 1
            else:
                bisection.plan.append((tuple(ids), True))  # once more whole: maybe transient
            return
        (trace_id,) = ids
        tried = attempts.get(trace_id, 0)
        learner_works = self.stats.steps > bisection.steps_at_start
        # Nothing else to compare with: a lone trace is parked after enough tries.
        alone = self._ready.get(tenant, 0) <= 0 and not bisection.plan
        if learner_works or (tried >= self.settings.max_trace_attempts and alone):
            parked = await queue.apark([trace_id], reason=reason)
            self.stats.traces_parked += parked
            logger.warning(
                "parked trace %r as a dead letter after %d failed steps: %s",
                trace_id,
                tried,
                reason,
            )
        elif trace_id not in bisection.suspects:
            bisection.suspects.append(trace_id)

    def _filter(self, batch: list[Trace]) -> tuple[list[Trace], list[Trace]]:
        if self.combee.on_missing_feedback != "drop":
            return batch, []
        keep = [t for t in batch if t.feedback is not None and not t.feedback.is_empty()]
        return keep, [t for t in batch if t not in keep]

    def describe(self) -> dict[str, Any]:
        """A snapshot of the learner's counters.

        ``backoff`` maps each tenant that is backing off (``"_"``: the shared one)
        to its failed steps in a row, their reason and the seconds until the next
        try; ``bisecting`` to the parts of a failing batch still to try;
        ``traces_parked`` counts the traces this learner parked, and
        ``dead_letters`` the parked traces waiting in each tenant's queue it has
        visited (read from the store; None when the store cannot be read). The
        queue's ``dead_letters()`` lists them, ``retry_dead`` and ``drop_dead``
        settle them (also ``combee dead-letters``).
        """
        poller = self.feedback_poller
        now = self._clock()
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
            "traces_parked": self.stats.traces_parked,
            "split_batches": self.stats.split_batches,
            "lease_renewals": self.stats.lease_renewals,
            "lease_retakes": self.stats.lease_retakes,
            "backoff": {
                _label(tenant): {
                    "failures": b.failures,
                    "reason": b.reason,
                    "retry_in_seconds": round(max(0.0, b.retry_at - now), 3),
                }
                for tenant, b in self._backoff.items()
            },
            "bisecting": {
                _label(tenant): len(b.plan) for tenant, b in self._bisect.items() if b.plan
            },
            "dead_letters": self._dead_letter_counts(),
            "last_error": self.stats.last_error,
            "feedback_received": poller.received if poller else 0,
            "feedback_errors": poller.errors if poller else 0,
        }

    def _dead_letter_counts(self) -> dict[str, int] | None:
        try:
            counts = {_label(t): len(self.combee.queue(t).dead_letters()) for t in self._leases}
        except Exception:  # a diagnostic must not raise for a store fault
            logger.warning("cannot count dead letters now", exc_info=True)
            return None
        return {tenant: n for tenant, n in counts.items() if n}


def _label(tenant: str | None) -> str:
    return NO_TENANT if tenant is None else tenant
