"""Speed and cost of the learning strategies, side by side, with test doubles.

The learner is ``fake_learner()`` (deterministic reflector, curator and aggregator;
every misrouted ticket teaches a distinct rule) wrapped in ``LatencyChatModel`` with
a hosted-model latency model: a fixed cost per call plus prompt tokens at a prefill
rate plus reply tokens at a decode rate. Every call waits ``time_scale`` times its
simulated latency, so a run takes minutes while every figure is reported in
simulated-real seconds (measured / time_scale).

For each strategy it reports wall-clock, LLM calls and tokens per stage, the speed-up
and the tokens relative to sequential, the playbook size, and the efficiency against
the critical-path lower bound (``lower_bound / measured``; see ``_latency.py``).

    python -m benchmarks.speed [--traces 240] [--time-scale 0.05] [--out DIR] [--plot PNG]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import IMAGES, RESULTS, command, machine_info, write_json
from benchmarks._latency import (
    STAGES,
    CallRecord,
    CallRecorder,
    LatencyModel,
    critical_breakdown,
    lower_bound,
    split_steps,
)
from benchmarks._tickets import MAX_TRACES, make_traces, ticket_rule
from langgraph_combee import AlgorithmSettings, Combee, LearnerSettings
from langgraph_combee.testing import fake_learner

MODULE = "benchmarks.speed"
SPEEDUP_TARGET = 17.0
EFFICIENCY_TARGET = 0.9

# Alternative latency models for the sensitivity table: the lower bounds are
# recomputed from the same recorded token counts (no rerun).
SENSITIVITY: dict[str, LatencyModel] = {
    "faster decode (200 tok/s)": LatencyModel(decode_tps=200.0),
    "faster prefill (10k tok/s)": LatencyModel(prefill_tps=10_000.0),
    "both faster": LatencyModel(prefill_tps=10_000.0, decode_tps=200.0),
}


@dataclass(frozen=True)
class Arm:
    """One strategy configuration to measure."""

    name: str
    strategy: str
    batch_size: int | str

    @property
    def sequential(self) -> bool:
        """True when every call of a step is its own stage."""
        return self.strategy == "sequential"


def default_arms(n: int, batch_sizes: Sequence[int], *, auto: bool = True) -> list[Arm]:
    """Sequential and naive over all ``n`` traces, Combee at fixed sizes and ``"auto"``."""
    arms = [Arm("sequential", "sequential", n), Arm("naive", "naive", n)]
    arms += [Arm(f"combee-{bs}", "combee", bs) for bs in batch_sizes]
    if auto:
        arms.append(Arm("combee-auto", "combee", "auto"))
    return arms


@dataclass
class ArmResult:
    """What one arm measured."""

    arm: Arm
    wall_seconds: float
    cpu_seconds: float
    time_scale: float
    batch_sizes: list[int]
    calls: list[CallRecord]
    steps: list[list[CallRecord]]
    lower_bound_seconds: float
    breakdown: dict[str, dict[str, float]]
    bullets: int
    merged: int
    evicted: int
    failed_calls: int
    unparsed: int
    peak_concurrency: int
    report_input_tokens: int
    report_output_tokens: int
    wrapper_simulated_seconds: float = 0.0
    alternative_bounds: dict[str, float] = field(default_factory=dict)

    @property
    def simulated_seconds(self) -> float:
        """Measured wall-clock in simulated-real seconds."""
        return self.wall_seconds / self.time_scale

    @property
    def efficiency(self) -> float:
        """Lower bound over measured (1.0 = no time lost beyond the critical path)."""
        return self.lower_bound_seconds / self.simulated_seconds

    @property
    def overhead_real_seconds(self) -> float:
        """Real seconds spent beyond the scaled critical path (CPU, scheduling)."""
        return max(0.0, self.wall_seconds - self.lower_bound_seconds * self.time_scale)

    @property
    def projected_seconds(self) -> float:
        """Wall-clock at time_scale=1: the waits unscaled, the real overhead kept as is.

        Exact when CPU work and waits do not overlap (sequential); an upper bound
        otherwise (at full scale more of the CPU work hides behind longer waits).
        """
        return self.lower_bound_seconds + self.overhead_real_seconds

    @property
    def projected_efficiency(self) -> float:
        """Efficiency at time_scale=1 if the real overhead stayed what it was here."""
        return self.lower_bound_seconds / self.projected_seconds

    def stage_totals(self) -> dict[str, dict[str, int]]:
        """Calls, input and output tokens by stage."""
        out: dict[str, dict[str, int]] = {}
        for call in self.calls:
            row = out.setdefault(call.stage, {"calls": 0, "input_tokens": 0, "output_tokens": 0})
            row["calls"] += 1
            row["input_tokens"] += call.input_tokens
            row["output_tokens"] += call.output_tokens
        return {s: out[s] for s in (*STAGES, *sorted(set(out) - set(STAGES))) if s in out}

    @property
    def input_tokens(self) -> int:
        """Prompt tokens over all calls."""
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        """Reply tokens over all calls."""
        return sum(c.output_tokens for c in self.calls)

    @property
    def tokens(self) -> int:
        """All tokens."""
        return self.input_tokens + self.output_tokens

    def longest_call_seconds(self, model: LatencyModel) -> float:
        """Simulated seconds of the single longest call."""
        return max((model.seconds(c.input_tokens, c.output_tokens) for c in self.calls), default=0)


async def run_arm(
    arm: Arm,
    traces: Sequence[Any],
    model: LatencyModel,
    *,
    time_scale: float,
    max_concurrency: int,
) -> ArmResult:
    """Learn from ``traces`` with one arm on a fresh store and measure it."""
    recorder = CallRecorder()
    llm = model.chat_model(fake_learner(insight=ticket_rule), time_scale=time_scale)
    combee = Combee(
        prompt_id=f"bench-{arm.name}",
        model=llm,
        strategy=arm.strategy,
        batch_size=arm.batch_size,  # type: ignore[arg-type]
        learner=LearnerSettings(
            max_concurrency=max_concurrency,
            timeout_seconds=None,  # long aggregator / naive calls must not be cut
            callbacks=[recorder],
        ),
        # Let the playbook grow: one bullet per distinct failure.
        algorithm=AlgorithmSettings(token_budget=None),
    )
    cpu0, t0 = time.process_time(), time.perf_counter()
    report = await combee.alearn(list(traces))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    calls = recorder.calls
    steps = split_steps(calls, [sum(s.calls.values()) for s in report.steps])
    sequential = arm.sequential
    return ArmResult(
        arm=arm,
        wall_seconds=wall,
        cpu_seconds=cpu,
        time_scale=time_scale,
        batch_sizes=[s.batch_size for s in report.steps],
        calls=calls,
        steps=steps,
        lower_bound_seconds=lower_bound(steps, model, sequential=sequential),
        breakdown=critical_breakdown(steps, model, sequential=sequential),
        bullets=len(report.playbook.bullets),
        merged=sum(s.merged for s in report.steps),
        evicted=sum(s.evicted for s in report.steps),
        failed_calls=sum(sum(s.failed_calls.values()) for s in report.steps),
        unparsed=sum(sum(s.unparsed.values()) for s in report.steps),
        peak_concurrency=llm.max_concurrency,
        report_input_tokens=report.totals()["input_tokens"],
        report_output_tokens=report.totals()["output_tokens"],
        wrapper_simulated_seconds=llm.simulated_seconds / time_scale,
        alternative_bounds={
            name: lower_bound(steps, alt, sequential=sequential)
            for name, alt in SENSITIVITY.items()
        },
    )


# ---------------------------------------------------------------------------- reporting


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def summarize(
    results: Sequence[ArmResult], model: LatencyModel, reference: str = "sequential"
) -> list[dict[str, Any]]:
    """One JSON-ready row per arm, with ratios against the reference arm."""
    ref = next((r for r in results if r.arm.name == reference), None)
    rows = []
    for r in results:
        stage_totals = r.stage_totals()
        rows.append(
            {
                "arm": r.arm.name,
                "strategy": r.arm.strategy,
                "batch_size": r.arm.batch_size,
                "speedup": {
                    "projected": _ratio(ref.projected_seconds, r.projected_seconds)
                    if ref
                    else None,
                    "lower_bound": _ratio(ref.lower_bound_seconds, r.lower_bound_seconds)
                    if ref
                    else None,
                    "measured_over_scale": _ratio(ref.simulated_seconds, r.simulated_seconds)
                    if ref
                    else None,
                },
                "tokens_vs_sequential": _ratio(r.tokens, ref.tokens) if ref else None,
                "efficiency": r.efficiency,
                "projected_efficiency_at_scale_1": r.projected_efficiency,
                "simulated_seconds": r.simulated_seconds,
                "projected_seconds": r.projected_seconds,
                "lower_bound_seconds": r.lower_bound_seconds,
                "measured_wall_seconds": r.wall_seconds,
                "overhead_real_seconds": r.overhead_real_seconds,
                "cpu_seconds": r.cpu_seconds,
                "steps": len(r.batch_sizes),
                "step_batch_sizes": r.batch_sizes,
                "calls": sum(t["calls"] for t in stage_totals.values()),
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "tokens": r.tokens,
                "by_stage": stage_totals,
                "critical_path_by_stage": r.breakdown,
                "longest_call_seconds": r.longest_call_seconds(model),
                "peak_concurrency": r.peak_concurrency,
                "playbook_bullets": r.bullets,
                "merged": r.merged,
                "evicted": r.evicted,
                "failed_calls": r.failed_calls,
                "unparsed": r.unparsed,
                "latency_check": {
                    "sum_of_recorded_call_seconds": sum(
                        model.seconds(c.input_tokens, c.output_tokens) for c in r.calls
                    ),
                    "latency_model_waited_seconds": r.wrapper_simulated_seconds,
                },
                "step_report_tokens": {
                    "input": r.report_input_tokens,
                    "output": r.report_output_tokens,
                },
            }
        )
    return rows


def sensitivity(results: Sequence[ArmResult], reference: str = "sequential") -> dict[str, Any]:
    """Lower-bound speed-ups over sequential under the alternative latency models."""
    ref = next((r for r in results if r.arm.name == reference), None)
    if ref is None:
        return {}
    return {
        name: {
            r.arm.name: _ratio(ref.alternative_bounds[name], r.alternative_bounds[name])
            for r in results
        }
        for name in SENSITIVITY
    }


def evaluate_targets(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Which Combee arms meet >=17x with no more tokens, and >=0.9 of the lower bound.

    The speed-up target is checked on each of the three speed-up figures.
    """
    combee = [r for r in rows if r["strategy"] == "combee"]

    def fast(r: dict[str, Any], kind: str) -> bool:
        value = r["speedup"][kind]
        tokens = r["tokens_vs_sequential"]
        return bool(
            value is not None
            and math.isfinite(value)
            and value >= SPEEDUP_TARGET
            and tokens is not None
            and tokens <= 1.0
        )

    return {
        "speedup_target": SPEEDUP_TARGET,
        "efficiency_target": EFFICIENCY_TARGET,
        "speedup_met": {
            kind: {r["arm"]: fast(r, kind) for r in combee}
            for kind in ("projected", "lower_bound", "measured_over_scale")
        },
        "tokens_at_most_sequential": {
            r["arm"]: r["tokens_vs_sequential"] is not None and r["tokens_vs_sequential"] <= 1.0
            for r in combee
        },
        "efficiency_met": {r["arm"]: r["efficiency"] >= EFFICIENCY_TARGET for r in rows},
        "projected_efficiency_met": {
            r["arm"]: r["projected_efficiency_at_scale_1"] >= EFFICIENCY_TARGET for r in rows
        },
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The results as a fixed-width text table (ratios first)."""
    header = (
        f"{'arm':<13}{'speedup':>8}{'LB spd':>8}{'m/s spd':>8}{'tok/seq':>8}{'eff@1':>6}"
        f"{'eff':>6}{'proj s':>8}{'LB s':>7}{'m/s s':>8}{'steps':>6}{'calls r/p/a/c':>15}"
        f"{'in tok':>9}{'out tok':>8}{'bullets':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        st = r["by_stage"]
        sp = r["speedup"]
        calls = "/".join(str(st.get(s, {}).get("calls", 0)) for s in STAGES)
        lines.append(
            f"{r['arm']:<13}{_fmt(sp['projected'], '.1f'):>7}x"
            f"{_fmt(sp['lower_bound'], '.1f'):>7}x{_fmt(sp['measured_over_scale'], '.1f'):>7}x"
            f"{_fmt(r['tokens_vs_sequential'], '.2f'):>8}"
            f"{r['projected_efficiency_at_scale_1']:>6.2f}{r['efficiency']:>6.2f}"
            f"{r['projected_seconds']:>8.0f}{r['lower_bound_seconds']:>7.0f}"
            f"{r['simulated_seconds']:>8.0f}{r['steps']:>6}{calls:>15}"
            f"{r['input_tokens']:>9}{r['output_tokens']:>8}{r['playbook_bullets']:>8}"
        )
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], path: Path, *, title: str) -> Path:
    """Bar charts: projected wall-clock (with lower bound, speed-up) and tokens by stage."""
    try:
        import matplotlib
    except ImportError as exc:  # the bench extra is optional
        raise SystemExit(
            "matplotlib is needed for the plot: pip install -e '.[bench]' (or pass --plot '')"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["arm"] for r in rows]
    xs = list(range(len(rows)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    projected = [r["projected_seconds"] / 60 for r in rows]
    bound = [r["lower_bound_seconds"] / 60 for r in rows]
    left.bar(xs, projected, color="#4C72B0", label="wall-clock (projected to real time)")
    left.bar(xs, bound, width=0.35, color="#DD8452", label="critical-path lower bound")
    for x, r, y in zip(xs, rows, projected, strict=True):
        label = _fmt(r["speedup"]["projected"], ".1f") + "x"
        left.annotate(label, (x, y), ha="center", va="bottom", fontsize=9)
    left.set_xticks(xs, names, rotation=25, ha="right")
    left.set_ylabel("learning wall-clock (simulated minutes)")
    left.set_title("Wall-clock and speed-up over sequential")
    left.legend(fontsize=8)

    bottom = [0.0] * len(rows)
    colors = {"reflect": "#55A868", "propose": "#8172B2", "aggregate": "#C44E52"}
    colors["curate"] = "#CCB974"
    for stage in STAGES:
        vals = [
            (
                r["by_stage"].get(stage, {}).get("input_tokens", 0)
                + r["by_stage"].get(stage, {}).get("output_tokens", 0)
            )
            / 1e6
            for r in rows
        ]
        right.bar(xs, vals, bottom=bottom, color=colors[stage], label=stage)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    for x, r, y in zip(xs, rows, bottom, strict=True):
        label = _fmt(r["tokens_vs_sequential"], ".2f") + "x"
        right.annotate(label, (x, y), ha="center", va="bottom", fontsize=9)
    right.set_xticks(xs, names, rotation=25, ha="right")
    right.set_ylabel("tokens (millions, input + output)")
    right.set_title("Tokens by stage, relative to sequential")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- CLI


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command-line options."""
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=doc.splitlines()[0])
    parser.add_argument("--traces", type=int, default=240, help=f"traces (<= {MAX_TRACES})")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.05,
        help="real seconds waited per simulated second (figures are reported unscaled)",
    )
    parser.add_argument("--base-seconds", type=float, default=0.5, help="fixed cost per call")
    parser.add_argument("--prefill-tps", type=float, default=1500.0, help="prompt tokens/s")
    parser.add_argument("--decode-tps", type=float, default=60.0, help="reply tokens/s")
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[16, 32, 64], help="fixed Combee sizes"
    )
    parser.add_argument("--no-auto", action="store_true", help='skip batch_size="auto"')
    parser.add_argument(
        "--arms", nargs="+", default=None, help="run only these arms (e.g. sequential combee-64)"
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        help="learner calls in flight (default: max(256, traces))",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for speed.json")
    parser.add_argument(
        "--plot", default=str(IMAGES / "speed.png"), help="PNG path ('' for no plot)"
    )
    args = parser.parse_args(list(argv))
    if not 1 <= args.traces <= MAX_TRACES:
        parser.error(f"--traces must be in 1..{MAX_TRACES}")
    if args.time_scale <= 0:
        parser.error("--time-scale must be > 0")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run every arm, print the table, write the JSON (and the plot); return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    model = LatencyModel(
        base_seconds=args.base_seconds, prefill_tps=args.prefill_tps, decode_tps=args.decode_tps
    )
    concurrency = args.max_concurrency or max(256, args.traces)
    traces = make_traces(args.traces)
    arms = default_arms(args.traces, args.batch_sizes, auto=not args.no_auto)
    if args.arms:
        unknown = set(args.arms) - {a.name for a in arms}
        if unknown:
            raise SystemExit(f"unknown arms {sorted(unknown)}; known: {[a.name for a in arms]}")
        arms = [a for a in arms if a.name in args.arms]
    results = []
    started = time.perf_counter()
    for arm in arms:
        result = asyncio.run(
            run_arm(arm, traces, model, time_scale=args.time_scale, max_concurrency=concurrency)
        )
        print(
            f"  {arm.name:<12} {result.wall_seconds:7.1f} s real ({result.cpu_seconds:.1f} s CPU), "
            f"lower bound {result.lower_bound_seconds:.0f} s simulated, {len(result.calls)} calls",
            flush=True,
        )
        results.append(result)
    rows = summarize(results, model)
    record = {
        "benchmark": "speed",
        "command": cmd,
        "parameters": {
            "traces": args.traces,
            "time_scale": args.time_scale,
            "batch_sizes": args.batch_sizes,
            "auto": not args.no_auto,
            "arms": [a.name for a in arms],
            "max_concurrency": concurrency,
            "token_budget": None,
            "timeout_seconds": None,
            "copies": 2,
            "fan_in": "floor(sqrt(n))",
            "learner": "fake_learner(insight=ticket_rule) in LatencyChatModel",
            "latency_model": model.as_dict(),
        },
        "machine": machine_info(),
        "run_seconds": time.perf_counter() - started,
        "arms": rows,
        "targets": evaluate_targets(rows),
        "sensitivity_lower_bound_speedup": {
            "note": "critical-path speed-up over sequential, recomputed from the same token "
            "counts under other latency models (auto keeps the sizes it chose here)",
            "models": {name: alt.as_dict() for name, alt in SENSITIVITY.items()},
            "speedups": sensitivity(results),
        },
    }
    print()
    print(table(rows))
    print(
        "\nspeedup = sequential / this arm, on wall-clock projected to time_scale=1 (waits "
        "unscaled, real CPU overhead kept);\nLB spd = on critical-path lower bounds; m/s spd = "
        "on measured / time_scale (inflates CPU overhead by 1/time_scale);\neff@1 = lower "
        "bound / projected wall-clock; eff = lower bound / (measured / time_scale)"
    )
    targets = evaluate_targets(rows)
    for kind, met in targets["speedup_met"].items():
        ok = [a for a, hit in met.items() if hit]
        print(
            f"target >= {SPEEDUP_TARGET:.0f}x ({kind}) with tokens <= sequential: "
            f"{', '.join(ok) if ok else 'no Combee arm'}"
        )
    for key in ("projected_efficiency_met", "efficiency_met"):
        ok = [a for a, hit in targets[key].items() if hit]
        print(
            f"target {key.removesuffix('_met')} >= {EFFICIENCY_TARGET}: {', '.join(ok) or 'none'}"
        )
    path = write_json(args.out / "speed.json", record)
    print(f"wrote {path}")
    if args.plot:
        title = (
            f"{args.traces} traces, fake learner, latency {model.base_seconds} s + "
            f"prompt/{model.prefill_tps:.0f} tok/s + reply/{model.decode_tps:.0f} tok/s"
        )
        print(f"wrote {plot(rows, Path(args.plot), title=title)}")
    return record


if __name__ == "__main__":
    main()
