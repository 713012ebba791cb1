"""Hot-path overhead of ``CombeeMiddleware`` on a trivial ``create_agent`` agent.

The agent's model answers instantly (``FunctionChatModel(lambda m: "ok")``, no tools),
so everything measured is framework and middleware time: the worst case for a
relative overhead. Arms run in interleaved blocks (in a new, seeded order every
round) so that drift and noise hit every arm alike.

Phase "hot path": the learners are not started, so only the agent's own thread
and Combee's serving thread (which writes captured traces to the queue) run.
Arms: ``plain`` (no middleware), ``noop-hooks`` (a middleware with
``before_agent``, ``after_agent`` and ``wrap_model_call`` doing nothing: the
framework's cost of the two extra graph nodes), ``noop-wrap`` (a middleware with
``wrap_model_call`` only, doing nothing: the floor of the default mode),
``combee-serve`` (``capture=False``), ``combee`` (the default middleware: all
inside ``wrap_model_call``, capture on, empty playbook), ``combee+playbook`` (a
learned playbook in force, so it is injected on every call), and ``hooks`` and
``hooks+playbook``: the same with ``combee.middleware(hooks=True)``, which pins
in ``before_agent`` and captures in ``after_agent`` (two graph nodes more). Two
arms measure the durable capture mode (``durability="write_through"``: each
trace is written to the queue before the run returns): ``durable`` on the
in-memory store (the library's own cost of the synchronous write) and
``durable-sqlite`` on a ``SqliteStore`` file (what a real durable write adds: a
committed transaction per run).

Every arm is also compared with ``noop-wrap`` (the target: the default
middleware within ``TARGET_OVER_WRAP_US`` microseconds of it at p50) and, for the
Combee arms, by the ratio of its overhead over ``plain`` to the default's.

Phase "learning": ``plain`` and the four Combee arms again, with every
Combee's background learner running (``fake_learner()``, batch size 16) and
learning from the runs as they are captured, on another thread of the same
process, so they compete for the interpreter.

The target is judged on paired differences: per round, an arm's block median
minus noop-wrap's, for the agent thread's CPU time (the primary figure) and for
wall time, with the median's 95% interval; ``--own-time`` and ``--call-cost``
time the middleware's own work from inside a run and alone. ``--focus``
compares ``ServingSettings(focus_rules=3)`` (the default) with ``0`` on a
playbook of 30 "When" rules and requests of about 500 characters
(``focus_cost``).

    python -m benchmarks.overhead [--runs 2000] [--block 5] [--arms ...] [--own-time]
        [--call-cost] [--focus] [--out DIR]
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import random
import sys
import time
import timeit
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime

from benchmarks._common import IMAGES, RESULTS, command, machine_info, percentile, write_json
from benchmarks._focus import FOCUS_RULES, focus_combee, focus_requests
from benchmarks._tickets import MAX_TRACES, make_traces, ticket_rule
from langgraph_combee import (
    CaptureSettings,
    Combee,
    CombeeMiddleware,
    Feedback,
    LearnerSettings,
    ServingSettings,
    Trace,
)
from langgraph_combee.testing import FunctionChatModel, fake_learner

MODULE = "benchmarks.overhead"
TARGET_OVER_WRAP_US = 100.0  # the default middleware, p50, over a no-op wrap_model_call
TARGET_ARMS = ("combee", "combee+playbook")
SHUFFLE_SEED = 12  # the order of the arms in each round
SYSTEM_PROMPT = "You route support tickets. Answer with the desk code only."


class NoopWrap(AgentMiddleware[AgentState[Any], Any, Any]):
    """Only ``wrap_model_call``, doing nothing: the framework floor of the lean mode."""

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Call the model as is."""
        return handler(request)


class NoopHooks(NoopWrap):
    """The hooks ``CombeeMiddleware(hooks=True)`` uses, doing nothing (framework cost only)."""

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Nothing to pin."""
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Nothing to capture."""
        return None


@dataclass
class Arm:
    """One agent configuration and the per-run times measured for it (microseconds)."""

    name: str
    agent: Any
    combee: Combee | None = None
    times_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    block_medians_us: list[float] = field(default_factory=list)
    block_cpu_medians_us: list[float] = field(default_factory=list)


class _LogCounter(logging.Handler):
    """Counts the library's warnings and errors instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        detail = f" [{type(exc).__name__}: {exc}]" if exc is not None else ""
        self.counts[f"{record.name}: {record.getMessage()[:100]}{detail}"] += 1


@contextmanager
def _counting_library_logs() -> Iterator[_LogCounter]:
    logger = logging.getLogger("langgraph_combee")
    counter = _LogCounter()
    logger.addHandler(counter)
    try:
        yield counter
    finally:
        logger.removeHandler(counter)


def _agent_model() -> FunctionChatModel:
    return FunctionChatModel(lambda messages: "ok")


def _combee(name: str, truth: dict[str, str], *, batch_size: int, **options: Any) -> Combee:
    """A Combee that learns from captured runs (an evaluator supplies the ground truth)."""

    def evaluate(trace: Trace) -> Feedback | None:
        expected = truth.get(trace.input)
        return None if expected is None else Feedback(correct=False, ground_truth=expected)

    return Combee(
        prompt_id=name,
        model=fake_learner(insight=ticket_rule),
        batch_size=batch_size,
        evaluator=evaluate,
        **options,
        serving=ServingSettings(refresh_seconds=0.5),
        learner=LearnerSettings(poll_seconds=0.05, min_batch=4, max_wait_seconds=1.0),
    )


def _sqlite_store() -> Any:
    """A ``SqliteStore`` on a fresh temporary file, set up (kept open for the process)."""
    import tempfile

    from langgraph.store.sqlite import SqliteStore

    folder = Path(tempfile.mkdtemp(prefix="combee-overhead-"))
    store = _OPEN.enter_context(SqliteStore.from_conn_string(str(folder / "store.sqlite")))
    store.setup()
    return store


_OPEN = ExitStack()  # stores the benchmark opened; closed when the process ends


ARMS = (
    "plain",
    "noop-hooks",
    "noop-wrap",
    "combee-serve",
    "durable",
    "durable-sqlite",
    "combee",
    "combee+playbook",
    "hooks",
    "hooks+playbook",
)
HOT_PATH_ONLY = ("noop-hooks", "noop-wrap", "combee-serve", "durable", "durable-sqlite")


def build_arms(
    phase: str,
    truth: dict[str, str],
    *,
    preload: int,
    batch_size: int,
    only: Sequence[str] = ARMS,
) -> list[Arm]:
    """The arms of one phase ("hot-path" or "learning") among ``only``, each with a fresh Combee.

    ``plain`` is always built: every overhead is measured against it.
    """

    def agent(*middleware: Any) -> Any:
        return create_agent(
            _agent_model(), tools=[], system_prompt=SYSTEM_PROMPT, middleware=list(middleware)
        )

    def wanted(name: str) -> bool:
        return name in only and (phase == "hot-path" or name not in HOT_PATH_ONLY)

    arms = [Arm("plain", agent())]
    if wanted("noop-hooks"):
        arms.append(Arm("noop-hooks", agent(NoopHooks())))
    if wanted("noop-wrap"):
        arms.append(Arm("noop-wrap", agent(NoopWrap())))
    if wanted("combee-serve"):
        serve = _combee(f"{phase}-serve", truth, batch_size=batch_size)
        arms.append(Arm("combee-serve", agent(serve.middleware(capture=False)), serve))
    if wanted("durable"):
        durable = _combee(
            f"{phase}-durable",
            truth,
            batch_size=batch_size,
            capture=CaptureSettings(durability="write_through"),
        )
        arms.append(Arm("durable", agent(durable.middleware()), durable))
    if wanted("durable-sqlite"):
        on_disk = _combee(
            f"{phase}-durable-sqlite",
            truth,
            batch_size=batch_size,
            store=_sqlite_store(),
            capture=CaptureSettings(durability="write_through"),
        )
        arms.append(Arm("durable-sqlite", agent(on_disk.middleware()), on_disk))
    for name in ("combee", "combee+playbook", "hooks", "hooks+playbook"):
        if not wanted(name):
            continue
        combee = _combee(f"{phase}-{name}", truth, batch_size=batch_size)
        if name.endswith("+playbook"):
            combee.learn(make_traces(MAX_TRACES)[-preload:])
        arms.append(Arm(name, agent(combee.middleware(hooks=name.startswith("hooks"))), combee))
    return arms


def _invoke(agent: Any, text: str) -> tuple[float, float]:
    """One run: (wall time, CPU time of this thread), in microseconds.

    The thread's CPU time leaves out what other processes on the machine and
    Combee's own background threads take: it is the hot path's own work, and it
    stays readable on a loaded machine where wall times drift by more than the
    differences being measured.
    """
    payload = {"messages": [{"role": "user", "content": text}]}
    config = {"run_id": uuid.uuid4()}
    cpu = time.thread_time_ns()
    started = time.perf_counter_ns()
    agent.invoke(payload, config=config)
    wall = time.perf_counter_ns() - started
    return wall / 1000.0, (time.thread_time_ns() - cpu) / 1000.0


def measure(
    arms: Sequence[Arm], inputs: Sequence[str], *, runs: int, block: int, warmup: int
) -> None:
    """Warm up, then run every arm ``runs`` times in interleaved blocks, in a new order each round.

    The order of each round is a fresh shuffle (seeded, so a rerun repeats it):
    an arm that leaves work behind (garbage, a slow store's threads) must not
    always slow down the same neighbour, as a fixed cyclic order would make it.
    """
    for arm in arms:
        for i in range(warmup):
            _invoke(arm.agent, inputs[i % len(inputs)])
    rounds = max(1, -(-runs // block))
    order = random.Random(SHUFFLE_SEED)
    counter = 0
    for _ in range(rounds):
        shuffled = list(arms)
        order.shuffle(shuffled)
        for arm in shuffled:
            size = min(block, runs - len(arm.times_us))
            times, cpus = [], []
            for _ in range(size):
                wall, cpu = _invoke(arm.agent, inputs[counter % len(inputs)])
                times.append(wall)
                cpus.append(cpu)
                counter += 1
            arm.times_us.extend(times)
            arm.cpu_us.extend(cpus)
            if times:
                arm.block_medians_us.append(percentile(times, 50))
                arm.block_cpu_medians_us.append(percentile(cpus, 50))


def summarize(arms: Sequence[Arm]) -> list[dict[str, Any]]:
    """Per-arm percentiles and overhead against ``plain`` (JSON-ready rows)."""
    base = next(a for a in arms if a.name == "plain")
    base_p50 = percentile(base.times_us, 50)
    base_p99 = percentile(base.times_us, 99)
    floor = next((a for a in arms if a.name == "noop-wrap"), None)
    floor_p50 = percentile(floor.times_us, 50) if floor is not None else None
    default = next((a for a in arms if a.name == "combee"), None)
    default_over = percentile(default.times_us, 50) - base_p50 if default is not None else None
    rows = []
    for arm in arms:
        p50 = percentile(arm.times_us, 50)
        p99 = percentile(arm.times_us, 99)
        paired = [a - b for a, b in zip(arm.block_medians_us, base.block_medians_us, strict=False)]
        row: dict[str, Any] = {
            "arm": arm.name,
            "runs": len(arm.times_us),
            "overhead_ratio_p50": p50 / base_p50 - 1.0,
            "overhead_us_p50": p50 - base_p50,
            "overhead_us_p99": p99 - base_p99,
            "paired_block_overhead_us": {
                "median": percentile(paired, 50),
                "p25": percentile(paired, 25),
                "p75": percentile(paired, 75),
            },
            "p50_us": p50,
            "p90_us": percentile(arm.times_us, 90),
            "p99_us": p99,
            "mean_us": sum(arm.times_us) / len(arm.times_us),
            "min_us": min(arm.times_us),
            "cpu_p50_us": percentile(arm.cpu_us, 50),
        }
        if floor is not None and floor_p50 is not None:
            paired_floor = _paired(arm.block_medians_us, floor.block_medians_us)
            cpu_paired = _paired(arm.block_cpu_medians_us, floor.block_cpu_medians_us)
            floor_cpu = percentile(floor.cpu_us, 50)
            row["over_noop_wrap_us_p50"] = p50 - floor_p50
            row["cpu_over_noop_wrap_us_p50"] = percentile(arm.cpu_us, 50) - floor_cpu
            row["paired_over_noop_wrap_us"] = paired_floor["median"]
            # Per round: this arm's block median minus noop-wrap's in the same round;
            # the spread (quartiles over rounds) says how far to trust the median.
            row["paired_over_noop_wrap"] = {"wall_us": paired_floor, "cpu_us": cpu_paired}
            row["ratio_to_noop_wrap_p50"] = {
                "wall": p50 / floor_p50,
                "cpu": percentile(arm.cpu_us, 50) / floor_cpu,
            }
        if default_over is not None and default_over > 0 and arm.combee is not None:
            row["overhead_vs_default"] = (p50 - base_p50) / default_over
        if arm.combee is not None:
            head = arm.combee.current()
            row["playbook"] = {
                "version": head.version,
                "bullets": len(head.playbook.bullets),
                "rendered_chars": len(head.render()),
            }
            row["serving"] = arm.combee.describe()["serving"]
        rows.append(row)
    return rows


class _Probe(AgentMiddleware[AgentState[Any], Any, Any]):
    """Times what runs inside it: put one outside and one inside the middleware measured."""

    def __init__(self, inner: _Probe | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.wall_ns = 0
        self.cpu_ns = 0
        self.own_wall_us: list[float] = []
        self.own_cpu_us: list[float] = []

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Call the model, timing the call; the outer probe keeps the time not spent inside."""
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        response = handler(request)
        self.wall_ns = time.perf_counter_ns() - wall
        self.cpu_ns = time.thread_time_ns() - cpu
        if self.inner is not None:
            self.own_wall_us.append((self.wall_ns - self.inner.wall_ns) / 1000.0)
            self.own_cpu_us.append((self.cpu_ns - self.inner.cpu_ns) / 1000.0)
        return response


def _probed(middleware: AgentMiddleware[Any, Any, Any]) -> tuple[_Probe, Any]:
    # The outer probe wraps Combee on purpose: its first model call would warn.
    if isinstance(middleware, CombeeMiddleware):
        middleware._order_checked = True
    # create_agent requires distinct middleware names: one subclass per probe.
    inner = type(f"ProbeIn{id(middleware)}", (_Probe,), {})()
    outer = type(f"ProbeOut{id(middleware)}", (_Probe,), {})(inner)
    agent = create_agent(
        _agent_model(),
        tools=[],
        system_prompt=SYSTEM_PROMPT,
        middleware=[outer, middleware, inner],
    )
    return outer, agent


def own_time(
    inputs: Sequence[str],
    truth: dict[str, str],
    *,
    runs: int,
    block: int,
    warmup: int,
    preload: int,
    batch_size: int,
) -> dict[str, Any]:
    """The middleware's own time per model call, measured from inside the agent.

    Two timing middlewares sit just outside and just inside the one measured;
    the outer one's time minus the inner one's is the measured middleware's own
    time plus the framework's cost of one ``wrap_model_call`` layer. The same
    with ``NoopWrap`` gives that layer alone, so the difference is Combee's own
    work, free of everything else a run does (graph steps, checkpoints), which
    is where most of the end-to-end noise comes from. Rounds interleave the three
    arms like ``measure``.
    """
    combee = _combee("own-time", truth, batch_size=batch_size)
    learned = _combee("own-time+playbook", truth, batch_size=batch_size)
    learned.learn(make_traces(MAX_TRACES)[-preload:])
    probes = {
        "noop-wrap": _probed(NoopWrap()),
        "combee": _probed(combee.middleware()),
        "combee+playbook": _probed(learned.middleware()),
    }
    names = list(probes)
    blocks: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in names}
    try:
        for name in names:
            for i in range(warmup):
                _invoke(probes[name][1], inputs[i % len(inputs)])
            probes[name][0].own_wall_us.clear()
            probes[name][0].own_cpu_us.clear()
        order = random.Random(SHUFFLE_SEED)
        counter = 0
        for _ in range(max(1, -(-runs // block))):
            order.shuffle(names)
            for name in names:
                probe, agent = probes[name]
                start = len(probe.own_cpu_us)
                for _ in range(min(block, runs - start)):
                    _invoke(agent, inputs[counter % len(inputs)])
                    counter += 1
                if len(probe.own_cpu_us) > start:
                    blocks[name]["wall"].append(percentile(probe.own_wall_us[start:], 50))
                    blocks[name]["cpu"].append(percentile(probe.own_cpu_us[start:], 50))
    finally:
        combee.stop()
        learned.stop()
    floor = probes["noop-wrap"][0]
    arms = []
    for name in ("noop-wrap", "combee", "combee+playbook"):
        probe = probes[name][0]
        arms.append(
            {
                "arm": name,
                "calls": len(probe.own_cpu_us),
                "layer_wall_us_p50": percentile(probe.own_wall_us, 50),
                "layer_cpu_us_p50": percentile(probe.own_cpu_us, 50),
                "own_over_noop_wrap": {
                    "wall_us": _paired(blocks[name]["wall"], blocks["noop-wrap"]["wall"]),
                    "cpu_us": _paired(blocks[name]["cpu"], blocks["noop-wrap"]["cpu"]),
                },
                "cpu_p50_over_noop_wrap_us": percentile(probe.own_cpu_us, 50)
                - percentile(floor.own_cpu_us, 50),
            }
        )
    return {"what": own_time.__doc__.splitlines()[0] if own_time.__doc__ else "", "arms": arms}


class _Grab(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keeps one real model request, its node config and its response."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: tuple[Any, Any, Any] | None = None

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Call the model; keep what the call was."""
        response = handler(request)
        self.seen = (request, var_child_runnable_config.get(), response)
        return response


def call_cost(
    truth: dict[str, str],
    *,
    preload: int,
    batch_size: int,
    repeats: int = 30,
    number: int = 2000,
) -> dict[str, Any]:
    """Microseconds per ``wrap_model_call`` alone, the model replaced by a canned response.

    One real request (and its node config) is taken from a run, then each
    middleware's ``wrap_model_call`` is timed with ``timeit`` on it, its handler
    returning the run's response at once: no graph, no model, so this is the
    middleware's own work and nothing else. The figure is the fastest of
    ``repeats`` repeats of ``number`` calls (the least disturbed by other
    processes); the captured runs' deferred traces are built between repeats,
    untimed.
    """
    grab = _Grab()
    agent = create_agent(_agent_model(), tools=[], system_prompt=SYSTEM_PROMPT, middleware=[grab])
    _invoke(agent, "ticket")
    assert grab.seen is not None
    request, config, response = grab.seen
    combee = _combee("call-cost", truth, batch_size=batch_size)
    learned = _combee("call-cost+playbook", truth, batch_size=batch_size)
    learned.learn(make_traces(MAX_TRACES)[-preload:])
    middlewares = {
        "noop-wrap": NoopWrap(),
        "combee": combee.middleware(),
        "combee+playbook": learned.middleware(),
    }
    try:
        best = _time_calls(middlewares, request, config, response, repeats=repeats, number=number)
    finally:
        combee.stop()
        learned.stop()
    return {
        "what": f"fastest of {repeats} x {number} wrap_model_call calls, canned response",
        "us_per_call": best,
        "over_noop_wrap_us": {n: t - best["noop-wrap"] for n, t in best.items()},
    }


def _time_calls(
    middlewares: dict[str, Any],
    request: Any,
    config: Any,
    response: Any,
    *,
    repeats: int,
    number: int,
) -> dict[str, float]:
    """Microseconds per ``wrap_model_call`` of each middleware on ``request``: the fastest repeat.

    The handler returns ``response`` at once. The captured runs' deferred traces
    are built between repeats, untimed.
    """
    best = dict.fromkeys(middlewares, float("inf"))
    token = var_child_runnable_config.set(config)
    try:
        for _ in range(repeats):
            for name, middleware in middlewares.items():
                seconds = timeit.timeit(
                    lambda m=middleware: m.wrap_model_call(request, lambda r: response),
                    number=number,
                )
                best[name] = min(best[name], seconds / number * 1e6)
            for middleware in middlewares.values():
                if isinstance(middleware, CombeeMiddleware):
                    middleware.agent.server.flush()  # the deferred traces, built untimed
    finally:
        var_child_runnable_config.reset(token)
    return best


def focus_cost(
    *, runs: int, block: int, warmup: int, repeats: int = 30, number: int = 2000
) -> dict[str, Any]:
    """The focus's cost: ``focus_rules=3`` against ``0``, one playbook, one set of requests.

    The playbook is 30 "When" rules and each request about 500 characters
    (``benchmarks/_focus.py``). Whole runs are interleaved with ``plain`` as in
    ``measure``; ``wrap_model_call`` alone is timed on one real request of that
    set (as ``call_cost`` does). ``ratio`` is the focus arm's figure over the
    arm without it: the share of the middleware's work the focus adds.
    """
    requests = focus_requests()
    on, off = focus_combee(3), focus_combee(0)
    try:
        arms = [
            Arm("plain", _focus_agent()),
            Arm("focus-off", _focus_agent(off.middleware()), off),
            Arm("focus", _focus_agent(on.middleware()), on),
        ]
        measure(arms, requests, runs=runs, block=block, warmup=warmup)
        rows = {r["arm"]: r for r in summarize(arms)}
        grab = _Grab()
        _invoke(_focus_agent(grab), requests[0])
        assert grab.seen is not None
        request, config, response = grab.seen
        middlewares = {"focus-off": off.middleware(), "focus": on.middleware()}
        best = _time_calls(middlewares, request, config, response, repeats=repeats, number=number)
    finally:
        on.stop()
        off.stop()
    over = {n: rows[n]["paired_block_overhead_us"]["median"] for n in ("focus-off", "focus")}
    cpu = {n: rows[n]["cpu_p50_us"] - rows["plain"]["cpu_p50_us"] for n in ("focus-off", "focus")}
    return {
        "what": "ServingSettings(focus_rules=3) against 0: 30 When rules, ~500-character requests",
        "rules": len(FOCUS_RULES),
        "request_chars": sum(map(len, requests)) / len(requests),
        "runs": {n: rows[n] for n in ("plain", "focus-off", "focus")},
        "paired_over_plain_us": over,
        "cpu_over_plain_us_p50": cpu,
        "us_per_call": best,
        "ratio": {
            "wrap_model_call": best["focus"] / best["focus-off"],
            "run_overhead": over["focus"] / over["focus-off"] if over["focus-off"] > 0 else None,
        },
        "added_us_per_call": best["focus"] - best["focus-off"],
    }


def _focus_agent(*middleware: Any) -> Any:
    return create_agent(
        _agent_model(), tools=[], system_prompt=SYSTEM_PROMPT, middleware=list(middleware)
    )


def _paired(values: Sequence[float], floor: Sequence[float]) -> dict[str, float]:
    """Median, quartiles and the median's 95% interval over rounds of ``values[i] - floor[i]``.

    ``values`` and ``floor`` are two arms' block medians, round by round. The
    quartiles show the spread of one round's difference; the interval (the
    distribution-free one from order statistics: ranks ``n/2 -+ 1.96 sqrt(n)/2``)
    says where the median itself lies, which is what the target is about.
    """
    diffs = sorted(a - b for a, b in zip(values, floor, strict=False))
    n = len(diffs)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half))
    high = min(n - 1, math.ceil(n / 2 + half) - 1)
    return {
        "median": percentile(diffs, 50),
        "p25": percentile(diffs, 25),
        "p75": percentile(diffs, 75),
        "median_ci95": [diffs[low], diffs[high]],
        "rounds": n,
    }


def verdicts(phases: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Whether each target arm is within ``TARGET_OVER_WRAP_US`` of noop-wrap, per phase.

    Judged on the agent thread's CPU time (the paired median over rounds), which
    the machine's load moves far less than wall time. Each verdict is "met" or
    "not met" by the median, and called clear only when the median's 95%
    interval lies on that side of the target; wall time gets the same verdict,
    or "too noisy to tell" when its interval straddles the target.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for phase in phases:
        for r in phase["arms"]:
            paired = r.get("paired_over_noop_wrap")
            if r["arm"] not in TARGET_ARMS or paired is None:
                continue
            cpu, wall = paired["cpu_us"], paired["wall_us"]
            out.setdefault(phase["phase"], {})[r["arm"]] = {
                "cpu_met": cpu["median"] < TARGET_OVER_WRAP_US,
                "cpu": _verdict(cpu, noisy="met" if cpu["median"] < TARGET_OVER_WRAP_US else ""),
                "cpu_us": cpu,
                "wall": _verdict(wall, noisy="too noisy to tell"),
                "wall_us": wall,
            }
    return out


def _verdict(paired: dict[str, Any], *, noisy: str) -> str:
    """ "met" / "not met" when the median's 95% interval is on one side of the target."""
    low, high = paired["median_ci95"]
    if high < TARGET_OVER_WRAP_US:
        return "met"
    if low >= TARGET_OVER_WRAP_US:
        return "not met"
    if noisy:
        return f"{noisy} (the median's 95% interval straddles the target)"
    return "not met (the median's 95% interval straddles the target)"


def run_phase(
    phase: str,
    inputs: Sequence[str],
    truth: dict[str, str],
    *,
    runs: int,
    block: int,
    warmup: int,
    preload: int,
    batch_size: int,
    only: Sequence[str] = ARMS,
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Build the phase's arms, measure them, stop their learners.

    Returns:
        The phase's JSON record, and the per-run times (microseconds) by arm.
    """
    arms = build_arms(phase, truth, preload=preload, batch_size=batch_size, only=only)
    learners = [a.combee for a in arms if a.combee is not None] if phase == "learning" else []
    with _counting_library_logs() as logs:
        record = _measure_phase(
            phase, arms, learners, inputs, runs=runs, block=block, warmup=warmup
        )
    record["library_log_records"] = dict(logs.counts.most_common())
    return record, {arm.name: arm.times_us for arm in arms}


def _measure_phase(
    phase: str,
    arms: Sequence[Arm],
    learners: Sequence[Combee],
    inputs: Sequence[str],
    *,
    runs: int,
    block: int,
    warmup: int,
) -> dict[str, Any]:
    for combee in learners:
        combee.start()
    gc.collect()
    cpu0, main0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    try:
        measure(arms, inputs, runs=runs, block=block, warmup=warmup)
    finally:
        wall = time.perf_counter() - t0
        background_cpu = (time.process_time() - cpu0) - (time.thread_time() - main0)
        learner_stats = []
        for combee in learners:
            # Stop first: InMemoryStore is not thread-safe, so the queue is read only
            # once the learner thread is gone.
            combee.stop()
            learner_stats.append(
                {
                    "prompt_id": combee.prompt_id,
                    **combee.learner.describe(),
                    "queue_at_stop": combee.queue().stats(),
                }
            )
        for arm in arms:
            if arm.combee is not None and arm.combee not in learners:
                arm.combee.stop()
    return {
        "phase": phase,
        "wall_seconds": wall,
        "background_threads_cpu_seconds": background_cpu,
        "arms": summarize(arms),
        "learners": learner_stats,
    }


def _shown_paired(paired: dict[str, Any]) -> str:
    low, high = paired["median_ci95"]
    return (
        f"{paired['median']:+.0f} us (95% interval {low:+.0f}..{high:+.0f}; "
        f"one round's quartiles {paired['p25']:+.0f}..{paired['p75']:+.0f})"
    )


def table(phases: Sequence[dict[str, Any]]) -> str:
    """The phases as a fixed-width text table (overhead first)."""
    header = (
        f"{'phase':<10}{'arm':<17}{'overhead':>9}{'+us p50':>9}{'+us p99':>9}"
        f"{'paired us':>10}{'>wrap us':>9}{'cpu>wrap':>9}{'pcpu>wrap':>10}{'x dflt':>7}"
        f"{'p50 us':>9}{'cpu p50':>9}{'p99 us':>9}{'bullets':>8}"
    )
    lines = [header, "-" * len(header)]

    def shown(value: float | None, width: int, fmt: str = ".0f") -> str:
        return f"{value:>{width}{fmt}}" if value is not None else f"{'-':>{width}}"

    for phase in phases:
        for r in phase["arms"]:
            bullets = r.get("playbook", {}).get("bullets", "-")
            paired_cpu = r.get("paired_over_noop_wrap", {}).get("cpu_us", {}).get("median")
            lines.append(
                f"{phase['phase']:<10}{r['arm']:<17}{r['overhead_ratio_p50']:>8.1%} "
                f"{r['overhead_us_p50']:>8.0f} {r['overhead_us_p99']:>8.0f}"
                f"{r['paired_block_overhead_us']['median']:>10.0f}"
                f"{shown(r.get('over_noop_wrap_us_p50'), 9)}"
                f"{shown(r.get('cpu_over_noop_wrap_us_p50'), 9)}{shown(paired_cpu, 10)}"
                f"{shown(r.get('overhead_vs_default'), 7, '.2f')}"
                f"{r['p50_us']:>9.0f}{r['cpu_p50_us']:>9.0f}{r['p99_us']:>9.0f}{bullets!s:>8}"
            )
    return "\n".join(lines)


def plot(
    phases: Sequence[dict[str, Any]], raw: dict[str, dict[str, list[float]]], path: Path
) -> Path:
    """Box plots of per-run time, by phase and arm."""
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit(
            "matplotlib is needed for the plot: pip install -e '.[bench]' (or pass --plot '')"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(phases), figsize=(6 * len(phases), 4.2), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=True):
        names = [r["arm"] for r in phase["arms"]]
        data = [[t / 1000 for t in raw[phase["phase"]][n]] for n in names]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
        for i, r in enumerate(phase["arms"], start=1):
            ax.annotate(
                f"{r['overhead_ratio_p50']:+.0%}",
                (i, r["p50_us"] / 1000),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_ylabel("agent.invoke time (ms, whiskers 1.5 IQR)")
        ax.set_title(f"phase: {phase['phase']}")
    fig.suptitle("create_agent with an instant model: per-run time by arm", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command-line options."""
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="timed runs per arm and phase")
    parser.add_argument(
        "--block", type=int, default=5, help="runs per arm per round (small: many rounds)"
    )
    parser.add_argument("--warmup", type=int, default=100, help="untimed runs per arm first")
    parser.add_argument("--batch-size", type=int, default=16, help="learner batch size")
    parser.add_argument("--preload", type=int, default=40, help="traces learned up front")
    parser.add_argument(
        "--phases", nargs="+", default=["hot-path", "learning"], choices=["hot-path", "learning"]
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        default=list(ARMS),
        choices=ARMS,
        help="arms to run (plain always runs; e.g. plain noop-wrap combee combee+playbook)",
    )
    parser.add_argument(
        "--own-time",
        action="store_true",
        help="also time the middleware's own work per model call, with probes around it",
    )
    parser.add_argument(
        "--call-cost",
        action="store_true",
        help="also time wrap_model_call alone on a canned request (timeit)",
    )
    parser.add_argument(
        "--focus",
        action="store_true",
        help="also compare focus_rules=3 with 0 (30 When rules, ~500-character requests)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for overhead.json")
    parser.add_argument(
        "--plot", default=str(IMAGES / "overhead.png"), help="PNG path ('' for no plot)"
    )
    args = parser.parse_args(list(argv))
    if args.runs < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--runs and --block must be >= 1, --warmup >= 0")
    if not 1 <= args.preload <= MAX_TRACES // 2:
        parser.error(f"--preload must be in 1..{MAX_TRACES // 2}")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the phases, print the table, write the JSON (and the plot); return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    # The runs' tickets; the preloaded playbook comes from the other end of the list.
    tickets = make_traces(MAX_TRACES)[: MAX_TRACES - args.preload]
    inputs = [t.input for t in tickets]
    truth = {t.input: str(t.feedback.ground_truth) for t in tickets if t.feedback}
    phases = []
    raw: dict[str, dict[str, list[float]]] = {}
    for phase in args.phases:
        record, raw[phase] = run_phase(
            phase,
            inputs,
            truth,
            runs=args.runs,
            block=args.block,
            warmup=args.warmup,
            preload=args.preload,
            batch_size=args.batch_size,
            only=args.arms,
        )
        phases.append(record)
        logged = sum(record["library_log_records"].values())
        print(
            f"  phase {phase}: {record['wall_seconds']:.1f} s, "
            f"{logged} warnings/errors logged by the library (counted in the JSON)",
            flush=True,
        )
    print()
    print(table(phases))
    print(
        "\noverhead = p50 / plain p50 - 1; +us = microseconds over plain at p50 / p99; "
        "paired us = median over rounds of (arm block median - plain block median); "
        ">wrap us = microseconds over noop-wrap at p50; cpu>wrap = the same in the agent "
        "thread's CPU time; pcpu>wrap = median over rounds of (arm block median CPU - "
        "noop-wrap block median CPU); x dflt = overhead / the default's"
    )
    judged = verdicts(phases)
    targets = {
        name: {arm: v["cpu_met"] for arm, v in by_arm.items()} for name, by_arm in judged.items()
    }
    print()
    for phase_name, by_arm in judged.items():
        for arm, v in by_arm.items():
            cpu, wall = v["cpu_us"], v["wall_us"]
            print(
                f"target ({phase_name}, {arm} within {TARGET_OVER_WRAP_US:.0f} us p50 of "
                f"noop-wrap, {cpu['rounds']} paired rounds):\n"
                f"  CPU time:  {v['cpu']}: {_shown_paired(cpu)}\n"
                f"  wall time: {v['wall']}: {_shown_paired(wall)}"
            )
    own = None
    if args.own_time:
        own = own_time(
            inputs,
            truth,
            runs=args.runs,
            block=args.block,
            warmup=args.warmup,
            preload=args.preload,
            batch_size=args.batch_size,
        )
        print("\nown time per model call over a no-op wrap_model_call layer (probes around it):")
        for arm in own["arms"][1:]:
            print(
                f"  {arm['arm']:<16} CPU {_shown_paired(arm['own_over_noop_wrap']['cpu_us'])}\n"
                f"  {'':<16} wall {_shown_paired(arm['own_over_noop_wrap']['wall_us'])}"
            )
    cost = None
    if args.call_cost:
        cost = call_cost(truth, preload=args.preload, batch_size=args.batch_size)
        print("\nwrap_model_call alone, canned response (fastest of 30 x 2,000 calls):")
        for name, over in cost["over_noop_wrap_us"].items():
            print(f"  {name:<16} {cost['us_per_call'][name]:7.2f} us per call ({over:+.2f} us)")
    focus = None
    if args.focus:
        focus = focus_cost(runs=args.runs, block=args.block, warmup=args.warmup)
        print(
            f"\nthe focus ({focus['rules']} When rules, {focus['request_chars']:.0f}-character "
            "requests): focus_rules=3 against 0"
        )
        for name in ("focus-off", "focus"):
            print(
                f"  {name:<10} run +{focus['paired_over_plain_us'][name]:6.0f} us over plain "
                f"(paired), CPU +{focus['cpu_over_plain_us_p50'][name]:6.0f} us; "
                f"wrap_model_call {focus['us_per_call'][name]:7.1f} us"
            )
        ratio = focus["ratio"]
        run_ratio = ratio["run_overhead"]
        print(
            f"  ratio focus / focus-off: wrap_model_call {ratio['wrap_model_call']:.2f}x "
            f"(+{focus['added_us_per_call']:.1f} us per call), run overhead "
            + (f"{run_ratio:.2f}x" if run_ratio is not None else "n/a")
        )
    record_all = {
        "benchmark": "overhead",
        "command": cmd,
        "parameters": {
            "runs": args.runs,
            "block": args.block,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "preload": args.preload,
            "phases": args.phases,
            "arms": args.arms,
            "own_time": args.own_time,
            "call_cost": args.call_cost,
            "focus": args.focus,
            "agent_model": 'FunctionChatModel(lambda m: "ok"), no tools',
            "learner": "fake_learner(insight=ticket_rule), evaluator supplies ground truth",
        },
        "machine": machine_info(),
        "target_over_noop_wrap_us": TARGET_OVER_WRAP_US,
        "targets_met": targets,
        "target_verdicts": judged,
        "phases": phases,
        "own_time": own,
        "call_cost": cost,
        "focus": focus,
    }
    path = write_json(args.out / "overhead.json", record_all)
    print(f"wrote {path}")
    if args.plot:
        print(f"wrote {plot(phases, raw, Path(args.plot))}")
    return record_all


if __name__ == "__main__":
    main()
