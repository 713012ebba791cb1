"""StateGraph helpers: the prompt node, system_prompt, wrap_model and instrument."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_combee import Combee
from langgraph_combee._agent.collector import CombeeTracer
from langgraph_combee._agent.graph import (
    SYSTEM_MESSAGE_ID,
    instrument,
    make_node,
    node_update,
    system_prompt,
    wrap_model,
)
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel
from langgraph_combee.types import Add, Decision, PromptVersion
from tests.agent.test_middleware import RecordingTracer, accept_rules, captured

APP = "You route support tickets."


@pytest.fixture
def combee() -> Iterator[Combee]:
    instance = Combee(prompt_id="graph")
    yield instance
    instance._agent.server.close(flush=False)


def answer_with_prompt(messages: list[BaseMessage]) -> str:
    return f"answer #{sum(m.type == 'human' for m in messages)}"


def node_graph(combee: Combee, model: FunctionChatModel, *, checkpointer: Any = None) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("combee", make_node(combee))
    graph.add_node("agent", agent)
    graph.add_edge(START, "combee")
    graph.add_edge("combee", "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer)


def systems(messages: list[BaseMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]


# ---------------------------------------------------------------- node


def test_node_keeps_one_learned_system_message_first_across_turns(combee: Combee) -> None:
    accept_rules(combee, "Rule one.")
    model = FunctionChatModel(answer_with_prompt)
    app = node_graph(combee, model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    app.invoke({"messages": [HumanMessage("first")]}, config)
    accept_rules(combee, "Rule two.")
    app.invoke({"messages": [HumanMessage("second")]}, config)
    app.invoke({"messages": [HumanMessage("third")]}, config)

    messages = app.get_state(config).values["messages"]
    assert systems(messages) == [0]
    assert messages[0].id == SYSTEM_MESSAGE_ID
    assert "Rule two." in messages[0].text
    assert [m.text for m in messages[1:]] == [
        "first",
        "answer #1",
        "second",
        "answer #2",
        "third",
        "answer #3",
    ]
    for prompt in model.prompts:
        assert systems(prompt) == [0]
    assert "Rule two." not in model.prompts[0][0].text
    assert "Rule two." in model.prompts[1][0].text


def test_node_combines_with_the_apps_own_system_message(combee: Combee) -> None:
    version = accept_rules(combee, "Rule one.")
    model = FunctionChatModel(answer_with_prompt)
    app = node_graph(combee, model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    app.invoke({"messages": [SystemMessage(APP), HumanMessage("first")]}, config)
    newer = accept_rules(combee, "Rule two.")
    app.invoke({"messages": [HumanMessage("second")]}, config)

    assert model.prompts[0][0].text == f"{APP}\n\n{version.render()}"
    messages = app.get_state(config).values["messages"]
    assert systems(messages) == [0]
    assert messages[0].text == f"{APP}\n\n{newer.render()}"  # recombined, not piled up


def test_node_with_an_empty_playbook_adds_nothing(combee: Combee) -> None:
    model = FunctionChatModel(answer_with_prompt)
    app = node_graph(combee, model)
    out = app.invoke({"messages": [HumanMessage("first")]})
    assert systems(out["messages"]) == []
    out = app.invoke({"messages": [SystemMessage(APP, id="app"), HumanMessage("first")]})
    assert out["messages"][0] == SystemMessage(APP, id="app")


def test_node_update_cases() -> None:
    human = HumanMessage("q", id="h")
    ours = SystemMessage("old playbook", id=SYSTEM_MESSAGE_ID)
    # Already first: replaced in place, or left alone when unchanged.
    assert node_update([ours, human], "new playbook") == [
        SystemMessage("new playbook", id=SYSTEM_MESSAGE_ID)
    ]
    assert node_update([ours, human], "old playbook") == []
    # The playbook became empty (a rollback): the learned message goes.
    (removal,) = node_update([ours, human], "")
    assert removal.type == "remove" and removal.id == SYSTEM_MESSAGE_ID
    # Not first: the list is rewritten with it first.
    rewrite = node_update([human], "pb")
    assert rewrite[0].type == "remove" and [m.id for m in rewrite[1:]] == [SYSTEM_MESSAGE_ID, "h"]
    assert node_update([], "") == []


# ---------------------------------------------------------------- system_prompt


def test_system_prompt_outside_a_graph(combee: Combee) -> None:
    assert system_prompt(combee, APP) == APP
    version = accept_rules(combee, "Rule one.")
    assert system_prompt(combee, APP) == f"{APP}\n\n{version.render()}"
    with pytest.raises(ConfigurationError, match="base"):
        system_prompt(combee, None)  # type: ignore[arg-type]


def test_system_prompt_inside_nodes_is_pinned_per_run_and_scoped() -> None:
    combee = Combee(prompt_id="graph", scope=lambda c: c.get("configurable", {}).get("tenant"))
    try:
        accept_rules(combee, "Acme rule one.", tenant="acme")
        seen: list[str] = []

        def first(state: MessagesState) -> dict[str, Any]:
            seen.append(system_prompt(combee, APP))
            accept_rules(combee, "Acme rule two.", tenant="acme")  # accepted mid-run
            return {}

        def second(state: MessagesState) -> dict[str, Any]:
            seen.append(system_prompt(combee, APP))
            return {}

        graph = StateGraph(MessagesState)
        graph.add_node("first", first)
        graph.add_node("second", second)
        graph.add_edge(START, "first")
        graph.add_edge("first", "second")
        graph.add_edge("second", END)
        app = graph.compile()
        config: RunnableConfig = {"run_id": uuid.uuid4(), "configurable": {"tenant": "acme"}}
        app.invoke({"messages": [HumanMessage("q")]}, config)
        assert "Acme rule one." in seen[0] and "Acme rule two." not in seen[0]
        assert seen[1] == seen[0]

        app.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"tenant": "acme"}})
        assert "Acme rule two." in seen[2]
        app.invoke({"messages": [HumanMessage("q")]}, {"configurable": {"tenant": "other"}})
        assert seen[4] == APP
    finally:
        combee._agent.server.close(flush=False)


# ---------------------------------------------------------------- wrap_model


@tool
def lookup(topic: str) -> str:
    """Look up a topic."""
    return topic


def test_wrap_model_injects_into_every_call_style(combee: Combee) -> None:
    version = accept_rules(combee, "Rule one.")
    model = ScriptedChatModel(["a"], cycle=True)
    wrapped = wrap_model(combee, model.bind_tools([lookup]))
    with_system = [SystemMessage(APP), HumanMessage("q")]

    assert wrapped.invoke(with_system).text == "a"
    assert "".join(str(c.text) for c in wrapped.stream("q")) == "a"
    assert model.prompts[0][0].text == f"{APP}\n\n{version.render()}"
    assert model.prompts[1] == [SystemMessage(version.render()), HumanMessage("q")]
    assert model.last_tools and model.last_tools[0]["function"]["name"] == "lookup"


async def test_wrap_model_async_and_after_bind_tools(combee: Combee) -> None:
    version = accept_rules(combee, "Rule one.")
    model = ScriptedChatModel(["a"], cycle=True)
    wrapped = wrap_model(combee, model).bind_tools([lookup])

    reply = await wrapped.ainvoke([HumanMessage("q")])
    chunks = [chunk async for chunk in wrapped.astream([HumanMessage("q")])]
    assert reply.text == "a"
    assert "".join(str(c.text) for c in chunks) == "a"
    assert len(model.prompts) == 2
    assert all(p[0] == SystemMessage(version.render()) for p in model.prompts)
    assert model.last_tools is not None


async def test_wrap_model_async_reads_an_async_only_store() -> None:
    async with AsyncSqliteStore.from_conn_string(":memory:") as store:
        await store.setup()
        combee = Combee(prompt_id="graph", store=store)
        try:
            registry = combee.registry()
            head = await registry.ahead()
            playbook = head.playbook.apply([Add(section="others", content="Rule one.")]).playbook
            candidate = await registry.aadd_candidate(
                PromptVersion(prompt_id="graph", playbook=playbook)
            )
            await registry.aaccept(
                candidate.version, Decision(accepted=True, policy="manual", reason="test")
            )
            model = ScriptedChatModel(["a"])
            await wrap_model(combee, model).ainvoke("q")
            assert "Rule one." in model.prompts[0][0].text
        finally:
            await asyncio.to_thread(combee._agent.server.close, flush=False)


def test_wrap_model_leaves_prompts_alone_with_an_empty_playbook(combee: Combee) -> None:
    model = ScriptedChatModel(["a"])
    wrap_model(combee, model).invoke([SystemMessage(APP), HumanMessage("q")])
    assert model.prompts[0] == [SystemMessage(APP), HumanMessage("q")]
    with pytest.raises(ConfigurationError, match="llm"):
        wrap_model(combee, "gpt")  # type: ignore[arg-type]


def test_wrap_model_labels_the_model_run(combee: Combee) -> None:
    accept_rules(combee, "Rule one.")
    model = ScriptedChatModel(["a"])
    wrapped = wrap_model(combee, model)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [wrapped.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    tracer = RecordingTracer()
    graph.compile().invoke({"messages": [HumanMessage("q")]}, {"callbacks": [tracer]})
    (root,) = tracer.roots
    model_run = next(r for r in tracer.all_runs() if r.run_type in ("llm", "chat_model"))
    for run in (root, model_run):
        assert run.extra["metadata"]["combee_version"] == 1


# ---------------------------------------------------------------- instrument


def routing_graph(combee: Combee) -> StateGraph[Any, Any, Any, Any]:
    model = FunctionChatModel(answer_with_prompt)
    graph = StateGraph(MessagesState)
    graph.add_node("combee", make_node(combee))
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_edge(START, "combee")
    graph.add_edge("combee", "agent")
    graph.add_edge("agent", END)
    return graph


def test_instrument_captures_every_run(combee: Combee) -> None:
    accept_rules(combee, "Rule one.")
    app = instrument(combee, routing_graph(combee))
    extra = RecordingTracer()
    run_id = uuid.uuid4()
    app.invoke({"messages": [HumanMessage("q1")]}, {"run_id": run_id, "callbacks": [extra]})
    app.invoke({"messages": [HumanMessage("q2")]})

    traces = {t.input: t for t in captured(combee)}
    assert set(traces) == {"q1", "q2"}
    assert traces["q1"].id == str(run_id)
    assert traces["q1"].output == "answer #1"
    assert traces["q1"].prompt_version == 1  # the node labelled the run
    assert [m.role for m in traces["q1"].messages] == ["human", "ai"]
    assert len(extra.roots) == 1  # per-call callbacks are merged, not replaced


async def test_instrument_a_compiled_graph_once(combee: Combee) -> None:
    compiled = routing_graph(combee).compile(checkpointer=InMemorySaver())
    app = instrument(combee, compiled)
    assert instrument(combee, app) is app
    assert type(app) is type(compiled)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    await app.ainvoke({"messages": [HumanMessage("q1")]}, config)
    await app.ainvoke({"messages": [HumanMessage("q2")]}, config)
    assert len(app.get_state(config).values["messages"]) == 4
    traces = sorted(captured(combee), key=lambda t: t.created_at)
    assert [(t.input, t.output, t.thread_id) for t in traces] == [
        ("q1", "answer #1", "t"),
        ("q2", "answer #2", "t"),
    ]
    handlers = (app.config or {}).get("callbacks")
    assert isinstance(handlers, list)
    assert sum(isinstance(h, CombeeTracer) for h in handlers) == 1


def test_instrument_rejects_other_things(combee: Combee) -> None:
    with pytest.raises(ConfigurationError, match="graph"):
        instrument(combee, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="combee"):
        make_node("combee")  # type: ignore[arg-type]


def test_node_and_wrap_model_results_feed_the_learner(combee: Combee) -> None:
    app = instrument(combee, routing_graph(combee))
    run_id = uuid.uuid4()
    app.invoke({"messages": [HumanMessage("q")]}, {"run_id": run_id})
    assert combee.feedback(run_id, correct=False, ground_truth="FIN")
    (trace,) = captured(combee)
    assert trace.feedback is not None and trace.feedback.correct is False
    assert isinstance(AIMessage("x"), BaseMessage)
