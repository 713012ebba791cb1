"""Verified adoption: replays under the candidate playbook decide which learned rules stay."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langgraph.store.sqlite import SqliteStore

from langgraph_combee import (
    AlgorithmSettings,
    Combee,
    Feedback,
    LearnerBudget,
    LearnerSettings,
    ServingSettings,
    Trace,
)
from langgraph_combee._adoption.adoption import verify
from langgraph_combee._adoption.replay import (
    ReplaySettings,
    ReplayTarget,
    answers_match,
    make_scorer,
    replay_messages,
)
from langgraph_combee._core.evidence import ReplayReport
from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.prompting import with_playbook
from langgraph_combee._core.types import TraceMessage
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel, fake_learner
from tests.helpers import RunNames

APP_PROMPT = "Route the ticket. Answer with the team code only."
RULE = re.compile(r"^- (?:\[[\w-]+\] )?(\w+): (\w+)$")


def rule_follower(*, confused_by_two: bool = False) -> FunctionChatModel:
    """An agent answering with the code of the last playbook rule whose keyword it sees.

    With ``confused_by_two``, two matching rules make it answer ``CONFUSED``.
    """

    def reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].text) if isinstance(messages[0], SystemMessage) else ""
        text = str(messages[-1].text).lower()
        hits = [
            m.group(2)
            for line in system.splitlines()
            if (m := RULE.match(line)) is not None and m.group(1) in text
        ]
        if confused_by_two and len(hits) > 1:
            return "CONFUSED"
        return hits[-1] if hits else "NONE"

    return FunctionChatModel(reply)


TRUTH = {
    "refund please": "FIN",
    "ship please": "SHIP",
    "refund for shipping": "SHIP",
    "ship my refund": "SHIP",
    "lamp broken": "HW",
}


def evaluator(trace: Trace) -> Feedback:
    return Feedback(correct=trace.output == TRUTH[trace.input], source="evaluator")


def run(trace_id: str, text: str, output: str) -> Trace:
    right = TRUTH[text] == output
    return Trace(
        id=trace_id,
        input=text,
        output=output,
        messages=[
            TraceMessage(role="human", content=text),
            TraceMessage(role="ai", content=output),
        ],
        feedback=Feedback(correct=right, ground_truth=TRUTH[text]),
    )


def learner(rules: dict[str, str]) -> FunctionChatModel:
    """A learner whose reflector writes ``rules[input]`` for a failing run ("" for none)."""
    return fake_learner(insight=lambda text, truth, output: rules.get(text, ""))


def combee_for(
    rules: dict[str, str], agent: FunctionChatModel | None = None, **kwargs: object
) -> Combee:
    """A routing Combee; ``kwargs`` are Combee arguments or fields of its settings objects."""
    algorithm: dict[str, object] = {
        "agent_model": agent or rule_follower(),
        "agent_prompt": APP_PROMPT,
    }
    learning: dict[str, object] = {}
    options: dict[str, object] = {
        "prompt_id": "routing",
        "model": learner(rules),
        "evaluator": evaluator,
        "batch_size": 8,
    }
    for name, value in kwargs.items():
        if name in {f.name for f in dataclasses.fields(AlgorithmSettings)}:
            algorithm[name] = value
        elif name in {f.name for f in dataclasses.fields(LearnerSettings)}:
            learning[name] = value
        else:
            options[name] = value
    return Combee(
        **options,  # type: ignore[arg-type]
        algorithm=AlgorithmSettings(**algorithm),  # type: ignore[arg-type]
        learner=LearnerSettings(**learning),  # type: ignore[arg-type]
    )


def contents(combee: Combee) -> list[str]:
    return [b.content for b in combee.current().playbook.bullets]


def replay_of(combee: Combee, traces: list[Trace]) -> ReplayReport:
    """The replay report of the one learning step ``combee`` takes over ``traces``."""
    replay = combee.learn(traces).steps[0].replay
    assert replay is not None
    return replay


# --------------------------------------------------------------------------- the verdicts


def test_a_rule_that_fixes_its_failing_run_is_kept_with_its_evidence() -> None:
    agent = rule_follower()
    combee = combee_for({"refund please": "refund: FIN"}, agent)
    replay = replay_of(combee, [run("t1", "refund please", "NONE")])

    (bullet,) = combee.current().playbook.bullets
    assert bullet.content == "refund: FIN"
    assert bullet.replay is not None
    assert bullet.replay.status == "verified"
    assert bullet.replay.fixed == ["t1"]
    assert bullet.replay.version == 1
    assert replay.turned_right == ["t1"]
    # The replay was the agent's model call: its own prompt, then the candidate playbook.
    (prompt,) = agent.prompts
    assert str(prompt[0].text).startswith(APP_PROMPT)
    assert "- refund: FIN" in str(prompt[0].text)
    assert [type(m) for m in prompt] == [SystemMessage, HumanMessage]


def test_a_rule_that_breaks_a_previously_right_run_is_dropped() -> None:
    # The app's own prompt routes shipping; the learned refund rule makes the agent
    # see two rules on "refund for shipping" and answer CONFUSED.
    agent = rule_follower(confused_by_two=True)
    combee = combee_for(
        {"refund please": "refund: FIN"},
        agent,
        agent_prompt=f"{APP_PROMPT}\n- [app-1] shipping: SHIP",
    )
    batch = [run("t1", "refund please", "NONE"), run("r1", "refund for shipping", "SHIP")]
    replay = replay_of(combee, batch)

    assert contents(combee) == []
    assert combee.current().version == 0  # nothing left to write
    assert replay.turned_wrong == ["r1"]
    (verdict,) = replay.rules
    assert not verdict.kept
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.fixed == ["t1"]
    assert verdict.evidence.broken == ["r1"]


def test_an_over_general_rule_is_dropped_and_a_precise_one_kept() -> None:
    # "please: FIN" fixes the refund ticket but pulls the shipping ticket to FIN.
    combee = combee_for({"refund please": "please: FIN", "lamp broken": "lamp: HW"})
    batch = [
        run("t1", "refund please", "NONE"),
        run("t2", "ship please", "NONE"),
        run("t3", "lamp broken", "NONE"),
    ]
    replay = replay_of(combee, batch)

    assert contents(combee) == ["lamp: HW"]
    verdicts = {v.content: v for v in replay.rules}
    over = verdicts["please: FIN"]
    assert not over.kept
    assert over.evidence.pulled == ["t2"]
    assert over.evidence.reason.startswith("over-general")
    assert verdicts["lamp: HW"].kept


def test_a_rule_whose_failing_runs_stay_wrong_is_dropped_as_ineffective() -> None:
    combee = combee_for({"refund please": "Always read the ticket carefully."})
    replay = replay_of(combee, [run("t1", "refund please", "NONE")])

    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.still_wrong == ["t1"]
    assert verdict.evidence.reason.startswith("ineffective")


def test_a_loss_among_several_new_rules_is_blamed_on_the_rule_that_causes_it_alone() -> None:
    # Two new rules; "refund for shipping" (right with the app's rule) turns CONFUSED.
    # Only the refund rule, tried alone on the old playbook, reproduces the loss.
    agent = rule_follower(confused_by_two=True)
    combee = combee_for(
        {"refund please": "refund: FIN", "lamp broken": "lamp: HW"},
        agent,
        agent_prompt=f"{APP_PROMPT}\n- [app-1] shipping: SHIP",
    )
    batch = [
        run("t1", "refund please", "NONE"),
        run("t3", "lamp broken", "NONE"),
        run("r1", "refund for shipping", "SHIP"),
    ]
    replay = replay_of(combee, batch)

    assert contents(combee) == ["lamp: HW"]
    by_content = {v.content: v for v in replay.rules}
    assert by_content["refund: FIN"].evidence.broken == ["r1"]
    assert by_content["lamp: HW"].evidence.broken == []
    # Three replays under the candidate, then the lost run under each rule alone.
    assert replay.calls == 5


def verify_on_two_tickets(before: Playbook, candidate: Playbook) -> tuple[Playbook, ReplayReport]:
    """``verify`` of version 2 over a refund and a shipping ticket, both answered NONE."""
    return asyncio.run(
        verify(
            before=before,
            candidate=candidate,
            traces=[run("t1", "refund please", "NONE"), run("t2", "ship please", "NONE")],
            target=ReplayTarget(model=rule_follower(), system=SystemMessage(APP_PROMPT)),
            score=make_scorer(evaluator),
            render=with_playbook,
            settings=ReplaySettings(),
            version=2,
        )
    )


def test_an_updated_rule_that_fails_goes_back_to_its_previous_text() -> None:
    before = Playbook().replace_bullets(
        [Bullet(id="oth-00001", section="others", content="refund: FIN", provenance=["t0"])]
    )
    candidate = before.replace_bullets(
        [
            Bullet(
                id="oth-00001",
                section="others",
                content="please: FIN",
                provenance=["t1"],
                updated_version=2,
            )
        ]
    )
    playbook, report = verify_on_two_tickets(before, candidate)
    assert [b.content for b in playbook.bullets] == ["refund: FIN"]
    assert report.dropped[0].evidence.pulled == ["t2"]


# --------------------------------------------------------------------------- when it runs


def test_replay_is_off_without_an_evaluator_in_auto_mode() -> None:
    agent = rule_follower()
    combee = combee_for({"refund please": "please: FIN"}, agent, evaluator=None)
    report = combee.learn([run("t1", "refund please", "NONE")]).steps[0]

    assert agent.calls == 0
    assert contents(combee) == ["please: FIN"]
    assert combee.current().playbook.bullets[0].replay is None
    assert report.replay is not None
    assert not report.replay.enabled
    assert "no evaluator" in report.replay.reason
    assert "replay" not in report.calls


def test_replay_is_off_when_the_agent_model_is_unknown() -> None:
    combee = Combee(
        prompt_id="routing", model=learner({"refund please": "x: FIN"}), evaluator=evaluator
    )
    replay = replay_of(combee, [run("t1", "refund please", "NONE")])

    assert not replay.enabled
    assert "model is unknown" in replay.reason
    assert contents(combee) == ["x: FIN"]


def test_replay_false_turns_it_off_and_true_scores_by_ground_truth() -> None:
    off = combee_for({"refund please": "please: FIN"}, replay=False)
    assert off.learn([run("t1", "refund please", "NONE")]).steps[0].replay.enabled is False  # type: ignore[union-attr]

    on = combee_for({"refund please": "refund: FIN"}, evaluator=None, replay=True)
    report = on.learn([run("t1", "refund please", "NONE")]).steps[0]
    assert report.replay is not None
    assert report.replay.turned_right == ["t1"]
    assert on.current().playbook.bullets[0].replay.status == "verified"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"replay": "always"}, "replay"),
        ({"replay": 1}, "replay"),
        ({"max_replays": 0}, "max_replays"),
        ({"agent_model": 42}, "agent_model"),
        ({"agent_prompt": 3}, "agent_prompt"),
    ],
)
def test_bad_replay_settings_are_refused_at_construction(
    kwargs: dict[str, object], name: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        AlgorithmSettings(**kwargs)  # type: ignore[arg-type]
    assert caught.value.name == name


def test_the_middleware_supplies_the_agents_model_and_prompt() -> None:
    agent_model = rule_follower()
    combee = Combee(
        prompt_id="routing",
        model=learner({"refund please": "refund: FIN"}),
        evaluator=evaluator,
        batch_size=8,
    )
    agent = create_agent(
        agent_model, tools=[], system_prompt=APP_PROMPT, middleware=[combee.middleware()]
    )
    agent.invoke({"messages": [{"role": "user", "content": "refund please"}]})
    assert agent_model.calls == 1

    replay = replay_of(combee, [run("t1", "refund please", "NONE")])

    assert replay.enabled
    assert replay.turned_right == ["t1"]
    replayed = agent_model.prompts[-1]
    assert str(replayed[0].text).startswith(APP_PROMPT)
    assert "refund: FIN" in str(replayed[0].text)


# --------------------------------------------------------------------------- cost and faults


def test_replay_calls_and_tokens_are_in_the_step_report() -> None:
    replay_off = combee_for({"refund please": "refund: FIN"}, replay=False)
    baseline = replay_off.learn([run("t1", "refund please", "NONE")]).steps[0]
    combee = combee_for({"refund please": "refund: FIN"})
    report = combee.learn([run("t1", "refund please", "NONE")]).steps[0]

    assert report.replay is not None
    assert report.calls["replay"] == report.replay.calls == 1
    assert report.replay.input_tokens > 0
    assert report.replay.output_tokens > 0
    assert report.input_tokens == baseline.input_tokens + report.replay.input_tokens
    assert report.output_tokens == baseline.output_tokens + report.replay.output_tokens


def test_replays_are_bounded_per_step_and_run_concurrently() -> None:
    # Each call waits until three are in flight: serial replays would break the barrier.
    barrier = threading.Barrier(3, timeout=5)

    def reply(messages: Sequence[BaseMessage]) -> str:
        barrier.wait()
        return "NONE"

    rules = {f"refund please {i}": f"rule{i}: FIN" for i in range(6)}
    TRUTH.update({text: "FIN" for text in rules})
    try:
        combee = combee_for(rules, FunctionChatModel(reply), max_replays=3)
        batch = [run(f"t{i}", text, "NONE") for i, text in enumerate(rules)]
        report = combee.learn(batch).steps[0]
    finally:
        for text in rules:
            TRUTH.pop(text)
    assert report.replay is not None
    assert report.replay.calls == 3
    assert len(report.replay.replayed) == 3


def test_a_failing_replay_call_does_not_fail_the_step() -> None:
    def broken(messages: Sequence[BaseMessage]) -> str:
        raise RuntimeError("agent model is down")

    combee = combee_for({"refund please": "refund: FIN"}, FunctionChatModel(broken))
    report = combee.learn([run("t1", "refund please", "NONE")]).steps[0]

    assert contents(combee) == ["refund: FIN"]
    (bullet,) = combee.current().playbook.bullets
    assert bullet.replay is not None
    assert bullet.replay.status == "unverified"
    assert report.replay is not None
    assert report.replay.failed == 1
    assert report.failed_calls["replay"] == 1
    assert report.accepted is True


def test_an_evaluator_that_raises_falls_back_to_the_ground_truth() -> None:
    calls = 0

    def flaky(trace: Trace) -> Feedback:
        nonlocal calls
        calls += 1
        raise ValueError("evaluator bug")

    combee = combee_for({"refund please": "refund: FIN"}, evaluator=flaky)
    with_truth = combee.learn([run("t1", "refund please", "NONE")]).steps[0]
    assert calls == 1
    assert with_truth.replay is not None
    assert with_truth.replay.turned_right == ["t1"]

    no_truth = Trace(id="t2", input="lamp broken", output="NONE", feedback=Feedback(correct=False))
    # No guard: a rule resting on no trusted field would be refused before replay.
    combee = combee_for({"lamp broken": "lamp: HW"}, evaluator=flaky, guard=None)
    replay = replay_of(combee, [no_truth])
    assert replay.unscored == 1
    assert combee.current().playbook.bullets[0].replay.status == "unverified"  # type: ignore[union-attr]


def test_a_spent_budget_counts_replays_as_failed_calls() -> None:
    budget = LearnerBudget(calls_per_hour=2)  # the step's reflect and curate calls take both
    combee = combee_for({"refund please": "refund: FIN"}, budget=budget)
    replay = replay_of(combee, [run("t1", "refund please", "NONE")])

    assert replay.failed == 1
    assert contents(combee) == ["refund: FIN"]


# --------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("output", "answer", "expected"),
    [
        ("FIN-7Q", "fin-7q", True),
        ("The team is **FIN-7Q**.", "FIN-7Q", True),
        ("FIN-7QX", "FIN-7Q", False),
        ("```\nLOG-8W\n```", "LOG-8W", True),
        ("anything", "", False),
    ],
)
def test_answers_match(output: str, answer: str, expected: bool) -> None:
    assert answers_match(output, answer) is expected


def test_the_replayed_call_is_the_runs_last_model_call_without_running_tools() -> None:
    trace = Trace(
        id="tool-run",
        input="book a room",
        messages=[
            TraceMessage(role="human", content="book a room"),
            TraceMessage(
                role="ai",
                content="",
                tool_calls=[{"name": "find_room", "args": {"size": 4}, "id": "c1"}],
            ),
            TraceMessage(role="tool", content="room 12", name="find_room"),
            TraceMessage(role="ai", content="Booked room 12."),
        ],
    )
    messages = replay_messages(trace, SystemMessage("You book rooms."))

    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, LCToolMessage]
    assert isinstance(messages[2], AIMessage)
    assert messages[2].tool_calls[0]["args"] == {"size": 4}
    assert isinstance(messages[3], LCToolMessage)
    assert messages[3].tool_call_id == "c1"


def test_a_hand_built_trace_replays_from_its_input() -> None:
    messages = replay_messages(Trace(input="where is my refund"), None)
    assert [(type(m), m.text) for m in messages] == [(HumanMessage, "where is my refund")]


def _search(query: str) -> str:
    """Search the catalogue."""
    return query


def _replay_search_rule(model: Any, judge: Any, settings: ReplaySettings) -> Any:
    """Verify a one-rule candidate learned from one failing run, the agent bound to search."""
    candidate = Playbook().replace_bullets(
        [Bullet(id="oth-00001", section="others", content="search first", provenance=["t"])]
    )
    failing = Trace(id="t", input="find x", output="no idea", feedback=Feedback(correct=False))
    _, report = asyncio.run(
        verify(
            before=Playbook(),
            candidate=candidate,
            traces=[failing],
            target=ReplayTarget(model=model, tools=(_search,)),
            score=make_scorer(judge),
            render=with_playbook,
            settings=settings,
            version=1,
        )
    )
    return report


def test_tools_are_bound_for_the_replay_and_tool_calls_reach_the_evaluator() -> None:
    model = ScriptedChatModel(
        [AIMessage(content="", tool_calls=[{"name": "_search", "args": {"query": "x"}, "id": "1"}])]
    )
    seen: list[Trace] = []

    def judge(trace: Trace) -> Feedback:
        seen.append(trace)
        return Feedback(correct=[c.name for c in trace.tool_calls] == ["_search"])

    report = _replay_search_rule(model, judge, ReplaySettings())
    assert model.bound_tools == ["_search"]
    assert [c.args for c in seen[-1].tool_calls] == [{"query": "x"}]
    assert report.rules[0].evidence.fixed == ["t"]


@pytest.mark.parametrize("recover", [True, False])
def test_a_replayed_call_written_as_text_is_read_as_the_agent_reads_it(recover: bool) -> None:
    # A small model on a plain ChatOpenAI writes the call as text; the middleware makes
    # it a real call (``ServingSettings.recover_tool_calls``), so replay must too.
    model = ScriptedChatModel(['{{"name": "_search", "arguments": {"query": "x"}}}'])

    def judge(trace: Trace) -> Feedback:
        return Feedback(correct=[c.name for c in trace.tool_calls] == ["_search"])

    report = _replay_search_rule(
        model, judge, ReplaySettings(serving=ServingSettings(recover_tool_calls=recover))
    )
    assert report.rules[0].evidence.fixed == (["t"] if recover else [])


def test_the_background_learner_replays_with_the_served_agents_model() -> None:
    agent_model = rule_follower()
    combee = Combee(
        prompt_id="routing",
        model=learner({"refund please": "refund: FIN", "ship please": "please: SHIP"}),
        evaluator=evaluator,
        # Verdicts without ground truth: no trusted field states a code, so the guard
        # would refuse both rules before replay could judge them.
        guard=None,
        batch_size=3,
        serving=ServingSettings(refresh_seconds=0.01),
        learner=LearnerSettings(poll_seconds=0.01),
    )
    agent = create_agent(
        agent_model, tools=[], system_prompt=APP_PROMPT, middleware=[combee.middleware()]
    )
    with combee.running():
        for text in ("refund please", "ship please", "lamp broken"):
            agent.invoke({"messages": [{"role": "user", "content": text}]})
        assert combee.learner.wait_for_steps(1, timeout=30)

    # The evaluator gives verdicts, no ground truth. Under the candidate, "please: SHIP"
    # (the agent follows the last matching rule) pulled the refund ticket to SHIP: it is
    # dropped, and the refund ticket, replayed again without it, verifies "refund: FIN".
    (bullet,) = combee.current().playbook.bullets
    assert bullet.content == "refund: FIN"
    assert bullet.replay is not None
    assert bullet.replay.status == "verified"
    (report,) = combee.learner.stats.reports
    assert report.replay is not None
    (dropped,) = report.replay.dropped
    assert dropped.content == "please: SHIP"
    assert dropped.evidence.pulled == bullet.replay.fixed
    # Three served runs; three replays under the candidate, one without the dropped rule.
    assert agent_model.calls == 3 + 3 + 1


def test_a_pending_rule_promoted_by_the_step_is_judged_like_a_new_one() -> None:
    pending = Bullet(
        id="oth-00001", section="others", content="please: FIN", provenance=["t1"], pending=True
    )
    before = Playbook().replace_bullets([pending])
    candidate = before.replace_bullets([pending.model_copy(update={"pending": False})])
    playbook, report = verify_on_two_tickets(before, candidate)
    assert [v.evidence.status for v in report.rules] == ["rejected"]
    # Rejected, it goes back to waiting for support, as it was before the step.
    assert [(b.content, b.pending) for b in playbook.bullets] == [("please: FIN", True)]


def test_replay_calls_are_traced_under_the_learning_step_and_stored_with_the_version(
    tmp_path: Path,
) -> None:
    tracer = RunNames()
    with SqliteStore.from_conn_string(str(tmp_path / "c.db")) as store:
        store.setup()
        combee = combee_for({"refund please": "refund: FIN"}, store=store, callbacks=[tracer])
        combee.learn([run("t1", "refund please", "NONE")])
        stored = combee.get(1).playbook.bullets[0].replay
    assert stored is not None
    assert stored.status == "verified"
    assert stored.fixed == ["t1"]
    root = next(r for r in tracer.roots if r.name == "combee.learn_step")
    (replay,) = [r for r in tracer.runs if r.name == "combee.replay"]
    assert tracer.parents()[replay.id] == root.id
    assert replay.extra["metadata"]["combee_replay_of"] == "t1"
    assert root.outputs is not None
    assert root.outputs["report"]["replay"]["turned_right"] == ["t1"]
    assert root.extra["metadata"]["combee_calls"]["replay"] == 1


def test_a_replay_leaves_out_the_threads_earlier_turns_the_trace_keeps() -> None:
    from langgraph_combee._adoption.replay import call_prefix
    from langgraph_combee._core.types import TraceMessage

    trace = Trace(
        input="new question",
        output="new answer",
        messages=[
            TraceMessage(role="human", content="old question", attested=False),
            TraceMessage(role="human", content="new question"),
            TraceMessage(role="ai", content="new answer"),
        ],
    )
    assert [m.content for m in call_prefix(trace)] == ["new question"]
