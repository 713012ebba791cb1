"""Size limits on captured traces: a huge run is cut down, never rejected whole.

A run can carry megabytes (a tool returning a whole file, a pasted log, a blob
put in its metadata). The capture path bounds what it keeps in memory and
writes to the queue with two limits, both on characters of text:

* ``max_message_chars``: each text field (input, output, error, each message's
  content, each tool call's arguments, result or error, the feedback's comment
  and ground truth, each string in the metadata at any depth, and each metadata
  key but the package's own) keeps its head and tail with a marker in between
  saying how much was cut: ``[combee: cut 12,345 of 52,345 characters]``.
  ``bytes`` in the metadata count as their ``repr`` (what is stored when they
  are not UTF-8, and never shorter than what is), and are cut as that text;
* ``max_trace_chars``: the metadata counts toward it (``metadata_limits`` says
  how). If the trace is still larger, then, in order: metadata entries are
  dropped from the end until the trace fits or the metadata holds no more than
  ``max_message_chars`` (one field's worth; all of ``max_trace_chars`` when that
  is None), never an entry the package writes or reads (keys starting
  ``combee_``, ``thread_id`` and the guard's ``user_key``); messages (then tool
  calls) are dropped from the middle of the run, keeping its start and its end,
  and a marker message says how many went; as a last resort input and output
  are cut to share what is left.

A cut trace records what was cut in ``metadata["combee_truncated"]`` (which is
never cut itself): characters and fields cut, messages, tool calls and metadata
entries dropped, and the size before. The learner's prompts clip each field again
(``prompts.MAX_FIELD_CHARS``); these limits protect memory and the store, those
protect the learner's context.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langgraph_combee._agent.metadata_limits import clip_metadata, drop_entries, value_size
from langgraph_combee._agent.traces import EARLIER_TURN
from langgraph_combee._core.types import Feedback, ToolCall, Trace, TraceMessage
from langgraph_combee._errors import ConfigurationError

__all__ = ["TraceLimits", "clip_feedback", "clip_text", "clip_trace", "cut_marker"]

MARKER_ROLE = "combee"

_RECORD_ROOM = 200
"""Characters kept free for ``metadata["combee_truncated"]`` when a trace is cut to fit."""

_MARKER_ROOM = 200
"""Characters kept free for the markers of dropped messages and tool calls."""


def cut_marker(cut: int, total: int) -> str:
    """The marker left where ``cut`` of ``total`` characters were removed."""
    return f" ...[combee: cut {cut:,} of {total:,} characters]... "


@dataclass(frozen=True)
class TraceLimits:
    """Character limits of captured traces (None: no limit).

    Args:
        max_message_chars: Most characters kept per text field of a trace.
        max_trace_chars: Most characters kept per trace, all fields together.
        keep_metadata: Metadata keys whose entries are never dropped and whose
            names are never cut, besides those starting ``combee_`` and
            ``thread_id`` (the guard's ``user_key``).

    Raises:
        ConfigurationError: When a limit is not None or an int >= 200, or
            ``keep_metadata`` is not a tuple of str.
    """

    max_message_chars: int | None = 20_000
    max_trace_chars: int | None = 100_000
    keep_metadata: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("max_message_chars", "max_trace_chars"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 200
            ):
                raise ConfigurationError(name, value, "None or an int >= 200")
        keep = self.keep_metadata
        if not isinstance(keep, tuple) or not all(isinstance(k, str) for k in keep):
            raise ConfigurationError("keep_metadata", keep, "a tuple of str")

    def keeps(self, key: object) -> bool:
        """Whether metadata ``key`` is one the package writes or reads.

        Such an entry is never dropped and its key never cut; long strings in its
        value are cut like any other.
        """
        return isinstance(key, str) and (
            key.startswith("combee_") or key == "thread_id" or key in self.keep_metadata
        )


class _Cutter:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.chars = 0
        self.fields = 0

    def text(self, value: str, limit: int | None = None) -> str:
        limit = self.limit if limit is None else limit
        if limit is None or len(value) <= limit:
            return value
        marker = cut_marker(len(value), len(value))  # the longest the marker can be
        keep = max(0, limit - len(marker))
        cut = len(value) - keep
        head = keep - keep // 3
        tail = keep - head
        self.chars += cut
        self.fields += 1
        return value[:head] + cut_marker(cut, len(value)) + (value[-tail:] if tail else "")

    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def args(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.limit is None:
            return args
        text = json.dumps(args, default=str, ensure_ascii=False)
        if len(text) <= self.limit:
            return args
        return {"combee_cut_arguments": self.text(text)}


def clip_text(value: str, limit: int | None) -> str:
    """``value`` as a trace keeps one text field under ``max_message_chars=limit``."""
    return _Cutter(limit).text(value)


def _message_size(message: TraceMessage) -> int:
    calls = json.dumps(message.tool_calls, default=str) if message.tool_calls else ""
    return len(message.content) + len(calls)


def _call_size(call: ToolCall) -> int:
    args = json.dumps(call.args, default=str) if call.args else ""
    return len(args) + len(call.result or "") + len(call.error or "")


def trace_size(trace: Trace) -> int:
    """Characters of text a trace holds (what ``max_trace_chars`` counts)."""
    feedback = trace.feedback
    size = len(trace.input) + len(trace.output) + len(trace.error or "")
    if feedback is not None:
        size += len(feedback.comment or "") + len(feedback.ground_truth or "")
    size += sum(_message_size(m) for m in trace.messages)
    size += sum(_call_size(c) for c in trace.tool_calls)
    return size + value_size(trace.metadata)


def _keep_ends(sizes: list[int], room: int) -> tuple[int, int]:
    """How many items to keep from the start and from the end within ``room`` characters."""
    head = tail = 0
    used = 0
    while head + tail < len(sizes):
        index = head if head <= tail else len(sizes) - 1 - tail
        if used + sizes[index] > room:
            break
        used += sizes[index]
        if head <= tail:
            head += 1
        else:
            tail += 1
    return head, tail


def clip_feedback(feedback: Feedback, limits: TraceLimits) -> Feedback:
    """``feedback`` with its comment and ground truth within ``max_message_chars``.

    Late feedback (``combee.feedback()``, the platform's feedback route) joins a
    trace after ``clip_trace`` ran, so it is cut on its own, the same way.
    """
    cut = _Cutter(limits.max_message_chars)
    comment, truth = cut.optional(feedback.comment), cut.optional(feedback.ground_truth)
    if not cut.fields:
        return feedback
    return feedback.model_copy(update={"comment": comment, "ground_truth": truth})


def clip_trace(trace: Trace, limits: TraceLimits) -> Trace:
    """Return ``trace`` within ``limits`` (the same object when it already is)."""
    size = trace_size(trace)
    if (limits.max_trace_chars is None or size <= limits.max_trace_chars) and (
        limits.max_message_chars is None or size <= limits.max_message_chars
    ):
        return trace  # the fast path: small traces are never copied
    cut = _Cutter(limits.max_message_chars)
    messages = [
        m.model_copy(
            update={
                "content": cut.text(m.content),
                "tool_calls": [
                    {**c, "args": cut.args(dict(c.get("args") or {}))} for c in m.tool_calls
                ],
            }
        )
        for m in trace.messages
    ]
    calls = [
        c.model_copy(
            update={
                "args": cut.args(c.args),
                "result": cut.optional(c.result),
                "error": cut.optional(c.error),
            }
        )
        for c in trace.tool_calls
    ]
    feedback = trace.feedback
    if feedback is not None:
        feedback = feedback.model_copy(
            update={
                "comment": cut.optional(feedback.comment),
                "ground_truth": cut.optional(feedback.ground_truth),
            }
        )
    metadata = trace.metadata
    if limits.max_message_chars is not None:
        metadata = clip_metadata(metadata, limits.max_message_chars, cut.text, kept=limits.keeps)
    clipped = trace.model_copy(
        update={
            "input": cut.text(trace.input),
            "output": cut.text(trace.output),
            "error": cut.optional(trace.error),
            "messages": messages,
            "tool_calls": calls,
            "feedback": feedback,
            "metadata": metadata,
        }
    )
    dropped_messages = dropped_calls = dropped_entries = 0
    total = limits.max_trace_chars
    if total is not None:
        total = max(0, total - _RECORD_ROOM)
    if total is not None and trace_size(clipped) > total:
        # The metadata may keep what the rest of the trace leaves, and at least
        # one field's worth: the run's messages do not pay for its metadata.
        rest = trace_size(clipped.model_copy(update={"metadata": {}}))
        share = min(limits.max_message_chars or total, total)
        room = max(share, total - rest - _MARKER_ROOM)
        metadata, dropped_entries, chars = drop_entries(metadata, room, kept=limits.keeps)
        if dropped_entries:
            cut.chars += chars
            clipped = clipped.model_copy(update={"metadata": metadata})
        if trace_size(clipped) > total:
            # The thread's earlier user messages are context: they go before any of the
            # run's own (the words of its replies they hold stay, as "earlier_words").
            own = [m for m in clipped.messages if m.attested or m.name != EARLIER_TURN]
            dropped_messages = len(clipped.messages) - len(own)
            cut.chars += sum(_message_size(m) for m in clipped.messages) - sum(
                _message_size(m) for m in own
            )
            messages = own
            clipped = clipped.model_copy(update={"messages": own})
        fixed = trace_size(clipped.model_copy(update={"messages": [], "tool_calls": []}))
        room = max(0, total - fixed - _MARKER_ROOM)
        sizes = [_message_size(m) for m in clipped.messages]
        head, tail = _keep_ends(sizes, room)
        if head + tail < len(messages):
            dropped_messages += len(messages) - head - tail
            cut.chars += sum(sizes[head : len(sizes) - tail])
            marker = TraceMessage(
                role=MARKER_ROLE,
                content=f"[combee: {len(messages) - head - tail} messages cut from the middle "
                "of this run]",
            )
            kept = [*clipped.messages[:head], marker, *clipped.messages[len(sizes) - tail :]]
            clipped = clipped.model_copy(update={"messages": kept})
        room = max(0, total - trace_size(clipped.model_copy(update={"tool_calls": []})) - 100)
        call_sizes = [_call_size(c) for c in clipped.tool_calls]
        head, tail = _keep_ends(call_sizes, room)
        if head + tail < len(call_sizes):
            dropped_calls = len(call_sizes) - head - tail
            cut.chars += sum(call_sizes[head : len(call_sizes) - tail])
            marker_call = ToolCall(
                name=MARKER_ROLE,
                result=f"[combee: {dropped_calls} tool calls cut from the middle of this run]",
            )
            kept_calls = [
                *clipped.tool_calls[:head],
                marker_call,
                *clipped.tool_calls[len(call_sizes) - tail :],
            ]
            clipped = clipped.model_copy(update={"tool_calls": kept_calls})
        if trace_size(clipped) > total:
            share = max(200, (total - 400) // 2)
            clipped = clipped.model_copy(
                update={
                    "input": cut.text(clipped.input, share),
                    "output": cut.text(clipped.output, share),
                }
            )
    if not (cut.chars or dropped_messages or dropped_calls or dropped_entries):
        return trace
    metadata = {
        **clipped.metadata,
        "combee_truncated": {
            "chars_cut": cut.chars,
            "fields_cut": cut.fields,
            "messages_cut": dropped_messages,
            "tool_calls_cut": dropped_calls,
            "metadata_entries_cut": dropped_entries,
            "original_chars": size,
        },
    }
    return clipped.model_copy(update={"metadata": metadata})
