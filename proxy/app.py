"""The gateway's HTTP face: OpenAI-compatible chat completions, models, feedback, events."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.routing import Route

from atdp import Traffic
from proxy import jsonio
from proxy import router as routing
from proxy.catalog import RegistryUnreachable
from proxy.config import GatewayConfig
from proxy.engines.base import UpstreamError, UpstreamTimeout
from proxy.errors import GatewayError, error_body, gateway_error_handler
from proxy.feedback import EventReport, FeedbackReport, record_event, record_feedback
from proxy.gateway import Gateway, Served, drop, new_session_id, upstream_failure
from proxy.governance import parse_training_header
from proxy.overlays import Overlaid
from proxy.schemas import ChatCompletionRequest, describe_validation_error
from proxy.streaming import StreamRestorer, assemble_chunks
from registry import (
    NotFoundError,
    effective_reward_of_trajectory,
    export_records,
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
        app.state.gateway = gateway
        try:
            yield
        finally:
            await gateway.close()

    app = GatewayAPI(title="Evoplane gateway", version="1", lifespan=lifespan)
    app.add_exception_handler(GatewayError, gateway_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RegistryUnreachable, _registry_unreachable)
    # GatewayAPI serves this route itself; the router keeps it for what that shortcut does
    # not match (other methods get 405; an app mounted under a root path).
    app.router.routes.append(Route("/v1/chat/completions", chat_completions, methods=["POST"]))
    app.add_api_route("/v1/models", list_models, methods=["GET"])
    app.add_api_route("/v1/feedback", feedback, methods=["POST"])
    app.add_api_route("/v1/events", agent_events, methods=["POST"])
    app.add_api_route("/v1/trajectories/{trajectory_id}", read_trajectory, methods=["GET"])
    app.add_api_route("/v1/export", export, methods=["GET"])
    app.add_api_route("/healthz", health, methods=["GET"])
    return app


class GatewayAPI(FastAPI):
    """FastAPI, with `POST /v1/chat/completions` served without its middleware stack.

    Every agent call goes through that route; its handler reads, limits and validates its
    own body and renders its own errors, so the stack's layers (error middleware, exception
    middleware, body limit, exit stack, router) only cost time there: about a tenth of the
    gateway's own CPU per request, measured.
    """

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == "/v1/chat/completions"
            and scope["method"] == "POST"
        ):
            scope["app"] = self
            request = Request(scope, receive)
            try:
                response = await chat_completions(request)
            except GatewayError as error:
                response = await gateway_error_handler(request, error)
            except RegistryUnreachable as error:
                response = await _registry_unreachable(request, error)
            await response(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


async def _validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    param = ".".join(str(p) for p in first["loc"] if p != "body")
    return JSONResponse(error_body(400, f"{param}: {first['msg']}", param), status_code=400)


async def _registry_unreachable(_: Request, error: RegistryUnreachable) -> JSONResponse:
    message = "The registry is unreachable and this gateway has nothing cached for the request."
    return JSONResponse(error_body(503, message, code="registry_unreachable"), status_code=503)


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def _read_json(request: Request, limit: int) -> Any:
    """The body as JSON; 413 past `limit` bytes (before and while reading), 400 if malformed."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise GatewayError(
            413, f"Request body is larger than the {limit}-byte limit.", code="body_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError(
                413, f"Request body is larger than the {limit}-byte limit.", code="body_too_large"
            )
        chunks.append(chunk)
    try:
        return jsonio.loads(b"".join(chunks))
    except jsonio.JSONDecodeError as error:
        raise GatewayError(
            400, f"The body is not valid JSON: {error}", code="invalid_json"
        ) from None


def _headers(served: Served) -> dict[str, str]:
    return {
        "X-Evoplane-Session-Id": served.session,
        "X-Evoplane-Trajectory-Id": str(served.trajectory_id),
        "X-Evoplane-Event-Id": str(served.event_id),
        "X-Evoplane-Version": served.version_id,
    }


def _session_id(headers: dict[str, str], parsed: ChatCompletionRequest) -> str:
    metadata = parsed.metadata or {}
    candidate = headers.get("x-session-id") or parsed.user or metadata.get("session_id")
    return str(candidate)[:200] if candidate else new_session_id()


def _header_dict(request: Request) -> dict[str, str]:
    """The request's headers as a plain dict (lower-case names; the first of repeated
    ones), for the hot path's many look-ups."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in reversed(request.scope["headers"])
    }


async def chat_completions(request: Request):
    gateway = _gateway(request)
    headers = _header_dict(request)
    body = await _read_json(request, gateway.config.max_body_bytes)
    identity = await gateway.authenticate(headers.get("authorization"))
    if not isinstance(body, dict):
        raise GatewayError(400, "The body must be a JSON object.", code="invalid_request")
    try:
        parsed = ChatCompletionRequest.model_validate(body)
    except ValidationError as error:
        message, param = describe_validation_error(error)
        raise GatewayError(400, message, param=param, code="invalid_value") from None
    agent = headers.get("x-evoplane-agent") or parsed.model
    await gateway.authorize(identity, agent)
    gateway.check_rate(identity.tenant)
    try:
        opt_out = parse_training_header(headers.get("x-evoplane-training"))
    except ValueError as error:
        raise GatewayError(
            400, str(error), param="X-Evoplane-Training", code="invalid_header"
        ) from None
    traffic, pin, harness = _evaluation(headers)
    session = _session_id(headers, parsed)
    if parsed.stream:
        return await _stream(
            gateway,
            identity.tenant,
            agent,
            session,
            body,
            opt_out,
            traffic=traffic,
            pin=pin,
            harness=harness,
        )
    response, served = await gateway.serve(
        identity,
        agent,
        session,
        body,
        training_opt_out=opt_out,
        traffic=traffic,
        pin=pin,
        harness=harness,
    )
    return Response(jsonio.dumps(response), media_type="application/json", headers=_headers(served))


def _evaluation(headers: dict[str, str]) -> tuple[Traffic, str | None, bool]:
    """`X-Evoplane-Traffic: evaluation` marks replay and optimiser calls (never training
    data, never user traffic); only such calls may pin a version with `X-Evoplane-Version`,
    or leave out its harness with `X-Evoplane-Harness: off` (a harness optimiser brings its
    own instructions and demos).

    Returns (traffic, pinned version, whether to apply the version's harness)."""
    value = (headers.get("x-evoplane-traffic") or "user").strip().lower()
    if value not in {"user", "evaluation"}:
        raise GatewayError(
            400,
            f"X-Evoplane-Traffic must be 'user' or 'evaluation', not {value!r}.",
            param="X-Evoplane-Traffic",
            code="invalid_header",
        )
    traffic = Traffic(value)
    pin = headers.get("x-evoplane-version")
    harness = (headers.get("x-evoplane-harness") or "on").strip().lower()
    if harness not in {"on", "off"}:
        raise GatewayError(
            400,
            f"X-Evoplane-Harness must be 'on' or 'off', not {harness!r}.",
            param="X-Evoplane-Harness",
            code="invalid_header",
        )
    for header, given in (
        ("X-Evoplane-Version", bool(pin)),
        ("X-Evoplane-Harness", harness == "off"),
    ):
        if given and traffic is not Traffic.EVALUATION:
            raise GatewayError(
                400,
                f"{header} is for evaluation traffic only; "
                "also send `X-Evoplane-Traffic: evaluation`.",
                param=header,
                code="invalid_header",
            )
    return traffic, pin or None, harness == "on"


def _open_stream(
    gateway: Gateway, route: routing.Route, overlaid: Overlaid
) -> tuple[float, AsyncGenerator[dict], asyncio.Future]:
    """Start an upstream stream: when it started, its chunks, and its first chunk to come."""
    engine = gateway.engine_for(route.version, route.base_url)
    chunks = engine.stream(
        overlaid.body, model=overlaid.model, timeout=gateway.config.upstream_timeout
    )
    return time.perf_counter(), chunks, asyncio.ensure_future(anext(chunks))


async def _abandon(opening: asyncio.Future, chunks: AsyncGenerator[dict]) -> None:
    """Stop a stream whose answer will not be used (its first chunk may be under way)."""
    drop(opening)
    await asyncio.wait([opening])
    await chunks.aclose()


async def _stream(
    gateway: Gateway,
    tenant: str,
    agent: str,
    session: str,
    body: dict,
    opt_out: bool,
    *,
    traffic: Traffic,
    pin: str | None,
    harness: bool,
):
    route, overlaid = await gateway.prepare(tenant, agent, session, body, pin=pin, harness=harness)
    started, chunks, opening = _open_stream(gateway, route, overlaid)
    try:
        if await gateway.router.settle(route) is not route:
            # A new session was placed before, otherwise than proposed: drop that stream.
            await _abandon(opening, chunks)
            route, overlaid = await gateway.prepare(
                tenant, agent, session, body, pin=pin, harness=harness
            )
            started, chunks, opening = _open_stream(gateway, route, overlaid)
    except BaseException:
        drop(opening)
        raise
    try:  # the first chunk decides the status code; after it, errors end the stream
        first = await opening
    except StopAsyncIteration:
        first = None
    except (UpstreamTimeout, UpstreamError) as error:
        raise upstream_failure(error) from None
    book = gateway.sessions if traffic is Traffic.USER else gateway.shadow_sessions
    trajectory_hint = book.get(tenant, agent, session)
    headers = {"X-Evoplane-Session-Id": session, "X-Evoplane-Version": route.version.id}
    if trajectory_hint is not None:
        headers["X-Evoplane-Trajectory-Id"] = str(trajectory_hint.trajectory.id)

    async def events() -> AsyncIterator[bytes]:
        restorer = StreamRestorer(overlaid)
        seen: list[dict] = []
        failure: str | None = None
        try:
            pending = [first] if first is not None else []
            while True:
                for chunk in pending:
                    seen.append(chunk)
                    visible = restorer.chunk(chunk)
                    if visible is not None:
                        yield b"data: " + jsonio.dumps(visible) + b"\n\n"
                try:
                    pending = [await anext(chunks)]
                except StopAsyncIteration:
                    break
        except (UpstreamError, UpstreamTimeout) as error:
            failure = str(error) or type(error).__name__
            payload = error_body(502, f"The upstream stream failed: {failure}")
            yield f"data: {json.dumps(payload)}\n\n".encode()
        finally:
            response = assemble_chunks(seen)
            if failure:
                for choice in response["choices"]:
                    choice["finish_reason"] = choice["finish_reason"] or "error"
            latency_ms = (time.perf_counter() - started) * 1000
            await gateway.capture(
                tenant,
                agent,
                session,
                body,
                overlaid,
                route.version,
                response,
                latency_ms,
                training_opt_out=opt_out,
                traffic=traffic,
            )
            if route.shadow is not None and traffic is Traffic.USER:
                gateway.spawn(gateway.shadow(tenant, agent, session, body, route.shadow, opt_out))
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def list_models(request: Request) -> dict:
    gateway = _gateway(request)
    identity = await gateway.authenticate(request.headers.get("authorization"))
    agents = [a for a in await gateway.catalog.agents_of(identity.tenant) if identity.may_use(a)]
    return {
        "object": "list",
        "data": [
            {"id": a, "object": "model", "created": 0, "owned_by": identity.tenant} for a in agents
        ],
    }


async def feedback(request: Request) -> JSONResponse:
    gateway = _gateway(request)
    body = await _read_json(request, gateway.config.max_body_bytes)
    identity = await gateway.authenticate(request.headers.get("authorization"))
    report = _parse(FeedbackReport, body)
    rewards = await record_feedback(gateway, identity.tenant, report)
    return JSONResponse(
        {"object": "feedback", "reward_ids": [str(r.id) for r in rewards]}, status_code=201
    )


async def agent_events(request: Request) -> JSONResponse:
    gateway = _gateway(request)
    body = await _read_json(request, gateway.config.max_body_bytes)
    identity = await gateway.authenticate(request.headers.get("authorization"))
    report = _parse(EventReport, body)
    event = await record_event(gateway, identity.tenant, report)
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
    gateway = _gateway(request)
    identity = await gateway.authenticate(request.headers.get("authorization"))
    await asyncio.to_thread(gateway.writer.flush, 5.0)

    def read(session):
        trajectory = get_trajectory(session, identity.tenant, trajectory_id)
        events = get_events(session, identity.tenant, trajectory_id)
        reward = effective_reward_of_trajectory(session, identity.tenant, trajectory_id)
        return trajectory, events, reward

    try:
        trajectory, events, reward = await gateway.catalog.run(read)
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
    gateway = _gateway(request)
    identity = await gateway.authenticate(request.headers.get("authorization"))
    await gateway.authorize(identity, agent)
    await asyncio.to_thread(gateway.writer.flush, 5.0)
    records = await gateway.catalog.run(lambda s: list(export_records(s, identity.tenant, agent)))
    lines = (json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    return StreamingResponse(lines, media_type="application/x-ndjson")


async def health(request: Request) -> dict:
    stats = _gateway(request).writer.stats
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
