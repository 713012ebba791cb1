"""The quality grid (``benchmarks/grid.py``) on the offline doubles, and its ablation switches.

The grid must resume: a restart (or a second call) skips the configurations
its JSON already holds and reuses the shared baseline of each task and seed.
No wall-clock assertions: counts, keys and shapes only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import grid
from langgraph_combee._learning.calls import CallSettings, LLMCaller
from langgraph_combee._learning.rules import conflicts
from langgraph_combee._learning.strategies import CombeeStrategy, StepContext, finish
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import Add, Playbook, StepReport
from tests.helpers import failing_traces

TINY = ["--model", "test", "--quick", "--train", "8", "--test", "8", "--plot", ""]
QUICK_KEYS = ["tickets/s0/combee@24", "tickets/s0/sequential"]


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Record the first argument of every call of ``grid.<name>`` (still calling it)."""
    seen: list[Any] = []
    real: Callable[..., Any] = getattr(grid, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(grid, name, spy)
    return seen


def test_a_second_call_skips_the_configurations_done_and_reuses_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = ["--out", str(tmp_path)]
    ran = _spy(monkeypatch, "run_config")
    baselines = _spy(monkeypatch, "shared_baseline")
    first = grid.main([*TINY, *out, "--max-configs", "1"])
    assert [c.key for c in ran] == QUICK_KEYS[:1]
    assert first["complete"] is False and len(baselines) == 1
    saved = json.loads((tmp_path / "grid.json").read_text())
    assert [row["key"] for row in saved["configs"]] == QUICK_KEYS[:1]

    second = grid.main([*TINY, *out])
    # Only the configuration not in the record ran; the baseline was read back.
    assert [c.key for c in ran] == QUICK_KEYS
    assert len(baselines) == 1
    assert second["complete"] is True
    saved = json.loads((tmp_path / "grid.json").read_text())
    assert [row["key"] for row in saved["configs"]] == QUICK_KEYS
    assert saved["configs"][0] == first["configs"][0]
    assert len(saved["restarts"]) == 2
    assert set(saved["shared"]) == {"tickets/s0"}
    assert "traces" not in saved["shared"]["tickets/s0"]
    assert len(json.loads((tmp_path / "shared" / "tickets-s0.json").read_text())["traces"]) == 8

    row = saved["configs"][0]
    for field in (
        "accuracy",
        "of_ceiling",
        "bullets",
        "contradictions_left",
        "learn_seconds",
        "strategy_seconds",
        "eval_seconds",
        "by_stage",
        "calls",
        "tokens",
        "aggregation",
        "playbook",
    ):
        assert field in row, field
    # The stage counter saw every learner call the step reports counted.
    assert {s: v["calls"] for s, v in row["by_stage"].items()} == row["calls"]
    assert row["calls"]["replay"] > 0 and row["aggregation"] == ["merged"]
    assert row["of_ceiling"] == row["accuracy"] / saved["shared"]["tickets/s0"]["ceiling"]
    assert {s["name"] for s in saved["summary"]} == {"combee@24", "sequential"}
    assert "tickets/combee@24" in saved["speedup"]

    third = grid.main([*TINY, *out])  # nothing left to do
    assert [c.key for c in ran] == QUICK_KEYS and third["configs"] == second["configs"]


def test_a_run_killed_mid_configuration_keeps_what_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = grid.run_config
    calls: list[str] = []

    def killed_on_the_second(config: grid.GridConfig, *args: Any) -> dict[str, Any]:
        calls.append(config.key)
        if len(calls) == 2:
            raise KeyboardInterrupt  # what a kill during a configuration leaves behind
        return real(config, *args)

    monkeypatch.setattr(grid, "run_config", killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        grid.main([*TINY, "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "grid.json").read_text())
    assert [row["key"] for row in saved["configs"]] == QUICK_KEYS[:1]
    assert not list(tmp_path.glob("*.tmp"))

    monkeypatch.setattr(grid, "run_config", real)
    record = grid.main([*TINY, "--out", str(tmp_path)])
    assert [row["key"] for row in record["configs"]] == QUICK_KEYS
    assert record["complete"] is True


def test_a_failed_configuration_is_recorded_and_retried_on_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = grid.run_config

    def broken_sequential(config: grid.GridConfig, *args: Any) -> dict[str, Any]:
        if config.strategy == "sequential":
            raise RuntimeError("server went away")
        return real(config, *args)

    monkeypatch.setattr(grid, "run_config", broken_sequential)
    record = grid.main([*TINY, "--out", str(tmp_path)])
    assert [row["key"] for row in record["configs"]] == [QUICK_KEYS[0]]
    assert [e["key"] for e in record["errors"]] == [QUICK_KEYS[1]]
    assert record["complete"] is False

    monkeypatch.setattr(grid, "run_config", real)
    record = grid.main([*TINY, "--out", str(tmp_path)])
    assert sorted(row["key"] for row in record["configs"]) == sorted(QUICK_KEYS)
    assert record["complete"] is True


def test_a_record_of_other_parameters_is_not_resumed(tmp_path: Path) -> None:
    grid.main([*TINY, "--out", str(tmp_path), "--max-configs", "1"])
    other = [a if a != "8" else "6" for a in TINY]
    with pytest.raises(SystemExit, match="use another --out"):
        grid.main([*other, "--out", str(tmp_path)])
    record = grid.main([*other, "--out", str(tmp_path), "--fresh", "--max-configs", "1"])
    assert record["parameters"]["train"] == 6


def test_the_full_plan_puts_the_informative_configurations_first() -> None:
    keys = [c.key for c in grid.plan(grid.FULL)]
    assert keys[:4] == [
        "tickets/s0/combee@48",
        "tickets/s0/naive@48",
        "tickets/s0/sequential",
        "tickets/s0/combee@auto",
    ]
    assert len(keys) == len(set(keys)) == 6 * 3 + 6 + 3
    assert {k for k in keys if k.startswith("tools/")} == {
        f"tools/s0/{n}"
        for n in ("combee@48", "naive@48", "sequential", "combee@auto", "combee@16", "naive@16")
    }
    ablations = [c for c in grid.plan(grid.FULL) if c.ablation]
    assert [c.name for c in ablations] == [
        "combee@48-corrections",
        "combee@48-union",
        "combee@48-noreplay",
    ]
    # Seeds 1 and 2 come last.
    assert all(k.startswith(("tickets/s1", "tickets/s2")) for k in keys[-12:])


def test_the_lock_is_held_around_the_block(tmp_path: Path) -> None:
    lock = tmp_path / "llm.lock"
    with grid.locked(lock), lock.open("a") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with lock.open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: no error


# ---- the private ablation switches of the strategies ----------------------------------------


def _context(**switches: bool) -> StepContext:
    return StepContext(caller=LLMCaller(fake_learner(), CallSettings()), guard=None, **switches)


async def _contradicted(ctx: StepContext) -> Playbook:
    playbook = Playbook().apply(
        [Add(section="strategies", content="When a refund is asked, route to PAY-6K.")], version=1
    )
    new_rule = Add(section="strategies", content="When a refund is asked, route to LOG-8W.")
    result, _ = await finish(
        ctx,
        playbook.playbook,
        [new_rule],
        version=2,
        report=StepReport(strategy="naive", batch_size=1),
    )
    return result


async def test_rule_corrections_off_lets_a_contradiction_stand() -> None:
    corrected = await _contradicted(_context())
    assert [b.content for b in corrected.bullets] == ["When a refund is asked, route to LOG-8W."]
    ablated = await _contradicted(_context(corrections=False))
    assert len(ablated.bullets) == 2 and len(conflicts(ablated)) == 1


async def test_merge_off_takes_the_union_without_an_aggregator_call() -> None:
    traces = failing_traces(9)

    async def step(ctx: StepContext) -> StepReport:
        result = await CombeeStrategy().step(ctx, Playbook(), traces, version=1)
        return result.report

    merged = await step(_context())
    assert merged.calls.get("aggregate") == 1 and merged.aggregation != "union"
    union = await step(dataclasses.replace(_context(), merge=False))
    assert "aggregate" not in union.calls and union.aggregation == "union"
    assert union.calls["propose"] == merged.calls["propose"]


def _row(
    task: str, seed: int, strategy: str, size: object, learn: float, **kw: Any
) -> dict[str, Any]:
    name = "sequential" if strategy == "sequential" else f"{strategy}@{size}"
    return {
        "task": task,
        "seed": seed,
        "name": name,
        "strategy": strategy,
        "batch_size": size,
        "ablation": kw.get("ablation"),
        "accuracy": kw.get("accuracy", 0.5),
        "of_ceiling": kw.get("of_ceiling", 0.5),
        "bullets": 10,
        "contradictions_left": 0,
        "learn_seconds": learn,
        "strategy_seconds": learn / 2,
        "total_calls": 1,
        "tokens": 1,
    }


def test_speedup_is_sequential_over_combee_per_seed_both_ran() -> None:
    rows = [
        _row("tickets", 0, "sequential", 16, 600.0),
        _row("tickets", 0, "combee", 48, 200.0),
        _row("tickets", 1, "sequential", 16, 800.0),
        _row("tickets", 1, "combee", 48, 200.0),
        _row("tickets", 2, "combee", 48, 1.0),  # no sequential on seed 2: left out
        _row("tickets", 0, "combee", 48, 1.0, ablation="union"),  # ablations left out
    ]
    result = grid.speedup(rows)
    assert set(result) == {"tickets/combee@48"}
    assert result["tickets/combee@48"]["seeds"] == [0, 1]
    assert result["tickets/combee@48"]["learn_wall_clock_ratio"] == 3.5  # mean of 3 and 4


def test_summary_gives_the_mean_and_range_over_seeds() -> None:
    rows = [
        _row("tickets", seed, "combee", 48, 1.0, accuracy=acc, of_ceiling=acc / 0.8)
        for seed, acc in enumerate((0.4, 0.6, 0.8))
    ]
    [entry] = grid.summary([*rows, {"key": "tickets/s0/naive@48", "error": "boom"}])
    assert entry["seeds"] == [0, 1, 2]
    assert entry["accuracy"] == pytest.approx(0.6)
    assert (entry["accuracy_min"], entry["accuracy_max"]) == (0.4, 0.8)
    assert entry["of_ceiling_max"] == pytest.approx(1.0)


def test_the_grid_sets_the_ablation_switches_on_the_engine(tmp_path: Path) -> None:
    only = ["--only", "tickets/s0/combee@48", "tickets/s0/combee@48-union"]
    size = ["--train", "8", "--test", "4", "--seeds", "1", "--tool-seeds", "0"]
    record = grid.main([*TINY[:2], *size, *only, "--out", str(tmp_path), "--plot", ""])
    rows = {row["name"]: row for row in record["configs"]}
    assert rows["combee@48-union"]["aggregation"] == ["union"]
    assert "aggregate" not in rows["combee@48-union"]["calls"]
    assert rows["combee@48"]["aggregation"] == ["merged"]
