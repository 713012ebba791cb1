"""Tests for the chat-model test doubles in ``langgraph_combee.testing``."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_combee import AlgorithmSettings, Combee, Feedback, Trace
from langgraph_combee._core.tokens import estimate_tokens
from langgraph_combee.testing import (
    FunctionChatModel,
    LatencyChatModel,
    ScriptedChatModel,
    ScriptExhaustedError,
    comment_insight,
    fake_learner,
    parse_structured_reply,
)

# --------------------------------------------------------------------------- helpers


class Answer(BaseModel):
    city: str
    population: int


class AnswerDict(TypedDict):
    city: str
    population: int


class RunCollector(BaseTracer):
    """Collects every finished root run (with its child runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)

    def all_runs(self) -> list[Run]:
        found: list[Run] = []
        stack = list(self.roots)
        while stack:
            run = stack.pop()
            found.append(run)
            stack.extend(run.child_runs)
        return found


def _usage(prompt: str, reply: str) -> dict[str, int]:
    input_tokens = estimate_tokens(prompt)
    output_tokens = estimate_tokens(reply)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


# --------------------------------------------------------------------------- ScriptedChatModel


def test_scripted_replies_in_order_and_prompts_recorded() -> None:
    model = ScriptedChatModel(replies=["one", AIMessage(content="two")])
    first = model.invoke("q1")
    second = model.invoke([SystemMessage(content="sys"), HumanMessage(content="q2")])
    assert (first.content, second.content) == ("one", "two")
    assert isinstance(first, AIMessage)
    assert model.calls == 2
    assert [[m.content for m in prompt] for prompt in model.prompts] == [["q1"], ["sys", "q2"]]
    assert model.remaining == 0


async def test_scripted_ainvoke_and_positional_constructor() -> None:
    model = ScriptedChatModel(["a", "b"])
    assert (await model.ainvoke("x")).content == "a"
    assert (await model.ainvoke("y")).content == "b"
    assert model.calls == 2


def test_scripted_aimessage_reply_is_a_copy() -> None:
    scripted = AIMessage(content="hello")
    model = ScriptedChatModel(replies=[scripted], cycle=True)
    reply = model.invoke("hi")
    assert reply is not scripted
    assert reply.usage_metadata is not None
    assert scripted.usage_metadata is None
    assert scripted.response_metadata == {}


def test_exception_replies_raise_and_script_continues() -> None:
    model = ScriptedChatModel(replies=[ValueError("boom"), TimeoutError, "recovered"])
    with pytest.raises(ValueError, match="boom"):
        model.invoke("a")
    with pytest.raises(TimeoutError, match=r"replies\[1\]"):
        model.invoke("b")
    assert model.invoke("c").content == "recovered"
    assert model.calls == 3
    assert len(model.prompts) == 3


async def test_exception_reply_raises_under_ainvoke() -> None:
    model = ScriptedChatModel(replies=[RuntimeError("llm down")])
    with pytest.raises(RuntimeError, match="llm down"):
        await model.ainvoke("a")


def test_exhaustion_raises_clear_error() -> None:
    model = ScriptedChatModel(replies=["only"])
    model.invoke("a")
    with pytest.raises(ScriptExhaustedError, match=r"1 reply was scripted and call #2") as info:
        model.invoke("b")
    assert isinstance(info.value, AssertionError)
    assert (info.value.scripted, info.value.call) == (1, 2)


def test_empty_script_raises_on_first_call() -> None:
    model = ScriptedChatModel(replies=[])
    with pytest.raises(ScriptExhaustedError, match="0 replies were scripted"):
        model.invoke("a")
    empty_cycle = ScriptedChatModel(replies=[], cycle=True)
    with pytest.raises(ScriptExhaustedError):
        empty_cycle.invoke("a")


def test_cycle_starts_over() -> None:
    model = ScriptedChatModel(replies=["a", "b"], cycle=True)
    assert [model.invoke(str(i)).content for i in range(5)] == ["a", "b", "a", "b", "a"]
    assert model.remaining == 1


def test_reset_rewinds_script() -> None:
    model = ScriptedChatModel(replies=["a"])
    model.invoke("x")
    model.reset()
    assert model.calls == 0
    assert model.prompts == []
    assert model.invoke("y").content == "a"


async def test_callable_replies_sync_and_async() -> None:
    def echo(messages: list[BaseMessage]) -> str:
        return f"echo {messages[-1].text}"

    async def shout(messages: list[BaseMessage]) -> AIMessage:
        await asyncio.sleep(0)
        return AIMessage(content=str(messages[-1].text).upper())

    model = ScriptedChatModel(replies=[echo, shout, echo, shout])
    assert model.invoke("hi").content == "echo hi"
    assert (await model.ainvoke("hey")).content == "HEY"
    assert (await model.ainvoke("yo")).content == "echo yo"
    # an async reply under sync invoke while a loop runs in this thread
    assert model.invoke("ok").content == "OK"


def test_callable_reply_with_bad_return_type() -> None:
    model = ScriptedChatModel(replies=[lambda messages: 42])
    with pytest.raises(TypeError, match=r"replies\[0\] returned 42"):
        model.invoke("x")


def test_scripted_is_thread_safe() -> None:
    model = ScriptedChatModel(replies=[str(i) for i in range(200)])
    seen: list[str] = []
    seen_lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            reply = str(model.invoke("x").content)
            with seen_lock:
                seen.append(reply)

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen, key=int) == [str(i) for i in range(200)]
    assert model.calls == 200


async def test_scripted_is_asyncio_safe() -> None:
    model = ScriptedChatModel(replies=[str(i) for i in range(50)])
    replies = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(50)))
    assert sorted(int(str(r.content)) for r in replies) == list(range(50))
    assert model.calls == 50


# --------------------------------------------------------------------------- FunctionChatModel


async def test_function_model_sync_fn_under_invoke_and_ainvoke() -> None:
    model = FunctionChatModel(lambda messages: f"{len(messages)} messages")
    assert model.invoke("a").content == "1 messages"
    reply = await model.ainvoke([SystemMessage(content="s"), HumanMessage(content="h")])
    assert reply.content == "2 messages"
    assert model.calls == 2
    assert [len(p) for p in model.prompts] == [1, 2]


async def test_function_model_async_fn_under_ainvoke() -> None:
    async def fn(messages: list[BaseMessage]) -> AIMessage:
        await asyncio.sleep(0)
        return AIMessage(content=f"async {messages[0].text}")

    model = FunctionChatModel(fn=fn)
    assert (await model.ainvoke("x")).content == "async x"


def test_function_model_async_fn_under_invoke_without_loop() -> None:
    async def fn(messages: list[BaseMessage]) -> str:
        await asyncio.sleep(0)
        return "from asyncio.run"

    model = FunctionChatModel(fn)
    assert model.invoke("x").content == "from asyncio.run"
    assert model.calls == 1


async def test_function_model_async_fn_under_invoke_inside_running_loop() -> None:
    caller = threading.get_ident()
    ran_in: list[int] = []

    async def fn(messages: list[BaseMessage]) -> str:
        ran_in.append(threading.get_ident())
        return "from a fresh thread"

    model = FunctionChatModel(fn)
    assert model.invoke("x").content == "from a fresh thread"
    assert ran_in and ran_in[0] != caller


def test_function_model_errors_propagate_and_are_recorded() -> None:
    def fail(messages: list[BaseMessage]) -> str:
        raise ConnectionError("network down")

    model = FunctionChatModel(fail)
    with pytest.raises(ConnectionError):
        model.invoke("x")
    assert model.calls == 1
    model.reset()
    assert model.calls == 0


# --------------------------------------------------------------------------- usage metadata


async def test_usage_metadata_from_estimate_tokens() -> None:
    prompt = [SystemMessage(content="You are terse."), HumanMessage(content="Name a colour.")]
    reply_text = "Blue, the colour of the sky."
    scripted = ScriptedChatModel(replies=[reply_text])
    function = FunctionChatModel(lambda messages: reply_text)
    latency = LatencyChatModel(FunctionChatModel(lambda messages: reply_text), base_seconds=0.0)
    expected = _usage("You are terse.Name a colour.", reply_text)
    for model in (scripted, function, latency):
        reply = await model.ainvoke(prompt)
        assert reply.usage_metadata == expected
        assert reply.response_metadata["model_name"]


def test_existing_usage_and_model_name_are_kept() -> None:
    usage = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    scripted = AIMessage(
        content="x", usage_metadata=usage, response_metadata={"model_name": "gpt-test"}
    )
    reply = ScriptedChatModel(replies=[scripted]).invoke("hello")
    assert reply.usage_metadata == usage
    assert reply.response_metadata["model_name"] == "gpt-test"
    named = ScriptedChatModel(replies=["y"], model_name="my-model").invoke("hello")
    assert named.response_metadata["model_name"] == "my-model"


def test_llm_types_are_distinct() -> None:
    inner = ScriptedChatModel(replies=[])
    types = {
        inner._llm_type,
        FunctionChatModel(lambda m: "x")._llm_type,
        LatencyChatModel(inner)._llm_type,
    }
    assert len(types) == 3


# --------------------------------------------------------------------------- LatencyChatModel


async def test_latency_counts_calls_tokens_and_simulated_seconds() -> None:
    inner = ScriptedChatModel(replies=["short", "a somewhat longer reply text"])
    model = LatencyChatModel(
        inner,
        base_seconds=0.01,
        seconds_per_input_token=0.001,
        seconds_per_output_token=0.002,
        time_scale=0.5,
    )
    await model.ainvoke("first prompt")
    model.invoke("the second prompt, longer")
    in_tokens = estimate_tokens("first prompt") + estimate_tokens("the second prompt, longer")
    out_tokens = estimate_tokens("short") + estimate_tokens("a somewhat longer reply text")
    assert model.calls == 2
    assert inner.calls == 2
    assert model.input_tokens == in_tokens
    assert model.output_tokens == out_tokens
    expected = 0.5 * (2 * 0.01 + in_tokens * 0.001 + out_tokens * 0.002)
    assert model.simulated_seconds == pytest.approx(expected)
    assert model.latency_for(in_tokens, out_tokens) == pytest.approx(
        0.5 * (0.01 + in_tokens * 0.001 + out_tokens * 0.002)
    )
    assert model.in_flight == 0
    assert model.max_concurrency == 1


async def test_latency_sleeps_without_blocking_the_loop() -> None:
    inner = ScriptedChatModel(replies=["ok"], cycle=True)
    model = LatencyChatModel(inner, base_seconds=1.0, time_scale=0.1)
    replies = await asyncio.gather(*(model.ainvoke(f"prompt {i}") for i in range(10)))
    assert [r.content for r in replies] == ["ok"] * 10
    assert model.max_concurrency == 10
    assert model.in_flight == 0
    assert model.calls == 10
    assert model.simulated_seconds == pytest.approx(10 * 0.1)


async def test_latency_reset_counters() -> None:
    model = LatencyChatModel(ScriptedChatModel(replies=["ok"], cycle=True), time_scale=0.0)
    await asyncio.gather(model.ainvoke("a"), model.ainvoke("b"))
    model.reset_counters()
    assert (model.calls, model.input_tokens, model.output_tokens) == (0, 0, 0)
    assert (model.simulated_seconds, model.max_concurrency, model.in_flight) == (0.0, 0, 0)
    assert model.prompts == []


async def test_latency_inner_error_is_counted_and_released() -> None:
    model = LatencyChatModel(ScriptedChatModel(replies=[ValueError("bad")]), time_scale=0.0)
    with pytest.raises(ValueError, match="bad"):
        await model.ainvoke("x")
    assert model.calls == 1
    assert model.in_flight == 0
    assert model.simulated_seconds == 0.0


async def test_latency_is_traced_once() -> None:
    collector = RunCollector()
    model = LatencyChatModel(ScriptedChatModel(replies=["ok"]), time_scale=0.0)
    await model.ainvoke("x", {"callbacks": [collector]})
    assert [run.run_type for run in collector.all_runs()] == ["llm"]


# --------------------------------------------------------------------------- bind_tools


def test_bind_tools_returns_scripted_tool_calls() -> None:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}
    model = ScriptedChatModel(replies=[AIMessage(content="", tool_calls=[call]), "It is sunny."])

    class Lookup(BaseModel):
        """Look something up."""

        query: str

    bound = model.bind_tools([get_weather, Lookup], tool_choice="auto")
    first = bound.invoke("weather in Paris?")
    assert first.tool_calls == [{**call, "type": "tool_call"}]
    assert model.bound_tools == ["get_weather", "Lookup"]
    last_tools = model.last_tools
    assert last_tools is not None
    assert [t["function"]["name"] for t in last_tools] == ["get_weather", "Lookup"]
    assert bound.invoke("thanks").content == "It is sunny."
    model_without_tools = ScriptedChatModel(replies=["plain"])
    model_without_tools.invoke("x")
    assert model_without_tools.last_tools is None


async def test_bind_tools_on_latency_forwards_tools_to_inner() -> None:
    inner = ScriptedChatModel(replies=["done"])
    model = LatencyChatModel(inner, time_scale=0.0)
    reply = await model.bind_tools([get_weather]).ainvoke("x")
    assert reply.content == "done"
    assert model.bound_tools == ["get_weather"]
    assert inner.last_tools is not None
    assert inner.last_tools[0]["function"]["name"] == "get_weather"


# --------------------------------------------------------------------------- structured output


def test_structured_output_fenced_json() -> None:
    reply = '```json\n{"city": "Paris", "population": 2100000}\n```'
    model = ScriptedChatModel(replies=[reply])
    result = model.with_structured_output(Answer).invoke("capital of France?")
    assert result == Answer(city="Paris", population=2100000)
    assert model.structured_schemas == [Answer]


async def test_structured_output_prose_around_json_async() -> None:
    reply = 'Sure! Here it is: {"city": "Rome", "population": 2800000} Hope that helps {ok}.'
    model = FunctionChatModel(lambda messages: reply)
    result = await model.with_structured_output(Answer).ainvoke("capital of Italy?")
    assert result == Answer(city="Rome", population=2800000)


def test_structured_output_dict_and_typeddict_schemas_give_dicts() -> None:
    reply = 'note {"city": "Oslo", "population": 700000}'
    model = ScriptedChatModel(replies=[reply], cycle=True)
    json_schema = {"title": "Answer", "type": "object", "properties": {}}
    expected = {"city": "Oslo", "population": 700000}
    assert model.with_structured_output(json_schema).invoke("q") == expected
    assert model.with_structured_output(AnswerDict).invoke("q") == expected


def test_structured_output_include_raw_with_garbage() -> None:
    model = ScriptedChatModel(replies=["I cannot answer that."])
    result = model.with_structured_output(Answer, include_raw=True).invoke("q")
    assert isinstance(result, dict)
    assert isinstance(result["raw"], AIMessage)
    assert result["raw"].content == "I cannot answer that."
    assert result["parsed"] is None
    assert isinstance(result["parsing_error"], OutputParserException)


async def test_structured_output_include_raw_success() -> None:
    model = ScriptedChatModel(replies=['{"city": "Bern", "population": 140000}'])
    result = await model.with_structured_output(Answer, include_raw=True).ainvoke("q")
    assert isinstance(result, dict)
    assert result["parsed"] == Answer(city="Bern", population=140000)
    assert result["parsing_error"] is None


async def test_structured_output_parse_errors_raise() -> None:
    model = ScriptedChatModel(replies=["no json here", '{"city": "Nowhere"}'])
    structured = model.with_structured_output(Answer)
    with pytest.raises(OutputParserException, match="No JSON object"):
        structured.invoke("q")
    with pytest.raises(OutputParserException, match="does not match Answer"):
        await structured.ainvoke("q")


def test_structured_output_falls_back_to_tool_call_args() -> None:
    call = {"name": "Answer", "args": {"city": "Lima", "population": 10000000}, "id": "c1"}
    message = AIMessage(content="", tool_calls=[call])
    assert parse_structured_reply(message, Answer) == Answer(city="Lima", population=10000000)


def test_structured_output_rejects_unsupported_schema() -> None:
    model = ScriptedChatModel(replies=[])
    with pytest.raises(TypeError, match="expected a pydantic BaseModel"):
        model.with_structured_output(int)


async def test_run_name_reaches_callbacks() -> None:
    collector = RunCollector()
    model = ScriptedChatModel(replies=['{"city": "Paris", "population": 1}'])
    structured = model.with_structured_output(Answer)
    await structured.ainvoke("q", {"run_name": "extract-answer", "callbacks": [collector]})
    assert [root.name for root in collector.roots] == ["extract-answer"]
    chat_runs = [run for run in collector.all_runs() if run.run_type == "llm"]
    assert [run.name for run in chat_runs] == ["ScriptedChatModel"]
    assert chat_runs[0].parent_run_id == collector.roots[0].id


def test_run_name_on_plain_invoke() -> None:
    collector = RunCollector()
    ScriptedChatModel(replies=["x"]).invoke("q", {"run_name": "judge", "callbacks": [collector]})
    assert [(r.name, r.run_type) for r in collector.roots] == [("judge", "llm")]


# --------------------------------------------------------------------------- validation


def test_scripted_rejects_unsupported_reply_types() -> None:
    with pytest.raises(TypeError, match=r"replies\[1\]=42 \(int\) is not allowed: a str"):
        ScriptedChatModel(replies=["ok", 42])
    with pytest.raises(TypeError, match="HumanMessage"):
        ScriptedChatModel(replies=[HumanMessage(content="not a reply")])
    with pytest.raises(TypeError, match="both positionally and by keyword"):
        ScriptedChatModel(["a"], replies=["b"])


def test_function_model_rejects_non_callable() -> None:
    bad: Any = "not callable"
    with pytest.raises(TypeError, match="fn='not callable' is not allowed"):
        FunctionChatModel(bad)


@pytest.mark.parametrize(
    "field", ["base_seconds", "seconds_per_input_token", "seconds_per_output_token", "time_scale"]
)
def test_latency_rejects_negative_seconds(field: str) -> None:
    inner = ScriptedChatModel(replies=[])
    kwargs: dict[str, Any] = {field: -0.5}
    with pytest.raises(ValueError, match=rf"{field}=-0\.5 is not allowed"):
        LatencyChatModel(inner, **kwargs)


def test_latency_rejects_non_chat_model_inner() -> None:
    bad: Any = object()
    with pytest.raises(TypeError, match="inner=<object object"):
        LatencyChatModel(bad)
    model = LatencyChatModel(inner=ScriptedChatModel(replies=["k"]), time_scale=0.0)
    assert model.invoke("x").content == "k"


def test_models_can_be_deep_copied() -> None:
    model = ScriptedChatModel(replies=["a", "b"])
    model.invoke("x")
    clone = copy.deepcopy(model)
    assert clone.invoke("y").content == "b"
    assert clone.calls == 2
    assert model.calls == 1
    latency = copy.deepcopy(LatencyChatModel(model, time_scale=0.0))
    assert latency.invoke("z").content == "b"


async def test_scripted_model_drives_a_tool_calling_agent() -> None:
    from langchain.agents import create_agent

    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}
    model = ScriptedChatModel(replies=[AIMessage(content="", tool_calls=[call]), "Sunny."])
    agent = create_agent(LatencyChatModel(model, time_scale=0.0), tools=[get_weather])
    result = await agent.ainvoke({"messages": [HumanMessage(content="weather in Paris?")]})
    contents = [m.content for m in result["messages"]]
    assert contents == ["weather in Paris?", "", "sunny in Paris", "Sunny."]
    assert model.calls == 2
    assert model.prompts[1][-1].content == "sunny in Paris"


def test_max_prompts_keeps_only_the_most_recent_prompts() -> None:
    model = ScriptedChatModel(replies=["ok"], cycle=True, max_prompts=2)
    for i in range(5):
        model.invoke(f"q{i}")
    assert [p[0].content for p in model.prompts] == ["q3", "q4"]
    assert model.calls == 5
    model.max_prompts = 0
    model.invoke("q5")
    assert model.prompts == [] and model.calls == 6


# ---- fake_learner reads feedback comments ---------------------------------------


def test_fake_learner_learns_a_rule_from_a_feedback_comment() -> None:
    combee = Combee(prompt_id="commented", model=fake_learner())
    comment = "Refund requests go to the FIN-REFUNDS team. The agent sent it to billing."
    report = combee.learn(
        [
            Trace(
                input="I want a refund for order 7",
                output="BILLING",
                feedback=Feedback(correct=False, comment=comment, source="evaluator"),
            )
        ]
    )
    assert report.version.version == 1
    assert [b.content for b in report.playbook.bullets] == [
        "When the input starts like 'I want a refund', refund requests go to the FIN-REFUNDS team."
    ]


def test_fake_learner_learns_a_convention_a_comment_states_with_the_small_roles() -> None:
    combee = Combee(
        prompt_id="convention", model=fake_learner(), algorithm=AlgorithmSettings(roles="small")
    )
    trace = Trace(
        input="Where is my parcel",
        output="It is on its way",
        feedback=Feedback(
            correct=False, comment="Always name the carrier in the reply.", source="evaluator"
        ),
    )
    rules = [b.content for b in combee.learn([trace]).playbook.bullets]
    assert len(rules) == 1
    assert "always name the carrier in the reply" in rules[0]


def test_a_comment_on_a_correct_run_or_beside_a_ground_truth_teaches_no_comment_rule() -> None:
    assert comment_insight("Where is my parcel", "") == ""
    right = Trace(
        input="Where is my parcel",
        output="DHL",
        feedback=Feedback(correct=True, comment="Good, name the carrier.", source="evaluator"),
    )
    combee = Combee(prompt_id="right", model=fake_learner())
    assert combee.learn([right]).version.version == 0
