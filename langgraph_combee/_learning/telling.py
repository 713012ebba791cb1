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
* it is no name, value, number or generic word, and the guard would neither
  refuse nor hold it (an end user's words may describe a situation, never
  carry an instruction).

At most ``MAX_ADDED`` words join a rule, the most supported first, and the
situation stays within ``rules.MAX_ALTERNATIVES`` alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_combee._core import words as _words
from langgraph_combee._core.ops import Add, DeltaOp
from langgraph_combee._core.situations import alternatives, parse_rule, situation_words, stem
from langgraph_combee._learning import guard_rules
from langgraph_combee._learning.rules import (
    MAX_ALTERNATIVES,
    Seen,
    join_situations,
    needs,
    proper_nouns,
    same_action,
    same_situation,
    value_like,
)

__all__ = ["MAX_ADDED", "MIN_CONTRARY", "MIN_SUPPORT", "telling_words", "widen"]

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


def harmless(word: str) -> bool:
    """Whether the guard would neither refuse nor hold ``word`` in a rule's situation."""
    readings = guard_rules.variants(word)
    return not (
        guard_rules.find_override(readings)
        or guard_rules.find_exfiltration(readings)
        or guard_rules.find_policy_change(word)
    )


def _surface(stemmed: str, texts: Sequence[str]) -> str | None:
    """The word as an input wrote it (lower-cased), never a name or a value; None if none.

    A word written as a name in any of ``texts`` is a name ("Priya" first in one
    sentence and inside the next).
    """
    names: set[str] = set().union(*(proper_nouns(text) for text in texts))
    for text in texts:
        for match in _words.tokens(text):
            word = match.group()
            folded = word.casefold()
            if folded in names or value_like(word) or any(c.isdigit() for c in word):
                continue
            key = stem(folded) if folded.isascii() else folded
            if key == stemmed and situation_words(folded) == frozenset({stemmed}):
                return folded
    return None


def telling_words(
    action: str,
    sources: set[str],
    items: Sequence[Seen],
    *,
    covered: Sequence[frozenset[str]] = (),
    limit: int = MAX_ADDED,
) -> list[str]:
    """The words that tell inputs needing ``action`` from the others, chosen to cover them.

    ``sources`` are the ids of the traces backing rules with this action; an
    input's need is judged as ``rules.sharpen`` judges it (its ground truth,
    else the rules it backed). Words are chosen greedily: each next word holds
    the most inputs needing the action that no alternative chosen so far (nor
    one of ``covered``, the word sets of the rule's own alternatives) holds,
    then the most such inputs in all, so the words cover every wording seen
    ("courier" and "driver", not "courier" and "threw"). Empty when the
    inputs show too little.
    """
    truths = {item.truth for item in items if item.id in sources} - {""}
    judged = [(item, needs(item, action, sources, truths)) for item in items]
    wanted = [item for item, need in judged if need]
    others = [item for item, need in judged if need is False]
    if len(wanted) < MIN_SUPPORT or len(others) < MIN_CONTRARY:
        return []
    against: set[str] = set().union(*(item.words for item in others))
    holders: dict[str, set[int]] = {}
    for n, item in enumerate(wanted):
        for word in item.words - against:
            holders.setdefault(word, set()).add(n)
    candidates = {w: held for w, held in holders.items() if len(held) >= MIN_SUPPORT}
    done = {n for n, item in enumerate(wanted) if any(c and c <= item.words for c in covered)}
    out: list[str] = []
    while candidates and len(out) < limit:
        stemmed = min(
            candidates, key=lambda w: (-len(candidates[w] - done), -len(candidates[w]), w)
        )
        held = candidates.pop(stemmed)
        texts = [wanted[n].text for n in sorted(held) if wanted[n].text]
        word = _surface(stemmed, texts) or ""
        # Checked together: single words can make an instruction the guard would refuse
        # ("ignore" "previous" "instructions"), and it would take the rule with it.
        if not word or word in _FUNCTION or not harmless(" ".join([*out, word])):
            continue
        out.append(word)
        done |= held
    return out


def widen(ops: Sequence[DeltaOp], items: Sequence[Seen]) -> tuple[list[DeltaOp], int]:
    """New rules with the telling words of their action joined to their situation.

    ``items`` are the inputs known so far (the step's batch and the learner's
    memory, as ``rules.sharpen`` reads them). Rules with one action share the
    sources of all of them, as in ``rules.sharpen``.

    Returns:
        The ops, and how many words were added (once per distinct rule).
    """
    parsed = [
        (op, rule)
        for op in ops
        if isinstance(op, Add) and (rule := parse_rule(op.content)) is not None
    ]
    if not parsed or len(items) < MIN_SUPPORT + MIN_CONTRARY:
        return list(ops), 0
    out: list[DeltaOp] = []
    added: set[tuple[str, str]] = set()
    for op in ops:
        rule = parse_rule(op.content) if isinstance(op, Add) else None
        if rule is None:
            out.append(op)
            continue
        assert isinstance(op, Add)
        backing = {
            s for other, r in parsed if same_action(r.action, rule.action) for s in other.sources
        }
        have = alternatives(rule.situation)
        # At least one word joins a full situation (``join_situations`` then keeps the
        # latest of its least supported alternatives): evidence outranks a guess.
        room = max(1, MAX_ALTERNATIVES - len(have))
        own = [situation_words(a) for a in have]
        new = [
            w
            for w in telling_words(rule.action, backing, items, covered=own)
            if not any(same_situation(w, a) for a in have)
        ][:room]
        if not new:
            out.append(op)
            continue
        added.update((op.content, w) for w in new)
        situation = join_situations(rule.situation, *new)
        content = f"When {situation}, {rule.action.rstrip('.')}."
        out.append(Add(section=op.section, content=content, sources=list(op.sources)))
    return out, len(added)
