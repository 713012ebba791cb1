"""The background learner: pulls batches from the durable queue and runs Combee steps.

It runs on a thread of its own with its own event loop, so it never shares the
agent's thread or loop. For each tenant with queued traces it holds the writer
lease, takes a batch (sized by the controller or fixed, with a minimum batch and
a maximum wait so low traffic still learns), runs one step, and acknowledges the
traces only once the step's candidate has been submitted. ``stop()`` leaves
unprocessed traces queued.

A failed step writes nothing; its traces go back to the queue with one attempt
more each, the tenant backs off (exponentially while it keeps failing for one
reason), and a batch that keeps failing is split to find the trace that breaks
it, which is parked as a dead letter (see ``recovery``). While a step runs, a
``LeaseHeartbeat`` renews the writer lease on a thread of its own, so a step
longer than the lease's TTL keeps it (see ``heartbeat``).

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
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph_combee._core.types import StepReport, Trace
from langgraph_combee._errors import BudgetExceededError, ConfigurationError
from langgraph_combee._learner.acceptance import AcceptancePolicy, overrides
from langgraph_combee._learner.feedback_poll import FeedbackPoller
from langgraph_combee._learner.heartbeat import LeaseHeartbeat, WriteFence
from langgraph_combee._learner.parts import LearnerParts
from langgraph_combee._learner.recovery import StepRecovery, backoff_delay, failure_reason
from langgraph_combee._learner.takeover import recover
from langgraph_combee._settings import LearnerSettings
from langgraph_combee._storage.keys import NO_TENANT, ROOT
from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.locked import hold, writer_lock

logger = logging.getLogger("langgraph_combee.learner")

MAX_REPORTS = 1000  # step reports kept in LearnerStats.reports (the most recent)
LEFTOVER_WAITS = 4
"""After this many ``max_wait_seconds``, ready traces are learned however few they are."""


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
    policy_errors: int = 0
    stale_steps: int = 0
    traces_parked: int = 0
    traces_retried: int = 0
    split_batches: int = 0
    lease_renewals: int = 0
    lease_retakes: int = 0
    last_error: str | None = None
    reports: list[StepReport] = field(default_factory=list)


LINGER_WAIT_SECONDS = 60.0
"""How long ``start()`` waits for a step ``stop()`` left running before it refuses."""


class BackgroundLearner:
    """Learns from queued traces on a thread of its own until stopped.

    Args:
        parts: What it works with, given by the root (``Combee``).
        settings: How it paces itself: ``min_batch``, ``max_wait_seconds``,
            ``poll_seconds``, ``lease_seconds`` and ``step_backoff_seconds``
            of the ``LearnerSettings`` given to ``Combee`` (read as given).
        holder: Its lease holder name (default: a new one).
        clock: Monotonic clock of the pacing and the backoff.
        lease_clock: Wall clock of the lease records.
        visibility_seconds: How long a claimed trace stays invisible to others.
        max_backoff_seconds: Longest delay after failed steps in a row.
        backoff_jitter: Share of a backoff delay added at random (0 to 1), so
            that learners which failed together do not retry together.
        max_trace_attempts: Failed steps a trace may be in before it is split
            out and parked as a dead letter.
        heartbeat_seconds: How often a running step renews the writer lease;
            None: a third of ``lease_seconds``.
    """

    def __init__(
        self,
        parts: LearnerParts,
        settings: LearnerSettings,
        *,
        holder: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        lease_clock: Callable[[], float] = time.time,
        visibility_seconds: float = 600.0,
        max_backoff_seconds: float = 60.0,
        backoff_jitter: float = 0.1,
        max_trace_attempts: int = 8,
        heartbeat_seconds: float | None = None,
    ) -> None:
        self.parts = parts
        self.settings = settings
        self.visibility_seconds = visibility_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.backoff_jitter = backoff_jitter
        self.max_trace_attempts = max_trace_attempts
        self.heartbeat_seconds = heartbeat_seconds
        self.holder = holder or f"learner-{uuid.uuid4().hex[:12]}"
        self._clock = clock
        self._lease_clock = lease_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leases: dict[str | None, Lease] = {}
        self._lingering: threading.Thread | None = None  # a step stop() stopped waiting for
        self._waiting_since: dict[str | None, float] = {}
        self._recovery = StepRecovery(delay=self.backoff, max_trace_attempts=max_trace_attempts)
        # Ready traces of the tenant, other than the batch, as of the last pass.
        self._ready: dict[str | None, int] = {}
        self._visited: set[str | None] = set()  # tenants whose queue describe() reports
        # Per tenant, the lease tenure whose leftovers were settled (Lease.acquired_at).
        self._settled_tenure: dict[str | None, float | None] = {}
        # Claims the store refused to end (down for a while): retried each pass.
        self._unsettled: dict[str | None, dict[str, list[str]]] = {}
        self.stats = LearnerStats()
        self.step_done = threading.Condition()
        source = parts.feedback_source
        # Feedback from an outside source (e.g. LangSmith) for traces that wait for it.
        self.feedback_poller = None if source is None else FeedbackPoller(source, clock=clock)

    def backoff(self, failures: int) -> float:
        """The delay after ``failures`` failed steps in a row for one reason (with jitter)."""
        return backoff_delay(
            failures,
            base=self.settings.step_backoff_seconds,
            cap=self.max_backoff_seconds,
            jitter=self.backoff_jitter,
        )

    # ---- lifecycle --------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the learner thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the learner thread (no-op if it is already running)."""
        if self.running:
            return
        lingering = self._lingering
        if lingering is not None and lingering.is_alive():
            if lingering is threading.current_thread():
                # Called from the step stop() left running: that thread learns on.
                self._lingering, self._thread = None, lingering
                self._stop.clear()
                return
            # Two threads must never share a learner: wait for the step to end.
            logger.info("waiting for the learning step stop() left running before starting")
            lingering.join(LINGER_WAIT_SECONDS)
            if lingering.is_alive():
                raise RuntimeError(
                    f"a learning step stop() left running has not ended after "
                    f"{LINGER_WAIT_SECONDS:g} s; call start() again once it has"
                )
        self._lingering = None
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
        if thread is threading.current_thread():
            # Called from the learner's own step (a hook): it ends after this step,
            # and its leases stay while it runs.
            self._lingering = thread
            return
        if thread is not None and thread.is_alive():
            self._lingering = thread
            # The step still runs and still holds its leases: released now, another
            # learner could take the same traces' turn beside it. They expire instead.
            logger.warning(
                "a learning step is still running after stop(timeout=%s); it ends on its "
                "own thread (a version it makes is still written, its traces return to "
                "the queue if it fails) and its lease expires on its own",
                timeout,
            )
            return
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
        prefix = (ROOT, self.parts.prompt_id)
        for namespace in self.parts.store.list_namespaces(prefix=prefix, max_depth=3, limit=10_000):
            if len(namespace) >= 3:
                found.add(None if namespace[2] == NO_TENANT else namespace[2])
        return sorted(found, key=lambda t: (t is not None, t or ""))

    async def tick(self) -> int:
        """Flush captures, then learn one batch per ready tenant. Returns steps run."""
        if not self.parts.ready():
            return 0  # store="platform" before any run showed the server's store: nothing yet
        await asyncio.to_thread(self.parts.flush)
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
                self.parts.store,
                self.parts.prompt_id,
                tenant=tenant,
                holder=self.holder,
                ttl_seconds=self.settings.lease_seconds,
                clock=self._lease_clock,
            )
        return self._leases[tenant]

    async def _tick_tenant(self, tenant: str | None) -> bool:
        lease = self._lease(tenant)
        # Writer sessions of this process (approve, learn()) share our holder name:
        # one that found the lease free gives it back when it ends, so take it and
        # give it up only between sessions, never under one.
        writers = writer_lock(self.parts.store, self.parts.prompt_id, tenant)
        if await lease.ahandover_wanted():
            # A writer of another process (`combee approve`, learn()) asked for the
            # lease: give it up between steps, take it back when that writer is done.
            async with hold(writers):
                await lease.arelease()
            return False
        now = self._clock()
        if self._recovery.waiting(tenant, now):
            return False
        async with hold(writers):
            taken = await lease.aacquire()
        if not taken:
            return False  # another learner holds this prompt
        self._visited.add(tenant)
        if self._settled_tenure.get(tenant, -1.0) != lease.acquired_at:
            # A new tenure (someone may have held the lease since our last pass):
            # settle the claims a dead or displaced learner left.
            await recover(self.parts, tenant, holder=self.holder)
            self._settled_tenure[tenant] = lease.acquired_at
        await self._settle(tenant)
        parts = self.parts
        policy = parts.writer.acceptance
        queue = parts.queue(tenant)
        if self.feedback_poller is not None:
            await self.feedback_poller.poll(tenant, queue)
        stats = await queue.abacklog()  # not astats(): that reads every done record
        ready = stats["pending"] - stats["waiting"]
        size = parts.engine(tenant).next_batch_size()
        # A user's hook that raises is logged and counted, and spoils only its own
        # part of this tenant's pass: not the other tenants' passes, nor the claims.
        if ready > 0 and overrides(policy, "observe"):
            # A policy that watches live feedback sees every ready trace each pass
            # (claimed and released: only for one that does watch).
            seen = await self._claim(tenant, ready)
            try:
                self._observe(policy.observe, tenant, seen)
            finally:
                await queue.arelease([t.id for t in seen])
        try:
            await policy.review(parts.writer.context(parts.registry(tenant)))
        except Exception as exc:
            self._policy_failed("review", tenant, exc)
        if self._blocking(policy, tenant):
            return False  # a trial is running (or cannot say): learning waits for its decision
        recovery = self._recovery
        while (part := recovery.next_part(tenant, ready=ready, steps=self.stats.steps)) is not None:
            # A failing batch is being split: its parts go before any new batch.
            ids, split = part
            claimed = await self._claim(tenant, len(ids), trace_ids=ids)
            if claimed:
                # Suspects count as others here: they may be as innocent as these.
                self._ready[tenant] = ready - len(claimed)
                return await self._learn(tenant, claimed, split=split)
        suspects = recovery.suspects(tenant)
        total, ready = ready, ready - len(suspects)
        if ready <= 0:
            self._waiting_since.pop(tenant, None)
            return False
        since = self._waiting_since.setdefault(tenant, now)
        waited = now - since >= self.settings.max_wait_seconds
        # Fewer than min_batch traces are taken too, once they have waited LEFTOVER_WAITS
        # times as long: the last runs of a burst never wait for traffic that may not come.
        left_over = now - since >= LEFTOVER_WAITS * self.settings.max_wait_seconds
        enough = ready >= min(self.settings.min_batch, size)
        if ready < size and not (waited and enough) and not left_over:
            return False
        budget = parts.budget
        if budget is not None and not budget.available():
            self.stats.budget_waits += 1
            return False  # the window is spent: the traces stay queued until it allows
        batch = await self._claim(tenant, size, exclude=suspects)
        if not batch:
            return False
        self._ready[tenant] = total - len(batch)
        return await self._learn(tenant, batch, split=False)

    def _observe(
        self, observe: Callable[[Trace], None], tenant: str | None, traces: list[Trace]
    ) -> None:
        """Show each trace to the policy; one it fails on costs only itself (logged once)."""
        failures: list[Exception] = []
        for trace in traces:
            try:
                observe(trace)
            except Exception as exc:
                failures.append(exc)
        if failures:
            self._policy_failed("observe", tenant, failures[0], times=len(failures))

    def _blocking(self, policy: AcceptancePolicy, tenant: str | None) -> bool:
        """``policy.blocking``; one that raises cannot say a trial is over, so it holds."""
        try:
            return bool(policy.blocking(tenant))
        except Exception as exc:
            self._policy_failed("blocking", tenant, exc)
            return True

    def _policy_failed(
        self, hook: str, tenant: str | None, exc: Exception, *, times: int = 1
    ) -> None:
        self.stats.policy_errors += times
        self.stats.last_error = repr(exc)
        logger.error(
            "acceptance policy %r failed in %s (tenant %r, %d time(s) this pass)",
            self.parts.writer.acceptance,
            hook,
            tenant,
            times,
            exc_info=exc,
        )

    async def _settle(self, tenant: str | None) -> None:
        """Retry releases and acks that failed while the store was down."""
        pending = self._unsettled.get(tenant)
        if not pending:
            return
        queue = self.parts.queue(tenant)
        if pending.get("ack"):
            await queue.aack(pending["ack"])
            pending["ack"] = []
        if pending.get("release"):
            await queue.arelease(pending["release"])
            pending["release"] = []

    async def _end_claims(self, tenant: str | None, how: str, ids: list[str]) -> None:
        queue = self.parts.queue(tenant)
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
        return await self.parts.queue(tenant).aclaim(
            limit,
            holder=self.holder,
            visibility_seconds=self.visibility_seconds,
            # The parts of a split batch were ready when the batch was claimed.
            ready_only=trace_ids is None,
            trace_ids=trace_ids,
            exclude=exclude or None,
        )

    async def _learn(self, tenant: str | None, batch: list[Trace], *, split: bool) -> bool:
        parts, queue = self.parts, self.parts.queue(tenant)
        keep, drop = self._filter(batch)
        if drop:
            await queue.aack([t.id for t in drop])
            self.stats.traces_dropped += len(drop)
        if not keep:
            return False
        ids = [t.id for t in keep]
        lease = self._lease(tenant)
        fence = WriteFence(
            parts.registry(tenant), lease, self.stats, claims_ours=lambda: self._holds(tenant, ids)
        )
        beat = LeaseHeartbeat(lease, interval=self.heartbeat_seconds)
        try:
            await fence.mark()
        except Exception:  # the store, not the traces: no attempt counted
            await self._end_claims(tenant, "release", ids)
            raise
        try:
            async with beat:
                report = await parts.step(keep, tenant=tenant, before_submit=fence)
        except BudgetExceededError as exc:
            # Not a failure of the step: the window is spent. No backoff; the
            # budget check before the next claim keeps the learner waiting.
            await self._end_claims(tenant, "release", ids)
            if split:  # a part of a failing batch: still to be tried
                self._recovery.put_back(tenant, (tuple(ids), True))
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
        # A trace whose own reflection call failed taught the step nothing: it is not
        # marked learned but queued again, one attempt more, like a failed step's.
        unreflected = [i for i in ids if i in report.failed_reflections]
        learned = [i for i in ids if i not in report.failed_reflections]
        await self._end_claims(tenant, "ack", learned)
        if unreflected:
            await self._retry_unreflected(tenant, unreflected, report)
        self._recovery.succeeded(tenant)
        self._waiting_since.pop(tenant, None)
        _log_screened(report)
        await parts.announce(report, tenant=tenant)
        with self.step_done:
            self.stats.steps += 1
            self.stats.traces_learned += len(learned)
            self.stats.versions += report.version is not None
            self.stats.reports.append(report)
            # A learner runs for weeks: keep the recent reports, not all of them.
            del self.stats.reports[:-MAX_REPORTS]
            self.step_done.notify_all()
        return True

    async def _retry_unreflected(
        self, tenant: str | None, ids: list[str], report: StepReport
    ) -> None:
        """Queue again the traces whose reflection failed; park those out of attempts."""
        queue = self.parts.queue(tenant)
        attempts: dict[str, int] = {}
        try:
            for trace_id in ids:
                reason = f"its reflection failed: {report.failed_reflections[trace_id]}"
                attempts.update(await queue.afail([trace_id], reason=reason))
        except Exception:
            logger.warning("cannot count the failed reflection of %d traces now", len(ids))
            await self._end_claims(tenant, "release", [i for i in ids if i not in attempts])
        spent = [t for t, n in attempts.items() if n >= self.max_trace_attempts]
        self.stats.traces_retried += len(attempts) - len(spent)
        if spent:
            reason = f"its reflection failed: {report.failed_reflections[spent[0]]}"
            try:
                self.stats.traces_parked += await queue.apark(spent, reason=reason)
            except Exception:  # left pending: parked when its next reflection fails
                logger.warning("cannot park %d trace(s) now", len(spent), exc_info=True)
                return
            logger.warning(
                "parked %d trace(s) as dead letters after %d failed reflections, e.g. %r: %s",
                len(spent),
                self.max_trace_attempts,
                spent[0],
                reason,
            )
        if len(spent) < len(ids):
            logger.warning(
                "the reflection on %d trace(s) of the step failed; they go back to the queue "
                "for a later step (StepReport.failed_reflections): %s",
                len(ids) - len(spent),
                report.failed_reflections[ids[0]],
            )

    async def _holds(self, tenant: str | None, ids: list[str]) -> bool:
        """Whether every trace of ``ids`` is still claimed by this learner."""
        mine = {
            c.trace_id for c in await self.parts.queue(tenant).aclaims() if c.holder == self.holder
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
        reason = failure_reason(exc)
        self.stats.failed_steps += 1
        self.stats.last_error = repr(exc)
        failures, delay = self._recovery.failed(tenant, reason, self._clock())
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
            if split:
                self._recovery.put_back(tenant, (tuple(ids), True))
            return
        queue = self.parts.queue(tenant)
        try:
            attempts = await queue.afail(ids, reason=reason)
        except Exception:
            logger.warning("cannot count the failed attempt of %d traces now", len(ids))
            await self._end_claims(tenant, "release", ids)
            return
        verdict = self._recovery.judge(
            tenant,
            ids,
            attempts,
            split=split,
            steps=self.stats.steps,
            others=self._ready.get(tenant, 0),
        )
        self.stats.split_batches += verdict == "split"
        if verdict == "park":
            self.stats.traces_parked += await queue.apark(ids, reason=reason)
            logger.warning(
                "parked trace %r as a dead letter after %d failed steps: %s",
                ids[0],
                attempts.get(ids[0], 0),
                reason,
            )

    def _filter(self, batch: list[Trace]) -> tuple[list[Trace], list[Trace]]:
        if self.parts.on_missing_feedback != "drop":
            return batch, []
        keep = [t for t in batch if t.feedback is not None and not t.feedback.is_empty()]
        return keep, [t for t in batch if t not in keep]

    def describe(self) -> dict[str, Any]:
        """A snapshot of the learner's counters.

        ``backoff`` maps each tenant that is backing off (``"_"``: the shared one)
        to its failed steps in a row, their reason and the seconds until the next
        try; ``bisecting`` to the parts of a failing batch still to try and
        the suspects; ``traces_parked`` counts the traces this learner parked
        (after failed steps, or after their own reflection kept failing),
        ``traces_retried`` those queued again because their reflection failed in
        a step that otherwise succeeded, and
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
            "budget": None if self.parts.budget is None else self.parts.budget.snapshot(),
            "tick_errors": self.stats.tick_errors,
            "policy_errors": self.stats.policy_errors,
            "stale_steps": self.stats.stale_steps,
            "traces_parked": self.stats.traces_parked,
            "traces_retried": self.stats.traces_retried,
            "split_batches": self.stats.split_batches,
            "lease_renewals": self.stats.lease_renewals,
            "lease_retakes": self.stats.lease_retakes,
            **self._recovery.describe(now),
            "dead_letters": self._dead_letter_counts(),
            "last_error": self.stats.last_error,
            "feedback_received": poller.received if poller else 0,
            "feedback_errors": poller.errors if poller else 0,
            "roles": self._roles(),
        }

    def _roles(self) -> dict[str, Any] | None:
        try:
            engine = self.parts.engine(None)
        except ConfigurationError:  # a serve-only replica: no learner model
            return None
        return engine.roles.describe()

    def _dead_letter_counts(self) -> dict[str, int] | None:
        try:
            counts = {_label(t): len(self.parts.queue(t).dead_letters()) for t in self._visited}
        except Exception:  # a diagnostic must not raise for a store fault
            logger.warning("cannot count dead letters now", exc_info=True)
            return None
        return {tenant: n for tenant, n in counts.items() if n}


def _label(tenant: str | None) -> str:
    return NO_TENANT if tenant is None else tenant


def _log_screened(report: StepReport) -> None:
    """Say in the log what the guard refused or held in a step (the report has every one).

    Without it a user whose rules are all quarantined (feedback from an untrusted
    source restating the rule, a placeholder read as markup) sees a learner that
    runs and learns nothing, and no reason anywhere they would look first.
    """
    for kind, ops in (("refused", report.quarantined), ("held for a person", report.held)):
        if ops:
            logger.warning(
                "the guard %s %d of the step's rules (StepReport.%s; see docs/security.md), "
                "e.g. %s",
                kind,
                len(ops),
                "quarantined" if kind == "refused" else "held",
                ops[0].describe(),
            )
