"""Run an agent under a given version: the runner ``ValidationGate.from_agent`` builds.

A ``ValidationGate`` scores the candidate and the version in force by running
the agent under each. The agent must be built *without* ``CombeeMiddleware``:
the middleware appends the version in force to every run, so the candidate
would be served on top of it. ``agent_runner`` builds the agent from the app's
own factory for each version, with the app's prompt and that version's playbook
(and the rules the example's request names, as the middleware serves them).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain_core.messages import AIMessage, HumanMessage

from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.nearest import NearestRules, in_thread
from langgraph_combee._core.prompting import join_prompt
from langgraph_combee._core.situations import (
    FOCUS_RULES,
    FOCUS_RULES_ALLOWED,
    Rule,
    RuleIndex,
    focus_rules_ok,
    focused,
)
from langgraph_combee._core.text import message_text
from langgraph_combee._core.types import PromptVersion
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._settings import AUTO, ServingSettings

AgentFactory = Callable[[str], Any]
"""``(system_prompt) -> agent``: the app's ``create_agent(...)``, without CombeeMiddleware."""

Grade = Callable[[Any, str], "float | bool | Awaitable[float | bool]"]
"""``(example, answer) -> score``: 1.0 / True for a right answer."""


def question_of(example: Any) -> str:
    """The request of an example: a str, a dict's ``"input"``, or an object's ``.input``."""
    if isinstance(example, str):
        return example
    if isinstance(example, Mapping) and isinstance(example.get("input"), str):
        return str(example["input"])
    text = getattr(example, "input", None)
    if isinstance(text, str):
        return text
    raise ConfigurationError(
        "example", example, "a str, a dict with an 'input' str, or an object with an .input str"
    )


RUNNER_EMBED_SECONDS = 10.0
"""Longest a runner waits for the focus embedder before serving by words (as replays do)."""
RUNNER_COOL_DOWN_SECONDS = 30.0
"""How long a runner serves by words after its embedder outlived a wait (as the middleware)."""
_CACHED_VERSIONS = 16


class Cases:
    """Each version's rules embedded once for an embedder, as the middleware keeps them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one build per version, however many runs ask
        self._cases: dict[tuple[int, str], tuple[Embedder, NearestRules]] = {}

    def nearest(self, embedder: Embedder, playbook: str, index: RuleIndex) -> NearestRules:
        """The embedded rules of the version rendered as ``playbook`` (``index``)."""
        key = (id(embedder), playbook)
        with self._lock:
            found = self._cases.get(key)
            if found is None or found[0] is not embedder:
                found = self._cases[key] = (embedder, NearestRules(index, embedder))
                while len(self._cases) > _CACHED_VERSIONS:
                    self._cases.pop(next(iter(self._cases)))
            return found[1]


def served_prompt(
    system_prompt: str,
    version: PromptVersion,
    request: str,
    *,
    focus: int,
    embedder: Embedder | None = None,
    cases: Cases | None = None,
) -> str:
    """The system prompt the middleware serves for ``request`` under ``version``.

    With ``embedder``, a request that names no rule's words is given the rule
    closest to it in meaning, as ``ServingSettings.focus_embedder`` serves it;
    an embedder that fails leaves the focus to the words, as the middleware
    does. ``cases`` keeps each version's embedded rules for the next request
    (the middleware embeds them once per version).
    """
    playbook = version.render()
    if playbook and focus and request:
        index = RuleIndex.of(version.playbook)
        closest = None
        if embedder is not None:
            by_meaning, known = embedder, cases if cases is not None else Cases()

            def closest(text: str) -> list[Rule]:
                try:
                    return known.nearest(by_meaning, playbook, index).closest(text)
                except Exception:  # the middleware serves the words then (``Meaning``)
                    return []

        playbook = focused(playbook, index, request, limit=focus, closest=closest)
    return join_prompt(system_prompt, playbook)


def _answer(result: Any) -> str:
    """The text of the agent's last AI message (or of the result itself)."""
    messages = result.get("messages") if isinstance(result, Mapping) else None
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return message_text(message.content)
        return ""
    if isinstance(result, AIMessage):
        return message_text(result.content)
    return str(result)


def agent_runner(
    agent: AgentFactory,
    *,
    system_prompt: str,
    grade: Grade,
    question: Callable[[Any], str] = question_of,
    focus_rules: int = FOCUS_RULES,
    focus_embedder: Embedder | Literal["auto"] | None = AUTO,
) -> Callable[[PromptVersion, Any], Awaitable[float | bool]]:
    """A ``ValidationGate`` runner: run the agent under a version on one example and grade it.

    Args:
        agent: ``(system_prompt) -> agent``, e.g. ``lambda prompt: create_agent(model,
            tools, system_prompt=prompt)``: a runnable taking ``{"messages": [...]}``
            (a compiled graph). Build it *without* ``CombeeMiddleware``.
        system_prompt: The app's own system prompt; the version's playbook is
            appended to it, as the middleware does.
        grade: ``(example, answer) -> score`` (sync or async; a bool counts 1/0).
        question: ``(example) -> request text``; default: the example itself
            (a str), its ``"input"`` (a dict) or its ``.input`` (a ``Trace``).
        focus_rules: Rules the request names repeated after the playbook, as
            ``ServingSettings.focus_rules`` (0: the playbook alone).
        focus_embedder: As ``ServingSettings.focus_embedder`` ("auto": what
            ``Combee`` settled it on in this process).

    Raises:
        ConfigurationError: An argument is not what is described here.
    """
    if not callable(agent):
        raise ConfigurationError("agent", agent, "a callable (system_prompt) -> agent")
    if not isinstance(system_prompt, str):
        raise ConfigurationError("system_prompt", system_prompt, "a str (the app's own prompt)")
    if not callable(grade):
        raise ConfigurationError("grade", grade, "a callable (example, answer) -> score")
    if not callable(question):
        raise ConfigurationError("question", question, "a callable (example) -> str")
    if not focus_rules_ok(focus_rules):
        raise ConfigurationError("focus_rules", focus_rules, FOCUS_RULES_ALLOWED)
    serving = ServingSettings(focus_rules=focus_rules, focus_embedder=focus_embedder)

    cases = Cases()
    resting_until = [float("-inf")]  # after a wait ran out: words, then tried again

    async def prompt_for(version: PromptVersion, request: str) -> str:
        embedder = serving.embedder
        if embedder is None or time.monotonic() < resting_until[0]:
            return served_prompt(system_prompt, version, request, focus=focus_rules)
        # Embedding is CPU work, or the user's code: off the event loop, and bounded.
        call = in_thread(
            lambda: served_prompt(
                system_prompt, version, request, focus=focus_rules, embedder=embedder, cases=cases
            )
        )
        try:
            return await asyncio.wait_for(asyncio.wrap_future(call), RUNNER_EMBED_SECONDS)
        except asyncio.TimeoutError:  # the builtin TimeoutError only from 3.11
            resting_until[0] = time.monotonic() + RUNNER_COOL_DOWN_SECONDS
            return served_prompt(system_prompt, version, request, focus=focus_rules)

    async def run(version: PromptVersion, example: Any) -> float | bool:
        request = question(example)
        graph = agent(await prompt_for(version, request))
        payload = {"messages": [HumanMessage(content=request)]}
        if hasattr(graph, "ainvoke"):
            result = await graph.ainvoke(payload)
        else:
            result = await asyncio.to_thread(graph.invoke, payload)
        score = grade(example, _answer(result))
        if inspect.isawaitable(score):
            score = await score
        return score

    return run
