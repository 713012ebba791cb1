"""Role profiles: how the reflector, the curators and the aggregator are asked, as objects.

A ``RoleProfile`` writes each role's prompt, bounds its reply, reads it back
into reflections and delta ops, and merges level-1 proposals at level 2. The
strategies call the profile and never ask which one it is; the Combee
structure (map, shuffle, k groups, level-2 merge, one apply) is the same for
every profile.

* ``FullRoles``: ACE's roles. The reflector writes error, root cause, correct
  approach, key insight and helpful/harmful tags; curators adopt insights and
  write ADD/UPDATE/REMOVE; the aggregator drops, merges and reconciles.
* ``SmallRoles``: for models of a few billion parameters. The reflector writes
  one "When <situation>, <action>." rule; curators and the aggregator are
  asked only about rules that give different actions for one situation, and
  leave some out.
``auto_roles.AutoRoles`` (the default) chooses between the two by itself.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from langgraph_combee._algorithm import aggregate
from langgraph_combee._algorithm.notes import NOTE_CHARS, reviewer_note
from langgraph_combee._algorithm.schemas import (
    KIND_TOKENS,
    AggregateOut,
    CuratorOut,
    InstructionOut,
    KindOut,
    ReflectionOut,
    SmallAggregateOut,
    SmallCuratorOut,
    SmallReflectionOut,
    convert_ops,
    normalize_label,
)
from langgraph_combee._core.ops import Add, DeltaOp
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.situations import Rule, alternatives, parse_rule, situation_words
from langgraph_combee._core.types import Correction, Reflection, Trace
from langgraph_combee._errors import LLMCallError
from langgraph_combee._llm import failures, prompts
from langgraph_combee._llm.calls import CallStats, LLMCaller
from langgraph_combee._rules.rules import overlaps, same_action, same_situation

Labelled = tuple[str, Reflection]

AggregationMode = Literal["merged", "union", "nothing to merge"]


@dataclass(frozen=True)
class Aggregation:
    """Level 2's result: the step's ops and how they were reached.

    ``mode`` is ``"merged"`` (the aggregator's reply was applied),
    ``"nothing to merge"`` (no proposals conflicted, so no call was needed) or
    ``"union"`` (the aggregator's reply was unusable: every proposal kept, a
    recorded fallback).
    """

    ops: list[DeltaOp]
    mode: AggregationMode


class RoleProfile(ABC):
    """How the learner's roles are asked and read back; one object per engine."""

    name: ClassVar[str] = ""
    reflect_tokens: ClassVar[int] = 0
    curate_tokens: ClassVar[int] = 0
    aggregate_tokens: ClassVar[int] = 0

    def active(self) -> RoleProfile:
        """The profile that answers now (itself, except for ``AutoRoles``)."""
        return self

    def needs_reflection(self, trace: Trace) -> bool:
        """Whether ``trace`` is worth a reflector call."""
        return True

    @abstractmethod
    async def reflect(
        self, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        """One reflection on ``trace``; None when the reply was unusable."""

    @abstractmethod
    async def curate(
        self,
        caller: LLMCaller,
        run_name: str,
        playbook: Playbook,
        group: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> list[DeltaOp] | None:
        """One curator call over a group of reflections; None when its reply was unusable."""

    @abstractmethod
    async def aggregate(
        self,
        caller: LLMCaller,
        playbook: Playbook,
        proposals: Sequence[Sequence[DeltaOp]],
        labelled: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> Aggregation:
        """Level 2: merge the level-1 proposals into the step's ops."""

    def observe(self, stats: CallStats) -> None:  # noqa: B027 - a hook; most profiles ignore it
        """Told every step's call statistics (``AutoRoles`` decides on them)."""

    def describe(self) -> dict[str, Any]:
        """What is in use and why, for ``describe()`` and each ``StepReport``."""
        return {"profile": self.name, "chosen": "set", "reason": f"roles={self.name!r}"}


_Reply = TypeVar("_Reply", bound=BaseModel)


async def _reflect_call(
    caller: LLMCaller,
    trace: Trace,
    messages: Sequence[BaseMessage],
    schema: type[_Reply],
    stats: CallStats,
    *,
    max_tokens: int | None,
) -> _Reply | None:
    """The reflection call on ``trace``; a failure is noted for the step (``failures``)."""
    try:
        return await caller.call("combee.reflect", messages, schema, stats, max_tokens=max_tokens)
    except LLMCallError as exc:
        failures.note(trace.id, exc)
        raise


def _union(proposals: Sequence[Sequence[DeltaOp]]) -> list[DeltaOp]:
    return [op for proposal in proposals for op in proposal]


def _overlaps(proposed: Mapping[str, DeltaOp]) -> list[list[str]]:
    """Groups of proposal labels whose rules give different actions for one situation."""
    added = [(label, op.content) for label, op in proposed.items() if isinstance(op, Add)]
    return _same_situation(added)


def _same_situation(rules: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Groups of labels whose rules speak about one situation with different actions.

    A group is a chain of rules whose situations overlap, one pair after
    another ("refund", "refund or late parcel", "late parcel"), so which
    conflicts are found does not depend on the rules' order. Exact repeats of
    a rule are folded into its first label (nothing to decide between copies);
    text that is no "When <situation>, <action>." rule is in no group. Nor is a
    group whose rules all give one action: the rules layer folds such rules
    into one whose situation names all of theirs (``rules.fold_actions``), so
    there is nothing for a model to decide.
    """
    seen: set[str] = set()
    parsed: list[tuple[str, Rule]] = []
    for label, content in rules:
        key = _norm(content)
        if key in seen:
            continue
        seen.add(key)
        rule = parse_rule(content)
        if rule is not None:
            parsed.append((label, rule))
    # Union-find over the rules, joined wherever two situations overlap.
    parent = list(range(len(parsed)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (_, a) in enumerate(parsed):
        for j in range(i):
            if root(i) != root(j) and overlaps(parsed[j][1].situation, a.situation):
                parent[root(i)] = root(j)
    chains: dict[int, list[tuple[str, Rule]]] = {}
    for i, item in enumerate(parsed):
        chains.setdefault(root(i), []).append(item)
    groups: list[list[tuple[str, Rule]]] = []
    for chain in chains.values():
        groups.extend(_split(chain) if len(chain) > MAX_CHAIN else [chain])
    return [
        [label for label, _ in group]
        for group in groups
        if any(
            not same_action(a.action, b.action)
            for n, (_, a) in enumerate(group)
            for _, b in group[n + 1 :]
        )
    ]


MAX_CHAIN = 12
"""Most rules a chain of overlapping situations is shown as one group. A playbook of
a hundred rules can chain most of them through shared words; past this, the chain
is shown as groups of the rules that overlap one rule of it (``_split``)."""


def _split(chain: Sequence[tuple[str, Rule]]) -> list[list[tuple[str, Rule]]]:
    """A long chain as groups: each rule joins the first group whose first rule it overlaps."""
    groups: list[list[tuple[str, Rule]]] = []
    for label, rule in chain:
        for group in groups:
            if overlaps(group[0][1].situation, rule.situation):
                group.append((label, rule))
                break
        else:
            groups.append([(label, rule)])
    return groups


def _honoured(
    situations: Sequence[Sequence[str]], asked: set[str], rules: Sequence[tuple[str, str]]
) -> set[str]:
    """The labels of ``asked`` that may go: a rule for each one's situation stays.

    ``situations`` are ``_same_situation``'s groups of ``rules`` (label, text);
    a label that goes takes its exact repeats with it. A group keeps at least
    one rule, and each rule that goes needs one that stays speaking about its
    situation: situations can overlap in a chain ("refund or late parcel" with
    "refund" and with "late parcel"), so a group's rules need not overlap each
    other.
    """
    drop: set[str] = set()
    for labels in situations:
        chosen = [label for label in labels if label in asked]
        if len(chosen) < len(labels):
            drop.update(chosen)
    text = dict(rules)
    gone = {_norm(text[label]) for label in drop}
    stay = [parse_rule(t) for _, t in rules if _norm(t) not in gone]
    kept = [rule.situation for rule in stay if rule is not None]
    # Refusing a drop only adds rules that stay, so one pass is enough.
    return {
        label
        for label in drop
        if (rule := parse_rule(text[label])) is not None
        and any(overlaps(rule.situation, situation) for situation in kept)
    }


def _narrow_dropped(ops: Sequence[DeltaOp], gone: set[str]) -> list[DeltaOp]:
    """``ops`` with each rule a small model left out (``gone``: normalised texts) narrowed.

    A small curator or aggregator is shown rules whose situations overlap with
    different actions, and asked what to leave out: what its answer says is that
    the rule is wrong for the situation it shares, not for the rest of its own.
    So a rule left out loses the alternatives of its situation that overlap a
    staying rule of another action, and keeps the others ("When cancel or order,
    cancel_order(...)" left out beside "When late or order, send_voucher(...)"
    keeps "cancel"), as the rules layer settles a conflict
    (``rules.settle_batch``); one left with none goes. Measured on the tool task
    with the 1.5B: whole rules left out took words no other rule had ("courier",
    "I changed my mind") and, at random, a whole action.
    """
    # Every rule of the ops, left out or not: two rivals both left out lose the
    # situation they share (neither is kept for it, as before).
    every = [rule for op in ops if isinstance(op, Add) and (rule := parse_rule(op.content))]
    out: list[DeltaOp] = []
    for op in ops:
        if not isinstance(op, Add) or _norm(op.content) not in gone:
            out.append(op)
            continue
        rule = parse_rule(op.content)
        if rule is None:
            continue
        others = [
            alternative
            for other in every
            if not same_action(other.action, rule.action)
            for alternative in alternatives(other.situation)
        ]
        # An alternative of generic words only ("any question") goes too: a curator is
        # also asked to leave out a rule whose situation fits almost any input.
        rest = [
            a
            for a in alternatives(rule.situation)
            if situation_words(a) and not any(same_situation(a, b) for b in others)
        ]
        narrowed = rule.keeping(rest) if rest else None
        if narrowed is not None:
            out.append(Add(section=op.section, content=narrowed.text(), sources=list(op.sources)))
    return out


class FullRoles(RoleProfile):
    """ACE's roles: full analysis and tags, ADD/UPDATE/REMOVE, an aggregator that merges."""

    name = "full"
    reflect_tokens = 800
    curate_tokens = 1200
    aggregate_tokens = 1200

    async def reflect(
        self, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        """ACE's reflection: analysis, a key insight and helpful/harmful tags."""
        out = await _reflect_call(
            caller,
            trace,
            prompts.reflector_messages(
                trace, playbook, trusted_comment=reviewer_note(trace) is not None
            ),
            ReflectionOut,
            stats,
            max_tokens=self.reflect_tokens,
        )
        return None if out is None else out.to_reflection(trace.id)

    async def curate(
        self,
        caller: LLMCaller,
        run_name: str,
        playbook: Playbook,
        group: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> list[DeltaOp] | None:
        """Insights adopted by label, plus the curator's own ADD/UPDATE/REMOVE ops."""
        out = await caller.call(
            run_name,
            prompts.curator_messages(playbook, group, token_budget=token_budget),
            CuratorOut,
            stats,
            max_tokens=self.curate_tokens,
        )
        if out is None:
            return None
        by_label = dict(group)
        adopted = adopt(out.add, by_label, section=playbook.resolve_section("others"))
        labels = {label: r.trace_id for label, r in group}
        ops = convert_ops(
            out.operations, labels=labels, default_sources=[r.trace_id for _, r in group]
        )
        return adopted + ops

    async def aggregate(
        self,
        caller: LLMCaller,
        playbook: Playbook,
        proposals: Sequence[Sequence[DeltaOp]],
        labelled: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> Aggregation:
        """One aggregator call that drops, merges and reconciles; the union if unusable."""
        by_trace = {r.trace_id: label for label, r in labelled}
        shown = [
            [(op, [by_trace[s] for s in op.sources if s in by_trace]) for op in proposal]
            for proposal in proposals
        ]
        proposed = aggregate.label_proposals(proposals)
        messages = prompts.aggregator_messages(
            playbook, shown, token_budget=token_budget, conflicts=_overlaps(proposed)
        )
        out = await caller.call(
            "combee.aggregate", messages, AggregateOut, stats, max_tokens=self.aggregate_tokens
        )
        if out is None:
            return Aggregation(_union(proposals), "union")
        ops = aggregate.resolve(
            out,
            proposed,
            labels={label: r.trace_id for label, r in labelled},
            default_sources=list(by_trace),
        )
        return Aggregation(ops, "merged")


def _one_case(fixes: Sequence[Correction]) -> list[Correction]:
    """``fixes`` without those whose case gives an argument another value than an earlier one.

    A run that booked a piano and a fridge corrected each for its own case; one
    request is never both ("When service is piano and service is fridge" fits
    none), so the rule is the first case's. Cases of different arguments may hold
    together ("service is piano and floor is 3"): both stay.
    """
    kept: list[Correction] = []
    named: dict[str, Any] = {}
    for fix in fixes:
        if all(named.get(k, v) == v for k, v in fix.given.items()):
            kept.append(fix)
            named.update(fix.given)
    return kept


class SmallRoles(RoleProfile):
    """Roles a model of a few billion parameters can play: short prompts, short replies."""

    name = "small"
    reflect_tokens = 200
    instruction_tokens = 80
    curate_tokens = 120
    aggregate_tokens = 120

    def needs_reflection(self, trace: Trace) -> bool:
        """Whether a small reflector can learn from the run.

        Not from a run scored correct, nor from one with no feedback and no
        error at all: measured on the 1.5B, such runs (learned before the app's
        ``feedback()`` reached them) gave rules like "When question, answer 1.".
        Their served outcome still counts.
        """
        feedback = trace.feedback
        if feedback is not None and feedback.correct is True:
            return False
        return (feedback is not None and not feedback.is_empty()) or bool(trace.execution_errors())

    async def reflect(
        self, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        """One "When <situation>, <action>." rule from the run and its feedback."""
        note = reviewer_note(trace)
        out = await _reflect_call(
            caller,
            trace,
            prompts.small_reflector_messages(trace, trusted_comment=note is not None),
            SmallReflectionOut,
            stats,
            max_tokens=self.reflect_tokens,
        )
        truth = trace.feedback.ground_truth if trace.feedback is not None else None
        if out is None:
            return None
        note = note if note is not None and len(note) <= NOTE_CHARS else None
        # A refused call the run corrected: the tool checked the new values.
        fixes = [] if truth or note is not None else _one_case(trace.corrections())
        # Two refusals of one case (a wrong vehicle, then a wrong crew) name it twice.
        correction = " and ".join(dict.fromkeys(f.action() for f in fixes)) or None
        case = " and ".join(dict.fromkeys(c for f in fixes if (c := f.situation()))) or None
        instruction = None
        if note is not None and not truth:
            instruction = await self._instruction(caller, note, stats)

        def reflection(reply: SmallReflectionOut) -> Reflection:
            return reply.to_reflection(
                trace.id,
                ground_truth=truth,
                source=trace.input,
                calls=trace.tool_calls,
                note=note,
                instruction=instruction,
                correction=correction,
                case=case,
            )

        found = reflection(out)
        rule = parse_rule(found.key_insight) if found.key_insight else None
        if rule is not None and prompts.echoes_prompt(re.sub(r"^answer\s+", "", rule.action)):
            # "answer 'No expected answer is known'": the prompt's words, no lesson.
            return Reflection(trace_id=trace.id)
        if found.is_empty() and (truth or note or correction) and trace.input.strip():
            # The action is known (an operator's answer, a reviewer's note, a tool's
            # correction) but the situation named only the tool or the task ("job
            # booking", seen on the 1.5B for most runs of a booking task): the kind
            # namer, shown the request alone, names what it is about instead.
            kind = await self._kind(caller, trace.input, out.action or truth or "", stats)
            if kind is not None:
                found = reflection(out.model_copy(update={"situation": kind, "keywords": []}))
        return found

    async def _kind(
        self, caller: LLMCaller, request: str, action: str, stats: CallStats
    ) -> str | None:
        """What ``request`` is about, in general words (``KindOut.situation``), or None."""
        try:
            out = await caller.call(
                "combee.kind",
                prompts.kind_messages([request]),
                KindOut,
                stats,
                max_tokens=KIND_TOKENS,
            )
        except LLMCallError:
            return None
        return out.situation(action) if out is not None else None

    async def _instruction(self, caller: LLMCaller, note: str, stats: CallStats) -> str | None:
        """The reviewer's ``note`` as one instruction to the agent, or None.

        Measured on the 1.5B agent: served "do as the reviewer said: Noise
        complaints always open with 'Noise report logged.' This one doesn't.",
        it followed two of six such conventions. The rewrite must carry exactly
        the note's quoted texts, numbers and codes (``InstructionOut.for_note``).
        """
        try:
            out = await caller.call(
                "combee.instruction",
                prompts.instruction_messages(note),
                InstructionOut,
                stats,
                max_tokens=self.instruction_tokens,
            )
        except LLMCallError:
            return None
        return out.for_note(note) if out is not None else None

    async def curate(
        self,
        caller: LLMCaller,
        run_name: str,
        playbook: Playbook,
        group: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> list[DeltaOp] | None:
        """Every rule of the group but those the curator leaves out (it writes none of its own).

        Measured on the 1.5B model: asked to pick the rules to adopt, the naive
        strategy's single curator call over 48 rules left a playbook of 11
        rules for 24 codes; asked what to leave out, 23 and 24 (two seeds,
        ``grid-routing-curator-variants.json``). Asked what to leave out of whole groups, it
        left out no rule in eight grid rows, while Combee's level-1 calls took
        most of its step. So, as the aggregator, the curator is asked only
        about the rules of the group that give different actions for one
        situation (a conflict); a group with no such rules makes no call
        (every group of the sequential strategy, one rule per run). Rules that
        give one action for one situation are not shown: the rules layer folds
        them into one rule (``rules.fold_actions``), where a drop would only
        lose the words of a situation (with the grid's ablation ``NO_CORRECTIONS``,
        whose stages do not reconcile, nothing folds them: both stay).
        Leaving rules out stays the exception: a drop is honoured only while
        each situation keeps at least one distinct rule and at least half of
        the rules shown stay, and a reply that cannot be read adopts the whole
        group, as an unusable aggregator reply keeps every proposal.
        The rules layer, the guard and verified adoption weigh every adopted
        rule after this.
        """
        by_label = dict(group)
        section = playbook.resolve_section("others")
        kept = [label for label, _ in group]
        situations = _same_situation([(label, r.key_insight) for label, r in group])
        if not situations:
            return adopt(kept, by_label, section=section, own_rules=False)
        shown = [(label, by_label[label]) for labels in situations for label in labels]
        out = await caller.call(
            run_name,
            prompts.small_curator_messages(playbook, shown),
            SmallCuratorOut,
            stats,
            max_tokens=self.curate_tokens,
        )
        if out is None:
            return adopt(kept, by_label, section=section, own_rules=False)
        rules = [(label, r.key_insight) for label, r in group]
        drop = _honoured(situations, _dropped(out.drop, dict(shown)), rules)
        adopted = adopt(kept, by_label, section=section, own_rules=False)
        if drop and 2 * (len(shown) - len(drop)) >= len(shown):
            # A rule left out goes with its exact repeats (the other copies, not shown),
            # narrowed to the part of its situation no staying rule of another action has.
            gone = {_norm(by_label[label].key_insight) for label in drop}
            return _narrow_dropped(adopted, gone)
        return adopted

    async def aggregate(
        self,
        caller: LLMCaller,
        playbook: Playbook,
        proposals: Sequence[Sequence[DeltaOp]],
        labelled: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> Aggregation:
        """Asks only about proposals that overlap; drops are honoured within their group.

        Measured on the 1.5B model: asked which of six distinct proposals to
        drop, the aggregator dropped all six. So it sees only the groups of
        proposals that give different actions for one situation, a drop
        outside a group is ignored, and a group always keeps at least one rule.
        """
        proposed = aggregate.label_proposals(proposals)
        groups = _overlaps(proposed)
        if not groups:
            return Aggregation(_union(proposals), "nothing to merge")
        shown = [[(label, _content(proposed[label])) for label in g] for g in groups]
        out = await caller.call(
            "combee.aggregate",
            prompts.small_aggregator_messages(playbook, shown),
            SmallAggregateOut,
            stats,
            max_tokens=self.aggregate_tokens,
        )
        if out is None:
            return Aggregation(_union(proposals), "union")
        asked = {normalize_label(label) for label in out.drop}
        added = [(label, op.content) for label, op in proposed.items() if isinstance(op, Add)]
        drop = _honoured(groups, asked, added)
        # A dropped rule goes with its exact repeats (the other copies, not shown),
        # narrowed to the part of its situation no staying rule of another action has.
        gone = {_key(proposed[label]) for label in drop}
        ops = [op for op in proposed.values() if isinstance(op, Add) or _key(op) not in gone]
        return Aggregation(_narrow_dropped(ops, gone), "merged")


def _key(op: DeltaOp) -> str:
    if isinstance(op, Add):
        return _norm(op.content)  # as ``_same_situation`` folds repeats
    return f"{op.type}|{op.id}"


def _content(op: DeltaOp) -> str:
    return op.content if isinstance(op, Add) else op.type


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .")


# A label at the head of an entry: the line as the prompt shows it ("[R3] When ...").
_LEADING_LABEL = re.compile(r"\s*\[?\s*([A-Za-z]+\d+)\s*\]?(?=[\s:.,;)-]|$)")
_LIST_SEPARATOR = re.compile(r"[\s,;]+")


def _quoted(text: str) -> str:
    """An insight as a model may quote it back: case, spaces, quotes and end marks aside."""
    return _norm(text).strip(" .!?;:\"'`\u201c\u201d\u2018\u2019")


def _dropped(entries: Sequence[str], by_label: Mapping[str, Reflection]) -> set[str]:
    """The labels a curator's ``"drop"`` names, by label or by the insight's text.

    Small models write one label (``"R3"``, ``"[r3]"``), several in one string
    (``"R3, R4"``), the labelled line as the prompt shows it (``"[R3] When ..."``)
    or the insight itself, quoted or with other end punctuation.
    """
    by_insight: dict[str, list[str]] = {}
    for label, reflection in by_label.items():
        by_insight.setdefault(_quoted(reflection.key_insight), []).append(label)
    found: set[str] = set()
    for entry in entries:
        labels = [normalize_label(t) for t in _LIST_SEPARATOR.split(entry) if t.strip("[] ")]
        if labels and all(label in by_label for label in labels):
            found.update(labels)
            continue
        lead = _LEADING_LABEL.match(entry)
        if lead is not None and normalize_label(lead[1]) in by_label:
            found.add(normalize_label(lead[1]))
            continue
        found.update(by_insight.get(_quoted(entry), ()))
    return found


def adopt(
    entries: Sequence[str],
    by_label: Mapping[str, Reflection],
    *,
    section: str,
    own_rules: bool = True,
) -> list[DeltaOp]:
    """ADD ops for the insights a curator adopted in its ``"add"`` list.

    Each entry is a reflection label (``"R3"``); small models often write the
    insight itself instead, which is matched back to its reflection. Any other
    text is taken as a rule of the curator's own (credited to the group) when
    ``own_rules``, else ignored: a small-model curator only selects, and small
    models put copies of playbook lines there. Each insight is adopted once.
    """
    by_insight = {_norm(r.key_insight): r for r in by_label.values() if r.key_insight.strip()}
    group = list(dict.fromkeys(r.trace_id for r in by_label.values()))
    ops: dict[str, Add] = {}
    for entry in entries:
        text = entry.strip()
        reflection = by_label.get(normalize_label(text)) or by_insight.get(_norm(text))
        if reflection is not None and reflection.key_insight.strip():
            content, sources = reflection.key_insight.strip(), [reflection.trace_id]
        elif own_rules and len(text.split()) >= 2:
            content, sources = text, group
        else:
            continue  # an unknown label, or nothing
        key = _norm(content)
        if key in ops:
            # The same rule from several reflections: one op backed by all of them.
            known = ops[key].sources
            ops[key] = Add(
                section=section,
                content=ops[key].content,
                sources=[*known, *(s for s in sources if s not in known)],
            )
        else:
            ops[key] = Add(section=section, content=content, sources=sources)
    return list[DeltaOp](ops.values())
