"""How versions and learning steps look on the terminal and in exported files.

Pure formatting: tables are ``rich`` renderables, exports are strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from rich.table import Table

from langgraph_combee._core.types import Decision, PromptVersion, StepReport

EMPTY_PLAYBOOK = "(empty playbook)"


def when(moment: datetime) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SS`` in UTC."""
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def counts(values: Mapping[str, int]) -> str:
    """Non-zero counts as ``"add 3, tag 1"``; ``"-"`` when there are none."""
    shown = [f"{name} {n}" for name, n in values.items() if n]
    return ", ".join(shown) or "-"


def decision_text(decision: Decision | None) -> str:
    """``"policy: reason"``, or ``"pending"`` when no decision was made."""
    if decision is None:
        return "pending"
    return f"{decision.policy}: {decision.reason}" if decision.reason else decision.policy


def versions_table(records: Sequence[PromptVersion], head: int) -> Table:
    """One row per version; the version in force is marked ``*``."""
    table = Table(title=None, show_lines=False)
    table.add_column("version", justify="right")
    table.add_column("status")
    table.add_column("parent", justify="right")
    table.add_column("created (UTC)")
    table.add_column("bullets", justify="right")
    table.add_column("ops")
    table.add_column("decision")
    for record in records:
        mark = "*" if record.version == head else ""
        table.add_row(
            f"{mark}{record.version}",
            record.status,
            "-" if record.parent is None else str(record.parent),
            when(record.created_at),
            str(len(record.playbook.bullets)),
            counts(record.ops_summary),
            decision_text(record.decision),
        )
    return table


def steps_table(steps: Sequence[StepReport]) -> Table:
    """One row per learning step: its cost, structure and the version it wrote."""
    table = Table()
    table.add_column("step", justify="right")
    table.add_column("batch", justify="right")
    table.add_column("groups")
    table.add_column("calls", justify="right")
    table.add_column("in tokens", justify="right")
    table.add_column("out tokens", justify="right")
    table.add_column("ops")
    table.add_column("seconds", justify="right")
    table.add_column("version")
    for number, step in enumerate(steps, start=1):
        groups = f"{len(step.group_sizes)} ({'/'.join(map(str, step.group_sizes))})"
        table.add_row(
            str(number),
            str(step.batch_size),
            groups if step.group_sizes else "-",
            str(sum(step.calls.values())),
            str(step.input_tokens),
            str(step.output_tokens),
            counts(step.ops),
            f"{step.seconds:.2f}",
            _step_version(step),
        )
    return table


def _step_version(step: StepReport) -> str:
    if step.version is None:
        return "- (no text change)"
    state = {True: "accepted", False: "rejected", None: "pending"}[step.accepted]
    return f"{step.version} ({state})"


def metadata_table(record: PromptVersion, head: int) -> Table:
    """A version's metadata as a two-column grid."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in metadata(record, head):
        grid.add_row(key, value)
    return grid


def metadata(record: PromptVersion, head: int) -> list[tuple[str, str]]:
    """A version's metadata as ``(label, value)`` pairs, in display order."""
    in_force = " (in force)" if record.version == head else ""
    rows = [
        ("prompt", record.prompt_id),
        ("tenant", record.tenant or "-"),
        ("version", f"{record.version}{in_force}"),
        ("status", record.status),
        ("parent", "-" if record.parent is None else str(record.parent)),
        ("created", f"{when(record.created_at)} UTC"),
        ("bullets", str(len(record.playbook.bullets))),
        ("tokens", str(record.playbook.token_count())),
        ("ops", counts(record.ops_summary)),
        ("decision", decision_text(record.decision)),
        ("source traces", str(len(record.source_trace_ids))),
        ("quarantined", str(len(record.quarantined))),
        ("held for approval", str(len(record.held))),
        ("pending bullets", str(sum(b.pending for b in record.playbook.bullets))),
    ]
    if record.needs_approval:
        rows.append(("needs approval", "; ".join(record.needs_approval)))
    if record.note:
        rows.append(("note", record.note))
    return rows


def quarantine_lines(record: PromptVersion, *, held: bool = False) -> list[str]:
    """One line per op the guard refused (or, with ``held``, held) in the step of ``record``."""
    items = record.held if held else record.quarantined
    return [f"- {q.describe()} (traces: {', '.join(q.sources) or '-'})" for q in items]


def markdown(record: PromptVersion, head: int) -> str:
    """A version as a Markdown document: a metadata header, then the rendered playbook."""
    tenant = f" (tenant `{record.tenant}`)" if record.tenant else ""
    lines = [f"# Prompt `{record.prompt_id}`{tenant}, version {record.version}", ""]
    lines.extend(f"- **{key}**: {value}" for key, value in metadata(record, head))
    lines.append("")
    lines.append(record.render(ids=True) or f"_{EMPTY_PLAYBOOK}_")
    return "\n".join(lines) + "\n"
