"""The control API's app: the routes of each resource, behind the admin token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from evoplane.control import agents, evolutions, schedules, tenants
from evoplane.control.config import ControlConfig
from registry import InvalidRecordError, NotFoundError

__all__ = ["create_control_app"]


def create_control_app(config: ControlConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if config.client is None:
            assert config.connect is not None, "give a client or a way to connect one"
            config.client = await config.connect()
        yield

    app = FastAPI(title="Evoplane control API", version="1", lifespan=lifespan)
    app.state.control = config
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(InvalidRecordError, _invalid)
    for routes in (evolutions, agents, schedules, tenants):
        app.include_router(routes.router)
    return app


async def _not_found(_: Request, error: NotFoundError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=404)


async def _invalid(_: Request, error: InvalidRecordError) -> JSONResponse:
    return JSONResponse({"detail": str(error)}, status_code=400)
