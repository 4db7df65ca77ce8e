"""`tools/call` to an HTTP upstream as one plain JSON-RPC POST over a kept-alive connection.

The SDK's client costs about a millisecond a call (its dispatcher, anyio streams, result
checks); the 2026-07-28 protocol needs none of that: a call is a self-contained POST
carrying its envelope in `params._meta`. An upstream that negotiated an older revision
(sessions), or that asks for what only the SDK client does (`Mcp-Param` headers,
input rounds), is left to the SDK client.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import aiohttp
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    HEADER_MISMATCH,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["CLIENT_INFO", "CallForwarder", "NotForwardable"]

CLIENT_INFO = types.Implementation(name="evoplane-gateway", version="1")
_IDS = itertools.count(1)


class NotForwardable(Exception):
    """The call needs the SDK client (nothing was executed upstream)."""


class CallForwarder:
    """One aiohttp session to one upstream URL, for `tools/call` in the 2026 envelope."""

    def __init__(self, url: str, *, timeout: float, connect_timeout: float) -> None:
        self.url = url
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self._session: aiohttp.ClientSession | None = None
        self._client_info = CLIENT_INFO.model_dump(by_alias=True, exclude_none=True)

    async def call_tool(
        self, version: str, name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        """The upstream's result; MCPError for its JSON-RPC error; NotForwardable when the
        SDK client must make this call; aiohttp/timeout errors as they come."""
        if version not in MODERN_PROTOCOL_VERSIONS:
            raise NotForwardable(f"the upstream speaks {version}, a session-era revision")
        request_id = next(_IDS)
        meta = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_INFO_META_KEY: self._client_info,
            CLIENT_CAPABILITIES_META_KEY: {},
        }
        params: dict[str, Any] = {"name": name, "_meta": meta}
        if arguments is not None:
            params["arguments"] = arguments
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        headers = {
            "Accept": "application/json, text/event-stream",
            MCP_PROTOCOL_VERSION_HEADER: version,
            MCP_METHOD_HEADER: "tools/call",
            MCP_NAME_HEADER: name,
        }
        async with self._client().post(self.url, json=body, headers=headers) as response:
            raw = await response.read()
            kind = response.content_type
        reply = _reply(raw, kind, request_id, response.status)
        if "error" in reply:
            error = types.ErrorData.model_validate(reply["error"])
            if error.code == HEADER_MISMATCH:  # the tool wants `Mcp-Param` headers
                raise NotForwardable(error.message)
            raise MCPError.from_error_data(error)
        result = reply.get("result")
        if not isinstance(result, dict) or result.get("resultType", "complete") != "complete":
            raise NotForwardable("the upstream answered with an interim result")
        return types.CallToolResult.model_validate(result, by_name=False)

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: a session belongs to the event loop that is running then.
        if self._session is None:
            # No cookie jar: an upstream's cookies must not pass from one caller to the next.
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _reply(raw: bytes, kind: str, request_id: int, status: int) -> dict[str, Any]:
    """The JSON-RPC reply to `request_id` in a JSON or SSE body."""
    if kind == "text/event-stream":
        for data in _sse_data(raw.decode("utf-8", "replace")):
            message = json.loads(data)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message
        raise aiohttp.ClientPayloadError(f"HTTP {status}: the event stream held no reply")
    try:
        reply = json.loads(raw)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or ("result" not in reply and "error" not in reply):
        text = raw[:200].decode("utf-8", "replace")
        raise aiohttp.ClientPayloadError(f"HTTP {status}, not a JSON-RPC reply: {text!r}")
    return reply


def _sse_data(text: str) -> list[str]:
    """The data of each event in an SSE body."""
    events, lines = [], []
    for line in text.splitlines():
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif not line and lines:
            events.append("\n".join(lines))
            lines = []
    if lines:
        events.append("\n".join(lines))
    return events
