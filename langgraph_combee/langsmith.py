"""LangSmith as a source of traces and feedback.

- ``traces_from_project(client, project)``: pull a project's root runs and their
  feedback as ``Trace`` objects, to learn offline from what LangSmith recorded.
- ``feedback_for_runs(client, run_ids)``: the LangSmith feedback of some runs,
  folded into one ``Feedback`` per run.
- ``LangSmithFeedback(client)``: pass it as
  ``LearnerSettings(feedback_source=...)`` and the background learner reads
  LangSmith feedback on the run ids of traces that wait for feedback
  (``CaptureSettings.feedback_wait_seconds``), in batches, on an
  interval, so they become ready as soon as someone scores them in LangSmith.
- ``poll_feedback(combee, client, run_ids)``: the same, by hand, for run ids you
  choose (e.g. from a job).
- ``LangSmithPromptHub(client, base_prompt=...)``: pass it as
  ``ServingSettings(on_version=[...])`` and every version put in force (acceptance,
  approval, rollback) is committed to the LangSmith prompt hub under the prompt
  id, with the diff summary as the commit description, so the hub's history
  mirrors the registry.

Each learning step is already a LangSmith trace (``combee.learn_step``) when
LangSmith tracing is on; see ``docs/langsmith.md``.

Feedback keys are read this way: ``correct`` / ``correctness`` / ``is_correct``
give ``correct`` (score >= 0.5) and ``score``; any other key with a score gives
``score`` (the last one seen); comments are joined; a feedback ``correction``
holding an ``output``/``answer``/``ground_truth`` (or a plain string) gives
``ground_truth``.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph_combee._agent.collector import trace_from_run as run_trace
from langgraph_combee._core.diff import diff_playbooks
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Feedback, PromptVersion, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._learner.feedback_poll import validate_pacing

if TYPE_CHECKING:
    from langsmith import Client
    from langsmith.schemas import Feedback as LSFeedback
    from langsmith.schemas import Run

    from langgraph_combee._combee import Combee

__all__ = [
    "LangSmithFeedback",
    "LangSmithPromptHub",
    "feedback_for_runs",
    "poll_feedback",
    "trace_from_run",
    "traces_from_project",
]

_CORRECT_KEYS = frozenset({"correct", "correctness", "is_correct"})
_TRUTH_KEYS = ("ground_truth", "answer", "output", "expected", "reference")
_CHUNK = 100


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if "content" in value:
            return _text(value["content"])
        if value.get("type") == "text":
            return str(value.get("text", ""))
    if isinstance(value, list) and all(
        isinstance(v, str) or (isinstance(v, Mapping) and v.get("type") == "text") for v in value
    ):
        return "".join(_text(v) for v in value)
    return json.dumps(value, default=str, ensure_ascii=False)


def trace_from_run(run: Run, feedback: Feedback | None = None) -> Trace:
    """Turn a LangSmith root run into a ``Trace`` (its id stays the run id).

    The same conversion as ``combee.tracer()``'s (``CombeeTracer``), so a run
    learned from LangSmith and the same run captured live give the same trace;
    the run's name and metadata are kept in the trace's metadata.
    """
    metadata = dict((run.extra or {}).get("metadata") or {})
    return run_trace(run, metadata={"langsmith_run_name": run.name, **metadata}, feedback=feedback)


def _truth(correction: Any) -> str | None:
    if correction is None:
        return None
    if isinstance(correction, str):
        return correction
    if isinstance(correction, Mapping):
        for key in _TRUTH_KEYS:
            if correction.get(key) is not None:
                return _text(correction[key])
    return None


def _fold(items: Iterable[LSFeedback]) -> Feedback | None:
    score: float | None = None
    correct: bool | None = None
    comments: list[str] = []
    truth: str | None = None
    for item in sorted(items, key=lambda f: f.created_at):
        value = item.score
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, int | float) and not math.isfinite(value):
            value = None  # a Feedback's score is a finite number
        if item.key in _CORRECT_KEYS and isinstance(value, int | float):
            correct = value >= 0.5
            score = float(value)
        elif isinstance(value, int | float):
            score = float(value)
        if item.comment:
            comments.append(item.comment)
        truth = _truth(getattr(item, "correction", None)) or truth
    folded = Feedback(
        score=score,
        correct=correct,
        comment="\n".join(comments) or None,
        ground_truth=truth,
        source="langsmith",
    )
    return None if folded.is_empty() else folded


def feedback_for_runs(
    client: Client, run_ids: Sequence[Any], *, keys: Sequence[str] | None = None
) -> dict[str, Feedback]:
    """LangSmith feedback of ``run_ids``, one folded ``Feedback`` per run that has any.

    Args:
        client: A ``langsmith.Client``.
        run_ids: The runs; asked about 100 at a time (one ``list_feedback``
            request each, paged by the client when there is more feedback).
        keys: Only feedback with these keys (None: every key).
    """
    grouped: dict[str, list[LSFeedback]] = {}
    ids = [str(r) for r in run_ids]
    options: dict[str, Any] = {} if keys is None else {"feedback_key": list(keys)}
    for start in range(0, len(ids), _CHUNK):
        for item in client.list_feedback(run_ids=ids[start : start + _CHUNK], **options):
            if item.run_id is not None:
                grouped.setdefault(str(item.run_id), []).append(item)
    out = {}
    for run_id, items in grouped.items():
        folded = _fold(items)
        if folded is not None:
            out[run_id] = folded
    return out


def traces_from_project(
    client: Client,
    project: str,
    *,
    limit: int | None = None,
    start_time: datetime | None = None,
    with_feedback_only: bool = False,
) -> list[Trace]:
    """Pull a LangSmith project's root runs, with their feedback, as ``Trace``s.

    Args:
        client: A ``langsmith.Client``.
        project: The project (session) name.
        limit: Most runs to read (newest first, as LangSmith returns them).
        start_time: Only runs started at or after this time.
        with_feedback_only: Skip runs that have no feedback.

    Returns:
        The traces, oldest first (the order to learn in).
    """
    with warnings.catch_warnings():
        # langsmith 0.15 marks list_runs deprecated (removal after 2027-01-31). Its
        # replacement is not usable everywhere yet: 0.15.1 only has the async
        # ``client.runs.query_v2`` (not the ``runs.query()`` the warning names), and
        # /api/v2/runs/query is served only where /info reports sdb_query_enabled
        # (the SDK's own get_test_results falls back to list_runs elsewhere).
        # list_runs works on every deployment and SDK version we support
        # (langsmith>=0.4); see docs/langsmith.md.
        warnings.filterwarnings("ignore", message=r"list_runs\(\) is deprecated")
        runs = list(
            client.list_runs(project_name=project, is_root=True, limit=limit, start_time=start_time)
        )
    feedback = feedback_for_runs(client, [r.id for r in runs]) if runs else {}
    traces = [trace_from_run(r, feedback.get(str(r.id))) for r in runs]
    if with_feedback_only:
        traces = [t for t in traces if t.feedback is not None]
    return sorted(traces, key=lambda t: (_start(runs, t.id), t.id))


def _start(runs: Sequence[Run], run_id: str) -> float:
    for run in runs:
        if str(run.id) == run_id and isinstance(run.start_time, datetime):
            return run.start_time.timestamp()
    return 0.0


def poll_feedback(
    combee: Combee, client: Client, run_ids: Sequence[Any], *, tenant: str | None = None
) -> int:
    """Pass LangSmith feedback on ``run_ids`` to ``combee.feedback``; returns how many.

    Runs with no feedback in LangSmith, or whose trace was already learned
    from, are skipped.
    """
    delivered = 0
    for run_id, fb in feedback_for_runs(client, run_ids).items():
        if combee.feedback(
            run_id,
            score=fb.score,
            correct=fb.correct,
            comment=fb.comment,
            ground_truth=fb.ground_truth,
            tenant=tenant,
            source="langsmith",
        ):
            delivered += 1
    return delivered


class LangSmithFeedback:
    """LangSmith feedback for traces that wait for it: ``LearnerSettings(feedback_source=...)``.

    While captured traces wait for feedback (``CaptureSettings.feedback_wait_seconds``), the
    background learner asks LangSmith for the feedback on their run ids (the
    agent's LangSmith root run ids), ``batch_size`` ids per ``list_feedback``
    request, at most every ``interval_seconds``. Feedback found is folded as in
    ``feedback_for_runs`` and merged into the queued traces, which are then
    learned from without waiting out the rest of their wait. LangSmith errors
    are logged and counted (``combee.learner.feedback_poller.errors``); they
    never stop the learner or reach the agent.

    Example::

        combee = Combee(
            prompt_id="support-agent",
            model=learner_model,
            capture=CaptureSettings(feedback_wait_seconds=3600),
            learner=LearnerSettings(
                feedback_source=LangSmithFeedback(Client(), keys=["correctness"])
            ),
        )

    Args:
        client: A ``langsmith.Client`` (its own retry settings apply).
        keys: Only feedback with these keys (None: every key).
        interval_seconds: Least time between two polls of one tenant's queue.
        batch_size: Run ids per request, 1 to 100 (LangSmith's page size).
        max_runs: Most waiting traces asked about per poll (oldest first).
        timeout_seconds: How long the learner waits for one request before it
            goes on learning; the answer is merged on a later pass.

    Raises:
        ConfigurationError: When an argument is invalid.
    """

    def __init__(
        self,
        client: Client,
        *,
        keys: Sequence[str] | None = None,
        interval_seconds: float = 30.0,
        batch_size: int = _CHUNK,
        max_runs: int = 1000,
        timeout_seconds: float = 30.0,
    ) -> None:
        if not callable(getattr(client, "list_feedback", None)):
            raise ConfigurationError("client", client, "a langsmith.Client")
        if isinstance(keys, str):
            keys = [keys]
        if keys is not None and (
            not keys or not all(isinstance(k, str) and k.strip() for k in keys)
        ):
            raise ConfigurationError("keys", keys, "None or a non-empty list of feedback keys")
        validate_pacing(
            interval_seconds=interval_seconds,
            batch_size=batch_size,
            max_runs=max_runs,
            timeout_seconds=timeout_seconds,
        )
        if batch_size > _CHUNK:
            raise ConfigurationError("batch_size", batch_size, f"an int from 1 to {_CHUNK}")
        self.client = client
        self.keys = None if keys is None else tuple(keys)
        self.interval_seconds = float(interval_seconds)
        self.batch_size = batch_size
        self.max_runs = max_runs
        self.timeout_seconds = float(timeout_seconds)

    def __repr__(self) -> str:
        return (
            f"LangSmithFeedback(keys={self.keys!r}, interval_seconds={self.interval_seconds!r}, "
            f"batch_size={self.batch_size!r})"
        )

    def fetch(self, run_ids: Sequence[str]) -> dict[str, Feedback]:
        """LangSmith feedback of ``run_ids``, one folded ``Feedback`` per run that has any."""
        return feedback_for_runs(self.client, run_ids, keys=self.keys)


class LangSmithPromptHub:
    """Mirror every version put in force to the LangSmith prompt hub.

    Use as ``ServingSettings(on_version=[LangSmithPromptHub(client, base_prompt=APP_PROMPT)])``.
    Each commit holds the full system prompt (``base_prompt`` followed by the
    rendered playbook) as one system message, and its description says which
    version it is, what changed (``+added -removed ~updated``) and why.

    Args:
        client: A ``langsmith.Client``.
        base_prompt: The application's own system prompt, put first.
        prompt_name: Hub name; default the prompt id (plus ``-<tenant>``).
    """

    def __init__(
        self, client: Client, *, base_prompt: str = "", prompt_name: str | None = None
    ) -> None:
        self.client = client
        self.base_prompt = base_prompt
        self.prompt_name = prompt_name
        self.pushed: list[str] = []

    def name_for(self, version: PromptVersion) -> str:
        """The hub name a version is committed under."""
        if self.prompt_name:
            return self.prompt_name
        if version.tenant:
            return f"{version.prompt_id}-{version.tenant}"
        return version.prompt_id

    def __call__(self, version: PromptVersion, previous: PromptVersion | None) -> None:
        """Commit ``version``'s full system prompt to the hub."""
        from langchain_core.messages import SystemMessage
        from langchain_core.prompts import ChatPromptTemplate

        text = "\n\n".join(p for p in (self.base_prompt, version.render()) if p)
        if previous is None and version.parent:
            # The version in force before is unknown to this process (nothing served
            # yet): name the edits the version records rather than diff against empty.
            edits = ", ".join(f"{k} {n}" for k, n in sorted(version.ops_summary.items()) if n)
            summary = f"{edits or 'no edits'} since v{version.parent}"
        else:
            before = previous.playbook if previous is not None else Playbook()
            summary = diff_playbooks(before, version.playbook).summary()
        description = f"combee v{version.version}: {summary}"
        if version.decision is not None:
            description += f"; {version.decision.policy}: {version.decision.reason}"
        # A message object, not a template string: braces in the text stay literal.
        template = ChatPromptTemplate.from_messages([SystemMessage(content=text)])
        url = self.client.push_prompt(
            self.name_for(version), object=template, commit_description=description[:1000]
        )
        self.pushed.append(url)
