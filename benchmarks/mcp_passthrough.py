"""The floor for an MCP proxy built on the SDK: its server in front of its client, nothing else.

    python -m benchmarks.mcp_passthrough --upstream URL --port N

The SDK's streamable-HTTP server (JSON responses, as the gateway serves `/mcp/{server}`)
whose `tools/list` and `tools/call` are forwarded through one shared SDK client: no auth,
no overlays, no capture. `benchmarks/mcp_proxy.py` runs it beside the gateway, so what the
SDK's two hops cost is told apart from what the gateway adds on top of them.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn
from mcp import Client
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


def passthrough_app(upstream: str):
    state: dict[str, Client] = {}

    async def list_tools(ctx, params):
        return await state["client"].list_tools(cache_mode="refresh")

    async def call_tool(ctx, params):
        return await state["client"].call_tool(params.name, params.arguments)

    server = Server(
        "passthrough",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda _name: None,
    )
    manager = StreamableHTTPSessionManager(server, json_response=True)

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            await receive()
            async with manager.run(), Client(upstream, cache=None) as client:
                state["client"] = client
                await send({"type": "lifespan.startup.complete"})
                await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await manager.handle_request(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the MCP server's URL")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    uvicorn.run(
        passthrough_app(args.upstream),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
