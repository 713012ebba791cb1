"""Combee's level 2: turning the aggregator's reply into the step's edits.

The aggregator answers by reference. Every level-1 proposal stands unless its
label is dropped or replaced by a merged op, so the aggregator decodes only its
decisions, not every kept op again: the single call on each step's critical
path stays short however many rules the step learns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph_combee._algorithm.schemas import AggregateOut, convert_ops, normalize_label
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._llm.prompts import proposal_label


def label_proposals(proposals: Sequence[Sequence[DeltaOp]]) -> dict[str, DeltaOp]:
    """Every proposed op under the label the aggregator's prompt shows it with."""
    return {
        proposal_label(i, j): op
        for i, proposal in enumerate(proposals, start=1)
        for j, op in enumerate(proposal, start=1)
    }


def resolve(
    reply: AggregateOut,
    proposed: Mapping[str, DeltaOp],
    *,
    labels: Mapping[str, str],
    default_sources: Sequence[str],
) -> list[DeltaOp]:
    """The step's ops: proposals not dropped or replaced, then the merged ops.

    A merged op that cites no reflection of its own is credited with the sources
    of the proposals it replaces. Unknown labels are ignored: a label the model
    invented can neither drop nor replace anything.

    Args:
        reply: The parsed aggregator reply.
        proposed: Label to proposed op (``label_proposals``).
        labels: Reflection label (``R3``) to trace id.
        default_sources: Trace ids credited when an op names no known source.
    """
    removed = {normalize_label(label) for label in reply.drop} & proposed.keys()
    merged: list[DeltaOp] = []
    for item in reply.operations:
        replaced = [
            normalize_label(label) for label in item.replaces if normalize_label(label) in proposed
        ]
        removed.update(replaced)
        inherited = list(
            dict.fromkeys(source for label in replaced for source in proposed[label].sources)
        )
        merged.extend(
            convert_ops([item], labels=labels, default_sources=inherited or default_sources)
        )
    kept = [op for label, op in proposed.items() if label not in removed]
    return kept + merged
