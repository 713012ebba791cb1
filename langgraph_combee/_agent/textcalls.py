"""Tool calls a model wrote as text, made real in the agent's own model call.

A user who brings a small model on their own server (llama.cpp, Ollama, LM
Studio, vLLM) through a plain ``ChatOpenAI`` often gets tool calls written as
text (``{"name": "open_case", "arguments": {...}}``, with doubled braces, in a
fence, with prose around it) instead of the API's native format: the agent
then calls no tool at all, and nothing it could learn would change that. The
middleware reads such a reply with ``_core.toolcalls.recovered_message``: calls
to bound tools whose arguments fit the tool's schema become real tool calls,
others invalid calls that never run (``ServingSettings.recover_tool_calls``
turns it off). A call quoted from the user's message or a tool result, or JSON
inside a reply that is mostly prose (an explanation, an example), stays text.
Calls written as Python with literal keyword arguments (``open_case(queue="HW-7")``)
are read too. A reply that already has native tool calls, a structured response,
or neither ``{`` nor ``(`` in its text is returned as it came, at the cost of a type check and a
substring test.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, ModelCallResult
from langchain_core.messages import AIMessage, BaseMessage

from langgraph_combee._core.toolcalls import (
    MAX_PROSE_CHARS,
    message_text,
    recovered_message,
    tool_table,
)

__all__ = ["with_text_calls"]


def _candidate(message: BaseMessage) -> bool:
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and not message.invalid_tool_calls
        and any(c in message_text(message) for c in "{(")
    )


def _recovered(messages: list[BaseMessage], request: ModelRequest[Any]) -> list[BaseMessage]:
    table = tool_table(request.tools)
    return [
        recovered_message(m, table, request.messages, max_prose=MAX_PROSE_CHARS) for m in messages
    ]


def with_text_calls(request: ModelRequest[Any], response: ModelCallResult) -> ModelCallResult:
    """``response`` with the tool calls its reply wrote as text made real (see the module)."""
    if not request.tools:
        return response
    if isinstance(response, ExtendedModelResponse):
        inner = with_text_calls(request, response.model_response)
        if inner is response.model_response:
            return response
        assert isinstance(inner, ModelResponse)
        return dataclasses.replace(response, model_response=inner)
    if isinstance(response, AIMessage):
        if not _candidate(response):
            return response
        (message,) = _recovered([response], request)
        return message if isinstance(message, AIMessage) else response
    if response.structured_response is not None or not any(map(_candidate, response.result)):
        return response
    return dataclasses.replace(response, result=_recovered(list(response.result), request))
