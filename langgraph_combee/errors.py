"""Every error langgraph-combee raises, importable from here only.

One root, so ``except CombeeError`` catches them all::

    CombeeError
    ├── ConfigurationError        bad argument or setting (also a ValueError)
    ├── StoreError                a store cannot be opened (unreachable, bad DSN, not SQLite)
    ├── MissingExtraError         an optional extra is not installed (also an ImportError)
    │   └── MissingWeightsError   a local model's weights package is not installed
    ├── LocalModelError           the local model could not be prepared or started
    │   └── WeightsMismatchError  assembled weights are not the official file (size, SHA-256)
    ├── LearningError             a learning step failed; no version was written
    │   ├── LLMCallError          an LLM call failed after its retries
    │   └── BudgetExceededError   the learner's call or token budget is spent
    ├── RegistryError             the prompt registry refused an operation
    │   ├── VersionNotFoundError  no such version (also a KeyError)
    │   ├── LeaseHeldError        another writer holds the lease for this prompt
    │   ├── LeaseLostError        the writer lease moved on; this writer's write was refused
    │   └── StaleCandidateError   a candidate's parent is no longer HEAD and cannot be rebased
    ├── EngineLoopError           a sync call was made from inside the engine's loop
    ├── MiddlewareOrderWarning    a warning (also a UserWarning): CombeeMiddleware is not first
    └── CombeeClosedError         a Combee was used after close()
"""

from langgraph_combee._errors import (
    BudgetExceededError,
    CombeeClosedError,
    CombeeError,
    ConfigurationError,
    EngineLoopError,
    LearningError,
    LeaseHeldError,
    LeaseLostError,
    LLMCallError,
    LocalModelError,
    MiddlewareOrderWarning,
    MissingExtraError,
    MissingWeightsError,
    RegistryError,
    StaleCandidateError,
    StoreError,
    VersionNotFoundError,
    WeightsMismatchError,
)

__all__ = [
    "BudgetExceededError",
    "CombeeClosedError",
    "CombeeError",
    "ConfigurationError",
    "EngineLoopError",
    "LLMCallError",
    "LearningError",
    "LeaseHeldError",
    "LeaseLostError",
    "LocalModelError",
    "MiddlewareOrderWarning",
    "MissingExtraError",
    "MissingWeightsError",
    "RegistryError",
    "StaleCandidateError",
    "StoreError",
    "VersionNotFoundError",
    "WeightsMismatchError",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
