"""Turning a step's result into a version: carry-over of counters, candidate, decision.

A step that only moved helpful/harmful counters changes nothing the agent sees,
so it writes no version: its TAG ops wait in memory and ride along with the next
step that changes the text. (They are soft signals; a restart forgets them.)
"""

from __future__ import annotations

import dataclasses
import threading

from langgraph_combee._core.ops import DeltaOp, Tag
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import PromptVersion
from langgraph_combee._learning.strategies import StepResult
from langgraph_combee._runtime.acceptance import AcceptancePolicy, PolicyContext, decide
from langgraph_combee._runtime.serving import Server
from langgraph_combee._storage.registry import PromptRegistry


def _visible(playbook: Playbook) -> list[tuple[str, str, str, bool]]:
    # Pending bullets are stored though not served, and promotion flips the flag:
    # both must write a version.
    return [(b.id, b.section, b.content, b.pending) for b in playbook.bullets]


class VersionWriter:
    """Submits step results as candidates and applies the acceptance policy's decision."""

    def __init__(self, *, prompt_id: str, acceptance: AcceptancePolicy, server: Server) -> None:
        self.prompt_id = prompt_id
        self.acceptance = acceptance
        self.server = server
        self._lock = threading.Lock()
        self._pending_tags: dict[str | None, list[DeltaOp]] = {}

    def pending_tags(self, tenant: str | None) -> list[DeltaOp]:
        """TAG ops waiting for the next content change of a tenant's playbook."""
        with self._lock:
            return list(self._pending_tags.get(tenant, []))

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
        held = [q.op for q in report.held]
        applied = result.playbook.apply(held, version=base.version + 1)
        candidate = PromptVersion(
            prompt_id=self.prompt_id,
            tenant=registry.tenant,
            playbook=applied.playbook,
            parent=base.version,
            ops=applied.applied,
            ops_summary=applied.counts(),
            source_trace_ids=sorted({s for q in report.held for s in q.sources}),
            held=list(report.held),
            needs_approval=sorted({r for q in report.held for r in q.reasons}),
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
        stored = await registry.aadd_candidate(candidate)
        report.version = stored.version
        context = PolicyContext(registry=registry, server=self.server)
        decision = await decide(self.acceptance, stored, head, context)
        if decision is None:
            return stored
        report.accepted = decision.accepted
        if not decision.accepted:
            return await registry.areject(stored.version, decision)
        accepted = await registry.aaccept(stored.version, decision)
        self.server.publish(accepted)
        return accepted
