"""Turning a run's messages into a ``Trace``: pure functions, no I/O, no callbacks.

Shared by the middleware's capture and the ``CombeeTracer``: both
reduce a conversation (``messages``) plus a few run-level facts (``RunInfo``) to
the ``Trace`` the learner reads. Inputs arrive in every shape LangChain uses for
messages (message objects, ``("user", "hi")`` tuples, role dicts, the ``lc``
serialised form tracers record), so conversion is tolerant and never raises on
a malformed item: it skips it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core import messages as lc_messages
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from langgraph_combee._core.text import message_text
from langgraph_combee._core.types import ToolCall, Trace, TraceMessage
from langgraph_combee._guard.provenance import tokens

__all__ = [
    "RunInfo",
    "invocation_start",
    "request_text",
    "text_of",
    "to_message",
    "to_messages",
    "trace_from_messages",
]


@dataclass(frozen=True)
class RunInfo:
    """Run-level facts a trace records besides its messages.

    Attributes:
        id: The trace id (the run id feedback is keyed by); None: a fresh id.
        thread_id: The LangGraph thread of the run, if any.
        tenant: The tenant whose playbook was served.
        prompt_version: The prompt version served to the run.
        latency_seconds: How long the run took.
        error: The error that ended the run, if it failed.
        metadata: Extra metadata stored on the trace.
        input_tokens: Prompt tokens of the run; None: summed from the messages.
        output_tokens: Completion tokens of the run; None: summed from the messages.
    """

    id: str | None = None
    thread_id: str | None = None
    tenant: str | None = None
    prompt_version: int | None = None
    latency_seconds: float | None = None
    error: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None


# --------------------------------------------------------------------------- messages


def _revive(data: Mapping[str, Any]) -> BaseMessage | None:
    """Rebuild a message from LangChain's ``lc`` serialised form (what tracers record)."""
    ident = data.get("id")
    kwargs = data.get("kwargs")
    if not isinstance(ident, list) or not ident or not isinstance(kwargs, Mapping):
        return None
    cls = getattr(lc_messages, str(ident[-1]), None)
    if not (isinstance(cls, type) and issubclass(cls, BaseMessage)):
        return None
    fields = {k: v for k, v in kwargs.items() if k != "type"}
    message: BaseMessage = cls(**fields)
    return message


def to_message(item: object) -> BaseMessage | None:
    """Return ``item`` as a message, or None when it is not one in any known shape."""
    if isinstance(item, BaseMessage):
        return item
    try:
        if isinstance(item, Mapping):
            if item.get("lc") == 1 and item.get("type") == "constructor":
                return _revive(item)
            if "type" in item and "data" in item:
                return lc_messages.messages_from_dict([dict(item)])[0]
        if isinstance(item, (str, tuple, Mapping)):
            return convert_to_messages([item])[0]  # type: ignore[list-item]
    except Exception:  # a malformed item is skipped, never fatal
        return None
    return None


def to_messages(value: object) -> list[BaseMessage]:
    """Return the messages in ``value`` (a list of message-likes), skipping the rest."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return []
    out = []
    for item in value:
        message = to_message(item)
        if message is not None:
            out.append(message)
    return out


def text_of(value: object) -> str:
    """Return readable text for a run's input or output of any shape."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return message_text(value.content)
    if isinstance(value, Mapping):
        messages = to_messages(value.get("messages"))
        if messages:
            return message_text(messages[-1].content)
        for key in ("input", "question", "query", "output", "answer"):
            if key in value:
                return text_of(value[key])
        if len(value) == 1:
            return text_of(next(iter(value.values())))
        return str(dict(value))
    messages = to_messages(value)
    if messages:
        return message_text(messages[-1].content)
    return str(value)


def invocation_start(
    messages: Sequence[BaseMessage],
    *,
    anchor_id: str | None = None,
    anchor_text: str | None = None,
) -> int:
    """Return the index of the first message of the current invocation.

    On a multi-turn thread the state holds earlier turns too; the current
    invocation starts at the human message that started it: the message with id
    ``anchor_id`` when it is still there, else the last human message whose text
    is ``anchor_text``, else the last human message, else 0.
    """
    if anchor_id is not None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == anchor_id:
                return index
    if anchor_text is None:
        # The last human message, found from the end (every model call asks this).
        for index in range(len(messages) - 1, -1, -1):
            if isinstance(messages[index], HumanMessage):
                return index
        return 0
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for index in reversed(humans):
        if message_text(messages[index].content) == anchor_text:
            return index
    return humans[-1] if humans else 0


def request_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the latest human message: what the learned rules are matched against.

    The same message the trace of the run's last model call ends its human
    turns with, so verified adoption replays with the same focus.
    """
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message_text(message.content)
    return ""


# --------------------------------------------------------------------------- trace


def _tool_calls(
    messages: Sequence[BaseMessage],
    given: int = 0,
    made: Collection[str] | None = None,
    ran: Mapping[str, str | None] | None = None,
) -> list[ToolCall]:
    """The tool calls of ``messages``, each attested when ``_attested`` says so.

    With ``ran``, a call whose result is not what its tool run returned is not
    attested either: its result is someone else's text under the tool's name.
    """
    results: dict[str, ToolMessage] = {
        m.tool_call_id: m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id
    }
    last = _last_carriers(messages)
    calls = []
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            reply = results.get(call.get("id") or "")
            text = message_text(reply.content) if reply is not None else None
            failed = reply is not None and reply.status == "error"
            calls.append(
                ToolCall(
                    name=call["name"],
                    args=dict(call.get("args") or {}),
                    id=call.get("id"),
                    result=None if failed else text,
                    error=text if failed else None,
                    attested=_attested(index, call.get("id"), given, made, last)
                    and (reply is None or _ran(reply, ran)),
                )
            )
        for bad in message.invalid_tool_calls:
            # Its error text quotes what the call said: the caller's words when the
            # caller sent the call, so it is attested as the valid calls are.
            calls.append(
                ToolCall(
                    name=bad.get("name") or "?",
                    id=bad.get("id"),
                    error=f"invalid tool call: {bad.get('error') or bad.get('args')}",
                    attested=_attested(index, bad.get("id"), given, made, last),
                )
            )
    return calls


def _last_carriers(messages: Sequence[BaseMessage]) -> dict[tuple[str, str], int]:
    """Per tool call id, the index of the last AI message calling it and of its last result."""
    last: dict[tuple[str, str], int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                if call.get("id"):
                    last[("ai", str(call["id"]))] = index
        elif isinstance(message, ToolMessage) and message.tool_call_id:
            last[("tool", message.tool_call_id)] = index
    return last


def _attested(
    index: int,
    call_id: str | None,
    given: int,
    made: Collection[str] | None,
    last: Mapping[tuple[str, str], int],
    kind: str = "ai",
) -> bool:
    """Whether the call (or result) at ``messages[index]`` is the run's own.

    Not when it was already there at the run's first model call (``index <
    given``). With ``made`` (the ids of the tool calls the run's own model calls
    and tool runs produced), only a call of those ids, and only the last message
    carrying it: a caller who sends a call under an id the model later reuses
    (a model that numbers its calls) plants the earlier copy.
    """
    if index < given:
        return False
    if made is None:
        return True
    return bool(call_id) and call_id in made and last.get((kind, str(call_id))) == index


def _usage(messages: Sequence[BaseMessage]) -> tuple[int | None, int | None]:
    usages = [m.usage_metadata for m in messages if isinstance(m, AIMessage) and m.usage_metadata]
    if not usages:
        return None, None
    return sum(u["input_tokens"] for u in usages), sum(u["output_tokens"] for u in usages)


EARLIER_TURNS = 3
"""Most of the thread's earlier user messages a trace keeps, as context the guard reads."""
EARLIER_CHARS = 1000
"""Longest text kept of each of them."""
EARLIER_TURN = "earlier_turn"
"""The name of a kept earlier user message (``TraceMessage.name``)."""


def _earlier_turns(
    messages: Sequence[BaseMessage], turn: Sequence[BaseMessage] = ()
) -> list[TraceMessage]:
    """The last user messages before the invocation, marked as sent before it (not attested).

    A reply can repeat what an earlier turn asked ("sign every reply as ..."): the guard
    must see those words as the user's, whoever approves the reply. The last
    ``EARLIER_TURNS`` messages are kept as context, each cut to ``EARLIER_CHARS``; the
    words of the run's replies and calls (``turn``) that any earlier user message holds
    are kept too (``"earlier_words"``), in the reply's order: padding an instruction past
    the cut, or sending three more messages after it, must not make its words the
    reviewer's. They are as many as the replies' words at most, and stay when clipping
    drops the earlier messages (``limits.clip_trace``).
    """
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    texts = [message_text(m.content) for m in humans]
    kept = [
        TraceMessage(role="human", content=text[:EARLIER_CHARS], name=EARLIER_TURN, attested=False)
        for text in texts[-EARLIER_TURNS:]
        if text.strip()
    ]
    said = {w for text in texts for w in tokens(text)}
    written = [message_text(m.content) for m in turn if isinstance(m, AIMessage)]
    written += [str(c.get("args")) for m in turn if isinstance(m, AIMessage) for c in m.tool_calls]
    echoed: dict[str, None] = {}
    for text in written:
        for word in _WORD.findall(text):
            found = set(tokens(word))
            if found and found <= said:
                echoed.setdefault(word)
    if echoed:
        kept.append(
            TraceMessage(
                role="human", content=" ".join(echoed), name="earlier_words", attested=False
            )
        )
    return kept


_WORD = re.compile(r"\w+(?:[-_./:']\w+)*")


def _trace_message(message: BaseMessage, attested: bool = True) -> TraceMessage:
    calls = []
    if isinstance(message, AIMessage):
        calls = [
            {"name": c["name"], "args": c.get("args") or {}, "id": c.get("id")}
            for c in message.tool_calls
        ]
    return TraceMessage(
        role=message.type,
        content=message_text(message.content),
        name=message.name,
        tool_calls=calls,
        attested=attested or isinstance(message, HumanMessage),
    )


def result_digest(content: Any) -> str:
    """A short digest of a tool message's text: what ``ran`` maps each call id to."""
    return hashlib.blake2b(message_text(content).encode("utf-8"), digest_size=16).hexdigest()


def _ran(message: ToolMessage, ran: Mapping[str, str | None] | None) -> bool:
    """Whether ``message`` holds what its tool run returned (always, when ``ran`` is None).

    A person's answer in place of the tool's (a human-in-the-loop "respond" or
    "reject" decision) and a message a client replaced by its id on resume are
    not: the tool never returned that text.
    """
    if ran is None:
        return True
    if message.tool_call_id not in ran:
        return False
    digest = ran[message.tool_call_id]
    return digest is None or digest == result_digest(message.content)


def _message_attested(
    message: BaseMessage,
    index: int,
    given: int,
    made: Collection[str] | None,
    last: Mapping[tuple[str, str], int],
    ran: Mapping[str, str | None] | None = None,
) -> bool:
    """``_attested`` for a whole message: a tool result by its call, an AI message by its calls."""
    if isinstance(message, ToolMessage):
        return _attested(index, message.tool_call_id, given, made, last, kind="tool") and _ran(
            message, ran
        )
    if isinstance(message, AIMessage) and made is not None and message.tool_calls:
        return all(_attested(index, c.get("id"), given, made, last) for c in message.tool_calls)
    return index >= given


def trace_from_messages(
    messages: Sequence[BaseMessage],
    run: RunInfo,
    *,
    start: int | None = None,
    model_from: int | None = None,
    made: Collection[str] | None = None,
    ran: Mapping[str, str | None] | None = None,
) -> Trace:
    """Build the ``Trace`` of one invocation from its conversation.

    Args:
        messages: The conversation (the ``messages`` state after the run).
        run: Run-level facts: id, thread, tenant, version served, latency, error.
        start: Index of the invocation's first message; of the thread's earlier
            turns only the last user messages are kept (``EARLIER_TURNS``, marked
            not attested), with the words of the run's replies any earlier user
            message holds, for the guard to read. None: ``invocation_start(messages)``.
        model_from: How many messages there were at the run's first model call:
            AI and tool messages before it came in the run's input, not from the
            model, and their tool calls and results are marked not attested
            (never trusted evidence). None: not known, every one attested.
        made: The ids of the tool calls the run itself made (its model calls'
            replies, its tool runs), when a tracer saw them: then only those
            calls and their results are attested, each in the last message
            carrying its id. None: not known (``model_from`` alone decides).
        ran: What each tool run of the run returned (``result_digest``, by call id), when the
            middleware or a tracer saw the runs; None for a run whose result is not
            compared (it failed: its message is the tool node's). A tool message
            holding anything else, or for a call no run is known of, is not
            attested, nor is its call. None: not known.

    Returns:
        The trace: input (the invocation's first human message), output (the
        last AI message's text), the messages without system prompts, tool calls
        with their results or errors, and token usage.
    """
    first = invocation_start(messages) if start is None else max(0, min(start, len(messages)))
    turn = list(messages[first:])
    given = 0 if model_from is None else max(0, model_from - first)
    human = next((m for m in turn if isinstance(m, HumanMessage)), None)
    last_ai = next((m for m in reversed(turn) if isinstance(m, AIMessage)), None)
    input_tokens, output_tokens = _usage(turn)
    last = _last_carriers(turn)
    fields: dict[str, Any] = {
        "input": message_text(human.content) if human is not None else "",
        "output": message_text(last_ai.content) if last_ai is not None else "",
        "messages": [
            *_earlier_turns(messages[:first], turn),
            *(
                _trace_message(m, _message_attested(m, i, given, made, last, ran))
                for i, m in enumerate(turn)
                if not isinstance(m, SystemMessage)
            ),
        ],
        "tool_calls": _tool_calls(turn, given, made, ran),
        "error": run.error,
        "metadata": dict(run.metadata),
        "prompt_version": run.prompt_version,
        "thread_id": run.thread_id,
        "tenant": run.tenant,
        "latency_seconds": run.latency_seconds,
        "input_tokens": run.input_tokens if run.input_tokens is not None else input_tokens,
        "output_tokens": run.output_tokens if run.output_tokens is not None else output_tokens,
    }
    if run.id:
        fields["id"] = run.id
    return Trace(**fields)
