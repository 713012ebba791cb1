"""Chat-model test doubles that reply from a script or from a function.

Both are real LangChain ``BaseChatModel`` subclasses, so they run through the
usual callback and tracing machinery, support ``bind_tools`` and
``with_structured_output``, and need no network.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from langgraph_combee.testing._base import (
    RecordingChatModel,
    coerce_reply,
    run_awaitable_sync,
)

__all__ = [
    "FunctionChatModel",
    "ReplyFunction",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "ScriptedReply",
]

ReplyFunction = Callable[[list[BaseMessage]], Any]
"""``(messages) -> str | AIMessage``, or an ``async def`` returning one of those."""

ScriptedReply = str | AIMessage | BaseException | type[BaseException] | ReplyFunction
"""One entry of a :class:`ScriptedChatModel` script."""

_ALLOWED_REPLIES = (
    "a str, an AIMessage, an exception instance or class, or a callable (messages) -> "
    "str | AIMessage"
)


class ScriptExhaustedError(AssertionError):
    """A :class:`ScriptedChatModel` was called more times than it had replies.

    Attributes:
        scripted: How many replies were scripted.
        call: The 1-based number of the call that found no reply.
    """

    def __init__(self, scripted: int, call: int) -> None:
        self.scripted = scripted
        self.call = call
        super().__init__(
            f"ScriptedChatModel ran out of replies: {scripted} "
            f"{'reply was' if scripted == 1 else 'replies were'} scripted and call #{call} "
            "has none left (script more replies or pass cycle=True)"
        )


def _check_reply(index: int, reply: object) -> None:
    if isinstance(reply, (str, AIMessage, BaseException)):
        return
    if isinstance(reply, type) and issubclass(reply, BaseException):
        return
    if isinstance(reply, BaseMessage) or not callable(reply):
        kind = type(reply).__name__
        msg = f"replies[{index}]={reply!r} ({kind}) is not allowed: {_ALLOWED_REPLIES}"
        raise TypeError(msg)


class ScriptedChatModel(RecordingChatModel):
    """A chat model that returns canned replies in order.

    Each entry of ``replies`` answers one call: a ``str`` becomes ``AIMessage(content=...)``;
    an ``AIMessage`` is returned as a copy (give it ``tool_calls`` to script a tool call);
    an exception instance or class is raised for that call; a callable is called with the
    prompt messages and returns a ``str`` or ``AIMessage`` (it may be ``async def``).
    Running out of replies raises :class:`ScriptExhaustedError`, unless ``cycle=True``.
    Safe to call concurrently from threads and asyncio tasks.

    Example:
        ```python
        model = ScriptedChatModel(replies=["Paris", ValueError("rate limited"), "Rome"])
        model.invoke("Capital of France?").content  # "Paris"
        model.invoke("Capital of Spain?")  # raises ValueError("rate limited")
        model.calls  # 2; model.prompts[0][0].content == "Capital of France?"
        ```

    Attributes:
        replies: The script, in call order.
        cycle: Start the script over when it runs out instead of raising.
    """

    replies: list[Any]
    cycle: bool = False
    model_name: str = "scripted-chat-model"

    _index: int = PrivateAttr(default=0)

    def __init__(self, replies: Sequence[ScriptedReply] | None = None, /, **kwargs: Any) -> None:
        """Create the model; ``replies`` may be passed positionally or by keyword.

        Raises:
            TypeError: A reply is of an unsupported type, or ``replies`` was given twice.
        """
        if replies is not None:
            if "replies" in kwargs:
                msg = "ScriptedChatModel got replies both positionally and by keyword"
                raise TypeError(msg)
            kwargs["replies"] = list(replies)
        super().__init__(**kwargs)
        for index, reply in enumerate(self.replies):
            _check_reply(index, reply)

    @property
    def _llm_type(self) -> str:
        return "combee-scripted-chat-model"

    @property
    def remaining(self) -> int:
        """Replies left before the script runs out (in the current round if cycling)."""
        with self._lock:
            total = len(self.replies)
            used = self._index % total if self.cycle and total else self._index
            return total - used

    def reset(self) -> None:
        """Rewind the script and clear the prompt log and call count."""
        with self._lock:
            self._reset_records_locked()
            self._index = 0

    def _take(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> tuple[int, Any]:
        """Record the call and claim the next script entry (under the lock)."""
        with self._lock:
            call = self._record_call_locked(messages, kwargs)
            total = len(self.replies)
            if self._index >= total and not (self.cycle and total):
                raise ScriptExhaustedError(total, call)
            position = self._index % total
            self._index += 1
        return position, self.replies[position]

    def _produce(self, position: int, entry: Any, messages: list[BaseMessage]) -> Any:
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, type) and issubclass(entry, BaseException):
            raise entry(f"scripted failure (replies[{position}])")
        if isinstance(entry, (str, AIMessage)):
            return entry
        return entry(list(messages))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        position, entry = self._take(messages, kwargs)
        value = self._produce(position, entry, messages)
        if inspect.isawaitable(value):
            value = run_awaitable_sync(value)
        return self._result(messages, coerce_reply(value, source=f"replies[{position}]"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        position, entry = self._take(messages, kwargs)
        value = self._produce(position, entry, messages)
        if inspect.isawaitable(value):
            value = await value
        return self._result(messages, coerce_reply(value, source=f"replies[{position}]"))


class FunctionChatModel(RecordingChatModel):
    """A chat model that replies with ``fn(messages)``.

    ``fn`` receives the prompt as a list of messages and returns a ``str`` or an
    ``AIMessage``; it may be ``async def``. Under ``ainvoke`` an async ``fn`` is awaited
    on the caller's loop; under ``invoke`` it runs with ``asyncio.run`` (in a fresh
    thread if an event loop is already running in the calling thread).

    Example:
        ```python
        def echo(messages: list[BaseMessage]) -> str:
            return f"you said: {messages[-1].text}"

        model = FunctionChatModel(echo)
        model.invoke("hi").content  # "you said: hi"
        ```

    Attributes:
        fn: The reply function.
    """

    fn: ReplyFunction
    model_name: str = "function-chat-model"

    def __init__(self, fn: ReplyFunction | None = None, /, **kwargs: Any) -> None:
        """Create the model; ``fn`` may be passed positionally or by keyword.

        Raises:
            TypeError: ``fn`` is not callable, or was given twice.
        """
        if fn is not None:
            if "fn" in kwargs:
                msg = "FunctionChatModel got fn both positionally and by keyword"
                raise TypeError(msg)
            kwargs["fn"] = fn
        given = kwargs.get("fn")
        if "fn" in kwargs and not callable(given):
            msg = f"fn={given!r} is not allowed: expected a callable (messages) -> str | AIMessage"
            raise TypeError(msg)
        super().__init__(**kwargs)

    @property
    def _llm_type(self) -> str:
        return "combee-function-chat-model"

    def reset(self) -> None:
        """Clear the prompt log and call count."""
        with self._lock:
            self._reset_records_locked()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._record_call(messages, kwargs)
        value = self.fn(list(messages))
        if inspect.isawaitable(value):
            value = run_awaitable_sync(value)
        return self._result(messages, coerce_reply(value, source="fn"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._record_call(messages, kwargs)
        value = self.fn(list(messages))
        if inspect.isawaitable(value):
            value = await value
        return self._result(messages, coerce_reply(value, source="fn"))
