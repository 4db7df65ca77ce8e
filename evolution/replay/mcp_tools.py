"""Replayed calls of MCP tools: a read-only tool answers again from its live server.

When a replayed version leaves the recorded path and calls a tool one of the agent's MCP
servers serves, and that server marks the tool read-only (the MCP annotation
`readOnlyHint`), calling it again cannot change anything: its live answer is the truest
simulation there is. Any other tool goes to the tenant's simulators (`simulators.py`), or
stops the replay when there are none.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import Any

from evolution.replay.engine import ToolOutput, ToolSimulator
from registry import McpServer

__all__ = ["mcp_tool_simulator"]


def mcp_tool_simulator(
    servers: Sequence[McpServer], fallback: ToolSimulator | None, *, timeout: float = 30.0
) -> ToolSimulator | None:
    """A simulator that calls read-only MCP tools on their live server and hands every other
    call to `fallback`. `fallback` itself when the agent has no MCP servers."""
    if not servers:
        return fallback
    read_only: dict[str, McpServer] | None = None

    async def simulate(tool: str, arguments: str) -> Any:
        nonlocal read_only
        if read_only is None:
            read_only = await _read_only_tools(servers, timeout)
        server = read_only.get(tool)
        if server is not None:
            return await _call(server, tool, arguments, timeout)
        if fallback is None:
            return None
        answer = fallback(tool, arguments)
        return await answer if inspect.isawaitable(answer) else answer

    return simulate


def _client(server: McpServer, timeout: float):
    from mcp import Client, StdioServerParameters

    if server.url is not None:
        return Client(server.url, read_timeout_seconds=timeout, cache=None)
    command = server.command or []
    target = StdioServerParameters(command=command[0], args=command[1:])
    return Client(target, read_timeout_seconds=timeout, cache=None)


async def _read_only_tools(servers: Sequence[McpServer], timeout: float) -> dict[str, McpServer]:
    """The tools each server marks read-only, by name (a server that cannot be listed marks
    none: its tools go to the simulators)."""
    found: dict[str, McpServer] = {}
    for server in servers:
        try:
            async with _client(server, timeout) as client:
                listing = await client.list_tools()
        except Exception:  # noqa: BLE001 - an unreachable server's tools are simulated instead
            continue
        for tool in listing.tools:
            if tool.annotations is not None and tool.annotations.read_only_hint:
                found.setdefault(tool.name, server)
    return found


async def _call(server: McpServer, tool: str, arguments: str, timeout: float) -> ToolOutput:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return ToolOutput(output=f"arguments are not JSON: {arguments[:200]}", error="invalid_json")
    async with _client(server, timeout) as client:
        result = await client.call_tool(tool, parsed if isinstance(parsed, dict) else {})
    return ToolOutput(output=_text(result), error="tool_error" if result.is_error else None)


def _text(result: Any) -> str:
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "\n".join(getattr(part, "text", "") for part in result.content)
