"""Conventions every reply follows, whatever the request: a bullet of their own form.

A house convention such as "end every reply with the line '- Aldermoor Front
Desk'" holds for every input, so no "When <situation>, <action>." rule can
state it: its situation would be whichever input it was learned from. It is a
bullet of its own form instead, served to every request::

    Every reply must end with the line "- Aldermoor Front Desk".
    Every reply must start with the line "Dear guest,".
    Every reply must include "Prices include VAT".

The agent reads them last, as closing lines of the served prompt (``closing``:
"House style: end every reply with the line ... on its own line."), after the
rules a request names, and not among the rules (``Playbook.render``). Measured
on the bundled 1.5B over 36 questions with six learned rules around, a sign-off
was followed in 23 replies so, in 16 to 18 as a bullet among the rules
(repeated after the focus or not), and in 15 when the closing line came before
the focus (``benchmarks/results/conventions-probes/``). The learner finds conventions in the
feedback (``_rules/conventions.py``); this module is what both sides read.
Pure functions of text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from langgraph_combee._core import words as _words

__all__ = [
    "MAX_CONVENTION_CHARS",
    "Convention",
    "Place",
    "closing",
    "parse_convention",
    "safe_text",
]

Place = Literal["end", "start", "include"]

MAX_CONVENTION_CHARS = 200
"""The longest text a convention may ask for (a sign-off, a disclaimer, a greeting)."""

_FORMS: dict[Place, str] = {
    "end": 'Every reply must end with the line "{}".',
    "start": 'Every reply must start with the line "{}".',
    "include": 'Every reply must include "{}".',
}
# The quoted text runs to the last quote of the line: a convention's text may hold quotes.
_PARSE = re.compile(
    r'\s*every reply must (?:(end|start) with the line|(include)) "(.+)"\.?\s*', re.I | re.S
)


@dataclass(frozen=True)
class Convention:
    """Text every reply must hold: at its end, at its start, or anywhere."""

    place: Place
    text: str

    def content(self) -> str:
        """The convention as a playbook bullet."""
        return _FORMS[self.place].format(self.text)

    def followed(self, reply: str) -> bool | None:
        """Whether ``reply`` holds the text where the convention asks; None when it has no word.

        Compared word by word, case-folded (``words.words``): punctuation, dashes
        and line breaks around or inside the text do not count, so "... at 9:00
        Aldermoor Front Desk." follows "end with the line '- Aldermoor Front Desk'".
        """
        wanted = _words.words(self.text)
        if not wanted:
            return None
        said = _words.words(reply)
        n = len(wanted)
        if self.place == "end":
            return said[-n:] == wanted
        if self.place == "start":
            return said[:n] == wanted
        return any(said[i : i + n] == wanted for i in range(len(said) - n + 1))


_CLOSING: dict[Place, str] = {
    "end": 'House style: end every reply with the line "{}" on its own line.',
    "start": 'House style: start every reply with the line "{}" on its own line.',
    "include": 'House style: include "{}" in every reply.',
}


def closing(conventions: Sequence[Convention]) -> str:
    """The lines that close the served prompt, one per convention ('' for none)."""
    return "\n".join(_CLOSING[c.place].format(c.text) for c in conventions)


# Characters that would start a line of their own, or hide, in the served prompt.
_UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def safe_text(text: str) -> bool:
    """Whether ``text`` may be a convention's: one line of at most ``MAX_CONVENTION_CHARS``,
    with no double quote and no control, format or line-separating character."""
    return (
        0 < len(text) <= MAX_CONVENTION_CHARS
        and '"' not in text
        and not any(unicodedata.category(ch) in _UNSAFE for ch in text)
    )


def parse_convention(content: str) -> Convention | None:
    """The convention a bullet states; None for any other bullet."""
    if len(content) > MAX_CONVENTION_CHARS + 60:
        return None
    found = _PARSE.fullmatch(content)
    if found is None:
        return None
    text = found.group(3).strip()
    if not safe_text(text) or not _words.words(text):
        return None
    place: Place = "include"
    if not found.group(2):
        place = "end" if found.group(1).lower() == "end" else "start"
    return Convention(place, text)
