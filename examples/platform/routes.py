"""The HTTP app of ``langgraph.json``: Combee's routes and lifespan, plus one route of ours.

``langgraph_combee.platform:app`` alone would do; this file shows how to add
the routes to an app of your own. Importing ``graph`` here is safe: the server
has already loaded it under another module name, and ``shared_combee`` hands
both copies the same ``Combee``.
"""

from __future__ import annotations

import graph
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from langgraph_combee.platform import combee_routes, lifespan


async def head(request: Request) -> JSONResponse:
    """The version in force, read with the async API (the dev server forbids blocking)."""
    version = await graph.combee.acurrent()
    return JSONResponse({"version": version.version, "prompt": version.render()})


app = Starlette(routes=[*combee_routes(), Route("/router/head", head)], lifespan=lifespan)
