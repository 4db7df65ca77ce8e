"""Training exports and retention: what may leave the registry, and what must go.

An export holds only training-eligible events of real user traffic (never shadow or
evaluation traffic, never `debug_only` or `audit_only` data), grouped by trajectory, with
the effective reward of each trajectory and of each llm_call: the shape TRL- and
verl-style trainers consume.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, select

from atdp import EventKind, MessageAction, Traffic, TrainingEligibility
from registry.db import id_chunks
from registry.rewards import effective_reward, list_rewards
from registry.scope import TenantScope
from registry.tables import EventRow, RewardRow, StoredResponseRow, TrajectoryRow
from registry.trajectories import get_events, list_trajectories

__all__ = ["export_records", "purge_expired"]


def export_records(
    session: Session,
    tenant: TenantScope,
    agent: str,
    *,
    since: datetime | None = None,
    limit: int = 100_000,
) -> Iterator[dict[str, Any]]:
    """One record per trajectory that has training-eligible user events, oldest first."""
    trajectories = list_trajectories(session, tenant, agent=agent, since=since, limit=limit)
    for trajectory in reversed(trajectories):
        events = [
            e
            for e in get_events(session, trajectory.tenant, trajectory.id)
            if e.governance.training is TrainingEligibility.ELIGIBLE
            and e.metadata.traffic is Traffic.USER
        ]
        if not events:
            continue
        rewards = list_rewards(session, trajectory.tenant, trajectory_id=trajectory.id)
        overall = effective_reward(rewards)
        steps = [_step(event, rewards) for event in events if event.kind is EventKind.LLM_CALL]
        yield {
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
    emptied, and stored responses (deleted ones' tombstones too)."""
    counts = _purge_events(session, now)
    expired = sa.and_(
        StoredResponseRow.expires_at.is_not(None), StoredResponseRow.expires_at <= now
    )
    counts["responses"] = session.execute(sa.delete(StoredResponseRow).where(expired)).rowcount
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
