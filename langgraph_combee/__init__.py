"""langgraph-combee: a LangGraph agent that improves its own system prompt from its runs.

The public API is this module's ``__all__``; ``langgraph_combee.errors`` holds the
error types and ``langgraph_combee.testing`` the offline chat-model doubles.
"""

from langgraph_combee._agent.middleware import CombeeMiddleware
from langgraph_combee._combee import Combee
from langgraph_combee._core.dedup import Embedder
from langgraph_combee._core.ops import Add, Remove, Tag, Update
from langgraph_combee._core.playbook import Bullet, Playbook
from langgraph_combee._core.types import (
    Decision,
    Feedback,
    LearnReport,
    PromptVersion,
    Reflection,
    StepReport,
    Trace,
)
from langgraph_combee._errors import CombeeError
from langgraph_combee._learner.acceptance import (
    AcceptAll,
    AcceptancePolicy,
    CanaryGate,
    ManualApproval,
    ValidationGate,
)
from langgraph_combee._learning.budget import LearnerBudget
from langgraph_combee._learning.controller import BatchSizeController
from langgraph_combee._learning.guard import BulletGuard

__version__ = "0.1.0"

__all__ = [
    "AcceptAll",
    "AcceptancePolicy",
    "Add",
    "BatchSizeController",
    "Bullet",
    "BulletGuard",
    "CanaryGate",
    "Combee",
    "CombeeError",
    "CombeeMiddleware",
    "Decision",
    "Embedder",
    "Feedback",
    "LearnReport",
    "LearnerBudget",
    "ManualApproval",
    "Playbook",
    "PromptVersion",
    "Reflection",
    "Remove",
    "StepReport",
    "Tag",
    "Trace",
    "Update",
    "ValidationGate",
]
