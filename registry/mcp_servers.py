"""MCP servers: the upstream MCP servers an agent reaches through the gateway's `/mcp/{name}`,
each with the tenants allowed to use it."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlparse

from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import utcnow
from registry.errors import AlreadyExistsError, InvalidRecordError, NotFoundError
from registry.tables import AgentRow, McpServerRow, TenantRow
from registry.tenants import validate_slug

__all__ = [
    "McpServer",
    "add_mcp_server",
    "allow_mcp_tenant",
    "get_mcp_server",
    "list_mcp_servers",
    "remove_mcp_server",
]


class McpServer(BaseModel):
    """An upstream MCP server: over streamable HTTP (`url`) or a process spoken to over
    stdio (`command`, its argv)."""

    name: str
    agent: str
    url: str | None = None
    command: list[str] | None = None
    tenants: list[str]
    created_at: datetime

    def allows(self, tenant: str) -> bool:
        return tenant in self.tenants


def _server(row: McpServerRow) -> McpServer:
    return McpServer.model_validate(row, from_attributes=True)


def add_mcp_server(
    session: Session,
    agent: str,
    name: str,
    *,
    url: str | None = None,
    command: list[str] | None = None,
    tenants: list[str],
) -> McpServer:
    """Register an upstream MCP server of `agent`, reached at the gateway as `/mcp/{name}`."""
    validate_slug("MCP server", name)
    if (url is None) == (not command):
        raise InvalidRecordError("give the MCP server either a URL or a command, not both")
    if url is not None and urlparse(url).scheme not in {"http", "https"}:
        raise InvalidRecordError(f"MCP server URL {url!r} is not http(s)://...")
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    for tenant in tenants:
        if session.get(TenantRow, tenant) is None:
            raise NotFoundError("tenant", tenant)
    if session.get(McpServerRow, name) is not None:
        raise AlreadyExistsError("MCP server", name)
    row = McpServerRow(
        name=name,
        agent=agent,
        url=url,
        command=list(command) if command else None,
        tenants=sorted(set(tenants)),
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return _server(row)


def get_mcp_server(session: Session, name: str) -> McpServer:
    row = session.get(McpServerRow, name)
    if row is None:
        raise NotFoundError("MCP server", name)
    return _server(row)


def list_mcp_servers(session: Session, agent: str | None = None) -> list[McpServer]:
    query = select(McpServerRow).order_by(McpServerRow.name)
    if agent is not None:
        query = query.where(McpServerRow.agent == agent)
    return [_server(row) for row in session.exec(query)]


def allow_mcp_tenant(session: Session, name: str, tenant: str) -> McpServer:
    """Let `tenant` use the MCP server `name` too."""
    row = session.get(McpServerRow, name)
    if row is None:
        raise NotFoundError("MCP server", name)
    if session.get(TenantRow, tenant) is None:
        raise NotFoundError("tenant", tenant)
    row.tenants = sorted({*row.tenants, tenant})
    session.add(row)
    session.flush()
    return _server(row)


def remove_mcp_server(session: Session, name: str) -> None:
    row = session.get(McpServerRow, name)
    if row is None:
        raise NotFoundError("MCP server", name)
    session.delete(row)
