"""Which recorded trajectories the replay gate replays: past failures and known successes.

A candidate must fix some of what failed and break nothing that worked, so the gate
replays both kinds from the decision's window. A trajectory counts as a failure or a
success by its effective reward (the one place rewards are combined), else by its
recorded outcome; trajectories with neither say nothing and are left out.
"""

from __future__ import annotations

from sqlmodel import Session

from evolution.replay import RecordedTrajectory
from evolution.replay.scorers import ScoringContext
from evolution.window import WindowSpec
from registry import (
    ALL_TENANTS,
    TrajectoryWindow,
    effective_reward_of_trajectory,
    get_events,
    window_trajectories,
)

__all__ = ["recorded_cases"]

_SUCCESS, _FAILURE = {"success"}, {"failure", "error", "abandoned"}


def recorded_cases(
    session: Session, window: WindowSpec, *, per_kind: int = 20
) -> list[RecordedTrajectory]:
    """Up to `per_kind` past failures and `per_kind` known successes, newest first."""
    selection = TrajectoryWindow(
        agent=window.agent,
        tenants=tuple(window.tenants) if window.tenants else None,
        since=window.since,
        until=window.until,
        last=window.last,
    )
    picked: dict[bool, list[RecordedTrajectory]] = {True: [], False: []}
    for row in window_trajectories(session, selection):
        succeeded, reward = _verdict(session, row)
        if succeeded is None or len(picked[succeeded]) >= per_kind:
            continue
        events = get_events(session, ALL_TENANTS, row.id)
        if not any(event.kind == "llm_call" for event in events):
            continue
        context = ScoringContext(recorded_reward=reward, recorded_success=succeeded)
        picked[succeeded].append(RecordedTrajectory(events, succeeded, row.tenant, context))
        if all(len(found) >= per_kind for found in picked.values()):
            break
    return picked[False] + picked[True]


def _verdict(session: Session, row) -> tuple[bool | None, float | None]:
    """(succeeded, reward in [0, 1]) from the effective reward, else the outcome status."""
    reward = effective_reward_of_trajectory(session, ALL_TENANTS, row.id)
    if reward is not None:
        value = min(max(reward.value, 0.0), 1.0)
        return value >= 0.5, value
    if row.outcome_status in _SUCCESS:
        return True, None
    if row.outcome_status in _FAILURE:
        return False, None
    return None, None
