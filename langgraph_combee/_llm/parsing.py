"""A tolerant reader for LLM replies that should be JSON.

Small local models wrap JSON in code fences, add prose around it, stop in the
middle of it, or put numbers where strings belong. ``extract_json`` recovers the
first JSON object it can; ``parse_reply`` then validates it against a pydantic
schema whose string fields accept numbers.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.DOTALL)


class ReplyParseError(ValueError):
    """The reply holds no JSON object that fits the expected schema."""

    def __init__(self, message: str, reply: str) -> None:
        self.reply = reply
        super().__init__(message)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    found.append(text)
    return found


def _scan_object(text: str, start: int) -> tuple[str, bool]:
    """Return the JSON object text starting at ``start`` and whether it closed."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1], True
    return text[start:], False


def _close_truncated(fragment: str) -> str:
    """Close the strings, arrays and objects a truncated JSON fragment left open."""
    stack: list[str] = []
    in_string = False
    escaped = False
    for ch in fragment:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    repaired = fragment
    if escaped:
        repaired = repaired[:-1]
    if in_string:
        repaired += '"'
    repaired = re.sub(r"[,:]\s*$", "", repaired.rstrip())
    # A dangling key ("key") with no value cannot be kept.
    repaired = re.sub(r',\s*"[^"]*"\s*$', "", repaired)
    return repaired + "".join(reversed(stack))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Trailing commas are the commonest small-model slip.
        return json.loads(re.sub(r",\s*([}\]])", r"\1", text))


def extract_json(text: str) -> dict[str, Any]:
    """Return the first JSON object found in ``text``.

    Handles code fences, prose before and after the object, trailing commas and
    a reply cut off mid-object (closed as far as it got).

    Raises:
        ReplyParseError: no JSON object could be recovered.
    """
    for candidate in _candidates(text):
        start = candidate.find("{")
        while start != -1:
            fragment, closed = _scan_object(candidate, start)
            attempts = [fragment] if closed else [fragment, _close_truncated(fragment)]
            for attempt in attempts:
                try:
                    value = _loads(attempt)
                except json.JSONDecodeError:
                    continue
                # A reply cut off before its first field "closes" to {}: that is
                # no recovery, and must not read as "nothing to learn".
                if isinstance(value, dict) and (closed or value):
                    return value
            start = candidate.find("{", start + 1)
    raise ReplyParseError("no JSON object found in the reply", text)


def _coerce_strings(value: Any, schema: type[BaseModel]) -> Any:
    """Turn scalars into strings where the schema wants a string (e.g. 42 -> '42')."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name, info in schema.model_fields.items():
        key = name if name in out else (info.alias if info.alias in out else None)
        if key is None:
            continue
        item = out[key]
        if info.annotation is str and isinstance(item, int | float | bool):
            out[key] = str(item)
        elif info.annotation is str and item is None:
            out[key] = ""
    return out


def parse_reply(text: str, schema: type[T]) -> T:
    """Parse an LLM reply into ``schema``, tolerating the usual small-model mess.

    Raises:
        ReplyParseError: no object fits the schema; the message says why, so it
            can be sent back to the model for one repair attempt.
    """
    data = extract_json(text)
    try:
        return schema.model_validate(_coerce_strings(data, schema))
    except ValidationError as exc:
        raise ReplyParseError(f"the JSON does not fit the schema: {exc}", text) from exc
