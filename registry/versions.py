"""Immutable agent versions, identified as `<agent>@v<number>` and by content hash."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from pydantic import BaseModel
from sqlmodel import Session, func, select

from atdp import VersionSpec, utcnow
from registry.aliases import Alias, current_aliases
from registry.errors import InvalidRecordError, NotFoundError
from registry.tables import AgentRow, AgentVersionRow

__all__ = ["AgentVersion", "get_version", "list_versions", "register_version", "resolve_version"]


class AgentVersion(BaseModel):
    id: str
    agent: str
    number: int
    content_hash: str
    parent_id: str | None
    spec: VersionSpec
    author: str
    reason: str
    created_at: datetime


def _version(row: AgentVersionRow) -> AgentVersion:
    return AgentVersion(
        id=row.id,
        agent=row.agent,
        number=row.number,
        content_hash=row.content_hash,
        parent_id=row.parent_id,
        spec=VersionSpec.model_validate(row.spec),
        author=row.author,
        reason=row.reason,
        created_at=row.created_at,
    )


def register_version(
    session: Session,
    agent: str,
    spec: VersionSpec,
    *,
    parent_id: str | None = None,
    author: str,
    reason: str,
) -> AgentVersion:
    """Register `spec` as a version of `agent`; registering the same content again returns
    the existing version (so a retried activity never creates a twin)."""
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    if parent_id is not None:
        parent = session.get(AgentVersionRow, parent_id)
        if parent is None or parent.agent != agent:
            raise InvalidRecordError(f"parent version {parent_id} is not a version of {agent}")
    content_hash = spec.content_hash()
    for _ in range(5):  # concurrent registrations race for the next number
        existing = _by_hash(session, agent, content_hash)
        if existing is not None:
            return _version(existing)
        number = 1 + (
            session.exec(
                select(func.max(AgentVersionRow.number)).where(AgentVersionRow.agent == agent)
            ).one()
            or 0
        )
        row = AgentVersionRow(
            id=f"{agent}@v{number}",
            agent=agent,
            number=number,
            content_hash=content_hash,
            parent_id=parent_id,
            spec=spec.model_dump(mode="json"),
            author=author,
            reason=reason,
            created_at=utcnow(),
        )
        try:
            with session.begin_nested():
                session.add(row)
        except sa.exc.IntegrityError:
            continue
        return _version(row)
    raise RuntimeError(f"could not allocate a version number for {agent}; retry")


def _by_hash(session: Session, agent: str, content_hash: str) -> AgentVersionRow | None:
    statement = select(AgentVersionRow).where(
        AgentVersionRow.agent == agent, AgentVersionRow.content_hash == content_hash
    )
    return session.exec(statement).first()


def get_version(session: Session, version_id: str) -> AgentVersion:
    row = session.get(AgentVersionRow, version_id)
    if row is None:
        raise NotFoundError("version", version_id)
    return _version(row)


def list_versions(session: Session, agent: str) -> list[AgentVersion]:
    statement = (
        select(AgentVersionRow)
        .where(AgentVersionRow.agent == agent)
        .order_by(AgentVersionRow.number)
    )
    return [_version(row) for row in session.exec(statement)]


def resolve_version(session: Session, agent: str, reference: str) -> AgentVersion:
    """The version of `agent` that `reference` names: its id (`agent@v3`), its number (`v3`
    or `3`) or an alias (`stable`, `canary`, `shadow`, `holdback`, or `agent@stable`)."""
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    owner, at, name = reference.strip().rpartition("@")
    if at and owner != agent:
        raise InvalidRecordError(f"{reference} is not a version of agent {agent}")
    if name in set(Alias):
        version_id = getattr(current_aliases(session, agent), name)
        if version_id is None:
            raise NotFoundError("version", f"{agent}@{name} (no {name} version now)")
        return get_version(session, version_id)
    number = name[1:] if name[:1] == "v" else name
    if not number.isdigit():
        raise InvalidRecordError(
            f"{reference!r} names no version: give {agent}@v3, v3, 3 or an alias "
            "(stable, canary, shadow, holdback)"
        )
    return get_version(session, f"{agent}@v{int(number)}")
