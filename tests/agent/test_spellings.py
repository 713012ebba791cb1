"""``feedback()`` takes LangSmith's spellings: key, score, value, correction, comment."""

from __future__ import annotations

import pytest

from langgraph_combee import Combee, Feedback, Trace
from langgraph_combee.errors import ConfigurationError


def _stored(combee: Combee, trace_id: str = "run-1") -> Feedback:
    (trace,) = combee.queue().claim(1, holder="test", trace_ids=[trace_id])
    assert trace.feedback is not None
    return trace.feedback


@pytest.fixture
def combee() -> Combee:
    combee = Combee(prompt_id="spelled")
    combee.queue().put(Trace(id="run-1", input="I want a refund", output="BILLING"))
    return combee


def test_a_langsmith_correction_and_correctness_key_read_as_ground_truth_and_verdict(
    combee: Combee,
) -> None:
    assert combee.feedback(
        "run-1", key="correctness", score=0, correction="FIN-REFUNDS", comment="wrong team"
    )
    fb = _stored(combee)
    assert (fb.correct, fb.score, fb.ground_truth) == (False, 0.0, "FIN-REFUNDS")
    assert (fb.key, fb.comment, fb.source) == ("correctness", "wrong team", "user")


def test_a_correction_dict_gives_its_output(combee: Combee) -> None:
    combee.feedback("run-1", correction={"output": "FIN-REFUNDS"})
    assert _stored(combee).ground_truth == "FIN-REFUNDS"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"value": True}, {"correct": True}),
        ({"value": 0.25, "key": "helpfulness"}, {"score": 0.25, "key": "helpfulness"}),
        (
            {"value": "billing", "key": "category"},
            {"comment": "category: billing", "key": "category"},
        ),
        ({"value": "billing", "comment": "said so"}, {"comment": "said so\nlabel: billing"}),
        ({"key": "is_correct", "score": 1}, {"correct": True, "score": 1.0, "key": "is_correct"}),
    ],
)
def test_langsmith_values_map_to_feedback_fields(
    combee: Combee, given: dict[str, object], expected: dict[str, object]
) -> None:
    combee.feedback("run-1", **given)  # type: ignore[arg-type]
    stored = _stored(combee).model_dump(exclude_none=True)
    assert stored == {"source": "user", **expected}


async def test_afeedback_takes_the_same_spellings(combee: Combee) -> None:
    assert await combee.afeedback("run-1", key="correctness", value=False, correction="FIN")
    fb = _stored(combee)
    assert (fb.correct, fb.ground_truth, fb.key) == (False, "FIN", "correctness")


def test_an_unknown_keyword_is_refused_with_the_mapping(combee: Combee) -> None:
    with pytest.raises(TypeError) as caught:
        combee.feedback("run-1", feedback_source_type="api", score=1)  # type: ignore[call-arg]
    message = str(caught.value)
    assert "unexpected keyword argument 'feedback_source_type'" in message
    assert "correction (ground_truth)" in message
    assert "value (a bool: correct; a number: score; a string: a label line" in message


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"correction": "A", "ground_truth": "B"}, "correction='A' is not allowed: omitted when"),
        ({"value": True, "correct": False}, "value=True is not allowed: omitted when correct"),
        ({"value": 0.5, "score": 1.0}, "value=0.5 is not allowed: omitted when score"),
        ({"value": [1], "score": 1.0}, r"value=\[1\] is not allowed: None, a bool"),
        ({"correction": {"id": 3}}, r"correction=\{'id': 3\} is not allowed"),
        ({"key": "", "score": 1.0}, "key='' is not allowed"),
        # An int too large for a float is refused as such, not an OverflowError.
        ({"value": 10**400}, "value=1000.* is not allowed: None or a finite number"),
        ({"score": -(10**400)}, "score=-1000.* is not allowed: None or a finite number"),
        ({"score": 10**400, "key": "correctness"}, "score=1000.* is not allowed"),
    ],
)
def test_contradicting_or_ill_typed_spellings_are_refused(
    combee: Combee, given: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        combee.feedback("run-1", **given)  # type: ignore[arg-type]
