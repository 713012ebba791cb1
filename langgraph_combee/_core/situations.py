"""The text of "When <situation>, <action>." rules: parsing, content words, matching.

The learner's rules layer (``_learning/rules.py``) and the agent side both read
rules this way: the learner to tell when two rules speak about the same case,
the agent side to find the rules a request names (``matching``). Pure
functions of text, without any state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langgraph_combee._core import words as _words
from langgraph_combee._core.playbook import Playbook

__all__ = [
    "FOCUS_HEADER",
    "FOCUS_RULES",
    "FOCUS_RULES_ALLOWED",
    "Rule",
    "RuleIndex",
    "alternatives",
    "focused",
    "input_words",
    "parse_rule",
    "situation_words",
    "stem",
    "valid_focus_rules",
]

_RULE = re.compile(
    r"^\s*(?:when|if|for)\s+(?P<situation>[^,]+?),\s*(?P<action>.+?)\s*$", re.I | re.S
)
_ALTERNATIVE = re.compile(r"\s+or\s+|\s*;\s*", re.I)
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


def parse_rule(text: str) -> Rule | None:
    """Split ``"When <situation>, <action>."`` into its parts; None for other text."""
    match = _RULE.match(text)
    if match is None:
        return None
    return Rule(match["situation"].strip(), match["action"].strip().rstrip("."))


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
    return frozenset(
        m.group().casefold()
        for m in _words.tokens(text)
        if len(m.group()) > 1 and m.group().isupper() and m.group().casefold() in _STOP
    )


def input_words(text: str) -> frozenset[str]:
    """The content words of an input text, stemmed as situations are."""
    return situation_words(text)


def stem(word: str) -> str:
    """An English word without its plural or -ing ending, so "refunds" matches "refund"."""
    for suffix in ("ing", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def alternatives(situation: str) -> list[str]:
    """The alternatives of a situation: ``"A or B; C"`` -> ``["A", "B", "C"]``."""
    parts = [p.strip() for p in _ALTERNATIVE.split(situation)]
    return [p for p in parts if p] or [situation.strip()]


FOCUS_RULES = 3
"""Most matching rules repeated after the playbook for a request, by default."""
FOCUS_HEADER = "### The rules that match this request"
"""The heading of the rules a request names, repeated after the playbook (``RuleIndex.focus``)."""
MAX_FOCUS_TEXT = 4000
"""Characters of a request read for its words (a long request is matched on its start)."""


@dataclass(frozen=True)
class _Indexed:
    order: int
    rule: Rule
    alternatives: tuple[tuple[str, frozenset[str]], ...]
    words: frozenset[str]  # of all its alternatives


FOCUS_RULES_ALLOWED = "an int from 0 (off) to 20"
"""What ``focus_rules`` may be, for the error of a setting that is not (``valid_focus_rules``)."""


def valid_focus_rules(value: object) -> bool:
    """Whether ``value`` is a ``focus_rules`` setting: an int from 0 to 20 (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= 20


class RuleIndex:
    """The rules of a playbook, ready to be matched against requests.

    A rule matches a request when all the content words of one of its situation's
    alternatives occur in the request ("When refund or money back, ..." matches
    "Where is my money? I want it back"). A small model reads a long list of
    rules and still answers with the wrong one; the matching rules repeated
    after the list, with only the alternatives the request names, is what the
    bundled 1.5B follows (``docs/benchmarks.md``). Text that is not a rule never
    matches. Built once per served version; ``focus`` is a pure function.
    """

    def __init__(self, contents: Sequence[str]) -> None:
        indexed: list[_Indexed] = []
        for order, content in enumerate(contents):
            rule = parse_rule(content)
            if rule is None:
                continue
            alts = tuple(
                (alt, words)
                for alt in alternatives(rule.situation)
                if (words := situation_words(alt))
            )
            if alts:
                indexed.append(
                    _Indexed(order, rule, alts, frozenset().union(*(w for _, w in alts)))
                )
        self._rules = tuple(indexed)

    @classmethod
    def of(cls, playbook: Playbook) -> RuleIndex:
        """The index of ``playbook``'s live bullets (the ones the agent is served)."""
        return cls([b.content for b in playbook.live().bullets])

    def __bool__(self) -> bool:
        return bool(self._rules)

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
        first. Two rules with the same action are given once.
        """
        if limit < 1 or not self._rules or not text:
            return []
        have = input_words(text[:MAX_FOCUS_TEXT])
        scored = []
        for item in self._rules:
            named = [(alt, words) for alt, words in item.alternatives if words <= have]
            if named:
                best = max(len(words) for _, words in named)
                shared = len(have & item.words)
                central = sum(1 for _, w in item.alternatives if w & have) / len(item.alternatives)
                scored.append((-best, -shared, -central, -len(named), item.order, item, named))
        scored.sort(key=lambda s: s[:5])
        found: list[Rule] = []
        actions: set[str] = set()
        for *_, item, named in scored:
            action = item.rule.action.casefold()
            if action in actions:
                continue
            actions.add(action)
            found.append(Rule(" or ".join(alt for alt, _ in named), item.rule.action))
            if len(found) == limit:
                break
        return found

    def focus(self, text: str, *, limit: int = FOCUS_RULES) -> str:
        """The text repeated after the playbook for ``text``: '' when no rule matches."""
        found = self.matching(text, limit=limit)
        if not found:
            return ""
        return "\n".join([FOCUS_HEADER, *(f"- {rule.text()}" for rule in found)])


def focused(playbook: str, index: RuleIndex, text: str, *, limit: int = FOCUS_RULES) -> str:
    """``playbook`` followed by the rules ``text`` names (``playbook`` alone when none does)."""
    focus = index.focus(text, limit=limit) if playbook and limit else ""
    return f"{playbook}\n{focus}" if focus else playbook
