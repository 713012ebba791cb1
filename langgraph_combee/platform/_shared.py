"""One ``Combee`` per prompt id per process, however often its module is loaded.

``langgraph-api`` loads a graph file under a module name of its own, so a routes
file that imports the graph module runs it a second time: a plain
``combee = Combee(...)`` at module level would make a second object with a
second learner and an empty capture buffer, and feedback sent to it would find
nothing. ``shared_combee()`` keeps the first object made for a prompt id in a
process-wide registry and hands it back to every later caller.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from langgraph_combee._combee import Combee
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._settings import LearnerSettings

__all__ = ["DEV_LEASE_SECONDS", "registered", "shared_combee"]

DEV_LEASE_SECONDS = 10.0
"""The learner lease under ``langgraph dev`` (60 s elsewhere): a dev server that is
killed rather than stopped (its lease not released) lets the next one learn sooner."""

_DEFAULT_LEASE = LearnerSettings().lease_seconds

_combees: dict[str, Combee] = {}
_lock = threading.Lock()


def in_dev_server() -> bool:
    """True inside ``langgraph dev`` (which sets ``LANGSMITH_LANGGRAPH_API_VARIANT``)."""
    return os.environ.get("LANGSMITH_LANGGRAPH_API_VARIANT") == "local_dev"


def shared_combee(*, prompt_id: str, **kwargs: Any) -> Combee:
    """This process's ``Combee`` for ``prompt_id``, made on the first call.

    The first call builds ``Combee(prompt_id=prompt_id, store="platform", **kwargs)``
    (a ``store=`` of your own overrides ``"platform"``); every later call with
    the same ``prompt_id``, from any module or any copy of one, returns that same
    object and ignores its other arguments. Under ``langgraph dev`` a learner lease
    left at its default (``LearnerSettings.lease_seconds``) is ``DEV_LEASE_SECONDS``.

    Example::

        # graph.py, listed in langgraph.json; routes import it as they like
        combee = shared_combee(prompt_id="support-agent", model="openai:gpt-4.1-mini")
        graph = create_agent(model, tools, middleware=[combee.middleware()])

    Raises:
        ConfigurationError: ``prompt_id`` is not a non-empty string, or another
            argument is bad (from ``Combee``).
    """
    if not isinstance(prompt_id, str) or not prompt_id.strip():
        raise ConfigurationError("prompt_id", prompt_id, "a non-empty string")
    with _lock:
        existing = _combees.get(prompt_id)
        if existing is not None:
            return existing
        kwargs.setdefault("store", "platform")
        if in_dev_server():
            learner = kwargs.get("learner") or LearnerSettings()
            if isinstance(learner, LearnerSettings) and learner.lease_seconds == _DEFAULT_LEASE:
                kwargs["learner"] = learner.replace(lease_seconds=DEV_LEASE_SECONDS)
        combee = Combee(prompt_id=prompt_id, **kwargs)
        _combees[prompt_id] = combee
    return combee


def registered() -> dict[str, Combee]:
    """The shared ``Combee`` objects of this process, by prompt id (a copy)."""
    with _lock:
        return dict(_combees)


def forget(prompt_id: str) -> Combee | None:
    """Drop ``prompt_id`` from the registry (tests); returns the object it held."""
    with _lock:
        return _combees.pop(prompt_id, None)
