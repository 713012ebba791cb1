"""The shape of a blind task family: inputs, right answers, feedback, held-out set, rules.

A family is plain data plus two small functions: ``score`` (how right an outcome
is, from 0 to 1) and ``feedback`` (the keyword arguments of ``combee.feedback``
a production app would send for a training run). The runner knows nothing else
about a family.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One tool call an agent run made: the tool's name and its arguments as text."""

    name: str
    args: Mapping[str, str]

    def render(self) -> str:
        """The call written as Python, e.g. ``get_order(order_id='A-1')``."""
        inner = ", ".join(f"{key}={value!r}" for key, value in self.args.items())
        return f"{self.name}({inner})"


@dataclass(frozen=True)
class Outcome:
    """What one agent run produced: its final text, the tool calls it made, its error."""

    text: str
    calls: tuple[Call, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Example:
    """One input of a family.

    Attributes:
        input: The user's message.
        kind: Which kind of request it is (the convention it falls under).
        answer: The right answer: the reference reply, the label, or the tool calls
            written as Python (what a few-shot example shows).
        calls: For tool families, the right tool calls in order.
    """

    input: str
    kind: str
    answer: str
    calls: tuple[Call, ...] = ()


ScoreFn = Callable[[Example, Outcome], float]
FeedbackFn = Callable[[Example, Outcome], dict[str, Any]]


@dataclass(frozen=True)
class Family:
    """A blind task family.

    Attributes:
        name: Short id used on the command line.
        title: One line saying what it is.
        sealed: True for the families kept for later measurement (not run during
            development).
        system_prompt: The app's own system prompt (the no-rules arm).
        rules: The rules a competent engineer would add to the system prompt.
        train: The labelled training runs.
        heldout: Held-out inputs, in other words than the training ones.
        score: How right an outcome is (0 to 1).
        feedback: The ``combee.feedback`` keyword arguments for a training run; an empty
            dict for a run that gets no feedback (nothing is sent).
        tools: Plain Python functions the agent may call (none for text tasks).
        feedback_kind: How feedback is given, in a few words (for the record).
    """

    name: str
    title: str
    sealed: bool
    system_prompt: str
    rules: str
    train: tuple[Example, ...]
    heldout: tuple[Example, ...]
    score: ScoreFn
    feedback: FeedbackFn
    tools: tuple[Callable[..., str], ...] = ()
    feedback_kind: str = ""
    notes: dict[str, str] = field(default_factory=dict)


_SPACES = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\"'`*.:]+|[\s\"'`*.:]+$")


def normalise(text: str) -> str:
    """Lower case, one space between words, typographic dashes as ``-``."""
    text = text.replace("\u2013", "-").replace("\u2014", "-").replace("\u2011", "-")
    return _SPACES.sub(" ", text).strip().lower()


def bare(text: str) -> str:
    """``normalise`` plus quotes, asterisks, colons and full stops stripped at both ends."""
    return _EDGE.sub("", normalise(text))


_REPLY_EDGE = "\"'`*#> "


def keeps_convention(how: str, phrase: str, reply: str, value: str | None = None) -> float:
    """1 when ``reply`` keeps a house convention, case and spacing aside, else 0.

    ``how``: ``"value"`` (``value`` quoted back as a whole word), ``"starts"``
    (it opens with ``phrase``), ``"ends"`` (``phrase`` closes it, final punctuation
    or a few characters after it allowed), anything else (``phrase`` is in it).
    """
    text = normalise(reply).strip(_REPLY_EDGE)
    if how == "value":
        wanted = re.escape(normalise(value or ""))
        return 1.0 if re.search(rf"(?<![\w-]){wanted}(?![\w-])", text) else 0.0
    if how == "starts":
        return 1.0 if text.startswith(phrase) else 0.0
    if how == "ends":
        return 1.0 if phrase in text[-len(phrase) - 20 :] else 0.0
    return 1.0 if phrase in text else 0.0


def label_score(example: Example, outcome: Outcome) -> float:
    """1 when the reply is the label alone (case, spaces, quotes and final stop aside)."""
    return 1.0 if bare(outcome.text) == bare(example.answer) else 0.0


def label_feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """Right or wrong, with the right label (an operator's correction)."""
    right = label_score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


def made_calls(outcome: Outcome) -> list[Call]:
    """The calls of a run, a call repeated at once with the same arguments counted once."""
    calls: list[Call] = []
    for call in outcome.calls:
        if calls and calls[-1].name == call.name and calls[-1].args == call.args:
            continue
        calls.append(call)
    return calls


def same_value(got: str | None, want: str) -> bool:
    """Argument values compared trimmed and case-insensitively."""
    return got is not None and normalise(got) == normalise(want)


def wrong_fields(
    example: Example, outcome: Outcome, tool: str, fields: Sequence[str]
) -> list[str] | None:
    """The ``fields`` of the run's one ``tool`` call with a wrong value (against the example's
    first call), or None when the run made no single call of ``tool``."""
    calls = made_calls(outcome)
    if len(calls) != 1 or calls[0].name != tool:
        return None
    want = example.calls[0].args
    return [key for key in fields if not same_value(calls[0].args.get(key), want[key])]


def written_calls(calls: tuple[Call, ...]) -> str:
    """Calls written as Python, one after the other (a few-shot answer)."""
    return "; then ".join(call.render() for call in calls)
