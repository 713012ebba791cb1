"""``CombeeTracer``: capture every finished root run as a ``Trace``.

A ``langchain_core`` ``BaseTracer`` builds the nested run tree (graph, nodes,
model calls, tool calls) and hands the root run to ``_persist_run`` once, when
it ends; this tracer turns that tree into a ``Trace`` and calls
``Combee.capture``. It is what ``combee.instrument(graph)`` attaches to plain
``StateGraph`` apps, and can be passed as a callback to any runnable::

    app.invoke(inputs, config={"callbacks": [CombeeTracer(combee)], "run_id": run_id})

What a trace holds:

* messages: the graph's final ``messages`` state when it has one (the current
  invocation only, from the human message that started it); otherwise the
  conversation of the last model call;
* input / output: the invocation's first human message and last AI message, or
  for graphs without messages the text of the graph's input and output;
* tool calls with arguments and results, and tool errors (from error
  ``ToolMessage``s and from failed tool runs); a call is attested
  (``ToolCall.attested``) only when the run made it: not one of the messages
  the caller sent in the graph's input, and, when the tree has model or tool
  runs, one whose id a model call's reply or a tool run of the tree holds;
* ``error``: the exception that ended the run, if it failed;
* token usage summed over every model call in the tree;
* id = the root run id (the caller's ``config["run_id"]`` when given), thread
  id, tenant and served version (from the ``combee_*`` run metadata set by the
  Combee helpers, or the tracer's ``tenant`` / ``version``).

Callbacks arrive on several threads (parallel tool calls, async runs), so the
run tree is guarded by a lock; conversion and capture run outside it. The tracer
never raises: a malformed run is logged and skipped.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langsmith.schemas import RunBase

from langgraph_combee._agent.side import AgentSide, agent_side_of
from langgraph_combee._agent.traces import (
    RunInfo,
    invocation_start,
    result_digest,
    text_of,
    to_message,
    to_messages,
    trace_from_messages,
)
from langgraph_combee._core.text import message_text
from langgraph_combee._core.types import Feedback, ToolCall, Trace
from langgraph_combee._errors import ConfigurationError

__all__ = ["CombeeTracer", "trace_from_messages", "trace_from_run"]

logger = logging.getLogger("langgraph_combee.collector")

_MODEL_RUNS = frozenset({"llm", "chat_model"})
_INPUT_KEYS = ("input", "question", "query", "task")
_OUTPUT_KEYS = ("output", "answer", "response", "result")


def _short_error(error: str | None) -> str | None:
    """The exception line of a tracer's error (tracers append the whole traceback)."""
    if not error:
        return None
    head = error.split("Traceback (most recent call last)", 1)[0].strip()
    return head or error.strip().splitlines()[-1]


def _flatten(root: RunBase) -> list[RunBase]:
    # A run read back from LangSmith has no child runs loaded (``child_runs`` None).
    runs: list[RunBase] = []
    stack = [root]
    while stack:
        run = stack.pop()
        runs.append(run)
        stack.extend(getattr(run, "child_runs", None) or [])
    runs.sort(key=lambda r: (getattr(r, "dotted_order", None) or "", r.start_time))
    return runs


def _version(value: object) -> int | None:
    """A served version number from run metadata (LangSmith may hand it back as text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _root_usage(root: RunBase) -> tuple[int | None, int | None]:
    """The token counts LangSmith keeps on a root run it read back (None elsewhere)."""
    prompt = getattr(root, "prompt_tokens", None)
    completion = getattr(root, "completion_tokens", None)
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
    )


def _model_messages(run: RunBase) -> list[BaseMessage]:
    """The conversation of one model call: its prompt and its reply."""
    batches = (run.inputs or {}).get("messages") or [[]]
    prompt = to_messages(batches[0] if batches else [])
    generations = (run.outputs or {}).get("generations") or [[]]
    first = generations[0][0] if generations and generations[0] else None
    reply = to_message(first.get("message")) if isinstance(first, Mapping) else None
    return [*prompt, reply] if reply is not None else prompt


def _model_usage(runs: Iterable[RunBase]) -> tuple[int | None, int | None]:
    prompt_tokens = completion_tokens = 0
    seen = False
    for run in runs:
        for batch in (run.outputs or {}).get("generations") or []:
            for generation in batch or []:
                message = (
                    to_message(generation.get("message"))
                    if isinstance(generation, Mapping)
                    else None
                )
                usage = getattr(message, "usage_metadata", None)
                if usage:
                    seen = True
                    prompt_tokens += int(usage.get("input_tokens") or 0)
                    completion_tokens += int(usage.get("output_tokens") or 0)
    return (prompt_tokens, completion_tokens) if seen else (None, None)


def _made(model_runs: Iterable[RunBase], tool_runs: Iterable[RunBase]) -> set[str]:
    """The ids of the tool calls the run itself made: in its model calls' replies, its tool runs.

    What the caller sent in the run's input (a planted AI tool call and its
    "result") appears in no model call's reply of the run's tree.
    """
    made: set[str] = set()
    for run in model_runs:
        for batch in (run.outputs or {}).get("generations") or []:
            for generation in batch or []:
                message = (
                    to_message(generation.get("message"))
                    if isinstance(generation, Mapping)
                    else None
                )
                if isinstance(message, AIMessage):
                    calls = [*message.tool_calls, *message.invalid_tool_calls]
                    made.update(str(c["id"]) for c in calls if c.get("id"))
    for run in tool_runs:
        call_id = (run.extra or {}).get("tool_call_id")
        if call_id:
            made.add(str(call_id))
    return made


def _results(tool_runs: Sequence[RunBase]) -> dict[str, str | None]:
    """What each tool run returned (``result_digest``), by call id; None for a failed run.

    A tool message of the state that holds anything else (a person's answer in the
    tool's place, a message a client replaced on resume) is not the tool's result.
    """
    out: dict[str, str | None] = {}
    for run in tool_runs:
        call_id = (run.extra or {}).get("tool_call_id")
        if not call_id:
            continue
        output = (run.outputs or {}).get("output")
        content = getattr(output, "content", output)
        out[str(call_id)] = None if run.error or output is None else result_digest(content)
    return out


def _given(asked: Sequence[BaseMessage], start: int) -> int | None:
    """How many messages of the state were there before the run: up to the caller's last one.

    The invocation starts at ``start``, the caller's last human message; what
    the caller sent after it (AI and tool messages) came with the input.
    """
    humans = [i for i, m in enumerate(asked) if m.type == "human"]
    if not humans:
        return None
    return start + len(asked) - humans[-1]


def _tool_call(run: RunBase) -> ToolCall:
    inputs = dict(run.inputs or {})
    output = (run.outputs or {}).get("output")
    return ToolCall(
        name=run.name,
        args=inputs,
        id=(run.extra or {}).get("tool_call_id"),
        result=None if run.error else text_of(output) if output is not None else None,
        error=_short_error(run.error),
    )


def _pick(value: object, keys: tuple[str, ...]) -> str:
    if isinstance(value, Mapping) and not value.get("messages"):
        for key in keys:
            if key in value:
                return text_of(value[key])
    return text_of(value)


def _merge_calls(from_messages: list[ToolCall], from_runs: list[ToolCall]) -> list[ToolCall]:
    """The messages' tool calls, completed by the tool runs; unmatched runs appended.

    A failed run has no ``ToolMessage`` for its calls: their outcome is only in
    the tool runs. A tool a node called directly appears in the runs alone.
    """
    by_id = {c.id: c for c in from_runs if c.id}
    merged = []
    for call in from_messages:
        ran = by_id.pop(call.id, None) if call.id else None
        if ran is not None and call.result is None and call.error is None:
            call = call.model_copy(update={"result": ran.result, "error": ran.error})
        merged.append(call)
    matched = {c.id for c in from_messages if c.id}
    merged.extend(c for c in from_runs if not c.id or c.id not in matched)
    return merged


def trace_from_run(
    root: RunBase,
    *,
    tenant: str | None = None,
    version: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    feedback: Feedback | None = None,
) -> Trace:
    """Build the ``Trace`` of a finished root run and its nested child runs.

    The one conversion of a run into a trace: the tracer's run trees and the
    runs ``langsmith.traces_from_project`` reads back from LangSmith (which come
    without child runs, and with token counts on the root) both go through it.

    Args:
        root: The root run, with ``child_runs`` filled in (as ``_persist_run`` gets
            it) or without them (a LangSmith run read back).
        tenant: The run's tenant (None: from the run's ``combee_tenant`` metadata).
        version: The version served (None: from the run's ``combee_version`` metadata).
        metadata: Extra metadata stored on the trace.
        feedback: Feedback to attach (a LangSmith run's folded feedback).

    Returns:
        The trace; see the module docstring for what it holds.
    """
    runs = _flatten(root)
    model_runs = [r for r in runs if r.run_type in _MODEL_RUNS]
    tool_runs = [r for r in runs if r.run_type == "tool"]
    run_metadata = dict((root.extra or {}).get("metadata") or {})
    served = version if version is not None else _version(run_metadata.get("combee_version"))
    input_tokens, output_tokens = _model_usage(model_runs)
    if input_tokens is None and output_tokens is None:
        input_tokens, output_tokens = _root_usage(root)
    latency = (root.end_time - root.start_time).total_seconds() if root.end_time else None
    trace_metadata = {
        k: v for k, v in run_metadata.items() if k.startswith("combee_") or k == "thread_id"
    }
    trace_metadata.update(metadata or {})
    info = RunInfo(
        id=str(root.id),
        thread_id=str(run_metadata["thread_id"]) if run_metadata.get("thread_id") else None,
        tenant=tenant if tenant is not None else run_metadata.get("combee_tenant"),
        prompt_version=served,
        latency_seconds=max(0.0, latency) if latency is not None else None,
        error=_short_error(root.error),
        metadata=trace_metadata,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )
    outputs = root.outputs if isinstance(root.outputs, Mapping) else {}
    state_messages = to_messages(outputs.get("messages"))
    ran = [_tool_call(r) for r in tool_runs]
    update: dict[str, Any] = {"feedback": feedback} if feedback is not None else {}
    # A tree with its model or tool runs shows which tool calls the run made; a graph
    # run read back from LangSmith has none, and the caller's input alone says what
    # was sent.
    made = _made(model_runs, tool_runs) if model_runs or tool_runs else None
    if state_messages:
        given = to_messages((root.inputs or {}).get("messages"))
        asked = [m for m in given if m.type == "human"]
        start = invocation_start(
            state_messages, anchor_text=message_text(asked[-1].content) if asked else None
        )
        trace = trace_from_messages(
            state_messages,
            info,
            start=start,
            model_from=_given(given, start),
            made=made,
            ran=_results(tool_runs) if made is not None else None,
        )
        # Tool runs of earlier turns are not in this tree, so every run belongs here.
        update["tool_calls"] = _merge_calls(trace.tool_calls, ran)
        return trace.model_copy(update=update)
    conversation = _model_messages(model_runs[-1]) if model_runs else []
    trace = trace_from_messages(conversation, info, made=made)
    update["tool_calls"] = _merge_calls(trace.tool_calls, ran)
    if root.run_type not in _MODEL_RUNS and root.inputs:
        update["input"] = _pick(root.inputs, _INPUT_KEYS) or trace.input
        if root.outputs:
            update["output"] = _pick(root.outputs, _OUTPUT_KEYS)
    return trace.model_copy(update=update)


class CombeeTracer(BaseTracer):
    """A callback handler that captures each finished root run as a ``Trace``.

    Example::

        app = graph.compile().with_config(callbacks=[CombeeTracer(combee)])
        # or: app = combee.instrument(graph)

    Args:
        combee: The ``Combee`` that receives the traces (``combee.capture``).
        tenant: Tenant of every captured run; None: from the run's
            ``combee_tenant`` metadata, else ``combee.tenant_for`` on the run's
            metadata.
        version: Version to record as served; None: from the run's
            ``combee_version`` metadata (set by ``combee.node()``,
            ``combee.system_prompt()`` and ``combee.wrap_model()``).

    Raises:
        ConfigurationError: When an argument has the wrong type.

    Attributes:
        captured: How many traces were handed to ``combee.capture``.
        failed: How many finished runs could not be turned into a trace.
    """

    name = "combee_tracer"

    def __init__(
        self, combee: object, *, tenant: str | None = None, version: int | None = None
    ) -> None:
        agent = agent_side_of(combee)
        if tenant is not None and not isinstance(tenant, str):
            raise ConfigurationError("tenant", tenant, "a str or None")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ConfigurationError("version", version, "an int or None")
        super().__init__(_schema_format="original+chat")
        self.agent: AgentSide = agent
        self.tenant = tenant
        self.version = version
        self.captured = 0
        self.failed = 0
        self._lock = threading.RLock()
        self._finished: collections.deque[Run] = collections.deque()

    def __repr__(self) -> str:
        return f"CombeeTracer(prompt_id={self.agent.prompt_id!r}, tenant={self.tenant!r})"

    # The run tree is shared by callbacks from several threads: guard it.

    def _start_trace(self, run: Run) -> None:
        with self._lock:
            super()._start_trace(run)

    def _end_trace(self, run: Run) -> None:
        with self._lock:
            super()._end_trace(run)
            # BaseTracer never forgets a run's ordering entry; this tracer lives long.
            self.order_map.pop(run.id, None)
        self._drain()

    def _persist_run(self, run: Run) -> None:
        # Called by _end_trace under the lock: only queue; convert outside it.
        self._finished.append(run)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._finished:
                    return
                run = self._finished.popleft()
            self._capture(run)

    def _capture(self, run: Run) -> None:
        try:
            metadata = dict((run.extra or {}).get("metadata") or {})
            tenant = self.tenant
            if tenant is None and "combee_tenant" not in metadata:
                tenant = self.agent.run_tenant({"metadata": metadata, "configurable": {}})
            trace = trace_from_run(run, tenant=tenant, version=self.version)
            self.agent.capture(trace)
        except Exception:
            with self._lock:
                self.failed += 1
            logger.exception("cannot capture run %s; skipped", getattr(run, "id", "?"))
            return
        with self._lock:
            self.captured += 1
