"""The settings objects ``Combee`` takes: capture, serving, learner and algorithm.

Each is a frozen dataclass checked when it is built: a value of the wrong type
or range raises ``ConfigurationError`` naming the field, the value and what is
allowed, before any ``Combee`` (or store write) exists. They are checked here
only: the agent side, the learner, verified adoption and the learning engine are
handed these very objects and read their fields as they are. So the module sits
low in the layer contract, under every part that reads them, and names the
higher parts' types it mentions (a role profile, a feedback source) by the
protocols they satisfy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager, Callbacks
from langchain_core.language_models import BaseChatModel

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.nearest import EMBEDDER_ALLOWED, embedder_ok
from langgraph_combee._core.situations import FOCUS_RULES, FOCUS_RULES_ALLOWED, focus_rules_ok
from langgraph_combee._core.types import Feedback, PromptVersion, StepReport
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._llm.budget import LearnerBudget

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "ROLES",
    "AlgorithmSettings",
    "CaptureSettings",
    "DropPolicy",
    "Durability",
    "FeedbackSource",
    "LearnerSettings",
    "MissingFeedback",
    "ReplayMode",
    "Roles",
    "ServingSettings",
    "VersionListener",
]

DropPolicy = Literal["drop_oldest", "drop_newest"]
"""Which captured trace goes when the capture buffer is full."""

Durability = Literal["buffered", "write_through"]
"""Whether a captured trace waits for the next flush or is written before its run returns."""

ReplayMode = bool | Literal["auto"]
"""``"auto"``: on when the agent's model and an evaluator are known; True: on whenever
the agent's model is known (scoring by ground truth where there is no evaluator); False: off."""

ROLES: tuple[str, ...] = ("auto", "full", "small")
"""The role profiles ``AlgorithmSettings.roles`` names by string."""

MissingFeedback = Literal["learn", "drop"]
"""What the learner does with a trace whose feedback wait ran out."""

VersionListener = Callable[[PromptVersion, "PromptVersion | None"], None]
"""Told ``(new, previous)`` each time this process puts a version in force."""

_MAX_STEP_BACKOFF = 60.0


@runtime_checkable
class FeedbackSource(Protocol):
    """Reads feedback of runs by run id, e.g. ``LangSmithFeedback``.

    ``fetch`` is called on a worker thread with at most ``batch_size`` run ids
    and returns a ``Feedback`` for each run that has any (runs without feedback
    are left out). It may raise; the poller counts and logs the error.
    """

    interval_seconds: float
    batch_size: int
    max_runs: int
    timeout_seconds: float

    def fetch(self, run_ids: Sequence[str]) -> Mapping[str, Feedback]:
        """Feedback of ``run_ids``, one ``Feedback`` per run that has any."""
        ...


@runtime_checkable
class Roles(Protocol):
    """What ``AlgorithmSettings.roles`` takes besides a name: a role profile.

    ``RoleProfile`` (the learning algorithm's base class) satisfies it; the
    engine reads the setting with ``make_roles``. Named structurally here
    because the algorithm sits above these settings in the layer contract.
    """

    def active(self) -> Any:
        """The profile that answers now."""
        ...

    def needs_reflection(self, trace: Any) -> bool:
        """Whether ``trace`` is worth a reflector call."""
        ...

    def describe(self) -> dict[str, Any]:
        """The profile, how it was chosen and why."""
        ...

    async def reflect(self, *args: Any, **kwargs: Any) -> Any:
        """One reflection on a trace."""

    async def curate(self, *args: Any, **kwargs: Any) -> Any:
        """One curator call over a group of reflections."""

    async def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        """One aggregator call over the curators' proposals."""


MAX_EXAMPLES = 200
"""Most worked examples ``AlgorithmSettings.examples`` allows."""
EXAMPLE_TURNS = 4
"""Worked examples served per request as turns by default (``ServingSettings.example_turns``)."""
MAX_EXAMPLE_TURNS = 20
"""Most worked examples ``ServingSettings.example_turns`` serves per request."""


def _int(name: str, value: object, minimum: int | None, *, none: bool = False) -> None:
    if value is None and none:
        return
    ok = isinstance(value, int) and not isinstance(value, bool)
    if ok and minimum is not None:
        ok = value >= minimum  # type: ignore[operator]
    if not ok:
        prefix = "None or " if none else ""
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ConfigurationError(name, value, f"{prefix}an int{bound}")


def _number(
    name: str,
    value: object,
    *,
    low: float = 0.0,
    strict: bool = True,
    high: float | None = None,
    none: bool = False,
) -> None:
    """A finite number above ``low`` (or at least ``low`` unless ``strict``), up to ``high``."""
    if value is None and none:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        number = float(value)  # type: ignore[arg-type]
        ok = (number > low if strict else number >= low) and (high is None or number <= high)
    if not ok:
        prefix = "None or " if none else ""
        if high is not None:
            allowed = f"{prefix}a number from {low:g} to {high:g}"
        else:
            allowed = f"{prefix}a finite number {'>' if strict else '>='} {low:g}"
        raise ConfigurationError(name, value, allowed)


def _choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    if value not in allowed:
        raise ConfigurationError(name, value, " or ".join(repr(a) for a in allowed))


def _callbacks_ok(value: object) -> bool:
    # A str or a lone handler would only fail at the learner's first call, in the background.
    if value is None or isinstance(value, BaseCallbackManager):
        return True
    return isinstance(value, (list, tuple)) and all(
        isinstance(handler, BaseCallbackHandler) for handler in value
    )


class _Settings:
    """What the four settings objects share: a short repr and ``replace``."""

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, checked like a new one."""
        known = {f.name for f in fields(self)}  # type: ignore[arg-type]
        for name in changes:
            if name not in known:
                raise ConfigurationError(
                    name, changes[name], f"a field of {type(self).__name__}: {sorted(known)}"
                )
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return type(self)(**{**values, **changes})


@dataclass(frozen=True, kw_only=True)
class CaptureSettings(_Settings):
    """What the agent side captures of each run, and how it reaches the trace queue.

    Example::

        Combee(prompt_id="support", capture=CaptureSettings(durability="write_through"))

    Attributes:
        capture_limit: Most captured traces buffered in memory before
            ``drop_policy`` applies (an int >= 1).
        drop_policy: ``"drop_oldest"`` (default) or ``"drop_newest"``: which
            trace goes when the buffer is full.
        flush_seconds: How often the background thread writes captured traces
            to the queue: the longest a trace waits in memory before its first
            write attempt while the store answers.
        durability: ``"buffered"`` (default: a captured trace waits in memory
            until the next flush, and dies with the process) or
            ``"write_through"`` (each trace is written to the store before its
            run returns; while the store fails, runs fall back to the buffer,
            counted). See docs/faults.md.
        max_message_chars: Most characters a captured trace keeps per text
            field (message, tool result, input, output, each string in its
            metadata); the middle is cut with a marker. None: no limit; else
            an int >= 200.
        max_trace_chars: Most characters a captured trace keeps in all,
            metadata included; beyond it metadata entries are dropped from the
            end (never the package's own), then messages from the middle of the
            run. None: no limit; else an int >= 200.
        feedback_wait_seconds: How long a captured trace without feedback is
            held for ``feedback()`` (or ``LearnerSettings.feedback_source``)
            before the learner may take it; stamped when the run is captured,
            so set it on every replica that captures. 0 (default): no wait.
    """

    capture_limit: int = 10_000
    drop_policy: DropPolicy = "drop_oldest"
    flush_seconds: float = 0.5
    durability: Durability = "buffered"
    max_message_chars: int | None = 20_000
    max_trace_chars: int | None = 100_000
    feedback_wait_seconds: float = 0.0

    def __post_init__(self) -> None:
        _int("capture_limit", self.capture_limit, 1)
        _choice("drop_policy", self.drop_policy, ("drop_oldest", "drop_newest"))
        _number("flush_seconds", self.flush_seconds)
        _choice("durability", self.durability, ("buffered", "write_through"))
        _int("max_message_chars", self.max_message_chars, 200, none=True)
        _int("max_trace_chars", self.max_trace_chars, 200, none=True)
        _number("feedback_wait_seconds", self.feedback_wait_seconds, strict=False)


_auto_embedder: list[Embedder | None] = [None]  # what "auto" settled on in this process


def settle_auto_embedder(embedder: Embedder | None) -> None:
    """Make ``embedder`` what ``focus_embedder="auto"`` serves by in this process."""
    _auto_embedder[0] = embedder


AUTO: Literal["auto"] = "auto"
"""``ServingSettings.focus_embedder``'s default: the bundled embedder where it is installed."""
FOCUS_EMBEDDER_ALLOWED = f"'auto', {EMBEDDER_ALLOWED}"
"""What ``ServingSettings.focus_embedder`` may be (``ConfigurationError``'s message)."""


@dataclass(frozen=True, kw_only=True)
class ServingSettings(_Settings):
    """How the agent side serves the prompt in force.

    Example::

        Combee(prompt_id="support", serving=ServingSettings(refresh_seconds=1.0))

    Attributes:
        refresh_seconds: How stale the agent's cached HEAD may get; replicas
            sharing a store converge within this interval (a finite number > 0).
        first_read_seconds: Longest a run waits for the first HEAD read of its
            tenant in this process; past it the run is served version 0 (the
            app's own prompt) and the read goes on in the background.
        on_version: Callables ``(new, previous) -> None`` told each time this
            process puts a version in force (acceptance, approval, rollback),
            e.g. ``LangSmithPromptHub(client)``.
        focus_rules: Most learned rules that match a request (all the words
            of one of their situations occur in its latest human message)
            repeated after the playbook, under "The rules that match this
            request"; verified adoption replays with the same text. The
            middleware, ``combee.node()`` and ``combee.wrap_model()`` serve
            them, ``combee.system_prompt()`` when given ``request=``. 0 serves
            the playbook alone (an int from 0 to 20).
        recover_tool_calls: The middleware makes the tool calls a model wrote
            as text in its reply (``{"name": ..., "arguments": {...}}``, as
            small models on llama.cpp, Ollama or LM Studio often do with a
            plain ``ChatOpenAI``) real calls to the agent's bound tools, their
            arguments checked against each tool's schema; verified adoption
            reads its replays the same way. Replies with native tool calls are
            left alone. True (default) or False.
        focus_embedder: An ``Embedder`` (``embed(texts) -> vectors``, e.g.
            ``langgraph_combee.local.LocalEmbedder`` or a LangChain
            ``Embeddings`` adapted to it): a request that names no learned
            rule's words is served, under the same heading, the rule closest to
            it in meaning (the best cosine of one of the rule's cases, at least
            0.2). Costs one embedding call per such request on the model
            call's path and one per version for its rules; verified adoption
            replays with the same text. Only rules that are one of several
            values of one kind of action ("answer X8MB" beside "answer
            K3VW", one tool argument's values) are served by meaning: a rule
            that adds to the reply, given to a request it does not fit, spoils
            it. An embedder that fails leaves the focus to the words
            (``describe()["serving"]["focus_embed_errors"]``). ``"auto"``
            (default): ``Combee`` uses the bundled all-MiniLM-L6-v2
            (``local.LocalEmbedder``, loaded once per process) when the
            ``[local-embed]`` extra and its weights are installed, else the
            words only (not loaded at all when ``focus_rules`` and
            ``example_turns`` are both 0); ``describe()["serving"]["rules_by_meaning"]``
            says which and why. None: words only.
        drop_rivals: While rules match a request (by words or by meaning),
            the playbook served for it leaves out their rivals: keyword rules
            whose action is the reply itself, one value, in the same words
            with another value ("answer SEC-9D" when "answer PAY-2D" matches;
            ``situations.exclusive``). Actions that may add up (tags, tool
            calls, "call ``lookup`` first"), rules in prose and the rules the
            request names stay. A small model given the matching rule and two
            dozen rivals often answers with a rival. The served text then differs per request
            from the first rule left out (a provider's prompt cache hits up to
            there). Verified adoption replays with the same text. True
            (default) or False (the whole playbook for every request).
        example_turns: How many of the playbook's worked examples
            (``AlgorithmSettings.examples``) the middleware serves a request, as
            conversation turns: the examples closest to its latest human message
            (by ``focus_embedder`` when one is set, else by shared words, newest
            first on a tie), each a user turn with the past request and an
            assistant turn with its right answer, put between the system prompt
            and the conversation of the model call that answers the human
            message (not of those after a tool result). The system prompt then
            carries no examples, and the captured trace never holds these
            turns. 0 serves every kept example in the system prompt, after the
            rules, instead (where ``combee.system_prompt()``, ``combee.node()``
            and ``combee.wrap_model()``, which add no turns, always put them).
            An int from 0 to 20; default 4.
    """

    refresh_seconds: float = 5.0
    first_read_seconds: float = 1.0
    on_version: Sequence[VersionListener] = ()
    focus_rules: int = FOCUS_RULES
    recover_tool_calls: bool = True
    focus_embedder: Embedder | Literal["auto"] | None = AUTO
    drop_rivals: bool = True
    example_turns: int = EXAMPLE_TURNS

    def __post_init__(self) -> None:
        if (
            isinstance(self.example_turns, bool)
            or not isinstance(self.example_turns, int)
            or not 0 <= self.example_turns <= MAX_EXAMPLE_TURNS
        ):
            raise ConfigurationError(
                "example_turns", self.example_turns, f"an int from 0 to {MAX_EXAMPLE_TURNS}"
            )
        if not isinstance(self.drop_rivals, bool):
            raise ConfigurationError("drop_rivals", self.drop_rivals, "True or False")
        embedder = self.focus_embedder
        if not (embedder == AUTO if isinstance(embedder, str) else embedder_ok(embedder)):
            raise ConfigurationError("focus_embedder", embedder, FOCUS_EMBEDDER_ALLOWED)
        if not isinstance(self.recover_tool_calls, bool):
            raise ConfigurationError("recover_tool_calls", self.recover_tool_calls, "True or False")
        if not focus_rules_ok(self.focus_rules):
            raise ConfigurationError("focus_rules", self.focus_rules, FOCUS_RULES_ALLOWED)
        _number("refresh_seconds", self.refresh_seconds)
        _number("first_read_seconds", self.first_read_seconds)
        if isinstance(self.on_version, (str, bytes)) or not isinstance(self.on_version, Sequence):
            raise ConfigurationError(
                "on_version", self.on_version, "a sequence of callables (new, previous) -> None"
            )
        for listener in self.on_version:
            if not callable(listener):
                raise ConfigurationError(
                    "on_version", listener, "callables (new_version, previous_version) -> None"
                )
        # A list given by the caller must not change under a frozen object.
        object.__setattr__(self, "on_version", tuple(self.on_version))

    @property
    def embedder(self) -> Embedder | None:
        """The focus embedder to call: ``focus_embedder``, or what "auto" settled on.

        The first ``Combee`` of the process settles "auto" (``settle_auto_embedder``;
        ``describe()["serving"]["rules_by_meaning"]``); before that it is None (words).
        """
        if isinstance(self.focus_embedder, str):
            return _auto_embedder[0]
        return self.focus_embedder


@dataclass(frozen=True, kw_only=True)
class LearnerSettings(_Settings):
    """How the learner runs: its LLM calls, its budget and its background loop.

    Example::

        Combee(
            prompt_id="support",
            model=learner_model,
            learner=LearnerSettings(max_concurrency=4, min_batch=8, poll_seconds=5.0),
        )

    Attributes:
        max_concurrency: Most learner LLM calls in flight at once (an int >= 1).
        timeout_seconds: Per-call timeout of learner calls; None: no timeout.
        max_attempts: Attempts per learner call (retries with backoff).
        backoff_seconds: First retry delay of a learner call; later ones grow
            exponentially, up to 8 times it.
        callbacks: LangChain callbacks attached to every learner call.
        budget: Optional ``LearnerBudget`` capping learner calls and tokens per
            hour; when it is spent the background learner waits and ``learn()``
            raises ``BudgetExceededError`` (see docs/faults.md).
        min_batch: Fewest traces the background learner takes after
            ``max_wait_seconds`` of low traffic (a full batch is taken at once).
            Fewer are taken after four times that wait (two minutes by
            default): the last runs of a burst are never left waiting.
        max_wait_seconds: How long a ready trace waits for its batch to fill.
        poll_seconds: How often the background learner looks at the queue.
        lease_seconds: Expiry of the learner's writer lease (renewed each pass).
        step_backoff_seconds: First delay after a failed step (0 to 60);
            doubles on each failure in a row, up to 60 s.
        feedback_source: Optional ``FeedbackSource`` the background learner
            asks for feedback on traces that wait for it
            (``CaptureSettings.feedback_wait_seconds``), e.g.
            ``LangSmithFeedback(client)``; feedback found makes them ready.
        on_missing_feedback: After the wait, ``"learn"`` from execution
            feedback only (default) or ``"drop"`` the trace.
        on_step: Optional callable ``(StepReport) -> None`` told each learning
            step's report as it ends, the background learner's and ``learn()``'s
            (``report.summary()`` is the step in one line, ``report.reasons()``
            why rules did not land). It runs on the learner's event loop: keep it
            quick. What it raises is logged and never stops the learner.
    """

    max_concurrency: int = 16
    timeout_seconds: float | None = 600.0
    max_attempts: int = 3
    backoff_seconds: float = 0.5
    callbacks: Callbacks = None
    budget: LearnerBudget | None = None
    min_batch: int = 4
    max_wait_seconds: float = 30.0
    poll_seconds: float = 1.0
    lease_seconds: float = 60.0
    step_backoff_seconds: float = 1.0
    feedback_source: FeedbackSource | None = None
    on_missing_feedback: MissingFeedback = "learn"
    on_step: Callable[[StepReport], None] | None = None

    def __post_init__(self) -> None:
        if self.on_step is not None and not callable(self.on_step):
            raise ConfigurationError(
                "on_step", self.on_step, "None or a callable (StepReport) -> None"
            )
        _int("max_concurrency", self.max_concurrency, 1)
        _number("timeout_seconds", self.timeout_seconds, none=True)
        _int("max_attempts", self.max_attempts, 1)
        _number("backoff_seconds", self.backoff_seconds, strict=False)
        if not _callbacks_ok(self.callbacks):
            raise ConfigurationError(
                "callbacks",
                self.callbacks,
                "None, a list of LangChain callback handlers or a callback manager",
            )
        if self.budget is not None and not isinstance(self.budget, LearnerBudget):
            raise ConfigurationError("budget", self.budget, "None or a LearnerBudget")
        _int("min_batch", self.min_batch, 1)
        _number("max_wait_seconds", self.max_wait_seconds)
        _number("poll_seconds", self.poll_seconds)
        _number("lease_seconds", self.lease_seconds)
        _number(
            "step_backoff_seconds", self.step_backoff_seconds, strict=False, high=_MAX_STEP_BACKOFF
        )
        if self.feedback_source is not None and not isinstance(
            self.feedback_source, FeedbackSource
        ):
            raise ConfigurationError(
                "feedback_source",
                self.feedback_source,
                "a FeedbackSource (fetch(run_ids) and pacing attributes), e.g. LangSmithFeedback",
            )
        _choice("on_missing_feedback", self.on_missing_feedback, ("learn", "drop"))


@dataclass(frozen=True, kw_only=True)
class AlgorithmSettings(_Settings):
    """What the learning algorithm does in a step (see docs/concepts.md).

    Example::

        Combee(
            prompt_id="support",
            model=learner_model,
            algorithm=AlgorithmSettings(copies=3, token_budget=1200, roles="small"),
        )

    Attributes:
        copies: Combee's duplication factor p (an int >= 1).
        fan_in: Combee's number of level-1 groups; None (default): floor(sqrt(n)).
        seed: Seed of Combee's shuffle and of the replay sample.
        token_budget: Maximum estimated tokens of the rendered playbook; None:
            no limit, else an int >= 50.
        roles: The role profile of the learner's reflector, curators and
            aggregator: ``"auto"`` (default: the small-model profile for models
            known to be small, such as a local llama.cpp or Ollama server or a
            name stating 8B parameters or fewer, else ACE's full roles,
            switching to small when full replies keep failing to parse or
            hitting their length limit), ``"full"``, ``"small"``, or a
            ``RoleProfile``. See ``Combee.describe_roles()``.
        embedder: Optional ``Embedder`` for semantic de-duplication.
        replay: Verified adoption (docs/acceptance.md): before a candidate goes
            to the acceptance policy, replay the last model call of runs of the
            batch under it with the agent's model, and drop the rules that do
            not earn their place. ``"auto"`` (default): on when the agent's
            model and an ``evaluator`` are known; True: on whenever the model is
            known (runs without an evaluator verdict are scored by their ground
            truth); False: off.
        max_replays: Most replay calls per learning step (an int >= 1).
        agent_model: The agent's chat model for replays (a ``BaseChatModel`` or
            a ``"provider:name"`` string); default: the one the middleware saw
            the agent call in this process.
        agent_prompt: The agent's own system prompt for replays; default: the
            one the middleware saw.
        examples: Most worked examples the playbook keeps (an int from 0 to
            200): past requests whose right answer a trusted source gave
            (``feedback(run_id, ground_truth=...)`` from an operator, an
            evaluator or LangSmith), each with its answer, at most two per
            answer, e-mail addresses, links and long numbers replaced; the
            middleware serves the closest ``ServingSettings.example_turns`` of
            them per request as conversation turns. They are served to other
            users of the prompt: keep 0 where requests hold data other users
            must not see. 0 (default): none.
    """

    copies: int = 2
    fan_in: int | None = None
    seed: int = 0
    token_budget: int | None = 2000
    roles: str | Roles = "auto"
    embedder: Embedder | None = None
    replay: ReplayMode = "auto"
    max_replays: int = 32
    agent_model: str | BaseChatModel | None = None
    agent_prompt: str | None = None
    examples: int = 0

    def __post_init__(self) -> None:
        _int("copies", self.copies, 1)
        _int("examples", self.examples, 0)
        if self.examples > MAX_EXAMPLES:  # type: ignore[operator]
            raise ConfigurationError("examples", self.examples, f"an int from 0 to {MAX_EXAMPLES}")
        _int("fan_in", self.fan_in, 1, none=True)
        _int("seed", self.seed, None)
        _int("token_budget", self.token_budget, 50, none=True)
        if not isinstance(self.roles, Roles) and self.roles not in ROLES:
            raise ConfigurationError(
                "roles", self.roles, "'auto', 'full', 'small' or a RoleProfile"
            )
        if not embedder_ok(self.embedder):
            raise ConfigurationError("embedder", self.embedder, EMBEDDER_ALLOWED)
        if not (isinstance(self.replay, bool) or self.replay == "auto"):
            raise ConfigurationError("replay", self.replay, "'auto', True or False")
        _int("max_replays", self.max_replays, 1)
        if self.agent_model is not None and not isinstance(self.agent_model, (str, BaseChatModel)):
            raise ConfigurationError(
                "agent_model", self.agent_model, "None, a 'provider:name' string or a BaseChatModel"
            )
        if self.agent_prompt is not None and not isinstance(self.agent_prompt, str):
            raise ConfigurationError("agent_prompt", self.agent_prompt, "None or a string")


# Keywords ``Combee()`` took before the settings objects, and every settings field since:
# where each lives (a flat keyword is refused, naming its settings object).
MOVED: dict[str, tuple[str, type[_Settings], str]] = {
    **{
        name: ("capture", CaptureSettings, name)
        for name in (
            "capture_limit",
            "drop_policy",
            "flush_seconds",
            "durability",
            "max_message_chars",
            "max_trace_chars",
            "feedback_wait_seconds",
        )
    },
    **{
        name: ("serving", ServingSettings, name)
        for name in (
            "refresh_seconds",
            "first_read_seconds",
            "on_version",
            "focus_rules",
            "recover_tool_calls",
            "focus_embedder",
            "drop_rivals",
            "example_turns",
        )
    },
    **{
        name: ("learner", LearnerSettings, name)
        for name in (
            "max_concurrency",
            "timeout_seconds",
            "max_attempts",
            "backoff_seconds",
            "callbacks",
            "budget",
            "min_batch",
            "max_wait_seconds",
            "poll_seconds",
            "lease_seconds",
            "step_backoff_seconds",
            "feedback_source",
            "on_missing_feedback",
            "on_step",
        )
    },
    **{
        name: ("algorithm", AlgorithmSettings, name)
        for name in (
            "copies",
            "fan_in",
            "seed",
            "token_budget",
            "roles",
            "embedder",
            "replay",
            "max_replays",
            "agent_model",
            "agent_prompt",
            "examples",
        )
    },
    # The older name of ``roles``: "compact" is the small profile.
    "reflector": ("algorithm", AlgorithmSettings, "roles"),
}


def refuse_moved(owner: str, given: dict[str, Any], known: Sequence[str]) -> None:
    """Raise for keywords ``owner`` no longer takes, naming where each went.

    Raises:
        ConfigurationError: A keyword that moved into a settings object; the
            message names the object and the field.
        TypeError: A keyword ``owner`` never took (as Python would).
    """
    import difflib

    for name, value in given.items():
        if name in MOVED:
            argument, settings, field_name = MOVED[name]
            hint = " ('compact' is 'small')" if name == "reflector" else ""
            raise ConfigurationError(
                name,
                value,
                f"{owner}() takes it in a settings object now: "
                f"{argument}={settings.__name__}({field_name}=...){hint}",
            )
        close = difflib.get_close_matches(name, [*known, *MOVED], n=1)
        suggestion = ""
        if close and close[0] in MOVED:
            argument, settings, field_name = MOVED[close[0]]
            suggestion = f"; did you mean {argument}={settings.__name__}({field_name}=...)?"
        elif close:
            suggestion = f"; did you mean {close[0]!r}?"
        raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}{suggestion}")
