"""The agent-side half of Combee: a cached HEAD per tenant and a bounded capture buffer.

The agent's hot path only touches memory here, with one exception: the first
run of a tenant in a process reads HEAD from the store, and waits for that read
at most ``first_read_seconds`` (then it serves version 0, the app's own prompt,
and the read fills the cache when it ends). A failed read is remembered like a
successful one, so a failing store costs the hot path that one wait, not one
per run. A daemon worker thread refreshes every cached HEAD older than
``refresh_seconds`` from the store (waking every ``flush_seconds``) and flushes
captured traces into the durable queue, so several processes sharing one store
converge within ``refresh_seconds + flush_seconds`` plus one store read. If the
store is down, the last cached version keeps being served and captured traces
wait in the buffer (``_agent/buffer.py``; bounded, the drop policy decides
what goes).

Durability ``"write_through"`` writes each captured trace to the queue before
the run returns instead (falling back to the buffer, counted, while the store
is failing).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from langgraph_combee._agent.buffer import (
    FLUSH_CHUNK,
    CaptureBuffer,
    Pending,
    ServingStats,
)
from langgraph_combee._agent.limits import TraceLimits, clip_text
from langgraph_combee._agent.meaning import Meaning
from langgraph_combee._agent.turns import ExampleSet, NearestShots, Shot, as_turns
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.situations import (
    RuleIndex,
    focused,
)
from langgraph_combee._core.types import Feedback, PromptVersion, Trace
from langgraph_combee._settings import CaptureSettings, DropPolicy, Durability, ServingSettings
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee._storage.registry import PromptRegistry

__all__ = [
    "FLUSH_CHUNK",
    "UNSCOPED",
    "DropPolicy",
    "Durability",
    "Server",
    "ServingStats",
]

logger = logging.getLogger("langgraph_combee.serving")


UNSCOPED = "combee.unscoped"
"""The tenant of a run whose ``scope`` failed: served the shared playbook, never captured.

No real tenant can take this value (namespace labels cannot hold a period), and
it is plain text, so it can sit in a checkpointed state.
"""


def _shared(tenant: str | None) -> str | None:
    return None if tenant == UNSCOPED else tenant


# How long the interpreter's exit waits for the last flush (a dead store must
# not hang the process's exit).
EXIT_FLUSH_SECONDS = 5.0


@dataclass
class _Entry:
    version: PromptVersion
    loaded_at: float


class Server:
    """Caches HEAD per tenant and buffers captured traces for the durable queue.

    ``store_gone()`` tells whether the store can never answer again (an async
    store whose event loop has closed); the worker then retires the server
    instead of trying it again forever.
    """

    def __init__(
        self,
        *,
        registry_for: Callable[[str | None], PromptRegistry],
        queue_for: Callable[[str | None], TraceQueue],
        capture: CaptureSettings | None = None,
        serving: ServingSettings | None = None,
        keep_metadata: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
        store_gone: Callable[[], bool] = lambda: False,
    ) -> None:
        self._registry_for = registry_for
        self._store_gone = store_gone
        self._queue_for = queue_for
        # The settings objects Combee was given, read as they are (checked when built).
        self.capture_settings = capture if capture is not None else CaptureSettings()
        self.serving_settings = serving if serving is not None else ServingSettings()
        # Size limits of captured traces; ``keep_metadata`` entries are never dropped.
        self.limits = TraceLimits(
            max_message_chars=self.capture_settings.max_message_chars,
            max_trace_chars=self.capture_settings.max_trace_chars,
            keep_metadata=keep_metadata,
        )
        # The worker's pace; a plain attribute so that a test may hold traces in memory.
        self.flush_seconds = self.capture_settings.flush_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._heads: dict[str | None, _Entry] = {}
        self._loading: dict[str | None, threading.Event] = {}
        self._canaries: dict[str | None, PromptVersion | None] = {}
        self._versions: collections.OrderedDict[tuple[str | None, int], PromptVersion] = (
            collections.OrderedDict()
        )
        self._rendered: collections.OrderedDict[tuple[object, ...], str] = collections.OrderedDict()
        self._bare: collections.OrderedDict[tuple[object, ...], str] = collections.OrderedDict()
        self._examples: collections.OrderedDict[int, tuple[Playbook, ExampleSet]] = (
            collections.OrderedDict()
        )
        self._turns: collections.OrderedDict[
            tuple[int, str], tuple[ExampleSet, tuple[BaseMessage, ...], bool]
        ] = collections.OrderedDict()
        self._indexes: collections.OrderedDict[tuple[object, ...], RuleIndex] = (
            collections.OrderedDict()
        )
        self._embed_quiet_until = float("-inf")
        self._meaning = (
            Meaning(
                self.serving_settings.embedder,
                clock=clock,
                failed=self._embed_failed,
                served=self._served_by_meaning,
                skipped=self._skipped_by_meaning,
            )
            if self.serving_settings.embedder is not None
            else None
        )
        self._stale: set[str | None] = set()
        self._failed_at: float | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = ServingStats()
        self.closed = False  # closed by its owner: the exit hook leaves it alone
        self.retired = False  # its store is closed for good: nothing more is captured
        self.listeners: list[Callable[[PromptVersion, PromptVersion | None], None]] = []
        self._buffer = CaptureBuffer(
            queue_for=queue_for,
            capture_limit=self.capture_settings.capture_limit,
            drop_policy=self.capture_settings.drop_policy,
            limits=self.limits,
            stats=self.stats,
            lock=self._lock,
            on_store_result=self.note_store,
        )
        # A normal exit flushes what is buffered (SIGKILL cannot: docs/faults.md).
        atexit.register(_flush_at_exit, weakref.ref(self))

    # ---- store health ----------------------------------------------------

    def note_store(self, ok: bool) -> None:
        """Record whether a store call just succeeded (see ``store_failing``)."""
        with self._lock:
            self._failed_at = None if ok else self._clock()

    def store_failing(self) -> bool:
        """Whether a store call failed within the last ``refresh_seconds`` (none succeeded since).

        The hot path does not wait on such a store: it serves what it has and
        leaves the retries to the worker thread.
        """
        failed = self._failed_at  # one attribute read is atomic: no lock on the hot path
        return failed is not None and self._clock() - failed < self.serving_settings.refresh_seconds

    # ---- prompts ---------------------------------------------------------

    def head(self, tenant: str | None) -> PromptVersion:
        """The cached HEAD of a tenant; loaded once, then refreshed in the background.

        The first call for a tenant reads the store, waiting at most
        ``serving.first_read_seconds``; runs arriving meanwhile wait on the same
        read. Past that, version 0 (the app's own prompt) is served until the read
        or a later refresh succeeds. A retired server (its store closed for good)
        serves a tenant it has no HEAD for version 0 without reading.
        """
        tenant = _shared(tenant)
        now = self._clock()
        # Every run passes here: a fresh entry is read without the lock (one dict
        # read is atomic, and an entry's fields are set before it is stored).
        entry = self._heads.get(tenant)
        if entry is not None and (
            now - entry.loaded_at < self.serving_settings.refresh_seconds or tenant in self._stale
        ):
            # Stale and already marked: the worker has been woken for it. Waking it on
            # every run until its refresh lands would make it flush run by run, and
            # take the lock here each time, instead of once a flush interval.
            return entry.version
        with self._lock:
            entry = self._heads.get(tenant)
            if entry is not None:
                if now - entry.loaded_at >= self.serving_settings.refresh_seconds:
                    self._stale.add(tenant)
                    self._wake.set()
                return entry.version
            if self.retired:
                # Its store is closed for good: nothing to read, the app's own prompt.
                entry = self._heads[tenant] = _Entry(self._initial(tenant), now)
                return entry.version
            loading = self._loading.get(tenant)
            first = loading is None
            if loading is None:
                loading = self._loading[tenant] = threading.Event()
        self._ensure_worker()
        if first:
            threading.Thread(
                target=self._first_read,
                args=(tenant, loading),
                name="combee-first-read",
                daemon=True,
            ).start()
        loading.wait(self.serving_settings.first_read_seconds)
        with self._lock:
            entry = self._heads.get(tenant)
            if entry is None:
                # Still reading: later runs must not wait again; the read (or the
                # worker's next refresh) replaces this entry.
                entry = self._heads[tenant] = _Entry(self._initial(tenant), now)
                self.stats.first_read_timeouts += 1
            return entry.version

    def _first_read(self, tenant: str | None, done: threading.Event) -> None:
        try:
            with contextlib.suppress(Exception):  # counted and remembered in _load_head
                self._load_head(tenant, fallback=True)
        finally:
            with self._lock:
                self._loading.pop(tenant, None)
            done.set()

    def _initial(self, tenant: str | None) -> PromptVersion:
        return PromptVersion(prompt_id=self._registry_for(tenant).prompt_id, tenant=tenant)

    def rendered(self, version: PromptVersion, *, examples: bool = True) -> str:
        """``version.render()``, cached: the hot path renders each served version once.

        Learning makes new versions; the one change made to a written version's
        playbook is a candidate's rebase (``PromptRegistry.rebase``), which keeps
        its number and creation time and gives it another parent. So the key is
        tenant, number, creation time, parent and size.

        ``examples=False``: without the worked examples (served as turns instead,
        ``example_turns``).
        """
        if not version.playbook.bullets:
            return ""  # what render() gives: most runs before any learning take no lock here
        key = _version_key(version)
        cache = self._rendered if examples else self._bare
        # One dict read is atomic (the key's parts hash in C): no lock on the hot path.
        text = cache.get(key)
        if text is None:
            playbook = version.playbook if examples else version.playbook.without_examples()
            text = playbook.render()
            with self._lock:
                cache[key] = text
                while len(cache) > 64:
                    cache.popitem(last=False)
        return text

    def example_turns(self, version: PromptVersion, request: str) -> tuple[BaseMessage, ...]:
        """The worked examples of ``version`` served to ``request`` as turns (``_agent.turns``).

        At most ``serving.example_turns`` examples, each a user turn and an
        assistant turn; () when the setting is 0 or the version keeps none. The
        pick is cached per version and request text (a run's later model calls
        ask again with the same request); a pick by words made while the
        embedder was busy is not, so the next call may pick by meaning.
        """
        k = self.serving_settings.example_turns
        playbook = version.playbook
        if not k or not playbook.bullets:
            return ()
        # Keyed by the playbook object, which the cached HEAD serves to every run (and
        # the cache keeps alive, so its id is not reused): no key to build per call.
        found = self._examples.get(id(playbook))  # atomic, as in ``rendered``
        if found is not None and found[0] is playbook:
            examples = found[1]
        else:
            examples = ExampleSet(playbook)
            with self._lock:
                self._examples[id(playbook)] = (playbook, examples)
                while len(self._examples) > 64:
                    self._examples.popitem(last=False)
        if not examples:
            return ()
        text = clip_text(request, self.limits.max_message_chars)
        pick_key = (id(examples), text)
        cached = self._turns.get(pick_key)
        if cached is not None and cached[0] is examples:
            self._count_turns(len(cached[1]) // 2, by_meaning=cached[2])
            return cached[1]
        meaning, embedder = self._meaning, self.serving_settings.embedder
        chosen: list[Shot] = []
        if meaning is not None and embedder is not None and text.strip():
            chosen = meaning.lookup(
                ("examples", _version_key(version)),
                lambda: NearestShots(examples, embedder),
                lambda nearest: nearest.closest(text, k),
            )
        by_meaning = bool(chosen)
        if not chosen:
            chosen = examples.by_words(text, k)
        turns = as_turns(chosen)
        if by_meaning or meaning is None:
            with self._lock:
                self._turns[pick_key] = (examples, turns, by_meaning)
                while len(self._turns) > 256:
                    self._turns.popitem(last=False)
        self._count_turns(len(chosen), by_meaning=by_meaning)
        return turns

    def _count_turns(self, served: int, *, by_meaning: bool) -> None:
        with self._lock:
            self.stats.example_turns += served
            if by_meaning:
                self.stats.examples_by_meaning += served

    def served(self, version: PromptVersion, request: str) -> str:
        """What is appended to the app's prompt for ``request``: the playbook, then its focus.

        The focus is the rules of ``version`` that ``request`` (the text of the
        run's latest human message) names, at most ``serving.focus_rules``
        (``RuleIndex.focus``). The request is read as its trace keeps it (cut
        to ``limits.max_message_chars``), so verified adoption, which replays
        the trace, matches the same words.
        """
        return self.focus(version, self.rendered(version), request)

    def focus(self, version: PromptVersion, playbook: str, request: str) -> str:
        """``served(version, request)`` for a caller that has ``playbook = rendered(version)``."""
        limit = self.serving_settings.focus_rules
        if not playbook or not limit or not request:
            return playbook
        index = self.rule_index(version)
        if not index:
            return playbook
        text = clip_text(request, self.limits.max_message_chars)
        meaning = self._meaning
        rivals = self.serving_settings.drop_rivals
        if meaning is None:
            return focused(playbook, index, text, limit=limit, drop_rivals=rivals)
        key = _version_key(version)
        # Asked only when no rule's words match; it never raises (``Meaning.closest``).
        return focused(
            playbook,
            index,
            text,
            limit=limit,
            closest=lambda request: meaning.closest(key, index, request),
            drop_rivals=rivals,
        )

    @property
    def by_meaning(self) -> bool:
        """Whether a focus embedder is set (its calls are best kept off an event loop)."""
        return self._meaning is not None

    def _embed_failed(self, exc: BaseException) -> None:
        now = self._clock()
        with self._lock:
            self.stats.focus_embed_errors += 1
            loud = now >= self._embed_quiet_until
            if loud:
                self._embed_quiet_until = now + 60.0
        if loud:  # at most one warning a minute
            logger.warning(
                "the focus embedder failed (%s: %s); the rules a request names are served "
                "by their words only (ServingStats.focus_embed_errors)",
                type(exc).__name__,
                exc,
            )

    def _served_by_meaning(self) -> None:
        with self._lock:
            self.stats.focus_by_meaning += 1

    def _skipped_by_meaning(self) -> None:
        with self._lock:
            self.stats.focus_embed_skipped += 1

    def rule_index(self, version: PromptVersion) -> RuleIndex:
        """The live rules of ``version``, indexed for ``RuleIndex.focus`` (cached as ``rendered``).

        Built on the first model call that serves the version (a pure function of
        its bullets, so two threads building it at once build the same index).
        """
        key = _version_key(version)
        index = self._indexes.get(key)  # atomic, as in ``rendered``
        if index is None:
            index = RuleIndex.of(version.playbook)
            with self._lock:
                self._indexes[key] = index
                while len(self._indexes) > 64:
                    self._indexes.popitem(last=False)
        return index

    def has_head(self, tenant: str | None) -> bool:
        """Whether ``head(tenant)`` is served from memory (no store read)."""
        tenant = _shared(tenant)
        with self._lock:
            return tenant in self._heads

    def version(self, tenant: str | None, number: int) -> PromptVersion:
        """A version by number (a pinned run's), from memory when possible."""
        tenant = _shared(tenant)
        with self._lock:
            entry = self._heads.get(tenant)
            if entry is not None and entry.version.version == number:
                return entry.version
            cached = self._versions.get((tenant, number))
            if cached is not None:
                return cached
        if self.retired or self.store_failing():
            return self.head(tenant)
        try:
            found = self._registry_for(tenant).get(number)
        except Exception:  # a dead store must not break a run: serve HEAD instead
            self.note_store(False)
            logger.warning("cannot read version %s of tenant %r; serving HEAD", number, tenant)
            return self.head(tenant)
        self._remember(tenant, found)
        return found

    def canary(self, tenant: str | None) -> PromptVersion | None:
        """The cached canary candidate of a tenant (refreshed with HEAD), if any."""
        tenant = _shared(tenant)
        with self._lock:
            return self._canaries.get(tenant)

    def set_canary(self, tenant: str | None, version: PromptVersion | None) -> None:
        """Start or end serving a canary in this process at once."""
        with self._lock:
            self._canaries[tenant] = version
        if version is not None:
            self._remember(tenant, version)

    def publish(self, version: PromptVersion) -> None:
        """Make a version this process put in force the cached HEAD at once.

        Listeners (``listeners``: ``(new, previous) -> None``, e.g. a LangSmith
        prompt-hub sync) are told; one that raises is logged and skipped.
        """
        with self._lock:
            previous = self._heads.get(version.tenant)
            self._heads[version.tenant] = _Entry(version, self._clock())
        self._remember(version.tenant, version)
        for listener in list(self.listeners):
            try:
                listener(version, previous.version if previous is not None else None)
            except Exception:
                logger.exception("a version listener failed for v%s", version.version)

    def refresh(self, tenant: str | None = None) -> PromptVersion:
        """Read HEAD from the store now (what the worker does for stale tenants)."""
        return self._load_head(tenant, fallback=False)

    def _remember(self, tenant: str | None, version: PromptVersion) -> None:
        with self._lock:
            self._versions[(tenant, version.version)] = version
            while len(self._versions) > 64:
                self._versions.popitem(last=False)

    def _load_head(self, tenant: str | None, *, fallback: bool) -> PromptVersion:
        try:
            registry = self._registry_for(tenant)
            version = registry.head()
            canary = registry.canary()
        except Exception as exc:
            self.note_store(False)
            logger.warning("cannot refresh HEAD of tenant %r: %r", tenant, exc)
            now = self._clock()
            with self._lock:
                self.stats.refresh_errors += 1
                entry = self._heads.get(tenant)
                if entry is not None:
                    # Tried again one refresh interval from now, not on every pass.
                    entry.loaded_at = now
                    return entry.version
                if not fallback:
                    raise
            initial = self._initial(tenant)
            with self._lock:
                # Remembered: the hot path serves version 0 and does not read again.
                entry = self._heads.setdefault(tenant, _Entry(initial, now))
            return entry.version
        self.note_store(True)
        with self._lock:
            self._heads[tenant] = _Entry(version, self._clock())
            self._canaries[tenant] = canary
            self.stats.refreshes += 1
        self._remember(tenant, version)
        if canary is not None:
            self._remember(tenant, canary)
        return version

    # ---- capture ---------------------------------------------------------

    def capture(self, trace: Trace, *, hold_seconds: float = 0.0) -> None:
        """Buffer a trace for the queue (or write it now, in write-through mode).

        Never raises; a full buffer drops by policy. A trace over the size limits
        (``limits``) is cut down first and counted in ``stats.truncated``.
        A trace without feedback waits ``hold_seconds`` in the queue for late
        feedback before it is learned from.
        """
        self._admit(self._buffer.pending(trace.id, trace, hold_seconds=hold_seconds))

    def capture_later(
        self,
        trace_id: str,
        build: Callable[[], Trace],
        *,
        hold_seconds: float = 0.0,
        supersede: bool = False,
    ) -> None:
        """Buffer a run whose trace ``build()`` makes later, off the agent's hot path.

        The worker thread builds it when it flushes (feedback for ``trace_id`` that
        arrives first is kept and merged in then). A ``build`` that raises loses that
        one trace, logged and counted in ``stats.capture_errors``. In write-through
        mode it is built and written at once.

        ``supersede``: the run's failed trace was captured before (a model call
        that raised, then retried): this one takes its place, in the buffer if it
        is still there, else in the queue while it waits there (``TraceQueue.put``);
        the feedback given for the run is kept.
        """
        self._admit(
            self._buffer.pending(
                trace_id, None, build=build, hold_seconds=hold_seconds, supersede=supersede
            )
        )

    def _admit(self, pending: Pending) -> None:
        if self.retired:
            # A run that was in flight when its Combee closed the store: there is
            # nowhere to write it, and no worker must be started to retry forever.
            with self._lock:
                self.stats.dropped += 1
            logger.warning("run %s finished after close(); not captured", pending.trace_id)
            return
        through = self.capture_settings.durability == "write_through"
        if through and self.store_failing():
            with self._lock:
                self.stats.write_through_fallbacks += 1
            through = False
        entry = self._buffer.append(pending, sending=through)
        if entry is None:
            return
        if through and not entry.sending:
            # It supersedes a trace of its run another write holds: the worker's turn.
            with self._lock:
                self.stats.write_through_fallbacks += 1
            through = False
        if through:
            # In the buffer (so feedback finds it) and owned by this write.
            sent = self._buffer.send([entry])
            with self._lock:
                if sent is None:
                    self.stats.write_through_fallbacks += 1
                else:
                    self.stats.written_through += sent
        elif self._buffer.size() % FLUSH_CHUNK == 0 and not self.store_failing():
            # A full chunk is ready: no need to wait for the timer (but a failing
            # store is not hammered: the worker's timer paces the retries).
            self._wake.set()
        # Otherwise no wake-up: the worker flushes every ``flush_seconds``, so a
        # burst of runs costs one batch of queue writes, not one write per run.
        self._ensure_worker()

    def attach_feedback(self, trace_id: str, feedback: Feedback) -> bool:
        """Merge feedback into a trace not yet acknowledged by the queue; False if none.

        A trace being written keeps the feedback and sends it right after the
        write, so a run is findable here until the queue holds it.
        """
        return self._buffer.attach(trace_id, feedback)

    def defer_feedback(self, tenant: str | None, trace_id: str, feedback: Feedback) -> bool:
        """Keep feedback the store could not take; the worker retries it on every flush.

        Returns False when it cannot be kept: the server is retired (its store
        closed for good), so nothing would ever retry it (counted as dropped).
        """
        if self.retired:
            with self._lock:
                self.stats.feedback_dropped += 1
            return False
        self._buffer.defer(tenant, trace_id, feedback)
        self._ensure_worker()
        return True

    def buffered(self) -> int:
        """Traces captured and not yet written to the queue."""
        return len(self._buffer)

    def deferred_feedback(self) -> int:
        """Feedback waiting for the store to come back."""
        return self._buffer.deferred()

    def flush(self) -> int:
        """Write buffered traces and feedback to the queues; returns traces written."""
        return self._buffer.flush()

    def describe(self) -> dict[str, object]:
        """The counters, plus what is waiting in memory right now."""
        with self._lock:
            counters: dict[str, object] = dict(self.stats.as_dict())
        counters["buffered"] = self.buffered()
        counters["deferred_feedback"] = self.deferred_feedback()
        counters["store_failing"] = self.store_failing()
        return counters

    # ---- worker ----------------------------------------------------------

    def _ensure_worker(self) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive() and not self.retired:
            return  # every capture passes here: the common case takes no lock
        with self._lock:
            if self.retired or (self._thread is not None and self._thread.is_alive()):
                return
            self._stop.clear()
            self.closed = False
            # The thread holds the server weakly (``_serve``): a Combee dropped
            # without close() does not keep a thread reading its store forever.
            self._thread = threading.Thread(
                target=_serve,
                args=(weakref.ref(self), self._wake, self._stop),
                name="combee-serving",
                daemon=True,
            )
            self._thread.start()

    def has_pending(self) -> bool:
        """Whether traces or feedback wait in memory for the store."""
        return bool(self.buffered() or self.deferred_feedback())

    def _work_once(self) -> None:
        """One pass of the worker: flush the buffer, then refresh every stale HEAD."""
        if self._store_gone():
            self._give_up()
            return
        with contextlib.suppress(Exception):  # counted in the buffer; never kill the worker
            self.flush()
        now = self._clock()
        with self._lock:
            # Every cached tenant is refreshed once it is older than refresh_seconds,
            # served or not: an idle replica's first run after a quiet spell must
            # not get a version older than that either.
            aged = {
                tenant
                for tenant, entry in self._heads.items()
                if now - entry.loaded_at >= self.serving_settings.refresh_seconds
            }
            stale, self._stale = self._stale | aged, set()
        for tenant in stale:
            # Failures are counted in _load_head; the cache keeps being served.
            with contextlib.suppress(Exception):
                self.refresh(tenant)

    def _give_up(self) -> None:
        """Retire for good: the store can never answer again (see the class docstring)."""
        waiting = self.buffered()
        self.retired = True
        self.closed = True  # nothing for the exit hook to flush either
        self._stop.set()
        logger.warning(
            "the store's event loop is closed, so the store can never answer again: "
            "the serving thread stops, the cached HEAD keeps being served and %d "
            "buffered traces are lost (close the Combee before its store's loop ends)",
            waiting,
        )

    def close(self, *, flush: bool = True) -> None:
        """Stop the worker; flush what is buffered first (best effort)."""
        self.closed = True
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._thread = None
        if flush:
            self.flush()

    def retire(self) -> None:
        """Close for good (the store is about to be closed): later captures are dropped, counted."""
        self.retired = True
        self.close(flush=False)


def _version_key(version: PromptVersion) -> tuple[object, ...]:
    """What tells two versions' playbooks apart without reading them (see ``Server.rendered``)."""
    return (
        version.tenant,
        version.version,
        version.created_at,
        version.parent,
        len(version.playbook.bullets),
    )


def _serve(
    ref: weakref.ReferenceType[Server], wake: threading.Event, stop: threading.Event
) -> None:
    """The serving thread: a worker pass every ``flush_seconds`` (or when woken).

    It holds its server across a wait only while traces or feedback wait to be
    written, so a server nobody else holds is collected once they are out, and
    the thread ends.
    """
    while not stop.is_set():
        server = ref()
        if server is None:
            return
        seconds = server.flush_seconds
        held = server if server.has_pending() else None
        del server
        wake.wait(seconds)
        wake.clear()
        server = held or ref()
        held = None
        if server is None:
            return
        server._work_once()
        del server


def _flush_at_exit(ref: weakref.ReferenceType[Server]) -> None:
    server = ref()
    if server is None or server.closed:
        return
    if not server.buffered() and not server.deferred_feedback():
        return
    # On a thread of its own, so that a hanging store cannot hang the exit.
    thread = threading.Thread(target=server.flush, name="combee-exit-flush", daemon=True)
    thread.start()
    thread.join(EXIT_FLUSH_SECONDS)
