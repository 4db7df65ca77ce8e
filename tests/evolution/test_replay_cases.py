"""The replay gate's cases: past failures and known successes from the window, nothing else."""

from __future__ import annotations

from datetime import timedelta

from activities.evidence import recorded_cases
from atdp import EventKind, OutcomeStatus, TrajectoryOutcome, new_id, utcnow
from evolution.replay.cases import case_verdicts, chosen_cases
from evolution.window import WindowSpec
from registry import WindowTrajectory, add_rewards, insert_events, record_trajectory, transaction
from tests.evolution.test_memory_operator import Traffic
from tests.evolution.window_helpers import world
from tests.registry.helpers import event, reward, seed_world, trajectory


def recorded(engine, tenant: str, *, reward_value=None, status=None, llm_call=True):
    t = trajectory(tenant, session=f"s-{reward_value}-{status}-{utcnow().timestamp()}")
    if status is not None:
        t = t.model_copy(update={"outcome": TrajectoryOutcome(status=status)})
    with transaction(engine) as session:
        record_trajectory(session, t)
        recorded_event = event(t, 0)
        if not llm_call:
            recorded_event = recorded_event.model_copy(update={"kind": EventKind.USER_MESSAGE})
        events = [recorded_event]
        insert_events(session, events)
        if reward_value is not None:
            add_rewards(session, [reward(t, reward_value)])
    return t


def test_failures_and_successes_are_picked_by_reward_then_outcome(engine) -> None:
    seed_world(engine)
    failed = recorded(engine, "acme", reward_value=0.0)
    good = recorded(engine, "globex", reward_value=1.0)
    errored = recorded(engine, "acme", status=OutcomeStatus.ERROR)
    finished = recorded(engine, "acme", status=OutcomeStatus.SUCCESS)
    recorded(engine, "acme")  # no reward, no outcome: says nothing
    recorded(engine, "acme", reward_value=0.0, llm_call=False)  # nothing to replay
    window = WindowSpec(agent="support-bot", since=utcnow() - timedelta(hours=1))
    with transaction(engine) as session:
        cases = recorded_cases(session, window)
    by_id = {case.events[0].trajectory_id: case for case in cases}
    assert set(by_id) == {failed.id, good.id, errored.id, finished.id}
    assert [case.recorded_success for case in cases] == [False, False, True, True]
    assert by_id[failed.id].context.recorded_reward == 0.0
    assert by_id[good.id].tenant == "globex" and by_id[good.id].context.recorded_reward == 1.0
    assert by_id[errored.id].context.recorded_reward is None
    with transaction(engine) as session:
        capped = recorded_cases(session, window, per_kind=1)
    assert [case.recorded_success for case in capped] == [False, True]
    only_globex = window.model_copy(update={"tenants": ["globex"]})
    with transaction(engine) as session:
        assert [c.tenant for c in recorded_cases(session, only_globex)] == ["globex"]


def test_facts_users_supplied_become_required_facts(engine) -> None:
    world(engine)
    traffic = Traffic(engine)
    traffic.next_turn("acme", "No, the refund window is 30 days, not 14.")
    window = traffic.store()
    with transaction(engine) as session:
        corrected = [
            case for case in recorded_cases(session, window) if case.context.required_facts
        ]
    assert [case.context.required_facts for case in corrected] == [
        ["The refund window is 30 days, not 14."]
    ]
    assert corrected[0].recorded_success is False  # a correction is a failed answer


def test_the_newest_answered_cases_of_each_kind_are_chosen_failures_first() -> None:
    rows = [
        WindowTrajectory(
            id=new_id(), tenant="acme", session=f"s-{i}", task_type=None, version_id="v",
            started_at=utcnow(), outcome_status=status,
        )
        for i, status in enumerate(["success", "failure", None, "failure", "error", "success"])
    ]  # fmt: skip
    verdicts = case_verdicts(rows, [], [])
    assert [(v.trajectory.session, v.succeeded) for v in verdicts] == [
        ("s-0", True), ("s-1", False), ("s-3", False), ("s-4", False), ("s-5", True),
    ]  # fmt: skip
    unanswered = rows[1].id
    answered = {row.id for row in rows} - {unanswered}
    chosen = chosen_cases(verdicts, answered, per_kind=2)
    assert [v.trajectory.session for v in chosen] == ["s-3", "s-4", "s-0", "s-5"]
