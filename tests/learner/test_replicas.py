"""Several agent replicas and two learners, as separate processes, on one PostgreSQL database.

Three agent processes (``create_agent`` + ``combee.middleware()``, a scripted model,
serve-only ``Combee(model=None)``) capture runs; two learner processes
(``fake_learner()``) compete for the writer lease. Mid-run the lease holder is
killed with SIGKILL in the middle of a learning step. Afterwards:

* every captured trace was learned from exactly once: its id is in exactly one
  accepted version's ``source_trace_ids``, and the queue holds nothing;
* no version is half-written: every version is accepted and HEAD is the newest;
* the learning steps of the two learners never overlap in time (one lease
  holder at a time), and the survivor took over after the kill;
* every replica ends up serving the final version, and every version accepted
  while replicas were serving reached each of them (the delays are printed,
  not asserted: no wall-clock bounds in tests).

The processes run ``python -m benchmarks._replica`` (see there for their logs).
Short settings (lease 1.5 s, refresh 0.5 s, 0.1 s per learner call) keep it well
under a minute. Needs ``COMBEE_TEST_POSTGRES_DSN`` (see ``tests/postgres.py``).

Also here: eight threads calling ``learn()`` at once on one ``Combee`` (in
memory and on SQLite) leave one linear chain of accepted versions whose HEAD
holds every rule any step added (the two-process PostgreSQL
twin is in ``tests/storage/test_postgres_combee.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

from benchmarks.replicas import propagation, read_log, runs_of, spawn, stop_all, summary
from langgraph_combee import AlgorithmSettings, Combee
from langgraph_combee._storage.keys import HEAD_KEY
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import LearnReport
from tests import postgres
from tests.helpers import assert_every_step_in_head, distinct_traces

PROMPT = "replicas"
AGENTS = ["a0", "a1", "a2"]
LEARNERS = ["l0", "l1"]
RUNS = 16  # captured runs per agent
GIVE_UP = 120.0  # a hung deployment fails the test instead of hanging the suite


def _wait(what: str, check: Any, procs: list[subprocess.Popen[bytes]], folder: Path) -> Any:
    deadline = time.monotonic() + GIVE_UP
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        dead = [p.args for p in procs if p.poll() not in (None, -signal.SIGKILL, 0)]
        assert not dead, f"a process failed: {dead}\n{_errors(folder)}"
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}\n{_errors(folder)}")


def _errors(folder: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in folder.glob("*.err")
    )


def _steps(folder: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in read_log(folder / f"{name}.jsonl") if r.get("event") in ("start", "end")]


def _open_step(folder: Path, name: str) -> bool:
    steps = _steps(folder, name)
    return bool(steps) and steps[-1]["event"] == "start"


def test_replicas_and_learners_share_one_database(postgres_dsn: str, tmp_path: Path) -> None:
    learner_args = ["--lease", "1.5", "--latency", "0.1", "--batch", "4"]
    procs = [spawn("learner", n, postgres_dsn, tmp_path, *learner_args) for n in LEARNERS]
    procs += [
        spawn("agent", n, postgres_dsn, tmp_path, "--runs", str(RUNS), "--refresh", "0.5")
        for n in AGENTS
    ]
    pids = {}
    try:
        with postgres.open_store(postgres_dsn) as store:
            observer = Combee(prompt_id=PROMPT, store=store)
            registry, queue = observer.registry(), observer.queue()
            holders = {}
            for name in LEARNERS:
                ready = _wait(
                    f"{name} to start",
                    lambda n=name: read_log(tmp_path / f"{n}.jsonl"),
                    procs,
                    tmp_path,
                )
                holders[name] = ready[0]["holder"]
                pids[name] = ready[0]["pid"]

            # Kill the lease holder in the middle of a step, after it wrote a few versions.
            def holder_mid_step() -> str | None:
                if registry.latest_version() < 2:
                    return None
                return next((n for n in LEARNERS if _open_step(tmp_path, n)), None)

            victim = _wait("a learner mid-step", holder_mid_step, procs, tmp_path)
            os.kill(pids[victim], signal.SIGKILL)
            killed_at = time.time()
            survivor = next(n for n in LEARNERS if n != victim)

            expected = len(AGENTS) * RUNS
            try:
                _wait(
                    "every trace learned",
                    lambda: queue.stats()["done"] >= expected,
                    procs,
                    tmp_path,
                )
            except AssertionError as exc:
                state = {
                    "victim": victim,
                    "killed_at": killed_at,
                    "stats": queue.stats(),
                    "claims": queue.claims(),
                    "versions": [
                        (v.version, v.status, v.created_at.timestamp(), v.source_trace_ids)
                        for v in registry.history()
                    ],
                }
                raise AssertionError(f"{exc}\n{state}") from None
            head = registry.head()
            _wait(
                "every replica to serve the final version",
                lambda: all(
                    (runs := runs_of(read_log(tmp_path / f"{n}.jsonl")))
                    and runs[-1]["v"] == head.version
                    for n in AGENTS
                ),
                procs,
                tmp_path,
            )
            history = registry.history()
            stats = queue.stats()
            latest_head = registry.head()
    finally:
        stop_all(tmp_path, procs)

    # Every captured trace is learned from exactly once, and nothing is left queued.
    captured = [r["trace"] for n in AGENTS for r in runs_of(read_log(tmp_path / f"{n}.jsonl"))]
    captured = [t for t in captured if t is not None]
    assert len(captured) == len(set(captured)) == expected
    learned = Counter(t for v in history if v.status == "accepted" for t in v.source_trace_ids)
    assert set(learned) == set(captured)
    assert set(learned.values()) == {1}, [t for t, n in learned.items() if n > 1]
    assert stats == {"pending": 0, "claimed": 0, "done": expected, "waiting": 0}

    # No half-written version: all accepted, numbered 1..N, HEAD the newest.
    assert [v.version for v in history] == list(range(1, len(history) + 1))
    assert {v.status for v in history} == {"accepted"}
    assert latest_head.version == head.version == history[-1].version

    # One lease holder at a time: steps never overlap; the survivor took over after the kill.
    intervals = []
    for name in LEARNERS:
        start = None
        for record in _steps(tmp_path, name):
            assert record["holder"] == holders[name]
            if record["event"] == "start":
                start = record["t"]
            else:
                assert start is not None
                intervals.append((start, record["t"], name))
                start = None
        if start is not None:  # the step the kill cut short
            assert name == victim
            intervals.append((start, killed_at, name))
    intervals.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(intervals):
        assert end <= start, f"steps of {a} and {b} overlap"
    assert any(n == victim for _, _, n in intervals)
    assert any(n == survivor and start > killed_at for start, _, n in intervals)
    assert read_log(tmp_path / f"{survivor}.jsonl")[-1]["stats"]["steps"] >= 1

    # Every replica served every version accepted while it was serving.
    agents = {n: read_log(tmp_path / f"{n}.jsonl") for n in AGENTS}
    delays, missing = propagation(history, agents)
    assert missing == []
    assert {d.replica for d in delays} == set(AGENTS)
    print(f"propagation with refresh_seconds=0.5 over {len(history)} versions: {summary(delays)}")


THREADS = 8


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_eight_threads_learning_at_once_keep_every_step(backend: str, tmp_path: Path) -> None:
    conn = "memory" if backend == "memory" else str(tmp_path / "combee.db")
    with Combee.from_conn_string(
        conn,
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        algorithm=AlgorithmSettings(token_budget=None),
    ) as combee:
        start = threading.Barrier(THREADS)
        reports: dict[int, LearnReport] = {}
        errors: list[BaseException] = []

        def learn(worker: int) -> None:
            start.wait()  # every thread begins from the same HEAD
            try:
                reports[worker] = combee.learn(distinct_traces(f"w{worker}", 4))
            except BaseException as exc:  # reported below, with the thread's name
                errors.append(exc)

        threads = [threading.Thread(target=learn, args=(w,)) for w in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        history = combee.history()
        head = combee.current()
        assert_every_step_in_head(history, head)
        # Each step's report names its own version, and that record holds its traces.
        steps = [s for r in reports.values() for s in r.steps if s.version is not None]
        assert sorted(s.version for s in steps if s.version) == [v.version for v in history]
        for step in steps:
            assert combee.get(step.version or 0).source_trace_ids == step.trace_ids
        assert head.version == max(v.version for v in history)


class _SlowHeadWrite(BaseStore):
    """An in-memory store whose first write that moves HEAD waits for ``release``
    (or a second: a writer that lets nobody in meanwhile must not wait for ever)."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.lock = threading.RLock()
        self.writing = threading.Event()
        self.release = threading.Event()
        self.written = threading.Event()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        moves_head = any(isinstance(op, PutOp) and op.key == HEAD_KEY for op in ops)
        if moves_head and not self.writing.is_set():
            self.writing.set()
            self.release.wait(1.0)
            try:
                with self.lock:
                    return self.inner.batch(ops)
            finally:
                self.written.set()
        with self.lock:
            return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


async def test_a_learn_cancelled_while_it_writes_lets_no_writer_in_before_the_write_ends() -> None:
    # Cancelling a task does not stop the worker thread running its store write.
    # If the writer session ended (lock and lease given back) before that write
    # did, the next writer would build on the old HEAD and the late write would
    # then move HEAD back over it.
    store = _SlowHeadWrite()
    combee = Combee(prompt_id="p", model=fake_learner(), store=store, batch_size=2)
    first = asyncio.create_task(combee.alearn(distinct_traces("first", 2)))
    assert await asyncio.to_thread(store.writing.wait, 60)
    first.cancel()
    await combee.alearn(distinct_traces("second", 2))
    store.release.set()  # the cancelled task's write lands now at the latest
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.to_thread(store.written.wait, 60)
    assert_every_step_in_head(combee.history(), combee.current())
