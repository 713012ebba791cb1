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
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage, InvalidToolCall
from langchain_core.messages.tool import ToolCall, invalid_tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_json_schema
from langchain_openai import ChatOpenAI  # type: ignore[import-not-found, unused-ignore]
from pydantic import BaseModel, PrivateAttr, ValidationError

if TYPE_CHECKING:
    from types import TracebackType

    from langgraph_combee.local._model import LocalModel

__all__ = [
    "LocalChatOpenAI",
    "RecoveredCalls",
    "parse_structured",
    "recover",
    "recover_tool_calls",
    "strict_schema",
]

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


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


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
    text = _unfence(_text(message))
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


# ---- tool calls written as text --------------------------------------------------------------

_DECODER = json.JSONDecoder()
_MAX_SCAN_CHARS = 100_000
"""Longest reply text searched for calls (each failed decode rescans: keep it bounded)."""
_DOUBLED_OPEN = re.compile(r"\{\s*\{")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_CALL_KEYS = frozenset({"name", "type", "id", *_ARGUMENT_KEYS})
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class RecoveredCalls:
    """What ``recover`` found in a reply's text.

    Attributes:
        calls: Calls to bound tools whose arguments fit the tool's schema.
        invalid: Calls to bound tools whose arguments do not (never executed;
            a ``create_agent`` trace shows them as tool errors).
    """

    calls: tuple[ToolCall, ...] = ()
    invalid: tuple[InvalidToolCall, ...] = ()


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array in ``text``, left to right, skipping what is not JSON.

    Scanning decodes at each brace or bracket and jumps past what it decoded,
    so prose, code fences, ``<tool_call>`` tags, a doubled opening brace and
    trailing garbage are all stepped over; the complete calls of a reply cut
    off by a length limit are kept.
    """
    values = []
    index = 0
    text = text[:_MAX_SCAN_CHARS]
    while index < len(text):
        if text[index] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, index)
            except ValueError:
                index += 1
                continue
            values.append(value)
            index = end
        else:
            index += 1
    return values


def _call_items(value: Any) -> list[dict[str, Any]]:
    """The call-shaped objects in one decoded value (a call, a list, ``tool_calls``...)."""
    if isinstance(value, list):
        return [item for element in value for item in _call_items(element)]
    if not isinstance(value, dict):
        return []
    for key in ("tool_calls", "calls"):
        if isinstance(value.get(key), list):
            return _call_items(value[key])
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {...}}
        return _call_items(value["function"])
    if isinstance(value.get("name"), str):
        return [value]
    return []


def _coerce(value: Any, schema: Mapping[str, Any]) -> tuple[bool, Any]:
    """``(fits, value)``: ``value`` checked against one property schema, scalars coerced.

    Small models write ``"3"`` for an integer and ``3`` for a string; those are
    converted. Anything the schema does not type is accepted as is.
    """
    wanted = schema.get("type")
    types = wanted if isinstance(wanted, list) else [wanted] if isinstance(wanted, str) else []
    known = [t for t in types if t in _JSON_TYPES]
    if known and not any(
        isinstance(value, _JSON_TYPES[t])
        and not (t in ("integer", "number") and isinstance(value, bool))
        for t in known
    ):
        for kind in known:
            if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
                value = str(value)
                break
            if kind in ("integer", "number") and isinstance(value, str):
                try:
                    number = float(value.strip())
                except ValueError:
                    continue
                if kind == "number" or number.is_integer():
                    value = int(number) if number.is_integer() else number
                    break
        else:
            return False, value
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return False, value
    return True, value


def _validate(args: dict[str, Any], schema: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """``(args, error)``: arguments checked against a tool's parameter schema.

    Unknown arguments are dropped (a function cannot take them); a missing
    required one or a value of the wrong type is an error. No schema: as is.
    """
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return args, ""
    properties: Mapping[str, Any] = schema["properties"]
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key not in properties:
            continue
        sub = properties[key]
        fits, coerced = _coerce(value, sub if isinstance(sub, Mapping) else {})
        if not fits:
            return args, f"argument {key!r}={value!r} does not fit {dict(sub)!r}"
        out[key] = coerced
    missing = [key for key in schema.get("required") or () if key not in out]
    if missing:
        return args, f"missing required argument(s) {missing}"
    return out, ""


def _arguments(item: Mapping[str, Any]) -> Any:
    for key in _ARGUMENT_KEYS:
        if key in item:
            args = item[key]
            if isinstance(args, str):  # arguments given as a JSON string
                values = _json_values(_DOUBLED_OPEN.sub("{", args))
                return values[0] if values else args
            return args
    # {"name": "t", "order_id": "..."}: the arguments written beside the name
    return {key: value for key, value in item.items() if key not in _CALL_KEYS}


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _recover_from(values: list[Any], tools: Mapping[str, Any]) -> RecoveredCalls:
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    seen: set[str] = set()
    for item in (item for value in values for item in _call_items(value)):
        name = item["name"]
        if name not in tools:
            continue  # not a call to this agent's tools (an example, another system's name)
        args = _arguments(item)
        error = "" if isinstance(args, dict) else f"arguments {args!r} are not an object"
        if not error:
            args, error = _validate(args, tools[name])
        text = json.dumps(args, sort_keys=True, default=str)
        if error:
            invalid.append(invalid_tool_call(name=name, args=text, id=_new_call_id(), error=error))
            continue
        if f"{name}:{text}" in seen:  # the same call written twice in one reply runs once
            continue
        seen.add(f"{name}:{text}")
        calls.append(ToolCall(name=name, args=args, id=_new_call_id(), type="tool_call"))
    return RecoveredCalls(calls=tuple(calls), invalid=tuple(invalid))


def recover(
    text: str, tools: Sequence[str] | Mapping[str, Any], *, cut_off: bool = False
) -> RecoveredCalls:
    """The tool calls a model wrote as text instead of the native format.

    Finds every JSON call in the reply, wherever it stands: bare, in a code
    fence, in ``<tool_call>`` tags, several in a row or in a list, with prose
    around it, with doubled braces (``{{"name": ...}}}}``) or trailing garbage.
    A call is ``{"name": <tool>, "arguments": {...}}`` (``"parameters"``,
    ``"args"``, a JSON string of arguments, the OpenAI ``{"function": ...}``
    shape, or the arguments beside the name are accepted too). Only calls
    naming a bound tool count; prose that merely names a tool is never a call.

    Args:
        text: The reply's text.
        tools: The bound tools' names, or each name's JSON schema of parameters
            (then arguments are checked: unknown ones dropped, simple types
            coerced, a call missing a required argument is ``invalid``).
        cut_off: The reply hit the length limit. Only its first call is kept;
            the others are ``invalid`` and never run: a reply cut off after
            several calls is a run-on (after a tool result the 0.5B lists a
            call to every tool until the limit), not a plan.
    """
    table: Mapping[str, Any] = tools if isinstance(tools, Mapping) else dict.fromkeys(tools)
    if not table or "{" not in text:
        return RecoveredCalls()
    found = _recover_from(_json_values(text), table)
    if not (found.calls or found.invalid) and _DOUBLED_OPEN.search(text):
        # A doubled brace inside the arguments too: read again with every "{{" made "{".
        found = _recover_from(_json_values(_DOUBLED_OPEN.sub("{", text)), table)
    if not cut_off or len(found.calls) <= 1:
        return found
    dropped = _not_run(
        found.calls[1:], "the reply was cut off by the length limit after its first call"
    )
    return RecoveredCalls(calls=found.calls[:1], invalid=found.invalid + dropped)


def _not_run(calls: Iterable[ToolCall], why: str) -> tuple[InvalidToolCall, ...]:
    """``calls`` as invalid calls that never run, each saying ``why``."""
    return tuple(
        invalid_tool_call(
            name=call["name"],
            args=json.dumps(call["args"], sort_keys=True, default=str),
            id=call["id"],
            error=f"not run: {why}",
        )
        for call in calls
    )


def recover_tool_calls(text: str, tools: Sequence[str] | Mapping[str, Any]) -> list[ToolCall]:
    """The valid tool calls written as text in ``text`` (see ``recover``)."""
    return list(recover(text, tools).calls)


def _bound_tools(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Each bound tool's name and parameter schema, from the request's ``tools``."""
    table: dict[str, Any] = {}
    for tool in kwargs.get("tools") or []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            table[function["name"]] = function.get("parameters")
    return table


def _call_key(name: str, args: Any) -> str:
    return f"{name}:{json.dumps(args, sort_keys=True, default=str)}"


def _made_before(messages: Sequence[BaseMessage]) -> set[str]:
    """The calls earlier turns of the conversation made (name and arguments)."""
    return {
        _call_key(call["name"], call.get("args") or {})
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }


def _without_repeats(found: RecoveredCalls, earlier: set[str]) -> RecoveredCalls:
    """``found`` with the calls an earlier turn already made moved to ``invalid``.

    A small model that got a tool's result often writes the same call again,
    turn after turn, until the agent's recursion limit: a repeated text call is
    that loop, not a new request, so it never runs and the reply ends the turn.
    """
    repeats = [c for c in found.calls if _call_key(c["name"], c["args"]) in earlier]
    if not repeats:
        return found
    dropped = _not_run(repeats, "the same call was already made in this conversation")
    calls = tuple(c for c in found.calls if c not in repeats)
    return RecoveredCalls(calls=calls, invalid=found.invalid + dropped)


def _with_recovered_tool_calls(
    result: ChatResult, kwargs: Mapping[str, Any], messages: Sequence[BaseMessage] = ()
) -> ChatResult:
    tools = _bound_tools(kwargs)
    if not tools:
        return result
    earlier = _made_before(messages)
    generations = []
    for generation in result.generations:
        message = generation.message
        if (
            isinstance(message, AIMessage)
            and not message.tool_calls
            and not message.invalid_tool_calls
        ):
            cut_off = message.response_metadata.get("finish_reason") == "length"
            found = _without_repeats(recover(_text(message), tools, cut_off=cut_off), earlier)
            update: dict[str, Any] = {}
            if found.calls:
                update = {"content": "", "tool_calls": list(found.calls)}
            if found.invalid:
                update["invalid_tool_calls"] = list(found.invalid)
            if update:
                message = message.model_copy(update=update)
                generation = ChatGeneration(
                    message=message, generation_info=generation.generation_info
                )
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

    _local_model: LocalModel | None = PrivateAttr(default=None)

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
    def local_model(self) -> LocalModel | None:
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
