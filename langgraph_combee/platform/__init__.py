"""langgraph-combee on the LangGraph API server (``langgraph dev``, LangGraph Platform).

* :func:`shared_combee` gives a graph module its process-wide ``Combee`` on the
  server's own store (``store="platform"``), the same object however often the
  module is loaded.
* :data:`app` (``"http": {"app": "langgraph_combee.platform:app"}`` in
  ``langgraph.json``) serves feedback, status, versions, diff, approve, reject and
  rollback, all async, and its lifespan starts the learners and stops them
  (releasing their leases) when the server stops. :func:`combee_routes`,
  :func:`lifespan` and :func:`create_app` build the same into an app of your own.

The routes need Starlette, which ``langgraph-api`` ships
(``pip install 'langgraph-combee[platform]'``). See docs/platform.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_combee._storage.server_store import PlatformStore
from langgraph_combee.platform._shared import (
    DEV_LEASE_SECONDS,
    in_dev_server,
    registered,
    shared_combee,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute

__all__ = [
    "DEV_LEASE_SECONDS",
    "PlatformStore",
    "app",
    "combee_routes",
    "create_app",
    "in_dev_server",
    "lifespan",
    "registered",
    "shared_combee",
]

_app: Starlette | None = None


def combee_routes(prefix: str = "/combee") -> list[BaseRoute]:
    """The Combee routes under ``prefix`` (see ``langgraph_combee.platform._routes``)."""
    from langgraph_combee.platform._routes import combee_routes as routes

    return routes(prefix)


def create_app(prefix: str = "/combee") -> Starlette:
    """A Starlette app with the Combee routes under ``prefix`` and the learners' lifespan."""
    from langgraph_combee.platform._routes import create_app as make

    return make(prefix)


def __getattr__(name: str) -> Any:
    # Starlette is imported only when the app or lifespan is asked for, so the
    # graph side (shared_combee) works without the [platform] extra.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    if name == "lifespan":
        from langgraph_combee.platform._routes import lifespan

        return lifespan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
