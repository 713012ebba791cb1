"""The examples run offline and show what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("script", ["offline_learn.py"])
def test_offline_learn_shows_all_three_strategies(script: str) -> None:
    out = _run(script, "--traces", "12", "--batch-size", "6")
    for strategy in ("sequential", "naive", "combee"):
        assert f"\n{strategy} " in out
    assert "speed-up of combee over sequential" in out


def test_create_agent_app_learns_while_serving() -> None:
    out = _run("create_agent_app.py", "--tickets", "60")
    assert "now serving v1" in out
    assert "Tickets about" in out


def test_stategraph_app_learns_in_both_styles() -> None:
    out = _run("stategraph_app.py", "--tickets", "24")
    assert "v1" in out
    assert "accuracy 100%" in out
