"""Storage on a LangGraph ``BaseStore``: the prompt registry, the trace queue, the writer lease.

Layer 3 of the design: it reads and writes the store and never calls an LLM.
Every class works with any ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
``PostgresStore``) and offers async twins of its methods.
"""

from langgraph_combee._storage.lease import Lease
from langgraph_combee._storage.queue import TraceQueue
from langgraph_combee._storage.registry import PromptRegistry

__all__ = ["Lease", "PromptRegistry", "TraceQueue"]
