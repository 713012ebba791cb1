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
from langchain_core.messages import HumanMessage

from benchmarks import grid
from langgraph_combee._algorithm.roles import SmallRoles
from langgraph_combee._algorithm.schemas import SmallReflectionOut
from langgraph_combee._algorithm.stages import NO_CORRECTIONS, NO_MERGE, STEP_STAGES, Stage
from langgraph_combee._algorithm.strategies import CombeeStrategy, StepContext, finish
from langgraph_combee._core.types import Reflection, Trace
from langgraph_combee._llm import prompts
from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller
from langgraph_combee._rules.rules import conflicts
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


def test_an_only_key_the_preset_does_not_hold_is_an_error_not_a_silent_no_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session preset keeps combee@auto for seed 0 only: asking for seed 1's ran nothing.
    ran = _spy(monkeypatch, "run_config")
    with pytest.raises(SystemExit, match=r"tickets/s1/combee@auto: not in the quick preset"):
        grid.main([*TINY, "--out", str(tmp_path), "--only", "tickets/s1/combee@auto"])
    assert ran == []
    record = grid.main([*TINY, "--out", str(tmp_path), "--only", QUICK_KEYS[1]])
    assert [row["key"] for row in record["configs"]] == QUICK_KEYS[1:]


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


# ---- the ablations: other tuples of stages ---------------------------------------------------


def _context(stages: tuple[Stage, ...] = STEP_STAGES) -> StepContext:
    return StepContext(caller=LLMCaller(fake_learner(), CallSettings()), guard=None, stages=stages)


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
    ablated = await _contradicted(_context(NO_CORRECTIONS))
    assert len(ablated.bullets) == 2 and len(conflicts(ablated)) == 1


async def test_merge_off_takes_the_union_without_an_aggregator_call() -> None:
    traces = failing_traces(9)

    async def step(ctx: StepContext) -> StepReport:
        result = await CombeeStrategy().step(ctx, Playbook(), traces, version=1)
        return result.report

    merged = await step(_context())
    assert merged.calls.get("aggregate") == 1 and merged.aggregation != "union"
    union = await step(dataclasses.replace(_context(), stages=NO_MERGE))
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


def test_speedup_leaves_out_rows_with_cached_reflections() -> None:
    rows = [
        _row("tickets", 0, "sequential", 16, 300.0, reflections_cached=16),
        _row("tickets", 0, "combee", 48, 200.0),
        _row("tickets", 1, "sequential", 16, 800.0),
        _row("tickets", 1, "combee", 48, 200.0),
        _row("tickets", 1, "combee", 16, 100.0, reflections_cached=16),
    ]
    for row, extra in zip(rows, (16, 0, 0, 0, 16), strict=True):
        row["reflections_cached"] = extra
    result = grid.speedup(rows)
    # Seed 0's sequential and seed 1's combee@16 had cached reflections: not counted.
    assert set(result) == {"tickets/combee@48"}
    assert result["tickets/combee@48"]["seeds"] == [1]
    assert result["tickets/combee@48"]["learn_wall_clock_ratio"] == 4.0


# ---- the reflection cache -------------------------------------------------------------------

SMALL = ["--model", "test", "--roles", "small", "--size", "session", "--train", "8", "--test", "4"]
FIRST_TWO = ["--only", "tickets/s0/combee@48", "tickets/s0/naive@48", "--plot", ""]


def _reflect_calls(row: dict[str, Any]) -> int:
    """Reflector calls the stage counter saw in one row (the model's own count)."""
    return int(row["by_stage"].get("reflect", {}).get("calls", 0))


def _cache_file(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "shared" / "tickets-s0-reflections.json").read_text())
    return data


def test_the_second_configuration_of_a_seed_makes_no_reflector_call_for_cached_traces(
    tmp_path: Path,
) -> None:
    record = grid.main([*SMALL, *FIRST_TWO, "--out", str(tmp_path / "on")])
    first, second = record["configs"]
    assert first["roles"]["profile"] == "small"
    made = _reflect_calls(first)
    assert made == 8 and first["reflections_stored"] == 8 and first["reflections_cached"] == 0
    assert _reflect_calls(second) == 0
    assert second["reflections_cached"] == 8 and second["reflections_stored"] == 0
    entries = _cache_file(tmp_path / "on")["entries"].values()
    assert {e["made_by"] for e in entries} == {"tickets/s0/combee@48"}
    # What the cached reflections had cost is in the row, beside (not in) its own figures.
    # A reflection's calls include the kind namer's, where the reflector named only the task.
    assert second["reflect_calls_shared"] == sum(e["calls"] for e in entries)
    assert second["reflect_calls_shared"] >= made == first["calls"]["reflect"]
    assert second["reflect_tokens_shared"] == sum(
        e["input_tokens"] + e["output_tokens"] for e in entries
    )
    assert second["reflect_seconds_shared"] == pytest.approx(
        sum(e["seconds"] for e in entries), abs=0.01
    )
    # The cached reflections are the ones the model gives: the same playbook without the cache.
    plain = grid.main([*SMALL, *FIRST_TWO, "--out", str(tmp_path / "off"), "--no-reflection-cache"])
    unshared = plain["configs"][1]
    assert _reflect_calls(unshared) == 8 and unshared["reflection_cache"] == "off"
    assert unshared["playbook"] == second["playbook"]
    assert not (tmp_path / "off" / "shared" / "tickets-s0-reflections.json").exists()
    assert "cached: reflections taken from an earlier configuration" in grid.table(
        record["configs"], record["shared"]
    )


def test_a_changed_reflector_prompt_misses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = ["--out", str(tmp_path)]
    grid.main([*SMALL, *FIRST_TWO[:2], "--plot", "", *out])
    monkeypatch.setattr(
        prompts, "SMALL_REFLECTOR_SYSTEM", prompts.SMALL_REFLECTOR_SYSTEM + "\nOne more line."
    )
    record = grid.main([*SMALL, "--only", "tickets/s0/naive@48", "--plot", "", *out])
    row = record["configs"][-1]
    assert row["key"] == "tickets/s0/naive@48"
    assert _reflect_calls(row) == 8 and row["reflections_cached"] == 0
    assert row["reflections_stored"] == 8
    assert len(_cache_file(tmp_path)["entries"]) == 16


def test_the_full_profile_never_uses_the_cache(tmp_path: Path) -> None:
    full = [a if a != "small" else "full" for a in SMALL]
    record = grid.main([*full, *FIRST_TWO, "--out", str(tmp_path)])
    for row in record["configs"]:
        assert row["roles"]["profile"] == "full"
        assert _reflect_calls(row) == 8
        assert row["reflections_cached"] == row["reflections_stored"] == 0
        assert row["reflections_not_cacheable"] == 8
    assert _cache_file(tmp_path)["entries"] == {}


async def test_a_small_reflector_whose_prompt_reads_the_playbook_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def reads_the_playbook(
        self: SmallRoles, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        messages = prompts.small_reflector_messages(trace)
        messages.append(HumanMessage(playbook.render_for_llm()))
        out = await caller.call("combee.reflect", messages, SmallReflectionOut, stats)
        return None if out is None else out.to_reflection(trace.id)

    monkeypatch.setattr(SmallRoles, "reflect", reads_the_playbook)
    cache = grid.ReflectionCache(tmp_path / "r.json", model="test")
    roles = grid.CachingRoles(SmallRoles(), cache, made_by="x")
    caller = LLMCaller(fake_learner(), CallSettings())
    playbook = Playbook().apply(
        [Add(section="strategies", content="When a refund is asked, route to PAY-6K.")], version=1
    )
    [trace] = failing_traces(1)
    stats = CallStats()
    await roles.active().reflect(caller, trace, playbook.playbook, stats)
    assert stats.calls["combee.reflect"] == 1
    assert roles.uncached == 1 and roles.stored == 0 and cache.data.entries == {}


def test_the_caching_profile_goes_by_the_wrapped_profiles_name(tmp_path: Path) -> None:
    # Review: it went by no name, so a step's left_out (listed for the small profile
    # only) was empty in every grid row.
    cache = grid.ReflectionCache(tmp_path / "r.json", model="test")
    assert grid.CachingRoles(SmallRoles(), cache, made_by="x").active().name == "small"


def test_a_corrupted_cache_file_is_ignored_with_a_warning(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)]
    grid.main([*SMALL, *FIRST_TWO[:2], "--plot", "", *out])
    path = tmp_path / "shared" / "tickets-s0-reflections.json"
    path.write_text('{"version": 1, "entries": {"abc": {"trace_id": ')
    with pytest.warns(RuntimeWarning, match="unreadable reflection cache ignored"):
        record = grid.main([*SMALL, "--only", "tickets/s0/naive@48", "--plot", "", *out])
    row = record["configs"][-1]
    assert _reflect_calls(row) == 8 and row["reflections_cached"] == 0
    assert len(_cache_file(tmp_path)["entries"]) == 8  # replaced by a readable one


def test_resumption_keeps_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = ["--out", str(tmp_path)]

    def killed(self: Any) -> Any:
        raise KeyboardInterrupt  # a kill after the learning, before the evaluation

    with monkeypatch.context() as patch:
        patch.setattr(grid.Combee, "current", killed)
        with pytest.raises(KeyboardInterrupt):
            grid.main([*SMALL, *FIRST_TWO, *out])
    # The configuration was lost, not its reflections (saved after every step).
    assert len(_cache_file(tmp_path)["entries"]) == 8
    assert not list((tmp_path / "shared").glob("*.tmp"))
    record = grid.main([*SMALL, *FIRST_TWO, *out])
    first, second = record["configs"]
    # The rerun of the killed configuration and the next one both took them from the file.
    assert first["reflections_cached"] == second["reflections_cached"] == 8
    assert _reflect_calls(first) == _reflect_calls(second) == 0


def test_the_session_preset_runs_its_configurations_in_order() -> None:
    keys = [c.key for c in grid.plan(grid.SESSION)]
    seed0 = ["combee@48", "naive@48", "sequential", "combee@16", "naive@16", "combee@auto"]
    ablations = ["combee@48-corrections", "combee@48-union", "combee@48-noreplay"]
    tools = ["combee@48", "naive@48", "sequential", "combee@auto", "combee@16", "naive@16"]
    large = ["combee@48", "naive@48", "sequential"]
    assert keys == [
        *(f"tickets/s0/{n}" for n in [*seed0, *ablations]),
        *(f"tools/s0/{n}" for n in tools),
        *(f"tickets/s1/{n}" for n in large),
        *(f"tickets/s2/{n}" for n in large),
    ]
    assert {c.batch_size for c in grid.plan(grid.SESSION) if c.strategy == "sequential"} == {16}
    # Measured as the full grid: a record of one resumes as the other.
    args = grid.parse_args(["--size", "session"])
    assert grid.parameters(args, grid.SESSION) == grid.parameters(args, grid.FULL)
    assert set(keys) < {c.key for c in grid.plan(grid.FULL)}


def test_quick_and_another_size_are_refused() -> None:
    with pytest.raises(SystemExit):
        grid.parse_args(["--quick", "--size", "session"])
    assert grid.parse_args(["--quick"]).size == "quick"
    assert grid.parse_args([]).size == "full"


def test_a_record_from_before_the_roles_option_resumes_as_auto(tmp_path: Path) -> None:
    grid.main([*TINY, "--out", str(tmp_path), "--max-configs", "1"])
    path = tmp_path / "grid.json"
    saved = json.loads(path.read_text())
    del saved["parameters"]["roles"]
    path.write_text(json.dumps(saved))
    record = grid.main([*TINY, "--out", str(tmp_path)])
    assert [row["key"] for row in record["configs"]] == QUICK_KEYS
    with pytest.raises(SystemExit, match="use another --out"):
        grid.main([*TINY, "--out", str(tmp_path), "--roles", "small"])
