"""Test helpers shared by several test modules."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from langgraph_combee import Feedback, Trace
from langgraph_combee._core.text import message_text
from langgraph_combee.types import PromptVersion

LABEL = re.compile(r"^\[(R\d+)\]$", re.MULTILINE)


class RunNames(BaseTracer):
    """Collects every finished run (names in finishing order) and the root runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.names: list[str] = []
        self.runs: list[Run] = []
        self.roots: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)

    def _end_trace(self, run: Run) -> None:
        self.names.append(run.name)
        self.runs.append(run)
        super()._end_trace(run)

    def parents(self) -> dict[UUID, UUID | None]:
        return {r.id: r.parent_run_id for r in self.runs}


def role_of(messages: Sequence[BaseMessage]) -> str:
    system = message_text(messages[0].content)
    for role in ("reflector", "curator", "aggregator"):
        if f"You are the {role}" in system:
            return role
    return "other"


def labels_in(messages: Sequence[BaseMessage]) -> list[str]:
    return LABEL.findall("\n".join(message_text(m.content) for m in messages[1:]))


def failing_traces(n: int, *, prefix: str = "ticket") -> list[Trace]:
    return [
        Trace(
            id=f"t{i}" if prefix == "ticket" else f"{prefix}-{i}",
            input=f"{prefix} {i} about topic {i}",
            output="WRONG",
            feedback=Feedback(
                correct=False,
                ground_truth=f"CODE-{i}" if prefix == "ticket" else f"{prefix.upper()}-{i}",
            ),
        )
        for i in range(n)
    ]


class FakeClock:
    """A clock tests move by hand (``clock.now += 5``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def distinct_traces(tag: str, n: int) -> list[Trace]:
    """Failing traces whose rules share no words, so de-duplication never merges two."""
    traces = []
    for i in range(n):
        words = " ".join(
            hashlib.sha256(f"{tag}/{i}/{k}".encode()).hexdigest()[:8] for k in range(3)
        )
        traces.append(
            Trace(
                id=f"{tag}-{i}",
                input=f"{words} please",
                output="WRONG",
                feedback=Feedback(correct=False, ground_truth=f"{tag.upper()}-{i}"),
            )
        )
    return traces


def assert_every_step_in_head(versions: Sequence[PromptVersion], head: PromptVersion) -> None:
    """Every written version accepted, one linear chain ending at HEAD, every rule added in HEAD.

    ``versions`` is the registry's history. Catches overwritten records (a
    version's traces are not its own), forks (two versions with one parent) and
    rules lost by a version built on a stale HEAD.
    """
    assert versions, "no version was written"
    assert all(v.status == "accepted" for v in versions), [v.status for v in versions]
    by_parent: dict[int | None, list[int]] = {}
    for version in versions:
        by_parent.setdefault(version.parent, []).append(version.version)
    assert all(len(children) == 1 for children in by_parent.values()), by_parent
    chain, current = [], 0
    while current in by_parent:
        current = by_parent[current][0]
        chain.append(current)
    assert chain[-1] == head.version and len(chain) == len(versions), (chain, by_parent)
    added = {op.content for v in versions for op in v.ops if op.type == "ADD"}
    assert added == {b.content for b in head.playbook.bullets}
    traces = [t for v in versions for t in v.source_trace_ids]
    assert len(traces) == len(set(traces)), "a trace was learned twice"


def hello_tickets(n: int) -> list[Trace]:
    """``n`` failing runs "ticket <i> says hello", each with the ground truth ``T-<i>``."""
    return [
        Trace(
            input=f"ticket {i} says hello",
            output="GENERAL",
            feedback=Feedback(correct=False, ground_truth=f"T-{i}"),
        )
        for i in range(n)
    ]


def hello_rule(body: str) -> str:
    """The small reflector's reply for a ``hello_tickets`` run (rule: greeting <i>, T-<i>)."""
    number = re.findall(r"ticket (\d+) says hello", body)[0]
    return json.dumps({"action": f"answer T-{number}", "situation": f"greeting {number}"})


# The background learner's own knobs: keyword arguments of its own, not LearnerSettings fields.
_LOOP_KNOBS = (
    "visibility_seconds",
    "max_backoff_seconds",
    "backoff_jitter",
    "max_trace_attempts",
    "heartbeat_seconds",
)


def background_learner(parts: Any, **kw: Any) -> Any:
    """A ``BackgroundLearner`` on ``parts``.

    ``kw`` holds ``LearnerSettings`` fields, the learner's own knobs
    (``backoff_jitter``, ...) and its ``clock`` / ``lease_clock``.
    """
    from langgraph_combee import LearnerSettings
    from langgraph_combee._learner.learner import BackgroundLearner

    own = {k: kw.pop(k) for k in (*_LOOP_KNOBS, "clock", "lease_clock") if k in kw}
    return BackgroundLearner(parts, LearnerSettings(**kw), **own)
