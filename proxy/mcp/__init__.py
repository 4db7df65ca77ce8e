"""The gateway's MCP proxy: upstream MCP servers' tools, governed, overlaid and captured.

`proxy.mcp.server` holds the proxy itself; the gateway mounts it through `McpRoute`, which
loads it (and the `mcp` SDK) on first use."""

from proxy.mcp.route import McpRoute

__all__ = ["McpRoute"]
