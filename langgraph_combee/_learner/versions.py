"""Turning a step's result into a version: carry-over of counters, candidate, decision.

Every write of a version or of HEAD goes through one ``VersionWriter`` session:

* within a process, one lock per prompt and tenant of a store
  (``writer_lock``), whatever the number of ``Combee`` objects, threads or
  event loops;
* across processes, the writer lease (``Lease``), held for the session, with
  every write fenced by its epoch (atomic on a ``PostgresStore``);
* first, HEAD is repaired if a writer died between writing an accepted version
  and moving HEAD (``PromptRegistry.repair_head``).

Inside a session, a candidate learned from a version that is no longer HEAD is
*rebased*: its stored ops are re-applied onto HEAD's playbook through the
step's own stages marked for it (``stages.rebasing``: screen, apply, support,
de-duplicate, promote, budget), and the record keeps ``rebased_from`` (the
version it was learned from) and its new parent. So two steps that began from
the same HEAD, or two candidates approved in turn, both end up in force;
nothing is silently dropped. A stale candidate with no stored ops cannot be
rebased and is refused (``StaleCandidateError``).

A step that only moved helpful/harmful counters changes nothing the agent sees,
so it writes no version: its TAG ops wait in memory and ride along with the next
step that changes the text. (They are soft signals; a restart forgets them.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence

from langgraph.store.base import BaseStore

from langgraph_combee._algorithm.stages import (
    STEP_STAGES,
    Stage,
    StepState,
    check_stages,
    rebasing,
    run_stages,
)
from langgraph_combee._algorithm.strategies import StepContext, StepResult
from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.ops import DeltaOp, Tag
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision, PromptVersion, StepReport
from langgraph_combee._errors import StaleCandidateError
from langgraph_combee._guard.guard import BulletGuard
from langgraph_combee._learner.acceptance import AcceptancePolicy, PolicyContext, decide
from langgraph_combee._storage.lease import Lease, fenced, in_process
from langgraph_combee._storage.locked import hold, writer_lock
from langgraph_combee._storage.registry import PromptRegistry

logger = logging.getLogger("langgraph_combee.learner")

# How often a writer waiting for another process's lease looks again.
LEASE_POLL_SECONDS = 0.05

Published = Callable[[str | None, PromptVersion], None]
"""Told ``(tenant, version)`` of each version this process puts in force."""

CanaryChanged = Callable[[str | None, "PromptVersion | None"], None]
"""Told ``(tenant, canary)`` when this process starts (a candidate) or ends (None) a trial."""


def _ignore(tenant: str | None, version: PromptVersion | None) -> None:
    """The default callback: a writer with no agent side in its process."""


def _held_key(op: DeltaOp) -> str:
    text = getattr(op, "content", None) or getattr(op, "id", "")
    return f"{op.type}:{' '.join(str(text).casefold().split())}"


def _visible(playbook: Playbook) -> list[tuple[str, str, str, bool]]:
    # Pending bullets are stored though not served, and promotion flips the flag:
    # both must write a version.
    return [(b.id, b.section, b.content, b.pending) for b in playbook.bullets]


@dataclasses.dataclass(frozen=True)
class ApplyPipeline:
    """The deterministic part of a step, re-run when a candidate is rebased.

    ``stages`` is the step's order; rebasing runs its ``rebasing`` part.
    """

    guard: BulletGuard | None = None
    token_budget: int | None = 2000
    dedup: bool = True
    dedup_threshold: float | None = None
    embedder: Embedder | None = None
    stages: tuple[Stage, ...] = STEP_STAGES

    def __post_init__(self) -> None:
        check_stages(self.stages)

    async def reapply(
        self,
        ops: Sequence[DeltaOp],
        onto: Playbook,
        *,
        version: int,
        learned: Playbook,
        base: Playbook | None = None,
    ) -> Playbook:
        """Re-apply a candidate's ops onto another playbook (``rebasing(self.stages)``).

        Drop stale edits, screen, apply, carry support, de-duplicate, promote, budget.
        ``learned`` is the candidate's own playbook: an added bullet keeps the
        support it had there (the traces behind it are not at hand any more).
        ``base`` is the playbook the ops were learned from: an UPDATE or REMOVE
        of a bullet whose text ``onto`` has changed since is a conflict and is
        dropped, so the rewrite in force wins over an edit of text it replaced.
        """
        ctx = StepContext(
            guard=self.guard,
            token_budget=self.token_budget,
            dedup=self.dedup,
            dedup_threshold=self.dedup_threshold,
            embedder=self.embedder,
            stages=self.stages,
        )
        state = StepState(
            playbook=onto,
            version=version,
            report=StepReport(strategy="rebase", batch_size=0),
            traces=None,
            ops=list(ops),
            candidate=learned,
            learned_from=base,
        )
        state = await run_stages(rebasing(self.stages), ctx, state)
        return state.current


class VersionWriter:
    """Submits step results as candidates and applies decisions, one writer at a time.

    It is the one place where a version is decided and put in force: a step's
    candidate, a candidate a dead learner left undecided (``decide``), an
    operator's or a policy's verdict (``accept``, ``reject``, ``rollback``). Each
    version put in force is published through ``on_published``.

    Args:
        prompt_id: The prompt.
        acceptance: The policy deciding candidates.
        store: The store holding the registry and the lease.
        holder: This process's lease holder name (shared with its background learner).
        lease_seconds: The lease's TTL; a writer waits at most this long (plus a
            second) for another process's lease before ``LeaseHeldError``.
        pipeline: How a stale candidate's ops are re-applied.
        on_published: Told ``(tenant, version)`` of every version put in force
            (the agent side's HEAD cache in this process); one that raises is
            logged: the version is in force regardless.
        on_canary: Told ``(tenant, canary or None)`` when a trial starts or ends.
    """

    def __init__(
        self,
        *,
        prompt_id: str,
        acceptance: AcceptancePolicy,
        store: BaseStore,
        holder: str,
        lease_seconds: float = 60.0,
        pipeline: ApplyPipeline | None = None,
        on_published: Published = _ignore,
        on_canary: CanaryChanged = _ignore,
    ) -> None:
        # A policy with state of its own refuses a second prompt now, not mid-trial.
        acceptance._bind(prompt_id)
        self.prompt_id = prompt_id
        self.acceptance = acceptance
        self.on_published = on_published
        self.on_canary = on_canary
        self.store = store
        self.holder = holder
        self.lease_seconds = float(lease_seconds)
        self.pipeline = pipeline or ApplyPipeline()
        self._lock = threading.Lock()
        self._pending_tags: dict[str | None, list[DeltaOp]] = {}
        self._leases: dict[str | None, Lease] = {}

    def pending_tags(self, tenant: str | None) -> list[DeltaOp]:
        """TAG ops waiting for the next content change of a tenant's playbook."""
        with self._lock:
            return list(self._pending_tags.get(tenant, []))

    def lease(self, tenant: str | None) -> Lease:
        """The writer lease of a tenant, under this process's holder name."""
        with self._lock:
            if tenant not in self._leases:
                self._leases[tenant] = Lease(
                    self.store,
                    self.prompt_id,
                    tenant=tenant,
                    holder=self.holder,
                    ttl_seconds=self.lease_seconds,
                )
            return self._leases[tenant]

    def context(self, registry: PromptRegistry) -> PolicyContext:
        """The context a policy decides in, with decisions routed through this writer."""
        return PolicyContext(registry=registry, writer=self)

    def _publish(self, version: PromptVersion) -> None:
        try:
            self.on_published(version.tenant, version)
        except Exception:  # stored and in force already: serving learns of it on refresh
            logger.exception("publishing v%s of prompt %r failed", version.version, self.prompt_id)

    async def set_canary(self, registry: PromptRegistry, version: PromptVersion | None) -> None:
        """Start (a candidate) or end (None) a canary trial, and tell ``on_canary``.

        Written in a writer session, as every registry write: a writer whose lease
        was taken meanwhile must not start or end a trial over the new holder's.

        Raises:
            LeaseHeldError: Another process held the lease for longer than its TTL.
        """
        async with self.session(registry) as fenced:
            await fenced.aset_canary(None if version is None else version.version)
        self._tell_canary(registry.tenant, version)

    def _tell_canary(self, tenant: str | None, version: PromptVersion | None) -> None:
        try:
            self.on_canary(tenant, version)
        except Exception:  # the registry holds the trial: serving learns of it on refresh
            logger.exception("telling the canary of prompt %r failed", self.prompt_id)

    @staticmethod
    async def _is_canary(registry: PromptRegistry, version: int) -> bool:
        """Whether ``version`` is the registry's canary (asked before it is decided).

        A decided candidate is no canary any more: the registry's record is then
        cleared, and ``on_canary`` told, so that this process stops serving it
        at once rather than at its next refresh (an operator's approve or reject
        during a trial).
        """
        canary = await registry.acanary()
        return canary is not None and canary.version == version

    @contextlib.asynccontextmanager
    async def session(self, registry: PromptRegistry) -> AsyncIterator[PromptRegistry]:
        """Be the one writer of ``registry``'s prompt and tenant; yield a fenced registry.

        Raises:
            LeaseHeldError: Another process held the lease for longer than its TTL.
        """
        tenant = registry.tenant
        async with hold(writer_lock(self.store, self.prompt_id, tenant)):
            lease = self.lease(tenant)
            holder = await lease.aholder()
            if holder is not None and holder != lease.owner:
                # Held by a learner of this process: write under its lease.
                lease = in_process(self.store, self.prompt_id, tenant, holder) or lease
            was_ours = holder == lease.owner
            await self._take(lease)
            try:
                writer = PromptRegistry(fenced(self.store, lease), self.prompt_id, tenant=tenant)
                repaired = await writer.arepair_head()
                if repaired is not None:
                    logger.warning(
                        "HEAD of prompt %r (tenant %r) moved to v%d: a writer died after "
                        "accepting it and before moving HEAD",
                        self.prompt_id,
                        tenant,
                        repaired.version,
                    )
                    self._publish(repaired)
                yield writer
            finally:
                if not was_ours:
                    try:
                        await lease.arelease()
                    except Exception:  # a dead store: the lease simply expires
                        logger.warning("could not release the writer lease", exc_info=True)

    async def _take(self, lease: Lease) -> None:
        if await lease.aacquire():
            return
        # Held by another process: a learner there renews it on every pass and
        # would never let it expire, so ask it to hand the lease over.
        await lease.arequest_handover()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + lease.ttl_seconds + 1.0
            while not await lease.aacquire():
                if loop.time() >= deadline:
                    await lease.arequire()  # raises LeaseHeldError naming the holder
                    return
                await asyncio.sleep(LEASE_POLL_SECONDS)
        finally:
            try:
                await lease.awithdraw_handover()
            except Exception:  # a dead store: the request lapses by itself
                logger.warning("could not withdraw the lease hand-over request", exc_info=True)

    async def _rebase(self, registry: PromptRegistry, record: PromptVersion) -> PromptVersion:
        """Re-apply a stale candidate onto HEAD inside a session (see the module docstring)."""
        head = await registry.ahead()
        if record.parent == head.version:
            return record
        if not record.ops:
            raise StaleCandidateError(
                self.prompt_id, record.version, record.parent, head.version, has_ops=False
            )
        learned_from = record.rebased_from if record.rebased_from is not None else record.parent
        base = None if learned_from is None else (await registry.aget(learned_from)).playbook
        playbook = await self.pipeline.reapply(
            record.ops, head.playbook, version=record.version, learned=record.playbook, base=base
        )
        logger.info(
            "rebased candidate v%d of prompt %r from v%s onto v%d",
            record.version,
            self.prompt_id,
            record.parent,
            head.version,
        )
        return await registry.arebase(record.version, playbook, onto=head.version)

    def _carry_over(self, tenant: str | None, result: StepResult, version: int) -> StepResult:
        with self._lock:
            waiting = self._pending_tags.pop(tenant, [])
        if not waiting:
            return result
        applied = result.playbook.apply(waiting, version=version)
        report = result.report
        report.ops["tag"] = report.ops.get("tag", 0) + applied.counts()["tag"]
        return dataclasses.replace(
            result, playbook=applied.playbook, ops=[*applied.applied, *result.ops]
        )

    async def submit(
        self, registry: PromptRegistry, head: PromptVersion, result: StepResult, *, version: int
    ) -> PromptVersion | None:
        """Write the step's candidate (if the text changed) and decide it.

        ``head`` is the version the step learned from; when HEAD has moved since,
        the candidate is rebased onto the new HEAD before it is written.

        Returns the stored version (accepted, rejected or pending), or None when
        the step changed no bullet text.
        """
        stored = await self._submit(registry, head, result, version=version)
        if result.report.held:
            await self._submit_held(registry, head, stored, result)
        return stored

    async def _submit_held(
        self,
        registry: PromptRegistry,
        head: PromptVersion,
        stored: PromptVersion | None,
        result: StepResult,
    ) -> None:
        # Held ops (policy changes) go into their own candidate, built on the step's
        # version, which only a person can accept (``needs_approval``).
        report = result.report
        base = stored if stored is not None else head
        # A rule already waiting for a person in an earlier candidate is not held again:
        # each step would otherwise file the same rule for approval once more.
        waiting: dict[str, int] = {}
        for pending in await registry.acandidates():
            for q in pending.held:
                waiting.setdefault(_held_key(q.op), pending.version)
        fresh = [q for q in report.held if _held_key(q.op) not in waiting]
        if not fresh:
            report.held_version = min(waiting[_held_key(q.op)] for q in report.held)
            return
        held = [q.op for q in fresh]
        applied = result.playbook.apply(held, version=base.version + 1)
        candidate = PromptVersion(
            prompt_id=self.prompt_id,
            tenant=registry.tenant,
            playbook=applied.playbook,
            parent=base.version,
            ops=applied.applied,
            ops_summary=applied.counts(),
            source_trace_ids=sorted({s for q in fresh for s in q.sources}),
            held=fresh,
            needs_approval=sorted({r for q in fresh for r in q.reasons}),
            note=f"{len(held)} policy-changing op(s) held for a person",
        )
        report.held_version = (await registry.aadd_candidate(candidate)).version

    async def _submit(
        self, registry: PromptRegistry, head: PromptVersion, result: StepResult, *, version: int
    ) -> PromptVersion | None:
        tenant = registry.tenant
        result = self._carry_over(tenant, result, version)
        report = result.report
        if _visible(result.playbook) == _visible(head.playbook):
            tags = [op for op in result.ops if isinstance(op, Tag)]
            if tags:
                with self._lock:
                    self._pending_tags.setdefault(tenant, []).extend(tags)
            return None
        candidate = PromptVersion(
            prompt_id=self.prompt_id,
            tenant=tenant,
            playbook=result.playbook,
            parent=head.version,
            ops=result.ops,
            # Evictions by the playbook's token budget are not ops; record them too.
            ops_summary={**report.ops, **({"evicted": report.evicted} if report.evicted else {})},
            source_trace_ids=list(report.trace_ids),
            quarantined=list(report.quarantined),
            held=list(report.held),
            note=f"{report.strategy} step over {report.batch_size} traces",
        )
        async with self.session(registry) as fenced:
            stored = await self._rebase(fenced, await fenced.aadd_candidate(candidate))
            current = await fenced.aget(stored.parent or 0)
        report.version = stored.version
        final = await self.decide(registry, stored, current)
        if final.status != "candidate":
            report.accepted = final.status == "accepted"
        return final

    async def decide(
        self, registry: PromptRegistry, candidate: PromptVersion, current: PromptVersion
    ) -> PromptVersion:
        """Ask the policy about a stored candidate and apply its verdict, if it gives one.

        ``current`` is the version the candidate was learned from. A verdict that
        comes after an operator decided the candidate leaves that decision standing.
        Returns the version as it stands afterwards (still a candidate if pending).
        """
        decision = await decide(self.acceptance, candidate, current, self.context(registry))
        if decision is None:
            return candidate
        write = self.accept if decision.accepted else self.reject
        return await write(registry, candidate.version, decision, if_pending=True)

    def _decided_elsewhere(self, record: PromptVersion, decision: Decision) -> bool:
        if record.status == "candidate":
            return False
        logger.info(
            "v%d of prompt %r was %s (%s) while %s decided it; that decision stands",
            record.version,
            self.prompt_id,
            record.status,
            "?" if record.decision is None else record.decision.policy,
            decision.policy,
        )
        return True

    async def accept(
        self,
        registry: PromptRegistry,
        version: int,
        decision: Decision,
        *,
        if_pending: bool = False,
    ) -> PromptVersion:
        """Accept a candidate, rebasing it first if HEAD moved since it was learned.

        With ``if_pending`` (a policy's verdict, which may come late), a version
        decided meanwhile (by an operator) is returned as it is.

        Raises:
            StaleCandidateError: It is stale and has no stored ops to re-apply.
            RegistryError: It is not a candidate.
        """
        async with self.session(registry) as fenced:
            record = await fenced.aget(version)
            if if_pending and self._decided_elsewhere(record, decision):
                return record
            if record.status == "candidate":
                record = await self._rebase(fenced, record)
            was_canary = await self._is_canary(fenced, version)
            accepted = await fenced.aaccept(version, decision)
            if was_canary:
                await fenced.aset_canary(None)
        self._publish(accepted)
        if was_canary:
            self._tell_canary(registry.tenant, None)
        return accepted

    async def reject(
        self,
        registry: PromptRegistry,
        version: int,
        decision: Decision,
        *,
        if_pending: bool = False,
    ) -> PromptVersion:
        """Reject a candidate; HEAD does not move. ``if_pending`` as for ``accept``."""
        async with self.session(registry) as fenced:
            if if_pending:
                record = await fenced.aget(version)
                if self._decided_elsewhere(record, decision):
                    return record
            was_canary = await self._is_canary(fenced, version)
            rejected = await fenced.areject(version, decision)
            if was_canary:
                await fenced.aset_canary(None)
        if was_canary:
            self._tell_canary(registry.tenant, None)
        return rejected

    async def rollback(
        self, registry: PromptRegistry, version: int, *, reason: str = ""
    ) -> PromptVersion:
        """Put an accepted version's playbook back in force as a new version."""
        async with self.session(registry) as fenced:
            restored = await fenced.arollback(version, reason=reason)
        self._publish(restored)
        return restored
