"""Memory items: facts and procedures an agent can retrieve, scoped to a tenant.

An item with `tenant=None` is agent-wide knowledge shared by every tenant of the agent;
an item with a tenant is never visible to another tenant.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field
from sqlmodel import Session, or_, select

from atdp import new_id, utcnow
from registry.errors import NotFoundError
from registry.tables import AgentRow, MemoryItemRow

__all__ = [
    "MemoryItem",
    "MemoryKind",
    "MemoryStatus",
    "add_memory_item",
    "find_memory_items",
    "get_memory_items",
    "list_agent_memory_items",
    "list_memory_items",
    "memory_key",
    "reinforce_memory_item",
    "set_memory_status",
]


class MemoryKind(StrEnum):
    FACT = "fact"
    PROCEDURE = "procedure"


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    CONFLICT = "conflict"  # contradicts another item; a person or a gate must decide
    RETIRED = "retired"


class MemoryItem(BaseModel):
    id: uuid.UUID
    agent: str
    tenant: str | None
    kind: MemoryKind
    key: str
    content: str
    provenance: list[str] = Field(default_factory=list)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    status: MemoryStatus = MemoryStatus.ACTIVE
    conflicts_with: uuid.UUID | None = None
    created_at: datetime
    updated_at: datetime


def memory_key(text: str) -> str:
    """A normalised key for finding duplicates: lowercase words, single spaces."""
    return " ".join(re.findall(r"\w+", text.lower()))[:400]


def _item(row: MemoryItemRow) -> MemoryItem:
    return MemoryItem.model_validate(row, from_attributes=True)


def add_memory_item(
    session: Session,
    agent: str,
    tenant: str | None,
    kind: MemoryKind,
    content: str,
    *,
    key: str | None = None,
    provenance: list[str] | None = None,
    confidence: float = 1.0,
    status: MemoryStatus = MemoryStatus.ACTIVE,
    conflicts_with: uuid.UUID | None = None,
) -> MemoryItem:
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    now = utcnow()
    row = MemoryItemRow(
        id=new_id(),
        agent=agent,
        tenant=tenant,
        kind=MemoryKind(kind).value,
        key=key or memory_key(content),
        content=content,
        provenance=provenance or [],
        confidence=confidence,
        status=MemoryStatus(status).value,
        conflicts_with=conflicts_with,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    return _item(row)


def _visible_to(statement, agent: str, tenant: str):
    return statement.where(
        MemoryItemRow.agent == agent,
        or_(MemoryItemRow.tenant == tenant, MemoryItemRow.tenant.is_(None)),
    )


def find_memory_items(session: Session, agent: str, ids: set[str]) -> dict[str, MemoryItem]:
    """The agent's items among `ids` (ids that are no item's are left out), whatever their
    tenant: an operator's view, never a tenant's."""
    wanted = []
    for item_id in ids:
        try:
            wanted.append(uuid.UUID(item_id))
        except ValueError:
            continue
    if not wanted:
        return {}
    statement = select(MemoryItemRow).where(
        MemoryItemRow.agent == agent, MemoryItemRow.id.in_(wanted)
    )
    return {str(row.id): _item(row) for row in session.exec(statement)}


def list_memory_items(
    session: Session, agent: str, tenant: str, *, status: MemoryStatus | None = MemoryStatus.ACTIVE
) -> list[MemoryItem]:
    """Items `tenant` may see for `agent`: its own plus agent-wide ones."""
    statement = _visible_to(select(MemoryItemRow), agent, tenant)
    if status is not None:
        statement = statement.where(MemoryItemRow.status == MemoryStatus(status).value)
    statement = statement.order_by(MemoryItemRow.created_at, MemoryItemRow.id)
    return [_item(row) for row in session.exec(statement)]


def list_agent_memory_items(
    session: Session, agent: str, *, status: MemoryStatus | None = None
) -> list[MemoryItem]:
    """Every item of `agent`, whatever its tenant scope.

    For the memory operator only, which must see every item a new agent-wide item would
    sit beside; serving a tenant always goes through `list_memory_items`/`get_memory_items`.
    """
    statement = select(MemoryItemRow).where(MemoryItemRow.agent == agent)
    if status is not None:
        statement = statement.where(MemoryItemRow.status == MemoryStatus(status).value)
    statement = statement.order_by(MemoryItemRow.created_at, MemoryItemRow.id)
    return [_item(row) for row in session.exec(statement)]


def get_memory_items(
    session: Session, agent: str, tenant: str, ids: list[uuid.UUID]
) -> list[MemoryItem]:
    """The items of a version's memory snapshot that `tenant` may see, in `ids` order."""
    if not ids:
        return []
    statement = _visible_to(select(MemoryItemRow), agent, tenant).where(MemoryItemRow.id.in_(ids))
    found = {row.id: _item(row) for row in session.exec(statement)}
    return [found[item_id] for item_id in ids if item_id in found]


def set_memory_status(
    session: Session,
    item_id: uuid.UUID,
    status: MemoryStatus,
    *,
    conflicts_with: uuid.UUID | None = None,
) -> MemoryItem:
    row = session.get(MemoryItemRow, item_id)
    if row is None:
        raise NotFoundError("memory item", item_id)
    row.status = MemoryStatus(status).value
    row.conflicts_with = conflicts_with
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return _item(row)


def reinforce_memory_item(
    session: Session, item_id: uuid.UUID, provenance: list[str], confidence: float
) -> MemoryItem:
    """Record more evidence for an item: its provenance and confidence grow, its content
    never changes (a different content is a new item, or a conflict)."""
    row = session.get(MemoryItemRow, item_id)
    if row is None:
        raise NotFoundError("memory item", item_id)
    row.provenance = list(dict.fromkeys([*row.provenance, *provenance]))
    row.confidence = max(row.confidence, min(1.0, confidence))
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return _item(row)
