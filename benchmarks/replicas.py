"""Propagation delay: how soon every agent replica serves a newly accepted version.

N agent replicas and one background learner run as separate processes on one
PostgreSQL database (``python -m benchmarks._replica``). Replicas capture runs
(each teaches the learner one rule), the learner (``fake_learner()`` behind a
fixed per-call latency) writes and accepts versions, and every replica logs the
version each of its runs was served. For each accepted version and each replica,
the delay is from the version's acceptance (``decision.decided_at``) to the first
run of that replica served that version or a newer one. Figures: p50, p99 and max
over all (version, replica) pairs, next to the bound the design gives,
``refresh_seconds + flush_seconds`` (0.5 s, the serving worker's wake-up) plus one
store read and the gap between runs.

    source /tmp/combee-postgres/postgres.env   # or any COMBEE_TEST_POSTGRES_DSN
    python -m benchmarks.replicas [--replicas 4] [--runs 40] [--refresh 1.0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT, command, machine_info, percentile, write_json
from langgraph_combee import Combee
from langgraph_combee.types import PromptVersion

MODULE = "benchmarks.replicas"
DSN_ENV = "COMBEE_TEST_POSTGRES_DSN"
FLUSH_SECONDS = 0.5  # the serving worker's wake-up interval (ServingSettings.flush_seconds)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of one process's log (a torn last line, from SIGKILL, is skipped)."""
    records = []
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def runs_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run records of an agent log (``t``, ``v``, ``trace``), in order."""
    return [r for r in records if "v" in r and "event" not in r]


@dataclass(frozen=True)
class Delay:
    """When one replica first served one accepted version (or a newer one)."""

    version: int
    replica: str
    accepted_at: float
    seconds: float


def propagation(
    versions: Sequence[PromptVersion], agents: dict[str, list[dict[str, Any]]]
) -> tuple[list[Delay], list[tuple[int, str]]]:
    """Delays for every accepted version and replica, and the pairs never served.

    Only versions accepted while a replica was serving (after its first run and
    before its last) count for that replica.
    """
    delays, missing = [], []
    for version in versions:
        if version.status != "accepted" or version.decision is None:
            continue
        accepted_at = version.decision.decided_at.timestamp()
        for name, records in agents.items():
            runs = runs_of(records)
            if not runs or not runs[0]["t"] < accepted_at < runs[-1]["t"]:
                continue
            first = next(
                (r for r in runs if r["t"] >= accepted_at and (r["v"] or 0) >= version.version),
                None,
            )
            if first is None:
                missing.append((version.version, name))
            else:
                delays.append(Delay(version.version, name, accepted_at, first["t"] - accepted_at))
    return delays, missing


def summary(delays: Sequence[Delay]) -> dict[str, float | int]:
    """p50, p99, max and mean of the delays, in seconds."""
    seconds = [d.seconds for d in delays]
    if not seconds:
        return {"pairs": 0}
    return {
        "pairs": len(seconds),
        "p50": percentile(seconds, 50),
        "p99": percentile(seconds, 99),
        "max": max(seconds),
        "mean": sum(seconds) / len(seconds),
    }


def spawn(role: str, name: str, conn: str, folder: Path, *extra: str) -> subprocess.Popen[bytes]:
    """Start one ``benchmarks._replica`` process logging to ``folder/name.jsonl``."""
    argv = [
        sys.executable,
        "-m",
        "benchmarks._replica",
        role,
        "--conn",
        conn,
        "--name",
        name,
        "--out",
        str(folder / f"{name}.jsonl"),
        "--stop",
        str(folder / "stop"),
        *extra,
    ]
    env = {**os.environ, "LANGSMITH_TRACING": "false"}
    err = (folder / f"{name}.err").open("wb")
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=err, stderr=err)


@contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    """A DSN on a new schema with the store migrated; the schema is dropped afterwards."""
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    schema = f"combee_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    scoped = make_conninfo(dsn, options=f"-c search_path={schema}")
    try:
        with PostgresStore.from_conn_string(scoped) as store:
            store.setup()
        yield scoped
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def stop_all(folder: Path, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 30) -> None:
    """Touch the stop file, wait for every process, kill what is left."""
    (folder / "stop").touch()
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(
    dsn: str, *, replicas: int, runs: int, refresh: float, latency: float, timeout: float
) -> dict[str, Any]:
    """Run the deployment once; return the delays and counts."""
    with fresh_schema(dsn) as conn, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        procs = [spawn("learner", "l0", conn, folder, "--latency", str(latency))]
        names = [f"a{i}" for i in range(replicas)]
        procs += [
            spawn("agent", n, conn, folder, "--runs", str(runs), "--refresh", str(refresh))
            for n in names
        ]
        expected = replicas * runs
        started = time.monotonic()
        try:
            with Combee.from_conn_string(conn, prompt_id="replicas") as observer:
                queue = observer.queue()
                while time.monotonic() - started < timeout:
                    if queue.stats()["done"] >= expected:
                        break
                    time.sleep(0.2)
                head = observer.current().version
                # Let every replica see the final version (or give up at the timeout).
                while time.monotonic() - started < timeout:
                    logs = {n: runs_of(read_log(folder / f"{n}.jsonl")) for n in names}
                    if all(r and r[-1]["v"] == head for r in logs.values()):
                        break
                    time.sleep(0.2)
                time.sleep(1.0)  # a few more runs after convergence
                history = observer.history()
                done = queue.stats()["done"]
        finally:
            stop_all(folder, procs)
        agents = {n: read_log(folder / f"{n}.jsonl") for n in names}
        delays, missing = propagation(history, agents)
        return {
            "seconds": time.monotonic() - started,
            "traces": expected,
            "learned": done,
            "versions": len(history),
            "head": head,
            "delays": [d.__dict__ for d in delays],
            "missing": missing,
            "summary": summary(delays),
        }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure and print the propagation delay; write ``results/replicas.json``."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--runs", type=int, default=40, help="runs captured per replica")
    parser.add_argument("--refresh", type=float, default=1.0, help="refresh_seconds")
    parser.add_argument("--latency", type=float, default=0.2, help="learner seconds per call")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true", help="2 replicas, 10 runs each")
    parser.add_argument("--out", type=Path, default=RESULTS)
    argv_used = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv_used)
    if args.quick:
        args.replicas, args.runs = 2, 10
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise SystemExit(f"{DSN_ENV} is not set: source /tmp/combee-postgres/postgres.env")
    result = measure(
        dsn,
        replicas=args.replicas,
        runs=args.runs,
        refresh=args.refresh,
        latency=args.latency,
        timeout=args.timeout,
    )
    s = result["summary"]
    bound = args.refresh + FLUSH_SECONDS
    print(f"command: {command(MODULE, argv_used)}")
    print(
        f"{args.replicas} replicas, 1 learner, PostgreSQL; {result['learned']}/{result['traces']} "
        f"traces learned into {result['versions']} versions in {result['seconds']:.1f} s"
    )
    if s.get("pairs"):
        print(
            f"propagation (accepted -> served), {s['pairs']} version x replica pairs: "
            f"p50 {s['p50']:.2f} s, p99 {s['p99']:.2f} s, max {s['max']:.2f} s "
            f"(refresh_seconds {args.refresh} + flush {FLUSH_SECONDS} = {bound:.2f} s)"
        )
    print(f"pairs never served: {len(result['missing'])}")
    record = {
        "benchmark": "replicas",
        "command": command(MODULE, argv_used),
        "settings": {
            "replicas": args.replicas,
            "runs": args.runs,
            "refresh_seconds": args.refresh,
            "flush_seconds": FLUSH_SECONDS,
            "learner_call_seconds": args.latency,
            "store": "PostgreSQL",
        },
        "machine": machine_info(),
        **{k: v for k, v in result.items() if k != "delays"},
        "delays": result["delays"],
    }
    path = write_json(args.out / "replicas.json", record)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return record


if __name__ == "__main__":
    main()
