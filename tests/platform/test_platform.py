"""``langgraph_combee.platform`` without a server: the store binding, one Combee per
process, the routes and their lifespan, and the async twins of the admin calls.

The real ``langgraph dev`` server is driven in ``tests/platform/test_platform_server.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore

from langgraph_combee import (
    CaptureSettings,
    Combee,
    LearnerSettings,
    ManualApproval,
    ServingSettings,
)
from langgraph_combee._agent.limits import TraceLimits
from langgraph_combee._combee import _stop_started_at_exit
from langgraph_combee._storage import server_store as _store
from langgraph_combee.errors import ConfigurationError, StoreError
from langgraph_combee.platform import PlatformStore, registered, shared_combee
from langgraph_combee.platform._shared import DEV_LEASE_SECONDS, forget
from langgraph_combee.testing import FunctionChatModel, fake_learner
from tests.helpers import failing_traces

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "platform"


class AsyncOnlyStore(BaseStore):
    """Refuses synchronous calls from an event loop, as the dev server does."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.sync_calls = 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker thread may block
            return self.inner.batch(ops)
        self.sync_calls += 1
        raise AssertionError("a blocking store call on the event loop")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.inner.abatch(ops)


def _forget_all() -> None:
    _store._server_store = None  # a run in one test showed "the server's store"
    for prompt_id in registered():
        combee = forget(prompt_id)
        if combee is not None:
            combee.stop(5)


@pytest.fixture(autouse=True)
def forget_shared() -> Iterator[None]:
    """Each test starts and ends with an empty registry of shared Combees.

    Other modules may leave some (the docs' samples call ``shared_combee``).
    """
    _forget_all()
    yield
    _forget_all()


# ---- async twins of the admin calls ------------------------------------


async def test_async_twins_use_only_the_stores_async_calls() -> None:
    store = AsyncOnlyStore()
    told: list[int] = []  # calls of the version listener
    combee = Combee(
        prompt_id="twins",
        model=fake_learner(),
        store=store,
        acceptance=ManualApproval(),
        serving=ServingSettings(
            on_version=[lambda new, previous: told.append(threading.get_ident())]
        ),
    )
    await combee.alearn(failing_traces(4))  # two candidates, pending approval
    assert [v.status for v in await combee.ahistory()] == ["candidate"]
    approved = await combee.aapprove(1, reason="ok")
    assert approved.status == "accepted" and (await combee.acurrent()).version == 1
    assert combee._agent.server.head(None).version == 1  # published to the serving cache
    assert (await combee.aget(1)).playbook == approved.playbook
    assert not (await combee.adiff(0, 1)).is_empty()
    await combee.alearn(failing_traces(4, prefix="more"))
    rejected = await combee.areject(2, reason="no")
    assert rejected.status == "rejected" and (await combee.acurrent()).version == 1
    restored = await combee.arollback(0, reason="back")
    assert restored.version == 3 and restored.playbook.bullets == []
    assert combee._agent.server.head(None).version == 3
    assert store.sync_calls == 0
    assert len(told) == 2  # approve and rollback told the version listeners
    await combee.aclose()


async def test_afeedback_finds_runs_in_memory_and_in_the_queue() -> None:
    store = AsyncOnlyStore()
    combee = Combee(
        prompt_id="fb",
        model=fake_learner(),
        store=store,
        capture=CaptureSettings(feedback_wait_seconds=60),
    )
    first, second = failing_traces(2)
    combee.capture(first)
    assert await combee.afeedback(first.id, correct=True)  # still in memory
    await asyncio.to_thread(combee.flush)
    combee.capture(second)
    await asyncio.to_thread(combee.flush)
    assert await combee.afeedback(second.id, comment="late", ground_truth="X")  # in the queue
    assert not await combee.afeedback("never-seen", score=1.0)
    assert combee._agent.server.stats.feedback_unknown == 1
    assert store.sync_calls == 0
    with pytest.raises(ConfigurationError, match="at least one of"):
        await combee.afeedback(first.id)
    await combee.aclose()


# ---- PlatformStore ------------------------------------------------------


def test_platform_store_is_refused_until_bound_and_binds_once() -> None:
    combee = Combee(prompt_id="p", store="platform")
    assert isinstance(combee.store, PlatformStore) and not combee.store.bound
    with pytest.raises(StoreError, match="not bound to the LangGraph server's store"):
        combee.current()
    first, second = InMemoryStore(), InMemoryStore()
    assert combee.store.bind(first) and combee.store.bind(second)
    assert combee.store.inner is first
    assert combee.current().version == 0
    with pytest.raises(StoreError, match="needs the server's BaseStore"):
        PlatformStore().bind("not a store")  # type: ignore[arg-type]


def test_bad_store_argument_names_platform() -> None:
    with pytest.raises(ConfigurationError, match="'platform'"):
        Combee(prompt_id="p", store="postgres")  # type: ignore[arg-type]


def test_first_run_binds_to_the_store_the_graph_is_given() -> None:
    combee = Combee(prompt_id="bind", store="platform")
    server_store = InMemoryStore()
    agent = create_agent(
        FunctionChatModel(lambda messages: "ok"),
        tools=[],
        middleware=[combee.middleware()],
        store=server_store,
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config={"run_id": "r-1"})
    assert isinstance(combee.store, PlatformStore)
    assert combee.store.inner is server_store
    combee.flush()
    assert combee.queue().pending_count() == 1  # the run's trace is in the server's store
    assert server_store.search(("combee",), limit=100)


async def test_requests_run_on_the_loop_that_owns_the_store() -> None:
    """An async-native store bound to the server's loop is only ever awaited there."""
    from langgraph.store.base.batch import AsyncBatchedBaseStore

    seen: list[asyncio.AbstractEventLoop] = []

    class LoopStore(AsyncBatchedBaseStore):
        def __init__(self) -> None:
            super().__init__()
            self.inner = InMemoryStore()

        def batch(self, ops: Iterable[Op]) -> list[Result]:
            raise AssertionError("sync call on an async-native store")

        async def abatch(self, ops: Iterable[Op]) -> list[Result]:
            seen.append(asyncio.get_running_loop())
            return await self.inner.abatch(ops)

    server_loop = asyncio.get_running_loop()
    store = PlatformStore()
    store.bind(LoopStore())
    combee = Combee(prompt_id="loops", model=fake_learner(), store=store, batch_size=2)

    def elsewhere() -> Any:
        # A plain thread (the serving worker) and another loop (the learner's).
        combee.capture(failing_traces(1)[0])
        combee.flush()
        return asyncio.run(combee.alearn(failing_traces(2)))

    report = await asyncio.to_thread(elsewhere)
    assert report.version.version == 1
    assert (await combee.acurrent()).version == 1
    assert seen and set(seen) == {server_loop}
    await combee.aclose()  # its serving thread must not outlive the store's loop


# ---- one Combee per process ----------------------------------------------


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_example_graph_loaded_twice_shares_one_combee(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGSMITH_LANGGRAPH_API_VARIANT", "local_dev")
    first = _load(EXAMPLE / "graph.py", "combee_example_graph_a")
    second = _load(EXAMPLE / "graph.py", "combee_example_graph_b")
    assert first is not second and first.graph is not second.graph
    assert first.combee is second.combee is registered()["ticket-router"]
    assert first.combee._learning.lease_seconds == DEV_LEASE_SECONDS
    assert isinstance(first.combee.store, PlatformStore)


def test_shared_combee_validates_and_keeps_the_first_arguments() -> None:
    with pytest.raises(ConfigurationError, match="prompt_id"):
        shared_combee(prompt_id="")
    made = shared_combee(prompt_id="shared-a", store=InMemoryStore(), batch_size=3)
    assert shared_combee(prompt_id="shared-a", batch_size=9) is made
    assert made._batch_size == 3
    default = LearnerSettings().lease_seconds
    assert made._learning.lease_seconds == default  # not in a dev server


# ---- the routes and their lifespan ----------------------------------------


def _client(prefix: str = "/combee") -> Any:
    from starlette.testclient import TestClient

    from langgraph_combee.platform import create_app

    return TestClient(create_app(prefix))


def test_routes_serve_the_admin_calls_and_the_lifespan_releases_the_lease() -> None:
    pytest.importorskip("starlette")
    store = InMemoryStore()
    combee = shared_combee(
        prompt_id="routes",
        model=fake_learner(),
        store=store,
        batch_size=2,
        capture=CaptureSettings(feedback_wait_seconds=60),
        learner=LearnerSettings(min_batch=1, max_wait_seconds=0.1, poll_seconds=0.05),
    )
    first, second = failing_traces(2)
    with _client() as client:
        assert combee.learner.running  # the lifespan started it
        assert client.get("/combee").json() == {"prompt_ids": sorted(registered())}
        combee.capture(first)
        combee.capture(second)
        for trace in (first, second):
            body = {"run_id": trace.id, "correct": False, "ground_truth": "TEAM"}
            assert client.post("/combee/routes/feedback", json=body).json()["found"]
        assert combee.learner.wait_for_steps(1, timeout=30)
        status = client.get("/combee/routes/status").json()
        assert status["head"] == 1 and status["learner"]["steps"] == 1
        assert status["learner"]["holder"] == combee.learner.holder
        assert [v["version"] for v in client.get("/combee/routes/versions").json()["versions"]] == [
            1
        ]
        shown = client.get("/combee/routes/versions/1").json()
        assert shown["rendered"] == combee.current().render()
        diff = client.get("/combee/routes/diff", params={"a": 0, "b": 1}).json()
        assert diff["summary"].startswith("+") and diff["diff"]["added"]
        assert client.post("/combee/routes/versions/1/approve").status_code == 409
        assert client.post("/combee/routes/versions/1/reject").status_code == 409
        assert client.get("/combee/routes/versions/7").status_code == 404
        assert client.get("/combee/nope/status").status_code == 404
        assert client.get("/combee/routes/diff", params={"a": 0}).status_code == 400
        assert client.post("/combee/routes/feedback", content=b"{").status_code == 400
        assert client.post("/combee/routes/feedback", json={"run_id": "x"}).status_code == 400
        back = client.post("/combee/routes/versions/0/rollback", json={"reason": "undo"})
        assert back.status_code == 200 and back.json()["version"] == 2
        lease = combee.learner._lease(None)
        assert lease.holder() == combee.learner.holder
    # Leaving the lifespan stopped the learner and released its lease.
    assert not combee.learner.running
    assert lease.holder() is None


def test_routes_prefix_is_validated() -> None:
    pytest.importorskip("starlette")
    with pytest.raises(ConfigurationError, match="prefix"):
        _client("combee/")


def test_interpreter_exit_stops_started_learners_and_releases_their_leases() -> None:
    combee = Combee(
        prompt_id="exit", model=fake_learner(), learner=LearnerSettings(poll_seconds=60)
    )
    combee.start()
    lease = combee.learner._lease(None)
    assert lease.acquire()  # the tenure the learner's first pass takes
    assert lease.holder() == combee.learner.holder
    _stop_started_at_exit()
    assert not combee.learner.running
    assert lease.holder() is None


async def test_platform_store_on_async_postgres_serves_every_thread_and_loop(
    postgres_dsn: str,
) -> None:
    """The platform's store is PostgreSQL on the server's loop: the same hand-off works."""
    from tests.postgres import aopen_store

    async with aopen_store(postgres_dsn) as server_store:
        combee = Combee(prompt_id="pg-platform", model=fake_learner(), store="platform")
        assert isinstance(combee.store, PlatformStore)
        combee.store.bind(server_store)
        trace = failing_traces(1)[0]

        def elsewhere() -> Any:
            # The serving worker (a plain thread) and the learner (a loop of its own).
            combee.capture(trace)
            combee.flush()
            return asyncio.run(combee.alearn(failing_traces(2)))

        report = await asyncio.to_thread(elsewhere)
        assert report.version.version == 1
        assert (await combee.acurrent()).version == 1
        assert await combee.afeedback(trace.id, correct=False, ground_truth="X")
        assert [v.version for v in await combee.ahistory()] == [1]
        await combee.aclose()  # before the store's pool closes


def test_outside_a_server_the_lifespan_leaves_the_platform_store_unbound() -> None:
    pytest.importorskip("starlette")
    combee = shared_combee(prompt_id="unbound")  # store="platform", no learner model
    with _client() as client:
        response = client.get("/combee/unbound/status")
    assert response.status_code == 503
    assert "not bound" in response.json()["detail"]
    assert isinstance(combee.store, PlatformStore) and not combee.store.bound


class GatedStore(BaseStore):
    """Holds every write until ``release`` is set, announcing it in ``writing``."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.writing = threading.Event()
        self.release = threading.Event()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if any(type(op).__name__ == "PutOp" for op in ops) and not self.release.is_set():
            self.writing.set()
            self.release.wait(30)
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, ops)


@pytest.mark.parametrize("call", ["feedback", "afeedback"])
def test_feedback_sent_while_its_trace_is_being_flushed_is_not_lost(call: str) -> None:
    """The SDK sends feedback right after ``runs.wait``: it may meet the flush midway."""
    store = GatedStore()
    combee = Combee(
        prompt_id="race", store=store, capture=CaptureSettings(feedback_wait_seconds=60)
    )
    trace = failing_traces(1)[0]
    combee.capture(trace)
    flusher = threading.Thread(target=combee.flush)
    flusher.start()
    assert store.writing.wait(30)  # the trace left the buffer; its write is held
    found: list[bool] = []

    def send() -> None:
        if call == "feedback":
            found.append(combee.feedback(trace.id, correct=True))
        else:
            found.append(asyncio.run(combee.afeedback(trace.id, correct=True)))

    sender = threading.Thread(target=send)
    sender.start()
    sender.join(0.5)  # it waits for the write instead of missing the trace
    store.release.set()
    flusher.join(30)
    sender.join(30)
    assert found == [True]
    claimed = combee.queue().claim(10, holder="t", visibility_seconds=60)
    assert [t.feedback.correct for t in claimed if t.feedback is not None] == [True]
    combee.close()


# ---- hand-built Combee(store="platform") objects ------------------


def _run_once(combee: Combee, store: BaseStore, run_id: str) -> None:
    """One agent run through ``combee``'s middleware on ``store`` (the server's run)."""
    agent = create_agent(
        FunctionChatModel(lambda messages: "ok"),
        tools=[],
        middleware=[combee.middleware()],
        store=store,
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config={"run_id": run_id})


async def test_a_learner_started_before_the_first_run_waits_without_errors() -> None:
    """``combee.start()`` at import runs before any run has shown the server's store."""
    combee = Combee(prompt_id="early", model=fake_learner(), store="platform")
    assert await combee.learner.tick() == 0  # nothing to learn from yet, and no error
    assert combee.learner.stats.tick_errors == 0
    server_store = InMemoryStore()
    await asyncio.to_thread(_run_once, combee, server_store, "r-early")
    await combee.learner.tick()  # bound now: the captured run is flushed to the server's store
    assert combee.queue().pending_count() == 1


def test_the_first_run_binds_every_platform_store_of_the_process() -> None:
    """The server loads a graph file once per graph: a second copy must bind too."""
    ran = Combee(prompt_id="copy", store="platform")
    other = Combee(prompt_id="copy", store="platform")  # the module's second copy: no run
    server_store = InMemoryStore()
    _run_once(ran, server_store, "r-copy")
    assert isinstance(other.store, PlatformStore)
    assert other.store.bind() and other.store.inner is server_store
    assert other.current().version == 0


@pytest.mark.parametrize("where", ["memory", "queue"])
async def test_late_feedback_is_cut_to_the_trace_limits_like_captured_feedback(where: str) -> None:
    """The feedback route takes any body: a huge comment must not reach the store whole."""
    store = InMemoryStore()
    combee = Combee(
        prompt_id="huge", store=store, capture=CaptureSettings(feedback_wait_seconds=60)
    )
    trace = failing_traces(1)[0]
    combee.capture(trace)
    if where == "queue":
        await asyncio.to_thread(combee.flush)
    huge = "x" * 1_000_000
    assert await combee.afeedback(trace.id, comment=huge, ground_truth=huge, correct=False)
    await asyncio.to_thread(combee.flush)
    (item,) = store.search(("combee", "huge", "_", "queue"), limit=10)
    feedback = item.value["trace"]["feedback"] if "trace" in item.value else item.value["feedback"]
    limit = TraceLimits().max_message_chars
    assert limit is not None
    for text in (feedback["comment"], feedback["ground_truth"]):
        assert len(text) <= limit and "combee: cut" in text
    assert feedback["correct"] is False
    await combee.aclose()


def test_the_lifespan_also_stops_hand_built_learners_on_the_servers_store() -> None:
    """The server writes its store to disk when the lifespan ends: an exit hook is too late."""
    pytest.importorskip("starlette")
    combee = Combee(
        prompt_id="by-hand",
        model=fake_learner(),
        store="platform",
        learner=LearnerSettings(poll_seconds=60),
    )
    assert isinstance(combee.store, PlatformStore)
    combee.store.bind(InMemoryStore())
    combee.start()  # at import, as a graph module without shared_combee would
    lease = combee.learner._lease(None)
    assert lease.acquire()
    own = Combee(
        prompt_id="own-store", model=fake_learner(), learner=LearnerSettings(poll_seconds=60)
    )
    own.start()  # on a store of its own: not the server's to stop
    with _client():
        pass
    assert not combee.learner.running and lease.holder() is None
    assert own.learner.running
    own.stop(5)
