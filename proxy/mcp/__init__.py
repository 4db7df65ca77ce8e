"""The gateway's MCP proxy: upstream MCP servers' tools, governed, overlaid and captured."""

from proxy.mcp.server import McpProxy

__all__ = ["McpProxy"]
