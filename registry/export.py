"""Training exports and retention: what may leave the registry, and what must go.

An export holds only training-eligible events of real user traffic (never shadow or
evaluation traffic, never `debug_only` or `audit_only` data), grouped by trajectory, with
the effective reward of each trajectory and of each llm_call: the shape TRL- and
verl-style trainers consume.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, select

from atdp import Event, EventKind, MessageAction, Traffic, TrainingEligibility, Trajectory
from registry.bodies import STORED
from registry.bodies import events as stored_events
from registry.db import id_chunks
from registry.partitions import drop_expired_partitions
from registry.rewards import effective_reward, rewards_by_trajectory
from registry.scope import TenantScope, scoped
from registry.tables import DeletedResponseRow, EventRow, RewardRow, TrajectoryRow
from registry.trajectories import _trajectory

__all__ = [
    "EXPORT_PAGE",
    "ExportPage",
    "export_page",
    "export_records",
    "export_start",
    "purge_expired",
    "training_records",
]


EXPORT_PAGE = 500  # trajectories read at a time: an export holds one page, not the day


@dataclass(frozen=True)
class ExportPage:
    """A page of an export and where the next one starts (None: this was the last)."""

    records: list[dict[str, Any]]
    after: tuple[datetime, uuid.UUID] | None


def export_records(
    session: Session,
    tenant: TenantScope,
    agent: str,
    *,
    since: datetime | None = None,
    limit: int = 100_000,
) -> Iterator[dict[str, Any]]:
    """One record per trajectory that has training-eligible user events, oldest first, of
    the agent's `limit` most recent trajectories (started at or after `since`).

    Read a page of trajectories at a time, with their events and rewards in one query
    each, so an export of a day of traffic holds one page in memory, whatever its size.
    """
    start = export_start(session, tenant, agent, since=since, limit=limit)
    after = None
    while True:
        page = export_page(session, tenant, agent, since=since, start=start, after=after)
        yield from page.records
        if page.after is None:
            return
        after = page.after


def training_records(
    session: Session,
    agent: str,
    tenants: Sequence[str],
    *,
    since: datetime | None = None,
    limit: int = 100_000,
) -> Iterator[dict[str, Any]]:
    """The training export of `tenants`, one record per trajectory (`export_records`,
    tenant by tenant): the only traffic any training data is built from."""
    for tenant in tenants:
        yield from export_records(session, tenant, agent, since=since, limit=limit)


def export_start(
    session: Session,
    tenant: TenantScope,
    agent: str,
    *,
    since: datetime | None = None,
    limit: int = 100_000,
) -> tuple[datetime, uuid.UUID] | None:
    """Where an export of the `limit` most recent trajectories begins (None: at `since`,
    or the first, when there are no more than `limit`)."""
    statement = _trajectories(tenant, agent, since)
    statement = statement.order_by(TrajectoryRow.started_at.desc(), TrajectoryRow.id.desc())
    row = session.exec(statement.offset(max(limit, 1) - 1).limit(1)).first()
    return None if row is None else (row.started_at, row.id)


def export_page(
    session: Session,
    tenant: TenantScope,
    agent: str,
    *,
    since: datetime | None = None,
    start: tuple[datetime, uuid.UUID] | None = None,
    after: tuple[datetime, uuid.UUID] | None = None,
    size: int = EXPORT_PAGE,
) -> ExportPage:
    """The export's records of the next `size` trajectories from `start` (inclusive) and
    past `after` (the previous page's `after`), oldest first. Each page is its own unit:
    a caller may read pages in separate transactions (the gateway streams them so)."""
    statement = _trajectories(tenant, agent, since)
    key = sa.tuple_(TrajectoryRow.started_at, TrajectoryRow.id)
    if start is not None:
        statement = statement.where(key >= _key(start))
    if after is not None:
        statement = statement.where(key > _key(after))
    statement = statement.order_by(TrajectoryRow.started_at, TrajectoryRow.id).limit(size)
    trajectories = [_trajectory(row) for row in session.exec(statement)]
    if not trajectories:
        return ExportPage([], None)
    ids = [trajectory.id for trajectory in trajectories]
    events: dict[uuid.UUID, list[Event]] = {}
    rows = session.execute(
        select(*STORED)
        .where(
            EventRow.trajectory_id.in_(ids),
            EventRow.traffic == Traffic.USER.value,
            EventRow.training == TrainingEligibility.ELIGIBLE.value,
        )
        .order_by(EventRow.trajectory_id, EventRow.seq)
    )
    for event in stored_events(session, rows):
        events.setdefault(event.trajectory_id, []).append(event)
    rewards = rewards_by_trajectory(session, ids)
    records = [
        _record(trajectory, events[trajectory.id], rewards.get(trajectory.id, []))
        for trajectory in trajectories
        if trajectory.id in events
    ]
    last = trajectories[-1]
    more = len(trajectories) == size
    return ExportPage(records, (last.started_at, last.id) if more else None)


def _key(value: tuple[datetime, uuid.UUID]) -> Any:
    """A (started_at, id) position, bound as the columns' own types (SQLite stores times
    as text in a format of their own)."""
    columns = TrajectoryRow.__table__.c
    return sa.tuple_(
        sa.literal(value[0], columns.started_at.type), sa.literal(value[1], columns.id.type)
    )


def _trajectories(tenant: TenantScope, agent: str, since: datetime | None) -> Any:
    statement = scoped(select(TrajectoryRow), TrajectoryRow.tenant, tenant)
    statement = statement.where(TrajectoryRow.agent == agent)
    if since is not None:
        statement = statement.where(TrajectoryRow.started_at >= since)
    return statement


def _record(trajectory: Trajectory, events: list[Event], rewards: list) -> dict[str, Any]:
    overall = effective_reward(rewards)
    steps = [_step(event, rewards) for event in events if event.kind is EventKind.LLM_CALL]
    return {
        "trajectory_id": str(trajectory.id),
        "tenant": trajectory.tenant,
        "agent": trajectory.agent,
        "session": trajectory.session,
        "version": trajectory.versions.agent_version_id,
        "task_type": trajectory.task_type,
        "outcome": trajectory.outcome.model_dump(mode="json") if trajectory.outcome else None,
        "reward": overall.value if overall else None,
        "steps": steps,
        "events": [e.model_dump(mode="json") for e in events],
    }


def _step(event, rewards) -> dict[str, Any]:
    """One llm_call as a (prompt, completion, tokens, reward) sample."""
    action = event.action if isinstance(event.action, MessageAction) else None
    own = effective_reward([r for r in rewards if r.event_id == event.id])
    return {
        "event_id": str(event.id),
        "messages": [
            m.model_dump(mode="json", exclude_defaults=True) for m in event.observation.messages
        ]
        if event.observation
        else [],
        "completion": {
            "content": action.content if action else None,
            "tool_calls": [c.model_dump(mode="json") for c in action.tool_calls] if action else [],
        },
        "token_ids": action.token_ids if action else None,
        "logprobs": action.logprobs if action else None,
        "model_checkpoint": event.metadata.model_checkpoint,
        "reward": own.value if own else None,
    }


def purge_expired(session: Session, now: datetime) -> dict[str, int]:
    """Delete what is past its retention: events, their rewards, the trajectories they
    emptied, and the tombstones of deleted stored responses that have expired (a stored
    response itself is its llm_call, and goes with it).

    On PostgreSQL a day whose every event has expired goes as a whole partition first
    (`registry.partitions`); the rest is deleted row by row.
    """
    dropped = drop_expired_partitions(session.connection(), now)
    counts = _purge_events(session, now)
    for name in ("events", "rewards", "trajectories"):
        counts[name] += dropped[name]
    counts["partitions"] = dropped["partitions"]
    expired = sa.and_(
        DeletedResponseRow.expires_at.is_not(None), DeletedResponseRow.expires_at <= now
    )
    counts["tombstones"] = session.execute(sa.delete(DeletedResponseRow).where(expired)).rowcount
    return counts


def _purge_events(session: Session, now: datetime) -> dict[str, int]:
    """Delete events past their retention, their rewards, and the trajectories they emptied."""
    is_expired = sa.and_(EventRow.expires_at.is_not(None), EventRow.expires_at <= now)
    touched = set(session.exec(select(EventRow.trajectory_id).where(is_expired).distinct()))
    if not touched:
        return {"events": 0, "rewards": 0, "trajectories": 0}
    expired_ids = select(EventRow.id).where(is_expired)
    rewards = session.execute(
        sa.delete(RewardRow).where(RewardRow.event_id.in_(expired_ids))
    ).rowcount
    events = session.execute(sa.delete(EventRow).where(is_expired)).rowcount
    remaining: set = set()
    for chunk in id_chunks(touched):
        remaining |= set(
            session.exec(select(EventRow.trajectory_id).where(EventRow.trajectory_id.in_(chunk)))
        )
    emptied = touched - remaining
    for chunk in id_chunks(emptied):
        rewards += session.execute(
            sa.delete(RewardRow).where(RewardRow.trajectory_id.in_(chunk))
        ).rowcount
        session.execute(sa.delete(TrajectoryRow).where(TrajectoryRow.id.in_(chunk)))
    return {"events": events, "rewards": rewards, "trajectories": len(emptied)}
