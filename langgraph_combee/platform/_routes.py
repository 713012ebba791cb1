"""Ready HTTP routes for ``langgraph.json``'s ``http.app``, and their lifespan.

Every route serves the shared ``Combee`` objects of the process
(``shared_combee``), by prompt id, and uses only async calls, so the dev
server's blocking-call detector never fires:

- ``GET /combee``: the prompt ids served;
- ``GET /combee/{prompt_id}/status``: HEAD, queue backlog, learner counters;
- ``POST /combee/{prompt_id}/feedback``: late feedback on a run (``afeedback``);
- ``GET /combee/{prompt_id}/versions``: every version, without playbooks;
- ``GET /combee/{prompt_id}/versions/{n}``: one version, with its rendered prompt;
- ``GET /combee/{prompt_id}/diff?a=1&b=2``: what changed between two versions;
- ``POST /combee/{prompt_id}/versions/{n}/approve`` (``reject``, ``rollback``):
  decide on a candidate, or put version n's playbook back in force.

Every route takes ``?tenant=...`` for a tenant's playbook. Errors answer JSON
``{"error": ..., "detail": ...}``: 400 for a bad body or argument, 404 for an
unknown prompt or version, 409 for a decision the registry refuses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langgraph_combee._combee import Combee, running_combees
from langgraph_combee._core.types import PromptVersion
from langgraph_combee._errors import (
    CombeeError,
    ConfigurationError,
    MissingExtraError,
    RegistryError,
    VersionNotFoundError,
)
from langgraph_combee._storage.server_store import PlatformStore, remember_server_store
from langgraph_combee.platform._shared import registered

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import BaseRoute, Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("starlette", "platform") from exc

__all__ = ["combee_routes", "create_app", "lifespan"]

logger = logging.getLogger("langgraph_combee.platform")

STOP_TIMEOUT_SECONDS = 30.0

Handler = Callable[[Request], Awaitable[JSONResponse]]


class FeedbackBody(BaseModel):
    """The body of ``POST /combee/{prompt_id}/feedback``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1)
    score: float | None = None
    correct: bool | None = None
    comment: str | None = None
    ground_truth: str | None = None
    source: str = "user"


class DecisionBody(BaseModel):
    """The optional body of approve, reject and rollback."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = None


def _error(status: int, error: str, detail: object) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status)


class _UnknownPromptError(CombeeError):
    def __init__(self, prompt_id: str) -> None:
        super().__init__(
            f"no shared Combee for prompt {prompt_id!r} in this process; "
            f"known: {sorted(registered())}"
        )


def _combee(request: Request) -> Combee:
    prompt_id = request.path_params["prompt_id"]
    combee = registered().get(prompt_id)
    if combee is None:
        raise _UnknownPromptError(prompt_id)
    return combee


def _int_param(name: str, value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ConfigurationError(name, value, "an integer version number") from None


async def _body(request: Request, model: type[BaseModel]) -> Any:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise ConfigurationError(
            "body", raw.decode(errors="replace")[:200], f"JSON of {model.__name__}: {exc}"
        ) from None


def _guarded(handler: Callable[[Request], Awaitable[object]]) -> Handler:
    """Answer JSON, with Combee's errors mapped to HTTP statuses."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            return JSONResponse(await handler(request))
        except (VersionNotFoundError, _UnknownPromptError) as exc:
            return _error(404, "not_found", str(exc))
        except ConfigurationError as exc:
            return _error(400, "bad_request", str(exc))
        except RegistryError as exc:
            return _error(409, "conflict", str(exc))
        except CombeeError as exc:
            logger.exception("combee route %s failed", request.url.path)
            return _error(503, "unavailable", str(exc))

    return endpoint


def _tenant(request: Request) -> str | None:
    return request.query_params.get("tenant") or None


def _summary(version: PromptVersion) -> dict[str, Any]:
    fields = version.model_dump(mode="json", exclude={"playbook", "ops", "quarantined"})
    return fields | {"entries": len(version.playbook.bullets)}


async def _prompts(request: Request) -> object:
    return {"prompt_ids": sorted(registered())}


async def _status(request: Request) -> object:
    combee, tenant = _combee(request), _tenant(request)
    head = await combee.acurrent(tenant=tenant)
    store = combee.store
    return {
        "prompt_id": combee.prompt_id,
        "tenant": tenant,
        "head": head.version,
        "queue": await combee.queue(tenant).abacklog(),
        **combee.describe(),  # "serving" and "learner" counters, from memory
        "store_bound": store.bound if isinstance(store, PlatformStore) else True,
    }


async def _feedback(request: Request) -> object:
    combee = _combee(request)
    body: FeedbackBody = await _body(request, FeedbackBody)
    found = await combee.afeedback(
        body.run_id,
        score=body.score,
        correct=body.correct,
        comment=body.comment,
        ground_truth=body.ground_truth,
        source=body.source,
        tenant=_tenant(request),
    )
    return {"run_id": body.run_id, "found": found}


async def _versions(request: Request) -> object:
    history = await _combee(request).ahistory(tenant=_tenant(request))
    return {"versions": [_summary(v) for v in history]}


async def _show(request: Request) -> object:
    number = _int_param("version", request.path_params["version"])
    version = await _combee(request).aget(number, tenant=_tenant(request))
    return version.model_dump(mode="json") | {"rendered": version.render()}


async def _diff(request: Request) -> object:
    params = request.query_params
    if "a" not in params or "b" not in params:
        raise ConfigurationError("query", dict(params), "both ?a=<version>&b=<version>")
    a, b = _int_param("a", params["a"]), _int_param("b", params["b"])
    diff = await _combee(request).adiff(a, b, tenant=_tenant(request))
    return {
        "a": a,
        "b": b,
        "summary": diff.summary(),
        "text": diff.render(),
        "diff": _jsonable(diff),
    }


def _jsonable(value: Any) -> Any:
    """A dataclass or pydantic diff as JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


_DECISIONS: dict[str, Callable[..., Awaitable[PromptVersion]]] = {
    "approve": Combee.aapprove,
    "reject": Combee.areject,
    "rollback": Combee.arollback,
}


def _decision(call: str) -> Callable[[Request], Awaitable[object]]:
    method = _DECISIONS[call]

    async def decide(request: Request) -> object:
        combee, tenant = _combee(request), _tenant(request)
        number = _int_param("version", request.path_params["version"])
        body: DecisionBody = await _body(request, DecisionBody)
        # Without a reason each call keeps its own default ("approved", ...).
        reason = {} if body.reason is None else {"reason": body.reason}
        return _summary(await method(combee, number, tenant=tenant, **reason))

    return decide


def combee_routes(prefix: str = "/combee") -> list[BaseRoute]:
    """The routes, under ``prefix``, for an app of your own (Starlette or FastAPI).

    Example::

        app = Starlette(routes=[*combee_routes(), ...], lifespan=lifespan)
    """
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise ConfigurationError("prefix", prefix, "a path like '/combee' (no trailing slash)")
    p = prefix + "/{prompt_id}"
    v = p + "/versions/{version}"
    table: Sequence[tuple[str, Callable[[Request], Awaitable[object]], str]] = (
        (prefix, _prompts, "GET"),
        (p + "/status", _status, "GET"),
        (p + "/feedback", _feedback, "POST"),
        (p + "/versions", _versions, "GET"),
        (v, _show, "GET"),
        (p + "/diff", _diff, "GET"),
        (v + "/approve", _decision("approve"), "POST"),
        (v + "/reject", _decision("reject"), "POST"),
        (v + "/rollback", _decision("rollback"), "POST"),
    )
    return [Route(path, _guarded(fn), methods=[method]) for path, fn, method in table]


async def _server_store() -> Any:
    """The LangGraph server's store, when this process is one (None otherwise)."""
    # Only a running server has imported langgraph_api; importing it elsewhere
    # reads the server's settings from the environment and fails.
    module = sys.modules.get("langgraph_api.store")
    if module is None:
        return None
    return await module.get_store()


@contextlib.asynccontextmanager
async def lifespan(app: object) -> AsyncIterator[None]:
    """Bind the shared Combees to the server's store, start their learners, stop them at the end.

    At the end it also stops every other learner running on the server's store
    (a hand-built ``Combee(store="platform")`` started at import), releasing its lease.

    Inside a LangGraph server the graphs are loaded before this runs, so every
    ``shared_combee()`` of the graph modules is known. Each learner that
    starts takes the writer lease if it is free (one replica learns, the others
    stand by); stopping releases it, so the next process learns at once.
    """
    started: list[Combee] = []
    store = await _server_store()
    if store is not None:
        remember_server_store(store)  # for hand-built Combee(store="platform") objects too
    for combee in registered().values():
        if isinstance(combee.store, PlatformStore) and store is not None:
            combee.store.bind(store)
        if combee.model is not None:
            await combee.astart()
            started.append(combee)
    logger.info("combee learners started: %s", [c.prompt_id for c in started])
    try:
        yield
    finally:
        # A hand-built Combee(store="platform") started at import is stopped here
        # too: the server writes its store out when the lifespan ends, so a lease
        # released later, by the exit hook, would never reach the next process.
        started += [
            c for c in running_combees() if c not in started and isinstance(c.store, PlatformStore)
        ]
        for combee in started:
            try:
                await combee.astop(STOP_TIMEOUT_SECONDS)
            except Exception:  # one failed stop must not keep the others' leases
                logger.warning("could not stop the learner of %r", combee, exc_info=True)
        logger.info("combee learners stopped: %s", [c.prompt_id for c in started])


def create_app(prefix: str = "/combee") -> Starlette:
    """A Starlette app with ``combee_routes(prefix)`` and the learners' ``lifespan``."""
    return Starlette(routes=combee_routes(prefix), lifespan=lifespan)
