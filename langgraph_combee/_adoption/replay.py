"""Replaying one run's model call with the agent's own model, and scoring the reply.

The pieces verified adoption (``_adoption/adoption.py``) is built from: what
the agent's model call was (``ReplayTarget``, remembered by the middleware in
``AgentCalls``), the messages of a run's last model call rebuilt from its trace
with a given system prompt (no tool is executed), the trace as if that call had
returned the replayed reply, and how a reply is judged (``make_scorer``: the
evaluator's verdict, else the run's ground truth by ``answers_match``).

Failure policy: ``ReplayRun.replay`` never raises for one run. A call that
raises or times out is counted as failed; an evaluator that raises gives no
verdict (the ground truth may still give one); no verdict is counted as unscored.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.evidence import ReplayReport
from langgraph_combee._core.nearest import NearestRules, in_thread
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.situations import (
    RuleIndex,
    focused,
)
from langgraph_combee._core.text import message_text
from langgraph_combee._core.tokens import estimate_tokens
from langgraph_combee._core.toolcalls import MAX_PROSE_CHARS, recovered_message, tool_table
from langgraph_combee._core.types import Feedback, ToolCall, Trace, TraceMessage
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._settings import AlgorithmSettings, LearnerSettings, ServingSettings

__all__ = [
    "AgentCalls",
    "ReplayRun",
    "ReplaySettings",
    "ReplayTarget",
    "answers_match",
    "feedback_verdict",
    "make_scorer",
    "normalise",
    "replay_messages",
    "replayed_trace",
]

RUN_NAME = "combee.replay"
REPLAY_EMBED_SECONDS = 10.0
"""Longest a replay waits for the focus embedder before it is served by words only."""

logger = logging.getLogger("langgraph_combee.replay")

Scorer = Callable[[Trace], "bool | None"]
"""Judges a (replayed) trace: True right, False wrong, None cannot tell. Sync."""

Render = Callable[[SystemMessage | None, str], SystemMessage | None]
"""Appends a rendered playbook to the agent's system message (``with_playbook``)."""


@dataclass(frozen=True)
class ReplayTarget:
    """The agent's side of a model call: its model, its own system prompt, its tools.

    Attributes:
        model: The agent's chat model (unbound; tools are bound here).
        system: The application's own system message, without any playbook.
        tools: The tools the agent binds (replies may call them; none is run).
        tool_choice: The agent's ``tool_choice``, if it sets one.
    """

    model: Any
    system: SystemMessage | None = None
    tools: tuple[Any, ...] = ()
    tool_choice: Any = None

    def runnable(self) -> Any:
        """The model as the agent calls it: with its tools bound, when it has tools."""
        if not self.tools:
            return self.model
        if self.tool_choice is not None:
            return self.model.bind_tools(list(self.tools), tool_choice=self.tool_choice)
        return self.model.bind_tools(list(self.tools))


class AgentCalls:
    """The latest model call the agent made in this process (what replay calls with).

    The middleware tells it about every model call; it is one attribute write
    under a lock, so the hot path pays almost nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: ReplayTarget | None = None

    def remember(
        self, model: Any, system: SystemMessage | None, tools: Sequence[Any], tool_choice: Any
    ) -> None:
        """Record the model, system prompt and tools of an agent's model call."""
        latest = self._latest
        if (
            latest is not None
            and latest.model is model
            and latest.system is system
            and latest.tool_choice is tool_choice
            and len(latest.tools) == len(tools)
            and all(a is b for a, b in zip(latest.tools, tools, strict=True))
        ):
            return
        target = ReplayTarget(
            model=model, system=system, tools=tuple(tools), tool_choice=tool_choice
        )
        with self._lock:
            self._latest = target

    def latest(self) -> ReplayTarget | None:
        """The last call remembered, or None when the agent has not called its model yet."""
        with self._lock:
            return self._latest


@dataclass(frozen=True)
class ReplaySettings:
    """What one step's replays read of the settings ``Combee`` was given, as given.

    A view, not a copy: it holds the three settings objects (checked when they
    were built) and reads its limits from them, so replays serve a playbook
    exactly as the agent side does.

    Attributes:
        algorithm: ``max_replays`` (replay calls per step, isolation replays
            included; about a quarter goes to previously right runs when the
            batch has some) and ``seed`` (of the sample of previously right
            runs, mixed with the version).
        serving: ``focus_rules``, ``focus_embedder``, ``drop_rivals`` and
            ``recover_tool_calls``, read as the agent side reads them.
        learner: ``max_concurrency`` (replay calls in flight at once) and
            ``timeout_seconds`` (a call past it counts as failed).
    """

    algorithm: AlgorithmSettings = field(default_factory=AlgorithmSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    learner: LearnerSettings = field(default_factory=LearnerSettings)

    @property
    def max_replays(self) -> int:
        return self.algorithm.max_replays

    @property
    def seed(self) -> int:
        return self.algorithm.seed

    @property
    def max_concurrency(self) -> int:
        return self.learner.max_concurrency

    @property
    def timeout_seconds(self) -> float | None:
        return self.learner.timeout_seconds

    @property
    def focus_rules(self) -> int:
        return self.serving.focus_rules

    @property
    def recover_tool_calls(self) -> bool:
        return self.serving.recover_tool_calls

    @property
    def focus_embedder(self) -> Embedder | None:
        return self.serving.embedder

    @property
    def drop_rivals(self) -> bool:
        return self.serving.drop_rivals


# --------------------------------------------------------------------------- scoring

_EDGES = "`*\"'“”‘’.,;:!?()[]{}<> \t\r\n"


def normalise(text: str) -> str:
    """``text`` casefolded, whitespace collapsed, quotes and punctuation stripped at the ends."""
    return " ".join(text.casefold().split()).strip(_EDGES)


def answers_match(output: str, answer: str) -> bool:
    """Whether ``output`` gives ``answer``: equal, or containing it as a whole word.

    Case, surrounding quotes, fences and punctuation are ignored, so
    ``"The team is **FIN-7Q**."`` gives ``"FIN-7Q"`` and ``"FIN-7QX"`` does not.
    """
    wanted = normalise(answer)
    if not wanted:
        return False
    said = normalise(output)
    if said == wanted:
        return True
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", said) is not None


def feedback_verdict(feedback: Feedback | None) -> bool | None:
    """Right or wrong from feedback: ``correct``, else ``score >= 0.5``, else None."""
    if feedback is None:
        return None
    if feedback.correct is not None:
        return feedback.correct
    if feedback.score is not None:
        return feedback.score >= 0.5
    return None


def make_scorer(evaluator: Callable[[Trace], Feedback | None] | None) -> Scorer:
    """A scorer: the evaluator's verdict, else the trace's ground truth matched by text.

    The replayed trace carries the original run's ground truth (as
    ``feedback.ground_truth``, with no verdict), so an evaluator may compare
    against it; one that gives no verdict (or raises) leaves it to ``answers_match``.
    """

    def score(trace: Trace) -> bool | None:
        if evaluator is not None:
            try:
                verdict = feedback_verdict(evaluator(trace))
            except Exception:  # an evaluator bug costs its verdict, never the step
                logger.warning("evaluator raised on replay of %s", trace.id, exc_info=True)
                verdict = None
            if verdict is not None:
                return verdict
        truth = trace.feedback.ground_truth if trace.feedback is not None else None
        return answers_match(trace.output, truth) if truth else None

    return score


# --------------------------------------------------------------------------- messages


def _last_ai(messages: Sequence[TraceMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "ai":
            return index
    return None


def call_prefix(trace: Trace) -> list[TraceMessage]:
    """The run's messages up to (not including) its last model reply.

    A hand-built trace with no messages (or none from the user) starts from its
    ``input`` as the user's message.
    """
    # The thread's earlier user messages the trace keeps for the guard (human, not
    # attested) were not the run's own: the call is replayed as the invocation made it.
    messages = [m for m in trace.messages if m.role != "human" or m.attested]
    end = _last_ai(messages)
    prefix = messages if end is None else messages[:end]
    if trace.input and not any(m.role == "human" for m in prefix):
        prefix = [TraceMessage(role="human", content=trace.input), *prefix]
    return prefix


def _to_message(message: TraceMessage, pending: list[str]) -> BaseMessage | None:
    if message.role == "human":
        return HumanMessage(content=message.content, name=message.name)
    if message.role == "ai":
        calls = [
            {"name": str(c.get("name", "")), "args": dict(c.get("args") or {}), "id": c.get("id")}
            for c in message.tool_calls
        ]
        pending.extend(str(c["id"]) for c in calls if c["id"])
        return AIMessage(content=message.content, name=message.name, tool_calls=calls)
    if message.role == "tool":
        # Traces keep tool results in order; they answer the calls made before them.
        call_id = pending.pop(0) if pending else "replayed"
        return ToolMessage(content=message.content, tool_call_id=call_id, name=message.name)
    if message.role == "system":
        return SystemMessage(content=message.content)
    return None


def replay_messages(trace: Trace, system: SystemMessage | None) -> list[BaseMessage]:
    """The messages of the run's last model call, with ``system`` as its system prompt."""
    pending: list[str] = []
    out: list[BaseMessage] = [system] if system is not None else []
    for message in call_prefix(trace):
        converted = _to_message(message, pending)
        if converted is not None:
            out.append(converted)
    return out


def replayed_trace(trace: Trace, reply: AIMessage) -> Trace:
    """``trace`` as if its last model call had returned ``reply`` (and nothing ran after)."""
    prefix = call_prefix(trace)
    earlier = {str(c.get("id")) for m in prefix for c in m.tool_calls if c.get("id")}
    calls = [
        {"name": c["name"], "args": dict(c.get("args") or {}), "id": c.get("id")}
        for c in reply.tool_calls
    ]
    text = message_text(reply.content)
    truth = trace.feedback.ground_truth if trace.feedback is not None else None
    return trace.model_copy(
        update={
            "output": text,
            "messages": [*prefix, TraceMessage(role="ai", content=text, tool_calls=calls)],
            "tool_calls": [
                *(c for c in trace.tool_calls if c.id in earlier),
                *(ToolCall(name=c["name"], args=c["args"], id=c["id"]) for c in calls),
            ],
            "error": None,
            "feedback": Feedback(ground_truth=truth, source="replay") if truth else None,
            "metadata": {**trace.metadata, "combee_replay_of": trace.id},
        }
    )


# --------------------------------------------------------------------------- replaying


@dataclass
class ReplayRun:
    """The shared state of one step's replays: the model, the limits, the accounting."""

    target: ReplayTarget
    score: Scorer
    render: Render
    settings: ReplaySettings
    callbacks: Callbacks
    budget: LearnerBudget | None
    report: ReplayReport
    runnable: Any = None
    semaphore: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    nearest: dict[str, concurrent.futures.Future[NearestRules]] = field(default_factory=dict)
    gave_up: set[str] = field(default_factory=set)  # playbooks whose cases outlived a wait

    def left(self) -> int:
        return self.settings.max_replays - self.report.calls

    async def served(self, playbook: Playbook, request: str) -> str:
        """The playbook and its focus for ``request``, as the agent side serves them.

        A playbook's cases are embedded once per step (a failure too is
        remembered: its replays are served by words); each wait is bounded by
        ``REPLAY_EMBED_SECONDS``, in daemon threads, so a hung embedder never
        holds the step.
        """
        rendered, index = playbook.render(), RuleIndex.of(playbook)
        limit, embedder = self.settings.focus_rules, self.settings.focus_embedder
        rivals = self.settings.drop_rivals
        if embedder is None or not index or not limit or not rendered:
            return focused(rendered, index, request, limit=limit, drop_rivals=rivals)
        cases = self.nearest.get(rendered)
        if cases is None:
            cases = self.nearest[rendered] = in_thread(lambda: NearestRules(index, embedder))
        elif not cases.done() and rendered in self.gave_up:
            self.report.focus_embed_errors += 1  # waited for once already this step
            return focused(rendered, index, request, limit=limit, drop_rivals=rivals)
        try:
            try:
                nearest = await asyncio.wait_for(
                    asyncio.shield(asyncio.wrap_future(cases)), timeout=REPLAY_EMBED_SECONDS
                )
            except asyncio.TimeoutError:  # the builtin TimeoutError only from 3.11
                self.gave_up.add(rendered)
                raise
            if "request" in self.gave_up:  # a request outlived a wait: words for the rest
                self.report.focus_embed_errors += 1
                return focused(rendered, index, request, limit=limit, drop_rivals=rivals)
            try:
                return await asyncio.wait_for(
                    asyncio.wrap_future(
                        in_thread(
                            lambda: focused(
                                rendered,
                                index,
                                request,
                                limit=limit,
                                closest=nearest.closest,
                                drop_rivals=rivals,
                            )
                        )
                    ),
                    timeout=REPLAY_EMBED_SECONDS,
                )
            except asyncio.TimeoutError:  # the builtin TimeoutError only from 3.11
                self.gave_up.add("request")
                raise
        except Exception:  # served by words, as the agent side does when its embedder fails
            self.report.focus_embed_errors += 1
            return focused(rendered, index, request, limit=limit, drop_rivals=rivals)

    def _call(self, messages: list[BaseMessage], trace_id: str) -> AIMessage:
        if self.budget is not None:
            self.budget.acquire_call()
        config = RunnableConfig(
            run_name=RUN_NAME,
            callbacks=self.callbacks,
            tags=["combee", RUN_NAME],
            metadata={"combee_stage": "replay", "combee_replay_of": trace_id},
        )
        reply = self.runnable.invoke(messages, config=config)
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=message_text(getattr(reply, "content", reply)))
        if self.settings.recover_tool_calls and self.target.tools:
            # As the middleware reads the agent's own replies (``_agent.textcalls``).
            recovered = recovered_message(
                reply, tool_table(self.target.tools), messages, max_prose=MAX_PROSE_CHARS
            )
            reply = recovered if isinstance(recovered, AIMessage) else reply
        return reply

    def _count(self, messages: Sequence[BaseMessage], reply: AIMessage) -> None:
        usage = reply.usage_metadata
        if usage:
            spent_in, spent_out = int(usage["input_tokens"]), int(usage["output_tokens"])
        else:
            spent_in = sum(estimate_tokens(message_text(m.content)) for m in messages)
            spent_out = estimate_tokens(message_text(reply.content))
        self.report.input_tokens += spent_in
        self.report.output_tokens += spent_out
        if self.budget is not None:
            self.budget.charge_tokens(spent_in + spent_out)

    async def replay(self, trace: Trace, playbook: Playbook) -> tuple[bool | None, str] | None:
        """Replay ``trace`` under ``playbook``: (verdict, output), or None if the call failed.

        A run whose last model call came after tool results is left unscored: its
        earlier decisions (which tools, with which arguments) were made by calls a
        replay with no tool executed cannot redo, so the replay would judge a rule
        on a decision it never saw. Its rules stay unverified, not rejected.
        """
        prefix = call_prefix(trace)
        if any(m.role == "tool" for m in prefix):
            self.report.unscored += 1
            return None, trace.output
        request = next((m.content for m in reversed(prefix) if m.role == "human"), "")
        text = await self.served(playbook, request)
        messages = replay_messages(trace, self.render(self.target.system, text))
        async with self.semaphore:
            self.report.calls += 1
            try:
                # The agent's model was built for the agent's thread and loop; its sync
                # client is safe from a worker thread, its async one may be bound to a loop.
                reply = await asyncio.wait_for(
                    asyncio.to_thread(self._call, messages, trace.id),
                    timeout=self.settings.timeout_seconds,
                )
            except Exception:
                self.report.failed += 1
                return None
        self._count(messages, reply)
        replayed = replayed_trace(trace, reply)
        return await self.judge(replayed), replayed.output

    async def judge(self, trace: Trace) -> bool | None:
        """The scorer's verdict on ``trace``; an evaluator that raises leaves it unscored."""
        try:
            verdict = await asyncio.to_thread(self.score, trace)
        except Exception:
            verdict = None
        if verdict is None:
            self.report.unscored += 1
        return verdict

    async def baseline(self, trace: Trace) -> bool | None:
        """How the run went originally: its feedback's verdict, else the scorer's."""
        verdict = feedback_verdict(trace.feedback)
        if verdict is not None:
            return verdict
        try:
            return await asyncio.to_thread(self.score, trace)
        except Exception:
            return None
