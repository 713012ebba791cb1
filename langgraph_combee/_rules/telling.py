"""Words the evidence ties to one action, added to the situation of the rule for it.

A small model asked which words of an input show what kind of input it is
often names none that matter. Seen on the 1.5B on the tool task: for "Your
driver was very rude to me when he brought order NW-26318." it gave
``["issue_refund", "order_id", "amount"]`` (the agent's wrong call), and for
"Could you deliver order ... instead?" the situation ``reschedule_delivery``
(the tool's name), which no request holds. The rule then matches no new
wording of the case, however right its action is.

The inputs themselves say more: the words that recur in inputs needing one
action and occur in no input known to need another ("courier", "driver",
"broken") tell that action's inputs apart, whatever the reflector wrote.
``widen`` adds such words to a new rule's situation as alternatives. A word
is added only when

* at least ``MIN_SUPPORT`` distinct inputs that needed the rule's action
  hold it (one input's incidental words, an item or a place, are no evidence),
* no input known to need another action holds it (the same test
  ``rules.sharpen`` narrows by, at its strictest), and at least
  ``MIN_CONTRARY`` inputs are known to need other actions (with none, every
  word would pass),
* it is no value, number or generic word, and no person's name: a name
  joins, as written, only when every input writing it as a name writes it as
  a place ("in Berlin", "at the Denver office", ``rules.placed_names``) and
  none greets or signs with it ("Hi Priya", "Regards, Lukas"),
* the guard would neither refuse nor hold it (an end user's words may
  describe a situation, never carry an instruction).

At most ``MAX_ADDED`` words join a rule, the most supported first, and the
situation stays within ``rules.MAX_ALTERNATIVES`` alternatives.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from langgraph_combee._core import words as _words
from langgraph_combee._core.ops import Add, DeltaOp, Update
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.situations import (
    alternatives,
    keyword_list,
    parse_rule,
    situation_words,
    stem,
)
from langgraph_combee._guard import patterns as guard_rules
from langgraph_combee._rules.rules import (
    MAX_ALTERNATIVES,
    Seen,
    action_key,
    addressed_names,
    backed_rules,
    join_situations,
    needs,
    placed_names,
    proper_nouns,
    same_situation,
    value_like,
)

__all__ = [
    "MAX_ADDED",
    "MIN_CONTRARY",
    "MIN_SUPPORT",
    "Inputs",
    "guard_verdict",
    "harmless",
    "telling_words",
    "widen",
    "widen_playbook",
]

MIN_SUPPORT = 2
"""Distinct inputs needing the action that must hold a word for it to join the rule."""
MIN_CONTRARY = 2
"""Inputs known to need other actions there must be before any word is judged telling."""
MAX_ADDED = 3
"""Most words added to one rule's situation."""

# English function words the situations' stop list leaves in (it is kept short, since it
# decides what every rule matches on): a template's fixed "over" or "after" recurs in
# one case's inputs without telling anything about the case.
_FUNCTION = frozenset(
    [
        "above",
        "across",
        "after",
        "again",
        "against",
        "ago",
        "all",
        "almost",
        "already",
        "also",
        "although",
        "always",
        "another",
        "around",
        "away",
        "because",
        "before",
        "behind",
        "below",
        "beside",
        "between",
        "both",
        "during",
        "each",
        "either",
        "else",
        "even",
        "ever",
        "every",
        "few",
        "into",
        "just",
        "last",
        "least",
        "less",
        "like",
        "many",
        "more",
        "most",
        "much",
        "near",
        "neither",
        "never",
        "next",
        "no",
        "nor",
        "not",
        "now",
        "off",
        "often",
        "once",
        "one",
        "only",
        "onto",
        "other",
        "out",
        "over",
        "own",
        "per",
        "quite",
        "rather",
        "really",
        "same",
        "several",
        "since",
        "soon",
        "still",
        "such",
        "than",
        "then",
        "though",
        "through",
        "till",
        "too",
        "two",
        "three",
        "under",
        "until",
        "up",
        "upon",
        "very",
        "via",
        "well",
        "when",
        "whenever",
        "while",
        "within",
        "without",
        "yet",
    ]
)


MAX_WORD_CHARS = 30
"""Longest word that may join a situation (a longer one is an id or garbage)."""
_VERDICT_CHARS = 500
"""The guard's default bullet length, for the checks made without a guard."""

Verdict = Callable[[str], set[str]]
"""What a guard would find in a rule's text: the kinds of its reasons ("length", "markup"...)."""


def harmless(word: str) -> bool:
    """Whether the guard's override, exfiltration and policy checks find nothing in ``word``."""
    return not _default_verdict(word)


def _default_verdict(text: str) -> set[str]:
    readings = guard_rules.variants(text)
    found: set[str] = set()
    if len(text) > _VERDICT_CHARS:
        found.add("length")
    if guard_rules.find_override(readings):
        found.add("instruction override")
    if guard_rules.find_exfiltration(readings):
        found.add("exfiltration")
    if guard_rules.find_policy_change(text):
        found.add("policy change")
    return found


def guard_verdict(guard: Any) -> Verdict:
    """The kinds of reasons a ``BulletGuard`` would refuse or hold a text for."""

    def verdict(text: str) -> set[str]:
        reasons = [*guard.check(text), *guard.policy(text)]
        return {reason.split(":", 1)[0] for reason in reasons}

    return verdict


def _norm_text(text: str) -> str:
    return " ".join(text.casefold().split())


def _in_address(text: str, start: int, end: int) -> bool:
    """Whether the token at ``start:end`` is part of an e-mail address, a URL or a host name."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    following = text[end + 1] if end + 1 < len(text) else ""
    return (
        (before != "" and before in "@/:.")
        or (after != "" and after in "@/:")
        or (after == "." and following.isalnum())
        or "://" in text[max(0, start - 12) : start]
    )


class _Surfaces:
    """The words of the inputs as written, by stem: read once per input text.

    Values, numbers, parts of addresses, function words and overlong words are
    left out; names are left to the caller (``proper_nouns``), which knows the
    texts a word came from.
    """

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, str]] = {}

    def of(self, text: str) -> dict[str, str]:
        known = self._maps.get(text)
        if known is not None:
            return known
        found: dict[str, str] = {}
        for match in _words.tokens(text):
            word = match.group()
            folded = word.casefold()
            if (
                len(folded) > MAX_WORD_CHARS
                or folded in _FUNCTION
                or value_like(word)
                or any(c.isdigit() for c in word)
                or _in_address(text, match.start(), match.end())
            ):
                continue
            key = stem(folded) if folded.isascii() else folded
            if key not in found and situation_words(folded) == frozenset({key}):
                found[key] = folded
        self._maps[text] = found
        return found


class Inputs:
    """The inputs known so far, each text once, with the inputs each word is in.

    Built once per step (``widen``) and shared by its rules: a word's inputs are
    looked up, not found by a scan of every input's words for every rule.
    """

    def __init__(self, items: Sequence[Seen]) -> None:
        unique: dict[str, Seen] = {}
        for item in items:
            unique.setdefault(_norm_text(item.text) or item.id, item)
        self.items = list(unique.values())
        self.holding: dict[str, list[int]] = {}
        for n, item in enumerate(self.items):
            for word in item.words:
                self.holding.setdefault(word, []).append(n)
        self.surfaces = _Surfaces()
        self._names: dict[str, frozenset[str]] = {}
        self._addressed: dict[str, frozenset[str]] = {}
        self._placed: dict[str, frozenset[str]] = {}

    def names(self, text: str) -> frozenset[str]:
        """The words written as names in ``text`` (``rules.proper_nouns``), read once."""
        found = self._names.get(text)
        if found is None:
            found = self._names[text] = proper_nouns(text)
        return found

    def placed(self, text: str) -> frozenset[str]:
        """The names ``text`` writes as places (``rules.placed_names``), read once."""
        found = self._placed.get(text)
        if found is None:
            found = self._placed[text] = placed_names(text)
        return found

    def addressed(self, text: str) -> frozenset[str]:
        """The words ``text`` greets or signs with (``rules.addressed_names``), read once."""
        found = self._addressed.get(text)
        if found is None:
            found = self._addressed[text] = addressed_names(text)
        return found


def telling_words(
    action: str,
    sources: set[str],
    items: Sequence[Seen] | Inputs,
    *,
    covered: Sequence[frozenset[str]] = (),
    limit: int = MAX_ADDED,
) -> list[str]:
    """The words that tell inputs needing ``action`` from the others, best first.

    ``sources`` are the ids of the traces backing rules with this action; an
    input's need is judged as ``rules.sharpen`` judges it (its ground truth,
    else the rules it backed). Inputs are counted by their text (the same
    request sent twice is one input). A word is a candidate when at least
    ``MIN_SUPPORT`` inputs needing the action hold it, no input known to need
    another action does, more inputs needing the action hold it than inputs
    of unknown need (a right run with no ground truth), and it is in at most
    half of all inputs. Candidates are ranked greedily: each next one holds the
    most inputs needing the action that no word ranked so far (nor one of
    ``covered``, the word sets of the rule's own alternatives) holds, then the
    most such inputs in all ("courier" and "driver", not "courier" and "threw").
    Empty when the inputs show too little.
    """
    known = items if isinstance(items, Inputs) else Inputs(items)
    truths = {item.truth for item in known.items if item.id in sources} - {""}
    need = [needs(item, action, sources, truths) for item in known.items]
    wanted = [n for n, v in enumerate(need) if v]
    if len(wanted) < MIN_SUPPORT or sum(v is False for v in need) < MIN_CONTRARY:
        return []
    candidates: dict[str, set[int]] = {}
    for word in {w for n in wanted for w in known.items[n].words}:
        holders = known.holding[word]
        held = {n for n in holders if need[n]}
        if (
            len({known.items[n].who or known.items[n].id for n in held}) < MIN_SUPPORT
            or 2 * len(holders) > len(known.items)
            or any(need[n] is False for n in holders)
            or len(held) <= sum(need[n] is None for n in holders)
        ):
            continue
        candidates[word] = held
    done = {n for n in wanted if any(c and c <= known.items[n].words for c in covered)}
    out: list[str] = []
    while candidates and len(out) < limit:
        stemmed = min(
            candidates, key=lambda w: (-len(candidates[w] - done), -len(candidates[w]), w)
        )
        held = candidates.pop(stemmed)
        texts = (known.items[n].text for n in sorted(held) if known.items[n].text)
        written = (known.surfaces.of(text) for text in texts)
        surface = next((found[stemmed] for found in written if stemmed in found), None)
        if surface is None:
            continue
        # A word written as a name in any input holding it is a name ("Priya" first in
        # one sentence and inside the next). A place or a product is one too ("the
        # Berlin office"), and may tell inputs apart; a person greeted or signing in
        # any input holding the word ("Hi Priya", "Regards, Lukas") never joins.
        spots = [known.items[n].text for n in known.holding[stemmed] if known.items[n].text]
        named = [text for text in spots if surface in known.names(text)]
        if named:
            # A name joins only as a place: written as one in every input that writes it
            # as a name, and greeted or signed with in none ("Hi Priya", "Regards, Lukas").
            if not all(surface in known.placed(text) for text in named) or any(
                surface in known.addressed(text) for text in spots
            ):
                continue
            surface = surface[:1].upper() + surface[1:]
        out.append(surface)
        done |= held
    return out


def widen(
    ops: Sequence[DeltaOp], items: Sequence[Seen], *, verdict: Verdict | None = None
) -> tuple[list[DeltaOp], int]:
    """New rules with the telling words of their action joined to their situation.

    ``items`` are the inputs known so far (the step's batch and the learner's
    memory, as ``rules.sharpen`` reads them). Rules with one action share the
    sources of all of them, as in ``rules.sharpen``. A word joins only if the
    rule with it draws no finding of ``verdict`` (the step's guard:
    ``guard_verdict``) that the rule without it does not: single words can
    make an instruction override ("skip", "follow the rules"), a policy change
    ("refund" beside a voucher) or a bullet too long, and the guard would take
    the honest rule with them. Without a guard, its override, exfiltration,
    policy and length checks are made.

    Returns:
        The ops, and how many words were added (once per distinct rule).
    """
    judge = verdict or _default_verdict
    backed = backed_rules(ops)
    if all(rule is None for _, rule, _ in backed) or len(items) < MIN_SUPPORT + MIN_CONTRARY:
        return list(ops), 0
    known = Inputs(items)
    words_of: dict[tuple[str, frozenset[str], tuple[frozenset[str], ...]], list[str]] = {}
    out: list[DeltaOp] = []
    added: set[tuple[str, str]] = set()
    for op, rule, backing in backed:
        if rule is None:
            out.append(op)
            continue
        assert isinstance(op, Add)
        have = alternatives(rule.situation)
        # At least one word joins a full situation (``join_situations`` then keeps the
        # latest of its least supported alternatives): evidence outranks a guess.
        room = max(1, MAX_ALTERNATIVES - len(have))
        own = [situation_words(a) for a in have]
        key = (rule.action, frozenset(backing), tuple(own))
        if key not in words_of:
            # Copies of one rule (Combee gives each reflection to two curators) ask once.
            words_of[key] = telling_words(
                rule.action, backing, known, covered=own, limit=3 * MAX_ADDED
            )
        ranked = [w for w in words_of[key] if not any(same_situation(w, a) for a in have)]
        base = judge(op.content)
        content, new = op.content, list[str]()
        for word in ranked:
            if len(new) == min(room, MAX_ADDED):
                break
            situation = join_situations(rule.situation, *new, word)
            candidate = f"When {situation}, {rule.action.rstrip('.')}."
            if judge(candidate) <= base:
                new.append(word)
                content = candidate
        if not new:
            out.append(op)
            continue
        added.update((op.content, w) for w in new)
        out.append(Add(section=op.section, content=content, sources=list(op.sources)))
    return out, len(added)


def widen_playbook(
    playbook: Playbook,
    items: Sequence[Seen],
    *,
    verdict: Verdict | None = None,
    besides: Sequence[DeltaOp] = (),
    fresh: Collection[str] | None = None,
) -> tuple[list[Update], int]:
    """UPDATE ops joining to live rules the telling words the inputs seen since show.

    ``widen`` reads a new rule's words on the inputs known when it is learned; a
    rule learned from the first input of its case ("Email is down for the whole
    finance floor") cannot know yet which of its words the case's other inputs
    share. Seen on the 1.5B on a triage task: the rule for outages named the first
    tickets' systems ("intranet", "building"), while "whole", which later outage
    tickets wrote, was never added. The same test as ``widen`` applies, on the
    memory (``items``), with the sources of every live rule with the action as
    its backing. Left as they are:

    * a bullet that is not the learner's own rule text ("When <keywords>,
      <action>.", as ``Rule.text`` writes it, every alternative a keyword): a
      rule an operator wrote, or a prose situation, is never rewritten;
    * a rule whose situation is full (``rules.MAX_ALTERNATIVES``): a served rule
      does not trade the words it was served for;
    * a rule the guard would already hold or refuse (``verdict`` finds something
      in it): its widening would be held again at every step;
    * a rule whose action a new rule of the step (an ADD of ``besides``) states:
      that one is widened by ``widen`` and reconciled with it;
    * with ``fresh`` (the ids of the step's inputs), a rule no fresh input
      needed: only a new input of its case can make a word telling.

    A word that is a word of an alternative of another bullet with another action
    (live or pending) is not added: the two would serve one request two answers.

    Returns:
        The UPDATE ops, and how many words they add.
    """
    if len(items) < MIN_SUPPORT + MIN_CONTRARY:
        return [], 0
    judge = verdict or _default_verdict
    parsed = [(b, parse_rule(b.content)) for b in playbook.bullets]
    live = [
        (b, rule)
        for b, rule in parsed
        if rule is not None
        and not b.pending
        and keyword_list(rule.situation)
        and rule.text() == b.content
        and len(alternatives(rule.situation)) < MAX_ALTERNATIVES
    ]
    if not live:
        return [], 0
    new_keys = {action_key(rule.action) for _, rule, _ in backed_rules(besides) if rule is not None}
    # Grouped by action once: a playbook of hundreds of rules is read in one pass.
    backing_of: dict[tuple[str, object], set[str]] = {}
    words_of: dict[tuple[str, object], set[str]] = {}
    for other, r in parsed:
        if r is None:
            continue
        key = action_key(r.action)
        if not other.pending:
            backing_of.setdefault(key, set()).update(other.provenance)
        words_of.setdefault(key, set()).update(
            w for a in alternatives(r.situation) for w in situation_words(a)
        )
    known = Inputs(items)
    recent = [item for item in known.items if fresh is None or item.id in fresh]
    by_id = {item.id: item for item in known.items}
    out: list[Update] = []
    added = 0
    for bullet, rule in live:
        key = action_key(rule.action)
        if key in new_keys:
            continue
        backing = backing_of.get(key, set())
        truths = {by_id[i].truth for i in backing if i in by_id} - {""}
        if fresh is not None and not any(needs(i, rule.action, backing, truths) for i in recent):
            continue
        base = judge(bullet.content)
        if base:
            continue
        have = alternatives(rule.situation)
        own = [situation_words(a) for a in have]
        ranked = [
            w
            for w in telling_words(rule.action, backing, known, covered=own, limit=3 * MAX_ADDED)
            if not any(same_situation(w, a) for a in have)
        ]
        if ranked:
            taken = set().union(*(words for k, words in words_of.items() if k != key))
            ranked = [w for w in ranked if not situation_words(w) & taken]
        content, new = bullet.content, list[str]()
        for word in ranked:
            if len(new) == min(MAX_ALTERNATIVES - len(have), MAX_ADDED):
                break
            candidate = (
                f"When {join_situations(rule.situation, *new, word)}, {rule.action.rstrip('.')}."
            )
            if not judge(candidate):
                new.append(word)
                content = candidate
        if new:
            out.append(Update(id=bullet.id, content=content))
            added += len(new)
    return out, added
