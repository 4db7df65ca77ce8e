"""The version's tool-schema overlay and guardrails at the MCP tool boundary.

The MCP client stands where the model stands in chat completions: it sees the tools as
the version rewrites them (description, parameter schema), and its arguments go back to
the server under the server's own names (the overlay's `argument_map`: model-facing name
-> the agent's own name). Blocked tools are neither listed nor callable.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from atdp import VersionSpec

__all__ = ["is_blocked", "overlaid_tools", "upstream_arguments"]


def is_blocked(name: str, spec: VersionSpec) -> bool:
    return name in spec.guardrails.blocked_tools


def overlaid_tools(tools: list[types.Tool], spec: VersionSpec) -> list[types.Tool]:
    """The listing as the version presents it: blocked tools left out, overrides applied."""
    return [_overlaid(tool, spec) for tool in tools if not is_blocked(tool.name, spec)]


def _overlaid(tool: types.Tool, spec: VersionSpec) -> types.Tool:
    override = spec.tools.tools.get(tool.name)
    if override is None:
        return tool
    update: dict[str, Any] = {}
    if override.description is not None:
        update["description"] = override.description
    if override.parameters is not None:
        update["input_schema"] = override.parameters
    return tool.model_copy(update=update)


def upstream_arguments(
    name: str, arguments: dict[str, Any] | None, spec: VersionSpec
) -> dict[str, Any] | None:
    """The client's arguments under the server's own parameter names."""
    override = spec.tools.tools.get(name)
    if arguments is None or override is None or not override.argument_map:
        return arguments
    mapping = override.argument_map
    return {mapping.get(key, key): value for key, value in arguments.items()}
