"""A ``create_agent`` ticket router that learns on the LangGraph server's own store.

Listed in ``langgraph.json`` as the graph ``router``. It runs offline by default:
the agent is a scripted model that answers with the team a learned rule names
(``GENERAL`` without one), the learner a test double that writes one rule per
wrong answer. Set ``COMBEE_AGENT_MODEL`` and ``COMBEE_LEARNER_MODEL`` to
``"provider:name"`` strings (``init_chat_model``) to use real models.

``shared_combee`` makes one ``Combee`` per process: ``routes.py`` imports this
module again (the server loads it under a name of its own) and gets the same
object, so feedback sent to the routes reaches the runs this graph captured.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee import CaptureSettings, LearnerSettings, ServingSettings
from langgraph_combee.platform import shared_combee
from langgraph_combee.testing import FunctionChatModel, fake_learner

PROMPT_ID = "ticket-router"
TOPICS = ("refund", "parcel", "password", "invoice")
RULE = re.compile(r"'(\w+)' go to ([A-Z]+-\d+)")


def _offline_reply(messages: Sequence[BaseMessage]) -> str:
    """Answer with the team a learned rule in the system prompt names."""
    system = next((m.text for m in messages if isinstance(m, SystemMessage)), "")
    ticket = messages[-1].text
    for topic, team in RULE.findall(system):
        if topic in ticket:
            return team
    return "GENERAL"


def _offline_rule(task_input: str, truth: str | None, output: str) -> str:
    """The offline learner's insight: one routing rule per wrong answer."""
    if truth is None or truth == output.strip():
        return ""
    topic = next((t for t in TOPICS if t in task_input), None)
    return "" if topic is None else f"Tickets about '{topic}' go to {truth}."


def _model(variable: str, offline: BaseChatModel) -> BaseChatModel:
    name = os.environ.get(variable)
    return init_chat_model(name) if name else offline


combee = shared_combee(
    prompt_id=PROMPT_ID,
    model=_model("COMBEE_LEARNER_MODEL", fake_learner(insight=_offline_rule)),
    batch_size=4,
    # Feedback comes later, through POST /combee/ticket-router/feedback: a trace
    # waits up to a minute for it, and is learned from as soon as it arrives.
    capture=CaptureSettings(feedback_wait_seconds=60.0),
    serving=ServingSettings(refresh_seconds=1.0),
    learner=LearnerSettings(min_batch=1, max_wait_seconds=2.0, poll_seconds=0.5),
)

graph = create_agent(
    _model("COMBEE_AGENT_MODEL", FunctionChatModel(_offline_reply)),
    tools=[],
    system_prompt="Route the support ticket: answer with the team's code only.",
    middleware=[combee.middleware()],
)
