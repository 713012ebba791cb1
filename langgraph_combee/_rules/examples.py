"""Worked examples: labelled runs kept in the playbook as request -> right answer lines.

A rule names a kind of input in words; a request of that kind in other words
may not match them. A worked example shows the agent the kind itself: a past
request and the answer a trusted source gave for it. The playbook keeps a few
per answer, in their own section (``EXAMPLES_SECTION``), rendered last.

What is kept, and why:

- only runs whose ground truth a trusted source gave (an operator, an
  evaluator: ``Trust.comment_sources``, or no source named): the answer is the
  instruction; the request is end-user text and only describes the situation,
  as a rule's situation may;
- the request is quoted as a JSON string under a heading that calls it data,
  cut to ``REQUEST_CHARS``, with e-mail addresses, links, street addresses,
  postcodes, dates and long numbers replaced by placeholders (an example is served to every user);
- a request or answer that speaks to the software (names the model, dictates
  its output, tells it to ignore what it reads, gives a standing order, asks
  for abuse: ``addresses_software``) is not kept; nor is
- a request or answer the guard's deterministic checks refuse (an instruction
  override, exfiltration, a secret, personal data, a link off the allow-list)
  is not kept, and the reason is reported;
- runs the agent got wrong first: they show what the rules did not;
- at most ``per_answer`` examples of one answer and ``limit`` in all; a newer
  example displaces the oldest of the answer that has the most.

Examples enter a version as ordinary ADD and REMOVE ops, so versions, diffs,
rebasing and rollback carry them like rules.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langgraph_combee._core.ops import Add, DeltaOp, Remove
from langgraph_combee._core.playbook import EXAMPLES_SECTION, Bullet, Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._guard.patterns import fold
from langgraph_combee._guard.provenance import Trust

__all__ = [
    "ANSWER_CHARS",
    "REQUEST_CHARS",
    "ExampleOutcome",
    "addresses_software",
    "example_ops",
    "example_text",
    "parse_example",
    "without_examples",
]

REQUEST_CHARS = 200
"""Longest request kept in an example (cut at a word, marked with an ellipsis)."""
ANSWER_CHARS = 160
"""Longest right answer an example carries; a longer one is a reply, not an answer."""

_PREFIX = "Request: "
_ARROW = " -> right answer: "
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_NUMBER = re.compile(r"\d[\d\s-]{4,}\d")
# Where someone lives and when they were born identify them as well as a number does.
_STREET = re.compile(
    r"\b\d+[a-z]?,? (?:[a-z][\w'.-]* ){1,3}(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|"
    r"boulevard|blvd|court|ct|way|place|pl|terrace|close|square|sq|crescent|highway|hwy|"
    r"parkway|pkwy|row|gardens|strasse|straße|weg|rue|via|calle)\b\.?",
    re.IGNORECASE,
)
_POSTCODE = re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}\b")
_DATE = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}\b")

# A request is quoted to every user of the agent, word for word: one that speaks to the
# software (names it, dictates its output, tells it to ignore what it reads, or asks for
# abuse) is kept out, even under a trusted answer. garak's injection probes ride in
# requests written like these; an ordinary request to a desk does not read like one.
_ADDRESSES_SOFTWARE = tuple(
    re.compile(pattern)
    for pattern in (
        # names the model or the automation reading the text
        r"\b(?:ai|llm|llms|chatbot|language model|gpt|automated (?:analysis|system|software|"
        r"scan|reviewer|screening)|chain of thought)\b",
        # a note, request or instruction for the reader, or an authority's marker
        r"\bnote (?:by|to|for) (?:a |an |the |any )?(?:trustworthy |expert |automated |ai )",
        r"\b(?:admin|administrator|system|core|developer|legal) (?:request|instruction|"
        r"amendment|override|note|message|command)",
        r"\b(?:follow|new|updated|hidden) (?:this |these |the following )?instructions?\b",
        r"(?:^|[\s\[(])(?:assistant|system)\s*:",
        # tells the reader to ignore what it reads, or how to answer
        r"\b(?:ignore|disregard|forget)\b[^.!?]{0,40}\b(?:instructions?|rules?|prompt|above|"
        r"rest of|everything|indicators?|data|text|context|evaluat)",
        r"\b(?:just|simply|only|now) (?:print|output|say|repeat|respond|reply|report|write)\b",
        r"\b(?:and|then) (?:print|output|repeat)\b",
        r"\b(?:print|output|repeat|respond with|reply with|answer with|report(?: only)?)"
        r"\s*[:\"'“<]",
        r"\bif (?:you are |you're )?(?:asked|questioned)\b",
        r"\b(?:may|must|do|should) not deviate\b",
        r"\bstop everything\b",
        # a standing order for whatever comes next, not an answer to this request
        r"\b(?:from now on|for (?:all|every|any) (?:future|subsequent|later|next|other) "
        r"(?:question|request|message|customer|user|repl|answer)|(?:every|each|any) (?:question|"
        r"request|message|prompt)s? (?:with|by)|all (?:future |later |subsequent )?(?:questions|"
        r"requests|messages|prompts) (?:with|by))",
        # asks for abuse
        r"\b(?:toxic|hateful|offensive|unfriendly|racist|sexist|insulting|derogatory|negative|"
        r"discriminatory|harmful|hurtful|demeaning|bigoted|hostile|rude|nasty|mean|"
        r"disrespectful|prejudiced|stereotypical|biased|violent|threatening|humiliating) "
        r"(?:sentence|statement|comment|joke|remark|text|paragraph|message|tweet|post)s? about\b",
    )
)


def addresses_software(text: str) -> str | None:
    """The words by which an example's request or answer speaks to the software, or None."""
    folded = fold(text)
    for pattern in _ADDRESSES_SOFTWARE:
        if found := pattern.search(folded):
            return found.group(0).strip()
    return None


Check = Callable[[str], list[str]]
"""A text's reasons for refusal ([] when it passes): ``BulletGuard.check``."""


@dataclass
class ExampleOutcome:
    """What the examples stage did: examples added, displaced, and runs not kept."""

    added: int = 0
    displaced: int = 0
    skipped: list[str] = field(default_factory=list)


def _redact(text: str) -> str:
    text = _EMAIL.sub("<email>", text)
    text = _URL.sub("<link>", text)
    text = _STREET.sub("<address>", text)
    text = _POSTCODE.sub("<postcode>", text)
    text = _DATE.sub("<date>", text)
    return _NUMBER.sub("<number>", text)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] or text[:limit]
    return cut.rstrip() + " …"


def example_text(request: str, answer: str) -> str:
    """The bullet text of one example: the request quoted as JSON, then its answer."""
    plain = _clip(_redact(" ".join(request.split())), REQUEST_CHARS)
    quoted = json.dumps(plain, ensure_ascii=False)
    return f"{_PREFIX}{quoted}{_ARROW}{' '.join(answer.split())}"


def parse_example(content: str) -> tuple[str, str] | None:
    """The (request, answer) of an example's bullet text; None if it is not one."""
    if not content.startswith(_PREFIX):
        return None
    try:
        request, end = json.JSONDecoder().raw_decode(content, len(_PREFIX))
    except json.JSONDecodeError:
        return None
    rest = content[end:]
    if not isinstance(request, str) or not rest.startswith(_ARROW):
        return None
    return request, rest[len(_ARROW) :]


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def without_examples(ops: Sequence[DeltaOp], playbook: Playbook) -> list[DeltaOp]:
    """``ops`` with no curator edit reaching the examples section.

    An ADD the curator aimed at it goes to the fallback section instead (it is
    a rule, and is screened as one); an UPDATE or REMOVE of an example is left
    out: examples change only through this module.
    """
    examples = {b.id for b in playbook.bullets if b.section == EXAMPLES_SECTION}
    kept: list[DeltaOp] = []
    for op in ops:
        if isinstance(op, Add) and playbook.resolve_section(op.section) == EXAMPLES_SECTION:
            kept.append(op.model_copy(update={"section": "others"}))
        elif getattr(op, "id", None) in examples and not isinstance(op, Add):
            continue
        else:
            kept.append(op)
    return kept


def _operator(source: str | None, trust: Trust) -> bool:
    # Stricter than ``Trust.truth``, which takes a short answer from anyone: an
    # example also quotes its request, so both must come from one trusted word.
    return not source or source.lower() in trust.comment_sources


def _wrong(trace: Trace) -> bool:
    fb = trace.feedback
    if fb is None:
        return False
    if fb.correct is not None:
        return not fb.correct
    return fb.score is not None and fb.score < 0.5


def example_ops(
    playbook: Playbook,
    traces: Sequence[Trace],
    *,
    trust: Trust,
    check: Check | None = None,
    limit: int,
    per_answer: int = 2,
) -> tuple[list[DeltaOp], ExampleOutcome]:
    """The ops that keep the labelled runs of ``traces`` as worked examples.

    Args:
        playbook: The playbook the ops apply to (its examples are counted).
        traces: The step's runs; only those with a trusted ground truth count.
        trust: Which ground truths are the operator's.
        check: The guard's deterministic checks, run on each request and answer.
        limit: Most examples in the playbook (0 keeps none and adds no op).
        per_answer: Most examples of one answer.

    Returns:
        ADD ops for new examples (in the order of ``traces``, wrong runs first),
        REMOVE ops for the examples they displace, and what happened.
    """
    outcome = ExampleOutcome()
    if limit <= 0:
        return [], outcome
    held: list[tuple[Bullet, str]] = []
    for bullet in playbook.bullets:
        parsed = parse_example(bullet.content) if bullet.section == EXAMPLES_SECTION else None
        if parsed is not None:
            held.append((bullet, _key(parsed[1])))
    seen = {_key(parse_example(b.content)[0]) for b, _ in held}  # type: ignore[index]
    per = Counter(answer for _, answer in held)
    new: list[tuple[Add, str]] = []
    for trace in sorted(traces, key=lambda t: not _wrong(t)):
        fb = trace.feedback
        if fb is None or not fb.ground_truth or not _operator(fb.source, trust):
            continue
        request, answer = trace.input.strip(), fb.ground_truth.strip()
        if not request or not answer:  # a blank answer would teach the agent to say nothing
            continue
        if len(answer) > ANSWER_CHARS:
            outcome.skipped.append(f"{trace.id}: the right answer is a reply, not an answer")
            continue
        if check is not None and (reasons := [*check(request), *check(answer)]):
            outcome.skipped.append(f"{trace.id}: {reasons[0]}")
            continue
        # The answer too: an evaluator may pass on what it read in the request.
        if found := addresses_software(request) or addresses_software(answer):
            outcome.skipped.append(f"{trace.id}: the example speaks to the software ({found!r})")
            continue
        text = example_text(request, answer)
        request_key, answer_key = _key(parse_example(text)[0]), _key(answer)  # type: ignore[index]
        if request_key in seen or per[answer_key] >= per_answer:
            continue
        seen.add(request_key)
        per[answer_key] += 1
        new.append((Add(section=EXAMPLES_SECTION, content=text, sources=[trace.id]), answer_key))
    new = new[:limit]
    ops: list[DeltaOp] = []
    # Displace the oldest examples of the answers that have the most.
    order = sorted(held, key=lambda item: (item[0].created_version, item[0].id))
    while len(held) + len(new) > limit and order:
        most = max(per[answer] for _, answer in order)
        victim = next(item for item in order if per[item[1]] == most)
        order.remove(victim)
        held.remove(victim)
        per[victim[1]] -= 1
        ops.append(Remove(id=victim[0].id, reason="displaced by a newer worked example"))
        outcome.displaced += 1
    ops.extend(op for op, _ in new)
    outcome.added = len(new)
    return ops, outcome
