"""Which recorded trajectories the replay gate replays: past failures and known successes.

A candidate must fix some of what failed and break nothing that worked, so the gate
replays both kinds from the decision's window. A trajectory counts as a failure or a
success by its effective reward (the one place rewards are combined), else by its
recorded outcome, else by the users' corrections (a follow-up read as dissatisfied makes
one, with no score); trajectories with none of these say nothing and are left out. Facts
users supplied in corrections become the trajectory's required facts: a good replayed
answer states them. What users had to ask for (an instruction the answer lacked) becomes
what the agent then gave (`asked_for`): a good first answer now gives it unasked.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from atdp import Event, EventKind, MessageAction, Reward
from evolution.corrections import CorrectionKind, UserCorrection, window_corrections
from evolution.followups import asked_for
from evolution.memory.distil import facts_supplied
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

__all__ = ["asked_in", "recorded_cases"]

_SUCCESS, _FAILURE = {"success"}, {"failure", "error", "abandoned"}


def recorded_cases(
    session: Session, window: WindowSpec, *, per_kind: int = 20
) -> list[RecordedTrajectory]:
    """Up to `per_kind` past failures and `per_kind` known successes, newest first."""
    selection = trajectory_window(window)
    corrections = window_corrections(session, window)
    facts = facts_supplied(corrections)
    corrected = {c.trajectory_id for c in corrections}
    asks = _instructions(corrections)
    rewards: dict[uuid.UUID, list[Reward]] = defaultdict(list)
    for found in window_rewards(session, selection):  # one query for the whole window
        rewards[found.trajectory_id].append(found)
    picked: dict[bool, list[RecordedTrajectory]] = {True: [], False: []}
    for row in window_trajectories(session, selection):
        succeeded, reward = _verdict(row, rewards[row.id], row.id in corrected)
        if succeeded is None or len(picked[succeeded]) >= per_kind:
            continue
        events = get_events(session, ALL_TENANTS, row.id)
        if not any(event.kind == "llm_call" for event in events):
            continue
        context = ScoringContext(
            recorded_reward=reward,
            recorded_success=succeeded,
            required_facts=facts.get(row.id, []),
            asked_for=asked_in(events, asks.get(row.id, [])),
        )
        picked[succeeded].append(RecordedTrajectory(events, succeeded, row.tenant, context))
        if all(len(found) >= per_kind for found in picked.values()):
            break
    return picked[False] + picked[True]


def _instructions(corrections: list[UserCorrection]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Per trajectory, the user messages that asked for what an answer lacked."""
    found: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for correction in corrections:
        if correction.kind is CorrectionKind.INSTRUCTION and correction.event_id is not None:
            found[correction.trajectory_id].append(correction.event_id)
    return found


def asked_in(events: list[Event], asking: list[uuid.UUID]) -> list[str]:
    """What the agent gave once users asked (the messages `asking`), that its answer
    before did not (`evolution.followups.asked_for`)."""
    found: list[str] = []
    ordered = sorted(events, key=lambda e: e.seq)
    for message in asking:
        at = next((i for i, e in enumerate(ordered) if e.id == message), None)
        if at is None:
            continue
        before = [_said(e) for e in ordered[:at] if _said(e)]
        after = next((_said(e) for e in ordered[at + 1 :] if _said(e)), None)
        if before and after:
            found += [item for item in asked_for(before[-1], after) if item not in found]
    return found


def _said(event: Event) -> str | None:
    if event.kind is not EventKind.LLM_CALL or not isinstance(event.action, MessageAction):
        return None
    content = (event.action.content or "").strip()
    return content or None


def _verdict(row, rewards: list[Reward], corrected: bool) -> tuple[bool | None, float | None]:
    """(succeeded, reward in [0, 1]) from the effective reward, else the outcome status,
    else a failure when users corrected it."""
    reward = effective_reward(rewards)
    if reward is not None:
        value = min(max(reward.value, 0.0), 1.0)
        return value >= 0.5, value
    if row.outcome_status in _SUCCESS:
        return True, None
    if row.outcome_status in _FAILURE or corrected:
        return False, None
    return None, None
