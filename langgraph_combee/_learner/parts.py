"""The parts the root hands the learner side: no learner module reaches into ``Combee``.

``Combee`` (the composition root) builds one ``LearnerParts`` and gives it to
the background learner and to takeover: the store, the queue, registry and
engine of each tenant, the step function, the version writer, and the two
hooks into the agent side of the same process (``flush`` before a pass,
``ready`` for a store bound late).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from langgraph.store.base import BaseStore

from langgraph_combee._algorithm.engine import LearningEngine
from langgraph_combee._core.types import StepReport
from langgraph_combee._learner.step import Announce, StepFn
from langgraph_combee._learner.versions import VersionWriter
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._settings import FeedbackSource
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee._storage.registry import PromptRegistry

MissingFeedback = Literal["learn", "drop"]


def _nothing_buffered() -> object:
    return 0


def _always_ready() -> bool:
    return True


async def _unannounced(report: StepReport, *, tenant: str | None = None) -> None:
    del report, tenant


@dataclass(frozen=True)
class LearnerParts:
    """What the background learner works with, all given by the root.

    Attributes:
        prompt_id: The prompt.
        store: The store holding queues, registries and leases.
        queue: The trace queue of a tenant.
        registry: The version registry of a tenant.
        engine: The learning engine of a tenant (raises ``ConfigurationError``
            without a learner model).
        step: Runs one learning step and submits its candidate.
        writer: The version writer (decisions, sessions, takeover), holding the
            acceptance policy whose hooks the learner calls each pass.
        budget: The learner budget, if any.
        feedback_source: Asked for feedback on traces that wait for it.
        on_missing_feedback: ``"drop"`` acknowledges traces without feedback unlearned.
        flush: Writes the agent side's captured traces to the queue (before a pass).
        ready: False while the store cannot be used yet (``store="platform"``
            before the first run bound it): the pass does nothing.
        announce: Logs, records and tells a step once its traces are settled
            (``Stepper.announce``).
    """

    prompt_id: str
    store: BaseStore
    queue: Callable[[str | None], TraceQueue]
    registry: Callable[[str | None], PromptRegistry]
    engine: Callable[[str | None], LearningEngine]
    step: StepFn
    writer: VersionWriter
    budget: LearnerBudget | None = None
    feedback_source: FeedbackSource | None = None
    on_missing_feedback: MissingFeedback = "learn"
    flush: Callable[[], object] = _nothing_buffered
    ready: Callable[[], bool] = _always_ready
    announce: Announce = _unannounced
