"""The benchmark code runs at tiny sizes and computes what it claims.

No wall-clock assertions: these tests check structure, counts and arithmetic.
The figures themselves come from ``make bench`` (see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import cost, dedup, feedback_race, overhead, quality, speed
from benchmarks._common import percentile
from benchmarks._latency import (
    CallRecord,
    LatencyModel,
    critical_breakdown,
    critical_path,
    lower_bound,
    split_steps,
    waves,
)
from benchmarks._tickets import MAX_TRACES, make_traces, ticket_rule
from langgraph_combee._core.dedup import lexical_similarity
from langgraph_combee._llm import prompts
from langgraph_combee.testing import fake_learner
from langgraph_combee.types import Add, Playbook

# base 1 s, 10 prompt tokens/s, 2 reply tokens/s: a call's seconds are easy to add up.
MODEL = LatencyModel(base_seconds=1.0, prefill_tps=10.0, decode_tps=2.0)


def call(stage: str, input_tokens: int, output_tokens: int) -> CallRecord:
    return CallRecord(stage=stage, input_tokens=input_tokens, output_tokens=output_tokens)


def read_json(path: Path) -> dict[str, Any]:
    # Strict JSON: NaN or Infinity would make json.loads call parse_constant.
    def refuse(token: str) -> None:
        raise AssertionError(f"non-finite number {token} in {path}")

    data = json.loads(path.read_text(), parse_constant=refuse)
    assert isinstance(data, dict)
    return data


# ---- lower bound ---------------------------------------------------------------


def test_latency_model_adds_base_prefill_and_decode() -> None:
    assert MODEL.parts(20, 6) == (1.0, 2.0, 3.0)
    assert MODEL.seconds(20, 6) == 6.0


def test_lower_bound_of_a_combee_step_by_hand() -> None:
    step = [
        call("reflect", 10, 2),  # 1 + 1 + 1 = 3
        call("reflect", 20, 4),  # 1 + 2 + 2 = 5  <- longest reflect
        call("reflect", 0, 0),  # 1
        call("propose", 0, 2),  # 1 + 0 + 1 = 2
        call("propose", 10, 4),  # 1 + 1 + 2 = 4  <- longest propose
        call("aggregate", 30, 8),  # 1 + 3 + 4 = 8
    ]
    second = [call("reflect", 0, 2), call("curate", 10, 0)]  # 2, then 2
    assert [len(w) for w in waves(step, sequential=False)] == [3, 2, 1]
    assert lower_bound([step], MODEL, sequential=False) == 5 + 4 + 8
    assert lower_bound([step, second], MODEL, sequential=False) == 17 + 2 + 2
    assert [c.stage for c in critical_path([step], MODEL, sequential=False)] == [
        "reflect",
        "propose",
        "aggregate",
    ]
    assert critical_breakdown([step], MODEL, sequential=False) == {
        "reflect": {"base": 1.0, "prefill": 2.0, "decode": 2.0},
        "propose": {"base": 1.0, "prefill": 1.0, "decode": 2.0},
        "aggregate": {"base": 1.0, "prefill": 3.0, "decode": 4.0},
    }


def test_lower_bound_of_sequential_adds_every_call() -> None:
    # Sequential: reflect, curate, then a reflection with nothing to learn (no curate),
    # then reflect, curate. Back-to-back reflects still ran one after the other.
    step = [
        call("reflect", 10, 2),  # 3
        call("curate", 0, 2),  # 2
        call("reflect", 0, 0),  # 1
        call("reflect", 20, 4),  # 5
        call("curate", 10, 4),  # 4
    ]
    assert len(waves(step, sequential=True)) == 5
    assert lower_bound([step], MODEL, sequential=True) == 3 + 2 + 1 + 5 + 4
    # Read as a parallel step, the three consecutive reflects would be one stage.
    assert lower_bound([step], MODEL, sequential=False) == 3 + 2 + 5 + 4


def test_split_steps_checks_the_counts() -> None:
    calls = [call("reflect", 1, 1)] * 5
    assert [len(s) for s in split_steps(calls, [2, 3])] == [2, 3]
    with pytest.raises(ValueError, match="do not add up"):
        split_steps(calls, [2, 2])


def test_percentile_interpolates() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 100) == 5.0
    assert percentile([7.0], 99) == 7.0


# ---- workload ------------------------------------------------------------------


def test_tickets_teach_distinct_rules_that_survive_dedup() -> None:
    traces = make_traces(240)
    rules = [ticket_rule(t.input, t.feedback.ground_truth, t.output) for t in traces if t.feedback]
    assert len(set(rules)) == len({t.input for t in traces}) == 240
    most_similar = max(lexical_similarity(a, b) for a, b in itertools.combinations(rules, 2))
    assert most_similar < 0.7  # the lexical merge threshold
    with pytest.raises(ValueError, match="expected an int"):
        make_traces(MAX_TRACES + 1)


def test_the_aggregator_prompt_shows_every_proposed_operation_under_its_label() -> None:
    # 30 ADDs in one proposal are more than the 4000 characters a fenced trace field
    # keeps; proposals are not clipped, so the aggregator sees all of them, and it
    # answers by reference: repeats dropped by label, nothing written out again.
    ops = [Add(section="others", content=f"rule {i}: " + "x" * 120) for i in range(30)]
    proposal = [(op, [f"R{i}"]) for i, op in enumerate(ops, start=1)]
    messages = prompts.aggregator_messages(Playbook(), [proposal, proposal[:3]], token_budget=None)
    body = str(messages[1].content)
    assert all(f"[P1.{j}]" in body for j in range(1, 31))
    reply = json.loads(str(fake_learner().invoke(messages).content))
    assert reply["drop"] == ["P2.1", "P2.2", "P2.3"]
    assert reply["operations"] == []


# ---- the scripts at tiny sizes ---------------------------------------------------


def test_speed_benchmark_writes_well_formed_json(tmp_path: Path) -> None:
    record = speed.main(
        [
            "--traces",
            "12",
            "--time-scale",
            "0.0002",
            "--batch-sizes",
            "4",
            "8",
            "--out",
            str(tmp_path),
            "--plot",
            "",
        ]
    )
    data = read_json(tmp_path / "speed.json")
    assert data == json.loads(json.dumps(record))
    assert data["command"].startswith("python -m benchmarks.speed --traces 12")
    assert data["parameters"]["latency_model"] == LatencyModel().as_dict()
    assert data["machine"]["cpu_count"] >= 1
    arms = {a["arm"]: a for a in data["arms"]}
    assert list(arms) == ["sequential", "naive", "combee-4", "combee-8", "combee-auto"]
    assert arms["sequential"]["speedup"]["projected"] == 1.0
    assert arms["sequential"]["by_stage"]["reflect"]["calls"] == 12
    assert arms["sequential"]["by_stage"]["curate"]["calls"] == 12
    assert arms["naive"]["by_stage"]["curate"]["calls"] == 1
    # combee-4: three steps of 4, each with k = 2 proposals and one aggregation.
    assert arms["combee-4"]["step_batch_sizes"] == [4, 4, 4]
    assert arms["combee-4"]["by_stage"]["propose"]["calls"] == 6
    assert arms["combee-4"]["by_stage"]["aggregate"]["calls"] == 3
    assert arms["combee-auto"]["step_batch_sizes"][:2] == [4, 8]
    for arm in arms.values():
        assert arm["playbook_bullets"] == 12  # every distinct rule was kept
        assert arm["failed_calls"] == arm["unparsed"] == 0
        assert 0 < arm["lower_bound_seconds"] <= arm["projected_seconds"]
        assert 0 < arm["efficiency"] <= 1 and 0 < arm["projected_efficiency_at_scale_1"] <= 1
        check = arm["latency_check"]
        assert math.isclose(
            check["sum_of_recorded_call_seconds"],
            check["latency_model_waited_seconds"],
            rel_tol=1e-6,
        )
        assert arm["input_tokens"] == arm["step_report_tokens"]["input"]
        assert arm["output_tokens"] == arm["step_report_tokens"]["output"]
        assert arm["tokens"] == arm["input_tokens"] + arm["output_tokens"]
    assert set(data["targets"]["speedup_met"]["projected"]) == {
        "combee-4",
        "combee-8",
        "combee-auto",
    }


def test_overhead_benchmark_writes_well_formed_json(tmp_path: Path) -> None:
    record = overhead.main(
        [
            "--runs",
            "6",
            "--block",
            "3",
            "--warmup",
            "1",
            "--preload",
            "4",
            "--out",
            str(tmp_path),
            "--plot",
            "",
        ]
    )
    data = read_json(tmp_path / "overhead.json")
    assert data == json.loads(json.dumps(record))
    assert data["command"].startswith("python -m benchmarks.overhead --runs 6")
    phases = {p["phase"]: p for p in data["phases"]}
    combee_arms = ["combee", "combee+playbook", "hooks", "hooks+playbook"]
    assert [a["arm"] for a in phases["hot-path"]["arms"]] == [
        "plain",
        "noop-hooks",
        "noop-wrap",
        "combee-serve",
        "durable",
        "durable-sqlite",
        *combee_arms,
    ]
    assert [a["arm"] for a in phases["learning"]["arms"]] == ["plain", *combee_arms]
    for phase in phases.values():
        for arm in phase["arms"]:
            assert arm["runs"] == 6
            assert arm["p50_us"] <= arm["p99_us"]
        by_name = {a["arm"]: a for a in phase["arms"]}
        assert by_name["plain"]["overhead_us_p50"] == 0
        assert by_name["combee+playbook"]["playbook"]["bullets"] >= 1
        # warm-up + timed runs are captured; the serve-only arm captures nothing
        assert by_name["combee"]["serving"]["captured"] == 7
        assert by_name["hooks"]["serving"]["captured"] == 7
    hot = {a["arm"]: a for a in phases["hot-path"]["arms"]}
    assert hot["noop-wrap"]["over_noop_wrap_us_p50"] == 0
    assert hot["combee"]["over_noop_wrap_us_p50"] == pytest.approx(
        hot["combee"]["p50_us"] - hot["noop-wrap"]["p50_us"]
    )
    assert "over_noop_wrap_us_p50" not in phases["learning"]["arms"][0]  # no floor arm there
    assert set(data["targets_met"]["hot-path"]) == {"combee", "combee+playbook"}
    assert hot["combee-serve"]["serving"]["captured"] == 0
    for durable in ("durable", "durable-sqlite"):  # every run written before it returned
        assert hot[durable]["serving"]["written_through"] == 7
    assert len(phases["learning"]["learners"]) == 4
    assert all(not learner["running"] for learner in phases["learning"]["learners"])


def test_overhead_target_arms_and_own_time(tmp_path: Path) -> None:
    args = ["--runs", "4", "--block", "2", "--warmup", "1", "--preload", "4"]
    args += ["--phases", "hot-path", "--arms", "noop-wrap", "combee", "combee+playbook"]
    data = overhead.main([*args, "--own-time", "--out", str(tmp_path), "--plot", ""])
    (hot,) = data["phases"]
    assert [a["arm"] for a in hot["arms"]] == ["plain", "noop-wrap", "combee", "combee+playbook"]
    verdicts = data["target_verdicts"]["hot-path"]
    assert set(verdicts) == {"combee", "combee+playbook"}
    for verdict in verdicts.values():
        assert verdict["cpu_us"]["rounds"] == 2  # 4 runs in blocks of 2
        low, high = verdict["cpu_us"]["median_ci95"]
        assert low <= verdict["cpu_us"]["median"] <= high
    assert data["targets_met"]["hot-path"] == {a: v["cpu_met"] for a, v in verdicts.items()}
    own = {a["arm"]: a for a in data["own_time"]["arms"]}
    assert set(own) == {"noop-wrap", "combee", "combee+playbook"}
    assert all(a["calls"] == 4 for a in own.values())  # one model call per run
    assert own["noop-wrap"]["own_over_noop_wrap"]["cpu_us"]["median"] == 0


def test_overhead_call_cost_times_each_middleware() -> None:
    cost = overhead.call_cost({}, preload=4, batch_size=16, repeats=2, number=5)
    assert set(cost["us_per_call"]) == {"noop-wrap", "combee", "combee+playbook"}
    assert all(t > 0 for t in cost["us_per_call"].values())
    assert cost["over_noop_wrap_us"]["noop-wrap"] == 0


def test_paired_median_interval_from_order_statistics() -> None:
    # 100 rounds, differences 0..99: the median is 49.5 and its 95% interval
    # spans ranks 50 -+ 9.8, i.e. the 41st to the 60th smallest difference.
    paired = overhead._paired([float(i) + 10 for i in range(100)], [10.0] * 100)
    assert paired["median"] == pytest.approx(49.5)
    assert paired["median_ci95"] == [40.0, 59.0]
    assert paired["rounds"] == 100


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    speed.main(
        [
            "--traces",
            "8",
            "--time-scale",
            "0.0002",
            "--batch-sizes",
            "4",
            "--no-auto",
            "--out",
            str(tmp_path),
            "--plot",
            str(tmp_path / "speed.png"),
        ]
    )
    overhead.main(
        [
            "--runs",
            "2",
            "--block",
            "1",
            "--warmup",
            "0",
            "--preload",
            "2",
            "--phases",
            "hot-path",
            "--out",
            str(tmp_path),
            "--plot",
            str(tmp_path / "overhead.png"),
        ]
    )
    for name in ("speed.png", "overhead.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_all_script_starts_from_anywhere(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


def test_quality_benchmark_on_the_doubles_writes_a_complete_record(tmp_path: Path) -> None:
    record = quality.main(
        [
            "--model",
            "test",
            "--quick",
            "--train",
            "8",
            "--test",
            "8",
            "--batch-sizes",
            "4",
            "--out",
            str(tmp_path),
            "--plot",
            "",
        ]
    )
    saved = json.loads((tmp_path / "quality.json").read_text())
    assert saved["complete"] is True and record["complete"] is True
    assert [row["name"] for row in saved["configs"]] == ["naive@4", "combee@4"]
    assert saved["references"]["hand-written rules"] == 1.0
    # The doubles learn every rule they are shown: the learned playbook routes held-out tickets.
    assert all(
        row["accuracy"] > saved["references"]["v0 (no playbook)"] for row in saved["configs"]
    )


def test_feedback_race_benchmark_writes_well_formed_json(tmp_path: Path) -> None:
    record = feedback_race.main(["--runs", "5", "--out", str(tmp_path)])
    data = read_json(tmp_path / "feedback_race.json")
    assert data == json.loads(json.dumps(record))
    assert (data["runs"], data["feedback_false"]) == (5, 0)
    assert data["serving"]["captured"] == 5


def test_dedup_benchmark_times_a_baseline_beside_the_current_code(tmp_path: Path) -> None:
    baseline = tmp_path / "dedup_before.py"
    baseline.write_text(Path(dedup.dedup.__file__).read_text())
    record = dedup.main(["--repeats", "1", "--baseline", str(baseline), "--out", str(tmp_path)])
    data = read_json(tmp_path / "dedup.json")
    assert data == json.loads(json.dumps(record))
    assert set(data["results"]) == {"english", "chinese", "russian"}
    for figures in data["results"].values():
        current, base = figures["current"], figures["baseline"]
        # The same code twice: the same playbooks and merges, every figure timed.
        assert {k: v for k, v in current.items() if "ms" not in k} == {
            k: v for k, v in base.items() if "ms" not in k
        }
        assert current["bullets"] == 200
        assert set(figures["ratio"]) == {"after_apply_ms", "after_apply_cold_ms", "full_ms"}
    # Rules about different cases naming different desks: none merged, in any script.
    assert {lang: f["current"]["merges_full"] for lang, f in data["results"].items()} == {
        "english": 0,
        "chinese": 0,
        "russian": 0,
    }


def test_cost_divides_each_stage_by_the_traces_and_prices_cached_reflections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = {"calls": 2, "input_tokens": 300, "output_tokens": 30}
    record = {
        "configs": [
            {
                "key": "tickets/s0/combee@4",
                "step_sizes": [4, 4],
                "by_stage": {"replay": stage, "reflect": {**stage, "calls": 8}},
            },
            {
                "key": "tickets/s0/naive@8",
                "step_sizes": [8],
                "by_stage": {"curate": stage},
                "reflect_calls_shared": 8,
                "reflect_tokens_shared": 800,
            },
        ]
    }
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(record))
    rows = cost.main([str(path), "--usd-per-million-input", "1", "--usd-per-million-output", "2"])
    combee, naive = rows
    # Stages in the order a step runs them, each scaled by 1,000 / 8 traces.
    assert [(s.stage, s.calls, s.input_tokens, s.output_tokens) for s in combee.stages] == [
        ("reflect", 1000.0, 37500.0, 3750.0),
        ("replay", 250.0, 37500.0, 3750.0),
    ]
    # The row that read its reflections from the cache is charged for them.
    assert [(s.stage, s.shared, s.calls, s.input_tokens) for s in naive.stages] == [
        ("reflect", True, 1000.0, 100000.0),
        ("curate", False, 250.0, 37500.0),
    ]
    assert (naive.calls, naive.input_tokens, naive.output_tokens) == (1250.0, 137500.0, 3750.0)
    out = capsys.readouterr().out
    # 137,500 input tokens at $1 and 3,750 output tokens at $2 per million.
    total = "| tickets/s0/naive@8 | **total** (8 traces) | **1,250** | **137,500** | **3,750** |"
    assert f"{total} $0.145 |" in out


def test_cost_refuses_a_record_it_cannot_read() -> None:
    with pytest.raises(ValueError, match=r"not a benchmarks.grid or benchmarks.speed record"):
        cost.costs({"benchmark": "overhead"})
    with pytest.raises(ValueError, match=r"grid row 'k' has no 'by_stage'"):
        cost.costs({"configs": [{"key": "k", "step_sizes": [4]}]})
    with pytest.raises(ValueError, match=r"row 'k' learned from 0 traces"):
        cost.costs({"configs": [{"key": "k", "step_sizes": [], "by_stage": {}}]})


def test_cost_reads_the_recorded_speed_and_grid_records() -> None:
    from benchmarks._common import RESULTS

    speed_rows = {r.key: r for r in cost.costs(json.loads((RESULTS / "speed.json").read_text()))}
    assert speed_rows["sequential"].traces == 240
    assert speed_rows["sequential"].calls == 2000.0  # a reflect and a curate call per trace
    grid = json.loads((RESULTS / "grid-routing-3seeds.json").read_text())
    assert all(r.traces == 96 and r.stages[0].stage == "reflect" for r in cost.costs(grid))


def test_the_projection_prices_a_step_as_one_call_per_stage_and_sequential_per_run(
    tmp_path: Path,
) -> None:
    from benchmarks import projection

    def stage(calls: int, tokens_in: int, tokens_out: int) -> dict[str, int]:
        return {"calls": calls, "input_tokens": tokens_in, "output_tokens": tokens_out}

    record = {
        "configs": [
            {
                "key": "t/s0/combee@4",
                "strategy": "combee",
                "steps": 2,
                "accuracy": 0.5,
                "by_stage": {"reflect": stage(8, 800, 80), "aggregate": stage(2, 200, 20)},
            },
            {
                "key": "t/s0/sequential",
                "strategy": "sequential",
                "steps": 2,
                "accuracy": 0.4,
                "by_stage": {"replay": stage(2, 0, 0)},
                "reflect_calls_shared": 8,
                "reflect_tokens_shared": 880,
            },
        ]
    }
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(record))
    out = projection.main([str(path), "--base", "1", "--prefill", "100", "--decode", "10"])
    rows = {r["key"]: r for r in out["rows"]}
    # Per call: 1 s + 100/100 + 10/10 = 3 s; two steps of reflect then aggregate: 12 s.
    assert rows["t/s0/combee@4"]["projected_seconds"] == 12.0
    # Sequential reflects its 8 runs in turn (3 s each) and replays once a step (1 s).
    assert rows["t/s0/sequential"]["projected_seconds"] == 26.0
    assert out["speedup_over_sequential"]["t/s0/combee@4"] == round(26 / 12, 2)
