"""A 2026-07-28 `tools/call` answered by the gateway itself, not by the SDK's server.

On that protocol revision a call is one self-contained POST (no session, the envelope in
`params._meta`), and the SDK's per-request server machinery costs more than the 2 ms the
proxy may add. A body that is a well-formed call, by the SDK's own checks (its envelope
ladder and the method's parameter schema), is served here, the reply shaped as the SDK
shapes it; anything else (other methods, session-era requests, malformed bodies) goes on
to the SDK with the body replayed, so its errors read as they always did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope

__all__ = ["DirectCall", "error_reply", "read_direct_call", "result_reply"]


@dataclass(frozen=True)
class DirectCall:
    """A `tools/call` the gateway answers itself."""

    request_id: types.RequestId
    version: str
    params: types.CallToolRequestParams


async def read_direct_call(
    scope: Scope, receive: Receive, limit: int
) -> tuple[DirectCall | None, Receive]:
    """The call in this request, when it is one the gateway answers itself, and the
    `receive` to hand the SDK otherwise (the body, as far as it was read, replayed)."""
    request = Request(scope)
    headers = request.headers
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if request.method != "POST" or version not in MODERN_PROTOCOL_VERSIONS:
        return None, receive
    if not headers.get("content-type", "").lower().startswith("application/json"):
        return None, receive
    if not check_accept_headers(request)[0] or find_duplicated_routing_header(headers.items()):
        return None, receive
    body, receive = await _read_body(receive, limit)
    if body is None:
        return None, receive
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None, receive
    if not isinstance(decoded, dict) or decoded.get("method") != "tools/call":
        return None, receive
    return _checked_call(decoded, dict(headers)), receive


async def _read_body(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The body (None past `limit` bytes, the rest left unread), and a `receive` that
    replays what was read before what was not."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more and size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return None, _replaying([message], receive)
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
    body = b"".join(chunks)
    replay = _replaying([{"type": "http.request", "body": body, "more_body": more}], receive)
    return (None if more or size > limit else body), replay


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay


def _checked_call(decoded: dict[str, Any], headers: dict[str, str]) -> DirectCall | None:
    try:
        request = types.JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return None
    route = classify_inbound_request(decoded, headers=headers)
    if not isinstance(route, InboundModernRoute):
        return None
    try:
        spec_methods.validate_client_request("tools/call", route.protocol_version, request.params)
        params = types.CallToolRequestParams.model_validate(request.params or {}, by_name=False)
    except (ValidationError, KeyError):
        return None
    return DirectCall(request.id, route.protocol_version, params)


def result_reply(call: DirectCall, result: types.CallToolResult, server_info: dict) -> Response:
    """The call's result as the SDK's server puts it on the wire (the version's result
    shape, `resultType`, the `serverInfo` stamp)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        dumped = spec_methods.serialize_server_result("tools/call", call.version, dumped)
    except ValidationError:
        failure = MCPError(types.INTERNAL_ERROR, "Handler returned an invalid result")
        return error_reply(call, failure)
    dumped.setdefault("resultType", "complete")
    meta = dumped.get("_meta")
    if meta is None or (isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None):
        dumped["_meta"] = {**(meta or {}), SERVER_INFO_META_KEY: server_info}
    return _response({"jsonrpc": "2.0", "id": call.request_id, "result": dumped}, 200)


def error_reply(call: DirectCall, error: Exception) -> Response:
    """The call's failure as a JSON-RPC error, with the HTTP status the SDK gives it."""
    data = modern_error_data(error)
    reply = {
        "jsonrpc": "2.0",
        "id": call.request_id,
        "error": data.model_dump(by_alias=True, mode="json", exclude_none=True),
    }
    return _response(reply, ERROR_CODE_HTTP_STATUS.get(data.code, 200))


def _response(reply: dict[str, Any], status: int) -> Response:
    return Response(
        json.dumps(reply, separators=(",", ":")), status_code=status, media_type="application/json"
    )
