"""``CombeeMiddleware``'s default mode (all inside ``wrap_model_call``) against ``hooks=True``.

Everything the two modes share (serving, pinning, capture in every invocation
mode, run metadata, failure policy) runs for both in ``tests/agent/test_middleware.py``
through its ``mw`` fixture; this module covers what differs: the options, the
graph nodes, the in-memory pins, and what each mode captures (the table in
``docs/integration.md``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRetryMiddleware,
    hook_config,
)
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from pydantic import BaseModel

from langgraph_combee import Combee, CombeeMiddleware, Trace
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import ScriptedChatModel
from tests.agent.test_middleware import (
    APP_PROMPT,
    accept_rules,
    ask,
    captured,
    lookup,
    tool_then_answer,
)


@tool(return_direct=True)
def answer_directly(topic: str) -> str:
    """Answer the user directly, ending the run."""
    return f"FIN owns {topic}"


def ends_in_a_direct_tool() -> ScriptedChatModel:
    call = AIMessage(
        "", tool_calls=[{"name": "answer_directly", "args": {"topic": "refund"}, "id": "d1"}]
    )
    return ScriptedChatModel([call], cycle=True)


@pytest.fixture
def combee() -> Iterator[Combee]:
    instance = Combee(prompt_id="router")
    yield instance
    instance._agent.server.close(flush=False)


def test_constructor_validates_eagerly(combee: Combee) -> None:
    with pytest.raises(ConfigurationError, match="'not a combee'"):
        CombeeMiddleware("not a combee")
    with pytest.raises(ConfigurationError, match="capture"):
        CombeeMiddleware(combee, capture="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="hooks"):
        CombeeMiddleware(combee, hooks="yes")  # type: ignore[arg-type]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigurationError, match="max_open_runs"):
            CombeeMiddleware(combee, max_open_runs=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lean"):
        combee.middleware(lean="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lean=True"):
        combee.middleware(hooks=True, lean=True)
    default = combee.middleware()
    assert type(default) is CombeeMiddleware and not default.hooks
    assert "router" in repr(default) and "hooks=False" in repr(default)


def test_both_modes_are_the_one_public_class(combee: Combee) -> None:
    hooked = CombeeMiddleware(combee, hooks=True)
    assert isinstance(hooked, CombeeMiddleware) and hooked.hooks
    assert hooked.name == CombeeMiddleware(combee).name == "CombeeMiddleware"
    # lean= keeps its meaning: lean=False is the hook mode, lean=True the default.
    assert combee.middleware(lean=False).hooks
    assert not combee.middleware(lean=True).hooks
    assert not combee.middleware(hooks=False, lean=True).hooks


def test_the_default_adds_no_node_to_the_graph(combee: Combee) -> None:
    def nodes(*middleware: object) -> set[str]:
        agent = create_agent(tool_then_answer(), [lookup], middleware=list(middleware))  # type: ignore[arg-type]
        return set(agent.get_graph().nodes)

    plain = nodes()
    assert nodes(combee.middleware()) == plain
    added = nodes(combee.middleware(hooks=True)) - plain
    assert added == {"CombeeMiddleware.before_agent", "CombeeMiddleware.after_agent"}


def test_a_finished_run_leaves_no_pin_behind(combee: Combee) -> None:
    middleware = CombeeMiddleware(combee)
    agent = create_agent(tool_then_answer(), [lookup], middleware=[middleware])
    for i in range(3):
        agent.invoke(ask(f"ticket {i}"))
    assert middleware.open_runs == 0
    assert len(captured(combee)) == 3


def test_runs_that_never_finish_are_forgotten_beyond_max_open_runs(combee: Combee) -> None:
    middleware = CombeeMiddleware(combee, max_open_runs=2)
    # Every run ends in a return_direct tool: no final model response closes it.
    agent = create_agent(ends_in_a_direct_tool(), [answer_directly], middleware=[middleware])
    for i in range(3):
        agent.invoke(ask(f"ticket {i}"))
    assert middleware.open_runs == 2
    assert captured(combee) == []  # such a run is captured only with hooks=True (documented)


def test_a_run_ended_by_a_model_error_is_captured_with_the_error(combee: Combee) -> None:
    middleware = CombeeMiddleware(combee)
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "x"}, "id": "c1"}])
    model = ScriptedChatModel([call, ValueError("provider down")])
    agent = create_agent(model, [lookup], middleware=[middleware])
    run_id = uuid.uuid4()
    with pytest.raises(ValueError, match="provider down"):
        agent.invoke(ask("ticket 1"), {"run_id": run_id})
    # Kept for a retry or fallback outside Combee's that would call the model
    # again (it would supersede this trace); forgotten with the oldest open runs.
    assert middleware.open_runs == 1
    (trace,) = captured(combee)
    assert trace.id == str(run_id)
    assert trace.error == "ValueError: provider down"
    assert [m.role for m in trace.messages] == ["human", "ai", "tool"]


def test_hooks_capture_runs_ended_by_a_direct_tool_but_not_by_an_error(combee: Combee) -> None:
    agent = create_agent(
        ends_in_a_direct_tool(), [answer_directly], middleware=[combee.middleware(hooks=True)]
    )
    direct = uuid.uuid4()
    agent.invoke(ask("ticket 1"), {"run_id": direct})
    failing = create_agent(
        ScriptedChatModel([ValueError("provider down")]),
        middleware=[combee.middleware(hooks=True)],
    )
    with pytest.raises(ValueError, match="provider down"):
        failing.invoke(ask("ticket 2"), {"run_id": uuid.uuid4()})
    (trace,) = captured(combee)
    assert trace.id == str(direct)
    assert trace.messages[-1].role == "tool"


def test_a_structured_response_closes_the_run(combee: Combee) -> None:
    class Route(BaseModel):
        team: str

    accept_rules(combee, "Refunds go to FIN-REFUNDS.")
    answer = AIMessage(
        "", tool_calls=[{"name": "Route", "args": {"team": "FIN-REFUNDS"}, "id": "s1"}]
    )
    model = ScriptedChatModel([answer])
    agent = create_agent(
        model,
        system_prompt=APP_PROMPT,
        response_format=ToolStrategy(Route),
        middleware=[combee.middleware()],
    )
    run_id = uuid.uuid4()
    result = agent.invoke(ask(), {"run_id": run_id})
    assert result["structured_response"] == Route(team="FIN-REFUNDS")
    (trace,) = captured(combee)
    assert (trace.id, trace.prompt_version) == (str(run_id), 1)
    assert [c.name for c in trace.tool_calls] == ["Route"]


def test_the_trace_is_built_off_the_hot_path_and_feedback_still_finds_it(
    combee: Combee,
) -> None:
    agent = create_agent(tool_then_answer(), [lookup], middleware=[combee.middleware()])
    run_id = uuid.uuid4()
    agent.invoke({"messages": [HumanMessage("Where does my refund go?")]}, {"run_id": run_id})
    assert combee._agent.server.buffered() == 1
    assert combee.feedback(run_id, correct=False, ground_truth="FIN-REFUNDS")
    (trace,) = captured(combee)
    assert trace.feedback is not None and trace.feedback.ground_truth == "FIN-REFUNDS"
    assert [m.role for m in trace.messages] == ["human", "ai", "tool", "ai"]


def test_a_deferred_trace_that_cannot_be_built_is_counted_and_the_rest_flushed(
    combee: Combee,
) -> None:
    def broken() -> Trace:
        raise ValueError("cannot build")

    combee._agent.capture_later("bad", broken)
    combee._agent.capture_later("good", lambda: Trace(id="good", input="q", output="a"))
    assert combee._agent.server.buffered() == 2
    assert combee.flush() == 1
    assert combee._agent.server.stats.capture_errors == 1
    assert [t.id for t in combee.queue().claim(10, holder="test")] == ["good"]


def test_rendered_playbooks_are_cached_per_version(combee: Combee) -> None:
    first = accept_rules(combee, "Rule one.")
    assert combee._agent.server.rendered(first) is combee._agent.server.rendered(first)
    second = accept_rules(combee, "Rule two.")
    assert "Rule two." in combee._agent.server.rendered(second)
    assert "Rule two." not in combee._agent.server.rendered(first)


def test_the_combined_system_message_is_built_once_per_playbook(combee: Combee) -> None:
    accept_rules(combee, "Rule one.")
    model = ScriptedChatModel(["a"], cycle=True)
    agent = create_agent(model, system_prompt=APP_PROMPT, middleware=[combee.middleware()])
    agent.invoke(ask("first"))
    agent.invoke(ask("second"))
    accept_rules(combee, "Rule two.")
    agent.invoke(ask("third"))
    first, second, third = (prompt[0] for prompt in model.prompts)
    assert first is second  # the same app message and playbook: built once
    assert "Rule one." in first.text and "Rule two." not in first.text
    assert third is not first and "Rule two." in third.text and third.text.startswith(APP_PROMPT)


# ---------------------------------------------------------------- what is captured
# The table "What is captured" in docs/integration.md, row by row: for each way a
# run can end, whether the default middleware, the hook mode and the tracer
# (with the middleware serving only) capture it.

CAPTURED = {
    "final model response": {"default": True, "hooks": True, "tracer": True},
    "model error": {"default": True, "hooks": False, "tracer": True},
    "return_direct tool": {"default": False, "hooks": True, "tracer": True},
    "other middleware jumps to the end": {"default": False, "hooks": True, "tracer": True},
    "exception outside the model call": {"default": False, "hooks": False, "tracer": True},
    "model error an outer retry recovers from": {"default": True, "hooks": True, "tracer": True},
}
RECOVERED = "model error an outer retry recovers from"


@tool
def broken_tool(topic: str) -> str:
    """A tool that fails, ending the run with its exception."""
    raise RuntimeError("tool down")


class StopAfterToolCall(AgentMiddleware[AgentState[Any], Any, Any]):
    """Ends the run as soon as the model asks for a tool (a guardrail, say)."""

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = state["messages"][-1]
        return {"jump_to": "end"} if isinstance(last, AIMessage) and last.tool_calls else None


def _call(name: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": {"topic": "refund"}, "id": "t1"}])


def _ending(ending: str) -> tuple[ScriptedChatModel, list[Any], list[Any], type[Exception] | None]:
    """(model, tools, middleware after Combee's, the exception the run ends in)."""
    if ending == "final model response":
        return tool_then_answer(), [lookup], [], None
    if ending == "model error":
        return ScriptedChatModel([_call("lookup"), ValueError("down")]), [lookup], [], ValueError
    if ending == "return_direct tool":
        return ends_in_a_direct_tool(), [answer_directly], [], None
    if ending == "other middleware jumps to the end":
        return ScriptedChatModel([_call("lookup")]), [lookup], [StopAfterToolCall()], None
    if ending == RECOVERED:
        model = ScriptedChatModel([_call("lookup"), ConnectionError("blip"), "FIN-REFUNDS"])
        return model, [lookup], [], None
    return ScriptedChatModel([_call("broken_tool")]), [broken_tool], [], RuntimeError


@pytest.mark.parametrize("way", ["default", "hooks", "tracer"])
@pytest.mark.parametrize("ending", list(CAPTURED))
def test_what_each_way_captures(combee: Combee, ending: str, way: str) -> None:
    model, tools, others, raises = _ending(ending)
    if way == "tracer":
        ours = combee.middleware(capture=False)
    else:
        ours = combee.middleware(hooks=way == "hooks")
    # Outside Combee's (listed before it): a retry that recovers from a model error.
    outer = [ModelRetryMiddleware(initial_delay=0.0, jitter=False)] if ending == RECOVERED else []
    agent: Any = create_agent(model, tools, middleware=[*outer, ours, *others])
    if way == "tracer":
        agent = agent.with_config(callbacks=[combee.tracer()])
    run_id = uuid.uuid4()
    if raises is None:
        agent.invoke(ask(), {"run_id": run_id})
    else:
        with pytest.raises(raises):
            agent.invoke(ask(), {"run_id": run_id})
    traces = captured(combee)
    if CAPTURED[ending][way]:
        assert [t.id for t in traces] == [str(run_id)]
        assert traces[0].input == "Where does my refund go?"
        if ending == RECOVERED:
            assert (traces[0].error, traces[0].output) == (None, "FIN-REFUNDS")
    else:
        assert traces == []


def test_messages_added_after_the_last_model_call_are_in_the_trace_only_with_hooks(
    combee: Combee,
) -> None:
    class Note(AgentMiddleware[AgentState[Any], Any, Any]):
        def after_model(
            self, state: AgentState[Any], runtime: Runtime[Any]
        ) -> dict[str, Any] | None:
            last = state["messages"][-1]
            if isinstance(last, AIMessage) and not last.tool_calls:
                return {"messages": [AIMessage("(reviewed)")]}
            return None

    for hooks in (False, True):
        agent = create_agent(
            ScriptedChatModel(["FIN-REFUNDS"]),
            middleware=[combee.middleware(hooks=hooks), Note()],
        )
        agent.invoke(ask(), {"run_id": uuid.uuid4()})
        (trace,) = captured(combee)
        combee.queue().ack([trace.id])
        texts = [m.content for m in trace.messages]
        assert ("(reviewed)" in texts) is hooks


def test_only_the_hook_mode_checkpoints_its_pin_in_the_thread_state(combee: Combee) -> None:
    private = {
        "combee_version",
        "combee_tenant",
        "combee_run_key",
        "combee_start_id",
        "combee_given",
    }
    for hooks in (False, True):
        agent = create_agent(
            tool_then_answer(),
            [lookup],
            middleware=[combee.middleware(hooks=hooks)],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": f"t-{hooks}"}}
        agent.invoke(ask(), config)
        values = agent.get_state(config).values
        assert (private <= set(values)) is hooks
        assert hooks or not private & set(values)
