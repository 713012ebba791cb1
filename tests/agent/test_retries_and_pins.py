"""The agent side under retries and reused messages: one trace per run, pins per tenant."""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from langgraph_combee import CaptureSettings, Combee, CombeeMiddleware
from langgraph_combee._core.text import message_text
from langgraph_combee.errors import MiddlewareOrderWarning
from langgraph_combee.testing import ScriptedChatModel
from tests.agent.test_middleware import accept_rules, captured
from tests.agent.test_middleware_modes import answer_directly, ends_in_a_direct_tool


def _tenant(config: dict[str, object]) -> str | None:
    return (config.get("configurable") or {}).get("tenant")  # type: ignore[union-attr, no-any-return]


@pytest.fixture
def scoped() -> Iterator[Combee]:
    instance = Combee(prompt_id="router", scope=_tenant)
    yield instance
    instance._agent.server.close(flush=False)


def test_a_reused_message_never_serves_another_tenants_pin(scoped: Combee) -> None:
    accept_rules(scoped, "ACME ONLY RULE", tenant="acme")
    accept_rules(scoped, "GLOBEX ONLY RULE", tenant="globex")
    middleware = scoped.middleware()
    # LangGraph writes the id it gives a message into the caller's object: an
    # app that reuses one HumanMessage sends the same id in every run.
    ping = HumanMessage("ping")
    direct = create_agent(ends_in_a_direct_tool(), [answer_directly], middleware=[middleware])
    direct.invoke({"messages": [ping]}, {"configurable": {"tenant": "acme"}})
    assert middleware.open_runs == 1  # a return_direct run leaves its pin behind
    model = ScriptedChatModel(["pong"])
    plain = create_agent(model, [], middleware=[middleware])
    run_id = uuid.uuid4()
    plain.invoke({"messages": [ping]}, {"configurable": {"tenant": "globex"}, "run_id": run_id})
    system = message_text(model.prompts[-1][0].content)
    assert "GLOBEX ONLY RULE" in system and "ACME ONLY RULE" not in system
    (trace,) = captured(scoped, "globex")
    assert trace.id == str(run_id) and trace.tenant == "globex"


def test_a_reused_message_in_another_thread_is_pinned_afresh(scoped: Combee) -> None:
    middleware = scoped.middleware()
    ping = HumanMessage("ping")
    direct = create_agent(ends_in_a_direct_tool(), [answer_directly], middleware=[middleware])
    direct.invoke({"messages": [ping]}, {"configurable": {"thread_id": "t-1"}})
    accept_rules(scoped, "A NEWER RULE")
    model = ScriptedChatModel(["pong"])
    plain = create_agent(model, [], middleware=[middleware])
    plain.invoke({"messages": [ping]}, {"configurable": {"thread_id": "t-2"}})
    # Thread t-2 is a new run: it gets the version in force now, not t-1's pin.
    assert "A NEWER RULE" in message_text(model.prompts[-1][0].content)
    (trace,) = captured(scoped)
    assert trace.thread_id == "t-2" and trace.prompt_version == 1


def test_an_apps_subclass_gets_the_hook_mode_it_asks_for(scoped: Combee) -> None:
    class Audited(CombeeMiddleware):
        pass

    middleware = Audited(scoped, hooks=True)
    assert isinstance(middleware, Audited) and middleware.hooks
    agent = create_agent(ScriptedChatModel(["ok"]), [], middleware=[middleware])
    assert "CombeeMiddleware.after_agent" in agent.get_graph().nodes
    assert type(Audited(scoped, hooks=True)) is type(middleware)  # one class per subclass


@pytest.mark.parametrize("hooks", [False, True])
def test_a_middleware_can_be_copied(scoped: Combee, hooks: bool) -> None:
    middleware = scoped.middleware(hooks=hooks)
    clone = copy.copy(middleware)
    assert type(clone) is type(middleware) and clone.agent is middleware.agent
    assert clone.hooks is hooks


def test_a_run_recovered_by_an_outer_retry_is_captured_with_its_answer(scoped: Combee) -> None:
    model = ScriptedChatModel([ConnectionError("blip"), "FIN-REFUNDS"])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)
    agent = create_agent(model, [], middleware=[retry, scoped.middleware()])
    run_id = uuid.uuid4()
    agent.invoke({"messages": [HumanMessage("refund?")]}, {"run_id": run_id})
    (trace,) = captured(scoped)
    assert trace.error is None and trace.output == "FIN-REFUNDS"


def _outside(kind: str, script: list[object]) -> tuple[ScriptedChatModel, AgentMiddleware[Any]]:
    """The agent's model and a retry or fallback middleware that recovers from its errors."""
    if kind == "retry":
        retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
        return ScriptedChatModel(script), retry  # type: ignore[arg-type]
    # The fallback model answers what the primary could not.
    failing = [r for r in script if isinstance(r, Exception)]
    answers = [r for r in script if not isinstance(r, Exception)]
    return ScriptedChatModel(failing), ModelFallbackMiddleware(ScriptedChatModel(answers))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["retry", "fallback"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_an_outer_retry_or_fallback_supersedes_the_failed_call(
    scoped: Combee, kind: str, asynchronous: bool
) -> None:
    accept_rules(scoped, "REFUNDS GO TO FIN")
    model, outer = _outside(kind, [ConnectionError("blip"), "FIN-REFUNDS"])
    middleware = scoped.middleware()
    agent = create_agent(model, [], middleware=[outer, middleware])
    run_id = uuid.uuid4()
    inputs = {"messages": [HumanMessage("refund?")]}
    if asynchronous:
        result = asyncio.run(agent.ainvoke(inputs, {"run_id": run_id}))
    else:
        result = agent.invoke(inputs, {"run_id": run_id})
    assert result["messages"][-1].content == "FIN-REFUNDS"
    (trace,) = captured(scoped)
    assert (trace.id, trace.error, trace.output) == (str(run_id), None, "FIN-REFUNDS")
    assert trace.prompt_version == 1 and middleware.open_runs == 0
    assert scoped._agent.server.stats.superseded == 1


def test_a_retried_run_without_a_run_id_is_one_trace(scoped: Combee) -> None:
    # No run_id and no tracer: the run's key is made up at its first call, and
    # the retry must find it (else two traces, the failure and the answer).
    model, retry = _outside("retry", [ConnectionError("blip"), TimeoutError("slow"), "FIN"])
    middleware = scoped.middleware()
    agent = create_agent(model, [], middleware=[retry, middleware])
    agent.invoke({"messages": [HumanMessage("refund?")]})
    (trace,) = captured(scoped)
    assert (trace.error, trace.output) == (None, "FIN")
    assert model.calls == 3 and middleware.open_runs == 0


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_run_whose_retries_run_out_is_captured_as_failed(
    scoped: Combee, asynchronous: bool
) -> None:
    model = ScriptedChatModel([ConnectionError("blip"), TimeoutError("still down")])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False, on_failure="error")
    agent = create_agent(model, [], middleware=[retry, scoped.middleware()])
    run_id = uuid.uuid4()
    inputs = {"messages": [HumanMessage("refund?")]}
    with pytest.raises(TimeoutError, match="still down"):
        if asynchronous:
            asyncio.run(agent.ainvoke(inputs, {"run_id": run_id}))
        else:
            agent.invoke(inputs, {"run_id": run_id})
    (trace,) = captured(scoped)
    # The last error is the run's: the first one was superseded by it.
    assert (trace.id, trace.error) == (str(run_id), "TimeoutError: still down")
    assert trace.input == "refund?" and not trace.output


def test_a_retry_that_gives_up_with_a_message_leaves_the_run_failed(scoped: Combee) -> None:
    # on_failure="continue" (the default) ends the run with a message the retry
    # makes itself, outside Combee's: the run's trace is its last model error.
    model = ScriptedChatModel([ConnectionError("blip"), ConnectionError("blip again")])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)
    agent = create_agent(model, [], middleware=[retry, scoped.middleware()])
    result = agent.invoke({"messages": [HumanMessage("refund?")]}, {"run_id": uuid.uuid4()})
    assert "failed after 2 attempts" in result["messages"][-1].content
    (trace,) = captured(scoped)
    assert trace.error == "ConnectionError: blip again"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_later_run_reusing_a_failed_runs_message_is_not_its_retry(
    scoped: Combee, asynchronous: bool
) -> None:
    # No thread and one reused HumanMessage: both runs have the same pin key. The
    # first fails with nothing to retry it; the second is a run of its own, not
    # an attempt of the first (its own trace and latency, the version in force).
    ping = HumanMessage("ping")
    model = ScriptedChatModel([ConnectionError("down"), "pong"])
    agent = create_agent(model, [], middleware=[scoped.middleware()])

    def run() -> None:
        if asynchronous:
            asyncio.run(agent.ainvoke({"messages": [ping]}))
        else:
            agent.invoke({"messages": [ping]})

    with pytest.raises(ConnectionError):
        run()
    accept_rules(scoped, "A NEWER RULE")
    run()
    assert "A NEWER RULE" in message_text(model.prompts[-1][0].content)
    traces = {t.error: t for t in captured(scoped)}
    assert set(traces) == {"ConnectionError: down", None}
    assert traces[None].output == "pong" and traces[None].prompt_version == 1
    assert traces["ConnectionError: down"].prompt_version == 0
    assert scoped._agent.server.stats.superseded == 0


@tool
def lookup(query: str) -> str:
    """Look a ticket queue up."""
    return f"queue for {query}: FIN-REFUNDS"


_TOOL_CALL = AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": "refund"}, "id": "c1"}])


@pytest.mark.parametrize("failing", [0, 1], ids=["first-call-fails", "second-call-fails"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_tool_calling_run_with_a_retried_model_call_is_captured_with_its_answer(
    scoped: Combee, failing: int, asynchronous: bool
) -> None:
    accept_rules(scoped, "REFUNDS GO TO FIN")
    script: list[object] = [_TOOL_CALL, "FIN-REFUNDS"]
    script.insert(failing, ConnectionError("blip"))
    model, retry = _outside("retry", script)
    middleware = scoped.middleware()
    agent = create_agent(model, [lookup], middleware=[retry, middleware])
    run_id = uuid.uuid4()
    inputs = {"messages": [HumanMessage("refund?")]}
    if asynchronous:
        asyncio.run(agent.ainvoke(inputs, {"run_id": run_id}))
    else:
        agent.invoke(inputs, {"run_id": run_id})
    (trace,) = captured(scoped)
    assert (trace.id, trace.error, trace.output) == (str(run_id), None, "FIN-REFUNDS")
    assert [(c.name, c.result) for c in trace.tool_calls] == [
        ("lookup", "queue for refund: FIN-REFUNDS")
    ]
    assert model.calls == 3 and middleware.open_runs == 0
    assert all("REFUNDS GO TO FIN" in message_text(p[0].content) for p in model.prompts)


class _BetweenAttempts(AgentMiddleware[Any, Any, Any]):
    """Retries a failed model call once, after calling ``between()``."""

    def __init__(self, between: Callable[[], None]) -> None:
        super().__init__()
        self.between = between

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(request)
        except ConnectionError:
            self.between()
            return handler(request)


@pytest.mark.parametrize("durability", ["buffered", "write_through"])
def test_a_failure_already_in_the_queue_is_superseded_there(durability: str) -> None:
    combee = Combee(prompt_id="router", capture=CaptureSettings(durability=durability))
    run_id = uuid.uuid4()

    def between() -> None:
        # The failure reaches the queue, gets feedback, and a new version is
        # accepted before the retry: the retry keeps the run's version.
        combee._agent.server.flush()
        assert combee.queue().status(str(run_id)) == "pending"
        combee.feedback(run_id, comment="the user waited")
        accept_rules(combee, "A NEWER RULE")

    try:
        model = ScriptedChatModel([ConnectionError("blip"), "FIN-REFUNDS"])
        agent = create_agent(model, [], middleware=[_BetweenAttempts(between), combee.middleware()])
        with pytest.warns(MiddlewareOrderWarning, match="_BetweenAttempts"):
            agent.invoke({"messages": [HumanMessage("refund?")]}, {"run_id": run_id})
        (trace,) = captured(combee)
        assert (trace.id, trace.error, trace.output) == (str(run_id), None, "FIN-REFUNDS")
        assert trace.feedback is not None and trace.feedback.comment == "the user waited"
        assert trace.prompt_version == 0
        assert "A NEWER RULE" not in message_text(model.prompts[-1][0].content)
    finally:
        combee._agent.server.close(flush=False)


class _HeldWrites(BaseStore):
    """Holds the first write of a failed trace until ``release`` is set (others go on)."""

    def __init__(self) -> None:
        self.inner, self.lock = InMemoryStore(), threading.Lock()
        self.holding, self.release = threading.Event(), threading.Event()

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        failure = any(
            isinstance(op, PutOp) and op.value and (op.value.get("trace") or {}).get("error")
            for op in ops
        )
        if failure and not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(10)
        with self.lock:
            return self.inner.batch(ops)

    async def abatch(self, ops: Any) -> list[Any]:
        return self.batch(ops)


def test_a_retry_captured_while_its_failure_is_being_written_makes_one_trace() -> None:
    # The failure's write is slow (one flush holds it) and another flush writes
    # the retry's answer meanwhile: the run must still be one trace, the answer.
    store = _HeldWrites()
    combee = Combee(prompt_id="router", store=store)
    writer = threading.Thread(target=combee._agent.server.flush)

    def between() -> None:
        writer.start()
        assert store.holding.wait(10)

    try:
        model = ScriptedChatModel([ConnectionError("blip"), "FIN-REFUNDS"])
        agent = create_agent(model, [], middleware=[_BetweenAttempts(between), combee.middleware()])
        # A retry middleware of the app's own, outside Combee: warned about once.
        with pytest.warns(MiddlewareOrderWarning, match="_BetweenAttempts"):
            agent.invoke({"messages": [HumanMessage("refund?")]}, {"run_id": uuid.uuid4()})
        combee._agent.server.flush()  # the answer's turn, while the failure is held
        store.release.set()
        writer.join(10)
        traces = captured(combee)
        assert [(t.error, t.output) for t in traces] == [(None, "FIN-REFUNDS")]
    finally:
        store.release.set()
        combee._agent.server.close(flush=False)


def test_a_retried_run_is_captured_with_its_answer_with_hooks_too(scoped: Combee) -> None:
    model, retry = _outside("retry", [ConnectionError("blip"), "FIN-REFUNDS"])
    agent = create_agent(model, [], middleware=[retry, scoped.middleware(hooks=True)])
    agent.invoke({"messages": [HumanMessage("refund?")]}, {"run_id": uuid.uuid4()})
    (trace,) = captured(scoped)
    assert (trace.error, trace.output) == (None, "FIN-REFUNDS")


def test_what_public_methods_return_can_be_imported_from_a_public_module() -> None:
    import inspect
    import typing

    import langgraph_combee
    from langgraph_combee import errors, types

    modules = (langgraph_combee, types, errors)
    public = {id(getattr(module, name)) for module in modules for name in module.__all__}
    hidden: set[str] = set()

    def walk(hint: object, where: str) -> None:
        for arg in typing.get_args(hint):
            walk(arg, where)
        private = isinstance(hint, type) and hint.__module__.startswith("langgraph_combee._")
        if private and id(hint) not in public:
            hidden.add(f"{where} -> {hint.__qualname__}")

    for module in (langgraph_combee, types):
        for name in module.__all__:
            value = getattr(module, name)
            if not inspect.isclass(value):
                continue
            for attr, member in inspect.getmembers(value, inspect.isfunction):
                if attr.startswith("_"):
                    continue
                try:
                    hints = typing.get_type_hints(member)
                except NameError:
                    continue  # an inherited third-party method with names of its own
                walk(hints.get("return"), f"{name}.{attr}")
    assert not hidden, sorted(hidden)


def test_learner_callbacks_are_checked_when_the_settings_are_built() -> None:
    from langchain_core.callbacks import StdOutCallbackHandler

    from langgraph_combee import LearnerSettings
    from langgraph_combee.errors import ConfigurationError

    handler = StdOutCallbackHandler()
    for bad in ("langsmith", handler, [handler, "x"], 3):
        with pytest.raises(ConfigurationError, match="callbacks"):
            LearnerSettings(callbacks=bad)  # type: ignore[arg-type]
    assert LearnerSettings(callbacks=[handler]).callbacks == [handler]
