"""Rules of the form "When <situation>, <action>.": matching, conflicts and served evidence.

Both role profiles ask for rules in this form, so one deterministic layer can
tell when two rules speak about the same situation:

* ``reconcile`` turns a new rule whose situation matches a live bullet into an
  UPDATE of that bullet (a different action) or drops it (the same action),
  unless the bullet has proved itself in service, in which case the new rule
  is dropped and the conflict recorded;
* ``settle_batch`` resolves new rules of one step that give different actions
  for one situation, alternative by alternative: the action most reflections
  back keeps it; a tie means the situation does not tell the cases apart
  (e.g. the name of the whole task), and every rule of the tie loses it (a
  rule left with no alternative is dropped);
* ``served_tags`` moves helpful/harmful counters from served outcomes: a run
  whose answer carries a served rule's value followed that rule, and its
  verdict (right or wrong) is evidence for or against it (a wrong run that
  shares no word with a grounded rule's situation, and agrees with no other
  on another answer, is the model's misreading: it counts half);
* ``discredited`` names bullets the evidence now says are wrong;
* ``conflicts`` lists live bullets that still contradict each other.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from langgraph_combee._core import values as _values
from langgraph_combee._core import words as _words
from langgraph_combee._core.conventions import Convention, parse_convention
from langgraph_combee._core.ops import Add, DeltaOp, Remove, Tag, Update
from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.situations import (
    MAX_FOCUS_TEXT,
    MAX_KEYWORD_WORDS,
    Rule,
    alternatives,
    input_words,
    parse_rule,
    situation_words,
)
from langgraph_combee._core.types import Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._guard.provenance import Trust
from langgraph_combee._rules.conventions import disowned, trusted_verdict

SAME_SITUATION = 0.8
"""Word overlap (Jaccard) at which two situations are one: nearly all their words shared."""
MIN_HARMFUL = 2
"""Harmful verdicts a bullet needs (and more than its helpful ones) to be removed."""


_SENTENCE_END = re.compile(r"[.!?:]\s*$")


def proper_nouns(text: str) -> frozenset[str]:
    """Words written capitalised wherever they occur in ``text``, never first in a sentence.

    Names ("Priya", "Friday", "Müller") are such words; an acronym (all capitals,
    "GDPR") is not. Scripts without case (Arabic, Chinese, Hindi...) have no such
    words: no name is found in them.
    """
    capital: set[str] = set()
    other: set[str] = set()
    end = 0
    previous = ""
    for match in _words.tokens(text):
        word = match.group()
        # Only the gap since the previous word is read: the text is scanned once
        # (a long input must not cost a pass per word).
        gap = text[end : match.start()]
        # "Mrs. Novak": the dot of a title ends no sentence.
        start = (end == 0 and not gap.strip()) or (
            bool(_SENTENCE_END.search(gap)) and previous not in _TITLES
        )
        end = match.end()
        previous = word.casefold()
        titled = word[0].isupper() and word[1:].islower()
        forms = {previous, _bare(previous)}
        if titled and not start:
            capital.update(forms)
        elif not start:
            other.update(forms)
    return frozenset(capital - other)


_TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "herr", "frau", "st"})


def _bare(word: str) -> str:
    """``word`` without a possessive ending ("priya's" -> "priya")."""
    for ending in ("'s", "\u2019s"):
        if word.endswith(ending) and len(word) > len(ending):
            return word[: -len(ending)]
    return word


# Words that open a greeting ("Hi Priya", "Good morning Anna", "Hallo Jonas"): a name
# after them, with nothing else before it, is the addressee's.
_GREETING = frozenset(
    {
        *("hi", "hello", "hey", "dear", "good", "morning", "afternoon", "evening", "day"),
        *("greetings", "hallo", "hola", "bonjour", "salut", "ciao", "moin", "servus"),
    }
)
# What may come between a greeting's words and the name: spaces and commas, no sentence end.
_GREETING_GAP = re.compile(r"[\s,]*")
# What opens a signature's line: a comma ("Regards, Lukas"), a bracket, a dash, a new
# line or a sentence's end ("Thanks. Mary"); "in Berlin." is no signature.
_SIGN_OFF_OPENERS = ",([-\u2013\u2014\n.!?"
_SIGN_OFF_SPACING = " \t\r\n\"'(*_~"


def _opens_signature(gap: str) -> bool:
    """Whether ``gap`` (the text before a capitalised word) ends as a signature's line opens.

    Read from its end in one pass: a regular expression here is quadratic on a
    long run of brackets.
    """
    i = len(gap)
    while i and gap[i - 1] in _SIGN_OFF_SPACING:
        i -= 1
    return (i > 0 and gap[i - 1] in _SIGN_OFF_OPENERS) or any(c in "(\n" for c in gap[i:])


# What may follow a signature to the end of the text ("Mary Smith.", "(Liam)"): a
# question mark ends a question, not a sign-off.
_SIGN_OFF_TAIL = re.compile(r"[\s.,;:!)\]\-\u2013\u2014\"'*_~]*")


def addressed_names(text: str) -> frozenset[str]:
    """The capitalised words ``text`` greets or signs with (case-folded): its people.

    A greeting's are the capitalised words right after its greeting words, at
    the start of the text ("Hi Priya", "Dear Ms Müller", "Good morning Anna").
    A signature's are the capitalised words that end the text after a comma, a
    bracket, a dash, a new line or a sentence's end ("Regards, Lukas", "(Liam)",
    "Thanks, Mary Smith."). A name written inside a sentence ("at the Berlin
    office", "Can we meet in Denver?", "Book me in Berlin.") is neither.
    """
    matches = list(_words.tokens(text))
    titled = [m.group()[0].isupper() for m in matches]
    found: set[str] = set()
    # The greeting: greeting words from the start, then the capitalised words after them.
    n, end = 0, 0
    while n < len(matches) and matches[n].group().casefold() in _GREETING:
        if not _GREETING_GAP.fullmatch(text[end : matches[n].start()]):
            break
        end = matches[n].end()
        n += 1
    if n:
        while n < len(matches) and titled[n]:
            if not _GREETING_GAP.fullmatch(text[end : matches[n].start()]):
                break
            found.add(matches[n].group().casefold())
            end = matches[n].end()
            n += 1
    # The signature: the capitalised words that end the text.
    last = len(matches)
    if last and _SIGN_OFF_TAIL.fullmatch(text[matches[-1].end() :]):
        first = last
        while first > 0 and titled[first - 1]:
            first -= 1
            # Only the gap before the word (and the previous word's last character) is
            # read: a text of many capitalised words must not cost a pass per word.
            since = matches[first - 1].end() - 1 if first else 0
            if first == 0 or _opens_signature(text[since : matches[first].start()]):
                found.update(m.group().casefold() for m in matches[first:last])
                break
            # Only spaces may join the words of one signature ("Mary Smith").
            if first and text[matches[first - 1].end() : matches[first].start()].strip():
                break
    return frozenset(found)


# A name is read as a place when a word of these comes right before it ("in Berlin",
# "at the Denver office") or a place noun right after it ("the Berlin office").
_BEFORE_PLACE = frozenset({"in", "at", "near", "into", "inside", "around", "across", "outside"})
# Verbs that take "in" for a person ("book in Anna", "loop in Priya").
_IN_FOR_PERSON = frozenset(
    {"book", "check", "loop", "pencil", "fit", "sign", "log", "fill", "bring", "let", "rope"}
    | {"keep", "put", "squeeze", "call", "send", "invite", "add", "include", "count"}
)
_PLACE_NOUNS = frozenset(
    {
        *("office", "offices", "branch", "store", "shop", "location", "site", "warehouse"),
        *("hotel", "airport", "station", "campus", "plant", "depot", "clinic", "hospital"),
        *("headquarters", "hq", "showroom", "outlet", "factory", "centre", "center", "team"),
    }
)
# Words that make the name after them a person's ("Ms Berg", "ask Priya", "with Anna").
_BEFORE_PERSON = frozenset(
    {
        *("mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam", "herr", "frau"),
        *("ask", "contact", "cc", "call", "tell", "with", "is", "am", "i'm", "named", "called"),
    }
)


def placed_names(text: str) -> frozenset[str]:
    """The names of ``text`` (``proper_nouns``) written as places wherever they occur.

    A place is named after "in", "at", "near"... (also with "the" between:
    "at the Berlin office") or before a place noun ("Berlin office", "the
    Denver branch"); never after a title or a word that introduces a person
    ("Ms Berg", "this is Priya", "ask Anna"), nor right before another name
    ("Anna Berg"). A name written so in one place and otherwise in another is
    no place. These marks are English: in other languages no name is read as
    a place.
    """
    names = proper_nouns(text)
    if not names:
        return frozenset()
    matches = list(_words.tokens(text))
    folded = [m.group().casefold() for m in matches]
    placed: set[str] = set()
    other: set[str] = set()
    for n, word in enumerate(folded):
        if word not in names:
            continue
        before = folded[n - 1] if n else ""
        before2 = folded[n - 2] if n > 1 else ""
        # A place noun counts only right after the name, with spaces between
        # ("Priya, office manager" is a person).
        after = ""
        if n + 1 < len(folded) and text[matches[n].end() : matches[n + 1].start()].isspace():
            after = folded[n + 1]
        next_titled = n + 1 < len(matches) and matches[n + 1].group()[0].isupper()
        person = (
            before in _BEFORE_PERSON
            or (before in ("in", "into") and before2 in _IN_FOR_PERSON)
            or (next_titled and after not in _PLACE_NOUNS)
            or word != _bare(word)  # "Priya's manager"
        )
        place = (
            before in _BEFORE_PLACE
            or (before == "the" and before2 in _BEFORE_PLACE)
            or after in _PLACE_NOUNS
        )
        bare = _bare(word)
        (placed if place and not person else other).update({word, bare})
    return frozenset(placed - other)


def value_like(word: str) -> bool:
    # An order number or a reference ("Z18288", "A98941", "NW-1"), not a term such
    # as "2FA" or "MP3".
    digits = sum(c.isdigit() for c in word)
    return digits > 0 and (digits >= sum(c.isalpha() for c in word) or "-" in word)


def grounded_keywords(keywords: Sequence[str], text: str, *, limit: int = 4) -> list[str]:
    """The keywords that are words of ``text``: every content word of each occurs in it.

    A small model asked for words copied from an input also writes words that
    are not there, names, references, sign-offs and whole sentences: a keyword
    with a word not in the text, a name (``proper_nouns``) other than a place
    (``placed_names``), a value such as an
    order number, more than ``MAX_KEYWORD_WORDS`` words, or no content word at
    all is left out. A kept keyword is its words alone, without the punctuation,
    brackets or symbols around them. At most ``limit`` are kept, in order.
    """
    present = input_words(text)
    # A place is a word of the case ("the Berlin office"); a person is not.
    names = proper_nouns(text) - (placed_names(text) - addressed_names(text))
    kept: list[str] = []
    for keyword in keywords:
        raw = [m.group() for m in _words.tokens(keyword)]
        if sum(_words.word_count(w) for w in raw) > MAX_KEYWORD_WORDS:
            continue
        phrase = " ".join(raw)
        words = situation_words(phrase)
        if not words or not words <= present:
            continue
        if any(w.casefold() in names or value_like(w) for w in raw):
            continue
        if phrase.lower() not in (k.lower() for k in kept):
            kept.append(phrase)
        if len(kept) == limit:
            break
    return kept


# Situations are compared pairwise (``overlaps`` over every pair of a batch's rules,
# ``roles._same_situation``): each alternative is read for its words once.
@functools.lru_cache(maxsize=8192)
def _situation_words(situation: str) -> frozenset[str]:
    return situation_words(situation)


@functools.lru_cache(maxsize=4096)
def _alternatives(situation: str) -> tuple[str, ...]:
    return tuple(alternatives(situation))


def same_situation(a: str, b: str) -> bool:
    """Whether two situations describe the same case.

    Equal content words, a Jaccard overlap of at least ``SAME_SITUATION``, or one situation
    of two or more words contained in the other ("desk lamp" and "desk lamp
    repair").
    """
    wa, wb = _situation_words(a), _situation_words(b)
    if not wa or not wb:
        return a.strip().lower() == b.strip().lower()
    if wa == wb:
        return True
    small, large = sorted((wa, wb), key=len)
    if len(small) >= 2 and small <= large:
        return True
    return len(wa & wb) / len(wa | wb) >= SAME_SITUATION


MAX_ALTERNATIVES = 6
"""Most alternatives one rule's situation keeps when rules with one action are folded."""


def overlaps(a: str, b: str) -> bool:
    """Whether some alternative of one situation is the same as some alternative of the other."""
    return any(same_situation(x, y) for x in _alternatives(a) for y in _alternatives(b))


def join_situations(*situations: str) -> str:
    """The situations as one: their alternatives, each once, at most ``MAX_ALTERNATIVES``.

    An alternative the joined situation already covers is left out. Past the
    limit, the alternatives named by the most of the situations stay (a case
    many runs were seen in outlasts one input's keyword), the latest first
    among equals (the latest evidence is kept).
    """
    kept: list[str] = []
    support: list[int] = []
    for situation in situations:
        counted: set[int] = set()
        for alternative in alternatives(situation):
            at = next((i for i, k in enumerate(kept) if same_situation(alternative, k)), None)
            if at is None:
                kept.append(alternative)
                support.append(1)
                counted.add(len(kept) - 1)
            elif at not in counted:
                support[at] += 1
                counted.add(at)
    if len(kept) > MAX_ALTERNATIVES:
        ranked = sorted(range(len(kept)), key=lambda i: (support[i], i), reverse=True)
        chosen = set(ranked[:MAX_ALTERNATIVES])
        kept = [k for i, k in enumerate(kept) if i in chosen]
    return " or ".join(kept)


# Actions are compared pairwise (settling a batch compares every new rule's action
# with every other's): the few distinct actions of a step are read once each.
@functools.lru_cache(maxsize=4096)
def _norm(text: str) -> str:
    return _words.normalised(text)


@functools.lru_cache(maxsize=4096)
def _action_values(action: str) -> tuple[frozenset[str], frozenset[str]]:
    return _values.asked_and_refused(action)


def same_action(a: str, b: str) -> bool:
    """Whether two actions ask for the same thing (their values, or their words, agree).

    The same words are the same action whatever the quoting: a small model writes
    ``answer 'coral'`` in one reply and ``answer coral`` in the next. A value named
    under a negation is not asked for: ``do not answer FIN-7Q`` is not ``answer
    FIN-7Q``, nor ``answer FIN-7Q, not PAY-2D`` the same as ``answer PAY-2D, not
    FIN-7Q``.
    """
    if _norm(a) == _norm(b):
        return True
    va, vb = _action_values(a), _action_values(b)
    if any(va) or any(vb):
        return va == vb
    return False


def _names_any(refused: frozenset[str], output: str) -> bool:
    """Whether ``output`` writes one of the ``refused`` values as a whole token."""
    return any(re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", output) for v in refused)


def followed(action: str, output: str, source: str = "") -> bool | None:
    """Whether an answer carries the action's values; None when the action names none.

    The values the action asks for must all be in the answer and none it refuses
    ("answer PAY-2D, not FIN-7Q"; ``values.asked_and_refused``); an action that
    only refuses ("never answer FIN-7Q") asks for none.

    An action that describes a value instead ("the value in the input, as a
    date written DD.MM.YYYY") is judged against ``source``, the run's input:
    followed when the answer holds the input's value written that way
    (``values.described_in``; an ambiguous date such as 03/03/2025 fits both
    its layouts), not followed when it holds it written otherwise or, for an
    answer written as calls, misses a call the action makes. None when no
    ``source`` is given, when the answer holds no value of the input, or when a
    date is described and the input holds none. The action's own values are
    checked first.
    """
    values, refused = _action_values(action)
    if (values and not all(v in output for v in values)) or _names_any(refused, output):
        return False
    described = _values.descriptions(action)
    if not described or not source:
        return True if values else None
    made = set(CALL_NAME.findall(output))
    if made and not set(CALL_NAME.findall(action)) <= made:
        return False  # another call than the action's
    grounds = _values.described_in(output, source)
    if not grounds:
        return True if values else None
    verdicts = [d in grounds or _values.writes(d, output, source) for d in described]
    if False in verdicts:
        return False
    if None in verdicts:
        return True if values else None
    return True


# A call as an answer or an action writes it: ``name(``, with no space before the
# bracket ("answer (in cents)" and "Monday (03.03.2025)" are prose).
CALL_NAME = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class Conflict:
    """Two rules that give different actions for one situation, and what was done."""

    kept: str
    dropped: str
    reason: str

    def describe(self) -> str:
        """One line for the step report."""
        return f"{self.reason}: kept {self.kept!r}, dropped {self.dropped!r}"


def _proven(bullet: Bullet) -> bool:
    return bullet.helpful > bullet.harmful


def reconcile(playbook: Playbook, ops: Sequence[DeltaOp]) -> tuple[list[DeltaOp], list[Conflict]]:
    """Fold new rules into the live rules they speak about, correcting or widening them.

    For each ADD, in order, against the playbook as this step has changed it so far:

    * a live rule that gives another action for an overlapping situation is
      corrected: the situations the new rule covers leave it (an UPDATE that
      narrows it), or, when nothing else is left (or only alternatives of
      generic words, "any question"), it becomes the new rule;
      unless it has more helpful than harmful verdicts from service (the ADD
      is dropped) or was already corrected in this step. Each case is reported;
    * a live rule with the same action takes the new situation as one more
      alternative (``When A or B, <action>.``, an UPDATE), so the agent reads one
      rule per action whose situation covers every wording seen; a situation it
      already covers changes nothing;
    * any other ADD is kept.

    Each changed bullet gets one UPDATE (or a REMOVE) with its final content.
    """
    live = [(b, parse_rule(b.content)) for b in playbook.live().bullets]
    bullets = {b.id: b for b, r in live if r is not None}
    original = {b.id: r for b, r in live if r is not None}
    current: dict[str, Rule] = dict(original)
    backing: dict[str, list[str]] = {}
    corrected: set[str] = set()
    out: list[DeltaOp] = []
    conflicts: list[Conflict] = []
    for op in ops:
        rule = parse_rule(op.content) if isinstance(op, Add) else None
        if rule is None:
            out.append(op)
            continue
        assert isinstance(op, Add)
        placed = False
        for bid in [bid for bid, old in current.items() if _contradicts(old, rule)]:
            bullet, old = bullets[bid], current[bid]
            if bid in corrected or _proven(bullet):
                why = (
                    "a second correction in one step"
                    if bid in corrected
                    else ("contradicts a proven rule")
                )
                conflicts.append(Conflict(old.text(), op.content, why))
                # The new rule keeps only the situations the standing rule does not cover.
                rest = [a for a in alternatives(rule.situation) if not _covers(old.situation, a)]
                rule = rule.keeping(rest)
                if rule is None:
                    break
            else:
                corrected.add(bid)
                conflicts.append(Conflict(op.content, old.text(), "corrected by new evidence"))
                rest = [a for a in alternatives(old.situation) if not _covers(rule.situation, a)]
                left = old.keeping(rest)
                if left is not None:
                    current[bid] = left
                elif not placed:
                    current[bid] = rule
                    placed = True
                else:
                    del current[bid]
                backing.setdefault(bid, []).extend(op.sources)
        if rule is None or placed:
            continue
        if rule.text() != op.content:
            op = Add(section=op.section, content=rule.text(), sources=list(op.sources))
        same = next(
            (bid for bid, old in current.items() if same_action(old.action, rule.action)), None
        )
        if same is None:
            out.append(op)
            continue
        joined = join_situations(current[same].situation, rule.situation)
        if joined != current[same].situation:
            current[same] = Rule(joined, current[same].action)
            backing.setdefault(same, []).extend(op.sources)
    for bid, rule in original.items():
        if bid not in current:
            out.append(Remove(id=bid, reason="every situation it covered was corrected"))
        elif current[bid] != rule:
            sources = list(dict.fromkeys(backing.get(bid, [])))
            out.append(Update(id=bid, content=current[bid].text(), sources=sources))
    return out, conflicts


def _contradicts(old: Rule, new: Rule) -> bool:
    return overlaps(old.situation, new.situation) and not same_action(old.action, new.action)


def _covers(situation: str, alternative: str) -> bool:
    return any(same_situation(alternative, other) for other in alternatives(situation))


def fold_actions(ops: Sequence[DeltaOp]) -> list[DeltaOp]:
    """New rules of one step that give the same action folded into one rule.

    ``When A, X.`` and ``When B, X.`` become ``When A or B, X.``, backed by the
    sources of both: one rule per action, whose situation names every kind of
    input seen to need it, is what a small agent applies to new wordings.
    """
    out: list[DeltaOp] = []
    # position in out -> the first op of its action, and every rule folded into it
    folded: dict[int, tuple[Add, list[Rule], list[str]]] = {}
    for op in ops:
        rule = parse_rule(op.content) if isinstance(op, Add) else None
        if rule is None:
            out.append(op)
            continue
        assert isinstance(op, Add)
        at = next(
            (i for i, (_, held, _) in folded.items() if same_action(held[0].action, rule.action)),
            None,
        )
        if at is None:
            folded[len(out)] = (op, [rule], list(op.sources))
            out.append(op)
            continue
        first, held, sources = folded[at]
        held.append(rule)
        sources.extend(s for s in op.sources if s not in sources)
    for at, (first, held, sources) in folded.items():
        if len(held) == 1:
            continue
        # All situations joined at once, so each alternative's support is counted.
        merged = Rule(join_situations(*(r.situation for r in held)), held[0].action)
        out[at] = Add(section=first.section, content=merged.text(), sources=sources)
    return out


def settle_batch(ops: Sequence[DeltaOp]) -> tuple[list[DeltaOp], list[Conflict]]:
    """Resolve new rules of one step that give different actions for one situation.

    Settled alternative by alternative: the alternatives of the step's rules
    that are one situation (``same_situation``) are grouped, and where a group
    holds rules of different actions, the action backed by the most source
    traces keeps it and the other rules lose it; a tie takes it from every rule:
    a situation every answer claims cannot route anything. A rule keeps its
    other alternatives ("When promo code or code, MKT-4V." and "When
    two-factor login or code, SEC-9D." lose only "code"); a rule left with none,
    or with only alternatives of generic words ("any question"), is dropped (the
    name of the whole task, given with every answer, is such a situation). Each
    loss is recorded.
    """
    adds = [
        (i, op, rule)
        for i, op in enumerate(ops)
        if isinstance(op, Add) and (rule := parse_rule(op.content)) is not None
    ]
    # Groups of one situation: (index into adds, the alternative) pairs.
    groups: list[list[tuple[int, str]]] = []
    for n, (_, _, rule) in enumerate(adds):
        for alternative in alternatives(rule.situation):
            for group in groups:
                if same_situation(group[0][1], alternative):
                    group.append((n, alternative))
                    break
            else:
                groups.append([(n, alternative)])
    lost: dict[int, list[tuple[str, str, str]]] = {}  # add -> (alternative, kept, reason)
    for group in groups:
        by_action: list[list[tuple[int, str]]] = []
        for item in group:
            action = adds[item[0]][2].action
            for side in by_action:
                if same_action(adds[side[0][0]][2].action, action):
                    side.append(item)
                    break
            else:
                by_action.append([item])
        if len(by_action) < 2:
            continue
        support = sorted(
            (
                (len({s for n, _ in side for s in adds[n][1].sources} or {""}), side)
                for side in by_action
            ),
            key=lambda pair: -pair[0],
        )
        best, runner_up = support[0][0], support[1][0]
        losers = [side for _, side in support[1:]] if best > runner_up else by_action
        kept = adds[support[0][1][0][0]][1].content if best > runner_up else "(none)"
        reason = "outvoted in this step" if best > runner_up else "ambiguous situation"
        for side in losers:
            for n, alternative in side:
                lost.setdefault(n, []).append((alternative, kept, reason))
    out = list(ops)
    drop: set[int] = set()
    conflicts: list[Conflict] = []
    for n, losses in lost.items():
        i, op, rule = adds[n]
        gone = {alternative for alternative, _, _ in losses}
        narrowed = rule.keeping([a for a in alternatives(rule.situation) if a not in gone])
        _, kept, reason = losses[0]
        if narrowed is None:
            drop.add(i)
            conflicts.append(Conflict(kept, op.content, reason))
            continue
        out[i] = Add(section=op.section, content=narrowed.text(), sources=list(op.sources))
        for alternative, kept, reason in losses:
            conflicts.append(Conflict(kept, f"{alternative!r} of {op.content}", reason))
    # Copies of one rule (two curators adopted it) lose the same way: said once.
    return [op for i, op in enumerate(out) if i not in drop], list(dict.fromkeys(conflicts))


def served(playbook: Playbook, trace: Trace) -> list[Bullet]:
    """The live bullets the run was served, as far as its recorded version tells.

    A trace records the version served, not the bullets: the bullets of this
    playbook created at or before that version are taken as served (a bullet
    updated since then is credited with its current content).
    """
    version = trace.prompt_version
    if version is None or version < 1:
        return []
    return [b for b in playbook.live().bullets if b.created_version <= version]


def served_tags(playbook: Playbook, traces: Iterable[Trace]) -> list[DeltaOp]:
    """Helpful/harmful counts from served outcomes, one TAG op per bullet.

    A run with a verdict (``correct``) that was served a rule and whose answer
    carries the rule's values followed it: helpful if the run was right,
    harmful if it was wrong. Rules that name no value, or that the answer did
    not follow, get nothing from that run. ``served_evidence`` says when a
    wrong run is the model's misreading rather than evidence against the rule.
    """
    return served_evidence(playbook, traces)[0]


def _grounded(action: str, words: frozenset[str], seen: Iterable[Seen]) -> bool:
    """Whether an input of the rule's own case (it needed ``action``) names one of the
    situation's ``words``: the situation describes real inputs, not everything.

    An input's ground truth decides which action it needed (all of the action's
    values are values of the truth); without one, the actions its reflection
    backed do, as in ``needs``.
    """
    wanted = _action_values(action)[0]
    for item in seen:
        if not words & item.words:
            continue
        truth = item.truth.strip()
        if truth:
            if wanted and wanted <= (_values.values(truth) | {truth}):
                return True
        elif any(same_action(a, action) for a in item.actions):
            return True
    return False


@dataclass(frozen=True)
class _Served:
    """A live bullet read once for ``served_evidence``."""

    action: str
    values: frozenset[str]  # asked for
    situation: frozenset[str]  # empty for a bullet that is not a rule
    convention: Convention | None = None
    refused: frozenset[str] = frozenset()


def served_evidence(
    playbook: Playbook,
    traces: Iterable[Trace],
    seen: Iterable[Seen] = (),
    trust: Trust | None = None,
) -> tuple[list[DeltaOp], int]:
    """``served_tags``, and the number of wrong runs counted at half weight (misapplied).

    A small model answers a rule's value for inputs the rule does not speak of:
    the demo's 1.5B routed a delivery address, a slow website and a refund to
    the parcel rule, which was removed for it though it was right for parcels.
    A wrong run is such a misreading, and counts half (two of them make one
    harmful verdict), when all of these hold:

    * its input shares no content word with the rule's situation;
    * the rule is grounded: an input that needed its action (in the traces, or
      in ``seen``, the inputs remembered from earlier steps) names a word of the
      situation, so the situation describes real inputs, not everything;
    * no other wrong run that followed the rule needed the same answer: wrong
      runs that agree on another answer are a case the rule pulls in, which is
      the rule's fault whatever their wording.

    Any other wrong run that followed a rule counts in full. A right run counts
    as helpful whatever its wording: the answer was right. Conventions are
    weighed on trusted verdicts only (``trust``; ``conventions.trusted_verdict``).
    """
    runs = list(traces)
    by_id = {item.id: item for item in (*seen, *seen_inputs(runs))}
    known = list(by_id.values())
    read: dict[str, _Served] = {}

    def reading(bullet: Bullet) -> _Served:
        found = read.get(bullet.id)
        if found is None:
            rule = parse_rule(bullet.content)
            action = rule.action if rule is not None else bullet.content
            situation = situation_words(rule.situation) if rule is not None else frozenset()
            convention = parse_convention(bullet.content) if rule is None else None
            asked, refused = _action_values(action) if convention is None else (frozenset(),) * 2
            found = read[bullet.id] = _Served(action, asked, situation, convention, refused)
        return found

    counts: dict[str, list[int]] = {}
    sources: dict[str, list[str]] = {}
    # Bullet id -> the wrong runs that may be misreadings: (trace id, its ground truth).
    excusable: dict[str, list[tuple[str, str]]] = {}
    grounded: dict[str, bool] = {}
    for trace in runs:
        verdict = trace.feedback.correct if trace.feedback is not None else None
        if verdict is None:
            continue
        words: frozenset[str] | None = None
        for bullet in served(playbook, trace):
            item = reading(bullet)
            if item.convention is not None:
                # A right reply that follows a convention backs it; one that does not
                # shows not every reply needs it. A wrong reply may be wrong for any
                # other reason and says nothing of it, unless its comment forbids it.
                # Only trusted verdicts weigh a convention: it was learned from them,
                # and end users' thumbs-up must not remove it.
                if not trusted_verdict(trace, trust):
                    continue
                kept = item.convention.followed(trace.output)
                harmful = disowned(trace, item.convention, trust)  # the reviewer forbids it
                if harmful or (verdict and kept is not None):
                    pair = counts.setdefault(bullet.id, [0, 0])
                    pair[0 if kept and not harmful else 1] += 1
                    sources.setdefault(bullet.id, []).append(trace.id)
                continue
            if (
                not item.values
                or not all(v in trace.output for v in item.values)
                or _names_any(item.refused, trace.output)
            ):
                continue  # the answer did not follow the rule (or it asks for no value)
            if not verdict and item.situation:
                if words is None:
                    words = input_words(trace.input)
                if not item.situation & words:
                    if bullet.id not in grounded:
                        grounded[bullet.id] = _grounded(item.action, item.situation, known)
                    if grounded[bullet.id]:
                        excusable.setdefault(bullet.id, []).append((trace.id, _truth(trace)))
                        continue
            pair = counts.setdefault(bullet.id, [0, 0])
            pair[0 if verdict else 1] += 1
            sources.setdefault(bullet.id, []).append(trace.id)
    misapplied: set[str] = set()
    for bid, wrong in excusable.items():
        answers: dict[str, int] = {}
        for _, truth in wrong:
            key = _norm(truth)
            if key:
                answers[key] = answers.get(key, 0) + 1
        full = [tid for tid, truth in wrong if answers.get(_norm(truth), 0) > 1]
        half = [tid for tid, truth in wrong if answers.get(_norm(truth), 0) <= 1]
        misapplied.update(half)
        harm = len(full) + len(half) // 2
        if harm:
            pair = counts.setdefault(bid, [0, 0])
            pair[1] += harm
            sources.setdefault(bid, []).extend(full + half)
    tags: list[DeltaOp] = [
        Tag(id=bid, helpful=h, harmful=x, sources=sources[bid]) for bid, (h, x) in counts.items()
    ]
    return tags, len(misapplied)


def discredited(playbook: Playbook) -> list[DeltaOp]:
    """REMOVE ops for live bullets with ``MIN_HARMFUL`` harmful verdicts, outweighing helpful."""
    return [
        Remove(
            id=b.id,
            reason=f"served to runs that stayed wrong (helpful={b.helpful}, harmful={b.harmful})",
        )
        for b in playbook.live().bullets
        if b.harmful >= MIN_HARMFUL and b.harmful > b.helpful
    ]


def conflicts(playbook: Playbook) -> list[tuple[Bullet, Bullet]]:
    """Pairs of live bullets that give different actions for one situation."""
    parsed = [(b, r) for b in playbook.live().bullets if (r := parse_rule(b.content)) is not None]
    pairs = []
    for i, (a, ra) in enumerate(parsed):
        for b, rb in parsed[i + 1 :]:
            if _contradicts(ra, rb):
                pairs.append((a, b))
    return pairs


def resolve_conflicts(playbook: Playbook) -> tuple[list[DeltaOp], list[Conflict]]:
    """REMOVE ops that leave no contradicting pair: the weaker bullet of each goes.

    The stronger bullet has more helpful-minus-harmful, then the later update.
    """
    removed: set[str] = set()
    ops: list[DeltaOp] = []
    found: list[Conflict] = []
    for a, b in conflicts(playbook):
        if a.id in removed or b.id in removed:
            continue
        keep, drop = sorted(
            (a, b), key=lambda x: (x.usefulness, x.updated_version, x.id), reverse=True
        )
        removed.add(drop.id)
        ops.append(Remove(id=drop.id, reason=f"contradicts {keep.id}"))
        found.append(Conflict(keep.content, drop.content, "contradiction in the playbook"))
    return ops, found


def _truth(trace: Trace) -> str:
    return (trace.feedback.ground_truth or "").strip() if trace.feedback is not None else ""


@dataclass(frozen=True)
class Seen:
    """One input as evidence of which action it needed.

    Attributes:
        id: The trace id.
        words: The input's content words (``input_words``).
        truth: Its ground truth, if feedback gave one.
        actions: The actions of the new rules its reflection backed.
        text: The input's start (``MAX_FOCUS_TEXT`` characters), for the words as written.
    """

    id: str
    words: frozenset[str]
    truth: str = ""
    actions: tuple[str, ...] = ()
    text: str = ""


def _rule_actions(ops: Sequence[DeltaOp]) -> dict[str, tuple[str, ...]]:
    """Trace id -> the actions of the new rules it is a source of."""
    out: dict[str, list[str]] = {}
    for op in ops:
        rule = parse_rule(op.content) if isinstance(op, Add) else None
        if rule is None:
            continue
        assert isinstance(op, Add)
        for source in op.sources:
            known = out.setdefault(source, [])
            if not any(same_action(a, rule.action) for a in known):
                known.append(rule.action)
    return {k: tuple(v) for k, v in out.items()}


def seen_inputs(traces: Iterable[Trace], ops: Sequence[DeltaOp] = ()) -> list[Seen]:
    """The traces with an input as evidence, with the actions of the ``ops`` they back."""
    actions = _rule_actions(ops)
    return [
        Seen(
            t.id,
            input_words(t.input),
            _truth(t),
            actions.get(t.id, ()),
            t.input[:MAX_FOCUS_TEXT],
        )
        for t in traces
        if t.input.strip()
    ]


class InputMemory:
    """The inputs of a learner's recent steps, kept in memory as evidence.

    A step of a few traces (the demo learns four at a time) holds too few
    inputs to ground the rules it serves (``served_evidence``) or to show that
    several inputs share a label (the ``confirmed`` stage); the inputs of the
    steps before it do. Bounded (the latest ``limit`` inputs); it
    is lost with the process, which loses nothing but evidence.
    """

    def __init__(self, limit: int = 512) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigurationError("limit", limit, "an int >= 0")
        self.limit = limit
        self._items: dict[str, Seen] = {}
        # learn() in one thread and the background learner in another may share an engine.
        self._lock = threading.Lock()

    def remember(self, traces: Iterable[Trace], ops: Sequence[DeltaOp] = ()) -> None:
        """Keep the traces' inputs, with the actions of the new rules they backed."""
        seen = seen_inputs(traces, ops)
        with self._lock:
            self._keep(seen)

    def _keep(self, seen: Sequence[Seen]) -> None:
        for item in seen:
            known = self._items.pop(item.id, None)
            if known is not None:
                # A trace seen again (the sequential strategy finishes run by run) keeps
                # the actions it backed before.
                extra = [
                    a for a in known.actions if not any(same_action(a, b) for b in item.actions)
                ]
                item = dataclasses.replace(item, actions=(*item.actions, *extra))
            self._items[item.id] = item
        while len(self._items) > self.limit:
            del self._items[next(iter(self._items))]

    def items(self) -> list[Seen]:
        """The inputs kept, oldest first."""
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


UserWordFault = Callable[[DeltaOp], int | None]
"""What the guard finds in an op (``BulletGuard.user_word_fault``): 0 it passes, N it is
refused only for carrying N of the end user's words, None it is refused for anything else."""


NEGATION = frozenset(["not", "no", "never", "neither", "nor", "without", "unless", "except"])
"""Words that make "A or B" no plain choice ("not damaged or defective")."""


def fit(
    ops: Sequence[DeltaOp], fault: UserWordFault, inputs: Iterable[str] = ()
) -> tuple[list[DeltaOp], int]:
    """New rules the guard would refuse for the user's words alone, narrowed until it would not.

    A situation is written in the input's words, and the reflector's keywords
    join it; on a task whose ground truth the guard does not
    take as the operator's (``combee.feedback``'s default source), the rule may
    then carry more of the user's words than the guard allows, or a run of them
    that reads as a quote, and the whole rule was refused. Its later
    alternatives are dropped instead, one at a time, each time the one whose
    removal leaves the fewest user words, until the guard lets the rule
    through. Only what is plainly a choice is dropped: a keyword of at most
    ``MAX_KEYWORD_WORDS`` words joined by "or", never the first alternative (the
    reflector's situation), nothing in a situation with a negation or a ";"
    (a comma the reflector wrote: "A, B" may mean both), and the alternatives
    kept must each hold a word of ``inputs`` (the step's inputs). Only new rules
    (ADD) are narrowed: an UPDATE would take alternatives from a rule in force.
    A rule the guard refuses for anything else (its action is checked alone:
    ``BulletGuard``), or still refuses when nothing more may be dropped, is left
    as it was and refused whole. Nothing is added, and the narrowed rule is
    screened again, in full, by the step's guard.

    Returns:
        The ops, and how many of them were narrowed.
    """
    seen = frozenset().union(*(input_words(text) for text in inputs))
    out: list[DeltaOp] = []
    narrowed = 0
    for op in ops:
        fitted = _fit_one(op, fault, seen) if isinstance(op, Add) else None
        narrowed += fitted is not None
        out.append(op if fitted is None else fitted)
    return out, narrowed


def _fit_one(op: Add, fault: UserWordFault, seen: frozenset[str]) -> Add | None:
    rule = parse_rule(op.content)
    if rule is None or ";" in rule.situation:
        return None
    words = set(_words.words(rule.situation))
    have = [a.strip() for a in rule.situation.split(" or ")]
    if len(have) < 2 or len(have) > MAX_ALTERNATIVES + 2 or words & NEGATION:
        return None
    if not fault(op):
        return None

    def droppable(alternative: str) -> bool:
        return len(_words.words(alternative)) <= MAX_KEYWORD_WORDS

    # Alternatives no input holds a word of go first; one that may not go ends it.
    grounded = [a for a in have[1:] if not seen or situation_words(a) & seen]
    if any(not droppable(a) for a in have[1:] if a not in grounded):
        return None
    if len(grounded) < len(have) - 1:
        have = [have[0], *grounded]
        kept = rule.keeping(have)
        candidate = None if kept is None else op.model_copy(update={"content": kept.text()})
        if candidate is None or fault(candidate) == 0:
            return candidate
    while True:
        best: tuple[int, list[str]] | None = None
        for i in reversed([i for i in range(1, len(have)) if droppable(have[i])]):
            rest = have[:i] + have[i + 1 :]
            kept = rule.keeping(rest)
            if kept is None:
                continue
            candidate = op.model_copy(update={"content": kept.text()})
            found = fault(candidate)
            if found == 0:
                return candidate
            if found is not None and (best is None or found < best[0]):
                best = (found, rest)
        if best is None:
            return None
        have = best[1]
