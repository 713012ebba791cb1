"""``CombeeMiddleware``: the one line that makes a ``create_agent`` agent learn.

Per invocation of the agent:

1. ``before_agent`` pins the prompt version: the tenant from the run's config
   (``Combee.scope``), the version from ``Combee.select_version`` (HEAD or a
   canary), written to private state fields that are left out of the graph's
   input and output schemas. Each invocation of a multi-turn thread re-pins; a
   run resumed after an interrupt keeps its pin (the fields are checkpointed).
2. ``wrap_model_call`` appends the pinned version's rendered playbook to the
   app's system prompt with ``request.override(system_message=...)``, so the
   prompt never enters graph state or checkpoints, and a version accepted while
   the run is in flight does not change its later model calls.
3. ``after_agent`` turns the invocation's messages into a ``Trace`` and hands it
   to ``Combee.capture`` (memory only; a background thread writes the queue).

Run metadata. Every run served carries ``combee_prompt_id``, ``combee_version``
and (with a tenant) ``combee_tenant`` in its tracing metadata, so LangSmith and
any other tracer can filter by version. Verified mechanism (see ``_agent/runs.py``
and ``tests/test_middleware.py``): the model-call runs get it because the model
is called inside ``child_metadata`` (the node's config context variable, patched
for the duration of the call, which the chat model inherits); the agent's root
run gets it because ``before_agent`` updates the metadata of the open root run
in every ``BaseTracer`` attached to the run (``LangChainTracer`` sends that
metadata when it patches the finished run). Intermediate node runs are not
labelled.

Capture and ids. The trace id is the ``run_id`` the caller passed in the config
(so ``combee.feedback(run_id, ...)`` finds it), else the agent run's id as seen
by an attached tracer (LangSmith's), else a fresh id. A trace covers the
invocation's messages, from the human message that started it; earlier turns
of the thread are left out. Runs that end in an exception are not captured
(LangGraph runs no ``after_agent`` then). To capture those as well, attach
``combee.tracer()`` to the agent and use ``CombeeMiddleware(combee,
capture=False)``; with both capturing, the queue keeps the first trace of a run.

Python 3.10: LangGraph hands a node's config to async code through context
variables only from Python 3.11 on, so in async runs on 3.10 the tenant scope
sees an empty config and runs are not labelled (the prompt is still served).

Failure policy: an exception raised inside Combee's own code in any hook is
logged and the agent goes on as if Combee were absent; interrupts
(``GraphBubbleUp``) always propagate. Exceptions from the model or from other
middleware are never caught.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from langgraph_combee._agent.runs import (
    child_metadata,
    current_config,
    given_run_id,
    run_id_in_tracers,
    run_tenant,
    tag_runs,
    thread_id_of,
    version_metadata,
)
from langgraph_combee._agent.serving import UNSCOPED
from langgraph_combee._agent.traces import RunInfo, invocation_start, trace_from_messages
from langgraph_combee._combee import Combee
from langgraph_combee._core.prompting import with_playbook
from langgraph_combee._core.types import PromptVersion
from langgraph_combee._errors import ConfigurationError

__all__ = ["CombeeMiddleware", "CombeeState"]

logger = logging.getLogger("langgraph_combee.middleware")

T = TypeVar("T")

ModelCallResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class CombeeState(AgentState[Any]):
    """The agent state with Combee's private fields (never in input or output).

    Attributes:
        combee_version: The prompt version pinned for the current invocation.
        combee_tenant: The tenant whose playbook is served.
        combee_run_key: The run's id as known when it was pinned.
        combee_start_id: Id of the message that started the invocation.
        combee_started: Monotonic start time of the invocation (not checkpointed).
    """

    combee_version: NotRequired[Annotated[int | None, PrivateStateAttr]]
    combee_tenant: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_run_key: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_start_id: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_started: NotRequired[Annotated[float | None, UntrackedValue, PrivateStateAttr]]


class CombeeMiddleware(AgentMiddleware[CombeeState, Any, Any]):
    """Serve the learned prompt to a ``create_agent`` agent and capture its runs.

    Put it FIRST in ``middleware=[...]``: the first middleware is the outermost.
    Then its ``before_agent`` pins the version before any other hook runs, its
    ``after_agent`` runs last and captures the final messages, and its
    ``wrap_model_call`` wraps every retry or fallback made by inner middleware,
    all of which get the same prompt and the same run metadata. The one
    exception: middleware that *replaces* the system message (such as
    ``@dynamic_prompt``) must come before it, or it would discard the playbook.

    Example::

        combee = Combee(prompt_id="support-agent", model="openai:gpt-4.1-mini")
        agent = create_agent(
            model, tools, system_prompt="You route tickets.",
            middleware=[combee.middleware()],   # or CombeeMiddleware(combee)
        )
        agent.invoke({"messages": [...]}, config={"run_id": run_id})
        combee.feedback(run_id, correct=False, ground_truth="FIN-REFUNDS")

    Args:
        combee: The ``Combee`` whose prompt is served and which receives traces.
        capture: Capture each finished invocation as a ``Trace`` (default True).
            With False the middleware only serves the prompt.

    Raises:
        ConfigurationError: ``combee`` is not a ``Combee`` or ``capture`` not a bool.
    """

    state_schema = CombeeState

    def __init__(self, combee: Combee, *, capture: bool = True) -> None:
        super().__init__()
        if not isinstance(combee, Combee):
            raise ConfigurationError("combee", combee, "a langgraph_combee.Combee")
        if not isinstance(capture, bool):
            raise ConfigurationError("capture", capture, "True or False")
        self.combee = combee
        self.capture = capture
        self.tools = []

    def __repr__(self) -> str:
        return f"CombeeMiddleware(prompt_id={self.combee.prompt_id!r}, capture={self.capture})"

    # ---- before_agent: pin ------------------------------------------------

    def before_agent(self, state: CombeeState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Pin the prompt version for this invocation (private state fields)."""
        return self._guard("before_agent", lambda: self._pin(state, runtime))

    async def abefore_agent(
        self, state: CombeeState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_agent``: the same work, on a worker thread.

        The first run of a tenant in a process reads HEAD from the store
        synchronously; off the event loop, that read neither blocks the loop nor
        fails on async-only stores (``AsyncPostgresStore``, ``AsyncSqliteStore``),
        which refuse synchronous calls from the loop's thread.
        """
        return await asyncio.to_thread(
            self._guard, "before_agent", lambda: self._pin(state, runtime)
        )

    def _pin(self, state: CombeeState, runtime: Runtime[Any] | None) -> dict[str, Any]:
        config = current_config()
        tenant = run_tenant(self.combee, config)
        run_key = (
            given_run_id(config, runtime)
            or run_id_in_tracers(config, level="graph")
            or str(uuid.uuid4())
        )
        version = self.combee.select_version(tenant, run_key)
        tag_runs(config, version_metadata(self.combee.prompt_id, version))
        messages = state.get("messages") or []
        start = invocation_start(messages)
        return {
            "combee_version": version.version,
            "combee_tenant": tenant,
            "combee_run_key": run_key,
            "combee_start_id": messages[start].id if messages else None,
            "combee_started": time.monotonic(),
        }

    # ---- wrap_model_call: serve -------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        """Append the pinned playbook to the system prompt, label the call, call the model."""
        request, metadata = self._prepare(request)
        with child_metadata(metadata):
            return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        """Async ``wrap_model_call``; differs only in awaiting the handler."""
        request, metadata = self._prepare(request)
        with child_metadata(metadata):
            return await handler(request)

    def _prepare(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], dict[str, Any]]:
        prepared = self._guard("wrap_model_call", lambda: self._inject(request))
        return prepared if prepared is not None else (request, {})

    def _inject(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], dict[str, Any]]:
        return serve(self.combee, request, self._served(request.state, request.runtime))

    def _served(self, state: Mapping[str, Any], runtime: Runtime[Any] | None) -> PromptVersion:
        number = state.get("combee_version")
        if isinstance(number, int):
            return self.combee.version_for_run(state.get("combee_tenant"), number)
        # No pin (before_agent failed, or the thread predates the middleware).
        config = current_config()
        tenant = run_tenant(self.combee, config)
        return self.combee.select_version(tenant, given_run_id(config, runtime))

    # ---- after_agent: capture ---------------------------------------------

    def after_agent(self, state: CombeeState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Capture the finished invocation as a ``Trace`` (when ``capture``)."""
        if self.capture:
            self._guard("after_agent", lambda: self._capture(state, runtime))
        return None

    async def aafter_agent(
        self, state: CombeeState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``after_agent``: the same work.

        Memory only, on the event loop; except in ``durability="write_through"``
        mode, where the store write runs on a worker thread: it must neither block
        the loop nor be refused by an async-only store, which rejects synchronous
        calls from the loop's thread (every run would then fall back to the
        buffer, with the healthy store reported failing).
        """
        if not self.capture:
            return None
        if write_through(self.combee):
            await asyncio.to_thread(
                self._guard, "after_agent", lambda: self._capture(state, runtime)
            )
        else:
            self._guard("after_agent", lambda: self._capture(state, runtime))
        return None

    def _capture(self, state: CombeeState, runtime: Runtime[Any] | None) -> None:
        messages = list(state.get("messages") or [])
        capture_run(
            self.combee,
            messages,
            start=invocation_start(messages, anchor_id=state.get("combee_start_id")),
            runtime=runtime,
            run_key=state.get("combee_run_key"),
            tenant=state.get("combee_tenant"),
            version=state.get("combee_version"),
            started=state.get("combee_started"),
        )

    # ---- failure policy -----------------------------------------------------

    def _guard(self, hook: str, call: Callable[[], T]) -> T | None:
        """Run Combee's own code for ``hook``; log a failure and return None."""
        return guarded(self.combee, f"CombeeMiddleware.{hook}", call)


def serve(
    combee: Combee, request: ModelRequest[Any], version: PromptVersion
) -> tuple[ModelRequest[Any], dict[str, Any]]:
    """``request`` with ``version``'s playbook appended to its system prompt, and the run labels."""
    metadata = version_metadata(combee.prompt_id, version)
    # What verified adoption replays with: the agent's model, its own prompt, its tools.
    combee.replayer.agent_calls.remember(
        request.model, request.system_message, request.tools, request.tool_choice
    )
    playbook = combee.server.rendered(version)
    if not playbook:
        return request, metadata
    system = with_playbook(request.system_message, playbook)
    return request.override(system_message=system), metadata


def capture_run(
    combee: Combee,
    messages: Sequence[BaseMessage],
    *,
    start: int,
    runtime: Runtime[Any] | None,
    run_key: str | None,
    tenant: str | None,
    version: int | None,
    started: float | None,
) -> None:
    """Hand the invocation that began at ``messages[start]`` to ``combee.capture``."""
    if tenant == UNSCOPED:
        return  # the run's scope failed (counted when it did): not captured
    config = current_config()
    latency = max(0.0, time.monotonic() - started) if isinstance(started, float) else None
    metadata: dict[str, Any] = {"combee_prompt_id": combee.prompt_id}
    if version is not None:
        metadata["combee_version"] = version
    if tenant is not None:
        metadata["combee_tenant"] = tenant
    run = RunInfo(
        id=given_run_id(config, runtime) or run_id_in_tracers(config, level="graph") or run_key,
        thread_id=thread_id_of(config, runtime),
        tenant=tenant,
        prompt_version=version,
        latency_seconds=latency,
        metadata=metadata,
    )
    if run.id is None:
        combee.capture(trace_from_messages(messages, run, start=start))
        return
    # Building the trace is most of capture's cost: the serving thread does it.
    combee.capture_later(run.id, lambda: trace_from_messages(messages, run, start=start))


def write_through(combee: Combee) -> bool:
    """Whether capturing a run writes the store (so async hooks must leave the loop)."""
    return combee.server.settings.durability == "write_through"


def guarded(combee: Combee, where: str, call: Callable[[], T]) -> T | None:
    """Run Combee's own code; log a failure and return None. Interrupts propagate."""
    try:
        return call()
    except GraphBubbleUp:
        raise
    except Exception:
        logger.exception(
            "%s failed (prompt %r); the run goes on without Combee", where, combee.prompt_id
        )
        return None
