"""Dead letters: queued traces parked after failing learning steps, until retried or dropped.

A trace that keeps failing a learning step on its own (a provider's content
filter, a context-length error) would otherwise be claimed again forever and
hold its tenant's queue back. ``TraceQueue.park`` moves it out of the queue into
a ``dead_letters`` record (see ``keys``) and marks its index record ``dead``:
it is no longer claimed, counted as pending or learned from, and a re-``put``
of its id is still ignored. ``retry`` puts it back in the queue with its
attempt count reset; ``drop`` marks it done for good.

Writes are ordered so that a crash between two of them never loses a trace: a
dead record is written before the queue entry is deleted, and a retried trace is
queued before its dead record is deleted. A dead record whose trace is still
queued (or was learned since) is what a cut-short ``park`` left: it is not
listed, and ``retry`` or ``drop`` removes it, so no trace is queued twice.

The flows here are driven by ``TraceQueue``'s sync and async methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from langgraph.store.base import Item

from langgraph_combee._core.types import Trace, stored_trace
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow

# Characters of a failure's reason kept on the entry and the dead record.
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class DeadLetter:
    """A parked trace: why and when it was parked, after how many failed steps.

    Attributes:
        trace_id: The trace's id.
        attempts: Failed learning steps the trace was part of.
        reason: The last failure (exception type and message, cut to 500 characters).
        parked_at: When it was parked (queue clock, seconds).
        trace: The trace itself, as queued.
    """

    trace_id: str
    attempts: int
    reason: str
    parked_at: float
    trace: Trace


def clip_reason(reason: str) -> str:
    """The reason as stored: one line, at most ``MAX_REASON_CHARS`` characters."""
    text = " ".join(str(reason).split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


@dataclass(frozen=True)
class DeadLetterFlows:
    """The dead-letter flows of one queue: its three namespaces and its clock."""

    entries: tuple[str, ...]
    index: tuple[str, ...]
    dead: tuple[str, ...]
    clock: Callable[[], float]

    def _index_put(
        self, trace_id: str, status: str, entry_key: str, **extra: object
    ) -> io.PutRequest:
        value = {"status": status, "entry_key": entry_key, "updated_at": self.clock(), **extra}
        return io.PutRequest(self.index, trace_id, value)

    def park(self, trace_ids: list[str], reason: str) -> Flow[int]:
        """Move queued (pending or claimed) traces to the dead letters; return how many."""
        found = yield from io.batch([io.GetRequest(self.index, t) for t in trace_ids])
        keys = {
            t: i.value["entry_key"]
            for t, i in zip(trace_ids, found, strict=True)
            if isinstance(i, Item) and i.value["status"] in ("pending", "claimed")
        }
        items = yield from io.batch([io.GetRequest(self.entries, k) for k in keys.values()])
        live = {t: i for t, i in zip(keys, items, strict=True) if isinstance(i, Item)}
        now, why = self.clock(), clip_reason(reason)
        records = {
            t: {
                "trace_id": t,
                "trace": item.value["trace"],
                "attempts": int(item.value.get("attempts", 0)),
                "reason": why,
                "parked_at": now,
                "entry_key": item.key,
                "enqueued_at": item.value.get("enqueued_at"),
            }
            for t, item in live.items()
        }
        # Dead record first, queue entry next, index last (see the module docstring).
        yield from io.batch([io.PutRequest(self.dead, t, r) for t, r in records.items()])
        yield from io.batch([io.DeleteRequest(self.entries, i.key) for i in live.values()])
        yield from io.batch([self._index_put(t, "dead", i.key) for t, i in live.items()])
        return len(live)

    def _sorted_out(self, items: list[Item]) -> Flow[tuple[list[Item], list[str]]]:
        """Split dead records into dead letters and the keys of stale ones.

        A stale record is what a ``park`` cut short before deleting the queue entry
        left: its trace is still queued (or was learned since), not dead.
        """
        found = yield from io.batch([io.GetRequest(self.index, i.key) for i in items])
        unsure = [
            (item, index)
            for item, index in zip(items, found, strict=True)
            if isinstance(index, Item) and index.value["status"] != "dead"
        ]
        entries = yield from io.batch(
            [io.GetRequest(self.entries, index.value["entry_key"]) for _, index in unsure]
        )
        stale = {
            item.key
            for (item, index), entry in zip(unsure, entries, strict=True)
            if index.value["status"] == "done" or isinstance(entry, Item)
        }
        return [i for i in items if i.key not in stale], sorted(stale)

    def _selected(self, trace_ids: list[str] | None) -> Flow[list[Item]]:
        """The dead letters among ``trace_ids`` (None: all); stale records are removed."""
        if trace_ids is None:
            items = yield from io.search_all(self.dead)
        else:
            found = yield from io.batch([io.GetRequest(self.dead, t) for t in trace_ids])
            items = [item for item in found if isinstance(item, Item)]
        letters, stale = yield from self._sorted_out(items)
        yield from io.batch([io.DeleteRequest(self.dead, key) for key in stale])
        return letters

    def letters(self, limit: int | None) -> Flow[list[DeadLetter]]:
        """The dead letters, oldest parked first."""
        items, _ = yield from self._sorted_out((yield from io.search_all(self.dead)))
        letters = sorted(
            (
                DeadLetter(
                    trace_id=str(item.value["trace_id"]),
                    attempts=int(item.value.get("attempts", 0)),
                    reason=str(item.value.get("reason", "")),
                    parked_at=float(item.value.get("parked_at", 0.0)),
                    trace=stored_trace(item.value["trace"]),
                )
                for item in items
            ),
            key=lambda letter: (letter.parked_at, letter.trace_id),
        )
        return letters if limit is None else letters[:limit]

    def retry(self, trace_ids: list[str] | None) -> Flow[list[str]]:
        """Queue dead letters again, attempts reset; return the ids queued."""
        items = yield from self._selected(trace_ids)
        entries = {
            item.key: (
                str(item.value["entry_key"]),
                {
                    "trace_id": item.key,
                    "trace": item.value["trace"],
                    "status": "pending",
                    "holder": None,
                    "claimed_until": None,
                    "hold_until": None,
                    "enqueued_at": item.value.get("enqueued_at") or self.clock(),
                    "attempts": 0,
                    "last_error": item.value.get("reason"),
                },
            )
            for item in items
        }
        # Back in the queue (under its old key: it keeps its place) before the
        # dead record goes.
        yield from io.batch([io.PutRequest(self.entries, k, e) for k, e in entries.values()])
        yield from io.batch([self._index_put(t, "pending", k) for t, (k, _) in entries.items()])
        yield from io.batch([io.DeleteRequest(self.dead, t) for t in entries])
        return sorted(entries)

    def drop(self, trace_ids: list[str] | None) -> Flow[list[str]]:
        """Give dead letters up: marked done (a re-put stays ignored); return the ids dropped."""
        items = yield from self._selected(trace_ids)
        yield from io.batch(
            [
                self._index_put(item.key, "done", str(item.value["entry_key"]), dropped=True)
                for item in items
            ]
        )
        yield from io.batch([io.DeleteRequest(self.dead, item.key) for item in items])
        return sorted(item.key for item in items)
