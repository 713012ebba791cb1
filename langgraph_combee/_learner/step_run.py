"""Each learning step as one traced run: ``combee.learn_step`` and its LLM calls as children.

The step's root run is opened through LangChain's callback manager, so it
reaches every handler the user attached and LangSmith when tracing is on
(``LANGSMITH_TRACING=true``). The learner's calls made inside the step inherit
it as their parent (a context variable read by ``LLMCaller``). Figures known
only at the end (version after, ops, tokens, the acceptance decision) are added
to the root run's metadata before it closes; its outputs carry a bullet-level
diff with each bullet's provenance.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManager, AsyncCallbackManagerForChainRun
from langchain_core.callbacks.base import Callbacks
from langchain_core.tracers.base import BaseTracer

from langgraph_combee._core.diff import diff_playbooks
from langgraph_combee._core.types import PromptVersion, StepReport
from langgraph_combee._llm.calls import step_callbacks

RUN_NAME = "combee.learn_step"


@dataclass
class StepRun:
    """The open ``combee.learn_step`` run; ``finish`` records its outcome."""

    manager: AsyncCallbackManagerForChainRun
    outputs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> uuid.UUID:
        """The id of the step's root run."""
        return self.manager.run_id

    def finish(
        self, before: PromptVersion, after: PromptVersion | None, report: StepReport
    ) -> None:
        """Record the step's figures and its bullet-level diff."""
        decision = after.decision if after is not None else None
        self.metadata.update(
            {
                "combee_version_before": before.version,
                "combee_version_after": after.version if after is not None else before.version,
                "combee_candidate": after.version if after is not None else None,
                "combee_status": after.status if after is not None else "unchanged",
                "combee_group_sizes": list(report.group_sizes),
                "combee_ops": dict(report.ops),
                "combee_calls": dict(report.calls),
                "combee_input_tokens": report.input_tokens,
                "combee_output_tokens": report.output_tokens,
                "combee_seconds": round(report.seconds, 3),
                "combee_quarantined": len(report.quarantined),
                "combee_held": len(report.held),
                "combee_held_version": report.held_version,
            }
        )
        if decision is not None:
            self.metadata.update(
                {
                    "combee_decision": "accepted" if decision.accepted else "rejected",
                    "combee_decision_policy": decision.policy,
                    "combee_decision_reason": decision.reason,
                    "combee_decision_metrics": dict(decision.metrics),
                }
            )
        elif after is not None:
            self.metadata["combee_decision"] = "pending"
        diff = diff_playbooks(before.playbook, after.playbook if after else before.playbook)
        self.outputs = {
            "version_before": before.version,
            "version_after": self.metadata["combee_version_after"],
            "status": self.metadata["combee_status"],
            "summary": diff.summary(),
            "diff": diff.render(),
            "added": [_bullet(b) for b in diff.added],
            "removed": [_bullet(b) for b in diff.removed],
            "updated": [
                {"before": _bullet(old), "after": _bullet(new)} for old, new in diff.updated
            ],
            "quarantined": [
                {"op": q.op.model_dump(mode="json"), "reasons": q.reasons, "sources": q.sources}
                for q in report.quarantined
            ],
            "held": [
                {"op": q.op.model_dump(mode="json"), "reasons": q.reasons, "sources": q.sources}
                for q in report.held
            ],
            "report": report.model_dump(mode="json", exclude={"trace_ids", "quarantined", "held"}),
        }


def _bullet(bullet: Any) -> dict[str, Any]:
    return {
        "id": bullet.id,
        "section": bullet.section,
        "content": bullet.content,
        "provenance": list(bullet.provenance),
    }


def _label_run(manager: AsyncCallbackManagerForChainRun, metadata: Mapping[str, Any]) -> None:
    # The run's metadata was fixed when it started; tracers keep the open Run
    # object and send its ``extra`` when the run ends, so update it there.
    for handler in manager.handlers:
        if isinstance(handler, BaseTracer):
            run = handler.run_map.get(str(manager.run_id))
            if run is not None:
                run.extra.setdefault("metadata", {}).update(metadata)


@contextlib.asynccontextmanager
async def learn_step_run(
    callbacks: Callbacks, *, metadata: Mapping[str, Any], inputs: Mapping[str, Any]
) -> AsyncIterator[StepRun]:
    """Open the ``combee.learn_step`` run; LLM calls inside the block become its children."""
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=callbacks,
        inheritable_tags=["combee"],
        inheritable_metadata=dict(metadata),
    )
    run_manager = await manager.on_chain_start(
        {"name": RUN_NAME}, dict(inputs), run_id=uuid.uuid4(), name=RUN_NAME
    )
    step = StepRun(run_manager)
    with step_callbacks(run_manager.get_child()):
        try:
            yield step
        except BaseException as exc:
            await run_manager.on_chain_error(exc)
            raise
    _label_run(run_manager, step.metadata)
    await run_manager.on_chain_end(step.outputs)
