"""Late-bound rewards (append-only) and the one function that computes effective reward."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence

from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import (
    BinaryValue,
    CategoricalValue,
    Reward,
    RewardSource,
    ScalarValue,
)
from registry.db import id_chunks
from registry.errors import InvalidRecordError, NotFoundError
from registry.scope import TenantScope, scoped
from registry.tables import EventRow, RewardRow, TrajectoryRow
from registry.trajectories import _insert_ignoring_duplicates

__all__ = [
    "SOURCE_WEIGHTS",
    "EffectiveReward",
    "add_rewards",
    "effective_reward",
    "effective_reward_of_event",
    "effective_reward_of_trajectory",
    "list_rewards",
    "rewards_by_trajectory",
]

# How much one reward of each source counts, before its own confidence. Explicit user
# judgements, tests and reviewers are direct evidence; judges and next-turn inferences
# are indirect and often noisy.
SOURCE_WEIGHTS: dict[RewardSource, float] = {
    RewardSource.EXPLICIT: 1.0,
    RewardSource.TEST: 1.0,
    RewardSource.HUMAN_REVIEW: 1.0,
    RewardSource.JUDGE: 0.6,
    RewardSource.IMPLICIT_NEXT_TURN: 0.4,
}


class EffectiveReward(BaseModel):
    """The reward that counts for an event or trajectory, with what it was made of."""

    value: float
    weight: float  # total weight behind the value
    counted: int  # rewards that contributed
    superseded: int  # older rewards replaced by a later one of the same source and target


def effective_reward(rewards: Iterable[Reward], name: str | None = None) -> EffectiveReward | None:
    """Combine rewards into one number: the weighted mean of their numeric values.

    Rules, in order:
      1. only rewards named `name` count (all names when None);
      2. for one target (trajectory or event), metric and source, the latest reward
         (by created_at, then id) supersedes earlier ones: a user who changes a thumbs-up
         to a thumbs-down means the latter;
      3. rewards without a number (a category without a score) and zero-weight ones
         are left out;
      4. weight = SOURCE_WEIGHTS[source] * confidence.

    Returns None when nothing counts.
    """
    latest: dict[tuple, Reward] = {}
    considered = 0
    for reward in rewards:
        if name is not None and reward.name != name:
            continue
        considered += 1
        key = (reward.trajectory_id, reward.event_id, reward.name, reward.source)
        held = latest.get(key)
        if held is None or (reward.created_at, reward.id) > (held.created_at, held.id):
            latest[key] = reward
    weighted = [
        (value, SOURCE_WEIGHTS[reward.source] * reward.confidence)
        for reward in latest.values()
        if (value := reward.numeric) is not None
    ]
    weighted = [(value, weight) for value, weight in weighted if weight > 0.0]
    if not weighted:
        return None
    weight_sum = math.fsum(weight for _, weight in weighted)
    mean = math.fsum(value * weight for value, weight in weighted) / weight_sum
    # Keep rounding error from stepping outside the range of the inputs.
    values = [value for value, _ in weighted]
    mean = min(max(mean, min(values)), max(values))
    return EffectiveReward(
        value=mean, weight=weight_sum, counted=len(weighted), superseded=considered - len(latest)
    )


def reward_columns(reward: Reward) -> dict:
    """The reward as a `reward` table row."""
    match reward.value:
        case ScalarValue(value=v):
            number, label = v, None
        case BinaryValue(value=v):
            number, label = (1.0 if v else 0.0), None
        case CategoricalValue(value=category, score=score):
            number, label = score, category
    return {
        "id": reward.id,
        "tenant": reward.tenant,
        "trajectory_id": reward.trajectory_id,
        "event_id": reward.event_id,
        "name": reward.name,
        "source": reward.source.value,
        "value_kind": reward.value.kind,
        "value_num": number,
        "value_label": label,
        "critique": reward.critique,
        "confidence": reward.confidence,
        "created_at": reward.created_at,
    }


def _reward(row: RewardRow) -> Reward:
    if row.value_kind == "scalar":
        value: dict = {"kind": "scalar", "value": row.value_num}
    elif row.value_kind == "binary":
        value = {"kind": "binary", "value": row.value_num == 1.0}
    else:
        value = {"kind": "categorical", "value": row.value_label, "score": row.value_num}
    return Reward.model_validate(
        {
            "id": row.id,
            "tenant": row.tenant,
            "trajectory_id": row.trajectory_id,
            "event_id": row.event_id,
            "name": row.name,
            "value": value,
            "critique": row.critique,
            "source": row.source,
            "confidence": row.confidence,
            "created_at": row.created_at,
        }
    )


def add_rewards(session: Session, rewards: Sequence[Reward]) -> int:
    """Append rewards; a reward id already stored is skipped. Returns how many were new.

    Each reward's trajectory (and event, if given) must belong to the reward's tenant;
    otherwise it is reported as not found, so one tenant cannot probe another's ids.
    """
    trajectory_ids = {r.trajectory_id for r in rewards}
    owners = dict(
        session.exec(
            select(TrajectoryRow.id, TrajectoryRow.tenant).where(
                TrajectoryRow.id.in_(trajectory_ids)
            )
        ).all()
    )
    event_ids = {r.event_id for r in rewards if r.event_id is not None}
    events = {
        event_id: (trajectory_id, tenant)
        for event_id, trajectory_id, tenant in session.exec(
            select(EventRow.id, EventRow.trajectory_id, EventRow.tenant).where(
                EventRow.id.in_(event_ids)
            )
        ).all()
    }
    for reward in rewards:
        if owners.get(reward.trajectory_id) != reward.tenant:
            raise NotFoundError("trajectory", reward.trajectory_id)
        if reward.event_id is not None:
            found = events.get(reward.event_id)
            if found is None or found[1] != reward.tenant:
                raise NotFoundError("event", reward.event_id)
            if found[0] != reward.trajectory_id:
                raise InvalidRecordError(
                    f"event {reward.event_id} is not part of trajectory {reward.trajectory_id}"
                )
    return _insert_ignoring_duplicates(
        session, RewardRow.__table__, [reward_columns(r) for r in rewards]
    )


def list_rewards(
    session: Session,
    tenant: TenantScope,
    *,
    trajectory_id: uuid.UUID | None = None,
    event_id: uuid.UUID | None = None,
) -> list[Reward]:
    """Rewards of a trajectory (all of its events too) or of one event, oldest first."""
    if trajectory_id is None and event_id is None:
        raise ValueError("give a trajectory_id or an event_id")
    statement = scoped(select(RewardRow), RewardRow.tenant, tenant)
    if trajectory_id is not None:
        statement = statement.where(RewardRow.trajectory_id == trajectory_id)
    if event_id is not None:
        statement = statement.where(RewardRow.event_id == event_id)
    statement = statement.order_by(RewardRow.created_at, RewardRow.id)
    return [_reward(row) for row in session.exec(statement)]


def rewards_by_trajectory(
    session: Session, trajectory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[Reward]]:
    """Every reward of each trajectory (on the whole and on its events), oldest first, in
    one query per 500 trajectories; trajectories without rewards are absent."""
    found: dict[uuid.UUID, list[Reward]] = {}
    for chunk in id_chunks(trajectory_ids, 500):
        statement = (
            select(RewardRow)
            .where(RewardRow.trajectory_id.in_(chunk))
            .order_by(RewardRow.created_at, RewardRow.id)
        )
        for row in session.exec(statement):
            found.setdefault(row.trajectory_id, []).append(_reward(row))
    return found


def effective_reward_of_event(
    session: Session, tenant: TenantScope, event_id: uuid.UUID, name: str | None = None
) -> EffectiveReward | None:
    return effective_reward(list_rewards(session, tenant, event_id=event_id), name)


def effective_reward_of_trajectory(
    session: Session, tenant: TenantScope, trajectory_id: uuid.UUID, name: str | None = None
) -> EffectiveReward | None:
    """From every reward of the trajectory: those on the whole and those on its events."""
    return effective_reward(list_rewards(session, tenant, trajectory_id=trajectory_id), name)
