"""ValidationGate: its decision reads as its min_delta means, and from_agent runs an agent."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage

from langgraph_combee import Combee, ValidationGate
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.prompting import join_prompt
from langgraph_combee._learner.agent_runner import agent_runner, served_prompt
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, fake_learner
from langgraph_combee.types import PromptVersion
from tests.helpers import failing_traces


def _scores(candidate: float, current: float):  # type: ignore[no-untyped-def]
    async def run(version: PromptVersion, example: str) -> float:
        return candidate if version.playbook.bullets else current

    return run


@pytest.mark.parametrize(
    ("min_delta", "candidate", "accepted", "verdict"),
    [
        (0.5, 1.0, True, "better by at least 0.5"),
        (0.5, 0.25, False, "not better by at least 0.5"),
        (-0.1, 0.95, True, "not worse by more than 0.1"),
        (-0.1, 0.5, False, "worse by more than 0.1"),
        (0.0, 1.0, True, "not worse"),
        (0.0, 0.75, False, "worse"),
    ],
)
def test_the_decision_says_what_min_delta_asked(
    min_delta: float, candidate: float, accepted: bool, verdict: str
) -> None:
    current = 1.0 if min_delta <= 0 else 0.0
    gate = ValidationGate(["x"], _scores(candidate, current), min_delta=min_delta)
    combee = Combee(prompt_id="gate", model=fake_learner(), batch_size=2, acceptance=gate)
    assert combee.learn(failing_traces(2)).steps[0].accepted is accepted
    (version,) = combee.history()
    assert version.decision is not None
    delta = candidate - current
    assert version.decision.reason == (
        f"candidate v1 scored {candidate:.3f} vs {current:.3f} for v0 on 1 examples "
        f"(delta {delta:+.3f}): {verdict}"
    )


SYSTEM = "You route support tickets. Reply with the team code only."


def _router(messages: Sequence[BaseMessage]) -> str:
    """A model that follows the playbook: FIN-REFUNDS once a rule says so, else BILLING."""
    system = str(messages[0].content)
    assert system.startswith(SYSTEM)  # the app's prompt first, the playbook after it
    return "FIN-REFUNDS" if "answer FIN-REFUNDS" in system else "BILLING"


def _version(*rules: str) -> PromptVersion:
    ops = [Add(section="others", content=rule) for rule in rules]
    return PromptVersion(
        prompt_id="router", version=len(rules), playbook=Playbook().apply(ops).playbook
    )


def test_from_agent_runs_a_create_agent_under_each_version() -> None:
    built: list[str] = []

    def make(prompt: str) -> object:
        built.append(prompt)
        return create_agent(FunctionChatModel(_router), tools=[], system_prompt=prompt)

    examples = [{"input": "I want a refund for order 7", "label": "FIN-REFUNDS"}]
    gate = ValidationGate.from_agent(
        examples,
        agent=make,
        system_prompt=SYSTEM,
        grade=lambda example, answer: answer.strip() == example["label"],
        min_delta=0.5,
    )
    combee = Combee(prompt_id="router", acceptance=gate)
    candidate = combee.registry().add_candidate(
        _version("When the ticket mentions a refund, answer FIN-REFUNDS.")
    )
    writer = combee._learner_parts.writer  # the writer asks the gate, as a step does
    final = asyncio.run(writer.decide(combee.registry(), candidate, combee.current()))
    assert final.status == "accepted"
    assert final.decision is not None
    assert final.decision.reason.endswith("(delta +1.000): better by at least 0.5")
    assert SYSTEM in built  # version 0: the app's prompt alone
    assert any("answer FIN-REFUNDS" in prompt for prompt in built)


@pytest.mark.parametrize(
    "request_text", ["I want a refund", "my password expired", "hello", "refund my password"]
)
def test_the_runner_serves_what_the_middleware_serves(request_text: str) -> None:
    version = _version(
        "When refund, answer FIN-REFUNDS.",
        "When password, answer IT-ACCESS.",
        "When invoice, answer BILLING.",
    )
    server = Combee(prompt_id="router")._agent.server
    settings = server.serving_settings
    served = served_prompt(
        SYSTEM, version, request_text, focus=settings.focus_rules, embedder=settings.embedder
    )
    assert served == join_prompt(SYSTEM, server.served(version, request_text))
    assert served_prompt(SYSTEM, PromptVersion(prompt_id="router"), "x", focus=3) == SYSTEM


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"agent": "create_agent"}, "agent='create_agent' is not allowed: a callable"),
        ({"system_prompt": None}, "system_prompt=None is not allowed: a str"),
        ({"grade": 1}, "grade=1 is not allowed: a callable"),
        ({"focus_rules": -1}, "focus_rules=-1 is not allowed"),
    ],
)
def test_agent_runner_arguments_are_validated(given: dict[str, object], match: str) -> None:
    arguments: dict[str, object] = {
        "agent": lambda prompt: None,
        "system_prompt": SYSTEM,
        "grade": lambda example, answer: True,
        **given,
    }
    agent = arguments.pop("agent")
    with pytest.raises(ConfigurationError, match=match):
        agent_runner(agent, **arguments)  # type: ignore[arg-type]
