"""Storage conformance: the registry, the lease and the trace queue on every backend.

Every test here runs on each backend of the ``store`` fixture (in memory, SQLite
on a temporary file, PostgreSQL on a real server: see ``tests/postgres.py``).
Searches are paged with a small page size so that a few dozen records already
cross several pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, PutOp, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_combee._core.ops import Add, Remove, Tag, Update
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision, Feedback, PromptVersion, StepReport, Trace
from langgraph_combee._errors import (
    ConfigurationError,
    LeaseHeldError,
    LeaseLostError,
    RegistryError,
    VersionNotFoundError,
)
from langgraph_combee._storage import Lease, PromptRegistry, TraceQueue, _io
from langgraph_combee._storage.keys import PromptSpace
from langgraph_combee._storage.lease import fenced
from langgraph_combee._storage.steps import StepLog, StepRecord
from tests import postgres

OpenStore = Callable[[], AbstractContextManager[BaseStore]]

PROMPT = "support-agent"
YES = Decision(accepted=True, policy="test", reason="good")
NO = Decision(accepted=False, policy="test", reason="bad")


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "PAGE_SIZE", 7)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, sqlite_path: str) -> OpenStore:
    """Opens a new connection to one durable database (SQLite file or PostgreSQL)."""
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return lambda: postgres.open_store(dsn)

    @contextmanager
    def open_sqlite() -> Iterator[BaseStore]:
        with SqliteStore.from_conn_string(sqlite_path) as sqlite_store:
            sqlite_store.setup()
            yield sqlite_store

    return open_sqlite


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, sqlite_path: str) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "postgres":
        with postgres.open_store(request.getfixturevalue("postgres_dsn")) as pg_store:
            yield pg_store
        return
    with SqliteStore.from_conn_string(sqlite_path) as sqlite_store:
        sqlite_store.setup()
        yield sqlite_store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def playbook(*contents: str, sources: tuple[str, ...] = ("t1",)) -> Playbook:
    ops = [
        Add(section="strategies_and_insights", content=c, sources=list(sources)) for c in contents
    ]
    return Playbook().apply(ops).playbook


def candidate(pb: Playbook | None = None, **fields: Any) -> PromptVersion:
    return PromptVersion(prompt_id=PROMPT, playbook=pb or playbook("x"), **fields)


# ---- registry ----------------------------------------------------------------


def test_initial_head_is_an_unwritten_empty_version_0(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT, tenant="acme")
    head = registry.head()
    assert (head.version, head.status, head.parent) == (0, "accepted", None)
    assert (head.prompt_id, head.tenant) == (PROMPT, "acme")
    assert len(head.playbook) == 0 and head.render() == ""
    assert registry.get(0) == head == registry.head()
    assert registry.latest_version() == 0
    assert registry.history() == [] and registry.candidates() == []
    assert store.search(("combee",)) == []


def test_add_candidate_assigns_version_parent_and_status(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    first = registry.add_candidate(
        PromptVersion(prompt_id="other", tenant="x", version=99, status="accepted", decision=YES)
    )
    assert (first.version, first.parent, first.status, first.decision) == (1, 0, "candidate", None)
    assert (first.prompt_id, first.tenant) == (PROMPT, None)
    assert registry.get(1) == first
    assert registry.head().version == 0
    second = registry.add_candidate(candidate())
    explicit = registry.add_candidate(candidate(parent=1))
    assert (second.version, second.parent) == (2, 0)
    assert (explicit.version, explicit.parent) == (3, 1)
    assert [v.version for v in registry.candidates()] == [1, 2, 3]
    assert registry.latest_version() == 3
    with pytest.raises(ConfigurationError, match=r"candidate\.parent=9"):
        registry.add_candidate(candidate(parent=9))


def test_accept_moves_head_and_reject_does_not(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    v1 = registry.add_candidate(candidate(playbook("a")))
    v2 = registry.add_candidate(candidate(playbook("b")))
    accepted = registry.accept(v1.version, YES)
    assert (accepted.status, accepted.decision) == ("accepted", YES)
    assert registry.head() == accepted == registry.get(1)
    rejected = registry.reject(v2.version, NO)
    assert (rejected.status, rejected.decision) == ("rejected", NO)
    assert registry.head().version == 1
    assert registry.candidates() == []
    v3 = registry.add_candidate(candidate())
    assert v3.parent == 1


def test_only_candidates_can_be_decided(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    v1 = registry.add_candidate(candidate())
    v2 = registry.add_candidate(candidate())
    registry.accept(v1.version, YES)
    registry.reject(v2.version, NO)
    with pytest.raises(RegistryError, match=r"cannot accept version 1 .* it is accepted"):
        registry.accept(1, YES)
    with pytest.raises(RegistryError, match=r"cannot reject version 2 .* it is rejected"):
        registry.reject(2, NO)
    with pytest.raises(RegistryError, match="implicit initial version"):
        registry.accept(0, YES)
    with pytest.raises(VersionNotFoundError):
        registry.accept(7, YES)
    v3 = registry.add_candidate(candidate())
    with pytest.raises(ConfigurationError, match=r"decision\.accepted=False"):
        registry.accept(v3.version, NO)
    with pytest.raises(ConfigurationError, match=r"decision\.accepted=True"):
        registry.reject(v3.version, YES)
    assert registry.get(3).status == "candidate"


def test_get_unknown_version_raises(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    registry.add_candidate(candidate())
    for missing in (2, 50, -1):
        with pytest.raises(VersionNotFoundError, match=f"no version {missing}") as info:
            registry.get(missing)
        assert isinstance(info.value, KeyError)
        assert (info.value.prompt_id, info.value.version) == (PROMPT, missing)


def test_history_pages_through_many_versions(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    for n in range(1, 31):
        stored = registry.add_candidate(candidate(playbook(f"rule {n}")))
        if n % 3 == 0:
            registry.accept(stored.version, YES)
        elif n % 3 == 1:
            registry.reject(stored.version, NO)
    history = registry.history()
    assert [v.version for v in history] == list(range(1, 31))
    assert history[4].playbook.bullets[0].content == "rule 5"
    assert registry.latest_version() == 30
    assert [v.version for v in registry.candidates()] == list(range(2, 31, 3))
    assert registry.head().version == 30


def test_history_with_the_default_page_size(
    store: BaseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_io, "PAGE_SIZE", 100)
    registry = PromptRegistry(store, PROMPT)
    for _ in range(230):
        registry.add_candidate(candidate(Playbook()))
    assert [v.version for v in registry.history()] == list(range(1, 231))


def test_rollback_appends_a_new_accepted_version(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    v1 = registry.accept(registry.add_candidate(candidate(playbook("a"))).version, YES)
    v2 = registry.accept(registry.add_candidate(candidate(playbook("b"))).version, YES)
    before = registry.history()
    back = registry.rollback(1, reason="b broke billing")
    assert (back.version, back.parent, back.status) == (3, 2, "accepted")
    assert back.playbook == v1.playbook != v2.playbook
    assert back.note == "rollback to v1: b broke billing"
    assert back.decision is not None and back.decision.policy == "rollback"
    assert registry.head() == back
    assert registry.history()[:2] == before
    to_empty = registry.rollback(0)
    assert (to_empty.version, to_empty.parent, to_empty.note) == (4, 3, "rollback to v0")
    assert len(registry.head().playbook) == 0
    pending = registry.add_candidate(candidate())
    with pytest.raises(RegistryError, match="only accepted versions"):
        registry.rollback(pending.version)
    with pytest.raises(VersionNotFoundError):
        registry.rollback(40)


def test_diff_between_versions(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    old = playbook("Check units.", "Ask for the order id.", "Cite the policy.")
    a, b, c = (bullet.id for bullet in old.bullets)
    new = old.apply(
        [
            Add(section="common_mistakes_to_avoid", content="Never guess.", sources=["t9"]),
            Remove(id=b),
            Update(id=a, content="Check units and currency.", sources=["t7"]),
            Tag(id=c, helpful=2, sources=["t8"]),
        ]
    ).playbook
    registry.add_candidate(candidate(old))
    registry.add_candidate(candidate(new))
    diff = registry.diff(1, 2)
    assert [x.content for x in diff.added] == ["Never guess."]
    assert [x.id for x in diff.removed] == [b]
    assert [(o.content, n.content) for o, n in diff.updated] == [
        ("Check units.", "Check units and currency.")
    ]
    assert [(o.helpful, n.helpful) for o, n in diff.retagged] == [(0, 2)]
    assert diff.summary() == "+1 -1 ~1 (1 retagged)"
    rendered = diff.render().splitlines()
    assert len(rendered) == 4
    assert rendered[0].startswith("+ [mis-00001]") and "t9" in rendered[0]
    assert registry.diff(0, 1).summary() == "+3 -0 ~0"
    assert registry.diff(2, 2).is_empty()
    with pytest.raises(VersionNotFoundError):
        registry.diff(1, 3)


def test_head_only_ever_points_at_accepted_versions(store: BaseStore) -> None:
    registry = PromptRegistry(store, PROMPT)
    for n in range(12):
        stored = registry.add_candidate(candidate(playbook(f"r{n}")))
        if n % 4 == 1:
            registry.reject(stored.version, NO)
        elif n % 4 == 2:
            registry.accept(stored.version, YES)
        elif n % 4 == 3:
            accepted = [v.version for v in registry.history() if v.status == "accepted"]
            registry.rollback(accepted[0] if accepted else 0)
        head = registry.head()
        pointer = store.get(("combee", PROMPT, "_", "meta"), "head")
        assert head.status == "accepted"
        assert pointer is None or registry.get(pointer.value["version"]).status == "accepted"


class CrashingStore(InMemoryStore):
    """A store without transactions that fails every put of one key.

    It runs a batch's ops one by one, as a store without transactions would, so
    the ops before the failing put are written: a process dying just before
    that write.
    """

    def __init__(self, key: str) -> None:
        super().__init__()
        self.crash_key = key

    def batch(self, ops: Any) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, PutOp) and op.key == self.crash_key:
                raise RuntimeError("crashed")
            results.extend(super().batch([op]))
        return results

    async def abatch(self, ops: Any) -> list[Result]:
        return self.batch(ops)


def test_a_crash_before_the_head_write_keeps_head_valid() -> None:
    store = CrashingStore(key="head")
    registry = PromptRegistry(store, PROMPT)
    stored = registry.add_candidate(candidate())
    with pytest.raises(RuntimeError, match="crashed"):
        registry.accept(stored.version, YES)
    assert registry.head().version == 0
    assert registry.get(1).status == "accepted"


def test_head_repair_moves_head_to_the_accepted_versions_that_chain_from_it() -> None:
    store = CrashingStore(key="-")
    registry = PromptRegistry(store, PROMPT)
    registry.accept(registry.add_candidate(candidate(playbook("one"))).version, YES)
    pending = registry.add_candidate(candidate(playbook("pending")))
    store.crash_key = "head"  # the writer dies after writing each accepted version
    for text in ("two", "three"):
        stored = registry.add_candidate(candidate(playbook(text)))
        with pytest.raises(RuntimeError, match="crashed"):
            registry.accept(stored.version, YES)
        # The next writer repairs before it writes anything.
        store.crash_key = "-"
        assert registry.repair_head() is not None
        store.crash_key = "head"
    assert registry.head().version == 4
    assert [v.parent for v in registry.history()] == [0, 1, 1, 3]
    assert registry.get(pending.version).status == "candidate"
    store.crash_key = "-"
    assert registry.repair_head() is None  # nothing left to repair


def test_head_repair_skips_an_accepted_version_that_does_not_chain_from_head() -> None:
    store = InMemoryStore()
    registry = PromptRegistry(store, PROMPT)
    registry.accept(registry.add_candidate(candidate(playbook("one"))).version, YES)
    # Version 2 is accepted but learned from v0, not from HEAD (v1): a record no
    # writer of ours leaves, which repair must not put in force.
    orphan = registry.add_candidate(candidate(playbook("orphan"), parent=0))
    data = orphan.model_copy(update={"status": "accepted", "decision": YES})
    store.put(("combee", PROMPT, "_", "versions"), orphan_key(orphan), data.model_dump(mode="json"))
    assert registry.repair_head() is None
    assert registry.head().version == 1


def orphan_key(version: PromptVersion) -> str:
    return f"{version.version:010d}"


def test_a_crash_before_the_latest_hint_still_counts_the_version() -> None:
    store = CrashingStore(key="latest")
    registry = PromptRegistry(store, PROMPT)
    with pytest.raises(RuntimeError, match="crashed"):
        registry.add_candidate(candidate())
    assert registry.latest_version() == 1
    store.crash_key = "-"
    assert registry.add_candidate(candidate()).version == 2


def test_tenants_and_prompts_are_isolated(store: BaseStore) -> None:
    acme = PromptRegistry(store, PROMPT, tenant="acme")
    default = PromptRegistry(store, PROMPT)
    other = PromptRegistry(store, "other-agent", tenant="acme")
    acme.accept(acme.add_candidate(candidate(playbook("acme rule"))).version, YES)
    assert acme.head().version == 1
    assert default.head().version == 0 and default.history() == []
    assert other.head().version == 0 and other.latest_version() == 0


def test_a_full_read_sees_records_written_in_one_batch(store: BaseStore) -> None:
    # PostgresStore writes one batch in one transaction, so these records share
    # one ``updated_at``: the order its search pages by. Pages must still agree.
    namespace = ("combee", PROMPT, "_", "queue")
    keys = [f"k{n:03d}" for n in range(40)]
    store.batch([PutOp(namespace, key, {"n": n}) for n, key in enumerate(keys)])
    assert [item.key for item in _io.run_sync(store, _io.search_all(namespace))] == keys


# ---- lease -------------------------------------------------------------------


def test_lease_epochs_fence_writes_after_a_hand_over(store: BaseStore, clock: FakeClock) -> None:
    a = Lease(store, PROMPT, holder="a", ttl_seconds=10, clock=clock)
    b = Lease(store, PROMPT, holder="b", ttl_seconds=10, clock=clock)
    assert a.acquire() and a.epoch == 1
    assert a.renew() and a.epoch == 1  # a renewal is the same tenure
    registry_a = PromptRegistry(fenced(store, a), PROMPT)
    registry_a.add_candidate(candidate(playbook("by a")))
    clock.now += 11  # a is paused past its expiry; b takes over
    assert b.acquire() and b.epoch == 2
    with pytest.raises(LeaseLostError, match="epoch 1"):
        registry_a.add_candidate(candidate(playbook("late write by a")))
    registry_b = PromptRegistry(fenced(store, b), PROMPT)
    assert registry_b.add_candidate(candidate(playbook("by b"))).version == 2
    assert [v.playbook.bullets[0].content for v in registry_b.history()] == ["by a", "by b"]
    assert b.release() and b.holder() is None
    assert a.acquire() and a.epoch == 3  # a released lease keeps counting
    assert registry_a.head().version == 0  # reads are never fenced


def test_lease_acquire_expire_and_hand_over(store: BaseStore, clock: FakeClock) -> None:
    a = Lease(store, PROMPT, holder="learner-a", ttl_seconds=10, clock=clock)
    b = Lease(store, PROMPT, holder="learner-b", ttl_seconds=10, clock=clock)
    assert a.holder() is None and not a.is_held()
    assert a.acquire()
    assert a.holder() == b.holder() == "learner-a"
    assert a.is_held() and not b.is_held()
    assert not b.acquire() and not b.renew()
    clock.advance(9.9)
    assert a.is_held()
    clock.advance(0.2)
    assert a.holder() is None
    assert b.acquire() and b.is_held()
    assert not a.renew() and not a.is_held()


def test_lease_renew_extends_and_reacquire_is_idempotent(
    store: BaseStore, clock: FakeClock
) -> None:
    a = Lease(store, PROMPT, holder="a", ttl_seconds=10, clock=clock)
    b = Lease(store, PROMPT, holder="b", ttl_seconds=10, clock=clock)
    assert not a.renew()
    assert a.acquire()
    clock.advance(8)
    assert a.renew()
    clock.advance(5)
    assert a.is_held() and not b.acquire()
    assert a.acquire()
    clock.advance(9)
    assert a.is_held()
    clock.advance(2)
    assert a.renew() and a.is_held()


def test_lease_release_and_require(store: BaseStore, clock: FakeClock) -> None:
    a = Lease(store, PROMPT, holder="a", ttl_seconds=10, clock=clock)
    b = Lease(store, PROMPT, holder="b", ttl_seconds=10, clock=clock)
    a.require()
    assert a.is_held()
    with pytest.raises(LeaseHeldError, match="leased by 'a'") as info:
        b.require()
    assert (info.value.prompt_id, info.value.holder, info.value.expires_at) == (PROMPT, "a", 1010)
    assert not b.release()
    assert a.holder() == "a"
    assert a.release()
    assert a.holder() is None and not a.release()
    b.require()
    assert b.holder() == "b"


def test_leases_are_per_prompt_and_tenant(store: BaseStore, clock: FakeClock) -> None:
    assert Lease(store, PROMPT, holder="a", clock=clock).acquire()
    assert Lease(store, PROMPT, tenant="acme", holder="b", clock=clock).acquire()
    assert Lease(store, "other", holder="c", clock=clock).acquire()
    assert not Lease(store, PROMPT, holder="d", clock=clock).acquire()


class RacingStore(InMemoryStore):
    """Lets an intruder's lease write land right after every lease write of ours."""

    def batch(self, ops: Any) -> list[Result]:
        ops = list(ops)
        results = super().batch(ops)
        for op in ops:
            if (
                isinstance(op, PutOp)
                and op.key == "writer"
                and op.value is not None
                and op.value["holder"] != "intruder"
            ):
                value = {**op.value, "holder": "intruder"}
                super().batch([PutOp(op.namespace, op.key, value)])
        return results

    async def abatch(self, ops: Any) -> list[Result]:
        return self.batch(ops)


def test_lease_acquire_reads_back_and_loses_a_race(clock: FakeClock) -> None:
    store = RacingStore()
    a = Lease(store, PROMPT, holder="a", clock=clock)
    assert not a.acquire()
    assert a.holder() == "intruder"
    with pytest.raises(LeaseHeldError, match="'intruder'"):
        a.require()


def test_lease_validates_arguments(store: BaseStore) -> None:
    for bad in (0, -1, float("inf"), True):
        with pytest.raises(ConfigurationError, match="ttl_seconds"):
            Lease(store, PROMPT, holder="a", ttl_seconds=bad)
    with pytest.raises(ConfigurationError, match="holder=''"):
        Lease(store, PROMPT, holder="")


# ---- queue -------------------------------------------------------------------


def traces(*ids: str) -> list[Trace]:
    return [Trace(id=i, input=f"question {i}", output=f"answer {i}") for i in ids]


def test_put_is_idempotent_by_trace_id(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    (t,) = traces("t1")
    assert queue.put(t) and not queue.put(t)
    assert queue.status("t1") == "pending" and queue.status("nope") is None
    assert queue.claim(5, holder="l") == [t]
    assert not queue.put(t)
    assert queue.ack(["t1"]) == 1
    assert not queue.put(t)
    assert queue.status("t1") == "done"
    assert queue.claim(5, holder="l") == []
    assert queue.stats() == {"pending": 0, "claimed": 0, "done": 1, "waiting": 0}


def test_an_ack_cut_short_after_its_entry_delete_counts_as_done(
    store: BaseStore, clock: FakeClock
) -> None:
    # A learner SIGKILLed inside ack(): the entry is deleted, the index still says
    # claimed. The trace is done (it is in a version) and must be counted so.
    queue = TraceQueue(store, PROMPT, clock=clock)
    for t in traces("a", "b"):
        queue.put(t)
    queue.claim(2, holder="dead")
    index = store.get(queue._index, "a")
    assert index is not None and index.value["status"] == "claimed"
    store.delete(queue._entries, index.value["entry_key"])
    assert queue.status("a") == "done"
    assert queue.stats() == {"pending": 0, "claimed": 1, "done": 1, "waiting": 0}
    assert queue.backlog() == {"pending": 0, "claimed": 1, "waiting": 0}
    assert [c.trace_id for c in queue.claims()] == ["b"]
    assert not queue.put(traces("a")[0])


def test_claim_returns_arrival_order_up_to_limit(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    ids = ["zeta", "alpha", "mid", "beta", "omega"]
    for t in traces(*ids):
        queue.put(t)
    assert [t.id for t in queue.claim(2, holder="l")] == ["zeta", "alpha"]
    assert [t.id for t in queue.claim(2, holder="l")] == ["mid", "beta"]
    assert [t.id for t in queue.claim(10, holder="l")] == ["omega"]
    assert queue.claim(10, holder="l") == [] and queue.claim(0, holder="l") == []
    assert queue.stats()["claimed"] == 5


def test_expired_claims_are_claimed_again(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    for t in traces("a", "b", "c", "d"):
        queue.put(t)
    assert [t.id for t in queue.claim(3, holder="l1", visibility_seconds=60)] == ["a", "b", "c"]
    clock.advance(59)
    assert [t.id for t in queue.claim(10, holder="l2")] == ["d"]
    assert queue.status("a") == "claimed"
    clock.advance(2)
    assert queue.pending_count() == 3 and queue.status("a") == "pending"
    assert [t.id for t in queue.claim(10, holder="l2")] == ["a", "b", "c"]


def test_ack_and_release(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    for t in traces("a", "b", "c", "d"):
        queue.put(t)
    queue.claim(3, holder="l")
    assert queue.ack(["a", "b", "a", "unknown"]) == 2
    assert queue.ack("a") == 0
    assert queue.stats() == {"pending": 1, "claimed": 1, "done": 2, "waiting": 0}
    assert queue.release(["c", "d", "a", "unknown"]) == 1
    assert queue.stats() == {"pending": 2, "claimed": 0, "done": 2, "waiting": 0}
    assert [t.id for t in queue.claim(10, holder="l")] == ["c", "d"]


def test_feedback_merges_into_queued_traces(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    first = Trace(id="t1", feedback=Feedback(score=0.5, comment="slow"))
    queue.put(first)
    queue.put(Trace(id="t2"))
    assert queue.set_feedback("t1", Feedback(correct=True, comment="resolved"))
    assert queue.set_feedback("t2", Feedback(score=1.0))
    assert not queue.set_feedback("missing", Feedback(score=1.0))
    claimed = {t.id: t for t in queue.claim(10, holder="l")}
    assert claimed["t1"].feedback == Feedback(score=0.5, correct=True, comment="resolved")
    assert claimed["t2"].feedback == Feedback(score=1.0)
    assert queue.set_feedback("t1", Feedback(ground_truth="FIN"))
    queue.release(["t1"])
    queue.ack(["t2"])
    assert not queue.set_feedback("t2", Feedback(score=0.0))
    (again,) = queue.claim(10, holder="l")
    assert again.feedback is not None and again.feedback.ground_truth == "FIN"


def test_held_traces_wait_for_feedback(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    held, free, later = traces("held", "free", "later")
    queue.put(held, hold_until=clock.now + 100)
    queue.put(free)
    queue.put(later, hold_until=clock.now + 50)
    assert queue.stats() == {"pending": 3, "claimed": 0, "done": 0, "waiting": 2}
    assert [t.id for t in queue.claim(10, holder="l", ready_only=True)] == ["free"]
    assert queue.set_feedback("held", Feedback(correct=False))
    assert [t.id for t in queue.claim(10, holder="l", ready_only=True)] == ["held"]
    assert queue.claim(10, holder="l", ready_only=True) == []
    clock.advance(51)
    assert [t.id for t in queue.claim(10, holder="l", ready_only=True)] == ["later"]


def test_waiting_ids_lists_the_traces_a_ready_claim_skips(
    store: BaseStore, clock: FakeClock
) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    held, free, later, scored = traces("held", "free", "later", "scored")
    queue.put(held, hold_until=clock.now + 100)
    queue.put(free)
    queue.put(later, hold_until=clock.now + 50)
    queue.put(scored, hold_until=clock.now + 100)
    queue.set_feedback("scored", Feedback(score=1.0))
    assert queue.waiting_ids() == ["held", "later"]
    assert queue.waiting_ids(limit=1) == ["held"]
    clock.advance(51)
    assert queue.waiting_ids() == ["held"]
    queue.claim(10, holder="l")  # claimed traces are no longer waiting
    assert queue.waiting_ids() == []


async def test_awaiting_ids_matches_waiting_ids(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    for t in traces("a", "b"):
        queue.put(t, hold_until=clock.now + 100)
    assert await queue.awaiting_ids() == queue.waiting_ids() == ["a", "b"]


def test_claim_without_ready_only_ignores_holds(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    for t in traces("a", "b"):
        queue.put(t, hold_until=clock.now + 100)
    assert [t.id for t in queue.claim(10, holder="l")] == ["a", "b"]


def test_queue_pages_through_many_items(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    ids = [f"trace-{n:03d}" for n in range(40, 0, -1)]
    for t in traces(*ids):
        queue.put(t)
    assert queue.pending_count() == 40
    claimed = queue.claim(35, holder="l")
    assert [t.id for t in claimed] == ids[:35]
    assert queue.ack([t.id for t in claimed]) == 35
    assert queue.stats() == {"pending": 5, "claimed": 0, "done": 35, "waiting": 0}
    assert [t.id for t in queue.claim(100, holder="l")] == ids[35:]


def test_traces_round_trip_unchanged(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, tenant="acme", clock=clock)
    trace = Trace(
        id="run-1.2",
        input="Where is my refund?",
        output="BILLING",
        metadata={"ticket": 7, "tags": ["a"]},
        prompt_version=3,
        tenant="acme",
        feedback=Feedback(correct=False, ground_truth="FIN-REFUNDS"),
    )
    queue.put(trace)
    assert queue.claim(1, holder="l") == [trace]
    assert TraceQueue(store, PROMPT, clock=clock).pending_count() == 0


def _spoil(store: BaseStore, change: Callable[[dict[str, Any]], Any]) -> set[str]:
    """Rewrite each queued trace record as ``change`` gives it (None: left); the ids rewritten."""
    namespace = PromptSpace(PROMPT).namespace("queue")
    changed = set()
    for item in store.search(namespace, limit=10):
        trace = change(dict(item.value["trace"]))
        if trace is None:
            continue
        try:
            store.put(namespace, item.key, {**item.value, "trace": trace})
        except Exception:  # a store may refuse to write it (SQLite: nesting that deep)
            continue
        changed.add(item.value["trace"]["id"])
    return changed


def test_a_trace_stored_by_another_release_stays_readable(
    store: BaseStore, clock: FakeClock
) -> None:
    # Trace now refuses fields it does not have (a misspelled
    # "feedbak" in learn()) and a negative latency. A queued record carrying a
    # field of another release, or a value this one refuses, must still be read
    # back by every path that reads stored traces: claim, feedback, dead letters.
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("old", "parked"))
    _spoil(
        store,
        lambda t: {
            **t,
            "from_a_later_release": [1],
            "latency_seconds": -5.0,
            "feedback": {"correct": False, "confidence": 0.9},
        },
    )
    assert queue.set_feedback("old", Feedback(comment="late"))
    assert queue.park(["parked"], reason="x") == 1
    (claimed,) = queue.claim(10, holder="l")
    assert (claimed.id, claimed.latency_seconds) == ("old", None)
    assert claimed.feedback == Feedback(correct=False, comment="late")
    (letter,) = queue.dead_letters()
    assert (letter.trace.id, letter.trace.feedback) == ("parked", Feedback(correct=False))


@pytest.mark.parametrize(
    ("latency", "score", "read"),
    [("NaN", "nan", (None, None)), ("1.5", "0.5", (1.5, 0.5)), ("fast", [1], (None, None))],
)
def test_a_stored_number_written_as_text_is_read_or_forgotten(
    store: BaseStore, clock: FakeClock, latency: object, score: object, read: tuple[Any, Any]
) -> None:
    # A stored "NaN" (a string) made claim() raise for the whole batch.
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("odd"))
    _spoil(
        store,
        lambda t: {**t, "latency_seconds": latency, "feedback": {"correct": False, "score": score}},
    )
    (claimed,) = queue.claim(10, holder="l")
    assert (claimed.latency_seconds, claimed.feedback and claimed.feedback.score) == read


def test_a_stored_value_no_field_takes_is_left_out_not_the_batch(
    store: BaseStore, clock: FakeClock
) -> None:
    # A stored verdict "maybe" (no boolean) made claim() raise
    # for the whole batch, and the batch came back to fail again after its lease.
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("odd", "fine"))
    odd: dict[str, Any] = {
        "feedback": {"correct": "maybe", "comment": "c"},
        "tool_calls": [{"name": 5}, {"name": "ok", "args": {}}],
    }
    assert _spoil(store, lambda t: {**t, **odd} if t["id"] == "odd" else None) == {"odd"}
    claimed = {t.id: t for t in queue.claim(10, holder="l")}
    assert set(claimed) == {"odd", "fine"}
    assert claimed["odd"].feedback == Feedback(comment="c")
    assert [c.name for c in claimed["odd"].tool_calls] == ["ok"]


def test_a_stored_record_that_cannot_be_read_is_left_queued_not_the_batch(
    store: BaseStore, clock: FakeClock
) -> None:
    # A record that is no object, one nested too deep to repair,
    # or one whose id is no id failed the claim of the whole batch (or was read
    # under a new random id that could never be acknowledged).
    deep: list[Any] = []
    for _ in range(600):
        deep = [deep]
    odd = {
        "text": lambda t: "garbage",
        "deep": lambda t: {**t, "metadata": {"d": deep}, "input": 5},
        "badid": lambda t: {**t, "id": 7},
    }
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces(*odd, "fine"))
    spoilt = _spoil(store, lambda t: odd[t["id"]](t) if t["id"] in odd else None)
    assert "text" in spoilt and "badid" in spoilt
    assert [t.id for t in queue.claim(10, holder="l")] == [*sorted(set(odd) - spoilt), "fine"]
    assert {queue.status(name) for name in spoilt} == {"pending"}


def test_queue_validates_arguments(store: BaseStore) -> None:
    queue = TraceQueue(store, PROMPT)
    with pytest.raises(ConfigurationError, match="limit=-1"):
        queue.claim(-1, holder="l")
    with pytest.raises(ConfigurationError, match="holder=''"):
        queue.claim(1, holder="")
    with pytest.raises(ConfigurationError, match="visibility_seconds=0"):
        queue.claim(1, holder="l", visibility_seconds=0)
    with pytest.raises(ConfigurationError, match="hold_until=nan"):
        queue.put(Trace(), hold_until=float("nan"))


# ---- durability (SQLite file, PostgreSQL database) ---------------------------


def test_a_second_connection_sees_the_same_queue_and_registry(
    open_store: OpenStore, clock: FakeClock
) -> None:
    with open_store() as first, open_store() as second:
        writer = TraceQueue(first, PROMPT, clock=clock)
        reader = TraceQueue(second, PROMPT, clock=clock)
        for t in traces("a", "b", "c"):
            writer.put(t)
        assert not reader.put(traces("b")[0])
        assert [t.id for t in reader.claim(1, holder="l")] == ["a"]
        assert writer.stats() == {"pending": 2, "claimed": 1, "done": 0, "waiting": 0}
        registry = PromptRegistry(first, PROMPT)
        registry.accept(registry.add_candidate(candidate()).version, YES)
        assert PromptRegistry(second, PROMPT).head().version == 1
        assert Lease(first, PROMPT, holder="a", clock=clock).acquire()
        assert not Lease(second, PROMPT, holder="b", clock=clock).acquire()
    with open_store() as reopened:
        queue = TraceQueue(reopened, PROMPT, clock=clock)
        assert [t.id for t in queue.claim(5, holder="l")] == ["b", "c"]
        assert queue.status("a") == "claimed"
        assert PromptRegistry(reopened, PROMPT).head().version == 1
        assert Lease(reopened, PROMPT, holder="b", clock=clock).holder() == "a"


# ---- batched writes and claims (put_many, claims) ---------------------------


def test_put_many_queues_in_order_and_skips_duplicates(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    a, b, c = traces("a", "b", "c")
    assert queue.put(b)
    assert queue.put_many([a, b, c, a]) == [True, False, True, False]
    assert queue.put_many([]) == []
    assert [t.id for t in queue.claim(10, holder="l")] == ["b", "a", "c"]
    assert queue.ack(["a"]) == 1
    assert queue.put_many([a, *traces("d")]) == [False, True]
    assert queue.stats() == {"pending": 1, "claimed": 2, "done": 1, "waiting": 0}


def test_put_many_holds_per_trace(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    held, ready = traces("held", "ready")
    assert queue.put_many([held, ready], hold_until=[clock.now + 10, None]) == [True, True]
    assert [t.id for t in queue.claim(5, holder="l", ready_only=True)] == ["ready"]
    assert queue.stats()["waiting"] == 1
    with pytest.raises(ConfigurationError, match="one value per trace"):
        queue.put_many([held], hold_until=[])
    with pytest.raises(ConfigurationError, match="hold_until=inf"):
        queue.put_many(traces("x"), hold_until=[float("inf")])
    with pytest.raises(ConfigurationError, match="trace="):
        queue.put_many(["not a trace"])  # type: ignore[list-item]
    assert queue.status("x") is None


def test_a_superseding_trace_replaces_only_a_pending_failure(
    store: BaseStore, clock: FakeClock
) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    failed = Trace(id="run", input="refund?", error="ConnectionError: blip")
    answered = Trace(id="run", input="refund?", output="FIN-REFUNDS")
    first, fine = traces("first", "fine")
    rated = Trace(id="rated", error="E: x")
    holds = [None, clock.now + 10, None, None]
    assert queue.put_many([first, failed, fine, rated], hold_until=holds) == [True] * 4
    assert queue.set_feedback("rated", Feedback(correct=True, source="user"))
    assert not queue.put(answered)  # without supersede, a duplicate as always
    rerated = Trace(id="rated", output="ok", feedback=Feedback(score=0.5))
    assert queue.put_many([answered, rerated], supersede=[True, True]) == [True, True]
    # The failure's hold and place are kept; its content is the answer's.
    ready = queue.claim(5, holder="l", ready_only=True)
    assert [t.id for t in ready] == ["first", "fine", "rated"]
    assert (ready[2].output, ready[2].error) == ("ok", None)
    assert ready[2].feedback == Feedback(correct=True, score=0.5, source="user")
    clock.now += 11
    (run,) = queue.claim(5, holder="l", ready_only=True)
    assert (run.id, run.output, run.error) == ("run", "FIN-REFUNDS", None)
    assert queue.stats() == {"pending": 0, "claimed": 4, "done": 0, "waiting": 0}
    # Never a trace that did not fail, nor one the learner holds or is done with.
    assert queue.put_many([fine.model_copy(update={"output": "x"})], supersede=[True]) == [False]
    claimed = Trace(id="claimed", error="E: x")
    assert queue.put(claimed) and [t.id for t in queue.claim(1, holder="l")] == ["claimed"]
    assert queue.put_many([Trace(id="claimed", output="y")], supersede=[True]) == [False]
    queue.ack(["claimed"])
    assert queue.put_many([Trace(id="claimed", output="y")], supersede=[True]) == [False]
    # Within one batch: a later trace of the run replaces its failure, unless it may not.
    retried = [Trace(id="batch", error="E: 1"), Trace(id="batch", error="E: 2")]
    retried += [Trace(id="batch", output="ok"), Trace(id="batch", output="dup")]
    assert queue.put_many(retried, supersede=[False, True, True, False]) == [
        True,
        True,
        True,
        False,
    ]
    assert queue.put_many([Trace(id="new", output="z")], supersede=[True]) == [True]
    assert [(t.id, t.output, t.error) for t in queue.claim(5, holder="l")] == [
        ("batch", "ok", None),
        ("new", "z", None),
    ]
    with pytest.raises(ConfigurationError, match="one bool per trace"):
        queue.put_many(traces("y"), supersede=[])
    with pytest.raises(ConfigurationError, match="supersede="):
        queue.put_many(traces("y"), supersede=[1])  # type: ignore[list-item]
    # One flag for every trace is a mistake worth a clear message, not a TypeError.
    with pytest.raises(ConfigurationError, match="supersede=True .*one bool per trace"):
        queue.put_many(traces("y"), supersede=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="hold_until=5.0 .*one value per trace"):
        queue.put_many(traces("y"), hold_until=5.0)  # type: ignore[arg-type]


class Interleaved(BaseStore):
    """A store that runs ``between()`` once, just before the first batch ``when(ops)`` picks."""

    def __init__(
        self, inner: BaseStore, when: Callable[[list[Any]], bool], between: Callable[[], None]
    ) -> None:
        self.inner, self.when, self.between = inner, when, between
        self.done = False

    def batch(self, ops: Any) -> list[Result]:
        ops = list(ops)
        if not self.done and self.when(ops):
            self.done = True
            self.between()
        return self.inner.batch(ops)

    async def abatch(self, ops: Any) -> list[Result]:
        return self.batch(ops)


def _reads_entry(ops: list[Any]) -> bool:
    return any(isinstance(op, GetOp) and op.namespace[-1] == "queue" for op in ops)


def _writes_answer(ops: list[Any]) -> bool:
    return any(
        isinstance(op, PutOp) and op.value is not None and op.value["trace"].get("output") == "ok"
        for op in ops
    )


@pytest.mark.parametrize(
    ("when", "learner"),
    [(_reads_entry, "claims"), (_writes_answer, "claims and acks")],
    ids=["claimed-before-the-entry-is-read", "acked-before-the-answer-is-written"],
)
def test_a_supersede_racing_the_learner_never_brings_back_its_trace(
    store: BaseStore, clock: FakeClock, when: Callable[[list[Any]], bool], learner: str
) -> None:
    learned: list[Trace] = []

    def learn() -> None:
        other = TraceQueue(store, PROMPT, clock=clock)
        learned.extend(other.claim(5, holder="learner"))
        if learner == "claims and acks":
            other.ack([t.id for t in learned])

    TraceQueue(store, PROMPT, clock=clock).put(Trace(id="run", error="E: blip"))
    queue = TraceQueue(Interleaved(store, when, learn), PROMPT, clock=clock)
    # The learner took the failure: the answer may not take its place any more.
    assert queue.put_many([Trace(id="run", output="ok")], supersede=[True]) == [False]
    assert [(t.id, t.error) for t in learned] == [("run", "E: blip")]
    expected = "claimed" if learner == "claims" else "done"
    assert queue.status("run") == expected
    clock.advance(3600.0)  # any claim of the learner's has lapsed
    if learner == "claims and acks":
        assert queue.claim(5, holder="next") == []
        assert queue.stats() == {"pending": 0, "claimed": 0, "done": 1, "waiting": 0}
    else:
        (again,) = queue.claim(5, holder="next")  # the learner's lapsed claim, as always
        assert again.error == "E: blip"


async def test_aput_many_supersedes_like_put_many(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    assert await queue.aput_many([Trace(id="run", error="E: x")]) == [True]
    assert await queue.aput_many([Trace(id="run", output="ok")], supersede=[True]) == [True]
    (run,) = await queue.aclaim(5, holder="l")
    assert (run.output, run.error) == ("ok", None)


def test_claims_lists_live_claims_with_holder_and_time(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("a", "b", "c", "d"))
    queue.claim(2, holder="one", visibility_seconds=10)
    clock.advance(1)
    queue.claim(1, holder="two", visibility_seconds=100)
    claims = queue.claims()
    assert [(c.trace_id, c.holder, c.claimed_at) for c in claims] == [
        ("a", "one", 1000.0),
        ("b", "one", 1000.0),
        ("c", "two", 1001.0),
    ]
    assert claims[2].claimed_until == 1101.0
    queue.ack(["a"])
    queue.release(["c"])
    clock.advance(20)  # b's claim lapses
    assert queue.claims() == []


def test_ack_and_release_many_at_once(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    ids = [f"t{i:02d}" for i in range(30)]
    assert all(queue.put_many(traces(*ids)))
    assert len(queue.claim(30, holder="l")) == 30
    assert queue.release([*ids[:10], "unknown"]) == 10
    assert queue.ack(ids[5:] + ids[5:]) == 25
    assert queue.ack(ids[5:]) == 0 and queue.release(ids) == 0
    assert queue.stats() == {"pending": 5, "claimed": 0, "done": 25, "waiting": 0}
    assert [t.id for t in queue.claim(30, holder="l")] == ids[:5]


def test_lease_acquired_at_marks_a_tenure(store: BaseStore, clock: FakeClock) -> None:
    a = Lease(store, PROMPT, holder="learner-a", ttl_seconds=10, clock=clock)
    b = Lease(store, PROMPT, holder="learner-b", ttl_seconds=10, clock=clock)
    assert a.acquired_at is None
    assert a.acquire() and a.acquired_at == 1000.0
    clock.advance(5)
    assert a.renew() and a.acquire() and a.acquired_at == 1000.0
    clock.advance(20)  # a lapses unseen; b holds it for a while
    assert b.acquire() and b.acquired_at == 1025.0
    clock.advance(20)
    assert a.acquire() and a.acquired_at == 1045.0  # a new tenure


def test_backlog_counts_what_is_queued_without_done(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("a", "b", "c"), hold_until=[None, None, clock.now + 5])
    queue.claim(1, holder="l")
    queue.ack(["b"])
    assert queue.backlog() == {"pending": 1, "claimed": 1, "waiting": 1}
    assert queue.stats() == {**queue.backlog(), "done": 1}


# ---- attempts and dead letters ------------------------------------------------


def test_fail_counts_attempts_and_releases(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("a", "b", "c"))
    queue.claim(2, holder="l")
    assert queue.fail(["a", "b", "c", "unknown"], reason="BadRequestError('filtered')") == {
        "a": 1,
        "b": 1,
    }
    assert queue.backlog() == {"pending": 3, "claimed": 0, "waiting": 0}
    queue.claim(1, holder="l")
    assert queue.fail("a", reason="again") == {"a": 2}
    queue.claim(3, holder="l")
    queue.release(["a", "b", "c"])  # a release is not a failure: no attempt counted
    queue.claim(1, holder="l")
    assert queue.fail(["a"], reason="third") == {"a": 3}


def test_claim_among_given_ids_only(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("a", "b", "c", "d"))
    assert [t.id for t in queue.claim(10, holder="l", trace_ids=["d", "b", "x"])] == ["b", "d"]
    assert queue.claim(10, holder="l", trace_ids=["b"]) == []  # already claimed
    queue.ack(["a"])
    assert queue.claim(10, holder="l", trace_ids=["a", "c"])[0].id == "c"


def test_parked_traces_leave_the_queue_until_retried_or_dropped(
    store: BaseStore, clock: FakeClock
) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("good", "bad", "worse"))
    queue.claim(3, holder="l")
    queue.fail(["bad"], reason="BadRequestError: content filter")
    clock.advance(10)
    assert queue.park(["bad", "worse", "unknown"], reason="BadRequestError: content filter") == 2
    assert queue.status("bad") == "dead" and queue.status("good") == "claimed"
    assert queue.stats() == {"pending": 0, "claimed": 1, "done": 0, "waiting": 0}
    letters = queue.dead_letters()
    assert [(d.trace_id, d.attempts, d.parked_at) for d in letters] == [
        ("bad", 1, 1010.0),
        ("worse", 0, 1010.0),
    ]
    assert letters[0].reason == "BadRequestError: content filter"
    assert (letters[0].trace.id, letters[0].trace.input) == ("bad", "question bad")
    assert queue.dead_letters(limit=1)[0].trace_id == "bad"
    assert not queue.put(traces("bad")[0])  # its id stays known
    assert queue.claim(10, holder="l2", visibility_seconds=1) == []
    assert queue.ack(["bad"]) == 0 and queue.release(["bad"]) == 0
    assert not queue.set_feedback("bad", Feedback(correct=True))

    assert queue.retry_dead(["bad", "good"]) == ["bad"]
    assert queue.status("bad") == "pending"
    assert [t.id for t in queue.claim(10, holder="l", trace_ids=["bad"])] == ["bad"]
    assert queue.fail(["bad"], reason="x") == {"bad": 1}  # attempts were reset

    assert queue.drop_dead() == ["worse"]
    assert queue.status("worse") == "done" and queue.dead_letters() == []
    assert not queue.put(traces("worse")[0])
    assert queue.retry_dead() == [] and queue.drop_dead() == []
    assert queue.stats() == {"pending": 1, "claimed": 1, "done": 1, "waiting": 0}


async def test_dead_letter_async_twins(store: BaseStore, clock: FakeClock) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    await queue.aput_many(traces("a", "b"))
    await queue.aclaim(2, holder="l", trace_ids=["a", "b"])
    assert await queue.afail(["a"], reason="r") == {"a": 1}
    assert await queue.apark(["a", "b"], reason="r") == 2
    assert [d.trace_id for d in await queue.adead_letters()] == ["a", "b"]
    assert await queue.aretry_dead(["a"]) == ["a"]
    assert await queue.adrop_dead(["b"]) == ["b"]
    assert await queue.astatus("a") == "pending" and await queue.astatus("b") == "done"


def test_a_park_cut_short_never_hides_or_duplicates_a_trace(
    store: BaseStore, clock: FakeClock
) -> None:
    queue = TraceQueue(store, PROMPT, clock=clock)
    queue.put_many(traces("early", "late"))
    queue.claim(2, holder="l")
    space = PromptSpace(PROMPT)
    for trace_id in ("early", "late"):  # the dead records a park writes first
        store.put(
            space.namespace("dead_letters"),
            trace_id,
            {
                "trace_id": trace_id,
                "trace": traces(trace_id)[0].model_dump(mode="json"),
                "attempts": 1,
                "reason": "r",
                "parked_at": 1.0,
                "entry_key": "x",
            },
        )
    # Cut short before the entries were deleted: "early" is still queued, "late"
    # was learned since. Neither is a dead letter, and retrying cannot queue them twice.
    queue.ack(["late"])
    assert queue.dead_letters() == []
    assert queue.retry_dead() == [] and queue.status("late") == "done"
    assert [
        t.id for t in queue.claim(5, holder="l2", visibility_seconds=1, trace_ids=["early"])
    ] == []
    assert queue.status("early") == "claimed"
    assert store.search(space.namespace("dead_letters")) == []  # stale records removed


# ---- step log ------------------------------------------------------------------


def _step(version: int) -> StepRecord:
    report = StepReport(strategy="combee", batch_size=2, version=version, accepted=True)
    return StepRecord.of(report, tenant="acme")


def test_the_step_log_keeps_the_most_recent_steps_newest_first(store: BaseStore) -> None:
    log = StepLog(store, PROMPT, tenant="acme", keep=3)
    for version in range(1, 6):
        log.add(_step(version))
    assert [r.version for r in log.recent()] == [5, 4, 3]
    assert [r.version for r in log.recent(2)] == [5, 4]
    assert log.recent(0) == []
    (newest, *_) = log.recent()
    assert newest.tenant == "acme"
    assert newest.summary == "2 traces; rules: 0 proposed, 0 written, 0 held, 0 refused, " + (
        "0 left out; reasons: none; version 5 accepted (in force)"
    )
    assert StepLog(store, PROMPT).recent() == []  # another tenant's log
    assert len(store.search(("combee", PROMPT, "acme", "steps"), limit=100)) == 3


async def test_step_log_async_twins(store: BaseStore) -> None:
    log = StepLog(store, PROMPT, keep=2)
    for version in (1, 2, 3):
        await log.aadd(_step(version))
    assert [r.version for r in await log.arecent()] == [3, 2]
    assert [r.version for r in await log.arecent(1)] == [3]


def test_a_step_record_another_release_wrote_is_read_or_skipped(store: BaseStore) -> None:
    log = StepLog(store, PROMPT)
    namespace = ("combee", PROMPT, "_", "steps")
    store.put(namespace, "00000000000000000001-a", {"summary": "old", "from_the_future": 1})
    store.put(namespace, "00000000000000000002-b", {"traces": "many"})
    (record,) = log.recent()
    assert record.summary == "old"


def test_step_log_arguments_are_validated(store: BaseStore) -> None:
    with pytest.raises(ConfigurationError, match="keep=0 is not allowed: an int >= 1"):
        StepLog(store, PROMPT, keep=0)
    with pytest.raises(ConfigurationError, match="limit=-1 is not allowed"):
        StepLog(store, PROMPT).recent(-1)
    with pytest.raises(ConfigurationError, match="prompt_id='a.b' is not allowed"):
        StepLog(store, "a.b")
