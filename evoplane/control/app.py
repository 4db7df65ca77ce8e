"""The control API's app: the routes of each resource, behind the admin token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from evoplane.control import agents, evaluation, evolutions, review, schedules, tenants
from evoplane.control.config import ControlConfig
from evoplane.control.docs import TAGS, serve_docs, summarise
from registry import InvalidRecordError, NotFoundError

__all__ = ["create_control_app"]

DESCRIPTION = (
    "Start, follow, approve and roll back evolutions; read and diff agent versions; change "
    "tenant policies; review what needs a person; run code scorers; read evaluation sets. "
    "Every route needs the admin token (`Authorization: Bearer ...`; "
    '"Authorize" above): `EVOPLANE_ADMIN_TOKEN`, or the one `evoplane up` prints.'
)


def create_control_app(config: ControlConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if config.client is None:
            assert config.connect is not None, "give a client or a way to connect one"
            config.client = await config.connect()
        yield

    app = FastAPI(
        title="Evoplane control API",
        version="1",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    serve_docs(app)
    app.state.control = config
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(InvalidRecordError, _invalid)
    for routes in (evolutions, agents, schedules, tenants, review, evaluation):
        summarise(routes.router)
        app.include_router(routes.router)
    return app


async def _not_found(_: Request, error: NotFoundError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=404)


async def _invalid(_: Request, error: InvalidRecordError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=400)
