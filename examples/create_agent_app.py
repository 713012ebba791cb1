"""A `create_agent` ticket router that improves its own system prompt while it serves.

Everything runs offline: the agent's model is a scripted stand-in that routes a
ticket correctly only when its system prompt holds a rule for the ticket's topic
(as a small real model does), and the learner is ``fake_learner()``. Feedback
arrives late, as a resolved ticket would, through ``combee.feedback(run_id, ...)``.

    python examples/create_agent_app.py [--tickets 60]
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee import Combee, LearnerSettings, ServingSettings
from langgraph_combee.testing import FunctionChatModel, fake_learner

RULES = {
    "refund": "FIN-REFUNDS",
    "parcel": "LOG-DELAYS",
    "password": "SEC-ACCESS",
    "invoice": "ACC-BILLING",
    "screen": "HW-RMA",
    "crash": "APP-BUGS",
}
TEMPLATES = [
    "Hi, I have a question about my {topic}.",
    "Urgent: {topic} problem since yesterday.",
    "Can someone help with a {topic} issue?",
]
RULE_LINE = re.compile(r"Tickets about '(\w+)' go to ([A-Z]+-[A-Z]+)")


def agent_model_reply(messages: Sequence[BaseMessage]) -> str:
    """Route by the rules written in the system prompt; without one, say GENERAL."""
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    ticket = messages[-1].text.lower()
    for topic, team in RULE_LINE.findall(system):
        if topic in ticket:
            return team
    return "GENERAL"


def topic_rule(task_input: str, ground_truth: str | None, output: str) -> str:
    """What a good reflector would conclude from a misrouted ticket."""
    if ground_truth is None or output.strip() == ground_truth:
        return ""
    topic = next((t for t in RULES if t in task_input.lower()), None)
    return f"Tickets about '{topic}' go to {ground_truth}." if topic else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=60)
    args = parser.parse_args()

    combee = Combee(
        prompt_id="ticket-router",
        model=fake_learner(insight=topic_rule),
        batch_size=4,
        serving=ServingSettings(refresh_seconds=0.2),
        learner=LearnerSettings(poll_seconds=0.05),
    )
    agent = create_agent(
        FunctionChatModel(agent_model_reply),
        tools=[],
        system_prompt="You route support tickets. Answer with the team code only.",
        middleware=[combee.middleware()],
    )
    topics = list(RULES)
    window: list[bool] = []
    last_version = 0
    with combee.running():
        for i in range(args.tickets):
            topic = topics[i % len(topics)]
            ticket = TEMPLATES[i % len(TEMPLATES)].format(topic=topic)
            run_id = uuid.uuid4()
            result = agent.invoke(
                {"messages": [{"role": "user", "content": ticket}]}, config={"run_id": run_id}
            )
            answer = result["messages"][-1].text
            right = answer == RULES[topic]
            window.append(right)
            combee.feedback(run_id, correct=right, ground_truth=RULES[topic])
            served = combee.current()  # the version in force, read from the store
            if served.version != last_version:
                bullets = served.playbook.bullets
                print(f"  run {i:3d}: now serving v{served.version} ({len(bullets)} bullets)")
                last_version = served.version
            if len(window) == 10:
                print(f"runs {i - 9:3d}-{i:3d}: accuracy {sum(window) / 10:.0%}")
                window.clear()
            time.sleep(0.02)  # traffic arrives over time; the learner works in between
    print("\nLearned playbook:")
    print(combee.current().render())
    print(f"\nLearner: {combee.learner.describe()}")


if __name__ == "__main__":
    main()
