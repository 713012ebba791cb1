"""The stages between the proposed ops and the guard: conventions, formats, corrections.

Served outcomes become helpful/harmful verdicts, the new rules are settled
among themselves and reconciled with the playbook, and ``collect`` puts what
these stages made in the order the guard screens it. ``kinds`` and
``confirmed`` then name the kind of input a rule speaks for from its runs.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import replace

from langgraph_combee._algorithm.schemas import KIND_TOKENS, FormatOut, KindOut
from langgraph_combee._algorithm.stages.base import Counts, StepContext, StepState
from langgraph_combee._core import formats
from langgraph_combee._core import words as _words
from langgraph_combee._core.ops import Add, DeltaOp, Remove, Tag, Update
from langgraph_combee._core.situations import Rule, alternatives, parse_rule
from langgraph_combee._core.types import Trace
from langgraph_combee._core.values import holds, values
from langgraph_combee._errors import LLMCallError
from langgraph_combee._guard.provenance import Trust
from langgraph_combee._llm import prompts
from langgraph_combee._rules import conventions as convention_rules
from langgraph_combee._rules import examples, rules

__all__ = [
    "adds_only",
    "collect",
    "confirmed",
    "conventions",
    "formats",
    "kinds",
    "reconcile",
    "remember",
    "served",
]


async def conventions(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Drop conventions an LLM wrote; owe those the batch's feedback states.

    Conventions every reply must follow are read from the feedback, not reflected
    on: one an LLM wrote would be served on every request without that evidence.
    """
    trust = ctx.guard.trust if ctx.guard is not None else None
    ops = [op for op in state.ops if not convention_rules.written(op)]
    section = state.playbook.resolve_section("others")
    owed = convention_rules.found(state.batch, state.playbook, section=section, trust=trust)
    counts = {"dropped": len(state.ops) - len(ops), "owed": len(owed)}
    return replace(state, ops=ops, owed=owed), counts


async def remember(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Keep the batch's inputs, with the actions of the rules they backed, for later steps."""
    ctx.memory.remember(state.batch, state.ops)
    return replace(state, remembered=ctx.memory.items()), {"inputs": len(state.batch)}


async def served(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Helpful/harmful verdicts from the outcomes of the rules served to the batch.

    The inputs remembered ground the rules (``rules.served_evidence``).
    """
    trust = ctx.guard.trust if ctx.guard is not None else None
    tags, misapplied = rules.served_evidence(
        state.playbook, state.traces or (), state.remembered, trust
    )
    report = state.report
    report.served_misapplied += misapplied
    helpful = harmful = 0
    for op in tags:
        assert isinstance(op, Tag)
        helpful += op.helpful
        harmful += op.harmful
    report.served_helpful += helpful
    report.served_harmful += harmful
    counts = {"helpful": helpful, "harmful": harmful, "misapplied": misapplied}
    return replace(state, served=tags), counts


async def reconcile(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Settle the new rules among themselves, fold one action's rules, reconcile with the playbook.

    Conflicts are recorded in the report.
    """
    settled, batch_conflicts = rules.settle_batch(list(state.ops))
    reconciled, playbook_conflicts = rules.reconcile(state.playbook, rules.fold_actions(settled))
    found = [*batch_conflicts, *playbook_conflicts]
    state.report.conflicts.extend(c.describe() for c in found)
    return replace(state, ops=reconciled), {"ops": len(reconciled), "conflicts": len(found)}


async def adds_only(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Keep only the new rules' ADDs: the step without rule corrections (an ablation).

    No rewrite, removal or counter applies, so a new sign-off cannot replace the
    old one and is not added either.
    """
    ops = [op for op in state.ops if isinstance(op, Add)]
    owed = [] if any(isinstance(op, Remove) for op in state.owed) else state.owed
    dropped = len(state.ops) - len(ops) + len(state.owed) - len(owed)
    return replace(state, ops=ops, owed=owed), {"dropped": dropped}


async def collect(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Put the ops in the order they are screened and applied.

    The conventions owed, the served verdicts, then the new rules. No curator op
    reaches the worked examples (``examples``).
    """
    new = examples.without_examples(state.ops, state.playbook)
    ops = [*state.owed, *state.served, *new]
    return replace(state, ops=ops, owed=[], served=[]), {"ops": len(ops)}


KIND_RUNS = 2
"""Fewest distinct inputs behind a new rule for its situation to be named from them."""
KIND_SHOWN = 8
"""Most inputs shown to the kind namer for one rule."""
CONFIRMED_LABELS = 8
"""Most labels the ``confirmed`` stage asks the kind namer about in one step."""


async def kinds(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Name each new rule's situation by the kind of request all its runs share.

    A rule folded from several runs gives one action to inputs whose situations
    the reflectors wrote one run at a time, in that run's words ("When light or
    lamp flicker or post, ..."): a new request of the same kind in other words
    matches none of them. The runs behind the rule are shown together and the
    learner names what they have in common; that kind leads the situation, before
    the reflectors' words (at most ``rules.MAX_ALTERNATIVES`` alternatives in all).
    The runs behind a rule are its sources in the batch and the inputs of
    earlier steps whose reflections gave its action, so a rule in force that
    the step widens is named again from all of them. A reply that fails or
    cannot be a situation (``KindOut.situation``) leaves the rule as it was.
    Rules backed by one input keep the reflector's words.
    """
    caller = ctx.caller
    if caller is None:
        return state, {"named": 0, "kept": 0}
    inputs = {t.id: t.input for t in state.batch if t.input.strip()}
    jobs: list[tuple[int, Rule, list[str]]] = []
    for at, op in enumerate(state.ops):
        rule = parse_rule(op.content) if isinstance(op, (Add, Update)) else None
        if rule is None:
            continue
        # The runs behind it: its sources in the batch, and the inputs of earlier steps
        # whose reflections gave its action (a rule in force widened by this step).
        runs = [inputs[s] for s in op.sources if s in inputs]
        runs += [
            seen.text
            for seen in state.remembered
            if seen.text.strip() and any(rules.same_action(a, rule.action) for a in seen.actions)
        ]
        runs = list(dict.fromkeys(runs))
        if len(runs) >= KIND_RUNS:
            jobs.append((at, rule, runs[:KIND_SHOWN]))

    async def one(runs: list[str]) -> KindOut | None:
        try:
            return await caller.call(
                "combee.kind",
                prompts.kind_messages(runs),
                KindOut,
                state.stats,
                max_tokens=KIND_TOKENS,
            )
        except LLMCallError:
            return None

    replies = await asyncio.gather(*(one(runs) for _, _, runs in jobs))
    ops: list[DeltaOp] = list(state.ops)
    named = 0
    for (at, rule, _), reply in zip(jobs, replies, strict=True):
        kind = reply.situation(rule.action) if reply is not None else None
        if kind is None:
            continue
        # An UPDATE of a rule in force stays an UPDATE of it. The kind first, then the
        # words the reflectors found (the cases seen): "When a noise disturbance or alarm
        # or going off, ...", as an engineer lists a code's kind and its usual cases.
        seen = [a for a in alternatives(rule.situation) if not rules.same_situation(a, kind)]
        situation = " or ".join([kind, *seen[: rules.MAX_ALTERNATIVES - 1]])
        ops[at] = ops[at].model_copy(update={"content": Rule(situation, rule.action).text()})
        named += 1
    return replace(state, ops=ops), {"named": named, "kept": len(jobs) - named}


CONFIRMED_CHARS = 40
"""Longest right answer the ``confirmed`` stage writes a rule for (a label, not a reply)."""


def _right_labels(ctx: StepContext, state: StepState) -> dict[str, tuple[str, list[Trace]]]:
    """The batch's runs judged right whose trusted label is short, by label.

    The label is the run's trusted ground truth, or, where a person of the app's marked
    the run right with none (``Trust.approved``: a reviewer's thumbs-up), the reply they
    approved.
    """
    trust = ctx.guard.trust if ctx.guard is not None else Trust()
    found: dict[str, tuple[str, list[Trace]]] = {}
    for trace in state.batch:
        fb = trace.feedback
        if fb is None or fb.correct is not True or not trace.input.strip():
            continue
        if fb.ground_truth:
            truth = fb.ground_truth.strip() if trust.truth(trace) else ""
        else:
            truth = trace.output.strip() if trust.approved(trace) else ""
        if not truth:
            continue
        # Any line break (a carriage return, U+2028 too) makes it a reply, not a label.
        multiline = len(truth.splitlines()) > 1
        if multiline or len(truth) > CONFIRMED_CHARS or rules.CALL_NAME.search(truth):
            continue
        found.setdefault(_label_key(truth), (truth, []))[1].append(trace)
    return found


def _label_key(text: str) -> str:
    """One key for a label or request however it is cased and spaced ("BV  12" is "bv 12")."""
    return " ".join(text.split()).casefold()


_LINKS = frozenset(["with", "as", "to", "by", "into"])
"""Words that may stand between an action's verb and its label ("answer with refund")."""
_GIVING = frozenset(["answer", "reply", "respond", "route", "classify", "categorize", "categorise"])
"""Verbs whose object is the reply itself (``situations.exclusive``): "deny refund", "nicht
erstatten" or "partial refund" end with the label and give none."""


def _gives(action: str, truth: str) -> bool:
    """Whether a rule's ``action`` gives the label ``truth``, whatever its verb.

    The label is the whole object of one verb of giving: the action's words are
    such a verb (``_GIVING``), a linking word or none (``_LINKS``), then the
    label's words ("reply refund", "route to refund"; not "answer partial refund",
    "deny refund", nor "never refund"), the label written whole ("-42" is not "42").
    """
    if rules.same_action(f"answer {truth}", action):
        return True
    said, label = _words.words(action), _words.words(truth)
    if not label or len(said) < len(label) or said[len(said) - len(label) :] != label:
        return False
    lead = said[: len(said) - len(label)]
    if len(lead) == 2 and lead[1] in _LINKS:
        lead = lead[:1]
    whole = re.compile(rf"(?<![\w+\-.]){re.escape(' '.join(truth.split()))}(?![\w\-])", re.I)
    return len(lead) == 1 and lead[0] in _GIVING and bool(whole.search(" ".join(action.split())))


async def confirmed(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Write the rule for a label the agent already answers right, named by its runs' kind.

    A run judged right teaches the reflectors nothing to correct, so a label the
    agent gets right from its words ("I want a refund" -> ``refund``) has no rule,
    and a request of that kind in other words ("my money back, please") has none
    to follow. The label is a trusted ground truth, or a reply a reviewer approved.
    Where two inputs or more (the batch's right runs, and earlier
    steps' inputs with the same ground truth) share a trusted label that no rule
    in force or of the step answers, the kind namer is shown them and its kind
    makes the rule ("When a request for money back on an order, answer refund.").
    A kind it cannot name (``KindOut.situation``) writes nothing.
    """
    caller = ctx.caller
    if caller is None:
        return state, {"rules": 0, "unnamed": 0}
    actions = [r.action for b in state.playbook.bullets if (r := parse_rule(b.content))]
    actions += [
        r.action
        for op in state.ops
        if isinstance(op, (Add, Update)) and (r := parse_rule(op.content)) is not None
    ]
    jobs: list[tuple[str, list[Trace], list[str]]] = []
    for key, (truth, runs) in _right_labels(ctx, state).items():
        if any(_gives(a, truth) for a in actions):
            continue
        inputs = [t.input for t in runs]
        inputs += [s.text for s in state.earlier if _label_key(s.truth) == key and s.text.strip()]
        # One request sent twice, spaced or cased another way, is one input: it takes
        # two different requests to show a kind.
        unique: dict[str, str] = {}
        for text in inputs:
            unique.setdefault(_label_key(text), text)
        inputs = list(unique.values())
        # A label holding a number every request names (one order's id the agent echoed)
        # is the requests' value, not an answer for their kind.
        numbered = [v for v in values(truth) if any(c.isdigit() for c in v)]
        if any(all(holds(v, text) for text in inputs) for v in numbered):
            continue
        if len(inputs) >= KIND_RUNS:
            jobs.append((truth, runs, inputs))
    # The labels most requests share first; the others wait for a later step.
    jobs.sort(key=lambda job: len(job[2]), reverse=True)
    jobs = [(truth, runs, inputs[:KIND_SHOWN]) for truth, runs, inputs in jobs[:CONFIRMED_LABELS]]

    async def one(inputs: list[str]) -> KindOut | None:
        try:
            return await caller.call(
                "combee.kind",
                prompts.kind_messages(inputs),
                KindOut,
                state.stats,
                max_tokens=KIND_TOKENS,
            )
        except LLMCallError:
            return None

    replies = await asyncio.gather(*(one(inputs) for _, _, inputs in jobs))
    added: list[DeltaOp] = []
    for (truth, runs, _), reply in zip(jobs, replies, strict=True):
        action = f"answer {truth}"
        kind = reply.situation(action) if reply is not None else None
        if kind is not None:
            content = Rule(kind, action).text()
            added.append(Add(section="others", content=content, sources=[t.id for t in runs]))
    counts = {"rules": len(added), "unnamed": len(jobs) - len(added)}
    return replace(state, ops=[*state.ops, *added]), counts


FORMAT_RUNS = 2
"""Fewest runs whose answers, each its own, are shown together to find their format."""
FORMAT_SHOWN = 6
"""Most runs shown to the format finder (each run's request and right answer)."""
FORMAT_TOKENS = 80
"""Longest reply of the format finder."""
_ANSWER = re.compile(r"^answer\s+", re.IGNORECASE)


def _own_answers(ctx: StepContext, state: StepState) -> dict[str, tuple[int, str, str]]:
    """Per new rule's position: its run's trusted answer, and the request, where the answer is
    that run's own (no other run of the batch has it, and it holds a value of the request)."""
    trust = ctx.guard.trust if ctx.guard is not None else None
    truths: dict[str, tuple[str, str]] = {}
    for trace in state.batch:
        fb = trace.feedback
        truth = (fb.ground_truth or "").strip() if fb is not None else ""
        if truth and (trust is None or trust.truth(trace)):
            truths[trace.id] = (truth, trace.input)
    count = Counter(truth for truth, _ in truths.values())
    found: dict[str, tuple[int, str, str]] = {}
    for at, op in enumerate(state.ops):
        rule = parse_rule(op.content) if isinstance(op, Add) else None
        if rule is None or not _ANSWER.match(rule.action) or len(op.sources) != 1:
            continue
        truth, request = truths.get(op.sources[0], ("", ""))
        own = truth and count[truth] == 1 and "\n" not in truth
        if own and not rules.CALL_NAME.search(truth) and formats.carries_input(truth, request):
            found[op.sources[0]] = (at, truth, request)
    return found


def _earlier_answers(state: StepState, taken: set[str]) -> dict[str, list[tuple[str, str]]]:
    """By shape, the (request, answer) pairs of earlier steps whose answer was that run's own.

    A step holds a few runs: two runs of one format often fall in two steps.
    """
    seen = [s for s in state.earlier if s.truth and s.text.strip() and "\n" not in s.truth]
    count = Counter(s.truth for s in seen)
    out: dict[str, list[tuple[str, str]]] = {}
    for item in seen:
        truth = item.truth
        if truth in taken or count[truth] > 1 or rules.CALL_NAME.search(truth):
            continue
        if formats.carries_input(truth, item.text):
            out.setdefault(formats.shape(truth), []).append((item.text, truth))
    return out


async def formats_stage(ctx: StepContext, state: StepState) -> tuple[StepState, Counts]:
    """Learn one format for new rules whose answers are each their own run's values.

    Where every run's right answer is built from its request (a record line
    with the caller's name and number), the reflectors write one rule per run
    answering with that run's values: it fits no other request and carries
    one customer's data. Such rules whose answers are written alike
    (``formats.shape``) are shown to the learner together, request and
    answer; the format it writes replaces them ("When ..., answer in the
    format CB;<first name>;<phone number, digits only>;<AM or PM>.") when its
    fixed parts write every one of those answers and it names no value of a
    single run (``FormatOut.format_for``); otherwise they stay as they were.
    Earlier steps' runs of the same shape (``StepState.earlier``) are shown and
    checked too: one run of the batch and one seen before make a pair.
    """
    caller = ctx.caller
    if caller is None:
        return state, {"formats": 0, "rules": 0}
    groups: dict[str, list[tuple[int, str, str]]] = {}
    for found in _own_answers(ctx, state).values():
        groups.setdefault(formats.shape(found[1]), []).append(found)
    earlier = _earlier_answers(state, {truth for g in groups.values() for _, truth, _ in g})
    asked = [
        g for shape, g in groups.items() if len(g) + len(earlier.get(shape, ())) >= FORMAT_RUNS
    ]

    def shown(group: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
        pairs = [(request, truth) for _, truth, request in group]
        more = earlier.get(formats.shape(group[0][1]), [])
        return (pairs + more)[: max(FORMAT_SHOWN, len(pairs))]

    async def one(group: list[tuple[int, str, str]]) -> FormatOut | None:
        pairs = shown(group)[:FORMAT_SHOWN]
        try:
            return await caller.call(
                "combee.format",
                prompts.format_messages(pairs),
                FormatOut,
                state.stats,
                max_tokens=FORMAT_TOKENS,
            )
        except LLMCallError:
            return None

    replies = await asyncio.gather(*(one(g) for g in asked))
    ops: list[DeltaOp | None] = list(state.ops)
    learned = replaced = 0
    for group, reply in zip(asked, replies, strict=True):
        pairs = shown(group)
        answers = [truth for _, truth in pairs]
        requests = [r for r, _ in pairs]
        written = reply.format_for(answers, requests) if reply else None
        if written is None and (derived := formats.derived(answers, requests)) is not None:
            # The answers' own fixed text around each request's value, checked as a reply is.
            written = FormatOut(format=derived).format_for(answers, requests)
        if written is None:
            continue
        members = [op for at, _, _ in group if isinstance(op := state.ops[at], Add)]
        situations = [r.situation for op in members if (r := parse_rule(op.content)) is not None]
        first = members[0]
        rule = Rule(rules.join_situations(*situations), f"answer in the format {written}")
        sources = [s for op in members for s in op.sources]
        ops[group[0][0]] = Add(section=first.section, content=rule.text(), sources=sources)
        for at, _, _ in group[1:]:
            ops[at] = None
        learned += 1
        replaced += len(group)
    kept = [op for op in ops if op is not None]
    return replace(state, ops=kept), {"formats": learned, "rules": replaced}
