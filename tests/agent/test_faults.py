"""Faults on the agent's side: hangs, store faults around feedback, lost traces, bad input.

Each test pins one fault (named in the test's comment). A
test that could hang on a regression runs the call on a thread and joins it
with a generous timeout, asserting that it finished: a regression fails
instead of stalling the suite. Nothing asserts on elapsed time; concurrency is
made deterministic with events and call counts.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.store.base import BaseStore, Op, Result, SearchOp
from langgraph.store.memory import InMemoryStore

from langgraph_combee import (
    AlgorithmSettings,
    CaptureSettings,
    Combee,
    Feedback,
    LearnerSettings,
    ServingSettings,
    Trace,
)
from langgraph_combee._storage.locked import thread_safe
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, fake_learner

APP_PROMPT = "You route support tickets to a team code."
JOIN = 30.0  # seconds a guarded call may take before the test calls it hung


def finishes(call: Callable[[], Any]) -> Any:
    """Run ``call`` on a thread; fail the test if it does not return (a hang)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(JOIN)
    assert not thread.is_alive(), "the call hung"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _kind(op: Op) -> str:
    namespace = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
    return namespace[-1] if namespace else ""


class GatedStore(BaseStore):
    """An in-memory store whose calls on some record kinds can block or fail.

    ``gate(kinds)``: the next batch touching one of ``kinds`` sets ``entered`` and
    waits for ``release``. ``failing``: kinds whose batches raise ``ConnectionError``
    (after the gate, if both apply). ``calls``: batches per record kind.
    """

    def __init__(self) -> None:
        self.inner = thread_safe(InMemoryStore())
        self.calls: dict[str, int] = {}
        self.failing: set[str] = set()
        self.gated: set[str] = set()
        self.entered = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def gate(self, *kinds: str) -> None:
        self.entered.clear()
        self.release.clear()
        self.gated = set(kinds)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        kinds = {_kind(op) for op in ops}
        with self._lock:
            for kind in kinds:
                self.calls[kind] = self.calls.get(kind, 0) + 1
            gated = bool(kinds & self.gated)
            if gated:
                self.gated = set()  # one batch only
        if gated:
            self.entered.set()
            self.release.wait()
        if kinds & self.failing:
            raise ConnectionError("store unavailable (GatedStore)")
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)


@contextmanager
def _served(combee: Combee, gated: GatedStore | None = None) -> Iterator[Combee]:
    """``combee`` for the block; then the gated store is let go and the server closed unflushed."""
    try:
        yield combee
    finally:
        if gated is not None:
            gated.release.set()
        combee._agent.server.close(flush=False)


def _echo(messages: list[Any]) -> str:
    return f"answer to {messages[-1].text}"


def _agent(combee: Combee, *, lean: bool, model: Any = None) -> Any:
    return create_agent(
        model or FunctionChatModel(_echo),
        system_prompt=APP_PROMPT,
        middleware=[combee.middleware(lean=lean)],
    )


def _ask(agent: Any, text: str = "Where does my refund go?", run_id: Any = None) -> Any:
    config = {"run_id": run_id} if run_id is not None else {}
    return agent.invoke({"messages": [HumanMessage(text)]}, config)


MODES = pytest.mark.parametrize("lean", [False, True], ids=["full", "lean"])


@pytest.fixture
def store() -> GatedStore:
    return GatedStore()


# ---------------------------------------------------------------- deadlock


@MODES
def test_feedback_right_after_a_clipped_run_does_not_deadlock(lean: bool) -> None:
    # _clipped took the serving lock that attach_feedback already held.
    with _served(Combee(prompt_id="p", capture=CaptureSettings(max_message_chars=200))) as combee:
        agent = _agent(combee, lean=lean)
        run_id = uuid.uuid4()
        _ask(agent, "x" * 1000, run_id)
        assert finishes(lambda: combee.feedback(run_id, correct=True))
        assert finishes(lambda: combee._agent.server.head(None)).version == 0
        (trace,) = finishes(lambda: (combee.flush(), combee.queue().claim(5, holder="t"))[1])
        assert trace.feedback is not None and trace.feedback.correct is True
        assert combee._agent.server.stats.truncated == 1


def test_feedback_for_a_run_whose_deferred_build_raises_does_not_deadlock() -> None:
    # The failed build was counted under the lock attach_feedback held.
    with _served(Combee(prompt_id="p")) as combee:

        def broken() -> Trace:
            raise ValueError("cannot build")

        combee._agent.capture_later("bad", broken)
        # Kept without building (feedback() never runs the build); lost, and
        # counted, when the build fails.
        assert finishes(lambda: combee.feedback("bad", correct=True)) is True
        assert finishes(combee.flush) == 0
        assert combee._agent.server.stats.capture_errors == 1
        assert combee._agent.server.stats.feedback_dropped == 1
        assert finishes(lambda: combee._agent.server.head(None)).version == 0


def test_the_evaluator_runs_outside_the_serving_lock() -> None:
    # The user's evaluator ran under the serving lock; one that touches
    # Combee (here: asks for HEAD, as a canary-aware evaluator would) hung.
    seen: list[int] = []

    def evaluator(trace: Trace) -> Feedback:
        seen.append(combee._agent.server.head(None).version)
        return Feedback(score=1.0)

    with _served(Combee(prompt_id="p", evaluator=evaluator)) as combee:
        combee._agent.capture_later("r1", lambda: Trace(id="r1", input="q", output="a"))
        assert finishes(lambda: combee.feedback("r1", comment="late"))
        assert finishes(combee.flush) == 1  # the build (and the evaluator) runs here
        assert seen == [0]


def test_an_evaluator_that_gives_feedback_for_its_own_run_does_not_hang() -> None:
    # The deferred build (which runs the evaluator) holds the
    # entry's build lock; feedback() from inside it must not wait for itself.
    def evaluator(trace: Trace) -> Feedback:
        combee.feedback(trace.id, comment="from the evaluator")
        return Feedback(score=1.0)

    with _served(Combee(prompt_id="p", evaluator=evaluator)) as combee:
        combee._agent.capture_later("r1", lambda: Trace(id="r1", input="q", output="a"))
        assert finishes(lambda: combee.feedback("r1", correct=True))
        assert finishes(combee.flush) == 1


# ---------------------------------------------------------------- cold cache, failing store


@MODES
def test_a_failing_store_with_a_cold_cache_is_read_once_not_on_every_run(
    store: GatedStore, lean: bool
) -> None:
    # The failed first read was not remembered; every run read again.
    store.failing = {"meta", "versions"}
    with _served(
        Combee(prompt_id="p", store=store, serving=ServingSettings(refresh_seconds=3600))
    ) as combee:
        model = FunctionChatModel(_echo)
        agent = _agent(combee, lean=lean, model=model)
        for i in range(5):
            assert _ask(agent, f"q{i}")["messages"][-1].text == f"answer to q{i}"
        assert store.calls["meta"] == 1
        assert all(prompt[0] == SystemMessage(APP_PROMPT) for prompt in model.prompts)
        assert combee._agent.server.stats.refresh_errors == 1


def _first_read_hangs(store: GatedStore) -> Combee:
    """A Combee whose first read of ``store`` hangs (then fails) and is bounded at 0.05 s."""
    store.gate("meta")
    store.failing = {"meta", "versions"}
    return Combee(
        prompt_id="p",
        store=store,
        serving=ServingSettings(refresh_seconds=3600, first_read_seconds=0.05),
    )


@MODES
def test_a_hanging_first_read_is_bounded_and_waited_for_once(store: GatedStore, lean: bool) -> None:
    # A store whose calls take long to fail made every run wait that long.
    with _served(_first_read_hangs(store), store) as combee:
        agent = _agent(combee, lean=lean)
        answers = finishes(lambda: [_ask(agent, f"q{i}") for i in range(4)])
        assert [a["messages"][-1].text for a in answers] == [f"answer to q{i}" for i in range(4)]
        assert store.entered.is_set()
        assert store.calls["meta"] == 1  # the one read still hanging; nobody else waited
        assert combee._agent.server.stats.first_read_timeouts == 1
        store.release.set()  # the read now fails; later runs still do not read
        finishes(lambda: [_ask(agent, f"r{i}") for i in range(3)])
        assert store.calls["meta"] == 1


@MODES
def test_a_hanging_first_read_is_bounded_in_async_runs_too(store: GatedStore, lean: bool) -> None:
    # Async hooks: the first read runs on a worker thread, bounded the same way.
    import asyncio

    with _served(_first_read_hangs(store), store) as combee:
        agent = _agent(combee, lean=lean)

        async def runs() -> list[str]:
            out = []
            for i in range(3):
                result = await agent.ainvoke({"messages": [HumanMessage(f"q{i}")]})
                out.append(result["messages"][-1].text)
            return out

        assert finishes(lambda: asyncio.run(runs())) == [f"answer to q{i}" for i in range(3)]
        assert store.calls["meta"] == 1


# ---------------------------------------------------------------- feedback in an outage


def test_feedback_during_a_store_outage_is_kept_retried_and_counted(store: GatedStore) -> None:
    # feedback() raised ConnectionError for a run already flushed.
    with _served(Combee(prompt_id="p", store=store)) as combee:
        combee.capture(Trace(id="r1", input="q", output="a"))
        assert combee.flush() == 1
        before = store.calls["queue_index"]
        store.failing = {"queue", "queue_index"}
        assert combee.feedback("r1", correct=False, ground_truth="FIN") is True
        assert combee.feedback("r1", comment="second") is True  # the store is not asked again
        serving = combee.describe()["serving"]
        assert (serving["feedback_deferred"], serving["deferred_feedback"]) == (2, 2)
        assert store.calls["queue_index"] == before + 1  # only the first feedback tried
        combee.flush()  # still down: kept
        assert store.calls["queue_index"] == before + 2
        assert combee._agent.server.deferred_feedback() == 2
        store.failing = set()
        combee.flush()
        serving = combee.describe()["serving"]
        assert (serving["deferred_feedback"], serving["feedback_delivered"]) == (0, 2)
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None
        assert (trace.feedback.ground_truth, trace.feedback.comment) == ("FIN", "second")


# ---------------------------------------------------------------- the feedback race


def test_feedback_finds_a_trace_while_its_write_is_in_flight(store: GatedStore) -> None:
    # flush took traces out of the buffer before writing them, so
    # feedback() in that window found the run nowhere and returned False.
    with _served(Combee(prompt_id="p", store=store), store) as combee:
        combee.capture(Trace(id="r1", input="q", output="a"))
        store.gate("queue")  # the entry write of the flush pauses
        flushing = threading.Thread(target=combee.flush, daemon=True)
        flushing.start()
        assert store.entered.wait(JOIN)
        assert combee.feedback("r1", correct=False, ground_truth="FIN") is True
        store.release.set()
        flushing.join(JOIN)
        assert not flushing.is_alive()
        assert combee._agent.server.buffered() == 0
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None and trace.feedback.ground_truth == "FIN"
        assert combee._agent.server.stats.feedback_delivered == 1


def test_a_failed_write_keeps_the_feedback_given_during_it(store: GatedStore) -> None:
    # Feedback attached while a write is in flight survives that write failing.
    with _served(Combee(prompt_id="p", store=store), store) as combee:
        combee.capture(Trace(id="r1", input="q", output="a"))
        store.gate("queue")
        store.failing = {"queue"}
        flushing = threading.Thread(target=combee.flush, daemon=True)
        flushing.start()
        assert store.entered.wait(JOIN)
        assert combee.feedback("r1", comment="kept") is True
        store.release.set()
        flushing.join(JOIN)
        assert combee._agent.server.buffered() == 1
        store.failing = set()
        assert combee.flush() == 1
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is not None and trace.feedback.comment == "kept"


# ---------------------------------------------------------------- durability


@MODES
def test_write_through_queues_the_trace_before_the_run_returns(lean: bool) -> None:
    # In buffered mode a trace lives only in memory until the next flush.
    with _served(
        Combee(
            prompt_id="p", capture=CaptureSettings(durability="write_through", flush_seconds=3600)
        )
    ) as combee:
        run_id = uuid.uuid4()
        _ask(_agent(combee, lean=lean), run_id=run_id)
        assert combee._agent.server.buffered() == 0
        assert combee.queue().status(str(run_id)) == "pending"
        assert combee.describe()["serving"]["written_through"] == 1
        assert combee.feedback(run_id, correct=True)


def test_write_through_falls_back_to_the_buffer_while_the_store_fails(store: GatedStore) -> None:
    # A failing store is waited on once, then runs buffer.
    with _served(
        Combee(
            prompt_id="p",
            store=store,
            capture=CaptureSettings(durability="write_through", flush_seconds=3600),
        )
    ) as combee:
        store.failing = {"queue", "queue_index"}
        agent = _agent(combee, lean=False)
        for i in range(3):
            _ask(agent, f"q{i}")
        assert store.calls["queue_index"] == 1
        assert combee._agent.server.buffered() == 3
        assert combee._agent.server.stats.write_through_fallbacks == 3
        store.failing = set()
        assert combee.flush() == 3


def test_a_full_chunk_is_written_without_waiting_for_the_timer(store: GatedStore) -> None:
    # The time a trace waits before its first write is bounded by
    # flush_seconds, and by less under load: a full chunk wakes the worker.
    from langgraph_combee._agent.serving import FLUSH_CHUNK

    combee = Combee(prompt_id="p", store=store, capture=CaptureSettings(flush_seconds=3600))
    store.gate("queue")
    try:
        for i in range(FLUSH_CHUNK):
            combee.capture(Trace(id=f"r{i}", input="q", output="a"))
        assert store.entered.wait(JOIN)
    finally:
        store.release.set()
        combee._agent.server.close(flush=False)


def test_a_normal_exit_flushes_what_is_buffered(tmp_path: Path) -> None:
    # A process that exits without stop() lost its buffered traces.
    path = tmp_path / "combee.sqlite"
    script = f"""
from langgraph_combee import CaptureSettings, Combee, Trace
combee = Combee.from_conn_string(
    {str(path)!r}, prompt_id="p", capture=CaptureSettings(flush_seconds=3600)
)
combee.capture(Trace(id="kept", input="q", output="a"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    with Combee.from_conn_string(str(path), prompt_id="p") as combee:
        assert combee.queue().status("kept") == "pending"


# ---------------------------------------------------------------- ids


@pytest.mark.parametrize("prompt_id", ["support.agent", "", "  ", "a\x00b", 42])
def test_an_invalid_prompt_id_is_refused_at_construction(prompt_id: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"prompt_id=.*without '\.'"):
        Combee(prompt_id=prompt_id)


@MODES
@pytest.mark.parametrize("bad", ["org.42", "_", 42])
def test_a_bad_tenant_from_scope_is_counted_and_reported_once(
    lean: bool, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Lean mode dropped such a run uncounted; full mode logged errors per run.
    with _served(Combee(prompt_id="p", scope=lambda config: bad)) as combee:
        accept_rules(combee, "Shared rule.")
        model = FunctionChatModel(_echo)
        agent = _agent(combee, lean=lean, model=model)
        with caplog.at_level(logging.WARNING, logger="langgraph_combee"):
            for i in range(3):
                assert _ask(agent, f"q{i}")["messages"][-1].text == f"answer to q{i}"
        assert all("Shared rule." in prompt[0].text for prompt in model.prompts)
        reports = [r for r in caplog.records if repr(bad) in r.getMessage()]
        assert len(reports) == 1
        assert "bad_tenants" in reports[0].getMessage()
        assert combee.describe()["serving"]["bad_tenants"] >= 3
        combee._agent.server.close(flush=True)
        # Served the shared playbook, and not captured: whose run it is is not known.
        assert combee.queue().claim(10, holder="t") == []
        assert combee._agent.server.stats.captured == 0


def test_a_scope_that_raises_is_counted_reported_once_and_not_captured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def scope(config: Any) -> str:
        raise KeyError("org")

    with _served(Combee(prompt_id="p", scope=scope)) as combee:
        agent = _agent(combee, lean=False)
        with caplog.at_level(logging.WARNING, logger="langgraph_combee"):
            for i in range(3):
                assert _ask(agent, f"q{i}")["messages"][-1].text == f"answer to q{i}"
        assert len([r for r in caplog.records if "KeyError" in r.getMessage()]) == 1
        assert combee.describe()["serving"]["bad_tenants"] == 3
        assert combee._agent.tenant_for({}) is None
        assert combee._agent.server.stats.captured == 0


def accept_rules(combee: Combee, *rules: str) -> None:
    """Put a version with ``rules`` in force for the shared playbook."""
    from langgraph_combee.types import Add, Decision, PromptVersion

    registry = combee.registry()
    playbook = registry.head().playbook.apply([Add(section="others", content=r) for r in rules])
    candidate = registry.add_candidate(
        PromptVersion(prompt_id=combee.prompt_id, playbook=playbook.playbook)
    )
    accepted = registry.accept(
        candidate.version, Decision(accepted=True, policy="manual", reason="test")
    )
    combee._agent.server.publish(accepted)


# ---------------------------------------------------------------- constructor and learn()


@pytest.mark.parametrize(
    ("kind", "kwargs", "named"),
    [
        (AlgorithmSettings, {"token_budget": "big"}, "token_budget='big'"),
        (ServingSettings, {"refresh_seconds": "5"}, "refresh_seconds='5'"),
        (CaptureSettings, {"feedback_wait_seconds": "a"}, "feedback_wait_seconds='a'"),
        (CaptureSettings, {"feedback_wait_seconds": float("inf")}, "feedback_wait_seconds=inf"),
        (CaptureSettings, {"feedback_wait_seconds": float("nan")}, "feedback_wait_seconds=nan"),
        (LearnerSettings, {"step_backoff_seconds": -1}, "step_backoff_seconds=-1"),
        (LearnerSettings, {"step_backoff_seconds": 61}, "step_backoff_seconds=61"),
        (ServingSettings, {"refresh_seconds": float("inf")}, "refresh_seconds=inf"),
        (CaptureSettings, {"capture_limit": 1.5}, "capture_limit=1.5"),
        (LearnerSettings, {"max_concurrency": True}, "max_concurrency=True"),
        (LearnerSettings, {"lease_seconds": 0}, "lease_seconds=0"),
        (CaptureSettings, {"durability": "disk"}, "durability='disk'"),
        (CaptureSettings, {"flush_seconds": -1}, "flush_seconds=-1"),
        (ServingSettings, {"first_read_seconds": 0}, "first_read_seconds=0"),
    ],
)
def test_bad_settings_numbers_are_a_configuration_error_naming_them(
    kind: type[Any], kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named.replace(".", r"\.")):
        kind(**kwargs)


@pytest.mark.parametrize("traces", [None, 42, "traces", {"input": "q"}])
def test_learn_refuses_what_is_not_a_list_of_traces(traces: Any) -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(ConfigurationError, match="traces="):
        combee.learn(traces)
    assert combee.history() == []


def _failing(n: int) -> list[Trace]:
    return [
        Trace(id=f"t{i}", input=f"q{i}", output="x", feedback=Feedback(correct=False))
        for i in range(n)
    ]


def test_learn_refuses_a_bad_on_step_before_writing_anything() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2)
    with pytest.raises(ConfigurationError, match="on_step=1"):
        combee.learn(_failing(2), on_step=1)  # type: ignore[arg-type]
    assert combee.history() == []


def test_learn_refuses_two_traces_with_one_id_before_writing_anything() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=4)
    traces = [*_failing(2), _failing(1)[0]]
    with pytest.raises(ConfigurationError, match=r"traces\[2\]\.id='t0'.*traces\[0\]"):
        combee.learn(traces)
    assert combee.history() == []


# ---------------------------------------------------------------------------- feedback input


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"run_id": None, "correct": True}, "run_id=None"),
        ({"run_id": "  ", "correct": True}, "run_id='  '"),
        # Neither a UUID nor a str: refused like None, not looked up as its str
        # and answered False as if the run were merely unknown.
        ({"run_id": ["5"], "correct": True}, r"run_id=\['5'\].*a UUID or a non-empty str"),
        ({"run_id": 5.0, "correct": True}, r"run_id=5\.0 .*a UUID or a non-empty str"),
        ({"run_id": "r1", "score": "high"}, "feedback=.*'high'"),
        ({"run_id": "r1", "score": float("nan")}, "score=nan"),
        ({"run_id": "r1", "score": True}, "score=True"),
        ({"run_id": "r1", "correct": True, "tenant": "org.42"}, "tenant='org.42'"),
    ],
)
def test_feedback_refuses_bad_input_before_changing_anything(
    kwargs: dict[str, Any], named: str
) -> None:
    with _served(Combee(prompt_id="p")) as combee:
        combee.capture(Trace(id="r1", input="q", output="a"))
        with pytest.raises(ConfigurationError, match=named):
            combee.feedback(**kwargs)
        combee.flush()
        (trace,) = combee.queue().claim(5, holder="t")
        assert trace.feedback is None


_KILLED_AGENT = """
import sys, uuid
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph_combee import CaptureSettings, Combee
from langgraph_combee.testing import FunctionChatModel

combee = Combee.from_conn_string(
    sys.argv[1],
    prompt_id="p",
    capture=CaptureSettings(durability="write_through", flush_seconds=3600),
)
agent = create_agent(FunctionChatModel(lambda m: "ok"), middleware=[combee.middleware()])
for i in range(10_000):
    run_id = uuid.uuid4()
    agent.invoke({"messages": [HumanMessage(f"q{i}")]}, {"run_id": run_id})
    assert combee.feedback(run_id, correct=True)
    print(run_id, flush=True)  # the app has its answer and its feedback was accepted
"""


def test_sigkill_loses_no_run_that_returned_in_write_through_mode(tmp_path: Path) -> None:
    # SIGKILL lost runs whose feedback() had returned True.
    import os
    import signal

    path = str(tmp_path / "combee.sqlite")
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_AGENT, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        returned = [finishes(process.stdout.readline).strip() for _ in range(40)]
        os.kill(process.pid, signal.SIGKILL)  # in the middle of a later run
        process.wait(JOIN)
    finally:
        process.kill()
    with Combee.from_conn_string(path, prompt_id="p") as combee:
        traces = {t.id: t for t in combee.queue().claim(10_000, holder="t")}
    assert set(returned) <= set(traces)
    assert all(traces[run_id].feedback is not None for run_id in returned)


def test_a_trace_json_cannot_carry_does_not_block_the_buffer() -> None:
    # An object in a trace's metadata failed every write of its chunk,
    # holding every trace behind it in memory for good.
    with _served(Combee(prompt_id="p")) as combee:
        combee.capture(Trace(id="odd", input="q", metadata={"client": object()}))
        combee.capture(Trace(id="good", input="q"))
        assert combee.flush() == 2
        assert combee._agent.server.buffered() == 0
        traces = {t.id: t for t in combee.queue().claim(5, holder="t")}
        assert traces["odd"].metadata["client"].startswith("<object object")
        assert combee.describe()["serving"]["unserializable"] == 1


def test_bytes_json_cannot_carry_are_stored_as_their_repr_not_dropped() -> None:
    # Pydantic writes bytes as UTF-8 even under a repr() fallback, so
    # bytes that are not UTF-8 dropped the whole trace, where docs/faults.md
    # promises their repr().
    with _served(Combee(prompt_id="p", capture=CaptureSettings(flush_seconds=60))) as combee:
        combee.capture(
            Trace(
                id="t-bytes",
                input="hello",
                metadata={"b": b"\xff", "text": b"fine", "nested": {"n": (b"\xfe", 1)}},
                tool_calls=[{"name": "upload", "args": {"blob": [b"\x00\xff"]}}],
            )
        )
        assert combee.flush() == 1
        (trace,) = combee.queue().claim(5, holder="t")
        serving = combee.describe()["serving"]
    assert trace.metadata == {"b": "b'\\xff'", "text": "fine", "nested": {"n": ["b'\\xfe'", 1]}}
    assert trace.tool_calls[0].args == {"blob": ["b'\\x00\\xff'"]}
    assert (serving["unserializable"], serving["capture_errors"]) == (1, 0)


def test_a_bytes_key_never_overwrites_the_same_str_key() -> None:
    # b"a" became "a" and one of the two values was lost.
    with _served(Combee(prompt_id="p", capture=CaptureSettings(flush_seconds=60))) as combee:
        combee.capture(Trace(id="t-keys", input="q", metadata={b"a": 1, "a": 2, "x": b"\xff"}))
        assert combee.flush() == 1
        (trace,) = combee.queue().claim(5, holder="t")
    assert trace.metadata == {"b'a'": 1, "a": 2, "x": "b'\\xff'"}


# ---------------------------------------------------------------- a retried run, store down


def test_a_retried_run_supersedes_its_failure_left_in_the_buffer_by_a_failed_write(
    store: GatedStore,
) -> None:
    def grade(trace: Trace) -> Feedback:
        return Feedback(correct=trace.error is None, source="evaluator")

    with _served(Combee(prompt_id="p", store=store, evaluator=grade)) as combee:
        agent = combee._agent
        agent.capture_later("r1", lambda: Trace(id="r1", input="q", error="ConnectionError: x"))
        store.failing = {"queue", "queue_index"}
        assert combee.flush() == 0  # the failure was built and graded, and stays buffered
        assert combee.feedback("r1", comment="the user waited") is True
        agent.capture_later("r1", lambda: Trace(id="r1", input="q", output="a"), supersede=True)
        assert agent.server.buffered() == 1 and agent.server.stats.superseded == 1
        store.failing = set()
        assert combee.flush() == 1
        (trace,) = combee.queue().claim(5, holder="t")
        assert (trace.output, trace.error) == ("a", None)
        assert trace.feedback is not None
        # The answer's own grade, over the failure's; the user's comment kept.
        assert (trace.feedback.correct, trace.feedback.comment) == (True, "the user waited")
