"""A plain `StateGraph` ticket router that learns its system prompt, in two styles.

* node style: ``combee.node()`` keeps the learned prompt first in ``messages``;
* wrap style: the app's own node prepends its system prompt and calls
  ``combee.wrap_model(llm)``, which appends the learned playbook to it.

Both graphs are wrapped with ``combee.instrument(graph)``, which captures every
run as a trace; feedback arrives late, as a resolved ticket would, through
``combee.feedback(run_id, ...)``, and the background learner turns it into new
prompt versions while the app keeps serving. Everything runs offline: the
agent's model is a scripted stand-in that routes a ticket correctly only when
its system prompt holds a rule for the ticket's topic (as a small real model
does), and the learner is ``fake_learner()``.

    python examples/stategraph_app.py [--tickets 36]
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_combee import Combee, LearnerSettings, ServingSettings
from langgraph_combee.testing import FunctionChatModel, fake_learner

APP_PROMPT = "You route support tickets. Answer with the team code only."
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


def route(messages: Sequence[BaseMessage]) -> str:
    """The agent's model: route by the rules in its system prompt, else say GENERAL."""
    system = "\n".join(str(m.text) for m in messages if isinstance(m, SystemMessage))
    ticket = str(messages[-1].text).lower()
    for topic, team in RULE_LINE.findall(system):
        if topic in ticket:
            return str(team)
    return "GENERAL"


def topic_rule(task_input: str, ground_truth: str | None, output: str) -> str:
    """What a good reflector concludes from a misrouted ticket."""
    if ground_truth is None or output.strip() == ground_truth:
        return ""
    topic = next((t for t in RULES if t in task_input.lower()), None)
    return f"Tickets about '{topic}' go to {ground_truth}." if topic else ""


def node_style(combee: Combee) -> Any:
    """``combee.node()`` puts the learned prompt into the state, first."""
    llm = FunctionChatModel(route)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("combee", combee.node())
    graph.add_node("agent", agent)
    graph.add_edge(START, "combee")
    graph.add_edge("combee", "agent")
    graph.add_edge("agent", END)
    return combee.instrument(graph)


def wrap_style(combee: Combee) -> Any:
    """The app keeps its own prompt; ``combee.wrap_model`` appends the playbook to it."""
    llm = combee.wrap_model(FunctionChatModel(route))  # bind_tools first, if any

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        # combee.system_prompt(APP_PROMPT) would return the combined text instead.
        return {"messages": [llm.invoke([SystemMessage(APP_PROMPT), *state["messages"]], config)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return combee.instrument(graph)


def serve(style: str, tickets: int) -> None:
    combee = Combee(
        prompt_id=f"ticket-router-{style}",
        model=fake_learner(insight=topic_rule),
        batch_size=4,
        serving=ServingSettings(refresh_seconds=0.2),
        learner=LearnerSettings(poll_seconds=0.05),
    )
    app = node_style(combee) if style == "node" else wrap_style(combee)
    topics = list(RULES)
    window: list[bool] = []
    last_version = 0
    print(f"== {style} style")
    with combee.running():  # the background learner, on a thread of its own
        for i in range(tickets):
            topic = topics[i % len(topics)]
            ticket = TEMPLATES[i % len(TEMPLATES)].format(topic=topic)
            run_id = uuid.uuid4()
            result = app.invoke({"messages": [HumanMessage(ticket)]}, {"run_id": run_id})
            right = result["messages"][-1].text == RULES[topic]
            window.append(right)
            combee.feedback(run_id, correct=right, ground_truth=RULES[topic])
            served = combee.current()  # the version in force, read from the store
            if served.version != last_version:
                bullets = len(served.playbook.bullets)
                print(f"  run {i:3d}: now serving v{served.version} ({bullets} bullets)")
                last_version = served.version
            if len(window) == 12:
                print(f"runs {i - 11:3d}-{i:3d}: accuracy {sum(window) / len(window):.0%}")
                window.clear()
            time.sleep(0.02)  # traffic arrives over time; the learner works in between
    print(f"learner: {combee.learner.describe()}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=36)
    args = parser.parse_args()
    for style in ("node", "wrap"):
        serve(style, args.tickets)


if __name__ == "__main__":
    main()
