"""The learning engine: a strategy, its LLM caller and its batch sizing, with no store.

``Combee`` owns one engine per prompt; the offline ``learn()`` and the background
learner both drive it one batch at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.callbacks import Callbacks
from langchain_core.language_models import BaseChatModel

from langgraph_combee._algorithm.auto_roles import ROLES, make_roles
from langgraph_combee._algorithm.controller import BatchSizeController
from langgraph_combee._algorithm.roles import RoleProfile
from langgraph_combee._algorithm.strategies import StepContext, StepResult, Strategy, make_strategy
from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.nearest import EMBEDDER_ALLOWED, embedder_ok
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._errors import ConfigurationError, LearningError, LLMCallError
from langgraph_combee._guard.guard import DEFAULT_GUARD, BulletGuard
from langgraph_combee._llm import failures
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._llm.calls import CallSettings, LLMCaller

BatchSize = int | Literal["auto"]


@dataclass(frozen=True)
class EngineSettings:
    """Knobs of the learning algorithm (all keyword arguments of ``Combee``)."""

    copies: int = 2
    fan_in: int | None = None
    seed: int = 0
    token_budget: int | None = 2000
    dedup: bool = True
    dedup_threshold: float | None = None
    embedder: Embedder | None = None
    guard: BulletGuard | None = DEFAULT_GUARD
    roles: str | RoleProfile = "auto"
    examples: int = 0

    def __post_init__(self) -> None:
        if self.token_budget is not None and self.token_budget < 50:
            raise ConfigurationError("token_budget", self.token_budget, "None or an int >= 50")
        if self.dedup_threshold is not None and not 0 < self.dedup_threshold <= 1:
            raise ConfigurationError("dedup_threshold", self.dedup_threshold, "None or in (0, 1]")
        if not embedder_ok(self.embedder):
            raise ConfigurationError("embedder", self.embedder, EMBEDDER_ALLOWED)
        if self.guard is not None and not isinstance(self.guard, BulletGuard):
            raise ConfigurationError("guard", self.guard, "a BulletGuard or None")
        if not isinstance(self.roles, RoleProfile) and self.roles not in ROLES:
            raise ConfigurationError(
                "roles", self.roles, "'auto', 'full', 'small' or a RoleProfile"
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
        settings: EngineSettings | None = None,
        calls: CallSettings | None = None,
        controller: BatchSizeController | None = None,
        callbacks: Callbacks = None,
        metadata: dict[str, Any] | None = None,
        budget: LearnerBudget | None = None,
    ) -> None:
        self.settings = settings or EngineSettings()
        self.strategy = make_strategy(
            strategy,
            copies=self.settings.copies,
            fan_in=self.settings.fan_in,
            seed=self.settings.seed,
        )
        self.batch_size = validate_batch_size(batch_size)
        self.controller = controller or BatchSizeController()
        self.caller = LLMCaller(
            model, calls or CallSettings(), callbacks=callbacks, metadata=metadata, budget=budget
        )
        self.context = StepContext(
            caller=self.caller,
            token_budget=self.settings.token_budget,
            embedder=self.settings.embedder,
            dedup_threshold=self.settings.dedup_threshold,
            dedup=self.settings.dedup,
            guard=self.settings.guard,
            roles=make_roles(self.settings.roles, model),
            examples=self.settings.examples,
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
