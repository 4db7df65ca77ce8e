"""The HTTP routes of Anthropic's Messages API: messages, count_tokens, and the model list
in Anthropic's shape.

Served through the same pipeline as chat completions (see `proxy.protocols`). The key
comes as `x-api-key` (Anthropic's SDKs) or `Authorization: Bearer`; `anthropic-version`
is accepted and not needed. Every error is Anthropic's shape, so the SDK raises the
exception its users catch.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import wraps
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from proxy import jsonio
from proxy.catalog import RegistryUnreachable
from proxy.errors import GatewayError
from proxy.protocols import messages
from proxy.protocols.serving import (
    EventStreamEncoder,
    admit,
    header_dict,
    read_json,
    response_headers,
    stream,
    validated_chat,
)
from proxy.service import GatewayService
from registry import ApiKeyIdentity

__all__ = ["ROUTES", "anthropic_models"]

PROTOCOL = "messages"


def _anthropic_errors(handler: Callable[..., Awaitable[Response]]):
    """Render the gateway's errors in Anthropic's shape."""

    @wraps(handler)
    async def handle(request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            return await handler(request, *args, **kwargs)
        except GatewayError as error:
            return JSONResponse(
                messages.error_document(error.status, error.message),
                status_code=error.status,
                headers=error.headers,
            )
        except RegistryUnreachable:
            message = "The registry is unreachable and this gateway has nothing cached."
            return JSONResponse(messages.error_document(503, message), status_code=503)

    return handle


async def _identify(service: GatewayService, headers: dict[str, str]) -> ApiKeyIdentity:
    key = headers.get("x-api-key")
    return await service.access.authenticate(
        f"Bearer {key}" if key else headers.get("authorization")
    )


async def _request(request: Request) -> tuple[GatewayService, dict[str, str], ApiKeyIdentity, dict]:
    service: GatewayService = request.app.state.service
    headers = header_dict(request)
    body = await read_json(request, service.config.max_body_bytes)
    identity = await _identify(service, headers)
    if not isinstance(body, dict):
        raise GatewayError(400, "The body must be a JSON object.", code="invalid_request")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise GatewayError(400, "model: required, the agent's name.", param="model")
    return service, headers, identity, body


@_anthropic_errors
async def create_message(request: Request) -> Response:
    started = time.perf_counter()
    service, headers, identity, body = await _request(request)
    chat = messages.chat_request(body)
    streaming = bool(body.get("stream"))
    if streaming:
        chat["stream"] = True
    parsed = validated_chat(chat)
    agent = headers.get("x-evoplane-agent") or body["model"]
    session = headers.get("x-session-id") or parsed.user
    admitted = await admit(service, identity, headers, agent, session, request.is_disconnected)
    context = messages.MessageContext(
        messages.new_message_id(), body["model"], tuple(body.get("stop_sequences") or ())
    )
    if streaming:
        encoder = EventStreamEncoder(messages.MessagesStream(context))
        return await stream(service, admitted, chat, encoder, (PROTOCOL, body))
    completion, served = await service.serve(admitted, chat, protocol=(PROTOCOL, body))
    answer = messages.message_object(completion, context)
    return Response(
        jsonio.dumps(answer),
        media_type="application/json",
        headers=response_headers(served, started),
    )


@_anthropic_errors
async def count_tokens(request: Request) -> Response:
    """The prompt's tokens as the version's model would read them (harness and memory
    included): asked of the upstream itself, as a one-token completion whose usage counts
    the prompt exactly, whatever its tokenizer. Not recorded: no agent step happened."""
    service, headers, identity, body = await _request(request)
    chat = messages.chat_request({**body, "max_tokens": 1})
    validated_chat(chat)
    agent = headers.get("x-evoplane-agent") or body["model"]
    admitted = await admit(service, identity, headers, agent, headers.get("x-session-id"))
    route, overlaid = await service.prepare(admitted, chat)
    engine = service.pipeline.engines.engine_for(route.version, route.base_url)
    one_token = replace(overlaid, body={**overlaid.body, "max_tokens": 1, "stream": False})
    completion = await service.complete(engine, one_token)
    counted = (completion.get("usage") or {}).get("prompt_tokens")
    if not isinstance(counted, int):
        raise GatewayError(
            502, "The upstream model reports no token usage to count with.", code="upstream_error"
        )
    return JSONResponse({"input_tokens": counted})


def anthropic_models(agents: list[str]) -> dict[str, Any]:
    """The agents a key may use, as Anthropic's `GET /v1/models` lists models."""
    data = [
        {"type": "model", "id": agent, "display_name": agent, "created_at": "1970-01-01T00:00:00Z"}
        for agent in agents
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


ROUTES = [
    ("/v1/messages", create_message, ["POST"]),
    ("/v1/messages/count_tokens", count_tokens, ["POST"]),
]
