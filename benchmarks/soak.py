"""Soak: 10,000+ traces through a durable store, with the background learner on test doubles.

For each backend (a SQLite file, PostgreSQL) one process captures traces at a
steady rate through ``Combee.capture`` (what the middleware calls after each
run; the agent itself is left out, its cost is ``benchmarks/overhead.py``) while
the background learner (``fake_learner()``, no latency: the figures are the
library's own cost) learns from them in batches. Every failed trace teaches a
distinct rule, so every step writes a version and the token budget keeps evicting.
Sampled every second: resident memory (RSS), traces captured, written to the
queue and learned, and the queue lag (captured, not yet learned). After the
capture ends the learner drains the queue.

Reported per backend: capture and learning throughput (traces/s), the lag
(max and at the end of capture), and memory: RSS at the end of warm-up (the
first fifth), at the end, its growth in MB, and the slope of a least-squares line
over the post-warm-up samples (MB per 1,000 traces). Flat memory means the slope
stays near zero while traces keep coming.

    source /tmp/combee-postgres/postgres.env   # PostgreSQL; skipped without it
    python -m benchmarks.soak [--traces 10000] [--rate 40] [--backends sqlite,postgres]
        [--quick] [--plot docs/img/soak.png]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import IMAGES, RESULTS, ROOT, command, machine_info, write_json
from langgraph_combee import (
    CaptureSettings,
    Combee,
    Feedback,
    LearnerSettings,
    ServingSettings,
    Trace,
)
from langgraph_combee.testing import fake_learner

MODULE = "benchmarks.soak"
DSN_ENV = "COMBEE_TEST_POSTGRES_DSN"
BATCH = 50


def rss_mb() -> float:
    """Resident memory of this process in MB (Linux ``/proc``)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def make_trace(i: int) -> Trace:
    """A failed run whose ground truth teaches one distinct rule."""
    return Trace(
        input=f"soak {i} ticket about topic {i % 97}",
        output="WRONG",
        feedback=Feedback(correct=False, ground_truth=f"CODE-{i}"),
    )


@contextmanager
def backend(name: str) -> Iterator[str]:
    """A connection string for a fresh store of the named backend."""
    if name == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "soak.db")
    elif name == "postgres":
        from benchmarks.replicas import fresh_schema

        dsn = os.environ.get(DSN_ENV, "").strip()
        if not dsn:
            raise SystemExit(f"{DSN_ENV} is not set: source /tmp/combee-postgres/postgres.env")
        with fresh_schema(dsn) as conn:
            yield conn
    else:
        raise SystemExit(f"unknown backend {name!r}: sqlite or postgres")


def slope_per_1000(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x, times 1,000."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / var


def soak(conn: str, *, traces: int, rate: float, timeout: float) -> dict[str, Any]:
    """Capture ``traces`` at ``rate``/s with the learner running; sample every second."""
    samples: list[dict[str, float]] = []
    with ExitStack() as stack:
        # The double logs every prompt it is sent unless told not to keep them.
        model = fake_learner()
        model.max_prompts = 0
        combee = stack.enter_context(
            Combee.from_conn_string(
                conn,
                prompt_id="soak",
                model=model,
                batch_size=BATCH,
                capture=CaptureSettings(capture_limit=traces + 1),
                serving=ServingSettings(refresh_seconds=1.0),
                learner=LearnerSettings(min_batch=1, max_wait_seconds=1.0, poll_seconds=0.2),
            )
        )
        learner = combee.learner
        stop = threading.Event()
        started = time.monotonic()

        def sample() -> None:
            while True:
                gc.collect()
                stats = combee._agent.server.stats
                samples.append(
                    {
                        "t": time.monotonic() - started,
                        "rss_mb": rss_mb(),
                        "captured": stats.captured,
                        "queued": stats.flushed,
                        "learned": learner.stats.traces_learned,
                        "lag": stats.captured - learner.stats.traces_learned,
                        "steps": learner.stats.steps,
                    }
                )
                if stop.wait(1.0):
                    return

        sampler = threading.Thread(target=sample, name="soak-sampler", daemon=True)
        combee.start()
        sampler.start()
        for i in range(traces):
            # Steady rate: trace i is due at i / rate seconds.
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            combee.capture(make_trace(i))
        captured_s = time.monotonic() - started
        while learner.stats.traces_learned < traces and time.monotonic() - started < timeout:
            time.sleep(0.2)
        learned_s = time.monotonic() - started
        stop.set()
        sampler.join()
        queue = combee.queue().stats()
        head = combee.current()
        describe = learner.describe()
    after_capture = [s for s in samples if s["t"] <= captured_s]
    warm = after_capture[len(after_capture) // 5 :] or samples
    return {
        "traces": traces,
        "rate": rate,
        "capture_seconds": captured_s,
        "learn_seconds": learned_s,
        "captured_per_s": traces / captured_s,
        "learned_per_s": describe["traces_learned"] / learned_s,
        "learned": describe["traces_learned"],
        "steps": describe["steps"],
        "failed_steps": describe["failed_steps"],
        "versions": head.version,
        "bullets": len(head.playbook.bullets),
        "queue": queue,
        "lag_max": max(s["lag"] for s in samples),
        "lag_at_capture_end": after_capture[-1]["lag"] if after_capture else None,
        "rss_warm_mb": warm[0]["rss_mb"],
        "rss_end_mb": samples[-1]["rss_mb"],
        "rss_max_mb": max(s["rss_mb"] for s in samples),
        "rss_growth_mb": samples[-1]["rss_mb"] - warm[0]["rss_mb"],
        "rss_slope_mb_per_1000_traces": slope_per_1000(
            [(s["captured"], s["rss_mb"]) for s in warm]
        ),
        "samples": samples,
    }


def plot(results: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Memory and queue lag over time, one line per backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'langgraph-combee[bench]')")
        return None
    fig, (mem, lag) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for name, result in results.items():
        t = [s["t"] for s in result["samples"]]
        mem.plot(t, [s["rss_mb"] for s in result["samples"]], label=name)
        lag.plot(t, [s["lag"] for s in result["samples"]], label=name)
        lag.axvline(result["capture_seconds"], color="grey", linestyle=":", linewidth=1)
    mem.set_ylabel("RSS (MB)")
    mem.set_ylim(bottom=0)
    mem.set_title("Soak: memory and queue lag while traces flow (dotted: capture ends)")
    lag.set_ylabel("lag (traces captured, not learned)")
    lag.set_xlabel("seconds")
    mem.legend()
    lag.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the soak on each backend, print the figures, write ``results/soak.json``."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=40.0, help="traces captured per second")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--timeout", type=float, default=600.0, help="per backend")
    parser.add_argument("--quick", action="store_true", help="1,000 traces at 200/s")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=IMAGES / "soak.png")
    argv_used = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv_used)
    if args.quick:
        args.traces, args.rate = 1000, 200.0
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "postgres" in names and not os.environ.get(DSN_ENV, "").strip():
        print(f"{DSN_ENV} is not set: PostgreSQL skipped")
        names.remove("postgres")
    print(f"command: {command(MODULE, argv_used)}")
    results = {}
    for name in names:
        with backend(name) as conn:
            result = soak(conn, traces=args.traces, rate=args.rate, timeout=args.timeout)
        results[name] = result
        print(
            f"{name}: {result['learned']}/{result['traces']} traces learned in "
            f"{result['steps']} steps ({result['failed_steps']} failed), "
            f"{result['versions']} versions, {result['bullets']} bullets in force\n"
            f"  throughput: captured {result['captured_per_s']:.0f}/s (target {args.rate:.0f}/s), "
            f"learned {result['learned_per_s']:.0f}/s over {result['learn_seconds']:.0f} s\n"
            f"  queue lag: max {result['lag_max']}, at the end of capture "
            f"{result['lag_at_capture_end']}; queue after: {result['queue']}\n"
            f"  memory: RSS {result['rss_warm_mb']:.0f} MB after warm-up, "
            f"{result['rss_end_mb']:.0f} MB at the end (max {result['rss_max_mb']:.0f} MB), "
            f"slope {result['rss_slope_mb_per_1000_traces']:+.2f} MB per 1,000 traces",
            flush=True,
        )
    record = {
        "benchmark": "soak",
        "command": command(MODULE, argv_used),
        "settings": {"traces": args.traces, "rate": args.rate, "batch_size": BATCH},
        "machine": machine_info(),
        "results": results,
    }
    suffix = "-quick" if args.quick else ""
    path = write_json(args.out / f"soak{suffix}.json", record)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if results and not args.quick:
        drawn = plot(results, args.plot)
        if drawn is not None:
            print(f"plot: {drawn}")
    return record


if __name__ == "__main__":
    main()
