"""``python -m langgraph_combee.tasks``: a task's baseline and ceiling on a model.

Runs the held-out examples of each task through its agent twice, with the bare
system prompt (baseline) and with the hand-written rules appended (ceiling),
and prints the accuracy of each (``--json``: per rule too, and a few misses).

    python -m langgraph_combee.tasks --model local:1.5b --task all -n 40
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from langgraph_combee.errors import CombeeError
from langgraph_combee.tasks import (
    TASKS,
    Models,
    Task,
    check_model_spec,
    evaluate,
    get_task,
    load_models,
)


def measure(task: Task, models: Models, n: int, seed: int) -> dict[str, Any]:
    """Baseline and ceiling accuracy of ``task`` on ``n`` held-out examples."""
    examples = task.examples(n, seed, "test")
    row: dict[str, Any] = {"task": task.name, "model": models.label, "n": n, "seed": seed}
    for label, with_rules in (("baseline", False), ("ceiling", True)):
        started = time.monotonic()
        agent = task.build_agent(models.agent, with_rules=with_rules)
        result = evaluate(task, agent, examples, max_concurrency=models.concurrency)
        row[label] = result.accuracy
        row[f"{label}_seconds"] = round(time.monotonic() - started, 1)
        row[f"{label}_errors"] = result.errors
        row[f"{label}_per_rule"] = result.by_rule(examples)
        row[f"{label}_misses"] = [
            {"input": e.input, "answer": a, "expected": e.answer}
            for e, a, ok in zip(examples, result.answers, result.correct, strict=True)
            if not ok
        ][:5]
    return row


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m langgraph_combee.tasks",
        description="Measure each task's baseline (no rules) and ceiling (rules in the prompt).",
    )
    parser.add_argument("--model", default="local:1.5b", help="test, local:1.5b, local:0.5b, ...")
    parser.add_argument("--task", choices=[*sorted(TASKS), "all"], default="all")
    parser.add_argument("-n", type=int, default=40, help="held-out examples per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object per task")
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        check_model_spec(args.model)
    except CombeeError as exc:
        parser.error(str(exc))
    if args.n < 1:
        parser.error("-n must be >= 1")
    names = sorted(TASKS) if args.task == "all" else [args.task]
    shared: Models | None = None
    try:
        for name in names:
            task = get_task(name)
            # The offline doubles belong to one task; a real model serves them all.
            models = shared if shared is not None else load_models(args.model, task)
            if not models.offline_double:
                shared = models
            row = measure(task, models, args.n, args.seed)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(
                    f"{name}: baseline {row['baseline']:.0%} ({row['baseline_seconds']} s), "
                    f"ceiling {row['ceiling']:.0%} ({row['ceiling_seconds']} s) "
                    f"on {args.n} held-out examples, seed {args.seed}, model {args.model}",
                    flush=True,
                )
    except CombeeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if shared is not None:
            shared.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
