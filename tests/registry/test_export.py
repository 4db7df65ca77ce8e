"""Training exports read a page of trajectories at a time and hold exactly what they held
when they read one trajectory at a time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atdp import (
    EventKind,
    Governance,
    MessageAction,
    Traffic,
    TrainingEligibility,
    utcnow,
)
from registry import (
    ALL_TENANTS,
    add_rewards,
    effective_reward,
    export_records,
    get_events,
    insert_events,
    list_rewards,
    list_trajectories,
    record_trajectory,
    training_records,
    transaction,
)
from registry.export import export_page, export_start
from tests.registry.helpers import event, reward, seed_world, trajectory


@pytest.fixture
def seeded(engine):
    _seed(engine)
    return engine


def _seed(engine) -> None:
    """Trajectories a minute apart (two at the same instant), of two tenants and two
    agents, with user and shadow traffic, eligible and opted-out events, and rewards."""
    seed_world(engine)
    with transaction(engine) as session:
        from registry import create_agent
        from tests.registry.helpers import spec

        create_agent(session, "other-bot", spec("x"), author="test")
    start = utcnow() - timedelta(days=1)
    made, events, rewards = [], [], []
    for i in range(23):
        at = start + timedelta(minutes=i if i != 5 else 4)  # 4 and 5 start together
        made.append(
            trajectory(
                "acme" if i % 3 else "globex",
                agent="other-bot" if i % 7 == 6 else "support-bot",
                session=f"s-{i}",
                at=at,
            )
        )
    for i, owner in enumerate(made):
        for seq in range(3):
            traffic = Traffic.SHADOW if (i + seq) % 5 == 0 else Traffic.USER
            training = (
                TrainingEligibility.DEBUG_ONLY
                if (i * seq) % 4 == 3
                else TrainingEligibility.ELIGIBLE
            )
            made_event = event(
                owner,
                seq,
                action=MessageAction(content=f"answer {i}.{seq}"),
                governance=Governance(training=training),
            )
            update = {"metadata": made_event.metadata.model_copy(update={"traffic": traffic})}
            if seq == 1:  # the user's turn between two calls
                update.update(kind=EventKind.USER_MESSAGE, action=None)
            made_event = made_event.model_copy(update=update)
            events.append(made_event)
        if i % 2:
            rewards.append(reward(owner, 0.5 + i / 100))
            rewards.append(reward(owner, 1.0, events[-1]))
    with transaction(engine) as session:
        for owner in made:
            record_trajectory(session, owner)
        insert_events(session, events)
        add_rewards(session, rewards)


def _one_at_a_time(session, tenant, agent, limit):
    """The export as it was read before: one trajectory, its events, its rewards at a time."""
    records = []
    for owner in reversed(list_trajectories(session, tenant, agent=agent, limit=limit)):
        events = [
            e
            for e in get_events(session, owner.tenant, owner.id)
            if e.governance.training is TrainingEligibility.ELIGIBLE
            and e.metadata.traffic is Traffic.USER
        ]
        if not events:
            continue
        rewards = list_rewards(session, owner.tenant, trajectory_id=owner.id)
        overall = effective_reward(rewards)
        records.append(
            (str(owner.id), overall.value if overall else None, [str(e.id) for e in events])
        )
    return records


@settings(max_examples=15)
@given(
    size=st.integers(1, 9),
    limit=st.integers(1, 30),
    tenant=st.sampled_from(["acme", "globex", ALL_TENANTS]),
)
def test_paged_exports_hold_what_one_at_a_time_did(seeded, size, limit, tenant) -> None:
    with transaction(seeded) as session:
        expected = _one_at_a_time(session, tenant, "support-bot", limit)
        start = export_start(session, tenant, "support-bot", limit=limit)
        paged, after = [], None
        while True:  # as the gateway streams them: page after page
            page = export_page(session, tenant, "support-bot", start=start, after=after, size=size)
            paged += page.records
            if page.after is None:
                break
            after = page.after
        whole = list(export_records(session, tenant, "support-bot", limit=limit))
    got = [(r["trajectory_id"], r["reward"], [e["id"] for e in r["events"]]) for r in paged]
    assert got == expected
    assert [r["trajectory_id"] for r in whole] == [r[0] for r in expected]
    for record in paged:
        assert all(e["metadata"]["traffic"] == "user" for e in record["events"])
        assert len(record["steps"]) == sum(e["kind"] == "llm_call" for e in record["events"])


def test_a_training_export_is_each_tenants_export_in_turn(seeded) -> None:
    with transaction(seeded) as session:
        both = list(training_records(session, "support-bot", ["globex", "acme"]))
        each = [
            *export_records(session, "globex", "support-bot"),
            *export_records(session, "acme", "support-bot"),
        ]
        none = list(training_records(session, "support-bot", []))
    assert [r["trajectory_id"] for r in both] == [r["trajectory_id"] for r in each]
    assert {r["tenant"] for r in both} == {"acme", "globex"} and none == []
