"""A learning step as one tuple of named stages: ``STEP_STAGES`` is the only order there is.

``learn()``, the background learner and the benchmarks run it through
``Strategy.step``; rebasing a stale candidate runs the part of it marked
``rebase`` (``rebasing``). An ablation is another tuple (``without``,
``replacing``; ``NO_CORRECTIONS`` and ``NO_MERGE`` are the benchmarks' two), never
a flag. Every stage run adds its entry to ``StepReport.stages``. The table of
stages, what each does and what it records is in docs/concepts.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_combee._algorithm.stages import applying, correcting, proposing
from langgraph_combee._algorithm.stages.base import (
    Counts,
    LabelledReflection,
    Stage,
    StageFn,
    StepState,
    check_stages,
    names,
    replacing,
    run_stages,
    without,
)

__all__ = [
    "ADDS_ONLY",
    "CORRECTIONS",
    "NO_CORRECTIONS",
    "NO_MERGE",
    "REBASE_STAGES",
    "STALE",
    "STEP_STAGES",
    "UNION",
    "Counts",
    "LabelledReflection",
    "Stage",
    "StageFn",
    "StepState",
    "after_proposal",
    "check_stages",
    "names",
    "rebasing",
    "replacing",
    "run_stages",
    "without",
]

STEP_STAGES: tuple[Stage, ...] = (
    # From the traces to the proposed ops: what the strategies differ in (how they deal).
    Stage(name="reflect", run=proposing.reflect, proposes=True),
    Stage(name="tag", run=proposing.tag, proposes=True),
    Stage(name="shuffle", run=proposing.shuffle, proposes=True),
    Stage(name="propose", run=proposing.propose, proposes=True),
    Stage(name="aggregate", run=proposing.aggregate, proposes=True),
    Stage(name="left_out", run=proposing.left_out, proposes=True),
    # Conventions and situations, then the corrections of the rules in force.
    Stage(name="conventions", run=correcting.conventions),
    Stage(name="formats", run=correcting.formats_stage),
    Stage(name="remember", run=correcting.remember),
    Stage(name="served", run=correcting.served),
    Stage(name="reconcile", run=correcting.reconcile),
    Stage(name="collect", run=correcting.collect),
    Stage(name="kinds", run=correcting.kinds),
    Stage(name="confirmed", run=correcting.confirmed),
    # The guard, then the new playbook.
    Stage(name="fit", run=applying.fit),
    Stage(name="screen", run=applying.screen, rebase=True),
    Stage(name="examples", run=applying.keep_examples),
    Stage(name="apply", run=applying.apply, rebase=True),
    Stage(name="support", run=applying.support, rebase=True),
    Stage(name="clean", run=applying.clean),
    Stage(name="dedup", run=applying.dedup, rebase=True),
    Stage(name="promote", run=applying.promote, rebase=True),
    Stage(name="budget", run=applying.budget, rebase=True),
)
"""The order of a learning step (docs/concepts.md has the table)."""

STALE = Stage(name="stale", run=applying.stale)
"""Rebasing's first stage: edits of bullets rewritten since the candidate was learned drop."""

UNION = Stage(name="union", run=proposing.union, proposes=True)
"""Level 2 as the plain union of the level-1 proposals: ``aggregate``'s ablation."""

ADDS_ONLY = Stage(name="adds_only", run=correcting.adds_only)
"""Only the new rules' ADDs go on: ``reconcile``'s place when the corrections are left out."""

CORRECTIONS = ("served", "clean")
"""The stages that correct rules in force (with ``reconcile``, which ``ADDS_ONLY`` replaces)."""

NO_CORRECTIONS = replacing(without(STEP_STAGES, *CORRECTIONS), "reconcile", ADDS_ONLY)
"""The step without rule corrections: only ADDs apply, no counter, rewrite or removal."""

NO_MERGE = replacing(STEP_STAGES, "aggregate", UNION)
"""The step without level 2's merge: the plain union of the level-1 proposals, no call."""


def rebasing(stages: Sequence[Stage]) -> tuple[Stage, ...]:
    """The stages re-run when a stale candidate is rebased onto a newer HEAD.

    ``STALE``, then those of ``stages`` marked ``rebase``, in their order. The
    candidate's stored ops already carry what the other stages made (the
    corrections, the guard's narrowing, ``clean``'s removals), and the traces
    they need are not at hand any more.
    """
    return (STALE, *(s for s in stages if s.rebase))


REBASE_STAGES = rebasing(STEP_STAGES)
"""What rebasing runs with the default order."""


def after_proposal(stages: Sequence[Stage]) -> tuple[Stage, ...]:
    """The stages that take proposed ops to the new playbook (all but the proposing ones)."""
    return tuple(s for s in stages if not s.proposes)
