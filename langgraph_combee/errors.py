"""The public error types of langgraph-combee (the tree is drawn in ``_errors``)."""

from langgraph_combee._errors import (
    BudgetExceededError,
    CombeeError,
    ConfigurationError,
    EngineLoopError,
    LearningError,
    LeaseHeldError,
    LLMCallError,
    MissingExtraError,
    RegistryError,
    StoreError,
    VersionNotFoundError,
    WeightsMismatchError,
)

__all__ = [
    "BudgetExceededError",
    "CombeeError",
    "ConfigurationError",
    "EngineLoopError",
    "LLMCallError",
    "LearningError",
    "LeaseHeldError",
    "MissingExtraError",
    "RegistryError",
    "StoreError",
    "VersionNotFoundError",
    "WeightsMismatchError",
]
