"""Learn a playbook offline from hand-made traces, with all three strategies side by side.

Runs with no network: the learner is ``fake_learner()``, a deterministic stand-in
for an LLM, wrapped in ``LatencyChatModel`` so each call takes a simulated,
token-dependent time (scaled down so the example finishes in seconds).

    python examples/offline_learn.py [--traces 48] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import asyncio

from langgraph_combee import Combee, Feedback, LearnerSettings, Trace
from langgraph_combee.testing import LatencyChatModel, fake_learner
from langgraph_combee.types import LearnReport

TEAMS = ["FIN-REFUNDS", "LOG-DELAYS", "SEC-ACCESS", "ACC-BILLING", "HW-RMA", "APP-BUGS"]
TOPICS = ["refund", "late parcel", "locked account", "double charge", "broken device", "crash"]


def make_traces(n: int) -> list[Trace]:
    """Support tickets the agent routed wrongly, each with the right team code."""
    traces = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        traces.append(
            Trace(
                id=f"ticket-{i:03d}",
                input=f"{topic} ticket #{i}: customer writes about a {topic}",
                output="GENERAL",
                feedback=Feedback(correct=False, ground_truth=TEAMS[i % len(TEAMS)]),
            )
        )
    return traces


async def run(strategy: str, traces: list[Trace], batch_size: int) -> LearnReport:
    # Simulated latency: 0.4 s a call plus per-token costs, scaled by 1/20.
    model = LatencyChatModel(
        fake_learner(),
        base_seconds=0.4,
        seconds_per_input_token=0.0005,
        seconds_per_output_token=0.01,
        time_scale=0.05,
    )
    combee = Combee(
        prompt_id="support-router",
        model=model,
        strategy=strategy,
        batch_size=batch_size,
        learner=LearnerSettings(max_concurrency=64),
    )
    return await combee.alearn(traces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    traces = make_traces(args.traces)

    reports = {
        s: asyncio.run(run(s, traces, args.batch_size)) for s in ("sequential", "naive", "combee")
    }
    header = (
        f"{'strategy':<11}{'steps':>6}{'calls':>7}{'in tok':>9}{'out tok':>9}"
        f"{'seconds':>9}{'bullets':>9}  groups (first step)"
    )
    print(header)
    print("-" * len(header))
    for name, report in reports.items():
        totals = report.totals()
        print(
            f"{name:<11}{totals['steps']:>6}{sum(totals['calls'].values()):>7}"
            f"{totals['input_tokens']:>9}{totals['output_tokens']:>9}{totals['seconds']:>9.2f}"
            f"{len(report.playbook.bullets):>9}  {report.steps[0].group_sizes}"
        )
    base = reports["sequential"].totals()["seconds"]
    for name in ("naive", "combee"):
        print(
            f"speed-up of {name} over sequential: {base / reports[name].totals()['seconds']:.1f}x"
        )
    combee = reports["combee"]
    print(f"\nCombee's first step: {combee.steps[0].model_dump(exclude={'trace_ids'})}")
    print(f"\nLearned playbook (version {combee.version.version}), first lines:")
    print("\n".join(combee.playbook.render().splitlines()[:8]))


if __name__ == "__main__":
    main()
