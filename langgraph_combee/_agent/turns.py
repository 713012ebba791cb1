"""Worked examples served as conversation turns: the few closest to the request.

The playbook keeps worked examples (``_rules.examples``): a past request and the
right answer a trusted source gave for it. Rendered in the system prompt they
are one more block of text for every request; a small model follows a pair of
turns, a request and its answer, better than a quoted line. So the middleware
serves ``ServingSettings.example_turns`` of them per request as turns, the ones
closest to the request, in the model call that answers the human's message
(after a tool result, an example's answer reads as one more call to make):

- by meaning when ``ServingSettings.focus_embedder`` is set: the cosine of the
  request and each example's request, best first (a version's examples are
  embedded once, bounded as the focus is: ``_agent.meaning``);
- else, or while the embedder is busy or failing, by words: the examples that
  share the most words with the request, newest first on a tie, one per answer
  before a second of any answer. Every request is served ``k`` examples then,
  even one that shares no word with any (the newest of each answer).

Each example becomes a ``HumanMessage`` (its request, as the playbook keeps it:
redacted and cut) and an ``AIMessage`` (its right answer, as the operator wrote
it: a label, a reply, or tool calls written as text). They carry the same trust
as the user's own messages and never enter the system prompt; the run's trace
is built from the graph's state, which never holds them, so the learner never
learns from its own examples.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

# The embedder's reply is read and checked as the focus by meaning reads it.
from langgraph_combee._core.nearest import VectorSource, _rows, _unit
from langgraph_combee._core.playbook import EXAMPLES_SECTION, Playbook
from langgraph_combee._core.words import words
from langgraph_combee._rules.examples import parse_example

__all__ = ["ExampleSet", "NearestShots", "Shot", "as_turns"]

MAX_REQUEST_TEXT = 2000
"""Most characters of a request embedded or split into words."""


def _words(text: str) -> frozenset[str]:
    return frozenset(words(text))


@dataclass(frozen=True)
class Shot:
    """One worked example: the request as kept, its right answer, the request's words."""

    request: str
    answer: str
    words: frozenset[str]


class ExampleSet:
    """A version's worked examples, newest first, ready to pick from.

    Built once per served version (a pure function of its playbook).
    """

    def __init__(self, playbook: Playbook) -> None:
        kept = [b for b in playbook.bullets if b.section == EXAMPLES_SECTION and not b.pending]
        kept.sort(key=lambda b: (b.created_version, b.id), reverse=True)
        shots: list[Shot] = []
        for bullet in kept:
            parsed = parse_example(bullet.content)
            if parsed is not None:
                request, answer = parsed
                shots.append(Shot(request, answer, _words(request)))
        self.shots: tuple[Shot, ...] = tuple(shots)
        # A word weighs what it tells the examples apart by: log(n / examples holding it);
        # one in more than half of them ("the", "my") weighs nothing.
        held = Counter(word for shot in shots for word in shot.words)
        count = len(shots)
        self._weights = {word: math.log(count / n) for word, n in held.items() if 2 * n <= count}

    def __bool__(self) -> bool:
        return bool(self.shots)

    def __len__(self) -> int:
        return len(self.shots)

    def by_words(self, text: str, k: int) -> list[Shot]:
        """The ``k`` examples sharing most words with ``text`` (see the module), best first.

        Shared words are weighed by how rare they are among the examples.
        Examples sharing a word come before those sharing none; within each, one
        of each answer comes before a second of any (k copies of one answer
        teach one answer), the best score first, then the newest.
        """
        query = _words(text[:MAX_REQUEST_TEXT])
        weights = self._weights
        shared = [
            math.fsum(weights.get(word, 0.0) for word in query & shot.words) for shot in self.shots
        ]
        ranked = sorted(range(len(self.shots)), key=lambda i: (-shared[i], i))
        chosen: list[int] = []
        answers: set[str] = set()
        for sharing, first_of_answer in (
            (True, True),
            (True, False),
            (False, True),
            (False, False),
        ):
            for i in ranked:
                if len(chosen) == k:
                    return [self.shots[i] for i in sorted(chosen, key=ranked.index)]
                answer = self.shots[i].answer.casefold()
                if (
                    i in chosen
                    or (shared[i] > 0) != sharing
                    or (first_of_answer and answer in answers)
                ):
                    continue
                chosen.append(i)
                answers.add(answer)
        return [self.shots[i] for i in sorted(chosen, key=ranked.index)]


class NearestShots:
    """A version's examples with their requests embedded once, for ``closest``.

    An embedder that raises or returns vectors of the wrong count or length
    makes the call raise; the caller then picks by words.
    """

    def __init__(self, examples: ExampleSet, embedder: VectorSource) -> None:
        self._embedder = embedder
        self._shots = examples.shots
        texts = [shot.request for shot in self._shots]
        vectors = _rows(embedder.embed(texts), len(texts)) if texts else []
        self._dimensions = len(vectors[0]) if vectors else None
        self._vectors = [_unit(v, self._dimensions) for v in vectors]

    def __bool__(self) -> bool:
        return bool(self._vectors)

    def closest(self, text: str, k: int) -> list[Shot]:
        """The ``k`` examples whose request is closest to ``text`` in meaning, best first."""
        if not self._vectors or not text.strip():
            return []
        query = _unit(
            _rows(self._embedder.embed([text[:MAX_REQUEST_TEXT]]), 1)[0], self._dimensions
        )
        scores = [
            math.fsum(a * b for a, b in zip(query, vector, strict=True)) for vector in self._vectors
        ]
        # Ties go to the newer example (``ExampleSet`` keeps them newest first).
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [self._shots[i] for i in order[:k]]


def as_turns(shots: Sequence[Shot]) -> tuple[BaseMessage, ...]:
    """Each example as a user turn (its request) followed by an assistant turn (its answer)."""
    turns: list[BaseMessage] = []
    for shot in shots:
        turns.append(HumanMessage(content=shot.request))
        turns.append(AIMessage(content=shot.answer))
    return tuple(turns)
