"""``LeanCombeeMiddleware``: Combee's serving and capture inside ``wrap_model_call`` only.

Why it exists. Every ``before_agent`` or ``after_agent`` hook is one more node
in the agent's graph, and on an agent whose model answers instantly, those two
nodes alone cost about half a run (``docs/benchmarks.md``, "Hot-path
overhead"). ``wrap_model_call`` adds no node: it runs inside the model node the
agent has anyway. This class does all of ``CombeeMiddleware``'s work there:

* **Pin.** The first model call of an invocation picks the version (HEAD or a
  canary) and remembers it under the id of the human message that started the
  invocation (LangGraph gives every message an id), so later model calls of the
  same invocation, and a run resumed after an interrupt in the same process,
  get the same version. The root run is labelled then, as ``before_agent``
  would.
* **Serve.** Every model call gets the pinned playbook appended to its system
  prompt and carries the version in its run metadata, exactly as with
  ``CombeeMiddleware``.
* **Capture.** The model response that ends the invocation (one with no tool
  calls, or with a structured response) closes it: the invocation's messages
  plus that response become the ``Trace``.

What it gives up, against ``CombeeMiddleware``:

* An invocation ended by something other than a final model response (another
  middleware jumping to the end, a tool that returns directly, a model error)
  is not captured; its pin stays in memory until ``max_open_runs`` newer
  invocations push it out.
* Messages added after the last model call (by ``after_model`` hooks of other
  middleware) are not in the trace.
* The pin lives in process memory, not in the checkpointed state: a run
  resumed in another process is pinned again, to that process's HEAD.

Failure policy: the same as ``CombeeMiddleware``. Combee's own errors are
logged and the model call goes on unchanged; interrupts and the model's own
exceptions propagate.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, BaseMessage

from langgraph_combee._agent.middleware import (
    ModelCallResult,
    capture_run,
    guarded,
    serve,
    write_through,
)
from langgraph_combee._agent.runs import (
    child_metadata,
    current_config,
    given_run_id,
    run_id_in_tracers,
    run_tenant,
    tag_runs,
    version_metadata,
)
from langgraph_combee._agent.traces import invocation_start
from langgraph_combee._combee import Combee
from langgraph_combee._errors import ConfigurationError

__all__ = ["LeanCombeeMiddleware"]

_WHERE = "LeanCombeeMiddleware.wrap_model_call"


@dataclass(frozen=True)
class _Pin:
    """The version an invocation was pinned to, with what its trace needs."""

    tenant: str | None
    version: int
    run_key: str
    started: float


@dataclass(frozen=True)
class _Call:
    """One model call as prepared: the request to send, its labels, its invocation."""

    request: ModelRequest[Any]
    metadata: dict[str, Any]
    key: str | None
    pin: _Pin
    messages: list[BaseMessage]
    start: int


class LeanCombeeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """``CombeeMiddleware`` without graph nodes of its own: for the leanest hot path.

    Serves the learned prompt and captures traces like ``CombeeMiddleware``, from
    ``wrap_model_call`` alone, so it adds no node to the agent's graph. Choose it
    when the framework cost of a run matters (a fast model, a very high request
    rate); choose ``CombeeMiddleware`` to also capture runs that end without a
    final model response. The module docstring lists the differences.

    Example::

        agent = create_agent(model, tools, middleware=[combee.middleware(lean=True)])

    Args:
        combee: The ``Combee`` whose prompt is served and which receives traces.
        capture: Capture each invocation when its final model response arrives.
        max_open_runs: Invocations remembered at once (their pinned versions);
            the oldest is forgotten beyond it.

    Raises:
        ConfigurationError: An argument has the wrong type or range.
    """

    def __init__(self, combee: Combee, *, capture: bool = True, max_open_runs: int = 10_000):
        super().__init__()
        if not isinstance(combee, Combee):
            raise ConfigurationError("combee", combee, "a langgraph_combee.Combee")
        if not isinstance(capture, bool):
            raise ConfigurationError("capture", capture, "True or False")
        if isinstance(max_open_runs, bool) or not isinstance(max_open_runs, int):
            raise ConfigurationError("max_open_runs", max_open_runs, "an int >= 1")
        if max_open_runs < 1:
            raise ConfigurationError("max_open_runs", max_open_runs, "an int >= 1")
        self.combee = combee
        self.capture = capture
        self.max_open_runs = max_open_runs
        self.tools = []
        self._pins: OrderedDict[str, _Pin] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LeanCombeeMiddleware(prompt_id={self.combee.prompt_id!r}, capture={self.capture})"

    @property
    def open_runs(self) -> int:
        """Invocations pinned and not yet captured or forgotten."""
        return len(self._pins)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        """Serve the pinned playbook, call the model, capture a final response."""
        call = guarded(self.combee, _WHERE, lambda: self._begin(request))
        if call is None:
            return handler(request)
        with child_metadata(call.metadata):
            response = handler(call.request)
        self._end(call, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        """Async ``wrap_model_call``; differs only in awaiting the handler.

        The first run of a tenant in a process reads HEAD from the store; that
        one call is prepared on a worker thread, so it neither blocks the event
        loop nor fails on async-only stores (``AsyncPostgresStore``,
        ``AsyncSqliteStore``), which refuse synchronous calls from the loop.
        """
        if guarded(self.combee, _WHERE, lambda: self._cold(request)):
            call = await asyncio.to_thread(
                guarded, self.combee, _WHERE, lambda: self._begin(request)
            )
        else:
            call = guarded(self.combee, _WHERE, lambda: self._begin(request))
        if call is None:
            return await handler(request)
        with child_metadata(call.metadata):
            response = await handler(call.request)
        if write_through(self.combee):
            # The capture writes the store: off the loop (see CombeeMiddleware.aafter_agent).
            await asyncio.to_thread(self._end, call, response)
        else:
            self._end(call, response)
        return response

    # ---- pin and serve ----------------------------------------------------

    def _cold(self, request: ModelRequest[Any]) -> bool:
        """Whether preparing this call reads the store (a new run of an uncached tenant)."""
        messages = request.state.get("messages") or []
        if self._recall(messages[invocation_start(messages)].id if messages else None):
            return False
        return not self.combee.server.has_head(run_tenant(self.combee, current_config()))

    def _begin(self, request: ModelRequest[Any]) -> _Call:
        messages = list(request.state.get("messages") or [])
        start = invocation_start(messages)
        key = messages[start].id if messages else None
        pin = self._recall(key)
        if pin is None:
            pin = self._pin(request)
            if key is not None:
                self._remember(key, pin)
        version = self.combee.version_for_run(pin.tenant, pin.version)
        served, metadata = serve(self.combee, request, version)
        return _Call(served, metadata, key, pin, messages, start)

    def _pin(self, request: ModelRequest[Any]) -> _Pin:
        config = current_config()
        tenant = run_tenant(self.combee, config)
        run_key = (
            given_run_id(config, request.runtime)
            or run_id_in_tracers(config, level="graph")
            or str(uuid.uuid4())
        )
        version = self.combee.select_version(tenant, run_key)
        tag_runs(config, version_metadata(self.combee.prompt_id, version))
        return _Pin(tenant, version.version, run_key, time.monotonic())

    def _recall(self, key: str | None) -> _Pin | None:
        if key is None:
            return None
        with self._lock:
            return self._pins.get(key)

    def _remember(self, key: str, pin: _Pin) -> None:
        with self._lock:
            self._pins[key] = pin
            while len(self._pins) > self.max_open_runs:
                self._pins.popitem(last=False)

    def _forget(self, key: str | None) -> None:
        if key is not None:
            with self._lock:
                self._pins.pop(key, None)

    # ---- capture ------------------------------------------------------------

    def _end(self, call: _Call, response: ModelCallResult) -> None:
        """Close the invocation if ``response`` ends it (capturing it when asked)."""

        def close() -> None:
            produced = _final_messages(response)
            if produced is None:
                return
            self._forget(call.key)
            if self.capture:
                capture_run(
                    self.combee,
                    [*call.messages, *produced],
                    start=call.start,
                    runtime=call.request.runtime,
                    run_key=call.pin.run_key,
                    tenant=call.pin.tenant,
                    version=call.pin.version,
                    started=call.pin.started,
                )

        guarded(self.combee, _WHERE, close)


def _final_messages(response: ModelCallResult) -> list[BaseMessage] | None:
    """The messages of a response that ends the invocation; None if the agent goes on."""
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    if isinstance(response, AIMessage):
        return None if response.tool_calls else [response]
    if response.structured_response is not None:
        return list(response.result)
    last = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
    if last is None or last.tool_calls:
        return None
    return list(response.result)
