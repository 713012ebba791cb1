"""One process of a multi-process deployment: an agent replica or a background learner.

Run by ``benchmarks/replicas.py`` and ``tests/learner/test_replicas.py``, several at once
against one database::

    python -m benchmarks._replica agent --conn DSN --name a0 --runs 30 --out a0.jsonl --stop STOP
    python -m benchmarks._replica learner --conn DSN --name l0 --out l0.jsonl --stop STOP

Both run until the ``--stop`` file exists, then close their ``Combee`` (flushing
captures, releasing the lease) and exit. Each writes JSON lines to ``--out``,
flushed line by line so a process killed with SIGKILL leaves a readable log:

* an agent (serve-only ``Combee(model=None)``, ``create_agent`` with
  ``combee.middleware()`` and a scripted model) logs every run: ``{"t", "v",
  "trace"}`` with the prompt version the run was served (from the run's tracing
  metadata) and, for the first ``--runs`` runs, the id of the trace it captured
  (an evaluator gives each a distinct ground truth, so each teaches one rule);
  later runs are served without capture, to watch new versions arrive;
* a learner (``fake_learner()`` behind a fixed per-call latency) logs
  ``{"event": "ready", "holder", "pid"}``, then ``start`` and ``end`` of every
  learning step with its holder, traces and the version it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage

from langgraph_combee import (
    AlgorithmSettings,
    Combee,
    Feedback,
    LearnerSettings,
    ServingSettings,
    Trace,
)
from langgraph_combee.testing import FunctionChatModel, LatencyChatModel, fake_learner


class _Log:
    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8", buffering=1)

    def write(self, **record: Any) -> None:
        self._file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._file.close()


class _Served(BaseCallbackHandler):
    """Remembers the prompt version in the metadata of the last model call."""

    def __init__(self) -> None:
        self.version: int | None = None

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        version = (metadata or {}).get("combee_version")
        if version is not None:
            self.version = int(version)


def ground_truth(task_input: str) -> str:
    """The answer the evaluator expects: ``a0 run 12 ...`` expects ``A0-12``."""
    name, _, number, *_ = task_input.split()
    return f"{name.upper()}-{number}"


def _evaluate(trace: Trace) -> Feedback:
    return Feedback(correct=False, ground_truth=ground_truth(trace.input), source="evaluator")


def run_agent(args: argparse.Namespace) -> None:
    """Serve runs until the stop file exists; capture the first ``args.runs``."""
    log = _Log(args.out)
    combee = Combee.from_conn_string(
        args.conn,
        prompt_id=args.prompt_id,
        evaluator=_evaluate,
        serving=ServingSettings(refresh_seconds=args.refresh),
    )
    model = FunctionChatModel(lambda messages: "WRONG")
    capturing = create_agent(
        model, tools=[], system_prompt="Route the ticket.", middleware=[combee.middleware()]
    )
    serving = create_agent(
        model,
        tools=[],
        system_prompt="Route the ticket.",
        middleware=[combee.middleware(capture=False)],
    )
    served = _Served()
    log.write(event="ready", name=args.name, pid=os.getpid(), t=time.time())
    i = 0
    try:
        while not args.stop.exists():
            capture = i < args.runs
            run_id = uuid.uuid4()
            agent = capturing if capture else serving
            agent.invoke(
                {"messages": [{"role": "user", "content": f"{args.name} run {i} please route"}]},
                config={"run_id": run_id, "callbacks": [served]},
            )
            log.write(t=time.time(), v=served.version, trace=str(run_id) if capture else None)
            i += 1
            time.sleep(args.pause)
    finally:
        combee.close()
        log.write(event="closed", t=time.time(), stats=combee.describe()["serving"])
        log.close()


def run_learner(args: argparse.Namespace) -> None:
    """Learn in the background until the stop file exists, logging every step."""
    log = _Log(args.out)
    model = LatencyChatModel(
        fake_learner(),
        base_seconds=args.latency,
        seconds_per_input_token=0.0,
        seconds_per_output_token=0.0,
    )
    combee = Combee.from_conn_string(
        args.conn,
        prompt_id=args.prompt_id,
        model=model,
        batch_size=args.batch,
        learner=LearnerSettings(
            min_batch=1,
            max_wait_seconds=args.max_wait,
            poll_seconds=args.poll,
            lease_seconds=args.lease,
        ),
        algorithm=AlgorithmSettings(token_budget=None),
    )
    learner = combee.learner
    learn = learner._learn

    async def logged(tenant: str | None, batch: list[Trace], *, split: bool) -> bool:
        ids = [t.id for t in batch]
        log.write(event="start", t=time.time(), holder=learner.holder, traces=ids)
        ok = await learn(tenant, batch, split=split)
        version = learner.stats.reports[-1].version if ok else None
        log.write(event="end", t=time.time(), holder=learner.holder, ok=ok, version=version)
        return ok

    learner._learn = logged  # type: ignore[method-assign]
    log.write(event="ready", name=args.name, holder=learner.holder, pid=os.getpid(), t=time.time())
    combee.start()
    try:
        while not args.stop.exists():
            time.sleep(0.05)
    finally:
        combee.close()
        log.write(event="closed", t=time.time(), stats=learner.describe())
        log.close()


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of one replica or learner process."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._replica", description=__doc__)
    parser.add_argument("role", choices=["agent", "learner"])
    parser.add_argument("--conn", required=True, help="the shared store (a DSN or a path)")
    parser.add_argument("--prompt-id", default="replicas")
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines log")
    parser.add_argument("--stop", type=Path, required=True, help="exit once this file exists")
    parser.add_argument("--runs", type=int, default=30, help="agent: runs captured")
    parser.add_argument("--pause", type=float, default=0.02, help="agent: seconds between runs")
    parser.add_argument("--refresh", type=float, default=0.5, help="agent: refresh_seconds")
    parser.add_argument("--batch", type=int, default=5, help="learner: traces per step")
    parser.add_argument("--latency", type=float, default=0.1, help="learner: seconds per call")
    parser.add_argument("--lease", type=float, default=1.5, help="learner: lease_seconds")
    parser.add_argument("--poll", type=float, default=0.05, help="learner: poll_seconds")
    parser.add_argument("--max-wait", type=float, default=0.3, help="learner: max_wait_seconds")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run one agent replica or one learner."""
    args = parse(argv)
    (run_agent if args.role == "agent" else run_learner)(args)


if __name__ == "__main__":
    main()
