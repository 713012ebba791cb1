"""Learning strategies: sequential ACE, naive batching, and the Combee scan.

All three run the same step, one tuple of named stages (``STEP_STAGES``, in
``stages``); they differ only in how reflections are dealt to curators
(``Strategy.deal``: one group, or Combee's augmented shuffle) and in whether the
stages run on the whole batch or run by run (the sequential strategy). A step
never touches a store: it returns the new playbook and its report, and the
caller decides.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, TypeVar

from langgraph_combee._algorithm.roles import FullRoles, RoleProfile, adopt
from langgraph_combee._algorithm.stages import (
    STEP_STAGES,
    Stage,
    StepState,
    after_proposal,
    check_stages,
    run_stages,
)
from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Reflection, StepReport, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._guard.guard import BulletGuard
from langgraph_combee._llm.calls import CallStats, LLMCaller
from langgraph_combee._rules import rules

__all__ = [
    "STRATEGIES",
    "CombeeStrategy",
    "NaiveStrategy",
    "SequentialStrategy",
    "StepContext",
    "StepResult",
    "Strategy",
    "adopt",
    "finish",
    "make_strategy",
    "shuffle_groups",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class StepContext:
    """What a step needs besides the playbook and the traces.

    ``stages`` is the step's order (``STEP_STAGES``); the benchmarks' ablations
    pass another tuple. ``caller`` is None only where no stage calls the learner
    LLM (rebasing).
    """

    caller: LLMCaller | None = None
    token_budget: int | None = 2000
    embedder: Embedder | None = None
    dedup_threshold: float | None = None
    dedup: bool = True
    guard: BulletGuard | None = None
    roles: RoleProfile = field(default_factory=FullRoles)
    # The inputs of this learner's earlier steps: evidence for served rules and labels.
    memory: rules.InputMemory = field(default_factory=rules.InputMemory)
    stages: tuple[Stage, ...] = STEP_STAGES
    # Most worked examples the playbook keeps (the ``examples`` stage); 0: none.
    examples: int = 0

    def __post_init__(self) -> None:
        check_stages(self.stages)


@dataclass(frozen=True)
class StepResult:
    """A step's new playbook, the ops that made it, and its report."""

    playbook: Playbook
    ops: list[DeltaOp]
    report: StepReport
    reflections: list[Reflection] = field(default_factory=list)


async def finish(
    ctx: StepContext,
    playbook: Playbook,
    ops: Sequence[DeltaOp],
    *,
    version: int,
    report: StepReport,
    traces: Sequence[Trace] = (),
    stats: CallStats | None = None,
    batch: Sequence[Trace] | None = None,
) -> tuple[Playbook, list[DeltaOp]]:
    """Run the stages of ``ctx.stages`` that follow the proposal on ``ops``.

    Weigh the evidence, screen ops (guard), apply them, remove discredited and
    contradicted bullets, de-duplicate, promote supported bullets, then budget.
    Held ops (policy changes) are left out and listed in ``report.held``.
    ``batch`` is the step's whole batch when ``traces`` is only part of it.

    Returns:
        The new playbook, and the ops applied with the bullets removed.
    """
    state = _start(
        ctx,
        playbook,
        traces,
        batch=traces if batch is None else batch,
        version=version,
        report=report,
        stats=stats if stats is not None else CallStats(),
    )
    state = await run_stages(after_proposal(ctx.stages), ctx, replace(state, ops=list(ops)))
    return state.current, list(state.done)


def _start(
    ctx: StepContext,
    playbook: Playbook,
    traces: Sequence[Trace],
    *,
    batch: Sequence[Trace],
    version: int,
    report: StepReport,
    stats: CallStats,
    strategy: Strategy | None = None,
) -> StepState:
    earlier = ctx.memory.items()
    return StepState(
        playbook=playbook,
        version=version,
        report=report,
        traces=traces,
        batch=batch,
        stats=stats,
        strategy=strategy,
        earlier=earlier,
        remembered=earlier,
    )


class Strategy:
    """Base class: one learning step over a batch of traces, run as ``ctx.stages``.

    A strategy says how reflections are dealt to curators (``deal``) and
    whether the stages run on the batch or once per trace (``per_trace``).
    """

    name: ClassVar[str] = ""
    per_trace: ClassVar[bool] = False

    def deal(self, reflections: Sequence[_T]) -> list[list[_T]]:
        """The groups of reflections, one curator call each (all of them in one, by default)."""
        return [list(reflections)]

    def group_sizes(self, groups: Sequence[Sequence[object]]) -> list[int]:
        """What ``StepReport.group_sizes`` records for the groups ``deal`` made."""
        return [len(g) for g in groups]

    async def step(
        self, ctx: StepContext, playbook: Playbook, traces: Sequence[Trace], *, version: int
    ) -> StepResult:
        """Learn from ``traces`` and return the new playbook; never writes anything."""
        stats = CallStats()
        report = StepReport(
            strategy=self.name, batch_size=len(traces), trace_ids=[t.id for t in traces]
        )
        report.roles = ctx.roles.describe()
        started = time.perf_counter()
        ops: list[DeltaOp] = []
        reflections: list[Reflection] = []
        parts = [[t] for t in traces] if self.per_trace else [list(traces)]
        try:
            for part in parts:
                state = _start(
                    ctx,
                    playbook,
                    part,
                    batch=traces,
                    version=version,
                    report=report,
                    stats=stats,
                    strategy=self,
                )
                state = await run_stages(ctx.stages, ctx, state)
                # Run by run, each trace is reflected on against the playbook as the
                # previous one left it.
                playbook = state.current
                ops.extend(state.done)
                reflections.extend(i.reflection for i in state.reflections)
        finally:
            # A failed step counts too: replies that keep failing are what the
            # automatic profile switches on.
            ctx.roles.observe(stats)
        report.seconds = time.perf_counter() - started
        report.calls = stats.short_calls()
        report.failed_calls = {k.removeprefix("combee."): v for k, v in stats.failed.items()}
        report.unparsed = {k.removeprefix("combee."): v for k, v in stats.unparsed.items()}
        report.truncated = {k.removeprefix("combee."): v for k, v in stats.truncated.items()}
        report.input_tokens = stats.input_tokens
        report.output_tokens = stats.output_tokens
        return StepResult(playbook, ops, report, reflections)


class SequentialStrategy(Strategy):
    """ACE as published: for each trace in turn, reflect, curate, apply."""

    name = "sequential"
    per_trace = True

    def group_sizes(self, groups: Sequence[Sequence[object]]) -> list[int]:
        """One per run: ACE's curator reads one run, reflected on or not."""
        return [1]


class NaiveStrategy(Strategy):
    """Reflect on the batch in parallel, then hand every reflection to ONE curator call."""

    name = "naive"


def shuffle_groups(
    items: Sequence[_T], *, copies: int, groups: int, rng: random.Random
) -> list[list[_T]]:
    """Duplicate each item ``copies`` times, shuffle, and deal into near-equal groups.

    Each copy is dealt from its own shuffle, so the copies of one item meet
    different neighbours: dealing every item's copies one after another would
    send them to the same pair of groups whenever ``copies`` divides
    ``groups``, and make those groups identical (the same curator call twice).
    Copies of one item go to different groups whenever there are at least
    ``copies`` groups, so each reflection reaches that many independent curators
    (two copies in one group would be shown to its curator once).
    """
    n = len(items)
    groups = max(1, min(groups, n * copies))
    members: list[set[int]] = [set() for _ in range(groups)]
    dealt: list[list[int]] = [[] for _ in range(groups)]
    position = 0
    for _ in range(copies):
        order = list(range(n))
        rng.shuffle(order)
        # Round robin, continued from the previous copy, keeps the groups within one.
        placed: list[list[int]] = [[] for _ in range(groups)]
        for p, item in enumerate(order):
            placed[(position + p) % groups].append(item)
        position += n
        if not _separate_copies(placed, members) and groups >= copies:
            # Too few items to keep copies apart copy by copy (2 items, 4 copies, 5
            # groups): dealt one item's copies after another, which always does.
            pool = [i for i in order for _ in range(copies)]
            dealt = [pool[g::groups] for g in range(groups)]
            break
        for g, chosen in enumerate(placed):
            dealt[g].extend(chosen)
            members[g].update(chosen)
    out = [[items[i] for i in group] for group in dealt]
    for group in out:
        rng.shuffle(group)
    return out


def _separate_copies(placed: list[list[int]], members: Sequence[set[int]]) -> bool:
    """Move this copy's items out of groups that already hold an earlier copy of them.

    Group sizes stay as dealt: an item that must leave its group takes a place
    in a group it is new to, whose item moves on, and so on, along the shortest
    chain that ends back in the group it left (found breadth first). Where no
    chain exists the item stays, and False is returned.
    """
    separated = True
    for start, chosen in enumerate(placed):
        for item in [i for i in chosen if i in members[start]]:
            # Breadth first over groups: how an item of this copy can enter each one.
            came: dict[int, tuple[int, int]] = {}  # group -> (group it came from, item moved)
            frontier = [g for g in range(len(placed)) if g != start and item not in members[g]]
            for g in frontier:
                came[g] = (start, item)
            while frontier and start not in came:
                nxt: list[int] = []
                for g in frontier:
                    for moved in placed[g]:
                        # An item of this copy is in one group only: ``h != g`` is
                        # ``moved not in placed[h]``, without reading the group.
                        for h in range(len(placed)):
                            if h != g and h not in came and moved not in members[h]:
                                came[h] = (g, moved)
                                nxt.append(h)
                        if start in came:
                            break
                    if start in came:
                        # The chain back from ``start`` is found; later entries would
                        # not change it (a group's first way in is kept).
                        break
                frontier = nxt
            if start not in came:
                separated = False
                continue
            # Walk the chain back: each moved item leaves its group for the next one.
            g = start
            while True:
                source, moved = came[g]
                placed[source].remove(moved)
                placed[g].append(moved)
                if moved == item:
                    break
                g = source
    return separated


class CombeeStrategy(Strategy):
    """Combee: parallel map, augmented shuffle, two-level parallel scan, one apply.

    Args:
        copies: How many times each reflection is duplicated before shuffling (p).
        fan_in: Number of level-1 groups, which is also the aggregator's fan-in;
            None means floor(sqrt(n)) for n reflections, as the paper does.
        seed: Seed of the shuffle; the step index is mixed in so steps differ.
    """

    name = "combee"

    def __init__(self, *, copies: int = 2, fan_in: int | None = None, seed: int = 0) -> None:
        if copies < 1:
            raise ConfigurationError("copies", copies, "an int >= 1")
        if fan_in is not None and fan_in < 1:
            raise ConfigurationError("fan_in", fan_in, "None or an int >= 1")
        self.copies = copies
        self.fan_in = fan_in
        self.seed = seed
        self._steps = 0

    def group_count(self, n: int) -> int:
        """Number of level-1 groups for n reflections (1 below four)."""
        if n < 4:
            return 1
        return self.fan_in if self.fan_in is not None else math.isqrt(n)

    def deal(self, reflections: Sequence[_T]) -> list[list[_T]]:
        """The augmented shuffle: each reflection ``copies`` times in ``group_count`` groups.

        Called once per step: the step index is mixed into the shuffle's seed.
        """
        k = self.group_count(len(reflections))
        rng = random.Random(f"{self.seed}:{self._steps}")
        self._steps += 1
        if not reflections:
            return []
        if k == 1:
            return [list(reflections)]
        return shuffle_groups(reflections, copies=self.copies, groups=k, rng=rng)


STRATEGIES: dict[str, type[Strategy]] = {
    "sequential": SequentialStrategy,
    "naive": NaiveStrategy,
    "combee": CombeeStrategy,
}


def make_strategy(strategy: str | Strategy, **options: int | None) -> Strategy:
    """Return a strategy instance from its name (or the instance itself)."""
    if isinstance(strategy, Strategy):
        return strategy
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ConfigurationError("strategy", strategy, f"one of {sorted(STRATEGIES)}")
    if strategy == "combee":
        return CombeeStrategy(**{k: v for k, v in options.items() if v is not None})  # type: ignore[arg-type]
    return STRATEGIES[strategy]()
