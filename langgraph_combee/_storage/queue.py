"""A durable queue of traces in the store, between the agent and the learner.

Two record kinds per prompt and tenant (see ``keys``):

- an *entry* per queued trace in ``queue``, keyed ``"<arrival ns, 20 digits>-<trace id>"``
  so that keys sort by arrival. It holds the trace and its claim;
- an *index* record per trace id in ``queue_index``: its status (``pending``,
  ``claimed``, ``done`` or ``dead``) and its entry's key. It makes ``put``
  idempotent and outlives the entry, so a trace that was already learned from is
  never queued again.

Each entry counts its *attempts*: the failed learning steps it was part of
(``fail`` returns traces to the queue and counts one). A trace that keeps failing
is parked as a *dead letter* (``park``; see ``dead_letters``): out of the queue,
listed by ``dead_letters()``, until ``retry_dead`` queues it again or
``drop_dead`` gives it up.

Delivery is at-least-once: a claim lasts ``visibility_seconds``; a learner that
dies without ``ack`` or ``release`` lets the claim lapse and the traces are
claimed again. Entries are written before index records, so a crash between the
two can at worst queue a trace twice, never lose one.

Traces may wait for feedback: ``put(trace, hold_until=t)`` marks a trace as not
ready before time ``t`` unless it has feedback, and ``claim(..., ready_only=True)``
skips traces that are not ready. Feedback arriving later (``set_feedback``)
makes a trace ready at once.

Limitations: arrival order across processes follows their clocks
(``time.time_ns``); within a process it is strict. ``BaseStore`` has no
compare-and-swap, so two learners claiming at the same instant may both get a
trace, and feedback set while a claim is being written may be lost; run one
learner per prompt (the ``Lease``). The same goes for a superseding trace
(``put_many(..., supersede=...)``) written while the learner claims the failure
it replaces: the learner keeps the failure, and an entry the learner acked in
the meantime is deleted again rather than brought back into the queue.
``claim``, ``pending_count`` and ``stats`` read the whole queue (paging through
``search``), and index records of done traces are kept for idempotency, so
``stats`` grows with all traces ever queued.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import BaseStore, Item

from langgraph_combee._core.types import Feedback, Trace, stored_feedback, stored_trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow, run_async, run_sync
from langgraph_combee._storage.dead_letters import DeadLetter, DeadLetterFlows, clip_reason
from langgraph_combee._storage.keys import PromptSpace

logger = logging.getLogger("langgraph_combee.queue")

TraceStatus = Literal["pending", "claimed", "done", "dead"]


@dataclass(frozen=True)
class Claim:
    """A live claim on a queued trace: who holds it, since and until when (queue clock)."""

    trace_id: str
    holder: str
    claimed_at: float
    claimed_until: float


_arrival_lock = threading.Lock()
_last_arrival = 0


def _arrival_ns() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process."""
    global _last_arrival
    with _arrival_lock:
        _last_arrival = max(time.time_ns(), _last_arrival + 1)
        return _last_arrival


def _limit(limit: int | None) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigurationError("limit", limit, "None or an int >= 0")
    return limit


def _positive(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(name, value, "a finite number > 0")
    return float(value)


def _ids(trace_ids: Iterable[str]) -> list[str]:
    # A lone id is a str, which is also an Iterable[str] of characters.
    return [trace_ids] if isinstance(trace_ids, str) else list(dict.fromkeys(trace_ids))


def _some_ids(trace_ids: Iterable[str] | None) -> list[str] | None:
    return None if trace_ids is None else _ids(trace_ids)


class TraceQueue:
    """A durable, idempotent queue of ``Trace``s for one prompt (per tenant).

    Every method has an async twin prefixed with ``a`` (``aput``, ``aclaim``, ...).

    Example::

        queue = TraceQueue(store, "support-agent")
        queue.put(trace)
        batch = queue.claim(16, holder="learner-1")
        try:
            learn(batch)
        except Exception:
            queue.release([t.id for t in batch])
            raise
        queue.ack([t.id for t in batch])

    Args:
        store: The LangGraph store holding the queue.
        prompt_id: The prompt's id: a non-empty string without ``.``.
        tenant: The tenant, or None for the single default tenant.
        clock: Returns the current time in seconds; used for claim visibility and
            ``hold_until``. Injectable so tests can move time without sleeping.

    Raises:
        ConfigurationError: When an argument is invalid.
    """

    def __init__(
        self,
        store: BaseStore,
        prompt_id: str,
        *,
        tenant: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigurationError("store", store, "a langgraph.store.base.BaseStore")
        if not callable(clock):
            raise ConfigurationError("clock", clock, "a callable returning seconds")
        self._store = store
        self._space = PromptSpace(prompt_id, tenant)
        self._entries = self._space.namespace("queue")
        self._index = self._space.namespace("queue_index")
        self._clock = clock
        self._dead = DeadLetterFlows(
            entries=self._entries,
            index=self._index,
            dead=self._space.namespace("dead_letters"),
            clock=clock,
        )

    def __repr__(self) -> str:
        return f"TraceQueue(prompt_id={self._space.prompt_id!r}, tenant={self._space.tenant!r})"

    def put(self, trace: Trace, *, hold_until: float | None = None) -> bool:
        """Queue a trace; return False when its id was queued before (pending, claimed or done).

        Args:
            trace: The trace to queue.
            hold_until: Time (on the queue's clock) before which the trace waits
                for feedback: ``claim(..., ready_only=True)`` skips it until then
                unless it has feedback. None: ready at once.
        """
        return run_sync(self._store, self._put_flow(trace, hold_until))

    async def aput(self, trace: Trace, *, hold_until: float | None = None) -> bool:
        """Async twin of ``put``."""
        return await run_async(self._store, self._put_flow(trace, hold_until))

    def put_many(
        self,
        traces: Sequence[Trace],
        *,
        hold_until: Sequence[float | None] | None = None,
        supersede: Sequence[bool] | None = None,
    ) -> list[bool]:
        """Queue several traces in a few store calls (not a few per trace), like ``put`` each.

        Args:
            traces: The traces, in arrival order. An id seen before, or earlier in
                ``traces``, is skipped.
            hold_until: One ``put`` ``hold_until`` per trace; None: all ready at once.
            supersede: Per trace, whether it may take the place of a *failed* trace
                of the same id (one with an ``error``) that is still pending, here
                or earlier in ``traces``: the failed trace of a run whose model call
                was retried. The pending trace's place, hold and feedback are kept
                (the new trace's feedback merged over it). A trace that is claimed,
                done or dead, or did not fail, is never replaced (nor, as far as the
                store allows, one the learner claims while it is being replaced; see
                the module docstring). None: no trace may.

        Returns:
            Per trace, whether it was queued or took a failed trace's place
            (False: a duplicate).
        """
        return run_sync(self._store, self._put_many_flow(traces, hold_until, supersede))

    async def aput_many(
        self,
        traces: Sequence[Trace],
        *,
        hold_until: Sequence[float | None] | None = None,
        supersede: Sequence[bool] | None = None,
    ) -> list[bool]:
        """Async twin of ``put_many``."""
        return await run_async(self._store, self._put_many_flow(traces, hold_until, supersede))

    def claim(
        self,
        limit: int,
        *,
        holder: str,
        visibility_seconds: float = 300.0,
        ready_only: bool = False,
        trace_ids: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
    ) -> list[Trace]:
        """Claim up to ``limit`` pending traces, oldest first.

        A claim lasts ``visibility_seconds``; ``ack`` or ``release`` ends it, and
        a claim that lapses makes its traces claimable again (at-least-once).

        Args:
            limit: Most traces to return.
            holder: Who claims them (recorded on each entry).
            visibility_seconds: How long the claim lasts.
            ready_only: Skip traces waiting for feedback (``hold_until`` in the
                future and no feedback yet).
            trace_ids: Claim only among these traces (those still pending);
                None: among all. Read by id, not by scanning the queue.
            exclude: Traces not to claim (e.g. suspects of a failing batch).

        Returns:
            The claimed traces in arrival order, with any feedback set so far.
        """
        return run_sync(
            self._store,
            self._claim_flow(limit, holder, visibility_seconds, ready_only, trace_ids, exclude),
        )

    async def aclaim(
        self,
        limit: int,
        *,
        holder: str,
        visibility_seconds: float = 300.0,
        ready_only: bool = False,
        trace_ids: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
    ) -> list[Trace]:
        """Async twin of ``claim``."""
        return await run_async(
            self._store,
            self._claim_flow(limit, holder, visibility_seconds, ready_only, trace_ids, exclude),
        )

    def ack(self, trace_ids: Iterable[str]) -> int:
        """Mark traces done: their entries go, their index records stay so re-puts are ignored.

        Unknown and already-done ids are skipped. Returns how many were marked done.
        """
        return run_sync(self._store, self._ack_flow(_ids(trace_ids)))

    async def aack(self, trace_ids: Iterable[str]) -> int:
        """Async twin of ``ack``."""
        return await run_async(self._store, self._ack_flow(_ids(trace_ids)))

    def release(self, trace_ids: Iterable[str]) -> int:
        """Return claimed traces to pending (e.g. after a failed learning step).

        Ids that are unknown, done or not claimed are skipped. Returns how many
        were released.
        """
        return len(run_sync(self._store, self._release_flow(_ids(trace_ids))))

    async def arelease(self, trace_ids: Iterable[str]) -> int:
        """Async twin of ``release``."""
        return len(await run_async(self._store, self._release_flow(_ids(trace_ids))))

    def fail(self, trace_ids: Iterable[str], *, reason: str) -> dict[str, int]:
        """Release claimed traces after a failed learning step, counting one attempt each.

        Args:
            trace_ids: The traces of the failed step.
            reason: Why it failed (kept on each entry, shown when it is parked).

        Returns:
            Per released trace, its attempts so far (ids not claimed are skipped).
        """
        return run_sync(self._store, self._release_flow(_ids(trace_ids), failure=reason))

    async def afail(self, trace_ids: Iterable[str], *, reason: str) -> dict[str, int]:
        """Async twin of ``fail``."""
        return await run_async(self._store, self._release_flow(_ids(trace_ids), failure=reason))

    def park(self, trace_ids: Iterable[str], *, reason: str) -> int:
        """Park queued (pending or claimed) traces as dead letters; return how many.

        A parked trace is never claimed again until ``retry_dead``; its id stays
        known, so a re-``put`` is ignored.
        """
        return run_sync(self._store, self._dead.park(_ids(trace_ids), reason))

    async def apark(self, trace_ids: Iterable[str], *, reason: str) -> int:
        """Async twin of ``park``."""
        return await run_async(self._store, self._dead.park(_ids(trace_ids), reason))

    def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """Return the parked traces, oldest parked first (at most ``limit``; None: all)."""
        return run_sync(self._store, self._dead.letters(_limit(limit)))

    async def adead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """Async twin of ``dead_letters``."""
        return await run_async(self._store, self._dead.letters(_limit(limit)))

    def retry_dead(self, trace_ids: Iterable[str] | None = None) -> list[str]:
        """Queue parked traces again with their attempts reset (None: every one).

        Returns:
            The ids queued again, sorted; ids that are not parked are skipped.
        """
        return run_sync(self._store, self._dead.retry(_some_ids(trace_ids)))

    async def aretry_dead(self, trace_ids: Iterable[str] | None = None) -> list[str]:
        """Async twin of ``retry_dead``."""
        return await run_async(self._store, self._dead.retry(_some_ids(trace_ids)))

    def drop_dead(self, trace_ids: Iterable[str] | None = None) -> list[str]:
        """Give parked traces up for good: marked done, never learned (None: every one).

        Returns:
            The ids dropped, sorted; ids that are not parked are skipped.
        """
        return run_sync(self._store, self._dead.drop(_some_ids(trace_ids)))

    async def adrop_dead(self, trace_ids: Iterable[str] | None = None) -> list[str]:
        """Async twin of ``drop_dead``."""
        return await run_async(self._store, self._dead.drop(_some_ids(trace_ids)))

    def set_feedback(self, trace_id: str, feedback: Feedback) -> bool:
        """Merge feedback into a queued (pending or claimed) trace.

        Fields ``feedback`` sets take precedence over the trace's existing
        feedback (``Feedback.merged``). Returns False when the id is unknown or
        the trace is already done.
        """
        return run_sync(self._store, self._feedback_flow(trace_id, feedback))

    async def aset_feedback(self, trace_id: str, feedback: Feedback) -> bool:
        """Async twin of ``set_feedback``."""
        return await run_async(self._store, self._feedback_flow(trace_id, feedback))

    def waiting_ids(self, limit: int | None = None) -> list[str]:
        """Return the ids of traces waiting for feedback now, oldest first.

        These are the pending traces that ``claim(..., ready_only=True)`` skips:
        ``hold_until`` is in the future and they have no feedback yet.

        Args:
            limit: Most ids to return (None: all).
        """
        return run_sync(self._store, self._waiting_flow(limit))

    async def awaiting_ids(self, limit: int | None = None) -> list[str]:
        """Async twin of ``waiting_ids``."""
        return await run_async(self._store, self._waiting_flow(limit))

    def claims(self, *, lapsed: bool = False) -> list[Claim]:
        """Return the live claims (not acked, released or lapsed), oldest entry first.

        A new lease holder uses it to find claims a dead or displaced learner left;
        with ``lapsed``, also those whose visibility ran out and that nobody has
        claimed since (a learner dead for longer than its visibility timeout).
        """
        return run_sync(self._store, self._claims_flow(lapsed=lapsed))

    async def aclaims(self, *, lapsed: bool = False) -> list[Claim]:
        """Async twin of ``claims``."""
        return await run_async(self._store, self._claims_flow(lapsed=lapsed))

    def status(self, trace_id: str) -> TraceStatus | None:
        """Return a trace's status, or None when it was never queued.

        A claim that lapsed reads as ``pending``; a parked trace reads ``dead``.
        """
        return run_sync(self._store, self._status_flow(trace_id))

    async def astatus(self, trace_id: str) -> TraceStatus | None:
        """Async twin of ``status``."""
        return await run_async(self._store, self._status_flow(trace_id))

    def pending_count(self) -> int:
        """Return how many traces can be claimed now (including those waiting for feedback)."""
        return run_sync(self._store, self._stats_flow(count_done=False))["pending"]

    async def apending_count(self) -> int:
        """Async twin of ``pending_count``."""
        return (await run_async(self._store, self._stats_flow(count_done=False)))["pending"]

    def backlog(self) -> dict[str, int]:
        """Return ``stats()`` without ``done``: pending, claimed and waiting.

        It reads only the queued entries, not the records of every trace ever
        learned from, so its cost follows the backlog, not the queue's history
        (what the learner reads on every pass).
        """
        return run_sync(self._store, self._stats_flow(count_done=False))

    async def abacklog(self) -> dict[str, int]:
        """Async twin of ``backlog``."""
        return await run_async(self._store, self._stats_flow(count_done=False))

    def stats(self) -> dict[str, int]:
        """Return counts: ``pending``, ``claimed`` (live claims), ``done``, and ``waiting``.

        ``waiting`` is the part of ``pending`` that ``ready_only`` claims skip now.
        Parked traces are in none of these: ``dead_letters()`` lists them.
        """
        return run_sync(self._store, self._stats_flow(count_done=True))

    async def astats(self) -> dict[str, int]:
        """Async twin of ``stats``."""
        return await run_async(self._store, self._stats_flow(count_done=True))

    # ---- flows shared by the sync and async methods --------------------

    def _is_claimed(self, entry: dict[str, Any], now: float) -> bool:
        until = entry.get("claimed_until")
        return entry.get("status") == "claimed" and until is not None and float(until) > now

    def _is_waiting(self, entry: dict[str, Any], now: float) -> bool:
        hold = entry.get("hold_until")
        if hold is None or float(hold) <= now:
            return False
        feedback = entry["trace"].get("feedback")
        return feedback is None or stored_feedback(feedback).is_empty()

    def _put_flow(self, trace: Trace, hold_until: float | None) -> Flow[bool]:
        fresh = yield from self._put_many_flow([trace], [hold_until])
        return fresh[0]

    def _put_many_flow(
        self,
        traces: Sequence[Trace],
        hold_until: Sequence[float | None] | None,
        supersede: Sequence[bool] | None = None,
    ) -> Flow[list[bool]]:
        traces = list(traces)
        holds = _per_trace("hold_until", hold_until, len(traces), "value") or [None] * len(traces)
        replaces = _per_trace("supersede", supersede, len(traces), "bool") or [False] * len(traces)
        if not all(isinstance(r, bool) for r in replaces):
            raise ConfigurationError(
                "supersede", supersede, f"None or one bool per trace ({len(traces)})"
            )
        for trace, hold in zip(traces, holds, strict=True):
            if not isinstance(trace, Trace):
                raise ConfigurationError("trace", trace, "a langgraph_combee Trace")
            if hold is not None and (
                isinstance(hold, bool)
                or not isinstance(hold, (int, float))
                or not math.isfinite(hold)
            ):
                raise ConfigurationError("hold_until", hold, "None or a finite time in seconds")
        known = yield from self._indexes(list(dict.fromkeys(t.id for t in traces)))
        # The entries a trace may supersede: pending ones, read in one batch (only
        # retried runs come with ``supersede``, so a plain put reads nothing more).
        wanted = list(
            dict.fromkeys(
                t.id
                for t, r in zip(traces, replaces, strict=True)
                if r and t.id in known and known[t.id].value["status"] == "pending"
            )
        )
        found = yield from io.batch(
            [io.GetRequest(self._entries, known[t].value["entry_key"]) for t in wanted]
        )
        # Per trace id, the entry to write: (key, value, whether it is new). An
        # entry already claimed (its index not updated yet) is the learner's.
        entries: dict[str, tuple[str, dict[str, Any], bool]] = {
            t: (item.key, item.value, False)
            for t, item in zip(wanted, found, strict=True)
            if isinstance(item, Item) and item.value.get("status") == "pending"
        }
        changed: dict[str, None] = {}  # ids to write, in order
        result = []
        for trace, hold, replace in zip(traces, holds, replaces, strict=True):
            current = entries.get(trace.id)
            if current is not None or trace.id in known:
                if current is None or not replace or not current[1]["trace"].get("error"):
                    result.append(False)  # a duplicate
                    continue
                key, value, new = current
                value = {**value, "trace": _superseding(value["trace"], trace)}
                entries[trace.id] = (key, value, new)
                changed[trace.id] = None
                result.append(True)
                continue
            value = {
                "trace_id": trace.id,
                "trace": trace.model_dump(mode="json"),
                "status": "pending",
                "holder": None,
                "claimed_until": None,
                "hold_until": hold,
                "enqueued_at": self._clock(),
                "attempts": 0,
            }
            entries[trace.id] = (f"{_arrival_ns():020d}-{trace.id}", value, True)
            changed[trace.id] = None
            result.append(True)
        written = [entries[t] for t in changed]
        # Entries before index records: a crash between the two can at worst queue
        # a trace twice, never lose one. A superseded entry keeps its index record.
        yield from io.batch([io.PutRequest(self._entries, k, v) for k, v, _ in written])
        yield from io.batch(
            [self._index_put(v["trace_id"], "pending", k) for k, v, new in written if new]
        )
        replaced = {v["trace_id"]: k for k, v, new in written if not new}
        if replaced:
            lost = yield from self._raced(replaced)
            result = [r and t.id not in lost for t, r in zip(traces, result, strict=True)]
        return result

    def _raced(self, replaced: dict[str, str]) -> Flow[set[str]]:
        """Of the entries just superseded (id -> key), those the learner took meanwhile.

        ``BaseStore`` has no compare-and-swap: a learner may claim, and even ack,
        a failed trace between the read and the write of its superseding entry.
        An entry written back after the ack (or a park) would bring the trace
        back into the queue, to be learned from twice: it is deleted again. A
        claim still held keeps the learner's copy, the failure; the entry then
        says pending until the learner acks it (which deletes it).
        """
        indexes = yield from self._indexes(list(replaced))
        lost: set[str] = set()
        gone: list[str] = []
        for trace_id, key in replaced.items():
            index = indexes.get(trace_id)
            mine = index is not None and index.value["entry_key"] == key
            if mine and index is not None and index.value["status"] == "pending":
                continue
            lost.add(trace_id)
            if not (mine and index is not None and _queued(index)):
                gone.append(key)  # acked, parked or queued again under another key
        yield from io.batch([io.DeleteRequest(self._entries, key) for key in gone])
        return lost

    def _claim_flow(
        self,
        limit: int,
        holder: str,
        visibility_seconds: float,
        ready_only: bool,
        trace_ids: Iterable[str] | None,
        excluded: Iterable[str] | None,
    ) -> Flow[list[Trace]]:
        only = _some_ids(trace_ids)
        exclude = frozenset(_ids(excluded or ()))
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigurationError("limit", limit, "an int >= 0")
        if not isinstance(holder, str) or not holder.strip():
            raise ConfigurationError("holder", holder, "a non-empty string")
        visibility = _positive("visibility_seconds", visibility_seconds)
        if limit == 0:
            return []
        now = self._clock()
        chosen: list[Item] = []
        candidates = (
            (yield from io.search_all(self._entries))
            if only is None
            else (yield from self._queued_entries(only))
        )
        read: dict[str, Trace] = {}
        for item in candidates:
            if len(chosen) == limit:
                break
            if self._is_claimed(item.value, now) or item.value["trace_id"] in exclude:
                continue
            if ready_only and self._is_waiting(item.value, now):
                continue
            try:
                read[item.key] = stored_trace(item.value["trace"])
            except Exception as exc:  # one unreadable record must not fail the batch
                _unreadable(item.value.get("trace_id"), exc)
                continue
            chosen.append(item)
        entries = [
            (
                item.key,
                {
                    **item.value,
                    "status": "claimed",
                    "holder": holder,
                    "claimed_at": now,
                    "claimed_until": now + visibility,
                },
            )
            for item in chosen
        ]
        # One batch per namespace, entries first (see the module docstring).
        yield from io.batch([io.PutRequest(self._entries, key, e) for key, e in entries])
        yield from io.batch([self._index_put(e["trace_id"], "claimed", key) for key, e in entries])
        return [read[key] for key, _ in entries]

    def _index_put(self, trace_id: str, status: TraceStatus, entry_key: str) -> io.PutRequest:
        value = {"status": status, "entry_key": entry_key, "updated_at": self._clock()}
        return io.PutRequest(self._index, trace_id, value)

    def _queued_entries(self, trace_ids: list[str]) -> Flow[list[Item]]:
        """The queue entries of ``trace_ids`` that are pending or claimed, sorted by key."""
        indexes = yield from self._indexes(trace_ids)
        keys = [
            i.value["entry_key"]
            for i in indexes.values()
            if i.value["status"] in ("pending", "claimed")
        ]
        items = yield from io.batch([io.GetRequest(self._entries, k) for k in keys])
        return sorted((i for i in items if isinstance(i, Item)), key=lambda i: i.key)

    def _indexes(self, trace_ids: list[str]) -> Flow[dict[str, Item]]:
        """The index records of ``trace_ids`` that exist, read in one batch."""
        found = yield from io.batch([io.GetRequest(self._index, t) for t in trace_ids])
        return {t: item for t, item in zip(trace_ids, found, strict=True) if isinstance(item, Item)}

    def _ack_flow(self, trace_ids: list[str]) -> Flow[int]:
        indexes = yield from self._indexes(trace_ids)
        keys = {t: i.value["entry_key"] for t, i in indexes.items() if _queued(i)}
        # Entries first: a crash before the index update leaves a done trace
        # whose index still says claimed, which re-puts still ignore.
        yield from io.batch([io.DeleteRequest(self._entries, key) for key in keys.values()])
        yield from io.batch([self._index_put(t, "done", key) for t, key in keys.items()])
        return len(keys)

    def _release_flow(
        self, trace_ids: list[str], *, failure: str | None = None
    ) -> Flow[dict[str, int]]:
        """Claimed traces back to pending (one attempt more on a failure): id -> attempts."""
        indexes = yield from self._indexes(trace_ids)
        keys = {t: i.value["entry_key"] for t, i in indexes.items() if _queued(i)}
        items = yield from io.batch([io.GetRequest(self._entries, k) for k in keys.values()])
        released = {
            t: item
            for t, item in zip(keys, items, strict=True)
            if isinstance(item, Item) and item.value.get("status") == "claimed"
        }
        counted = {} if failure is None else {"last_error": clip_reason(failure)}
        entries = {
            t: {
                **item.value,
                "status": "pending",
                "holder": None,
                "claimed_until": None,
                "attempts": int(item.value.get("attempts", 0)) + (failure is not None),
                **counted,
            }
            for t, item in released.items()
        }
        yield from io.batch(
            [io.PutRequest(self._entries, released[t].key, e) for t, e in entries.items()]
        )
        yield from io.batch([self._index_put(t, "pending", i.key) for t, i in released.items()])
        return {t: int(e["attempts"]) for t, e in entries.items()}

    def _feedback_flow(self, trace_id: str, feedback: Feedback) -> Flow[bool]:
        if not isinstance(feedback, Feedback):
            raise ConfigurationError("feedback", feedback, "a langgraph_combee Feedback")
        index = yield from io.get(self._index, trace_id)
        if index is None or not _queued(index):
            return False
        key = index.value["entry_key"]
        item = yield from io.get(self._entries, key)
        if item is None:
            return False
        trace = stored_trace(item.value["trace"])
        merged = feedback if trace.feedback is None else trace.feedback.merged(feedback)
        trace = trace.model_copy(update={"feedback": merged})
        yield from io.put(
            self._entries, key, {**item.value, "trace": trace.model_dump(mode="json")}
        )
        return True

    def _waiting_flow(self, limit: int | None) -> Flow[list[str]]:
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ConfigurationError("limit", limit, "None or an int >= 0")
        now = self._clock()
        ids: list[str] = []
        for item in (yield from io.search_all(self._entries)):
            if limit is not None and len(ids) >= limit:
                break
            if not self._is_claimed(item.value, now) and self._is_waiting(item.value, now):
                ids.append(item.value["trace_id"])
        return ids

    def _claims_flow(self, *, lapsed: bool = False) -> Flow[list[Claim]]:
        now = self._clock()
        found = []
        for item in (yield from io.search_all(self._entries)):
            entry = item.value
            if self._is_claimed(entry, now) or (
                lapsed and entry.get("status") == "claimed" and entry.get("claimed_until")
            ):
                # Claims written before claimed_at existed: arrival is a lower bound.
                since = entry.get("claimed_at", entry.get("enqueued_at", 0.0))
                found.append(
                    Claim(
                        trace_id=entry["trace_id"],
                        holder=str(entry.get("holder")),
                        claimed_at=float(since),
                        claimed_until=float(entry["claimed_until"]),
                    )
                )
        return found

    def _status_flow(self, trace_id: str) -> Flow[TraceStatus | None]:
        index = yield from io.get(self._index, trace_id)
        if index is None:
            return None
        if index.value["status"] in ("done", "dead"):
            return "dead" if index.value["status"] == "dead" else "done"
        item = yield from io.get(self._entries, index.value["entry_key"])
        if item is None:
            # Acked by a process that died before updating the index.
            return "done"
        return "claimed" if self._is_claimed(item.value, self._clock()) else "pending"

    def _stats_flow(self, *, count_done: bool) -> Flow[dict[str, int]]:
        now = self._clock()
        counts = {"pending": 0, "claimed": 0, "done": 0, "waiting": 0}
        # The index is read before the entries: a trace queued in between is
        # simply not counted yet, never counted as done.
        index = (yield from io.search_all(self._index)) if count_done else []
        entries = yield from io.search_all(self._entries)
        for item in entries:
            if self._is_claimed(item.value, now):
                counts["claimed"] += 1
            else:
                counts["pending"] += 1
                counts["waiting"] += self._is_waiting(item.value, now)
        if count_done:
            live = {item.key for item in entries}
            # Done: marked so, or acked by a process that died before updating
            # the index (its entry is gone; see _status_flow).
            counts["done"] = sum(
                1
                for item in index
                if item.value["status"] == "done"
                or (item.value["status"] != "dead" and item.value["entry_key"] not in live)
            )
        else:
            del counts["done"]
        return counts


def _per_trace(name: str, values: object, count: int, what: str) -> list[Any] | None:
    """``values`` as a list of ``count`` (one per trace), None if None; else ConfigurationError."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ConfigurationError(name, values, f"None or one {what} per trace ({count})")
    listed = list(values)
    if len(listed) != count:
        raise ConfigurationError(name, values, f"None or one {what} per trace ({count})")
    return listed


def _superseding(stored: dict[str, Any], trace: Trace) -> dict[str, Any]:
    """``trace`` as stored in place of the failed trace ``stored``, its feedback kept."""
    kept = stored.get("feedback")
    if kept is not None:
        feedback = stored_feedback(kept)
        if trace.feedback is not None:
            feedback = feedback.merged(trace.feedback)
        trace = trace.model_copy(update={"feedback": feedback})
    return trace.model_dump(mode="json")


def _queued(index: Item) -> bool:
    """Whether an index record is of a trace still in the queue (pending or claimed)."""
    return index.value["status"] in ("pending", "claimed")


_warned_unreadable: set[str] = set()


def _unreadable(trace_id: object, exc: BaseException) -> None:
    """Say once per trace that its stored record cannot be read; it stays queued."""
    key = str(trace_id)
    if key in _warned_unreadable or len(_warned_unreadable) > 10_000:
        return
    _warned_unreadable.add(key)
    logger.error(
        "the stored record of trace %s cannot be read (%s); it is left queued, never "
        "claimed: repair or drop it in the store",
        key,
        f"{type(exc).__name__}: {str(exc)[:200]}",
    )
