"""The blind benchmark's families and runner, offline: structure only, no model quality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.blind import FAMILIES
from benchmarks.blind.__main__ import main
from benchmarks.blind._family import Outcome
from benchmarks.blind._runner import ARMS, fraction_of_gain, run_family


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_runs_every_arm_in_quick_mode(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"blind-{name}.json"
    record = run_family(FAMILIES[name], out=out, quick=True, log=lambda _: None)
    written = json.loads(out.read_text())
    assert written["family"] == name
    assert set(written["arms"]) == set(ARMS) == set(record["arms"])
    for arm, result in written["arms"].items():
        assert "failure" not in result, (arm, result.get("failure"))
        assert 0.0 <= result["score"] <= 1.0
        assert result["seconds"] >= 0.0
        assert len(result["items"]) == written["heldout_size"]
    learned = written["arms"]["learned"]
    assert learned["queue_emptied"] is True
    assert isinstance(learned["rules"], str)
    assert learned["versions"] >= 0
    assert learned["learner_calls"]["calls"] > 0
    assert all(run["feedback_taken"] for run in learned["training"])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_right_answer_scores_one_and_heldout_inputs_are_new(name: str) -> None:
    family = FAMILIES[name]
    assert 12 <= len(family.train) <= 24
    assert 12 <= len(family.heldout) <= 16
    assert not {ex.input for ex in family.train} & {ex.input for ex in family.heldout}
    assert {ex.kind for ex in family.heldout} <= {ex.kind for ex in family.train}
    for example in (*family.train, *family.heldout):
        right = Outcome(text=example.answer, calls=example.calls)
        assert family.score(example, right) == 1.0, example.input
        assert family.score(example, Outcome(text="")) == 0.0, example.input
        assert family.feedback(example, right)["correct"] is True
        assert family.feedback(example, Outcome(text=""))["correct"] is False


def test_sealed_families_say_so_and_dev_families_are_the_first_four() -> None:
    names = list(FAMILIES)
    assert names[:4] == ["replies", "workflow", "mixed", "router"]
    for name, family in FAMILIES.items():
        assert family.sealed is (name not in names[:4])
        module = __import__(f"benchmarks.blind.{name}", fromlist=["FAMILY"])
        assert (
            "sealed: not run during development" in (module.__doc__ or "").lower()
        ) is family.sealed


def test_fraction_of_gain_is_none_without_a_gain_on_offer() -> None:
    arms = {"no_rules": {"score": 0.2}, "hand_rules": {"score": 0.6}, "learned": {"score": 0.4}}
    assert fraction_of_gain(arms) == 0.5
    arms["hand_rules"]["score"] = 0.2
    assert fraction_of_gain(arms) is None
    assert fraction_of_gain({"no_rules": {"score": 0.1}}) is None


def test_the_command_line_writes_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    main(["run", "mixed", "--quick", "--arms", "no_rules,learned", "--out", str(out)])
    assert set(json.loads(out.read_text())["arms"]) == {"no_rules", "learned"}
    assert "fraction of gain" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown arms"):
        main(["run", "mixed", "--quick", "--arms", "nope", "--out", str(out)])
