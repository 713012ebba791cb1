"""Acceptance policies: each one's accept and reject paths, and rollback."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._core.ops import Add, Remove, Update
from langgraph_combee._core.types import Decision
from langgraph_combee._learner.acceptance import (
    AcceptAll,
    AcceptancePolicy,
    CanaryGate,
    ManualApproval,
    PolicyContext,
    ValidationGate,
    trace_score,
)
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee.errors import ConfigurationError, StaleCandidateError
from langgraph_combee.testing import default_insight, fake_learner
from langgraph_combee.types import PromptVersion
from tests.helpers import failing_traces


def test_manual_approval_keeps_candidates_pending_until_approved() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval())
    report = combee.learn(failing_traces(4))
    assert [s.version for s in report.steps] == [1, 2]
    assert all(s.accepted is None for s in report.steps)
    assert combee.current().version == 0
    assert [v.status for v in combee.history()] == ["candidate", "candidate"]
    approved = combee.approve(2, reason="looks right")
    assert approved.decision is not None and approved.decision.reason == "looks right"
    assert combee.current().version == 2
    assert combee._agent.server.head(None).version == 2
    rejected = combee.reject(1, reason="too narrow")
    assert rejected.status == "rejected"
    assert combee.current().version == 2


def _runner_scoring(good_word: str):  # type: ignore[no-untyped-def]
    def run(version: PromptVersion, example: str) -> bool:
        return good_word in version.render() and example in version.render()

    return run


def test_validation_gate_accepts_when_not_worse() -> None:
    gate = ValidationGate(["ticket 0"], _runner_scoring("expected answer"))
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=gate)
    report = combee.learn(failing_traces(2))
    assert report.steps[0].accepted is True
    decision = combee.current().decision
    assert decision is not None and decision.policy == "validation"
    assert decision.metrics["candidate_score"] == 1.0
    assert decision.metrics["current_score"] == 0.0


def test_validation_gate_rejects_a_worse_candidate() -> None:
    async def harsh(version: PromptVersion, example: str) -> float:
        return 0.0 if version.playbook.bullets else 1.0

    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        acceptance=ValidationGate(["a", "b"], harsh),
    )
    report = combee.learn(failing_traces(2))
    assert report.steps[0].accepted is False
    assert combee.current().version == 0
    [candidate] = combee.history()
    assert candidate.status == "rejected"
    assert candidate.decision is not None and "worse" in candidate.decision.reason
    assert candidate.decision.metrics["delta"] == -1.0


def test_validation_gate_counts_a_raising_runner_as_zero() -> None:
    def flaky(version: PromptVersion, example: str) -> float:
        if version.version:
            raise RuntimeError("agent crashed")
        return 1.0

    combee = Combee(
        prompt_id="p", model=fake_learner(), batch_size=1, acceptance=ValidationGate(["x"], flaky)
    )
    assert combee.learn(failing_traces(1)).steps[0].accepted is False


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: ValidationGate([], lambda v, e: 1.0), "examples"),
        (lambda: ValidationGate(["a"], "run"), "runner"),
        (lambda: CanaryGate(fraction=1.5), "fraction=1.5"),
        (lambda: CanaryGate(min_runs=0), "min_runs=0"),
        # A string used to raise a bare TypeError from the comparison.
        (lambda: CanaryGate(fraction="0.5"), "fraction='0.5' .*a number in \\(0, 1\\)"),
        (lambda: CanaryGate(fraction=True), "fraction=True"),
        (lambda: CanaryGate(fraction=float("nan")), "fraction=nan"),
        (lambda: CanaryGate(rollback="no"), "rollback='no' .*True or False"),
        (lambda: CanaryGate(margin=-1), "margin=-1 .*a finite number >= 0"),
        # NaN failed every comparison, so the gate rejected every candidate.
        (lambda: CanaryGate(margin=float("nan")), "margin=nan .*a finite number >= 0"),
        (lambda: CanaryGate(margin=float("inf")), "margin=inf .*a finite number >= 0"),
        (
            lambda: ValidationGate(["a"], lambda v, e: 1.0, min_delta=float("nan")),
            "min_delta=nan .*a finite number",
        ),
        (
            lambda: ValidationGate(["a"], lambda v, e: 1.0, min_delta="0.1"),
            "min_delta='0.1' .*a finite number",
        ),
    ],
)
def test_policy_arguments_are_validated(factory, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match=match):
        factory()


def _scored(version: int, n: int, correct: bool, tag: str) -> list[Trace]:
    return [
        Trace(
            id=f"{tag}-{i}",
            input="x",
            prompt_version=version,
            feedback=Feedback(correct=correct),
        )
        for i in range(n)
    ]


async def _canary_setup(min_runs: int = 3) -> tuple[Combee, CanaryGate, BackgroundLearner]:
    gate = CanaryGate(fraction=0.5, min_runs=min_runs, margin=0.0)
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=gate)
    report = await combee.alearn(failing_traces(2))
    assert report.steps[0].accepted is None
    learner = BackgroundLearner(
        combee._learner_parts, LearnerSettings(min_batch=1, max_wait_seconds=0.001)
    )
    return combee, gate, learner


async def test_canary_serves_a_fraction_then_accepts_on_good_feedback() -> None:
    combee, gate, learner = await _canary_setup()
    assert combee.registry().canary() is not None
    served = [combee._agent.select_version(None, f"run-{i}").version for i in range(400)]
    share = served.count(1) / len(served)
    assert 0.4 < share < 0.6
    assert set(served) == {0, 1}
    assert (
        combee._agent.select_version(None, "run-7").version
        == combee._agent.select_version(None, "run-7").version
    )

    for trace in _scored(1, 3, True, "cand") + _scored(0, 3, False, "head"):
        combee.capture(trace)
    await learner.tick()
    assert gate.arm(None, 1) == (3, 1.0)
    accepted = combee.get(1)
    assert accepted.status == "accepted"
    assert accepted.decision is not None and accepted.decision.policy == "canary"
    assert accepted.decision.metrics["candidate_runs"] == 3.0
    assert combee.current().version == 1
    # The trial over, learning resumed in the same pass; that step only moved counters,
    # so it wrote no version (its tags wait for the next change of text).
    assert learner.stats.steps == 1
    assert learner.stats.reports[-1].version is None
    assert combee._writer.pending_tags(None)
    for trace in failing_traces(2, prefix="new"):
        combee.capture(trace)
    for _ in range(4):  # the queue drains oldest first, two traces a step
        await learner.tick()
    next_trial = combee.registry().canary()
    assert next_trial is not None and next_trial.version == 2 and next_trial.parent == 1
    assert {combee._agent.select_version(None, f"r{i}").version for i in range(50)} == {1, 2}


async def test_canary_holds_learning_during_a_trial_then_rejects_a_worse_candidate() -> None:
    combee, _gate, learner = await _canary_setup()
    for trace in _scored(1, 3, False, "cand") + _scored(0, 2, True, "head"):
        combee.capture(trace)
    await learner.tick()
    assert learner.stats.steps == 0  # one arm is short of min_runs: the trial goes on
    assert combee.queue().pending_count() == 5  # observed, then released, not learned
    combee.capture(_scored(0, 1, True, "head-late")[0])
    await learner.tick()
    assert combee.current().version == 0
    assert combee.get(1).status == "rejected"
    assert combee._agent.select_version(None, "anything").version == 0


async def test_canary_rolls_back_a_regression_after_acceptance() -> None:
    combee, _gate, learner = await _canary_setup(min_runs=2)
    for trace in _scored(1, 2, True, "cand") + _scored(0, 2, True, "head"):
        combee.capture(trace)
    await learner.tick()
    assert combee.current().version == 1
    for trace in failing_traces(2, prefix="new"):
        combee.capture(trace)
    for _ in range(3):
        await learner.tick()
    assert combee.registry().canary() is not None  # learning resumed: a new trial, on v1
    for trace in _scored(1, 2, False, "live"):
        combee.capture(trace)
    await learner.tick()
    current = combee.current()
    assert current.version == 3
    assert current.playbook.bullets == []  # back to v0's playbook
    assert combee.get(2).status == "rejected"  # the trial built on v1 went with it
    assert current.decision is not None and current.decision.policy == "rollback"
    assert "fell to 0.000" in current.note + current.decision.reason


def test_trace_score() -> None:
    assert trace_score(Trace()) is None
    assert trace_score(Trace(feedback=Feedback(comment="meh"))) is None
    assert trace_score(Trace(feedback=Feedback(correct=True))) == 1.0
    assert trace_score(Trace(feedback=Feedback(score=0.25, correct=True))) == 0.25


# ---- decisions that complete after HEAD moved -----------------------------------


def _texts(version: PromptVersion) -> set[str]:
    return {b.content for b in version.playbook.bullets}


def _two_candidates_from_one_head() -> tuple[Combee, set[str], set[str]]:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval())
    combee.learn(failing_traces(4))
    first, second = combee.get(1), combee.get(2)
    assert first.parent == second.parent == 0
    assert _texts(first) and _texts(second) and not _texts(first) & _texts(second)
    return combee, _texts(first), _texts(second)


def test_approving_two_candidates_from_one_head_in_turn_keeps_the_rules_of_both() -> None:
    combee, first, second = _two_candidates_from_one_head()
    combee.approve(1)
    approved = combee.approve(2)
    assert combee.current().version == 2
    assert _texts(combee.current()) == first | second
    assert approved.parent == 1 and approved.rebased_from == 0
    assert combee._agent.server.head(None).version == 2
    # The first approval was not stale: it is recorded as learned.
    assert combee.get(1).rebased_from is None


def test_cli_approve_in_turn_keeps_the_rules_of_both(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from langgraph_combee.cli import app

    db = str(tmp_path / "combee.db")
    with Combee.from_conn_string(
        db, prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval()
    ) as combee:
        combee.learn(failing_traces(4))
        first, second = _texts(combee.get(1)), _texts(combee.get(2))
    runner = CliRunner()
    for version in ("1", "2"):
        result = runner.invoke(app, ["approve", version, "--prompt-id", "p", "--store", db])
        assert result.exit_code == 0, result.output
    with Combee.from_conn_string(db, prompt_id="p") as combee:
        head = combee.current()
        assert head.version == 2 and head.rebased_from == 0 and head.parent == 1
        assert _texts(head) == first | second


def test_a_stale_candidate_without_ops_is_refused_with_how_to_rebase() -> None:
    combee = Combee(prompt_id="p", acceptance=ManualApproval())
    registry = combee.registry()
    one = registry.add_candidate(
        PromptVersion(prompt_id="p", playbook=combee.get(0).playbook.apply(
            [Add(section="general", content="Rule one.")]).playbook)
    )  # fmt: skip
    two = registry.add_candidate(
        PromptVersion(prompt_id="p", playbook=combee.get(0).playbook.apply(
            [Add(section="general", content="Rule two.")]).playbook)
    )  # fmt: skip
    combee.approve(one.version)
    # The registry itself never accepts a stale candidate ...
    with pytest.raises(StaleCandidateError, match=r"HEAD is now v1.*Rebase it"):
        registry.accept(two.version, Decision(accepted=True, policy="manual", reason="x"))
    # ... and with no stored ops there is nothing to re-apply: a clear refusal.
    with pytest.raises(StaleCandidateError, match=r"stores no ops to re-apply") as caught:
        combee.approve(two.version)
    assert (caught.value.version, caught.value.parent, caught.value.head) == (2, 0, 1)
    assert combee.current().version == 1
    assert combee.get(two.version).status == "candidate"


def _another_writer_accepts(combee: Combee, text: str) -> None:
    """A version accepted by another writer (HEAD moves under a pending decision)."""
    other = Combee(prompt_id="p", store=combee.store)
    registry = other.registry()
    head = registry.head()
    stored = registry.add_candidate(
        PromptVersion(
            prompt_id="p",
            playbook=head.playbook.apply([Add(section="general", content=text)]).playbook,
            ops=[Add(section="general", content=text)],
        )
    )
    other.approve(stored.version)


def test_a_validation_decision_completing_after_head_moved_is_rebased() -> None:
    combee: Combee | None = None
    moved = threading.Event()

    def runner(version: PromptVersion, example: str) -> float:
        # While the gate scores the candidate, another writer accepts a version.
        assert combee is not None
        if not moved.is_set():
            moved.set()
            _another_writer_accepts(combee, "Rule from the other writer.")
        return 1.0 if version.playbook.bullets else 0.0

    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        acceptance=ValidationGate(["example"], runner, max_concurrency=1),
    )
    report = combee.learn(failing_traces(2))
    assert moved.is_set() and report.steps[0].accepted is True
    head = combee.current()
    # The candidate (v1) was written first; the other writer's version is v2.
    assert head.version == report.steps[0].version == 1
    assert head.parent == 2 and head.rebased_from == 0
    learned = {op.content for op in head.ops if isinstance(op, Add)}
    assert learned and learned | {"Rule from the other writer."} == _texts(head)


async def test_a_canary_accepted_after_head_moved_is_rebased() -> None:
    combee, _gate, learner = await _canary_setup()
    canary_rules = _texts(combee.get(1))
    await asyncio.to_thread(_another_writer_accepts, combee, "Rule from the other writer.")
    assert combee.current().version == 2
    for trace in _scored(1, 3, True, "cand") + _scored(2, 3, False, "head"):
        combee.capture(trace)
    await learner.tick()
    head = combee.current()
    assert head.version == 1 and head.parent == 2 and head.rebased_from == 0
    assert _texts(head) == canary_rules | {"Rule from the other writer."}


async def test_approve_reject_and_rollback_still_work_from_inside_an_event_loop() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval())
    await combee.alearn(failing_traces(4))
    assert combee.approve(1).status == "accepted"
    assert combee.reject(2).status == "rejected"
    assert combee.rollback(0).version == 3


def test_a_stale_update_approved_after_a_rollback_does_not_rewrite_a_newer_rule() -> None:
    # A rollback must not reset the playbook's id counters: a later rule would get
    # the id of a rolled-back one, and a stale candidate's UPDATE of that id,
    # rebased onto HEAD, would overwrite the unrelated newer rule.
    combee = Combee(prompt_id="p", model=fake_learner(), acceptance=ManualApproval())
    registry = combee.registry()

    def propose(*ops: Add | Update) -> int:
        head = registry.head()
        learned = head.playbook.apply(ops, version=registry.latest_version() + 1).playbook
        record = PromptVersion(prompt_id="p", playbook=learned, parent=head.version, ops=ops)
        return registry.add_candidate(record).version

    greet = combee.approve(propose(Add(section="general", content="Greet the customer by name.")))
    refund = combee.approve(propose(Add(section="general", content="Refund within thirty days.")))
    (refund_id,) = {b.id for b in refund.playbook.bullets} - {b.id for b in greet.playbook.bullets}
    stale = propose(Update(id=refund_id, content="Refund within fourteen days."))
    combee.rollback(greet.version, reason="the refund rule was wrong")
    combee.approve(propose(Add(section="general", content="Escalate legal threats at once.")))

    head = combee.approve(stale)

    rules = [b.content for b in head.playbook.bullets]
    assert "Escalate legal threats at once." in rules
    assert not any("Refund" in rule for rule in rules), rules


def _eventually(check: Callable[[], bool], give_up: float = 60.0) -> None:
    # A broken hand-over fails the test instead of hanging the suite.
    stop = threading.Event()
    timer = threading.Timer(give_up, stop.set)
    timer.start()
    try:
        while not check():
            assert not stop.wait(0.01), f"gave up waiting for {check!r}"
    finally:
        timer.cancel()


def test_another_process_approves_while_a_learner_runs(tmp_path: Path) -> None:
    # Two stores on one SQLite file share no process lock and no lease object:
    # as far as Combee can tell, two processes (the deployed learner, and an
    # operator's `combee approve`). The learner renews its lease on every pass;
    # the approval must not wait for it to expire (it never does) and fail.
    db = str(tmp_path / "combee.db")
    with Combee.from_conn_string(
        db,
        prompt_id="p",
        model=fake_learner(),
        batch_size=2,
        acceptance=ManualApproval(),
        learner=LearnerSettings(poll_seconds=0.02, lease_seconds=600.0),
    ) as deployed:
        deployed.learn(failing_traces(2))
        with deployed.running():
            lease = deployed.learner._lease(None)
            _eventually(lease.is_held)  # the learner's first pass takes the lease
            with Combee.from_conn_string(
                db, prompt_id="p", learner=LearnerSettings(lease_seconds=5.0)
            ) as operator:
                approved = operator.approve(1, reason="reviewed")
            assert approved.status == "accepted"
            _eventually(lease.is_held)  # and the learner takes it back afterwards
        assert deployed.current().version == 1


@pytest.mark.parametrize("edit", ["update", "remove"])
def test_a_stale_edit_of_a_rule_rewritten_since_keeps_the_approved_rewrite(edit: str) -> None:
    # Two candidates learned from one HEAD edit the same rule; the first is
    # approved. Rebasing the second must not overwrite (or delete) the rule the
    # first approval put in force: that edit was made against text HEAD no longer has.
    combee = Combee(prompt_id="p", model=fake_learner(), acceptance=ManualApproval())
    registry = combee.registry()

    def propose(*ops: Add | Update | Remove) -> int:
        head = registry.head()
        learned = head.playbook.apply(ops, version=registry.latest_version() + 1).playbook
        record = PromptVersion(prompt_id="p", playbook=learned, parent=head.version, ops=ops)
        return registry.add_candidate(record).version

    base = combee.approve(propose(Add(section="general", content="Refund within thirty days.")))
    (rule,) = base.playbook.bullets
    fourteen = propose(Update(id=rule.id, content="Refund within fourteen days."))
    stale = propose(
        Update(id=rule.id, content="Refund within sixty days.")
        if edit == "update"
        else Remove(id=rule.id, reason="refunds are handled by billing")
    )
    combee.approve(fourteen)

    head = combee.approve(stale)

    assert [b.content for b in head.playbook.bullets] == ["Refund within fourteen days."]


class _HeldApproval(BaseStore):
    """An in-memory store that holds an approval's version write until the learner
    has written its lease record (or a second has passed: a learner that cannot
    take the lease while the approval writes never does)."""

    approving: contextvars.ContextVar[bool] = contextvars.ContextVar("approving", default=False)

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.lock = threading.RLock()
        self.leased = threading.Event()
        self.held = False

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        writes = {op.namespace[-1] for op in ops if isinstance(op, PutOp)}
        if self.approving.get() and "versions" in writes and not self.held:
            self.held = True
            self.leased.wait(1.0)
        elif not self.approving.get() and "lease" in writes:
            self.leased.set()
        with self.lock:
            return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


def test_an_approval_while_the_learner_takes_its_lease_leaves_the_learner_its_lease() -> None:
    # The approval and the learner of one Combee share a lease holder name. An
    # approval that found the lease free took it for its session; a learner pass
    # taking the lease meanwhile (a renewal, to the store) must not have it
    # released under it when the approval ends, and lose its step.
    store = _HeldApproval()
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        store=store,
        batch_size=2,
        acceptance=ManualApproval(),
        learner=LearnerSettings(min_batch=2),
    )
    combee.learn(failing_traces(2))
    for trace in failing_traces(2, prefix="late"):
        combee.capture(trace)
    store.leased.clear()  # learn() wrote the lease too

    def approve() -> None:
        _HeldApproval.approving.set(True)
        combee.approve(1)

    approver = threading.Thread(target=approve)
    approver.start()
    learner = combee.learner
    _eventually(lambda: store.held)
    steps = asyncio.run(learner.tick())
    approver.join()

    assert (steps, learner.stats.failed_steps) == (1, 0), learner.stats.last_error
    assert [v.status for v in combee.history()] == ["accepted", "candidate"]


def test_an_approval_during_a_learner_step_does_not_throw_the_step_away() -> None:
    # The step's candidate is rebased onto the approved HEAD when it is written,
    # so the step's (paid-for) work is kept, and so are the approved rules.
    approved, stepping = threading.Event(), threading.Event()

    def insight(trace_input: str, ground_truth: str, output: str) -> str:
        if "late" in trace_input:
            stepping.set()
            assert approved.wait(60), "the approval never ended"
        return default_insight(trace_input, ground_truth, output)

    combee = Combee(
        prompt_id="p",
        model=fake_learner(insight=insight),
        batch_size=2,
        acceptance=ManualApproval(),
        learner=LearnerSettings(min_batch=2),
    )
    combee.learn(failing_traces(2))
    first = _texts(combee.get(1))
    for trace in failing_traces(2, prefix="late"):
        combee.capture(trace)

    def approve() -> None:
        assert stepping.wait(60), "the learner never stepped"
        combee.approve(1)
        approved.set()

    approver = threading.Thread(target=approve)
    approver.start()
    learner = combee.learner
    steps = asyncio.run(learner.tick())
    approver.join()

    assert (steps, learner.stats.failed_steps) == (1, 0), learner.stats.last_error
    late = combee.get(2)
    assert (late.status, late.parent, late.rebased_from) == ("candidate", 1, 0)
    assert first < _texts(late)


@pytest.mark.parametrize("decide", ["approve", "reject", "rollback"])
def test_a_reason_that_is_not_text_is_a_configuration_error_before_anything_is_written(
    decide: str,
) -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval())
    combee.learn(failing_traces(2))
    before = combee.history()
    version = 0 if decide == "rollback" else 1
    with pytest.raises(ConfigurationError, match="reason=5"):
        getattr(combee, decide)(version, reason=5)
    assert combee.history() == before


def test_an_operator_decision_made_while_a_gate_scores_the_candidate_stands() -> None:
    # The operator rejects the candidate while the ValidationGate is still scoring
    # it. The gate's late verdict must not fail the step: in the background
    # learner that sends the traces back to the queue, to be learned (and accepted)
    # again, undoing the operator's rejection.
    scoring, decided = threading.Event(), threading.Event()

    def runner(version: PromptVersion, example: str) -> float:
        if version.version:  # the candidate, not HEAD
            scoring.set()
            assert decided.wait(60), "the operator never decided"
        return 1.0

    gate = ValidationGate(["ticket 0"], runner)
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=gate)

    def operator() -> None:
        assert scoring.wait(60), "the gate never scored"
        combee.reject(1, reason="not this one")
        decided.set()

    reviewer = threading.Thread(target=operator)
    reviewer.start()
    report = combee.learn(failing_traces(2))
    reviewer.join()

    (step,) = report.steps
    assert (step.version, step.accepted) == (1, False)
    rejected = combee.get(1)
    assert rejected.status == "rejected" and rejected.decision is not None
    assert rejected.decision.policy == "manual"
    assert combee.current().version == 0


# ---- the AcceptancePolicy base class --------------------------------------------


class _OldStyle:
    """A policy written before the base class: a name and an async decide."""

    name = "old_style"

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        return Decision(accepted=True, policy=self.name, reason="written the old way")


def test_a_policy_written_without_the_base_class_still_decides() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=_OldStyle())
    assert isinstance(combee._acceptance, AcceptancePolicy)
    report = combee.learn(failing_traces(2))
    assert report.steps[0].accepted is True
    decision = combee.current().decision
    assert decision is not None and decision.policy == "old_style"


class _OldStyleWithHooks(_OldStyle):
    def blocking(self, tenant: str | None) -> bool:
        return True


class _Chooser(_OldStyle):
    def choose(self, *args: object) -> PromptVersion:
        raise AssertionError("never called")


class _NoDecide(AcceptancePolicy):
    name = "no_decide"


class _BadFraction(AcceptancePolicy):
    canary_fraction = 1.5

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        return None


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        (_OldStyleWithHooks(), r"acceptance=<.*_OldStyleWithHooks.*blocking would not be used"),
        (_Chooser(), r"acceptance=<.*_Chooser.*set canary_fraction instead"),
        (_BadFraction(), r"acceptance.canary_fraction=1.5"),
        (AcceptAll, r"acceptance=<class .*AcceptAll"),  # the class, not an instance
        (object(), r"acceptance=<object"),
    ],
)
def test_a_policy_that_cannot_work_is_refused_naming_it(policy: object, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Combee(prompt_id="p", acceptance=policy)  # type: ignore[arg-type]


class _Watching(AcceptancePolicy):
    """Counts what the learner shows it, and holds learning while ``hold`` is set."""

    name = "watching"

    def __init__(self) -> None:
        self.observed: list[str] = []
        self.reviews = 0
        self.hold = True

    async def decide(
        self, candidate: PromptVersion, current: PromptVersion, context: PolicyContext
    ) -> Decision | None:
        return Decision(accepted=True, policy=self.name, reason="ok")

    def observe(self, trace: Trace) -> None:
        self.observed.append(trace.id)

    async def review(self, context: PolicyContext) -> None:
        assert context.tenant is None
        self.reviews += 1

    def blocking(self, tenant: str | None) -> bool:
        return self.hold


async def test_the_learner_calls_the_hooks_a_subclass_overrides() -> None:
    policy = _Watching()
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=policy)
    learner = BackgroundLearner(
        combee._learner_parts, LearnerSettings(min_batch=2, max_wait_seconds=0.001)
    )
    for trace in failing_traces(2):
        combee.capture(trace)
    assert await learner.tick() == 0  # blocking: nothing learned
    assert (sorted(policy.observed), policy.reviews) == (["t0", "t1"], 1)
    policy.hold = False
    assert await learner.tick() == 1
    assert policy.reviews == 2
    assert combee.current().version == 1


def test_a_policy_without_decide_cannot_be_made() -> None:
    with pytest.raises(TypeError, match="_NoDecide.*decide"):
        _NoDecide()  # type: ignore[abstract]


def test_a_policy_runs_no_trial_unless_it_says_so() -> None:
    policy = AcceptAll()
    assert policy.canary_fraction == 0.0 and policy.blocking("acme") is False
    assert CanaryGate(fraction=0.25).canary_fraction == 0.25
