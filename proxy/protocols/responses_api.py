"""The HTTP routes of the OpenAI Responses API: create, retrieve, delete, input items.

Served through the same pipeline as chat completions (see `proxy.protocols`). Errors are
OpenAI's shape, as for chat completions.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from proxy import jsonio
from proxy.errors import GatewayError
from proxy.protocols import responses
from proxy.protocols.serving import (
    EventStreamEncoder,
    admit,
    header_dict,
    read_json,
    response_headers,
    stream,
    validated_chat,
)
from proxy.protocols.store import ResponseStore
from proxy.service import GatewayService, Served

__all__ = ["ROUTES"]

PROTOCOL = "responses"


def _service(request: Request) -> GatewayService:
    return request.app.state.service


def _store(request: Request) -> ResponseStore:
    return request.app.state.responses


async def create_response(request: Request):
    started = time.perf_counter()
    service, store = _service(request), _store(request)
    headers = header_dict(request)
    body = await read_json(request, service.config.max_body_bytes)
    identity = await service.access.authenticate(headers.get("authorization"))
    if not isinstance(body, dict):
        raise GatewayError(400, "The body must be a JSON object.", code="invalid_request")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise GatewayError(400, "model: required, the agent's name.", param="model")
    previous_id = body.get("previous_response_id")
    history, previous_session = None, None
    if previous_id is not None:
        if not isinstance(previous_id, str):
            raise GatewayError(400, "previous_response_id: must be a string.")
        previous_session, history = await store.conversation(
            identity.tenant, previous_id, param="previous_response_id"
        )
    chat = responses.chat_request(body, history)
    streaming = bool(body.get("stream"))
    if streaming:
        chat["stream"] = True
    parsed = validated_chat(chat)
    agent = headers.get("x-evoplane-agent") or body["model"]
    metadata = parsed.metadata or {}
    session = (
        headers.get("x-session-id") or metadata.get("session_id") or previous_session or parsed.user
    )
    admitted = await admit(service, identity, headers, agent, session, request.is_disconnected)
    context = responses.ResponseContext(responses.new_response_id(), body)
    recorded = None
    if body.get("store", True) is not False:
        recorded = await store.recorded(identity.tenant, context, streamed=streaming)

    def keep(served: Served, response: bytes) -> None:
        """Keep the response (its JSON, as sent) for a continuation that follows at once."""
        if recorded is not None:
            listed = responses.listed_input(body.get("input"), context)
            store.keep(identity.tenant, served.session, recorded, response, listed)

    if streaming:
        translator = responses.ResponsesStream(context)

        async def ended(served: Served) -> None:
            if recorded is not None:
                keep(served, jsonio.dumps(translator.response))

        encoder = EventStreamEncoder(translator, ended)
        return await stream(service, admitted, chat, encoder, (PROTOCOL, body), recorded)
    completion, served = await service.serve(
        admitted, chat, protocol=(PROTOCOL, body), stored_response=recorded
    )
    response = jsonio.dumps(responses.response_object(completion, context))
    keep(served, response)
    headers = response_headers(served, started)
    return Response(response, media_type="application/json", headers=headers)


async def _owned(request: Request, response_id: str) -> dict[str, Any]:
    """The document of a response of the caller's tenant (404 otherwise)."""
    service = _service(request)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    turn = await _store(request).turn(identity.tenant, response_id, param="response_id")
    return turn.document


async def get_response(request: Request, response_id: str) -> JSONResponse:
    return JSONResponse((await _owned(request, response_id))["response"])


async def delete_response(request: Request, response_id: str) -> JSONResponse:
    service = _service(request)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    await _store(request).delete(identity.tenant, response_id)
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


async def list_input_items(
    request: Request, response_id: str, order: str = "desc", limit: int = 20, after: str = ""
) -> JSONResponse:
    """The response's own input items, newest first unless `order=asc`, paged by `after`."""
    if order not in {"asc", "desc"} or not 1 <= limit <= 100:
        raise GatewayError(400, "order must be asc or desc and limit 1 to 100.", param="order")
    items = (await _owned(request, response_id))["input"]
    if order == "desc":
        items = items[::-1]
    if after:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return JSONResponse(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )


ROUTES = [
    ("/v1/responses", create_response, ["POST"]),
    ("/v1/responses/{response_id}", get_response, ["GET"]),
    ("/v1/responses/{response_id}", delete_response, ["DELETE"]),
    ("/v1/responses/{response_id}/input_items", list_input_items, ["GET"]),
]
