"""LangSmith, offline: a real client against a loopback server records each learning step."""

from __future__ import annotations

from typing import Any

import langsmith
from langchain_core.tracers.langchain import LangChainTracer

from langgraph_combee import Combee
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces
from tests.langsmith_server import Recorder, langsmith_server

__all__ = ["langsmith_server"]


def _metadata(body: dict[str, Any]) -> dict[str, Any]:
    return dict((body.get("extra") or {}).get("metadata") or {})


def test_a_learning_step_is_one_trace_with_metadata_and_diff(langsmith_server: str) -> None:
    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="combee-test")
    combee = Combee(prompt_id="router", model=fake_learner(), batch_size=9, callbacks=[tracer])
    report = combee.learn(failing_traces(9))
    tracer.wait_for_futures()
    step = report.steps[0]
    assert step.run_id is not None

    posts = {b["id"]: b for m, p, b in Recorder.bodies if m == "POST" and p == "/runs"}
    patches = {p.rsplit("/", 1)[-1]: b for m, p, b in Recorder.bodies if m == "PATCH"}
    root = posts[step.run_id]
    assert root["name"] == "combee.learn_step" and root.get("parent_run_id") is None
    children = [b for b in posts.values() if b.get("parent_run_id") == step.run_id]
    assert sorted(b["name"] for b in children) == sorted(
        ["combee.reflect"] * 9 + ["combee.propose"] * 3 + ["combee.aggregate"]
    )
    # Every run of the step shares the root's trace.
    assert all(b.get("trace_id") == step.run_id for b in children)

    end = patches[step.run_id]
    meta = _metadata(end)
    assert meta["combee_prompt_id"] == "router"
    assert meta["combee_strategy"] == "combee"
    assert meta["combee_batch_size"] == 9
    assert (meta["combee_version_before"], meta["combee_version_after"]) == (0, 1)
    assert meta["combee_group_sizes"] == step.group_sizes
    assert meta["combee_ops"]["add"] == 9
    assert meta["combee_input_tokens"] == step.input_tokens > 0
    assert meta["combee_decision"] == "accepted"
    assert meta["combee_decision_policy"] == "accept_all"
    outputs = end["outputs"]
    assert outputs["summary"] == "+9 -0 ~0"
    assert len(outputs["added"]) == 9
    assert all(len(b["provenance"]) == 1 for b in outputs["added"])
    first = outputs["added"][0]
    assert f"[{first['id']}]" in outputs["diff"] and first["provenance"][0] in outputs["diff"]


def test_a_failed_step_is_traced_as_an_error(langsmith_server: str) -> None:
    import pytest

    from langgraph_combee.errors import LearningError
    from langgraph_combee.testing import FunctionChatModel

    def down(messages: object) -> str:
        raise ConnectionError("no LLM")

    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="combee-test")
    combee = Combee(
        prompt_id="router",
        model=FunctionChatModel(down),
        batch_size=2,
        max_attempts=1,
        callbacks=[tracer],
    )
    with pytest.raises(LearningError):
        combee.learn(failing_traces(2))
    tracer.wait_for_futures()
    roots = [
        b for m, _, b in Recorder.bodies if m == "POST" and b.get("name") == "combee.learn_step"
    ]
    [root] = roots
    [end] = [b for m, p, b in Recorder.bodies if m == "PATCH" and p.endswith(root["id"])]
    assert "all 2 reflections failed" in (end.get("error") or "")
