"""Quality of learned playbooks on the real local model: sequential vs naive vs Combee.

One set of training traces is collected once: the agent as deployed (version 0,
no playbook) routes the training tickets, and every misrouted ticket becomes a
``Trace`` with its ground truth. Every configuration then learns from exactly
those traces, in the same order, from an empty playbook, and its final playbook
is evaluated on the same held-out tickets (``capture=False``, so evaluation
never feeds a learner). Per configuration it reports held-out accuracy, the
number of playbook entries (the paper's context-overload measure), the wall
clock of learning and the learner's calls and tokens. Two references frame it:
the agent with no playbook (v0) and with the hand-written rules (the ceiling).

The sequential strategy (ACE as published) reflects and curates one trace at a
time whatever the batch size, so it runs once; naive and Combee run at each
batch size. A learning step that fails is recorded and learning goes on with
the next batch.

    python -m benchmarks.quality            # 1.5B model, full grid (about an hour)
    python -m benchmarks.quality --quick    # naive/Combee at 12, 24 training tickets (< 15 min)
    python -m benchmarks.quality --model test --quick   # offline doubles, seconds
    python -m benchmarks.quality --replay both          # each configuration with and without
                                                        # verified adoption (an ablation row)

Writes ``benchmarks/results/quality.json`` and ``docs/img/quality.png`` and
prints the exact command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import IMAGES, RESULTS, command, machine_info, write_json
from langgraph_combee import (
    AlgorithmSettings,
    Combee,
    Feedback,
    LearnerSettings,
    Trace,
)
from langgraph_combee._rules.rules import conflicts
from langgraph_combee.errors import CombeeError
from langgraph_combee.tasks import (
    Example,
    Models,
    Task,
    check_model_spec,
    evaluate,
    get_task,
    load_models,
)
from langgraph_combee.types import StepReport

MODULE = "benchmarks.quality"
STRATEGIES = ("sequential", "naive", "combee")


@dataclass(frozen=True)
class Plan:
    """What one run of the benchmark measures."""

    train: int
    test: int
    batch_sizes: tuple[int, ...]
    strategies: tuple[str, ...]
    replay: tuple[bool, ...] = (False,)


FULL = Plan(train=72, test=40, batch_sizes=(8, 16, 32, 64), strategies=STRATEGIES)
# Two configurations: about 13 minutes on the 1.5B model on 2 cores.
QUICK = Plan(train=24, test=16, batch_sizes=(12,), strategies=("naive", "combee"))


@dataclass(frozen=True)
class Config:
    """One learner configuration."""

    strategy: str
    batch_size: int
    replay: bool = False

    @property
    def name(self) -> str:
        """``combee@32`` (``combee@32+replay``); sequential is per trace whatever the batch size."""
        base = (
            "sequential" if self.strategy == "sequential" else f"{self.strategy}@{self.batch_size}"
        )
        return f"{base}+replay" if self.replay else base


def configs(plan: Plan) -> list[Config]:
    """The grid: sequential once, naive and Combee at every batch size (each replay setting)."""
    out: list[Config] = []
    for strategy in plan.strategies:
        sizes = [min(plan.batch_sizes)] if strategy == "sequential" else plan.batch_sizes
        out.extend(Config(strategy, size, replay) for size in sizes for replay in plan.replay)
    return out


def replay_evaluator(task: Task) -> Callable[[Trace], Feedback | None]:
    """Scores a replayed run with the task's scorer against the ground truth it carries."""

    def score(trace: Trace) -> Feedback | None:
        truth = trace.feedback.ground_truth if trace.feedback is not None else None
        if truth is None:
            return None
        right = task.score(trace.output, Example(input=trace.input, answer=truth))
        return Feedback(correct=right, source="evaluator")

    return score


def collect_traces(task: Task, models: Models, train: list[Example]) -> tuple[list[Trace], float]:
    """Run version 0 over the training tickets; each failure becomes a trace with ground truth."""
    agent = task.build_agent(models.agent)
    result = evaluate(task, agent, train, max_concurrency=models.concurrency)
    traces = [
        Trace(
            id=f"train-{i:03d}",
            input=example.input,
            output=answer,
            feedback=Feedback(correct=False, ground_truth=example.answer),
            metadata={"rule": example.meta.get("rule", "")},
        )
        for i, (example, answer, right) in enumerate(
            zip(train, result.answers, result.correct, strict=True)
        )
        if not right
    ]
    return traces, result.accuracy


async def learn(combee: Combee, traces: list[Trace], batch_size: int) -> dict[str, Any]:
    """Learn in fixed-size batches; a failed step is counted and learning goes on."""
    reports: list[StepReport] = []
    failures: list[str] = []
    for start in range(0, len(traces), batch_size):
        try:
            reports.append(await combee._stepper.step(traces[start : start + batch_size]))
        except CombeeError as exc:
            failures.append(repr(exc))
    return summarise(reports, failures)


def summarise(reports: Sequence[StepReport], failures: Sequence[str]) -> dict[str, Any]:
    """What the steps of one learning pass did, summed (``failures``: the failed steps)."""
    calls: dict[str, int] = {}
    failed_calls: dict[str, int] = {}
    replayed = [r for r in reports if r.replay is not None and r.replay.enabled]
    for report in reports:
        for stage, count in report.calls.items():
            calls[stage] = calls.get(stage, 0) + count
        for stage, count in report.failed_calls.items():
            failed_calls[stage] = failed_calls.get(stage, 0) + count
    return {
        "steps": len(reports),
        "failed_steps": len(failures),
        "step_errors": list(failures),
        "calls": calls,
        "failed_calls": failed_calls,
        "unparsed": sum(sum(r.unparsed.values()) for r in reports),
        "input_tokens": sum(r.input_tokens for r in reports),
        "output_tokens": sum(r.output_tokens for r in reports),
        "evicted": sum(r.evicted for r in reports),
        "merged": sum(r.merged for r in reports),
        "replay_tokens": sum(r.replay.input_tokens + r.replay.output_tokens for r in replayed),
        "rules_dropped_by_replay": sum(len(r.replay.dropped) for r in replayed),
        "rules_verified_by_replay": sum(
            1 for r in replayed for v in r.replay.rules if v.evidence.status == "verified"
        ),
        "rules_narrowed_by_replay": sum(
            1 for r in replayed for v in r.replay.rules if v.evidence.status == "narrowed"
        ),
        # What replay decided against, and why: the rule as judged, then its verdict.
        "replay_verdicts": [
            f"{v.evidence.status}: {v.content} ({v.evidence.reason})"
            for r in replayed
            for v in r.replay.rules
            if v.evidence.status in ("rejected", "narrowed")
        ],
        "truncated": sum(sum(r.truncated.values()) for r in reports),
        "aggregation": [r.aggregation for r in reports],
        "conflicts_settled": sum(len(r.conflicts) for r in reports),
        "conflicts": [c for r in reports for c in r.conflicts],
        "left_out": [rule for r in reports for rule in r.left_out],
    }


def run_config(
    config: Config, task: Task, models: Models, traces: list[Trace], test: list[Example], seed: int
) -> dict[str, Any]:
    """Learn with one configuration from an empty playbook, then evaluate held out."""
    combee = Combee(
        prompt_id=f"quality-{config.name}",
        model=models.learner,
        strategy=config.strategy,
        batch_size=config.batch_size,
        # Verified adoption needs the agent's model, its prompt and an evaluator; the
        # traces were collected without the middleware, so it is told them.
        evaluator=replay_evaluator(task) if config.replay else None,
        learner=LearnerSettings(
            max_concurrency=models.concurrency, timeout_seconds=models.timeout_seconds
        ),
        algorithm=AlgorithmSettings(
            roles=models.roles,
            seed=seed,
            replay=config.replay,
            agent_model=models.agent if config.replay else None,
            agent_prompt=task.prompt() if config.replay else None,
        ),
    )
    roles = combee.describe_roles()
    started = time.perf_counter()
    learned = asyncio.run(learn(combee, traces, config.batch_size))
    learned["roles_after"] = combee.describe_roles()
    learn_seconds = time.perf_counter() - started
    head = combee.current()
    agent = task.build_agent(models.agent, middleware=[combee.middleware(capture=False)])
    held_out = evaluate(task, agent, test, max_concurrency=models.concurrency)
    return {
        "name": config.name,
        "strategy": config.strategy,
        "batch_size": None if config.strategy == "sequential" else config.batch_size,
        "replay": config.replay,
        "accuracy": held_out.accuracy,
        "roles": roles,
        "bullets": len(head.playbook.bullets),
        "contradictions_left": len(conflicts(head.playbook)),
        "playbook_tokens": head.playbook.token_count(),
        "learn_seconds": round(learn_seconds, 2),
        "eval_seconds": round(held_out.seconds, 2),
        "tokens": learned["input_tokens"] + learned["output_tokens"],
        **learned,
        "total_calls": sum(learned["calls"].values()),
        "eval_errors": held_out.errors,
        "per_rule": held_out.by_rule(test),
        "playbook": head.render(),
    }


def table(rows: Sequence[dict[str, Any]], references: dict[str, float]) -> str:
    """The results as a fixed-width text table."""
    lines = [
        f"{'config':<20}{'held-out':>9}{'bullets':>9}{'learn s':>9}{'calls':>7}"
        f"{'tokens':>9}{'failed':>8}{'roles':>7}",
    ]
    for name, accuracy in references.items():
        lines.append(f"{name:<20}{accuracy:>9.0%}{'-':>9}{'-':>9}{'-':>7}{'-':>9}{'-':>8}")
    for row in rows:
        lines.append(
            f"{row['name']:<20}{row['accuracy']:>9.0%}{row['bullets']:>9}"
            f"{row['learn_seconds']:>9.0f}{row['total_calls']:>7}{row['tokens']:>9,}"
            f"{row['failed_steps']:>8}{row['roles']['profile']:>7}"
        )
    return "\n".join(lines)


def plot(
    rows: Sequence[dict[str, Any]], references: dict[str, float], path: Path, title: str
) -> Path:
    """Held-out accuracy and playbook entries against batch size, one line per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    fig, (acc_ax, size_ax, time_ax) = plt.subplots(1, 3, figsize=(14, 4.2), dpi=110)
    colours = {"naive": "tab:red", "combee": "tab:blue", "sequential": "tab:grey"}
    for strategy in ("naive", "combee"):
        mine = sorted(
            (r for r in rows if r["strategy"] == strategy and not r.get("replay")),
            key=lambda r: r["batch_size"],
        )
        if not mine:
            continue
        xs = [r["batch_size"] for r in mine]
        style = {"color": colours[strategy], "marker": "o", "label": strategy}
        acc_ax.plot(xs, [r["accuracy"] for r in mine], **style)
        size_ax.plot(xs, [r["bullets"] for r in mine], **style)
        time_ax.plot(xs, [r["learn_seconds"] for r in mine], **style)
    for row in rows:
        if row["strategy"] == "sequential" and not row.get("replay"):
            style = {"color": colours["sequential"], "ls": "-", "label": "sequential (per trace)"}
            acc_ax.axhline(row["accuracy"], **style)
            size_ax.axhline(row["bullets"], **style)
            time_ax.axhline(row["learn_seconds"], **style)
    ref_styles = {"v0 (no playbook)": ("black", ":"), "hand-written rules": ("tab:green", "--")}
    for name, accuracy in references.items():
        colour, ls = ref_styles.get(name, ("black", ":"))
        acc_ax.axhline(accuracy, color=colour, ls=ls, lw=1, label=name)
    sizes = sorted({r["batch_size"] for r in rows if r["batch_size"]})
    for ax in (acc_ax, size_ax, time_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes or [1])
        ax.set_xticklabels([str(s) for s in sizes] or ["1"])
        ax.set_xlabel("batch size")
        ax.grid(alpha=0.3)
    acc_ax.set_ylim(-0.02, 1.02)
    acc_ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    acc_ax.set_title("held-out accuracy")
    size_ax.set_title("playbook entries")
    size_ax.set_ylim(bottom=0)
    time_ax.set_title("learning wall-clock (s)")
    time_ax.set_ylim(bottom=0)
    acc_ax.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--model",
        default="local:1.5b",
        help="local:1.5b (default), local:0.5b, provider:name or test (offline doubles)",
    )
    parser.add_argument("--quick", action="store_true", help="a few configurations, fewer traces")
    parser.add_argument("--task", default="tickets", choices=("tickets", "formats"))
    parser.add_argument("--train", type=int, default=None, help="training tickets")
    parser.add_argument("--test", type=int, default=None, help="held-out tickets")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--replay",
        choices=("off", "on", "both"),
        default="off",
        help="verified adoption: off (default), on, or both (an ablation row per configuration)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for quality.json")
    parser.add_argument("--plot", default=str(IMAGES / "quality.png"), help="PNG ('' for none)")
    args = parser.parse_args(list(argv))
    try:
        check_model_spec(args.model)
    except CombeeError as exc:
        parser.error(str(exc))
    for name in ("train", "test"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1")
    if args.batch_sizes and min(args.batch_sizes) < 1:
        parser.error("--batch-sizes must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Collect the traces, learn with every configuration, report; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    plan = Plan(
        train=args.train or base.train,
        test=args.test or base.test,
        batch_sizes=tuple(args.batch_sizes or base.batch_sizes),
        strategies=tuple(args.strategies or base.strategies),
        replay={"off": (False,), "on": (True,), "both": (False, True)}[args.replay],
    )
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    started = time.perf_counter()
    task = get_task(args.task)
    models = load_models(args.model, task)
    train = task.examples(plan.train, args.seed, "train")
    test = task.examples(plan.test, args.seed, "test")

    mark = time.perf_counter()
    traces, train_accuracy = collect_traces(task, models, train)
    collect_seconds = time.perf_counter() - mark
    print(
        f"traces: {len(traces)} failures of {len(train)} training tickets "
        f"(v0 train accuracy {train_accuracy:.0%}, {collect_seconds:.0f} s)",
        flush=True,
    )
    references: dict[str, float] = {}
    for name, with_rules in (("v0 (no playbook)", False), ("hand-written rules", True)):
        agent = task.build_agent(models.agent, with_rules=with_rules)
        references[name] = evaluate(task, agent, test, max_concurrency=models.concurrency).accuracy
        print(f"  {name:<20} held-out {references[name]:.0%}", flush=True)

    rows: list[dict[str, Any]] = []
    record: dict[str, Any] = {
        "benchmark": "quality",
        "command": cmd,
        "parameters": {
            "model": args.model,
            "task": task.name,
            "quick": args.quick,
            "train_tickets": plan.train,
            "traces": len(traces),
            "test_tickets": plan.test,
            "batch_sizes": list(plan.batch_sizes),
            "strategies": list(plan.strategies),
            "replay": args.replay,
            "seed": args.seed,
            "learner_concurrency": models.concurrency,
            "roles": models.reflector or "auto",
            "copies": 2,
            "fan_in": "floor(sqrt(n))",
        },
        "machine": machine_info(),
        "collect_seconds": round(collect_seconds, 2),
        "v0_train_accuracy": train_accuracy,
        "references": references,
        "configs": rows,
        "complete": False,
    }
    path = args.out / "quality.json"
    for config in configs(plan):
        row = run_config(config, task, models, traces, test, args.seed)
        ceiling = references["hand-written rules"]
        row["of_ceiling"] = round(row["accuracy"] / ceiling, 3) if ceiling else None
        print(
            f"  {config.name:<20} held-out {row['accuracy']:.0%} ({row['of_ceiling']} of the "
            f"ceiling), {row['bullets']} bullets, "
            f"learn {row['learn_seconds']:.0f} s, {row['total_calls']} calls, "
            f"{row['tokens']:,} tokens, {row['failed_steps']} failed steps, "
            f"roles {row['roles']['profile']}, level 2 {row['aggregation']}, "
            f"{row['contradictions_left']} contradictions left",
            flush=True,
        )
        rows.append(row)
        # Written after every configuration: a long run cut short keeps what it measured.
        record["run_seconds"] = round(time.perf_counter() - started, 2)
        write_json(path, record)
    record["complete"] = True
    print()
    print(table(rows, references))
    record["run_seconds"] = round(time.perf_counter() - started, 2)
    path = write_json(path, record)
    print(f"\nwrote {path}")
    if args.plot:
        title = f"Learned playbooks on {task.name}, {args.model}: {len(traces)} training traces"
        print(f"wrote {plot(rows, references, Path(args.plot), title)}")
    print(f"reproduce: {cmd}")
    return record


if __name__ == "__main__":
    main()
