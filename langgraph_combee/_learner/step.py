"""One learning step, end to end: learn a batch, replay it, hand the result to the writer.

``Stepper`` is what ``Combee.learn()`` and the background learner share. It
holds only the parts a step needs, given by the root: the registry and the
engine of each tenant, the replayer, the version writer, the callbacks and
the budget.

Each step that ends is announced once (``Stepper.announce``): one INFO line (logger
``langgraph_combee.learner``) with ``StepReport.summary()``, a ``StepRecord`` in the
store's step log (``combee steps``), the process's ``StepTally``
(``Combee.describe()["steps"]``) and the user's ``LearnerSettings.on_step``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from langchain_core.callbacks import Callbacks

from langgraph_combee._algorithm.engine import LearningEngine
from langgraph_combee._core.types import LearnReport, StepReport, Trace
from langgraph_combee._errors import ConfigurationError, LearningError
from langgraph_combee._learner.replaying import Replayer
from langgraph_combee._learner.step_run import learn_step_run
from langgraph_combee._learner.tally import StepTally
from langgraph_combee._learner.versions import VersionWriter
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._storage.registry import PromptRegistry
from langgraph_combee._storage.steps import StepLog, StepRecord

logger = logging.getLogger("langgraph_combee.learner")

StepListener = Callable[[StepReport], None]
"""Told each step's report as it ends (``LearnerSettings.on_step``)."""


BeforeSubmit = Callable[[], Awaitable[bool]]
"""Run after a step and before anything is written; False discards the step's result."""


class StepFn(Protocol):
    """Runs one learning step on a batch of one tenant (``Stepper.step``)."""

    def __call__(
        self,
        batch: list[Trace],
        *,
        tenant: str | None = None,
        before_submit: BeforeSubmit | None = None,
    ) -> Awaitable[StepReport]: ...


class Announce(Protocol):
    """Logs, records and tells a step that ended (``Stepper.announce``)."""

    def __call__(self, report: StepReport, *, tenant: str | None = None) -> Awaitable[None]: ...


def refuse_duplicates(traces: Sequence[Trace], name: str) -> None:
    """Refuse a batch in which one trace id appears twice, naming both places."""
    # One run learned twice would count its evidence twice; the caller most
    # likely concatenated two exports. Refused rather than silently de-duplicated.
    seen: dict[str, int] = {}
    for i, trace in enumerate(traces):
        if trace.id in seen:
            raise ConfigurationError(
                f"{name}[{i}].id",
                trace.id,
                f"an id not already used by {name}[{seen[trace.id]}] (trace ids must be unique)",
            )
        seen[trace.id] = i


class Stepper:
    """Runs learning steps and submits their candidates to the version writer.

    Args:
        prompt_id: The prompt.
        registry: The version registry of a tenant.
        engine: The learning engine of a tenant (raises ``ConfigurationError``
            when there is no learner model).
        writer: Writes each step's candidate and has it decided.
        replayer: Verified adoption, between the step and the writer.
        callbacks: LangChain callbacks of the step's root run.
        budget: Charged by the replays (the engine charges its own calls).
        step_log: The step log of a tenant (each step's summary is kept there);
            None: not kept.
        on_step: Told each step's report; what it raises is logged, never raised.
    """

    def __init__(
        self,
        *,
        prompt_id: str,
        registry: Callable[[str | None], PromptRegistry],
        engine: Callable[[str | None], LearningEngine],
        writer: VersionWriter,
        replayer: Replayer,
        callbacks: Callbacks = None,
        budget: LearnerBudget | None = None,
        step_log: Callable[[str | None], StepLog] | None = None,
        on_step: StepListener | None = None,
    ) -> None:
        self.prompt_id = prompt_id
        self.registry = registry
        self.engine = engine
        self.writer = writer
        self.replayer = replayer
        self.callbacks = callbacks
        self.budget = budget
        self.step_log = step_log
        self.on_step = on_step
        self.tally = StepTally()

    async def learn(
        self,
        traces: list[Trace],
        *,
        epochs: int = 1,
        tenant: str | None = None,
        on_step: Callable[[StepReport], None] | None = None,
    ) -> LearnReport:
        """Learn from ``traces`` in batches (sized by the engine), ``epochs`` times over."""
        engine = self.engine(tenant)
        steps: list[StepReport] = []
        for _ in range(epochs):
            start = 0
            while start < len(traces):
                batch = traces[start : start + engine.next_batch_size()]
                start += len(batch)
                report = await self.step(batch, tenant=tenant)
                await self.announce(report, tenant=tenant)
                steps.append(report)
                if on_step is not None:
                    on_step(report)
        return LearnReport(version=await self.registry(tenant).ahead(), steps=steps)

    async def step(
        self,
        batch: list[Trace],
        *,
        tenant: str | None = None,
        before_submit: BeforeSubmit | None = None,
    ) -> StepReport:
        """Run one learning step on ``batch`` and submit its candidate for acceptance.

        Args:
            batch: The traces to learn from.
            tenant: Whose playbook learns.
            before_submit: Optional check run after the step and before anything is
                written (the background learner checks its lease here); when it
                returns False the step's result is discarded.

        Raises:
            ConfigurationError: ``batch`` is not a list of traces with distinct ids.
            LearningError: The step failed; nothing was written.
        """
        if not isinstance(batch, list) or not all(isinstance(t, Trace) for t in batch):
            raise ConfigurationError("batch", batch, "a list of Trace objects")
        refuse_duplicates(batch, "batch")
        registry = self.registry(tenant)
        engine = self.engine(tenant)
        head = await registry.ahead()
        next_version = await registry.alatest_version() + 1
        metadata = {
            "combee_prompt_id": self.prompt_id,
            "combee_tenant": tenant,
            "combee_strategy": engine.strategy.name,
            "combee_batch_size": len(batch),
            "combee_version_before": head.version,
        }
        inputs = {"trace_ids": [t.id for t in batch], "version_before": head.version}
        async with learn_step_run(self.callbacks, metadata=metadata, inputs=inputs) as run:
            result = await engine.step(head.playbook, batch, version=next_version)
            result = await self.replayer(
                head.playbook,
                result,
                batch,
                version=next_version,
                callbacks=run.manager.get_child(),
                budget=self.budget,
            )
            if before_submit is not None and not await before_submit():
                raise LearningError("the writer lease was lost during the step; result discarded")
            stored = await self.writer.submit(registry, head, result, version=next_version)
            result.report.run_id = str(run.run_id)
            run.finish(head, stored, result.report)
        return result.report

    async def announce(self, report: StepReport, *, tenant: str | None = None) -> None:
        """Log, record and tell a step that ended; none of it can fail it (it is written).

        Called once the step's traces are settled (``learn()`` after each step, the
        background learner after acknowledging them), so that this I/O never
        widens the window between writing a version and acknowledging its traces.
        """
        where = self.prompt_id if tenant is None else f"{self.prompt_id}/{tenant}"
        logger.info("learning step of %r: %s", where, report.summary())
        self.tally.add(report)
        if self.step_log is not None:
            try:
                await self.step_log(tenant).aadd(StepRecord.of(report, tenant=tenant))
            except Exception:  # the store: the step's version is written all the same
                logger.warning("cannot keep the step's summary in the step log", exc_info=True)
        if self.on_step is not None:
            try:
                self.on_step(report)
            except Exception:  # the user's callback must never stop the learner
                logger.exception("LearnerSettings.on_step raised on a step's report (ignored)")
