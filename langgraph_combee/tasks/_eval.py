"""Running a task's examples through an agent and scoring the replies."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_combee.tasks._base import Example, Task

__all__ = ["Evaluation", "evaluate", "reply_text", "ticket_input"]


def ticket_input(example: Example) -> dict[str, Any]:
    """The agent input for one example: a single user message."""
    return {"messages": [{"role": "user", "content": example.input}]}


def reply_text(result: Any) -> str:
    """The text of the agent's last message (``""`` when there is none)."""
    messages = result.get("messages") if isinstance(result, dict) else None
    if not messages:
        return ""
    return str(messages[-1].text)


@dataclass(frozen=True)
class Evaluation:
    """How an agent did on a list of examples.

    Attributes:
        answers: The agent's reply to each example, in order ("" for a failed run).
        correct: Whether each reply scored right.
        errors: Runs that raised (scored wrong, never re-raised).
        seconds: Wall-clock time of the whole evaluation.
    """

    answers: tuple[str, ...]
    correct: tuple[bool, ...]
    errors: int
    seconds: float

    @property
    def accuracy(self) -> float:
        """Fraction of examples answered right (0.0 for no examples)."""
        return sum(self.correct) / len(self.correct) if self.correct else 0.0

    def by_rule(self, examples: Sequence[Example]) -> dict[str, float]:
        """Accuracy per rule id (from ``Example.meta["rule"]``)."""
        totals: dict[str, list[int]] = {}
        for example, right in zip(examples, self.correct, strict=True):
            hits = totals.setdefault(example.meta.get("rule", "?"), [0, 0])
            hits[0] += right
            hits[1] += 1
        return {rule: right / count for rule, (right, count) in sorted(totals.items())}


def evaluate(
    task: Task,
    agent: Runnable[Any, Any],
    examples: Sequence[Example],
    *,
    max_concurrency: int = 4,
    config: RunnableConfig | None = None,
) -> Evaluation:
    """Run every example through ``agent`` (in parallel) and score the replies.

    A run that raises is scored wrong and counted in ``errors``; it never stops
    the evaluation. Build the agent with ``combee.middleware(capture=False)`` to
    evaluate a learned prompt without feeding its runs back to the learner.

    Args:
        task: Scores the replies.
        agent: A ``create_agent`` agent (any runnable taking ``{"messages": ...}``).
        examples: What to run.
        max_concurrency: Runs in flight at once.
        config: Base config of every run (each gets its own ``run_id``).
    """
    started = time.monotonic()
    configs: list[RunnableConfig] = [
        {**(config or {}), "run_id": uuid.uuid4(), "max_concurrency": max_concurrency}
        for _ in examples
    ]
    results = agent.batch(
        [ticket_input(example) for example in examples], configs, return_exceptions=True
    )
    answers: list[str] = []
    correct: list[bool] = []
    errors = 0
    for example, result in zip(examples, results, strict=True):
        if isinstance(result, BaseException):
            errors += 1
            answers.append("")
            correct.append(False)
            continue
        text = task.answer_of(result)
        answers.append(text)
        correct.append(task.score(text, example))
    return Evaluation(
        answers=tuple(answers),
        correct=tuple(correct),
        errors=errors,
        seconds=time.monotonic() - started,
    )
