"""Acceptance policies: when is a candidate version swapped in.

``AcceptancePolicy`` is the base class every policy derives from. Its one
abstract method, ``decide``, looks at a candidate and the version in force and
returns a ``Decision`` (accept or reject, with its reason and figures), or None
to leave the candidate pending. The background learner also calls three hooks,
no-ops here, that a policy deciding from live traffic overrides:

- ``observe(trace)``: see each ready trace of the queue, with its feedback,
  once per learner pass (only when the policy overrides it: otherwise the
  learner does not read them);
- ``async review(context)``: make the decisions left pending, from what was
  observed (once per learner pass, before it learns);
- ``blocking(tenant) -> bool``: True while new learning for the tenant should
  wait (a canary trial).

``canary_fraction`` is the share of new runs the agent side serves the
registry's canary candidate (0: never). Which version a run gets is the agent
side's business; a policy only starts and ends a trial
(``PolicyContext.set_canary``).

A policy written before this base class (any object with a ``name`` and an
``async decide``) is still accepted (``as_policy`` wraps it); one that also has
hooks must subclass ``AcceptancePolicy``, or they would be silently ignored,
and one with a ``choose`` (routing runs itself, as ``CanaryGate`` once did) is
refused: routing is the agent side's, driven by ``canary_fraction``.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.situations import FOCUS_RULES
from langgraph_combee._core.types import Decision, PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._learner.agent_runner import AgentFactory, Grade, agent_runner, question_of
from langgraph_combee._settings import AUTO

if TYPE_CHECKING:
    from langgraph_combee._storage.registry import PromptRegistry

logger = logging.getLogger("langgraph_combee.learner")

HOOKS = ("observe", "review", "blocking")


class VersionActions(Protocol):
    """What a policy's context does through the version writer (``versions.VersionWriter``).

    A protocol, so that the policies need not import the writer that calls them.
    """

    async def accept(
        self, registry: PromptRegistry, version: int, decision: Decision
    ) -> PromptVersion: ...

    async def reject(
        self, registry: PromptRegistry, version: int, decision: Decision
    ) -> PromptVersion: ...

    async def rollback(
        self, registry: PromptRegistry, version: int, *, reason: str
    ) -> PromptVersion: ...

    async def set_canary(self, registry: PromptRegistry, version: PromptVersion | None) -> None: ...


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may touch: the tenant's registry, and decisions through the writer.

    A policy that decides later (``review``) accepts, rejects and rolls back
    through ``accept``, ``reject`` and ``rollback`` here: they go through the
    version writer, so they are serialised with every other writer, a candidate
    whose parent is no longer HEAD is rebased onto HEAD first, and a version put
    in force is published to the agent side of this process at once.
    """

    registry: PromptRegistry
    writer: VersionActions

    @property
    def tenant(self) -> str | None:
        """The tenant whose prompt is being decided."""
        return self.registry.tenant

    async def accept(self, version: int, decision: Decision) -> PromptVersion:
        """Accept a candidate (rebased onto HEAD if needed) and serve it."""
        return await self.writer.accept(self.registry, version, decision)

    async def reject(self, version: int, decision: Decision) -> PromptVersion:
        """Reject a candidate."""
        return await self.writer.reject(self.registry, version, decision)

    async def rollback(self, version: int, *, reason: str) -> PromptVersion:
        """Put an accepted version back in force as a new version, and serve it."""
        return await self.writer.rollback(self.registry, version, reason=reason)

    async def set_canary(self, version: PromptVersion | None) -> None:
        """Start (a candidate) or end (None) the tenant's canary trial, and tell the agent side."""
        await self.writer.set_canary(self.registry, version)


class AcceptancePolicy(abc.ABC):
    """Decides whether a candidate version replaces the current one.

    Subclass it and implement ``decide``; override the hooks only when the
    policy decides from live traffic (see the module docstring). Example::

        class SmallSteps(AcceptancePolicy):
            name = "small_steps"

            async def decide(self, candidate, current, context):
                added = candidate.ops_summary.get("add", 0)
                return Decision(accepted=added <= 3, policy=self.name, reason=f"{added} added")

    Attributes:
        name: Recorded as ``Decision.policy`` by the built-in policies.
        canary_fraction: Share of new runs served the canary candidate, in
            [0, 1); 0 (default) for a policy that runs no trials.
    """

    name: str = "custom"
    canary_fraction: float = 0.0

    @abc.abstractmethod
    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """Return a decision now, or None to leave the candidate pending.

        Args:
            candidate: The stored candidate (``status == "candidate"``).
            current: The version it was learned from (its ``parent``).
            context: The tenant's registry and the writer's decisions.
        """

    def observe(self, trace: Trace) -> None:  # noqa: B027 (a hook: no-op unless overridden)
        """See a ready trace of the queue, with its feedback (no-op)."""

    async def review(self, context: PolicyContext) -> None:  # noqa: B027 (likewise)
        """Make pending decisions from what was observed (no-op)."""

    def blocking(self, tenant: str | None) -> bool:
        """True while new learning for ``tenant`` must wait (default: never)."""
        return False

    def _bind(self, prompt_id: str) -> None:  # noqa: B027 (likewise)
        """Told by each version writer built on the policy which prompt it decides.

        A no-op: a policy without state of its own may decide for many prompts.
        """


def overrides(policy: AcceptancePolicy, hook: str) -> bool:
    """Whether ``policy``'s class overrides the base class's no-op ``hook``."""
    return getattr(type(policy), hook) is not getattr(AcceptancePolicy, hook)


class _Wrapped(AcceptancePolicy):
    """A policy written as an object with ``name`` and ``async decide``, not a subclass."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.name = str(policy.name)

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """The wrapped policy's ``decide``."""
        verdict = self.policy.decide(candidate, current, context)
        decision: Decision | None = await verdict if inspect.isawaitable(verdict) else verdict
        return decision

    def __repr__(self) -> str:
        return repr(self.policy)


def as_policy(value: object, name: str = "acceptance") -> AcceptancePolicy:
    """``value`` as an ``AcceptancePolicy``, wrapping an older duck-typed one.

    Raises:
        ConfigurationError: ``value`` is neither a subclass instance nor an object
            with a ``name`` and a callable ``decide``; or it is such an object with
            hooks (``observe``, ``review``, ``blocking``) or a ``canary_fraction``,
            which only a subclass gets used; or its ``canary_fraction`` is not a
            number in [0, 1); or it has a ``choose`` (the agent side routes runs by
            ``canary_fraction``).
    """
    if callable(getattr(value, "choose", None)):
        # A policy that picked each run's version itself: that is the agent
        # side's router now, and a choose() left in place would silently stop routing.
        raise ConfigurationError(
            name,
            value,
            "a policy without choose(): set canary_fraction instead (the agent side "
            "serves the registry's canary candidate to that share of runs)",
        )
    if isinstance(value, AcceptancePolicy):
        _refuse_mismatched_hooks(value, name)
        fraction = value.canary_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not 0 <= fraction < 1
        ):
            raise ConfigurationError(
                f"{name}.canary_fraction", fraction, "a number in [0, 1) (0: no canary)"
            )
        return value
    allowed = "an AcceptancePolicy subclass instance (or an object with name and async decide())"
    if isinstance(value, type) or not callable(getattr(value, "decide", None)):
        raise ConfigurationError(name, value, allowed)
    if not isinstance(getattr(value, "name", None), str):
        raise ConfigurationError(name, value, allowed + ": it has no str name")
    # canary_fraction too: the wrapper's is the base class's 0, so a trial the
    # policy starts would silently be served to no run.
    hooks = [hook for hook in (*HOOKS, "canary_fraction") if hasattr(value, hook)]
    if hooks:
        raise ConfigurationError(
            name,
            value,
            f"an AcceptancePolicy subclass: its {', '.join(hooks)} would not be used "
            "on an object that does not derive from it",
        )
    return _Wrapped(value)


def _refuse_mismatched_hooks(policy: AcceptancePolicy, name: str) -> None:
    """Refuse a hook written ``async`` where it is called plainly, or the other way round.

    The learner calls ``observe`` and ``blocking`` plainly: an ``async def`` one
    would return a coroutine that never runs (and that, as ``blocking``'s answer,
    is true: learning would wait for ever). It awaits ``review``: a plain one
    would fail every pass. ``decide`` may be either (its verdict is awaited when
    it is awaitable), as for a policy that does not derive from the base class.
    """
    for hook in HOOKS:
        if not overrides(policy, hook):
            continue
        is_async = inspect.iscoroutinefunction(getattr(type(policy), hook))
        if is_async != (hook == "review"):
            wanted = "an async def" if hook == "review" else "a plain def (not async)"
            raise ConfigurationError(
                f"{name}.{hook}", getattr(policy, hook), f"{wanted}: the learner calls it so"
            )


async def decide(
    policy: AcceptancePolicy,
    candidate: PromptVersion,
    current: PromptVersion,
    context: PolicyContext,
) -> Decision | None:
    """``policy.decide``, except that a candidate flagged ``needs_approval`` stays pending.

    Such a candidate carries rules the guard held as policy changes: only a person
    (``combee approve``) may accept it, whatever the policy.

    A policy that raises, or answers anything but a ``Decision`` or None, leaves
    the candidate pending (logged): it is stored already, its traces are learned,
    and a step failing for it would only be learned again into one more
    candidate the policy fails on, pass after pass. A person decides it instead.
    """
    if candidate.needs_approval:
        return None
    try:
        verdict = policy.decide(candidate, current, context)
        answer = await verdict if inspect.isawaitable(verdict) else verdict
    except Exception:
        logger.exception(
            "acceptance policy %r failed on v%d of prompt %r; it stays pending "
            "(combee approve / reject)",
            policy,
            candidate.version,
            candidate.prompt_id,
        )
        return None
    if answer is not None and not isinstance(answer, Decision):
        logger.error(
            "acceptance policy %r answered %r for v%d of prompt %r, not a Decision or None; "
            "it stays pending (combee approve / reject)",
            policy,
            answer,
            candidate.version,
            candidate.prompt_id,
        )
        return None
    return answer


class AcceptAll(AcceptancePolicy):
    """Accept every candidate at once (the default)."""

    name = "accept_all"

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """Accept the candidate."""
        return Decision(accepted=True, policy=self.name, reason="every candidate is accepted")

    def __repr__(self) -> str:
        return "AcceptAll()"


class ManualApproval(AcceptancePolicy):
    """Leave every candidate pending until ``combee.approve(v)`` or ``combee.reject(v)``.

    The learner keeps learning from the version in force meanwhile; each
    pending candidate is that version plus one step's edits.
    """

    name = "manual"

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """Leave the candidate pending."""
        return None

    def __repr__(self) -> str:
        return "ManualApproval()"


Runner = Callable[[PromptVersion, Any], "float | bool | Awaitable[float | bool]"]


def _finite(name: str, value: object, *, at_least: float | None = None) -> float:
    """``value`` as a float, if it is a finite number (at least ``at_least``).

    NaN would fail every comparison a gate makes, so it would reject every
    candidate (or let every one through) without a word.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (at_least is not None and value < at_least)
    ):
        bound = "" if at_least is None else f" >= {at_least:g}"
        raise ConfigurationError(name, value, f"a finite number{bound}")
    return float(value)


class ValidationGate(AcceptancePolicy):
    """Score candidate and current version on held-out examples; accept if not worse.

    ``ValidationGate.from_agent`` builds the runner from the app's own
    ``create_agent`` factory (see docs/acceptance.md)::

        gate = ValidationGate.from_agent(
            examples,
            agent=lambda prompt: create_agent(model, tools, system_prompt=prompt),
            system_prompt=SYSTEM_PROMPT,
            grade=lambda example, answer: example["label"] in answer,
        )

    Args:
        examples: Held-out examples, passed one by one to ``runner``.
        runner: ``(version, example) -> score`` (sync or async); a bool counts as
            1.0 / 0.0. It must run the agent *without* ``CombeeMiddleware`` (the
            middleware appends the version in force, so the candidate would be
            served on top of it), with ``version.render()`` appended to the
            app's prompt, and grade the answer. An example whose runner raises
            scores 0.0 for that version.
        min_delta: Accept when ``mean(candidate) - mean(current) >= min_delta``:
            0 (default) accepts a candidate that is not worse, 0.05 one that is
            better by at least 0.05, -0.05 one that is not worse by more than 0.05.
        max_concurrency: Most runner calls in flight.
    """

    name = "validation"

    def __init__(
        self,
        examples: Sequence[Any],
        runner: Runner,
        *,
        min_delta: float = 0.0,
        max_concurrency: int = 8,
    ) -> None:
        if not isinstance(examples, Sequence) or isinstance(examples, str) or not examples:
            raise ConfigurationError("examples", examples, "a non-empty sequence of examples")
        if not callable(runner):
            raise ConfigurationError("runner", runner, "a callable (version, example) -> score")
        if max_concurrency < 1:
            raise ConfigurationError("max_concurrency", max_concurrency, "an int >= 1")
        self.examples = list(examples)
        self.runner = runner
        self.min_delta = _finite("min_delta", min_delta)
        self.max_concurrency = max_concurrency

    @classmethod
    def from_agent(
        cls,
        examples: Sequence[Any],
        *,
        agent: AgentFactory,
        system_prompt: str,
        grade: Grade,
        question: Callable[[Any], str] = question_of,
        focus_rules: int = FOCUS_RULES,
        focus_embedder: Embedder | Literal["auto"] | None = AUTO,
        min_delta: float = 0.0,
        max_concurrency: int = 8,
    ) -> ValidationGate:
        """A gate whose runner runs the agent ``agent(prompt)`` builds under each version.

        For each example and version, the agent is built with ``system_prompt``
        and the version's playbook appended (plus the rules the example's request
        names, as the middleware serves them), invoked on the request, and its
        last AI message graded.

        Args:
            examples: Held-out examples: strs, dicts with an ``"input"``, or traces.
            agent: ``(system_prompt) -> agent``, e.g. ``lambda prompt:
                create_agent(model, tools, system_prompt=prompt)``, *without*
                ``CombeeMiddleware`` (it would append the version in force).
            system_prompt: The app's own system prompt.
            grade: ``(example, answer) -> score`` (a bool counts 1/0; may be async).
            question: ``(example) -> request``; default: the str, ``"input"``
                or ``.input`` of the example.
            focus_rules: As ``ServingSettings.focus_rules``.
            focus_embedder: As ``ServingSettings.focus_embedder``.
            min_delta: As for ``ValidationGate``.
            max_concurrency: Most agent runs in flight.
        """
        runner = agent_runner(
            agent,
            system_prompt=system_prompt,
            grade=grade,
            question=question,
            focus_rules=focus_rules,
            focus_embedder=focus_embedder,
        )
        return cls(examples, runner, min_delta=min_delta, max_concurrency=max_concurrency)

    async def _score(self, version: PromptVersion) -> float:
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def one(example: Any) -> float:
            async with semaphore:
                try:
                    if inspect.iscoroutinefunction(self.runner):
                        value = await self.runner(version, example)
                    else:
                        value = await asyncio.to_thread(self.runner, version, example)
                        if inspect.isawaitable(value):
                            value = await value
                except Exception:
                    return 0.0
                return float(value)

        scores = await asyncio.gather(*(one(e) for e in self.examples))
        return sum(scores) / len(scores)

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """Run both versions on the examples and compare the mean scores."""
        cand, cur = await asyncio.gather(self._score(candidate), self._score(current))
        delta = cand - cur
        accepted = delta >= self.min_delta
        return Decision(
            accepted=accepted,
            policy=self.name,
            reason=(
                f"candidate v{candidate.version} scored {cand:.3f} vs {cur:.3f} for "
                f"v{current.version} on {len(self.examples)} examples (delta {delta:+.3f}): "
                f"{_verdict(accepted, self.min_delta)}"
            ),
            metrics={
                "candidate_score": cand,
                "current_score": cur,
                "delta": delta,
                "examples": float(len(self.examples)),
            },
        )

    def __repr__(self) -> str:
        return f"ValidationGate(examples={len(self.examples)}, min_delta={self.min_delta})"


def _verdict(accepted: bool, min_delta: float) -> str:
    """What ``delta >= min_delta`` means, in words, either way."""
    if min_delta > 0:
        bar = f"better by at least {min_delta:g}"
        return bar if accepted else f"not {bar}"
    if min_delta < 0:
        return (
            f"not worse by more than {-min_delta:g}"
            if accepted
            else f"worse by more than {-min_delta:g}"
        )
    return "not worse" if accepted else "worse"


def trace_score(trace: Trace) -> float | None:
    """A trace's live score: ``feedback.score``, else 1/0 from ``correct``, else None."""
    fb = trace.feedback
    if fb is None:
        return None
    if fb.score is not None:
        return float(fb.score)
    if fb.correct is not None:
        return 1.0 if fb.correct else 0.0
    return None


@dataclass
class _Arm:
    total: float = 0.0
    runs: int = 0

    @property
    def mean(self) -> float:
        return self.total / self.runs if self.runs else 0.0


@dataclass
class _Watch:
    version: int
    previous: int
    baseline: float
    start_runs: int
    start_total: float


@dataclass
class _TenantState:
    arms: dict[int, _Arm] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    watch: _Watch | None = None
    trial: int | None = None  # the canary under trial, as last read from the registry


class CanaryGate(AcceptancePolicy):
    """Serve a candidate to a fraction of live runs; decide from their feedback.

    The candidate becomes the registry's canary; the agent side serves it to
    ``canary_fraction`` (= ``fraction``) of new runs, stable per run key.

    While a trial runs, new learning for the tenant waits. Once both the
    candidate and the version in force have ``min_runs`` scored runs, the
    candidate is accepted if its mean score is at least the current mean minus
    ``margin``, else rejected. After an acceptance, the new version is watched
    for ``min_runs`` more scored runs: if its mean falls below the old version's
    by more than ``margin``, it is rolled back automatically.

    Scores come from trace feedback (``score``, else ``correct`` as 1/0) of the
    traces the learner takes from the queue, so every replica's runs count.

    Args:
        fraction: Share of new runs served the candidate, in (0, 1).
        min_runs: Scored runs needed on each arm before deciding.
        margin: Tolerated drop in mean score.
        rollback: Whether a regression after acceptance rolls back.
    """

    name = "canary"

    def __init__(
        self,
        *,
        fraction: float = 0.1,
        min_runs: int = 20,
        margin: float = 0.0,
        rollback: bool = True,
    ) -> None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0 < fraction < 1
        ):
            raise ConfigurationError("fraction", fraction, "a number in (0, 1)")
        if isinstance(min_runs, bool) or not isinstance(min_runs, int) or min_runs < 1:
            raise ConfigurationError("min_runs", min_runs, "an int >= 1")
        if not isinstance(rollback, bool):
            raise ConfigurationError("rollback", rollback, "True or False")
        self.margin = _finite("margin", margin, at_least=0.0)
        self.fraction = float(fraction)
        self.canary_fraction = self.fraction
        self.min_runs = min_runs
        self.rollback = rollback
        self._lock = threading.Lock()
        self._tenants: dict[str | None, _TenantState] = {}
        self._bound: str | None = None  # the prompt it decides (see _bind)

    def _bind(self, prompt_id: str) -> None:
        """Refuse a second prompt: the trial state is kept per tenant, not per prompt.

        ``observe`` and ``blocking`` are told a tenant, not a prompt; a gate shared
        by two prompts would count one prompt's runs for the other's versions and
        answer ``blocking`` from whichever registry its last ``review`` read.
        """
        with self._lock:
            bound = self._bound = self._bound or prompt_id
        if bound != prompt_id:
            raise ConfigurationError(
                "acceptance",
                self,
                f"a CanaryGate of its own: this one already decides prompt {bound!r} "
                "(its trial state is per tenant, not per prompt)",
            )

    def _state(self, tenant: str | None) -> _TenantState:
        with self._lock:
            return self._tenants.setdefault(tenant, _TenantState())

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        """Start a trial: the candidate becomes the canary; the decision comes later."""
        await context.set_canary(candidate)
        self._state(context.tenant).trial = candidate.version
        return None

    def observe(self, trace: Trace) -> None:
        """Count a scored trace toward the arm of the version it was served."""
        score = trace_score(trace)
        if score is None or trace.prompt_version is None:
            return
        state = self._state(trace.tenant)
        with self._lock:
            if trace.id in state.seen:
                return
            state.seen.add(trace.id)
            arm = state.arms.setdefault(trace.prompt_version, _Arm())
            arm.total += score
            arm.runs += 1

    def blocking(self, tenant: str | None) -> bool:
        """True while a trial runs for the tenant (as ``review`` last read the registry)."""
        return self._state(tenant).trial is not None

    def arm(self, tenant: str | None, version: int) -> tuple[int, float]:
        """(scored runs, mean score) observed for a version."""
        state = self._state(tenant)
        with self._lock:
            arm = state.arms.get(version, _Arm())
            return arm.runs, arm.mean

    async def review(self, context: PolicyContext) -> None:
        """Roll back a regression after acceptance, and decide a finished trial."""
        if self.rollback:
            await self._check_regression(context)
        await self._decide_trial(context)

    async def _check_regression(self, context: PolicyContext) -> None:
        registry, tenant = context.registry, context.tenant
        state = self._state(tenant)
        watch = state.watch
        if watch is None:
            return
        head = await registry.ahead()
        with self._lock:
            arm = state.arms.get(watch.version, _Arm())
            runs = arm.runs - watch.start_runs
            mean = (arm.total - watch.start_total) / runs if runs else 0.0
        if head.version != watch.version:
            state.watch = None
            return
        if runs < self.min_runs:
            return
        if mean >= watch.baseline - self.margin:
            state.watch = None
            return
        reason = (
            f"live score of v{watch.version} fell to {mean:.3f} over {runs} runs "
            f"from {watch.baseline:.3f} (margin {self.margin})"
        )
        # Each write comes before the state that says it is done is dropped: one
        # that fails (a store blip) leaves the watch and the trial standing, and
        # the next pass tries again.
        canary = await registry.acanary()
        if canary is not None:  # built on the version that regressed: drop it too
            await context.reject(
                canary.version,
                Decision(accepted=False, policy=self.name, reason=f"superseded: {reason}"),
            )
            await self._end_trial(context)
        await context.rollback(watch.previous, reason=reason)
        state.watch = None

    async def _decide_trial(self, context: PolicyContext) -> None:
        registry, tenant = context.registry, context.tenant
        canary = await registry.acanary()
        # The registry is the truth (a trial another learner started, or ended):
        # ``blocking`` answers from this reading.
        self._state(tenant).trial = None if canary is None else canary.version
        if canary is None:
            return
        head = await registry.ahead()
        c_runs, c_mean = self.arm(tenant, canary.version)
        h_runs, h_mean = self.arm(tenant, head.version)
        if min(c_runs, h_runs) < self.min_runs:
            return
        accepted = c_mean >= h_mean - self.margin
        decision = Decision(
            accepted=accepted,
            policy=self.name,
            reason=(
                f"canary v{canary.version} scored {c_mean:.3f} over {c_runs} runs vs "
                f"{h_mean:.3f} over {h_runs} for v{head.version} (margin {self.margin})"
            ),
            metrics={
                "candidate_score": c_mean,
                "candidate_runs": float(c_runs),
                "current_score": h_mean,
                "current_runs": float(h_runs),
            },
        )
        # The verdict is written before the trial ends: a write that fails leaves
        # the registry's canary standing, decided again next pass (a canary that is
        # decided is no longer one, whether or not the trial was ended).
        if not accepted:
            await context.reject(canary.version, decision)
            await self._end_trial(context)
            return
        # HEAD may have moved during the trial (a rollback, an approval): the
        # writer then rebases the canary's edits onto it, and the watch compares
        # with the version it actually replaced.
        accepted_version = await context.accept(canary.version, decision)
        await self._end_trial(context)
        previous = accepted_version.parent if accepted_version.parent is not None else head.version
        state = self._state(tenant)
        with self._lock:
            arm = state.arms.get(canary.version, _Arm())
            state.watch = _Watch(canary.version, previous, h_mean, arm.runs, arm.total)

    async def _end_trial(self, context: PolicyContext) -> None:
        await context.set_canary(None)
        self._state(context.tenant).trial = None

    def __repr__(self) -> str:
        return (
            f"CanaryGate(fraction={self.fraction}, min_runs={self.min_runs}, "
            f"margin={self.margin}, rollback={self.rollback})"
        )
