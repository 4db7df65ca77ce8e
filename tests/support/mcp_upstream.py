"""A real MCP server for tests and benchmarks: order tools built with the SDK's MCPServer,
served over streamable HTTP on loopback (`McpUpstream`) or over stdio:

    python -m tests.support.mcp_upstream --stdio      # what `evoplane mcp add --command` runs
    python -m tests.support.mcp_upstream --http       # prints its URL; stdin EOF stops it

Every call is kept in `received` (tool, arguments as the server got them).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
import time

import anyio
import mcp_types as types
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["McpUpstream", "order_server"]


def order_server(
    received: list[tuple[str, dict]] | None = None, *, slow: bool = False
) -> MCPServer:
    """The order tools; `slow` adds `wait`, a tool that takes as long as it is told."""
    received = received if received is not None else []
    server = MCPServer("orders")

    if slow:

        @server.tool()
        async def wait(seconds: float) -> str:
            """Wait, then answer."""
            received.append(("wait", {"seconds": seconds}))
            await anyio.sleep(seconds)
            return "done"

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def lookup_order(order_id: str) -> dict:
        """Look up an order by its id."""
        received.append(("lookup_order", {"order_id": order_id}))
        return {"order_id": order_id, "status": "shipped"}

    @server.tool()
    def refund(order_id: str, amount: float) -> str:
        """Refund part of an order."""
        received.append(("refund", {"order_id": order_id, "amount": amount}))
        if amount <= 0:
            raise ToolError("amount must be positive")
        return f"refunded {amount} on {order_id}"

    return server


class McpUpstream:
    """`with McpUpstream() as up:` -> `up.url` ("http://127.0.0.1:PORT/mcp"), `up.received`."""

    def __init__(self, *, slow: bool = False) -> None:
        self.received: list[tuple[str, dict]] = []
        server = order_server(self.received, slow=slow)
        app = server.streamable_http_app(
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_config=None, log_level="warning"
            )
        )
        self._thread = threading.Thread(target=self._server.run, name="mcp-upstream", daemon=True)

    def __enter__(self) -> McpUpstream:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("MCP upstream did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--http", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.stdio:
        order_server().run("stdio")
        return
    with McpUpstream() as upstream:
        print(upstream.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
