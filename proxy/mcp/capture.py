"""MCP calls as ATDP events, through the gateway's governed capture path.

A `tools/call` is a `tool_call` event: the call as the client made it, the outcome as the
server gave it (result or error, error class), the latency, linked to the llm_call that
asked for it when the session's model call named the tool. A `tools/list` is a
`retrieval` event holding the tools as the client saw them. Both are redacted and sealed
like every event, and a failed call is an implicit reward on the llm_call that asked.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from atdp import EventKind, ReplayClass, Traffic, new_id, utcnow
from proxy.capture.events import EventDocument, SessionState, atdp_name
from proxy.capture.tool_results import tool_error_class
from proxy.service import GatewayService
from registry import AgentVersion, ApiKeyIdentity, McpServer

__all__ = [
    "McpCaller",
    "McpExchange",
    "ToolOutcome",
    "call_event",
    "linked_call",
    "listing_event",
    "record_event",
    "session_of",
]


@dataclass(frozen=True)
class McpCaller:
    """Who calls through `/mcp/{server}`, and the session the calls belong to."""

    identity: ApiKeyIdentity
    server: McpServer
    session: str

    @property
    def tenant(self) -> str:
        return self.identity.tenant


@dataclass
class McpExchange:
    """One MCP request of a session: who asks, the session's state, the version serving it,
    and when the upstream was asked."""

    caller: McpCaller
    state: SessionState
    version: AgentVersion
    started: float = field(default_factory=time.perf_counter)

    def restart(self) -> None:
        self.started = time.perf_counter()

    @property
    def latency_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


@dataclass
class ToolOutcome:
    """What became of a call: the result as returned, or the error."""

    returned: Any = None
    error_class: str | None = None
    error_message: str | None = None

    @classmethod
    def of_result(cls, result: types.CallToolResult) -> ToolOutcome:
        returned = _returned(result)
        if not result.is_error:
            return cls(returned, tool_error_class(returned, name=atdp_name))
        text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        error = tool_error_class(returned, name=atdp_name) or "tool_error"
        return cls(returned, error, text or None)

    def document(self) -> dict[str, Any]:
        return {
            "tool_return": self.returned,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "success": self.error_class is None,
        }


def _returned(result: types.CallToolResult) -> Any:
    """The result's structured content if any, else its text (as JSON when it parses)."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    if len(texts) == len(result.content) == 1:
        try:
            return json.loads(texts[0])
        except ValueError:
            return texts[0]
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]


async def session_of(service: GatewayService, caller: McpCaller) -> McpExchange:
    """The caller's session and the version serving it: the one its model calls use, or,
    for a session that starts here, where the router places it."""
    tenant, agent = caller.tenant, caller.server.agent
    state = service.recorder.held_session(tenant, agent, caller.session)
    if state is not None:
        version = await service.catalog.version(state.trajectory.versions.agent_version_id)
        return McpExchange(caller, state, version)
    route = await service.router.route(tenant, agent, caller.session)
    route = await service.router.settle(route)
    state = service.recorder.open_session(tenant, agent, caller.session, route.version)
    return McpExchange(caller, state, route.version)


def linked_call(
    state: SessionState, tool: str, sent: dict[str, Any] | None, version: AgentVersion
) -> tuple[uuid.UUID, dict[str, str]] | None:
    """The session's model call of `tool` this call answers: one with the same arguments
    (under the server's names) if any, else the oldest unanswered one of that tool."""
    override = version.spec.tools.tools.get(tool)
    mapping = override.argument_map if override else {}
    found = None
    for call_id, (llm, call) in state.calls.items():
        if call["name"] != tool or call_id in state.answered:
            continue
        if _arguments(call["arguments"], mapping) == (sent or {}):
            return llm, call
        found = found or (llm, call)
    return found


def _arguments(text: str, mapping: dict[str, str]) -> Any:
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    return {mapping.get(key, key): value for key, value in parsed.items()}


def listing_event(
    exchange: McpExchange, tools: list[types.Tool], outcome: ToolOutcome
) -> EventDocument:
    """A `tools/list` as a `retrieval` event: the tools as the client saw them."""
    specs = [
        {"name": atdp_name(t.name), "description": t.description, "parameters": t.input_schema}
        for t in tools
    ]
    return _event(
        exchange,
        EventKind.RETRIEVAL,
        parent=exchange.state.last_llm_event,
        mcp={"method": "tools/list"},
        observation={"content": "tools/list", "tools": specs},
        outcome={**outcome.document(), "tool_return": None},
    )


def call_event(
    exchange: McpExchange,
    params: types.CallToolRequestParams,
    sent: dict[str, Any] | None,
    linked: tuple[uuid.UUID, dict[str, str]] | None,
    outcome: ToolOutcome,
    *,
    read_only: bool,
) -> EventDocument:
    """A `tools/call` as a `tool_call` event: the call as the client made it (under the id
    of the model's call it answers, when one did), linked to the llm_call that asked."""
    state = exchange.state
    parent, call_id = (linked[0], linked[1]["id"]) if linked else (state.last_llm_event, None)
    if call_id is not None:
        state.answered.add(call_id)
    mcp: dict[str, Any] = {"method": "tools/call"}
    if sent != params.arguments:
        mcp["upstream_arguments"] = sent
    call = {
        "id": call_id or f"mcp-{new_id().hex}",
        "name": atdp_name(params.name),
        "arguments": json.dumps(params.arguments or {}, ensure_ascii=False),
    }
    return _event(
        exchange,
        EventKind.TOOL_CALL,
        parent=parent,
        mcp=mcp,
        read_only=read_only,
        action={"type": "tool_call", "call": call},
        outcome=outcome.document(),
    )


def _event(
    exchange: McpExchange,
    kind: EventKind,
    *,
    parent: uuid.UUID | None,
    mcp: dict[str, Any],
    read_only: bool = False,
    **parts: Any,
) -> EventDocument:
    """An MCP event document (`atdp.Event`'s JSON shape), before governance."""
    state, caller, version = exchange.state, exchange.caller, exchange.version
    hashes = version.spec.part_hashes()
    reason = (
        "a read-only MCP tool: replay may call the live server again"
        if read_only
        else "executed by an MCP server; the recorded output can be substituted in replay"
    )
    return {
        "id": str(new_id()),
        "trajectory_id": str(state.trajectory.id),
        "seq": state.seq(),
        "kind": kind.value,
        "parent_id": None if parent is None else str(parent),
        "created_at": utcnow().isoformat(),
        "metadata": {
            "tenant": caller.tenant,
            "session": caller.session,
            "traffic": Traffic.USER.value,
            "latency_ms": round(exchange.latency_ms, 3),
            "agent_version_id": version.id,
            "tool_schema_version": hashes["tools"],
            "guardrail_config_id": hashes["guardrails"],
            "extra": {"mcp": {"server": caller.server.name, "read_only": read_only, **mcp}},
        },
        "replay": {"class": ReplayClass.APPROXIMATE.value, "reason": reason},
        **parts,
    }


async def record_event(service: GatewayService, state: SessionState, event: EventDocument) -> None:
    """Record one MCP event through the gateway's capture path (see `Recorder.record_event`)."""
    await service.recorder.record_event(state, event)
