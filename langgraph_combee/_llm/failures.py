"""Which traces' reflection calls failed in a step, and why (read by the engine).

The strategies turn a reflection call that fails after its retries into "no
reflection" and go on with the others; the step then succeeds without having
learned from that trace. The role profiles note each such failure here, so the
engine can list the traces in the step's report (the background learner queues
them again) and name the real cause when every reflection failed.

The record lives in a context variable set around one step: the step's tasks
(``asyncio.gather``) share it, and two steps on two threads or loops never mix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from langgraph_combee._errors import LLMCallError

_FAILED: ContextVar[dict[str, LLMCallError] | None] = ContextVar(
    "combee_failed_reflections", default=None
)


@contextlib.contextmanager
def watch() -> Iterator[dict[str, LLMCallError]]:
    """Collect, for the steps run inside, each trace whose reflection call failed."""
    failed: dict[str, LLMCallError] = {}
    token = _FAILED.set(failed)
    try:
        yield failed
    finally:
        _FAILED.reset(token)


def note(trace_id: str, error: LLMCallError) -> None:
    """Record that the reflection on ``trace_id`` failed (outside a step: nothing)."""
    failed = _FAILED.get()
    if failed is not None:
        failed[trace_id] = error


def cause(error: LLMCallError) -> str:
    """The underlying error of a failed call, as ``"Type: message"``."""
    return f"{type(error.cause).__name__}: {error.cause}"
