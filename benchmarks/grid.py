"""The quality grid on the real local model, resumable, with its ablations.

Per task and seed, version 0 (no playbook) serves the training examples once;
each run becomes a ``Trace`` with its messages and its feedback (verdict, ground
truth and, on the tool task, the evaluator's comment). Every configuration then
learns from exactly those traces in one pass, in the same order, from an empty
playbook, and its final playbook is evaluated on the same held-out examples
(``capture=False``). The traces, the v0 held-out accuracy and the hand-written-rules
ceiling are computed once per task and seed and shared by its configurations.

The configurations: ``sequential``, ``naive`` and ``combee`` at batch sizes 16
and 48 and ``combee@auto``, three seeds on ticket routing and one on the tool
task, plus three ablation rows at ``combee@48`` on ticket routing, seed 0:

* ``combee@48-corrections``: rule corrections off (only ADDs apply: no UPDATE,
  REMOVE or TAG, no reconcile with the playbook, no removal of discredited or
  contradicted rules; eviction by age alone): the stages ``NO_CORRECTIONS``
  instead of ``STEP_STAGES``;
* ``combee@48-union``: level 2 is the plain union of the level-1 proposals, no
  aggregator call: the stages ``NO_MERGE``;
* ``combee@48-noreplay``: verified adoption off (every other row has it on, as
  ``Combee`` does by default wherever an evaluator and the agent's model are known).

Per configuration the record holds held-out accuracy and its fraction of the
ceiling, playbook entries, contradictions left in the playbook
(``rules.conflicts``), wall-clock (learning, of which the strategy's steps, and
evaluation) and calls and tokens by stage (reflect, curate or propose for level
1, aggregate for level 2, replay). The JSON is rewritten after every configuration
and a restart skips what it holds, so the grid can run in the background and be
cut at any moment. The most informative configurations come first.

The reflection cache: with the small-model profile (what ``roles="auto"`` picks
for the bundled model) the reflector reads the trace alone, so the reflection
of one trace is the same call in every configuration of a task and seed. The
first configuration to make it stores the parsed reflection, keyed by a hash of
the call (model spec, trace id, every message, reply schema and token limit),
with its calls, tokens and model seconds, in
``<out>/shared/<task>-s<seed>-reflections.json`` (written atomically after every
step); later configurations take it from there instead of calling the model.
The full profile's reflector reads the playbook: it is never cached. Each row
says ``reflections_cached`` and what they had cost (``reflect_seconds_shared``,
``reflect_calls_shared``, ``reflect_tokens_shared``); its ``learn_seconds``,
calls and tokens exclude them, and the speed-up uses uncached rows only
(``--no-reflection-cache`` runs without the cache; ``--quick``, the speed-up
pair, never uses it).

Sizes (``--size``): ``full`` (27 configurations, the order above: ticket
routing seed 0 with its ablations, the tool task, ticket-routing seeds 1 and 2);
``session`` (21, measured exactly as ``full``, so a record of one resumes as the
other): ticket routing seed 0 as ``combee@48``, ``naive@48``, ``sequential``
(steps of 16), ``combee@16``, ``naive@16``, ``combee@auto`` and the three
ablations, then the tool task's six rows, then ``combee@48``, ``naive@48`` and
``sequential`` on ticket-routing seeds 1 and 2; ``quick`` (``--quick``).

    python -m benchmarks.grid --out /work/grid --lock /tmp/llm.lock   # the 1.5B, full size
    python -m benchmarks.grid --size session --out /work/grid --lock /tmp/llm.lock
    python -m benchmarks.grid --quick --out /tmp/grid-quick           # 2 configurations, < 15 min
    python -m benchmarks.grid --model test --quick --out /tmp/g       # offline doubles, seconds
    python -m benchmarks.grid --model test --roles small --size session --out /tmp/g2  # cache
    python -m benchmarks.grid --report /work/grid/grid.json           # table, plot, speed-up again

``--lock PATH`` takes an exclusive ``flock`` on PATH around each configuration
(and each shared baseline) only, starting the local model inside it and stopping
it after, so other short real-model runs can slip in between configurations.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import statistics
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import LLMResult
from pydantic import BaseModel, Field, ValidationError

from benchmarks._common import RESULTS, command, git_commit, machine_info, write_json
from benchmarks.quality import replay_evaluator, summarise
from langgraph_combee import AlgorithmSettings, Combee, LearnerSettings, Trace
from langgraph_combee._agent.traces import RunInfo, trace_from_messages
from langgraph_combee._algorithm.engine import BatchSize
from langgraph_combee._algorithm.roles import Aggregation, Labelled, RoleProfile, SmallRoles
from langgraph_combee._algorithm.stages import NO_CORRECTIONS, NO_MERGE, STEP_STAGES, Stage, names
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.text import message_text
from langgraph_combee._core.tokens import estimate_tokens
from langgraph_combee._core.types import Reflection
from langgraph_combee._llm.calls import CallStats, LLMCaller
from langgraph_combee._rules.rules import conflicts
from langgraph_combee.errors import CombeeError
from langgraph_combee.tasks import (
    Evaluation,
    Example,
    Models,
    Task,
    ToolCalls,
    check_model_spec,
    evaluate,
    get_task,
    load_models,
    ticket_input,
)
from langgraph_combee.types import Evaluator

MODULE = "benchmarks.grid"
# A tool-task run needs at most 3 model calls (7 graph steps); a small model that keeps
# calling tools would otherwise run to LangGraph's default of 25 and cost minutes.
RECURSION_LIMIT = 16
GRID_FILE = "grid.json"
ABLATIONS = {
    "corrections": "rule corrections off (ADD only, no counters, age eviction)",
    "union": "level 2 = plain union of the level-1 proposals",
    "noreplay": "verified adoption (replay) off",
}
# The ablations of the step itself are other tuples of its stages.
ABLATED_STAGES: dict[str, tuple[Stage, ...]] = {
    "corrections": NO_CORRECTIONS,
    "union": NO_MERGE,
}


@dataclass(frozen=True)
class Size:
    """How big one run of the grid is.

    Attributes:
        name: The preset (``--size``): ``full``, ``session`` or ``quick``; it
            chooses the plan's configurations and their order.
        reflection_cache: Reuse small-profile reflections across the
            configurations of a seed (``--no-reflection-cache`` turns it off).
    """

    train: int
    test: int
    seeds: int
    tool_seeds: int
    batch_sizes: tuple[int, ...]
    ablations: bool
    quick: bool = False
    name: str = "full"
    reflection_cache: bool = True


FULL = Size(train=96, test=32, seeds=3, tool_seeds=1, batch_sizes=(16, 48), ablations=True)
# FULL's measurements (so a record of one resumes as the other) with fewer configurations:
# ticket routing seed 0 in full with its ablations, the tool task, then the three rows of
# the large-batch comparison on seeds 1 and 2 (21 configurations).
SESSION = dataclasses.replace(FULL, name="session")
# Two configurations on 24 training tickets, the speed-up pair (sequential is the slow one);
# both must pay for their own reflections, so the cache is off.
QUICK = Size(
    train=24,
    test=16,
    seeds=1,
    tool_seeds=0,
    batch_sizes=(24,),
    ablations=False,
    quick=True,
    name="quick",
    reflection_cache=False,
)
SIZES = {size.name: size for size in (FULL, SESSION, QUICK)}


@dataclass(frozen=True)
class GridConfig:
    """One configuration of the grid.

    Attributes:
        task: ``"tickets"`` or ``"tools"``.
        seed: Seed of the examples and of Combee's shuffle.
        strategy: ``"sequential"``, ``"naive"`` or ``"combee"``.
        batch_size: Traces per learning step (``"auto"``: the batch-size controller).
        replay: Verified adoption on.
        stages: The step's stages (an ablation of the step passes one of
            ``ABLATED_STAGES``).
    """

    task: str
    seed: int
    strategy: str
    batch_size: BatchSize
    replay: bool = True
    stages: tuple[Stage, ...] = STEP_STAGES

    @property
    def ablation(self) -> str | None:
        """Which ablation this row is (None for a grid row)."""
        for name, stages in ABLATED_STAGES.items():
            if self.stages == stages:
                return name
        if not self.replay:
            return "noreplay"
        return None

    @property
    def name(self) -> str:
        """``combee@48``, ``combee@auto``, ``sequential``, ``combee@48-union``..."""
        base = (
            "sequential" if self.strategy == "sequential" else f"{self.strategy}@{self.batch_size}"
        )
        return f"{base}-{self.ablation}" if self.ablation else base

    @property
    def key(self) -> str:
        """Unique in the grid: ``tickets/s0/combee@48``."""
        return f"{self.task}/s{self.seed}/{self.name}"


def _main_rows(task: str, seed: int, sizes: Sequence[int]) -> list[GridConfig]:
    """One seed of one task, most informative first: the large batch, sequential, auto."""
    large, rest = max(sizes), sorted(set(sizes) - {max(sizes)}, reverse=True)
    out = [
        GridConfig(task, seed, "combee", large),
        GridConfig(task, seed, "naive", large),
        # Sequential reflects and curates one trace at a time; its steps (versions)
        # take the small batch size.
        GridConfig(task, seed, "sequential", min(sizes)),
        GridConfig(task, seed, "combee", "auto"),
    ]
    for size in rest:
        out += [GridConfig(task, seed, "combee", size), GridConfig(task, seed, "naive", size)]
    return out


def _session_seed0(sizes: Sequence[int]) -> list[GridConfig]:
    """Ticket routing seed 0 of the session preset: both batch sizes before auto."""
    large, small = max(sizes), min(sizes)
    out = [
        GridConfig("tickets", 0, "combee", large),
        GridConfig("tickets", 0, "naive", large),
        GridConfig("tickets", 0, "sequential", small),
    ]
    for size in sorted(set(sizes) - {large}, reverse=True):
        out += [GridConfig("tickets", 0, "combee", size), GridConfig("tickets", 0, "naive", size)]
    return [*out, GridConfig("tickets", 0, "combee", "auto")]


def plan(size: Size) -> list[GridConfig]:
    """Every configuration of the grid, in the order they run."""
    large = max(size.batch_sizes)
    if size.quick:
        return [
            GridConfig("tickets", 0, "combee", large),
            GridConfig("tickets", 0, "sequential", large),
        ]
    session = size.name == "session"
    out = (
        _session_seed0(size.batch_sizes) if session else _main_rows("tickets", 0, size.batch_sizes)
    )
    if size.ablations:
        out += [
            GridConfig("tickets", 0, "combee", large, stages=NO_CORRECTIONS),
            GridConfig("tickets", 0, "combee", large, stages=NO_MERGE),
            GridConfig("tickets", 0, "combee", large, replay=False),
        ]
    for seed in range(size.tool_seeds):
        out += _main_rows("tools", seed, size.batch_sizes)
    for seed in range(1, size.seeds):
        # The session keeps the large-batch comparison (combee, naive, sequential) only.
        out += _main_rows("tickets", seed, size.batch_sizes)[: 3 if session else None]
    return out


# ---- calls and tokens by stage -------------------------------------------------------------


class StageUsage(BaseCallbackHandler):
    """Chat-model calls and tokens of the learner, by the ``combee_stage`` of their run.

    The learner tags every call's metadata with its stage (reflect, curate,
    propose, aggregate, replay...); a reply without usage metadata is estimated
    as the learner does (about four characters a token).
    """

    run_inline = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[uuid.UUID, tuple[str, int, float, list[float] | None]] = {}
        self.calls: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.input_tokens: Counter[str] = Counter()
        self.output_tokens: Counter[str] = Counter()
        self.call_seconds: dict[str, float] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: uuid.UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember the call's stage and an estimate of its prompt."""
        stage = str((metadata or {}).get("combee_stage", "other"))
        estimate = sum(
            estimate_tokens(message_text(m.content)) for batch in messages for m in batch
        )
        with self._lock:
            self._open[run_id] = (stage, estimate, time.perf_counter(), _call_seconds.get())

    def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """Add the call's tokens to its stage."""
        with self._lock:
            stage, estimate, began, timed = self._open.pop(
                run_id, ("other", 0, time.perf_counter(), None)
            )
        spent_in, spent_out = estimate, 0
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = message.usage_metadata if isinstance(message, AIMessage) else None
                if usage:
                    spent_in = int(usage.get("input_tokens", 0))
                    spent_out = int(usage.get("output_tokens", 0))
                else:
                    spent_out += estimate_tokens(generation.text)
        seconds = time.perf_counter() - began
        with self._lock:
            self.calls[stage] += 1
            self.input_tokens[stage] += spent_in
            self.output_tokens[stage] += spent_out
            self.call_seconds[stage] = self.call_seconds.get(stage, 0.0) + seconds
        if timed is not None:
            timed.append(seconds)

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """Count a call that raised (timeouts, server errors) under its stage."""
        with self._lock:
            stage, _, began, timed = self._open.pop(run_id, ("other", 0, time.perf_counter(), None))
            self.failed[stage] += 1
        if timed is not None:
            timed.append(time.perf_counter() - began)

    def by_stage(self) -> dict[str, dict[str, float]]:
        """``{stage: {"calls", "failed", "input_tokens", "output_tokens", "call_seconds"}}``.

        ``call_seconds`` sums the calls' durations: calls in parallel overlap, so it
        is where the model's time went, not the wall-clock.
        """
        stages = sorted(set(self.calls) | set(self.failed))
        return {
            stage: {
                "calls": self.calls[stage],
                "failed": self.failed[stage],
                "input_tokens": self.input_tokens[stage],
                "output_tokens": self.output_tokens[stage],
                "call_seconds": round(self.call_seconds.get(stage, 0.0), 2),
            }
            for stage in stages
        }


# ---- the reflection cache per task and seed ------------------------------------------------

# The model seconds of the learner calls made inside one cached reflection (StageUsage adds
# to the list of the asyncio context that set it; each reflection runs in its own task).
_call_seconds: ContextVar[list[float] | None] = ContextVar("grid_call_seconds", default=None)
_T = TypeVar("_T", bound=BaseModel)


class CachedReflection(BaseModel):
    """One reflection as a configuration made it, with what it cost."""

    trace_id: str
    reflection: Reflection | None  # None: the reply was unusable (as it was, it stays)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0  # summed model-call seconds (a repair request included)
    made_by: str = ""


class ReflectionCacheFile(BaseModel):
    """``<out>/shared/<task>-s<seed>-reflections.json``: reflections by prompt hash."""

    version: Literal[1] = 1
    entries: dict[str, CachedReflection] = Field(default_factory=dict)


class ReflectionCache:
    """Small-profile reflections of one task and seed, shared by its configurations.

    Keyed by a hash of everything the reflector call is made of (the model spec,
    the trace's id, the run name, the reply schema, its token limit and every
    message), so a changed prompt misses. Written atomically; a file that
    cannot be read is ignored with a warning and replaced at the next save.
    """

    def __init__(self, path: Path, *, model: str) -> None:
        self.path = path
        self.model = model
        self.data = ReflectionCacheFile()
        if path.exists():
            try:
                self.data = ReflectionCacheFile.model_validate_json(path.read_bytes())
            except (ValidationError, ValueError, OSError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                warnings.warn(
                    f"{path}: unreadable reflection cache ignored (it will be replaced): {first}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def key(self, trace_id: str, sent: _Sent) -> str:
        """The hash of one reflector call."""
        payload = {
            "model": self.model,
            "trace": trace_id,
            "run": sent.run_name,
            "schema": sent.schema,
            "max_tokens": sent.max_tokens,
            "messages": [[m.type, m.content] for m in sent.messages],
        }
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> CachedReflection | None:
        """The stored reflection of ``key`` (None: not cached)."""
        return self.data.entries.get(key)

    def put(self, key: str, entry: CachedReflection) -> None:
        """Store one reflection (kept in memory until ``save``)."""
        self.data.entries[key] = entry

    def save(self) -> None:
        """Write the file atomically: a kill mid-write leaves the previous one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self.data.model_dump_json(indent=1))
        os.replace(tmp, self.path)


@dataclass(frozen=True)
class _Sent:
    run_name: str
    schema: str
    max_tokens: int | None
    messages: list[BaseMessage]


class _Probed(Exception):
    """Raised by ``_Probe`` instead of calling the model."""


class _Probe(LLMCaller):
    """A caller that records the call it is asked for and makes none."""

    def __init__(self, caller: LLMCaller) -> None:
        super().__init__(caller.model, caller.settings)
        self.sent: _Sent | None = None

    async def call(
        self,
        run_name: str,
        messages: Sequence[BaseMessage],
        schema: type[_T],
        stats: CallStats,
        *,
        max_tokens: int | None = None,
    ) -> _T | None:
        """Record the call; raise ``_Probed``."""
        self.sent = _Sent(run_name, schema.__name__, max_tokens, list(messages))
        raise _Probed


def _merge(into: CallStats, part: CallStats) -> None:
    into.calls.update(part.calls)
    into.failed.update(part.failed)
    into.unparsed.update(part.unparsed)
    into.truncated.update(part.truncated)
    into.input_tokens += part.input_tokens
    into.output_tokens += part.output_tokens


class CachingRoles(RoleProfile):
    """The engine's role profile, with the small reflector's replies shared across configurations.

    Everything is the wrapped profile's (``describe``, ``observe``, curators,
    aggregator, which traces need a reflection); only ``reflect`` may come from
    the cache, and only while the active profile is exactly ``SmallRoles`` and
    the reflector call it would make is the same against the step's playbook
    and an empty one (its prompt reads the trace alone). The full profile's
    reflector reads the playbook, which differs from one configuration to the
    next: it is never cached.
    """

    def __init__(self, inner: RoleProfile, cache: ReflectionCache, *, made_by: str) -> None:
        self.inner = inner
        self.cache = cache
        self.made_by = made_by
        self.cached = 0
        self.stored = 0
        self.uncached = 0  # reflections the cache could not serve nor keep
        self.shared_seconds = 0.0
        self.shared_calls = 0
        self.shared_tokens = 0

    def active(self) -> RoleProfile:
        """Itself: every role is passed on to the wrapped profile's active one."""
        return self

    @property  # type: ignore[misc]
    def name(self) -> str:  # type: ignore[override]
        """The wrapped active profile's (a step's ``left_out`` is listed for ``small``)."""
        return self.inner.active().name

    def needs_reflection(self, trace: Trace) -> bool:
        """As the active profile says."""
        return self.inner.active().needs_reflection(trace)

    async def _key(
        self, profile: RoleProfile, caller: LLMCaller, trace: Trace, playbook: Playbook
    ) -> str | None:
        """The cache key of the reflector call ``profile`` would make, None if not cacheable.

        Not cacheable: a profile other than ``SmallRoles`` exactly, no call to
        make, or a call that changes with the playbook (compared with the call
        it would make against an empty one).
        """
        if type(profile) is not SmallRoles:
            return None
        keys = set()
        for shown in (playbook, Playbook()):
            probe = _Probe(caller)
            with contextlib.suppress(_Probed):
                await profile.reflect(probe, trace, shown, CallStats())
            if probe.sent is None:
                return None
            keys.add(self.cache.key(trace.id, probe.sent))
        return keys.pop() if len(keys) == 1 else None

    async def reflect(
        self, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        """The cached reflection of this exact call, or the profile's (then stored)."""
        profile = self.inner.active()
        key = await self._key(profile, caller, trace, playbook)
        if key is None:
            self.uncached += 1
            return await profile.reflect(caller, trace, playbook, stats)
        hit = self.cache.get(key)
        if hit is not None:
            self.cached += 1
            self.shared_seconds += hit.seconds
            self.shared_calls += hit.calls
            self.shared_tokens += hit.input_tokens + hit.output_tokens
            return None if hit.reflection is None else hit.reflection.model_copy(deep=True)
        own, timed = CallStats(), list[float]()
        token = _call_seconds.set(timed)
        try:
            reflection = await profile.reflect(caller, trace, playbook, own)
        finally:
            _call_seconds.reset(token)
            _merge(stats, own)
        self.cache.put(
            key,
            CachedReflection(
                trace_id=trace.id,
                reflection=reflection,
                calls=sum(own.calls.values()),
                input_tokens=own.input_tokens,
                output_tokens=own.output_tokens,
                seconds=round(sum(timed), 3),
                made_by=self.made_by,
            ),
        )
        self.stored += 1
        return reflection

    async def curate(
        self,
        caller: LLMCaller,
        run_name: str,
        playbook: Playbook,
        group: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> list[DeltaOp] | None:
        """The active profile's curator."""
        return await self.inner.active().curate(
            caller, run_name, playbook, group, stats, token_budget=token_budget
        )

    async def aggregate(
        self,
        caller: LLMCaller,
        playbook: Playbook,
        proposals: Sequence[Sequence[DeltaOp]],
        labelled: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> Aggregation:
        """The active profile's aggregator."""
        return await self.inner.active().aggregate(
            caller, playbook, proposals, labelled, stats, token_budget=token_budget
        )

    def observe(self, stats: CallStats) -> None:
        """Passed on (``AutoRoles`` decides its switch on it)."""
        self.inner.observe(stats)

    def describe(self) -> dict[str, Any]:
        """The wrapped profile's description."""
        return self.inner.describe()

    def accounting(self) -> dict[str, Any]:
        """The row's reflection-cache fields."""
        return {
            "reflection_cache": "on",
            "reflections_cached": self.cached,
            "reflections_stored": self.stored,
            "reflections_not_cacheable": self.uncached,
            "reflect_seconds_shared": round(self.shared_seconds, 2),
            "reflect_calls_shared": self.shared_calls,
            "reflect_tokens_shared": self.shared_tokens,
        }


NO_CACHE = {
    "reflection_cache": "off",
    "reflections_cached": 0,
    "reflections_stored": 0,
    "reflections_not_cacheable": 0,
    "reflect_seconds_shared": 0.0,
    "reflect_calls_shared": 0,
    "reflect_tokens_shared": 0,
}


def _cache_reflections(combee: Combee, cache: ReflectionCache, config: GridConfig) -> CachingRoles:
    """Put a ``CachingRoles`` around the engine's roles (private, as ``_ablate``)."""
    engine = combee._engine(None)
    roles = CachingRoles(engine.context.roles, cache, made_by=config.key)
    engine.context = dataclasses.replace(engine.context, roles=roles)
    return roles


# ---- the shared baseline per task and seed -------------------------------------------------


def collect(task: Task, models: Models, train: Sequence[Example]) -> tuple[list[Trace], float]:
    """Version 0 serves every training example; each run becomes a trace with its feedback."""
    agent = task.build_agent(models.agent)
    configs: list[Any] = [
        {
            "run_id": uuid.uuid4(),
            "max_concurrency": models.concurrency,
            "recursion_limit": RECURSION_LIMIT,
        }
        for _ in train
    ]
    results = agent.batch([ticket_input(e) for e in train], configs, return_exceptions=True)
    traces: list[Trace] = []
    right = 0
    for i, (example, result) in enumerate(zip(train, results, strict=True)):
        run = RunInfo(
            id=f"train-{i:03d}", prompt_version=0, metadata={"rule": example.meta.get("rule", "")}
        )
        if isinstance(result, BaseException):
            trace = Trace(id=run.id, input=example.input, output="", error=repr(result))
            answer = ""
        else:
            trace = trace_from_messages(result["messages"], run)
            answer = task.answer_of(result)
        feedback = task.feedback(example, answer)
        right += bool(feedback.correct)
        traces.append(trace.model_copy(update={"feedback": feedback}))
    return traces, right / len(train) if train else 0.0


def _evaluate(task: Task, agent: Any, test: Sequence[Example], models: Models) -> Evaluation:
    return evaluate(
        task,
        agent,
        test,
        max_concurrency=models.concurrency,
        config={"recursion_limit": RECURSION_LIMIT},
    )


def shared_baseline(task: Task, models: Models, size: Size, seed: int) -> dict[str, Any]:
    """The traces, v0 and ceiling of one task and seed (what its configurations share)."""
    train = task.examples(size.train, seed, "train")
    test = task.examples(size.test, seed, "test")
    started = time.perf_counter()
    traces, train_accuracy = collect(task, models, train)
    collect_seconds = time.perf_counter() - started
    references: dict[str, float] = {}
    for name, with_rules in (("v0", False), ("ceiling", True)):
        agent = task.build_agent(models.agent, with_rules=with_rules)
        references[name] = _evaluate(task, agent, test, models).accuracy
    return {
        "task": task.name,
        "seed": seed,
        "train": len(train),
        "test": len(test),
        "v0_train_accuracy": train_accuracy,
        "v0": references["v0"],
        "ceiling": references["ceiling"],
        "collect_seconds": round(collect_seconds, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "traces": [t.model_dump(mode="json") for t in traces],
    }


# ---- one configuration ---------------------------------------------------------------------


async def _learn(
    combee: Combee, traces: list[Trace], config: GridConfig, cache: ReflectionCache | None
) -> dict[str, Any]:
    """One pass in steps of the configuration's batch size (the controller's, for auto).

    The reflection cache is saved after every step, so a kill keeps what was reflected.
    """
    reports: list[Any] = []
    failures: list[str] = []
    sizes: list[int] = []
    start = 0
    while start < len(traces):
        size = combee.next_batch_size() if config.batch_size == "auto" else config.batch_size
        batch = traces[start : start + size]
        start += len(batch)
        sizes.append(len(batch))
        try:
            reports.append(await combee._stepper.step(batch))
        except CombeeError as exc:
            failures.append(repr(exc))
        finally:
            if cache is not None:
                cache.save()
    learned = summarise(reports, failures)
    learned["step_sizes"] = sizes
    learned["strategy_seconds"] = round(sum(r.seconds for r in reports), 2)
    return learned


def _ablate(combee: Combee, config: GridConfig) -> None:
    """Give the Combee's engine the row's stages (private: not a ``Combee`` setting)."""
    if config.stages == STEP_STAGES:
        return
    engine = combee._engine(None)
    engine.context = dataclasses.replace(engine.context, stages=config.stages)
    # A candidate rebased onto a newer HEAD re-runs the same stages' rebasing part.
    writer = combee._stepper.writer
    writer.pipeline = dataclasses.replace(writer.pipeline, stages=config.stages)


def _replay_target(combee: Combee, task: Task, models: Models) -> None:
    """Tell the replayer the agent's call: the traces were collected without its middleware."""
    tools = task.tools() if isinstance(task, ToolCalls) else []
    combee._replayer.agent_calls.remember(
        task._agent_model(models.agent), SystemMessage(task.prompt()), tools, None
    )


def run_config(
    config: GridConfig,
    task: Task,
    models: Models,
    shared: dict[str, Any],
    cache: ReflectionCache | None = None,
) -> dict[str, Any]:
    """Learn with one configuration from an empty playbook, then evaluate held out.

    With a ``cache``, the small profile's reflections of this task and seed are
    taken from it where an earlier configuration made the same call, and the
    others are stored in it; the row says how many, and what they had cost.
    """
    traces = [Trace.model_validate(t) for t in shared["traces"]]
    test = task.examples(shared["test"], config.seed, "test")
    usage = StageUsage()
    evaluator: Evaluator = (
        task.evaluator() if isinstance(task, ToolCalls) else replay_evaluator(task)  # type: ignore[assignment]
    )
    combee = Combee(
        prompt_id=f"grid-{config.task}-{config.seed}",
        model=models.learner,
        strategy=config.strategy,
        batch_size=config.batch_size,
        evaluator=evaluator,
        learner=LearnerSettings(
            max_concurrency=models.concurrency,
            timeout_seconds=models.timeout_seconds,
            callbacks=[usage],
        ),
        algorithm=AlgorithmSettings(
            roles=models.roles,
            seed=config.seed,
            replay=config.replay,
            agent_model=task._agent_model(models.agent),
            agent_prompt=task.prompt(),
        ),
    )
    _ablate(combee, config)
    caching = _cache_reflections(combee, cache, config) if cache is not None else None
    if config.replay:
        _replay_target(combee, task, models)
    started = time.perf_counter()
    learned = asyncio.run(_learn(combee, traces, config, cache))
    learn_seconds = time.perf_counter() - started
    head = combee.current()
    agent = task.build_agent(models.agent, middleware=[combee.middleware(capture=False)])
    held_out = _evaluate(task, agent, test, models)
    ceiling = shared["ceiling"]
    return {
        "key": config.key,
        "task": config.task,
        "seed": config.seed,
        "name": config.name,
        "strategy": config.strategy,
        "batch_size": config.batch_size,
        "ablation": config.ablation,
        "replay": config.replay,
        "stages": list(names(config.stages)),
        "accuracy": held_out.accuracy,
        "of_ceiling": round(held_out.accuracy / ceiling, 3) if ceiling else None,
        "v0": shared["v0"],
        "ceiling": ceiling,
        "bullets": len(head.playbook.bullets),
        "contradictions_left": len(conflicts(head.playbook)),
        "playbook_tokens": head.playbook.token_count(),
        # Without the model time of the reflections taken from the cache (see below).
        "learn_seconds": round(learn_seconds, 2),
        **(caching.accounting() if caching is not None else NO_CACHE),
        "eval_seconds": round(held_out.seconds, 2),
        "by_stage": usage.by_stage(),
        "roles": combee.describe_roles(),
        **learned,
        "tokens": learned["input_tokens"] + learned["output_tokens"],  # replay included
        "total_calls": sum(learned["calls"].values()),
        "eval_errors": held_out.errors,
        "per_rule": held_out.by_rule(test),
        "playbook": head.render(),
    }


# ---- the record, resumption and the lock --------------------------------------------------


@contextlib.contextmanager
def locked(path: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (nothing when None) for the block."""
    if path is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def parameters(args: argparse.Namespace, size: Size) -> dict[str, Any]:
    """What a record was measured with; a restart must match it to resume."""
    return {
        "model": args.model,
        "train": size.train,
        "test": size.test,
        "seeds": size.seeds,
        "tool_seeds": size.tool_seeds,
        "batch_sizes": list(size.batch_sizes),
        "ablations": size.ablations,
        "quick": size.quick,
        "roles": args.roles,
    }


def load_record(path: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    """The record at ``path`` to resume (None if there is none).

    Raises:
        SystemExit: It was measured with other parameters.
    """
    if not path.exists():
        return None
    record: dict[str, Any] = json.loads(path.read_text())
    # Records from before --roles were measured with roles "auto".
    if {"roles": "auto", **record.get("parameters", {})} != params:
        raise SystemExit(
            f"{path} was measured with {record.get('parameters')!r}, not {params!r}: "
            "use another --out (or --fresh to start over)"
        )
    return record


def _shared_path(out: Path, task: str, seed: int) -> Path:
    return out / "shared" / f"{task}-s{seed}.json"


def _reflections_path(out: Path, task: str, seed: int) -> Path:
    return out / "shared" / f"{task}-s{seed}-reflections.json"


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.fmean(values), min(values), max(values)


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean (and min, max) over seeds of each task and configuration name."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if "error" not in row:
            groups.setdefault((row["task"], row["name"]), []).append(row)
    out = []
    for (task, name), mine in groups.items():
        of = [r["of_ceiling"] for r in mine if r["of_ceiling"] is not None]
        mean, low, high = _spread([r["accuracy"] for r in mine])
        out.append(
            {
                "task": task,
                "name": name,
                "strategy": mine[0]["strategy"],
                "batch_size": mine[0]["batch_size"],
                "ablation": mine[0]["ablation"],
                "seeds": sorted(r["seed"] for r in mine),
                "accuracy": mean,
                "accuracy_min": low,
                "accuracy_max": high,
                "of_ceiling": statistics.fmean(of) if of else None,
                "of_ceiling_min": min(of) if of else None,
                "of_ceiling_max": max(of) if of else None,
                "bullets": statistics.fmean(r["bullets"] for r in mine),
                "contradictions_left": statistics.fmean(r["contradictions_left"] for r in mine),
                "learn_seconds": statistics.fmean(r["learn_seconds"] for r in mine),
                "reflections_cached": statistics.fmean(
                    r.get("reflections_cached", 0) for r in mine
                ),
                "strategy_seconds": statistics.fmean(r["strategy_seconds"] for r in mine),
                "calls": statistics.fmean(r["total_calls"] for r in mine),
                "tokens": statistics.fmean(r["tokens"] for r in mine),
            }
        )
    return out


def _uncached(row: dict[str, Any]) -> bool:
    """Whether the row paid for every reflection it used (rows from before the cache did)."""
    return not row.get("reflections_cached", 0)


def speedup(rows: Sequence[dict[str, Any]], simulated: Path | None = None) -> dict[str, Any]:
    """Sequential's learning wall-clock over Combee's, per task, seeds both ran.

    Only rows that made every reflection themselves count: a row with
    reflections from the cache has a wall-clock without them.
    """
    out: dict[str, Any] = {}
    for task in sorted({r["task"] for r in rows}):
        mine = [
            r
            for r in rows
            if r["task"] == task and "error" not in r and not r["ablation"] and _uncached(r)
        ]
        sequential = {r["seed"]: r for r in mine if r["strategy"] == "sequential"}
        for row in mine:
            if row["strategy"] != "combee" or row["seed"] not in sequential:
                continue
            seq = sequential[row["seed"]]
            entry = out.setdefault(f"{task}/{row['name']}", {"seeds": [], "learn": [], "steps": []})
            entry["seeds"].append(row["seed"])
            entry["learn"].append(seq["learn_seconds"] / max(row["learn_seconds"], 1e-9))
            entry["steps"].append(seq["strategy_seconds"] / max(row["strategy_seconds"], 1e-9))
    result: dict[str, Any] = {
        name: {
            "seeds": entry["seeds"],
            "learn_wall_clock_ratio": round(statistics.fmean(entry["learn"]), 2),
            "strategy_steps_ratio": round(statistics.fmean(entry["steps"]), 2),
        }
        for name, entry in out.items()
    }
    if simulated is not None and simulated.exists():
        record = json.loads(simulated.read_text())
        arms = {a.get("arm"): a for a in record.get("arms", [])}
        result["simulated"] = {
            arm: value.get("speedup")
            for arm, value in arms.items()
            if str(arm).startswith("combee") and value.get("speedup") is not None
        }
    return result


def progress(rows: Sequence[dict[str, Any]], configs: Sequence[GridConfig]) -> str:
    """How many configurations are done, and a projection of the rest from the mean so far."""
    done = {row["key"] for row in rows}
    left = [c for c in configs if c.key not in done]
    units = [row["unit_seconds"] for row in rows if "unit_seconds" in row]
    mean = statistics.fmean(units) if units else 0.0
    return (
        f"progress: {len(configs) - len(left)} of {len(configs)} configurations done; "
        f"about {len(left) * mean / 3600:.1f} h left at {mean / 60:.0f} min each "
        "(lock waits not counted)"
    )


def table(rows: Sequence[dict[str, Any]], shared: dict[str, dict[str, Any]]) -> str:
    """Means over seeds as a fixed-width text table, references first."""
    lines = [
        f"{'task':<8}{'config':<24}{'seeds':>6}{'held-out':>9}{'range':>10}{'/ceil':>7}"
        f"{'bullets':>8}{'contra':>7}{'learn s':>9}{'steps s':>9}{'calls':>7}{'tokens':>10}"
        f"{'cached':>7}"
    ]
    for _, base in sorted(shared.items()):
        lines.append(
            f"{base['task']:<8}{'v0 / ceiling s' + str(base['seed']):<24}{1:>6}"
            f"{base['v0']:>9.0%}{'':>10}{'':>7}  ceiling {base['ceiling']:.0%}"
        )
    for s in sorted(summary(rows), key=lambda s: (s["task"], s["ablation"] or "", s["name"])):
        of = f"{s['of_ceiling']:.2f}" if s["of_ceiling"] is not None else "-"
        spread = f"{s['accuracy_min']:.0%}-{s['accuracy_max']:.0%}"
        lines.append(
            f"{s['task']:<8}{s['name']:<24}{len(s['seeds']):>6}{s['accuracy']:>9.0%}{spread:>10}"
            f"{of:>7}{s['bullets']:>8.1f}{s['contradictions_left']:>7.1f}"
            f"{s['learn_seconds']:>9.0f}{s['strategy_seconds']:>9.0f}{s['calls']:>7.0f}"
            f"{s['tokens']:>10,.0f}{s['reflections_cached']:>7.0f}"
        )
    if any(r.get("reflections_cached") for r in rows):
        lines.append(
            "cached: reflections taken from an earlier configuration of the seed; a row's "
            "learn s, calls and tokens exclude them (its reflect_seconds_shared says what "
            "they had cost), and the speed-up uses uncached rows only"
        )
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Held-out / ceiling by strategy and batch size, mean with the seeds' range, per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = summary(rows)
    tasks = sorted({s["task"] for s in stats}) or ["tickets"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 4.4), dpi=110, squeeze=False)
    colours = {"naive": "tab:red", "combee": "tab:blue", "sequential": "tab:grey"}
    for ax, task in zip(axes[0], tasks, strict=True):
        mine = [s for s in stats if s["task"] == task and s["of_ceiling"] is not None]
        sizes = sorted({str(s["batch_size"]) for s in mine if s["strategy"] != "sequential"})
        sizes.sort(key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0))
        xs = {size: i for i, size in enumerate(sizes)}
        for offset, strategy in ((-0.08, "naive"), (0.08, "combee")):
            points = sorted(
                (s for s in mine if s["strategy"] == strategy and not s["ablation"]),
                key=lambda s: xs[str(s["batch_size"])],
            )
            if not points:
                continue
            x = [xs[str(s["batch_size"])] + offset for s in points]
            y = [s["of_ceiling"] for s in points]
            err = [
                [s["of_ceiling"] - s["of_ceiling_min"] for s in points],
                [s["of_ceiling_max"] - s["of_ceiling"] for s in points],
            ]
            ax.errorbar(
                x,
                y,
                yerr=err,
                color=colours[strategy],
                marker="o",
                ls="none",
                capsize=4,
                label=strategy,
            )
        for s in mine:
            if s["strategy"] == "sequential" and not s["ablation"]:
                ax.axhline(s["of_ceiling"], color=colours["sequential"], label="sequential")
                ax.axhspan(s["of_ceiling_min"], s["of_ceiling_max"], color="grey", alpha=0.15)
        markers = {"corrections": ("v", 0.18), "union": ("s", 0.26), "noreplay": ("D", 0.34)}
        for s in mine:
            if s["ablation"] and str(s["batch_size"]) in xs:
                marker, shift = markers[s["ablation"]]
                ax.plot(
                    xs[str(s["batch_size"])] + shift,
                    s["of_ceiling"],
                    marker,
                    color="tab:purple",
                    label=f"combee, {ABLATIONS[s['ablation']]}",
                )
        ax.axhline(1.0, color="tab:green", ls="--", lw=1, label="hand-written rules (ceiling)")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels(sizes)
        ax.set_xlabel("batch size")
        ax.set_ylabel("held-out accuracy / ceiling")
        ax.set_ylim(-0.02, 1.1)
        ax.grid(alpha=0.3)
        ax.set_title(task)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def report(record: dict[str, Any], plot_path: Path | None) -> None:
    """Print the table and the speed-up of a record; write its plot."""
    print(table(record["configs"], record["shared"]))
    speed = record.get("speedup", {})
    print(json.dumps({"speedup (rows without cached reflections only)": speed}, indent=1))
    if plot_path is not None and record["configs"]:
        title = f"Quality grid, {record['parameters']['model']}: held-out accuracy / ceiling"
        print(f"wrote {plot(record['configs'], plot_path, title)}")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--model", default="local:1.5b", help="local:1.5b, local:0.5b or test")
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default=None,
        help="full (27 configurations), session (21) or quick (2); default full",
    )
    parser.add_argument(
        "--quick", action="store_true", help="--size quick: combee@24 and sequential, 24 tickets"
    )
    parser.add_argument(
        "--no-reflection-cache",
        action="store_true",
        help="every configuration makes its own reflections (for the speed-up pair)",
    )
    parser.add_argument(
        "--roles",
        choices=("auto", "small", "full"),
        default="auto",
        help="the learner's role profile (auto: Combee's default choice)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "grid", help="folder of grid.json")
    parser.add_argument("--lock", type=Path, default=None, help="flock file, per configuration")
    parser.add_argument("--plot", default=None, help="PNG (default: OUT/grid.png; '' for none)")
    parser.add_argument("--fresh", action="store_true", help="discard a record at OUT")
    parser.add_argument("--only", nargs="+", default=None, help="run only these keys")
    parser.add_argument("--max-configs", type=int, default=None, help="stop after N new ones")
    parser.add_argument("--train", type=int, default=None, help="training examples per task")
    parser.add_argument("--test", type=int, default=None, help="held-out examples per task")
    parser.add_argument("--seeds", type=int, default=None, help="ticket-routing seeds (3)")
    parser.add_argument("--tool-seeds", type=int, default=None, help="tool-task seeds (1)")
    parser.add_argument("--report", type=Path, default=None, help="only print a record's results")
    args = parser.parse_args(list(argv))
    try:
        check_model_spec(args.model)
    except CombeeError as exc:
        parser.error(str(exc))
    for name in ("train", "test", "max_configs", "seeds"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, not {value!r}")
    if args.tool_seeds is not None and args.tool_seeds < 0:
        parser.error(f"--tool-seeds must be >= 0, not {args.tool_seeds!r}")
    if args.quick and args.size not in (None, "quick"):
        parser.error(f"--quick is --size quick, not --size {args.size!r}")
    args.size = "quick" if args.quick else args.size or "full"
    return args


def _save(path: Path, record: dict[str, Any], started: float) -> None:
    record["speedup"] = speedup(record["configs"], RESULTS / "speed.json")
    record["summary"] = summary(record["configs"])
    record["run_seconds"] = round(
        record.get("run_seconds_before", 0.0) + time.perf_counter() - started, 2
    )
    tmp = path.with_suffix(".tmp")
    write_json(tmp, record)
    os.replace(tmp, path)  # atomic: a kill mid-write leaves the previous record


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run (or resume) the grid, writing the record after every configuration."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.report is not None:
        record: dict[str, Any] = json.loads(args.report.read_text())
        report(record, Path(args.plot) if args.plot else args.report.with_suffix(".png"))
        return record
    base = SIZES[args.size]
    size = dataclasses.replace(
        base,
        train=args.train or base.train,
        test=args.test or base.test,
        seeds=args.seeds or base.seeds,
        tool_seeds=base.tool_seeds if args.tool_seeds is None else args.tool_seeds,
        reflection_cache=base.reflection_cache and not args.no_reflection_cache,
    )
    params = parameters(args, size)
    path = args.out / GRID_FILE
    plot_path = None if args.plot == "" else Path(args.plot or args.out / "grid.png")
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    resumed = None if args.fresh else load_record(path, params)
    record = resumed or {
        "benchmark": "grid",
        "command": cmd,
        "parameters": params,
        "machine": machine_info(),
        "shared": {},
        "configs": [],
        "errors": [],
        "complete": False,
    }
    record["size"] = size.name
    record["reflection_cache"] = size.reflection_cache
    record["run_seconds_before"] = record.get("run_seconds", 0.0)
    record.setdefault("restarts", []).append(machine_info()["date"])
    started = time.perf_counter()
    done = {row["key"] for row in record["configs"]}
    planned = [c.key for c in plan(size)]
    unknown = [key for key in args.only or () if key not in planned]
    if unknown:
        # A key the preset does not hold would otherwise run nothing, silently.
        raise SystemExit(
            f"--only {' '.join(unknown)}: not in the {size.name} preset (its keys: "
            f"{', '.join(planned)})"
        )
    todo = [c for c in plan(size) if c.key not in done and (not args.only or c.key in args.only)]
    if done:
        print(f"resuming: {len(done)} configurations done, {len(todo)} to go", flush=True)
    ran = 0
    for config in todo:
        if args.max_configs is not None and ran >= args.max_configs:
            break
        task = get_task(config.task)
        shared_key = f"{config.task}/s{config.seed}"
        print(f"{config.key}: waiting for the lock" if args.lock else config.key, flush=True)
        with locked(args.lock):
            print(f"{config.key}: started {machine_info()['date']}", flush=True)
            mark = time.perf_counter()
            models = load_models(args.model, task)
            if args.roles != "auto":
                models = dataclasses.replace(
                    models, reflector="compact" if args.roles == "small" else "full"
                )
            try:
                shared_file = _shared_path(args.out, config.task, config.seed)
                if shared_file.exists():
                    shared = json.loads(shared_file.read_text())
                else:
                    shared = shared_baseline(task, models, size, config.seed)
                    write_json(shared_file, shared)
                    print(
                        f"{shared_key}: v0 held-out {shared['v0']:.0%}, ceiling "
                        f"{shared['ceiling']:.0%}, v0 train {shared['v0_train_accuracy']:.0%} "
                        f"({shared['seconds']:.0f} s)",
                        flush=True,
                    )
                if shared_key not in record["shared"]:
                    record["shared"][shared_key] = {
                        k: v for k, v in shared.items() if k != "traces"
                    }
                    _save(path, record, started)
                cache = (
                    ReflectionCache(
                        _reflections_path(args.out, config.task, config.seed), model=args.model
                    )
                    if size.reflection_cache
                    else None
                )
                try:
                    row = run_config(config, task, models, shared, cache)
                except Exception as exc:  # one broken configuration never stops the grid
                    record["errors"].append({"key": config.key, "error": repr(exc)})
                    print(f"{config.key}: FAILED {exc!r}", flush=True)
                    _save(path, record, started)
                    continue
            finally:
                models.close()
        row["unit_seconds"] = round(time.perf_counter() - mark, 2)
        # A resumed record can mix commits; each row names its own.
        row["commit"] = git_commit()
        record["configs"].append(row)
        ran += 1
        _save(path, record, started)
        print(
            f"{config.key}: held-out {row['accuracy']:.0%} ({row['of_ceiling']} of the ceiling), "
            f"{row['bullets']} bullets, {row['contradictions_left']} contradictions, learn "
            f"{row['learn_seconds']:.0f} s, {row['total_calls']} calls, {row['tokens']:,} tokens, "
            f"{row['failed_steps']} failed steps, level 2 {row['aggregation']}, "
            f"{row['reflections_cached']} reflections from the cache "
            f"({row['reflect_seconds_shared']:.0f} s of model time not in this row)",
            flush=True,
        )
        print(table(record["configs"], record["shared"]), flush=True)
        print(progress(record["configs"], plan(size)), flush=True)
    done = {row["key"] for row in record["configs"]}
    record["complete"] = all(c.key in done for c in plan(size))
    _save(path, record, started)
    print(f"\nwrote {path}")
    report(record, plot_path)
    print(f"reproduce: {cmd}")
    return record


if __name__ == "__main__":
    main()
