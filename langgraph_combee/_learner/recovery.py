"""What the background learner does after a failed step: back off, split the batch, park a trace.

Two policies, per tenant, kept by ``StepRecovery`` (the queue keeps the durable
part: each trace's attempt count and the dead letters):

* **Backoff.** A tenant whose step failed waits before its next step:
  ``backoff_seconds`` doubling with each failure in a row *for the same reason*
  (counts in the message aside), capped at ``max_backoff_seconds``, with up to
  ``backoff_jitter`` of random jitter so learners that failed together do not
  retry together (tenacity's wait strategies). A new reason starts over.
* **Bisection.** A batch that fails is retried once whole (most failures are
  transient), then split in halves, tried breadth-first before any new batch,
  to find the trace that makes it fail. A trace that fails alone is parked as a
  dead letter once a step has succeeded since the bisection began (the learner
  works, so the trace is the cause), or after ``max_trace_attempts`` failed
  steps when no other trace of its tenant waits (nothing to compare it with).
  Before that it is a *suspect*: kept out of new batches, tried alone again
  after the next success. So an outage parks nothing while other traces wait,
  and the good traces of a failing batch are learned in the halves that pass.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tenacity import RetryCallState, Retrying, wait_exponential, wait_random

from langgraph_combee._storage.keys import NO_TENANT

Verdict = Literal["retry", "split", "park", "suspect"]
"""What to do with a failed step's traces (see ``StepRecovery.judge``)."""

Part = tuple[tuple[str, ...], bool]
"""A part of a failing batch: its trace ids, and whether a failure splits it further."""


def backoff_delay(failures: int, *, base: float, cap: float, jitter: float) -> float:
    """Seconds to wait after ``failures`` failed steps in a row: exponential, capped, jittered."""
    wait = wait_exponential(multiplier=base, max=cap) + wait_random(
        0, base * jitter * 2 ** min(failures - 1, 30)
    )
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = failures
    return float(min(cap, wait(state)))


def failure_reason(exc: BaseException) -> str:
    """A failure's reason as shown and stored: its type and first line."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


def same_fault(a: str, b: str) -> bool:
    """Whether two reasons name one fault (counts and ids aside).

    A reason names what the learner LLM raised, and a provider's message often
    carries counts ("all 4 reflections", "try again in 6ms") or a request id
    ("req_8f3a..."): each word holding a digit is read as one placeholder.
    """
    return _unnumbered(a) == _unnumbered(b)


def _unnumbered(reason: str) -> str:
    return re.sub(r"[\w.-]*\d[\w.-]*", "#", reason)


@dataclass
class Backoff:
    """A tenant's failed steps in a row for one reason, and when it may try again."""

    failures: int
    reason: str
    retry_at: float


@dataclass
class Bisection:
    """A failing batch being split to find the trace that makes it fail.

    ``plan`` holds the parts still to try, breadth-first; ``steps_at_start`` is
    the learner's step count when the bisection began (a success since shows
    that the learner works); ``suspects`` failed alone before any such success.
    """

    plan: deque[Part]
    steps_at_start: int
    suspects: list[str] = field(default_factory=list)


def _label(tenant: str | None) -> str:
    return NO_TENANT if tenant is None else tenant


class StepRecovery:
    """Per tenant: the backoff after failed steps and the bisection of a failing batch.

    Args:
        delay: Seconds to wait after n failed steps in a row for one reason.
        max_trace_attempts: Failed steps after which a lone trace is parked.
    """

    def __init__(self, *, delay: Callable[[int], float], max_trace_attempts: int) -> None:
        self._delay = delay
        self._max_attempts = max_trace_attempts
        self.backoff: dict[str | None, Backoff] = {}
        self.bisect: dict[str | None, Bisection] = {}

    def waiting(self, tenant: str | None, now: float) -> bool:
        """Whether the tenant is still backing off at ``now``."""
        backoff = self.backoff.get(tenant)
        return backoff is not None and now < backoff.retry_at

    def suspects(self, tenant: str | None) -> list[str]:
        """Traces that failed alone and wait for a verdict: not to go into new batches."""
        bisection = self.bisect.get(tenant)
        return [] if bisection is None else list(bisection.suspects)

    def next_part(self, tenant: str | None, *, ready: int, steps: int) -> Part | None:
        """The next part of a failing batch to try, before any new batch; None: no more.

        Args:
            tenant: Whose bisection.
            ready: The tenant's ready traces (suspects included).
            steps: The learner's successful steps so far.
        """
        bisection = self.bisect.get(tenant)
        if bisection is None:
            return None
        plan, suspects = bisection.plan, bisection.suspects
        evidence = steps > bisection.steps_at_start or ready <= len(suspects)
        if not plan and suspects and evidence:
            # The learner works (or nothing else waits): try each suspect alone again.
            plan.extend(((t,), True) for t in suspects)
            suspects.clear()
        if plan:
            return plan.popleft()
        if not suspects:
            del self.bisect[tenant]
        return None

    def put_back(self, tenant: str | None, part: Part) -> None:
        """Return a part that could not be tried (budget, lease), to be tried first next time."""
        bisection = self.bisect.get(tenant)
        if bisection is not None:  # it outlives its last part until the next pass
            bisection.plan.appendleft(part)

    def failed(self, tenant: str | None, reason: str, now: float) -> tuple[int, float]:
        """Count a failed step; return the failures in a row for its reason and the delay."""
        previous = self.backoff.get(tenant)
        same = previous is not None and same_fault(previous.reason, reason)
        failures = previous.failures + 1 if previous is not None and same else 1
        delay = self._delay(failures)
        self.backoff[tenant] = Backoff(failures, reason, now + delay)
        return failures, delay

    def succeeded(self, tenant: str | None) -> None:
        """A step succeeded: the tenant's backoff ends."""
        self.backoff.pop(tenant, None)

    def judge(
        self,
        tenant: str | None,
        ids: list[str],
        attempts: dict[str, int],
        *,
        split: bool,
        steps: int,
        others: int,
    ) -> Verdict:
        """Decide what a failed step's traces (``ids``, already released) become.

        Args:
            tenant: Whose batch.
            ids: The failed step's traces.
            attempts: Their attempt counts, this failure included.
            split: Whether the batch was a part already retried (a failure splits it).
            steps: The learner's successful steps so far.
            others: Other traces of the tenant ready to learn.

        Returns:
            ``"retry"`` (whole, once more) or ``"split"`` for a batch, planned
            here; ``"park"`` or ``"suspect"`` for a trace that failed alone.
        """
        bisection = self.bisect.setdefault(tenant, Bisection(plan=deque(), steps_at_start=steps))
        if len(ids) > 1:
            if not split:
                bisection.plan.append((tuple(ids), True))
                return "retry"
            half = len(ids) // 2
            bisection.plan.extend([(tuple(ids[:half]), True), (tuple(ids[half:]), True)])
            return "split"
        (trace_id,) = ids
        works = steps > bisection.steps_at_start
        # Nothing else to compare with: a lone trace is parked after enough tries.
        alone = others <= 0 and not bisection.plan
        if works or (attempts.get(trace_id, 0) >= self._max_attempts and alone):
            return "park"
        if trace_id not in bisection.suspects:
            bisection.suspects.append(trace_id)
        return "suspect"

    def describe(self, now: float) -> dict[str, Any]:
        """``backoff``, and ``bisecting``: per tenant, parts still to try plus suspects."""
        return {
            "backoff": {
                _label(tenant): {
                    "failures": b.failures,
                    "reason": b.reason,
                    "retry_in_seconds": round(max(0.0, b.retry_at - now), 3),
                }
                for tenant, b in self.backoff.items()
            },
            "bisecting": {
                _label(tenant): len(b.plan) + len(b.suspects)
                for tenant, b in self.bisect.items()
                if b.plan or b.suspects
            },
        }
