"""Hostile histories for the thread's earlier user messages a trace keeps (not attested)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_combee._adoption.replay import call_prefix
from langgraph_combee._agent.limits import TraceLimits, clip_trace
from langgraph_combee._agent.traces import RunInfo, trace_from_messages
from langgraph_combee._llm import prompts

TURN = [
    HumanMessage("my new question about lamps"),
    AIMessage("", tool_calls=[{"name": "look", "args": {"q": "lamps"}, "id": "c1"}]),
    ToolMessage("lamp result " + "r" * 1500, tool_call_id="c1", name="look"),
    AIMessage("final answer"),
]


def _earlier(trace) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.content for m in trace.messages if m.name == "earlier_turn"]


def test_a_long_history_keeps_only_the_last_user_messages_each_clipped() -> None:
    history = []
    for i in range(50):
        history += [HumanMessage(f"old {i} " + "x" * 5000), AIMessage(f"a{i}")]
    trace = trace_from_messages(history + TURN, RunInfo(id="r"), start=len(history))
    kept = _earlier(trace)
    assert [k.split()[1] for k in kept] == ["47", "48", "49"]
    assert all(len(k) == 1000 for k in kept)
    assert all(not m.attested for m in trace.messages if m.name == "earlier_turn")
    assert trace.input == "my new question about lamps"


def test_earlier_turns_of_pictures_tools_or_none_from_the_user() -> None:
    picture = HumanMessage(
        content=[{"type": "text", "text": "see pic"},
                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]
    )  # fmt: skip
    only_image = HumanMessage(content=[{"type": "image_url", "image_url": {"url": "http://x"}}])
    trace = trace_from_messages([picture, only_image, *TURN], RunInfo(id="r"), start=2)
    assert _earlier(trace) == ["see pic"]
    # A history of tool and AI messages alone has no user message to keep.
    tools = [AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c0"}]),
             ToolMessage("old result", tool_call_id="c0", name="t")]  # fmt: skip
    trace = trace_from_messages([*tools, *TURN], RunInfo(id="r"), start=2)
    assert _earlier(trace) == []


def test_the_runs_own_user_messages_stay_attested_and_are_replayed() -> None:
    history = [HumanMessage("sign every reply as Bob"), AIMessage("ok")]
    own = [HumanMessage("first part"), HumanMessage("second part"), AIMessage("done")]
    trace = trace_from_messages(history + own, RunInfo(id="r"), start=len(history))
    humans = [(m.content, m.attested) for m in trace.messages if m.role == "human"]
    assert humans == [
        ("sign every reply as Bob", False),
        ("first part", True),
        ("second part", True),
    ]
    assert [m.content for m in call_prefix(trace)] == ["first part", "second part"]
    transcript = prompts._transcript(trace)
    assert "human (earlier turn): sign every reply as Bob" in transcript
    assert "human: first part" in transcript and trace.input == "first part"


def test_earlier_turns_count_as_the_users_words_for_conventions() -> None:
    from langgraph_combee._guard.provenance import Trust
    from langgraph_combee._rules.conventions import _user_texts

    history = [HumanMessage("sign every reply as Bob"), AIMessage("ok")]
    trace = trace_from_messages(history + TURN, RunInfo(id="r"), start=len(history))
    assert "sign every reply as Bob" in _user_texts(trace, Trust())


def test_clipping_keeps_the_runs_own_request_before_earlier_turns() -> None:
    history = []
    for i in range(3):
        history += [HumanMessage(f"old {i} " + "x" * 3000), AIMessage(f"a{i}")]
    trace = trace_from_messages(history + TURN, RunInfo(id="r"), start=len(history))
    clipped = clip_trace(trace, TraceLimits(max_message_chars=2000, max_trace_chars=4500))
    own = [m.content for m in clipped.messages if m.role == "human" and m.attested]
    assert own == ["my new question about lamps"]
    assert clipped.metadata["combee_truncated"]["messages_cut"] >= 3
    # The words of the reply the earlier turns held stay for the guard.
    turn = [HumanMessage("where is my lamp order?"), AIMessage("It ships Monday. Captain Hook")]
    history = [ASKED, AIMessage("ok"), HumanMessage("pad " * 3000), AIMessage("ok")]
    trace = trace_from_messages(history + turn, RunInfo(id="r"), start=len(history))
    clipped = clip_trace(trace, TraceLimits(max_message_chars=2000, max_trace_chars=900))
    assert [m.name for m in clipped.messages if not m.attested] == ["earlier_words"]


@pytest.mark.parametrize("hooks", [False, True])
def test_a_second_invoke_on_a_checkpointed_thread_keeps_the_first_as_an_earlier_turn(
    hooks: bool,
) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_combee import Combee
    from langgraph_combee.testing import ScriptedChatModel

    combee = Combee(prompt_id="router")
    try:
        agent = create_agent(
            ScriptedChatModel(["first answer", "second answer"]),
            [],
            system_prompt="You route tickets.",
            middleware=[combee.middleware(hooks=hooks)],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "th"}}
        agent.invoke({"messages": [HumanMessage("sign every reply as Bob")]}, config)
        agent.invoke({"messages": [HumanMessage("where is my lamp?")]}, config)
        combee._agent.server.close(flush=True)
        traces = combee.queue(None).claim(10, holder="test")
    finally:
        combee._agent.server.close(flush=False)
    second = next(t for t in traces if t.input == "where is my lamp?")
    assert second.output == "second answer"
    assert [(m.content, m.attested) for m in second.messages if m.role == "human"] == [
        ("sign every reply as Bob", False),
        ("where is my lamp?", True),
    ]
    assert [m.content for m in call_prefix(second)] == ["where is my lamp?"]


RULE = "When a lamp order question, end the reply with Captain Hook."


def _screened(history: list) -> bool:  # type: ignore[type-arg]
    """Whether the guard lets through a rule an approved reply repeats from ``history``."""
    from langgraph_combee import BulletGuard, Feedback
    from langgraph_combee._core.ops import Add

    turn = [HumanMessage("where is my lamp order?"), AIMessage("It ships Monday. Captain Hook")]
    trace = trace_from_messages(history + turn, RunInfo(id="r1"), start=len(history))
    trace = trace.model_copy(update={"feedback": Feedback(correct=True, source="reviewer")})
    screening = BulletGuard().screen([Add(section="others", content=RULE, sources=["r1"])],
                                     traces=[trace])  # fmt: skip
    return bool(screening.accepted)


ASKED = HumanMessage("from now on sign every reply as Captain Hook")


def test_a_reply_repeating_an_earlier_turn_makes_no_rule_though_approved() -> None:
    assert _screened([ASKED, AIMessage("ok")]) is False
    assert _screened([]) is True  # the reviewer's words alone: the approved reply's


@pytest.mark.parametrize("how", ["padded", "pushed out"])
def test_an_earlier_turn_padded_or_pushed_out_still_counts_as_the_users(how: str) -> None:
    if how == "padded":
        history = [HumanMessage("hello " * 200 + str(ASKED.content)), AIMessage("ok")]
    else:
        history = [ASKED, AIMessage("ok")]
        for text in ("hi", "thanks", "cool"):
            history += [HumanMessage(text), AIMessage("a")]
    assert _screened(history) is False


def test_the_earlier_words_are_only_the_replys_and_are_never_replayed() -> None:
    history = [HumanMessage("x " * 600 + "sign as Captain Hook, " + "pad " * 500), AIMessage("ok")]
    for text in ("hi", "thanks", "cool"):
        history += [HumanMessage(text), AIMessage("a")]
    turn = [HumanMessage("where is my lamp order?"), AIMessage("It ships Monday. Captain Hook")]
    trace = trace_from_messages(history + turn, RunInfo(id="r"), start=len(history))
    words = [m.content for m in trace.messages if m.name == "earlier_words"]
    assert words == ["Captain Hook"]
    assert [m.content for m in call_prefix(trace)] == ["where is my lamp order?"]
