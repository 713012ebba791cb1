"""The text form of a learned rule, ``When <situation>, <action>.``, and how the agent reads it.

Both role profiles write rules in this form (the learning layer's ``rules``
module matches, folds and corrects them); the agent reads a rule whose action
is a plain answer in a denser form, ``<alternative>, <alternative>: <answer>``
(``compact``), which the small local model applied better: measured on the
1.5B with the same 24 learned rules and 32 held-out tickets, 47% as ``When ...,
answer ...`` lines and 56% in the dense form (50% and 53% with an earlier
playbook; one run each), as in the hand-written rules' own ``Refund, money back: FIN-7Q``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(
    r"^\s*(?:when|if|for)\s+(?P<situation>[^,]+?),\s*(?P<action>.+?)\s*$", re.I | re.S
)
_ALTERNATIVE = re.compile(r"\s+or\s+|\s*;\s*", re.I)
_ANSWER = re.compile(r"^answer\s+(?P<value>\S(?:.*\S)?)$", re.I | re.S)
MAX_ANSWER_CHARS = 60
"""Longest answer the dense form shows; a longer action reads as a sentence."""


@dataclass(frozen=True)
class Rule:
    """A rule split into the situation it applies to and the action it asks for."""

    situation: str
    action: str

    def text(self) -> str:
        """The rule as a playbook line: ``When <situation>, <action>.``."""
        return f"When {self.situation}, {self.action.rstrip('.')}."


def parse_rule(text: str) -> Rule | None:
    """Split ``"When <situation>, <action>."`` into its parts; None for other text."""
    match = _RULE.match(text)
    if match is None:
        return None
    return Rule(match["situation"].strip(), match["action"].strip().rstrip("."))


def alternatives(situation: str) -> list[str]:
    """The alternatives of a situation: ``"A or B; C"`` -> ``["A", "B", "C"]``."""
    parts = [p.strip() for p in _ALTERNATIVE.split(situation)]
    return [p for p in parts if p] or [situation.strip()]


def compact(text: str) -> str | None:
    """``When A or B, answer X.`` as ``A, B: X``; None for any other rule.

    Only a rule whose action is ``answer <value>``, the value on one line and
    short, with no colon in its situation (which would blur where the answer
    starts), is written this way.
    """
    rule = parse_rule(text)
    if rule is None:
        return None
    match = _ANSWER.match(rule.action)
    if match is None:
        return None
    value = match["value"].strip().strip("'\"`")
    parts = alternatives(rule.situation)
    if not value or "\n" in value or len(value) > MAX_ANSWER_CHARS:
        return None
    if any(":" in p or "\n" in p for p in parts):
        return None
    return f"{', '.join(parts)}: {value}"
