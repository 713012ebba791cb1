"""The agent-side half of Combee: a cached HEAD per tenant and a bounded capture buffer.

The agent's hot path only touches memory here. A daemon worker thread refreshes
every cached HEAD older than ``refresh_seconds`` from the store (waking every
``flush_seconds``) and flushes captured traces into the durable queue, so several
processes sharing one store converge within ``refresh_seconds + flush_seconds``
plus one store read. If the store is down, the last cached version keeps being
served and captured traces wait in the buffer (bounded; the drop policy decides
what goes).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from langgraph_combee._core.types import PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._runtime.limits import TraceLimits, clip_trace
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee._storage.registry import PromptRegistry

logger = logging.getLogger("langgraph_combee.serving")

DropPolicy = Literal["drop_oldest", "drop_newest"]

# Most buffered traces written to the queue in one go (a few store calls each).
FLUSH_CHUNK = 100


@dataclass
class ServingStats:
    """Counters of the agent-side machinery, for monitoring."""

    captured: int = 0
    dropped: int = 0
    flushed: int = 0
    duplicates: int = 0
    flush_errors: int = 0
    refreshes: int = 0
    refresh_errors: int = 0
    feedback_unknown: int = 0
    truncated: int = 0
    capture_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return dict(self.__dict__)


@dataclass
class _Entry:
    version: PromptVersion
    loaded_at: float


@dataclass
class _Pending:
    """A captured run waiting for the queue: a trace, or the recipe to build it later."""

    trace_id: str
    trace: Trace | None
    hold_until: float | None
    build: Callable[[], Trace] | None = None
    hold_seconds: float = 0.0
    captured_at: float = 0.0


@dataclass
class ServingSettings:
    """How the agent side caches and captures."""

    refresh_seconds: float = 5.0
    capture_limit: int = 10_000
    drop_policy: DropPolicy = "drop_oldest"
    flush_seconds: float = 0.5
    limits: TraceLimits = field(default_factory=TraceLimits)

    def __post_init__(self) -> None:
        if self.refresh_seconds <= 0:
            raise ConfigurationError("refresh_seconds", self.refresh_seconds, "a number > 0")
        if self.capture_limit < 1:
            raise ConfigurationError("capture_limit", self.capture_limit, "an int >= 1")
        if self.drop_policy not in ("drop_oldest", "drop_newest"):
            raise ConfigurationError(
                "drop_policy", self.drop_policy, "'drop_oldest' or 'drop_newest'"
            )
        if self.flush_seconds <= 0:
            raise ConfigurationError("flush_seconds", self.flush_seconds, "a number > 0")


class Server:
    """Caches HEAD per tenant and buffers captured traces for the durable queue."""

    def __init__(
        self,
        *,
        registry_for: Callable[[str | None], PromptRegistry],
        queue_for: Callable[[str | None], TraceQueue],
        settings: ServingSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry_for = registry_for
        self._queue_for = queue_for
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        # Held while a chunk is out of the buffer and not yet in the queue, so that
        # feedback arriving then can wait for the write (``settled``).
        self._writing = threading.RLock()
        self._heads: dict[str | None, _Entry] = {}
        self._canaries: dict[str | None, PromptVersion | None] = {}
        self._versions: collections.OrderedDict[tuple[str | None, int], PromptVersion] = (
            collections.OrderedDict()
        )
        self._buffer: collections.deque[_Pending] = collections.deque()
        self._rendered: collections.OrderedDict[tuple[object, ...], str] = collections.OrderedDict()
        self._stale: set[str | None] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = ServingStats()
        self.listeners: list[Callable[[PromptVersion, PromptVersion | None], None]] = []

    # ---- prompts ---------------------------------------------------------

    def head(self, tenant: str | None) -> PromptVersion:
        """The cached HEAD of a tenant; loaded once, then refreshed in the background."""
        now = self._clock()
        with self._lock:
            entry = self._heads.get(tenant)
            if entry is not None:
                if now - entry.loaded_at >= self.settings.refresh_seconds:
                    self._stale.add(tenant)
                    self._wake.set()
                return entry.version
        self._ensure_worker()
        # First use of this tenant in this process: one read, then never again here.
        return self._load_head(tenant, fallback=True)

    def rendered(self, version: PromptVersion) -> str:
        """``version.render()``, cached: the hot path renders each served version once.

        Versions are never changed once written (learning makes new ones), so the
        key is the version's identity: tenant, number, creation time and size.
        """
        key = (version.tenant, version.version, version.created_at, len(version.playbook.bullets))
        with self._lock:
            text = self._rendered.get(key)
        if text is None:
            text = version.render()
            with self._lock:
                self._rendered[key] = text
                while len(self._rendered) > 64:
                    self._rendered.popitem(last=False)
        return text

    def has_head(self, tenant: str | None) -> bool:
        """Whether ``head(tenant)`` is served from memory (no store read)."""
        with self._lock:
            return tenant in self._heads

    def version(self, tenant: str | None, number: int) -> PromptVersion:
        """A version by number (a pinned run's), from memory when possible."""
        with self._lock:
            entry = self._heads.get(tenant)
            if entry is not None and entry.version.version == number:
                return entry.version
            cached = self._versions.get((tenant, number))
            if cached is not None:
                return cached
        try:
            found = self._registry_for(tenant).get(number)
        except Exception:  # a dead store must not break a run: serve HEAD instead
            logger.warning("cannot read version %s of tenant %r; serving HEAD", number, tenant)
            return self.head(tenant)
        self._remember(tenant, found)
        return found

    def canary(self, tenant: str | None) -> PromptVersion | None:
        """The cached canary candidate of a tenant (refreshed with HEAD), if any."""
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
            self.stats.refresh_errors += 1
            logger.warning("cannot refresh HEAD of tenant %r: %r", tenant, exc)
            with self._lock:
                entry = self._heads.get(tenant)
                if entry is not None:
                    return entry.version
            if not fallback:
                raise
            return PromptVersion(prompt_id=self._registry_for(tenant).prompt_id, tenant=tenant)
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
        """Buffer a trace for the queue. Never raises; a full buffer drops by policy.

        A trace over the size limits (``settings.limits``) is cut down first and
        counted in ``stats.truncated``. A trace without feedback waits
        ``hold_seconds`` in the queue for late feedback before it is learned from.
        """
        trace = self._clipped(trace)
        hold = time.time() + hold_seconds if hold_seconds > 0 and trace.feedback is None else None
        self._append(_Pending(trace.id, trace, hold))

    def capture_later(
        self, trace_id: str, build: Callable[[], Trace], *, hold_seconds: float = 0.0
    ) -> None:
        """Buffer a run whose trace ``build()`` makes later, off the agent's hot path.

        The worker thread builds it when it flushes (or ``attach_feedback`` does, when
        feedback for ``trace_id`` arrives first). A ``build`` that raises loses that
        one trace, logged and counted in ``stats.capture_errors``.
        """
        self._append(
            _Pending(
                trace_id,
                None,
                None,
                build=build,
                hold_seconds=hold_seconds,
                captured_at=time.time(),
            )
        )

    def _append(self, pending: _Pending) -> None:
        with self._lock:
            if len(self._buffer) >= self.settings.capture_limit:
                self.stats.dropped += 1
                if self.settings.drop_policy == "drop_newest":
                    return
                self._buffer.popleft()
            self._buffer.append(pending)
            self.stats.captured += 1
        # No wake-up here: the worker flushes every ``flush_seconds``, so a burst of
        # runs costs one batch of queue writes, not one write per run.
        self._ensure_worker()

    def _clipped(self, trace: Trace) -> Trace:
        clipped = clip_trace(trace, self.settings.limits)
        if clipped is trace:
            return trace
        with self._lock:
            self.stats.truncated += 1
        return clipped

    def _built(self, pending: _Pending) -> bool:
        """Give ``pending`` its trace (building it if deferred); False if the build failed."""
        if pending.trace is not None:
            return True
        build, pending.build = pending.build, None
        try:
            assert build is not None
            trace = self._clipped(build())
        except Exception:
            logger.exception(
                "cannot build the trace of run %s; it is not captured", pending.trace_id
            )
            with self._lock:
                self.stats.capture_errors += 1
            return False
        pending.trace = trace
        if pending.hold_seconds > 0 and trace.feedback is None:
            pending.hold_until = pending.captured_at + pending.hold_seconds
        return True

    def attach_feedback(self, trace_id: str, apply: Callable[[Trace], Trace]) -> bool:
        """Update a trace still in the buffer; False if it already left for the store."""
        with self._lock:
            for pending in self._buffer:
                if pending.trace_id == trace_id and self._built(pending):
                    assert pending.trace is not None
                    pending.trace = apply(pending.trace)
                    return True
        return False

    def settled(self) -> None:
        """Wait until no captured trace is between the buffer and the queue."""
        with self._writing:
            pass

    def buffered(self) -> int:
        """Traces captured and not yet written to the queue."""
        with self._lock:
            return len(self._buffer)

    def flush(self) -> int:
        """Write buffered traces to their tenants' queues; returns how many were written.

        Traces go in chunks of ``FLUSH_CHUNK``, a few store calls per chunk. A chunk
        that cannot be written (store down) goes back to the front of the buffer,
        and flushing stops until the next attempt.
        """
        written = 0
        while True:
            with self._writing:
                with self._lock:
                    if not self._buffer:
                        return written
                    size = min(FLUSH_CHUNK, len(self._buffer))
                    chunk = [self._buffer.popleft() for _ in range(size)]
                chunk = [pending for pending in chunk if self._built(pending)]
                try:
                    fresh = self._write(chunk)
                except Exception as exc:
                    with self._lock:
                        self._buffer.extendleft(reversed(chunk))
                        self.stats.flush_errors += 1
                    logger.warning("cannot write traces to the queue (will retry): %r", exc)
                    return written
            written += len(chunk)
            with self._lock:
                self.stats.flushed += sum(fresh)
                self.stats.duplicates += len(fresh) - sum(fresh)

    def _write(self, chunk: list[_Pending]) -> list[bool]:
        by_tenant: dict[str | None, list[tuple[Trace, float | None]]] = {}
        for pending in chunk:
            assert pending.trace is not None  # built by flush
            by_tenant.setdefault(pending.trace.tenant, []).append(
                (pending.trace, pending.hold_until)
            )
        fresh: list[bool] = []
        for tenant, items in by_tenant.items():
            fresh += self._queue_for(tenant).put_many(
                [trace for trace, _ in items], hold_until=[hold for _, hold in items]
            )
        return fresh

    # ---- worker ----------------------------------------------------------

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._work, name="combee-serving", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.settings.flush_seconds)
            self._wake.clear()
            self.flush()
            now = self._clock()
            with self._lock:
                # Every cached tenant is refreshed once it is older than refresh_seconds,
                # served or not: an idle replica's first run after a quiet spell must
                # not get a version older than that either.
                aged = {
                    tenant
                    for tenant, entry in self._heads.items()
                    if now - entry.loaded_at >= self.settings.refresh_seconds
                }
                stale, self._stale = self._stale | aged, set()
            for tenant in stale:
                # Failures are counted in _load_head; the cache keeps being served.
                with contextlib.suppress(Exception):
                    self.refresh(tenant)

    def close(self, *, flush: bool = True) -> None:
        """Stop the worker; flush what is buffered first (best effort)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._thread = None
        if flush:
            self.flush()
