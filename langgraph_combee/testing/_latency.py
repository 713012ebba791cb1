"""A chat-model wrapper that simulates token-dependent latency and counts concurrency."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from langgraph_combee._core.tokens import estimate_tokens
from langgraph_combee.testing._base import RecordingChatModel, prompt_text

__all__ = ["LatencyChatModel"]


def _first_message(result: ChatResult) -> AIMessage:
    """The first generation's message, as an ``AIMessage`` this wrapper owns."""
    generation = result.generations[0]
    message = generation.message if isinstance(generation, ChatGeneration) else None
    if isinstance(message, AIMessage):
        return message.model_copy()
    msg = f"inner model returned {message!r}; expected an AIMessage"
    raise TypeError(msg)


_LATENCY_FIELDS = ("base_seconds", "seconds_per_input_token", "seconds_per_output_token")


class LatencyChatModel(RecordingChatModel):
    """Wraps a chat model and waits a simulated, token-dependent latency on every call.

    After ``inner`` answers, the call waits
    ``time_scale * (base_seconds + in_tokens * seconds_per_input_token
    + out_tokens * seconds_per_output_token)``, with token counts from
    ``estimate_tokens`` over the prompt's concatenated text and the reply's text. The
    async path waits with ``asyncio.sleep`` (the loop keeps running); the sync path
    with ``time.sleep``. A call whose ``inner`` raises is counted but does not wait.

    ``inner`` is driven through its ``_generate`` / ``_agenerate`` with this model's run
    manager, so each call is traced once, as this model's run; ``inner``'s own callbacks,
    cache and rate limiter are bypassed. Call kwargs (bound tools included) are
    forwarded to ``inner``.

    Example:
        ```python
        model = LatencyChatModel(ScriptedChatModel(replies=["ok"], cycle=True), time_scale=0.01)
        await asyncio.gather(*(model.ainvoke("hi") for _ in range(10)))
        model.calls, model.max_concurrency  # (10, 10)
        ```

    Attributes:
        inner: The model that produces the replies.
        base_seconds: Fixed latency per call.
        seconds_per_input_token: Added latency per prompt token.
        seconds_per_output_token: Added latency per reply token.
        time_scale: Multiplies the whole latency (``0.01`` makes tests fast).
    """

    inner: BaseChatModel
    base_seconds: float = 0.05
    seconds_per_input_token: float = 0.0
    seconds_per_output_token: float = 0.0
    time_scale: float = 1.0
    model_name: str = "latency-chat-model"

    _input_tokens: int = PrivateAttr(default=0)
    _output_tokens: int = PrivateAttr(default=0)
    _simulated_seconds: float = PrivateAttr(default=0.0)
    _in_flight: int = PrivateAttr(default=0)
    _max_concurrency: int = PrivateAttr(default=0)

    def __init__(self, inner: BaseChatModel | None = None, /, **kwargs: Any) -> None:
        """Create the wrapper; ``inner`` may be passed positionally or by keyword.

        Raises:
            TypeError: ``inner`` is not a ``BaseChatModel``, or was given twice.
            ValueError: A seconds setting or ``time_scale`` is negative or not finite.
        """
        if inner is not None:
            if "inner" in kwargs:
                msg = "LatencyChatModel got inner both positionally and by keyword"
                raise TypeError(msg)
            kwargs["inner"] = inner
        given = kwargs.get("inner")
        if "inner" in kwargs and not isinstance(given, BaseChatModel):
            msg = f"inner={given!r} is not allowed: expected a langchain BaseChatModel"
            raise TypeError(msg)
        super().__init__(**kwargs)
        for name in (*_LATENCY_FIELDS, "time_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                msg = f"{name}={value!r} is not allowed: expected a finite number >= 0"
                raise ValueError(msg)

    @property
    def _llm_type(self) -> str:
        return "combee-latency-chat-model"

    # ----------------------------------------------------------------- counters

    @property
    def input_tokens(self) -> int:
        """Estimated prompt tokens over all completed calls."""
        with self._lock:
            return self._input_tokens

    @property
    def output_tokens(self) -> int:
        """Estimated reply tokens over all completed calls."""
        with self._lock:
            return self._output_tokens

    @property
    def simulated_seconds(self) -> float:
        """Sum of the latencies waited (after ``time_scale``)."""
        with self._lock:
            return self._simulated_seconds

    @property
    def in_flight(self) -> int:
        """Calls currently in progress."""
        with self._lock:
            return self._in_flight

    @property
    def max_concurrency(self) -> int:
        """Peak number of calls in progress at once."""
        with self._lock:
            return self._max_concurrency

    def latency_for(self, input_tokens: int, output_tokens: int) -> float:
        """The latency, in seconds after ``time_scale``, of a call with these token counts."""
        return self.time_scale * (
            self.base_seconds
            + input_tokens * self.seconds_per_input_token
            + output_tokens * self.seconds_per_output_token
        )

    def reset_counters(self) -> None:
        """Zero the counters and clear the prompt log.

        ``in_flight`` keeps counting calls still running, and ``max_concurrency`` restarts
        from it.
        """
        with self._lock:
            self._reset_records_locked()
            self._input_tokens = 0
            self._output_tokens = 0
            self._simulated_seconds = 0.0
            self._max_concurrency = self._in_flight

    def reset(self) -> None:
        """Same as :meth:`reset_counters`."""
        self.reset_counters()

    def _enter(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> None:
        with self._lock:
            self._record_call_locked(messages, kwargs)
            self._in_flight += 1
            self._max_concurrency = max(self._max_concurrency, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _account(self, messages: list[BaseMessage], reply: AIMessage) -> float:
        input_tokens = estimate_tokens(prompt_text(messages))
        output_tokens = estimate_tokens(str(reply.text))
        latency = self.latency_for(input_tokens, output_tokens)
        with self._lock:
            self._input_tokens += input_tokens
            self._output_tokens += output_tokens
            self._simulated_seconds += latency
        return latency

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._enter(messages, kwargs)
        try:
            inner_result = self.inner._generate(
                messages, stop=stop, run_manager=run_manager, **kwargs
            )
            reply = _first_message(inner_result)
            latency = self._account(messages, reply)
            if latency > 0:
                time.sleep(latency)
        finally:
            self._leave()
        result = self._result(messages, reply)
        result.llm_output = inner_result.llm_output
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._enter(messages, kwargs)
        try:
            inner_result = await self.inner._agenerate(
                messages, stop=stop, run_manager=run_manager, **kwargs
            )
            reply = _first_message(inner_result)
            latency = self._account(messages, reply)
            if latency > 0:
                await asyncio.sleep(latency)
        finally:
            self._leave()
        result = self._result(messages, reply)
        result.llm_output = inner_result.llm_output
        return result
