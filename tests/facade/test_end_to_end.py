"""End to end: a create_agent app serving traffic while the background learner improves it."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee import Combee, LearnerSettings, ServingSettings
from langgraph_combee.testing import FunctionChatModel, fake_learner

TEAMS = {"refund": "FIN-1", "parcel": "LOG-2", "password": "SEC-3", "invoice": "ACC-4"}
RULE = re.compile(r"'(\w+)' go to ([A-Z]+-\d)")


def _agent_reply(messages: Sequence[BaseMessage]) -> str:
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    ticket = messages[-1].text
    for topic, team in RULE.findall(system):
        if topic in ticket:
            return team
    return "GENERAL"


def _rule(task_input: str, truth: str | None, output: str) -> str:
    if truth is None or truth == output.strip():
        return ""
    topic = next(t for t in TEAMS if t in task_input)
    return f"Tickets about '{topic}' go to {truth}."


def _serve(combee: Combee, n: int) -> tuple[list[str], FunctionChatModel]:
    model = FunctionChatModel(_agent_reply)
    agent = create_agent(
        model, tools=[], system_prompt="Route the ticket.", middleware=[combee.middleware()]
    )
    answers = []
    for i in range(n):
        topic = list(TEAMS)[i % len(TEAMS)]
        run_id = uuid.uuid4()
        out = agent.invoke(
            {"messages": [{"role": "user", "content": f"my {topic} question #{i}"}]},
            config={"run_id": run_id},
        )
        answer = out["messages"][-1].text
        answers.append(answer)
        combee.feedback(run_id, correct=answer == TEAMS[topic], ground_truth=TEAMS[topic])
    return answers, model


def test_twenty_runs_with_feedback_teach_the_agent() -> None:
    combee = Combee(prompt_id="router", model=fake_learner(insight=_rule), batch_size=4)
    answers, _ = _serve(combee, 20)
    assert answers.count("GENERAL") == 20
    learner = combee.learner
    combee.flush()
    while asyncio.run(learner.tick()):
        pass
    version = combee.current()
    assert version.version >= 1 and version.status == "accepted"
    assert len(version.playbook.bullets) == 4
    # The next run's system prompt holds the learned bullets, after the app's own prompt.
    answers, model = _serve(combee, 4)
    assert answers == list(TEAMS.values())
    system = model.prompts[-1][0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("Route the ticket.")
    assert "Tickets about 'invoice' go to ACC-4." in system.text


def test_learning_in_the_background_while_serving() -> None:
    combee = Combee(
        prompt_id="router",
        model=fake_learner(insight=_rule),
        batch_size=4,
        serving=ServingSettings(refresh_seconds=0.01),
        learner=LearnerSettings(poll_seconds=0.01),
    )
    with combee.running():
        _serve(combee, 8)
        assert combee.learner.wait_for_steps(2, timeout=30)
    answers, _ = _serve(combee, 4)
    assert answers == list(TEAMS.values())


def test_a_learner_that_always_fails_leaves_the_agent_untouched() -> None:
    def down(messages: object) -> str:
        raise ConnectionError("learner LLM unreachable")

    baseline, baseline_model = _serve(Combee(prompt_id="router"), 12)
    combee = Combee(
        prompt_id="router",
        model=FunctionChatModel(down),
        batch_size=4,
        learner=LearnerSettings(max_attempts=1, poll_seconds=0.01, step_backoff_seconds=0.01),
    )
    with combee.running():
        answers, model = _serve(combee, 12)
        for _ in range(200):
            if combee.learner.stats.failed_steps >= 2:
                break
            time.sleep(0.01)
    assert answers == baseline
    # Same agent model calls, same prompts: the failing learner added nothing to the hot path.
    assert model.calls == baseline_model.calls == 12
    assert [p[0].text for p in model.prompts] == [p[0].text for p in baseline_model.prompts]
    assert combee.learner.stats.failed_steps >= 2
    assert combee.history() == []
    assert combee.queue().pending_count() == 12  # nothing lost
