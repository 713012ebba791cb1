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
  run whose right answer differs towards the answer of the runs it came from
  (unless every such run was wrong before, came from no other rule of the
  step and holds no word of its situation, a stray copy of its answer, and it
  fixed at least as many runs as it pulled: then it is verified); or it is
  ineffective, the failing runs it came from staying wrong under it;
* **narrowed** (kept, with fewer alternatives): it would be rejected for the
  runs it broke or pulled, and each of those runs names an alternative of its
  situation ("When parcel tracking or parcel, LOG-5T." pulled a damaged-parcel
  ticket through "parcel"): those alternatives leave the rule and the rest stays.
  Stray pulls need no alternative named when the fixes the narrowed rule still
  makes are at least as many;
* **unverified** (kept): nothing could be concluded (no scorable replay of a
  run it came from, failed calls, the replay limit reached).

A loss that no rule's answer explains is attributed by replaying the lost run
under the previous playbook plus one changed rule at a time; a rule whose runs
another rule pulled to its answer is judged again, once that rule is dropped,
on replays without it (both within the limit).

Failure policy: ``verify`` never raises for one replay. A call that raises or
times out, or an evaluator that raises, is counted and its run stays unscored,
so the rules it bore on keep the status the other replays give them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.callbacks import Callbacks

from langgraph_combee._adoption.replay import (
    Render,
    ReplayRun,
    ReplaySettings,
    ReplayTarget,
    Scorer,
    answers_match,
    normalise,
)
from langgraph_combee._core.evidence import ReplayEvidence, ReplayReport, RuleVerdict
from langgraph_combee._core.ops import Add, DeltaOp, Update
from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.situations import (
    alternatives,
    input_words,
    parse_rule,
    situation_words,
)
from langgraph_combee._core.types import StepReport, Trace
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._rules.rules import same_action, same_situation

__all__ = ["adopted_ops", "changed_bullets", "record", "verify"]


@dataclass
class _Outcome:
    """One run of the batch: how it went, and how its latest replay went."""

    trace: Trace
    before: bool | None
    after: bool | None = None
    output: str = ""

    @property
    def truth(self) -> str | None:
        fb = self.trace.feedback
        return fb.ground_truth if fb is not None and fb.ground_truth else None


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
        (truth is None or normalise(a) != normalise(truth))
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
    *,
    learned: frozenset[str],
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
    stray = _stray(bullet, [outcomes[t] for t in pulled], learned)
    if broken:
        evidence.status = "rejected"
        evidence.reason = f"turned {len(broken)} previously right run(s) wrong"
    elif pulled and len(stray) == len(pulled) and len(fixed) >= len(stray):
        evidence.status = "verified"
        evidence.reason = (
            f"turned {len(fixed)} of {len(failing)} failing run(s) it came from right; "
            f"{_outweighs(stray)}"
        )
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


def _draws(content: str, outcome: _Outcome) -> bool | None:
    """Whether the rule's situation may have drawn the run: its input holds a word of it.

    Any word, not all the words of an alternative: a situation written as a
    clause ("a refund for an urgent order") is rarely named whole, and the one
    word a run holds ("urgent") is what may have drawn it. An alternative
    without a content word ("any question") draws every run. None when the rule
    is no "When <situation>, <action>." rule (nothing to tell).
    """
    rule = parse_rule(content)
    if rule is None:
        return None
    words = input_words(outcome.trace.input)
    needs = [situation_words(a) for a in alternatives(rule.situation)]
    return any(not need or need & words for need in needs)


def _stray(bullet: Bullet, pulled: Sequence[_Outcome], learned: frozenset[str]) -> list[str]:
    """The pulled runs that cost nothing and that the rule's situation does not draw.

    Such a run was wrong before the step (a previously right one is blamed as
    broken), no other rule of the step was learned from it (``learned``: the
    runs the rules judged came from; pulling one costs that rule its fix), and
    it holds no word of the rule's situation: the model put the rule's answer
    on a run it was already getting wrong, for no word of the rule. That says
    the model copies answers, not that the situation is too wide, and narrowing
    cannot help; it is weighed against the runs the rule turned right.
    """
    return [
        o.trace.id
        for o in pulled
        if o.before is False and o.trace.id not in learned and _draws(bullet.content, o) is False
    ]


def _kept_fixes(content: str, narrowed: str, fixed: Sequence[_Outcome]) -> list[str]:
    """The fixed runs a rule narrowed to ``narrowed`` still accounts for.

    A fix is lost when the rule's situation drew the run and the narrowed one
    does not (it came through an alternative that was left out); a fix the
    situation did not draw came from the model copying the answer, which
    narrowing does not change.
    """
    return [o.trace.id for o in fixed if not (_draws(content, o) and _draws(narrowed, o) is False)]


def _outweighs(stray: Sequence[str]) -> str:
    return (
        f"outweighs the {len(stray)} run(s), wrong before, it pulled to its answer "
        "without their holding a word of its situation"
    )


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
    run = ReplayRun(
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
    baselines = await asyncio.gather(*(run.baseline(t) for t in unique.values()))
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
    previous = {b.id: b for b in before.bullets}
    learned = frozenset(t for b in changed for t in b.provenance)
    verdicts = [
        _verdict(b, replayed, answers, broken, version, previous, learned=learned) for b in changed
    ]
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


def _narrowed(
    bullet: Bullet, runs: Sequence[_Outcome], previous: Bullet | None
) -> tuple[str, list[str]] | None:
    """The rule without the alternatives ``runs`` name, and those alternatives.

    Only what the step brought may go: for an update of a rule in force
    (``previous``, its text before the step), the alternatives that text
    already gave with the same action stay; they were accepted, and what
    service showed of them weighs more than one replay.

    None when the rule is no "When <situation>, <action>." rule, when some run
    names none of the alternatives that may go (the rule drew it some other
    way), or when no alternative with a content word would be left.
    """
    rule = parse_rule(bullet.content)
    if rule is None or not runs:
        return None
    parts = alternatives(rule.situation)
    old = parse_rule(previous.content) if previous is not None else None
    kept_before = (
        alternatives(old.situation)
        if old is not None and same_action(old.action, rule.action)
        else []
    )
    new = [a for a in parts if not any(same_situation(a, k) for k in kept_before)]
    gone: set[str] = set()
    for outcome in runs:
        words = input_words(outcome.trace.input)
        named = {a for a in new if (need := situation_words(a)) and need <= words}
        if not named:
            return None
        gone |= named
    narrowed = rule.keeping([a for a in parts if a not in gone])
    if narrowed is None:
        return None
    return narrowed.text(), [a for a in parts if a in gone]


def _verdict(
    bullet: Bullet,
    replayed: Mapping[str, _Outcome],
    answers: Mapping[str, list[str]],
    broken: Mapping[str, list[str]],
    version: int,
    previous: Mapping[str, Bullet],
    *,
    learned: frozenset[str],
) -> RuleVerdict:
    evidence = _judge(
        bullet, replayed, answers, broken.get(bullet.id, []), version, learned=learned
    )
    content = bullet.content
    if evidence.status == "rejected" and (evidence.broken or evidence.pulled):
        pulled = [replayed[t] for t in evidence.pulled if t in replayed]
        # Stray pulls the rule's fixes outweigh need no narrowing; the others do.
        stray = _stray(bullet, pulled, learned) if not evidence.broken else []
        if len(evidence.fixed) < len(stray):
            stray = []
        runs = [
            *(replayed[t] for t in evidence.broken if t in replayed),
            *(o for o in pulled if o.trace.id not in stray),
        ]
        narrowed = _narrowed(bullet, runs, previous.get(bullet.id))
        if narrowed is not None and stray:
            # The fixes that outweigh the strays must be ones the narrowed rule still makes.
            kept = _kept_fixes(bullet.content, narrowed[0], [replayed[t] for t in evidence.fixed])
            if len(kept) < len(stray):
                evidence.reason += (
                    f"; narrowed, it would keep {len(kept)} of its {len(evidence.fixed)} "
                    f"fix(es), fewer than the {len(stray)} run(s) it pulled without their "
                    "holding a word of its situation"
                )
                narrowed = None
        if narrowed is not None:
            content, gone = narrowed
            evidence.status = "narrowed"
            evidence.reason = f"{evidence.reason}; narrowed: left out {', '.join(map(repr, gone))}"
            if stray:
                evidence.reason += f"; it {_outweighs(stray)}"
    return RuleVerdict(
        bullet_id=bullet.id,
        content=content,
        kept=evidence.status != "rejected",
        evidence=evidence,
    )


async def _after_drops(
    run: ReplayRun,
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
    previous = {b.id: b for b in before.bullets}
    again = {v.bullet_id for v in waiting}
    learned = frozenset(t for b in kept for t in b.provenance)
    return [
        _verdict(by_id[v.bullet_id], replayed, answers, broken, version, previous, learned=learned)
        if v.bullet_id in again
        else v
        for v in verdicts
    ]


async def _attribute(
    run: ReplayRun,
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
            update: dict[str, object] = {"replay": verdict.evidence}
            if verdict.content != bullet.content:  # narrowed
                update["content"] = verdict.content
            bullets.append(bullet.model_copy(update=update))
        elif bullet.id in previous:
            bullets.append(previous[bullet.id])  # an update that failed: the old text stays
    return candidate.replace_bullets(bullets)


def adopted_ops(
    ops: Sequence[DeltaOp], candidate: Playbook, verdicts: Sequence[RuleVerdict]
) -> list[DeltaOp]:
    """The step's ops as replay adopted them: rejected rules out, narrowed ones narrowed.

    A candidate's stored ops are what a rebase re-applies to a newer HEAD; left
    as the strategy wrote them, they would bring back the rules replay dropped,
    and narrowed rules whole. An ADD is matched to its bullet by its text, an
    UPDATE by the bullet's id.
    """
    by_id = {v.bullet_id: v for v in verdicts}
    by_text = {b.content: by_id[b.id] for b in candidate.bullets if b.id in by_id}
    out: list[DeltaOp] = []
    for op in ops:
        if isinstance(op, Add):
            verdict = by_text.get(op.content)
        elif isinstance(op, Update):
            verdict = by_id.get(op.id)
        else:
            verdict = None
        if verdict is None:
            out.append(op)
        elif verdict.kept:
            assert isinstance(op, Add | Update)
            out.append(op.model_copy(update={"content": verdict.content}))
    return out


def record(report: StepReport, replay: ReplayReport) -> None:
    """Put the replays' calls, failures and tokens in the step's report."""
    report.replay = replay
    if replay.calls:
        report.calls["replay"] = report.calls.get("replay", 0) + replay.calls
    if replay.failed:
        report.failed_calls["replay"] = report.failed_calls.get("replay", 0) + replay.failed
    report.input_tokens += replay.input_tokens
    report.output_tokens += replay.output_tokens
