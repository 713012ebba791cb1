"""The async twins of the storage classes on the in-memory store, AsyncSqliteStore,
AsyncPostgresStore and PostgresStore (whose async API runs its sync one on an executor).

The sync methods are covered in ``tests/storage/test_conformance.py``; both share one
implementation (``_storage._io`` flows), so these tests walk each async method
once and check that sync and async callers see the same records.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision, Feedback, PromptVersion, Trace
from langgraph_combee._errors import LeaseHeldError, RegistryError, VersionNotFoundError
from langgraph_combee._storage import Lease, PromptRegistry, TraceQueue, _io
from tests import postgres

PROMPT = "support-agent"
YES = Decision(accepted=True, policy="test", reason="good")
NO = Decision(accepted=False, policy="test", reason="bad")


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "PAGE_SIZE", 5)


@pytest.fixture(params=["memory", "aiosqlite", "postgres", "postgres-sync"])
async def astore(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "postgres":
        async with postgres.aopen_store(request.getfixturevalue("postgres_dsn")) as pg_store:
            yield pg_store
        return
    if request.param == "postgres-sync":
        with postgres.open_store(request.getfixturevalue("postgres_dsn")) as pg_sync_store:
            yield pg_sync_store
        return
    async with AsyncSqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
        await store.setup()
        yield store


def with_rule(text: str) -> PromptVersion:
    pb = Playbook().apply([Add(section="others", content=text)]).playbook
    return PromptVersion(prompt_id=PROMPT, playbook=pb)


async def test_registry_async_twins(astore: BaseStore) -> None:
    registry = PromptRegistry(astore, PROMPT, tenant="acme")
    assert (await registry.ahead()).version == 0
    assert await registry.alatest_version() == 0
    for n in range(12):
        stored = await registry.aadd_candidate(with_rule(f"rule {n}"))
        assert stored.version == n + 1
    assert [v.version for v in await registry.acandidates()] == list(range(1, 13))
    accepted = await registry.aaccept(1, YES)
    assert (await registry.ahead()) == accepted == (await registry.aget(1))
    assert (await registry.areject(2, NO)).status == "rejected"
    with pytest.raises(RegistryError):
        await registry.aaccept(2, YES)
    with pytest.raises(VersionNotFoundError):
        await registry.aget(13)
    back = await registry.arollback(0, reason="reset")
    assert (back.version, back.parent, back.note) == (13, 1, "rollback to v0: reset")
    history = await registry.ahistory()
    assert [v.version for v in history] == list(range(1, 14))
    assert (await registry.adiff(0, 1)).summary() == "+1 -0 ~0"
    assert (await registry.adiff(1, 13)).summary() == "+0 -1 ~0"


async def test_lease_async_twins(astore: BaseStore) -> None:
    clock = FakeClock()
    a = Lease(astore, PROMPT, holder="a", ttl_seconds=10, clock=clock)
    b = Lease(astore, PROMPT, holder="b", ttl_seconds=10, clock=clock)
    assert await a.aacquire() and await a.ais_held()
    assert await b.aholder() == "a" and not await b.aacquire()
    with pytest.raises(LeaseHeldError):
        await b.arequire()
    clock.now += 8
    assert await a.arenew()
    clock.now += 9
    assert await a.ais_held()
    assert await a.arelease() and await a.aholder() is None
    await b.arequire()
    assert await b.ais_held()


async def test_queue_async_twins(astore: BaseStore) -> None:
    clock = FakeClock()
    queue = TraceQueue(astore, PROMPT, clock=clock)
    ids = [f"t{n:02d}" for n in range(12, 0, -1)]
    for trace_id in ids:
        assert await queue.aput(Trace(id=trace_id))
    assert not await queue.aput(Trace(id=ids[0]))
    assert await queue.aput(Trace(id="held"), hold_until=clock.now + 60)
    assert await queue.apending_count() == 13
    first = await queue.aclaim(5, holder="l", visibility_seconds=30)
    assert [t.id for t in first] == ids[:5]
    assert await queue.astatus(ids[0]) == "claimed"
    assert await queue.aset_feedback(ids[0], Feedback(score=1.0))
    assert await queue.aack([t.id for t in first[1:]]) == 4
    assert await queue.arelease([ids[0]]) == 1
    rest = await queue.aclaim(20, holder="l", ready_only=True)
    assert [t.id for t in rest] == [ids[0], *ids[5:]]
    assert rest[0].feedback == Feedback(score=1.0)
    assert await queue.astats() == {"pending": 1, "claimed": 8, "done": 4, "waiting": 1}


async def test_sync_and_async_callers_share_records() -> None:
    store = InMemoryStore()
    registry = PromptRegistry(store, PROMPT)
    stored = registry.add_candidate(with_rule("sync"))
    await registry.aaccept(stored.version, YES)
    assert registry.head() == await registry.ahead()
    queue = TraceQueue(store, PROMPT)
    await queue.aput(Trace(id="x"))
    assert not queue.put(Trace(id="x"))
    assert [t.id for t in queue.claim(1, holder="l")] == ["x"]


@pytest.mark.parametrize("cls", [PromptRegistry, Lease, TraceQueue])
def test_every_sync_method_has_an_async_twin(cls: type) -> None:
    methods = {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }
    sync = {name for name, member in methods.items() if not inspect.iscoroutinefunction(member)}
    for name in sync:
        twin = methods.get(f"a{name}")
        assert twin is not None and inspect.iscoroutinefunction(twin), f"{cls.__name__}.a{name}"
        assert list(inspect.signature(twin).parameters) == list(
            inspect.signature(methods[name]).parameters
        )
    assert len(methods) == 2 * len(sync)


async def test_concurrent_puts_are_all_read_back(astore: BaseStore) -> None:
    # AsyncPostgresStore runs concurrent requests in one batch (one transaction),
    # so these entries share one ``updated_at``: the order its ``search`` pages by.
    queue = TraceQueue(astore, PROMPT, clock=FakeClock())
    ids = [f"t{n:02d}" for n in range(40)]
    assert all(await asyncio.gather(*(queue.aput(Trace(id=i)) for i in ids)))
    assert await queue.apending_count() == 40
    claimed = await queue.aclaim(40, holder="l")
    assert sorted(t.id for t in claimed) == ids
