"""A writer process for the PostgreSQL lease tests (``python -m tests.pg_writer MODE DSN ...``).

Modes:

* ``learn DSN TAG GO``: wait until the file ``GO`` exists, then call
  ``combee.learn()`` from two threads at once (4 distinct traces each, two
  steps each) and print ``done``.
* ``hold DSN HOLDER TTL``: take the writer lease, print ``held <epoch>``, then
  wait for a line on stdin (the test pauses the process meanwhile, past the
  lease's expiry) and write a version and HEAD through the lease's fence; print
  ``wrote`` or ``refused <error>``.

Driven by ``tests/storage/test_postgres_combee.py``.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from langgraph.store.postgres import PostgresStore

from langgraph_combee import AlgorithmSettings, Combee
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision
from langgraph_combee._storage import Lease, PromptRegistry
from langgraph_combee._storage.lease import fenced
from langgraph_combee.errors import LeaseLostError
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import PromptVersion
from tests.helpers import distinct_traces

PROMPT = "pg-writers"


def learn(dsn: str, tag: str, go: str) -> None:
    with Combee.from_conn_string(
        dsn,
        prompt_id=PROMPT,
        model=fake_learner(),
        batch_size=2,
        algorithm=AlgorithmSettings(token_budget=None),
    ) as combee:
        errors: list[BaseException] = []

        def one(worker: int) -> None:
            try:
                combee.learn(distinct_traces(f"{tag}w{worker}", 4))
            except BaseException as exc:  # printed below for the test to show
                errors.append(exc)

        while not Path(go).exists():
            time.sleep(0.01)
        threads = [threading.Thread(target=one, args=(w,)) for w in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print("errors " + repr(errors) if errors else "done", flush=True)


def hold(dsn: str, holder: str, ttl: float) -> None:
    with PostgresStore.from_conn_string(dsn) as store:
        lease = Lease(store, PROMPT, holder=holder, ttl_seconds=ttl)
        assert lease.acquire() and lease.atomic
        print(f"held {lease.epoch}", flush=True)
        sys.stdin.readline()  # paused here (SIGSTOP) past the lease's expiry
        registry = PromptRegistry(fenced(store, lease), PROMPT)
        rule = Add(section="general", content=f"Rule written by {holder}.")
        try:
            stored = registry.add_candidate(
                PromptVersion(prompt_id=PROMPT, playbook=Playbook().apply([rule]).playbook)
            )
            registry.accept(stored.version, Decision(accepted=True, policy="test", reason=holder))
        except LeaseLostError as exc:
            print(f"refused {exc}", flush=True)
            return
        print("wrote", flush=True)


if __name__ == "__main__":
    mode, dsn, *rest = sys.argv[1:]
    if mode == "learn":
        learn(dsn, rest[0], rest[1])
    else:
        hold(dsn, rest[0], float(rest[1]))
