"""Verified adoption: replay runs of the batch under the candidate playbook before acceptance.

ACE checks a reflection by regenerating the answer with it; here that check is
made safe for production. After a strategy has produced its candidate
playbook, and before the acceptance policy sees it, ``verify`` replays the
model call of runs of the batch (the run's messages up to its last model call,
system prompt rebuilt with the candidate playbook; no tool is executed) with
the agent's own model, scores each reply with the evaluator (or the run's
ground truth), and judges every rule the step added or changed:

* **verified** (kept): replays of failing runs it was learned from turned right;
* **rejected** (dropped; an updated rule goes back to its previous text):
  it turned a previously right replay wrong; or it is over-general, pulling a
  run whose right answer differs towards the answer of the runs it came from;
  or it is ineffective, the failing runs it came from staying wrong under it;
* **unverified** (kept): nothing could be concluded (no scorable replay of a
  run it came from, failed calls, the replay limit reached).

A loss that no rule's answer explains is attributed by replaying the lost run
under the previous playbook plus one changed rule at a time (within the limit).

Failure policy: ``verify`` never raises for one replay. A call that raises or
times out, or an evaluator that raises, is counted and its run stays unscored,
so the rules it bore on keep the status the other replays give them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig

from langgraph_combee._core.evidence import ReplayEvidence, ReplayReport, RuleVerdict
from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.types import Feedback, StepReport, ToolCall, Trace, TraceMessage
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._learning.budget import LearnerBudget
from langgraph_combee._learning.parsing import message_text
from langgraph_combee._tokens import estimate_tokens

__all__ = [
    "AgentCalls",
    "ReplaySettings",
    "ReplayTarget",
    "answers_match",
    "feedback_verdict",
    "make_scorer",
    "record",
    "replay_messages",
    "verify",
]

RUN_NAME = "combee.replay"

logger = logging.getLogger("langgraph_combee.replay")

Scorer = Callable[[Trace], "bool | None"]
"""Judges a (replayed) trace: True right, False wrong, None cannot tell. Sync."""

Render = Callable[[SystemMessage | None, str], SystemMessage | None]
"""Appends a rendered playbook to the agent's system message (``with_playbook``)."""


@dataclass(frozen=True)
class ReplayTarget:
    """The agent's side of a model call: its model, its own system prompt, its tools.

    Attributes:
        model: The agent's chat model (unbound; tools are bound here).
        system: The application's own system message, without any playbook.
        tools: The tools the agent binds (replies may call them; none is run).
        tool_choice: The agent's ``tool_choice``, if it sets one.
    """

    model: Any
    system: SystemMessage | None = None
    tools: tuple[Any, ...] = ()
    tool_choice: Any = None

    def runnable(self) -> Any:
        """The model as the agent calls it: with its tools bound, when it has tools."""
        if not self.tools:
            return self.model
        if self.tool_choice is not None:
            return self.model.bind_tools(list(self.tools), tool_choice=self.tool_choice)
        return self.model.bind_tools(list(self.tools))


class AgentCalls:
    """The latest model call the agent made in this process (what replay calls with).

    The middleware tells it about every model call; it is one attribute write
    under a lock, so the hot path pays almost nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: ReplayTarget | None = None

    def remember(
        self, model: Any, system: SystemMessage | None, tools: Sequence[Any], tool_choice: Any
    ) -> None:
        """Record the model, system prompt and tools of an agent's model call."""
        latest = self._latest
        if (
            latest is not None
            and latest.model is model
            and latest.system is system
            and latest.tool_choice is tool_choice
            and len(latest.tools) == len(tools)
            and all(a is b for a, b in zip(latest.tools, tools, strict=True))
        ):
            return
        target = ReplayTarget(
            model=model, system=system, tools=tuple(tools), tool_choice=tool_choice
        )
        with self._lock:
            self._latest = target

    def latest(self) -> ReplayTarget | None:
        """The last call remembered, or None when the agent has not called its model yet."""
        with self._lock:
            return self._latest


@dataclass(frozen=True)
class ReplaySettings:
    """Limits of the replays of one learning step.

    Attributes:
        max_replays: Most replay calls per step (isolation replays included);
            about a quarter goes to previously right runs when the batch has some.
        max_concurrency: Replay calls in flight at once.
        timeout_seconds: Per-call timeout; a call past it counts as failed.
        seed: Seed of the sample of previously right runs (mixed with the version).
    """

    max_replays: int = 32
    max_concurrency: int = 4
    timeout_seconds: float | None = 120.0
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.max_replays, bool) or not isinstance(self.max_replays, int):
            raise ConfigurationError("max_replays", self.max_replays, "an int >= 1")
        if self.max_replays < 1:
            raise ConfigurationError("max_replays", self.max_replays, "an int >= 1")
        if self.max_concurrency < 1:
            raise ConfigurationError("max_concurrency", self.max_concurrency, "an int >= 1")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ConfigurationError("timeout_seconds", self.timeout_seconds, "None or > 0")


# --------------------------------------------------------------------------- scoring

_EDGES = "`*\"'“”‘’.,;:!?()[]{}<> \t\r\n"


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_EDGES)


def answers_match(output: str, answer: str) -> bool:
    """Whether ``output`` gives ``answer``: equal, or containing it as a whole word.

    Case, surrounding quotes, fences and punctuation are ignored, so
    ``"The team is **FIN-7Q**."`` gives ``"FIN-7Q"`` and ``"FIN-7QX"`` does not.
    """
    wanted = _norm(answer)
    if not wanted:
        return False
    said = _norm(output)
    if said == wanted:
        return True
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", said) is not None


def feedback_verdict(feedback: Feedback | None) -> bool | None:
    """Right or wrong from feedback: ``correct``, else ``score >= 0.5``, else None."""
    if feedback is None:
        return None
    if feedback.correct is not None:
        return feedback.correct
    if feedback.score is not None:
        return feedback.score >= 0.5
    return None


def make_scorer(evaluator: Callable[[Trace], Feedback | None] | None) -> Scorer:
    """A scorer: the evaluator's verdict, else the trace's ground truth matched by text.

    The replayed trace carries the original run's ground truth (as
    ``feedback.ground_truth``, with no verdict), so an evaluator may compare
    against it; one that gives no verdict (or raises) leaves it to ``answers_match``.
    """

    def score(trace: Trace) -> bool | None:
        if evaluator is not None:
            try:
                verdict = feedback_verdict(evaluator(trace))
            except Exception:  # an evaluator bug costs its verdict, never the step
                logger.warning("evaluator raised on replay of %s", trace.id, exc_info=True)
                verdict = None
            if verdict is not None:
                return verdict
        truth = trace.feedback.ground_truth if trace.feedback is not None else None
        return answers_match(trace.output, truth) if truth else None

    return score


# --------------------------------------------------------------------------- messages


def _last_ai(messages: Sequence[TraceMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "ai":
            return index
    return None


def call_prefix(trace: Trace) -> list[TraceMessage]:
    """The run's messages up to (not including) its last model reply.

    A hand-built trace with no messages (or none from the user) starts from its
    ``input`` as the user's message.
    """
    messages = list(trace.messages)
    end = _last_ai(messages)
    prefix = messages if end is None else messages[:end]
    if trace.input and not any(m.role == "human" for m in prefix):
        prefix = [TraceMessage(role="human", content=trace.input), *prefix]
    return prefix


def _to_message(message: TraceMessage, pending: list[str]) -> BaseMessage | None:
    if message.role == "human":
        return HumanMessage(content=message.content, name=message.name)
    if message.role == "ai":
        calls = [
            {"name": str(c.get("name", "")), "args": dict(c.get("args") or {}), "id": c.get("id")}
            for c in message.tool_calls
        ]
        pending.extend(str(c["id"]) for c in calls if c["id"])
        return AIMessage(content=message.content, name=message.name, tool_calls=calls)
    if message.role == "tool":
        # Traces keep tool results in order; they answer the calls made before them.
        call_id = pending.pop(0) if pending else "replayed"
        return ToolMessage(content=message.content, tool_call_id=call_id, name=message.name)
    if message.role == "system":
        return SystemMessage(content=message.content)
    return None


def replay_messages(trace: Trace, system: SystemMessage | None) -> list[BaseMessage]:
    """The messages of the run's last model call, with ``system`` as its system prompt."""
    pending: list[str] = []
    out: list[BaseMessage] = [system] if system is not None else []
    for message in call_prefix(trace):
        converted = _to_message(message, pending)
        if converted is not None:
            out.append(converted)
    return out


def replayed_trace(trace: Trace, reply: AIMessage) -> Trace:
    """``trace`` as if its last model call had returned ``reply`` (and nothing ran after)."""
    prefix = call_prefix(trace)
    earlier = {str(c.get("id")) for m in prefix for c in m.tool_calls if c.get("id")}
    calls = [
        {"name": c["name"], "args": dict(c.get("args") or {}), "id": c.get("id")}
        for c in reply.tool_calls
    ]
    text = message_text(reply.content)
    truth = trace.feedback.ground_truth if trace.feedback is not None else None
    return trace.model_copy(
        update={
            "output": text,
            "messages": [*prefix, TraceMessage(role="ai", content=text, tool_calls=calls)],
            "tool_calls": [
                *(c for c in trace.tool_calls if c.id in earlier),
                *(ToolCall(name=c["name"], args=c["args"], id=c["id"]) for c in calls),
            ],
            "error": None,
            "feedback": Feedback(ground_truth=truth, source="replay") if truth else None,
            "metadata": {**trace.metadata, "combee_replay_of": trace.id},
        }
    )


# --------------------------------------------------------------------------- replaying


@dataclass
class _Outcome:
    trace: Trace
    before: bool | None
    after: bool | None = None
    output: str = ""

    @property
    def truth(self) -> str | None:
        fb = self.trace.feedback
        return fb.ground_truth if fb is not None and fb.ground_truth else None


@dataclass
class _Run:
    """The shared state of one step's replays: the model, the limits, the accounting."""

    target: ReplayTarget
    score: Scorer
    render: Render
    settings: ReplaySettings
    callbacks: Callbacks
    budget: LearnerBudget | None
    report: ReplayReport
    runnable: Any = None
    semaphore: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))

    def left(self) -> int:
        return self.settings.max_replays - self.report.calls

    def _call(self, messages: list[BaseMessage], trace_id: str) -> AIMessage:
        if self.budget is not None:
            self.budget.acquire_call()
        config = RunnableConfig(
            run_name=RUN_NAME,
            callbacks=self.callbacks,
            tags=["combee", RUN_NAME],
            metadata={"combee_stage": "replay", "combee_replay_of": trace_id},
        )
        reply = self.runnable.invoke(messages, config=config)
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=message_text(getattr(reply, "content", reply)))
        return reply

    def _count(self, messages: Sequence[BaseMessage], reply: AIMessage) -> None:
        usage = reply.usage_metadata
        if usage:
            spent_in, spent_out = int(usage["input_tokens"]), int(usage["output_tokens"])
        else:
            spent_in = sum(estimate_tokens(message_text(m.content)) for m in messages)
            spent_out = estimate_tokens(message_text(reply.content))
        self.report.input_tokens += spent_in
        self.report.output_tokens += spent_out
        if self.budget is not None:
            self.budget.charge_tokens(spent_in + spent_out)

    async def replay(self, trace: Trace, playbook: Playbook) -> tuple[bool | None, str] | None:
        """Replay ``trace`` under ``playbook``: (verdict, output), or None if the call failed."""
        messages = replay_messages(trace, self.render(self.target.system, playbook.render()))
        async with self.semaphore:
            self.report.calls += 1
            try:
                # The agent's model was built for the agent's thread and loop; its sync
                # client is safe from a worker thread, its async one may be bound to a loop.
                reply = await asyncio.wait_for(
                    asyncio.to_thread(self._call, messages, trace.id),
                    timeout=self.settings.timeout_seconds,
                )
            except Exception:
                self.report.failed += 1
                return None
        self._count(messages, reply)
        replayed = replayed_trace(trace, reply)
        return await self.judge(replayed), replayed.output

    async def judge(self, trace: Trace) -> bool | None:
        """The scorer's verdict on ``trace``; an evaluator that raises leaves it unscored."""
        try:
            verdict = await asyncio.to_thread(self.score, trace)
        except Exception:
            verdict = None
        if verdict is None:
            self.report.unscored += 1
        return verdict


async def _baseline(run: _Run, trace: Trace) -> bool | None:
    """How the run went originally: its feedback's verdict, else the scorer's."""
    verdict = feedback_verdict(trace.feedback)
    if verdict is not None:
        return verdict
    try:
        return await asyncio.to_thread(run.score, trace)
    except Exception:
        return None


def changed_bullets(before: Playbook, candidate: Playbook) -> list[Bullet]:
    """Rendered bullets of ``candidate`` that were not rendered before, or whose text changed.

    A pending bullet promoted in this step is new to the agent, so it is judged too.
    """
    old = {b.id: b.content for b in before.live().bullets}
    return [b for b in candidate.live().bullets if old.get(b.id) != b.content]


def _pick(
    changed: Sequence[Bullet],
    outcomes: Mapping[str, _Outcome],
    settings: ReplaySettings,
    version: int,
) -> list[str]:
    """The runs to replay: failing sources first, other failing runs, a sample of right ones."""
    sources = list(dict.fromkeys(t for b in changed for t in b.provenance if t in outcomes))
    failing_sources = [t for t in sources if outcomes[t].before is False]
    others = [t for t, o in outcomes.items() if o.before is False and t not in failing_sources]
    right = [t for t, o in outcomes.items() if o.before is True]
    limit = settings.max_replays
    reserved = min(len(right), max(1, limit // 4)) if right else 0
    picked = failing_sources[: max(0, limit - reserved)]
    picked += others[: max(0, limit - reserved - len(picked))]
    rng = random.Random(f"{settings.seed}:{version}")
    picked += rng.sample(right, min(len(right), limit - len(picked)))
    return picked


def _answers(bullet: Bullet, outcomes: Mapping[str, _Outcome]) -> list[str]:
    """A rule's own answers: the ground truth of the failing runs it was learned from,
    and what their replays answered when they came out right."""
    found: list[str] = []
    for trace_id in bullet.provenance:
        outcome = outcomes.get(trace_id)
        if outcome is None or outcome.before is not False:
            continue
        if outcome.truth:
            found.append(outcome.truth)
        if outcome.after is True and outcome.output.strip():
            found.append(outcome.output)
    return list(dict.fromkeys(found))


def _pulled_by(outcome: _Outcome, answers: Sequence[str]) -> bool:
    """Whether the replay, judged wrong, took one of ``answers`` it did not give before.

    With a ground truth, an answer equal to it does not count; without one, the
    verdict says the run's right answer is not the one it took.
    """
    if outcome.after is not False:
        return False
    truth = outcome.truth
    return any(
        (truth is None or _norm(a) != _norm(truth))
        and answers_match(outcome.output, a)
        and not answers_match(outcome.trace.output, a)
        for a in answers
    )


def _judge(
    bullet: Bullet,
    outcomes: Mapping[str, _Outcome],
    answers: Mapping[str, list[str]],
    broken: Sequence[str],
    version: int,
) -> ReplayEvidence:
    mine = set(bullet.provenance)
    sources = [t for t in bullet.provenance if t in outcomes and outcomes[t].after is not None]
    failing = [t for t in sources if outcomes[t].before is False]
    fixed = [t for t in failing if outcomes[t].after is True]
    still = [t for t in failing if outcomes[t].after is False]
    pulled = [
        t
        for t, o in outcomes.items()
        if t not in mine and _pulled_by(o, answers.get(bullet.id, []))
    ]
    # A source that another changed rule pulled to its own answer says nothing
    # about this rule: the other one won.
    rivals = [a for bid, found in answers.items() if bid != bullet.id for a in found]
    confounded = [t for t in still if _pulled_by(outcomes[t], rivals)]
    evidence = ReplayEvidence(
        version=version, fixed=fixed, still_wrong=still, broken=list(broken), pulled=pulled
    )
    if broken:
        evidence.status = "rejected"
        evidence.reason = f"turned {len(broken)} previously right run(s) wrong"
    elif pulled:
        evidence.status = "rejected"
        evidence.reason = (
            f"over-general: pulled {len(pulled)} run(s) with another right answer to its answer"
        )
    elif fixed:
        evidence.status = "verified"
        evidence.reason = f"turned {len(fixed)} of {len(failing)} failing run(s) it came from right"
    elif len(still) > len(confounded):
        evidence.status = "rejected"
        evidence.reason = (
            f"ineffective: the {len(still)} failing run(s) it came from stayed wrong under it"
        )
    else:
        evidence.reason = "no scorable replay of a failing run it came from"
    return evidence


def _with_bullet(before: Playbook, bullet: Bullet) -> Playbook:
    """``before``'s live bullets with ``bullet`` added (or in place of its old text)."""
    bullets = [b for b in before.live().bullets if b.id != bullet.id]
    return before.replace_bullets([*bullets, bullet])


async def verify(
    *,
    before: Playbook,
    candidate: Playbook,
    traces: Sequence[Trace],
    target: ReplayTarget,
    score: Scorer,
    render: Render,
    settings: ReplaySettings,
    version: int,
    callbacks: Callbacks = None,
    budget: LearnerBudget | None = None,
) -> tuple[Playbook, ReplayReport]:
    """Replay runs of the batch under ``candidate`` and keep only the rules that earn it.

    Args:
        before: The playbook the step started from (HEAD).
        candidate: The strategy's new playbook.
        traces: The step's batch.
        target: The agent's model, system prompt and tools.
        score: Judges a replayed trace (``make_scorer``).
        render: Appends a rendered playbook to the agent's system message.
        settings: Limits: replays per step, concurrency, timeout.
        version: The candidate's version number (stamped on the evidence).
        callbacks: Callbacks of the replay calls (the step's run, for tracing).
        budget: The learner budget replay calls are charged to.

    Returns:
        The playbook with rejected rules taken out (updated ones restored to
        their previous text) and evidence on every rule judged and kept, and
        the replay report. Never raises for a failed call or evaluator.
    """
    report = ReplayReport(enabled=True)
    changed = changed_bullets(before, candidate)
    if not changed:
        report.reason = "no rule added or changed; nothing to replay"
        return candidate, report
    run = _Run(
        target=target,
        score=score,
        render=render,
        settings=settings,
        callbacks=callbacks,
        budget=budget,
        report=report,
        runnable=target.runnable(),
        semaphore=asyncio.Semaphore(settings.max_concurrency),
    )
    unique = {t.id: t for t in traces}
    baselines = await asyncio.gather(*(_baseline(run, t) for t in unique.values()))
    outcomes = {
        t.id: _Outcome(t, before=b) for t, b in zip(unique.values(), baselines, strict=True)
    }
    picked = _pick(changed, outcomes, settings, version)
    results = await asyncio.gather(*(run.replay(outcomes[t].trace, candidate) for t in picked))
    replayed: dict[str, _Outcome] = {}
    for trace_id, result in zip(picked, results, strict=True):
        if result is None:
            continue
        outcome = outcomes[trace_id]
        outcome.after, outcome.output = result
        replayed[trace_id] = outcome
    report.replayed = list(replayed)
    answers = {b.id: _answers(b, outcomes) for b in changed}
    broken = await _attribute(run, before, changed, replayed, answers)
    verdicts = [_verdict(b, replayed, answers, broken, version) for b in changed]
    verdicts = await _after_drops(
        run, before, candidate, changed, verdicts, replayed, broken, version
    )
    report.rules = verdicts
    # Each run's latest replay: under the playbook that is adopted, where it was replayed again.
    report.turned_right = [t for t, o in replayed.items() if o.before is False and o.after]
    report.turned_wrong = [t for t, o in replayed.items() if o.before and o.after is False]
    report.reason = (
        f"{len(replayed)} run(s) replayed ({report.failed} failed calls): "
        f"{len(report.turned_right)} turned right, {len(report.turned_wrong)} turned wrong; "
        f"{len(report.dropped)} of {len(verdicts)} new or changed rule(s) dropped"
    )
    return _adopt(before, candidate, verdicts), report


def _verdict(
    bullet: Bullet,
    replayed: Mapping[str, _Outcome],
    answers: Mapping[str, list[str]],
    broken: Mapping[str, list[str]],
    version: int,
) -> RuleVerdict:
    evidence = _judge(bullet, replayed, answers, broken.get(bullet.id, []), version)
    return RuleVerdict(
        bullet_id=bullet.id,
        content=bullet.content,
        kept=evidence.status != "rejected",
        evidence=evidence,
    )


async def _after_drops(
    run: _Run,
    before: Playbook,
    candidate: Playbook,
    changed: Sequence[Bullet],
    verdicts: list[RuleVerdict],
    replayed: dict[str, _Outcome],
    broken: Mapping[str, list[str]],
    version: int,
) -> list[RuleVerdict]:
    """Judge again the rules a dropped rival confounded, replaying their runs without it.

    A rule whose failing runs were pulled to another rule's answer could not show
    what it does; once that rule is dropped, its runs are replayed under the
    playbook that is left (as far as the limit allows) and it is judged on those.
    """
    dropped = {v.bullet_id for v in verdicts if not v.kept}
    waiting = [v for v in verdicts if v.kept and v.evidence.status == "unverified"]
    retry = list(dict.fromkeys(t for v in waiting for t in v.evidence.still_wrong))
    retry = retry[: max(0, run.left())]
    if not dropped or not retry:
        return verdicts
    adopted = _adopt(before, candidate, verdicts)
    results = await asyncio.gather(*(run.replay(replayed[t].trace, adopted) for t in retry))
    for trace_id, result in zip(retry, results, strict=True):
        if result is not None:
            replayed[trace_id].after, replayed[trace_id].output = result
    kept = [b for b in changed if b.id not in dropped]
    answers = {b.id: _answers(b, replayed) for b in kept}
    by_id = {b.id: b for b in changed}
    again = {v.bullet_id for v in waiting}
    return [
        _verdict(by_id[v.bullet_id], replayed, answers, broken, version)
        if v.bullet_id in again
        else v
        for v in verdicts
    ]


async def _attribute(
    run: _Run,
    before: Playbook,
    changed: Sequence[Bullet],
    replayed: Mapping[str, _Outcome],
    answers: Mapping[str, list[str]],
) -> dict[str, list[str]]:
    """Which changed rule broke each previously right run that turned wrong.

    A run pulled to a rule's answer was broken by that rule; with one changed rule,
    it is that one; otherwise each changed rule is tried alone on top of ``before``
    (as far as the replay limit allows), and the ones that turn the run wrong alone
    take the blame. A loss nothing explains blames no rule (it stays in the report).
    """
    lost = [t for t, o in replayed.items() if o.before is True and o.after is False]
    blamed: dict[str, list[str]] = {}
    unexplained: list[str] = []
    for trace_id in lost:
        culprits = [b.id for b in changed if _pulled_by(replayed[trace_id], answers[b.id])]
        if not culprits and len(changed) == 1:
            culprits = [changed[0].id]
        if not culprits:
            unexplained.append(trace_id)
        for bullet_id in culprits:
            blamed.setdefault(bullet_id, []).append(trace_id)
    pairs = [(t, b) for t in unexplained for b in changed][: max(0, run.left())]
    alone = await asyncio.gather(
        *(run.replay(replayed[t].trace, _with_bullet(before, b)) for t, b in pairs)
    )
    for (trace_id, bullet), result in zip(pairs, alone, strict=True):
        if result is not None and result[0] is False:
            blamed.setdefault(bullet.id, []).append(trace_id)
    return blamed


def _adopt(before: Playbook, candidate: Playbook, verdicts: Sequence[RuleVerdict]) -> Playbook:
    """``candidate`` without its rejected rules, with evidence on the rules kept."""
    by_id = {v.bullet_id: v for v in verdicts}
    previous = {b.id: b for b in before.bullets}
    bullets: list[Bullet] = []
    for bullet in candidate.bullets:
        verdict = by_id.get(bullet.id)
        if verdict is None:
            bullets.append(bullet)
        elif verdict.kept:
            bullets.append(bullet.model_copy(update={"replay": verdict.evidence}))
        elif bullet.id in previous:
            bullets.append(previous[bullet.id])  # an update that failed: the old text stays
    return candidate.replace_bullets(bullets)


def record(report: StepReport, replay: ReplayReport) -> None:
    """Put the replays' calls, failures and tokens in the step's report."""
    report.replay = replay
    if replay.calls:
        report.calls["replay"] = report.calls.get("replay", 0) + replay.calls
    if replay.failed:
        report.failed_calls["replay"] = report.failed_calls.get("replay", 0) + replay.failed
    report.input_tokens += replay.input_tokens
    report.output_tokens += replay.output_tokens
