"""``Combee``: the one object a user holds.

It ties the learning engine (layer 2) to the registry (layer 3) and the
acceptance policy (layer 4). Offline, ``learn()`` runs steps over a list of
traces; each step's playbook becomes a candidate version that the policy
accepts, rejects or leaves pending.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import copy
import functools
import logging
import threading
import uuid
import weakref
from collections.abc import (
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langgraph.store.base import BaseStore
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_combee._adoption.replay import ReplaySettings
from langgraph_combee._agent import spellings
from langgraph_combee._agent.collector import CombeeTracer
from langgraph_combee._agent.graph import (
    LearnedPromptModel,
    PromptNode,
    instrument,
    make_node,
    system_prompt,
    wrap_model,
)
from langgraph_combee._agent.middleware import CombeeMiddleware
from langgraph_combee._agent.serving import Server
from langgraph_combee._agent.side import AgentSide, Evaluator, FeedbackLost, ScopeFn
from langgraph_combee._agent.spellings import refuse_unknown
from langgraph_combee._algorithm.controller import BatchSizeController
from langgraph_combee._algorithm.engine import (
    BatchSize,
    LearningEngine,
    validate_batch_size,
)
from langgraph_combee._algorithm.strategies import Strategy, make_strategy
from langgraph_combee._core.diff import PlaybookDiff
from langgraph_combee._core.types import (
    Decision,
    LearnReport,
    PromptVersion,
    StepReport,
    Trace,
)
from langgraph_combee._errors import CombeeClosedError, ConfigurationError, EngineLoopError
from langgraph_combee._guard.guard import DEFAULT_GUARD, BulletGuard
from langgraph_combee._learner.acceptance import AcceptAll, AcceptancePolicy, as_policy
from langgraph_combee._learner.engine_loop import ENGINE_LOOP
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._learner.parts import LearnerParts
from langgraph_combee._learner.replaying import Replayer
from langgraph_combee._learner.step import Stepper, refuse_duplicates
from langgraph_combee._learner.versions import ApplyPipeline, VersionWriter
from langgraph_combee._settings import (
    AlgorithmSettings,
    CaptureSettings,
    LearnerSettings,
    ServingSettings,
    refuse_moved,
    settle_auto_embedder,
)
from langgraph_combee._storage._io import loop_closed
from langgraph_combee._storage.keys import PromptSpace, validate_label
from langgraph_combee._storage.locked import thread_safe, unwrap
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee._storage.registry import PromptRegistry
from langgraph_combee._storage.steps import StepLog, StepRecord

if TYPE_CHECKING:
    from typing_extensions import Never

    from langgraph_combee._storage.server_store import PlatformStore

logger = logging.getLogger("langgraph_combee")

R = TypeVar("R")
S = TypeVar("S")
P = ParamSpec("P")


def _resolve_model(model: str | BaseChatModel | None) -> BaseChatModel | None:
    if model is None or isinstance(model, BaseChatModel):
        return model
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        try:
            return init_chat_model(model)
        except Exception as exc:  # init_chat_model raises ImportError/ValueError alike
            raise ConfigurationError(
                "model", model, f"a 'provider:name' init_chat_model accepts ({exc})"
            ) from exc
    raise ConfigurationError("model", model, "a 'provider:name' string or a BaseChatModel")


def _resolve_agent_model(model: str | BaseChatModel | None) -> BaseChatModel | None:
    try:
        return _resolve_model(model)
    except ConfigurationError as exc:
        raise ConfigurationError("agent_model", model, exc.allowed) from exc


def _run_sync(coro: Coroutine[Any, Any, R], what: str) -> R:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # One loop for the process, not asyncio.run: a model's pooled connections
        # belong to the loop that opened them, and a closed one breaks the next call.
        return ENGINE_LOOP.run(coro, what)
    coro.close()
    raise EngineLoopError(
        f"Combee.{what}() was called from inside a running event loop; use 'await combee.a{what}()'"
    )


# Combees whose learner was started: an exiting interpreter stops them, so their
# leases are released and the next process learns at once (not after the TTL).
_started: weakref.WeakSet[Combee] = weakref.WeakSet()
_EXIT_STOP_SECONDS = 5.0  # how long an exiting interpreter waits for a step to end


def running_combees() -> list[Combee]:
    """The ``Combee`` objects of this process whose started learner still runs."""
    return [c for c in list(_started) if c._learner is not None and c._learner.running]


@atexit.register
def _stop_started_at_exit() -> None:
    for combee in list(_started):
        if combee._learner is not None and combee._learner.running:
            try:
                combee.stop(_EXIT_STOP_SECONDS)
            except Exception:  # exiting anyway: the lease expires on its own
                logger.warning("could not stop %r at exit", combee, exc_info=True)


def _resolve_store(store: BaseStore | Literal["platform"] | None) -> BaseStore:
    if store is None:
        return InMemoryStore()
    if store == "platform":
        # The LangGraph server's store, bound on the first run (docs/platform.md).
        from langgraph_combee._storage.server_store import PlatformStore

        return PlatformStore()
    return store


def _run_blocking(coro: Coroutine[Any, Any, R], store: BaseStore, what: str) -> R:
    """Run a short store-bound coroutine to completion from sync code, even inside a loop.

    Inside a running loop it runs on a thread with a loop of its own, blocking
    the caller as the synchronous store call it replaces did; except when the
    store is an async one bound to that very loop, which could then never answer.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    inner = unwrap(store)
    if isinstance(inner, AsyncBatchedBaseStore) and inner._loop is loop:
        coro.close()
        raise EngineLoopError(
            f"Combee.{what}() blocks, and the store runs on this event loop: call it from "
            f"a worker thread (await asyncio.to_thread(combee.{what}, ...))"
        )
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _blocking_twin(
    twin: Callable[Concatenate[Combee, P], Coroutine[Any, Any, R]],
) -> Callable[[Callable[Concatenate[Combee, P], R]], Callable[Concatenate[Combee, P], R]]:
    """Make a method the blocking form of its async ``twin`` (``_run_blocking``).

    The decorated method gives the name (for ``CombeeClosedError`` and the
    event-loop message), the signature and the docstring; its body never runs.
    """

    def derive(stub: Callable[Concatenate[Combee, P], R]) -> Callable[Concatenate[Combee, P], R]:
        what = stub.__name__

        @functools.wraps(stub)
        def run(self: Combee, /, *args: P.args, **kwargs: P.kwargs) -> R:
            self._open(what)
            return _run_blocking(twin(self, *args, **kwargs), self.store, what)

        return run

    return derive


def _reason(reason: object) -> str:
    if not isinstance(reason, str):
        raise ConfigurationError("reason", reason, "a string (why the decision was made)")
    return reason


def _as_traces(traces: Iterable[Trace | Mapping[str, Any]]) -> list[Trace]:
    """The traces of a ``learn()`` call, validated, refusing one id given twice."""
    if isinstance(traces, (str, bytes, Mapping, Trace)) or not isinstance(traces, Iterable):
        raise ConfigurationError(
            "traces", traces, "an iterable of Trace objects or dicts of Trace fields"
        )
    out: list[Trace] = []
    for i, item in enumerate(traces):
        if isinstance(item, Trace):
            out.append(item)
        elif isinstance(item, Mapping):
            try:
                out.append(Trace.model_validate(item))
            except ValueError as exc:
                raise ConfigurationError(f"traces[{i}]", item, f"a valid Trace ({exc})") from exc
        else:
            raise ConfigurationError(f"traces[{i}]", item, "a Trace or a dict of Trace fields")
    refuse_duplicates(out, "traces")
    return out


def _batch_size(batch_size: object) -> BatchSize | BatchSizeController:
    """``batch_size``: a positive int, ``"auto"`` or a ``BatchSizeController`` to copy."""
    if isinstance(batch_size, BatchSizeController):
        return batch_size
    try:
        return validate_batch_size(batch_size)
    except ConfigurationError as exc:
        raise ConfigurationError(
            "batch_size", batch_size, 'a positive int, "auto" or a BatchSizeController'
        ) from exc


def _settle_embedder(serving: ServingSettings) -> str:
    """What ``serving`` serves rules by meaning with, "auto" settled for the process.

    "auto" is the bundled all-MiniLM-L6-v2 (one per process) where the
    ``[local-embed]`` extra and its weights are installed, else nothing (words
    only). The note is ``describe()["serving"]["rules_by_meaning"]``.
    """
    embedder = serving.focus_embedder
    if embedder is None:
        return "off: ServingSettings(focus_embedder=None)"
    if not isinstance(embedder, str):
        return f"on: {type(embedder).__name__} (ServingSettings.focus_embedder)"
    if not serving.focus_rules and not serving.example_turns:
        # Nothing is served that an embedder would pick: not worth ~90 MB and a second.
        return "off: focus_rules=0 and example_turns=0 (nothing to serve by meaning)"
    # The bundled embedder lives at the edge that holds the local models; its
    # module imports numpy and the weights only when the embedder is made.
    from langgraph_combee.local._embed import default_embedder

    found, note = default_embedder()
    settle_auto_embedder(found)
    if found is None:
        logger.info("rules by meaning %s; the rules a request names are served by words", note)
    return note


def _settings(name: str, value: object, kind: type[S]) -> S:
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ConfigurationError(name, value, f"None or a {kind.__name__}")
    return value


_SIGNATURE = (
    "prompt_id",
    "model",
    "store",
    "strategy",
    "batch_size",
    "evaluator",
    "acceptance",
    "guard",
    "scope",
    "capture",
    "serving",
    "learner",
    "algorithm",
)


class Combee:
    """A self-improving system prompt for one LangGraph / LangChain app.

    Example::

        combee = Combee(prompt_id="support-agent", model=learner_model)
        report = combee.learn(traces)
        print(report.version.playbook.render())

    Every other knob sits in one of four settings objects (each documented in
    docs/production.md); a keyword of an earlier release (``refresh_seconds=``,
    ...) raises ``ConfigurationError`` naming the settings object that holds it.

    Args:
        prompt_id: Name of the learned prompt; one playbook per id (and tenant).
        model: The learner LLM: a ``BaseChatModel`` or a ``"provider:name"``
            string for ``init_chat_model``. May be None for serve-only replicas.
        store: A LangGraph ``BaseStore`` holding versions and traces; default a
            new ``InMemoryStore``. ``"platform"``: the store a LangGraph server
            (``langgraph dev``, LangGraph Platform) gives its runs, bound on the
            first run (see ``langgraph_combee.platform``).
        strategy: ``"combee"`` (default), ``"sequential"`` or ``"naive"``.
        batch_size: Traces per learning step; ``"auto"`` (default) for the
            batch-size controller, or a ``BatchSizeController`` with settings of
            your own (each tenant gets a fresh copy of it).
        evaluator: Optional ``(trace) -> Feedback | None`` run on each captured trace.
        acceptance: Policy deciding which candidates go live; default AcceptAll.
        guard: The ``BulletGuard`` screening every proposed edit before it is
            applied (and holding the support threshold); default
            ``BulletGuard()``, None turns screening off. See ``docs/security.md``.
        scope: Optional ``(config) -> tenant`` mapping a run's config (its
            ``configurable`` and ``metadata``) to a tenant; each tenant learns its
            own playbook. Default: one shared playbook.
        capture: What the agent side captures and how it reaches the queue
            (``CaptureSettings``).
        serving: How the agent side serves the prompt in force (``ServingSettings``).
        learner: The learner's LLM calls, budget and background loop
            (``LearnerSettings``).
        algorithm: What a learning step does (``AlgorithmSettings``).

    Raises:
        ConfigurationError: An argument is bad, or is a keyword that moved into
            a settings object.
    """

    def __init__(
        self,
        *,
        prompt_id: str,
        model: str | BaseChatModel | None = None,
        store: BaseStore | Literal["platform"] | None = None,
        strategy: str | Strategy = "combee",
        batch_size: BatchSize | BatchSizeController = "auto",
        evaluator: Evaluator | None = None,
        acceptance: AcceptancePolicy | None = None,
        guard: BulletGuard | None = DEFAULT_GUARD,
        scope: ScopeFn | None = None,
        capture: CaptureSettings | None = None,
        serving: ServingSettings | None = None,
        learner: LearnerSettings | None = None,
        algorithm: AlgorithmSettings | None = None,
        **moved: Never,
    ) -> None:
        refuse_moved("Combee", moved, _SIGNATURE)
        validate_label("prompt_id", prompt_id)
        # The settings objects are read as given by every part (checked when built).
        self._capture = _settings("capture", capture, CaptureSettings)
        self._serving = _settings("serving", serving, ServingSettings)
        self._by_meaning = _settle_embedder(self._serving)
        self._learning = _settings("learner", learner, LearnerSettings)
        self._algorithm = algorithm = _settings("algorithm", algorithm, AlgorithmSettings)
        if store is not None and store != "platform" and not isinstance(store, BaseStore):
            raise ConfigurationError("store", store, "a langgraph BaseStore, 'platform' or None")
        self._prompt_id = prompt_id
        self._model = _resolve_model(model)
        resolved = _resolve_store(store)
        self._store: BaseStore = thread_safe(resolved)
        # Combee(store="platform"): bound by the first run that sees the server's store.
        self._platform_store = cast("PlatformStore", resolved) if store == "platform" else None
        self._acceptance: AcceptancePolicy = (
            AcceptAll() if acceptance is None else as_policy(acceptance)
        )
        self._batch_size = _batch_size(batch_size)
        # Checked here, model or not: a serve-only replica is given the same arguments
        # as the learner, and a bad one must not wait for a model to be found out.
        make_strategy(
            strategy, copies=algorithm.copies, fan_in=algorithm.fan_in, seed=algorithm.seed
        )
        self._strategy = strategy
        if guard is not None and not isinstance(guard, BulletGuard):
            raise ConfigurationError("guard", guard, "a BulletGuard or None")
        self._guard = guard
        if evaluator is not None and not callable(evaluator):
            raise ConfigurationError(
                "evaluator", evaluator, "a callable (trace) -> Feedback | None"
            )
        if scope is not None and not callable(scope):
            raise ConfigurationError("scope", scope, "a callable (config) -> tenant str | None")
        self._queues: dict[str | None, TraceQueue] = {}
        self._learner: BackgroundLearner | None = None
        self._closed = False  # close() ends this Combee for good
        # One lease holder name per Combee, shared by its background learner and
        # its offline writers (learn, approve, ...), which a process lock serialises.
        self._holder = f"combee-{uuid.uuid4().hex[:12]}"
        self._replayer = Replayer(
            settings=ReplaySettings(
                algorithm=algorithm, serving=self._serving, learner=self._learning
            ),
            evaluator=lambda: self._agent.evaluator,
            agent_model=_resolve_agent_model(algorithm.agent_model),
        )
        self._agent = _build_agent(self, scope=scope, evaluator=evaluator)
        self._engines: dict[str | None, LearningEngine] = {}
        # learn() in one thread and the background learner in another may ask for a new
        # tenant's engine at once; each tenant must get one (its evidence memory is in it).
        self._engines_lock = threading.Lock()
        self._registries: dict[str | None, PromptRegistry] = {}
        self._owned: contextlib.ExitStack | None = None  # a store from_conn_string opened
        self._stepper, self._learner_parts = _build_learner(self)
        self._writer = self._learner_parts.writer
        # Build one engine now so that bad engine settings fail at construction.
        if self.model is not None:
            self._engine(None)

    def __repr__(self) -> str:
        return (
            f"Combee(prompt_id={self.prompt_id!r}, strategy={self._strategy_name()!r}, "
            f"batch_size={self._batch_size!r})"
        )

    @property
    def prompt_id(self) -> str:
        """The learned prompt's name (``Combee(prompt_id=...)``)."""
        return self._prompt_id

    @property
    def model(self) -> BaseChatModel | None:
        """The learner LLM (``Combee(model=...)``); None on a serve-only replica."""
        return self._model

    @property
    def store(self) -> BaseStore:
        """The store holding this prompt's versions and trace queue.

        It is the ``store=`` given (or the ``InMemoryStore`` made for it; an
        ``InMemoryStore`` behind a lock, as the agent's threads and the learner
        share it).
        """
        return self._store

    def _strategy_name(self) -> str:
        return self._strategy if isinstance(self._strategy, str) else self._strategy.name

    def _open(self, method: str) -> None:
        """Refuse ``method`` once ``close()`` has ended this Combee (``CombeeClosedError``)."""
        if self._closed:
            raise CombeeClosedError(self.prompt_id, method)

    # ---- the agent side (``_agent/side.py``), delegated -------------------

    def capture(self, trace: Trace) -> None:
        """Hand a finished run's trace to the learner side. Never raises.

        The middleware, the tracer and the StateGraph helpers capture their runs
        themselves; this is for a trace built by hand. The evaluator (if any)
        scores it, then it waits in memory until the next flush (see ``flush()``),
        or is written at once under ``CaptureSettings(durability="write_through")``.
        After ``close()`` the trace is dropped (logged, counted in ``dropped``).
        """
        self._agent.capture(trace)

    def flush(self) -> int:
        """Write the traces captured in this process to the trace queue now.

        Captured traces wait in memory and a background thread writes them every
        ``CaptureSettings.flush_seconds``; the background learner flushes before
        each pass, and ``stop()`` / ``close()`` flush too. Call this to see them
        in ``queue()`` at once (a test, a script that learns from the queue).
        Feedback kept while the store failed is delivered too.

        Never raises for a store fault: what cannot be written stays in memory
        (counted in ``describe()["serving"]``) for the next attempt.

        Returns:
            How many traces were written.

        Raises:
            CombeeClosedError: ``close()`` was called.
        """
        self._open("flush")
        return self._agent.server.flush()

    async def aflush(self) -> int:
        """Async ``flush()``, on a worker thread (the capture buffer writes synchronously)."""
        self._open("aflush")
        return await asyncio.to_thread(self.flush)

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
        value: Any = None,
        correction: Any = None,
        **unknown: Never,
    ) -> bool:
        """Attach late feedback to a captured run (keyed by its run id).

        ``source`` says who is speaking, and so what the guard trusts (see
        ``docs/security.md``): ``"user"`` (the default: text an end user could have
        typed; its score counts, its comment is user text, its ground truth only a
        short answer), ``"operator"`` or ``"reviewer"`` (a person of yours: comment
        and ground truth are trusted), ``"evaluator"`` (your automated judge:
        trusted, except the words it copies from the user or an untrusted tool).

        LangSmith's spellings work too (``create_feedback``'s): ``correction``
        is the right answer (``ground_truth``; a str, or a dict holding it under
        ``output``, ``answer``, ...); ``value`` is ``correct`` when a bool,
        ``score`` when a number and a label line ``"<key>: <value>"`` of the
        comment when a str; ``key`` is recorded (``Feedback.key``), and
        ``key="correctness"`` (or ``"correct"``, ``"is_correct"``) makes a
        score of at least 0.5 a correct verdict. Example::

            combee.feedback(run_id, key="correctness", score=0, correction="FIN-REFUNDS")

        Never raises for a store fault: feedback the store cannot take now is
        kept in memory and retried by the background thread (counted in
        ``describe()["serving"]["feedback_deferred"]``).

        Returns:
            True when the trace was found (in memory or in the queue) or the
            feedback was kept for a store that is failing; False when the run id
            is unknown or its trace was already learned from.

        Raises:
            ConfigurationError: The feedback is empty or ill-typed, ``run_id`` is
                not a UUID or a non-empty str, ``tenant`` is not a valid tenant, or
                a LangSmith spelling repeats a field given too (nothing is changed).
            TypeError: A keyword it does not take; the message lists those it does.
            CombeeClosedError: ``close()`` was called: nothing could keep it.
        """
        refuse_unknown("feedback", unknown)
        self._open("feedback")
        fields = spellings.read(
            score=score,
            correct=correct,
            comment=comment,
            ground_truth=ground_truth,
            key=key,
            value=value,
            correction=correction,
        )
        try:
            return self._agent.feedback(
                run_id,
                score=fields.score,
                correct=fields.correct,
                comment=fields.comment,
                ground_truth=fields.ground_truth,
                tenant=tenant,
                source=source,
                key=fields.key,
            )
        except FeedbackLost:  # close() ran while this call did
            raise CombeeClosedError(self.prompt_id, "feedback") from None

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
        value: Any = None,
        correction: Any = None,
        **unknown: Never,
    ) -> bool:
        """Async ``feedback()``, for async apps and servers that forbid blocking calls."""
        refuse_unknown("afeedback", unknown)
        self._open("afeedback")
        fields = spellings.read(
            score=score,
            correct=correct,
            comment=comment,
            ground_truth=ground_truth,
            key=key,
            value=value,
            correction=correction,
        )
        try:
            return await self._agent.afeedback(
                run_id,
                score=fields.score,
                correct=fields.correct,
                comment=fields.comment,
                ground_truth=fields.ground_truth,
                tenant=tenant,
                source=source,
                key=fields.key,
            )
        except FeedbackLost:  # close() ran while this call did
            raise CombeeClosedError(self.prompt_id, "afeedback") from None

    def describe(self) -> dict[str, Any]:
        """A snapshot of Combee's counters: the agent side's and the learner's.

        ``"serving"`` holds the capture, refresh and feedback counters of this
        process' agent side (``captured``, ``dropped``, ``truncated``, ``buffered``,
        ...); ``"learner"`` the background learner's
        (``learner.describe()``), or None when no learner was created here;
        ``"steps"`` what every learning step of this process did, ``learn()``'s
        and the background learner's, summed (``StepTally.describe()``): steps,
        traces, versions written and accepted, ``rules`` (proposed, written,
        held, refused, left out), ``reasons`` rules did not land (``"left out
        by curator"``, ``"held: provenance"``, ...), the learner calls by stage
        and the tokens per 1,000 traces, and the ``last`` step's one-line summary.
        """
        learner = self._learner
        return {
            "serving": {**self._agent.describe(), "rules_by_meaning": self._by_meaning},
            "learner": learner.describe() if learner is not None else None,
            "steps": self._stepper.tally.describe(),
        }

    def middleware(
        self, *, capture: bool = True, hooks: bool | None = None, lean: bool | None = None
    ) -> CombeeMiddleware:
        """The ``create_agent`` middleware; put it first in ``middleware=[...]``.

        Args:
            capture: Capture each finished invocation as a ``Trace``.
            hooks: False (default): all the work inside ``wrap_model_call``, no
                graph node of its own. True: pin in ``before_agent`` and capture in
                ``after_agent`` too, to capture invocations ended by other
                middleware or a ``return_direct`` tool (``CombeeMiddleware``).
            lean: The older name of ``not hooks`` (``lean=True`` is the default).

        Raises:
            ConfigurationError: An option is not a bool, or ``hooks`` and
                ``lean`` contradict each other.
        """
        if lean is not None and not isinstance(lean, bool):
            raise ConfigurationError("lean", lean, "None, True or False")
        if hooks is None:
            hooks = False if lean is None else not lean
        elif lean is not None and hooks == lean:
            raise ConfigurationError(
                "lean", lean, f"omitted, or {not hooks} (the opposite of hooks={hooks})"
            )
        return CombeeMiddleware(self._agent, capture=capture, hooks=hooks)

    def tracer(self) -> CombeeTracer:
        """A callback handler that captures every finished root run as a trace."""
        return CombeeTracer(self._agent)

    def node(self) -> PromptNode:
        """A LangGraph node putting the learned system prompt first in ``messages``."""
        return make_node(self._agent)

    def system_prompt(
        self, base: str, *, config: Mapping[str, Any] | None = None, request: str | None = None
    ) -> str:
        """``base`` with the learned playbook appended, for the current run.

        Pass ``request`` (the text of the user's latest message) to have the
        rules it names repeated after the playbook, as the middleware does.
        """
        return system_prompt(self._agent, base, config=config, request=request)

    def wrap_model(self, llm: Any) -> LearnedPromptModel:
        """A runnable that injects the learned prompt into every call of ``llm``."""
        return wrap_model(self._agent, llm)

    def instrument(self, graph: Any) -> Any:
        """The compiled graph with trace capture attached to every run."""
        return instrument(self._agent, graph)

    # ---- parts, per tenant ---------------------------------------------

    def registry(self, tenant: str | None = None) -> PromptRegistry:
        """The version registry of this prompt (for one tenant, if given)."""
        self._open("registry")
        return self._registry_of(tenant)

    def _registry_of(self, tenant: str | None) -> PromptRegistry:
        # The parts' way in: close() still flushes through it, and a part is never refused.
        if tenant not in self._registries:
            self._registries[tenant] = PromptRegistry(self.store, self.prompt_id, tenant=tenant)
        return self._registries[tenant]

    def describe_roles(self, tenant: str | None = None) -> dict[str, Any]:
        """The learner's role profile: ``profile``, how it was ``chosen`` and the ``reason``."""
        self._open("describe_roles")
        return self._engine(tenant).roles.describe()

    def next_batch_size(self, tenant: str | None = None) -> int:
        """How many traces the next learning step takes (fixed, or the controller's pick)."""
        self._open("next_batch_size")
        return self._engine(tenant).next_batch_size()

    def queue(self, tenant: str | None = None) -> TraceQueue:
        """The durable trace queue of this prompt (for one tenant, if given)."""
        self._open("queue")
        return self._queue_of(tenant)

    def _queue_of(self, tenant: str | None) -> TraceQueue:
        if tenant not in self._queues:
            self._queues[tenant] = TraceQueue(self.store, self.prompt_id, tenant=tenant)
        return self._queues[tenant]

    def steps(self, limit: int | None = 20, *, tenant: str | None = None) -> list[StepRecord]:
        """The most recent learning steps kept in the store, newest first (``combee steps``).

        Each ``StepRecord`` holds the step's one-line ``summary``, its ``rules``
        and the ``reasons`` rules did not land, and the version it wrote or why
        none was. The store keeps the last 100 steps of each tenant, written by
        any process learning on it.
        """
        self._open("steps")
        return self._step_log(tenant).recent(limit)

    async def asteps(
        self, limit: int | None = 20, *, tenant: str | None = None
    ) -> list[StepRecord]:
        """Async ``steps()``."""
        self._open("asteps")
        return await self._step_log(tenant).arecent(limit)

    def _step_log(self, tenant: str | None) -> StepLog:
        return StepLog(self.store, self.prompt_id, tenant=tenant)

    def _engine(self, tenant: str | None) -> LearningEngine:
        if tenant is not None:
            # The rule of every tenant= argument (the queue's and the registry's).
            PromptSpace(self.prompt_id, tenant)
        if self.model is None:
            raise ConfigurationError(
                "model", None, "a learner model to learn with (Combee(model=...))"
            )
        engine = self._engines.get(tenant)
        if engine is not None:
            return engine
        with self._engines_lock:
            return self._new_engine(tenant, self.model)

    def _new_engine(self, tenant: str | None, model: BaseChatModel) -> LearningEngine:
        if tenant not in self._engines:
            metadata = {"combee_prompt_id": self.prompt_id}
            if tenant is not None:
                metadata["combee_tenant"] = tenant
            # A controller given as batch_size= is a template: each tenant measures its own.
            template = self._batch_size
            controller = (
                copy.deepcopy(template) if isinstance(template, BatchSizeController) else None
            )
            self._engines[tenant] = LearningEngine(
                model,
                strategy=self._strategy,
                batch_size="auto" if controller is not None else cast("BatchSize", template),
                controller=controller,
                algorithm=self._algorithm,
                learner=self._learning,
                guard=self._guard,
                metadata=metadata,
            )
        return self._engines[tenant]

    # ---- reading versions ----------------------------------------------

    def current(self, *, tenant: str | None = None) -> PromptVersion:
        """The version in force (version 0 with an empty playbook before any learning)."""
        self._open("current")
        return self._registry_of(tenant).head()

    async def acurrent(self, *, tenant: str | None = None) -> PromptVersion:
        """Async ``current()``."""
        self._open("acurrent")
        return await self._registry_of(tenant).ahead()

    def get(self, version: int, *, tenant: str | None = None) -> PromptVersion:
        """One version by number."""
        self._open("get")
        return self._registry_of(tenant).get(version)

    async def aget(self, version: int, *, tenant: str | None = None) -> PromptVersion:
        """Async ``get()``."""
        self._open("aget")
        return await self._registry_of(tenant).aget(version)

    def history(self, *, tenant: str | None = None) -> list[PromptVersion]:
        """Every version written, oldest first."""
        self._open("history")
        return self._registry_of(tenant).history()

    async def ahistory(self, *, tenant: str | None = None) -> list[PromptVersion]:
        """Async ``history()``."""
        self._open("ahistory")
        return await self._registry_of(tenant).ahistory()

    def diff(self, a: int, b: int, *, tenant: str | None = None) -> PlaybookDiff:
        """What changed from version ``a``'s playbook to version ``b``'s."""
        self._open("diff")
        return self._registry_of(tenant).diff(a, b)

    async def adiff(self, a: int, b: int, *, tenant: str | None = None) -> PlaybookDiff:
        """Async ``diff()``."""
        self._open("adiff")
        return await self._registry_of(tenant).adiff(a, b)

    async def arollback(
        self, version: int, *, reason: str = "", tenant: str | None = None
    ) -> PromptVersion:
        """Async ``rollback()``, on the store's async calls."""
        self._open("arollback")
        return await self._writer.rollback(
            self._registry_of(tenant), version, reason=_reason(reason)
        )

    @_blocking_twin(arollback)
    def rollback(
        self, version: int, *, reason: str = "", tenant: str | None = None
    ) -> PromptVersion:
        """Put ``version``'s playbook back in force as a new version (history is kept)."""
        raise NotImplementedError  # the blocking form of arollback (_blocking_twin)

    # ---- decisions -------------------------------------------------------

    async def aapprove(
        self, version: int, *, reason: str = "approved", tenant: str | None = None
    ) -> PromptVersion:
        """Async ``approve()``, on the store's async calls."""
        self._open("aapprove")
        decision = Decision(accepted=True, policy="manual", reason=_reason(reason))
        return await self._writer.accept(self._registry_of(tenant), version, decision)

    @_blocking_twin(aapprove)
    def approve(
        self, version: int, *, reason: str = "approved", tenant: str | None = None
    ) -> PromptVersion:
        """Accept a pending candidate (``ManualApproval``); it is served from the next run.

        A candidate learned from a version that is no longer HEAD (another was
        approved since) is rebased first: its ops are re-applied onto HEAD,
        screened like a step's, and the version records ``rebased_from``.

        Raises:
            StaleCandidateError: It is stale and stores no ops to re-apply.
            RegistryError: It is not a candidate.
        """
        raise NotImplementedError  # the blocking form of aapprove (_blocking_twin)

    async def areject(
        self, version: int, *, reason: str = "rejected", tenant: str | None = None
    ) -> PromptVersion:
        """Async ``reject()``, on the store's async calls."""
        self._open("areject")
        decision = Decision(accepted=False, policy="manual", reason=_reason(reason))
        return await self._writer.reject(self._registry_of(tenant), version, decision)

    @_blocking_twin(areject)
    def reject(
        self, version: int, *, reason: str = "rejected", tenant: str | None = None
    ) -> PromptVersion:
        """Reject a pending candidate; HEAD does not move."""
        raise NotImplementedError  # the blocking form of areject (_blocking_twin)

    # ---- background learning --------------------------------------------

    @property
    def learner(self) -> BackgroundLearner:
        """The background learner (created on first use, started by ``start()``)."""
        if self._learner is None:
            self._learner = BackgroundLearner(
                self._learner_parts, self._learning, holder=self._holder
            )
        return self._learner

    def start(self) -> None:
        """Start learning in the background, on a thread and event loop of its own.

        Raises:
            ConfigurationError: There is no learner model.
            CombeeClosedError: ``close()`` was called.
        """
        self._open("start")
        self._engine(None)  # fail now, in the caller, if there is no learner model
        self.learner.start()
        _started.add(self)  # stopped at interpreter exit, releasing the lease

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the background learner after its current step; queued traces stay queued.

        Captured traces still in memory are written to the queue first. The
        Combee stays usable (``start()`` again); ``close()`` ends it. Nothing to
        do after ``close()``.
        """
        if not self._closed:
            self._stop(timeout)

    def _stop(self, timeout: float | None) -> None:
        if self._learner is not None:
            self._learner.stop(timeout)
        self._agent.server.close(flush=True)

    @contextlib.contextmanager
    def running(self) -> Iterator[Combee]:
        """``with combee.running(): ...`` starts the learner and stops it on exit."""
        self._open("running")
        self.start()
        try:
            yield self
        finally:
            self.stop()

    async def astart(self) -> None:
        """Async ``start()``: the learner still runs on its own thread and loop."""
        self._open("astart")
        await asyncio.to_thread(self.start)

    async def astop(self, timeout: float | None = 30.0) -> None:
        """Async ``stop()``, without blocking the caller's event loop."""
        await asyncio.to_thread(self.stop, timeout)

    # ---- a store of its own (from_conn_string) ---------------------------

    @classmethod
    def from_conn_string(cls, conn: str, **kwargs: Any) -> Combee:
        """A ``Combee`` on the store ``conn`` names, which it opens, sets up and closes.

        Example::

            with Combee.from_conn_string("postgresql://...", prompt_id="support") as combee:
                agent = create_agent(model, system_prompt="...", middleware=[combee.middleware()])

        Args:
            conn: ``"memory"``, a SQLite file path (or ``sqlite:///relative/path``,
                ``sqlite:////absolute/path``), or a PostgreSQL DSN (``postgresql://...``,
                ``postgresql+psycopg://...`` or libpq ``key=value`` pairs). Any other
                ``scheme://`` URL is refused, never taken for a file name.
            **kwargs: The other ``Combee`` arguments (``prompt_id=...``, ...).

        Raises:
            StoreError: The store cannot be opened, or ``conn`` is a form it does
                not support (the message names ``conn``, password masked).
            MissingExtraError: The backend's extra is not installed.
            ConfigurationError: ``store=`` was passed too, or another argument is bad.
        """
        from langgraph_combee._storage.open import open_owned

        if "store" in kwargs:
            raise ConfigurationError("store", kwargs["store"], "omitted: conn names the store")
        store, owned = open_owned(conn)
        try:
            combee = cls(store=store, **kwargs)
        except BaseException:
            owned.close()
            raise
        combee._owned = owned
        return combee

    def close(self, timeout: float | None = 30.0) -> None:
        """End this Combee: ``stop()``, then close the store if ``from_conn_string`` opened it.

        Idempotent. Afterwards ``feedback()``, ``start()``, ``learn()``, the
        version reads and the other calls raise ``CombeeClosedError``; ``describe()``
        still answers. Runs of an agent it serves keep being served the version
        cached at close (version 0, the app's own prompt, for a tenant none was
        cached for) and are not captured (counted in ``describe()["serving"]["dropped"]``).
        A learning step still running after ``timeout`` seconds is not cut short
        (a warning is logged): on a store of the app's own, a version it makes is
        written after ``close()`` returns; on a store ``close()`` closes, the step
        fails and its traces go back to the queue once their lease expires.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._stop(timeout)
        finally:
            # Runs still in flight must not restart the serving thread (against a
            # closed store it would retry their writes forever).
            self._agent.server.retire()
            owned, self._owned = self._owned, None
            if owned is not None:
                owned.close()

    async def aclose(self, timeout: float | None = 30.0) -> None:
        """Async ``close()``, without blocking the caller's event loop."""
        await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> Combee:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Combee:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- learning ------------------------------------------------------

    def learn(
        self,
        traces: Iterable[Trace | Mapping[str, Any]],
        *,
        epochs: int = 1,
        tenant: str | None = None,
        on_step: Callable[[StepReport], None] | None = None,
    ) -> LearnReport:
        """Learn from traces offline, synchronously. See ``alearn``."""
        self._open("learn")
        return _run_sync(
            self.alearn(traces, epochs=epochs, tenant=tenant, on_step=on_step), "learn"
        )

    async def alearn(
        self,
        traces: Iterable[Trace | Mapping[str, Any]],
        *,
        epochs: int = 1,
        tenant: str | None = None,
        on_step: Callable[[StepReport], None] | None = None,
    ) -> LearnReport:
        """Learn from traces offline, in batches, writing one candidate version per step.

        Args:
            traces: ``Trace`` objects (or dicts of their fields), in learning order.
            epochs: Passes over the traces.
            tenant: Whose playbook to learn (None: the shared one).
            on_step: Called with each step's report as soon as the step is done
                (progress display; the steps done before a failure stay known).

        Returns:
            A ``LearnReport`` with the version in force afterwards and every step.

        Raises:
            CombeeClosedError: ``close()`` was called.
        """
        self._open("alearn")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ConfigurationError("epochs", epochs, "an int >= 1")
        if on_step is not None and not callable(on_step):
            raise ConfigurationError("on_step", on_step, "None or a callable (StepReport) -> None")
        items = _as_traces(traces)
        return await self._stepper.learn(items, epochs=epochs, tenant=tenant, on_step=on_step)


def _build_agent(
    combee: Combee, *, scope: ScopeFn | None, evaluator: Evaluator | None
) -> AgentSide:
    """The agent side of ``combee``: its serving cache, canary router and capture.

    It gets only what it needs from the root: the per-tenant registries and
    queues (the cache's refresh and the capture buffer's writes), the replayer's
    record of the agent's model calls, and the platform store's binding.
    """
    server = Server(
        registry_for=combee._registry_of,
        queue_for=combee._queue_of,
        capture=combee._capture,
        serving=combee._serving,
        # The guard reads the user from this key: its entry is never dropped.
        keep_metadata=(combee._guard.user_key,) if combee._guard is not None else (),
        store_gone=functools.partial(loop_closed, combee.store),
    )
    server.listeners.extend(combee._serving.on_version)
    platform = combee._platform_store
    return AgentSide(
        prompt_id=combee.prompt_id,
        server=server,
        queue_for=combee._queue_of,
        scope=scope,
        evaluator=evaluator,
        feedback_wait_seconds=combee._capture.feedback_wait_seconds,
        canary_fraction=combee._acceptance.canary_fraction,
        on_model_call=combee._replayer.agent_calls.remember,
        bind_store=platform.bind if platform is not None else None,
    )


def _build_learner(combee: Combee) -> tuple[Stepper, LearnerParts]:
    """The learner side's parts, each given only what it needs from the root.

    The version writer publishes what it puts in force to this process's agent
    side through two callbacks; the learner flushes its captures before a pass.
    """
    agent = combee._agent
    learning, algorithm = combee._learning, combee._algorithm
    writer = VersionWriter(
        prompt_id=combee.prompt_id,
        acceptance=combee._acceptance,
        store=combee.store,
        holder=combee._holder,
        lease_seconds=learning.lease_seconds,
        pipeline=ApplyPipeline(
            guard=combee._guard,
            token_budget=algorithm.token_budget,
            embedder=algorithm.embedder,
        ),
        on_published=agent.publish,
        on_canary=agent.set_canary,
    )
    stepper = Stepper(
        prompt_id=combee.prompt_id,
        registry=combee._registry_of,
        engine=combee._engine,
        writer=writer,
        replayer=combee._replayer,
        callbacks=learning.callbacks,
        budget=learning.budget,
        step_log=combee._step_log,
        on_step=learning.on_step,
    )
    parts = LearnerParts(
        prompt_id=combee.prompt_id,
        store=combee.store,
        queue=combee._queue_of,
        registry=combee._registry_of,
        engine=combee._engine,
        step=stepper.step,
        writer=writer,
        budget=learning.budget,
        feedback_source=learning.feedback_source,
        on_missing_feedback=learning.on_missing_feedback,
        flush=agent.flush,
        ready=agent.bound,
        announce=stepper.announce,
    )
    return stepper, parts
