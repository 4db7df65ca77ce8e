"""Tenant-registered tool simulators: what answers a replayed tool call off the recorded path.

An approximate replay substitutes the recorded tool outputs while the version repeats the
recorded calls. When it calls something else, only the tenant knows what its tool would have
answered, so a tenant may register a simulator in the agent's evolution settings
(`tool_simulators`, see `evolution.settings`): an HTTP endpoint it runs (a sandbox of its
tools), or a simulator the worker registered under a name. Without one, the replay stops at
the divergence and is scored up to it. Simulators are only ever called on a divergence.

The HTTP protocol: `POST <url>` with JSON `{"tenant", "agent", "tool", "arguments"}` (the
arguments parsed when they are a JSON object, else the raw string); the answer is 200 with
`{"output": <text or JSON>, "error": <error class> | null}` (an error: the tool would have
refused the call), or 404 when the endpoint does not simulate that tool (the replay stops
there). Any other answer fails the attempt, which Temporal retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from evolution.replay.engine import ToolOutput, ToolSimulator

__all__ = [
    "ALL_TENANTS",
    "ToolSimulatorError",
    "ToolSimulatorSpec",
    "http_tool_simulator",
    "tenant_simulator",
]

ALL_TENANTS = "*"


class ToolSimulatorError(RuntimeError):
    """A registered simulator could not answer (unreachable, or an unexpected reply)."""


class ToolSimulatorSpec(BaseModel):
    """One tenant's simulator registration.

    Args:
        tenant: whose replays it answers; "*" answers for every tenant of the agent that
            registered none of its own for the tool.
        tools: the tools it simulates; empty: every tool.
        url: the HTTP endpoint (protocol in the module docstring).
        name: a simulator the worker registered under this name, instead of a URL.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)
    url: str | None = Field(default=None, pattern=r"^https?://")
    name: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_target(self) -> ToolSimulatorSpec:
        if (self.url is None) == (self.name is None):
            raise ValueError("a tool simulator has either a url or a name, not both or neither")
        return self

    def covers(self, tool: str) -> bool:
        return not self.tools or tool in self.tools


def tenant_simulator(
    specs: Sequence[ToolSimulatorSpec],
    tenant: str,
    resolve: Callable[[ToolSimulatorSpec], ToolSimulator],
) -> ToolSimulator | None:
    """The simulator for `tenant`'s replays; None when neither it nor "*" registered one.

    A call goes to the tenant's own first registration that covers the tool, else to the
    first agent-wide ("*") one; a tool none covers is declined (the replay stops there).
    Another tenant's registration is never used.
    """
    mine = [spec for spec in specs if spec.tenant == tenant]
    shared = [spec for spec in specs if spec.tenant == ALL_TENANTS]
    ordered = mine + shared
    if not ordered:
        return None
    resolved = [(spec, resolve(spec)) for spec in ordered]

    def simulate(tool: str, arguments: str) -> Any:
        found = next((simulator for spec, simulator in resolved if spec.covers(tool)), None)
        return None if found is None else found(tool, arguments)

    return simulate


def http_tool_simulator(
    client: httpx.AsyncClient, url: str, *, tenant: str, agent: str, timeout: float = 30.0
) -> ToolSimulator:
    """A simulator that asks the tenant's endpoint (protocol in the module docstring)."""

    async def simulate(tool: str, arguments: str) -> ToolOutput | None:
        payload = {"tenant": tenant, "agent": agent, "tool": tool, "arguments": _parsed(arguments)}
        try:
            response = await client.post(url, json=payload, timeout=timeout)
        except httpx.HTTPError as error:
            raise ToolSimulatorError(
                f"the tool simulator of tenant {tenant} at {url} did not answer ({error!r}); "
                "start it, or remove it from the agent's tool_simulators settings"
            ) from error
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise ToolSimulatorError(
                f"the tool simulator of tenant {tenant} at {url} answered "
                f"{response.status_code} for {tool}: {response.text[:200]}"
            )
        return _output(response, url)

    return simulate


def _parsed(arguments: str) -> Any:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments


def _output(response: httpx.Response, url: str) -> ToolOutput:
    try:
        body = response.json()
        output = body["output"]
    except (ValueError, KeyError, TypeError) as error:
        raise ToolSimulatorError(
            f"the tool simulator at {url} answered without an 'output': {response.text[:200]}"
        ) from error
    text = output if isinstance(output, str) else json.dumps(output)
    error = body.get("error")
    return ToolOutput(output=text, error=str(error) if error else None)
