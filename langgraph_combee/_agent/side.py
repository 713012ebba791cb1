"""The agent side of ``Combee``: serving, capture, feedback, and the hooks into an app.

Everything here runs on the agent's hot path or next to it, reads only the
in-memory serving cache, and never blocks on the learner. ``Combee`` (the
composition root) builds one ``AgentSide`` and delegates its agent-side methods
to it; the middleware, the tracer and the StateGraph helpers take it, not the
``Combee``, so nothing here imports the facade or the learner side. The learner
reaches this side only through the callbacks the root hands it: ``publish``,
``set_canary`` and ``flush``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from langgraph_combee._agent.buffer import storable_text
from langgraph_combee._agent.limits import clip_feedback
from langgraph_combee._agent.pinning import Pinner
from langgraph_combee._agent.routing import CanaryRouter
from langgraph_combee._agent.runs import scope_view
from langgraph_combee._agent.serving import UNSCOPED, Server
from langgraph_combee._core.types import Feedback, PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._storage.keys import PromptSpace
from langgraph_combee._storage.queue import TraceQueue

logger = logging.getLogger("langgraph_combee")

# Distinct bad ``scope`` values logged, at most (each is still counted).
_MAX_REPORTED = 100
# Runs of the StateGraph helpers whose pinned version is remembered at once.
_HELPER_PINS = 1024


def _shown(value: object) -> str:
    """``repr(value)``, or its type's name if even that raises."""
    try:
        return repr(value)
    except Exception:
        return f"a {type(value).__name__}"


class Evaluator(Protocol):
    """Scores a captured trace: ``(trace) -> Feedback | None``."""

    def __call__(self, trace: Trace) -> Feedback | None: ...


ScopeFn = Callable[[Mapping[str, Any]], "str | None"]
"""Maps a run's config to its tenant (``Combee(scope=...)``)."""

ModelCallListener = Callable[[Any, Any, Any, Any], None]
"""Told of each model call served: ``(model, system_message, tools, tool_choice)``."""


class AgentSide:
    """Serving, capture and app hooks of one prompt: what ``Combee`` delegates to.

    Args:
        prompt_id: The prompt served.
        server: The HEAD / canary / version / render cache and the capture buffer.
        queue_for: The durable trace queue of a tenant (validates the tenant).
        scope: Maps a run's config to its tenant; None: one shared playbook.
        evaluator: Scores each captured trace that has no feedback; None: none.
        feedback_wait_seconds: How long a captured trace without feedback waits
            in the queue for ``feedback()``.
        canary_fraction: Share of new runs served a canary while one is set.
        on_model_call: Told of every model call served (verified adoption
            replays with the agent's own model and prompt); None: nobody.
        bind_store: Called before serving until it returns True (binds
            ``store="platform"`` to the server's store); None: nothing to bind.
    """

    def __init__(
        self,
        *,
        prompt_id: str,
        server: Server,
        queue_for: Callable[[str | None], TraceQueue],
        scope: ScopeFn | None = None,
        evaluator: Evaluator | None = None,
        feedback_wait_seconds: float = 0.0,
        canary_fraction: float = 0.0,
        on_model_call: ModelCallListener | None = None,
        bind_store: Callable[[], bool] | None = None,
    ) -> None:
        self.prompt_id = prompt_id
        self.server = server
        self.scope = scope
        self.evaluator = evaluator
        self.feedback_wait_seconds = float(feedback_wait_seconds)
        self.router = CanaryRouter(head=server.head, canary=server.canary, fraction=canary_fraction)
        self.on_model_call = on_model_call
        self._queue_for = queue_for
        self._bind_store = bind_store
        self._scope_lock = threading.Lock()
        self._scope_reported: set[str] = set()
        # The StateGraph helpers' pins (the middleware keeps its own).
        self.pins = Pinner(self, limit=_HELPER_PINS)

    def __repr__(self) -> str:
        return f"AgentSide(prompt_id={self.prompt_id!r})"

    # ---- what the learner side is handed (by the root) -------------------

    def publish(self, tenant: str | None, version: PromptVersion) -> None:
        """Serve ``version`` as ``tenant``'s HEAD in this process at once (``on_published``).

        The cache is keyed by the version's own tenant, which the registry that
        wrote it set; ``tenant`` is the same and is taken for the callback's shape.
        """
        del tenant
        self.server.publish(version)

    def set_canary(self, tenant: str | None, version: PromptVersion | None) -> None:
        """Start (a version) or end (None) serving ``tenant``'s canary here (``on_canary``)."""
        self.server.set_canary(tenant, version)

    def flush(self) -> None:
        """Write captured traces and deferred feedback to the queues now (before a step)."""
        self.server.flush()

    def bound(self) -> bool:
        """Whether the store is known (``store="platform"`` binds on the first run)."""
        bind = self._bind_store
        if bind is not None and bind():
            self._bind_store = None
        return self._bind_store is None

    def tenant_for(self, config: Mapping[str, Any] | None) -> str | None:
        """The tenant of a run, from its config, via ``scope`` (None without one).

        A ``scope`` that raises, returns something other than ``str | None``, or
        returns a string no store namespace can hold (``"org.42"``, ``"_"``) must
        never break the agent's run: the fault is counted in
        ``describe()["serving"]["bad_tenants"]``, logged once per distinct value,
        and None is returned. The middleware and the StateGraph helpers then serve
        the run the shared playbook and do not capture it: whose run it is is not
        known, so it must not teach the shared playbook either.
        """
        tenant = self.run_tenant(config)
        return None if tenant == UNSCOPED else tenant

    def tenant_of_run(self, config: Mapping[str, Any] | None) -> str | None:
        """``run_tenant`` on the view of a run's config that ``scope`` is given.

        The hot path's way in: without a ``scope`` (most deployments) the view is
        not even built.
        """
        return None if self.scope is None else self.run_tenant(scope_view(config))

    def run_tenant(self, config: Mapping[str, Any] | None) -> str | None:
        """``tenant_for``, but ``serving.UNSCOPED`` (not None) when ``scope`` failed."""
        if self.scope is None:
            return None
        try:
            tenant = self.scope(config or {})
        except Exception as exc:
            self._bad_tenant(f"scope(config) raised {exc!r}", type(exc).__name__, exc)
            return UNSCOPED
        if tenant is None:
            return None
        # The type first: comparing an arbitrary object (== "") runs its __eq__,
        # which may raise outside this guard.
        if not isinstance(tenant, str):
            shown = _shown(tenant)
            self._bad_tenant(f"scope(config) returned {shown}, not str | None", shown)
            return UNSCOPED
        if tenant == "":
            return None
        try:
            PromptSpace(self.prompt_id, tenant)
        except ConfigurationError as exc:
            self._bad_tenant(f"scope(config) returned an invalid tenant: {exc}", tenant)
            return UNSCOPED
        return tenant

    def _bad_tenant(self, message: str, key: str, exc: BaseException | None = None) -> None:
        with self._scope_lock:
            self.server.stats.bad_tenants += 1
            first = key not in self._scope_reported
            if first and len(self._scope_reported) < _MAX_REPORTED:
                self._scope_reported.add(key)
        if first:
            logger.error(
                "%s; serving the shared playbook and not capturing the run (reported "
                "once per value; counted in describe()['serving']['bad_tenants'])",
                message,
                exc_info=exc,
            )

    def select_version(self, tenant: str | None, run_key: str | None = None) -> PromptVersion:
        """The version to serve to a new run (HEAD, or a canary candidate).

        Reads only the in-memory cache (refreshed in the background).
        """
        if self._bind_store is not None:
            self.bound()
        if tenant == UNSCOPED:
            tenant = None
        try:
            return self.router.route(tenant, run_key)
        except Exception:
            logger.exception("the canary router failed to choose a version; serving HEAD")
            return self.server.head(tenant)

    def version_for_run(self, tenant: str | None, version: int) -> PromptVersion:
        """The version a run was pinned to (from memory when possible)."""
        return self.server.version(tenant, version)

    def capture(self, trace: Trace) -> None:
        """Hand a finished run's trace to the learner side. Never raises.

        The evaluator (if any) scores it first; the trace then waits in a bounded
        buffer and is written to the durable queue by a background thread.
        """
        try:
            if not isinstance(trace, Trace):
                raise ConfigurationError("trace", trace, "a langgraph_combee Trace")
            if trace.tenant == UNSCOPED:
                return  # its scope failed (counted): nobody's playbook learns from it
            self.server.capture(self._scored(trace), hold_seconds=self.feedback_wait_seconds)
        except Exception:  # capture must never break the host agent
            self.server.stats.capture_errors += 1
            logger.exception("failed to capture trace %s", getattr(trace, "id", "?"))

    def capture_later(
        self, trace_id: str, build: Callable[[], Trace], *, supersede: bool = False
    ) -> None:
        """Like ``capture``, with the trace built (and scored) by the background thread.

        For the hot path: the run is buffered at once under ``trace_id`` (so
        ``feedback(trace_id, ...)`` finds it), and ``build()``, which must not
        depend on the calling context, runs when the buffer is flushed.
        ``supersede``: this trace replaces the run's failed trace captured before
        (``Server.capture_later``).
        """
        try:
            self.server.capture_later(
                trace_id,
                lambda: self._scored(build()),
                hold_seconds=self.feedback_wait_seconds,
                supersede=supersede,
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
            self.server.stats.evaluator_errors += 1
            logger.exception("evaluator raised on trace %s; kept without feedback", trace.id)
            return trace
        if feedback is None:
            return trace
        if not isinstance(feedback, Feedback):
            # model_copy does not validate: a dict or a str here would make the
            # trace fail later (clipping, merging, storing) and lose the run.
            self.server.stats.evaluator_errors += 1
            logger.error(
                "evaluator returned %r for trace %s, not a Feedback or None; kept without feedback",
                feedback,
                trace.id,
            )
            return trace
        return trace.model_copy(update={"feedback": feedback})

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
        key: str | None = None,
    ) -> bool:
        """Attach late feedback to a captured run (keyed by its run id).

        Never raises for a store fault: feedback the store cannot take now is
        kept in memory and retried by the background thread (counted in
        ``describe()["serving"]["feedback_deferred"]``; delivered, then counted in
        ``feedback_delivered`` or, for a run the queue does not know,
        ``feedback_unknown``).

        Returns:
            True when the trace was found (in memory or in the queue) or the
            feedback was kept for a store that is failing; False when the run id
            is unknown or its trace was already learned from (counted in
            ``server.stats.feedback_unknown``).

        Raises:
            ConfigurationError: The feedback is empty or ill-typed, ``run_id`` is
                not a UUID or a non-empty str, or ``tenant`` is not a valid tenant
                (nothing is changed).
        """
        trace_id, fb, queue = self._feedback_args(
            run_id, score, correct, comment, ground_truth, source, tenant, key
        )
        if self.server.attach_feedback(trace_id, fb):
            if self.server.retired:  # closed meanwhile: the buffer is never written again
                self.server.defer_feedback(tenant, trace_id, fb)  # counts it as dropped
                raise FeedbackLost(trace_id)
            return True
        stored_id = self._queue_id_or_defer(tenant, trace_id, fb)
        if stored_id is None:
            return True
        try:
            found = queue.set_feedback(stored_id, fb)
        except Exception as exc:  # a store fault must never reach the app
            return self._feedback_deferred(tenant, stored_id, fb, exc)
        return self._feedback_stored(found)

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
        key: str | None = None,
    ) -> bool:
        """Async ``feedback()``, for async apps and servers that forbid blocking calls.

        The same steps, with the queue read through the store's async calls and
        the capture buffer's lock taken on a worker thread.
        """
        trace_id, fb, queue = self._feedback_args(
            run_id, score, correct, comment, ground_truth, source, tenant, key
        )
        if await asyncio.to_thread(self.server.attach_feedback, trace_id, fb):
            if self.server.retired:  # closed meanwhile: the buffer is never written again
                self.server.defer_feedback(tenant, trace_id, fb)  # counts it as dropped
                raise FeedbackLost(trace_id)
            return True
        stored_id = self._queue_id_or_defer(tenant, trace_id, fb)
        if stored_id is None:
            return True
        try:
            found = await queue.aset_feedback(stored_id, fb)
        except Exception as exc:  # a store fault must never reach the app
            return self._feedback_deferred(tenant, stored_id, fb, exc)
        return self._feedback_stored(found)

    def _feedback_args(
        self,
        run_id: Any,
        score: float | None,
        correct: bool | None,
        comment: str | None,
        ground_truth: str | None,
        source: str,
        tenant: str | None,
        key: str | None = None,
    ) -> tuple[str, Feedback, TraceQueue]:
        """The trace id, the validated ``Feedback`` and the queue of a feedback call."""
        # Who speaks decides what the guard trusts, so the name is checked here ("+" joins
        # the sources of merged feedback, which no trust list names).
        if not isinstance(source, str) or not source.strip() or "+" in source:
            raise ConfigurationError(
                "source",
                source,
                "who gave the feedback: 'user' (default), 'operator', 'reviewer', 'evaluator', "
                "'langsmith' or a name of your own (without '+')",
            )
        fields = {
            "score": score,
            "correct": correct,
            "comment": comment,
            "ground_truth": ground_truth,
            "source": source,
            "key": key,
        }
        if isinstance(score, bool) or (
            isinstance(score, (int, float)) and not math.isfinite(score)
        ):
            raise ConfigurationError("score", score, "None or a finite number")
        try:
            fb = Feedback(**fields)
        except ValidationError as exc:
            given = {k: v for k, v in fields.items() if v is not None}
            raise ConfigurationError("feedback", given, f"valid Feedback fields ({exc})") from exc
        if fb.is_empty():
            raise ConfigurationError(
                "feedback",
                fb.model_dump(exclude_none=True),
                "at least one of score, correct, comment, ground_truth",
            )
        # What a run id can be, and nothing else: a list or a float would be looked up
        # as its str and reported as an unknown run, hiding the caller's mistake.
        if not (isinstance(run_id, uuid.UUID) or (isinstance(run_id, str) and run_id.strip())):
            raise ConfigurationError("run_id", run_id, "the run's id: a UUID or a non-empty str")
        queue = self._queue_for(tenant)  # a bad tenant is the caller's error: it raises now
        return str(run_id), clip_feedback(fb, self.server.limits), queue

    def _queue_id_or_defer(self, tenant: str | None, trace_id: str, fb: Feedback) -> str | None:
        """The id the queue knows the trace by, or None when the feedback was deferred.

        The queue knows a trace by the id it could store (the buffer writes an id
        holding NUL or a lone surrogate with U+FFFD there); asking with the raw id
        would fail like a store fault, forever, and stall the feedback behind it.
        The app is never made to wait on a store that is failing: the feedback is
        kept for the background worker instead.
        """
        stored_id = storable_text(trace_id)
        if self.server.store_failing():
            if not self.server.defer_feedback(tenant, stored_id, fb):
                raise FeedbackLost(stored_id)
            return None
        return stored_id

    def _feedback_deferred(
        self, tenant: str | None, trace_id: str, fb: Feedback, exc: Exception
    ) -> bool:
        if self.server.retired:  # closed while this call ran: nothing would retry it
            self.server.defer_feedback(tenant, trace_id, fb)  # counts it as dropped
            raise FeedbackLost(trace_id) from exc
        self.server.note_store(False)
        logger.warning("cannot store feedback for run %s now (will retry): %r", trace_id, exc)
        if not self.server.defer_feedback(tenant, trace_id, fb):  # retired meanwhile
            raise FeedbackLost(trace_id) from exc
        return True

    def _feedback_stored(self, found: bool) -> bool:
        self.server.note_store(True)
        if not found:
            self.server.stats.feedback_unknown += 1
        return found

    def describe(self) -> dict[str, object]:
        """The serving counters of this process (``describe()["serving"]``)."""
        return self.server.describe()


class FeedbackLost(Exception):
    """Feedback that raced ``close()``: the store closed before it was stored.

    ``Combee.feedback()`` turns it into ``CombeeClosedError`` for the caller.
    """

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        super().__init__(f"the feedback for run {trace_id} was not stored: the store closed")


def agent_side_of(value: object, name: str = "combee") -> AgentSide:
    """The agent side of a ``Combee`` (or the agent side itself), for the app hooks.

    Raises:
        ConfigurationError: ``value`` is neither (``name`` is the argument's name).
    """
    if isinstance(value, AgentSide):
        return value
    side = getattr(value, "_agent", None)
    if isinstance(side, AgentSide):
        return side
    raise ConfigurationError(name, value, "a langgraph_combee.Combee")
