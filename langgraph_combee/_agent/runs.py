"""Where the current run is and how to label it: config, scope, run ids, metadata.

What the middleware and the StateGraph helpers rely on, as verified against
langchain-core 1.8 and langgraph 1.2 (see ``tests/agent/test_middleware.py``):

* Inside a node (and in a ``create_agent`` hook), ``var_child_runnable_config``
  holds the node's config. Its ``callbacks`` is a ``CallbackManager`` whose
  ``parent_run_id`` is the node's own run; its handler lists are copies, so a
  handler added there never sees the graph's run end.
* The caller's ``config["run_id"]`` becomes the graph's root run id and is
  exposed to nodes as ``Runtime.execution_info.run_id`` (None when not given).
* A chat model called without an explicit config inherits
  ``var_child_runnable_config``; metadata set there for the duration of the call
  (``child_metadata``) lands on the model's run in every tracer, LangSmith's
  included.
* The graph's own run started before any node ran, so its metadata is fixed in
  the config. Every ``BaseTracer`` keeps open runs in ``run_map``, hands the same
  ``Run`` object to ``_persist_run`` at the end, and ``LangChainTracer`` sends
  ``run.extra`` (metadata included) when it patches the finished run; so
  updating ``extra["metadata"]`` of the open graph run in each tracer
  (``tag_runs``) labels the root run as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from langgraph_combee._core.types import PromptVersion

__all__ = [
    "child_metadata",
    "current_config",
    "given_run_id",
    "observed",
    "run_id_in_tracers",
    "run_ids",
    "run_labels",
    "scope_view",
    "tag_runs",
    "thread_id_of",
    "version_metadata",
]

_RUNTIME_KEY = "__pregel_runtime"  # where LangGraph keeps a node's Runtime in configurable
_MAX_DEPTH = 64


def current_config() -> RunnableConfig | None:
    """The config of the runnable being executed in this context, or None outside one."""
    return var_child_runnable_config.get()


def run_labels(prompt_id: str, version: int | None, tenant: str | None) -> dict[str, Any]:
    """The ``combee_*`` metadata of a run: prompt id, and the version and tenant when known."""
    metadata: dict[str, Any] = {"combee_prompt_id": prompt_id}
    if version is not None:
        metadata["combee_version"] = version
    if tenant is not None:
        metadata["combee_tenant"] = tenant
    return metadata


def version_metadata(prompt_id: str, version: PromptVersion) -> dict[str, Any]:
    """The metadata every run served by ``version`` carries."""
    return run_labels(prompt_id, version.version, version.tenant)


def scope_view(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a user's ``scope(config)`` sees: configurable (internals dropped), metadata, tags."""
    if not config:
        return {}
    configurable = config.get("configurable") or {}
    return {
        "configurable": {k: v for k, v in configurable.items() if not str(k).startswith("__")},
        "metadata": dict(config.get("metadata") or {}),
        "tags": list(config.get("tags") or []),
    }


def _execution_info(config: Mapping[str, Any] | None, runtime: object = None) -> Any:
    info = getattr(runtime, "execution_info", None)
    if info is not None or not config:
        return info
    node_runtime = (config.get("configurable") or {}).get(_RUNTIME_KEY)
    return getattr(node_runtime, "execution_info", None)


def given_run_id(config: Mapping[str, Any] | None, runtime: object = None) -> str | None:
    """The ``run_id`` the caller passed in the graph's config, seen from inside a node.

    Read from ``runtime`` (a LangGraph ``Runtime``) when given, else from ``config``.
    """
    run_id = getattr(_execution_info(config, runtime), "run_id", None)
    return str(run_id) if run_id else None


def thread_id_of(config: Mapping[str, Any] | None, runtime: object = None) -> str | None:
    """The LangGraph thread id of the run, if it has one."""
    thread_id = getattr(_execution_info(config, runtime), "thread_id", None)
    if thread_id is None and config:
        thread_id = (config.get("configurable") or {}).get("thread_id")
    return str(thread_id) if thread_id is not None else None


def run_ids(
    config: Mapping[str, Any] | None, runtime: object = None
) -> tuple[str | None, str | None]:
    """``(given_run_id(config, runtime), thread_id_of(config, runtime))``, read in one go.

    The middleware needs both on every model call: the run's execution info is
    looked up once instead of twice.
    """
    info = _execution_info(config, runtime)
    run_id = getattr(info, "run_id", None)
    thread_id = getattr(info, "thread_id", None)
    if thread_id is None and config:
        thread_id = (config.get("configurable") or {}).get("thread_id")
    return (str(run_id) if run_id else None, str(thread_id) if thread_id is not None else None)


def task_id_of(config: Mapping[str, Any] | None, runtime: object = None) -> str | None:
    """The id of the LangGraph task (one execution of one node) running, if known."""
    task_id = getattr(_execution_info(config, runtime), "task_id", None)
    if task_id is None and config:
        task_id = (config.get("configurable") or {}).get("checkpoint_ns")
    return str(task_id) if task_id else None


def observed(config: Mapping[str, Any] | None) -> bool:
    """Whether any callback handler is attached to the run: someone who could read its metadata.

    Tracing switched on by environment (``LANGSMITH_TRACING``) counts: LangChain
    adds its tracer to the graph's callbacks when the run starts.
    """
    callbacks = config.get("callbacks") if config else None
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers or callbacks.inheritable_handlers)
    return bool(callbacks)


def _tracers(config: Mapping[str, Any] | None) -> tuple[list[BaseTracer], str | None]:
    callbacks = config.get("callbacks") if config else None
    if isinstance(callbacks, BaseCallbackManager):
        parent = callbacks.parent_run_id
        handlers = list(callbacks.handlers)
        return [h for h in handlers if isinstance(h, BaseTracer)], str(parent) if parent else None
    return [], None


def _lineage(tracer: BaseTracer, run_id: str) -> list[Run]:
    """The open runs from ``run_id`` up to its root, as ``tracer`` tracks them."""
    chain: list[Run] = []
    current = tracer.run_map.get(run_id)
    while current is not None and len(chain) < _MAX_DEPTH:
        chain.append(current)
        if current.parent_run_id is None:
            break
        current = tracer.run_map.get(str(current.parent_run_id))
    return chain


def _targets(chain: list[Run], level: str) -> list[Run]:
    # chain[0] is the run of the code asking (a node or hook); chain[1] the graph
    # running that node; chain[-1] the root of the whole trace.
    if level == "graph":
        return chain[1:2] or chain[:1]
    return chain[-1:]


def run_id_in_tracers(config: Mapping[str, Any] | None, *, level: str = "root") -> str | None:
    """The id of the graph run (``level="graph"``) or root run enclosing this node.

    Found through any ``BaseTracer`` attached to the run; None without one.
    """
    tracers, parent = _tracers(config)
    if parent is None:
        return None
    for tracer in tracers:
        found = _targets(_lineage(tracer, parent), level)
        if found:
            return str(found[0].id)
    return None


def tag_runs(config: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> int:
    """Add ``metadata`` to the open graph run and root run enclosing this node.

    Works through every ``BaseTracer`` attached to the run (LangSmith's included);
    returns how many runs were labelled.
    """
    tracers, parent = _tracers(config)
    if parent is None or not metadata:
        return 0
    tagged = 0
    for tracer in tracers:
        chain = _lineage(tracer, parent)
        seen: set[str] = set()
        for run in [*_targets(chain, "graph"), *_targets(chain, "root")]:
            if str(run.id) in seen:
                continue
            seen.add(str(run.id))
            run.extra.setdefault("metadata", {}).update(metadata)
            tagged += 1
    return tagged


@contextlib.contextmanager
def child_metadata(metadata: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, runnables started without a config carry ``metadata``.

    Works for sync and async code alike: the config lives in a context variable,
    set and reset in the caller's own context.
    """
    config = var_child_runnable_config.get()
    if config is None or not metadata:
        yield
        return
    patched: RunnableConfig = {
        **config,
        "metadata": {**(config.get("metadata") or {}), **metadata},
    }
    token = var_child_runnable_config.set(patched)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)
