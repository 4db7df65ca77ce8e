"""A replayed call of a read-only MCP tool answers from the live server; every other call
goes to the tenant's simulators."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime

from evolution.replay import ToolOutput, mcp_tool_simulator
from registry import McpServer
from tests.support.mcp_upstream import McpUpstream


def server(url: str) -> McpServer:
    return McpServer(
        name="orders", agent="bot", url=url, tenants=["acme"], created_at=datetime.now(UTC)
    )


def test_read_only_tools_are_called_live_and_the_rest_simulated() -> None:
    logging.getLogger("mcp").setLevel(logging.ERROR)
    simulated: list[tuple[str, str]] = []

    def fallback(tool: str, arguments: str) -> ToolOutput:
        simulated.append((tool, arguments))
        return ToolOutput(output="simulated")

    with McpUpstream() as orders:
        simulate = mcp_tool_simulator([server(orders.url)], fallback, timeout=10)

        async def replay():
            live = await simulate("lookup_order", json.dumps({"order_id": "F-6"}))
            refund = await simulate("refund", json.dumps({"order_id": "F-6", "amount": 3}))
            unknown = await simulate("cancel_order", "{}")
            return live, refund, unknown

        live, refund, unknown = asyncio.run(replay())
        assert orders.received == [("lookup_order", {"order_id": "F-6"})]  # refund never ran
    assert json.loads(live.output)["status"] == "shipped" and live.error is None
    assert refund.output == unknown.output == "simulated"
    assert [tool for tool, _ in simulated] == ["refund", "cancel_order"]


def test_an_unreachable_server_leaves_every_call_to_the_simulators() -> None:
    dead = server("http://127.0.0.1:9/mcp")
    simulate = mcp_tool_simulator([dead], None, timeout=2)
    assert asyncio.run(simulate("lookup_order", "{}")) is None
    assert mcp_tool_simulator([], None) is None
