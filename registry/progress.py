"""Where a session's open trajectory stands, for a gateway that did not serve its last turn.

Any gateway process may serve any request of a session (replicas behind a load balancer, a
process restarted between two turns). One that finds no state of its own for a session whose
request carries answers the model gave earlier reads here what it needs to go on recording
the same trajectory: the trajectory, the next `seq`, and the answers recorded so far (each
llm_call's id, its answer's key and its tool calls), so the request's tool results link to
the calls that asked for them. Idle sweeps read `last_activity` before ending a trajectory
another process may still be serving.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import EventKind, Traffic, Trajectory
from registry.db import id_chunks
from registry.tables import EventRow, TrajectoryRow
from registry.trajectories import _trajectory
from registry.types import UTCDateTime

__all__ = ["RecordedAnswer", "SessionProgress", "last_activity", "session_progress"]


class RecordedAnswer(BaseModel):
    """One recorded llm_call's answer, as a later request of the session shows it again."""

    event_id: uuid.UUID
    seq: int
    key: str | None  # the answer's key (`metadata.extra.answer_key`), None if not recorded
    tool_calls: list[dict[str, str]]  # {"id", "name", "arguments"} as the model wrote them


class SessionProgress(BaseModel):
    trajectory: Trajectory
    next_seq: int
    answers: list[RecordedAnswer]  # in order


def session_progress(
    session: Session, tenant: str, agent: str, session_id: str, version_id: str
) -> SessionProgress | None:
    """The session's latest open trajectory under `version_id`, with its user traffic's
    answers; None if it has none (or only ended ones)."""
    row = session.exec(
        select(TrajectoryRow)
        .where(
            TrajectoryRow.tenant == tenant,
            TrajectoryRow.agent == agent,
            TrajectoryRow.session == session_id,
            TrajectoryRow.version_id == version_id,
            TrajectoryRow.ended_at.is_(None),
        )
        .order_by(TrajectoryRow.started_at.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    last = session.exec(
        select(sa.func.max(EventRow.seq)).where(EventRow.trajectory_id == row.id)
    ).one()
    action = EventRow.body["action"]
    answers = session.exec(
        select(EventRow.id, EventRow.seq, EventRow.body["metadata"]["extra"], action)
        .where(
            EventRow.trajectory_id == row.id,
            EventRow.kind == EventKind.LLM_CALL.value,
            EventRow.traffic == Traffic.USER.value,
        )
        .order_by(EventRow.seq)
    ).all()
    return SessionProgress(
        trajectory=_trajectory(row),
        next_seq=0 if last is None else last + 1,
        answers=[
            RecordedAnswer(
                event_id=event_id,
                seq=seq,
                key=(extra or {}).get("answer_key"),
                tool_calls=(action or {}).get("tool_calls") or [],
            )
            for event_id, seq, extra, action in answers
        ],
    )


def last_activity(
    session: Session, trajectory_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, datetime]:
    """When each trajectory's latest recorded event was created (absent: none recorded)."""
    found: dict[uuid.UUID, datetime] = {}
    for chunk in id_chunks(trajectory_ids):
        rows = session.exec(
            select(EventRow.trajectory_id, sa.func.max(EventRow.created_at, type_=UTCDateTime))
            .where(EventRow.trajectory_id.in_(chunk))
            .group_by(EventRow.trajectory_id)
        ).all()
        found.update({trajectory_id: latest for trajectory_id, latest in rows})
    return found
