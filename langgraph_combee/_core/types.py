"""The data model: traces, feedback, reflections, delta operations, versions, reports.

Everything here is a pydantic model because it crosses a boundary: traces are
captured and queued, reflections and operations are parsed from LLM replies,
versions are stored. No I/O and no LLM calls live in this module.
"""

from __future__ import annotations

import copy as copy_module
import difflib
import logging
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from langgraph_combee._core.evidence import ReplayReport
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.quarantine import QuarantinedOp

logger = logging.getLogger("langgraph_combee")
_Model = TypeVar("_Model", bound=BaseModel)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _new_id() -> str:
    return str(uuid.uuid4())


# The validation context of a record read back from a store (``stored_trace``).
_STORED = {"combee_stored": True}


def _is_stored(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, Mapping) and context.get("combee_stored") is True


def _number_or_none(value: object, *, at_least: float | None = None) -> object:
    """``value`` if it is a number the models take now, else None (for stored records).

    A stored record must stay readable whatever it holds: a number written as a
    string is read as that number, and anything that is not a finite number
    (``"NaN"``, ``"fast"``, a list) is read as no value.
    """
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or (at_least is not None and value < at_least):
        return None
    return value


class Feedback(BaseModel):
    """How a run went: a score, a verdict, a comment and/or the right answer.

    Any field may be left out. ``correct`` and ``score`` are the signal the
    learner trusts most; ``ground_truth`` lets the reflector compare answers;
    ``comment`` carries free-text feedback (a user's words, a resolved ticket).
    """

    model_config = ConfigDict(extra="forbid")

    score: float | None = Field(default=None, allow_inf_nan=False)
    correct: bool | None = None
    comment: str | None = None
    ground_truth: str | None = None
    source: str | None = Field(
        default=None, description="Where the feedback came from: evaluator, user, langsmith..."
    )
    key: str | None = Field(
        default=None,
        description="The feedback's name, as LangSmith spells it (``feedback(key=...)``): "
        "recorded, not read by the learner.",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_back(cls, data: Any, info: ValidationInfo) -> Any:
        # Feedback stored by an earlier release may hold a score this one refuses
        # (NaN): it is read back without it rather than made unreadable.
        if not _is_stored(info) or not isinstance(data, Mapping):
            return data
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        if "score" in known:
            known["score"] = _number_or_none(known["score"])
        return known

    def is_empty(self) -> bool:
        """Return True when no field carries a signal."""
        return (
            self.score is None
            and self.correct is None
            and not self.comment
            and self.ground_truth is None
        )

    def merged(self, other: Feedback) -> Feedback:
        """Return this feedback with the fields ``other`` sets taking precedence.

        ``source`` says where the *text* fields (comment, ground truth) and a
        ``correct=True`` came from, since trust in them depends on it: a later score
        from an evaluator must not turn a comment a user typed into an evaluator's
        comment, nor a reviewer's comment turn an end user's thumbs-up into a
        reviewer's approval of the reply. When the kept fields come from two
        different sources, the source is both, joined by ``+``
        (``"user+evaluator"``), which no trust list names.
        """
        data = self.model_dump()
        data.update({k: v for k, v in other.model_dump().items() if v is not None})
        origins = [
            other.source if getattr(other, name) is not None else self.source
            for name in ("correct", "comment", "ground_truth")
            if (data[name] is True if name == "correct" else data[name] is not None)
        ]
        if origins:
            kept = sorted({o or "" for o in origins})
            data["source"] = "+".join(o or "unknown" for o in kept) if len(kept) > 1 else origins[0]
        return Feedback(**data)


class TraceMessage(BaseModel):
    """One message of a run, reduced to what the reflector needs to read."""

    role: str
    content: str = ""
    name: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    attested: bool = Field(
        default=True,
        description="False for an AI or tool message the caller sent in the run's input "
        "(seen before the run's first model call): its tool results are never trusted.",
    )


class ToolCall(BaseModel):
    """A tool invocation made during a run, with its result or error."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: str | None = None
    error: str | None = None
    attested: bool = Field(
        default=True,
        description="False when the call came in the run's input rather than from the "
        "model during the run (a client can send any history): never trusted evidence.",
    )
    id: str | None = None


_ONE_WORD = re.compile(r"[\w-]+")


def _named_in(value: Any, text: str) -> bool:
    """Whether ``value`` is one word or a whole number that ``text`` writes whole (any case).

    A yes or no is neither: ``True`` is named by every refusal that echoes a flag.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _ONE_WORD.fullmatch(value):
        return False
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Correction:
    """A refused tool call the run corrected: the tool, the new values, the case.

    Attributes:
        tool: The tool's name.
        changed: The arguments the accepted call changed, with their accepted values.
        given: The accepted call's unchanged arguments the refusal named (the case
            the tool's check applied to), one word or whole number each.
        refusal: The refused call's error text.
        tried: The refused call's arguments.
    """

    tool: str
    changed: dict[str, Any]
    given: dict[str, Any]
    refusal: str = ""
    tried: dict[str, Any] = field(default_factory=dict)

    def stated(self) -> dict[str, Any]:
        """The changed arguments whose accepted value (one word, a whole number) the refusal names.

        What the tool asked for in its own words ("goes out with vehicle
        'tail-lift'"); a changed argument it did not name (a reworded note, a
        value retried after a timeout) may be anyone's. So may a value the refused
        call already carried: the refusal named it as the wrong one ("unknown
        customer 'Pwned'"), and the retry moved it to another argument.
        """
        return {
            k: v
            for k, v in self.changed.items()
            if _named_in(v, self.refusal)
            and not any(_named_in(v, str(t)) for t in self.tried.values())
        }

    def action(self) -> str:
        """The correction as a rule's action: ``call book_job with vehicle='tail-lift'``.

        Only the values the refusal named when it named any, else every changed one.
        """
        args = self.stated() or self.changed
        return f"call {self.tool} with " + ", ".join(f"{k}={v!r}" for k, v in args.items())

    def situation(self) -> str | None:
        """The case as a rule's situation (``"service is piano"``), or None when none was named."""
        return " and ".join(f"{k} is {v}" for k, v in self.given.items()) or None


class Trace(BaseModel):
    """One run of the agent, as the learner sees it.

    Traces are captured by the middleware, or built by hand for offline learning::

        Trace(input="Where is my refund?", output="BILLING",
              feedback=Feedback(correct=False, ground_truth="FIN-REFUNDS"))

    A field it does not have (``feedbak=...``) is refused, naming it, so that a
    misspelling cannot make a trace learned from without its feedback.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=_new_id)
    input: str = ""
    messages: list[TraceMessage] = Field(default_factory=list)
    output: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    error: str | None = None
    feedback: Feedback | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    prompt_version: int | None = Field(
        default=None, description="The prompt version served to this run, when known."
    )
    thread_id: str | None = None
    tenant: str | None = None
    latency_seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    input_tokens: int | None = None
    output_tokens: int | None = None
    created_at: datetime = Field(default_factory=_utcnow)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, Mapping):
            return data
        fields = cls.model_fields
        if _is_stored(info):
            # Read back from a store, perhaps written by another release: what this
            # one does not know is dropped and a latency it refuses forgotten, so
            # that no stored trace becomes unreadable.
            known = {k: v for k, v in data.items() if k in fields}
            if "latency_seconds" in known:
                known["latency_seconds"] = _number_or_none(known["latency_seconds"], at_least=0)
            return known
        unknown = [k for k in data if k not in fields]
        if unknown:
            raise ValueError(_unknown_fields(unknown, list(fields)))
        return data

    @field_validator("metadata", mode="before")
    @classmethod
    def _bytes_keys_as_repr(cls, value: Any) -> Any:
        # pydantic reads b"a" as "a": beside a key "a", one of the two values was lost.
        if isinstance(value, Mapping) and any(isinstance(k, (bytes, bytearray)) for k in value):
            return {
                repr(k) if isinstance(k, (bytes, bytearray)) else k: v for k, v in value.items()
            }
        return value

    @field_validator("id")
    @classmethod
    def _id_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("Trace.id must be a non-empty string")
        return value

    def has_ground_truth(self) -> bool:
        """Return True when feedback names the right answer."""
        return self.feedback is not None and self.feedback.ground_truth is not None

    def corrections(self) -> list[Correction]:
        """The arguments the run changed to get a refused tool call accepted.

        A call the model made that its tool refused (an error), followed later in
        the run by an accepted call of the same tool: the tool itself checked the
        values that differ, so they are what the refused call got wrong. With no
        accepted call, the next call of the tool refused for another argument
        (its error names another argument and none of the changed ones) passed
        the first check: its changed values the new error does not name count as
        accepted. Only
        calls the model made during the run count (``attested``). The accepted
        call's other arguments whose one-word value the refusal names ("a 'piano'
        job goes out with vehicle 'tail-lift'") are the case the tool applied.
        """
        found: list[Correction] = []
        calls = [c for c in self.tool_calls if c.attested]
        for i, refused in enumerate(calls):
            if refused.error is None:
                continue
            accepted = next(
                (
                    c
                    for c in calls[i + 1 :]
                    if c.name == refused.name and c.error is None and c.result is not None
                ),
                None,
            )
            if accepted is None:
                # No call was accepted: the next call, refused for something else, still
                # passed the check that refused this one (a tool checking one argument at
                # a time), for the values the new refusal does not name.
                after = next((c for c in calls[i + 1 :] if c.name == refused.name), None)
                if after is None or after.error is None or after.error == refused.error:
                    continue
                moved = {
                    k: v
                    for k, v in after.args.items()
                    if refused.args.get(k) != v and not _named_in(v, after.error)
                }
                # The new refusal must be about another argument, by name and value, and
                # about none of the moved ones ("Fleet check failed again." says nothing
                # either way). A name alone is no sign: "Unable to send" and "request id
                # 7f3" write the names ``to`` and ``id`` by accident.
                others = [k for k in after.args if k not in moved]
                if any(_named_in(k, after.error) for k in moved) or not any(
                    _named_in(k, after.error) and _named_in(after.args[k], after.error)
                    for k in others
                ):
                    continue
                accepted = after.model_copy(update={"args": {**refused.args, **moved}})
            changed = {k: v for k, v in accepted.args.items() if refused.args.get(k) != v}
            # A value the refusal names as the wrong one ("not 'cardstock'") is no case,
            # though another argument holds it too.
            wrong = {str(refused.args.get(k)).casefold() for k in changed}
            given = {
                k: v
                for k, v in accepted.args.items()
                if k not in changed
                and _named_in(v, refused.error)
                and str(v).casefold() not in wrong
            }
            correction = Correction(refused.name, changed, given, refused.error, refused.args)
            if changed and correction not in found:
                found.append(correction)
        return found

    def correction_action(self) -> str | None:
        """``corrections`` as one action ("call book_job with vehicle='tail-lift'"), or None.

        Each distinct action once: two refusals the same retry answered teach it once.
        """
        return " and ".join(dict.fromkeys(c.action() for c in self.corrections())) or None

    def execution_errors(self) -> list[str]:
        """Return the run's error and tool errors: feedback when no ground truth exists."""
        errors = [f"{c.name}: {c.error}" for c in self.tool_calls if c.error]
        if self.error:
            errors.insert(0, self.error)
        return errors


def _unknown_fields(unknown: list[Any], fields: list[str]) -> str:
    """What a trace with fields it does not have is told: each, with the closest name."""
    named = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), fields, n=1) if isinstance(key, str) else []
        named.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    return f"unknown Trace field(s): {', '.join(named)}"


_REPAIRS = 8
"""Most rounds of leaving bad values out of a stored record before it counts as unreadable."""


def _without(data: Any, errors: list[Any]) -> Any:
    """A copy of ``data`` without the values ``errors`` (pydantic's) point at.

    A value that fails is left out; an object missing a required field is left
    out whole, from the object or list that holds it.
    """
    copy = copy_module.deepcopy(data)
    doomed: list[tuple[Any, Any]] = []
    for error in errors:
        if tuple(error.get("loc", ()))[:1] == ("id",):
            continue  # a trace is known by its id: never read with another one
        chain: list[tuple[Any, Any]] = []
        node = copy
        for step in error.get("loc", ()):
            inside = isinstance(node, Mapping) and step in node
            inside |= isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)
            if not inside:
                break
            chain.append((node, step))
            node = node[step]
        if chain:  # the failing value, or (a field missing) the object that lacks it
            doomed.append(chain[-1])
    for parent, key in doomed:
        if isinstance(parent, dict):
            parent.pop(key, None)
    lists = [(p, k) for p, k in doomed if isinstance(p, list)]
    for parent, key in sorted(lists, key=lambda pk: -pk[1]):
        if key < len(parent):
            del parent[key]
    return copy


def _stored(model: type[_Model], data: Mapping[str, Any]) -> _Model:
    try:
        return model.model_validate(data, context=_STORED)
    except ValidationError as exc:
        errors = exc.errors()
    record: Any = data
    for _ in range(_REPAIRS):
        try:
            repaired = _without(record, errors)
            if repaired == record:
                break  # nothing more can be left out
        except RecursionError:
            raise ValueError(f"a stored {model.__name__} nests too deep to repair") from None
        record = repaired
        try:
            kept = model.model_validate(record, context=_STORED)
        except ValidationError as exc:
            errors = exc.errors()
            continue
        logger.warning(
            "a stored %s held values this release cannot read: read without them", model.__name__
        )
        return kept
    return model.model_validate(record, context=_STORED)


def stored_trace(data: Mapping[str, Any]) -> Trace:
    """A trace read back from a store: what this release cannot read is left out.

    A record written by another release may carry a field this one lacks, or a
    value it refuses (a NaN latency or score, a verdict that is no boolean);
    neither makes it unreadable: unknown fields are dropped, and a value that
    fails validation is left out (logged), so one odd record never stops the
    claim of the batch around it.
    """
    return _stored(Trace, data)


def stored_feedback(data: Mapping[str, Any]) -> Feedback:
    """Feedback read back from a store (see ``stored_trace``)."""
    return _stored(Feedback, data)


BulletTagValue = Literal["helpful", "harmful", "neutral"]


class BulletTag(BaseModel):
    """A reflector's verdict on one playbook bullet used in a run."""

    id: str
    tag: BulletTagValue


class Reflection(BaseModel):
    """What the reflector learned from one trace."""

    trace_id: str
    error_identification: str = ""
    root_cause: str = ""
    correct_approach: str = ""
    key_insight: str = ""
    bullet_tags: list[BulletTag] = Field(default_factory=list)

    def is_empty(self) -> bool:
        """Return True when the reflection carries no insight and no tags."""
        return not (
            self.key_insight.strip()
            or self.correct_approach.strip()
            or self.root_cause.strip()
            or self.bullet_tags
        )


VersionStatus = Literal["candidate", "accepted", "rejected"]


class Decision(BaseModel):
    """Why a candidate version was accepted or rejected, with the figures behind it."""

    accepted: bool
    policy: str
    reason: str
    metrics: dict[str, float] = Field(default_factory=dict)
    decided_at: datetime = Field(default_factory=_utcnow)


class PromptVersion(BaseModel):
    """One version of a learned prompt: a playbook and the record of how it came to be."""

    prompt_id: str
    tenant: str | None = None
    version: int = 0
    parent: int | None = None
    playbook: Playbook = Field(default_factory=Playbook)
    status: VersionStatus = "accepted"
    created_at: datetime = Field(default_factory=_utcnow)
    ops: list[DeltaOp] = Field(default_factory=list)
    ops_summary: dict[str, int] = Field(default_factory=dict)
    source_trace_ids: list[str] = Field(default_factory=list)
    decision: Decision | None = None
    note: str = ""
    rebased_from: int | None = Field(
        default=None,
        description="The parent the candidate was learned from, when its ops were re-applied "
        "onto a newer HEAD before acceptance (its parent is then that HEAD).",
    )
    quarantined: list[QuarantinedOp] = Field(
        default_factory=list, description="Ops the BulletGuard refused in the step that made it."
    )
    held: list[QuarantinedOp] = Field(
        default_factory=list,
        description="Policy-changing ops the BulletGuard held for a person in that step.",
    )
    needs_approval: list[str] = Field(
        default_factory=list,
        description=(
            "Why only a person may accept this candidate (it carries held ops); no "
            "acceptance policy accepts it on its own."
        ),
    )

    def render(self, *, ids: bool = False) -> str:
        """Return the text appended to the app's system prompt ('' when empty).

        ``ids=True`` shows each bullet's id, for people reviewing the version.
        """
        return self.playbook.render(ids=ids)


class StageEntry(BaseModel):
    """What one stage of a learning step did: the counts it produced, and its time."""

    name: str
    counts: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    runs: int = Field(
        1,
        description="How many times the stage ran in the step (the sequential strategy runs "
        "the stages once per trace; the counts and seconds are summed over its runs).",
    )


class StepReport(BaseModel):
    """The cost and structure of one learning step."""

    strategy: str
    batch_size: int
    group_sizes: list[int] = Field(default_factory=list)
    calls: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    ops: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    failed_calls: dict[str, int] = Field(default_factory=dict)
    unparsed: dict[str, int] = Field(default_factory=dict)
    unknown_ops: int = 0
    evicted: int = 0
    merged: int = 0
    trace_ids: list[str] = Field(default_factory=list)
    version: int | None = None
    accepted: bool | None = None
    run_id: str | None = Field(
        default=None, description="Id of the step's traced run (combee.learn_step)."
    )
    quarantined: list[QuarantinedOp] = Field(
        default_factory=list, description="Ops the BulletGuard refused, never applied."
    )
    held: list[QuarantinedOp] = Field(
        default_factory=list,
        description="Policy-changing ops held for a person: in a separate candidate, not served.",
    )
    held_version: int | None = Field(
        default=None, description="The candidate version that carries the held ops."
    )
    replay: ReplayReport | None = Field(
        default=None, description="Verified adoption: replays, their cost, the rules dropped."
    )
    # ---- roles and evidence (what the role profile did with the step) ----
    roles: dict[str, Any] = Field(
        default_factory=dict,
        description="The role profile used: profile, how it was chosen, and why.",
    )
    truncated: dict[str, int] = Field(
        default_factory=dict, description="Replies cut at their length limit, by stage."
    )
    aggregation: str | None = Field(
        default=None,
        description="Level 2: 'merged', 'nothing to merge', 'union' (the aggregator's reply "
        "was unusable, every proposal kept) or None (one curator, no level 2).",
    )
    conflicts: list[str] = Field(
        default_factory=list,
        description="Contradicting rules found and how each was settled.",
    )
    left_out: list[str] = Field(
        default_factory=list,
        description="Rules the step's reflections wrote that the small-model curators or "
        "aggregator left out (a rule given to two groups is listed only when both left it out).",
    )
    served_helpful: int = Field(0, description="Helpful verdicts from served outcomes.")
    served_harmful: int = Field(0, description="Harmful verdicts from served outcomes.")
    served_misapplied: int = Field(
        0,
        description="Wrong runs that followed a grounded rule whose situation shares no word "
        "with their input, each needing an answer no other such run needed: the model misread "
        "the playbook; each counts half a harmful verdict (``rules.served_evidence``).",
    )
    discredited: int = Field(0, description="Bullets removed because service proved them wrong.")
    narrowed_for_guard: int = Field(
        0,
        description="New rules whose situation kept fewer alternatives so that the guard's "
        "provenance check no longer refused them for the end user's words (``rules.fit``).",
    )
    examples_added: int = Field(
        0, description="Worked examples kept from labelled runs (``AlgorithmSettings.examples``)."
    )
    examples_skipped: list[str] = Field(
        default_factory=list,
        description="Labelled runs not kept as worked examples, each with its reason.",
    )
    not_reflected: dict[str, str] = Field(
        default_factory=dict,
        description="Traces of the step that gave no reflection (trace id -> why: judged "
        "right, no feedback, explained by a stated convention, an unusable reply, no lesson).",
    )
    stages: list[StageEntry] = Field(
        default_factory=list,
        description="One entry per stage the step ran, in the order they ran (docs/concepts.md).",
    )
    failed_reflections: dict[str, str] = Field(
        default_factory=dict,
        description="Traces whose reflection call failed after its retries (trace id -> the "
        "error): they taught the step nothing, and the background learner queues them again.",
    )

    # ---- reading the report --------------------------------------------------

    def rules(self) -> dict[str, int]:
        """How many rules the step proposed and what became of them.

        ``written``: rules added or changed in the candidate (``ops`` add and
        update); ``held``: held for a person; ``refused``: quarantined by the
        guard; ``left_out``: rules the reflections wrote that no curator kept;
        ``proposed``: the four together. Bullets removed and tags are not rules
        proposed (they are in ``ops``).
        """
        written = self.ops.get("add", 0) + self.ops.get("update", 0)
        counts = {
            "written": written,
            "held": len(self.held),
            "refused": len(self.quarantined),
            "left_out": len(self.left_out),
        }
        return {"proposed": sum(counts.values()), **counts}

    def reasons(self) -> dict[str, int]:
        """Why rules did not reach the candidate as proposed, counted by reason.

        Each key is a reason shown in the step's log line and in ``combee
        steps``: ``"left out by curator"``, ``"conflict"`` (contradicting
        rules settled), ``"evicted by budget"`` (the playbook's token budget),
        ``"merged as duplicate"``, ``"dropped by replay"`` (verified adoption),
        ``"discredited"`` (served outcomes proved it wrong), ``"unknown op"``,
        ``"reflection failed"``, ``"unparsed reply"``, ``"example not kept"`` (a
        labelled run the worked examples left out), ``"no reflection: <why>"``
        (a trace that taught the step nothing, ``not_reflected``) and, per guard
        check,
        ``"refused: <check>"`` and ``"held: <check>"`` (e.g. ``"held:
        provenance"``, a rule whose answer is a word only the end user wrote).
        Reasons with no count are left out.
        """
        counts: dict[str, int] = {
            "left out by curator": len(self.left_out),
            "conflict": len(self.conflicts),
            "evicted by budget": self.evicted,
            "merged as duplicate": self.merged,
            "dropped by replay": len(self.replay.dropped) if self.replay is not None else 0,
            "discredited": self.discredited,
            "unknown op": self.unknown_ops,
            "reflection failed": self.failed_calls.get("reflect", 0),
            "unparsed reply": sum(self.unparsed.values()),
            "example not kept": len(self.examples_skipped),
        }
        for why in self.not_reflected.values():
            key = f"no reflection: {why}"
            counts[key] = counts.get(key, 0) + 1
        for kind, screened in (("refused", self.quarantined), ("held", self.held)):
            for op in screened:
                check = _check(op.reasons[0]) if op.reasons else "unstated"
                key = f"{kind}: {check}"
                counts[key] = counts.get(key, 0) + 1
        return {reason: n for reason, n in counts.items() if n}

    def to_trust(self) -> list[str]:
        """How to trust the untrusted fields the step's held and refused rules rest on.

        Each distinct ``QuarantinedOp.trust`` step of the held rules, then of the
        refused ones: the setting (``BulletGuard(trusted_tools=[...])``, a feedback
        ``source``) that would make that field trusted evidence, where one may.
        """
        return list(
            dict.fromkeys(step for op in [*self.held, *self.quarantined] for step in op.trust)
        )

    def outcome(self) -> str:
        """What the step wrote: the version and its fate, or why none was written."""
        if self.version is None:
            written = "no version written: the step left the playbook's text unchanged"
        elif self.accepted is None:
            written = f"version {self.version} waits for a decision (a candidate)"
        else:
            fate = "accepted (in force)" if self.accepted else "rejected by the acceptance policy"
            written = f"version {self.version} {fate}"
        if self.held_version is not None:
            written += f"; held rules in candidate {self.held_version} (needs a person)"
        return written

    def summary(self) -> str:
        """The step in one line: traces, rules and what became of them, version and why.

        Example: ``"4 traces; rules: 3 proposed, 1 written, 1 held, 0 refused,
        1 left out; reasons: held: provenance 1, left out by curator 1; version 5
        accepted (in force)"``. When held or refused
        rules rest on fields a setting could trust, ``to_trust()`` follows the
        reasons: ``"...; to trust their text: the result of tool 'lookup': add
        'lookup' to BulletGuard(trusted_tools=[...]) if your app controls what it
        returns; version 5 ..."``.
        """
        rules = self.rules()
        counted = ", ".join(
            f"{rules[name]} {name.replace('_', ' ')}"
            for name in ("proposed", "written", "held", "refused", "left_out")
        )
        reasons = self.reasons()
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items())) or "none"
        failed = (
            f"; {len(self.failed_reflections)} trace(s) whose reflection failed"
            if self.failed_reflections
            else ""
        )
        traces = len(self.trace_ids) or self.batch_size
        steps = self.to_trust()
        trust = f"; to trust their text: {'; '.join(steps)}" if steps else ""
        return f"{traces} traces; rules: {counted}; reasons: {why}{failed}{trust}; {self.outcome()}"


def _check(reason: str) -> str:
    """The guard check a ``"check: detail"`` reason names (``"provenance"``, ...)."""
    return reason.split(":", 1)[0].strip() or "unstated"


class LearnReport(BaseModel):
    """What ``Combee.learn`` did: the resulting version, its playbook, and every step."""

    version: PromptVersion
    steps: list[StepReport] = Field(default_factory=list)

    @property
    def playbook(self) -> Playbook:
        """The playbook of the resulting version."""
        return self.version.playbook

    def totals(self) -> dict[str, Any]:
        """Sum calls, tokens and seconds over all steps."""
        calls: dict[str, int] = {}
        for step in self.steps:
            for name, count in step.calls.items():
                calls[name] = calls.get(name, 0) + count
        return {
            "steps": len(self.steps),
            "calls": calls,
            "input_tokens": sum(s.input_tokens for s in self.steps),
            "output_tokens": sum(s.output_tokens for s in self.steps),
            "seconds": sum(s.seconds for s in self.steps),
        }
