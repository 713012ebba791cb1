"""The guard's verdict on each rule text of ``tests/guard/cases/*.json``.

One file per verdict; each case is one rule text and what ``BulletGuard`` must
make of it:

* ``refused.json``: ``check`` refuses the text, one of its reasons naming one of
  ``reasons`` (at the start of the reason, or anywhere in it: ``reason_at``);
* ``held.json``: ``policy`` holds it for a person, with one of ``reasons`` if
  the case names any;
* ``passes.json``: each reading in ``readings`` (``policy``, ``check``) finds
  nothing.

``family`` names the behaviour the case pins (the file's ``families`` say why
where there is more to say), ``note`` what this case adds to it, and
``written_as`` how a text that is hard to read was made (reversed, rot13, hex).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langgraph_combee import BulletGuard

CASES = Path(__file__).parent / "cases"
VERDICTS = ("refused", "held", "passes")
READINGS = ("policy", "check")
FIELDS = {"family", "text", "readings", "reasons", "reason_at", "note", "written_as"}


def _problems(verdict: str, data: Any) -> list[str]:
    """What is wrong with one cases file, read as ``verdict``: nothing for a valid file."""
    if not isinstance(data, dict) or set(data) != {"families", "cases"}:
        return [f"{verdict}: the file holds 'families' and 'cases' only, got {data!r:.80}"]
    families, cases = data["families"], data["cases"]
    problems = []
    if not isinstance(families, dict) or not all(isinstance(why, str) for why in families.values()):
        problems.append(f"{verdict}: 'families' maps a family to why it is pinned")
        families = {}
    if not isinstance(cases, list) or not cases:
        return [*problems, f"{verdict}: 'cases' is a non-empty list"]
    for i, case in enumerate(cases):
        where = f"{verdict}[{i}]"
        if not isinstance(case, dict):
            problems.append(f"{where}: a case is an object, got {case!r:.80}")
            continue
        if unknown := set(case) - FIELDS:
            problems.append(f"{where}: unknown fields {sorted(unknown)}; allowed: {sorted(FIELDS)}")
        if not isinstance(case.get("text"), str) or not case["text"]:
            problems.append(f"{where}: 'text' is a non-empty string, got {case.get('text')!r}")
        if case.get("family") not in families:
            problems.append(f"{where}: family {case.get('family')!r} is not in 'families'")
        readings = case.get("readings")
        if verdict == "passes":
            if not readings or not set(readings) <= set(READINGS):
                problems.append(f"{where}: 'readings' is a list of {READINGS}, got {readings!r}")
        elif readings is not None:
            problems.append(f"{where}: 'readings' belongs to passing cases only")
        reasons = case.get("reasons")
        if verdict == "passes" and reasons is not None:
            problems.append(f"{where}: a passing case has no 'reasons'")
        if verdict == "refused" and not reasons:
            problems.append(f"{where}: a refused case names its 'reasons'")
        if reasons is not None and (
            not isinstance(reasons, list)
            or not reasons
            or not all(isinstance(r, str) and r for r in reasons)
        ):
            problems.append(f"{where}: 'reasons' is a list of fragments, got {reasons!r}")
        if (reasons is None) != (case.get("reason_at") is None):
            problems.append(f"{where}: 'reason_at' goes with 'reasons' and only with them")
        if case.get("reason_at") not in (None, "start", "anywhere"):
            problems.append(
                f"{where}: 'reason_at' is 'start' or 'anywhere', got {case['reason_at']!r}"
            )
        for field in ("note", "written_as"):
            if field in case and not isinstance(case[field], str):
                problems.append(f"{where}: {field!r} is a string, got {case[field]!r}")
    return problems


def _load() -> dict[str, Any]:
    return {v: json.loads((CASES / f"{v}.json").read_text(encoding="utf-8")) for v in VERDICTS}


def _params() -> list[Any]:
    params = []
    for verdict, data in _load().items():
        counts: dict[str, int] = {}
        for case in data["cases"]:
            n = counts[case["family"]] = counts.get(case["family"], 0) + 1
            params.append(pytest.param(verdict, case, id=f"{verdict}-{case['family']}-{n}"))
    return params


def test_every_cases_file_follows_the_schema() -> None:
    assert sorted(p.name for p in CASES.iterdir()) == sorted(f"{v}.json" for v in VERDICTS)
    loaded = _load()
    assert {v: _problems(v, data) for v, data in loaded.items()} == {v: [] for v in VERDICTS}
    # The schema check itself refuses what it should.
    assert _problems("passes", {"families": {}, "cases": [{"text": "x", "family": "f"}]})
    assert _problems("refused", {"families": {"f": ""}, "cases": [{"text": "x", "family": "f"}]})
    # Every family named is used.
    for verdict, data in loaded.items():
        assert set(data["families"]) == {c["family"] for c in data["cases"]}, verdict


def _has_reason(reasons: list[str], case: dict[str, Any]) -> bool:
    if case["reason_at"] == "start":
        return any(r.startswith(f) for r in reasons for f in case["reasons"])
    return any(f in r for r in reasons for f in case["reasons"])


@pytest.mark.parametrize(("verdict", "case"), _params())
def test_the_guard_reads_each_case_as_pinned(verdict: str, case: dict[str, Any]) -> None:
    text = case["text"]
    if verdict == "refused":
        reasons = BulletGuard().check(text)
        assert _has_reason(reasons, case), reasons
    elif verdict == "held":
        reasons = BulletGuard().policy(text)
        assert reasons, text
        if "reasons" in case:
            assert _has_reason(reasons, case), text
    else:
        for reading in case["readings"]:
            assert getattr(BulletGuard(), reading)(text) == [], text
