"""``examples/platform`` on a real ``langgraph dev`` server, driven with ``langgraph-sdk``.

Marker ``platform_server``; needs ``pip install -e '.[platform]'`` (skipped
without it, failed under ``CI=true``). One server process runs the example app
with the offline test models: runs through ``runs.wait`` and ``runs.stream``,
feedback through the Combee route, learning on the server's own store, a learned
version served to later runs, the admin routes; then a restart on the same
durable dev store, where the new process learns from traces the old one left at
once, because the old one released its lease on the way out. The server log must
hold no blocking-call error.

Figures (runs, seconds from the restarted server's readiness to its first
learning step) are printed and written to ``platform_server.json`` in the
test's directory; docs/platform.md quotes them.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.platform_server import DevServer, copy_example, langgraph_cli

pytestmark = pytest.mark.platform_server

PROMPT = "ticket-router"
TEAMS = {"refund": "FIN-1", "parcel": "LOG-2", "password": "SEC-3", "invoice": "ACC-4"}
MOVED = {topic: f"{team}0" for topic, team in TEAMS.items()}
PRIVATE = (
    "combee_version",
    "combee_tenant",
    "combee_run_key",
    "combee_start_id",
    "combee_given",
)
WAIT_SECONDS = 90.0  # the most any wait below may take before the test fails
BLOCKING = re.compile(r"BlockingError|Blocking call to", re.IGNORECASE)


async def _wait_for(
    what: str, check: Callable[[], Awaitable[Any]], timeout: float = WAIT_SECONDS
) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


class App:
    """The SDK client and the Combee routes of one server."""

    def __init__(self, server: DevServer) -> None:
        from langgraph_sdk import get_client

        self.server = server
        self.sdk = get_client(url=server.url)
        self.http = httpx.AsyncClient(base_url=server.url, timeout=30.0)

    async def route(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return await self.http.request(method, f"/combee/{PROMPT}{path}", **kwargs)

    async def status(self) -> dict[str, Any]:
        response = await self.route("GET", "/status")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def ask(self, topic: str, i: int, *, stream: bool, thread: str | None = None) -> Any:
        """One run; returns (run id, answer, metadata events seen while streaming)."""
        created: dict[str, Any] = {}
        payload = {"messages": [{"role": "user", "content": f"my {topic} question #{i}"}]}
        metadata: list[dict[str, Any]] = []
        if stream:
            answer = ""
            async for part in self.sdk.runs.stream(
                thread,
                "router",
                input=payload,
                stream_mode=["values", "messages"],
                on_run_created=created.update,
            ):
                if part.event == "values" and part.data.get("messages"):
                    answer = part.data["messages"][-1]["content"]
                elif part.event == "messages/metadata":
                    metadata.extend(v["metadata"] for v in part.data.values())
        else:
            out = await self.sdk.runs.wait(
                thread, "router", input=payload, on_run_created=created.update
            )
            answer = out["messages"][-1]["content"]
        return str(created["run_id"]), answer, metadata

    async def feedback(self, run_id: str, answer: str, truth: str) -> bool:
        body = {"run_id": run_id, "correct": answer == truth, "ground_truth": truth}
        response = await self.route("POST", "/feedback", json=body)
        assert response.status_code == 200, response.text
        return bool(response.json()["found"])

    async def close(self) -> None:
        await self.http.aclose()
        await self.sdk.aclose()


def _lease_holder(app_dir: Path) -> str | None:
    """Who holds the prompt's lease in the dev server's persisted store (None: free)."""
    with (app_dir / ".langgraph_api" / "store.pckl").open("rb") as f:
        data = pickle.load(f)
    item = data.get(("combee", PROMPT, "_", "lease"), {}).get("writer")
    if item is None or not item.value["holder"] or item.value["expires_at"] <= time.time():
        return None  # never taken, released (an empty holder) or expired
    return str(item.value["holder"])


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    langgraph_cli()  # skip (or fail under CI) before copying anything
    return copy_example(tmp_path)


def test_langgraph_dev_runs_learns_serves_and_resumes_after_restart(app_dir: Path) -> None:
    figures: dict[str, Any] = {}
    server = DevServer(app_dir)
    server.start()
    try:
        figures.update(asyncio.run(_first_life(server)))
    finally:
        server.stop()
    # The stopped server released its lease (the lifespan stopped the learner)
    # before the dev store was written to disk.
    assert _lease_holder(app_dir) is None
    restarted = DevServer(app_dir)
    restarted.start()
    try:
        figures.update(asyncio.run(_second_life(restarted, figures)))
    finally:
        restarted.stop()
    log = server.log() + restarted.log()
    assert not BLOCKING.findall(log), [line for line in log.splitlines() if BLOCKING.search(line)]
    assert "learner tick failed" not in log
    assert "learning step failed" not in log
    figures["server_start_seconds"] = round(restarted.ready_at - restarted.started_at, 2)
    figures["left_for_restart"] = len(figures["left_for_restart"])
    (app_dir / "platform_server.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


async def _first_life(server: DevServer) -> dict[str, Any]:
    app = App(server)
    answers: list[tuple[str, str, str]] = []
    for i in range(24):  # 12 through runs.wait, 12 through runs.stream
        topic = list(TEAMS)[i % len(TEAMS)]
        run_id, answer, _ = await app.ask(topic, i, stream=i % 2 == 1)
        # The run id the platform gave the run is the trace's id: the route finds it.
        assert await app.feedback(run_id, answer, TEAMS[topic]), run_id
        answers.append((run_id, topic, answer))
    assert answers[0][2] == "GENERAL"  # nothing learned yet
    await _wait_for("a learned version covering every topic", lambda: _covers_all(app))
    # A later run gets the learned version: both ways of running see it.
    learned = [await app.ask(t, 100 + n, stream=n % 2 == 0) for n, t in enumerate(TEAMS)]
    assert [answer for _, answer, _ in learned] == list(TEAMS.values())
    # The streamed model calls are labelled with the prompt and its version.
    labels = [m for _, _, meta in learned for m in meta if "combee_version" in m]
    assert labels and {m["combee_prompt_id"] for m in labels} == {PROMPT}
    status = await app.status()
    assert status["store_bound"] and status["learner"]["running"]
    assert status["learner"]["steps"] >= 1 and status["learner"]["failed_steps"] == 0
    figures: dict[str, Any] = {
        "runs_first_server": len(answers) + len(learned) + 1,
        "steps_first_server": status["learner"]["steps"],
    }
    await _admin_routes(app, head=status["head"])
    await _thread_state(app)
    # Runs left for the restart: captured, waiting for feedback that comes later.
    figures["left_for_restart"] = await _leave_waiting(app)
    figures["head_before_restart"] = (await app.status())["head"]
    await app.close()
    return figures


async def _covers_all(app: App) -> bool:
    head = (await app.status())["head"]
    shown = await app.route("GET", f"/versions/{head}")
    rendered = shown.json().get("rendered", "")
    return shown.status_code == 200 and all(team in rendered for team in TEAMS.values())


async def _admin_routes(app: App, *, head: int) -> None:
    versions = (await app.route("GET", "/versions")).json()["versions"]
    assert versions[-1]["version"] == head and versions[-1]["status"] == "accepted"
    diff = await app.route("GET", "/diff", params={"a": 0, "b": head})
    assert diff.status_code == 200 and diff.json()["diff"]["added"]
    # An accepted version is no candidate: approve and reject are refused (409).
    assert (await app.route("POST", f"/versions/{head}/approve")).status_code == 409
    rejected = await app.route("POST", f"/versions/{head}/reject", json={"reason": "x"})
    assert rejected.status_code == 409
    assert (await app.route("GET", "/versions/999")).status_code == 404
    assert (await app.route("GET", "/diff", params={"a": "x", "b": 1})).status_code == 400
    assert (await app.route("POST", "/feedback", json={"run_id": "r"})).status_code == 400
    assert (await app.http.get("/combee/no-such-prompt/status")).status_code == 404
    # Rolling back to the learned version writes a new accepted version with its playbook.
    back = await app.route("POST", f"/versions/{head}/rollback", json={"reason": "test"})
    assert back.status_code == 200, back.text
    assert back.json()["version"] == head + 1
    assert (await app.status())["head"] == head + 1
    # The example's own route reads the same Combee (routes.py imports graph.py again).
    assert (await app.http.get("/router/head")).json()["version"] == head + 1


async def _thread_state(app: App) -> None:
    thread = await app.sdk.threads.create()
    await app.ask("refund", 200, stream=False, thread=thread["thread_id"])
    values = (await app.sdk.threads.get_state(thread["thread_id"]))["values"]
    # The default middleware keeps its pins in memory (docs/platform.md, "Private
    # state fields"): nothing of Combee's in the thread's state, input or output.
    # (hooks=True checkpoints them: tests/agent/test_middleware.py, the "hooks" runs.)
    assert not set(PRIVATE) & set(values)
    assistant = (await app.sdk.assistants.search(graph_id="router"))[0]
    schemas = await app.sdk.assistants.get_schemas(assistant["assistant_id"])
    for kind in ("input_schema", "output_schema"):
        assert not set(PRIVATE) & set(schemas[kind]["properties"]), kind


async def _leave_waiting(app: App) -> list[list[str]]:
    left = []
    for i, topic in enumerate(TEAMS):
        run_id, answer, _ = await app.ask(topic, 300 + i, stream=False)
        left.append([run_id, topic, answer])
    return left


async def _second_life(server: DevServer, before: dict[str, Any]) -> dict[str, Any]:
    app = App(server)
    ready = time.monotonic()
    # The stopped server flushed its captures to the durable queue: feedback
    # sent to the new process finds them, and makes them ready to learn. The
    # teams moved (a new code per topic), so learning from them writes a version.
    for run_id, topic, answer in before["left_for_restart"]:
        assert await app.feedback(run_id, answer, MOVED[topic])

    async def first_step() -> dict[str, Any] | None:
        status = await app.status()
        return status if status["learner"]["steps"] >= 1 else None

    status = await _wait_for("the restarted learner's first step", first_step)
    resumed = time.monotonic() - ready
    assert status["head"] > before["head_before_restart"]
    assert status["learner"]["failed_steps"] == 0
    history = (await app.route("GET", "/versions")).json()["versions"]
    learned_from = {tid for v in history for tid in v["source_trace_ids"]}
    assert learned_from >= {run_id for run_id, _, _ in before["left_for_restart"]}
    await app.close()
    return {
        "restart_to_first_step_seconds": round(resumed, 2),
        "runs_total": before["runs_first_server"] + len(before["left_for_restart"]),
    }
