"""Combee for plain ``StateGraph`` apps: a node, a prompt helper, a model wrapper, capture.

Exposed as ``combee.node()``, ``combee.system_prompt(base)``,
``combee.wrap_model(llm)`` and ``combee.instrument(graph)``. Pick one way to
serve the prompt:

* ``combee.node()``: a node that keeps the learned prompt as the first message
  of a ``messages`` state (``add_messages`` reducer). Use it when the app's
  system prompt lives in the state, or when the app has none.
* ``combee.system_prompt(base)``: inside a node of your own, returns ``base``
  with the playbook appended, for apps that prepend their system prompt when
  calling the model.
* ``combee.wrap_model(llm)``: a runnable that adds the playbook to the first
  system message of every call of ``llm`` (or prepends one).

``combee.instrument(graph)`` attaches a ``CombeeTracer`` so every run becomes a
trace. Within one graph run the version served is pinned (a version accepted
mid-run is served from the next run; ``_agent/pinning.py``, the same pinning as
the middleware's, with the pins kept by the agent side) when the run is
identifiable: the caller passed ``config["run_id"]``, or a tracer (the one
``instrument`` attaches, LangSmith's) is attached. The helpers also label the run's root with
``combee_version`` metadata, which is how the tracer learns the version served.

Like the middleware, the node and the wrapper repeat the learned rules the
run's latest human message names after the playbook (``ServingSettings.focus_rules``,
``Server.served``); ``system_prompt`` does when it is given that message's
text (``request=``). Verified adoption replays with that focus.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.graph import StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.pregel import Pregel

from langgraph_combee._agent.collector import CombeeTracer
from langgraph_combee._agent.pinning import RUN_ID
from langgraph_combee._agent.runs import current_config, version_metadata
from langgraph_combee._agent.side import AgentSide, agent_side_of
from langgraph_combee._agent.traces import request_text
from langgraph_combee._core.prompting import join_prompt, with_playbook
from langgraph_combee._core.types import PromptVersion
from langgraph_combee._errors import ConfigurationError

__all__ = [
    "SYSTEM_MESSAGE_ID",
    "LearnedPromptModel",
    "PromptNode",
    "inject",
    "instrument",
    "make_node",
    "node_update",
    "system_prompt",
    "wrap_model",
]

SYSTEM_MESSAGE_ID = "combee-system-prompt"
"""The fixed id of the system message ``combee.node()`` keeps first in ``messages``."""

_BASE_KEY = "combee_base"  # response_metadata key holding the app's own prompt


def _serve(agent: AgentSide, config: Mapping[str, Any] | None) -> PromptVersion:
    """The version for the run of ``config``: pinned per run, and labelled on the run.

    Pinned under the run's key (``_agent/pinning.py``); a run that cannot be
    identified is served the router's pick on every call.
    """
    _, version = agent.pins.pin(config, level="root", key=RUN_ID, fresh_key=False)
    return version


def system_prompt(
    combee: object,
    base: str,
    *,
    config: Mapping[str, Any] | None = None,
    request: str | None = None,
) -> str:
    """Return ``base`` with the learned playbook appended, for the current run.

    Args:
        combee: The ``Combee`` serving the prompt.
        base: The app's own system prompt; it stays first and authoritative.
        config: The run's config (tenant scope, run id); default: the config of
            the node being executed, when called inside a graph.
        request: The text of the run's latest human message, if known: the
            learned rules it names are repeated after the playbook
            (``ServingSettings.focus_rules``), as the middleware and verified
            adoption do. None: the playbook alone.

    Returns:
        ``base`` unchanged when the playbook is empty, else ``base``, a blank
        line and the rendered playbook.
    """
    agent = agent_side_of(combee)
    if not isinstance(base, str):
        raise ConfigurationError("base", base, "a str (the app's system prompt)")
    if request is not None and not isinstance(request, str):
        raise ConfigurationError("request", request, "None or a str (the user's message)")
    version = _serve(agent, config if config is not None else current_config())
    return join_prompt(base, agent.server.served(version, request or ""))


# --------------------------------------------------------------------------- node


def _desired(base: SystemMessage | None, playbook: str) -> SystemMessage | None:
    combined = with_playbook(base, playbook)
    if combined is None:
        return None
    metadata = {_BASE_KEY: base.content} if base is not None else {}
    return SystemMessage(content=combined.content, id=SYSTEM_MESSAGE_ID, response_metadata=metadata)


def node_update(messages: Sequence[BaseMessage], playbook: str) -> list[BaseMessage]:
    """The ``messages`` update that puts the learned prompt first, exactly once.

    The learned prompt is a ``SystemMessage`` with id ``SYSTEM_MESSAGE_ID``. If
    the state starts with the app's own system message, the two are combined
    into that one message (the app's text first, kept in ``response_metadata``
    so later turns recombine it with newer playbooks instead of piling up).

    Args:
        messages: The current ``messages`` state.
        playbook: The rendered playbook ('' when empty).

    Returns:
        Messages for the ``add_messages`` reducer: nothing when no change is
        needed, one message replacing the learned prompt in place when it is
        already first, else a full rewrite with it first.
    """
    first = messages[0] if messages else None
    ours = first if isinstance(first, SystemMessage) and first.id == SYSTEM_MESSAGE_ID else None
    app = first if isinstance(first, SystemMessage) and ours is None else None
    if ours is not None:
        base_content = ours.response_metadata.get(_BASE_KEY)
        base = SystemMessage(content=base_content) if base_content is not None else None
    else:
        base = app
    if app is not None and not playbook:
        return []  # the app's prompt alone, untouched
    desired = _desired(base, playbook)
    rest = [m for m in messages if m is not ours and m is not app and m.id != SYSTEM_MESSAGE_ID]
    if ours is not None and len(rest) == len(messages) - 1:
        if desired is None:
            return [RemoveMessage(id=SYSTEM_MESSAGE_ID)]
        if desired.content == ours.content:
            return []
        return [desired]
    if desired is None:
        return []
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), desired, *rest]


class PromptNode(Protocol):
    """The node ``make_node`` returns: ``(state, config) -> {"messages": [...]}``."""

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]: ...


def make_node(combee: object) -> PromptNode:
    """Return a node that keeps the learned system prompt first in ``messages``.

    Wire it before the model node; it serves the version pinned for the run::

        graph.add_node("combee", combee.node())
        graph.add_edge(START, "combee")
        graph.add_edge("combee", "agent")

    See ``node_update`` for how the app's own system message is combined.
    """
    agent = agent_side_of(combee)

    def combee_prompt(state: Any, config: RunnableConfig) -> dict[str, Any]:
        raw = (
            state.get("messages")
            if isinstance(state, Mapping)
            else getattr(state, "messages", None)
        )
        messages = convert_to_messages(raw or [])
        version = _serve(agent, config)
        playbook = agent.server.served(version, request_text(messages))
        return {"messages": node_update(messages, playbook)}

    return combee_prompt


# --------------------------------------------------------------------------- model wrapper


def _as_messages(value: LanguageModelInput) -> list[BaseMessage]:
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    return convert_to_messages(value)


def inject(messages: Sequence[BaseMessage], playbook: str) -> list[BaseMessage]:
    """Add ``playbook`` to the first system message of ``messages`` (or prepend one)."""
    out = list(messages)
    if not playbook:
        return out
    for index, message in enumerate(out):
        if isinstance(message, SystemMessage):
            combined = with_playbook(message, playbook)
            if combined is not None:
                out[index] = combined
            return out
    return [SystemMessage(content=playbook), *out]


class LearnedPromptModel(Runnable[LanguageModelInput, Any]):
    """A chat model (or model runnable) whose calls carry the learned prompt.

    Each ``invoke`` / ``ainvoke`` / ``stream`` / ``astream`` (and the batch and
    transform methods built on them) adds the run's playbook to the first system
    message, calls the wrapped model with the ``combee_*`` metadata added to its
    config, and returns or streams the model's output unchanged.

    The async methods pick the version on a worker thread, so a first read of
    HEAD from the store never blocks the event loop (or fails on an async-only
    store). Bind tools on the model before wrapping it (``combee.wrap_model(llm.bind_tools(
    tools))``); ``bind_tools`` on the wrapper does the same for convenience.
    """

    def __init__(self, combee: object, llm: Runnable[Any, Any]) -> None:
        self.agent = agent_side_of(combee)
        if not isinstance(llm, Runnable):
            raise ConfigurationError("llm", llm, "a chat model or Runnable")
        self.llm = llm

    def __repr__(self) -> str:
        return f"LearnedPromptModel({self.llm!r})"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> LearnedPromptModel:
        """Bind tools on the wrapped model and wrap the result again."""
        binder = getattr(self.llm, "bind_tools", None)
        if binder is None:
            raise ConfigurationError("llm", self.llm, "a chat model with bind_tools")
        return LearnedPromptModel(self.agent, binder(tools, **kwargs))

    def _prepare(
        self, value: LanguageModelInput, config: RunnableConfig | None
    ) -> tuple[list[BaseMessage], RunnableConfig]:
        config = ensure_config(config)
        version = _serve(self.agent, config)
        metadata = {
            **(config.get("metadata") or {}),
            **version_metadata(self.agent.prompt_id, version),
        }
        messages = _as_messages(value)
        playbook = self.agent.server.served(version, request_text(messages))
        return inject(messages, playbook), {**config, "metadata": metadata}

    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Call the model with the learned prompt."""
        messages, config = self._prepare(input, config)
        return self.llm.invoke(messages, config, **kwargs)

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Async ``invoke``."""
        messages, config = await asyncio.to_thread(self._prepare, input, config)
        return await self.llm.ainvoke(messages, config, **kwargs)

    def stream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Stream the model's output for the prompt with the learned playbook."""
        messages, config = self._prepare(input, config)
        yield from self.llm.stream(messages, config, **kwargs)

    async def astream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Async ``stream``."""
        messages, config = await asyncio.to_thread(self._prepare, input, config)
        async for chunk in self.llm.astream(messages, config, **kwargs):
            yield chunk


def wrap_model(combee: object, llm: Runnable[Any, Any]) -> LearnedPromptModel:
    """Return ``llm`` wrapped so every call carries the learned prompt.

    Args:
        combee: The ``Combee`` serving the prompt.
        llm: A chat model, usually after ``bind_tools``.

    Raises:
        ConfigurationError: ``llm`` is not a runnable.
    """
    return LearnedPromptModel(combee, llm)


# --------------------------------------------------------------------------- capture


def instrument(
    combee: object, graph: StateGraph[Any, Any, Any, Any] | Pregel[Any, Any, Any, Any]
) -> Pregel[Any, Any, Any, Any]:
    """Return the compiled graph with a ``CombeeTracer`` attached to every run.

    Args:
        combee: The ``Combee`` receiving the traces.
        graph: A ``StateGraph`` (compiled here, without a checkpointer; compile
            it yourself to pass one) or an already compiled graph.

    Returns:
        A copy of the compiled graph (same type, ``get_state`` and friends
        intact) whose config carries the tracer; callbacks passed per call are
        added to it. Instrumenting twice with the same combee adds one tracer.

    Raises:
        ConfigurationError: ``graph`` is neither.
    """
    agent = agent_side_of(combee)
    if isinstance(graph, StateGraph):
        compiled: Pregel[Any, Any, Any, Any] = graph.compile()
    elif isinstance(graph, Pregel):
        compiled = graph
    else:
        raise ConfigurationError("graph", graph, "a StateGraph or a compiled graph")
    existing = (compiled.config or {}).get("callbacks")
    handlers = existing if isinstance(existing, list) else []
    if any(isinstance(h, CombeeTracer) and h.agent is agent for h in handlers):
        return compiled
    return compiled.with_config(callbacks=[CombeeTracer(agent)])
