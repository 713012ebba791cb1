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
import unicodedata
from datetime import date

__all__ = [
    "DIGITS_ONLY",
    "FROM_INPUT",
    "IN_CENTS",
    "asked_and_refused",
    "converted",
    "described_in",
    "descriptions",
    "holds",
    "slots",
    "undescribed",
    "values",
    "writes",
]

FROM_INPUT = "the value in the input"
"""What a value copied from the run's input reads as in a learned action (no value itself)."""

IN_CENTS = f"{FROM_INPUT}, in cents, digits only"
"""An amount of the input written in hundredths (EUR 24.90 -> 2490)."""
DIGITS_ONLY = f"{FROM_INPUT}, digits only"
"""A number of the input without its separators (1,250 -> 1250)."""
_DATE_FORMATS = {
    "YYYYMMDD": "%Y%m%d",
    "YYYY-MM-DD": "%Y-%m-%d",
    "YYYY/MM/DD": "%Y/%m/%d",
    "DD/MM/YYYY": "%d/%m/%Y",
    "MM/DD/YYYY": "%m/%d/%Y",
    "DD.MM.YYYY": "%d.%m.%Y",
    "DD-MM-YYYY": "%d-%m-%Y",
}


def _as_date(layout: str) -> str:
    return f"{FROM_INPUT}, as a date written {layout}"


# Every description a learned action may hold in place of a value: none is a value.
_DESCRIBED = re.compile(
    "|".join(
        re.escape(d)
        for d in sorted(
            [
                IN_CENTS,
                DIGITS_ONLY,
                *map(_as_date, _DATE_FORMATS),
                FROM_INPUT,
            ],
            key=len,
            reverse=True,
        )
    )
)


def descriptions(text: str) -> frozenset[str]:
    """The descriptions of a value ``text`` holds ("the value in the input, digits only")."""
    return frozenset(_DESCRIBED.findall(text))


# A value of an answer: a quoted string, a date or number written with dots or slashes,
# or a token holding a digit.
_ANSWER_VALUE = re.compile(
    r"['\"`]([^'\"`\n]{1,60})['\"`]"
    r"|(?<![\w./-])(\d{1,4}(?:[./]\d{1,4}){1,2})(?![\w/-]|\.\d)"
    r"|(?<![\w-])([\w-]*\d[\w-]*)(?![\w-])"
)


def described_in(answer: str, source: str) -> frozenset[str]:
    """How the values of ``answer`` (a right answer) are ``source``'s values, as descriptions.

    ``FROM_INPUT`` for a value ``source`` holds as written, the written form
    (``converted``) for one it holds another way: the descriptions a learned
    action may carry in place of the values of this answer.
    """
    found: set[str] = set()
    candidates = [answer.strip()] + [
        next(g for g in m.groups() if g) for m in _ANSWER_VALUE.finditer(answer)
    ]
    for value in candidates:
        if not value or not re.search(r"\d", value):
            continue
        if holds(value, source):
            found.add(FROM_INPUT)
        elif (described := converted(value, source)) is not None:
            found.add(described)
    return frozenset(found)


def writes(description: str, answer: str, source: str) -> bool | None:
    """Whether ``answer`` holds a date of ``source`` written as the date ``description`` says.

    ``described_in`` gives an ambiguous date one layout ("03/03/2025" is read as
    DD/MM/YYYY); this says whether the other layout fits it too. False for a
    description that is not a date's; None when ``source`` holds no date.
    """
    layout = next((k for k in _DATE_FORMATS if _as_date(k) == description), None)
    if layout is None:
        return False
    days = _dates(source)
    if not days:
        return None
    return any(holds(day.strftime(_DATE_FORMATS[layout]), answer) for day in days)


def undescribed(text: str) -> str:
    """``text`` without the descriptions a learned action holds in place of a value.

    They are the learner's own words ("the value in the input, as a date written
    DD.MM.YYYY"), not words of any run: provenance reads a rule without them.
    """
    return _DESCRIBED.sub(" ", text)


# A value worth looking for in an answer: a token with a digit or an upper-case code,
# or a quoted string.
_VALUE = re.compile(r"['\"`]([^'\"`]{1,60})['\"`]|\b([A-Za-z]*\d[\w-]*|[A-Z]{2,}[\w-]*)\b")
# English words a writer puts in capitals for emphasis ("ALWAYS answer FIN-7Q", "you
# MUST call lookup_order FIRST"), and negations in capitals ("NOT", "CANNOT"): not
# values where they qualify the words around them. An answer following such a rule
# does not write them, so read as values they made every answer look as if it ignored
# the rule, and two wordings of one action look like two actions. Where such a word is
# what the action gives, it is a value: an argument (``slot=BEFORE``, ``(NEVER)``) or
# the word a reply verb gives, ending its clause ("answer NEVER."). Quoted, any of
# these is a value; words an answer may be (YES, NO, NONE, ALL, OR) are not in it.
_EMPHASIS = frozenset((
    "ALWAYS", "NEVER", "NOT", "MUST", "SHOULD", "SHALL", "ONLY", "DO", "DOES", "DON", "DONT",
    "DOESN", "EXACTLY", "STRICTLY", "PLEASE", "AND", "BUT", "IF", "THEN", "THE", "YOU",
    "YOUR", "WHEN", "UNLESS", "EXCEPT", "INSTEAD", "FIRST", "BEFORE", "AFTER", "NOTHING",
    "EVERY", "IMMEDIATELY", "ALONE",
))  # fmt: skip
# Words that head a remark ("IMPORTANT: ...", "**NOTE** - ..."): emphasis at the start
# of the text, a line or a sentence, before a colon, an exclamation mark or a dash; a
# value elsewhere ("classify as CRITICAL: page the on-call engineer").
_HEADINGS = frozenset(
    ("IMPORTANT", "NOTE", "CRITICAL", "WARNING", "REQUIRED", "MANDATORY", "REMEMBER")
)
_HEADING_MARK = re.compile(r"[*_]*\s*(?:[:!]|-\s|\u2013|\u2014)")
_HEADING_START = re.compile(r"(?:^|[\n.!?])[\s*_#>]*$")
# What gives the word as the action's own: an argument, or a reply verb before it.
_ARGUMENT = re.compile(r"[=(]\s*$")
_REPLY_VERB = re.compile(
    r"\b(?:answer|answers|reply|replies|respond|responds|return|returns|say|says|write|writes"
    r"|output|outputs|route to|routes to|send to|classify as|label as|label|mark as|set to)"
    r"\s+$",
    re.IGNORECASE,
)
_CLAUSE_CLOSE = re.compile(r"\s*(?:$|[.,;:!?)\]\n\u2013\u2014]|\s-\s)")
# An apostrophe between letters ("don't", "customer's", "l'état") opens no quoted value.
_INNER_APOSTROPHE = re.compile(r"(?<=[^\W\d_])'(?=[^\W\d_])")


def _qualifier(read: str, start: int, end: int) -> bool:
    """Whether the capitals word at ``read[start:end]`` qualifies its words (no value)."""
    word = read[start:end]
    before = read[:start]
    if _ARGUMENT.search(before):
        return False  # slot=BEFORE
    if _REPLY_VERB.search(before) and _CLAUSE_CLOSE.match(read, end):
        return False  # answer NEVER.
    if word in _HEADINGS:
        return bool(_HEADING_START.search(before) and _HEADING_MARK.match(read, end))
    if word in _EMPHASIS:
        return True
    neg = _NEGATION.match(read, start)  # CANNOT, WITHOUT, the WON of WON'T
    return bool(neg and neg.end() >= end)


def _found(text: str) -> list[tuple[int, int, str]]:
    """The values of ``text`` as (start, end, value as written), qualifiers left out.

    ``text`` is read with an apostrophe inside a word as another character, so
    that "the customer's order" opens no quoted value; each value is taken from
    ``text`` as written.
    """
    read = _INNER_APOSTROPHE.sub("\u2019", text)  # one character for another
    out: list[tuple[int, int, str]] = []
    for m in _VALUE.finditer(read):
        group = 1 if m.group(1) is not None else 2
        value = text[m.start(group) : m.end(group)].strip()
        if group == 2 and value.isalpha() and _qualifier(read, m.start(2), m.end(2)):
            continue
        out.append((m.start(), m.end(), value))
    return out


def values(text: str) -> frozenset[str]:
    """The specific values ``text`` names (codes, numbers, quoted strings), as written.

    ``FROM_INPUT`` stands for each run's own value, so it is none. Words in
    capitals for emphasis ("ALWAYS", "MUST", "NOT") are none, and an apostrophe
    inside a word ("don't") opens no quoted value. The text is read as given: a
    caller comparing texts that may be written in full-width forms normalises
    them first (NFKC).
    """
    return frozenset(value for _, _, value in _found(undescribed(text)) if value)


# A negation: "not" (but not "not only"), "never", a contraction ("don't", "can't"), ...
_NEGATION = re.compile(
    r"\b(?:do not|does not|did not|cannot|dont|doesnt|never|not(?!\s+only\b)|avoid|without"
    r"|instead of|rather than|[A-Za-z]+n[\u2019']t)\b",
    re.IGNORECASE,
)
# Where the clause a negation governs ends: a mark, a line's end, a dash or a bracket,
# or a word that opens another clause ("do not escalate and answer FIN-7Q"; "never
# answer anything but FIN-7Q"). "and" followed by a value stays in the clause: "do
# not answer FIN-7Q and PAY-2D" refuses both. Read with every value masked as NULs.
_CLAUSE_END = re.compile(
    r"[,.;:!?\n()\[\]\u2013\u2014]|\s-\s|\b(?:but|except|then|other than)\b"
    r"|\band\b(?!\s*\0)",
    re.IGNORECASE,
)


def asked_and_refused(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The values ``text`` asks for, and those it names under a negation.

    ``answer FIN-7Q, not PAY-2D`` asks for FIN-7Q and refuses PAY-2D; ``do not
    answer FIN-7Q`` refuses FIN-7Q. A negation governs its clause up to the next
    mark, dash, bracket or line end, or a word opening another clause ("do not
    escalate and answer FIN-7Q" asks for FIN-7Q; so does "never answer anything
    but FIN-7Q"). A negation word inside a quoted value ("'Not sure'") is part
    of the value, not a negation; one written in capitals ("Do NOT", "NEVER") is
    a negation, not a value. Values otherwise as ``values`` reads them.
    """
    written = undescribed(text)
    text = _INNER_APOSTROPHE.sub("\u2019", written)  # one character for another
    found = _found(written)
    if not found:
        return frozenset(), frozenset()
    # Negations are looked for with every value masked, positions kept.
    masked = list(text)
    for start, end, _ in found:
        masked[start:end] = "\0" * (end - start)
    plain = "".join(masked)
    spans: list[tuple[int, int]] = []
    for neg in _NEGATION.finditer(plain):
        close = _CLAUSE_END.search(plain, neg.end())
        spans.append((neg.start(), close.start() if close else len(plain)))
    asked: set[str] = set()
    refused: set[str] = set()
    for at, _, value in found:
        if value:
            (refused if any(a <= at < b for a, b in spans) else asked).add(value)
    return frozenset(asked), frozenset(refused)


def slots(text: str) -> tuple[str, tuple[str, ...]] | None:
    """``text`` with each value it names as ``{}`` (case-folded), and its values in order.

    None when it names no value. Read in NFKC form, so a code written in full-width
    letters is the same code; the values are case-folded too (``'Yes'`` and
    ``'yes'`` are one value). Two texts of one shape ask for the same kind of
    thing, with the same values or with others (``answer PAY-2D`` and ``answer
    SEC-9D``; ``pass cabin='economy'`` and ``pass cabin='business'``).
    """
    text = undescribed(unicodedata.normalize("NFKC", text))
    # A description ("'the value in the input'") leaves an empty value: a slot, no value.
    spans = _found(text)
    found = [v for _, _, value in spans if (v := value.casefold())]
    if not found:
        return None
    parts, at = [], 0
    for start, end, _ in spans:
        parts += [text[at:start], "{}"]
        at = end
    shape = " ".join(("".join(parts) + text[at:]).casefold().rstrip(". ").split())
    return shape, tuple(found)


_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTH = r"(?P<month>[A-Za-z]{3,9})\.?"
_DATES = (
    re.compile(r"(?<!\d)(?P<year>\d{4})-(?P<mm>\d{1,2})-(?P<day>\d{1,2})(?!\d)"),
    re.compile(
        rf"(?<!\d)(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})"
    ),
    re.compile(rf"{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})"),
    re.compile(r"(?<!\d)(?P<a>\d{1,2})[./](?P<b>\d{1,2})[./](?P<year>\d{4})(?!\d)"),
)
# A number as an amount is written: "24.90", "1,250", "1.250,00", "184.4".
_NUMBER = re.compile(
    r"(?<![\w.,-])\d{1,3}(?:[.,]\d{3})*(?:[.,]\d{1,2})?(?![\w-])|(?<![\w.,-])\d+[.,]\d{1,2}(?![\w-])"
)
_CURRENCY = re.compile(r"(?:[$\u00a3\u20ac\u00a5]|\b[A-Z]{3})\s?$")


def _month(name: str) -> int | None:
    name = name.lower()
    for number, month in enumerate(_MONTHS, start=1):
        if len(name) >= 3 and month.startswith(name):
            return number
    return None


def _dates(source: str) -> list[date]:
    """The calendar dates ``source`` writes out (a day/month order that fits either is both)."""
    found: list[date] = []
    for pattern in _DATES:
        for m in pattern.finditer(source):
            parts = m.groupdict()
            year = int(parts["year"])
            if "a" in parts:
                pairs = [(int(parts["b"]), int(parts["a"])), (int(parts["a"]), int(parts["b"]))]
            else:
                month = int(parts["mm"]) if "mm" in parts else _month(parts["month"])
                if month is None:
                    continue
                pairs = [(month, int(parts["day"]))]
            for month, day in pairs:
                try:
                    found.append(date(year, month, day))
                except ValueError:
                    continue
    return found


def holds(value: str, source: str) -> bool:
    """Whether ``source`` holds ``value`` as a whole word, as written.

    "T-3" is not the "3" of "ticket 3", nor "99" the cents of "0.99".
    """
    pattern = rf"(?<![\w-])(?<!\d[.,]){re.escape(value)}(?![\w-])(?![.,]\d)"
    return re.search(pattern, source) is not None


def converted(value: str, source: str) -> str | None:
    """What ``value`` is, when it is a value of ``source`` written another way; else None.

    Seen on the 1.5B on a tool task: a rule's action carried its run's amount in
    cents (``amount='8530'`` for "EUR 85.30") or its date rewritten
    (``date='20270511'`` for "11 May 2027"), so it fitted no other run and two
    runs' rules looked like a conflict. The description says how the input's
    value is written instead (``IN_CENTS``, ``DIGITS_ONLY``, a date layout
    such as ``"YYYYMMDD"``), names no value, and is the same for every run. A
    code in another case ("nw-123" answered ``NW-123``) is left the rule's own:
    a rule telling the agent to echo a code of the input in capitals would let
    an input choose the answer. None for a value ``source`` holds as written
    (that is ``FROM_INPUT``) and for one it holds in no form.
    """
    value = value.strip()
    if not value or holds(value, source):
        return None
    for day in _dates(source):
        for layout, fmt in _DATE_FORMATS.items():
            if day.strftime(fmt) == value:
                return _as_date(layout)
    if not value.isdigit():
        return None
    for m in _NUMBER.finditer(source):
        written = m.group(0)
        if written.isdigit():
            # A whole amount, in cents: "EUR 25" -> 2500 (a currency says it is money).
            if value == f"{written}00" and _CURRENCY.search(source[: m.start()]):
                return IN_CENTS
            continue
        if re.sub(r"\D", "", written).lstrip("0") != value.lstrip("0"):
            continue
        return IN_CENTS if re.search(r"[.,]\d{2}$", written) else DIGITS_ONLY
    return None
