"""``CombeeMiddleware``: the one line that makes a ``create_agent`` agent learn.

One class, two ways of working, chosen by ``hooks=``:

**Default (``hooks=False``): everything inside ``wrap_model_call``.** Every
``before_agent`` or ``after_agent`` hook is one more node in the agent's graph,
and on an agent whose model answers instantly those two nodes alone cost about
half a run (``docs/benchmarks.md``, "Hot-path overhead"); ``wrap_model_call``
adds no node, it runs inside the model node the agent has anyway. Per model call:

1. *Pin.* The first model call of an invocation picks the version (HEAD or a
   canary, ``_agent/pinning.py``). When the invocation goes on past that call
   (the model asked for a tool, or an interrupt was raised inside the call), the
   pin is remembered under the run's thread id, tenant and the id of the human
   message that started the invocation (LangGraph gives every message an id; see
   ``_key``), so later model calls of the same invocation, and a run resumed
   after an interrupt in the same process, get the same version; a run that ends
   with its first call leaves nothing to forget. The root run is labelled then.
2. *Serve.* The pinned version's rendered playbook is appended to the app's
   system prompt with ``request.override(system_message=...)``, so the prompt
   never enters graph state or checkpoints.
3. *Capture.* The model response that ends the invocation (no tool calls, or a
   structured response) closes it: the invocation's messages plus that response
   become the ``Trace``. A model call that raises is captured with the error,
   and the exception goes on, but only provisionally: a retry or fallback
   middleware outside this one may call the model again for the same
   invocation, so its pin stays remembered (marked failed), and the run's next
   capture, with the answer or with a later error, takes the failed trace's
   place (in the buffer, or in the queue while the trace waits there: one trace
   per run). A run whose last model call failed stays captured as failed.

**``hooks=True``: pin in ``before_agent``, capture in ``after_agent``.** Two graph
nodes more per run, for what only they can see: invocations ended by another
middleware jumping to the end or by a ``return_direct`` tool, messages added
after the last model call, and a pin kept in the checkpointed state (a run
resumed in another process keeps its version). Runs that end in an exception are
not captured in this mode (LangGraph runs no ``after_agent`` then). The table in
``docs/integration.md`` ("What is captured") lists what each mode captures.

Run metadata. Every run served carries ``combee_prompt_id``, ``combee_version``
and (with a tenant) ``combee_tenant`` in its tracing metadata, so LangSmith and
any other tracer can filter by version. Verified mechanism (see ``_agent/runs.py``
and ``tests/agent/test_middleware.py``): the model-call runs get it because the model
is called inside ``child_metadata`` (the node's config context variable, patched
for the duration of the call, which the chat model inherits); the agent's root
run gets it because pinning updates the metadata of the open root run in every
``BaseTracer`` attached to the run (``LangChainTracer`` sends that metadata when
it patches the finished run). Intermediate node runs are not labelled.

Capture and ids. The trace id is the ``run_id`` the caller passed in the config
(so ``combee.feedback(run_id, ...)`` finds it), else the agent run's id as seen
by an attached tracer (LangSmith's), else a fresh id. A trace covers the
invocation's messages, from the human message that started it; earlier turns
of the thread are left out. To capture every run whatever ended it, attach
``combee.tracer()`` to the agent as well and use ``capture=False`` here; with
both capturing, the queue keeps the first trace of a run.

Python 3.10: LangGraph hands a node's config to async code through context
variables only from Python 3.11 on, so in async runs on 3.10 the tenant scope
sees an empty config and runs are not labelled (the prompt is still served).

Failure policy: an exception raised inside Combee's own code in any hook is
logged and the agent goes on as if Combee were absent; interrupts
(``GraphBubbleUp``) always propagate. Exceptions from the model or from other
middleware are never caught (a model error is only recorded on its way out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import types
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Annotated, Any, TypeVar, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
    ToolCallRequest,
)
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.errors import GraphBubbleUp
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from langgraph_combee._agent.pinning import Pin, Pinner
from langgraph_combee._agent.runs import (
    child_metadata,
    current_config,
    given_run_id,
    observed,
    run_id_in_tracers,
    run_ids,
    run_labels,
    task_id_of,
    thread_id_of,
    version_metadata,
)
from langgraph_combee._agent.serving import UNSCOPED
from langgraph_combee._agent.side import AgentSide, agent_side_of
from langgraph_combee._agent.textcalls import with_text_calls
from langgraph_combee._agent.traces import (
    RunInfo,
    invocation_start,
    request_text,
    result_digest,
    trace_from_messages,
)
from langgraph_combee._core.prompting import with_playbook
from langgraph_combee._core.types import PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError, MiddlewareOrderWarning

__all__ = ["CombeeMiddleware", "CombeeState"]

logger = logging.getLogger("langgraph_combee.middleware")

T = TypeVar("T")

ModelCallResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]

_PROMPT_CACHE = 64  # combined system messages kept per middleware


class CombeeState(AgentState[Any]):
    """The agent state with Combee's private fields (never in input or output).

    Used by ``CombeeMiddleware(hooks=True)`` only: the default mode keeps its pins
    in memory and adds nothing to the state.

    Attributes:
        combee_version: The prompt version pinned for the current invocation.
        combee_tenant: The tenant whose playbook is served.
        combee_run_key: The run's id as known when it was pinned.
        combee_start_id: Id of the message that started the invocation.
        combee_started: Monotonic start time of the invocation (not checkpointed).
        combee_given: How many messages the state held when the invocation was
            pinned: those after its first message came in the run's input, not
            from the model, and are captured not attested.
    """

    combee_version: NotRequired[Annotated[int | None, PrivateStateAttr]]
    combee_tenant: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_run_key: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_start_id: NotRequired[Annotated[str | None, PrivateStateAttr]]
    combee_started: NotRequired[Annotated[float | None, UntrackedValue, PrivateStateAttr]]
    combee_given: NotRequired[Annotated[int | None, PrivateStateAttr]]


class _Call:
    """One model call as prepared: the request to send, its labels, its invocation.

    A plain class with ``__slots__``, not a frozen dataclass: one is made per
    model call, and a frozen dataclass's ``__init__`` costs a call per field.

    Attributes:
        request: The request to send (the playbook served).
        metadata: The run labels for the model's run (empty when nobody observes it).
        key: Where the invocation's pin is remembered (None: not remembered).
        pin: The invocation's pin (None in the hook mode: the state keeps it).
        recalled: Whether the pin was already remembered (a later call of the invocation).
        messages: The invocation's messages so far (a copy of the state's list).
        start: Index of the invocation's first message in ``messages``.
        config: The node's config, read once for the whole call.
        run_id: The ``run_id`` the caller passed (``given_run_id``), read once.
        thread_id: The run's thread id (``thread_id_of``), read once.
    """

    __slots__ = (
        "config",
        "key",
        "messages",
        "metadata",
        "pin",
        "recalled",
        "request",
        "run_id",
        "start",
        "thread_id",
    )

    def __init__(
        self,
        request: ModelRequest[Any],
        metadata: dict[str, Any],
        key: Hashable | None,
        pin: Pin | None,
        messages: list[BaseMessage],
        start: int,
        recalled: bool = False,
        config: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        # Positional: one is made per model call, and keyword arguments cost more.
        self.request = request
        self.metadata = metadata
        self.key = key
        self.pin = pin
        self.recalled = recalled
        self.messages = messages
        self.start = start
        self.config = config
        self.run_id = run_id
        self.thread_id = thread_id


# Entered instead of ``child_metadata`` when there are no labels to add (nobody
# observes the run): the generator-based context manager costs a few
# microseconds per call for nothing then. ``nullcontext`` keeps no state, so one
# instance serves every call, on every thread.
_NO_LABELS: contextlib.nullcontext[None] = contextlib.nullcontext()


class CombeeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Serve the learned prompt to a ``create_agent`` agent and capture its runs.

    Put it FIRST in ``middleware=[...]``: the first middleware is the outermost.
    Its ``wrap_model_call`` then wraps every retry or fallback made by inner
    middleware, all of which get the same prompt and the same run metadata (and,
    with ``hooks=True``, its ``before_agent`` pins before any other hook runs and
    its ``after_agent`` runs last). The one exception: middleware that *replaces*
    the system message (such as ``@dynamic_prompt``) must come before it, or it
    would discard the playbook. A retry or fallback middleware may come before
    it too: every attempt is then served the run's version, and the run is
    captured once, with what its last attempt ended in (a failed attempt is
    captured provisionally and superseded by the next). Wrapped by any other
    middleware's ``wrap_model_call``, it issues a ``MiddlewareOrderWarning`` once,
    on its first synchronous model call.

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
        hooks: False (default): all the work inside ``wrap_model_call``, no graph
            node of its own (the smallest overhead). True: pin in ``before_agent``
            and capture in ``after_agent``, to also capture invocations ended by
            other middleware or a ``return_direct`` tool and keep the pin in the
            checkpointed state. The module docstring lists the differences.
        max_open_runs: Invocations whose pin is remembered at once in the default
            mode; the oldest is forgotten beyond it (an invocation that never
            reaches a final model response must not hold memory forever).

    Raises:
        ConfigurationError: An argument has the wrong type or range.
    """

    def __new__(
        cls,
        combee: object = None,
        *,
        capture: bool = True,
        hooks: bool = False,
        max_open_runs: int = 10_000,
    ) -> CombeeMiddleware:
        # create_agent adds a hook's graph node when the middleware's *class*
        # overrides it, so the hook mode is a private subclass of this one (and
        # of an app's own subclass). ``combee`` has a default only because
        # ``copy.copy`` calls ``__new__`` without arguments; ``__init__`` checks it.
        if hooks is True and not issubclass(cls, _HookedCombeeMiddleware):
            cls = _hooked(cls)
        return super().__new__(cls)

    def __init__(
        self,
        combee: object,
        *,
        capture: bool = True,
        hooks: bool = False,
        max_open_runs: int = 10_000,
    ) -> None:
        super().__init__()
        agent = agent_side_of(combee)
        if not isinstance(capture, bool):
            raise ConfigurationError("capture", capture, "True or False")
        if not isinstance(hooks, bool):
            raise ConfigurationError("hooks", hooks, "True or False")
        if isinstance(max_open_runs, bool) or not isinstance(max_open_runs, int):
            raise ConfigurationError("max_open_runs", max_open_runs, "an int >= 1")
        if max_open_runs < 1:
            raise ConfigurationError("max_open_runs", max_open_runs, "an int >= 1")
        self.agent: AgentSide = agent
        self.capture = capture
        self.hooks = hooks
        self.max_open_runs = max_open_runs
        self.tools = []
        self._pins = Pinner(agent, limit=max_open_runs)
        self._made = _MadeCalls(max_open_runs)
        self._ran = _ToolRuns(_RUNS_PER_OPEN_RUN * max_open_runs)
        self._prompts: OrderedDict[
            tuple[int, str], tuple[SystemMessage | None, SystemMessage | None]
        ] = OrderedDict()
        self._prompts_lock = threading.Lock()
        self._order_checked = False  # whether the first model call looked for outer layers

    @property
    def name(self) -> str:
        """The graph node prefix: the same in both modes."""
        return "CombeeMiddleware"

    def __repr__(self) -> str:
        return (
            f"CombeeMiddleware(prompt_id={self.agent.prompt_id!r}, capture={self.capture}, "
            f"hooks={self.hooks})"
        )

    @property
    def open_runs(self) -> int:
        """Invocations pinned in memory and not yet captured or forgotten."""
        return len(self._pins)

    # ---- wrap_model_call: pin, serve, capture ------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        """Serve the pinned playbook, call the model, capture a final response."""
        if not self._order_checked:
            self._check_order(request, sys._getframe(1))
        # ``_guard`` written out: two frames fewer on every model call.
        call: _Call | None
        try:
            call = self._begin(request)
        except GraphBubbleUp:
            raise
        except Exception:
            _log_failure(self.agent, "CombeeMiddleware.wrap_model_call")
            call = None
        if call is None:
            # Combee's own part failed (a dead store): the agent still gets its tool calls.
            return self._text_calls(request, handler(request))
        with child_metadata(call.metadata) if call.metadata else _NO_LABELS:
            try:
                response = handler(call.request)
            except GraphBubbleUp:
                self._keep(call)
                raise
            except Exception as exc:
                self._failed(call, exc)
                raise
        result = self._text_calls(call.request, response)
        self._end(call, result)
        return result

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool and remember what it returned: only that is its attested result."""
        result = handler(request)
        if self.capture:
            self._ran.record(result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async ``wrap_tool_call``: the same work."""
        result = await handler(request)
        if self.capture:
            self._ran.record(result)
        return result

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
        if self.agent.server.by_meaning or self._guard(self._cold, request):
            # The focus embedder is sync user code: never on the event loop.
            call = await asyncio.to_thread(self._guard, self._begin, request)
        else:
            call = self._guard(self._begin, request)
        if call is None:
            return self._text_calls(request, await handler(request))
        through = write_through(self.agent)
        with child_metadata(call.metadata) if call.metadata else _NO_LABELS:
            try:
                response = await handler(call.request)
            except GraphBubbleUp:
                self._keep(call)
                raise
            except Exception as exc:
                if through:
                    await asyncio.to_thread(self._failed, call, exc)
                else:
                    self._failed(call, exc)
                raise
        result = self._text_calls(call.request, response)
        if through:
            # The capture writes the store: off the loop (see _HookedCombeeMiddleware).
            await asyncio.to_thread(self._end, call, result)
        else:
            self._end(call, result)
        return result

    def _check_order(self, request: ModelRequest[Any], caller: types.FrameType | None) -> None:
        """Warn (``MiddlewareOrderWarning``) when another middleware wraps this one's model calls.

        Runs on the first synchronous model call only. A middleware listed
        before this one calls it from inside its own ``wrap_model_call``, so its
        frame is on the stack between here and the agent's graph. Async runs are
        not checked: each layer's ``awrap_model_call`` may run as a task of its
        own, whose frames do not lead back to the layer awaiting it. The outer
        layers the docs allow raise nothing: retry and fallback middleware, and
        any layer once the system message was replaced outside.
        """
        self._order_checked = True  # set first: concurrent first calls warn at most once more
        try:
            outer = _outer_layer(self, request, caller)
        except Exception:  # introspection must never break a run
            logger.debug("could not look for middleware outside CombeeMiddleware", exc_info=True)
            return
        if outer is not None:
            warnings.warn(
                MiddlewareOrderWarning(
                    f"CombeeMiddleware (prompt {self.agent.prompt_id!r}) runs inside "
                    f"{type(outer).__name__}'s wrap_model_call: put combee.middleware() first "
                    "in create_agent(middleware=[...]), so that it is the outermost layer "
                    "(only a middleware that replaces the system message, or a retry or "
                    "fallback middleware, may come before it). This warning is issued once."
                ),
                stacklevel=3,
            )

    def _text_calls(self, request: ModelRequest[Any], response: ModelCallResult) -> ModelCallResult:
        """``response`` with tool calls written as text made real (``textcalls``), when on."""
        if not request.tools:
            return response
        return self._guard(self._recovered, request, response) or response

    def _recovered(self, request: ModelRequest[Any], response: ModelCallResult) -> ModelCallResult:
        if not self.agent.server.serving_settings.recover_tool_calls:
            return response
        return with_text_calls(request, response)

    def _cold(self, request: ModelRequest[Any]) -> bool:
        """Whether preparing this call reads the store (a new run of an uncached tenant)."""
        messages = request.state.get("messages") or []
        config = current_config()
        return self._pins.cold(config, self._key(messages, config, request.runtime))

    def _begin(self, request: ModelRequest[Any]) -> _Call:
        # A copy: middleware inside this one may change the request's list in place.
        messages = list(request.state.get("messages") or [])
        start = invocation_start(messages)
        config = var_child_runnable_config.get()  # ``current_config()``
        runtime = request.runtime
        agent = self.agent
        # What ``_key`` and ``Pinner.pin`` would each read, read once: the tenant
        # (the app's ``scope``, called once per model call), the run and thread ids.
        tenant = None if agent.scope is None else agent.tenant_of_run(config)
        given, thread_id = run_ids(config, runtime)
        message_id = messages[start].id if messages else None
        key = None if message_id is None else (thread_id, tenant, message_id)
        found = self._pins.recall(key)
        if (
            found is not None
            and found.failed_in is not None
            and found.failed_in != task_id_of(config)
        ):
            # A failed run is retried within its model node: a call from another
            # node execution is a new invocation that reuses its message id.
            found = None
        if found is not None:
            pin, version = found, agent.version_for_run(found.tenant, found.version)
        else:
            # Not remembered yet: ``_end`` remembers it only if the invocation goes
            # on (most end with this very call, and then there is nothing to forget).
            run_key = given or run_id_in_tracers(config, level="graph")
            pin, version = self._pins.fresh(config, tenant, run_key)
            # What the run holds at its first model call came from its caller, not
            # from the model: tool results there are never trusted evidence.
            pin = pin._replace(model_from=len(messages), made=())
        served, metadata = self._serve(request, version, config)
        return _Call(
            served, metadata, key, pin, messages, start, found is not None, config, given, thread_id
        )

    def _keep(self, call: _Call) -> None:
        """Remember the call's pin: its invocation goes on (another model call, a resume)."""
        pin = call.pin
        if call.key is None or pin is None:
            return
        if not call.recalled:
            self._pins.keep(call.key, pin)
        elif pin.failed_in is not None:
            # A retry that went on: the run's next calls run in other nodes. Still
            # failed: its capture must supersede the failure.
            self._pins.keep(call.key, pin._replace(failed_in=None))

    def _key(
        self,
        messages: Sequence[BaseMessage],
        config: Mapping[str, Any] | None,
        runtime: Runtime[Any] | None,
        start: int | None = None,
    ) -> tuple[str | None, str | None, str] | None:
        """Where the invocation's pin is remembered: its thread, tenant and first message.

        The message id alone is not the invocation's: LangGraph writes the id it
        gives a message into the caller's own object, so an app that reuses one
        ``HumanMessage`` (a greeting, a health check) or sets ids itself sends the
        same id in other threads and tenants, which would then be served (and
        captured under) another run's pin, another tenant's playbook included.
        """
        if not messages:
            return None
        message_id = messages[invocation_start(messages) if start is None else start].id
        if message_id is None:
            return None
        return (thread_id_of(config, runtime), self.agent.tenant_of_run(config), message_id)

    def _serve(
        self, request: ModelRequest[Any], version: PromptVersion, config: Mapping[str, Any] | None
    ) -> tuple[ModelRequest[Any], dict[str, Any]]:
        """``serve``, with the combined system message kept for the next run.

        Every run of an agent sends the same system message object and, between
        two learning steps, the same playbook: the combined message is built once
        (a cache per middleware, keyed by the message's identity, which it keeps
        alive, and the text appended). A request whose focus repeats some rules
        after the playbook is served a text of its own, cached the same way
        (requests naming the same rules share it). Run labels are built only when
        a callback handler is attached to the run: otherwise nobody could read them.
        """
        agent = self.agent
        if agent.on_model_call is not None:
            # What verified adoption replays with: the agent's model, its own prompt, its tools.
            agent.on_model_call(
                request.model, request.system_message, request.tools, request.tool_choice
            )
        metadata = version_metadata(agent.prompt_id, version) if observed(config) else {}
        server = agent.server
        settings = server.serving_settings
        # Worked examples go as turns (``_agent.turns``), so the system prompt leaves them out.
        as_turns = settings.example_turns > 0
        playbook = server.rendered(version, examples=not as_turns)
        asked = request_text(request.messages) if version.playbook.bullets else ""
        turns: tuple[BaseMessage, ...] = ()
        # Only the call that answers the human's message: an example's answer shows the
        # first move, and served after a tool result it reads as one more call to make
        # (the 1.5B then made a second example's call).
        if as_turns and request.messages and isinstance(request.messages[-1], HumanMessage):
            turns = server.example_turns(version, asked)
        if not playbook:
            served = _with_system(request, request.system_message, turns) if turns else request
            return served, metadata
        system = request.system_message
        text = playbook
        if settings.focus_rules:
            text = server.focus(version, playbook, asked)
        cache_key = (id(system), text)
        cached = self._prompts.get(cache_key)  # one dict read: atomic, no lock
        if cached is not None and cached[0] is system:
            return _with_system(request, cached[1], turns), metadata
        combined = with_playbook(system, text)
        with self._prompts_lock:
            self._prompts[cache_key] = (system, combined)
            while len(self._prompts) > _PROMPT_CACHE:
                self._prompts.popitem(last=False)
        return _with_system(request, combined, turns), metadata

    def _end(self, call: _Call, response: ModelCallResult) -> None:
        """Close the invocation if ``response`` ends it (capturing it when asked)."""
        try:  # ``_guard`` written out, as in ``wrap_model_call``
            self._settle(call, response)
        except GraphBubbleUp:
            raise
        except Exception:
            _log_failure(self.agent, "CombeeMiddleware.wrap_model_call")

    def _settle(self, call: _Call, response: ModelCallResult) -> None:
        produced = _final_messages(response)
        pin = call.pin
        ids = _call_ids(response)
        if ids and pin is not None and pin.made is not None:
            # The calls this model call returned are the run's own: a client that adds
            # messages between two model calls (on resume) cannot add to them.
            call.pin = pin = pin._replace(made=(*pin.made, *ids))
            if produced is None and call.recalled and call.key is not None:
                self._pins.keep(call.key, pin)
        if produced is None:
            self._keep(call)
            return
        if call.recalled:
            self._pins.forget(call.key)
        self._capture(call, call.pin, produced, None)

    def _failed(self, call: _Call, exc: BaseException) -> None:
        """The model call raised: captured with the error, provisionally."""
        self._guard(self._fail, call, f"{type(exc).__name__}: {exc}")

    def _fail(self, call: _Call, error: str) -> None:
        # The invocation may not be over: a retry or fallback middleware outside
        # this one can call the model again. So the pin stays remembered, marked
        # failed, and that call (same run, same version, latency from the start)
        # captures the run again, superseding this failure. If none comes, the
        # failure is the run's trace; its pin is forgotten with the oldest.
        pin, task = call.pin, task_id_of(call.config)
        if call.key is not None and pin is not None and (not pin.failed or pin.failed_in != task):
            self._pins.keep(call.key, pin._replace(failed=True, failed_in=task))
        self._capture(call, pin, [], error)  # supersedes only an earlier failure

    def _capture(
        self, call: _Call, pin: Pin | None, produced: list[BaseMessage], error: str | None
    ) -> None:
        """``capture_run`` for the call's invocation, with what ``_begin`` already read."""
        if not self.capture or pin is None or pin.tenant == UNSCOPED:
            return  # an UNSCOPED run's scope failed (counted when it did): not captured
        run_id = call.run_id or run_id_in_tracers(call.config, level="graph") or pin.run_key
        # The call's own copy of the messages, used by nothing else once captured:
        # extended in place rather than copied again.
        messages = call.messages
        messages.extend(produced)
        latency = max(0.0, time.monotonic() - pin.started)
        recipe = _TraceRecipe(
            self.agent.prompt_id,
            messages,
            call.start,
            (run_id, call.thread_id, pin.tenant, pin.version, latency, error),
            pin.model_from,
            None if pin.made is None else frozenset(pin.made),
            None if pin.made is None else self._ran.of(messages[call.start :]),
        )
        if run_id is None:  # ``_hand_over``, written out (a pin made here always has a key)
            self.agent.capture(recipe())
        else:
            self.agent.capture_later(run_id, recipe, supersede=pin.failed)

    # ---- failure policy -----------------------------------------------------

    def _guard(self, call: Callable[..., T], *args: Any, hook: str = "wrap_model_call") -> T | None:
        """Run Combee's own ``call(*args)`` for ``hook``; log a failure and return None."""
        return guarded(self.agent, f"CombeeMiddleware.{hook}", call, *args)


class _HookedCombeeMiddleware(CombeeMiddleware):
    """``CombeeMiddleware(hooks=True)``: pins in ``before_agent``, captures in ``after_agent``."""

    state_schema = CombeeState

    # ---- before_agent: pin ------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Pin the prompt version for this invocation (private state fields)."""
        return self._guard(self._pin_state, state, runtime, hook="before_agent")

    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_agent``: the same work, on a worker thread.

        The first run of a tenant in a process reads HEAD from the store
        synchronously; off the event loop, that read neither blocks the loop nor
        fails on async-only stores (``AsyncPostgresStore``, ``AsyncSqliteStore``),
        which refuse synchronous calls from the loop's thread.
        """
        return await asyncio.to_thread(
            self._guard, self._pin_state, state, runtime, hook="before_agent"
        )

    def _pin_state(self, state: AgentState[Any], runtime: Runtime[Any] | None) -> dict[str, Any]:
        config = current_config()
        pin, _ = self._pins.pin(config, runtime, level="graph")
        messages = state.get("messages") or []
        start = invocation_start(messages)
        if messages:
            self._made.start(_made_key(config, runtime, messages[start].id))
        return {
            "combee_version": pin.version,
            "combee_tenant": pin.tenant,
            "combee_run_key": pin.run_key,
            "combee_start_id": messages[start].id if messages else None,
            "combee_started": pin.started,
            # What the state holds before any model call came from the caller (a
            # client may send a whole history): its tool results are not attested.
            "combee_given": len(messages),
        }

    # ---- wrap_model_call: serve the state's pin ----------------------------

    def _cold(self, request: ModelRequest[Any]) -> bool:
        return False  # pinned by before_agent, on a worker thread in async runs

    def _begin(self, request: ModelRequest[Any]) -> _Call:
        state = cast("CombeeState", request.state)
        number = state.get("combee_version")
        if isinstance(number, int):
            version = self.agent.version_for_run(state.get("combee_tenant"), number)
        else:
            # No pin (before_agent failed, or the thread predates the middleware).
            _, version = self._pins.pin(current_config(), request.runtime, level="graph")
        config = current_config()
        served, metadata = self._serve(request, version, config)
        key = _made_key(config, request.runtime, state.get("combee_start_id"))
        return _Call(served, metadata, key, None, [], 0)

    def _end(self, call: _Call, response: ModelCallResult) -> None:
        # Captured by after_agent, with every message of the invocation; what this
        # model call returned is remembered as the run's own calls.
        self._made.add(call.key, _call_ids(response))

    def _failed(self, call: _Call, exc: BaseException) -> None:
        return None  # not captured in this mode: LangGraph runs no after_agent

    # ---- after_agent: capture ---------------------------------------------

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Capture the finished invocation as a ``Trace`` (when ``capture``)."""
        if self.capture:
            self._guard(self._capture_state, state, runtime, hook="after_agent")
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
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
        if write_through(self.agent):
            await asyncio.to_thread(
                self._guard, self._capture_state, state, runtime, hook="after_agent"
            )
        else:
            self._guard(self._capture_state, state, runtime, hook="after_agent")
        return None

    def _capture_state(self, given: AgentState[Any], runtime: Runtime[Any] | None) -> None:
        state = cast("CombeeState", given)
        messages = list(state.get("messages") or [])
        made = self._made.pop(_made_key(current_config(), runtime, state.get("combee_start_id")))
        capture_run(
            self.agent,
            messages,
            start=invocation_start(messages, anchor_id=state.get("combee_start_id")),
            runtime=runtime,
            run_key=state.get("combee_run_key"),
            tenant=state.get("combee_tenant"),
            version=state.get("combee_version"),
            started=state.get("combee_started"),
            given=state.get("combee_given"),
            made=made,
            ran=None if made is None else self._ran.of(messages),
        )


_RUNS_PER_OPEN_RUN = 16
"""Tool runs remembered per open run the middleware may hold (``max_open_runs``)."""


class _ToolRuns:
    """What each tool run returned (``result_digest`` by call id), the last ``limit`` runs.

    A tool message holding anything else (a person's answer in its place, a message
    a client replaced on resume) is not the tool's result: not attested.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._ran: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, result: ToolMessage | Command[Any]) -> None:
        """Remember the tool messages of ``result`` (a message, or a command's update)."""
        if isinstance(result, ToolMessage):
            messages: list[Any] = [result]
        else:
            update = result.update
            found = update.get("messages") if isinstance(update, Mapping) else None
            messages = list(found) if isinstance(found, (list, tuple)) else []
        done = [
            (m.tool_call_id, result_digest(m.content))
            for m in messages
            if isinstance(m, ToolMessage) and m.tool_call_id
        ]
        if not done:
            return
        with self._lock:
            for call_id, digest in done:
                self._ran[call_id] = digest
                self._ran.move_to_end(call_id)
            while len(self._ran) > self.limit:
                self._ran.popitem(last=False)

    def of(self, messages: Sequence[BaseMessage]) -> dict[str, str | None]:
        """What the runs of the tool messages among ``messages`` returned, where known."""
        ids = [m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.tool_call_id]
        with self._lock:
            return {i: self._ran[i] for i in ids if i in self._ran}


def _made_key(
    config: Mapping[str, Any] | None, runtime: Runtime[Any] | None, start_id: object
) -> Hashable | None:
    """Where the hook mode remembers an invocation's own calls: its thread and first message."""
    if not isinstance(start_id, str):
        return None
    return (thread_id_of(config, runtime), start_id)


class _MadeCalls:
    """The ids of the tool calls each invocation's own model calls returned (the hook mode).

    In memory, as the default mode's pins are: an invocation whose model calls ran
    in another process (resumed elsewhere) is not found, and its calls are then
    judged by position alone. At most ``limit`` invocations are remembered.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._made: OrderedDict[Hashable, set[str]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, key: Hashable | None) -> None:
        """An invocation begins under ``key``: no call of it is known yet."""
        if key is not None:
            with self._lock:
                self._made[key] = set()
                self._made.move_to_end(key)
                while len(self._made) > self.limit:
                    self._made.popitem(last=False)

    def add(self, key: Hashable | None, ids: Sequence[str]) -> None:
        """Its model call under ``key`` returned the calls ``ids`` (an unknown key is ignored)."""
        if key is None:
            return
        with self._lock:
            found = self._made.get(key)
            if found is not None:
                found.update(ids)

    def pop(self, key: Hashable | None) -> frozenset[str] | None:
        """The invocation's calls, forgotten (it is over); None when it is not known."""
        if key is None:
            return None
        with self._lock:
            found = self._made.pop(key, None)
        return None if found is None else frozenset(found)


_HOOKED: dict[type[CombeeMiddleware], type[CombeeMiddleware]] = {}


def _hooked(cls: type[CombeeMiddleware]) -> type[CombeeMiddleware]:
    """The hook-mode class of ``cls`` (``CombeeMiddleware`` or an app's subclass of it)."""
    if cls is CombeeMiddleware:
        return _HookedCombeeMiddleware
    found = _HOOKED.get(cls)
    if found is None:
        made = type(
            cls.__name__,
            (cls, _HookedCombeeMiddleware),
            {"__module__": cls.__module__, "__qualname__": cls.__qualname__},
        )
        found = _HOOKED.setdefault(cls, made)  # one class per subclass, even in a race
    return found


def capture_run(
    agent: AgentSide,
    messages: Sequence[BaseMessage],
    *,
    start: int,
    runtime: Runtime[Any] | None,
    run_key: str | None,
    tenant: str | None,
    version: int | None,
    started: float | None,
    error: str | None = None,
    config: Mapping[str, Any] | None = None,
    supersede: bool = False,
    given: int | None = None,
    made: frozenset[str] | None = None,
    ran: Mapping[str, str | None] | None = None,
) -> None:
    """Hand the invocation that began at ``messages[start]`` to ``agent.capture``.

    ``config`` is the node's config when the caller has already read it (else
    it is read here). ``supersede``: the run's failure was captured before (a
    model call that raised), and this trace takes its place. ``given``: how many
    messages there were before the run's first model call (``trace_from_messages``'
    ``model_from``; None: not known). ``made``: the ids of the tool calls the
    run's own model calls returned (``trace_from_messages``' ``made``; None: not
    known). ``ran``: what its tool runs returned (``trace_from_messages``' ``ran``).
    """
    if tenant == UNSCOPED:
        return  # the run's scope failed (counted when it did): not captured
    if config is None:
        config = current_config()
    latency = max(0.0, time.monotonic() - started) if isinstance(started, float) else None
    run_id = given_run_id(config, runtime) or run_id_in_tracers(config, level="graph") or run_key
    recipe = _TraceRecipe(
        agent.prompt_id,
        messages,
        start,
        (run_id, thread_id_of(config, runtime), tenant, version, latency, error),
        given if isinstance(given, int) and not isinstance(given, bool) else None,
        made,
        ran,
    )
    _hand_over(agent, run_id, recipe, supersede)


def _hand_over(agent: AgentSide, run_id: str | None, recipe: _TraceRecipe, supersede: bool) -> None:
    """Give the run's trace to ``agent``: built now without a run id, else later."""
    if run_id is None:
        agent.capture(recipe())
        return
    # Building the trace is most of capture's cost: the serving thread does it.
    agent.capture_later(run_id, recipe, supersede=supersede)


class _TraceRecipe:
    """A finished invocation's trace, to be built later (on the serving thread).

    Holds only values read on the hot path (nothing of the calling context), so
    it can be called on any thread. The ``RunInfo`` and the run labels are made
    when it is called: on the hot path, a tuple of the facts is all it costs.
    """

    __slots__ = ("facts", "made", "messages", "model_from", "prompt_id", "ran", "start")

    def __init__(
        self,
        prompt_id: str,
        messages: Sequence[BaseMessage],
        start: int,
        facts: tuple[str | None, str | None, str | None, int | None, float | None, str | None],
        model_from: int | None = None,
        made: frozenset[str] | None = None,
        ran: Mapping[str, str | None] | None = None,
    ) -> None:
        self.prompt_id = prompt_id
        self.messages = messages
        self.start = start
        self.facts = facts  # run id, thread id, tenant, version, latency, error
        self.model_from = model_from
        self.made = made
        self.ran = ran

    def __call__(self) -> Trace:
        run_id, thread_id, tenant, version, latency, error = self.facts
        run = RunInfo(
            id=run_id,
            thread_id=thread_id,
            tenant=tenant,
            prompt_version=version,
            latency_seconds=latency,
            error=error,
            metadata=run_labels(self.prompt_id, version, tenant),
        )
        return trace_from_messages(
            self.messages,
            run,
            start=self.start,
            model_from=self.model_from,
            made=self.made,
            ran=self.ran,
        )


_ALLOWED_OUTSIDE = (ModelRetryMiddleware, ModelFallbackMiddleware)
_MAX_FRAMES = 200


def _outer_layer(
    ours: CombeeMiddleware, request: ModelRequest[Any], frame: types.FrameType | None
) -> AgentMiddleware[Any, Any, Any] | None:
    """The middleware wrapping ``ours``'s model call that the docs do not allow there, if any.

    Walks the calling frames from ``frame`` up to the agent's graph (the first
    frame of a ``Pregel`` method: a graph run further out is another agent's).
    A frame running another middleware's own ``wrap_model_call`` (its class's,
    decorator-made ones included) is an outer layer. Retry and fallback
    middleware are allowed there, and so is any layer when the request the
    agent made (the outermost one on the stack) had another system message than
    ``request``: a layer outside replaced it, and such a layer must come first.
    """
    found: AgentMiddleware[Any, Any, Any] | None = None
    original: ModelRequest[Any] | None = None
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        code = frame.f_code
        if code.co_argcount >= 2:
            local = frame.f_locals
            first, second = local.get(code.co_varnames[0]), local.get(code.co_varnames[1])
            if isinstance(first, Pregel):
                break
            for value in (first, second):
                if isinstance(value, ModelRequest):
                    original = value
            if (
                isinstance(first, AgentMiddleware)
                and first is not ours
                and not isinstance(first, _ALLOWED_OUTSIDE)
                and _runs_wrap(first, code)
            ):
                found = first
        frame = frame.f_back
    if original is not None and original.system_message is not request.system_message:
        return None  # replaced outside: the order the docs ask for such a layer
    return found


def _runs_wrap(owner: AgentMiddleware[Any, Any, Any], code: types.CodeType) -> bool:
    """Whether ``code`` is the body of ``owner``'s class's (a)``wrap_model_call``."""
    cls = type(owner)
    return any(
        getattr(getattr(cls, name, None), "__code__", None) is code
        for name in ("wrap_model_call", "awrap_model_call")
    )


def _with_system(
    request: ModelRequest[Any],
    system: SystemMessage | None,
    turns: Sequence[BaseMessage] = (),
) -> ModelRequest[Any]:
    """``request.override(system_message=system)``, faster for a plain ``ModelRequest``.

    ``turns`` (worked examples, ``_agent.turns``) go first in the request's
    messages, right after the system prompt; the graph's state never sees them.

    ``override`` is ``dataclasses.replace``, which runs ``ModelRequest.__init__``
    again over every field: a few microseconds on every model call. For the
    class itself (``__init__`` only stores its arguments) a shallow copy of the
    instance's fields with the system message replaced is the same request;
    ``tests/agent/test_middleware_fast.py`` checks that against ``override``. A
    subclass, which may do more on construction, goes through ``override``.
    """
    if type(request) is ModelRequest:
        fresh: ModelRequest[Any] = object.__new__(ModelRequest)
        fields = fresh.__dict__
        fields.update(request.__dict__)
        fields["system_message"] = system
        if turns:
            fields["messages"] = [*turns, *request.messages]
        return fresh
    if turns:
        messages: list[Any] = [*turns, *request.messages]
        return request.override(system_message=system, messages=messages)
    return request.override(system_message=system)


def write_through(agent: AgentSide) -> bool:
    """Whether capturing a run writes the store (so async hooks must leave the loop)."""
    return agent.server.capture_settings.durability == "write_through"


def guarded(agent: AgentSide, where: str, call: Callable[..., T], *args: Any) -> T | None:
    """Run Combee's own ``call(*args)``; log a failure and return None. Interrupts propagate.

    The arguments are passed along rather than bound in a closure: the hot path
    then makes no function object per model call.
    """
    try:
        return call(*args)
    except GraphBubbleUp:
        raise
    except Exception:
        _log_failure(agent, where)
        return None


def _log_failure(agent: AgentSide, where: str) -> None:
    """Log the exception being handled: Combee's own code failed in ``where``."""
    logger.exception(
        "%s failed (prompt %r); the run goes on without Combee", where, agent.prompt_id
    )


def _call_ids(response: ModelCallResult) -> tuple[str, ...]:
    """The ids of the tool calls the AI messages of ``response`` carry."""
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    messages = [response] if isinstance(response, AIMessage) else response.result
    return tuple(
        str(c["id"])
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c.get("id")
    )


def _final_messages(response: ModelCallResult) -> list[BaseMessage] | None:
    """The messages of a response that ends the invocation; None if the agent goes on."""
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    if isinstance(response, AIMessage):
        return None if response.tool_calls else [response]
    result = response.result
    if response.structured_response is not None:
        return list(result)
    for message in reversed(result):  # the last AI message says whether the agent goes on
        if isinstance(message, AIMessage):
            return None if message.tool_calls else list(result)
    return None
