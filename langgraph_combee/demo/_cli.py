"""``python -m langgraph_combee.demo``: flags, the run, the outputs, the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from langgraph_combee._algorithm.engine import BatchSize
from langgraph_combee._errors import CombeeError
from langgraph_combee._llm.prompts import REFLECTOR_STYLES
from langgraph_combee.demo._display import make_display
from langgraph_combee.demo._report import summary, write_outputs
from langgraph_combee.demo._run import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TICKETS,
    DemoConfig,
    run_demo,
)
from langgraph_combee.tasks import TASKS, check_model_spec

__all__ = ["build_parser", "main"]

STRATEGIES = ("combee", "naive", "sequential")


def _int_at_least(low: int, wording: str) -> Callable[[str], int]:
    """An argparse type: an int >= ``low``; the error says ``expected <wording>``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {wording}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer >= 0")


def _batch_size(text: str) -> BatchSize:
    if text == "auto":
        return "auto"
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a positive integer, got {text!r}"
        ) from None


def _model(text: str) -> str:
    try:
        return check_model_spec(text)
    except CombeeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The demo's argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m langgraph_combee.demo",
        description=(
            "A create_agent ticket router that improves its own system prompt while it "
            "serves: the background learner turns the runs' feedback into playbook "
            "versions, and the agent hot-swaps to each one."
        ),
    )
    parser.add_argument(
        "--model",
        type=_model,
        default="local:1.5b",
        help="local:1.5b (default), local:0.5b, provider:name (init_chat_model) or test "
        "(offline doubles, seconds)",
    )
    parser.add_argument(
        "--tickets",
        type=_positive_int,
        default=DEFAULT_TICKETS,
        help=f"training tickets served while learning (default {DEFAULT_TICKETS})",
    )
    parser.add_argument(
        "--batch-size",
        type=_batch_size,
        default=DEFAULT_BATCH_SIZE,
        help=f"traces per learning step: an integer or auto (default {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("demo-output"), help="output folder (default demo-output/)"
    )
    parser.add_argument(
        "--task", choices=sorted(TASKS), default="tickets", help="task to serve (default tickets)"
    )
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default="combee", help="learning strategy"
    )
    parser.add_argument(
        "--holdout", type=_positive_int, default=24, help="held-out tickets (default 24)"
    )
    parser.add_argument(
        "--window", type=_positive_int, default=12, help="runs per accuracy window (default 12)"
    )
    parser.add_argument(
        "--workers", type=_positive_int, default=None, help="tickets served at once"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the ticket streams")
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also evaluate the hand-written rules on the held-out tickets",
    )
    parser.add_argument(
        "--drain-seconds",
        type=_seconds,
        default=600.0,
        help="longest wait for the learner's last step (default 600)",
    )
    parser.add_argument(
        "--rate",
        type=_seconds,
        default=None,
        help="tickets arriving per minute (default: 0, as fast as the model serves; "
        "the test model spreads them out a little)",
    )
    parser.add_argument(
        "--max-ahead",
        type=_non_negative_int,
        default=None,
        help="most runs served ahead of the learner before the stream waits for it "
        "(default: two batches with a local model, no limit otherwise; 0: no limit)",
    )
    parser.add_argument(
        "--reflector",
        choices=REFLECTOR_STYLES,
        default=None,
        help="reflection style; curators follow it (default: compact for the local models, "
        "full otherwise)",
    )
    parser.add_argument(
        "--meaning",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve a ticket that names no rule's words the rule closest in meaning "
        "(default: as Combee, on where the [local-embed] extra and its weights are "
        "installed; --meaning requires them, --no-meaning turns it off)",
    )
    parser.add_argument("--plain", action="store_true", help="plain lines, no live view")
    return parser


def main(argv: Sequence[str] | None = None, *, stream: TextIO | None = None) -> int:
    """Run the demo; return the process exit code.

    Args:
        argv: The arguments (default ``sys.argv[1:]``).
        stream: Where output goes (default stdout).

    Returns:
        0 on success, 1 when the demo could not run (the reason is printed on
        stderr); bad flags exit with argparse's code 2 and a usage message.
    """
    args = build_parser().parse_args(None if argv is None else list(argv))
    config = DemoConfig(
        model=args.model,
        task=args.task,
        tickets=args.tickets,
        holdout=args.holdout,
        batch_size=args.batch_size,
        strategy=args.strategy,
        window=args.window,
        workers=args.workers,
        seed=args.seed,
        out=args.out,
        ceiling=args.ceiling,
        drain_seconds=args.drain_seconds,
        pace_seconds=None if args.rate is None else (60.0 / args.rate if args.rate else 0.0),
        reflector=args.reflector,
        max_ahead=args.max_ahead,
        meaning=args.meaning,
    )
    display = make_display(plain=args.plain, stream=stream)
    try:
        result = run_demo(config, display)
    except CombeeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    paths = write_outputs(result, config.out)
    display.print(summary(result))
    plot = paths["plot"]
    display.print(
        f"\nWrote {paths['json']}"
        + (f" and {plot}" if plot else " (no plot: pip install 'langgraph-combee[demo]')")
    )
    return 0
