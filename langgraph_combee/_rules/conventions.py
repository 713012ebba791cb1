"""Conventions every reply must follow, found in a batch's feedback without an LLM call.

A small reflector asked about a reply that lacked the house sign-off writes a
rule for the one input it saw ("When parking cost inquiry, answer - Aldermoor
Front Desk."): measured on the 1.5B, nothing usable was learned from 24 such
runs (``signoff-trial-a.json``). The feedback states the convention plainly, in
one of two ways, and both are read here:

- **The evaluator's comments.** The same quoted text ("- Aldermoor Front
  Desk") in the comments of wrong runs about at least ``MIN_RUNS`` different
  inputs, none of whose replies holds it where the comment asks. The comment
  must say where (end, sign off, start, open...) or that it is owed by every
  reply (every, each, always, required, mandatory, disclaimer, footer...):
  'should be "Billing team"' names an answer, not a convention.
- **The ground truths.** Every ground truth of the batch, at least
  ``MIN_TRUTHS`` of them and not all the same, ending (or starting) with the
  same line, which some wrong reply lacks.

Either way, no run of the batch judged right may lack the text (a convention
every reply follows cannot be missing from a right reply), the text has at
least two words, and it is not the whole expected answer of any of its runs.
Conventions come out as ``Add`` ops of ``conventions.Convention.content`` and
go through the guard like every rule (their words come from the comment or the
ground truth, trusted fields). A run whose only fault is a convention already
found (no ground truth, a comment naming it) is not reflected on (``explained``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langgraph_combee._core import words as _words
from langgraph_combee._core.conventions import Convention, Place, parse_convention, safe_text
from langgraph_combee._core.ops import Add, DeltaOp, Remove
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._core.values import values
from langgraph_combee._guard.provenance import Trust

_TRUST = Trust()

__all__ = [
    "MAX_COMMENT_CHARS",
    "MIN_RUNS",
    "MIN_TRUTHS",
    "disowned",
    "explained",
    "found",
    "learned",
    "stated",
    "trusted_verdict",
    "usable",
    "written",
]

MIN_RUNS = 2
"""Wrong runs about different inputs whose comments must quote the same text."""
MIN_TRUTHS = 4
"""Ground truths that must all end (or start) with the same line."""

# Text in double quotes, typographic quotes or backticks; single quotes only where
# they open after a space and close before one ("it's" is no quote). No quote of the
# pair inside, and at most MAX_CONVENTION_CHARS: a run of opening quotes is read once.
_QUOTED = re.compile(
    r'"([^"\n]{1,200})"|\u201c([^\u201c\u201d\n]{1,200})\u201d|`([^`\n]{1,200})`'
    r"|\u00ab([^\u00ab\u00bb\n]{1,200})\u00bb"
    r"|(?:^|(?<=[\s(:]))'([^'\n]{1,200})'(?=$|[\s.,;:!?)])"
)
MAX_COMMENT_CHARS = 2000
"""The start of a comment read for a convention (a verdict's comment is short)."""
_NEAR = 300  # characters of the clause read on each side of a quoted text
_MAX_QUOTES = 20  # quoted texts read in one comment

# A clause that says a text is owed by every reply: "every reply", "all answers",
# "house style", "sign off", "signature", "disclaimer", "footer", "always end with".
# Not "any messages about refunds", "the signature of the contract": a qualifier
# narrows them to a case.
_QUALIFIER = (
    r"(?!\s+(?:about|for|on|of|regarding|concerning|when|if|to|from|in|that|which|"
    r"where|were|was|so far|with the)\b)"
)
_SCOPE = re.compile(
    r"\b(?:(?:every|each|all|any)\s+(?:\w+\s+)?(?:repl(?:y|ies)|responses?|answers?|messages?|"
    r"e-?mails?)" + _QUALIFIER + r"|house style|sign[- ]?off" + _QUALIFIER + r"|sign(?:ing)? with|"
    r"(?:signature|disclaimer|footer|header|boilerplate)" + _QUALIFIER + r"|"
    r"always\s+(?:end|start|begin|open|close|sign|include|add|append))\b",
    re.I,
)
# A clause about some replies only ("Unlike every reply so far, ...").
_EXCEPT = re.compile(r"\b(?:unlike|except|apart from|other than|so far|not every|not all)\b", re.I)
_AT_END = re.compile(
    r"\b(?:end|ends|ending|close|closes|closing|finish|finishes|last line|sign|signs|"
    r"signature|sign-off|signoff|bottom|footer|append|conclude|concludes)\b",
    re.I,
)
_AT_START = re.compile(
    r"\b(?:start|starts|starting|begin|begins|beginning|open|opens|opening|first line|top|"
    r"greet|greeting|salutation|header)\b",
    re.I,
)
# A comment that forbids the text ('Never end with "Best regards"') states no convention
# to follow; one that describes the fault ("did not end with", "is missing") does.
_FORBIDS = re.compile(
    r"\b(?:never|don'?t|do not|must not|mustn'?t|should not|shouldn'?t|avoid|remove|"
    r"stop|drop|omit|delete|no longer|not allowed|forbidden|instead of|not required|"
    r"no need|rather than|in place of|not needed|unnecessary|no (?:sign[- ]?off|signature|"
    r"footer|header|disclaimer|greeting))\b",
    re.I,
)
_BOUNDARY = re.compile(r"[.;!?\n]")
# What governs a quoted text: the words right before it, back to a comma or a "but".
_GOVERNS = re.compile(r"(?:^|[,.;:!?\n]|\bbut\b|\band\b)([^,.;:!?\n]*)$", re.I)


@dataclass(frozen=True)
class _Quote:
    text: str
    start: int
    end: int
    clause: str  # the clause around it, the quoted text left out


def _quotes(comment: str) -> list[_Quote]:
    """The usable quoted texts of ``comment`` (its start), with their clauses.

    Clause boundaries are found once, and a clause is read at most ``_NEAR``
    characters on each side of its quote: the reading is linear in the comment.
    """
    comment = comment[:MAX_COMMENT_CHARS].replace("\u2019", "'")
    cuts = [m.start() for m in _BOUNDARY.finditer(comment)]
    found: list[_Quote] = []
    for m in _QUOTED.finditer(comment):
        text = next(g for g in m.groups() if g is not None).strip()
        if not usable(text):
            continue
        i = bisect.bisect_left(cuts, m.start())
        begin = max(cuts[i - 1] + 1 if i else 0, m.start() - _NEAR)
        j = bisect.bisect_left(cuts, m.end())
        finish = min(cuts[j] if j < len(cuts) else len(comment), m.end() + _NEAR)
        clause = f"{comment[begin : m.start()]} {comment[m.end() : finish]}"
        found.append(_Quote(text, m.start(), m.end(), clause))
        if len(found) >= _MAX_QUOTES or len({_key(q.text) for q in found}) > 2:
            break  # more than one text is refused anyway
    return found


def _place(clause: str) -> Place | None:
    """Where a clause asks for its quoted text; None when it states no convention.

    Read per clause: a comment may praise one thing and fault another ("Sign-off is
    fine; the queue must be 'Billing team'").
    """
    if _FORBIDS.search(clause) or _EXCEPT.search(clause) or not _SCOPE.search(clause):
        return None
    end, start = bool(_AT_END.search(clause)), bool(_AT_START.search(clause))
    if end != start:
        return "end" if end else "start"
    return "include"


def _quoted(comment: str) -> list[tuple[str, Place | None]]:
    """The usable quoted texts of ``comment``, each with the place its clause asks for."""
    return [(q.text, _place(q.clause)) for q in _quotes(comment)]


def usable(text: str) -> bool:
    """Whether ``text`` can be a convention's: one line of at most ``MAX_CONVENTION_CHARS``,
    two words or more, no control or line-separating character, no double quote."""
    return safe_text(text) and len(_words.words(text)) >= 2


def _key(text: str) -> tuple[str, ...]:
    return tuple(_words.words(text))


def _user_texts(trace: Trace, trust: Trust) -> list[str]:
    """What the end user wrote or steered in the run (its replies aside)."""
    texts = [trace.input]
    texts.extend(m.content for m in trace.messages if m.role in ("user", "human"))
    texts.extend(c.result or "" for c in trace.tool_calls if not trust.result(c.name, c.attested))
    texts.extend(
        m.content
        for m in trace.messages
        if m.role == "tool" and not trust.result(m.name or "", m.attested)
    )
    return [t for t in texts if t]


def _wrong(trace: Trace) -> bool:
    return trace.feedback is not None and trace.feedback.correct is False


def _right(trace: Trace) -> bool:
    return trace.feedback is not None and trace.feedback.correct is True


def _admissible(
    convention: Convention, traces: Sequence[Trace], wrong: Sequence[Trace], trust: Trust
) -> bool:
    """No right run lacks it, some wrong run lacks it, it is no run's whole answer, and
    the users of the runs citing it did not write it (a house convention is never what
    a user asked for; a user of another run may name the business a sign-off names)."""
    if any(_right(t) and convention.followed(t.output) is False for t in traces):
        return False
    if not any(convention.followed(t.output) is False for t in wrong):
        return False
    key = _key(convention.text)
    if any(
        t.feedback is not None
        and t.feedback.ground_truth is not None
        and _key(t.feedback.ground_truth) == key
        for t in wrong
    ):
        return False
    echo = Convention("include", convention.text)
    return not any(echo.followed(text) for t in wrong for text in _user_texts(t, trust))


def _from_comments(traces: Sequence[Trace], trust: Trust) -> list[Convention]:
    runs: dict[tuple[Place, tuple[str, ...]], tuple[str, set[tuple[str, ...]], list[Trace]]] = {}
    for trace in traces:
        comment = trace.feedback.comment if trace.feedback is not None else None
        if not comment or not _wrong(trace) or not trust.comment(trace):
            continue  # an end user's comment is no house convention
        quoted = _quoted(comment)
        if len({_key(text) for text, _ in quoted}) != 1:
            continue  # several texts: which one goes where is not said
        text, place = quoted[0]
        if place is None or Convention(place, text).followed(trace.output) is not False:
            continue  # the reply holds it: the comment is about something else
        _, inputs, wrong = runs.setdefault((place, _key(text)), (text, set(), []))
        inputs.add(_key(trace.input))
        wrong.append(trace)
    return [
        convention
        for (place, _), (text, inputs, wrong) in runs.items()
        if len(inputs) >= MIN_RUNS
        and _admissible(convention := Convention(place, text), traces, wrong, trust)
    ]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# A line of data, not of prose: a value or a number, a "key: value", a table row, code.
_DATA = re.compile(r"[\d:|=<>{}\[\]();`#*]")


def _house_line(line: str) -> bool:
    """Whether ``line`` reads as a house line (a sign-off, a greeting), not as data."""
    return usable(line) and not _DATA.search(line.lstrip("-\u2013\u2014 ")) and not values(line)


def _trusted_truth(trace: Trace, trust: Trust) -> bool:
    """The operator's ground truth: no source, or a trusted one (not a user's short answer)."""
    fb = trace.feedback
    if fb is None or not fb.ground_truth:
        return False
    source = (fb.source or "").lower()
    return source not in trust.untrusted_truth and (not source or source in trust.comment_sources)


def _from_truths(traces: Sequence[Trace], trust: Trust) -> list[Convention]:
    graded = [t for t in traces if t.feedback is not None and t.feedback.ground_truth]
    if len(graded) < MIN_TRUTHS or not all(_trusted_truth(t, trust) for t in graded):
        return []
    truths = [(t, _lines(t.feedback.ground_truth or "" if t.feedback else "")) for t in graded]
    if len({_key("\n".join(lines)) for _, lines in truths}) < 2:
        return []
    if any(len(lines) < 2 for _, lines in truths):
        return []  # a truth of one line has no line of its own to share
    wrong = [t for t, _ in truths if _wrong(t)]
    found: list[Convention] = []
    for place, pick in (("end", -1), ("start", 0)):
        line = truths[0][1][pick]
        if not _house_line(line) or any(_key(lines[pick]) != _key(line) for _, lines in truths):
            continue
        convention = Convention(place, line)  # type: ignore[arg-type]
        if _admissible(convention, traces, wrong, trust):
            found.append(convention)
    return found


def learned(playbook: Playbook) -> list[tuple[str, Convention]]:
    """The conventions among ``playbook``'s live bullets, with their bullet ids."""
    return [
        (b.id, c) for b in playbook.live().bullets if (c := parse_convention(b.content)) is not None
    ]


def stated(
    traces: Sequence[Trace], playbook: Playbook, trust: Trust | None = None
) -> list[Convention]:
    """The conventions the batch's trusted feedback states and ``playbook`` does not hold."""
    trust = trust or _TRUST
    known = {(c.place, _key(c.text)) for _, c in learned(playbook)}
    new: list[Convention] = []
    for convention in [*_from_truths(traces, trust), *_from_comments(traces, trust)]:
        key = (convention.place, _key(convention.text))
        if key not in known:
            known.add(key)
            new.append(convention)
    return new


def found(
    traces: Sequence[Trace],
    playbook: Playbook,
    *,
    section: str = "others",
    trust: Trust | None = None,
) -> list[DeltaOp]:
    """Ops for ``stated(traces, playbook)``, each sourced by the wrong runs lacking it.

    A new sign-off (or opening line) replaces the live one only when the runs that
    state it followed the live one: the reviewer turned down the old line. Otherwise a
    second line for the same place is left out (both cannot be the last line).
    """
    live = {c.place: (bid, c) for bid, c in learned(playbook) if c.place != "include"}
    by_id = {t.id: t for t in traces}
    ops: list[DeltaOp] = []
    for c in stated(traces, playbook, trust):
        sources = [t.id for t in traces if _wrong(t) and c.followed(t.output) is False]
        if c.place != "include":
            old = live.get(c.place)
            if old is not None:
                old_id, old_convention = old
                if not old_id or not any(old_convention.followed(by_id[i].output) for i in sources):
                    continue
                ops.append(Remove(id=old_id, reason=f"replaced by {c.content()}"))
            live[c.place] = ("", c)
        ops.append(Add(section=section, content=c.content(), sources=sources))
    return ops


# Words a verdict's comment holds besides a convention ("Wrong. Every reply must ...").
_VERDICT_WORDS = frozenset(
    {
        *("wrong", "incorrect", "not", "right", "no", "missing", "again", "also", "please"),
        *("reply", "answer", "response", "message", "output", "is", "was", "it", "this"),
        *("the", "a"),
    }
)


def explained(trace: Trace, conventions: Iterable[Convention], trust: Trust | None = None) -> bool:
    """Whether the run's only stated fault is a convention it did not follow.

    A wrong run with a trusted comment and no ground truth, whose comment quotes
    the text of one convention its reply lacks, asks for it where the convention
    puts it, and says nothing else (every other clause only a verdict: "Wrong."):
    a reflection would only restate the convention as a rule for this one input.
    """
    feedback = trace.feedback
    if feedback is None or not _wrong(trace) or feedback.ground_truth or not feedback.comment:
        return False
    known = list(conventions)
    if not known or not (trust or _TRUST).comment(trace):
        return False
    quotes = _quotes(feedback.comment)
    if len({_key(q.text) for q in quotes}) != 1:
        return False
    rest = _QUOTED.sub(" ", feedback.comment[:MAX_COMMENT_CHARS])
    clauses = [c for c in _BOUNDARY.split(rest) if set(_words.words(c)) - _VERDICT_WORDS]
    if len(clauses) != 1 or values(rest):
        return False  # another fault to learn from ("dogs are not allowed", "EUR 18")
    key, place = _key(quotes[0].text), _place(quotes[0].clause)
    return any(
        _key(c.text) == key and c.place == place and c.followed(trace.output) is False
        for c in known
    )


def trusted_verdict(trace: Trace, trust: Trust | None = None) -> bool:
    """Whether the run's verdict comes from the app (no source) or a trusted source."""
    feedback = trace.feedback
    if feedback is None:
        return False
    source = (feedback.source or "").lower()
    return not source or source in (trust or _TRUST).comment_sources


def disowned(trace: Trace, convention: Convention, trust: Trust | None = None) -> bool:
    """Whether a trusted comment on the wrong run forbids the convention's text.

    Only the words right before the quote count ("never end with"), back to a
    comma or a "but": "Good that you signed with '...', but remove the claim"
    praises the sign-off.
    """
    feedback = trace.feedback
    if feedback is None or not _wrong(trace) or not feedback.comment:
        return False
    if not (trust or _TRUST).comment(trace):
        return False
    comment = feedback.comment[:MAX_COMMENT_CHARS].replace("\u2019", "'")
    key = _key(convention.text)
    for q in _quotes(comment):
        if _key(q.text) != key:
            continue
        before = _GOVERNS.search(comment[max(0, q.start - 80) : q.start])
        if before is not None and _FORBIDS.search(before.group(1)):
            return True
    return False


def written(op: DeltaOp) -> bool:
    """Whether ``op`` adds or rewrites a bullet into a convention's form (an LLM's op)."""
    content = getattr(op, "content", None)
    return isinstance(content, str) and parse_convention(content) is not None
