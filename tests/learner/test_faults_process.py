"""Faults between processes: a learner SIGKILLed mid-step, and two learners racing.

The killed learner runs in a subprocess on a SQLite file store; the test waits
for a marker file its blocked LLM call writes (no sleeping to "let it start"),
kills it, and checks that nothing partial was written and that a second learner
learns those traces once the dead one's lease and claims have expired.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_combee import Combee, LearnerSettings
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces

ROOT = Path(__file__).resolve().parents[2]

# The doomed learner: its LLM announces that it is blocked, then blocks for good.
WORKER = textwrap.dedent(
    """
    import asyncio, sys, threading
    from pathlib import Path
    from langgraph.store.sqlite import SqliteStore
    from langgraph_combee import Combee
    from langgraph_combee import LearnerSettings
    from langgraph_combee._learner.learner import BackgroundLearner
    from langgraph_combee.testing import FunctionChatModel

    db, marker = sys.argv[1], Path(sys.argv[2])

    def blocked(messages):
        marker.write_text("blocked")
        threading.Event().wait()  # until SIGKILL

    with SqliteStore.from_conn_string(db) as store:
        combee = Combee(prompt_id="p", model=FunctionChatModel(blocked), store=store, batch_size=4)
        settings = LearnerSettings(min_batch=1, lease_seconds=1.0)
        learner = BackgroundLearner(
            combee._learner_parts, settings, holder="doomed", visibility_seconds=1.0
        )
        asyncio.run(learner.tick())
    """
)


def _wait_for(path: Path, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the worker exited early: {err.decode()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the worker never reached its LLM call")
        time.sleep(0.02)


def test_a_learner_killed_mid_step_leaves_nothing_partial_and_its_traces_are_relearned(
    tmp_path: Path,
) -> None:
    db, marker = str(tmp_path / "combee.db"), tmp_path / "blocked"
    traces = failing_traces(4)
    with SqliteStore.from_conn_string(db) as store:
        store.setup()
        for trace in traces:
            Combee(prompt_id="p", store=store).queue().put(trace)

    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, db, str(marker)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_for(marker, process)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL

    with SqliteStore.from_conn_string(db) as store:
        combee = Combee(prompt_id="p", model=fake_learner(), store=store, batch_size=4)
        assert combee.history() == []  # killed mid-step: no partial version
        assert combee.current().version == 0
        assert {combee.queue().status(t.id) for t in traces} <= {"claimed", "pending"}

        settings = LearnerSettings(min_batch=1, lease_seconds=1.0)
        second = BackgroundLearner(
            combee._learner_parts, settings, holder="survivor", visibility_seconds=1.0
        )
        # The dead learner's lease and claims expire after a second of real time
        # (they are on the shared wall clock): poll until the survivor gets them.
        deadline = time.monotonic() + 30
        while not asyncio.run(second.tick()):
            assert time.monotonic() < deadline, "the survivor never took over"
            time.sleep(0.05)
        [version] = combee.history()
        assert (version.version, version.parent, version.status) == (1, 0, "accepted")
        assert sorted(version.source_trace_ids) == sorted(t.id for t in traces)
        assert {combee.queue().status(t.id) for t in traces} == {"done"}


def test_two_learners_racing_learn_each_trace_once_in_a_clean_chain() -> None:
    store = InMemoryStore()
    traces = failing_traces(24)
    combees = [
        Combee(prompt_id="p", model=fake_learner(), store=store, batch_size=2) for _ in range(2)
    ]
    for trace in traces:
        combees[0].queue().put(trace)
    # Leases shorter than the pause between passes: the prompt changes hands often.
    settings = LearnerSettings(
        min_batch=1, poll_seconds=0.03, lease_seconds=0.02, step_backoff_seconds=0.01
    )
    learners = [
        BackgroundLearner(c._learner_parts, settings, holder=f"learner-{i}")
        for i, c in enumerate(combees)
    ]
    for learner in learners:
        learner.start()
    try:
        done = threading.Event()

        def watch() -> None:
            while combees[0].queue().stats()["done"] < len(traces):
                time.sleep(0.01)
            done.set()

        threading.Thread(target=watch, daemon=True).start()
        assert done.wait(60), "the traces were not all learned"
    finally:
        for learner in learners:
            learner.stop()

    history = combees[0].history()
    assert all(learner.stats.steps for learner in learners)  # both took part
    learned = [i for v in history for i in v.source_trace_ids]
    assert sorted(learned) == sorted(t.id for t in traces)  # each trace exactly once
    assert [v.version for v in history] == list(range(1, len(history) + 1))
    assert [v.parent for v in history] == list(range(len(history)))  # a clean chain
    assert all(v.status == "accepted" for v in history)
    assert combees[0].current().version == history[-1].version


# A started learner the app never stops: the interpreter's exit hook stops it
# (releasing its lease). The probe's own hook is registered first, so it runs
# last (atexit runs hooks in reverse order) and sees what Combee's hook did.
EXIT_PROBE = textwrap.dedent(
    """
    import atexit

    seen = {}
    atexit.register(lambda: print("running at exit:", seen["combee"].learner.running))

    from langgraph_combee import Combee
    from langgraph_combee.testing import fake_learner

    seen["combee"] = Combee(prompt_id="p", model=fake_learner())
    seen["combee"].start()
    assert seen["combee"].learner.running
    """
)


def test_an_exiting_interpreter_stops_a_learner_left_running() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "running at exit: False" in done.stdout, done.stdout + done.stderr[-2000:]
