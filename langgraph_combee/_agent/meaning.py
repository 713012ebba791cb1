"""The focus by meaning on the agent's hot path, bounded in time and in threads.

``ServingSettings.focus_embedder`` serves a request that names no rule's words
the rule closest to it in meaning (``_core.nearest``). The embedder is the
user's code on the model call's path, so it is never waited on for long:

- each call runs in a daemon thread (``nearest.in_thread``), and the model
  call waits at most ``EMBED_SECONDS`` for it;
- at most ``MAX_IN_FLIGHT`` request embeddings run at once; a request that
  finds them all busy is served by words at once, without a new thread (a
  hung embedder strands at most that many threads);
- past the wait, or when a version's cases fail to embed, the embedder is
  left alone for ``COOL_DOWN_SECONDS`` (a hung embedder costs one wait per
  cool-down, not one per run), and the failed cases are tried again after it;
- a request the embedder refuses (it raised at once) is served by words and
  counted, and costs no other request anything.

A version's cases are embedded once, in the background from the first request
that needs them; a request that comes before they are ready waits for them
within the same bound. The caller serves the words-only focus whenever this
module gives nothing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.nearest import NearestRules, in_thread
from langgraph_combee._core.situations import Rule, RuleIndex

__all__ = ["COOL_DOWN_SECONDS", "EMBED_SECONDS", "MAX_IN_FLIGHT", "Meaning"]

EMBED_SECONDS = 2.0
"""Longest a model call waits for the focus embedder (a version's cases or one request)."""
COOL_DOWN_SECONDS = 30.0
"""How long the embedder is left alone after it was too slow or its cases failed."""
MAX_IN_FLIGHT = 4
"""Most request embeddings running at once."""
_CACHED_VERSIONS = 64


class Meaning:
    """The closest rule by meaning for each served version, never holding a model call long.

    ``failed(exc)`` is told each failure (an error, a timeout); ``served()``
    each request that was served a rule by meaning. Both are called outside
    this object's lock.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        clock: Callable[[], float],
        failed: Callable[[BaseException], None],
        served: Callable[[], None],
        seconds: float | None = None,
        cool_down: float | None = None,
    ) -> None:
        self._embedder = embedder
        self._clock = clock
        self._failed = failed
        self._served = served
        self._seconds = EMBED_SECONDS if seconds is None else seconds
        self._cool_down = COOL_DOWN_SECONDS if cool_down is None else cool_down
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._cases: collections.OrderedDict[Any, concurrent.futures.Future[NearestRules]] = (
            collections.OrderedDict()
        )
        self._resting_until = float("-inf")

    def _rest(self, exc: BaseException) -> None:
        with self._lock:
            self._resting_until = self._clock() + self._cool_down
        self._failed(exc)

    def _resting(self) -> bool:
        with self._lock:
            return self._clock() < self._resting_until

    def _nearest(self, key: Any, index: RuleIndex) -> NearestRules | None:
        with self._lock:
            future = self._cases.get(key)
            if future is None:
                embedder = self._embedder
                future = self._cases[key] = in_thread(lambda: NearestRules(index, embedder))
                while len(self._cases) > _CACHED_VERSIONS:
                    self._cases.popitem(last=False)
        try:
            return future.result(timeout=self._seconds)
        except concurrent.futures.TimeoutError:
            self._rest(TimeoutError(f"the rules' cases took over {self._seconds} s to embed"))
        except Exception as exc:
            with self._lock:  # tried again once the cool-down is over
                if self._cases.get(key) is future:
                    del self._cases[key]
            self._rest(exc)
        return None

    def closest(self, key: Any, index: RuleIndex, text: str) -> list[Rule]:
        """The rules of the version cached as ``key`` closest to ``text`` ([] when none or busy)."""
        if self._resting():
            return []
        nearest = self._nearest(key, index)
        if not nearest or not self._slots.acquire(blocking=False):
            return []

        def embed() -> list[Rule]:
            try:
                return nearest.closest(text)
            finally:
                self._slots.release()

        try:
            found = in_thread(embed).result(timeout=self._seconds)
        except concurrent.futures.TimeoutError:
            self._rest(TimeoutError(f"a request took over {self._seconds} s to embed"))
            return []
        except Exception as exc:  # this request only: the embedder answered
            self._failed(exc)
            return []
        if found:
            self._served()
        return found
