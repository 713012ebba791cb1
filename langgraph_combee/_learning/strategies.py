"""Learning strategies: sequential ACE, naive batching, and the Combee scan.

All three share one interface, ``Strategy.step(ctx, playbook, traces, version)``,
and the same building blocks (reflect, curate, apply). A step never touches a
store: it returns the new playbook and its report, and the caller decides.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from langgraph_combee._core.dedup import Embedder, deduplicate
from langgraph_combee._core.ops import Add, DeltaOp, Remove, Tag, Update
from langgraph_combee._core.playbook import EXAMPLES_SECTION, Playbook
from langgraph_combee._core.situations import alternatives, parse_rule
from langgraph_combee._core.types import Reflection, StepReport, Trace
from langgraph_combee._errors import ConfigurationError, LearningError, LLMCallError
from langgraph_combee._learning import conventions, examples, rules, telling
from langgraph_combee._learning.calls import CallStats, LLMCaller
from langgraph_combee._learning.guard import BulletGuard
from langgraph_combee._learning.provenance import Evidence, Trust
from langgraph_combee._learning.roles import FullRoles, RoleProfile, adopt
from langgraph_combee._learning.support import attribute, promote, support_keys

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


@dataclass(frozen=True)
class StepContext:
    """What a strategy needs besides the playbook and the traces."""

    caller: LLMCaller
    token_budget: int | None = 2000
    embedder: Embedder | None = None
    dedup_threshold: float | None = None
    dedup: bool = True
    guard: BulletGuard | None = None
    roles: RoleProfile = field(default_factory=FullRoles)
    # Private ablation switches (benchmarks/grid.py), not Combee settings: False turns
    # off rule corrections (only ADDs apply; no counter, reconcile or removal) and
    # level 2's merge (the plain union of the level-1 proposals).
    corrections: bool = True
    merge: bool = True
    # The inputs of this learner's earlier steps, evidence for sharpening situations.
    memory: rules.InputMemory = field(default_factory=rules.InputMemory)
    # Most worked examples the playbook keeps (``examples``); 0: none.
    examples: int = 0


@dataclass(frozen=True)
class StepResult:
    """A step's new playbook, the ops that made it, and its report."""

    playbook: Playbook
    ops: list[DeltaOp]
    report: StepReport
    reflections: list[Reflection] = field(default_factory=list)


@dataclass
class _Labelled:
    label: str
    reflection: Reflection


async def reflect_all(
    ctx: StepContext, playbook: Playbook, traces: Sequence[Trace], stats: CallStats
) -> list[_Labelled]:
    """Reflect on every trace in parallel against the same playbook snapshot.

    A reflection that fails or cannot be parsed is lost (and counted); if every
    reflection fails because the LLM keeps raising, the step fails. Traces the
    role profile has nothing to learn from (``needs_reflection``) cost no call.
    """
    roles = ctx.roles.active()
    # A run whose only stated fault is a convention every reply must follow is not
    # reflected on: the small reflector would restate it as a rule for that one input.
    trust = ctx.guard.trust if ctx.guard is not None else None
    known = [c for _, c in conventions.learned(playbook)]
    known += conventions.stated(traces, playbook, trust)

    async def one(trace: Trace) -> Reflection | None:
        try:
            return await roles.reflect(ctx.caller, trace, playbook, stats)
        except LLMCallError:
            return None

    todo = [t for t in traces if roles.needs_reflection(t) and not conventions.explained(t, known)]
    results = await asyncio.gather(*(one(t) for t in todo))
    if todo and all(r is None for r in results):
        if stats.failed["combee.reflect"] == len(todo):
            raise LearningError(
                f"all {len(todo)} reflections failed: the learner LLM is unavailable"
            )
        # Garbage (or truncated JSON beyond repair) for every trace: the learner
        # LLM is broken, not the traces. Failing keeps them queued for a retry.
        raise LearningError(
            f"no usable reflection for any of the {len(todo)} traces: every reply "
            "failed, could not be parsed or hit its length limit, even after a repair request"
        )
    return [
        _Labelled(f"R{i}", r)
        for i, r in enumerate(results, start=1)
        if r is not None and not r.is_empty()
    ]


def _required(ops: list[DeltaOp] | None, run_name: str) -> list[DeltaOp]:
    """The ops of the step's only curator call; its unusable reply fails the step."""
    if ops is None:
        raise LearningError(
            f"{run_name}: the only curator reply of the step could not be parsed, even after "
            "a repair request; nothing was learned from its reflections"
        )
    return ops


def note_left_out(
    ctx: StepContext, labelled: Sequence[_Labelled], ops: Sequence[DeltaOp], report: StepReport
) -> None:
    """List in the report the reflections' rules that no op of the curation carries.

    Small-model curators adopt rules as written, so a rule no ADD carries was left
    out (by a curator, or by the aggregator). Full-profile curators rewrite
    insights into their own ops, so nothing is listed for them.
    """
    if ctx.roles.active().name != "small":
        return
    carried = {_text(op.content) for op in ops if isinstance(op, Add)}
    # A rule left out keeps the part of its situation no rival names (``roles``): an
    # ADD of its action with some of its alternatives carries it, narrowed.
    narrowed = [rule for op in ops if isinstance(op, Add) and (rule := parse_rule(op.content))]
    for item in labelled:
        insight = item.reflection.key_insight
        if not insight or _text(insight) in carried or insight in report.left_out:
            continue
        rule = parse_rule(insight)
        if rule is not None and any(
            rules.same_action(kept.action, rule.action)
            and {_text(a) for a in alternatives(kept.situation)}
            < {_text(a) for a in alternatives(rule.situation)}
            for kept in narrowed
        ):
            continue
        report.left_out.append(insight)


def _text(content: str) -> str:
    return " ".join(content.lower().split())


def tag_ops(reflections: Sequence[_Labelled]) -> list[DeltaOp]:
    """Sum the reflectors' helpful/harmful tags into one TAG op per bullet."""
    totals: dict[str, list[int]] = {}
    sources: dict[str, list[str]] = {}
    for item in reflections:
        for tag in item.reflection.bullet_tags:
            if tag.tag == "neutral":
                continue
            counts = totals.setdefault(tag.id, [0, 0])
            counts[0 if tag.tag == "helpful" else 1] += 1
            sources.setdefault(tag.id, []).append(item.reflection.trace_id)
    return [
        Tag(id=bid, helpful=h, harmful=x, sources=list(dict.fromkeys(sources[bid])))
        for bid, (h, x) in totals.items()
    ]


async def curate(
    ctx: StepContext,
    run_name: str,
    playbook: Playbook,
    group: Sequence[_Labelled],
    stats: CallStats,
) -> list[DeltaOp] | None:
    """One curator call over a group of reflections; None if the reply was unusable."""
    # A group may hold both copies of a reflection; the curator sees each once.
    unique = list({item.label: item for item in group}.values())
    return await ctx.roles.active().curate(
        ctx.caller,
        run_name,
        playbook,
        [(i.label, i.reflection) for i in unique],
        stats,
        token_budget=ctx.token_budget,
    )


def _weigh(
    playbook: Playbook,
    narrowed: Sequence[DeltaOp],
    ops: Sequence[DeltaOp],
    traces: Sequence[Trace],
    report: StepReport,
    version: int,
    seen: Sequence[rules.Seen] = (),
    trust: Trust | None = None,
) -> list[DeltaOp]:
    """Served-outcome verdicts first (``seen``: the inputs remembered, which ground
    rules), then the live rules ``narrowed`` by the memory, then the new rules settled
    among themselves, those with one action folded into one rule, and all reconciled
    with the playbook as narrowed (``rules``), conflicts recorded in the report."""
    served, misapplied = rules.served_evidence(playbook, traces, seen, trust)
    report.served_misapplied += misapplied
    for tag in served:
        assert isinstance(tag, Tag)
        report.served_helpful += tag.helpful
        report.served_harmful += tag.harmful
    settled, batch_conflicts = rules.settle_batch(list(ops))
    # Reconcile's UPDATE of a bullet carries its whole new text and comes after the
    # narrowing: built on the text before it, it would put the dropped alternatives back.
    basis = playbook.apply(narrowed, version=version).playbook if narrowed else playbook
    reconciled, playbook_conflicts = rules.reconcile(basis, rules.fold_actions(settled))
    report.conflicts.extend(c.describe() for c in [*batch_conflicts, *playbook_conflicts])
    return [*served, *narrowed, *reconciled]


def _clean(playbook: Playbook, version: int, report: StepReport) -> tuple[Playbook, list[DeltaOp]]:
    """Remove what service discredits, then the weaker side of any contradiction left."""
    removals = rules.discredited(playbook)
    if removals:
        playbook = playbook.apply(removals, version=version).playbook
    contradictions, found = rules.resolve_conflicts(playbook)
    if contradictions:
        playbook = playbook.apply(contradictions, version=version).playbook
    report.discredited += len(removals)
    report.conflicts.extend(c.describe() for c in found)
    done = [*removals, *contradictions]
    if done:
        report.ops["remove"] = report.ops.get("remove", 0) + len(done)
    return playbook, done


def _user_word_fault(
    guard: BulletGuard, traces: Sequence[Trace], playbook: Playbook
) -> rules.UserWordFault:
    cache: dict[tuple[str, ...], Evidence] = {}

    def fault(op: DeltaOp) -> int | None:
        if not isinstance(op, Add | Update):
            return 0
        return guard.user_word_fault(op, traces, playbook, cache)

    return fault


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
    """Weigh the evidence, screen ops (guard), apply them, remove discredited and
    contradicted bullets, de-duplicate, promote supported bullets, then budget.

    Held ops (policy changes) are left out and listed in ``report.held``.
    ``batch`` is the step's whole batch when ``traces`` is only part of it (the
    sequential strategy finishes run by run): situations are sharpened on it.
    """
    # Situations are sharpened on the batch's inputs whatever the corrections switch:
    # it is what a rule matches on, not a correction of an older one.
    whole = traces if batch is None else batch
    earlier = ctx.memory.items()
    # Conventions every reply must follow are read from the feedback, not reflected on;
    # one an LLM wrote would be served on every request without that evidence.
    section = playbook.resolve_section("others")
    trust = ctx.guard.trust if ctx.guard is not None else None
    ops = [op for op in ops if not conventions.written(op)]
    owed = conventions.found(whole, playbook, section=section, trust=trust)
    # Words the inputs tie to a rule's action join its situation first: what the
    # reflector named is often no word a new input of the case would hold, and a rule
    # whose every alternative sharpening drops keeps the words its inputs share.
    verdict = telling.guard_verdict(ctx.guard) if ctx.guard is not None else None
    ops, told = telling.widen(ops, rules.evidence(whole, ops, earlier), verdict=verdict)
    report.telling_words += told
    ops, vague = rules.sharpen(ops, whole, earlier)
    report.vague_alternatives += vague
    ctx.memory.remember(whole, ops)
    # Rules already served are narrowed too, once the inputs seen since show an
    # alternative of theirs is shared by cases that need other actions.
    if ctx.corrections:
        remembered = ctx.memory.items()
        narrowed, dropped = rules.sharpen_playbook(playbook, remembered)
        report.vague_alternatives += dropped
        # ... and widened by the words the inputs seen since tie to their action (not
        # under a support threshold: a rewrite there is a pending ADD no one can back).
        grown: list[Update] = []
        if ctx.guard is None or ctx.guard.min_support <= 1:
            basis = playbook.apply(narrowed, version=version).playbook if narrowed else playbook
            fresh = {t.id for t in whole}
            grown, told = telling.widen_playbook(
                basis, remembered, verdict=verdict, besides=ops, fresh=fresh
            )
            report.telling_words += told
        if grown:
            # An UPDATE built on the narrowed text carries the narrowing with it.
            ids = {op.id for op in grown}
            narrowed = [*(op for op in narrowed if getattr(op, "id", None) not in ids), *grown]
        ops = _weigh(playbook, narrowed, ops, traces, report, version, remembered, trust)
    else:
        ops = [op for op in ops if isinstance(op, Add)]
        # No corrections: a new sign-off cannot replace the old one, so it is not added.
        owed = [] if any(isinstance(op, Remove) for op in owed) else owed
    ops = [*owed, *examples.without_examples(ops, playbook)]
    guard = ctx.guard
    screening = None
    if guard is not None and traces:
        # A rule refused only for carrying too many of the user's words keeps fewer of
        # its situation's alternatives instead (it is screened in full below).
        ops, fitted = rules.fit(
            ops, _user_word_fault(guard, traces, playbook), [t.input for t in traces]
        )
        report.narrowed_for_guard += fitted
    if guard is not None:
        screening = await guard.ascreen(
            ops, traces=traces, playbook=playbook, caller=ctx.caller, stats=stats
        )
        report.quarantined.extend(screening.quarantined)
        report.held.extend(screening.held)
        ops = screening.accepted
    if ctx.examples and traces:
        # Examples are quoted requests with a trusted answer, not rules: the guard's
        # deterministic checks read each request and answer here instead.
        added, outcome = examples.example_ops(
            playbook,
            traces,
            trust=trust or Trust(),
            check=guard.check if guard is not None else None,
            limit=ctx.examples,
        )
        ops = [*ops, *added]
        report.examples_added += outcome.added
        report.examples_skipped.extend(outcome.skipped)
    applied = playbook.apply(ops, version=version)
    if screening is not None:
        applied = screening.record_support(applied)
    report.unknown_ops += len(applied.skipped)
    for kind, n in applied.counts().items():
        report.ops[kind] = report.ops.get(kind, 0) + n
    result = applied.playbook
    supported = guard is not None and guard.min_support > 1
    if supported:
        assert guard is not None
        result = attribute(
            applied, support_keys(traces, guard.user_key, anonymous=guard.anonymous_support)
        )
    removed: list[DeltaOp] = []
    if ctx.corrections:
        result, removed = _clean(result, version, report)
    if ctx.dedup:
        # Worked examples are never merged with rules or with each other.
        worked = [b for b in result.bullets if b.section == EXAMPLES_SECTION]
        rules_only = result.replace_bullets(
            [b for b in result.bullets if b.section != EXAMPLES_SECTION]
        )
        changed = {b.id for b in rules_only.bullets if b.updated_version == version}
        deduped = deduplicate(
            rules_only, threshold=ctx.dedup_threshold, embedder=ctx.embedder, changed=changed
        )
        report.merged += len(deduped.merges)
        result = deduped.playbook.replace_bullets([*deduped.playbook.bullets, *worked])
    if supported:
        assert guard is not None
        result, _ = promote(result, min_support=guard.min_support, max_pending=guard.max_pending)
    budgeted = result.enforce_budget(ctx.token_budget)
    report.evicted += len(budgeted.evicted)
    return budgeted.playbook, [*applied.applied, *removed]


class Strategy:
    """Base class: one learning step over a batch of traces."""

    name: ClassVar[str] = ""

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
        try:
            new_playbook, ops, reflections = await self._run(
                ctx, playbook, traces, version=version, stats=stats, report=report
            )
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
        return StepResult(new_playbook, ops, report, reflections)

    async def _run(
        self,
        ctx: StepContext,
        playbook: Playbook,
        traces: Sequence[Trace],
        *,
        version: int,
        stats: CallStats,
        report: StepReport,
    ) -> tuple[Playbook, list[DeltaOp], list[Reflection]]:
        raise NotImplementedError


class SequentialStrategy(Strategy):
    """ACE as published: for each trace in turn, reflect, curate, apply."""

    name = "sequential"

    async def _run(
        self,
        ctx: StepContext,
        playbook: Playbook,
        traces: Sequence[Trace],
        *,
        version: int,
        stats: CallStats,
        report: StepReport,
    ) -> tuple[Playbook, list[DeltaOp], list[Reflection]]:
        all_ops: list[DeltaOp] = []
        reflections: list[Reflection] = []
        for trace in traces:
            labelled = await reflect_all(ctx, playbook, [trace], stats)
            report.group_sizes.append(1)
            reflections.extend(i.reflection for i in labelled)
            ops = list(tag_ops(labelled))
            if labelled:
                proposed = await curate(ctx, "combee.curate", playbook, labelled, stats)
                ops.extend(proposed or [])
                if proposed is not None:
                    note_left_out(ctx, labelled, ops, report)
            # Even with nothing to reflect on, the run's served outcome is evidence.
            playbook, applied = await finish(
                ctx,
                playbook,
                ops,
                version=version,
                report=report,
                traces=[trace],
                stats=stats,
                batch=traces,
            )
            all_ops.extend(applied)
        return playbook, all_ops, reflections


class NaiveStrategy(Strategy):
    """Reflect on the batch in parallel, then hand every reflection to ONE curator call."""

    name = "naive"

    async def _run(
        self,
        ctx: StepContext,
        playbook: Playbook,
        traces: Sequence[Trace],
        *,
        version: int,
        stats: CallStats,
        report: StepReport,
    ) -> tuple[Playbook, list[DeltaOp], list[Reflection]]:
        labelled = await reflect_all(ctx, playbook, traces, stats)
        report.group_sizes = [len(labelled)]
        ops = tag_ops(labelled)
        if labelled:
            proposed = await curate(ctx, "combee.curate", playbook, labelled, stats)
            ops.extend(_required(proposed, "combee.curate"))
            note_left_out(ctx, labelled, ops, report)
        new, applied = await finish(
            ctx, playbook, ops, version=version, report=report, traces=traces, stats=stats
        )
        return new, applied, [i.reflection for i in labelled]


def shuffle_groups(
    items: Sequence[_Labelled], *, copies: int, groups: int, rng: random.Random
) -> list[list[_Labelled]]:
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

    async def _run(
        self,
        ctx: StepContext,
        playbook: Playbook,
        traces: Sequence[Trace],
        *,
        version: int,
        stats: CallStats,
        report: StepReport,
    ) -> tuple[Playbook, list[DeltaOp], list[Reflection]]:
        labelled = await reflect_all(ctx, playbook, traces, stats)
        ops: list[DeltaOp] = tag_ops(labelled)
        k = self.group_count(len(labelled))
        rng = random.Random(f"{self.seed}:{self._steps}")
        self._steps += 1
        if not labelled:
            report.group_sizes = []
        elif k == 1:
            report.group_sizes = [len(labelled)]
            proposed = await curate(ctx, "combee.curate", playbook, labelled, stats)
            ops.extend(_required(proposed, "combee.curate"))
            note_left_out(ctx, labelled, ops, report)
        else:
            groups = shuffle_groups(labelled, copies=self.copies, groups=k, rng=rng)
            report.group_sizes = [len(g) for g in groups]
            ops.extend(await self._reduce(ctx, playbook, groups, labelled, stats, report))
            note_left_out(ctx, labelled, ops, report)
        new, applied = await finish(
            ctx, playbook, ops, version=version, report=report, traces=traces, stats=stats
        )
        return new, applied, [i.reflection for i in labelled]

    async def _reduce(
        self,
        ctx: StepContext,
        playbook: Playbook,
        groups: list[list[_Labelled]],
        labelled: list[_Labelled],
        stats: CallStats,
        report: StepReport,
    ) -> list[DeltaOp]:
        async def propose(group: list[_Labelled]) -> list[DeltaOp] | None:
            try:
                return await curate(ctx, "combee.propose", playbook, group, stats)
            except LLMCallError:
                return None

        proposals = await asyncio.gather(*(propose(g) for g in groups))
        usable = [p for p in proposals if p is not None]
        if not usable:
            raise LearningError(f"all {len(groups)} level-1 curator calls failed")
        if not ctx.merge:
            report.aggregation = "union"
            return [op for proposal in usable for op in proposal]
        result = await ctx.roles.active().aggregate(
            ctx.caller,
            playbook,
            usable,
            [(i.label, i.reflection) for i in labelled],
            stats,
            token_budget=ctx.token_budget,
        )
        report.aggregation = result.mode
        return result.ops


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
