"""Each strategy's learning wall-clock on a hosted model, projected from a real run's calls.

On this 2-core CPU the local server reads concurrent prompts one after another,
so Combee's parallel calls buy little here (``benchmarks.grid``'s real
speed-up). A hosted API runs them side by side. This script takes a grid
record made on the real model, keeps every row's recorded calls and tokens by
stage and the accuracy the row reached, and prices each call under a stated
latency model: ``base + input_tokens / prefill + output_tokens / decode``
seconds, with unbounded parallel calls. A step's critical path is then one
call of each stage it ran, in order (reflect, propose, curate or aggregate,
replay: the calls of one stage run side by side); the sequential strategy
reflects (and curates) run after run. Nothing is re-run.

    python -m benchmarks.projection benchmarks/results/grid-speedup-96-traces.json
    python -m benchmarks.projection RECORD.json --base 0.5 --prefill 1500 --decode 60

Prints a table and, with ``--out``, writes the projection as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Stages whose calls a step makes one after another; the calls within a stage run
# side by side. Sequential learning reflects (and curates) one run at a time.
STEP_ORDER = ("reflect", "propose", "curate", "aggregate", "replay")
PER_RUN = ("reflect", "curate")


@dataclass(frozen=True)
class Latency:
    """Seconds per call: ``base + input / prefill + output / decode``."""

    base: float = 0.5
    prefill: float = 1500.0
    decode: float = 60.0

    def seconds(self, input_tokens: float, output_tokens: float) -> float:
        """One call's latency for its tokens."""
        return self.base + input_tokens / self.prefill + output_tokens / self.decode


@dataclass(frozen=True)
class Projection:
    """One row of a record under a latency model."""

    key: str
    strategy: str
    accuracy: float | None
    steps: int
    calls: int
    projected_seconds: float
    measured_seconds: float | None


def _per_call(stage: Mapping[str, Any], latency: Latency) -> float:
    calls = max(1, int(stage.get("calls", 0)))
    return latency.seconds(
        float(stage.get("input_tokens", 0)) / calls, float(stage.get("output_tokens", 0)) / calls
    )


def project(row: Mapping[str, Any], latency: Latency) -> Projection:
    """The row's learning wall-clock with unbounded parallel calls under ``latency``."""
    stages: Mapping[str, Mapping[str, Any]] = row.get("by_stage") or {}
    steps = max(1, int(row.get("steps") or 1))
    sequential = row.get("strategy") == "sequential"
    total = 0.0
    for name in STEP_ORDER:
        stage = stages.get(name)
        if not stage or not stage.get("calls"):
            continue
        one = _per_call(stage, latency)
        # Sequential makes each per-run call in turn; every other stage is one
        # round of side-by-side calls per step.
        total += one * int(stage["calls"]) if sequential and name in PER_RUN else one * steps
    return Projection(
        key=str(row.get("key", "")),
        strategy=str(row.get("strategy", "")),
        accuracy=row.get("accuracy"),
        steps=steps,
        calls=sum(int(s.get("calls", 0)) for s in stages.values()),
        projected_seconds=round(total, 1),
        measured_seconds=row.get("learn_seconds"),
    )


def rows_of(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The configurations of a grid record (``configs``) that carry calls by stage.

    A row that took its reflections from the grid's cache (made once by another
    row of the seed) gets them back as its own ``reflect`` stage: the record keeps
    only their total tokens, split into input and output as the record's rows
    that paid for their reflections split theirs (nine tenths input without one).
    """
    rows = [c for c in record.get("configs", []) if c.get("by_stage")]
    paid = [r["by_stage"]["reflect"] for r in rows if r["by_stage"].get("reflect")]
    tokens_in = sum(float(s.get("input_tokens", 0)) for s in paid)
    tokens_out = sum(float(s.get("output_tokens", 0)) for s in paid)
    share = tokens_in / (tokens_in + tokens_out) if tokens_in + tokens_out else 0.9
    out: list[Mapping[str, Any]] = []
    for row in rows:
        calls = int(row.get("reflect_calls_shared") or 0)
        if calls and not row["by_stage"].get("reflect"):
            total = float(row.get("reflect_tokens_shared") or 0)
            reflect = {
                "calls": calls,
                "input_tokens": total * share,
                "output_tokens": total * (1 - share),
            }
            row = {**row, "by_stage": {**row["by_stage"], "reflect": reflect}}
        out.append(row)
    return out


def speedups(projections: Sequence[Projection]) -> dict[str, float]:
    """Each row's projected speed-up over the sequential row of the same task and seed."""
    base = {p.key.rsplit("/", 1)[0]: p for p in projections if p.strategy == "sequential"}
    out: dict[str, float] = {}
    for p in projections:
        ref = base.get(p.key.rsplit("/", 1)[0])
        if ref is not None and p.projected_seconds > 0:
            out[p.key] = round(ref.projected_seconds / p.projected_seconds, 2)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Print (and with ``--out`` write) the projection of a grid record."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.projection")
    parser.add_argument("record", type=Path)
    parser.add_argument("--base", type=float, default=Latency.base, help="seconds per call")
    parser.add_argument("--prefill", type=float, default=Latency.prefill, help="input tok/s")
    parser.add_argument("--decode", type=float, default=Latency.decode, help="output tok/s")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for name in ("base", "prefill", "decode"):
        value = getattr(args, name)
        if not value > 0:
            parser.error(f"--{name}={value!r} is not allowed: a number > 0")
    latency = Latency(args.base, args.prefill, args.decode)
    record = json.loads(args.record.read_text())
    projections = [project(r, latency) for r in rows_of(record)]
    ups = speedups(projections)
    print(
        f"latency model: {latency.base} s + input / {latency.prefill:g} tok/s + "
        f"output / {latency.decode:g} tok/s, unbounded parallel calls"
    )
    print("| row | accuracy | steps | calls | projected s | measured s (this CPU) | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for p in projections:
        acc = "-" if p.accuracy is None else f"{p.accuracy:.0%}"
        up = f"{ups[p.key]:.2f}x" if p.key in ups else "-"
        print(
            f"| {p.key} | {acc} | {p.steps} | {p.calls} | {p.projected_seconds:,.0f} | "
            f"{p.measured_seconds if p.measured_seconds is not None else '-'} | {up} |"
        )
    result = {
        "record": str(args.record),
        "latency": asdict(latency),
        "rows": [asdict(p) for p in projections],
        "speedup_over_sequential": ups,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
