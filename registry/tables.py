"""SQLModel tables of the registry: the source of truth for Evoplane.

Append-only and immutable tables are enforced by database triggers (see the initial
migration), so the guarantee holds for every writer, not only this package's functions.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from registry.types import JSONDocument, UTCDateTime

__all__ = [
    "AgentRow",
    "AgentVersionRow",
    "AliasEventRow",
    "ApiKeyRow",
    "DeletedResponseRow",
    "EvaluationSetRow",
    "EventRow",
    "EvolutionRow",
    "McpServerRow",
    "MemoryItemRow",
    "ReviewItemRow",
    "ReviewLabelRow",
    "RewardRow",
    "ScorerResultRow",
    "SealedEventRow",
    "SessionRouteRow",
    "TenantAgentRow",
    "TenantPolicyChangeRow",
    "TenantRow",
    "TrajectoryRow",
    "metadata",
]

metadata = SQLModel.metadata
# Deterministic constraint names, so migrations and autogenerate agree on both backends.
metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _time(**kwargs: Any) -> Any:
    return Field(sa_type=UTCDateTime, **kwargs)


def _json(**kwargs: Any) -> Any:
    return Field(sa_type=JSONDocument, **kwargs)


class TenantRow(SQLModel, table=True):
    __tablename__ = "tenant"

    name: str = Field(primary_key=True, max_length=64)
    policy: dict[str, Any] = _json(default_factory=dict)
    created_at: datetime = _time()


class TenantPolicyChangeRow(SQLModel, table=True):
    """Append-only history of a tenant's policy: each change, by whom, when and why."""

    __tablename__ = "tenant_policy_change"
    __table_args__ = (sa.Index("ix_tenant_policy_change_tenant_at", "tenant", "at", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    tenant: str = Field(foreign_key="tenant.name", max_length=64)
    policy: dict[str, Any] = _json(default_factory=dict)  # the whole policy after the change
    changed: dict[str, Any] = _json(default_factory=dict)  # field -> {"from", "to"}
    actor: str = Field(max_length=200)
    reason: str = Field(default="")
    at: datetime = _time()


class ApiKeyRow(SQLModel, table=True):
    __tablename__ = "api_key"

    id: uuid.UUID = Field(primary_key=True)
    tenant: str = Field(foreign_key="tenant.name", index=True, max_length=64)
    key_hash: str = Field(unique=True, max_length=64)
    prefix: str = Field(max_length=16)
    agents: list[str] | None = _json(default=None, nullable=True)
    created_at: datetime = _time()
    revoked_at: datetime | None = _time(default=None, nullable=True)


class AgentRow(SQLModel, table=True):
    __tablename__ = "agent"

    name: str = Field(primary_key=True, max_length=64)
    description: str = Field(default="")
    settings: dict[str, Any] = _json(default_factory=dict)
    created_at: datetime = _time()


class TenantAgentRow(SQLModel, table=True):
    """Which agents a tenant may use."""

    __tablename__ = "tenant_agent"

    tenant: str = Field(foreign_key="tenant.name", primary_key=True, max_length=64)
    agent: str = Field(foreign_key="agent.name", primary_key=True, max_length=64)
    created_at: datetime = _time()


class AgentVersionRow(SQLModel, table=True):
    """An immutable bundle (model_ref, harness, memory, tool-schema overlay, guardrails)."""

    __tablename__ = "agent_version"
    __table_args__ = (
        sa.UniqueConstraint("agent", "number"),
        sa.UniqueConstraint("agent", "content_hash"),
    )

    id: str = Field(primary_key=True, max_length=80)
    agent: str = Field(foreign_key="agent.name", max_length=64)
    number: int
    content_hash: str = Field(max_length=64)
    parent_id: str | None = Field(default=None, foreign_key="agent_version.id", max_length=80)
    spec: dict[str, Any] = _json()
    author: str = Field(max_length=200)
    reason: str = Field(default="")
    created_at: datetime = _time()


class AliasEventRow(SQLModel, table=True):
    """Append-only history of alias moves: the current alias is the latest row."""

    __tablename__ = "alias_event"
    __table_args__ = (sa.Index("ix_alias_event_agent_alias_at", "agent", "alias", "at", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    agent: str = Field(foreign_key="agent.name", max_length=64)
    alias: str = Field(max_length=16)
    version_id: str | None = Field(default=None, foreign_key="agent_version.id", max_length=80)
    weight: float = 0.0
    actor: str = Field(max_length=200)
    reason: str = Field(default="")
    evolution_id: str | None = Field(default=None, max_length=200)
    at: datetime = _time()


class TrajectoryRow(SQLModel, table=True):
    __tablename__ = "trajectory"
    __table_args__ = (
        sa.Index("ix_trajectory_tenant_agent_started", "tenant", "agent", "started_at"),
        sa.Index("ix_trajectory_agent_started", "agent", "started_at"),
    )

    id: uuid.UUID = Field(primary_key=True)
    tenant: str = Field(foreign_key="tenant.name", max_length=64)
    agent: str = Field(foreign_key="agent.name", max_length=64)
    session: str = Field(max_length=200, index=True)
    task_type: str | None = Field(default=None, max_length=200)
    version_id: str | None = Field(default=None, max_length=80)
    versions: dict[str, Any] = _json(default_factory=dict)
    started_at: datetime = _time()
    ended_at: datetime | None = _time(default=None, nullable=True)
    outcome_status: str | None = Field(default=None, max_length=16)
    outcome: dict[str, Any] | None = _json(default=None, nullable=True)
    atdp_version: str = Field(max_length=8)


class EventRow(SQLModel, table=True):
    """An immutable ATDP event: `body` is the full document, the other columns index it.

    `response_id`: the Responses API response an llm_call stored (`registry.responses`),
    indexed only where there is one.
    """

    __tablename__ = "event"
    __table_args__ = (
        # Not unique: on PostgreSQL the table is partitioned by created_at, and a unique
        # key there must hold it (migration 0006); the gateway keeps seq gapless.
        sa.Index("ix_event_trajectory_id_seq", "trajectory_id", "seq"),
        sa.Index("ix_event_tenant_created", "tenant", "created_at"),
        # The few events that are not user traffic: window reads exclude their
        # trajectories without scanning the window's events (migration 0010).
        sa.Index(
            "ix_event_trajectory_non_user",
            "trajectory_id",
            "created_at",
            postgresql_where=sa.text("traffic <> 'user'"),
            sqlite_where=sa.text("traffic <> 'user'"),
        ),
        sa.Index(
            "ix_event_tenant_response_id",
            "tenant",
            "response_id",
            postgresql_where=sa.text("response_id IS NOT NULL"),
            sqlite_where=sa.text("response_id IS NOT NULL"),
        ),
    )

    id: uuid.UUID = Field(primary_key=True)
    trajectory_id: uuid.UUID = Field(foreign_key="trajectory.id")
    tenant: str = Field(foreign_key="tenant.name", max_length=64)
    seq: int
    kind: str = Field(max_length=32)
    parent_id: uuid.UUID | None = Field(default=None)
    traffic: str = Field(max_length=16)
    training: str = Field(max_length=16)
    replay_class: str = Field(max_length=16)
    created_at: datetime = _time()
    expires_at: datetime | None = _time(default=None, nullable=True, index=True)
    response_id: str | None = Field(default=None, max_length=200)
    body: dict[str, Any] = _json()


class RewardRow(SQLModel, table=True):
    """Append-only: a later judgement is a new row, never an edit."""

    __tablename__ = "reward"
    __table_args__ = (
        sa.Index("ix_reward_tenant_trajectory", "tenant", "trajectory_id"),
        sa.Index("ix_reward_event", "event_id"),
    )

    id: uuid.UUID = Field(primary_key=True)
    tenant: str = Field(foreign_key="tenant.name", max_length=64)
    trajectory_id: uuid.UUID = Field(foreign_key="trajectory.id")
    # Checked by the writers, not by a foreign key: events are partitioned on PostgreSQL.
    event_id: uuid.UUID | None = Field(default=None)
    name: str = Field(max_length=200)
    source: str = Field(max_length=32)
    value_kind: str = Field(max_length=16)
    value_num: float | None = None
    value_label: str | None = None
    critique: str | None = None
    confidence: float
    created_at: datetime = _time()


class EvolutionRow(SQLModel, table=True):
    """One evolution of one agent: decision, gate stages, outcome, and where to watch it."""

    __tablename__ = "evolution"
    __table_args__ = (
        sa.Index("ix_evolution_agent_created", "agent", "created_at"),
        # At most one unfinished evolution per agent: two at once would gate and promote
        # against each other's moving baseline.
        sa.Index(
            "ux_evolution_agent_running",
            "agent",
            unique=True,
            postgresql_where=sa.text("outcome IS NULL"),
            sqlite_where=sa.text("outcome IS NULL"),
        ),
    )

    id: str = Field(primary_key=True, max_length=200)  # the Temporal workflow id
    agent: str = Field(foreign_key="agent.name", max_length=64)
    scope: dict[str, Any] = _json(default_factory=dict)
    options: dict[str, Any] = _json(default_factory=dict)
    action: str | None = Field(default=None, max_length=32)
    stage: str = Field(max_length=32)
    outcome: str | None = Field(default=None, max_length=32)
    decision: dict[str, Any] | None = _json(default=None, nullable=True)
    stages: list[dict[str, Any]] = _json(default_factory=list)
    parent_version_id: str | None = Field(default=None, max_length=80)
    candidate_version_id: str | None = Field(default=None, max_length=80)
    workflow_run_id: str | None = Field(default=None, max_length=200)
    mlflow_run_id: str | None = Field(default=None, max_length=200)
    created_at: datetime = _time()
    updated_at: datetime = _time()


class MemoryItemRow(SQLModel, table=True):
    """A reusable fact or procedure, scoped to an agent and (usually) one tenant."""

    __tablename__ = "memory_item"
    __table_args__ = (sa.Index("ix_memory_item_agent_tenant_key", "agent", "tenant", "key"),)

    id: uuid.UUID = Field(primary_key=True)
    agent: str = Field(foreign_key="agent.name", max_length=64)
    tenant: str | None = Field(default=None, foreign_key="tenant.name", max_length=64)
    kind: str = Field(max_length=16)
    key: str = Field(max_length=400)
    content: str
    provenance: list[str] = _json(default_factory=list)
    confidence: float = 1.0
    status: str = Field(default="active", max_length=16)
    conflicts_with: uuid.UUID | None = Field(default=None)
    created_at: datetime = _time()
    updated_at: datetime = _time()


class SessionRouteRow(SQLModel, table=True):
    """The version and replica a session was assigned at its first request, for its life."""

    __tablename__ = "session_route"

    agent: str = Field(foreign_key="agent.name", primary_key=True, max_length=64)
    tenant: str = Field(foreign_key="tenant.name", primary_key=True, max_length=64)
    session: str = Field(primary_key=True, max_length=200)
    version_id: str = Field(foreign_key="agent_version.id", max_length=80)
    alias: str = Field(max_length=16)
    replica: int = 0
    created_at: datetime = _time()


class SealedEventRow(SQLModel, table=True):
    """The encrypted raw copy of a redacted event, readable only with the seal key."""

    __tablename__ = "sealed_event"

    event_id: uuid.UUID = Field(primary_key=True)
    tenant: str = Field(foreign_key="tenant.name", max_length=64)
    ciphertext: str
    created_at: datetime = _time()


class DeletedResponseRow(SQLModel, table=True):
    """The tombstone of a deleted Responses API response: its llm_call stays (it is the
    trajectory's), the response is gone, and a replayed spool cannot bring it back. Kept
    until the response would have expired."""

    __tablename__ = "deleted_response"

    tenant: str = Field(foreign_key="tenant.name", primary_key=True, max_length=64)
    id: str = Field(primary_key=True, max_length=200)
    deleted_at: datetime = _time()
    expires_at: datetime | None = _time(default=None, nullable=True)


class McpServerRow(SQLModel, table=True):
    """An upstream MCP server an agent reaches through the gateway (`/mcp/{name}`), and the
    tenants allowed to use it."""

    __tablename__ = "mcp_server"

    name: str = Field(primary_key=True, max_length=64)
    agent: str = Field(foreign_key="agent.name", max_length=64, index=True)
    url: str | None = Field(default=None, nullable=True)
    command: list[str] | None = _json(default=None, nullable=True)
    tenants: list[str] = _json(default_factory=list)
    created_at: datetime = _time()


class ReviewItemRow(SQLModel, table=True):
    """Something a person should judge: an unsure correction, a candidate awaiting approval,
    a safety finding, an inconclusive canary. One row per (agent, kind, key): the same thing
    seen again adds to `evidence` instead of asking twice."""

    __tablename__ = "review_item"
    __table_args__ = (
        sa.UniqueConstraint("agent", "kind", "key"),
        sa.Index("ix_review_item_status_agent", "status", "agent", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent: str = Field(foreign_key="agent.name", max_length=64)
    tenant: str | None = Field(default=None, max_length=64)
    kind: str = Field(max_length=16)
    key: str = Field(max_length=400)
    status: str = Field(max_length=16)
    title: str
    body: dict[str, Any] = _json(default_factory=dict)  # what the reviewer reads
    subject: dict[str, Any] = _json(default_factory=dict)  # ids it is about
    evidence: list[str] = _json(default_factory=list)  # the distinct sightings behind it
    assignee: str | None = Field(default=None, max_length=200)
    skipped_by: list[str] = _json(default_factory=list)
    closed_reason: str | None = None
    mirror: dict[str, Any] | None = _json(default=None, nullable=True)  # its MLflow ids
    created_at: datetime = _time()
    updated_at: datetime = _time()


class ReviewLabelRow(SQLModel, table=True):
    """Append-only: a person's label (or skip) of a review item, and what it became."""

    __tablename__ = "review_label"
    __table_args__ = (sa.Index("ix_review_label_item", "item_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="review_item.id")
    reviewer: str = Field(max_length=200)
    action: str = Field(max_length=16)  # label | skip
    label: str | None = Field(default=None, max_length=64)
    score: float | None = None
    note: str = Field(default="")
    effects: dict[str, Any] = _json(default_factory=dict)
    via: str = Field(max_length=16)  # api | mlflow
    created_at: datetime = _time()


class EvaluationSetRow(SQLModel, table=True):
    """An immutable version of an agent's evaluation set: every case it holds."""

    __tablename__ = "evaluation_set"
    __table_args__ = (
        sa.UniqueConstraint("agent", "name", "number"),
        sa.UniqueConstraint("agent", "name", "content_hash"),
    )

    id: str = Field(primary_key=True, max_length=200)  # <agent>/<name>@v<number>
    agent: str = Field(foreign_key="agent.name", max_length=64)
    name: str = Field(max_length=64)
    number: int
    content_hash: str = Field(max_length=64)
    parent_id: str | None = Field(default=None, max_length=200)
    cases: list[dict[str, Any]] = _json(default_factory=list)
    author: str = Field(max_length=200)
    reason: str = Field(default="")
    created_at: datetime = _time()


class ScorerResultRow(SQLModel, table=True):
    """What one code scorer made of one trajectory: its reward, or why it has none."""

    __tablename__ = "scorer_result"
    __table_args__ = (
        sa.Index("ix_scorer_result_agent_scorer_status", "agent", "scorer", "status"),
    )

    agent: str = Field(foreign_key="agent.name", primary_key=True, max_length=64)
    scorer: str = Field(primary_key=True, max_length=64)
    trajectory_id: uuid.UUID = Field(primary_key=True)
    tenant: str = Field(max_length=64)
    status: str = Field(max_length=16)  # scored | abstained | failed
    attempts: int = 0
    value: float | None = None
    reward_id: uuid.UUID | None = Field(default=None)
    error: str | None = None
    updated_at: datetime = _time()
