"""Learner cost per 1,000 traces, by stage, from a recorded benchmark JSON.

``python -m benchmarks.cost RECORD.json`` reads the calls and tokens each stage
of learning made (``by_stage`` in a ``benchmarks.grid`` or ``benchmarks.speed``
record), divides them by the traces that row learned from and multiplies by
1,000. A grid row that took its reflections from the grid's cache (made once
by another row of the same seed) gets them back from ``reflect_calls_shared``
and ``reflect_tokens_shared``, so every row is priced as if it had paid for
them; the record holds only their total tokens, so the table shows them in the
input column (about 90% of them are input on ticket routing).

``--usd-per-million-input`` and ``--usd-per-million-output`` add a dollar
column at a hosted model's prices. Nothing is re-run: the figures are the
record's own arithmetic.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PER = 1000
# The order in which a learning step runs its stages; others follow by name.
STAGE_ORDER = ("reflect", "propose", "curate", "aggregate", "replay")


@dataclass(frozen=True)
class StageCost:
    """Calls and tokens of one stage, per ``PER`` traces."""

    stage: str
    calls: float
    input_tokens: float
    output_tokens: float
    shared: bool = False


@dataclass(frozen=True)
class RowCost:
    """One configuration of a record: its traces and its stages' cost."""

    key: str
    traces: int
    stages: tuple[StageCost, ...]

    @property
    def calls(self) -> float:
        return sum(s.calls for s in self.stages)

    @property
    def input_tokens(self) -> float:
        return sum(s.input_tokens for s in self.stages)

    @property
    def output_tokens(self) -> float:
        return sum(s.output_tokens for s in self.stages)


def _ordered(stages: dict[str, Any]) -> list[str]:
    known = [s for s in STAGE_ORDER if s in stages]
    return known + sorted(s for s in stages if s not in STAGE_ORDER)


def _row(key: str, traces: int, by_stage: dict[str, Any], row: dict[str, Any]) -> RowCost:
    if traces <= 0:
        raise ValueError(f"row {key!r} learned from {traces!r} traces; expected at least 1")

    def scale(value: object) -> float:
        return int(value or 0) * PER / traces  # multiply first: 240 calls of 240 are 1,000

    stages: list[StageCost] = []
    shared_calls = int(row.get("reflect_calls_shared") or 0)
    if shared_calls and "reflect" not in by_stage:
        stages.append(
            StageCost(
                "reflect",
                scale(shared_calls),
                scale(row.get("reflect_tokens_shared")),
                0.0,
                shared=True,
            )
        )
    for name in _ordered(by_stage):
        figures = by_stage[name]
        stages.append(
            StageCost(
                name,
                scale(figures.get("calls")),
                scale(figures.get("input_tokens")),
                scale(figures.get("output_tokens")),
            )
        )
    return RowCost(key, traces, tuple(stages))


def costs(record: dict[str, Any]) -> list[RowCost]:
    """Per-1,000-trace cost of every row of a grid or speed record.

    Raises:
        ValueError: the record is neither kind, or a row has no ``by_stage``.
    """
    if isinstance(record.get("configs"), list):  # benchmarks.grid
        rows = []
        for config in record["configs"]:
            key = config.get("key", "?")
            if not isinstance(config.get("by_stage"), dict):
                raise ValueError(f"grid row {key!r} has no 'by_stage' figures")
            traces = sum(config.get("step_sizes") or [])
            rows.append(_row(key, traces, config["by_stage"], config))
        return rows
    if isinstance(record.get("arms"), list):  # benchmarks.speed
        rows = []
        for arm in record["arms"]:
            key = arm.get("arm", "?")
            if not isinstance(arm.get("by_stage"), dict):
                raise ValueError(f"speed arm {key!r} has no 'by_stage' figures")
            traces = sum(arm.get("step_batch_sizes") or [])
            rows.append(_row(key, traces, arm["by_stage"], arm))
        return rows
    raise ValueError(
        f"not a benchmarks.grid or benchmarks.speed record (keys {sorted(record)!r}); "
        "expected a 'configs' or an 'arms' list"
    )


def _usd(input_tokens: float, output_tokens: float, prices: tuple[float, float] | None) -> str:
    if prices is None:
        return ""
    dollars = (input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000
    return f" | ${dollars:,.3f}"


def table(rows: Sequence[RowCost], prices: tuple[float, float] | None = None) -> str:
    """A markdown table: one line per stage and a total per row."""
    usd_head = " | USD" if prices else ""
    lines = [
        f"| row | stage | calls per {PER:,} traces | input tokens | output tokens{usd_head} |",
        "|---|---|---|---|---|" + ("---|" if prices else ""),
    ]
    for row in rows:
        for s in row.stages:
            name = f"{s.stage} (made by another row, tokens in total)" if s.shared else s.stage
            lines.append(
                f"| {row.key} | {name} | {s.calls:,.0f} | {s.input_tokens:,.0f} "
                f"| {s.output_tokens:,.0f}{_usd(s.input_tokens, s.output_tokens, prices)} |"
            )
        lines.append(
            f"| {row.key} | **total** ({row.traces} traces) | **{row.calls:,.0f}** "
            f"| **{row.input_tokens:,.0f}** | **{row.output_tokens:,.0f}**"
            f"{_usd(row.input_tokens, row.output_tokens, prices)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[RowCost]:
    """Print the cost table of a record; returns its rows."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__)
    parser.add_argument("record", type=Path, help="a benchmarks.grid or benchmarks.speed JSON")
    parser.add_argument("--only", nargs="*", default=None, help="row keys to keep")
    parser.add_argument("--usd-per-million-input", type=float, default=None)
    parser.add_argument("--usd-per-million-output", type=float, default=None)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    rows = costs(json.loads(args.record.read_text()))
    if args.only is not None:
        rows = [r for r in rows if r.key in set(args.only)]
    prices = None
    if args.usd_per_million_input is not None or args.usd_per_million_output is not None:
        prices = (args.usd_per_million_input or 0.0, args.usd_per_million_output or 0.0)
    print(table(rows, prices))
    return rows


if __name__ == "__main__":
    main()
