"""House formats: answers built from each request's own values, learned as one format.

Where the right answer is made of the request's values (a record line with the
caller's name and number, a reference with the order's date), every run has
its own answer. A rule per run ("answer CB;Maria;0612345678;AM") fits no
other request, and carries one customer's data to every user. Runs whose
answers are written alike (``shape``) and each hold a value of their own
request (``carries_input``) are shown to the learner together; it writes the
format with a placeholder for each part that changes, and the format is kept
only if its fixed parts match every one of those answers and it names no
value of a single run (``FormatOut.format_for``).

Pure functions of text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langgraph_combee._core.values import converted, holds

__all__ = [
    "FORMAT_CHARS",
    "PLACEHOLDER",
    "bracketed",
    "carries_input",
    "derived",
    "described",
    "fits",
    "fixed_text",
    "names_no_single_value",
    "plain_parts",
    "shape",
]

FORMAT_CHARS = 200
"""Longest format kept (a record line, a reference: never prose)."""
PLACEHOLDER = re.compile(r"<([^<>\n]{1,60})>")
"""A part of a format that changes from request to request, described in angle brackets."""
_PIECE = re.compile(r"\d+|[^\W\d_]+|\s+|.", re.S)
_TOKEN = re.compile(r"\d+|[^\W\d_]+")


def shape(answer: str) -> str:
    """How ``answer`` is written, its values left out.

    Digits are ``9``, a word in capitals ``A``, in lower case ``a``, capitalised
    ``Aa``, any other word ``x``; spaces are one space and punctuation stays:
    ``"CB;Maria;0612345678;AM"`` and ``"CB;Tom;07700900123;PM"`` are both
    ``"A;Aa;9;A"``.
    """
    out = []
    for piece in _PIECE.findall(answer.strip()):
        if piece.isdigit():
            out.append("9")
        elif piece.isspace():
            out.append(" ")
        elif _TOKEN.fullmatch(piece):
            if piece.isupper():
                out.append("A")
            elif piece.islower():
                out.append("a")
            elif piece[:1].isupper() and piece[1:].islower():
                out.append("Aa")
            else:
                out.append("x")
        else:
            out.append(piece)
    return "".join(out)


def carries_input(answer: str, request: str) -> bool:
    """Whether ``answer`` holds a value of ``request``: a word of three letters or more, as
    written or in another case, or a number, as written or with its separators left out."""
    folded = request.casefold()
    for token in _TOKEN.findall(answer):
        if token.isdigit():
            if len(token) >= 2 and (holds(token, request) or converted(token, request)):
                return True
        elif len(token) >= 3 and holds(token.casefold(), folded):
            return True
    return False


def derived(answers: Sequence[str], requests: Sequence[str]) -> str | None:
    """The format the answers show on their own: fixed text around one value of each request.

    ``["JR-4471", "JR-0932"]`` for "our ref 4471" and "reference number 0932"
    -> ``"JR-<number from the message>"``: the longest text every answer starts
    and ends with, cut where a value begins, around a middle that each
    request holds (as written or written another way, ``values.converted``).
    Used where the learner's own format did not fit its answers (seen on the
    1.5B on a mixed stream: three formats asked, none kept, and every
    reference rule answered one run's reference). None when the answers share
    no fixed text, a middle is not their request's, or the fixed text holds a
    value of a request (``carries_input``: a customer's name every answer of
    hers repeats is no house text).
    """
    if len(answers) < 2 or len(answers) != len(requests):
        return None
    texts = [" ".join(a.split()) for a in answers]
    start = len(_common(texts))
    end = len(_common([t[::-1] for t in texts]))
    # Cut at a boundary: the value starts and ends a token ("JR-4471", not "JR-44" + "71"),
    # and a dot or an at sign between letters or digits is inside it ("ann@y.io", not
    # "ann@y" + ".io").
    first = texts[0]
    while start and (first[start - 1].isalnum() or _joins(first, start - 1)):
        start -= 1
    while end and (first[len(first) - end].isalnum() or _joins(first, len(first) - end)):
        end -= 1
    if start + end == 0 or any(len(t) <= start + end for t in texts):
        return None
    head, tail = first[:start], first[len(first) - end :] if end else ""
    middles = [t[start : len(t) - end] for t in texts]
    for middle, request in zip(middles, requests, strict=True):
        if not (holds(middle, request) or converted(middle, request)):
            return None
        # The fixed text is the house's: one holding a request's value is a customer's
        # ("Order for Maria Lopez: ref 4471" from two runs of Maria's), served to everyone.
        if carries_input(f"{head} {tail}", request):
            return None
    what = "number" if all(m.isdigit() for m in middles) else "value"
    return f"{head}<{what} from the message>{tail}"


def _joins(text: str, at: int) -> bool:
    """Whether ``text[at]`` is a dot or an at sign between two letters or digits."""
    return (
        text[at] in ".@"
        and 0 < at < len(text) - 1
        and text[at - 1].isalnum()
        and text[at + 1].isalnum()
    )


def _common(texts: Sequence[str]) -> str:
    """The longest text every one of ``texts`` starts with."""
    first = min(texts, key=len)
    for i, char in enumerate(first):
        if any(t[i] != char for t in texts):
            return first[:i]
    return first


def _pattern(template: str) -> re.Pattern[str]:
    parts = PLACEHOLDER.split(template)
    # split() alternates fixed text and placeholder descriptions: fixed, desc, fixed, ...
    fixed = [re.sub(r"\s+", " ", p) for p in parts[0::2]]
    # A part that changes holds none of the separators the fixed parts write: "CB;<name>"
    # must not fit "CB;Maria;0612345678;AM" by taking the rest as the name.
    separators = {c for p in fixed for c in p if not c.isalnum()}
    excluded = "".join(r"\s" if c == " " else re.escape(c) for c in sorted(separators))
    changing = f"([^{excluded}]+)" if excluded else "(.+?)"
    body = changing.join(r"\s+".join(re.escape(w) for w in p.split(" ")) for p in fixed)
    return re.compile(body)


CLOSED_SET = 3
"""Most distinct values a changing part may take, each in two answers or more, to be named."""


def described(template: str, answers: Sequence[str]) -> str:
    """``template`` with what its answers show of each changing part added to its description.

    A part that is digits in every answer is "digits only"; a part that takes
    at most ``CLOSED_SET`` values, each in two answers or more, names them
    ("<time>" over AM, PM, AM, PM -> "<time: AM or PM>"). Read from the
    answers, so the description says what a small model left out.
    """
    pattern = _pattern(template)
    seen: list[list[str]] = []
    for answer in answers:
        match = pattern.fullmatch(" ".join(answer.split()))
        if match is None:
            return template
        seen.append(list(match.groups()))
    parts = [list(column) for column in zip(*seen, strict=True)] if seen else []
    descriptions = iter(parts)

    def more(m: re.Match[str]) -> str:
        text = " ".join(m.group(1).split())
        given = next(descriptions, [])
        distinct = sorted(set(given))
        if given and all(v.isdigit() for v in given) and "digit" not in text.casefold():
            text = f"{text}, digits only"
        elif 1 < len(distinct) <= CLOSED_SET and all(given.count(v) >= 2 for v in distinct):
            text = f"{text}: {' or '.join(distinct)}"
        return f"<{text}>"

    return PLACEHOLDER.sub(more, template)


SERVED = re.compile(r"^answer in the format (?P<format>\S.*)$", re.IGNORECASE | re.S)
"""A learned format as a rule's action, its placeholders in square brackets (``bracketed``)."""
_SERVED_PLACEHOLDER = re.compile(r"\[[^\[\]\n]{1,60}\]")


_QUOTED = re.compile(r"[\"`\u201c\u201d\u2018\u2019\u00ab\u00bb]|(?<!\w)'|'(?!\w)")
"""A quote mark (not an apostrophe inside a word): a placeholder holding one quotes a text."""


def _fixed_in(placeholder: str) -> str:
    # What a placeholder writes out as it stands: the values it is said to take
    # ("time: AM or PM" -> "AM or PM"), or all of it when it quotes a text ("'pwned'").
    inner = placeholder[1:-1]
    if _QUOTED.search(inner):
        return f" {inner} "
    _, colon, taken = inner.partition(":")
    return f" {taken} " if colon else " "


def fixed_text(action: str) -> str:
    """``action`` without the descriptions of the placeholders of the format it states, if it
    states one.

    ``"answer in the format CB;[first name];[time: AM or PM]"`` ->
    ``"answer in the format CB; ; AM or PM "``. The values a part is said to
    take and a quoted text are kept: they are written out as they stand
    (``"[greeting: Hacked]"``, ``"['pwned']"``). Any other action is returned as
    it is.
    """
    match = SERVED.match(action.strip())
    if match is None or not _SERVED_PLACEHOLDER.search(match["format"]):
        return action
    return _SERVED_PLACEHOLDER.sub(lambda m: _fixed_in(m.group(0)), action)


PART_WORDS = 6
"""Most words describing one changing part of a format."""


def plain_parts(template: str) -> bool:
    """Whether every changing part is described in at most ``PART_WORDS`` words.

    A part's description is served as the agent's instruction for that part: a
    label ("first name", "phone number, digits only"), never a sentence. Its
    words may be the requests' own ("phone" where a customer wrote "phone me"):
    measured on the 1.5B, refusing the words one request alone held refused the
    plain "<phone number>" and "<name>". What a description says is read by the
    caller (``schemas.FormatOut``: no scope over every request, no instruction).
    """
    return all(len(_TOKEN.findall(part)) <= PART_WORDS for part in PLACEHOLDER.findall(template))


def bracketed(template: str) -> str:
    """``template`` with each placeholder in square brackets: ``CB;[first name];[AM or PM]``."""
    return PLACEHOLDER.sub(lambda m: f"[{' '.join(m.group(1).split())}]", template)


def fits(template: str, answers: Sequence[str]) -> bool:
    """Whether ``template`` has a placeholder and a fixed letter or digit, a separator between
    any two placeholders, and its fixed parts, in order, write every answer (a placeholder
    alone, ``"<topic>"``, fits anything).

    ``"CB;<first name>;<phone, digits only>;<AM or PM>"`` fits ``"CB;Maria;0612345678;AM"``;
    ``"CB <name>"`` does not (its fixed part is not the answer's).
    """
    if not PLACEHOLDER.search(template) or len(template) > FORMAT_CHARS:
        return False
    if not _TOKEN.search(PLACEHOLDER.sub(" ", template)):
        return False
    # Two changing parts with no separator between them ("<name><phone>", "<a>x<b>")
    # split an answer in as many ways as it has characters: such a format cannot be
    # read back, and twenty such parts keep the search going for hours.
    between = PLACEHOLDER.split(template.strip())[2:-1:2]
    if any(part.isalnum() or not part for part in between):
        return False
    pattern = _pattern(template.strip())
    return all(pattern.fullmatch(" ".join(a.split())) is not None for a in answers)


def names_no_single_value(template: str, answers: Sequence[str], requests: Sequence[str]) -> bool:
    """Whether ``template`` names no value of one run only.

    A word of three letters or more that some answer holds and fewer than two
    of them do, or a number that some answer or request holds and fewer than
    two answers do, is one
    run's value ("<first name, e.g. Maria>"); values two answers share ("AM",
    "PM") are the format's own, and words of the requests that no answer
    holds ("phone", "name") describe the parts.
    """
    seen = [{t.casefold() for t in _TOKEN.findall(a)} for a in answers]
    numbers = {t for r in requests for t in _TOKEN.findall(r) if t.isdigit()}
    own = numbers | set().union(*seen)
    for token in _TOKEN.findall(template):
        word = token.casefold()
        short = not token.isdigit() and len(token) < 3
        if not short and word in own and sum(word in s for s in seen) < 2:
            return False
    return True
