"""Shared machinery for the chat-model test doubles.

Holds the recording base class (prompt log, call count, tool binding, structured
output) and the helpers the concrete doubles in :mod:`._models` share: reply
coercion, usage estimates, running an awaitable from sync code, and the JSON
extraction used by ``with_structured_output``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

from langchain_core.caches import BaseCache
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError
from typing_extensions import is_typeddict

from langgraph_combee._core.tokens import estimate_tokens

__all__ = [
    "RecordingChatModel",
    "coerce_reply",
    "parse_structured_reply",
    "prompt_text",
    "run_awaitable_sync",
]

_T = TypeVar("_T")

ToolLike = dict[str, Any] | type | Callable[..., Any] | BaseTool
"""Anything ``bind_tools`` accepts (what ``convert_to_openai_tool`` converts)."""


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """Concatenate (with no separator) the text content of ``messages``."""
    return "".join(str(message.text) for message in messages)


def coerce_reply(value: object, *, source: str) -> AIMessage:
    """Turn a ``str`` or ``AIMessage`` reply into a fresh ``AIMessage`` the caller owns.

    Args:
        value: The reply a script entry or reply function produced.
        source: Who produced it, for the error message.

    Raises:
        TypeError: ``value`` is neither a ``str`` nor an ``AIMessage``.
    """
    if isinstance(value, str):
        return AIMessage(content=value)
    if isinstance(value, AIMessage):
        return value.model_copy(deep=True)
    msg = f"{source} returned {value!r} ({type(value).__name__}); expected a str or an AIMessage"
    raise TypeError(msg)


def run_awaitable_sync(awaitable: Awaitable[_T]) -> _T:
    """Run ``awaitable`` to completion from synchronous code.

    With no event loop running in this thread it uses :func:`asyncio.run`; when a loop
    is running (a sync ``invoke`` made from async code) it runs ``asyncio.run`` in a
    fresh worker thread, carrying the caller's context variables, and waits for it.
    """

    async def _await() -> _T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="combee-testing") as pool:
        return pool.submit(context.run, asyncio.run, _await()).result()


# --------------------------------------------------------------------------- structured output

_FENCE_RE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def _first_json_object(text: str) -> dict[str, Any] | None:
    """Return the first JSON object in ``text``: fenced blocks first, then the raw text."""
    candidates = [match.group(1) for match in _FENCE_RE.finditer(text)]
    candidates.append(text)
    for candidate in candidates:
        stripped = candidate.strip()
        try:
            whole = json.loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(whole, dict):
                return whole
        # Only the object that opens at the first brace counts: an inner object of a
        # truncated reply must not pass for the whole answer (a real structured-output
        # model would fail there, and callers must see that failure).
        brace = stripped.find("{")
        if brace == -1:
            continue
        try:
            found, _end = _DECODER.raw_decode(stripped, brace)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _check_schema(schema: object) -> None:
    if isinstance(schema, dict):
        return
    if isinstance(schema, type) and (issubclass(schema, BaseModel) or is_typeddict(schema)):
        return
    msg = (
        f"with_structured_output got schema={schema!r}; expected a pydantic BaseModel "
        "subclass, a TypedDict class or a dict JSON schema"
    )
    raise TypeError(msg)


def parse_structured_reply(
    message: AIMessage, schema: dict[str, Any] | type
) -> dict[str, Any] | BaseModel:
    """Parse a reply into ``schema`` the way the doubles' ``with_structured_output`` does.

    The text content is searched for a JSON object: the contents of each ```` ``` ````
    fence (any language tag) are tried first, then the whole text; within each, the text
    as a whole, then the object opening at the first ``{`` (so prose around the JSON is
    ignored, but a truncated object is an error, as with a real model). If the text
    holds no object and the message has ``tool_calls``, the first tool call's ``args``
    are used instead.

    Args:
        message: The model's reply.
        schema: A pydantic ``BaseModel`` subclass (the result is an instance), or a
            TypedDict class or dict JSON schema (the result is the decoded ``dict``,
            not validated).

    Raises:
        OutputParserException: No JSON object was found, or it failed pydantic validation.
    """
    text = str(message.text)
    data = _first_json_object(text)
    if data is None and message.tool_calls:
        data = dict(message.tool_calls[0]["args"])
    if data is None:
        msg = f"No JSON object found in the model reply: {text[:200]!r}"
        raise OutputParserException(msg, llm_output=text)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            msg = f"Model reply does not match {schema.__name__}: {exc}"
            raise OutputParserException(msg, llm_output=text) from exc
    return data


# --------------------------------------------------------------------------- base class


class _Lock:
    """A ``threading.Lock`` that copies and pickles as a fresh, unlocked lock.

    Lets a double be deep-copied or pickled (as LangChain and LangGraph sometimes do
    with models) without ``cannot pickle '_thread.lock'`` errors.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def __copy__(self) -> _Lock:
        return _Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Lock:
        return _Lock()

    def __reduce__(self) -> tuple[type[_Lock], tuple[()]]:
        return (_Lock, ())


class RecordingChatModel(BaseChatModel):
    """Recording base of the test doubles: prompts, call count, tools, structured output.

    Not part of the public API; subclass one of the concrete doubles instead.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    model_name: str = "test-chat-model"
    """Reported as ``response_metadata["model_name"]`` on every reply."""

    cache: BaseCache | bool | None = Field(default=False, exclude=True)
    """Off by default, so a global LLM cache never replays a scripted reply."""

    max_prompts: int | None = Field(default=None, ge=0)
    """Most prompts kept in ``prompts`` (the most recent); None keeps all. Long runs
    (soaks, benchmarks) set it so the log does not grow with every call."""

    _lock: _Lock = PrivateAttr(default_factory=_Lock)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)
    _bound_tools: list[str | dict[str, Any]] = PrivateAttr(default_factory=list)
    _last_tools: list[dict[str, Any]] | None = PrivateAttr(default=None)
    _structured_schemas: list[dict[str, Any] | type] = PrivateAttr(default_factory=list)

    # ----------------------------------------------------------------- records

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Every prompt received, oldest first (a copy of the log)."""
        with self._lock:
            return [list(prompt) for prompt in self._prompts]

    @property
    def calls(self) -> int:
        """How many times the model was called (failed calls included)."""
        with self._lock:
            return self._calls

    @property
    def bound_tools(self) -> list[str | dict[str, Any]]:
        """Tool names (or tool dicts without a name) from the latest ``bind_tools`` call."""
        with self._lock:
            return list(self._bound_tools)

    @property
    def last_tools(self) -> list[dict[str, Any]] | None:
        """The OpenAI-format tools passed with the latest call (``None`` if none were)."""
        with self._lock:
            return None if self._last_tools is None else list(self._last_tools)

    @property
    def structured_schemas(self) -> list[dict[str, Any] | type]:
        """Every schema passed to ``with_structured_output``, oldest first."""
        with self._lock:
            return list(self._structured_schemas)

    def _record_call_locked(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> int:
        """Log one call; the caller holds ``self._lock``. Returns the 1-based call number."""
        self._prompts.append(list(messages))
        if self.max_prompts is not None and len(self._prompts) > self.max_prompts:
            del self._prompts[: len(self._prompts) - self.max_prompts]
        self._calls += 1
        tools = kwargs.get("tools")
        self._last_tools = list(tools) if tools is not None else None
        return self._calls

    def _record_call(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> int:
        with self._lock:
            return self._record_call_locked(messages, kwargs)

    def _reset_records_locked(self) -> None:
        self._prompts.clear()
        self._calls = 0
        self._last_tools = None

    # ----------------------------------------------------------------- results

    def _result(self, messages: list[BaseMessage], reply: AIMessage) -> ChatResult:
        """Fill in ``usage_metadata`` and ``model_name`` and wrap ``reply`` for LangChain."""
        if reply.usage_metadata is None:
            input_tokens = estimate_tokens(prompt_text(messages))
            output_tokens = estimate_tokens(str(reply.text))
            # cast: langchain-core marks the optional keys with typing.NotRequired, which
            # mypy does not know when checking for Python 3.10.
            reply.usage_metadata = cast(
                "UsageMetadata",
                {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
            )
        if "model_name" not in reply.response_metadata:
            reply.response_metadata = {**reply.response_metadata, "model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    # ----------------------------------------------------------------- tools

    def bind_tools(
        self,
        tools: Sequence[ToolLike],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` (and ``tool_choice``) to the model as call kwargs.

        The double does not act on the tools: its replies are whatever it was given (an
        ``AIMessage`` with ``tool_calls`` scripts a tool call). The tools are recorded in
        :attr:`bound_tools` at bind time and :attr:`last_tools` at call time.

        Returns:
            A runnable that calls this same model with ``tools=[...]`` bound.
        """
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        names: list[str | dict[str, Any]] = []
        for tool in formatted:
            function = tool.get("function")
            if isinstance(function, dict) and "name" in function:
                names.append(str(function["name"]))
            elif "name" in tool:
                names.append(str(tool["name"]))
            else:
                names.append(tool)
        with self._lock:
            self._bound_tools = names
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    # ----------------------------------------------------------------- structured output

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Return a runnable that calls the model and parses its reply into ``schema``.

        The model is called as a child run under the caller's config, so run names,
        tags and callbacks propagate. Parsing follows :func:`parse_structured_reply`
        (JSON in the reply's text, code fences and surrounding prose allowed).
        ``method`` and any other keyword (e.g. ``strict``) are accepted and ignored.

        Args:
            schema: A pydantic ``BaseModel`` subclass (parsed to an instance), or a
                TypedDict class or dict JSON schema (parsed to a ``dict``).
            include_raw: If true, return ``{"raw": AIMessage, "parsed": obj | None,
                "parsing_error": Exception | None}`` and never raise a parse error.
            method: Accepted for signature compatibility; recorded for tracing only.
            **kwargs: Accepted and ignored.

        Raises:
            TypeError: ``schema`` is not one of the supported kinds.
        """
        _check_schema(schema)
        with self._lock:
            self._structured_schemas.append(schema)
        model = self.bind(
            ls_structured_output_format={
                "kwargs": {"method": method or "json_schema"},
                "schema": schema,
            }
        )

        def parse(message: AIMessage) -> dict[str, Any] | BaseModel:
            return parse_structured_reply(message, schema)

        if not include_raw:
            return model | RunnableLambda(parse, name="parse_structured_output")

        def parse_with_raw(outputs: dict[str, Any]) -> dict[str, Any]:
            raw: AIMessage = outputs["raw"]
            try:
                parsed = parse_structured_reply(raw, schema)
            except OutputParserException as exc:
                return {"raw": raw, "parsed": None, "parsing_error": exc}
            return {"raw": raw, "parsed": parsed, "parsing_error": None}

        return RunnableMap(raw=model) | RunnableLambda(
            parse_with_raw, name="parse_structured_output"
        )
