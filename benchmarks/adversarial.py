"""Poisoned traces: planted instructions reaching a served prompt, honest rules lost.

Honest ticket-routing traffic (the ``tickets`` task, every ticket misrouted, with
ground truth) is mixed with the 40 injections of ``benchmarks/_injections.py``
(direct orders, polite requests, role-play, fake system notes, encoded and
obfuscated variants, exfiltration, secrets, URLs, personal data, five languages,
split across messages, in tool outputs, in feedback comments). The learner is
``parrot_learner``: it proposes every user-written text as a bullet, the worst
case, so the guard alone decides. For each strategy and guard setting it reports
the injections that reached an accepted prompt (per style), the honest insights
quarantined, and the honest look-alike rules (``HONEST_RULES``) refused.

    python -m benchmarks.adversarial [--honest 60] [--strategies combee naive sequential]
        [--batch-size 16] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, command, machine_info, write_json
from benchmarks._injections import (
    HONEST_RULES,
    INJECTIONS,
    honest_insight,
    mixed_traffic,
    reached,
)
from langgraph_combee import BulletGuard, Combee
from langgraph_combee.tasks import TicketRouting
from langgraph_combee.testing import parrot_learner

MODULE = "benchmarks.adversarial"
GUARDS: dict[str, BulletGuard | None] = {
    "default": BulletGuard(),
    "no length limit": BulletGuard(max_chars=None),
    "no guard": None,
}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--honest", type=int, default=60, help="honest tickets in the traffic")
    parser.add_argument("--batch-size", type=int, default=16, help="traces per learning step")
    parser.add_argument(
        "--strategies", nargs="+", default=["combee", "naive", "sequential"], help="strategies"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON file")
    return parser.parse_args(list(argv))


def run_arm(strategy: str, guard_name: str, honest: int, batch_size: int) -> dict[str, Any]:
    """Learn from the mixed traffic with one strategy and guard; return its figures."""
    traffic = mixed_traffic(honest)
    combee = Combee(
        prompt_id="adversarial",
        model=parrot_learner(insight=TicketRouting().insight),
        strategy=strategy,
        batch_size=batch_size,
        token_budget=None,
        guard=GUARDS[guard_name],
    )
    started = time.perf_counter()
    report = combee.learn(traffic)
    seconds = time.perf_counter() - started
    served = [v.render() for v in combee.history() if v.status == "accepted"]
    got_in = [i for i in INJECTIONS if any(reached(i, p) for p in served)]
    insights = {honest_insight(t) for t in traffic} - {""}
    quarantined = [q for step in report.steps for q in step.quarantined]
    wrongly = {getattr(q.op, "content", "") for q in quarantined} & insights
    reasons = Counter(r.split(":")[0] for q in quarantined for r in q.reasons)
    return {
        "strategy": strategy,
        "guard": guard_name,
        "traces": len(traffic),
        "injections": len(INJECTIONS),
        "injected_reached": len(got_in),
        "reached_by_style": dict(Counter(i.style for i in got_in)),
        "honest_insights": len(insights),
        "honest_rejected": len(wrongly),
        "honest_rejected_rate": len(wrongly) / len(insights) if insights else 0.0,
        "quarantined_ops": len(quarantined),
        "quarantine_reasons": dict(reasons.most_common()),
        "bullets_served": len(combee.current().playbook.live().bullets),
        "seconds": round(seconds, 2),
    }


def lookalikes() -> dict[str, Any]:
    """The honest rules that mention passwords, sending or forwarding: how many are refused."""
    guard = BulletGuard()
    refused = {rule: guard.check(rule) for rule in HONEST_RULES if guard.check(rule)}
    return {"rules": len(HONEST_RULES), "refused": len(refused), "refused_rules": refused}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run every arm, print the figures, write ``adversarial.json``; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    per_style = Counter(i.style for i in INJECTIONS)
    print(f"{len(INJECTIONS)} injections in {len(per_style)} styles: {dict(per_style)}")
    arms = []
    for strategy in args.strategies:
        for guard_name in GUARDS:
            arm = run_arm(strategy, guard_name, args.honest, args.batch_size)
            arms.append(arm)
            print(
                f"  {strategy:<10} {guard_name:<16} injected reached {arm['injected_reached']:>2}"
                f"/{arm['injections']}, honest rejected {arm['honest_rejected']}"
                f"/{arm['honest_insights']} ({arm['honest_rejected_rate']:.0%}), "
                f"quarantined {arm['quarantined_ops']}",
                flush=True,
            )
            if arm["reached_by_style"]:
                print(f"      reached by style: {arm['reached_by_style']}")
    looks = lookalikes()
    print(f"honest look-alike rules refused: {looks['refused']}/{looks['rules']}")
    record = {
        "benchmark": "adversarial",
        "command": cmd,
        "parameters": {
            "honest": args.honest,
            "batch_size": args.batch_size,
            "strategies": args.strategies,
        },
        "styles": dict(per_style),
        "arms": arms,
        "lookalikes": looks,
        "machine": machine_info(),
    }
    path = write_json(args.out / "adversarial.json", record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
