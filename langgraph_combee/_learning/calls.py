"""Every learner LLM call goes through here: concurrency limit, timeout, retries,
structured output with a tolerant fallback, one repair attempt, and accounting.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.callbacks import Callbacks
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from langgraph_combee._errors import BudgetExceededError, ConfigurationError, LLMCallError
from langgraph_combee._learning.budget import LearnerBudget
from langgraph_combee._learning.parsing import ReplyParseError, message_text, parse_reply
from langgraph_combee._learning.prompts import REPAIR_REQUEST
from langgraph_combee._tokens import estimate_tokens

logger = logging.getLogger("langgraph_combee.learner")

T = TypeVar("T", bound=BaseModel)

RUN_NAMES = ("combee.reflect", "combee.propose", "combee.aggregate", "combee.curate")

# Set while a learning step runs under a traced parent run: its child callback
# manager, so every call of the step is nested under it.
_step_callbacks: contextvars.ContextVar[Callbacks] = contextvars.ContextVar(
    "combee_step_callbacks", default=None
)


@contextlib.contextmanager
def step_callbacks(callbacks: Callbacks) -> Iterator[None]:
    """Within the block (and tasks started in it), learner calls use ``callbacks``."""
    token = _step_callbacks.set(callbacks)
    try:
        yield
    finally:
        _step_callbacks.reset(token)


@dataclass
class CallStats:
    """Calls, failures, unparsable replies and tokens, by run name."""

    calls: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    unparsed: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0

    def short_calls(self) -> dict[str, int]:
        """Calls keyed by stage ('reflect', 'propose', ...) rather than run name."""
        return {name.removeprefix("combee."): n for name, n in sorted(self.calls.items())}


@dataclass(frozen=True)
class CallSettings:
    """Limits that apply to every learner call, whatever the strategy."""

    max_concurrency: int = 16
    timeout_seconds: float | None = 600.0
    max_attempts: int = 3
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    structured_output: bool = True

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigurationError("max_concurrency", self.max_concurrency, "an int >= 1")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ConfigurationError("timeout_seconds", self.timeout_seconds, "None or > 0")
        if self.backoff_initial < 0:
            raise ConfigurationError("backoff_seconds", self.backoff_initial, "a number >= 0")
        if self.max_attempts < 1:
            raise ConfigurationError("max_attempts", self.max_attempts, "an int >= 1")


def _retryable(exc: BaseException) -> bool:
    # Cancellation, programming errors in our own schemas and a spent budget are
    # not worth retrying.
    return not isinstance(
        exc, asyncio.CancelledError | TypeError | ConfigurationError | BudgetExceededError
    )


class LLMCaller:
    """Runs learner calls against one chat model under shared limits.

    One caller is shared by every concurrent call of a step, so the concurrency
    limit holds across the whole map and reduce.
    """

    def __init__(
        self,
        model: BaseChatModel,
        settings: CallSettings,
        *,
        callbacks: Callbacks = None,
        metadata: dict[str, Any] | None = None,
        budget: LearnerBudget | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.callbacks = callbacks
        self.metadata = dict(metadata or {})
        self.budget = budget
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._structured_ok = settings.structured_output
        self._structured: dict[type[BaseModel], Runnable[Any, Any]] = {}

    def _sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.settings.max_concurrency)
            self._loop = loop
        return self._semaphore

    def _config(self, run_name: str) -> RunnableConfig:
        step = _step_callbacks.get()
        return RunnableConfig(
            run_name=run_name,
            callbacks=step if step is not None else self.callbacks,
            tags=["combee", run_name],
            metadata={**self.metadata, "combee_stage": run_name.removeprefix("combee.")},
        )

    def _structured_runnable(self, schema: type[BaseModel]) -> Runnable[Any, Any]:
        # Built once per schema: building it converts the schema each time (ms per call).
        runnable = self._structured.get(schema)
        if runnable is None:
            runnable = self.model.with_structured_output(schema, include_raw=True)
            self._structured[schema] = runnable
        return runnable

    async def _invoke_once(
        self, run_name: str, messages: Sequence[BaseMessage], schema: type[T]
    ) -> tuple[AIMessage, T | None]:
        config = self._config(run_name)
        if self._structured_ok:
            try:
                runnable = self._structured_runnable(schema)
            except NotImplementedError:
                self._structured_ok = False
            else:
                result: Any = await runnable.ainvoke(list(messages), config=config)
                raw = result.get("raw") if isinstance(result, dict) else None
                parsed = result.get("parsed") if isinstance(result, dict) else None
                if not isinstance(raw, AIMessage):
                    raw = AIMessage(content="")
                return raw, parsed if isinstance(parsed, schema) else None
        reply = await self.model.ainvoke(list(messages), config=config)
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=message_text(reply.content))
        return reply, None

    def _count(self, stats: CallStats, messages: Sequence[BaseMessage], reply: AIMessage) -> None:
        usage = reply.usage_metadata
        if usage:
            spent_in = int(usage.get("input_tokens", 0))
            spent_out = int(usage.get("output_tokens", 0))
        else:
            spent_in = sum(estimate_tokens(message_text(m.content)) for m in messages)
            spent_out = estimate_tokens(message_text(reply.content))
        stats.input_tokens += spent_in
        stats.output_tokens += spent_out
        if self.budget is not None:
            self.budget.charge_tokens(spent_in + spent_out)

    async def _attempt(
        self, run_name: str, messages: Sequence[BaseMessage], schema: type[T], stats: CallStats
    ) -> tuple[AIMessage, T | None]:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_attempts),
            wait=wait_exponential(
                multiplier=self.settings.backoff_initial, max=self.settings.backoff_max
            )
            + wait_random(0, self.settings.backoff_initial),
            retry=retry_if_exception(_retryable),
            reraise=False,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    async with self._sem():
                        if self.budget is not None:
                            self.budget.acquire_call()  # raises when the window is spent
                        stats.calls[run_name] += 1
                        reply, parsed = await asyncio.wait_for(
                            self._invoke_once(run_name, messages, schema),
                            timeout=self.settings.timeout_seconds,
                        )
                    self._count(stats, messages, reply)
                    return reply, parsed
        except RetryError as exc:
            cause = exc.last_attempt.exception() or exc
            stats.failed[run_name] += 1
            logger.warning(
                "%s failed after %d attempts: %r", run_name, exc.last_attempt.attempt_number, cause
            )
            raise LLMCallError(run_name, exc.last_attempt.attempt_number, cause) from cause
        raise AssertionError("unreachable: tenacity always returns or raises")  # pragma: no cover

    async def call(
        self, run_name: str, messages: Sequence[BaseMessage], schema: type[T], stats: CallStats
    ) -> T | None:
        """Make one learner call and return the parsed reply, or None if unparsable.

        A reply that cannot be parsed gets one repair request; if that fails too,
        the call counts as unparsed and None is returned. An LLM that keeps
        raising (or timing out) raises ``LLMCallError`` after the retries; a
        spent ``LearnerBudget`` raises ``BudgetExceededError`` before the call.
        """
        reply, parsed = await self._attempt(run_name, messages, schema, stats)
        if parsed is not None:
            return parsed
        text = message_text(reply.content)
        try:
            return parse_reply(text, schema)
        except ReplyParseError as first:
            error = str(first).splitlines()[0][:300]
        repair = [
            *messages,
            AIMessage(content=text),
            HumanMessage(REPAIR_REQUEST.format(error=error)),
        ]
        reply, parsed = await self._attempt(run_name, repair, schema, stats)
        if parsed is not None:
            return parsed
        try:
            return parse_reply(message_text(reply.content), schema)
        except ReplyParseError:
            stats.unparsed[run_name] += 1
            logger.info("%s: reply still unparsable after one repair; skipped", run_name)
            return None
