"""Any valid ATDP record survives model -> database -> model unchanged, on both backends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atdp import new_id
from registry import (
    add_rewards,
    get_event,
    get_events,
    get_trajectory,
    insert_events,
    list_rewards,
    record_trajectory,
    trajectories_holding,
    trajectory_events,
    transaction,
)
from tests import strategies as S
from tests.registry.helpers import seed_world

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


@pytest.fixture
def world(engine):
    seed_world(engine)
    return engine


@settings(max_examples=40)
@given(data=st.data())
def test_events_round_trip(world, data) -> None:
    # Fresh ids: the database outlives a single example.
    trajectory = data.draw(S.trajectories("acme", "support-bot")).model_copy(
        update={"id": new_id()}
    )
    batch = [
        data.draw(S.events(trajectory.id, "acme", seq=seq)).model_copy(update={"id": new_id()})
        for seq in range(data.draw(st.integers(1, 3)))
    ]
    with transaction(world) as session:
        assert record_trajectory(session, trajectory)
        assert insert_events(session, batch) == len({e.id for e in batch})
    with transaction(world) as session:
        assert get_trajectory(session, "acme", trajectory.id) == trajectory
        stored = get_events(session, "acme", trajectory.id)
        assert stored == sorted(batch, key=lambda e: e.seq)
        assert get_event(session, "acme", batch[0].id) == batch[0]


@settings(max_examples=40)
@given(data=st.data())
def test_rewards_round_trip(world, data) -> None:
    trajectory = data.draw(S.trajectories("acme", "support-bot")).model_copy(
        update={"id": new_id()}
    )
    stored_event = data.draw(S.events(trajectory.id, "acme", seq=0)).model_copy(
        update={"id": new_id()}
    )
    batch = data.draw(
        st.lists(
            S.rewards("acme", trajectory.id, [stored_event.id]),
            min_size=1,
            max_size=4,
            unique_by=lambda r: r.id,
        )
    )
    with transaction(world) as session:
        record_trajectory(session, trajectory)
        insert_events(session, [stored_event])
        batch = [r.model_copy(update={"id": new_id()}) for r in batch]
        assert add_rewards(session, batch) == len(batch)
    with transaction(world) as session:
        got = list_rewards(session, "acme", trajectory_id=trajectory.id)
    assert sorted(got, key=lambda r: r.id) == sorted(batch, key=lambda r: r.id)


def test_writes_are_idempotent(world) -> None:
    from tests.registry.helpers import event, reward, trajectory

    t = trajectory("acme")
    events = [event(t, 0), event(t, 1)]
    rewards = [reward(t, 1.0, events[0])]
    for attempt in range(2):  # the second pass is a replayed spool
        with transaction(world) as session:
            assert record_trajectory(session, t) is (attempt == 0)
            assert insert_events(session, events) == (2 if attempt == 0 else 0)
            assert add_rewards(session, rewards) == (1 if attempt == 0 else 0)
    with transaction(world) as session:
        assert len(get_events(session, "acme", t.id)) == 2
        assert len(list_rewards(session, "acme", trajectory_id=t.id)) == 1


def test_trajectories_are_read_together_as_each_alone(world) -> None:
    from atdp import EventKind
    from tests.registry.helpers import event, trajectory

    talked, answered = trajectory("acme"), trajectory("globex")
    user = event(talked, 0).model_copy(update={"kind": EventKind.USER_MESSAGE})
    events = [user, event(answered, 1), event(answered, 0)]
    with transaction(world) as session:
        record_trajectory(session, talked)
        record_trajectory(session, answered)
        insert_events(session, events)
    ids = [talked.id, answered.id, new_id()]  # one with no events at all
    with transaction(world) as session:
        together = trajectory_events(session, ids)
        alone = {t.id: get_events(session, t.tenant, t.id) for t in (talked, answered)}
        holding = trajectories_holding(session, ids, EventKind.LLM_CALL)
    assert together == alone and [e.seq for e in together[answered.id]] == [0, 1]
    assert holding == {answered.id}
