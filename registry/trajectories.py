"""Trajectories and their immutable events: idempotent writes, tenant-scoped reads."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, select

from atdp import Event, EventKind, Trajectory, TrajectoryOutcome
from registry.bodies import STORED, stored_bodies
from registry.bodies import events as stored_events
from registry.db import id_chunks
from registry.errors import InvalidRecordError, NotFoundError
from registry.scope import TenantScope, scoped
from registry.tables import EventRow, TrajectoryRow

__all__ = [
    "TrajectoryEnd",
    "close_trajectory",
    "get_event",
    "get_events",
    "get_trajectory",
    "insert_events",
    "list_trajectories",
    "next_event_seq",
    "record_trajectory",
    "stored_response_id",
    "trajectories_holding",
    "trajectory_events",
]


def _insert_ignoring_duplicates(
    session: Session, table: sa.Table, rows: list[dict], key: str = "id"
) -> int:
    """INSERT ... ON CONFLICT DO NOTHING; returns how many rows were new."""
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING counts exactly what was inserted; rowcount of a batch is driver-dependent.
    statement = insert(table).on_conflict_do_nothing().returning(table.c[key])
    return len(session.execute(statement, rows).all())


def _trajectory_row(trajectory: Trajectory) -> dict:
    return {
        "id": trajectory.id,
        "tenant": trajectory.tenant,
        "agent": trajectory.agent,
        "session": trajectory.session,
        "task_type": trajectory.task_type,
        "version_id": trajectory.versions.agent_version_id,
        "versions": trajectory.versions.model_dump(mode="json"),
        "started_at": trajectory.started_at,
        "ended_at": trajectory.ended_at,
        "outcome_status": trajectory.outcome.status.value if trajectory.outcome else None,
        "outcome": trajectory.outcome.model_dump(mode="json") if trajectory.outcome else None,
        "atdp_version": trajectory.atdp_version,
    }


def _trajectory(row: TrajectoryRow) -> Trajectory:
    return Trajectory.model_validate(
        {
            "atdp_version": row.atdp_version,
            "id": row.id,
            "tenant": row.tenant,
            "agent": row.agent,
            "session": row.session,
            "task_type": row.task_type,
            "versions": row.versions,
            "started_at": row.started_at,
            "ended_at": row.ended_at,
            "outcome": row.outcome,
        }
    )


def record_trajectory(session: Session, trajectory: Trajectory) -> bool:
    """Insert a trajectory; recording the same id again is a no-op. Returns True if new."""
    existing = session.get(TrajectoryRow, trajectory.id)
    if existing is not None:
        if existing.tenant != trajectory.tenant or existing.agent != trajectory.agent:
            raise InvalidRecordError(
                f"trajectory {trajectory.id} already exists for another tenant or agent"
            )
        return False
    return (
        _insert_ignoring_duplicates(session, TrajectoryRow.__table__, [_trajectory_row(trajectory)])
        > 0
    )


class TrajectoryEnd(BaseModel):
    """A trajectory's end, as a record the capture writer can carry."""

    tenant: str
    trajectory_id: uuid.UUID
    ended_at: datetime
    outcome: TrajectoryOutcome | None = None


def close_trajectory(
    session: Session,
    tenant: str,
    trajectory_id: uuid.UUID,
    *,
    ended_at: datetime,
    outcome: TrajectoryOutcome | None = None,
) -> Trajectory:
    """Mark a trajectory ended (its events stay untouched)."""
    row = _trajectory_row_for(session, tenant, trajectory_id)
    if ended_at < row.started_at:
        raise InvalidRecordError("ended_at is before the trajectory started")
    row.ended_at = ended_at
    if outcome is not None:
        row.outcome_status = outcome.status.value
        row.outcome = outcome.model_dump(mode="json")
    session.add(row)
    session.flush()
    return _trajectory(row)


def _trajectory_row_for(
    session: Session, tenant: TenantScope, trajectory_id: uuid.UUID
) -> TrajectoryRow:
    statement = scoped(
        select(TrajectoryRow).where(TrajectoryRow.id == trajectory_id), TrajectoryRow.tenant, tenant
    )
    row = session.exec(statement).first()
    if row is None:
        raise NotFoundError("trajectory", trajectory_id)
    return row


def get_trajectory(session: Session, tenant: TenantScope, trajectory_id: uuid.UUID) -> Trajectory:
    return _trajectory(_trajectory_row_for(session, tenant, trajectory_id))


def list_trajectories(
    session: Session,
    tenant: TenantScope,
    *,
    agent: str | None = None,
    session_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 1000,
) -> list[Trajectory]:
    """Trajectories started in [since, until), newest first."""
    statement = scoped(select(TrajectoryRow), TrajectoryRow.tenant, tenant)
    if agent is not None:
        statement = statement.where(TrajectoryRow.agent == agent)
    if session_id is not None:
        statement = statement.where(TrajectoryRow.session == session_id)
    if since is not None:
        statement = statement.where(TrajectoryRow.started_at >= since)
    if until is not None:
        statement = statement.where(TrajectoryRow.started_at < until)
    statement = statement.order_by(TrajectoryRow.started_at.desc(), TrajectoryRow.id.desc())
    return [_trajectory(row) for row in session.exec(statement.limit(limit))]


def _event_row(event: Event, body: dict | None = None) -> dict:
    """`event`'s row, its body stored as `body` (default: whole)."""
    return {
        "id": event.id,
        "trajectory_id": event.trajectory_id,
        "tenant": event.metadata.tenant,
        "seq": event.seq,
        "kind": event.kind.value,
        "parent_id": event.parent_id,
        "traffic": event.metadata.traffic.value,
        "training": event.governance.training.value,
        "replay_class": event.replay.replay_class.value,
        "created_at": event.created_at,
        "expires_at": event.governance.expires_at,
        "response_id": stored_response_id(event),
        "body": event.model_dump(mode="json") if body is None else body,
    }


def stored_response_id(event: Event) -> str | None:
    """The id of the Responses API response an llm_call stored (its
    `metadata.extra["stored_response"]`, see `registry.responses`), if it stored one."""
    stored = event.metadata.extra.get("stored_response")
    found = stored.get("id") if isinstance(stored, dict) else None
    valid = isinstance(found, str) and 0 < len(found) <= 200 and "\x00" not in found
    return found if valid and event.kind is EventKind.LLM_CALL else None


def insert_events(session: Session, events: Sequence[Event]) -> int:
    """Insert events in one batch; events already stored (same id) are skipped.

    Idempotent by design: the gateway makes event ids, so replaying its spool after a
    crash writes each event exactly once. Returns the number of events newly stored.
    """
    if not events:
        return 0
    check_event_owners(session, events)
    bodies = stored_bodies(session, [event.model_dump(mode="json") for event in events])
    rows = [_event_row(event, body) for event, body in zip(events, bodies, strict=True)]
    return _insert_ignoring_duplicates(session, EventRow.__table__, rows)


def check_event_owners(session: Session, events: Sequence[Event]) -> None:
    """Every event's trajectory exists and belongs to the tenant the event names."""
    owners = _trajectory_tenants(session, {event.trajectory_id for event in events})
    for event in events:
        owner = owners.get(event.trajectory_id)
        if owner is None:
            raise NotFoundError("trajectory", event.trajectory_id)
        if owner != event.metadata.tenant:
            raise InvalidRecordError(
                f"event {event.id} names tenant {event.metadata.tenant!r} but its trajectory "
                "belongs to another tenant"
            )


def _trajectory_tenants(session: Session, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    statement = select(TrajectoryRow.id, TrajectoryRow.tenant).where(TrajectoryRow.id.in_(ids))
    return dict(session.exec(statement).all())


def get_events(session: Session, tenant: TenantScope, trajectory_id: uuid.UUID) -> list[Event]:
    """The events of a trajectory in order; empty for another tenant's trajectory."""
    statement = scoped(
        select(*STORED).where(EventRow.trajectory_id == trajectory_id), EventRow.tenant, tenant
    )
    return stored_events(session, session.execute(statement.order_by(EventRow.seq)))


def next_event_seq(session: Session, tenant: TenantScope, trajectory_id: uuid.UUID) -> int:
    """The sequence number a trajectory's next event takes: one past its last stored event
    (0 for none, or for another tenant's trajectory). One indexed read, not its events."""
    statement = scoped(
        select(sa.func.max(EventRow.seq)).where(EventRow.trajectory_id == trajectory_id),
        EventRow.tenant,
        tenant,
    )
    last = session.exec(statement).one()
    return 0 if last is None else last + 1


def trajectory_events(
    session: Session, trajectory_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, list[Event]]:
    """The events of each of these trajectories in order (`get_events` of every tenant's),
    in one query per 500 trajectories; a trajectory without events is absent."""
    found: dict[uuid.UUID, list[Event]] = {}
    for chunk in id_chunks(trajectory_ids, 500):
        statement = select(*STORED).where(EventRow.trajectory_id.in_(chunk))
        rows = session.execute(statement.order_by(EventRow.trajectory_id, EventRow.seq))
        for event in stored_events(session, rows):
            found.setdefault(event.trajectory_id, []).append(event)
    return found


def trajectories_holding(
    session: Session, trajectory_ids: Collection[uuid.UUID], kind: EventKind
) -> set[uuid.UUID]:
    """Which of these trajectories hold an event of `kind` (of any traffic)."""
    found: set[uuid.UUID] = set()
    for chunk in id_chunks(trajectory_ids):
        statement = select(EventRow.trajectory_id).where(
            EventRow.trajectory_id.in_(chunk), EventRow.kind == kind.value
        )
        found.update(session.scalars(statement.distinct()))
    return found


def get_event(session: Session, tenant: TenantScope, event_id: uuid.UUID) -> Event:
    statement = scoped(select(*STORED).where(EventRow.id == event_id), EventRow.tenant, tenant)
    found = stored_events(session, session.execute(statement).all())
    if not found:
        raise NotFoundError("event", event_id)
    return found[0]
