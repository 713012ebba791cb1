"""A cap on the learner's LLM calls and tokens over a sliding window (an hour by default).

``LearnerBudget`` is the meter and the limit in one object: the LLM caller asks
it for room before every call attempt (``acquire_call``) and tells it the tokens
each reply cost (``charge_tokens``). When the window is spent, ``acquire_call``
raises ``BudgetExceededError``; the background learner checks ``available()``
before it claims a batch, so it waits instead of starting steps that cannot
finish, and its traces stay queued.

Limits, precisely:

* calls: an attempt is charged when it starts (retries and repair requests
  count), under a lock, so the number of calls in any window never exceeds
  ``calls_per_hour``;
* tokens: a reply's tokens are only known when it arrives, so calls already in
  flight when the limit is reached still finish and are charged: the token
  count can overshoot by at most the replies of ``max_concurrency`` calls.

The window slides: a charge stops counting ``window_seconds`` after it was made.
The learner side holds no store state here; a budget is per process (share one
object between several ``Combee`` instances to cap them together).
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from langgraph_combee._errors import BudgetExceededError, ConfigurationError

__all__ = ["LearnerBudget"]


def _limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(name, value, "None or an int >= 1")
    return value


class LearnerBudget:
    """A cap on learner LLM calls and tokens per hour (a sliding window).

    Example::

        budget = LearnerBudget(calls_per_hour=600, tokens_per_hour=2_000_000)
        combee = Combee(
            prompt_id="support-agent",
            model=learner_model,
            learner=LearnerSettings(budget=budget),
        )
        budget.snapshot()  # {"calls": 0, "calls_per_hour": 600, ...}

    Args:
        calls_per_hour: Most learner call attempts per window; None: no cap.
        tokens_per_hour: Most learner tokens (input + output) per window; None: no cap.
        window_seconds: Length of the sliding window (default one hour).
        clock: Returns the current time in seconds; injectable so tests can move
            time without sleeping.

    Raises:
        ConfigurationError: When a limit is not None or a positive int, or the
            window is not a positive finite number.
    """

    def __init__(
        self,
        *,
        calls_per_hour: int | None = None,
        tokens_per_hour: int | None = None,
        window_seconds: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.calls_per_hour = _limit("calls_per_hour", calls_per_hour)
        self.tokens_per_hour = _limit("tokens_per_hour", tokens_per_hour)
        if (
            isinstance(window_seconds, bool)
            or not isinstance(window_seconds, (int, float))
            or not math.isfinite(window_seconds)
            or window_seconds <= 0
        ):
            raise ConfigurationError("window_seconds", window_seconds, "a finite number > 0")
        if not callable(clock):
            raise ConfigurationError("clock", clock, "a callable returning seconds")
        self.window_seconds = float(window_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._calls: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int]] = collections.deque()
        self._token_sum = 0
        self.refused = 0

    def __repr__(self) -> str:
        return (
            f"LearnerBudget(calls_per_hour={self.calls_per_hour!r}, "
            f"tokens_per_hour={self.tokens_per_hour!r}, window_seconds={self.window_seconds})"
        )

    # ---- metering (called by the learner's LLM caller) ----------------------

    def acquire_call(self) -> None:
        """Charge one call attempt, or raise when the window has no room.

        Raises:
            BudgetExceededError: The call or token budget of the window is spent.
        """
        with self._lock:
            now = self._clock()
            self._expire(now)
            spent = self._spent()
            if spent is not None:
                self.refused += 1
                raise BudgetExceededError(*spent)
            self._calls.append(now)

    def check(self) -> None:
        """Raise when no call may start now (charges nothing).

        Raises:
            BudgetExceededError: The call or token budget of the window is spent.
        """
        with self._lock:
            self._expire(self._clock())
            spent = self._spent()
            if spent is not None:
                raise BudgetExceededError(*spent)

    def charge_tokens(self, tokens: int) -> None:
        """Charge the tokens a finished call cost (input + output)."""
        if tokens <= 0:
            return
        with self._lock:
            self._tokens.append((self._clock(), int(tokens)))
            self._token_sum += int(tokens)

    # ---- reading ------------------------------------------------------------

    def available(self) -> bool:
        """True when a call may start now."""
        with self._lock:
            self._expire(self._clock())
            return self._spent() is None

    def seconds_until_available(self) -> float:
        """How long until a call may start (0.0 when one may start now)."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            waits = [0.0]
            if self.calls_per_hour is not None and len(self._calls) >= self.calls_per_hour:
                # The call that must age out for the count to drop below the cap.
                oldest = self._calls[len(self._calls) - self.calls_per_hour]
                waits.append(oldest + self.window_seconds - now)
            if self.tokens_per_hour is not None and self._token_sum >= self.tokens_per_hour:
                excess = self._token_sum - self.tokens_per_hour
                for at, tokens in self._tokens:
                    excess -= tokens
                    if excess < 0:
                        waits.append(at + self.window_seconds - now)
                        break
            return max(0.0, max(waits))

    def snapshot(self) -> dict[str, Any]:
        """Usage in the current window, the limits, and how long until room frees up."""
        wait = self.seconds_until_available()
        with self._lock:
            return {
                "calls": len(self._calls),
                "calls_per_hour": self.calls_per_hour,
                "tokens": self._token_sum,
                "tokens_per_hour": self.tokens_per_hour,
                "window_seconds": self.window_seconds,
                "exhausted": wait > 0,
                "resumes_in_seconds": round(wait, 3),
                "refused_calls": self.refused,
            }

    # ---- internals (under the lock) --------------------------------------------

    def _expire(self, now: float) -> None:
        horizon = now - self.window_seconds
        while self._calls and self._calls[0] <= horizon:
            self._calls.popleft()
        while self._tokens and self._tokens[0][0] <= horizon:
            self._token_sum -= self._tokens.popleft()[1]

    def _spent(self) -> tuple[str, int, int] | None:
        if self.calls_per_hour is not None and len(self._calls) >= self.calls_per_hour:
            return "call", len(self._calls), self.calls_per_hour
        if self.tokens_per_hour is not None and self._token_sum >= self.tokens_per_hour:
            return "token", self._token_sum, self.tokens_per_hour
        return None
