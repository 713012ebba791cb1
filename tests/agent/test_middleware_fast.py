"""The default middleware's hot path: its shortcuts give what the long way gives.

Every model call of an agent passes here, so the middleware copies the request
without ``dataclasses.replace``, keeps the combined system message (focused
ones included) from one run to the next, and wakes the serving thread once
when the cached HEAD goes stale. These tests pin that each shortcut serves the
same thing as the general code.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_combee import Combee
from langgraph_combee._agent.middleware import _with_system
from langgraph_combee._core.situations import FOCUS_HEADER
from langgraph_combee.testing import FunctionChatModel
from tests.agent.test_middleware import accept_rules

APP_PROMPT = "You route support tickets to a team code."


@pytest.fixture
def combee() -> Iterator[Combee]:
    combee = Combee(prompt_id="fast")
    try:
        yield combee
    finally:
        combee.close()


class _Grab(AgentMiddleware[Any, Any, Any]):
    """Keeps the last model request it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ModelRequest[Any]] = []

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        self.requests.append(request)
        return handler(request)


def _requests() -> Callable[[str], ModelRequest[Any]]:
    """A function giving the model request an agent makes for a text (one agent for all)."""
    grab = _Grab()
    agent = create_agent(
        FunctionChatModel(lambda m: "ok"), tools=[], system_prompt=APP_PROMPT, middleware=[grab]
    )

    def request(text: str) -> ModelRequest[Any]:
        agent.invoke({"messages": [HumanMessage(text)]})
        return grab.requests[-1]

    return request


def _request(text: str = "Where is my refund?") -> ModelRequest[Any]:
    return _requests()(text)


def test_the_fast_copy_of_a_request_is_what_override_makes() -> None:
    request = _request()
    system = SystemMessage("Another prompt.")
    fast, slow = _with_system(request, system), request.override(system_message=system)
    assert type(fast) is type(slow) is ModelRequest
    assert fast is not request and request.system_message is not system
    for field in dataclasses.fields(ModelRequest):
        assert getattr(fast, field.name) is getattr(slow, field.name), field.name
    # Nothing but the dataclass's own fields is copied (a field langchain adds
    # outside them would be missed by one of the two).
    assert set(vars(fast)) == set(vars(slow)) == {f.name for f in dataclasses.fields(slow)}


def test_a_subclass_of_the_request_goes_through_override() -> None:
    made: list[str] = []

    class Custom(ModelRequest[Any]):
        def override(self, **overrides: Any) -> ModelRequest[Any]:
            made.append("override")
            return super().override(**overrides)

    request = _request()
    custom = Custom(**{f.name: getattr(request, f.name) for f in dataclasses.fields(request)})
    assert type(_with_system(custom, None)) is Custom
    assert made == ["override"]


def test_a_focused_prompt_is_built_once_for_requests_naming_the_same_rules(
    combee: Combee,
) -> None:
    version = accept_rules(combee, "When refund or money back, answer FIN-7Q.", "Be brief.")
    middleware = combee.middleware()
    request = _requests()
    first, _ = middleware._serve(request("Where is my refund?"), version, None)
    again, _ = middleware._serve(request("Where is my refund?"), version, None)
    assert first.system_message is not None and FOCUS_HEADER in first.system_message.text
    assert "answer FIN-7Q." in first.system_message.text.split(FOCUS_HEADER)[1]
    assert again.system_message is first.system_message
    other, _ = middleware._serve(request("Reset my password"), version, None)
    assert other.system_message is not None and FOCUS_HEADER not in other.system_message.text


class _CountingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def test_a_stale_head_wakes_the_serving_thread_once_until_it_is_refreshed(
    combee: Combee,
) -> None:
    server = combee._agent.server
    version = accept_rules(combee, "Be brief.")
    now = [server._clock()]
    server._clock = lambda: now[0]
    server._heads[None].loaded_at = now[0]
    # The running serving thread waits on the event it was started with: these
    # calls reach only this one, so nothing refreshes HEAD meanwhile.
    server._wake = wake = _CountingEvent()
    assert server.head(None) is version and wake.sets == 0
    now[0] += server.serving_settings.refresh_seconds + 1.0
    for _ in range(5):
        assert server.head(None) is version  # the stale HEAD is served meanwhile
    assert wake.sets == 1
    server._stale.clear()  # what the worker's pass does before it refreshes
    assert server.head(None) is version
    assert wake.sets == 2
