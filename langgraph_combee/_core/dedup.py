"""De-duplication of playbook bullets: lexical by default, semantic with an embedder.

Lexical similarity compares the words of two bullets and their consecutive
pairs (Jaccard), with English stop words left out. Words are those of
``words.words``, in any script: NFKC-normalised, case-folded, marks kept, and
scripts written without spaces read as pairs of characters, so two rules in
Chinese or Russian about different cases do not look alike for lack of ASCII
words. ASCII text is read exactly as before.

Two bullets that name different values (``values.asked_and_refused``: codes, numbers,
quoted strings; ``FW-AUR-EU`` and ``FW-AUR-US``) are never merged,
however alike their words: they are two rules, perhaps contradicting each
other, and folding one into the other would lose it and hide the contradiction
from the rules layer, which settles it. Bullets naming the same values, or none,
or written in the same words (``answer 'coral'`` and ``answer coral``), are
compared on their words. Values are read NFKC-normalised, so a full-width code
is the code, and a value asked for is not one refused ("never answer FIN-7Q" is
not "always answer FIN-7Q"). With an embedder the cosine decides, and two
bullets that both name values merge only if they name the same ones.

Merging keeps the older bullet's id (and its content), sums the counters and
unions the provenance, so no support evidence is lost.
"""

from __future__ import annotations

import functools
import itertools
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.values import asked_and_refused
from langgraph_combee._core.words import normalised, words

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "then",
        "this",
        "to",
        "when",
        "with",
    ]
)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors for semantic de-duplication (e.g. a MiniLM model)."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """Return one vector per text, in order."""
        ...


@dataclass(frozen=True)
class Merge:
    """Bullet ``dropped_id`` was folded into ``kept_id``."""

    kept_id: str
    dropped_id: str
    similarity: float


@dataclass(frozen=True)
class DedupResult:
    """The de-duplicated playbook and the merges that produced it."""

    playbook: Playbook
    merges: tuple[Merge, ...] = ()


SHINGLE_CACHE = 2048
"""Bullet texts whose shingles are kept between passes (a pass follows every apply)."""


# Pure and called on every bullet after every apply, when most bullets are those of
# the last pass: reading a text in any script costs some 0.1 ms.
@functools.lru_cache(maxsize=SHINGLE_CACHE)
def _shingles(text: str) -> frozenset[str]:
    found = [w for w in words(text) if w not in _STOPWORDS]
    if len(found) < 2:
        return frozenset(found)
    return frozenset({f"{a} {b}" for a, b in itertools.pairwise(found)} | set(found))


@functools.lru_cache(maxsize=SHINGLE_CACHE)
def _values(text: str) -> tuple[frozenset[str], frozenset[str]]:
    # Asked for and refused apart: "never answer FIN-7Q" is not "always answer FIN-7Q".
    return asked_and_refused(unicodedata.normalize("NFKC", text))


# Only pairs alike enough to merge are read so, but in a playbook of rules alike
# but for their codes those are many, each text in many of them.
_normalised = functools.lru_cache(maxsize=SHINGLE_CACHE)(normalised)


def _same_values(a: str, b: str) -> bool:
    # The same words are one rule whatever the quoting ("answer 'coral'", "answer
    # coral"), as ``rules.same_action`` reads two actions.
    return _values(a) == _values(b) or _normalised(a) == _normalised(b)


def _jaccard(sa: frozenset[str], sb: frozenset[str], a: str, b: str) -> float:
    if not sa and not sb:
        return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
    return len(sa & sb) / len(sa | sb)


def lexical_similarity(a: str, b: str) -> float:
    """Jaccard similarity of word and word-pair sets (stop words ignored), in [0, 1]."""
    return _jaccard(_shingles(a), _shingles(b), a, b)


def _cosine(u: Sequence[float], v: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(u, v, strict=True))
    nu = math.sqrt(sum(x * x for x in u))
    nv = math.sqrt(sum(y * y for y in v))
    return dot / (nu * nv) if nu and nv else 0.0


def deduplicate(
    playbook: Playbook,
    *,
    threshold: float | None = None,
    embedder: Embedder | None = None,
    changed: set[str] | None = None,
) -> DedupResult:
    """Merge near-duplicate bullets, across sections (the older bullet's section stays).

    Args:
        playbook: The playbook to clean.
        threshold: Similarity at or above which two bullets are merged. Defaults
            to 0.9 with an embedder (cosine, as ACE's reference) and 0.7 lexically,
            where two bullets naming different values are never merged.
        embedder: Optional semantic embedder; without it, lexical similarity is used.
        changed: Ids of the bullets added or rewritten since the last pass; when
            given, only pairs involving one of them are compared (the others were
            already compared with each other).

    Returns:
        The new playbook and the list of merges (older id kept, counters summed).
    """
    if threshold is None:
        threshold = 0.9 if embedder is not None else 0.7
    bullets = list(playbook.bullets)
    if len(bullets) < 2:
        return DedupResult(playbook=playbook)
    if changed is not None and not any(b.id in changed for b in bullets):
        return DedupResult(playbook=playbook)
    vectors: list[Sequence[float]] | None = None
    shingles: list[frozenset[str]] = []
    if embedder is not None:
        vectors = list(embedder.embed([b.content for b in bullets]))
    else:
        shingles = [_shingles(b.content) for b in bullets]

    def similarity(i: int, j: int) -> float:
        if vectors is not None:
            return _cosine(vectors[i], vectors[j])
        return _jaccard(shingles[i], shingles[j], bullets[i].content, bullets[j].content)

    # Older bullets come first so that the survivor of a merge keeps the older id.
    order = sorted(range(len(bullets)), key=lambda i: (bullets[i].created_version, i))
    survivors: dict[int, Bullet] = {}
    merges: list[Merge] = []
    for i in order:
        target: int | None = None
        best = threshold
        for j in survivors:
            if changed is not None and not (bullets[i].id in changed or bullets[j].id in changed):
                continue
            score = similarity(i, j)
            if score < best:
                continue
            # Rules naming different values are two rules, however alike their words
            # or their meaning ("route to FW-AUR-EU" and "route to FW-AUR-US" are
            # close in any embedding); by meaning, a rule naming none ("refunds belong
            # with finance") may be the same rule as one naming some ("go to FIN").
            a, b = bullets[i].content, bullets[j].content
            if not _same_values(a, b) and (
                vectors is None or (any(_values(a)) and any(_values(b)))
            ):
                continue
            target, best = j, score
        if target is None:
            survivors[i] = bullets[i].model_copy(deep=True)
            continue
        kept = survivors[target]
        kept.helpful += bullets[i].helpful
        kept.harmful += bullets[i].harmful
        kept.provenance = list(dict.fromkeys([*kept.provenance, *bullets[i].provenance]))
        kept.supporters = list(dict.fromkeys([*kept.supporters, *bullets[i].supporters]))
        # A merge never hides a live bullet: the survivor is live if either was.
        kept.pending = kept.pending and bullets[i].pending
        kept.updated_version = max(kept.updated_version, bullets[i].updated_version)
        merges.append(Merge(kept_id=kept.id, dropped_id=bullets[i].id, similarity=best))
    if not merges:
        return DedupResult(playbook=playbook)
    kept_in_order = [survivors[i] for i in range(len(bullets)) if i in survivors]
    return DedupResult(playbook=playbook.replace_bullets(kept_in_order), merges=tuple(merges))
