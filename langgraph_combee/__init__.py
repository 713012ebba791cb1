"""langgraph-combee: a LangGraph agent that improves its own system prompt from its runs.

The public API is three modules:

- ``langgraph_combee`` (this one, ``__all__``): what an app constructs: ``Combee``,
  its settings objects, the middleware, the acceptance policies, ``Trace`` and
  ``Feedback``.
- ``langgraph_combee.types``: what ``Combee`` returns and what an extension
  implements (``PromptVersion``, ``PromptRegistry``, ``PolicyContext``, ...).
- ``langgraph_combee.errors``: every error, under one root ``CombeeError``.

``langgraph_combee.testing`` holds the offline chat-model doubles.
"""

# Imported so that their public names carry public paths however the package is entered.
from langgraph_combee import errors as errors
from langgraph_combee import types as types
from langgraph_combee._agent.middleware import CombeeMiddleware
from langgraph_combee._algorithm.controller import BatchSizeController
from langgraph_combee._combee import Combee
from langgraph_combee._core.types import Feedback, Trace
from langgraph_combee._guard.guard import BulletGuard
from langgraph_combee._learner.acceptance import (
    AcceptAll,
    AcceptancePolicy,
    CanaryGate,
    ManualApproval,
    ValidationGate,
)
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._settings import (
    AlgorithmSettings,
    CaptureSettings,
    LearnerSettings,
    ServingSettings,
)

__version__ = "0.1.0"

__all__ = [
    "AcceptAll",
    "AcceptancePolicy",
    "AlgorithmSettings",
    "BatchSizeController",
    "BulletGuard",
    "CanaryGate",
    "CaptureSettings",
    "Combee",
    "CombeeMiddleware",
    "Feedback",
    "LearnerBudget",
    "LearnerSettings",
    "ManualApproval",
    "ServingSettings",
    "Trace",
    "ValidationGate",
]

# Reprs, tracebacks and the API reference show ``langgraph_combee.Combee``, not the
# private module a name is defined in.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
