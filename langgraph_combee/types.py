"""The types a user annotates with: what ``Combee`` returns and what it takes to extend.

The root package holds what an app constructs (``Combee``, the settings objects,
the acceptance policies, ``Trace``, ``Feedback``); this module holds the rest of
the public types: the values ``Combee`` returns (``PromptVersion``,
``LearnReport``, ``StepRecord``, ``PromptRegistry``, ...), the edit operations and playbook
types they carry, and the protocols and base classes an extension implements
(``Evaluator``, ``FeedbackSource``, ``Embedder``, ``Strategy``, ``RoleProfile``,
``PolicyContext`` for an ``AcceptancePolicy``). Errors are in
``langgraph_combee.errors``.
"""

from langgraph_combee._agent.collector import CombeeTracer
from langgraph_combee._agent.graph import LearnedPromptModel, PromptNode
from langgraph_combee._agent.side import Evaluator, ScopeFn
from langgraph_combee._algorithm.roles import Aggregation, RoleProfile
from langgraph_combee._algorithm.strategies import StepContext, StepResult, Strategy
from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.diff import PlaybookDiff
from langgraph_combee._core.ops import Add, Remove, Tag, Update
from langgraph_combee._core.playbook import ApplyResult, BudgetResult, Bullet, Playbook
from langgraph_combee._core.types import (
    Correction,
    Decision,
    LearnReport,
    PromptVersion,
    Reflection,
    StepReport,
)
from langgraph_combee._guard.guard import Screening
from langgraph_combee._learner.acceptance import PolicyContext
from langgraph_combee._learner.learner import BackgroundLearner
from langgraph_combee._settings import FeedbackSource, VersionListener
from langgraph_combee._storage.dead_letters import DeadLetter
from langgraph_combee._storage.queue import Claim, TraceQueue
from langgraph_combee._storage.registry import PromptRegistry
from langgraph_combee._storage.steps import StepRecord

__all__ = [
    "Add",
    "Aggregation",
    "ApplyResult",
    "BackgroundLearner",
    "BudgetResult",
    "Bullet",
    "Claim",
    "CombeeTracer",
    "Correction",
    "DeadLetter",
    "Decision",
    "Embedder",
    "Evaluator",
    "FeedbackSource",
    "LearnReport",
    "LearnedPromptModel",
    "Playbook",
    "PlaybookDiff",
    "PolicyContext",
    "PromptNode",
    "PromptRegistry",
    "PromptVersion",
    "Reflection",
    "Remove",
    "RoleProfile",
    "ScopeFn",
    "Screening",
    "StepContext",
    "StepRecord",
    "StepReport",
    "StepResult",
    "Strategy",
    "Tag",
    "TraceQueue",
    "Update",
    "VersionListener",
]

# Reprs, tracebacks and the API reference show the public path, not the private module.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = __name__
del _name, _value
