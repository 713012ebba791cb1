"""Tool calls a model wrote as text instead of its API's native format, made real.

Small local models (the Qwen2.5-Coder models, and others served by llama.cpp,
Ollama or LM Studio) often write a call as JSON text
(``{"name": ..., "arguments": {...}}``) instead of the native format: bare,
fenced, one per line, with doubled braces, with prose around it
(``tests/data/tool_replies.json`` holds real replies). ``recover`` finds the
calls to bound tools in such text and checks their arguments against the
tools' schemas; ``recovered_message`` applies it to one reply. Both
``local.LocalChatOpenAI`` and Combee's middleware (for any chat model a user
brings) use them. Pure functions on LangChain message types; no I/O.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
import unicodedata
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    InvalidToolCall,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall, invalid_tool_call
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_combee._core.text import message_text as content_text

__all__ = [
    "MAX_PROSE_CHARS",
    "RecoveredCalls",
    "bound_tools",
    "made_before",
    "message_text",
    "recover",
    "recover_tool_calls",
    "recovered_message",
    "tool_table",
    "without_repeats",
]

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


_START = re.compile(r"[\[{]")
_MAX_DECODES = 2000
"""Most decode attempts per reply: a reply of braces alone must not cost seconds."""


def _json_spans(text: str) -> list[tuple[Any, int, int]]:
    """Every JSON object or array in ``text`` with its span, left to right.

    Scanning decodes at each brace or bracket and jumps past what it decoded,
    so prose, code fences, ``<tool_call>`` tags, a doubled opening brace and
    trailing garbage are all stepped over; the complete calls of a reply cut
    off by a length limit are kept. At most ``_MAX_DECODES`` attempts; nesting
    too deep to decode is skipped like any other text that is not JSON.
    """
    spans: list[tuple[Any, int, int]] = []
    text = text[:_MAX_SCAN_CHARS]
    index = 0
    attempts = 0
    while attempts < _MAX_DECODES:
        match = _START.search(text, index)
        if match is None:
            break
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            index = match.start() + 1
            continue
        spans.append((value, match.start(), end))
        index = end
    return spans


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array in ``text`` (``_json_spans`` without the spans)."""
    return [value for value, _, _ in _json_spans(text)]


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
                if not math.isfinite(number):
                    continue  # "nan", "Infinity", "1e400": no amount or count
                if kind == "number" or number.is_integer():
                    value = int(number) if number.is_integer() else number
                    break
        else:
            return False, value
    if isinstance(value, float) and not math.isfinite(value):
        return False, value  # 1e400 reads as inf: no amount or count
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
    if not table:
        return RecoveredCalls()
    found = _recover_from(_json_values(text), table) if "{" in text else RecoveredCalls()
    if not (found.calls or found.invalid) and _DOUBLED_OPEN.search(text):
        # A doubled brace inside the arguments too: read again with every "{{" made "{".
        found = _recover_from(_json_values(_DOUBLED_OPEN.sub("{", text)), table)
    if not (found.calls or found.invalid):
        # Calls written as Python (``open_ticket(queue="HW-7")``): seen on the 1.5B once
        # its learned rules stated calls that way.
        found = _recover_from([value for value, _, _ in python_calls(text, table)], table)
    if not cut_off or len(found.calls) <= 1:
        return found
    dropped = _not_run(
        found.calls[1:], "the reply was cut off by the length limit after its first call"
    )
    return RecoveredCalls(calls=found.calls[:1], invalid=found.invalid + dropped)


_MAX_CALL_CHARS = 2000
"""Longest call written as Python that is read (its arguments are literals)."""


def _closing(text: str, start: int) -> int | None:
    """The index after the parenthesis closing the one at ``start``; quotes respected."""
    depth, quote, index = 0, "", start
    end = min(len(text), start + _MAX_CALL_CHARS)
    while index < end:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _python_call_at(
    text: str, start: int, end_of_open: int, name: str
) -> tuple[dict[str, Any], int] | None:
    """The call written as Python from ``start`` (``name(`` ends at ``end_of_open``) and
    the index after it, or None."""
    end = _closing(text, end_of_open - 1)
    if end is None:
        return None
    try:
        node = ast.parse(text[start:end], mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or node.args:
        return None
    args: dict[str, Any] = {}
    for keyword in node.keywords:
        try:
            if keyword.arg is None:
                raise ValueError
            args[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
    return {"name": name, "arguments": args}, end


def python_calls(text: str, tools: Mapping[str, Any]) -> list[tuple[dict[str, Any], int, int]]:
    """Calls to bound tools written as Python with keyword arguments, each with its span.

    Only literal arguments count (``queue="HW-7"``, ``count=3``); anything else
    (a variable, an expression, positional arguments) is no call.
    """
    if not tools or "(" not in text:
        return []
    names = "|".join(re.escape(name) for name in sorted(tools, key=len, reverse=True))
    found: list[tuple[dict[str, Any], int, int]] = []
    for match in re.finditer(rf"(?<![\w.])({names})\s*\(", text[:_MAX_SCAN_CHARS]):
        if found and match.start() < found[-1][2]:
            continue
        read = _python_call_at(text, match.start(), match.end(), match.group(1))
        if read is not None:
            found.append((read[0], match.start(), read[1]))
    return found


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


def bound_tools(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Each bound tool's name and parameter schema, from the request's ``tools``."""
    table: dict[str, Any] = {}
    for tool in kwargs.get("tools") or []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            table[function["name"]] = function.get("parameters")
    return table


def _canonical(value: Any) -> Any:
    """``value`` with every whole float written as an int (``1000.0``, ``1e3``, ``-0.0``)."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, Mapping):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def _call_key(name: str, args: Any) -> str:
    return f"{name}:{json.dumps(_canonical(args), sort_keys=True, default=str)}"


def made_before(messages: Sequence[BaseMessage]) -> set[str]:
    """The calls earlier turns of the conversation made (name and arguments)."""
    return {
        _call_key(call["name"], call.get("args") or {})
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }


def without_repeats(found: RecoveredCalls, earlier: set[str]) -> RecoveredCalls:
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


def message_text(message: BaseMessage) -> str:
    """The text of a message: its string content, or its text blocks joined."""
    return content_text(message.content)


_WRAPPING = re.compile(r"```[\w-]*|</?tool_call>|<\|[\w_]+\|>")
MAX_PROSE_CHARS = 200
"""Most characters of prose a reply may hold around the calls it writes as text.

A reply that is mostly prose with JSON in it explains or quotes a call ("the
call format is ..."); the 1.5B's calls come bare, fenced, or after one short
sentence."""


_MAX_COPY_SITES = 64
"""Most places per text form where a called tool's name opens a call that the copy
check reads (``name(``, ``"name": "<tool>"``); the rest of the text is not read."""
_MAX_COPY_DECODES = 256
"""Most JSON decodes per text form, read back from those places, each ``_COPY_SLICE`` long."""
_COPY_SLICE = 10_000
"""Longest JSON object read as a call (a call padded past this is not read)."""
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_NAME_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])")


def _unescaped(text: str) -> str:
    """``text`` with JSON string escapes read (a call quoted inside a JSON string)."""
    return _JSON_ESCAPE.sub(
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else _SIMPLE_ESCAPES[m.group(2)], text
    )


def _names_unescaped(text: str) -> str:
    """``text`` with only escapes of letters, digits and ``_-.`` read (``refun\\u0064``)."""

    def read(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char.isalnum() or char in "_-." else match.group(0)

    return _NAME_ESCAPE.sub(read, text)


def _from_outside(message: BaseMessage) -> bool:
    """Whether the model did not write ``message``: a user's, a tool's or a function's."""
    if isinstance(message, ChatMessage):
        return message.role in ("user", "human", "tool", "function", "ipython")
    return isinstance(message, (HumanMessage, ToolMessage, FunctionMessage))


def _all_text(message: BaseMessage) -> str:
    """Every string a message holds: its text, and its other blocks as JSON."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(json.dumps(block, default=str))
    return "\n".join(parts)


def _copy_key(name: str, args: Any) -> str:
    text = json.dumps(_canonical(args), sort_keys=True, ensure_ascii=False, default=str)
    return unicodedata.normalize("NFKC", f"{name}:{text}")


def _written_calls(text: str, tools: Mapping[str, Any]) -> set[str]:
    """The keys of the calls to ``tools`` written in ``text``, as JSON or as Python.

    Read only where a tool's name opens a call: ``name(`` (Python), and
    ``"name": "<tool>"`` (JSON: the objects opening at the braces before it,
    innermost first, each decoded whole up to ``_COPY_SLICE`` characters).
    The work is bounded whatever the text.
    """
    names = "|".join(re.escape(name) for name in sorted(tools, key=len, reverse=True))
    values: list[Any] = []
    python = re.finditer(rf"(?<!\w)({names})\s*\(", text)
    for match in itertools.islice(python, _MAX_COPY_SITES):
        read = _python_call_at(text, match.start(), match.end(), match.group(1))
        if read is not None:
            values.append(read[0])
    budget = _MAX_COPY_DECODES
    sites = re.finditer(rf'"name"\s*:\s*"(?:{names})"', text)
    for match in itertools.islice(sites, _MAX_COPY_SITES):
        opening = match.start()
        while budget > 0:
            opening = text.rfind("{", max(0, match.start() - _COPY_SLICE), opening)
            if opening < 0:
                break
            budget -= 1
            try:
                value = _DECODER.raw_decode(text[opening : match.end() + _COPY_SLICE])[0]
            except (ValueError, RecursionError):
                continue
            if _call_items(value):
                values.append(value)
                break
    return {_copy_key(call["name"], call["args"]) for call in _recover_from(values, tools).calls}


def _copied(
    calls: Sequence[ToolCall], tools: Mapping[str, Any], messages: Sequence[BaseMessage]
) -> bool:
    """Whether one of ``calls`` is a call written in a user's or a tool's message.

    A model that quotes a request ("I cannot act on '{...}'") or a tool result
    back writes a call it did not make: an end user, or a page a tool fetched,
    must not be able to have a call run by writing its arguments. The messages
    the model did not write (not the system prompt, whose rules may state
    calls) are read as one text: as written, with the escapes of a name read,
    with every JSON escape read (a call quoted inside a tool's JSON result),
    each in NFKC form too and with doubled braces made single. A call to the
    same tool with the same arguments once checked against its schema, written
    there as JSON or as Python, is a copy. A call with no arguments is never a
    copy: no argument of it came from the text.
    """
    wanted = {_copy_key(call["name"], call["args"]) for call in calls if call["args"]}
    if not wanted:
        return False
    names = {call["name"] for call in calls if call["args"]}
    written = "\n".join(_all_text(m) for m in messages if _from_outside(m))
    if "\\" not in written and not any(
        name in form for name in names for form in (written, unicodedata.normalize("NFKC", written))
    ):
        return False
    table = {name: tools.get(name) for name in names}
    bases = [written, _names_unescaped(written)]
    for _ in range(2):  # a call inside a JSON string, inside another
        unescaped = _unescaped(bases[-1])
        if unescaped == bases[-1]:
            break
        bases.append(unescaped)
    variants: list[str] = []
    for base in bases:
        for text in (base, unicodedata.normalize("NFKC", base)):
            for form in (text, _DOUBLED_OPEN.sub("{", text)):
                if form not in variants:
                    variants.append(form)
    return any(wanted & _written_calls(text, table) for text in variants)


def recovered_message(
    message: BaseMessage,
    tools: Mapping[str, Any],
    messages: Sequence[BaseMessage] = (),
    *,
    max_prose: int | None = None,
) -> BaseMessage:
    """``message`` with the tool calls written in its text made real; itself when none.

    Only an ``AIMessage`` with neither native nor invalid tool calls is read.
    Valid calls become ``tool_calls`` (the text is then dropped: it was the
    calls), invalid ones ``invalid_tool_calls`` (never executed), and so does a
    call an earlier turn of ``messages`` already made: a small model repeats
    its last call until the recursion limit. A reply cut off by the length
    limit keeps only its first call. A call whose tool and arguments stand in a
    human or tool message of ``messages`` was quoted, not made, and the reply
    stays text.

    Args:
        message: The model's reply.
        tools: Each bound tool's name and JSON schema of parameters (or None).
        messages: The conversation the reply answers.
        max_prose: Most characters of text besides the JSON (fences and
            ``<tool_call>`` tags aside) for the reply to be read as calls;
            None: any.
    """
    if (
        not tools
        or not isinstance(message, AIMessage)
        or message.tool_calls
        or message.invalid_tool_calls
    ):
        return message
    text = message_text(message)
    if "{" not in text and "(" not in text:
        return message
    if max_prose is not None:
        spans = _json_spans(text) or python_calls(text, tools)
        rest, at = [], 0
        for _, start, end in spans:
            rest.append(text[at:start])
            at = end
        rest.append(text[at:])
        prose = _WRAPPING.sub("", "".join(rest)).strip(" \t\r\n{}")
        if len(prose) > max_prose:
            return message
    cut_off = message.response_metadata.get("finish_reason") == "length"
    found = without_repeats(recover(text, tools, cut_off=cut_off), made_before(messages))
    if found.calls and _copied(found.calls, tools, messages):
        return message
    update: dict[str, Any] = {}
    if found.calls:
        update = {"content": "", "tool_calls": list(found.calls)}
    if found.invalid:
        update["invalid_tool_calls"] = list(found.invalid)
    return message.model_copy(update=update) if update else message


def tool_table(tools: Sequence[Any]) -> dict[str, Any]:
    """Each tool's name and JSON schema of parameters, from what an agent binds.

    ``tools`` are LangChain tools, functions or OpenAI-format dicts (what
    ``bind_tools`` takes). A tool that cannot be read as a function (a
    provider's built-in tool) is left out: no text can call it.
    """
    table: dict[str, Any] = {}
    for tool in tools:
        try:
            function = convert_to_openai_tool(tool).get("function")
        except Exception:  # any tool shape we cannot read is no callable function
            continue
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            table[function["name"]] = function.get("parameters")
    return table
