"""The capture buffer: captured runs between the agent's hot path and the durable queue.

A captured run enters the buffer in memory and leaves it only once the queue
holds it, so ``feedback(run_id)`` finds it at every moment in between: in the
buffer, then in the queue. A flush marks the traces it is writing as *sent*
and keeps them in the buffer until the write returns; feedback that arrives
meanwhile is kept on the entry (``late``) and delivered to the queue right
after the write, before the entry is let go.

Feedback the queue cannot take because the store is failing waits here too
(``deferred``) and is retried on every flush. Neither buffer outlives the
process: ``docs/faults.md`` says what that puts at risk and for how long, and
the ``write_through`` durability mode writes each trace before its run returns.

Locking: one lock guards the buffer's structure and counters and is never held
while user code (a deferred trace build, which runs the evaluator) or a store
call runs; a per-entry lock makes sure a deferred trace is built exactly once.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from langgraph_combee._agent.limits import TraceLimits, clip_trace
from langgraph_combee._core.types import Feedback, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._settings import DropPolicy
from langgraph_combee._storage.queue import TraceQueue

logger = logging.getLogger("langgraph_combee.serving")

# Most buffered traces written to the queue in one go (a few store calls each).
FLUSH_CHUNK = 100


@dataclass
class ServingStats:
    """Counters of the agent-side machinery, for monitoring (``combee.describe()``)."""

    captured: int = 0
    dropped: int = 0
    flushed: int = 0
    duplicates: int = 0
    superseded: int = 0  # failed traces replaced in the buffer by their retried run's
    flush_errors: int = 0
    refreshes: int = 0
    refresh_errors: int = 0
    first_read_timeouts: int = 0
    feedback_unknown: int = 0
    feedback_deferred: int = 0
    feedback_delivered: int = 0
    feedback_dropped: int = 0
    feedback_errors: int = 0
    truncated: int = 0
    capture_errors: int = 0
    evaluator_errors: int = 0
    unserializable: int = 0
    bad_tenants: int = 0
    written_through: int = 0
    write_through_fallbacks: int = 0
    focus_by_meaning: int = 0  # requests served the closest rule (ServingSettings.focus_embedder)
    focus_embed_errors: int = 0
    focus_embed_skipped: int = 0  # named no rule's words; the embedder was busy or resting
    example_turns: int = 0  # worked examples served as turns (ServingSettings.example_turns)
    examples_by_meaning: int = 0  # of those, the ones picked by the focus embedder

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return dict(self.__dict__)


# Characters no store can encode: lone UTF-16 surrogates (not UTF-8) and NUL
# (refused by PostgreSQL text and jsonb).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with every character no store can encode made U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def _storable(value: Any) -> Any:
    """``value`` (plain JSON data) with every unstorable character made U+FFFD."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """``value`` (a trace's ``model_dump()``) as JSON data, each value JSON cannot carry its repr.

    Value by value, not with ``model_dump(mode="json", fallback=repr)``: that
    falls back only for types pydantic does not know, and it knows ``bytes``,
    which it writes as UTF-8 and so fails on bytes that are not (``b"\\xff"``).
    """
    if isinstance(value, dict):
        return {_key(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    try:
        return to_jsonable_python(value, fallback=repr)
    except Exception:  # bytes that are not UTF-8, and the like
        return repr(value)


def _key(key: Any) -> str:
    """A mapping key as JSON's str; bytes as their repr, so ``b"a"`` never overwrites ``"a"``."""
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray)):
        return repr(key)
    return str(_jsonable(key))


def with_feedback(trace: Trace, feedback: Feedback) -> Trace:
    """``trace`` with ``feedback`` merged over the feedback it already has."""
    merged = trace.feedback.merged(feedback) if trace.feedback is not None else feedback
    return trace.model_copy(update={"feedback": merged})


def _under(kept: Feedback, trace: Trace) -> Trace:
    """``trace`` with ``kept`` merged under the feedback it has (its own fields win)."""
    merged = kept.merged(trace.feedback) if trace.feedback is not None else kept
    return trace.model_copy(update={"feedback": merged})


def _built_under(kept: Feedback, build: Callable[[], Trace]) -> Trace:
    return _under(kept, build())


@dataclass(eq=False, slots=True)
class Pending:
    """A captured run waiting for the queue: a trace, or the recipe to build it later."""

    trace_id: str
    trace: Trace | None
    hold_until: float | None
    build: Callable[[], Trace] | None = None
    hold_seconds: float = 0.0
    captured_at: float = 0.0
    seq: int = 0
    sending: bool = False  # a writer owns it (a flush chunk or a write-through)
    sent: bool = False  # its trace was handed to a store write that has not returned
    written: bool = False  # the queue holds it; ``late`` feedback is still to deliver
    late: list[Feedback] = field(default_factory=list)
    # Feedback given before the trace was built: merged in when it is, so that
    # feedback() never waits for a build (and the user's evaluator it runs).
    early: list[Feedback] = field(default_factory=list)
    failed: bool = False  # its deferred build raised: there will be no trace
    # It takes the place of the run's failed trace captured before (a model call
    # that raised and was retried): in the buffer, or in the queue if written.
    supersedes: bool = False
    # Reentrant: an evaluator (run by the build) that calls feedback() for its own
    # run finds the build in progress instead of waiting for itself.
    building: threading.RLock = field(default_factory=threading.RLock)


class CaptureBuffer:
    """Bounded buffer of captured traces and of feedback waiting for the store.

    Args:
        queue_for: The durable queue of a tenant.
        capture_limit: Most traces (and, separately, deferred feedback) held.
        drop_policy: Which trace goes when the buffer is full.
        limits: Size limits applied to every captured trace.
        on_store_result: Told ``True``/``False`` after each store call, so the
            server knows when the store is failing.
    """

    def __init__(
        self,
        *,
        queue_for: Callable[[str | None], TraceQueue],
        capture_limit: int,
        drop_policy: DropPolicy,
        limits: TraceLimits,
        stats: ServingStats,
        lock: threading.Lock,
        on_store_result: Callable[[bool], None],
    ) -> None:
        self._queue_for = queue_for
        self.capture_limit = capture_limit
        self.drop_policy = drop_policy
        self.limits = limits
        self.stats = stats
        self._lock = lock
        self._on_store_result = on_store_result
        self._entries: collections.OrderedDict[int, Pending] = collections.OrderedDict()
        self._deferred: collections.deque[tuple[str | None, str, Feedback]] = collections.deque()
        self._seq = itertools.count(1)
        self._delivering = threading.Lock()

    # ---- in --------------------------------------------------------------

    def pending(
        self,
        trace_id: str,
        trace: Trace | None,
        *,
        build: Callable[[], Trace] | None = None,
        hold_seconds: float = 0.0,
        supersede: bool = False,
    ) -> Pending:
        """A new entry (not yet in the buffer); ``trace`` is clipped to the limits."""
        hold = None
        if trace is not None:
            trace = self.clipped(trace)
            if hold_seconds > 0 and trace.feedback is None:
                hold = time.time() + hold_seconds
        return Pending(
            trace_id,
            trace,
            hold,
            build=build,
            hold_seconds=hold_seconds,
            captured_at=time.time(),
            supersedes=supersede,
        )

    def append(self, pending: Pending, *, sending: bool = False) -> Pending | None:
        """Add an entry; returns the entry now holding it, None if the drop policy refused it.

        A superseding entry goes in place of its run's entry when that one is
        still waiting (not being written): the run keeps one entry, its place and
        its feedback. Otherwise it is added, and replaces the run's failed trace
        in the queue when it is written.
        """
        with self._lock:
            if pending.supersedes:
                merged = self._supersede(pending)
                if merged is not None:
                    merged.sending = sending
                    return merged
                # Written after the run's failure, never beside it (see _unsent).
                sending = sending and not self._behind(pending)
            if len(self._entries) >= self.capture_limit:
                self.stats.dropped += 1
                if self.drop_policy == "drop_newest":
                    return None
                oldest = next((p for p in self._entries.values() if not p.sending), None)
                if oldest is None:
                    oldest = next(iter(self._entries.values()))
                del self._entries[oldest.seq]
                self.stats.feedback_dropped += len(oldest.late) + len(oldest.early)
            pending.seq = next(self._seq)
            pending.sending = sending
            self._entries[pending.seq] = pending
            self.stats.captured += 1
            return pending

    def _supersede(self, pending: Pending) -> Pending | None:
        """Put ``pending`` in place of its run's waiting entry (under the lock); None if none.

        Only a retried run gets here, so the scan is off the common path. An
        entry not being written has no build in progress (only a writer builds).
        """
        for old in reversed(self._entries.values()):
            if old.trace_id != pending.trace_id:
                continue
            if old.sending or old.sent or old.written or old.failed:
                return None
            kept = old.trace.feedback if old.trace is not None else None
            trace, build = pending.trace, pending.build
            if kept is not None:
                # The run's feedback so far (the failure was built: a write of it
                # failed), under what the new trace brings (its evaluator's score).
                if trace is not None:
                    trace = _under(kept, trace)
                elif build is not None:
                    build = functools.partial(_built_under, kept, build)
            if trace is not None:
                for feedback in old.early:
                    trace = with_feedback(trace, feedback)
                old.early.clear()
            old.trace, old.build = trace, build
            old.hold_until = pending.hold_until
            old.hold_seconds = pending.hold_seconds
            old.supersedes = True  # in case an earlier, interrupted write reached the queue
            self.stats.superseded += 1
            return old
        return None

    def clipped(self, trace: Trace) -> Trace:
        """``trace`` within the size limits (counted in ``stats.truncated`` when cut)."""
        clipped = clip_trace(trace, self.limits)
        if clipped is trace:
            return trace
        with self._lock:
            self.stats.truncated += 1
        return clipped

    def built(self, pending: Pending) -> bool:
        """Give ``pending`` its trace (building it if deferred); False if the build failed.

        Runs user code (the evaluator, through ``build``): never call it under
        the buffer's lock. The entry's own lock makes concurrent callers wait
        for a single build.
        """
        with pending.building:
            if pending.trace is not None:
                return True
            build, pending.build = pending.build, None
            if build is None:
                return False  # built before, and it failed
            try:
                trace = self.clipped(build())
            except Exception:
                logger.exception(
                    "cannot build the trace of run %s; it is not captured", pending.trace_id
                )
                with self._lock:
                    pending.failed = True
                    self.stats.capture_errors += 1
                    self.stats.feedback_dropped += len(pending.early)
                    pending.early.clear()
                return False
            with self._lock:
                for feedback in pending.early:
                    trace = with_feedback(trace, feedback)
                pending.early.clear()
                if pending.hold_seconds > 0 and trace.feedback is None:
                    pending.hold_until = pending.captured_at + pending.hold_seconds
                pending.trace = trace
            return True

    # ---- feedback ----------------------------------------------------------

    def attach(self, trace_id: str, feedback: Feedback) -> bool:
        """Merge ``feedback`` into a trace still in the buffer; False if none is there.

        Never builds a deferred trace (nor waits for a build in progress): the
        build runs the user's evaluator, which may be slow or hang. Feedback for
        a trace not built yet is merged in when it is (and counted in
        ``stats.feedback_dropped`` if that build fails).
        """
        with self._lock:
            for pending in self._entries.values():
                if pending.trace_id != trace_id or pending.failed:
                    continue
                if pending.trace is None:
                    pending.early.append(feedback)
                    return True
                pending.trace = with_feedback(pending.trace, feedback)
                if pending.sent or pending.written:
                    # The write in progress (or done: the queue holds the trace,
                    # its late feedback still to deliver) carries it without this.
                    pending.late.append(feedback)
                return True
        return False

    def defer(self, tenant: str | None, trace_id: str, feedback: Feedback) -> None:
        """Keep feedback the store could not take, for delivery on a later flush."""
        with self._lock:
            if len(self._deferred) >= self.capture_limit:
                self._deferred.popleft()
                self.stats.feedback_dropped += 1
            self._deferred.append((tenant, trace_id, feedback))
            self.stats.feedback_deferred += 1

    def deferred(self) -> int:
        """Feedback waiting for the store."""
        with self._lock:
            return len(self._deferred)

    # ---- out ---------------------------------------------------------------

    def size(self) -> int:
        """Entries held, written or not (constant time: for the hot path)."""
        return len(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for p in self._entries.values() if not p.written)

    def flush(self) -> int:
        """Write buffered traces to their queues; returns how many were written.

        Traces go in chunks of ``FLUSH_CHUNK``. A chunk that cannot be written
        (store down) stays in the buffer, in its place, and flushing stops until
        the next attempt. Late and deferred feedback is delivered after.
        """
        written = 0
        while True:
            with self._lock:
                chunk = list(itertools.islice(self._unsent(), FLUSH_CHUNK))
                for pending in chunk:
                    pending.sending = True
            if not chunk:
                break
            sent = self.send(chunk)
            if sent is None:
                return written
            written += sent
        self.deliver()
        return written

    def _unsent(self) -> Iterator[Pending]:
        return (
            p
            for p in self._entries.values()
            if not (p.sending or p.written or (p.supersedes and self._behind(p)))
        )

    def _behind(self, pending: Pending) -> bool:
        """Whether an earlier entry of ``pending``'s run is being written (under the lock).

        Its superseding trace then waits for the next flush: written at the same
        time, each write could miss the other in the queue and both be queued.
        """
        return any(
            p.sending and p.trace_id == pending.trace_id and p is not pending
            for p in self._entries.values()
        )

    def send(self, chunk: list[Pending]) -> int | None:
        """Write entries a caller marked ``sending``; None when the store failed."""
        try:
            return self._send(chunk)
        except BaseException:
            # Never leave an entry owned by a writer that is gone: it would never
            # be written again.
            with self._lock:
                for pending in chunk:
                    pending.sending = pending.sent = False
            raise

    def _send(self, chunk: list[Pending]) -> int | None:
        ready = [p for p in chunk if self.built(p)]
        with self._lock:
            for pending in chunk:
                if pending not in ready:
                    self._entries.pop(pending.seq, None)
            items = []
            for pending in ready:
                assert pending.trace is not None
                pending.sent = True
                items.append((pending.trace, pending.hold_until, pending.supersedes))
        try:
            fresh = self._write(items)
        except Exception as exc:
            if self._repair(ready):
                # A trace the store could never take (not a store fault) was made
                # storable or dropped: go again at once instead of blocking the buffer.
                with self._lock:
                    for pending in ready:
                        pending.sending = pending.sent = False
                return 0
            with self._lock:
                for pending in ready:
                    # The trace itself already carries any late feedback.
                    pending.sending = pending.sent = False
                    pending.late.clear()
                self.stats.flush_errors += 1
            self._on_store_result(False)
            logger.warning("cannot write traces to the queue (will retry): %r", exc)
            return None
        self._on_store_result(True)
        with self._lock:
            for pending in ready:
                pending.sending = pending.sent = False
                if pending.late:
                    pending.written = True  # kept until its late feedback is delivered
                else:
                    self._entries.pop(pending.seq, None)
            self.stats.flushed += sum(fresh)
            self.stats.duplicates += len(fresh) - sum(fresh)
        return len(ready)

    def _repair(self, ready: list[Pending]) -> bool:
        """Fix or drop entries no store can hold; True if there were any.

        ``Trace`` fields typed ``Any`` (metadata, tool arguments) may hold objects
        JSON cannot carry, and any text may hold characters a store cannot encode
        (a lone UTF-16 surrogate, which is not UTF-8; NUL, which PostgreSQL text
        refuses). Such a trace fails every write, which would hold every trace
        behind it in the buffer for good, and make a healthy store look failing.
        Its odd values become their ``repr`` and its odd characters U+FFFD instead
        (counted in ``stats.unserializable``), or, if even that fails, it is
        dropped (``stats.capture_errors``).
        """
        found = False
        for pending in ready:
            assert pending.trace is not None
            try:
                plain = pending.trace.model_dump(mode="json")
                odd = False
            except Exception:
                plain, odd = None, True
            try:
                if plain is None:
                    plain = _jsonable(pending.trace.model_dump())
                clean = _storable(plain)
                if not odd and clean == plain:
                    continue
                repaired: Trace | None = Trace.model_validate(clean)
            except Exception:  # includes a RecursionError on absurdly nested values
                repaired = None
            found = True
            with self._lock:
                if repaired is None:
                    self.stats.capture_errors += 1
                    self._entries.pop(pending.seq, None)
                else:
                    self.stats.unserializable += 1
                    pending.trace = repaired
            logger.error(
                "the trace of run %s holds values no store can hold; %s",
                pending.trace_id,
                "dropped" if repaired is None else "stored with repr() and U+FFFD in their place",
            )
        return found

    def _write(self, items: list[tuple[Trace, float | None, bool]]) -> list[bool]:
        by_tenant: dict[str | None, list[tuple[Trace, float | None, bool]]] = {}
        for item in items:
            by_tenant.setdefault(item[0].tenant, []).append(item)
        fresh: list[bool] = []
        for tenant, group in by_tenant.items():
            try:
                queue = self._queue_for(tenant)
            except ConfigurationError as exc:
                # A tenant no queue can have (a trace captured by hand with a bad
                # tenant): retrying cannot help, and it must not hold the rest back.
                logger.error("dropping %d trace(s) of an invalid tenant: %s", len(group), exc)
                with self._lock:
                    self.stats.bad_tenants += len(group)
                fresh += [False] * len(group)
                continue
            supersede = [item[2] for item in group]
            fresh += queue.put_many(
                [item[0] for item in group],
                hold_until=[item[1] for item in group],
                supersede=supersede if any(supersede) else None,
            )
        return fresh

    def deliver(self) -> None:
        """Hand late and deferred feedback to the queue; stops at the first store failure."""
        if not self._delivering.acquire(blocking=False):
            return  # another thread is delivering
        try:
            with self._lock:
                late = [(p, list(p.late)) for p in self._entries.values() if p.written]
                deferred = list(self._deferred)
            for pending, feedbacks in late:
                assert pending.trace is not None
                if not self._deliver_one(pending.trace.tenant, pending.trace_id, feedbacks):
                    return
                with self._lock:
                    del pending.late[: len(feedbacks)]
                    if not pending.late:
                        self._entries.pop(pending.seq, None)
            for tenant, trace_id, feedback in deferred:
                if not self._deliver_one(tenant, trace_id, [feedback]):
                    return
                with self._lock, contextlib.suppress(ValueError):
                    self._deferred.remove((tenant, trace_id, feedback))
        finally:
            self._delivering.release()

    def _deliver_one(self, tenant: str | None, trace_id: str, feedbacks: list[Feedback]) -> bool:
        merged = feedbacks[0]
        for feedback in feedbacks[1:]:
            merged = merged.merged(feedback)
        try:
            found = self._queue_for(tenant).set_feedback(trace_id, merged)
        except Exception as exc:
            with self._lock:
                self.stats.feedback_errors += 1
            self._on_store_result(False)
            logger.warning("cannot deliver feedback for run %s (will retry): %r", trace_id, exc)
            return False
        self._on_store_result(True)
        with self._lock:
            if found:
                self.stats.feedback_delivered += 1
            else:
                self.stats.feedback_unknown += 1
        return True
