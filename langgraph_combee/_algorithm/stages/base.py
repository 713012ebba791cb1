"""What a stage is, the state it reads and returns, and how a tuple of stages runs.

A learning step is a tuple of named stages run in order (``STEP_STAGES``). Each
stage is one small job: it takes the step's context (the learner's settings,
never a store) and the step's state, returns the new state and the counts it
produced, and the runner writes those, with its seconds, into the step report
(``StepReport.stages``). The order is data: it can be printed, cut short, or
have a stage left out or replaced (``without``, ``replacing``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._core.playbook import ApplyResult, Playbook
from langgraph_combee._core.types import Reflection, StageEntry, StepReport, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._guard.guard import BulletGuard, Screening
from langgraph_combee._llm.calls import CallStats, LLMCaller
from langgraph_combee._rules.rules import InputMemory, Seen

if TYPE_CHECKING:
    from langgraph_combee._algorithm.roles import RoleProfile

__all__ = [
    "Counts",
    "Dealer",
    "LabelledReflection",
    "Stage",
    "StageFn",
    "StepContext",
    "StepState",
    "check_stages",
    "names",
    "replacing",
    "run_stages",
    "without",
]

Counts = Mapping[str, int]
"""What a stage produced, by name (``{"merged": 2}``): its entry in the step report."""

_T = TypeVar("_T")


class StepContext(Protocol):
    """What the stages read of the learner's settings (``strategies.StepContext`` is one).

    A protocol, so that the stages never import the strategies that run them.
    """

    @property
    def caller(self) -> LLMCaller | None: ...
    @property
    def token_budget(self) -> int | None: ...
    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def dedup_threshold(self) -> float | None: ...
    @property
    def dedup(self) -> bool: ...
    @property
    def guard(self) -> BulletGuard | None: ...
    @property
    def roles(self) -> RoleProfile: ...
    @property
    def memory(self) -> InputMemory: ...
    @property
    def examples(self) -> int: ...


class Dealer(Protocol):
    """How a strategy deals reflections to curators (``Strategy`` is one).

    ``per_trace``: the stages run once per trace (one curator call of many).
    """

    @property
    def per_trace(self) -> bool: ...

    def deal(self, reflections: Sequence[_T]) -> list[list[_T]]:
        """The groups, one curator call each."""
        ...

    def group_sizes(self, groups: Sequence[Sequence[object]]) -> list[int]:
        """What ``StepReport.group_sizes`` records for the groups."""
        ...


@dataclass(frozen=True)
class LabelledReflection:
    """A reflection under the label (``R3``) the curators and the aggregator see it by."""

    label: str
    reflection: Reflection


@dataclass(frozen=True)
class StepState:
    """Everything a step knows, as its stages have left it (never changed in place).

    The first group of fields is given when the step starts; the stages fill in
    the rest, in the order of ``STEP_STAGES``.

    Attributes:
        playbook: The playbook the step learns from; its ops apply to it.
        version: The version the step's bullets are stamped with.
        report: The step's report (each stage adds its entry and its figures).
        traces: The runs the ops are learned from: the batch, or one run of it
            when the strategy learns run by run; None when rebasing (the runs
            are not at hand any more, so the guard checks no provenance).
        batch: The step's whole batch.
        stats: The step's call accounting.
        strategy: How reflections are dealt to curators (the ``shuffle`` stage).
        earlier: The inputs of the learner's earlier steps (``InputMemory``).
        remembered: The inputs remembered once this batch's joined them.
        candidate: When rebasing, the candidate's own playbook (the support an
            added bullet had there).
        learned_from: When rebasing, the playbook the candidate was learned from.
        reflections: The reflections, labelled.
        groups: The reflections dealt into groups, one curator call each.
        proposals: The usable ops of each curator call.
        ops: The ops the step means to apply.
        owed: Conventions the feedback asks every reply to follow, applied first.
        served: Helpful/harmful verdicts of the rules served to the batch.
        screening: What the guard let through, refused and held.
        applied: The result of applying the ops.
        result: The new playbook (None until the ops are applied).
        done: The ops applied and the bullets removed: what the version records.
    """

    playbook: Playbook
    version: int
    report: StepReport
    traces: Sequence[Trace] | None = ()
    batch: Sequence[Trace] = ()
    stats: CallStats = field(default_factory=CallStats)
    strategy: Dealer | None = None
    earlier: Sequence[Seen] = ()
    remembered: Sequence[Seen] = ()
    candidate: Playbook | None = None
    learned_from: Playbook | None = None
    reflections: Sequence[LabelledReflection] = ()
    groups: Sequence[Sequence[LabelledReflection]] = ()
    proposals: Sequence[Sequence[DeltaOp]] = ()
    ops: Sequence[DeltaOp] = ()
    owed: Sequence[DeltaOp] = ()
    served: Sequence[DeltaOp] = ()
    screening: Screening | None = None
    applied: ApplyResult | None = None
    result: Playbook | None = None
    done: Sequence[DeltaOp] = ()

    @property
    def current(self) -> Playbook:
        """The playbook as the stages have made it so far."""
        return self.playbook if self.result is None else self.result


StageFn = Callable[["StepContext", StepState], Awaitable[tuple[StepState, Counts]]]
"""A stage's job: ``(context, state) -> (new state, counts)``."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One named job of a learning step.

    Args:
        name: Its name in the step's order and report (a Python identifier).
        run: The job (``StageFn``).
        proposes: It belongs to the part that turns traces into proposed ops
            (reflect ... aggregate), the part the strategies differ in; the other
            stages are what ``finish`` runs on ops given to it.
        rebase: It is re-run when a stale candidate's stored ops are re-applied
            onto a newer HEAD (``rebasing``).
    """

    name: str
    run: StageFn
    proposes: bool = False
    rebase: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigurationError("name", self.name, "a Python identifier such as 'dedup'")
        if not callable(self.run):
            raise ConfigurationError("run", self.run, "an async (context, state) function")

    def __repr__(self) -> str:
        return f"Stage({self.name!r})"


def check_stages(stages: object) -> tuple[Stage, ...]:
    """Return ``stages`` if it is a tuple of stages with distinct names, else raise."""
    if not isinstance(stages, tuple) or not all(isinstance(s, Stage) for s in stages):
        raise ConfigurationError("stages", stages, "a tuple of Stage objects")
    seen = [s.name for s in stages]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise ConfigurationError("stages", names(stages), f"distinct names ({twice} repeat)")
    return stages


def names(stages: Sequence[Stage]) -> tuple[str, ...]:
    """The stages' names, in order."""
    return tuple(s.name for s in stages)


def _missing(stages: Sequence[Stage], wanted: Sequence[str]) -> None:
    unknown = [n for n in wanted if n not in names(stages)]
    if unknown:
        # A misspelt name would otherwise ablate nothing, silently.
        raise ConfigurationError("names", unknown, f"names of these stages: {names(stages)}")


def without(stages: Sequence[Stage], *left_out: str) -> tuple[Stage, ...]:
    """The stages in order, but those named (an ablation)."""
    _missing(stages, left_out)
    return tuple(s for s in stages if s.name not in left_out)


def replacing(stages: Sequence[Stage], name: str, stage: Stage) -> tuple[Stage, ...]:
    """The stages in order, with ``stage`` in the place of the one named ``name``."""
    _missing(stages, [name])
    return check_stages(tuple(stage if s.name == name else s for s in stages))


def _record(report: StepReport, name: str, counts: Counts, seconds: float) -> None:
    for entry in report.stages:
        if entry.name == name:
            # A stage run again in the step (run by run): one entry, summed.
            entry.runs += 1
            entry.seconds += seconds
            for key, n in counts.items():
                entry.counts[key] = entry.counts.get(key, 0) + n
            return
    report.stages.append(StageEntry(name=name, counts=dict(counts), seconds=seconds))


async def run_stages(stages: Sequence[Stage], ctx: StepContext, state: StepState) -> StepState:
    """Run ``stages`` in order on ``state``, each adding its entry to ``state.report``."""
    for stage in stages:
        started = time.perf_counter()
        state, counts = await stage.run(ctx, state)
        _record(state.report, stage.name, counts, time.perf_counter() - started)
    return state
