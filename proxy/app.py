"""The gateway's HTTP face: OpenAI-compatible chat completions, models, feedback, events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.routing import Route

from proxy import jsonio
from proxy.agent_version import agent_version
from proxy.catalog import RegistryUnreachable
from proxy.config import GatewayConfig
from proxy.errors import GatewayError, error_body, gateway_error_handler
from proxy.feedback import EventReport, FeedbackReport, record_event, record_feedback
from proxy.gateway import Gateway
from proxy.mcp import McpRoute
from proxy.otlp import export_traces
from proxy.protocols import messages_api, responses_api
from proxy.protocols.serving import (
    admit,
    header_dict,
    read_json,
    response_headers,
    stream,
    validated_chat,
)
from proxy.protocols.store import ResponseStore
from proxy.schemas import describe_validation_error
from proxy.service import GatewayService, Served
from proxy.telemetry import calling_trace, trace_of
from registry import (
    NotFoundError,
    effective_reward_of_trajectory,
    export_page,
    export_start,
    get_events,
    get_trajectory,
)

__all__ = ["create_app"]


def create_app(config: GatewayConfig) -> FastAPI:
    """The gateway as an ASGI app; the registry must be migrated (`evoplane db upgrade`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gateway = Gateway(config)
        await gateway.start()
        app.state.gateway, app.state.service = gateway, gateway.service
        app.state.responses = ResponseStore(gateway.service)
        mcp.bind(gateway.service)
        try:
            yield
        finally:
            await mcp.aclose()
            await gateway.close()

    mcp = McpRoute()
    app = GatewayAPI(title="Evoplane gateway", version="1", lifespan=lifespan)
    app.mcp = mcp
    app.add_exception_handler(GatewayError, gateway_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RegistryUnreachable, _registry_unreachable)
    # GatewayAPI serves the agent calls itself; the router keeps them for what that shortcut
    # does not match (other methods get 405; an app mounted under a root path).
    app.router.routes.append(Route("/v1/chat/completions", chat_completions, methods=["POST"]))
    for path, handler, methods in [*responses_api.ROUTES, *messages_api.ROUTES]:
        if path in _AGENT_CALLS:
            app.router.routes.append(Route(path, handler, methods=methods))
        else:
            app.add_api_route(path, handler, methods=methods)
    app.add_api_route("/v1/models", list_models, methods=["GET"])
    app.add_api_route("/v1/feedback", feedback, methods=["POST"])
    app.add_api_route("/v1/events", agent_events, methods=["POST"])
    app.add_api_route("/v1/trajectories/{trajectory_id}", read_trajectory, methods=["GET"])
    app.add_api_route("/v1/export", export, methods=["GET"])
    app.add_api_route("/v1/traces", export_traces, methods=["POST"])
    app.add_api_route("/v1/agents/{agent}/version", agent_version, methods=["GET"])
    app.router.routes.append(Route("/mcp/{server}", mcp, methods=["GET", "POST", "DELETE"]))
    app.add_api_route("/healthz", health, methods=["GET"])
    return app


class GatewayAPI(FastAPI):
    """FastAPI, with the agent calls (`POST /v1/chat/completions`, `/v1/responses`,
    `/v1/messages`, and MCP's `POST /mcp/{server}`) served without its middleware stack.

    Every agent call goes through those routes; their handlers read, limit and validate
    their own bodies and render their own errors, so the stack's layers (error middleware,
    exception middleware, body limit, exit stack, router) only cost time there: about a
    tenth of the gateway's own CPU per request, measured.
    """

    mcp: McpRoute | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":  # each request runs in a task (a context) of its own
            calling_trace.set(trace_of(scope["headers"]))
        server = _mcp_server_of(scope)
        if server is not None and self.mcp is not None:
            scope["app"], scope["path_params"] = self, {"server": server}
            await self.mcp(scope, receive, send)
            return
        handler = _AGENT_CALLS.get(scope["path"]) if scope["type"] == "http" else None
        if handler is not None and scope["method"] == "POST":
            scope["app"] = self
            request = Request(scope, receive)
            try:
                response = await handler(request)
            except GatewayError as error:
                response = await gateway_error_handler(request, error)
            except RegistryUnreachable as error:
                response = await _registry_unreachable(request, error)
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _mcp_server_of(scope) -> str | None:
    """The server named by a `POST /mcp/{server}`, else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path = scope["path"]
    name = path.removeprefix("/mcp/")
    return name if name and name != path and "/" not in name else None


async def _validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    param = ".".join(str(p) for p in first["loc"] if p != "body")
    return JSONResponse(error_body(400, f"{param}: {first['msg']}", param), status_code=400)


async def _registry_unreachable(_: Request, error: RegistryUnreachable) -> JSONResponse:
    message = "The registry is unreachable and this gateway has nothing cached for the request."
    return JSONResponse(error_body(503, message, code="registry_unreachable"), status_code=503)


def _service(request: Request) -> GatewayService:
    return request.app.state.service


class ChatEncoder:
    """Chat completions' own stream: each chunk as a `data:` line, then `[DONE]`."""

    def start(self) -> Iterable[bytes]:
        return ()

    def chunk(self, chunk: dict) -> Iterable[bytes]:
        yield b"data: " + jsonio.dumps(chunk) + b"\n\n"

    def failure(self, message: str) -> Iterable[bytes]:
        payload = error_body(502, f"The upstream stream failed: {message}")
        yield b"data: " + jsonio.dumps(payload) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def end(self, served: Served, answer: dict) -> Iterable[bytes]:
        return [b"data: [DONE]\n\n"]


async def chat_completions(request: Request):
    started = time.perf_counter()
    service = _service(request)
    headers = header_dict(request)
    body = await read_json(request, service.config.max_body_bytes)
    identity = await service.access.authenticate(headers.get("authorization"))
    parsed = validated_chat(body)
    agent = headers.get("x-evoplane-agent") or parsed.model
    metadata = parsed.metadata or {}
    session = headers.get("x-session-id") or parsed.user or metadata.get("session_id")
    admitted = await admit(service, identity, headers, agent, session, request.is_disconnected)
    if parsed.stream:
        return await stream(service, admitted, body, ChatEncoder())
    response, served = await service.serve(admitted, body)
    return Response(
        jsonio.dumps(response),
        media_type="application/json",
        headers=response_headers(served, started),
    )


async def list_models(request: Request) -> dict:
    """The agents the key may use, as OpenAI lists models (or Anthropic, for a caller that
    sends `anthropic-version`; its SDK sends the key as `x-api-key`)."""
    service = _service(request)
    key = request.headers.get("x-api-key")
    authorization = f"Bearer {key}" if key else request.headers.get("authorization")
    identity = await service.access.authenticate(authorization)
    agents = [a for a in await service.catalog.agents_of(identity.tenant) if identity.may_use(a)]
    if request.headers.get("anthropic-version"):
        return messages_api.anthropic_models(agents)
    return {
        "object": "list",
        "data": [
            {"id": a, "object": "model", "created": 0, "owned_by": identity.tenant} for a in agents
        ],
    }


async def feedback(request: Request) -> JSONResponse:
    service = _service(request)
    body = await read_json(request, service.config.max_body_bytes)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    report = _parse(FeedbackReport, body)
    rewards = await record_feedback(service, identity.tenant, report)
    return JSONResponse(
        {"object": "feedback", "reward_ids": [str(r.id) for r in rewards]}, status_code=201
    )


async def agent_events(request: Request) -> JSONResponse:
    service = _service(request)
    body = await read_json(request, service.config.max_body_bytes)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    report = _parse(EventReport, body)
    event = await record_event(service, identity.tenant, report)
    return JSONResponse(
        {"object": "event", "id": str(event.id), "trajectory_id": str(event.trajectory_id)},
        status_code=201,
    )


def _parse(model, body: Any):
    try:
        return model.model_validate(body)
    except ValidationError as error:
        message, param = describe_validation_error(error)
        raise GatewayError(400, message, param=param, code="invalid_value") from None


async def read_trajectory(request: Request, trajectory_id: uuid.UUID) -> dict:
    """A trajectory of the caller's tenant, its events and effective reward (404 otherwise)."""
    service = _service(request)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    await service.recorder.flush()

    def read(session):
        trajectory = get_trajectory(session, identity.tenant, trajectory_id)
        events = get_events(session, identity.tenant, trajectory_id)
        reward = effective_reward_of_trajectory(session, identity.tenant, trajectory_id)
        return trajectory, events, reward

    try:
        trajectory, events, reward = await service.catalog.run(read)
    except NotFoundError:
        raise GatewayError(
            404, f"No trajectory {trajectory_id} for this tenant.", code="trajectory_not_found"
        ) from None
    return {
        "trajectory": trajectory.model_dump(mode="json"),
        "events": [e.model_dump(mode="json") for e in events],
        "effective_reward": reward.model_dump() if reward else None,
    }


async def export(request: Request, agent: str) -> StreamingResponse:
    """The caller's own training-eligible trajectories of `agent`, as JSON lines."""
    service = _service(request)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    await service.access.authorize(identity, agent)
    await service.recorder.flush()
    tenant = identity.tenant
    start = await service.catalog.run(export_start, tenant, agent)

    async def lines():
        """A page of trajectories at a time, each read in a transaction of its own."""
        after = None
        while True:
            page = await service.catalog.run(
                lambda s, after=after: export_page(s, tenant, agent, start=start, after=after)
            )
            for record in page.records:
                yield json.dumps(record, ensure_ascii=False) + "\n"
            if page.after is None:
                return
            after = page.after

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def health(request: Request) -> dict:
    stats = _service(request).recorder.writer.stats
    return {
        "status": "ok",
        "capture": {
            "submitted": stats.submitted,
            "committed": stats.committed,
            "rejected": stats.rejected,
            "pending": stats.submitted - stats.committed - stats.rejected,
            "last_error": stats.last_error,
        },
    }


# The agent calls GatewayAPI serves past the middleware stack, by path.
_AGENT_CALLS = {
    "/v1/chat/completions": chat_completions,
    "/v1/responses": responses_api.create_response,
    "/v1/messages": messages_api.create_message,
}
