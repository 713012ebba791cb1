"""The rules closest in meaning to a request that names none of their words.

The focus (``situations.RuleIndex``) repeats after the playbook the rules whose
situation's words a request holds. A request in other words ("press kit" for a
rule learned as "journalism", "receipt" for "invoice request") names none, and
a small model then often answers with an unrelated rule. With an ``Embedder``,
such a request is served the rule whose case is closest to it in meaning
instead (cosine of unit vectors, the best of the rule's cases, at least
``NEAREST_FLOOR``). Measured on the bundled 1.5B, fixed playbooks, 88 held-out
tickets: 59 right with the words alone, 64 with the closest rule added
(``docs/benchmarks.md``, "The closest rule by meaning").
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import math
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from langgraph_combee._core.situations import MAX_FOCUS_TEXT, Rule, RuleIndex, choice_rules

__all__ = [
    "EMBEDDER_ALLOWED",
    "NEAREST_FLOOR",
    "NEAREST_RULES",
    "NearestRules",
    "VectorSource",
    "embedder_ok",
    "in_thread",
]

T = TypeVar("T")

NEAREST_FLOOR = 0.2
"""Least cosine between a request and a rule's case for the rule to be served."""
NEAREST_RULES = 1
"""Most rules served by meaning for one request (the measured setting)."""
MAX_CASES = 500
"""Most cases embedded for one version (a playbook is held to a token budget)."""


EMBEDDER_ALLOWED = "None or an object with embed(texts) -> vectors"
"""What a setting taking an embedder allows (``ConfigurationError``'s message)."""


def embedder_ok(value: object) -> bool:
    """Whether ``value`` may be given as an embedder: None or an instance with ``embed``."""
    return value is None or (
        not isinstance(value, type)  # the class, not an instance
        and callable(getattr(value, "embed", None))
    )


class VectorSource(Protocol):
    """What ``NearestRules`` needs of an ``Embedder``."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order."""
        ...


def _unit(values: tuple[float, ...], dimensions: int | None) -> tuple[float, ...]:
    if not values or (dimensions is not None and len(values) != dimensions):
        raise ValueError(f"the embedder returned a vector of {len(values)} numbers")
    norm = math.hypot(*values)  # neither overflows nor underflows
    if not math.isfinite(norm):
        raise ValueError("the embedder returned a vector that is not finite")
    return tuple(v / norm for v in values) if norm else values


def _rows(vectors: object, count: int) -> list[tuple[float, ...]]:
    """The embedder's reply as ``count`` rows of floats (each row read once)."""
    if isinstance(vectors, (str, bytes, dict)):
        raise ValueError(f"the embedder returned {type(vectors).__name__}, not vectors")
    rows = [tuple(float(v) for v in row) for row in vectors]  # type: ignore[attr-defined]
    if len(rows) != count:
        raise ValueError(f"the embedder returned {len(rows)} vectors for {count} texts")
    return rows


class NearestRules:
    """A version's rules with their cases embedded once, for ``closest``.

    Built per served version; the embedder is called once for all the cases
    here and once per request in ``closest``. An embedder that raises, or
    returns the wrong number of vectors or vectors of another length, makes
    the call raise (``ValueError`` or the embedder's own error): the caller
    serves the words-only focus and counts it.

    With ``choices`` (the default) only the rules that are one of several
    values of one kind of action (``situations.choice_rules``: "answer X8MB"
    beside "answer K3VW") are served by meaning: a rule that adds to the reply
    ("end it with our urgent line"), served to a request it does not fit,
    made a right reply wrong (a reply task, 50% -> 33% held-out with every rule
    served by meaning; ``docs/benchmarks.md``). Every rule is still ranked: a
    request closer to a rule that adds than to any choice is served none (as
    close: the choice). A version with no choice embeds nothing and is falsy,
    and the choices' cases are kept first under ``MAX_CASES``. ``limit`` below 1
    raises ``ValueError``.
    """

    def __init__(
        self,
        index: RuleIndex,
        embedder: VectorSource,
        *,
        limit: int = NEAREST_RULES,
        floor: float = NEAREST_FLOOR,
        choices: bool = True,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number of at least 1, got {limit!r}")
        self._embedder = embedder
        self._limit = limit
        self._floor = floor
        cases: list[tuple[int, Rule, str | None]] = []  # rule number, rule, case (None: whole)
        every = index.cases()
        # Every rule is ranked; only these are served (the others stop the look-up).
        self._servable = (
            choice_rules([rule for rule, _ in every]) if choices else frozenset(range(len(every)))
        )
        for number, (rule, alts) in enumerate(every):
            for alt in alts or (None,):
                cases.append((number, rule, alt))
        if not any(number in self._servable for number, _, _ in cases):
            cases = []  # nothing to serve: no request is embedded for none
        # The choices' cases first: the others only stop a look-up, and a playbook of
        # many rules that add must not push its choices past the bound.
        cases.sort(key=lambda case: case[0] not in self._servable)
        cases = cases[:MAX_CASES]
        texts = [alt if alt is not None else rule.situation for _, rule, alt in cases]
        vectors = _rows(embedder.embed(texts), len(texts)) if texts else []
        self._dimensions = len(vectors[0]) if vectors else None
        self._cases = [
            (number, rule, alt, _unit(vector, self._dimensions))
            for (number, rule, alt), vector in zip(cases, vectors, strict=True)
        ]

    def __bool__(self) -> bool:
        return bool(self._cases)

    def closest(self, text: str) -> list[Rule]:
        """The rules closest to ``text`` in meaning, best first, one per action ([] if none)."""
        if not self._cases or not text.strip():
            return []
        query = _unit(_rows(self._embedder.embed([text[:MAX_FOCUS_TEXT]]), 1)[0], self._dimensions)
        best: dict[int, tuple[float, Rule, str | None]] = {}
        for number, rule, alt, vector in self._cases:
            score = math.fsum(a * b for a, b in zip(query, vector, strict=True))
            if score >= self._floor and (number not in best or score > best[number][0]):
                best[number] = (score, rule, alt)
        found: list[Rule] = []
        actions: set[str] = set()
        # At one score a choice goes first: a request as close to a choice as to a rule
        # that adds is of the choice's kind, whatever the playbook's order.
        ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0] not in self._servable))
        for number, (_score, rule, alt) in ranked:
            if number not in self._servable:
                # Closer to a rule that adds to the reply than to any choice: the
                # request is of another kind than the choices' (a mixed stream's
                # fee question is no vacancy to give a reference code).
                break
            action = rule.action.casefold()
            if action in actions:
                continue
            actions.add(action)
            found.append(Rule(alt, rule.action) if alt is not None else rule)
            if len(found) == self._limit:
                break
        return found


def in_thread(fn: Callable[[], T]) -> concurrent.futures.Future[T]:
    """``fn()`` in a daemon thread, in a copy of the caller's context.

    A daemon thread: an embedder that never returns does not block the
    interpreter's exit. What ``fn`` raises is handed to the waiting caller; an
    interrupt raised in the thread (``KeyboardInterrupt``, ``SystemExit``, a
    cancellation) is no interrupt of the caller's, so it comes as a
    ``RuntimeError``.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn))
        except Exception as exc:
            future.set_exception(exc)
        except BaseException as exc:  # not the caller's interrupt
            future.set_exception(RuntimeError(f"the embedder raised {type(exc).__name__}: {exc}"))

    threading.Thread(target=run, name="combee-focus-embed", daemon=True).start()
    return future
