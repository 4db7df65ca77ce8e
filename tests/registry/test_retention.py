"""Retention: `purge_expired` (behind `evoplane gc`) removes expired data and nothing else."""

from __future__ import annotations

from datetime import timedelta

from atdp import Governance, utcnow
from registry import (
    ALL_TENANTS,
    add_rewards,
    get_events,
    insert_events,
    list_rewards,
    list_trajectories,
    purge_expired,
    record_trajectory,
    transaction,
)
from tests.registry.helpers import event, reward, seed_world, trajectory


def test_expired_events_their_rewards_and_emptied_trajectories_go(engine) -> None:
    seed_world(engine)
    now = utcnow()
    expired = Governance(expires_at=now - timedelta(days=1))
    kept = Governance(expires_at=now + timedelta(days=30))
    gone, partly, untouched = trajectory("acme"), trajectory("acme"), trajectory("globex")
    events = {
        "gone": [event(gone, 0, governance=expired), event(gone, 1, governance=expired)],
        "partly": [event(partly, 0, governance=expired), event(partly, 1, governance=kept)],
        "untouched": [event(untouched, 0)],
    }
    with transaction(engine) as session:
        for t in (gone, partly, untouched):
            record_trajectory(session, t)
        insert_events(session, [e for batch in events.values() for e in batch])
        add_rewards(
            session,
            [
                reward(gone, 1.0),
                reward(partly, 1.0, events["partly"][0]),
                reward(partly, 0.5, events["partly"][1]),
            ],
        )
    with transaction(engine) as session:
        counts = purge_expired(session, now)
    assert counts == {
        "events": 3,
        "rewards": 2,
        "trajectories": 1,
        "tombstones": 0,
        "partitions": 0,  # these events are today's: no day is wholly past
    }
    with transaction(engine) as session:
        remaining = {t.id for t in list_trajectories(session, ALL_TENANTS)}
        assert remaining == {partly.id, untouched.id}
        assert [e.seq for e in get_events(session, "acme", partly.id)] == [1]
        assert [r.value.value for r in list_rewards(session, "acme", trajectory_id=partly.id)] == [
            0.5
        ]
        assert purge_expired(session, now) == {
            "events": 0,
            "rewards": 0,
            "trajectories": 0,
            "tombstones": 0,
            "partitions": 0,
        }
