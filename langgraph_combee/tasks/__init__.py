"""Offline task environments with ground truth, for demos, benchmarks and tests.

Each task generates seeded examples whose right answers follow company rules a
model cannot guess, scores replies tolerantly, and builds its ``create_agent``
agent; ``Task.rules`` is the hand-written rules text (the ceiling a learned
playbook aims at). Measured figures: ``docs/tasks.md``.

* ``"tickets"`` (:class:`TicketRouting`): support tickets to 24 team codes.
* ``"formats"`` (:class:`HouseFormats`): values from records in 10 house formats.
* ``"tools"`` (:class:`ToolCalls`): customer requests served by tool calls, with the
  house conventions in the calls' order and arguments (scored from the calls made).

Example:
    ```python
    from langgraph_combee.tasks import evaluate, get_task

    task = get_task("tickets")
    test = task.examples(40, seed=0, split="test")
    agent = task.build_agent(model, with_rules=True)
    print(evaluate(task, agent, test).accuracy)
    ```

Measure a task's baseline (no rules) and ceiling (hand-written rules) on a model::

    python -m langgraph_combee.tasks --model local:1.5b --task all -n 40

``load_models(spec, task)`` turns ``test``, ``local:1.5b``, ``local:0.5b`` or
``provider:name`` into the agent's and the learner's chat models.

Each task also ships offline doubles: ``task.double_model()`` answers by the
rules written in its system prompt (as a small real model does) and
``task.double_learner()`` is ``fake_learner`` reflecting with ``task.insight``.
"""

from __future__ import annotations

from langgraph_combee._errors import ConfigurationError
from langgraph_combee.tasks._base import Example, Rule, Split, Task, clean_answer
from langgraph_combee.tasks._eval import Evaluation, evaluate, reply_text, ticket_input
from langgraph_combee.tasks._formats import HouseFormats
from langgraph_combee.tasks._models import Models, check_model_spec, load_models
from langgraph_combee.tasks._tickets import TicketRouting
from langgraph_combee.tasks._tools import ToolCalls

__all__ = [
    "TASKS",
    "Evaluation",
    "Example",
    "HouseFormats",
    "Models",
    "Rule",
    "Split",
    "Task",
    "TicketRouting",
    "ToolCalls",
    "check_model_spec",
    "clean_answer",
    "evaluate",
    "get_task",
    "load_models",
    "reply_text",
    "ticket_input",
]

TASKS: dict[str, type[Task]] = {
    TicketRouting.name: TicketRouting,
    HouseFormats.name: HouseFormats,
    ToolCalls.name: ToolCalls,
}
"""Every task class by name."""


def get_task(name: str) -> Task:
    """A new instance of the task called ``name`` (``"tickets"``, ``"formats"`` or ``"tools"``).

    Raises:
        ConfigurationError: No task has that name.
    """
    try:
        return TASKS[name]()
    except (KeyError, TypeError):
        raise ConfigurationError("task", name, f"one of {sorted(TASKS)}") from None
