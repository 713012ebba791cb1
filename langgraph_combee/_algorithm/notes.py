"""A trusted reviewer's note: the feedback comment that is the lesson, not data to analyse.

An app forwards a reviewer's verdict as ``feedback(run_id, correct=False,
comment=..., source="reviewer")``. Such a comment from a person (a reviewer, an
operator; never an automated evaluator) says what the run should have done:
the reflector is shown it as the reviewer's note, and the small-model
reflector's rule carries it as its action. Which sources count is the guard's
trust (``BulletGuard(trusted_sources=...)``): the reflect stage sets it for the
duration of its calls with ``trusting``, so a role profile and the guard never
disagree about who is speaking.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from langgraph_combee._core.types import Trace
from langgraph_combee._guard.provenance import TRUSTED_FEEDBACK_SOURCES

__all__ = ["NOTE_CHARS", "RELAYING_SOURCE", "reviewer_note", "trusting"]

RELAYING_SOURCE = "evaluator"
"""The trusted source whose comments are never notes: an automated judge relays what it read."""

NOTE_CHARS = 400
"""Longest reviewer's note a small reflector's rule carries as its action."""

_TRUSTED_SOURCES: ContextVar[tuple[str, ...]] = ContextVar(
    "combee_trusted_sources", default=TRUSTED_FEEDBACK_SOURCES
)


@contextmanager
def trusting(sources: Sequence[str]) -> Iterator[None]:
    """Within the block, comments from ``sources`` are reviewer's notes (``reviewer_note``)."""
    token = _TRUSTED_SOURCES.set(tuple(sources))
    try:
        yield
    finally:
        _TRUSTED_SOURCES.reset(token)


def reviewer_note(trace: Trace) -> str | None:
    """The run's feedback comment when a trusted source gave it (see ``trusting``), else None.

    A reviewer or an operator the app trusts writes what the run should have
    done; such a comment is the lesson, not data to analyse. A comment from the
    end user (the default source), from a source the guard does not trust, or
    from an automated evaluator (``RELAYING_SOURCE``: an LLM judge reads the
    user's message and may pass its words on, reworded past any copy check) is
    None here and stays fenced as data; the guard still weighs it as trusted
    evidence where it is.
    """
    fb = trace.feedback
    if fb is None or not fb.comment or not fb.comment.strip():
        return None
    source = (fb.source or "").lower()
    if source == RELAYING_SOURCE or source not in _TRUSTED_SOURCES.get():
        return None
    return fb.comment.strip()
