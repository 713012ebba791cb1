"""The agent side of ``Combee``: serving, capture, feedback, and the hooks into an app.

Everything here runs on the agent's hot path or next to it, reads only the
in-memory serving cache, and never blocks on the learner. ``Combee`` inherits
it; it is a separate room so the facade stays readable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from langgraph_combee._core.types import Feedback, PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError

if TYPE_CHECKING:
    from langgraph_combee._combee import Combee
    from langgraph_combee._runtime.acceptance import AcceptancePolicy
    from langgraph_combee._runtime.collector import CombeeTracer
    from langgraph_combee._runtime.lean import LeanCombeeMiddleware
    from langgraph_combee._runtime.middleware import CombeeMiddleware
    from langgraph_combee._runtime.serving import Server
    from langgraph_combee._storage.queue import TraceQueue

logger = logging.getLogger("langgraph_combee")


class Evaluator(Protocol):
    """Scores a captured trace: ``(trace) -> Feedback | None``."""

    def __call__(self, trace: Trace) -> Feedback | None: ...


ScopeFn = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a run's config to its tenant (``Combee(scope=...)``)."""


def _feedback(
    run_id: Any,
    score: float | None,
    correct: bool | None,
    comment: str | None,
    ground_truth: str | None,
    source: str,
) -> tuple[str, Feedback]:
    """The trace id and validated ``Feedback`` of a ``feedback()`` call."""
    fb = Feedback(
        score=score, correct=correct, comment=comment, ground_truth=ground_truth, source=source
    )
    if fb.is_empty():
        raise ConfigurationError(
            "feedback",
            fb.model_dump(exclude_none=True),
            "at least one of score, correct, comment, ground_truth",
        )
    return str(run_id), fb


class AgentSide:
    """Serving, capture and app hooks; mixed into ``Combee``."""

    if TYPE_CHECKING:
        scope: ScopeFn | None
        server: Server
        acceptance: AcceptancePolicy
        evaluator: Evaluator | None
        feedback_wait_seconds: float

        def queue(self, tenant: str | None = None) -> TraceQueue: ...

    def _combee(self) -> Combee:
        return cast("Combee", self)

    def tenant_for(self, config: Mapping[str, Any] | None) -> str | None:
        """The tenant of a run, from its config, via ``scope`` (None without one).

        A failing or ill-typed ``scope`` is logged and treated as no tenant:
        it must never break the agent's run.
        """
        if self.scope is None:
            return None
        try:
            tenant = self.scope(config or {})
        except Exception:
            logger.exception("scope(config) raised; using the shared playbook")
            return None
        if tenant is None or isinstance(tenant, str):
            return tenant or None
        logger.warning("scope(config) returned %r, not str | None; ignored", tenant)
        return None

    def select_version(self, tenant: str | None, run_key: str | None = None) -> PromptVersion:
        """The version to serve to a new run (HEAD, or a canary candidate).

        Reads only the in-memory cache (refreshed in the background).
        """
        head = self.server.head(tenant)
        choose = getattr(self.acceptance, "choose", None)
        if choose is None:
            return head
        try:
            picked = choose(self.server, tenant, head, run_key)
        except Exception:
            logger.exception("acceptance policy failed to choose a version; serving HEAD")
            return head
        return picked if isinstance(picked, PromptVersion) else head

    def version_for_run(self, tenant: str | None, version: int) -> PromptVersion:
        """The version a run was pinned to (from memory when possible)."""
        return self.server.version(tenant, version)

    def capture(self, trace: Trace) -> None:
        """Hand a finished run's trace to the learner side. Never raises.

        The evaluator (if any) scores it first; the trace then waits in a bounded
        buffer and is written to the durable queue by a background thread.
        """
        try:
            self.server.capture(self._scored(trace), hold_seconds=self.feedback_wait_seconds)
        except Exception:  # capture must never break the host agent
            logger.exception("failed to capture trace %s", getattr(trace, "id", "?"))

    def capture_later(self, trace_id: str, build: Callable[[], Trace]) -> None:
        """Like ``capture``, with the trace built (and scored) by the background thread.

        For the hot path: the run is buffered at once under ``trace_id`` (so
        ``feedback(trace_id, ...)`` finds it), and ``build()``, which must not
        depend on the calling context, runs when the buffer is flushed.
        """
        try:
            self.server.capture_later(
                trace_id, lambda: self._scored(build()), hold_seconds=self.feedback_wait_seconds
            )
        except Exception:  # capture must never break the host agent
            logger.exception("failed to capture trace %s", trace_id)

    def _scored(self, trace: Trace) -> Trace:
        """``trace`` with the evaluator's feedback, when it has none and one is set."""
        if self.evaluator is None or trace.feedback is not None:
            return trace
        try:
            feedback = self.evaluator(trace)
        except Exception:
            logger.exception("evaluator raised on trace %s; kept without feedback", trace.id)
            return trace
        return trace if feedback is None else trace.model_copy(update={"feedback": feedback})

    def feedback(
        self,
        run_id: Any,
        *,
        score: float | None = None,
        correct: bool | None = None,
        comment: str | None = None,
        ground_truth: str | None = None,
        tenant: str | None = None,
        source: str = "user",
    ) -> bool:
        """Attach late feedback to a captured run (keyed by its run id).

        Returns True when the trace was found (in memory or in the queue), False
        when the run id is unknown or its trace was already learned from (counted
        in ``server.stats.feedback_unknown``).
        """
        trace_id, fb = _feedback(run_id, score, correct, comment, ground_truth, source)
        queue = self.queue(tenant)
        found = self._feedback_in_memory(trace_id, fb) or queue.set_feedback(trace_id, fb)
        return self._feedback_found(found)

    async def afeedback(
        self,
        run_id: Any,
        *,
        score: float | None = None,
        correct: bool | None = None,
        comment: str | None = None,
        ground_truth: str | None = None,
        tenant: str | None = None,
        source: str = "user",
    ) -> bool:
        """Async ``feedback()``: for async apps and servers that forbid blocking calls.

        The in-memory lookup runs on a worker thread (it may wait for the capture
        buffer's lock) and the queue is read with the store's async calls.
        """
        trace_id, fb = _feedback(run_id, score, correct, comment, ground_truth, source)
        queue = self.queue(tenant)
        found = await asyncio.to_thread(
            self._feedback_in_memory, trace_id, fb
        ) or await queue.aset_feedback(trace_id, fb)
        return self._feedback_found(found)

    def _feedback_in_memory(self, trace_id: str, fb: Feedback) -> bool:
        """Attach ``fb`` to a buffered trace; on a miss, let a flush in progress land.

        A trace the flush took from the buffer is in neither place until its
        write ends: feedback sent right after the run (the SDK's usual order)
        would miss it. Waiting for that write lets the queue lookup find it.
        """

        def merge(trace: Trace) -> Trace:
            merged = trace.feedback.merged(fb) if trace.feedback is not None else fb
            return trace.model_copy(update={"feedback": merged})

        if self.server.attach_feedback(trace_id, merge):
            return True
        self.server.settled()
        return False

    def _feedback_found(self, found: bool) -> bool:
        if not found:
            self.server.stats.feedback_unknown += 1
        return found

    # ---- the agent side: one line for create_agent, helpers for StateGraph --

    def middleware(
        self, *, capture: bool = True, lean: bool = False
    ) -> CombeeMiddleware | LeanCombeeMiddleware:
        """The ``create_agent`` middleware; put it first in ``middleware=[...]``.

        Args:
            capture: Capture each finished invocation as a ``Trace``.
            lean: Do everything inside ``wrap_model_call``, adding no graph node
                (``LeanCombeeMiddleware``): the smallest overhead per run, but
                only invocations that end in a final model response are captured.
        """
        if not isinstance(lean, bool):
            raise ConfigurationError("lean", lean, "True or False")
        if lean:
            from langgraph_combee._runtime.lean import LeanCombeeMiddleware

            return LeanCombeeMiddleware(self._combee(), capture=capture)
        from langgraph_combee._runtime.middleware import CombeeMiddleware

        return CombeeMiddleware(self._combee(), capture=capture)

    def tracer(self) -> CombeeTracer:
        """A callback handler that captures every finished root run as a trace."""
        from langgraph_combee._runtime.collector import CombeeTracer

        return CombeeTracer(self._combee())

    def node(self) -> Any:
        """A LangGraph node putting the learned system prompt first in ``messages``."""
        from langgraph_combee._runtime.graph import make_node

        return make_node(self._combee())

    def system_prompt(self, base: str, *, config: Mapping[str, Any] | None = None) -> str:
        """``base`` with the learned playbook appended, for the current run."""
        from langgraph_combee._runtime.graph import system_prompt

        return system_prompt(self._combee(), base, config=config)

    def wrap_model(self, llm: Any) -> Any:
        """A runnable that injects the learned prompt into every call of ``llm``."""
        from langgraph_combee._runtime.graph import wrap_model

        return wrap_model(self._combee(), llm)

    def instrument(self, graph: Any) -> Any:
        """The compiled graph with trace capture attached to every run."""
        from langgraph_combee._runtime.graph import instrument

        return instrument(self._combee(), graph)
