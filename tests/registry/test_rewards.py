"""Late-bound rewards never touch events; one function decides the effective reward."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from atdp import BinaryValue, CategoricalValue, RewardSource, ScalarValue, new_id, utcnow
from registry import (
    SOURCE_WEIGHTS,
    InvalidRecordError,
    NotFoundError,
    add_rewards,
    effective_reward,
    effective_reward_of_event,
    effective_reward_of_trajectory,
    insert_events,
    record_trajectory,
    transaction,
)
from tests import strategies as S
from tests.registry.helpers import event, reward, seed_world, trajectory

T = uuid.UUID("01900000-0000-7000-8000-0000000000aa")


@pytest.fixture
def world(engine):
    seed_world(engine)
    return engine


def raw_event_row(engine, event_id: uuid.UUID) -> tuple:
    """The stored row exactly as the database holds it (JSONB rendered as text)."""
    body = "body::text" if engine.dialect.name == "postgresql" else "body"
    with engine.connect() as connection:
        row = connection.execute(
            sa.text(
                f"SELECT id, trajectory_id, tenant, seq, kind, parent_id, traffic, training, "
                f"replay_class, created_at, expires_at, {body} FROM event WHERE id = :id"
            ),
            {"id": event_id.hex if engine.dialect.name == "sqlite" else event_id},
        ).one()
    return tuple(row)


def test_late_rewards_leave_the_event_row_byte_identical(world) -> None:
    t = trajectory("acme")
    e = event(t, 0)
    with transaction(world) as session:
        record_trajectory(session, t)
        insert_events(session, [e])
    before = raw_event_row(world, e.id)
    with transaction(world) as session:
        add_rewards(session, [reward(t, 1.0, e), reward(t, 0.0, e, source=RewardSource.JUDGE)])
        add_rewards(session, [reward(t, 0.5)])
    after = raw_event_row(world, e.id)
    assert after == before
    with transaction(world) as session:
        assert effective_reward_of_event(session, "acme", e.id).counted == 2


def test_effective_reward_in_the_database(world) -> None:
    t = trajectory("acme")
    e = event(t, 0)
    now = utcnow()
    with transaction(world) as session:
        record_trajectory(session, t)
        insert_events(session, [e])
        add_rewards(
            session,
            [
                reward(t, 1.0, e, created_at=now),  # thumbs up ...
                reward(t, 0.0, e, created_at=now + timedelta(seconds=5)),  # ... changed to down
                reward(t, 1.0, e, source=RewardSource.TEST, created_at=now),
                reward(
                    t,
                    0.0,
                    None,
                    source=RewardSource.IMPLICIT_NEXT_TURN,
                    confidence=0.5,
                    created_at=now,
                ),
            ],
        )
    with transaction(world) as session:
        on_event = effective_reward_of_event(session, "acme", e.id)
        whole = effective_reward_of_trajectory(session, "acme", t.id)
        assert effective_reward_of_trajectory(session, "globex", t.id) is None
    assert (on_event.value, on_event.counted, on_event.superseded) == (0.5, 2, 1)
    implicit = SOURCE_WEIGHTS[RewardSource.IMPLICIT_NEXT_TURN] * 0.5
    assert whole.value == pytest.approx(1.0 / (2.0 + implicit))
    assert whole.weight == pytest.approx(2.0 + implicit)


def test_reward_must_target_the_tenants_own_records(world) -> None:
    t = trajectory("acme")
    e = event(t, 0)
    other = trajectory("acme", session="s-2")
    with transaction(world) as session:
        record_trajectory(session, t)
        record_trajectory(session, other)
        insert_events(session, [e])
    with transaction(world) as session, pytest.raises(NotFoundError):
        add_rewards(session, [reward(t, 1.0, tenant="globex")])
    with transaction(world) as session, pytest.raises(NotFoundError):
        add_rewards(session, [reward(t, 1.0, event_id=new_id())])
    with transaction(world) as session, pytest.raises(InvalidRecordError, match="not part of"):
        add_rewards(session, [reward(other, 1.0, e)])


# --- the effective-reward function itself, as properties -------------------------------

reward_lists = st.lists(S.rewards("acme", T), min_size=1, max_size=12, unique_by=lambda r: r.id)


@given(reward_lists)
def test_effective_reward_lies_within_the_counted_values(rewards) -> None:
    result = effective_reward(rewards)
    numeric = [r.numeric for r in rewards if r.numeric is not None and r.confidence > 0]
    if result is None:
        return
    assert min(numeric) <= result.value <= max(numeric)
    assert 1 <= result.counted <= len(rewards)


@given(reward_lists, st.randoms())
def test_effective_reward_ignores_order(rewards, random) -> None:
    shuffled = list(rewards)
    random.shuffle(shuffled)
    assert effective_reward(shuffled) == effective_reward(rewards)


@given(reward_lists, st.floats(-10, 10))
def test_zero_confidence_changes_nothing(rewards, value) -> None:
    # Its own target (a fresh event id), so it supersedes nothing: only its weight is zero.
    ghost = rewards[0].model_copy(
        update={
            "id": new_id(),
            "event_id": new_id(),
            "name": "reward",
            "value": ScalarValue(value=value),
            "confidence": 0.0,
        }
    )
    assert effective_reward([*rewards, ghost]) == effective_reward(rewards)


@given(reward_lists, st.floats(-10, 10))
def test_a_later_reward_from_the_same_source_supersedes(rewards, value) -> None:
    first = rewards[0]
    later = first.model_copy(
        update={
            "id": new_id(),
            "value": ScalarValue(value=value),
            "confidence": 1.0,
            "created_at": max(r.created_at for r in rewards) + timedelta(seconds=1),
        }
    )
    result = effective_reward([later], first.name)
    assert result.value == value
    combined = effective_reward([*rewards, later], first.name)
    assert combined.superseded >= 1
    only_latest = [
        r
        for r in rewards
        if (r.event_id, r.name, r.source) != (first.event_id, first.name, first.source)
    ]
    assert combined == effective_reward([*only_latest, later], first.name).model_copy(
        update={"superseded": combined.superseded}
    )


def test_value_kinds_map_to_numbers() -> None:
    at = utcnow()
    base = dict(tenant="acme", trajectory_id=T, created_at=at, source=RewardSource.EXPLICIT)
    from atdp import Reward

    thumbs = Reward(id=new_id(), value=BinaryValue(value=False), name="a", **base)
    grade = Reward(id=new_id(), value=CategoricalValue(value="good", score=0.8), name="b", **base)
    label = Reward(id=new_id(), value=CategoricalValue(value="spam"), name="c", **base)
    assert effective_reward([thumbs]).value == 0.0
    assert effective_reward([grade]).value == 0.8
    assert effective_reward([label]) is None
    assert effective_reward([thumbs, grade, label]).value == pytest.approx(0.4)
