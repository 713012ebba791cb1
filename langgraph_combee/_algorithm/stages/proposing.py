"""The stages that turn a batch's traces into proposed ops: reflect, tag, shuffle, propose,
aggregate (or its ablation, union), and the record of the rules left out.

The three strategies run these same stages; they differ only in how the
reflections are dealt to curators (``Strategy.deal``: one group, or Combee's
augmented shuffle) and in whether the stages run on the batch or run by run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from langgraph_combee._algorithm import notes
from langgraph_combee._algorithm.stages.base import (
    Counts,
    Dealer,
    LabelledReflection,
    StepContext,
    StepState,
)
from langgraph_combee._core.ops import Add, DeltaOp, Tag
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.situations import alternatives, parse_rule
from langgraph_combee._core.types import Reflection, StepReport, Trace
from langgraph_combee._errors import LearningError, LLMCallError
from langgraph_combee._guard.provenance import TRUSTED_FEEDBACK_SOURCES
from langgraph_combee._llm.calls import CallStats, LLMCaller
from langgraph_combee._rules import conventions, rules

__all__ = [
    "aggregate",
    "curate",
    "left_out",
    "note_left_out",
    "propose",
    "reflect",
    "reflect_all",
    "shuffle",
    "tag",
    "tag_ops",
    "union",
]


def _caller(ctx: StepContext) -> LLMCaller:
    if ctx.caller is None:
        raise LearningError("this stage calls the learner LLM, and the step has no caller")
    return ctx.caller


def _strategy(state: StepState) -> Dealer:
    if state.strategy is None:
        raise LearningError("the shuffle stage deals reflections by a strategy; none was given")
    return state.strategy


async def reflect_all(
    ctx: StepContext,
    playbook: Playbook,
    traces: Sequence[Trace],
    stats: CallStats,
    *,
    carried_nothing: dict[str, str] | None = None,
) -> list[LabelledReflection]:
    """Reflect on every trace in parallel against the same playbook snapshot.

    A reflection that fails or cannot be parsed is lost (and counted); if every
    reflection fails because the LLM keeps raising, the step fails. Traces the
    role profile has nothing to learn from (``needs_reflection``) cost no call.
    Each trace that yields no reflection is entered in ``carried_nothing`` with
    the reason (``StepReport.not_reflected``).
    """
    caller = _caller(ctx)
    roles = ctx.roles.active()
    # A run whose only stated fault is a convention every reply must follow is not
    # reflected on: the small reflector would restate it as a rule for that one input.
    trust = ctx.guard.trust if ctx.guard is not None else None
    known = [c for _, c in conventions.learned(playbook)]
    known += conventions.stated(traces, playbook, trust)

    async def one(trace: Trace) -> Reflection | None:
        try:
            return await roles.reflect(caller, trace, playbook, stats)
        except LLMCallError:
            return None

    todo: list[Trace] = []
    nothing = carried_nothing if carried_nothing is not None else {}
    for trace in traces:
        if not roles.needs_reflection(trace):
            nothing[trace.id] = _why_not_reflected(trace)
        elif conventions.explained(trace, known):
            nothing[trace.id] = "explained by a convention the feedback states"
        else:
            todo.append(trace)
    with notes.trusting(trust.comment_sources if trust is not None else TRUSTED_FEEDBACK_SOURCES):
        results = await asyncio.gather(*(one(t) for t in todo))
    for trace, result in zip(todo, results, strict=True):
        if result is None:
            nothing[trace.id] = "the reflector's reply failed or could not be used"
        elif result.is_empty():
            nothing[trace.id] = "the reflector found no lesson"
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
        LabelledReflection(f"R{i}", r)
        for i, r in enumerate(results, start=1)
        if r is not None and not r.is_empty()
    ]


def _why_not_reflected(trace: Trace) -> str:
    feedback = trace.feedback
    if feedback is not None and feedback.correct is True:
        return "judged right: nothing to correct"
    if feedback is None or feedback.is_empty():
        return "no feedback and no error"
    return "the role profile learns nothing from it"


def tag_ops(reflections: Sequence[LabelledReflection]) -> list[DeltaOp]:
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
    group: Sequence[LabelledReflection],
    stats: CallStats,
) -> list[DeltaOp] | None:
    """One curator call over a group of reflections; None if the reply was unusable."""
    # A group may hold both copies of a reflection; the curator sees each once.
    unique = list({item.label: item for item in group}.values())
    return await ctx.roles.active().curate(
        _caller(ctx),
        run_name,
        playbook,
        [(i.label, i.reflection) for i in unique],
        stats,
        token_budget=ctx.token_budget,
    )


def note_left_out(
    ctx: StepContext,
    labelled: Sequence[LabelledReflection],
    ops: Sequence[DeltaOp],
    report: StepReport,
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


# ---- the stages ------------------------------------------------------------------------------


async def reflect(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Reflect on every trace in parallel, against the playbook the step starts from."""
    nothing: dict[str, str] = {}
    labelled = await reflect_all(
        ctx, state.playbook, state.traces or (), state.stats, carried_nothing=nothing
    )
    state.report.not_reflected.update(nothing)
    return replace(state, reflections=labelled), {
        "reflections": len(labelled),
        "carried_nothing": len(nothing),
    }


async def tag(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Sum the reflectors' helpful/harmful tags into one TAG op per bullet."""
    tags = tag_ops(state.reflections)
    return replace(state, ops=[*state.ops, *tags]), {"tags": len(tags)}


async def shuffle(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Deal the reflections into groups, one curator call each (``Strategy.deal``)."""
    strategy = _strategy(state)
    groups = strategy.deal(state.reflections)
    state.report.group_sizes.extend(strategy.group_sizes(groups))
    return replace(state, groups=groups), {"groups": len(groups)}


def _required(ops: list[DeltaOp] | None, run_name: str) -> list[DeltaOp]:
    """The ops of the step's only curator call; its unusable reply fails the step."""
    if ops is None:
        raise LearningError(
            f"{run_name}: the only curator reply of the step could not be parsed, even after "
            "a repair request; nothing was learned from its reflections"
        )
    return ops


async def propose(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """One curator call per group, in parallel, each proposing ops.

    One group is the step's one curator call (``combee.curate``): its unusable
    reply fails the step, unless the strategy learns run by run (one call of
    many). Several groups are Combee's level 1 (``combee.propose``): a call that
    fails or cannot be read loses its group only, unless every one does.
    """
    groups = [g for g in state.groups if g]
    if not groups:
        return replace(state, proposals=[]), {"calls": 0}
    if len(state.groups) == 1:
        proposed = await curate(ctx, "combee.curate", state.playbook, groups[0], state.stats)
        if not _strategy(state).per_trace:
            proposed = _required(proposed, "combee.curate")
        usable = [] if proposed is None else [proposed]
    else:

        async def one(group: Sequence[LabelledReflection]) -> list[DeltaOp] | None:
            try:
                return await curate(ctx, "combee.propose", state.playbook, group, state.stats)
            except LLMCallError:
                return None

        proposals = await asyncio.gather(*(one(g) for g in groups))
        usable = [p for p in proposals if p is not None]
        if not usable:
            raise LearningError(f"all {len(groups)} level-1 curator calls failed")
    counts = {"calls": len(groups), "usable": len(usable), "ops": sum(len(p) for p in usable)}
    return replace(state, proposals=usable), counts


def _proposed(state: StepState) -> list[DeltaOp]:
    return [op for proposal in state.proposals for op in proposal]


async def aggregate(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Level 2: one call merges the groups' proposals into the step's ops.

    With one group there is nothing to merge: its curator's ops are the step's.
    """
    if len(state.groups) <= 1:
        ops = _proposed(state)
    else:
        merged = await ctx.roles.active().aggregate(
            _caller(ctx),
            state.playbook,
            state.proposals,
            [(i.label, i.reflection) for i in state.reflections],
            state.stats,
            token_budget=ctx.token_budget,
        )
        state.report.aggregation = merged.mode
        ops = merged.ops
    return replace(state, ops=[*state.ops, *ops]), {"ops": len(ops)}


async def union(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Level 2 as the plain union of the groups' proposals, no call (an ablation)."""
    if len(state.groups) > 1:
        state.report.aggregation = "union"
    ops = _proposed(state)
    return replace(state, ops=[*state.ops, *ops]), {"ops": len(ops)}


async def left_out(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """List in the report the reflections' rules that no curated op carries."""
    before = len(state.report.left_out)
    if state.reflections and state.proposals:
        note_left_out(ctx, state.reflections, state.ops, state.report)
    return state, {"rules": len(state.report.left_out) - before}
