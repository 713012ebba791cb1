"""Conventions every reply must follow, found in a batch's feedback without an LLM call.

A small reflector asked about a reply that lacked the house sign-off writes a
rule for the one input it saw ("When parking cost inquiry, answer - Aldermoor
Front Desk."): measured on the 1.5B, nothing usable was learned from 24 such
runs (``docs/benchmarks.md``). The feedback states the convention plainly, in
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

import re
from collections.abc import Iterable, Sequence

from langgraph_combee._core import words as _words
from langgraph_combee._core.conventions import (
    MAX_CONVENTION_CHARS,
    Convention,
    Place,
    parse_convention,
)
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Trace

__all__ = ["MIN_RUNS", "MIN_TRUTHS", "explained", "found", "learned", "stated"]

MIN_RUNS = 2
"""Wrong runs about different inputs whose comments must quote the same text."""
MIN_TRUTHS = 3
"""Ground truths that must all end (or start) with the same line."""

# Text in double quotes, typographic quotes or backticks; single quotes only where
# they open after a space and close before one ("it's" is no quote).
_QUOTED = re.compile(
    r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d|`([^`\n]+)`|\u00ab([^\u00bb\n]+)\u00bb'
    r"|(?:^|(?<=[\s(:]))'([^'\n]+)'(?=$|[\s.,;:!?)])"
)
_AT_END = re.compile(
    r"\b(?:end|ends|ending|ended|close|closes|closing|finish|finishes|last|sign|signs|"
    r"signed|signing|signature|sign-off|signoff|bottom|append|conclude|concludes)\b",
    re.I,
)
_AT_START = re.compile(
    r"\b(?:start|starts|starting|begin|begins|beginning|open|opens|opening|first|top|"
    r"prefix|greet|greeting|salutation)\b",
    re.I,
)
# A comment that forbids the text ('Never end with "Best regards"') states no convention to
# follow; one that describes the fault ("did not end with", "is missing") does.
_FORBIDS = re.compile(
    r"\b(?:never|don'?t|do not|must not|mustn'?t|should not|shouldn'?t|avoid|remove|"
    r"stop|drop|omit|delete|no longer|not allowed|forbidden|instead of)\b",
    re.I,
)
# Words that say a text is owed by every reply, wherever it stands.
_EVERY = re.compile(
    r"\b(?:every|each|always|all|any|whatever|whichever|required|requires|mandatory|"
    r"compulsory|disclaimer|footer|header|boilerplate|house style|policy)\b",
    re.I,
)


def _place(comment: str) -> Place | None:
    """Where the comment asks for its quoted text; None when it does not read as a convention."""
    if _FORBIDS.search(comment):
        return None
    end, start = bool(_AT_END.search(comment)), bool(_AT_START.search(comment))
    if end != start:
        return "end" if end else "start"
    return "include" if _EVERY.search(comment) else None


def _spans(comment: str) -> list[str]:
    found = (next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(comment))
    return [s.strip() for s in found if _usable(s.strip())]


def _usable(text: str) -> bool:
    return 0 < len(text) <= MAX_CONVENTION_CHARS and len(_words.words(text)) >= 2


def _key(text: str) -> tuple[str, ...]:
    return tuple(_words.words(text))


def _wrong(trace: Trace) -> bool:
    return trace.feedback is not None and trace.feedback.correct is False


def _right(trace: Trace) -> bool:
    return trace.feedback is not None and trace.feedback.correct is True


def _admissible(convention: Convention, traces: Sequence[Trace], wrong: Sequence[Trace]) -> bool:
    """No right run lacks it, some wrong run lacks it, and it is no run's whole answer."""
    if any(_right(t) and convention.followed(t.output) is False for t in traces):
        return False
    if not any(convention.followed(t.output) is False for t in wrong):
        return False
    key = _key(convention.text)
    return not any(
        t.feedback is not None
        and t.feedback.ground_truth is not None
        and _key(t.feedback.ground_truth) == key
        for t in wrong
    )


def _from_comments(traces: Sequence[Trace]) -> list[Convention]:
    runs: dict[tuple[Place, tuple[str, ...]], tuple[str, set[tuple[str, ...]], list[Trace]]] = {}
    for trace in traces:
        comment = trace.feedback.comment if trace.feedback is not None else None
        if not comment or not _wrong(trace):
            continue
        place = _place(comment)
        if place is None:
            continue
        for span in _spans(comment):
            convention = Convention(place, span)
            if convention.followed(trace.output) is not False:
                continue  # the reply holds it: the comment is about something else
            _, inputs, wrong = runs.setdefault((place, _key(span)), (span, set(), []))
            inputs.add(_key(trace.input))
            wrong.append(trace)
    return [
        convention
        for (place, _), (text, inputs, wrong) in runs.items()
        if len(inputs) >= MIN_RUNS
        and _admissible(convention := Convention(place, text), traces, wrong)
    ]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _from_truths(traces: Sequence[Trace]) -> list[Convention]:
    truths = [
        (t, _lines(t.feedback.ground_truth))
        for t in traces
        if t.feedback is not None and t.feedback.ground_truth
    ]
    if len(truths) < MIN_TRUTHS or len({_key("\n".join(lines)) for _, lines in truths}) < 2:
        return []
    if any(len(lines) < 2 for _, lines in truths):
        return []  # a truth of one line has no line of its own to share
    wrong = [t for t, _ in truths if _wrong(t)]
    found: list[Convention] = []
    for place, pick in (("end", -1), ("start", 0)):
        line = truths[0][1][pick]
        if not _usable(line) or any(_key(lines[pick]) != _key(line) for _, lines in truths):
            continue
        convention = Convention(place, line)  # type: ignore[arg-type]
        if _admissible(convention, traces, wrong):
            found.append(convention)
    return found


def learned(playbook: Playbook) -> list[Convention]:
    """The conventions among ``playbook``'s live bullets."""
    return [c for b in playbook.live().bullets if (c := parse_convention(b.content)) is not None]


def stated(traces: Sequence[Trace], playbook: Playbook) -> list[Convention]:
    """The conventions the batch's feedback states and ``playbook`` does not hold yet."""
    known = {(c.place, _key(c.text)) for c in learned(playbook)}
    new: list[Convention] = []
    for convention in [*_from_truths(traces), *_from_comments(traces)]:
        key = (convention.place, _key(convention.text))
        if key not in known:
            known.add(key)
            new.append(convention)
    return new


def found(traces: Sequence[Trace], playbook: Playbook, *, section: str = "others") -> list[Add]:
    """``Add`` ops for ``stated(traces, playbook)``, each sourced by the wrong runs lacking it."""
    return [
        Add(
            section=section,
            content=c.content(),
            sources=[t.id for t in traces if _wrong(t) and c.followed(t.output) is False],
        )
        for c in stated(traces, playbook)
    ]


def explained(trace: Trace, conventions: Iterable[Convention]) -> bool:
    """Whether the run's only stated fault is a convention it did not follow.

    A wrong run with no ground truth whose comment quotes the text of a
    convention its reply lacks: a reflection would only restate the convention
    as a rule for this one input.
    """
    feedback = trace.feedback
    if feedback is None or not _wrong(trace) or feedback.ground_truth or not feedback.comment:
        return False
    quoted = {_key(s) for s in _spans(feedback.comment)}
    return any(_key(c.text) in quoted and c.followed(trace.output) is False for c in conventions)
