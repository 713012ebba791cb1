"""Words of a text in any script, as the rules layer compares them.

A word is a run of letters and digits of any script together with the
combining marks written on them (the vowel signs of Devanagari, Thai tone
marks, Arabic harakat): Python's ``\\w`` leaves marks out, which would cut
"हिन्दी" into single letters. Text is NFKC-normalised first, so a letter
written precomposed or as a base and an accent, and full-width or half-width
forms, are one word; words are compared case-folded. Accents are kept: "tâche"
and "tache" are two words.

Scripts written without spaces between words (Han, Hiragana, Katakana, Thai,
Lao, Khmer, Myanmar) have no word boundaries to find. Their runs are read as
overlapping pairs of characters (a character alone stays one word): two texts
that share a term share its pairs, whatever is written around it. Hangul is
written with spaces and is read as words.

Pure functions; the character classes are built once, on first use.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# Blocks of the scripts written without spaces between words.
_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals
    "\u3005\u3007\u3021-\u3029\u3038-\u303c"  # ideographic iteration marks and numbers
    "\u3040-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\U00020000-\U0003ffff"  # Han extensions
)
CHARS_PER_WORD = 3
"""Characters of a script without spaces counted as one word where words are counted."""


@dataclass(frozen=True)
class _Patterns:
    run: re.Pattern[str]
    cluster: re.Pattern[str]
    token: re.Pattern[str]
    unspaced: re.Pattern[str]


def _ranges(code_points: list[int]) -> str:
    parts: list[str] = []
    start = prev = code_points[0]
    for cp in [*code_points[1:], -1]:
        if cp == prev + 1:
            prev = cp
            continue
        parts.append(re.escape(chr(start)) + (f"-{re.escape(chr(prev))}" if prev > start else ""))
        start = prev = cp
    return "".join(parts)


@functools.cache
def _patterns() -> _Patterns:
    # Combining marks of every script (Unicode category M); built on first use, as
    # reading the Unicode tables takes some tens of milliseconds. Past U+1FFFF only
    # the variation selectors (U+E0100-U+E01EF) are marks.
    planes = [*range(0x20000), *range(0xE0000, min(sys.maxunicode, 0xE0FFF) + 1)]
    marks = _ranges([c for c in planes if unicodedata.category(chr(c)).startswith("M")])
    u, m = _UNSPACED, marks
    letter = r"[^\W_]"
    unspaced = f"(?:(?=[{u}]){letter}[{m}]*)+"
    spaced = f"(?:[^\\W_{u}][{m}]*)+"
    return _Patterns(
        run=re.compile(f"(?P<unspaced>{unspaced})|{spaced}"),
        cluster=re.compile(f"[^{m}][{m}]*"),
        token=re.compile(f"{letter}[{m}]*(?:(?:{letter}|['-])[{m}]*)*"),
        unspaced=re.compile(f"[{u}]"),
    )


_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded, in order; scripts without spaces as pairs.

    ``"Ma réservation"`` -> ``["ma", "réservation"]``; ``"退款申请"`` ->
    ``["退款", "款申", "申请"]``; ``"书"`` -> ``["书"]``.
    """
    if text.isascii():
        # The common case, read without the Unicode classes: the same words.
        return _ASCII_WORD.findall(text.lower())
    found: list[str] = []
    patterns = _patterns()
    for match in patterns.run.finditer(_fold(text)):
        run = match.group()
        if match.lastgroup != "unspaced":
            found.append(run)
            continue
        letters = patterns.cluster.findall(run)
        if len(letters) == 1:
            found.append(run)
        else:
            found.extend(a + b for a, b in itertools.pairwise(letters))
    return found


def normalised(text: str) -> str:
    """``text`` as its words alone, case-folded, one space apart.

    Runs of a script without spaces are joined whatever stood between them
    (``"回答“珊瑚”"`` and ``"回答珊瑚"`` are one text), as words of other scripts
    are joined with one space whatever punctuation stood between them.
    """
    if text.isascii():
        return " ".join(_ASCII_WORD.findall(text.lower()))
    parts: list[str] = []
    glue = False
    for match in _patterns().run.finditer(_fold(text)):
        unspaced = match.lastgroup == "unspaced"
        if unspaced and glue:
            parts[-1] += match.group()
        else:
            parts.append(match.group())
        glue = unspaced
    return " ".join(parts)


def is_unspaced(word: str) -> bool:
    """Whether ``word`` starts with a letter of a script written without spaces."""
    return _patterns().unspaced.match(word) is not None


def tokens(text: str) -> Iterator[re.Match[str]]:
    """The words of ``text`` as written: letters, digits and marks, joined by ``'`` or ``-``."""
    return _patterns().token.finditer(text)


def word_count(token: str) -> int:
    """How many words a token counts for: one, or one per ``CHARS_PER_WORD`` characters.

    The characters counted are those of a script without spaces, where a copied
    sentence is one token.
    """
    unspaced = len(_patterns().unspaced.findall(token))
    return max(1, math.ceil(unspaced / CHARS_PER_WORD))
