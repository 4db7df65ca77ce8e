"""Tenant scoping: a query for tenant A never returns tenant B's rows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry import (
    ALL_TENANTS,
    MemoryKind,
    NotFoundError,
    add_memory_item,
    add_rewards,
    get_event,
    get_events,
    get_memory_items,
    get_trajectory,
    insert_events,
    list_memory_items,
    list_rewards,
    list_trajectories,
    next_event_seq,
    record_trajectory,
    transaction,
)
from tests.registry.helpers import event, reward, seed_world, trajectory

TENANTS = ("acme", "globex", "initech")


@pytest.fixture
def world(engine):
    seed_world(engine, tenants=TENANTS)
    return engine


@settings(max_examples=10)
@given(seqs=st.sets(st.integers(min_value=0, max_value=50), max_size=6))
def test_the_next_event_seq_follows_the_last_stored_event_for_its_owner_only(world, seqs) -> None:
    t = trajectory("acme")
    with transaction(world) as session:
        record_trajectory(session, t)
        insert_events(session, [event(t, seq) for seq in seqs])
    with transaction(world) as session:
        assert next_event_seq(session, "acme", t.id) == (max(seqs) + 1 if seqs else 0)
        assert next_event_seq(session, ALL_TENANTS, t.id) == (max(seqs) + 1 if seqs else 0)
        assert next_event_seq(session, "globex", t.id) == 0


@settings(max_examples=10)
@given(owners=st.lists(st.sampled_from(TENANTS), min_size=1, max_size=8))
def test_every_read_is_scoped_to_its_tenant(world, owners) -> None:
    written = {}
    with transaction(world) as session:
        for tenant in owners:
            t = trajectory(tenant)
            e = event(t, 0)
            record_trajectory(session, t)
            insert_events(session, [e])
            add_rewards(session, [reward(t, 1.0, e)])
            written[t.id] = (tenant, e.id)
    with transaction(world) as session:
        for tenant in TENANTS:
            listed = list_trajectories(session, tenant)
            assert {t.tenant for t in listed} <= {tenant}
            for trajectory_id, (owner, event_id) in written.items():
                events = get_events(session, tenant, trajectory_id)
                rewards = list_rewards(session, tenant, trajectory_id=trajectory_id)
                if owner == tenant:
                    assert get_trajectory(session, tenant, trajectory_id).tenant == tenant
                    assert [e.id for e in events] == [event_id]
                    assert len(rewards) == 1
                else:
                    assert events == [] and rewards == []
                    with pytest.raises(NotFoundError):
                        get_trajectory(session, tenant, trajectory_id)
                    with pytest.raises(NotFoundError):
                        get_event(session, tenant, event_id)
        everything = list_trajectories(session, ALL_TENANTS, limit=10_000)
        assert set(written) <= {t.id for t in everything}


def test_an_unscoped_read_must_be_explicit(world) -> None:
    with transaction(world) as session, pytest.raises(TypeError, match="ALL_TENANTS"):
        list_trajectories(session, None)  # type: ignore[arg-type]


def test_memory_of_one_tenant_is_invisible_to_another(world) -> None:
    with transaction(world) as session:
        mine = add_memory_item(
            session, "support-bot", "acme", MemoryKind.FACT, "Refunds take 5 days."
        )
        shared = add_memory_item(
            session, "support-bot", None, MemoryKind.PROCEDURE, "Greet politely."
        )
        theirs = add_memory_item(
            session, "support-bot", "globex", MemoryKind.FACT, "VIP line is 555."
        )
    with transaction(world) as session:
        assert {i.id for i in list_memory_items(session, "support-bot", "acme")} == {
            mine.id,
            shared.id,
        }
        assert {i.id for i in list_memory_items(session, "support-bot", "globex")} == {
            theirs.id,
            shared.id,
        }
        snapshot = [theirs.id, mine.id, shared.id]
        assert [i.id for i in get_memory_items(session, "support-bot", "acme", snapshot)] == [
            mine.id,
            shared.id,
        ]
