"""LangSmith, offline: a real client against a loopback server records each learning step."""

from __future__ import annotations

import json
from typing import Any

import langsmith
from langchain_core.tracers.langchain import LangChainTracer

from langgraph_combee import CaptureSettings, Combee, LearnerSettings, ServingSettings
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces
from tests.langsmith_server import Recorder, langsmith_server

__all__ = ["langsmith_server"]


def _metadata(body: dict[str, Any]) -> dict[str, Any]:
    return dict((body.get("extra") or {}).get("metadata") or {})


def test_a_learning_step_is_one_trace_with_metadata_and_diff(langsmith_server: str) -> None:
    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    tracer = LangChainTracer(client=client, project_name="combee-test")
    combee = Combee(
        prompt_id="router",
        model=fake_learner(),
        batch_size=9,
        learner=LearnerSettings(callbacks=[tracer]),
    )
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
        learner=LearnerSettings(max_attempts=1, callbacks=[tracer]),
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


# ---------------------------------------------------------------- reading from LangSmith

PROJECT_ID = "5b1f0c2e-0000-4000-8000-000000000001"
TENANT_ID = "5b1f0c2e-0000-4000-8000-000000000002"


def _run(i: int, answer: str, *, version: int | None = 1) -> dict[str, Any]:
    run_id = f"00000000-0000-4000-8000-{i:012d}"
    return {
        "id": run_id,
        "trace_id": run_id,
        "name": "LangGraph",
        "run_type": "chain",
        "start_time": f"2026-11-30T10:00:{i:02d}",
        "end_time": f"2026-11-30T10:00:{i:02d}.500000",
        "inputs": {"messages": [{"role": "user", "content": f"refund ticket {i}"}]},
        "outputs": {
            "messages": [
                {"role": "user", "content": f"refund ticket {i}"},
                {"type": "ai", "content": answer},
            ]
        },
        "extra": {"metadata": {"combee_version": version, "thread_id": f"th-{i}"}},
        "session_id": PROJECT_ID,
    }


def _feedback(i: int, key: str, score: float | None, **extra: Any) -> dict[str, Any]:
    run_id = f"00000000-0000-4000-8000-{i:012d}"
    return {
        "id": f"00000000-0000-4000-9000-{i:012d}",
        "run_id": run_id,
        "trace_id": run_id,
        "key": key,
        "score": score,
        "created_at": "2026-11-30T11:00:00",
        "modified_at": "2026-11-30T11:00:00",
        **extra,
    }


def _serve_project(runs: list[dict[str, Any]], feedback: list[dict[str, Any]]) -> None:
    Recorder.responses = {
        ("GET", "/sessions"): [
            {
                "id": PROJECT_ID,
                "name": "prod",
                "tenant_id": TENANT_ID,
                "reference_dataset_id": None,
                "start_time": "2026-11-30T09:00:00",
            }
        ],
        ("POST", "/runs/query"): {"runs": runs, "cursors": {"next": None}},
        ("GET", "/feedback"): feedback,
    }


def test_traces_from_project_reads_runs_and_folds_feedback(langsmith_server: str) -> None:
    from langgraph_combee.langsmith import traces_from_project

    _serve_project(
        [_run(2, "GENERAL"), _run(1, "FIN-7")],
        [
            _feedback(1, "correctness", 1.0, comment="right"),
            _feedback(2, "correctness", 0.0, correction={"output": "FIN-7"}),
            _feedback(2, "user_score", 0.2, comment="slow"),
        ],
    )
    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    traces = traces_from_project(client, "prod")
    assert [t.input for t in traces] == ["refund ticket 1", "refund ticket 2"]  # oldest first
    first, second = traces
    assert first.output == "FIN-7" and first.prompt_version == 1 and first.thread_id == "th-1"
    assert first.feedback is not None and first.feedback.correct is True
    assert second.feedback is not None
    assert (second.feedback.correct, second.feedback.ground_truth) == (False, "FIN-7")
    assert second.feedback.score == 0.2 and second.feedback.comment == "slow"
    assert second.feedback.source == "langsmith"
    assert first.latency_seconds == 0.5
    [query] = [b for m, p, b in Recorder.bodies if p.startswith("/runs/query")]
    assert query["is_root"] is True and query["session"] == [PROJECT_ID]

    combee = Combee(prompt_id="router", model=fake_learner(), batch_size=2)
    report = combee.learn(traces)
    assert [b.provenance for b in report.playbook.bullets] == [[second.id]]


def test_poll_feedback_delivers_langsmith_feedback_to_waiting_traces(
    langsmith_server: str,
) -> None:
    from langgraph_combee import Trace
    from langgraph_combee.langsmith import poll_feedback

    run_id = "00000000-0000-4000-8000-000000000003"
    Recorder.responses = {
        ("GET", "/feedback"): [_feedback(3, "correctness", 0.0, correction="SEC-2")]
    }
    combee = Combee(prompt_id="router", capture=CaptureSettings(feedback_wait_seconds=3600))
    combee.capture(Trace(id=run_id, input="password reset", output="GENERAL"))
    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    assert poll_feedback(combee, client, [run_id, "00000000-0000-4000-8000-000000000009"]) == 1
    combee.flush()
    [trace] = combee.queue().claim(5, holder="t", ready_only=True)
    assert trace.feedback is not None
    assert (trace.feedback.correct, trace.feedback.ground_truth) == (False, "SEC-2")


def test_accepted_versions_are_committed_to_the_prompt_hub(langsmith_server: str) -> None:
    from langgraph_combee.langsmith import LangSmithPromptHub

    repo = {
        "repo_handle": "router",
        "id": "00000000-0000-4000-8000-00000000000a",
        "tenant_id": TENANT_ID,
        "created_at": "2026-11-30T09:00:00",
        "updated_at": "2026-11-30T09:00:00",
        "is_public": False,
        "is_archived": False,
        "tags": [],
        "owner": None,
        "full_name": "router",
        "num_likes": 0,
        "num_downloads": 0,
        "num_views": 0,
        "num_commits": 0,
    }
    Recorder.responses = {
        ("GET", "/repos/"): {"repo": repo},
        ("GET", "/commits/"): {"commits": []},
        ("POST", "/commits/"): {"commit": {"commit_hash": "0123456789ab", "id": repo["id"]}},
        ("GET", "/settings"): {
            "id": TENANT_ID,
            "display_name": "t",
            "created_at": "2026-11-30T09:00:00",
        },
    }
    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    hub = LangSmithPromptHub(client, base_prompt="Route {tickets} carefully.")
    combee = Combee(
        prompt_id="router",
        model=fake_learner(),
        batch_size=2,
        serving=ServingSettings(on_version=[hub]),
    )
    combee.learn(failing_traces(2))
    combee.rollback(0, reason="bad rules")
    commits = [b for m, p, b in Recorder.bodies if m == "POST" and p == "/commits/-/router"]
    assert len(commits) == 2 and len(hub.pushed) == 2
    first, second = commits
    assert first["description"].startswith("combee v1: +2 -0 ~0; accept_all")
    assert second["description"].startswith("combee v2: +0 -2 ~0; rollback")
    manifest = json.dumps(first["manifest"])
    assert "Route {tickets} carefully." in manifest and "expected answer" in manifest


# ---------------------------------------------------------------- polling LangSmith feedback


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _waiting_combee(client: langsmith.Client, **source: Any) -> Combee:
    from langgraph_combee.langsmith import LangSmithFeedback

    return Combee(
        prompt_id="router",
        model=fake_learner(),
        batch_size=2,
        capture=CaptureSettings(feedback_wait_seconds=3600),
        learner=LearnerSettings(
            feedback_source=LangSmithFeedback(client, **{"interval_seconds": 60.0, **source})
        ),
    )


def _learner(combee: Combee, clock: _Clock) -> Any:
    from langgraph_combee._learner.learner import BackgroundLearner

    return BackgroundLearner(
        combee._learner_parts, LearnerSettings(min_batch=2, max_wait_seconds=10.0), clock=clock
    )


def _feedback_reads() -> list[list[str]]:
    """The run ids of each ``GET /feedback`` request, in order."""
    import urllib.parse

    reads = [p for m, p, _ in Recorder.bodies if m == "GET" and p.startswith("/feedback?")]
    return [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query)["run"] for p in reads]


def _run_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


async def test_feedback_posted_in_langsmith_reaches_waiting_traces_and_is_learned(
    langsmith_server: str,
) -> None:
    from langgraph_combee import Trace

    client = langsmith.Client(api_url=langsmith_server, api_key="test", auto_batch_tracing=False)
    combee = _waiting_combee(client, keys=["correctness"], batch_size=2)
    clock = _Clock()
    learner = _learner(combee, clock)
    for i in (1, 2, 3):
        combee.capture(Trace(id=_run_id(i), input=f"password reset {i}", output="GENERAL"))

    assert await learner.tick() == 0  # all three wait; LangSmith has no feedback yet
    # One request per batch of run ids, oldest first.
    assert _feedback_reads() == [[_run_id(1), _run_id(2)], [_run_id(3)]]

    client.create_feedback(
        _run_id(1),
        key="correctness",
        score=0,
        correction={"output": "SEC-2"},
        session_id=PROJECT_ID,
    )
    client.create_feedback(
        _run_id(2),
        key="correctness",
        score=0,
        correction={"output": "SEC-4"},
        session_id=PROJECT_ID,
    )
    client.create_feedback(_run_id(3), key="tone", score=0.1, session_id=PROJECT_ID)
    assert await learner.tick() == 0  # within the interval: no new request
    assert len(_feedback_reads()) == 2

    clock.now += 61
    assert await learner.tick() == 1  # the two scored runs are ready before their wait ends
    poller = learner.feedback_poller
    assert (poller.received, poller.errors) == (2, 0)
    [report] = learner.stats.reports
    assert report.batch_size == 2
    bullets = combee.current().playbook.bullets
    assert {b.provenance[0] for b in bullets} == {_run_id(1), _run_id(2)}
    assert any("SEC-2" in b.content for b in bullets) and any("SEC-4" in b.content for b in bullets)
    # The third run's only feedback has another key: it keeps waiting.
    assert combee.queue().waiting_ids() == [_run_id(3)]
    assert learner.describe()["feedback_received"] == 2


async def test_a_langsmith_outage_is_counted_and_learning_goes_on(langsmith_server: str) -> None:
    from urllib3.util.retry import Retry

    from langgraph_combee import Feedback, Trace

    client = langsmith.Client(
        api_url=langsmith_server,
        api_key="test",
        auto_batch_tracing=False,
        retry_config=Retry(total=0),
    )
    combee = _waiting_combee(client)
    clock = _Clock()
    learner = _learner(combee, clock)
    for i in (1, 2):
        combee.capture(Trace(id=_run_id(i), input=f"refund {i}", output="GENERAL"))
    for i in (3, 4):
        scored = Feedback(correct=False, ground_truth=f"FIN-{i}")
        combee.capture(
            Trace(id=_run_id(i), input=f"invoice {i}", output="GENERAL", feedback=scored)
        )

    Recorder.status = 503
    assert await learner.tick() == 1  # the ready traces are learned despite the outage
    assert learner.feedback_poller.errors == 1
    assert "503" in (learner.feedback_poller.last_error or "")
    assert (learner.stats.failed_steps, learner.running) == (0, False)
    assert combee.queue().waiting_ids() == [_run_id(1), _run_id(2)]

    Recorder.status = 200
    for i in (1, 2):
        client.create_feedback(
            _run_id(i),
            key="correctness",
            score=0,
            correction={"output": f"FIN-{i}"},
            session_id=PROJECT_ID,
        )
    clock.now += 61
    assert await learner.tick() == 1
    assert learner.feedback_poller.received == 2
    assert combee.queue().stats()["pending"] == 0


def test_the_hub_names_the_edits_when_the_previous_version_is_unknown() -> None:
    from langgraph_combee.langsmith import LangSmithPromptHub
    from langgraph_combee.types import Decision, PromptVersion

    class Hub:
        def __init__(self) -> None:
            self.pushes: list[tuple[str, str]] = []

        def push_prompt(self, name: str, *, object: Any, commit_description: str) -> str:
            self.pushes.append((name, commit_description))
            return f"hub/{name}"

    client = Hub()
    hub = LangSmithPromptHub(client)  # type: ignore[arg-type]
    version = PromptVersion(
        prompt_id="router",
        tenant="acme",
        version=4,
        parent=3,
        ops_summary={"add": 2, "update": 1, "remove": 0},
        decision=Decision(accepted=True, policy="accept_all", reason="ok"),
    )
    hub(version, None)  # a learner process that never served: HEAD was never cached
    assert client.pushes == [("router-acme", "combee v4: add 2, update 1 since v3; accept_all: ok")]
    assert hub.pushed == ["hub/router-acme"]
