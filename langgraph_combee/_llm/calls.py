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

from langgraph_combee._core.text import message_text
from langgraph_combee._core.tokens import estimate_tokens
from langgraph_combee._errors import BudgetExceededError, ConfigurationError, LLMCallError
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._llm.parsing import ReplyParseError, parse_reply
from langgraph_combee._llm.prompts import REPAIR_REQUEST, SHORTER_REQUEST

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
    """Calls, failures, unparsable and length-cut replies, and tokens, by run name.

    ``truncated`` counts replies that hit the length limit (``finish_reason ==
    "length"`` or a ``LengthFinishReasonError``), whether or not the shorter
    repair request then saved the call.
    """

    calls: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    unparsed: Counter[str] = field(default_factory=Counter)
    truncated: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0

    def short_calls(self) -> dict[str, int]:
        """Calls keyed by stage ('reflect', 'propose', ...) rather than run name."""
        return {name.removeprefix("combee."): n for name, n in sorted(self.calls.items())}


@dataclass(frozen=True)
class CallSettings:
    """Limits that apply to every learner call, whatever the strategy.

    Not checked here: the engine builds them from ``LearnerSettings``
    (``engine.call_settings``) and the guard's judge from its own checked
    ``judge_timeout``; tests set them directly.
    """

    max_concurrency: int = 16
    timeout_seconds: float | None = 600.0
    max_attempts: int = 3
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    structured_output: bool = True


# Finish reasons meaning "the reply was cut at its token limit", by provider:
# OpenAI-compatible servers (llama.cpp, vLLM, Ollama's /v1), Ollama, Anthropic, Gemini.
_LENGTH_FINISH = frozenset({"length", "max_tokens", "MAX_TOKENS"})
# Fields through which chat models take a reply's token limit.
_LIMIT_FIELDS = ("max_tokens", "max_output_tokens", "num_predict")


class ReplyTooLongError(Exception):
    """A reply was cut at its token limit (raised and caught inside the caller)."""

    def __init__(self, message: str, reply: AIMessage | None = None) -> None:
        super().__init__(message)
        self.reply = reply


def is_length_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the reply hit the token limit (openai's LengthFinishReasonError)."""
    # Matched by name: the openai package is an optional dependency.
    return isinstance(exc, ReplyTooLongError) or any(
        cls.__name__ == "LengthFinishReasonError" for cls in type(exc).__mro__
    )


def hit_length_limit(reply: BaseMessage) -> bool:
    """Whether the provider says the reply stopped at its token limit."""
    meta = reply.response_metadata or {}
    reasons = (meta.get("finish_reason"), meta.get("stop_reason"), meta.get("done_reason"))
    return any(isinstance(r, str) and r in _LENGTH_FINISH for r in reasons)


def bounded_model(model: BaseChatModel, max_tokens: int | None) -> BaseChatModel:
    """``model`` with its reply limited to ``max_tokens``, where the model takes a limit.

    A limit the user set lower is kept. Models without a known limit field are
    returned as they are (the schema's own bounds and the length check still apply).
    """
    if max_tokens is None:
        return model
    fields = type(model).model_fields
    for name in _LIMIT_FIELDS:
        if name in fields:
            current = getattr(model, name, None)
            if isinstance(current, int) and 0 < current <= max_tokens:
                return model
            return model.model_copy(update={name: max_tokens})
    return model


def _retryable(exc: BaseException) -> bool:
    # Cancellation, programming errors in our own schemas and a spent budget are
    # not worth retrying; nor is a reply cut at its length limit, which the same
    # request would only cut again (the caller sends a shorter repair request).
    return not (
        isinstance(
            exc, asyncio.CancelledError | TypeError | ConfigurationError | BudgetExceededError
        )
        or is_length_error(exc)
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
        self._structured: dict[tuple[type[BaseModel], int | None], Runnable[Any, Any]] = {}
        self._bounded: dict[int | None, BaseChatModel] = {}

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

    def _model(self, max_tokens: int | None) -> BaseChatModel:
        model = self._bounded.get(max_tokens)
        if model is None:
            model = self._bounded[max_tokens] = bounded_model(self.model, max_tokens)
        return model

    def _structured_runnable(
        self, schema: type[BaseModel], max_tokens: int | None
    ) -> Runnable[Any, Any]:
        # Built once per schema and limit: building converts the schema (ms per call).
        runnable = self._structured.get((schema, max_tokens))
        if runnable is None:
            runnable = self._model(max_tokens).with_structured_output(schema, include_raw=True)
            self._structured[(schema, max_tokens)] = runnable
        return runnable

    async def _invoke_once(
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        schema: type[T],
        max_tokens: int | None,
    ) -> tuple[AIMessage, T | None]:
        try:
            return await self._invoke_raw(run_name, messages, schema, max_tokens)
        except ReplyTooLongError:
            raise
        except Exception as exc:
            if is_length_error(exc):
                raise ReplyTooLongError(str(exc)) from exc
            raise

    async def _invoke_raw(
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        schema: type[T],
        max_tokens: int | None,
    ) -> tuple[AIMessage, T | None]:
        config = self._config(run_name)
        if self._structured_ok:
            try:
                runnable = self._structured_runnable(schema, max_tokens)
            except NotImplementedError:
                self._structured_ok = False
            else:
                result: Any = await runnable.ainvoke(list(messages), config=config)
                raw = result.get("raw") if isinstance(result, dict) else None
                parsed = result.get("parsed") if isinstance(result, dict) else None
                error = result.get("parsing_error") if isinstance(result, dict) else None
                if isinstance(error, BaseException) and is_length_error(error):
                    raise ReplyTooLongError(str(error)) from error
                if not isinstance(raw, AIMessage):
                    raw = AIMessage(content="")
                if hit_length_limit(raw):
                    raise ReplyTooLongError(f"{run_name}: the reply hit its token limit", raw)
                return raw, parsed if isinstance(parsed, schema) else None
        reply = await self._model(max_tokens).ainvoke(list(messages), config=config)
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=message_text(reply.content))
        if hit_length_limit(reply):
            raise ReplyTooLongError(f"{run_name}: the reply hit its token limit", reply)
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
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        schema: type[T],
        stats: CallStats,
        max_tokens: int | None,
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
                        try:
                            reply, parsed = await asyncio.wait_for(
                                self._invoke_once(run_name, messages, schema, max_tokens),
                                timeout=self.settings.timeout_seconds,
                            )
                        except ReplyTooLongError as cut:
                            # A cut reply's tokens were spent all the same.
                            if cut.reply is not None:
                                self._count(stats, messages, cut.reply)
                            raise
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
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        schema: type[T],
        stats: CallStats,
        *,
        max_tokens: int | None = None,
    ) -> T | None:
        """Make one learner call and return the parsed reply, or None if unusable.

        ``max_tokens`` bounds the reply where the model takes a limit
        (``bounded_model``). A reply that cannot be parsed gets one repair
        request; a reply cut at its token limit (``finish_reason == "length"``,
        or openai's ``LengthFinishReasonError``) is never retried as it was: it
        gets one request for a shorter reply. If the second reply is unusable
        too, the call counts as unparsed (or truncated) and None is returned.
        An LLM that keeps raising (or timing out) raises ``LLMCallError`` after
        the retries; a spent ``LearnerBudget`` raises ``BudgetExceededError``.
        """
        try:
            reply, parsed = await self._attempt(run_name, messages, schema, stats, max_tokens)
        except ReplyTooLongError:
            stats.truncated[run_name] += 1
            logger.info("%s: reply cut at its token limit; asking for a shorter one", run_name)
            return await self._repair(
                run_name, messages, SHORTER_REQUEST, schema, stats, max_tokens
            )
        if parsed is not None:
            return parsed
        text = message_text(reply.content)
        try:
            return parse_reply(text, schema)
        except ReplyParseError as first:
            error = str(first).splitlines()[0][:300]
        repair = [*messages, AIMessage(content=text)]
        return await self._repair(
            run_name, repair, REPAIR_REQUEST.format(error=error), schema, stats, max_tokens
        )

    async def _repair(
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        request: str,
        schema: type[T],
        stats: CallStats,
        max_tokens: int | None,
    ) -> T | None:
        """The one repair request of a call: its parsed reply, or None (counted)."""
        asked = [*messages, HumanMessage(request)]
        try:
            reply, parsed = await self._attempt(run_name, asked, schema, stats, max_tokens)
        except ReplyTooLongError:
            stats.truncated[run_name] += 1
            stats.unparsed[run_name] += 1
            logger.info("%s: repair reply cut at its token limit too; skipped", run_name)
            return None
        if parsed is not None:
            return parsed
        try:
            return parse_reply(message_text(reply.content), schema)
        except ReplyParseError:
            stats.unparsed[run_name] += 1
            logger.info("%s: reply still unparsable after one repair; skipped", run_name)
            return None
