"""Bulk, idempotent writes of captured records: COPY on PostgreSQL, batched INSERT elsewhere.

The gateway's capture writer sends hundreds of records per transaction (trajectories,
events, rewards). On PostgreSQL they
are COPYed into temporary tables and moved with INSERT ... SELECT ... ON CONFLICT DO
NOTHING: the per-row work happens in C and in the server, not in Python, and a record
already stored (a replayed spool) is skipped exactly as with the one-by-one functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlmodel import Session

from atdp import Event, Reward, Trajectory
from registry.bodies import stored_bodies
from registry.db import dumps_json
from registry.errors import InvalidRecordError
from registry.rewards import add_rewards, reward_columns
from registry.sealed import SealedEvent, store_sealed
from registry.trajectories import (
    TrajectoryEnd,
    close_trajectory,
    insert_events,
    record_trajectory,
    stored_response_id,
)

__all__ = ["write_batch"]

_TRAJECTORY_COLUMNS = (
    "id",
    "tenant",
    "agent",
    "session",
    "task_type",
    "version_id",
    "versions",
    "started_at",
    "ended_at",
    "outcome_status",
    "outcome",
    "atdp_version",
)
_EVENT_COLUMNS = (
    "id",
    "trajectory_id",
    "tenant",
    "seq",
    "kind",
    "parent_id",
    "traffic",
    "training",
    "replay_class",
    "created_at",
    "expires_at",
    "response_id",
    "body",
)


def write_batch(
    session: Session,
    trajectories: Sequence[Trajectory],
    events: Sequence[Event],
    rewards: Sequence[Reward],
    *,
    event_documents: Sequence[str] | None = None,
    sealed: Sequence[SealedEvent] = (),
    endings: Sequence[TrajectoryEnd] = (),
) -> None:
    """Write trajectories, then events, then rewards; records already stored are skipped.

    Args:
        event_documents: each event's JSON text, if the caller has it already (saves
            serialising twice); must be `event.model_dump_json()` of the same events.
        sealed: encrypted raw copies of redacted events.
        endings: trajectories to close (ended_at, outcome), applied last.
    """
    if sealed:
        store_sealed(session, sealed)
    _write_rows(session, trajectories, events, rewards, event_documents)
    for ending in endings:
        close_trajectory(
            session,
            ending.tenant,
            ending.trajectory_id,
            ended_at=ending.ended_at,
            outcome=ending.outcome,
        )


def _write_rows(session, trajectories, events, rewards, event_documents) -> None:
    """COPY on PostgreSQL; the one-by-one functions (batched INSERT) elsewhere."""
    if session.get_bind().dialect.name != "postgresql":
        for trajectory in trajectories:
            record_trajectory(session, trajectory)
        insert_events(session, events)
        if rewards:
            add_rewards(session, rewards)
        return
    cursor = session.connection().connection.driver_connection.cursor()
    if trajectories:
        rows = [_trajectory_row(t) for t in trajectories]
        _copy(cursor, "trajectory", _TRAJECTORY_COLUMNS, rows)
    if events:
        documents = (
            [json.loads(d) for d in event_documents]
            if event_documents
            else [e.model_dump(mode="json") for e in events]
        )
        bodies = stored_bodies(session, documents)
        rows = [_event_row(e, b) for e, b in zip(events, bodies, strict=True)]
        _copy(cursor, "event", _EVENT_COLUMNS, rows, check=_EVENT_OWNERS)
    if rewards:
        _copy(
            cursor,
            "reward",
            _REWARD_COLUMNS,
            [_reward_row(r) for r in rewards],
            check=_REWARD_TARGETS,
        )


# Staged rows that break a registry rule, checked in SQL (one round trip, no ORM work):
# an event whose trajectory is missing or another tenant's; a reward whose trajectory or
# event is missing, another tenant's, or not each other's.
_EVENT_OWNERS = """
    SELECT s.id FROM {staging} s LEFT JOIN trajectory t ON t.id = s.trajectory_id
    WHERE t.id IS NULL OR t.tenant <> s.tenant LIMIT 1
"""
_REWARD_TARGETS = """
    SELECT s.id FROM {staging} s
    LEFT JOIN trajectory t ON t.id = s.trajectory_id
    LEFT JOIN event e ON e.id = s.event_id
    WHERE t.id IS NULL OR t.tenant <> s.tenant
       OR (s.event_id IS NOT NULL AND (e.id IS NULL OR e.trajectory_id <> s.trajectory_id))
    LIMIT 1
"""


def _copy(
    cursor, table: str, columns: tuple[str, ...], rows: list[tuple], check: str | None = None
) -> None:
    names = ", ".join(columns)
    staging = f"_evoplane_copy_{table}"
    # Per connection, emptied at each commit; LIKE copies no triggers, so rows may be staged.
    # Created in the batch's own transaction (a cache of "exists" would be wrong after a
    # rollback undid the creation).
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} (LIKE {table}) ON COMMIT DELETE ROWS"
    )
    with cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    if check is not None:
        broken = cursor.execute(check.format(staging=staging)).fetchone()
        if broken is not None:
            raise InvalidRecordError(
                f"{table} {broken[0]}: its trajectory or event was not found for its tenant, "
                "or they do not belong together; nothing in this batch was written"
            )
    cursor.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING"
    )


_REWARD_COLUMNS = (
    "id",
    "tenant",
    "trajectory_id",
    "event_id",
    "name",
    "source",
    "value_kind",
    "value_num",
    "value_label",
    "critique",
    "confidence",
    "created_at",
)


def _reward_row(reward: Reward) -> tuple:
    row = reward_columns(reward)
    return tuple(row[column] for column in _REWARD_COLUMNS)


def _trajectory_row(trajectory: Trajectory) -> tuple:
    outcome = trajectory.outcome
    return (
        trajectory.id,
        trajectory.tenant,
        trajectory.agent,
        trajectory.session,
        trajectory.task_type,
        trajectory.versions.agent_version_id,
        trajectory.versions.model_dump_json(),
        trajectory.started_at,
        trajectory.ended_at,
        outcome.status.value if outcome else None,
        outcome.model_dump_json() if outcome else None,
        trajectory.atdp_version,
    )


def _event_row(event: Event, body: dict) -> tuple:
    return (
        event.id,
        event.trajectory_id,
        event.metadata.tenant,
        event.seq,
        event.kind.value,
        event.parent_id,
        event.metadata.traffic.value,
        event.governance.training.value,
        event.replay.replay_class.value,
        event.created_at,
        event.governance.expires_at,
        stored_response_id(event),
        dumps_json(body),  # JSONB would turn a float in exponent form into another integer
    )
