"""``MiddlewareOrderWarning``: Combee's middleware listed after another that wraps its calls."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ModelRetryMiddleware,
    dynamic_prompt,
    wrap_model_call,
)
from langchain_core.messages import HumanMessage

from langgraph_combee import Combee
from langgraph_combee.errors import CombeeError, MiddlewareOrderWarning
from langgraph_combee.testing import FunctionChatModel

APP_PROMPT = "You route support tickets to a team code."


@pytest.fixture
def combee() -> Iterator[Combee]:
    combee = Combee(prompt_id="order")
    try:
        yield combee
    finally:
        combee.close()


class OtherMiddleware(AgentMiddleware[Any, Any, Any]):
    """Passes every model call on, untouched."""

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        return await handler(request)


def _agent(*middleware: Any) -> Any:
    return create_agent(
        FunctionChatModel(lambda m: "ok"),
        tools=[],
        system_prompt=APP_PROMPT,
        middleware=list(middleware),
    )


def _ask(agent: Any, text: str = "hi") -> None:
    agent.invoke({"messages": [HumanMessage(text)]})


def _order_warnings(run: Callable[[], None]) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run()
    return [w for w in seen if issubclass(w.category, MiddlewareOrderWarning)]


def test_combee_after_another_wrapping_middleware_warns_once(combee: Combee) -> None:
    agent = _agent(OtherMiddleware(), combee.middleware())
    found = _order_warnings(lambda: [_ask(agent, f"q{i}") for i in range(3)])
    assert len(found) == 1
    message = str(found[0].message)
    assert "OtherMiddleware" in message and "'order'" in message and "first" in message
    assert issubclass(MiddlewareOrderWarning, UserWarning)
    assert issubclass(MiddlewareOrderWarning, CombeeError)


def test_combee_first_does_not_warn(combee: Combee) -> None:
    agent = _agent(combee.middleware(), OtherMiddleware())
    assert _order_warnings(lambda: [_ask(agent, f"q{i}") for i in range(2)]) == []


def test_hook_mode_after_another_wrapping_middleware_warns_too(combee: Combee) -> None:
    agent = _agent(OtherMiddleware(), combee.middleware(hooks=True))
    assert len(_order_warnings(lambda: _ask(agent))) == 1


def test_a_decorator_made_middleware_before_combee_warns(combee: Combee) -> None:
    @wrap_model_call
    def passing(
        request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(request)

    agent = _agent(passing, combee.middleware())
    assert len(_order_warnings(lambda: _ask(agent))) == 1


def test_async_runs_are_not_checked_and_leave_the_check_to_a_sync_run(combee: Combee) -> None:
    # Each layer's awrap_model_call may run as a task of its own: its stack does
    # not show the layer awaiting it, so async calls neither warn nor use up the check.
    agent = _agent(OtherMiddleware(), combee.middleware())

    async def run() -> None:
        for i in range(2):
            await agent.ainvoke({"messages": [HumanMessage(f"q{i}")]})

    assert _order_warnings(lambda: asyncio.run(run())) == []
    assert len(_order_warnings(lambda: _ask(agent))) == 1


def test_what_the_docs_allow_before_combee_does_not_warn(combee: Combee) -> None:
    @dynamic_prompt
    def prompt(request: ModelRequest[Any]) -> str:
        return "A prompt of the app's own."

    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)
    agent = _agent(prompt, retry, combee.middleware())
    assert _order_warnings(lambda: _ask(agent)) == []


def test_as_an_error_the_warning_stops_the_run_and_is_a_combee_error(combee: Combee) -> None:
    agent = _agent(OtherMiddleware(), combee.middleware())
    with warnings.catch_warnings():
        warnings.simplefilter("error", MiddlewareOrderWarning)
        with pytest.raises(MiddlewareOrderWarning):
            _ask(agent)
