"""The stages from the guard to the new playbook: fit, screen, apply, support, clean,
dedup, promote, budget; and ``stale``, which rebasing runs first.

Each is deterministic given its inputs (the guard's judge, when one is set, is
the only call). Rebasing a stale candidate re-runs those marked ``rebase``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from langgraph_combee._algorithm.stages.base import Counts, StepContext, StepState
from langgraph_combee._core.dedup import deduplicate
from langgraph_combee._core.ops import Add, DeltaOp, Remove, Update
from langgraph_combee._core.playbook import EXAMPLES_SECTION, ApplyResult, Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._guard.guard import BulletGuard
from langgraph_combee._guard.provenance import Evidence, Trust
from langgraph_combee._guard.support import attribute, support_keys
from langgraph_combee._guard.support import promote as promote_pending
from langgraph_combee._rules import examples, rules

__all__ = [
    "apply",
    "budget",
    "clean",
    "dedup",
    "fit",
    "keep_examples",
    "promote",
    "screen",
    "stale",
    "support",
]

# Rebasing is the writer's business: its warnings go where the writer's do.
logger = logging.getLogger("langgraph_combee.learner")


def _supported(guard: BulletGuard | None) -> bool:
    return guard is not None and guard.min_support > 1


def _user_word_fault(
    guard: BulletGuard, traces: Sequence[Trace], playbook: Playbook
) -> rules.UserWordFault:
    cache: dict[tuple[str, ...], Evidence] = {}

    def fault(op: DeltaOp) -> int | None:
        if not isinstance(op, Add | Update):
            return 0
        return guard.user_word_fault(op, traces, playbook, cache)

    return fault


async def stale(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """When rebasing, drop the UPDATEs and REMOVEs of bullets rewritten since.

    The rewrite in force wins over an edit of the text it replaced; the ops were
    learned from ``state.learned_from``, and apply to ``state.playbook``. An edit of
    a bullet that is a worked example in ``state.playbook`` drops too, unless it is
    the examples stage displacing an example the candidate saw.
    """
    base, onto = state.learned_from, state.playbook
    kept = []
    for op in state.ops:
        target = None if isinstance(op, Add) else onto.get(op.id)
        if target is not None and target.section == EXAMPLES_SECTION and not isinstance(op, Add):
            # ``collect`` kept curator edits off the examples the candidate saw; one
            # aimed at an id that became an example since (ids are predictable) is
            # dropped here. Only the examples stage's own displacement of an example
            # it saw goes on.
            was = None if base is None else base.get(op.id)
            if not (isinstance(op, Remove) and was is not None and was.section == target.section):
                logger.warning(
                    "rebase dropped %s of bullet %s: it is a worked example", op.type, op.id
                )
                continue
        if base is not None and isinstance(op, (Update, Remove)):
            was, now = base.get(op.id), onto.get(op.id)
            if was is not None and now is not None and was.content != now.content:
                logger.warning(
                    "rebase dropped %s of bullet %s: it was rewritten since (%r, now %r)",
                    op.type,
                    op.id,
                    was.content,
                    now.content,
                )
                continue
        kept.append(op)
    return replace(state, ops=kept), {"dropped": len(state.ops) - len(kept)}


async def fit(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Narrow the situation of a rule refused only for carrying too many of the user's words.

    It keeps fewer of its situation's alternatives instead; ``screen`` checks it in full.
    """
    guard, traces = ctx.guard, state.traces
    if guard is None or not traces:
        return state, {"narrowed": 0}
    ops, fitted = rules.fit(
        state.ops, _user_word_fault(guard, traces, state.playbook), [t.input for t in traces]
    )
    state.report.narrowed_for_guard += fitted
    return replace(state, ops=ops), {"narrowed": fitted}


async def screen(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """The guard: refuse (quarantine) or hold each text-writing op, with its reasons."""
    guard = ctx.guard
    if guard is None:
        return state, {"accepted": len(state.ops)}
    screening = await guard.ascreen(
        state.ops,
        traces=state.traces,
        playbook=state.playbook,
        caller=ctx.caller,
        stats=state.stats,
    )
    state.report.quarantined.extend(screening.quarantined)
    state.report.held.extend(screening.held)
    counts = {
        "accepted": len(screening.accepted),
        "quarantined": len(screening.quarantined),
        "held": len(screening.held),
    }
    return replace(state, ops=screening.accepted, screening=screening), counts


def _example_check(guard: BulletGuard) -> examples.Check:
    # A quoted request that would change policy if it were a rule (skip the ID
    # check, refund anyone) is not shown to the agent as a model to follow either.
    def check(text: str) -> list[str]:
        return [*guard.check(text), *guard.policy(text)]

    return check


async def keep_examples(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Keep the batch's labelled runs as worked examples (``AlgorithmSettings.examples``).

    Examples quote a request with a trusted answer; they are not rules, so the
    guard's deterministic checks read each request and answer here instead of
    ``screen``.
    """
    traces = state.traces
    if not ctx.examples or not traces:
        return state, {"added": 0}
    guard = ctx.guard
    ops, outcome = examples.example_ops(
        state.playbook,
        traces,
        trust=guard.trust if guard is not None else Trust(),
        check=_example_check(guard) if guard is not None else None,
        limit=ctx.examples,
    )
    state.report.examples_added += outcome.added
    state.report.examples_skipped.extend(outcome.skipped)
    counts = {
        "added": outcome.added,
        "displaced": outcome.displaced,
        "skipped": len(outcome.skipped),
    }
    return replace(state, ops=[*state.ops, *ops]), counts


async def apply(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Apply the ops to the playbook; an op naming an unknown bullet is skipped."""
    applied = state.playbook.apply(state.ops, version=state.version)
    if state.screening is not None:
        applied = state.screening.record_support(applied)
    report = state.report
    report.unknown_ops += len(applied.skipped)
    counts = applied.counts()
    for kind, n in counts.items():
        report.ops[kind] = report.ops.get(kind, 0) + n
    new = replace(state, applied=applied, result=applied.playbook, done=[*applied.applied])
    return new, {**counts, "skipped": len(applied.skipped)}


def _carry_support(applied: ApplyResult, candidate: Playbook) -> Playbook:
    """Added bullets keep the support they had in the candidate (its traces are gone)."""
    learned_by_text = {b.content: b for b in candidate.bullets}
    added = {
        o.bullet_id for o in applied.outcomes if o.applied and isinstance(o.op, Add) and o.bullet_id
    }
    bullets = []
    for bullet in applied.playbook.bullets:
        if bullet.id in added:
            twin = learned_by_text.get(bullet.content)
            bullet = bullet.model_copy(
                update={
                    "pending": True if twin is None else twin.pending,
                    "supporters": [] if twin is None else list(twin.supporters),
                }
            )
        bullets.append(bullet)
    return applied.playbook.replace_bullets(bullets)


async def support(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Under a support threshold, record who backs each op; new bullets start pending.

    When rebasing, an added bullet keeps the support it had in the candidate.
    """
    guard, applied = ctx.guard, state.applied
    if guard is None or not _supported(guard) or applied is None:
        return state, {"pending": 0}
    if state.candidate is not None:
        result = _carry_support(applied, state.candidate)
    else:
        keys = support_keys(state.traces or (), guard.user_key, anonymous=guard.anonymous_support)
        result = attribute(applied, keys)
    return replace(state, result=result), {"pending": sum(b.pending for b in result.bullets)}


async def clean(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Remove what service discredits, then the weaker side of any contradiction left."""
    playbook, version, report = state.current, state.version, state.report
    removals = rules.discredited(playbook)
    if removals:
        playbook = playbook.apply(removals, version=version).playbook
    contradictions, found = rules.resolve_conflicts(playbook)
    if contradictions:
        playbook = playbook.apply(contradictions, version=version).playbook
    report.discredited += len(removals)
    report.conflicts.extend(c.describe() for c in found)
    removed = [*removals, *contradictions]
    if removed:
        report.ops["remove"] = report.ops.get("remove", 0) + len(removed)
    counts = {"discredited": len(removals), "contradicted": len(contradictions)}
    return replace(state, result=playbook, done=[*state.done, *removed]), counts


async def dedup(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Merge near-duplicate bullets into the ones this step changed."""
    if not ctx.dedup:
        return state, {"merged": 0}
    playbook = state.current
    # Worked examples are never merged, with rules or with each other.
    worked = [b for b in playbook.bullets if b.section == EXAMPLES_SECTION]
    rules_only = playbook.replace_bullets(
        [b for b in playbook.bullets if b.section != EXAMPLES_SECTION]
    )
    changed = {b.id for b in rules_only.bullets if b.updated_version == state.version}
    deduped = deduplicate(
        rules_only, threshold=ctx.dedup_threshold, embedder=ctx.embedder, changed=changed
    )
    state.report.merged += len(deduped.merges)
    result = deduped.playbook.replace_bullets([*deduped.playbook.bullets, *worked])
    return replace(state, result=result), {"merged": len(deduped.merges)}


async def promote(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Make pending bullets with enough distinct supporters live; drop the oldest surplus."""
    guard = ctx.guard
    if guard is None or not _supported(guard):
        return state, {"promoted": 0}
    result, promoted = promote_pending(
        state.current, min_support=guard.min_support, max_pending=guard.max_pending
    )
    return replace(state, result=result), {"promoted": promoted}


async def budget(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Evict the least useful bullets until the playbook fits its token budget."""
    budgeted = state.current.enforce_budget(ctx.token_budget)
    state.report.evicted += len(budgeted.evicted)
    return replace(state, result=budgeted.playbook), {"evicted": len(budgeted.evicted)}
