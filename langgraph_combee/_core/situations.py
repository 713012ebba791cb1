"""The text of "When <situation>, <action>." rules: parsing, content words, matching.

The learner's rules layer (``_rules/rules.py``) and the agent side both read
rules this way: the learner to tell when two rules speak about the same case,
the agent side to find the rules a request names (``matching``). Pure
functions of text, without any state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langgraph_combee._core import values as _values
from langgraph_combee._core import words as _words
from langgraph_combee._core.conventions import Convention, closing, parse_convention
from langgraph_combee._core.playbook import Playbook

__all__ = [
    "FOCUS_HEADER",
    "FOCUS_RULES",
    "FOCUS_RULES_ALLOWED",
    "MAX_FOCUS_RULES",
    "MAX_KEYWORD_WORDS",
    "Rule",
    "RuleIndex",
    "alternatives",
    "focus_rules_ok",
    "focus_text",
    "focused",
    "input_words",
    "parse_rule",
    "situation_words",
    "stem",
]

# The opening word of a rule; the rest is cut at the first comma with str.partition.
# One pattern for the whole rule backtracked quadratically on a long run of spaces
# (100,000 of them took minutes), and a bullet is parsed on the agent's hot path.
_OPENING = re.compile(r"\s*(?:when|if|for)\s", re.I)
# "or" between spaces, or ";": lookarounds, so a long run of spaces is read once.
_ALTERNATIVE = re.compile(r"(?<=\s)or(?=\s)|;", re.I)
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
# Words that say nothing about which case a situation is (generic request words).
# English only: in other languages every word counts as a content word.
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "for",
        "in",
        "on",
        "at",
        "by",
        "with",
        "about",
        "and",
        "or",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "any",
        "some",
        "user",
        "users",
        "request",
        "requests",
        "input",
        "inputs",
        "message",
        "messages",
        "asks",
        "ask",
        "asking",
        "question",
        "questions",
        "agent",
        # Pronouns, auxiliaries and question words: in inputs of every kind (the 1.5B
        # copied "me" from "send me" as a keyword).
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "you",
        "your",
        "he",
        "she",
        "they",
        "them",
        "their",
        "his",
        "her",
        "can",
        "could",
        "would",
        "should",
        "will",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "was",
        "were",
        "been",
        "am",
        "how",
        "what",
        "why",
        "who",
        "which",
        "where",
        "there",
        "here",
        "so",
        "but",
        "from",
        "as",
        # Greetings and sign-offs wrap inputs of every kind.
        "hi",
        "hello",
        "dear",
        "regard",
        "thank",
        "please",
    ]
)


@dataclass(frozen=True)
class Rule:
    """A rule split into the situation it applies to and the action it asks for."""

    situation: str
    action: str

    def text(self) -> str:
        """The rule as a playbook line: ``When <situation>, <action>.``."""
        return f"When {self.situation}, {self.action.rstrip('.')}."

    def keeping(self, rest: Sequence[str]) -> Rule | None:
        """The rule with only the alternatives ``rest``; None when none has a content word.

        An alternative of stop words and generic request words only ("any
        question") fits every input: a rule narrowed down to such alternatives
        would apply to every request, which is what narrowing it was against.
        """
        if not any(situation_words(a) for a in rest):
            return None
        return Rule(" or ".join(rest), self.action)


def parse_rule(text: str) -> Rule | None:
    """Split ``"When <situation>, <action>."`` into its parts; None for other text.

    The situation runs to the first comma; both parts must be there (a part of
    spaces only is kept, as '').
    """
    opening = _OPENING.match(text)
    if opening is None:
        return None
    situation, comma, action = text[opening.end() :].partition(",")
    if not (situation and comma and action):
        return None
    return Rule(situation.strip(), action.strip().rstrip("."))


def situation_words(situation: str) -> frozenset[str]:
    """The situation's content words (stop words and generic request words left out).

    Words of any script count (``words.words``: case-folded, accents kept, scripts
    without spaces as pairs of characters). Plurals and -ing forms are matched
    to their stem, and stop words left out, in English (ASCII words) only.
    """
    # Single letters are left out too (the "s" of "user's", the "l" of "l'offre"),
    # but not a character of a script without spaces, which can be a word alone.
    found = (
        stem(w) if w.isascii() else w
        for w in _words.words(situation)
        if len(w) > 1 or w.isdigit() or _words.is_unspaced(w)
    )
    kept = list(found)
    if not any(w in _STOP for w in kept):
        return frozenset(kept)
    acronyms = _acronyms(situation)
    return frozenset(w for w in kept if w not in _STOP or w in acronyms)


def _acronyms(text: str) -> frozenset[str]:
    """Stop words written in capitals in mixed-case text: "US", "IT", "WHO" are names there.

    In text written all in capitals ("WHERE IS MY PARCEL") capitals say nothing.
    """
    if not any(c.islower() for c in text):
        return frozenset()
    # ASCII text has the same tokens without the Unicode classes, eight times faster.
    found = _ASCII_TOKEN.finditer(text) if text.isascii() else _words.tokens(text)
    return frozenset(
        m.group().casefold()
        for m in found
        if len(m.group()) > 1 and m.group().isupper() and m.group().casefold() in _STOP
    )


def input_words(text: str) -> frozenset[str]:
    """The content words of an input text, stemmed as situations are."""
    return situation_words(text)


_ENDINGS = (("ing", ""), ("ies", "y"), ("ery", "er"), ("ed", ""), ("es", ""), ("s", ""))
"""English endings a stem drops (or rewrites), tried in turn: "refunds", "delivered",
"deliveries", "delivery" and "delivering" are read as "refund" and "deliver"."""


def _stem_once(word: str) -> str:
    for suffix, replacement in _ENDINGS:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            if suffix == "ed" and word.endswith("eed"):
                continue  # "exceed", "proceed": no past tense
            return word[: -len(suffix)] + replacement
    return word


def stem(word: str) -> str:
    """An English word without its plural, -ing, -ed or -ery ending ("delivered" -> "deliver").

    Applied until nothing changes ("deliveries" -> "delivery" -> "deliver"), so a
    stem is its own stem: a rule word and a request word read alike or not at all.
    """
    for _ in range(4):
        shorter = _stem_once(word)
        if shorter == word:
            return word
        word = shorter
    return word


# Verbs, time words and fillers that requests of every kind are written with: a rule whose
# situation names one ("get", "make", "send", "went", "months") matches requests of other
# cases as well (the reflector's keywords bring them in). On eleven
# real ticket-routing playbooks of the 1.5B (352 held-out tickets), leaving them out cut
# the tickets shown a rule of another code from 127 to 94 and raised those whose first
# matching rule is the right one from 193 to 200 (benchmarks/results/focus-proxy.py.txt).
# Read through ``stem``, as situations are.
_GENERIC = (
    "get", "got", "gotten", "make", "made", "use", "used", "find", "found", "come", "came",
    "go", "goes", "went", "gone", "say", "says", "said", "tell", "told", "know", "knew",
    "want", "wanted", "need", "needed", "see", "saw", "seen", "look", "looked", "take",
    "took", "taken", "give", "gave", "given", "try", "tried", "work", "worked", "keep",
    "kept", "let", "put", "seem", "seems", "think", "thought", "show", "showed", "send",
    "sent", "happen", "happened", "help", "cannot", "able", "like", "just", "also", "still",
    "maybe", "sure", "thing", "things", "something", "anything", "nothing", "everything",
    "someone", "anyone", "way", "time", "times", "day", "days", "week", "weeks", "month",
    "months", "year", "years", "today", "yesterday", "tomorrow", "long", "usually", "usual",
    "thanks", "ok", "okay", "again", "now", "soon", "already", "yet", "very", "really", "much",
    "many", "lot", "lots", "getting", "making", "using", "finding", "coming", "going",
    "saying", "telling", "knowing", "wanting", "needing", "seeing", "looking", "taking",
    "giving", "trying", "working", "keeping", "showing", "sending", "happening", "helping",
    # The first part of a negated auxiliary ("doesn't" is "doesn" and "t").
    "doesn", "don", "didn", "isn", "aren", "wasn", "weren", "won", "haven", "hasn",
    "hadn", "couldn", "wouldn", "shouldn",
)  # fmt: skip
_STOP = _STOP | frozenset(stem(w) for w in _GENERIC)


def alternatives(situation: str) -> list[str]:
    """The alternatives of a situation: ``"A or B; C"`` -> ``["A", "B", "C"]``."""
    parts = [p.strip() for p in _ALTERNATIVE.split(situation)]
    return [p for p in parts if p] or [situation.strip()]


FOCUS_RULES = 3
"""Most matching rules repeated after the playbook for a request, by default."""
FOCUS_HEADER = "### The rules that match this request"
"""The heading of the rules a request names, repeated after the playbook (``RuleIndex.focus``)."""
MAX_FOCUS_RULES = 20
"""Most rules ``focus_rules`` may ask to repeat."""
FOCUS_RULES_ALLOWED = f"an int from 0 (off) to {MAX_FOCUS_RULES}"
"""What ``focus_rules`` may be, for the error that refuses another value."""
MAX_FOCUS_TEXT = 4000
"""Characters of a request read for its words (a long request is matched on its start)."""
MAX_KEYWORD_WORDS = 4
"""Most words of a keyword: what the small profile's situations list, joined by "or".

In a script without spaces, a word is counted per ``words.CHARS_PER_WORD`` characters."""


@dataclass(frozen=True)
class _Indexed:
    order: int
    rule: Rule
    alternatives: tuple[tuple[str, frozenset[str]], ...]
    keywords: bool  # every alternative a keyword: the focus may name only the matched ones


@dataclass(frozen=True)
class _Rival:
    line: str  # the bullet's line in a rendered playbook ("- <content>")
    shape: str  # its action with the values blanked (``values.slots``)
    values: tuple[str, ...]


# An action that is the reply itself, one value: "answer FIN-7Q", "route to the team LOG-8W".
_ONE_ANSWER = re.compile(
    r"(?:answer|reply|respond|route|classify|categori[sz]e)(?: (?:with|to|as|into))?"
    r"(?: the)?(?: (?:code|team|queue|category|label|priority))? \{\}"
)


def exclusive(action: str) -> tuple[str, tuple[str, ...]] | None:
    """The shape and value of an action that is the reply itself; None for any other.

    "answer FIN-7Q", "route to LOG-8W", "classify as 'billing'": a reply gives
    one of them, so two rules of one shape with other values are rivals. Every
    other action may add up with another rule's ("add the tag 'vip'", "call
    `check_seats` first", "set the flag 'urgent'", a tool call, "answer FIN-7Q
    and add the tag 'vip'"), and is never a rival.
    """
    found = _values.slots(action)
    if found is None or len(found[1]) != 1 or not _ONE_ANSWER.fullmatch(found[0]):
        return None
    return found


def focus_rules_ok(value: object) -> bool:
    """Whether ``value`` is a valid ``focus_rules``: an int from 0 (off) to ``MAX_FOCUS_RULES``.

    The settings that take it raise ``ConfigurationError`` with ``FOCUS_RULES_ALLOWED``
    (the core raises nothing of ours: the import contract in ``pyproject.toml``).
    """
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_FOCUS_RULES


def keyword_list(situation: str) -> bool:
    """Whether ``situation`` is a list of keywords ("refund or money back"), not a clause."""
    alts = alternatives(situation)
    return bool(alts) and all(_keyword(alt) for alt in alts)


def _keyword(alternative: str) -> bool:
    """Whether ``alternative`` is a keyword (``MAX_KEYWORD_WORDS`` words at most), not a clause."""
    count = sum(_words.word_count(m.group()) for m in _words.tokens(alternative))
    return count <= MAX_KEYWORD_WORDS


def _forms(word: str) -> list[str]:
    """The words of a request ``situation_words`` reads as ``word``: itself and its endings."""
    if not word.isascii():
        return [word]  # words of other scripts are not stemmed
    bases = {word, word + "e"}
    if word.endswith("er"):
        bases.add(word[:-2] + "ery")
    if word.endswith("y"):
        bases.add(word[:-1] + "ies")
    endings = ("", "s", "es", "ing", "ed", "d", "y", "ies")
    # Two endings deep: the stem is applied until nothing changes ("hundreds" ->
    # "hundred" -> "hundr"), so a form may take two of them.
    once = {b + e for b in bases for e in endings} | {word[:-2] + "eries"}
    found = once | {f + e for f in once for e in endings}
    return sorted(w for w in found if stem(w) == word)


class RuleIndex:
    """The rules of a playbook, ready to be matched against requests.

    A rule matches a request when all the content words of one of its situation's
    alternatives occur in the request ("When refund or money back, ..." matches
    "Where is my money? I want it back"). A small model reads a long list of
    rules and still answers with the wrong one; the matching rules repeated
    after the list, with only the alternatives the request names, is what the
    bundled 1.5B follows (``docs/benchmarks.md``, serving). Only a situation that is a
    list of keywords (at most ``MAX_KEYWORD_WORDS`` words each) is cut down so:
    in "When a refund is asked for a damaged or lost parcel" the "or" is inside
    one case, and "When lost parcel" would drop the rest of it, so such a rule
    is repeated as written. Text that is not a rule never matches. Built once
    per served version; ``focus`` is a pure function.

    A request is read for the rules' own words only (``_words_of``): on the
    agent's hot path, one pass over its words and a dictionary look-up each.
    """

    def __init__(self, contents: Sequence[str]) -> None:
        indexed: list[_Indexed] = []
        conventions: list[Convention] = []
        rivals: list[_Rival] = []
        for order, content in enumerate(contents):
            rule = parse_rule(content)
            if rule is None:
                if (convention := parse_convention(content)) is not None:
                    conventions.append(convention)
                continue
            if (
                "\n" not in content
                and keyword_list(rule.situation)
                and (slots := exclusive(rule.action)) is not None
            ):
                # A prose situation ("a refund over 100 EUR") may hold a condition the
                # words cannot test: such a rule is never left out.
                rivals.append(_Rival(f"- {content}", *slots))
            alts = tuple(
                (alt, words)
                for alt in alternatives(rule.situation)
                if (words := situation_words(alt))
            )
            if alts:
                keywords = all(_keyword(alt) for alt, _ in alts)
                indexed.append(_Indexed(order, rule, alts, keywords))
        self._rules = tuple(indexed)
        # Lines of bullets written on several lines: never cut, never read as headings.
        inner = {line for c in contents if "\n" in c for line in f"- {c}".split("\n")}
        self._rivals = tuple(r for r in rivals if r.line not in inner)
        self.inner_lines: frozenset[str] = frozenset(inner)
        """Lines of the bullets written on several lines (never cut as a rule or a heading)."""
        self.conventions: tuple[Convention, ...] = tuple(conventions)
        """The conventions every reply must follow, repeated after the rules of every request."""
        # A rule word -> the (rule, alternative) pairs that hold it: a request is
        # checked against the alternatives it shares a word with, not against all.
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for i, item in enumerate(indexed):
            for j, (_, words) in enumerate(item.alternatives):
                for word in words:
                    self._postings.setdefault(word, []).append((i, j))
        vocabulary = set(self._postings)
        # A request's word -> the rule word it is read as ("refunds" -> "refund").
        self._forms = {form: w for w in vocabulary for form in _forms(w)}
        # A stop word is a rule word only as an acronym ("US customers"); whether a
        # request names it depends on the request's capitals: read such requests
        # exactly as ``input_words`` does.
        self._exact = bool(vocabulary & _STOP)

    @classmethod
    def of(cls, playbook: Playbook) -> RuleIndex:
        """The index of ``playbook``'s live bullets (the ones the agent is served)."""
        return cls([b.content for b in playbook.live().bullets])

    def __bool__(self) -> bool:
        """Whether the index holds a rule (conventions alone are no rule to match)."""
        return bool(self._rules)

    def _words_of(self, text: str) -> frozenset[str] | set[str]:
        """The rules' words ``text`` holds: ``input_words(text)`` as far as any rule can tell."""
        if self._exact:
            return input_words(text)
        forms = self._forms
        # The single letters ``situation_words`` leaves out are never rule words.
        return {forms[w] for w in _words.words(text) if w in forms}

    def matching(self, text: str, *, limit: int = 3) -> list[Rule]:
        """The rules ``text`` names, most specific first, with only the alternatives it names.

        Ranked by, in turn: the most words in one matched alternative (the
        whole "desk lamp repair" before the "lamp" of another rule); the most
        of the request's words anywhere in the rule's situation (a "return
        form" request: the rule naming "return" and "return form" before the
        one naming "forms"); the largest share of the rule's alternatives that
        hold a word of the request (the word is central to the rule: "refund"
        in "refund or refund time or kettle" before "accounts" in "invoice or
        company or accounts"); the most matched alternatives; the rule written
        first. Two rules with the same action are given once. A rule whose
        situation is not a list of keywords is given whole.
        """
        if limit < 1 or not self._rules or not text:
            return []
        hits: dict[tuple[int, int], int] = {}
        shared: dict[int, set[str]] = {}  # rule -> the request's words in its situation
        for word in self._words_of(text[:MAX_FOCUS_TEXT]):
            for key in self._postings.get(word, ()):
                hits[key] = hits.get(key, 0) + 1
                shared.setdefault(key[0], set()).add(word)
        named_in: dict[int, list[int]] = {}
        touched: dict[int, int] = {}  # rule -> its alternatives holding a word of the request
        for (i, j), count in hits.items():
            touched[i] = touched.get(i, 0) + 1
            if count == len(self._rules[i].alternatives[j][1]):  # all of its words
                named_in.setdefault(i, []).append(j)
        scored = []
        for i, js in named_in.items():
            item = self._rules[i]
            named = [item.alternatives[j] for j in sorted(js)]
            best = max(len(words) for _, words in named)
            central = touched[i] / len(item.alternatives)
            scored.append((-best, -len(shared[i]), -central, -len(named), item.order, item, named))
        scored.sort(key=lambda s: s[:5])
        found: list[Rule] = []
        actions: set[str] = set()
        for *_, item, named in scored:
            action = item.rule.action.casefold()
            if action in actions:
                continue
            actions.add(action)
            situation = " or ".join(alt for alt, _ in named) if item.keywords else None
            found.append(Rule(situation or item.rule.situation, item.rule.action))
            if len(found) == limit:
                break
        return found

    def rivals_of(self, rules: Sequence[Rule]) -> frozenset[str]:
        """The playbook lines of the rules that ask for another value of what ``rules`` ask.

        A rule is a rival of ``rules`` when its action and one of theirs give
        the reply a value, or set an argument, in the same words with other
        values (``exclusive``: "answer SEC-9D" against "answer PAY-2D";
        ``pass cabin='business'`` against ``pass cabin='economy'``): a reply
        follows one of them. Actions that add up ("add the tag 'vip'", "call
        `lookup` first") and actions naming no value are never rivals.
        """
        wanted: dict[str, set[tuple[str, ...]]] = {}
        for rule in rules:
            if (slots := exclusive(rule.action)) is not None:
                wanted.setdefault(slots[0], set()).add(slots[1])
        if not wanted:
            return frozenset()
        return frozenset(
            rival.line
            for rival in self._rivals
            if rival.shape in wanted and rival.values not in wanted[rival.shape]
        )

    def focus(self, text: str, *, limit: int = FOCUS_RULES) -> str:
        """The text repeated after the playbook for ``text``: '' when no rule matches."""
        return focus_text(self.matching(text, limit=limit))

    def cases(self, *, choices: bool = False) -> list[tuple[Rule, tuple[str, ...]]]:
        """Each rule with the cases it can be served for, in playbook order.

        A keyword situation gives one case per alternative (served alone, as
        ``matching`` serves it); any other situation is one case, served whole.
        With ``choices``, only the rules that are one of several choices
        (``choice``): the rules a request must pick one of.
        """
        picked = choice_rules([item.rule for item in self._rules]) if choices else None
        return [
            (item.rule, tuple(alt for alt, _ in item.alternatives) if item.keywords else ())
            for n, item in enumerate(self._rules)
            if picked is None or n in picked
        ]


def choice_rules(rules: Sequence[Rule]) -> frozenset[int]:
    """The positions of the rules that are one of several values of one kind of action.

    Two actions are of one kind when they give the reply one value
    (``exclusive``: "answer X8MB", "route to K3VW") or set one argument to
    other values ("call book_job with vehicle='van'" and "... vehicle='tail-lift'").
    A request then needs one of them and a guess by meaning costs nothing the
    agent was not already guessing; a rule with no such rival ("end the reply
    with our urgent line") adds to the reply, and served for the wrong request
    it makes that reply wrong. So do actions of one shape that are not
    arguments ("add the tag 'vip'" beside "add the tag 'urgent'"): each adds
    its own value, and neither is a choice.
    """
    kinds: dict[str, dict[tuple[str, ...], list[int]]] = {}
    for n, rule in enumerate(rules):
        one = exclusive(rule.action)
        shape = ("the reply", one[1]) if one else _values.slots(rule.action)
        # Beyond the reply, only arguments are choices: two "add the tag {}" or
        # "end the reply with {}" rules still add to a reply, each its own.
        if shape is not None and (one or _arguments_only(shape[0])):
            kinds.setdefault(shape[0], {}).setdefault(shape[1], []).append(n)
    several = [by_value for by_value in kinds.values() if len(by_value) > 1]
    return frozenset(n for by_value in several for ns in by_value.values() for n in ns)


_ARGUMENT_SLOT = re.compile(r"[\w.-]+\s*=\s*\{\}")


def _arguments_only(shape: str) -> bool:
    """Whether every value of ``shape`` (``values.slots``) is an argument's: ``vehicle={}``."""
    return shape.count("{}") == len(_ARGUMENT_SLOT.findall(shape))


def focus_text(rules: Sequence[Rule]) -> str:
    """The focus block for ``rules``: the heading and one line each ('' for none)."""
    if not rules:
        return ""
    return "\n".join([FOCUS_HEADER, *(f"- {rule.text()}" for rule in rules)])


def focused(
    playbook: str,
    index: RuleIndex,
    text: str,
    *,
    limit: int = FOCUS_RULES,
    closest: Callable[[str], Sequence[Rule]] | None = None,
    drop_rivals: bool = True,
) -> str:
    """``playbook``, the rules ``text`` names, then the conventions every reply follows.

    ``closest`` (``NearestRules.closest``) gives the rules closest in meaning
    to a request that names no rule's words; it is asked only then, and what
    it raises reaches the caller. With ``drop_rivals``, the rules that ask for
    another value of what the focused rules ask (``RuleIndex.rivals_of``) are
    left out of the playbook for this request, and a section left empty loses
    its heading. The conventions that close a rendered playbook
    (``Playbook.render``) stay last, after the focus.
    """
    if not playbook:
        return playbook
    # Every rule the request names keeps its place, past ``limit`` too.
    named = index.matching(text, limit=_ALL if drop_rivals else limit) if limit else []
    found = named[:limit]
    if not found and limit and closest is not None and index:
        found = named = list(closest(text))[:limit]
    focus = focus_text(found)
    ending = closing(index.conventions)
    if not focus:
        return playbook
    body, tail = playbook, ""
    if ending and playbook.endswith(f"\n\n{ending}"):
        # The conventions close the rendered playbook (``Playbook.render``): they stay last.
        body, tail = playbook[: -len(ending) - 2], f"\n\n{ending}"
    if drop_rivals and (rivals := index.rivals_of(named)):
        body = _without(body, rivals, index.inner_lines)
    return f"{body}\n{focus}{tail}"


_ALL = 1 << 30  # ``matching`` with no limit


def _without(body: str, lines: frozenset[str], inner: frozenset[str]) -> str:
    """``body`` without ``lines``, and without the "### " headings whose lines all went.

    A heading goes only when this cut emptied its section: one with no line
    under it to begin with (a custom header) stays, and so does a line of a
    bullet written on several lines (``inner``), which is never a heading.
    """
    out: list[str] = []
    heading: str | None = None  # a heading waiting for a kept line of its section
    cut = False  # a line of the waiting heading's section was cut
    for line in body.split("\n"):
        if line.startswith("### ") and line not in inner:
            if heading is not None and not cut:
                out.append(heading)  # an empty section the cut did not empty
            heading, cut = line, False
            continue
        if line in lines:
            cut = True
            continue
        if heading is not None:
            out.append(heading)
            heading = None
        out.append(line)
    if heading is not None and not cut:
        out.append(heading)
    return "\n".join(out)
