"""Run every benchmark: ``python -m benchmarks [--quick]`` (what ``make bench`` runs).

``benchmarks/run_all.py`` (what ``combee bench`` runs) does the same as a script.

Each benchmark prints the exact command that reproduces it on its own, writes its
JSON to ``benchmarks/results/`` and its plot to ``docs/img/``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import adversarial, overhead, speed
from benchmarks._common import IMAGES, RESULTS

QUICK_SPEED = ["--traces", "48", "--time-scale", "0.01"]
QUICK_OVERHEAD = ["--runs", "300", "--block", "50", "--warmup", "20"]
QUICK_ADVERSARIAL = ["--honest", "24", "--strategies", "combee"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the speed benchmark, then the overhead benchmark, then the adversarial one."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON files")
    parser.add_argument("--img", type=Path, default=IMAGES, help="folder for the plots")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    # Pass folders on only when they differ from the defaults, so that the commands
    # the benchmarks print stay short and portable.
    out = [] if args.out == RESULTS else ["--out", str(args.out)]
    img = args.img != IMAGES
    print("== speed: learning strategies side by side ==", flush=True)
    speed.main(
        [
            *(QUICK_SPEED if args.quick else []),
            *out,
            *(["--plot", str(args.img / "speed.png")] if img else []),
        ]
    )
    print("\n== overhead: CombeeMiddleware on the hot path ==", flush=True)
    overhead.main(
        [
            *(QUICK_OVERHEAD if args.quick else []),
            *out,
            *(["--plot", str(args.img / "overhead.png")] if img else []),
        ]
    )
    print("\n== adversarial: poisoned traces against the BulletGuard ==", flush=True)
    adversarial.main([*(QUICK_ADVERSARIAL if args.quick else []), *out])


if __name__ == "__main__":
    main()
