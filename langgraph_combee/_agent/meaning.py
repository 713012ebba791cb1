"""The focus by meaning on the agent's hot path, bounded in time.

``ServingSettings.focus_embedder`` serves a request that names no rule's words
the rule closest to it in meaning (``_core.nearest``). The embedder is the
user's code on the model call's path, so it is never waited on for long: each
call runs in a daemon thread and the model call waits at most
``EMBED_SECONDS`` for it. Past that, or when it fails, the request is served
the words-only focus, the failure is counted, and for ``COOL_DOWN_SECONDS``
no request waits on the embedder at all (a hung embedder costs one wait per
cool-down, not one per run). A version's cases are embedded once, in the
background from the first request that needs them; a request that comes
before they are ready waits for them within the same bound.
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

__all__ = ["COOL_DOWN_SECONDS", "EMBED_SECONDS", "Meaning"]

EMBED_SECONDS = 2.0
"""Longest a model call waits for the focus embedder (a version's cases or one request)."""
COOL_DOWN_SECONDS = 30.0
"""How long the embedder is left alone after it failed or was too slow."""
_CACHED_VERSIONS = 64


class Meaning:
    """The closest rule by meaning for each served version, never holding a model call long.

    ``failed(exc)`` is told each failure (an error, a timeout); ``served()``
    each request that was served a rule by meaning. Both are called outside
    any lock of this object.
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
        self._cases: collections.OrderedDict[Any, concurrent.futures.Future[NearestRules]] = (
            collections.OrderedDict()
        )
        self._reported: set[Any] = set()  # versions whose failed cases were counted
        self._resting_until = float("-inf")

    def _rest(self, exc: BaseException) -> None:
        with self._lock:
            self._resting_until = self._clock() + self._cool_down
        self._failed(exc)

    def closest_for(self, key: Any, index: RuleIndex) -> Callable[[str], list[Rule]] | None:
        """``closest(text)`` for the version cached as ``key``, or None (nothing to serve now)."""
        with self._lock:
            if self._clock() < self._resting_until:
                return None
            future = self._cases.get(key)
            if future is None:
                embedder = self._embedder
                future = self._cases[key] = in_thread(lambda: NearestRules(index, embedder))
                while len(self._cases) > _CACHED_VERSIONS:
                    old, _ = self._cases.popitem(last=False)
                    self._reported.discard(old)
        try:
            nearest = future.result(timeout=self._seconds)
        except concurrent.futures.TimeoutError:
            self._rest(TimeoutError(f"the rules' cases took over {self._seconds} s to embed"))
            return None
        except Exception as exc:
            with self._lock:
                first = key not in self._reported
                self._reported.add(key)
            if first:  # counted once per version: later requests just serve by words
                self._failed(exc)
            return None
        if not nearest:
            return None

        def closest(text: str) -> list[Rule]:
            call = in_thread(lambda: nearest.closest(text))
            try:
                found = call.result(timeout=self._seconds)
            except concurrent.futures.TimeoutError:
                self._rest(TimeoutError(f"a request took over {self._seconds} s to embed"))
                return []
            except Exception as exc:
                self._rest(exc)
                return []
            if found:
                self._served()
            return found

        return closest
