"""Agents: a name the gateway serves, with an initial stable version."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import VersionSpec, utcnow
from registry.aliases import Alias, set_alias
from registry.errors import AlreadyExistsError, NotFoundError
from registry.tables import AgentRow, TenantAgentRow
from registry.tenants import validate_slug
from registry.versions import AgentVersion, register_version

__all__ = ["Agent", "create_agent", "get_agent", "list_agents", "set_agent_settings"]


class Agent(BaseModel):
    name: str
    description: str
    settings: dict[str, Any]
    created_at: datetime


def _agent(row: AgentRow) -> Agent:
    return Agent.model_validate(row, from_attributes=True)


def create_agent(
    session: Session,
    name: str,
    spec: VersionSpec,
    *,
    description: str = "",
    author: str,
    settings: dict[str, Any] | None = None,
) -> tuple[Agent, AgentVersion]:
    """Create an agent with `spec` as its first version, aliased `stable`."""
    validate_slug("agent", name)
    if session.get(AgentRow, name) is not None:
        raise AlreadyExistsError("agent", name)
    row = AgentRow(name=name, description=description, settings=settings or {}, created_at=utcnow())
    session.add(row)
    session.flush()
    version = register_version(session, name, spec, author=author, reason="initial version")
    set_alias(session, name, Alias.STABLE, version.id, actor=author, reason="agent created")
    return _agent(row), version


def get_agent(session: Session, name: str) -> Agent:
    row = session.get(AgentRow, name)
    if row is None:
        raise NotFoundError("agent", name)
    return _agent(row)


def set_agent_settings(session: Session, name: str, settings: dict[str, Any]) -> Agent:
    """Replace an agent's settings (the caller validates them; see evolution.settings)."""
    row = session.get(AgentRow, name)
    if row is None:
        raise NotFoundError("agent", name)
    row.settings = dict(settings)
    session.add(row)
    session.flush()
    return _agent(row)


def list_agents(session: Session, tenant: str | None = None) -> list[Agent]:
    """Every agent, or those granted to `tenant`."""
    statement = select(AgentRow).order_by(AgentRow.name)
    if tenant is not None:
        statement = statement.join(TenantAgentRow, TenantAgentRow.agent == AgentRow.name).where(
            TenantAgentRow.tenant == tenant
        )
    return [_agent(row) for row in session.exec(statement)]
