"""``python -m benchmarks.blind run FAMILY --out FILE.json [--quick]``; ``... list``.

``run`` scores one family's arms (no rules, hand-written rules, few-shot, learned)
on the bundled 1.5B model and writes the JSON record after each arm; ``--quick``
runs the same pipeline on the offline test doubles with tiny sets.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.blind import FAMILIES
from benchmarks.blind._runner import ARMS, run_family


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run it."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.blind", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the families, dev then sealed")
    run = sub.add_parser("run", help="score one family's arms")
    run.add_argument("family", choices=sorted(FAMILIES))
    run.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    run.add_argument("--quick", action="store_true", help="offline doubles, tiny sets")
    run.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {ARMS}")
    run.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    run.add_argument(
        "--learn-timeout", type=float, default=1200.0, help="longest wait for the learner (s)"
    )
    run.add_argument(
        "--examples", type=int, default=0, help="AlgorithmSettings.examples (0: the default)"
    )
    run.add_argument(
        "--without",
        default="",
        help="comma-separated learning-step stages to leave out (an ablation)",
    )
    run.add_argument(
        "--trust-tools",
        action="store_true",
        help="list the family's own tools in BulletGuard(trusted_tools=...)",
    )
    run.add_argument(
        "--focus-by-meaning",
        action="store_true",
        help="ServingSettings(focus_embedder=...) with the few-shot arm's embedder (the default, "
        "'auto', serves by meaning already where the [local-embed] extra is installed: the "
        "learned arm's describe() says which, serving.rules_by_meaning)",
    )
    args = parser.parse_args(args_list)
    if args.command == "list":
        for family in FAMILIES.values():
            print(f"{family.name:13s} {'sealed' if family.sealed else 'dev   '} {family.title}")
        return
    record = run_family(
        FAMILIES[args.family],
        out=args.out,
        quick=args.quick,
        arms=[arm.strip() for arm in args.arms.split(",") if arm.strip()],
        threads=args.threads,
        learn_timeout=args.learn_timeout,
        argv=args_list,
        examples=args.examples,
        without=[name.strip() for name in args.without.split(",") if name.strip()],
        trust_tools=args.trust_tools,
        focus_by_meaning=args.focus_by_meaning,
    )
    for arm, result in record["arms"].items():
        print(f"{arm:11s} score {result['score']}  {result['seconds']} s")
    print(f"fraction of gain: {record['fraction_of_gain']}")


if __name__ == "__main__":
    main()
