"""``LocalChatOpenAI``: ``ChatOpenAI`` tuned for a small model on the llama.cpp server.

One behaviour differs from ``ChatOpenAI``: ``with_structured_output`` (method
``"json_schema"``, the default) sends the schema as llama.cpp's own
``json_schema`` request field instead of OpenAI's ``response_format``. The
server constrains decoding to the schema either way, but ``response_format``
routes the reply through the OpenAI SDK's ``parse()``, which *raises* when the
reply hit ``max_tokens`` (``LengthFinishReasonError``) or fails validation: a
truncated reply would become an exception, retried with the same prompt until
the call fails. Here the reply always comes back, and a bad or truncated one is
a parsing error (``include_raw=True`` returns it with the raw message), so a
caller can repair it.

The schema sent to the server is made strict (every property required, no
extra properties, ``maxLength`` on strings) so a small model cannot wander;
the reply is validated against the caller's original, lenient schema.

Tool calls: the Qwen2.5-Coder models often write a call as JSON text
(``{"name": ..., "arguments": {...}}``) instead of the native format llama.cpp
parses: bare, fenced, one per line, with doubled braces, with prose around it
(``tests/data/tool_replies.json`` holds real replies of both sizes). When tools
were bound and the reply has no native tool calls, ``recover`` finds the calls
to bound tools in its text and checks their arguments against the tools'
schemas; valid ones become real tool calls, invalid ones ``invalid_tool_calls``
(never executed), and so does a call an earlier turn of the conversation
already made (a small model repeats its last call until the recursion limit).
Non-streaming calls only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_json_schema
from langchain_openai import ChatOpenAI  # type: ignore[import-not-found, unused-ignore]
from pydantic import BaseModel, PrivateAttr, ValidationError

from langgraph_combee._core.toolcalls import (
    MAX_PROSE_CHARS,
    RecoveredCalls,
    bound_tools,
    message_text,
    recover,
    recover_tool_calls,
    recovered_message,
)

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "LocalChatOpenAI",
    "RecoveredCalls",
    "RunningServer",
    "parse_structured",
    "recover",
    "recover_tool_calls",
    "strict_schema",
]


class RunningServer(Protocol):
    """What a chat model needs of the local server that made it (``LocalModel`` is one).

    The server's side imports this module, not the other way round.
    """

    @property
    def base_url(self) -> str: ...

    @property
    def model_name(self) -> str: ...

    def chat(self, **chat_kwargs: Any) -> LocalChatOpenAI:
        """Another chat model on the same server."""
        ...

    def close(self) -> None: ...


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_NESTED = ("items", "prefixItems", "additionalProperties", "not", "anyOf", "oneOf", "allOf")
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def strict_schema(
    schema: Any, *, max_string_length: int | None, max_array_length: int | None = None
) -> Any:
    """A copy of a JSON schema with every object closed and every string and array bounded.

    Objects with ``properties`` get all of them ``required`` and
    ``additionalProperties: false``; strings without a ``maxLength`` get
    ``max_string_length`` and arrays without ``maxItems`` get ``max_array_length``
    (each when not None). Everything else is copied as is.
    """

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key in _NESTED:
                out[key] = walk(value)
            else:
                out[key] = value
        if isinstance(out.get("properties"), dict):
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        types = out.get("type")
        types = types if isinstance(types, list) else [types]
        if "string" in types and max_string_length is not None:
            out.setdefault("maxLength", max_string_length)
        if "array" in types and max_array_length is not None:
            out.setdefault("maxItems", max_array_length)
        return out

    return walk(schema)


def _unfence(text: str) -> str:
    text = text.strip()
    if match := _FENCE.match(text):
        return match.group(1).strip()
    return text


def parse_structured(message: BaseMessage, *, schema: Any) -> Any:
    """Parse a structured reply: strip a code fence, load JSON, validate if pydantic.

    Raises:
        OutputParserException: The text is not JSON, or does not fit ``schema``.
    """
    text = _unfence(message_text(message))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OutputParserException(
            f"reply is not valid JSON ({exc}); finish_reason="
            f"{message.response_metadata.get('finish_reason')!r}",
            llm_output=text,
        ) from exc
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            raise OutputParserException(
                f"reply does not fit {schema.__name__}: {exc}", llm_output=text
            ) from exc
    return data


# ---- tool calls written as text (``_core.toolcalls``) ------------------------------------


def _with_recovered_tool_calls(
    result: ChatResult, kwargs: Mapping[str, Any], messages: Sequence[BaseMessage] = ()
) -> ChatResult:
    tools = bound_tools(kwargs)
    if not tools:
        return result
    generations = []
    for generation in result.generations:
        message = recovered_message(generation.message, tools, messages, max_prose=MAX_PROSE_CHARS)
        if message is not generation.message:
            generation = ChatGeneration(message=message, generation_info=generation.generation_info)
        generations.append(generation)
    return ChatResult(generations=generations, llm_output=result.llm_output)


def _json_schema_of(schema: Any) -> dict[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, Mapping) and "json_schema" in schema:  # OpenAI response_format
        inner = schema["json_schema"]
        return dict(inner.get("schema", inner))
    if isinstance(schema, Mapping) and "type" in schema and "name" not in schema:
        return dict(schema)
    return dict(convert_to_json_schema(schema))


class LocalChatOpenAI(ChatOpenAI):  # type: ignore[misc, unused-ignore]
    """A ``ChatOpenAI`` for the local llama.cpp server (see ``local_chat_model``).

    Closing it (``close()`` or ``with``) stops the server it was created with.

    Attributes:
        max_string_length: ``maxLength`` added to every string of a structured-output
            schema sent to the server (None: no bound). Small models can loop inside
            a string; a bound plus a generous ``max_tokens`` ends that early.
        max_array_length: ``maxItems`` added to every array of such a schema (None: no
            bound), against a small model repeating list items.
    """

    max_string_length: int | None = 400
    max_array_length: int | None = 16

    _local_model: RunningServer | None = PrivateAttr(default=None)

    def with_structured_output(  # type: ignore[override, unused-ignore]
        self,
        schema: Any = None,
        *,
        method: Literal["function_calling", "json_mode", "json_schema"] = "json_schema",
        include_raw: bool = False,
        strict: bool | None = None,
        tools: list[Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, Any]:
        """Structured output constrained by the server, parsed without raising on bad replies.

        With ``method="json_schema"`` (default) and no ``tools``, the schema is
        enforced by llama.cpp's grammar sampler and the reply parsed by
        ``parse_structured``; other methods behave as in ``ChatOpenAI``. With
        ``include_raw=True`` the result is ``{"raw", "parsed", "parsing_error"}``.
        """
        if method != "json_schema" or schema is None or tools:
            result: Runnable[Any, Any] = super().with_structured_output(
                schema,
                method=method,
                include_raw=include_raw,
                strict=strict,
                tools=tools,
                **kwargs,
            )
            return result
        constrained = strict_schema(
            _json_schema_of(schema),
            max_string_length=self.max_string_length,
            max_array_length=self.max_array_length,
        )
        extra_body = {**(self.extra_body or {}), "json_schema": constrained}
        llm: Runnable[Any, Any] = self.bind(
            extra_body=extra_body,
            ls_structured_output_format={
                "kwargs": {"method": method, "strict": strict},
                "schema": constrained,
            },
            **kwargs,
        )
        parser: Callable[[BaseMessage], Any] = partial(parse_structured, schema=schema)
        if not include_raw:
            return llm | RunnableLambda(parser)
        with_parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | RunnableLambda(parser), parsing_error=lambda _: None
        )
        without = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | with_parsed.with_fallbacks(
            [without], exception_key="parsing_error"
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result: ChatResult = super()._generate(messages, stop, run_manager, **kwargs)
        return _with_recovered_tool_calls(result, kwargs, messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result: ChatResult = await super()._agenerate(messages, stop, run_manager, **kwargs)
        return _with_recovered_tool_calls(result, kwargs, messages)

    @property
    def local_model(self) -> RunningServer | None:
        """The running local model this chat model talks to, if it was made by one."""
        return self._local_model

    def close(self) -> None:
        """Stop the local server this model was created with (idempotent)."""
        if self._local_model is not None:
            self._local_model.close()

    def __enter__(self) -> LocalChatOpenAI:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
