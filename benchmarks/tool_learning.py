"""A live learning run on the ``tools`` task through the public API, with defaults.

The embedded model serves a ``create_agent`` agent with the task's tools and
``combee.middleware()``; ``Combee(model=..., evaluator=task.evaluator())`` is
otherwise left at its defaults, so the evaluator's comment (naming the right
calls) is the only feedback. Held-out accuracy is measured before (v0) and
after (the final version, ``capture=False``), next to the hand-written-rules
ceiling, and written as JSON.

    flock /tmp/llm.lock python -m benchmarks.tool_learning --size 1.5b --train 24 --holdout 24
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from langgraph_combee import Combee
from langgraph_combee.local import local_chat_model
from langgraph_combee.tasks import evaluate, get_task, ticket_input


def run(size: str, train_n: int, holdout_n: int, seed: int, drain: float) -> dict[str, Any]:
    """Measure baseline, ceiling, learning and the after-learning accuracy."""
    task = get_task("tools")
    started = time.monotonic()
    learner = local_chat_model(size, temperature=0.0, n_parallel=4)  # type: ignore[arg-type]
    server = learner.local_model
    assert server is not None
    agent_model = server.chat(temperature=0.0, max_tokens=160)
    row: dict[str, Any] = {"task": task.name, "model": f"local:{size}", "seed": seed}
    try:
        train = task.examples(train_n, seed, "train")
        holdout = task.examples(holdout_n, seed, "test")
        combee = Combee(prompt_id="tool-task", model=learner, evaluator=task.evaluator())
        row["learner"] = combee.learner.describe()
        v0 = task.build_agent(agent_model, middleware=[combee.middleware(capture=False)])
        before = evaluate(task, v0, holdout, max_concurrency=2)
        row["holdout_before"] = before.accuracy
        row["before_errors"] = before.errors
        print(json.dumps(row), flush=True)
        ceiling = evaluate(
            task, task.build_agent(agent_model, with_rules=True), holdout, max_concurrency=2
        )
        row["holdout_ceiling"] = ceiling.accuracy
        row["ceiling_per_rule"] = ceiling.by_rule(holdout)
        row["ceiling_errors"] = ceiling.errors
        row["ceiling_misses"] = [
            {"input": e.input, "made": a, "expected": e.answer}
            for e, a, ok in zip(holdout, ceiling.answers, ceiling.correct, strict=True)
            if not ok
        ][:8]
        print(json.dumps(row), flush=True)
        served = task.build_agent(agent_model, middleware=[combee.middleware()])
        stream_right = 0
        mark = time.monotonic()
        with combee.running():
            for example in train:
                try:
                    result = served.invoke(ticket_input(example), {"run_id": uuid.uuid4()})
                    stream_right += task.score(task.answer_of(result), example)
                except Exception as exc:  # a failed run is scored wrong, never fatal
                    print(f"run failed: {exc!r}", flush=True)
            combee.flush()
            # The last traces, fewer than min_batch, are taken after four max_wait_seconds.
            deadline = time.monotonic() + drain
            while combee.queue().pending_count() and time.monotonic() < deadline:
                combee.learner.wait_for_steps(combee.learner.stats.steps + 1, timeout=5.0)
            combee.learner.stop(timeout=max(1.0, deadline - time.monotonic()))
        row["stream_accuracy"] = stream_right / max(1, len(train))
        row["learning_seconds"] = round(time.monotonic() - mark, 1)
        stats = combee.learner.stats
        row["steps"], row["failed_steps"], row["versions"] = (
            stats.steps,
            stats.failed_steps,
            stats.versions,
        )
        row["last_error"] = stats.last_error
        final = combee.current()
        row["final_version"] = final.version
        row["playbook"] = final.render()
        learned = task.build_agent(agent_model, middleware=[combee.middleware(capture=False)])
        after = evaluate(task, learned, holdout, max_concurrency=2)
        row["holdout_after"] = after.accuracy
        row["after_per_rule"] = after.by_rule(holdout)
        row["after_errors"] = after.errors
        ceiling_value = row["holdout_ceiling"]
        row["fraction_of_ceiling"] = after.accuracy / ceiling_value if ceiling_value else None
        row["seconds"] = round(time.monotonic() - started, 1)
    finally:
        server.close()
    return row


def main() -> None:
    """Run once and write the JSON record."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="1.5b", choices=("1.5b", "0.5b"))
    parser.add_argument("--train", type=int, default=24)
    parser.add_argument("--holdout", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drain", type=float, default=1500.0, help="longest learner wait (s)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/tool_learning.json"))
    args = parser.parse_args()
    row = run(args.size, args.train, args.holdout, args.seed, args.drain)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=1) + "\n")
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
