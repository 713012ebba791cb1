"""LangSmith's feedback spellings, read as ``Combee.feedback()``'s own.

A LangSmith user writes ``client.create_feedback(run_id, key="correctness",
score=0, correction={"output": "FIN-REFUNDS"}, comment=...)``; the same words
work in ``combee.feedback()``:

* ``correction`` is the right answer: ``ground_truth`` (a string, or the
  ``ground_truth``/``answer``/``output``/``expected``/``reference`` entry of a dict);
* ``value`` is a verdict when it is a bool (``correct``), a score when it is a
  number, and a label when it is a string: kept as a ``"<key>: <value>"`` line of
  the comment, which the learner reads;
* ``key`` names the feedback and is recorded as ``Feedback.key``; the keys
  ``correct``, ``correctness`` and ``is_correct`` make a score a verdict too
  (``correct`` when it is at least 0.5), as ``langgraph_combee.langsmith`` reads them.

A keyword ``feedback()`` does not take is refused with this mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_combee._errors import ConfigurationError

CORRECT_KEYS = frozenset({"correct", "correctness", "is_correct"})
TRUTH_KEYS = ("ground_truth", "answer", "output", "expected", "reference")
MAX_KEY = 200  # characters of a feedback key: a name, not a text

ACCEPTED = (
    "feedback() takes score, correct, comment, ground_truth, tenant, source, and LangSmith's "
    "key (recorded; 'correctness' makes a score a verdict), value (a bool: correct; a "
    "number: score; a string: a label line in the comment) and correction (ground_truth)"
)


@dataclass(frozen=True)
class FeedbackFields:
    """The ``Feedback`` fields a ``feedback()`` call gives, LangSmith's spellings read."""

    score: float | None = None
    correct: bool | None = None
    comment: str | None = None
    ground_truth: str | None = None
    key: str | None = None


def refuse_unknown(method: str, unknown: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` for the first keyword ``method`` does not take, with the mapping."""
    for name in unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {name!r}: {ACCEPTED}")


def _truth(correction: object) -> str | None:
    if correction is None or isinstance(correction, str):
        return correction
    if isinstance(correction, Mapping):
        for name in TRUTH_KEYS:
            answer = correction.get(name)
            if isinstance(answer, str):
                return answer
    raise ConfigurationError(
        "correction",
        correction,
        f"None, the right answer as a str, or a dict holding it under one of {list(TRUTH_KEYS)}",
    )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(name: str, number: float) -> float:
    # An int too large for a float would raise OverflowError deep in the call.
    try:
        as_float = float(number)
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise ConfigurationError(name, number, "None or a finite number")
    return as_float


def read(
    *,
    score: float | None,
    correct: bool | None,
    comment: str | None,
    ground_truth: str | None,
    key: str | None,
    value: object,
    correction: object,
) -> FeedbackFields:
    """The fields of a ``feedback()`` call, LangSmith's ``key``/``value``/``correction`` read.

    Raises:
        ConfigurationError: A LangSmith spelling and its own field are both given
            (``value=True`` with ``correct=``, ``correction=`` with
            ``ground_truth=``), or a value has a type it cannot have.
    """
    if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY):
        raise ConfigurationError(
            "key", key, f"None or a non-empty str of at most {MAX_KEY} characters (a name)"
        )
    if _number(score):
        score = _finite("score", score)  # type: ignore[arg-type]
    if correction is not None:
        if ground_truth is not None:
            raise ConfigurationError(
                "correction", correction, "omitted when ground_truth is given (the same field)"
            )
        ground_truth = _truth(correction)
    if isinstance(value, bool):
        if correct is not None:
            raise ConfigurationError("value", value, "omitted when correct is given")
        correct = value
    elif _number(value):
        if score is not None:
            raise ConfigurationError("value", value, "omitted when score is given")
        score = _finite("value", value)  # type: ignore[arg-type]
    elif isinstance(value, str):
        label = f"{key or 'label'}: {value}"
        comment = label if not comment else f"{comment}\n{label}"
    elif value is not None:
        raise ConfigurationError("value", value, "None, a bool, a number or a str")
    known = key in CORRECT_KEYS and correct is None and score is not None
    if known and _number(score) and math.isfinite(score):  # type: ignore[arg-type]
        correct = score >= 0.5  # type: ignore[operator]
    return FeedbackFields(
        score=score, correct=correct, comment=comment, ground_truth=ground_truth, key=key
    )
