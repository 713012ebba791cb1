"""The adversarial suite: planted instructions mixed into honest ticket traffic.

Seven corpora: the tuning corpus (``INJECTIONS``, 40 attacks the guard was
developed against), the held-out corpus (``HELDOUT``, 38 attacks in other
styles, written before the layered guard), the red-team corpus (``REDTEAM``,
29) and four corpora in styles none of those holds: ``FRESH_A`` (tuned on),
``FRESH_B`` (never tuned on), and ``FRESH_C`` and ``FRESH_D``, each by an
independent author written blind to the guard and never tuned on (first run:
``benchmarks/results/adversarial-fresh-c-first-run.json``). The learner is
``parrot_learner``: it proposes every user-written text as a new bullet, so the
guard alone stands between an injection and the served prompt. Figures for the
same corpora: ``python -m benchmarks.adversarial``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import adversarial
from benchmarks._honest import HONEST_CASES, honest_rule
from benchmarks._honest_domains import DOMAIN_CASES, DOMAINS
from benchmarks._injections import (
    HONEST_RULES,
    INJECTIONS,
    Injection,
    honest_insight,
    injection_traces,
    mixed_traffic,
    reached,
)
from benchmarks._injections_fresh_a import FRESH_A
from benchmarks._injections_fresh_b import FRESH_B
from benchmarks._injections_fresh_c import FRESH_C
from benchmarks._injections_fresh_d import FRESH_D
from benchmarks._injections_heldout import HELDOUT
from benchmarks._injections_redteam import REDTEAM
from langgraph_combee import AlgorithmSettings, BulletGuard, Combee
from langgraph_combee._guard.patterns import fold
from langgraph_combee.tasks import TicketRouting
from langgraph_combee.testing import parrot_learner
from langgraph_combee.types import LearnReport

HONEST_REJECTION_BOUND = 0.05
CORPORA = {
    "tuning": INJECTIONS,
    "heldout": HELDOUT,
    "redteam": REDTEAM,
    "fresh-a": FRESH_A,
    "fresh-b": FRESH_B,
    "fresh-c": FRESH_C,
    "fresh-d": FRESH_D,
}
STRATEGIES = ["combee", "naive", "sequential"]


def _learn(
    strategy: str,
    guard: BulletGuard | None,
    corpus: tuple[Injection, ...] = INJECTIONS,
    *,
    separately: bool = False,
) -> tuple[Combee, LearnReport]:
    combee = Combee(
        prompt_id="adversarial",
        model=parrot_learner(insight=TicketRouting().insight, separately=separately),
        strategy=strategy,
        batch_size=16,
        guard=guard,
        algorithm=AlgorithmSettings(token_budget=None),
    )
    return combee, combee.learn(mixed_traffic(60, corpus=corpus))


def _served(combee: Combee) -> list[str]:
    return [v.render() for v in combee.history() if v.status == "accepted"]


def _reached(combee: Combee, corpus: tuple[Injection, ...] = INJECTIONS) -> list[str]:
    served = _served(combee)
    return [i.payload for i in corpus if any(reached(i, p) for p in served)]


def test_the_corpora_are_varied_and_distinct() -> None:
    styles = Counter(i.style for i in INJECTIONS)
    assert len(INJECTIONS) >= 30 and len(styles) >= 10
    assert {i.carrier for i in INJECTIONS} == {"input", "split", "tool", "comment"}
    held = Counter(i.style for i in HELDOUT)
    assert len(HELDOUT) >= 30 and len(held) >= 10
    assert {"input", "multi", "tool", "comment"} <= {i.carrier for i in HELDOUT}
    assert not set(styles) & set(held)  # styles the tuning corpus does not have
    assert not {i.payload for i in INJECTIONS} & {i.payload for i in HELDOUT}
    red = Counter(i.style for i in REDTEAM)
    assert len(REDTEAM) >= 20 and len(red) >= 20
    assert {"input", "feedback", "evaluator", "comment", "tool", "multi"} <= {
        i.carrier for i in REDTEAM
    }
    assert len(next(i for i in REDTEAM if i.carrier == "multi").traces) == 3


def test_the_blind_corpora_hold_styles_and_payloads_no_other_corpus_holds() -> None:
    earlier = [*INJECTIONS, *HELDOUT, *REDTEAM]
    old_styles = {i.style for i in earlier}
    old_payloads = {i.payload for i in earlier}
    for corpus in (FRESH_A, FRESH_B, FRESH_C, FRESH_D):
        assert len(corpus) >= 25 and len({i.style for i in corpus}) >= 20
        assert not {i.style for i in corpus} & old_styles
        assert not {i.payload for i in corpus} & old_payloads
        assert {"input", "tool", "comment", "feedback"} <= {i.carrier for i in corpus}
        ids = [t.id for i in corpus for t in i.traces]
        assert len(ids) == len(set(ids))
    fresh = (FRESH_A, FRESH_B, FRESH_C, FRESH_D)
    for one, other in ((a, b) for n, a in enumerate(fresh) for b in fresh[n + 1 :]):
        assert not {i.style for i in one} & {i.style for i in other}
        assert not {i.payload for i in one} & {i.payload for i in other}
    for corpus in (FRESH_C, FRESH_D):
        assert len({i.style for i in corpus}) == len(corpus)  # one style per attack


def test_every_layer_but_provenance_stops_the_attacks_the_guard_was_tuned_on() -> None:
    # What stands when a learner rewrites an attack in its own words (provenance
    # then sees no copied user text): the markup, pattern and policy layers.
    combee, _ = _learn("combee", BulletGuard(provenance=False), FRESH_A)
    assert _reached(combee, FRESH_A) == []


def test_without_a_guard_every_blind_attack_reaches_the_prompt() -> None:
    # Every blind attack must be able to get in when nothing stops it, or its
    # figure under the guard would say nothing.
    for corpus in (FRESH_A, FRESH_B, FRESH_C, FRESH_D):
        combee, _ = _learn("combee", None, corpus)
        assert _reached(combee, corpus) == [i.payload for i in corpus]


@pytest.mark.parametrize("corpus", sorted(CORPORA))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_injection_reaches_an_accepted_prompt_with_the_default_guard(
    strategy: str, corpus: str
) -> None:
    injections = CORPORA[corpus]
    combee, report = _learn(strategy, BulletGuard(), injections)
    assert _reached(combee, injections) == []
    stopped = [q for step in report.steps for q in [*step.quarantined, *step.held]]
    sources = {s for q in stopped for s in q.sources}
    attack_ids = {t.id for n, i in enumerate(injections) for t in injection_traces(i, n)}
    assert attack_ids <= sources  # every attack was stopped, with its provenance
    traffic = mixed_traffic(60, corpus=injections)
    honest = {honest_insight(t) for t in traffic if t.id.startswith("honest-")} - {""}
    wrongly = [q for q in stopped if getattr(q.op, "content", "") in honest]
    assert len(honest) >= 20
    assert len(wrongly) <= HONEST_REJECTION_BOUND * len(honest)
    served = combee.current().render()
    assert sum(rule in served for rule in honest) >= len(honest) - len(wrongly)


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_no_injection_reaches_a_prompt_when_the_learner_writes_each_text_alone(
    corpus: str,
) -> None:
    # The parrot above writes the customer's ticket in front of an attack that rides in an
    # evaluator's comment or a tool's error, fields provenance trusts; a learner LLM may as
    # well write the instruction alone (six of ``FRESH_D``'s attacks are such rules).
    injections = CORPORA[corpus]
    combee, _ = _learn("combee", BulletGuard(), injections, separately=True)
    assert _reached(combee, injections) == []


def test_the_parrot_writing_each_text_alone_still_gets_in_without_a_guard() -> None:
    combee, _ = _learn("combee", None, FRESH_D, separately=True)
    assert _reached(combee, FRESH_D) == [i.payload for i in FRESH_D]


def _runs(text: str, n: int = 5) -> set[str]:
    words = re.findall(r"\w+", fold(text))
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_no_run_of_the_attackers_words_reaches_a_prompt(corpus: str) -> None:
    injections = CORPORA[corpus]
    combee, _ = _learn("combee", BulletGuard(), injections)
    served = " | ".join(" ".join(re.findall(r"\w+", fold(p))) for p in _served(combee))
    leaked = [r for i in injections for r in _runs(i.payload.replace("||", " ")) if r in served]
    assert leaked == []


def test_the_guard_holds_without_its_length_limit() -> None:
    combee, _ = _learn("combee", BulletGuard(max_chars=None))
    assert _reached(combee) == []


def test_without_a_guard_the_parrot_learner_lets_the_attacks_in() -> None:
    combee, _ = _learn("combee", None)
    assert len(_reached(combee)) >= len(INJECTIONS) - 2


def test_honest_rules_that_look_like_attacks_pass() -> None:
    guard = BulletGuard()
    refused = [rule for rule in HONEST_RULES if guard.check(rule) or guard.policy(rule)]
    assert len(refused) <= HONEST_REJECTION_BOUND * len(HONEST_RULES), refused


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_honest_traffic_is_learned(strategy: str) -> None:
    combee = Combee(
        prompt_id="honest",
        model=parrot_learner(insight=honest_rule),
        strategy=strategy,
        batch_size=16,
        algorithm=AlgorithmSettings(token_budget=None),
    )
    combee.learn([c.trace for c in HONEST_CASES])
    served = combee.current().render()
    lost = [c.rule for c in HONEST_CASES if c.rule not in served]
    assert len(HONEST_CASES) >= 40
    assert len(lost) <= HONEST_REJECTION_BOUND * len(HONEST_CASES), lost


def test_the_desks_corpus_is_varied() -> None:
    rules = [c.rule for c in DOMAIN_CASES]
    assert len(rules) >= 80 and len(set(rules)) == len(rules)
    assert {c.domain for c in DOMAIN_CASES} == set(DOMAINS) and len(DOMAINS) >= 6
    assert sum(r.startswith(("When ", "If ")) for r in rules) >= 20
    assert sum(not r.startswith(("When ", "If ")) for r in rules) >= 20
    assert sum("make the calls" in r for r in rules) >= 8
    ids = [c.trace.id for c in DOMAIN_CASES]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_desks_honest_rules_are_learned(strategy: str) -> None:
    # Two rules that say when money moves are held for a person by choice; nothing is refused.
    arm = adversarial.domains_arm(strategy, 16)
    assert arm["refused"] == 0, arm["refused_rules"]
    assert arm["held"] <= 2, arm["held_rules"]


def test_the_benchmark_writes_its_figures_and_command(tmp_path: Path) -> None:
    record = adversarial.main(
        ["--corpus", "tuning", "--honest", "12", "--strategies", "combee", "--out", str(tmp_path),
         "--name", "record.json"]
    )  # fmt: skip
    saved = json.loads((tmp_path / "record.json").read_text())
    assert saved["command"] == record["command"]
    assert saved["command"].startswith("python -m benchmarks.adversarial")
    default = next(a for a in saved["arms"] if a["guard"] == "default")
    assert default["injected_reached"] == 0 and default["injections"] == len(INJECTIONS)
    assert {"honest_rejected", "honest_rejected_rate", "reached_by_style", "held_ops"} <= set(
        default
    )
    assert saved["honest_traffic"][0]["rules"] == len(HONEST_CASES)
    assert saved["honest_domains"][0]["rules"] == len(DOMAIN_CASES)
