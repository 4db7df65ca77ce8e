"""`evoplane mcp-bridge SERVER`: the gateway's `/mcp/{server}` served over stdio, for MCP
clients that only spawn processes. It is an SDK server on stdin/stdout whose tools are
those the gateway lists; every call goes through the gateway (and is captured there)."""

from __future__ import annotations

import sys
import uuid

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio"]


def bridge_server(gateway: Client) -> Server:
    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listing = await gateway.list_tools(cursor=params.cursor if params else None)
        return types.ListToolsResult(tools=listing.tools, next_cursor=listing.next_cursor)

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await gateway.call_tool(params.name, params.arguments)

    return Server(
        "evoplane-bridge",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda _name: None,
    )


async def serve_stdio(url: str, key: str, session: str | None = None) -> None:
    """Serve `url` (a gateway's `/mcp/{server}`) on stdin/stdout until stdin closes.

    Without `session`, the process is one session: its calls form one trajectory."""
    headers = {
        "Authorization": f"Bearer {key}",
        "X-Session-Id": session or f"mcp-bridge-{uuid.uuid4().hex}",
    }
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0, connect=5.0))
    try:
        gateway = Client(streamable_http_client(url, http_client=http), cache=None)
        await gateway.__aenter__()
    except Exception as error:  # noqa: BLE001 - told to the person who started the bridge
        print(f"evoplane mcp-bridge: cannot reach {url}: {_reason(error)}", file=sys.stderr)
        raise SystemExit(1) from None
    try:
        server = bridge_server(gateway)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await gateway.__aexit__(None, None, None)


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__
