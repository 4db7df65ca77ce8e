"""Bulk, idempotent writes of captured records: COPY on PostgreSQL, batched INSERT elsewhere.

The gateway's capture writer sends hundreds of records per transaction. On PostgreSQL they
are COPYed into temporary tables and moved with INSERT ... SELECT ... ON CONFLICT DO
NOTHING: the per-row work happens in C and in the server, not in Python, and a record
already stored (a replayed spool) is skipped exactly as with the one-by-one functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session

from atdp import Event, Reward, Trajectory
from registry.db import dumps_json
from registry.rewards import add_rewards
from registry.sealed import SealedEvent, store_sealed
from registry.trajectories import (
    TrajectoryEnd,
    check_event_owners,
    close_trajectory,
    insert_events,
    record_trajectory,
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
        _copy(cursor, "trajectory", _TRAJECTORY_COLUMNS, [_trajectory_row(t) for t in trajectories])
    if events:
        check_event_owners(session, events)
        documents = event_documents or [e.model_dump_json() for e in events]
        _copy(
            cursor,
            "event",
            _EVENT_COLUMNS,
            [_event_row(e, d) for e, d in zip(events, documents, strict=True)],
        )
    if rewards:
        add_rewards(session, rewards)


def _copy(cursor, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    names = ", ".join(columns)
    staging = f"_evoplane_copy_{table}"
    # Per connection, emptied at each commit; LIKE copies no triggers, so rows may be staged.
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} (LIKE {table}) ON COMMIT DELETE ROWS"
    )
    with cursor.copy(f"COPY {staging} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cursor.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ON CONFLICT DO NOTHING"
    )


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


def _event_row(event: Event, document: str) -> tuple:
    if "e+" in document:  # a float JSONB would turn into a different integer: see dumps_json
        document = dumps_json(event.model_dump(mode="json"))
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
        document,
    )
