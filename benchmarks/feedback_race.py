"""How often ``feedback()`` right after ``invoke`` misses its run.

An agent on a SQLite store with its background learner running; every run is
followed at once by ``combee.feedback(run_id, ...)``, the way a request handler
does it. Traces wait ``feedback_wait_seconds=30`` for feedback, so the learner
never takes a run before its feedback: every False is a run the library lost
track of between capture and the queue, not one already learned. The serving
thread flushes every 10 ms so that many runs are in flight to the queue when
their feedback arrives.

    python -m benchmarks.feedback_race [--runs 2000] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from benchmarks._common import RESULTS, command, machine_info, write_json
from langgraph_combee import CaptureSettings, Combee, LearnerSettings
from langgraph_combee.testing import FunctionChatModel, fake_learner

MODULE = "benchmarks.feedback_race"


def run(runs: int) -> dict[str, Any]:
    """Invoke then give feedback ``runs`` times; count the feedback calls that returned False."""
    path = Path(tempfile.mkdtemp(prefix="combee-race-")) / "store.sqlite"
    with Combee.from_conn_string(
        str(path),
        prompt_id="race",
        model=fake_learner(),
        batch_size=8,
        capture=CaptureSettings(feedback_wait_seconds=30.0, flush_seconds=0.01),
        learner=LearnerSettings(poll_seconds=0.05, min_batch=1, max_wait_seconds=0.1),
    ) as combee:
        agent = create_agent(FunctionChatModel(lambda m: "ok"), middleware=[combee.middleware()])
        combee.start()
        missed = 0
        started = time.perf_counter()
        for i in range(runs):
            run_id = uuid.uuid4()
            agent.invoke({"messages": [HumanMessage(f"question {i}")]}, {"run_id": run_id})
            if not combee.feedback(run_id, correct=False, ground_truth="X"):
                missed += 1
        wall = time.perf_counter() - started
        serving = combee.describe()["serving"]
    return {"runs": runs, "feedback_false": missed, "wall_seconds": wall, "serving": serving}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run, print the figure, write ``feedback_race.json``; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--runs", type=int, default=2000, help="invoke + feedback pairs")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    result = run(args.runs)
    print(
        f"{result['feedback_false']} of {result['runs']} feedback() calls right after invoke "
        f"returned False; {result['serving'].get('feedback_delivered', 0)} were given while "
        f"their trace was being written and delivered after it"
    )
    record = {"benchmark": "feedback_race", "command": cmd, "machine": machine_info(), **result}
    path = write_json(args.out / "feedback_race.json", record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
