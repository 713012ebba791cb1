"""The public error types of langgraph-combee (the tree is drawn in ``_errors``)."""

from langgraph_combee._errors import (
    BudgetExceededError,
    CombeeError,
    ConfigurationError,
    EngineLoopError,
    LearningError,
    LeaseHeldError,
    LeaseLostError,
    LLMCallError,
    MissingExtraError,
    RegistryError,
    StaleCandidateError,
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
    "LeaseLostError",
    "MissingExtraError",
    "RegistryError",
    "StaleCandidateError",
    "StoreError",
    "VersionNotFoundError",
    "WeightsMismatchError",
]
