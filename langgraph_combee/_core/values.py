"""The values a text names: what an answer following it must carry literally.

A value is a token holding a digit or an upper-case code of two or more letters
(``FIN-7Q``, ``SORRY10``, ``FW-AUR-EU``, ``NW-1``, ``2FA``), or a quoted string
(``'customer_request'``). The learner's rules layer reads the values of a
rule's action to tell two actions apart and to check that an answer followed a
rule; lexical de-duplication reads those of whole bullets so that two rules
naming different values are never folded into one (that would hide a
contradiction the rules layer settles, and lose one of its sides).

Pure functions of text.
"""

from __future__ import annotations

import re

__all__ = ["FROM_INPUT", "values"]

FROM_INPUT = "the value in the input"
"""What a value copied from the run's input reads as in a learned action (no value itself)."""

# A value worth looking for in an answer: a token with a digit or an upper-case code,
# or a quoted string.
_VALUE = re.compile(r"['\"`]([^'\"`]{1,60})['\"`]|\b([A-Za-z]*\d[\w-]*|[A-Z]{2,}[\w-]*)\b")


def values(text: str) -> frozenset[str]:
    """The specific values ``text`` names (codes, numbers, quoted strings), as written.

    ``FROM_INPUT`` stands for each run's own value, so it is none. The text is
    read as given: a caller comparing texts that may be written in full-width
    forms normalises them first (NFKC).
    """
    found = set()
    for quoted, token in _VALUE.findall(text):
        value = (quoted or token).strip()
        if value and value != FROM_INPUT:
            found.add(value)
    return frozenset(found)
