"""Which recorded trajectories the replay gate replays: past failures and known successes.

A candidate must fix some of what failed and break nothing that worked, so the gate
replays both kinds from the decision's window. A trajectory counts as a failure or a
success by its effective reward (the one place rewards are combined), else by its
recorded outcome; trajectories with neither say nothing and are left out. Facts users
supplied in corrections become the trajectory's required facts: a good replayed answer
states them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from atdp import Reward
from evolution.corrections import window_corrections
from evolution.memory.distil import fact_text
from evolution.replay import RecordedTrajectory
from evolution.replay.scorers import ScoringContext
from evolution.window import WindowSpec, trajectory_window
from registry import (
    ALL_TENANTS,
    Session,
    effective_reward,
    get_events,
    window_rewards,
    window_trajectories,
)

__all__ = ["recorded_cases"]

_SUCCESS, _FAILURE = {"success"}, {"failure", "error", "abandoned"}


def recorded_cases(
    session: Session, window: WindowSpec, *, per_kind: int = 20
) -> list[RecordedTrajectory]:
    """Up to `per_kind` past failures and `per_kind` known successes, newest first."""
    selection = trajectory_window(window)
    facts = _corrected_facts(session, window)
    rewards: dict[uuid.UUID, list[Reward]] = defaultdict(list)
    for found in window_rewards(session, selection):  # one query for the whole window
        rewards[found.trajectory_id].append(found)
    picked: dict[bool, list[RecordedTrajectory]] = {True: [], False: []}
    for row in window_trajectories(session, selection):
        succeeded, reward = _verdict(row, rewards[row.id])
        if succeeded is None or len(picked[succeeded]) >= per_kind:
            continue
        events = get_events(session, ALL_TENANTS, row.id)
        if not any(event.kind == "llm_call" for event in events):
            continue
        context = ScoringContext(
            recorded_reward=reward,
            recorded_success=succeeded,
            required_facts=facts.get(row.id, []),
        )
        picked[succeeded].append(RecordedTrajectory(events, succeeded, row.tenant, context))
        if all(len(found) >= per_kind for found in picked.values()):
            break
    return picked[False] + picked[True]


def _corrected_facts(session: Session, window: WindowSpec) -> dict[uuid.UUID, list[str]]:
    """The facts users supplied in each trajectory: a replayed answer should now state them."""
    facts: dict[uuid.UUID, list[str]] = {}
    for correction in window_corrections(session, window):
        if not correction.supplies_fact:
            continue
        fact = fact_text(correction.text)
        if fact and fact not in facts.setdefault(correction.trajectory_id, []):
            facts[correction.trajectory_id].append(fact)
    return facts


def _verdict(row, rewards: list[Reward]) -> tuple[bool | None, float | None]:
    """(succeeded, reward in [0, 1]) from the effective reward, else the outcome status."""
    reward = effective_reward(rewards)
    if reward is not None:
        value = min(max(reward.value, 0.0), 1.0)
        return value >= 0.5, value
    if row.outcome_status in _SUCCESS:
        return True, None
    if row.outcome_status in _FAILURE:
        return False, None
    return None, None
