"""The focus by meaning on the agent's hot path, bounded in time and in threads.

``ServingSettings.focus_embedder`` serves a request that names no rule's words
the rule closest to it in meaning (``_core.nearest``). The embedder is the
user's code on the model call's path, so it is never waited on for long:

- each call runs in a daemon thread (``nearest.in_thread``), and the model
  call waits at most ``EMBED_SECONDS`` for it;
- at most ``MAX_IN_FLIGHT`` request embeddings run at once; a request that
  finds them all busy is served by words at once, without a new thread (a
  hung embedder strands at most that many threads);
- past the wait, the embedder is left alone for ``COOL_DOWN_SECONDS`` (a
  hung embedder costs one wait per cool-down, not one per run); a version's
  cases are waited for once, at most ``MAX_BUILDS`` versions' at a time;
- cases that fail to embed cost their own version only: it is served by
  words and its cases are tried again after the cool-down;
- a request the embedder refuses (it raised at once) is served by words and
  counted, and costs no other request anything.

A version's cases are embedded once, in the background from the first request
that needs them; a request that comes before they are ready waits for them
within the same bound, so a request waits at most twice ``EMBED_SECONDS``
(its version's cases, once, then its own embedding). The caller serves the
words-only focus whenever this module gives nothing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.nearest import NearestRules, in_thread
from langgraph_combee._core.situations import Rule, RuleIndex

__all__ = ["COOL_DOWN_SECONDS", "EMBED_SECONDS", "MAX_IN_FLIGHT", "Meaning"]

T = TypeVar("T")

EMBED_SECONDS = 2.0
"""Longest a model call waits for the focus embedder (a version's cases or one request)."""
COOL_DOWN_SECONDS = 30.0
"""How long the embedder is left alone after it was too slow or its cases failed."""
MAX_IN_FLIGHT = 4
"""Most request embeddings running at once."""
MAX_BUILDS = 2
"""Most versions whose cases are being embedded at once."""
_CACHED_VERSIONS = 16


class Meaning:
    """The closest rule by meaning for each served version, never holding a model call long.

    ``failed(exc)`` is told each failure (an error, a timeout); ``served()``
    each request that was served a rule by meaning; ``skipped()`` each request
    not looked up because the embedder was busy or resting (served by its
    words). All are called outside this object's lock.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        clock: Callable[[], float],
        failed: Callable[[BaseException], None],
        served: Callable[[], None],
        skipped: Callable[[], None] = lambda: None,
        seconds: float | None = None,
        cool_down: float | None = None,
    ) -> None:
        self._embedder = embedder
        self._clock = clock
        self._failed = failed
        self._served = served
        self._skipped = skipped
        self._seconds = EMBED_SECONDS if seconds is None else seconds
        self._cool_down = COOL_DOWN_SECONDS if cool_down is None else cool_down
        self._lock = threading.RLock()  # the done-callback may run under it (a build already done)
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        # A version's embedded cases: its rules' (``NearestRules``) or its worked
        # examples' (``_agent.turns.NearestShots``), under keys of their own.
        self._cases: collections.OrderedDict[Any, concurrent.futures.Future[Any]] = (
            collections.OrderedDict()
        )
        self._resting_until = float("-inf")
        self._building = 0  # versions whose cases are being embedded
        self._waited: set[Any] = set()  # versions whose cases outlived one wait
        self._retry_at: dict[Any, float] = {}  # versions whose cases failed: when to retry

    def _rest(self, exc: BaseException) -> None:
        with self._lock:
            self._resting_until = self._clock() + self._cool_down
        self._failed(exc)

    def _resting(self) -> bool:
        with self._lock:
            return self._clock() < self._resting_until

    def _nearest(self, key: Any, build: Callable[[], Any]) -> Any:
        now = self._clock()
        with self._lock:
            busy = False
            future = self._cases.get(key)
            if now < self._retry_at.get(key, float("-inf")):
                busy = True  # its cases failed: tried again after a cool-down of its own
            elif future is None:
                if self._building >= MAX_BUILDS:
                    busy = True  # other versions' cases are being embedded
                else:
                    self._building += 1
                    future = self._cases[key] = in_thread(build)
                    future.add_done_callback(self._built)
                    self._evict()
            elif not future.done() and key in self._waited:
                busy = True  # waited for once already: never again while it runs
        if busy or future is None:
            self._skipped()
            return None
        try:
            return future.result(timeout=self._seconds)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._waited.add(key)
            self._rest(TimeoutError(f"the rules' cases took over {self._seconds} s to embed"))
        except Exception as exc:
            with self._lock:  # this version only; tried again after the cool-down
                if self._cases.get(key) is future:
                    del self._cases[key]
                self._retry_at[key] = self._clock() + self._cool_down
            self._failed(exc)
        return None

    def _built(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._building -= 1

    def _evict(self) -> None:
        """Keep ``_CACHED_VERSIONS`` versions' cases, never one still being embedded."""
        done = [key for key, future in self._cases.items() if future.done()]
        for key in done[: max(0, len(self._cases) - _CACHED_VERSIONS)]:
            del self._cases[key]
            self._waited.discard(key)
        while len(self._retry_at) > 4 * _CACHED_VERSIONS:
            self._retry_at.pop(next(iter(self._retry_at)))

    def closest(self, key: Any, index: RuleIndex, text: str) -> list[Rule]:
        """The rules of the version cached as ``key`` closest to ``text`` ([] when none or busy)."""
        embedder = self._embedder
        found: list[Rule] = self.lookup(
            key, lambda: NearestRules(index, embedder), lambda nearest: nearest.closest(text)
        )
        if found:
            self._served()
        return found

    def lookup(self, key: Any, build: Callable[[], Any], ask: Callable[[Any], list[T]]) -> list[T]:
        """``ask(cases)`` for the cases ``build()`` embeds once under ``key``; [] when busy.

        ``build`` runs once per key (in the background, waited for within the
        bound); ``ask`` embeds the request. Both are bounded and counted as in
        ``closest``; nothing here raises.
        """
        if self._resting():
            self._skipped()
            return []
        nearest = self._nearest(key, build)
        if not nearest:
            return []
        if not self._slots.acquire(blocking=False):
            self._skipped()
            return []

        def embed() -> list[T]:
            try:
                return ask(nearest)
            finally:
                self._slots.release()

        try:
            call = in_thread(embed)
        except Exception as exc:  # no thread to run it: its slot is given back here
            self._slots.release()
            self._failed(exc)
            return []
        try:
            found = call.result(timeout=self._seconds)
        except concurrent.futures.TimeoutError:
            self._rest(TimeoutError(f"a request took over {self._seconds} s to embed"))
            return []
        except Exception as exc:  # this request only: the embedder answered
            self._failed(exc)
            return []
        return found
