"""Faults survived: a broken learner LLM, a store that goes away, huge and malformed traces.

Each test injects one fault and checks the promise made in docs/faults.md: the
agent keeps answering, nothing partial is written, no accepted version is lost,
and the traces are learned once the fault is gone. Time is a fake clock; no
test asserts on wall-clock time. Budgets are in ``tests/llm/test_budget.py``; killed and
racing learners in ``test_faults_process.py``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from pydantic import BaseModel

from langgraph_combee import (
    BulletGuard,
    CaptureSettings,
    Combee,
    Feedback,
    LearnerSettings,
    Trace,
)
from langgraph_combee._agent.limits import TraceLimits, clip_trace, cut_marker, trace_size
from langgraph_combee._agent.metadata_limits import CYCLE
from langgraph_combee._core.types import TraceMessage
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.errors import ConfigurationError, LearningError
from langgraph_combee.testing import FlakyStore, FunctionChatModel, fake_learner
from tests.helpers import FakeClock, background_learner, failing_traces, role_of


def _learner(combee: Combee, clock: FakeClock, **kw: Any) -> BackgroundLearner:
    # No jitter: these tests move the clock by the exact backoff.
    fields = {"min_batch": 1, "step_backoff_seconds": 5.0, "backoff_jitter": 0}
    return background_learner(combee._learner_parts, clock=clock, **{**fields, **kw})


def _queue(combee: Combee, traces: Sequence[Trace]) -> None:
    for trace in traces:
        combee.queue().put(trace)


def _learned_ids(combee: Combee) -> list[str]:
    return [i for v in combee.history() for i in v.source_trace_ids]


# ---------------------------------------------------------------- the learner LLM


class Breakable:
    """The fake learner, or a fault in its place while ``broken``."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.broken = True
        self.faulty_calls = 0
        self._good = fake_learner()

    async def __call__(self, messages: list[BaseMessage]) -> str:
        if not self.broken:
            return str((await self._good.ainvoke(messages)).content)
        self.faulty_calls += 1
        if self.fault == "raises":
            raise ConnectionError("learner LLM unreachable")
        if self.fault == "times_out":
            await asyncio.sleep(30)  # cut short by the 0.3 s call timeout
        if self.fault == "garbage":
            return "Sure! Here are some thoughts, but no JSON, sorry."
        # A reply cut off by an output-token limit before its first field.
        return '```json\n{\n  "'


@pytest.mark.parametrize("fault", ["raises", "times_out", "garbage", "truncated_json"])
async def test_a_faulty_learner_llm_writes_nothing_and_the_traces_are_learned_later(
    fault: str,
) -> None:
    clock = FakeClock()
    llm = Breakable(fault)
    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(llm),
        batch_size=4,
        learner=LearnerSettings(
            max_attempts=1, backoff_seconds=0, timeout_seconds=0.3 if fault == "times_out" else 10.0
        ),
    )
    learner = _learner(combee, clock)
    traces = failing_traces(4)
    _queue(combee, traces)

    assert await learner.tick() == 0
    assert learner.stats.failed_steps == 1
    assert combee.history() == []  # no partial version
    assert combee.queue().pending_count() == 4  # released, not lost
    assert await learner.tick() == 0  # backing off: no new attempt, no new LLM call
    calls = llm.faulty_calls
    clock.now += 4.9
    assert await learner.tick() == 0
    assert llm.faulty_calls == calls

    llm.broken = False  # the LLM recovers
    clock.now += 0.2
    assert await learner.tick() == 1
    assert combee.current().version == 1
    assert sorted(_learned_ids(combee)) == sorted(t.id for t in traces)
    assert combee.queue().pending_count() == 0


async def test_backoff_doubles_while_the_llm_stays_down() -> None:
    clock = FakeClock()
    llm = Breakable("raises")
    combee = Combee(
        prompt_id="p",
        model=FunctionChatModel(llm),
        batch_size=2,
        learner=LearnerSettings(max_attempts=1, backoff_seconds=0),
    )
    learner = _learner(combee, clock, step_backoff_seconds=1.0, max_backoff_seconds=4.0)
    _queue(combee, failing_traces(2))
    attempts_at = []
    for _ in range(40):  # 10 s of fake time in quarter-second passes
        before = learner.stats.failed_steps
        await learner.tick()
        if learner.stats.failed_steps > before:
            attempts_at.append(clock.now - 1000.0)
        clock.now += 0.25
    # Retries after 1, 2, 4, then 4 s (capped): at t = 0, 1, 3, 7.
    assert attempts_at == [0.0, 1.0, 3.0, 7.0]
    assert combee.history() == []


async def test_one_garbled_reflection_costs_only_itself_in_the_background() -> None:
    good = fake_learner()

    def reply(messages: list[BaseMessage]) -> str:
        if role_of(messages) == "reflector" and "ticket 0 " in str(messages[1].content):
            return "no json"
        return str(good.invoke(messages).content)

    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), batch_size=4)
    learner = _learner(combee, FakeClock())
    _queue(combee, failing_traces(4))
    assert await learner.tick() == 1
    report = learner.stats.reports[0]
    assert report.unparsed == {"reflect": 1}
    assert len(combee.current().playbook.bullets) == 3
    assert combee.queue().pending_count() == 0  # the step succeeded: all four are done


def test_an_unusable_curator_reply_fails_the_step_instead_of_learning_nothing() -> None:
    good = fake_learner()

    def reply(messages: list[BaseMessage]) -> str:
        if role_of(messages) == "curator":
            return "I would suggest some edits, but I cannot format them."
        return str(good.invoke(messages).content)

    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), batch_size=2)
    with pytest.raises(LearningError, match="only curator reply"):
        combee.learn(failing_traces(2))
    assert combee.history() == []


# ---------------------------------------------------------------- the store


ROUTER_PROMPT = "Route the ticket."


def _agent_reply(messages: Sequence[BaseMessage]) -> str:
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    return "FIN-0" if "CODE-0" in system else "GENERAL"


def _ask(agent: Any, text: str) -> tuple[str, str]:
    run_id = str(uuid.uuid4())
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, {"run_id": run_id})
    return run_id, out["messages"][-1].text


async def test_a_store_outage_never_reaches_the_agent_and_learning_resumes() -> None:
    store = FlakyStore()
    clock = FakeClock()
    combee = Combee(prompt_id="router", model=fake_learner(), store=store, batch_size=2)
    combee._agent.server.flush_seconds = 3600  # flushes happen when the test says
    try:
        await combee.alearn(failing_traces(1))  # v1 teaches the CODE-0 rule
        model = FunctionChatModel(_agent_reply)
        agent = create_agent(model, system_prompt=ROUTER_PROMPT, middleware=[combee.middleware()])
        assert _ask(agent, "warm the cache")[1] == "FIN-0"
        learner = _learner(combee, clock)

        with store.outage():
            topics = ["refund", "parcel", "password", "invoice"]
            answers = [_ask(agent, f"my {topic} went wrong") for topic in topics]
            assert [a for _, a in answers] == ["FIN-0"] * 4  # still served v1, no exception
            assert "CODE-0" in model.prompts[-1][0].text
            assert combee.flush() == 0
            with pytest.raises(ConnectionError):
                await learner.tick()  # the learner loop counts this and tries again
            assert combee._agent.server.stats.flush_errors >= 1
            assert combee._agent.server.buffered() == 5  # warm-up run + four, all kept
            for i, (run_id, _) in enumerate(answers):
                # Feedback for a buffered run reaches it in memory.
                assert combee.feedback(run_id, correct=False, ground_truth=f"TEAM-{i}")

        assert combee.current().version == 1  # no accepted version lost
        for _ in range(10):
            await learner.tick()
            clock.now += 31  # past max_wait: the odd trace out is learned too
            if not (combee.queue().pending_count() or combee._agent.server.buffered()):
                break
        assert combee.queue().pending_count() == 0
        assert all(combee.queue().status(run_id) == "done" for run_id, _ in answers)
        rules = combee.current().render()
        assert all(f"TEAM-{i}" in rules for i in range(4))  # every buffered run was learned
    finally:
        combee._agent.server.close(flush=False)


async def test_the_drop_policy_bounds_what_an_outage_buffers() -> None:
    store = FlakyStore()
    combee = Combee(
        prompt_id="p",
        store=store,
        capture=CaptureSettings(capture_limit=3, drop_policy="drop_newest"),
    )
    combee._agent.server._ensure_worker = lambda: None  # type: ignore[method-assign]
    with store.outage():
        for i in range(5):
            combee.capture(Trace(id=f"x{i}"))
        assert combee.flush() == 0
    assert combee._agent.server.stats.dropped == 2
    assert combee.flush() == 3
    ids = [t.id for t in combee.queue().claim(10, holder="t")]
    assert ids == ["x0", "x1", "x2"]  # drop_newest kept the oldest


async def test_a_store_lost_mid_step_keeps_no_trace_stuck_in_its_claim() -> None:
    store = FlakyStore()
    good = fake_learner()
    outage = {"at_curator": True}

    def reply(messages: list[BaseMessage]) -> str:
        if role_of(messages) == "curator" and outage["at_curator"]:
            outage["at_curator"] = False
            store.go_down()  # the store goes away while the step is running
        return str(good.invoke(messages).content)

    clock = FakeClock()
    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), store=store, batch_size=2)
    learner = _learner(combee, clock, visibility_seconds=3600.0)
    _queue(combee, failing_traces(2))
    assert await learner.tick() == 0
    assert learner.stats.failed_steps == 1
    store.come_back()
    assert combee.history() == []  # the step could not write: nothing partial
    clock.now += 5.1  # past the step backoff, far inside the claim's visibility
    assert await learner.tick() == 1  # the claims were released on the next pass
    assert sorted(_learned_ids(combee)) == ["t0", "t1"]


def test_flaky_store_fails_only_while_down() -> None:
    store = FlakyStore(error=lambda: OSError("disk I/O error"))
    store.put(("n",), "k", {"v": 1})
    store.fail_next(2)
    for _ in range(2):
        with pytest.raises(OSError, match="disk I/O"):
            store.get(("n",), "k")
    item = store.get(("n",), "k")
    assert item is not None and item.value == {"v": 1}
    assert (store.failures, store.is_down) == (2, False)
    with pytest.raises(TypeError, match="BaseStore"):
        FlakyStore(inner="nope")  # type: ignore[arg-type]


# ---------------------------------------------------------------- huge traces


def test_a_huge_run_is_cut_to_the_limits_with_markers_not_rejected() -> None:
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        capture=CaptureSettings(max_message_chars=2_000, max_trace_chars=10_000),
    )
    dump = "row," * 250_000  # a tool that returned a megabyte
    replies: list[Any] = [
        AIMessage("", tool_calls=[{"name": "export", "args": {"table": "t"}, "id": "c1"}]),
        "done",
    ]
    from langchain_core.tools import tool

    @tool
    def export(table: str) -> str:
        """Export a table."""
        return dump

    from langgraph_combee.testing import ScriptedChatModel

    agent = create_agent(
        ScriptedChatModel(replies), tools=[export], middleware=[combee.middleware()]
    )
    run_id = str(uuid.uuid4())
    question = "please export table t " + "x" * 50_000
    agent.invoke({"messages": [{"role": "user", "content": question}]}, {"run_id": run_id})
    combee._agent.server.close(flush=True)
    [trace] = combee.queue().claim(10, holder="t")
    assert trace.id == run_id
    assert trace_size(trace) <= 10_000
    assert len(trace.input) <= 2_000 and "[combee: cut 48," in trace.input
    assert any("[combee: cut" in (c.result or "") for c in trace.tool_calls)
    cut = trace.metadata["combee_truncated"]
    assert cut["original_chars"] > 1_000_000 and cut["chars_cut"] > 990_000
    assert combee._agent.server.stats.truncated == 1
    report = combee.learn(
        [trace.model_copy(update={"feedback": Feedback(correct=False, ground_truth="OK")})]
    )
    assert report.steps[0].version == 1  # a cut trace is still learned from


def test_a_long_conversation_keeps_its_start_and_end() -> None:
    from langgraph_combee import Trace as T
    from langgraph_combee._core.types import TraceMessage

    messages = [
        TraceMessage(role="human" if i % 2 else "ai", content=f"m{i} " + "w" * 996)
        for i in range(100)
    ]
    trace = T(input="start", output="end", messages=messages)
    clipped = clip_trace(trace, TraceLimits(max_message_chars=2_000, max_trace_chars=20_000))
    assert trace_size(clipped) <= 20_000
    kept = [m.content.split()[0] for m in clipped.messages if m.role != "combee"]
    assert kept[0] == "m0" and kept[-1] == "m99"
    [marker] = [m for m in clipped.messages if m.role == "combee"]
    assert f"{100 - len(kept)} messages cut" in marker.content
    assert clipped.metadata["combee_truncated"]["messages_cut"] == 100 - len(kept)
    small = T(input="hi", output="there")
    assert clip_trace(small, TraceLimits()) is small  # small traces are not copied


def test_trace_limits_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="max_trace_chars=10"):
        Combee(prompt_id="p", capture=CaptureSettings(max_trace_chars=10))
    with pytest.raises(ConfigurationError, match="max_message_chars=True"):
        TraceLimits(max_message_chars=True)  # type: ignore[arg-type]
    unlimited = TraceLimits(max_message_chars=None, max_trace_chars=None)
    huge = Trace(input="x" * 1_000_000)
    assert clip_trace(huge, unlimited) is huge


def _cuts(text: str) -> int:
    """Characters the markers in ``text`` say were cut."""
    return sum(int(n.replace(",", "")) for n in re.findall(r"\[combee: cut ([\d,]+) of", text))


def test_a_huge_metadata_string_is_cut_like_any_field_and_the_cut_recorded() -> None:
    blob = "h" * 1_000 + "m" * 2_000_000 + "t" * 1_000
    raw = b"\xff" * 2_000_000  # stored as its repr: 8 MB of text
    trace = Trace(
        input="q",
        metadata={
            "blob": blob,
            "deep": {"rows": [None, 3, True, 2.5, {"text": "d" * 30_000}]},
            "raw": raw,
            "combee_version": 4,
        },
    )
    assert trace_size(trace) > 10_000_000  # metadata counts
    clipped = clip_trace(trace, TraceLimits())  # 20,000 per field, 100,000 per trace
    meta = clipped.metadata
    assert len(meta["blob"]) <= 20_000
    assert meta["blob"].startswith("h" * 1_000) and meta["blob"].endswith("t" * 1_000)
    keep = 20_000 - len(cut_marker(len(blob), len(blob)))
    assert cut_marker(len(blob) - keep, len(blob)) in meta["blob"]
    assert meta["deep"]["rows"][:4] == [None, 3, True, 2.5]
    assert len(meta["deep"]["rows"][4]["text"]) <= 20_000
    assert isinstance(meta["raw"], str) and meta["raw"].startswith("b'\\xff")
    assert len(meta["raw"]) <= 20_000 and f"of {len(repr(raw)):,} characters" in meta["raw"]
    assert meta["combee_version"] == 4
    record = meta["combee_truncated"]
    texts = (meta["blob"], meta["deep"]["rows"][4]["text"], meta["raw"])
    assert record["chars_cut"] == sum(_cuts(t) for t in texts)
    assert record["fields_cut"] == 3 and record["metadata_entries_cut"] == 0
    assert record["original_chars"] == trace_size(trace)
    assert trace_size(clipped) <= 100_000
    assert trace.metadata["blob"] is blob  # the caller's trace is left as it was
    again = clip_trace(clipped, TraceLimits(max_message_chars=200))
    assert again.metadata["combee_truncated"]["original_chars"] == trace_size(clipped)


def test_metadata_counts_toward_the_trace_size_and_small_traces_are_not_copied() -> None:
    bare = Trace(input="q" * 10)
    assert trace_size(bare.model_copy(update={"metadata": {"key": "v" * 500}})) == 10 + 3 + 500
    # Keys and values as stored: 7 as "7", None as "None", b"zz" as "b'zz'".
    nested = {"a": [1, None, {"b": "x" * 20}], 7: b"zz"}
    size = trace_size(bare.model_copy(update={"metadata": nested}))
    assert size == 10 + len("a") + len("1") + len("None") + len("b") + 20 + len("7") + len("b'zz'")
    # Every string under max_message_chars, but metadata puts the trace over max_trace_chars.
    limits = TraceLimits(max_message_chars=1_000, max_trace_chars=5_000)
    wide = Trace(input="q", metadata={f"k{i}": "v" * 900 for i in range(10)})
    assert trace_size(wide) > 5_000 and clip_trace(wide, limits) is not wide
    small = Trace(input="hi", metadata={"user": "u1", "tags": ["a", "b"], "n": {"x": b"y"}})
    assert clip_trace(small, TraceLimits()) is small  # the fast path: the same object
    # Over max_message_chars in all, yet no single string is: nothing is cut or copied.
    spread = Trace(input="q", metadata={f"k{i}": "v" * 100 for i in range(20)})
    assert clip_trace(spread, TraceLimits(max_message_chars=1_000)) is spread


def test_long_metadata_keys_are_cut_without_colliding_and_the_package_keys_never() -> None:
    limits = TraceLimits(max_message_chars=1_000, keep_metadata=("u" * 2_000,))
    twin_a = "a" * 3_000 + "1" + "z" * 3_000
    twin_b = "a" * 3_000 + "2" + "z" * 3_000  # the same head and tail: the same cut
    trace = Trace(
        input="q",
        metadata={
            "nest": {twin_a: 1, twin_b: 2, 5: "five", None: "none"},
            "combee_" + "c" * 2_000: "ours",
            "u" * 2_000: "the guard's user key",
        },
    )
    meta = clip_trace(trace, limits).metadata
    keys = list(meta["nest"])
    assert len(set(keys)) == 4 and list(meta["nest"].values()) == [1, 2, "five", "none"]
    assert keys[1] == keys[0] + " (2)" and len(keys[0]) <= 1_000
    assert keys[2:] == [5, None]
    assert meta["combee_" + "c" * 2_000] == "ours" and "u" * 2_000 in meta
    assert meta["combee_truncated"]["fields_cut"] == 2


def test_metadata_too_large_in_all_loses_entries_from_its_end_never_the_package_keys() -> None:
    limits = TraceLimits(max_message_chars=2_000, max_trace_chars=10_000, keep_metadata=("uid",))
    ours = {"combee_version": 3, "combee_tenant": "acme", "combee_user": "u1", "thread_id": "t9"}
    many = {f"k{i}": f"v{i}" for i in range(5_000)}
    messages = [TraceMessage(role="human", content=f"m{i} " + "w" * 996) for i in range(5)]
    trace = Trace(input="q", messages=messages, metadata={**ours, **many, "uid": "u7", "last": "x"})
    clipped = clip_trace(trace, limits)
    assert clipped.messages == messages  # the run's messages do not pay for its metadata
    meta = clipped.metadata
    assert trace_size(clipped) <= 10_000
    assert all(meta[k] == v for k, v in ours.items()) and meta["uid"] == "u7"
    assert "k0" in meta and "last" not in meta and "k4999" not in meta  # dropped from the end
    record = meta["combee_truncated"]
    dropped = len(trace.metadata) - len(meta) + 1  # + 1: combee_truncated itself
    assert record["metadata_entries_cut"] == dropped > 3_000
    unrecorded = {k: v for k, v in meta.items() if k != "combee_truncated"}
    kept_size = trace_size(clipped.model_copy(update={"metadata": unrecorded}))
    assert record["chars_cut"] == trace_size(trace) - kept_size  # what the dropped entries held
    assert record["messages_cut"] == 0
    # A run that fills the trace itself leaves the metadata one field's worth.
    long_run = [TraceMessage(role="human", content=f"m{i} " + "w" * 996) for i in range(20)]
    crowded = clip_trace(trace.model_copy(update={"messages": long_run}), limits)
    assert trace_size(crowded) - trace_size(crowded.model_copy(update={"metadata": {}})) > 1_900
    assert crowded.metadata["combee_truncated"]["messages_cut"] > 0
    assert trace_size(crowded) <= 10_000
    from langgraph_combee._guard.support import support_key

    assert support_key(clipped, "uid") == "user:u7"


def test_the_guard_user_key_is_kept_by_the_capture_limits() -> None:
    combee = Combee(prompt_id="p", guard=BulletGuard(user_key="uid"))
    assert combee._agent.server.limits.keep_metadata == ("uid",)
    assert Combee(prompt_id="q", guard=None)._agent.server.limits.keep_metadata == ()
    with pytest.raises(ConfigurationError, match="keep_metadata"):
        TraceLimits(keep_metadata=["uid"])  # type: ignore[arg-type]


class _NoRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _Model(BaseModel):
    text: str


def test_odd_metadata_never_breaks_the_capture_path() -> None:
    deep: Any = ["d" * 5_000]
    for _ in range(50_000):  # far deeper than Python's recursion limit
        deep = [deep]
    loop: dict[str, Any] = {"text": "l" * 5_000}
    loop["self"] = loop
    odd: dict[str, Any] = {
        "deep": deep,
        "loop": loop,
        "keys": {1: "int", None: "none", (1, "t" * 5_000): "tuple", b"b" * 5_000: "bytes"},
        "scalars": [None, True, False, 0, -1.5, float("nan"), 10**5_000],
        "huge_list": list(range(100_000)),
        "objects": [_NoRepr(), _Model(text="m" * 5_000), {"s" * 5_000}, ("p" * 5_000,)],
    }
    trace = Trace(input="q", metadata=odd)
    meta = clip_trace(trace, TraceLimits(max_message_chars=1_000, max_trace_chars=None)).metadata
    inner = meta["deep"]
    for _ in range(50_000):
        inner = inner[0]
    assert len(inner[0]) <= 1_000 and inner[0].startswith("d" * 500)
    assert len(meta["loop"]["text"]) <= 1_000 and meta["loop"]["self"] == CYCLE
    assert list(meta["keys"].values()) == ["int", "none", "tuple", "bytes"]
    assert all(len(str(k)) <= 1_000 for k in meta["keys"])
    assert meta["scalars"] is odd["scalars"] and meta["huge_list"] is odd["huge_list"]
    no_repr, model, a_set, a_tuple = meta["objects"]
    assert no_repr is odd["objects"][0]
    assert len(model["text"]) <= 1_000 and model["text"].startswith("m" * 500)
    assert len(a_set[0]) <= 1_000 and len(a_tuple[0]) <= 1_000
    bounded = clip_trace(trace, TraceLimits(max_message_chars=1_000, max_trace_chars=20_000))
    assert trace_size(bounded) <= 20_000 and next(iter(bounded.metadata)) == "deep"
    assert bounded.metadata["combee_truncated"]["original_chars"] == trace_size(trace)
    # Through the capture path into the store.
    combee = Combee(
        prompt_id="p", capture=CaptureSettings(max_message_chars=1_000, max_trace_chars=20_000)
    )
    stored_odd = {
        "blob": "x" * 2_000_000,
        "keys": {1: "int", None: "none", (1, "t" * 5_000): "tuple"},
        "scalars": [None, True, 1.5],
        "huge_list": list(range(100_000)),
    }
    combee._agent.server.capture(Trace(id="odd", input="q", metadata=stored_odd))
    combee._agent.server.close(flush=True)
    [stored] = combee.queue().claim(10, holder="t")
    assert stored.id == "odd" and trace_size(stored) <= 20_000
    assert len(stored.metadata["blob"]) <= 1_000 and "huge_list" not in stored.metadata
    assert combee._agent.server.stats.truncated == 1


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("not a list", r"traces='not a list'"),
        ([{"id": "   "}], r"traces\[0\]=\{'id': '   '\}"),
        ([{"input": "a", "feedback": {"score": "high"}}], r"traces\[0\]=.*score"),
        ([{"input": "a"}, None], r"traces\[1\]=None"),
        # A field a trace does not have is named, not ignored (a misspelled
        # "feedbak" would have it learned from without its feedback).
        (
            [{"input": "a", "feedbak": {"correct": False}}],
            r"(?s)traces\[0\]=.*unknown Trace field\(s\): 'feedbak' \(did you mean 'feedback'\?\)",
        ),
    ],
)
def test_malformed_traces_are_a_configuration_error_naming_the_value(bad: Any, named: str) -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(ConfigurationError, match=named):
        combee.learn(bad)
    assert combee.history() == []


def test_feedback_for_unknown_runs_is_a_counted_skip() -> None:
    combee = Combee(prompt_id="p")
    assert combee.feedback("never-seen", correct=True) is False
    assert combee.feedback(uuid.uuid4(), score=0.0) is False
    assert combee._agent.server.stats.feedback_unknown == 2
