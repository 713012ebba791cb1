"""The learning engine: a strategy, its LLM caller and its batch sizing, with no store.

``Combee`` owns one engine per prompt; the offline ``learn()`` and the background
learner both drive it one batch at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from langgraph_combee._algorithm.auto_roles import make_roles
from langgraph_combee._algorithm.controller import BatchSizeController
from langgraph_combee._algorithm.roles import RoleProfile
from langgraph_combee._algorithm.strategies import StepContext, StepResult, Strategy, make_strategy
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._errors import ConfigurationError, LearningError, LLMCallError
from langgraph_combee._guard.guard import DEFAULT_GUARD, BulletGuard
from langgraph_combee._llm import failures
from langgraph_combee._llm.calls import CallSettings, LLMCaller
from langgraph_combee._settings import AlgorithmSettings, LearnerSettings

BatchSize = int | Literal["auto"]


def call_settings(learner: LearnerSettings) -> CallSettings:
    """The limits of every learner call, as ``LearnerSettings`` states them.

    A retry's delay grows from ``backoff_seconds`` up to 8 times it.
    """
    return CallSettings(
        max_concurrency=learner.max_concurrency,
        timeout_seconds=learner.timeout_seconds,
        max_attempts=learner.max_attempts,
        backoff_initial=learner.backoff_seconds,
        backoff_max=8.0 * learner.backoff_seconds,
    )


_UNAVAILABLE = "the learner LLM is unavailable"


def _named(exc: LearningError, failed: dict[str, LLMCallError]) -> LearningError:
    """``exc``, naming what the learner LLM raised when reflection calls failed in the step.

    "All reflections failed" says nothing a user can act on; the error the model
    raised (``RuntimeError: Event loop is closed``, a refused connection, a 401)
    does. The step's other errors are returned as they are.
    """
    if not failed or isinstance(exc, LLMCallError):
        return exc
    last = list(failed.values())[-1]
    raised = (
        f"the learner LLM raised {failures.cause(last)} "
        f"({last.run_name}, after {last.attempts} attempt(s))"
    )
    message = str(exc)
    if _UNAVAILABLE in message:
        return LearningError(message.replace(_UNAVAILABLE, raised))
    return LearningError(f"{message} ({raised})")


def validate_batch_size(batch_size: Any) -> BatchSize:
    """Return ``batch_size`` if it is a positive int or "auto", else raise."""
    if batch_size == "auto":
        return "auto"
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigurationError("batch_size", batch_size, 'a positive int or "auto"')
    return batch_size


class LearningEngine:
    """Runs learning steps; knows nothing of stores, versions or acceptance."""

    def __init__(
        self,
        model: BaseChatModel,
        *,
        strategy: str | Strategy = "combee",
        batch_size: BatchSize = "auto",
        algorithm: AlgorithmSettings | None = None,
        learner: LearnerSettings | None = None,
        guard: BulletGuard | None = DEFAULT_GUARD,
        dedup: bool = True,
        dedup_threshold: float | None = None,
        controller: BatchSizeController | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Build the engine from the settings objects ``Combee`` was given (checked there).

        Args:
            model: The learner LLM.
            strategy: The strategy name or object.
            batch_size: Traces per step, or ``"auto"`` for ``controller``.
            algorithm: What a step does (copies, token budget, roles, ...).
            learner: The learner's call limits, callbacks and budget.
            guard: The guard screening every proposed edit; None: no screening.
            dedup: Merge near-duplicate rules.
            dedup_threshold: Similarity above which two rules are one; None: the default.
            controller: The batch-size controller (``batch_size="auto"``).
            metadata: Metadata attached to every learner call.
        """
        self.algorithm = algorithm if algorithm is not None else AlgorithmSettings()
        self.learner = learner if learner is not None else LearnerSettings()
        if dedup_threshold is not None and not 0 < dedup_threshold <= 1:
            raise ConfigurationError("dedup_threshold", dedup_threshold, "None or in (0, 1]")
        self.strategy = make_strategy(
            strategy,
            copies=self.algorithm.copies,
            fan_in=self.algorithm.fan_in,
            seed=self.algorithm.seed,
        )
        self.batch_size = validate_batch_size(batch_size)
        self.controller = controller or BatchSizeController()
        self.caller = LLMCaller(
            model,
            call_settings(self.learner),
            callbacks=self.learner.callbacks,
            metadata=metadata,
            budget=self.learner.budget,
        )
        self.context = StepContext(
            caller=self.caller,
            token_budget=self.algorithm.token_budget,
            embedder=self.algorithm.embedder,
            dedup_threshold=dedup_threshold,
            dedup=dedup,
            guard=guard,
            roles=make_roles(self.algorithm.roles, model),
            examples=self.algorithm.examples,
        )

    @property
    def roles(self) -> RoleProfile:
        """The role profile this engine's steps use (chosen once, at construction)."""
        return self.context.roles

    def next_batch_size(self) -> int:
        """How many traces the next step should take."""
        if self.batch_size == "auto":
            return self.controller.next_size()
        return self.batch_size

    async def step(
        self, playbook: Playbook, traces: Sequence[Trace], *, version: int
    ) -> StepResult:
        """Run one step and feed its delay to the batch-size controller.

        Raises:
            BudgetExceededError: The learner budget is spent (before the step, or
                during it: the step is then abandoned and writes nothing).
        """
        if self.caller.budget is not None:
            self.caller.budget.check()
        with failures.watch() as failed:
            try:
                result = await self.strategy.step(self.context, playbook, traces, version=version)
            except LearningError as exc:
                raise _named(exc, failed) from exc
        # The traces whose reflection failed taught the step nothing: listed, so that
        # the background learner queues them again rather than marking them learned.
        result.report.failed_reflections = {t: failures.cause(e) for t, e in failed.items()}
        if self.batch_size == "auto":
            self.controller.record(len(traces), result.report.seconds)
        return result
